//! Ranges followed by scans of the page tables rather than by the space's userfaultfd: private
//! anonymous memory that may get transparent huge pages, which registration would take away
//! (docs/kernel-facts.md). Nothing of them is registered; their pages are found by
//! `PAGEMAP_SCAN` before a syscall releases any of them, at every check, at the space's last exit
//! stop, and on a timer while they change (docs/ordering.md, "ranges followed by scans").

use std::ops::Range;
use std::time::{Duration, Instant};

use rangemap::RangeSet;

use super::Tracer;
use crate::event::{Event, FoundBy, SpaceId};
use crate::kernel::procfs;
use crate::kernel::syscall::LayoutSyscall;
use crate::kernel::thp::ThpPolicy;

/// The shortest time between two timed scans of a space, while its pages keep coming.
pub(super) const QUICKEST: Duration = Duration::from_millis(10);
/// The longest, while nothing changes.
const SLOWEST: Duration = Duration::from_secs(1);
/// A timed scan may take at most this share of the tracer's time: the next one waits this many
/// times as long as the last one took.
const COST_FACTOR: u32 = 50;

/// Which threads of a space may run while it is scanned.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Running {
    /// Every thread is stopped, and none is inside a layout syscall that ran (at a check, every
    /// begun syscall waits at its entry; at the last exit stop, nothing is left running).
    None,
    /// Other threads may be running, inside their layout syscalls too.
    Others,
}

/// A space's ranges followed by scans.
#[derive(Debug)]
pub(super) struct Scans {
    /// The ranges followed by scans: whole mappings, never registered.
    pub(super) followed: RangeSet<u64>,
    /// Their pages already written as resident.
    seen: RangeSet<u64>,
    due: Instant,
    interval: Duration,
}

impl Scans {
    /// A fork child's: its mappings are its parent's, with the same advice.
    pub(super) fn new(followed: RangeSet<u64>) -> Self {
        Self {
            followed,
            seen: RangeSet::new(),
            due: Instant::now() + QUICKEST,
            interval: QUICKEST,
        }
    }

    /// The pages of `range` are as a `map` line described them: those of `present`.
    pub(super) fn described(&mut self, range: Range<u64>, present: &[Range<u64>]) {
        self.seen.remove(range.clone());
        for p in present {
            let clip = p.start.max(range.start)..p.end.min(range.end);
            if !clip.is_empty() {
                self.seen.insert(clip);
            }
        }
        self.soon();
    }

    /// `range` is no longer mapped (or no longer followed).
    pub(super) fn forget(&mut self, range: Range<u64>) {
        if !range.is_empty() {
            self.followed.remove(range.clone());
            self.seen.remove(range);
        }
    }

    /// A discard dropped every page of `range` absent at its exit.
    pub(super) fn discarded(&mut self, range: Range<u64>, present_at_exit: &[Range<u64>]) {
        for (run, present) in procfs::split_by_presence(range, present_at_exit) {
            if !present {
                self.seen.remove(run);
            }
        }
    }

    /// An mremap moved `old` to `new` (DONTUNMAP: leaving `old` mapped and empty); the part of
    /// `new` beyond the old length, if any, is the same mapping grown.
    pub(super) fn moved(&mut self, old: Range<u64>, new: Range<u64>, dontunmap: bool) {
        let followed: Vec<Range<u64>> = self.followed.overlapping(&old).cloned().collect();
        if followed.is_empty() {
            // Whatever was mapped where it went is gone (MREMAP_FIXED); in place, it grew into
            // free space.
            if new.start != old.start {
                self.forget(new);
            }
            return;
        }
        let seen: Vec<Range<u64>> = self.seen.overlapping(&old).cloned().collect();
        let shift = |r: &Range<u64>| {
            let s = r.start.max(old.start);
            let e = r.end.min(old.end).min(old.start + (new.end - new.start));
            (s < e).then(|| new.start + (s - old.start)..new.start + (e - old.start))
        };
        let tail_followed = followed.iter().any(|r| r.contains(&(old.end - 1)));
        if dontunmap {
            self.seen.remove(old.clone());
        } else {
            self.forget(old.clone());
        }
        self.forget(new.clone());
        for r in followed.iter().filter_map(shift) {
            self.followed.insert(r);
        }
        for r in seen.iter().filter_map(shift) {
            self.seen.insert(r);
        }
        let grown = new.start + (old.end - old.start)..new.end;
        if tail_followed && !grown.is_empty() {
            self.followed.insert(grown);
        }
        self.soon();
    }

    /// Pages may be coming: the next timed scan is soon.
    fn soon(&mut self) {
        self.interval = QUICKEST;
        self.due = self.due.min(Instant::now() + QUICKEST);
    }
}

impl Tracer {
    /// Whether a private anonymous mapping is to be followed by scans: the policy lets it get
    /// huge pages, or it is (part of) a mapping already followed so (advised `MADV_HUGEPAGE`,
    /// collapsed, moved, or grown in place by `mremap`: see `Scans::moved`). A heap grown by `brk`
    /// is a new mapping without the advice: the kernel does not merge it with an advised one. A mapping that grows down (a stack) is followed by faults:
    /// its growth is only seen as a fault below it.
    pub(super) fn scans_follow(
        &self,
        space: SpaceId,
        range: &Range<u64>,
        grows_down: bool,
    ) -> bool {
        let Some(s) = self.spaces.get(&space) else {
            return false;
        };
        // A space not followed by faults is not followed at all (mappings only).
        if s.pagemap.is_none() || s.uffd.is_none() {
            return false;
        }
        s.scans.borrow().followed.overlaps(range)
            || (self.config.thp == ThpPolicy::Always && !grows_down)
    }

    /// `MADV_HUGEPAGE` or `MADV_COLLAPSE`, at its entry: the private anonymous mappings in its
    /// range are followed by scans from now on, unregistered first (the kernel could make no
    /// huge page there, and would refuse a collapse with `EBUSY`). The range, which its exit
    /// describes again, whatever it returns.
    pub(super) fn scans_instead(&self, tid: i32, call: LayoutSyscall) -> Option<Range<u64>> {
        let LayoutSyscall::Madvise {
            addr,
            len,
            huge: true,
            ..
        } = call
        else {
            return None;
        };
        let range = addr..addr.saturating_add(len);
        let (_, space) = self.space_of(tid)?;
        let s = self.spaces.get(&space)?;
        let uffd = s.uffd.as_ref()?;
        s.pagemap.as_ref()?;
        let maps = procfs::read_maps(tid).ok()?;
        let mut scans = s.scans.borrow_mut();
        for entry in maps.iter().filter(|m| m.is_private_anon()) {
            let clip = entry.start.max(range.start)..entry.end.min(range.end);
            if clip.is_empty() || scans.followed.overlaps(&clip) {
                continue;
            }
            if let Err(e) = uffd.unregister(clip.start, clip.end) {
                tracing::debug!(
                    tid,
                    ?clip,
                    "a range to have huge pages stays registered: {e}"
                );
                continue;
            }
            scans.followed.insert(clip);
        }
        Some(range)
    }

    /// Whether anything of the space is followed by scans.
    pub(super) fn has_scanned(&self, space: SpaceId) -> bool {
        self.spaces
            .get(&space)
            .is_some_and(|s| !s.scans.borrow().followed.is_empty())
    }

    /// A syscall about to release part of a range followed by scans (unmap, discard, move, map
    /// over): the pages there now are reported first, so that a page present until the release
    /// is not lost. Read while its thread is stopped at the syscall's entry.
    pub(super) fn scan_before(&self, tid: i32, call: &LayoutSyscall) {
        let releases = matches!(
            call,
            LayoutSyscall::Munmap { .. }
                | LayoutSyscall::Mremap { .. }
                | LayoutSyscall::Brk { .. }
                | LayoutSyscall::Madvise {
                    discard: Some(_),
                    ..
                }
                | LayoutSyscall::Mmap { .. }
        );
        let Some((pid, space)) = self.space_of(tid) else {
            return;
        };
        if !releases || !self.has_scanned(space) {
            return;
        }
        let mut reach: RangeSet<u64> = call.reach().into_iter().collect();
        if let LayoutSyscall::Brk { addr } = *call
            && let Some(s) = self.spaces.get(&space)
            && addr != 0
            && addr < s.brk
        {
            reach.insert(self.page_align(addr)..self.page_align(s.brk));
        }
        self.scan(pid, space, &reach, Running::Others);
    }

    /// Reads every range of `space` followed by scans, at a point where its threads are all
    /// stopped (a check, its last exit stop): the stream is then exact there.
    pub(super) fn scan_whole(&self, pid: i32, space: SpaceId) {
        if !self.has_scanned(space) {
            return;
        }
        let all: RangeSet<u64> = std::iter::once(0..super::USER_SPACE_END).collect();
        self.scan(pid, space, &all, Running::None);
    }

    /// Timed scans of the spaces that are due.
    pub(super) fn scan_if_due(&mut self) {
        let now = Instant::now();
        let due: Vec<SpaceId> = self
            .spaces
            .iter()
            .filter(|(_, s)| {
                let scans = s.scans.borrow();
                !scans.followed.is_empty() && scans.due <= now
            })
            .map(|(&id, _)| id)
            .collect();
        for space in due {
            let Some(pid) = self.threads_in(space).map(|(_, t)| t.pid).min() else {
                continue;
            };
            let began = Instant::now();
            let all: RangeSet<u64> = std::iter::once(0..super::USER_SPACE_END).collect();
            let found = self.scan(pid, space, &all, Running::Others);
            let took = began.elapsed();
            if let Some(s) = self.spaces.get(&space) {
                let mut scans = s.scans.borrow_mut();
                scans.interval = if found {
                    QUICKEST
                } else {
                    (scans.interval * 2).min(SLOWEST)
                };
                scans.interval = scans.interval.max(took * COST_FACTOR);
                scans.due = Instant::now() + scans.interval;
            }
        }
    }

    /// Reads the pages of `within` followed by scans and writes a `resident` line for each run
    /// not written yet; while other threads run, less what a begun syscall of theirs may be
    /// changing (a page of a mapping placed there is not the old mapping's, and the syscall's
    /// report comes after this). Whether it found any.
    fn scan(&self, pid: i32, space: SpaceId, within: &RangeSet<u64>, running: Running) -> bool {
        let Some(s) = self.spaces.get(&space) else {
            return false;
        };
        let Some(pagemap) = s.pagemap.as_ref() else {
            return false;
        };
        let mut ranges: RangeSet<u64> = RangeSet::new();
        {
            let scans = s.scans.borrow();
            for w in within.iter() {
                for f in scans.followed.overlapping(w) {
                    ranges.insert(f.start.max(w.start)..f.end.min(w.end));
                }
            }
        }
        if running == Running::Others {
            for (_, t) in self.threads_in(space) {
                for r in t.entry.iter().flat_map(|call| call.reach()) {
                    ranges.remove(r);
                }
            }
        }
        let mut found = false;
        for range in ranges.iter() {
            let runs = match pagemap.populated(range.clone()) {
                Ok(runs) => runs,
                Err(e) => {
                    // The space is going (ESRCH), or the read failed: the next scan tries
                    // again, and a check reads the kernel's side itself.
                    tracing::debug!(space, ?range, "a scan failed: {e}");
                    continue;
                }
            };
            for run in runs {
                let new: Vec<Range<u64>> = {
                    let mut scans = s.scans.borrow_mut();
                    let mut new: RangeSet<u64> = std::iter::once(run.range.clone()).collect();
                    for seen in scans.seen.overlapping(&run.range) {
                        new.remove(seen.clone());
                    }
                    scans.seen.insert(run.range.clone());
                    new.into_iter().collect()
                };
                for r in new {
                    found = true;
                    s.lane.observed(Event::Resident {
                        pid,
                        tid: None,
                        space,
                        start: r.start,
                        end: r.end,
                        write: !run.zero,
                        faults: 0,
                        writer: None,
                        by: Some(FoundBy::Scan),
                        huge: run.huge,
                    });
                }
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;

    /// Page numbers to a set of address ranges.
    fn set(pages: &[(u64, u64)]) -> RangeSet<u64> {
        pages.iter().map(|&(s, e)| s * P..e * P).collect()
    }

    #[test]
    fn a_move_takes_the_advice_and_the_pages_seen_along() {
        let mut scans = Scans::new(set(&[(0x10, 0x20)]));
        scans.described(
            0x10 * P..0x20 * P,
            &[0x11 * P..0x12 * P, 0x1f * P..0x20 * P],
        );
        // Moved and grown by 8 pages: the tail is the same mapping, with no page seen.
        scans.moved(0x10 * P..0x20 * P, 0x40 * P..0x58 * P, false);
        assert_eq!(scans.followed, set(&[(0x40, 0x58)]));
        assert_eq!(scans.seen, set(&[(0x41, 0x42), (0x4f, 0x50)]));
    }

    #[test]
    fn a_move_of_part_of_a_range_leaves_the_rest() {
        let mut scans = Scans::new(set(&[(0x10, 0x20)]));
        scans.described(0x10 * P..0x20 * P, &Vec::from_iter(set(&[(0x10, 0x20)])));
        // The first 4 pages moved, shrunk to 2; DONTUNMAP would leave them mapped but empty.
        scans.moved(0x10 * P..0x14 * P, 0x40 * P..0x42 * P, true);
        assert_eq!(scans.followed, set(&[(0x10, 0x20), (0x40, 0x42)]));
        assert_eq!(scans.seen, set(&[(0x14, 0x20), (0x40, 0x42)]));
    }

    #[test]
    fn a_move_of_a_range_followed_by_faults_changes_nothing() {
        let mut scans = Scans::new(set(&[(0x10, 0x20)]));
        scans.moved(0x30 * P..0x34 * P, 0x10 * P..0x14 * P, false);
        // The destination was mapped over: not followed by scans any more.
        assert_eq!(scans.followed, set(&[(0x14, 0x20)]));
    }

    #[test]
    fn a_discard_forgets_only_the_pages_absent_at_its_exit() {
        let mut scans = Scans::new(set(&[(0x10, 0x20)]));
        scans.described(0x10 * P..0x20 * P, &Vec::from_iter(set(&[(0x10, 0x20)])));
        // Another thread touched 0x12 again before the exit: still there, still seen.
        scans.discarded(0x10 * P..0x14 * P, &Vec::from_iter(set(&[(0x12, 0x13)])));
        assert_eq!(scans.seen, set(&[(0x12, 0x13), (0x14, 0x20)]));
    }
}
