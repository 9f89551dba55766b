//! Where a guard marker may be (docs/ordering.md, R4): `UFFDIO_COPY` onto a guard region's
//! marker succeeds and replaces it with a page, so a write fault raised before another
//! thread's `MADV_GUARD_INSTALL` and resolved after it would take the guard page. Before a
//! write fill in these ranges the lane reads the page's entry. Pure bookkeeping: no I/O,
//! nothing async.

use std::collections::HashMap;
use std::ops::Range;

use rangemap::RangeMap;

use crate::kernel::syscall::LayoutSyscall;

/// The ranges guard installs were begun over and not taken away since, each with the number
/// of the last install that covered it.
#[derive(Debug, Default)]
pub(super) struct Guards {
    /// Each page with the number of the last install begun over it.
    guarded: RangeMap<u64, u64>,
    /// The number given to the last install begun.
    last: u64,
    /// Installs under way (begun, not ended): their thread and number.
    installing: HashMap<i32, u64>,
    /// Removes under way: their thread, range, and the last install that had ended before the
    /// remove began, with every one before it (the markers the remove takes away).
    removing: HashMap<i32, (Range<u64>, u64)>,
}

impl Guards {
    /// `tid` entered a layout syscall (before it runs: the tracer waits for the lane to take
    /// in an install before letting it run, R4).
    pub(super) fn begin(&mut self, tid: i32, call: &LayoutSyscall) {
        if let Some(range) = call.drops_unannounced() {
            self.last += 1;
            self.guarded.insert(range, self.last);
            self.installing.insert(tid, self.last);
        } else if let Some(range) = call.unguards() {
            // Installs still under way may put markers down after this remove has run.
            let before = self
                .installing
                .values()
                .min()
                .map_or(self.last, |&first| first - 1);
            self.removing.insert(tid, (range, before));
        }
    }

    /// `tid`'s syscall has been reported (or `tid` is gone). A remove has run: the pages of its
    /// range whose every install ended before it began hold no marker any more.
    pub(super) fn end(&mut self, tid: i32) {
        self.installing.remove(&tid);
        let Some((range, before)) = self.removing.remove(&tid) else {
            return;
        };
        let gone: Vec<Range<u64>> = self
            .guarded
            .overlapping(&range)
            .filter(|&(_, &install)| install <= before)
            .map(|(r, _)| r.start.max(range.start)..r.end.min(range.end))
            .collect();
        for r in gone {
            self.guarded.remove(r);
        }
    }

    /// Whether `page` may hold a guard marker: a fill there must look first. Costs a lookup in
    /// an empty map for a space that never made a guard region.
    pub(super) fn may_hold_marker(&self, page: u64) -> bool {
        !self.guarded.is_empty() && self.guarded.contains_key(&page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;

    fn madvise(addr: u64, pages: u64, advice: u64) -> LayoutSyscall {
        LayoutSyscall::decode(libc::SYS_madvise, [addr, pages * P, advice, 0, 0, 0], P)
    }

    const INSTALL: u64 = 102;
    const REMOVE: u64 = 103;

    #[test]
    fn an_install_guards_its_range_until_a_remove_has_run() {
        let mut g = Guards::default();
        assert!(!g.may_hold_marker(0x10000));
        g.begin(1, &madvise(0x10000, 4, INSTALL));
        assert!(g.may_hold_marker(0x10000) && g.may_hold_marker(0x13000));
        assert!(!g.may_hold_marker(0x14000));
        g.end(1);
        assert!(g.may_hold_marker(0x13000));
        // Other advice changes nothing.
        g.begin(1, &madvise(0x10000, 4, libc::MADV_DONTNEED as u64));
        g.end(1);
        assert!(g.may_hold_marker(0x10000));
        // A remove of part: until it has run, the markers are there.
        g.begin(1, &madvise(0x11000, 2, REMOVE));
        assert!(g.may_hold_marker(0x11000));
        g.end(1);
        assert!(g.may_hold_marker(0x10000) && g.may_hold_marker(0x13000));
        assert!(!g.may_hold_marker(0x11000) && !g.may_hold_marker(0x12000));
    }

    #[test]
    fn a_remove_leaves_the_markers_of_installs_not_ended_when_it_began() {
        let mut g = Guards::default();
        g.begin(1, &madvise(0x10000, 4, INSTALL));
        // Thread 2 removes while 1 installs: 1 may zap after the remove ran.
        g.begin(2, &madvise(0x10000, 4, REMOVE));
        g.end(1);
        g.end(2);
        assert!(g.may_hold_marker(0x10000));
        // An install begun after the remove began, over part of it.
        g.begin(2, &madvise(0x10000, 4, REMOVE));
        g.begin(1, &madvise(0x12000, 1, INSTALL));
        g.end(1);
        g.end(2);
        assert!(!g.may_hold_marker(0x11000) && !g.may_hold_marker(0x13000));
        assert!(g.may_hold_marker(0x12000));
        // A remove begun once every install has ended takes them all.
        g.begin(3, &madvise(0x10000, 4, REMOVE));
        g.end(3);
        assert!(!g.may_hold_marker(0x12000));
        assert!(g.guarded.is_empty());
    }
}
