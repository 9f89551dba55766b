//! Ranges followed by scans of the page tables rather than by the space's userfaultfd: private
//! anonymous memory that may get transparent huge pages, which registration would take away
//! (docs/kernel-facts.md). Nothing of them is registered; their pages are found by
//! `PAGEMAP_SCAN` before a syscall releases any of them, at every check, at the space's last exit
//! stop, and on a timer while they change (docs/ordering.md, "ranges followed by scans").

use std::ops::Range;
use std::time::Instant;

use rangemap::RangeSet;

use super::shadow::{Marks, Shadow};
use super::unread::Unread;
use super::{COST_FACTOR, Tracer, next_read};
use crate::event::{Event, FoundBy, SpaceId};
use crate::kernel::procfs;
use crate::kernel::syscall::{HugeAdvice, LayoutSyscall};
use crate::kernel::thp::{HUGE_PAGE, ThpPolicy};
use crate::kernel::tick;

/// Pieces of one followed range that a timed scan reads, separated by fewer seen pages than
/// this, are read as one: a `PAGEMAP_SCAN` call costs about as much as walking that many
/// present pages again.
const JOIN_GAP: u64 = 1 << 20;

/// The whole user address space, as a set.
pub(super) fn everywhere() -> RangeSet<u64> {
    std::iter::once(0..super::USER_SPACE_END).collect()
}

/// Which threads of a space may run while it is scanned.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Running {
    /// Every thread is stopped, and none is inside a layout syscall that ran (at a check, every
    /// begun syscall waits at its entry; at the last exit stop, nothing is left running).
    AllStopped,
    /// Other threads may be running, inside their layout syscalls too.
    OthersMayRun,
}

/// When a space's ranges followed by scans are read next, and what the scans found (the ranges
/// and their pages are in the space's shadow: shadow.rs).
#[derive(Debug)]
pub(super) struct Scans {
    /// When the next timed scan is due.
    due: Instant,
    /// Faults the scans found, a huge page counting as one (unseen.rs).
    pub(super) found: u64,
    /// Minor faults of the processes that left the space by an exec, made while in it.
    pub(super) faults_gone: u64,
}

impl Scans {
    /// A space's, whose first timed scan is due at `first_due`.
    pub(super) fn new(first_due: Instant) -> Self {
        Self {
            due: first_due,
            found: 0,
            faults_gone: 0,
        }
    }
}

/// What a timed scan reads: what is followed and not seen yet, in pieces joined across small
/// gaps. A page seen leaves through a syscall stopped at, whose report says so, or unseen by us
/// (reclaim, io_uring, `int $0x80`): then it stays resident in the stream, and a check says the
/// stream and the kernel differ there.
fn not_seen(shadow: &Shadow) -> RangeSet<u64> {
    let mut pieces: Vec<Range<u64>> = Vec::new();
    for gap in shadow.unseen().iter().cloned() {
        match pieces.last_mut() {
            Some(last) if gap.start - last.end < JOIN_GAP => last.end = gap.end,
            _ => pieces.push(gap),
        }
    }
    pieces.into_iter().collect()
}

impl Tracer {
    /// Whether a private anonymous mapping is to be followed by scans: the policy lets it get
    /// huge pages, or it is (part of) a mapping already followed so (advised `MADV_HUGEPAGE`,
    /// collapsed, moved, or grown in place by `mremap`: see `Shadow::moved`). A heap grown by `brk`
    /// is a new mapping without the advice, which the kernel does not merge with an advised one
    /// (a collapsed one it does: `merged_into_scanned`). A mapping that grows down (a stack) is
    /// followed by faults: its growth is only seen as a fault below it. Under `--faults scan`,
    /// every one is (stacks too: `find_stack_growth`).
    pub(super) fn scans_follow(
        &self,
        space: SpaceId,
        range: &Range<u64>,
        grows_down: bool,
    ) -> bool {
        let Some(s) = self.spaces.get(&space) else {
            return false;
        };
        if !s.follows_pages() {
            return false;
        }
        let stack = grows_down || s.shadow.overlaps(Marks::STACK, range);
        if s.scans_only() {
            // A stack's growth is found by asking for the mapping below it.
            return !stack || s.vmas.is_some();
        }
        !stack && (s.shadow.overlaps(Marks::SCANNED, range) || self.config.thp == ThpPolicy::Always)
    }

    /// `MADV_HUGEPAGE` (where the policy lets it matter) or `MADV_COLLAPSE`, at its entry: the
    /// private anonymous mappings in its range are followed by scans from now on. They are
    /// unregistered (the kernel could make no huge page there, and would refuse a collapse with
    /// `EBUSY`) and described again at once, so that the stream and the pages it is known to
    /// have there start equal. Not a stack, whose growth only a fault below it shows.
    /// `MADV_HUGEPAGE` splits the mappings at the range's ends itself; a collapse changes no
    /// flag, so the mappings it touches are followed whole (a split the program would not have
    /// made could fail a later `mremap` of several mappings).
    pub(super) fn scans_instead(&mut self, tid: i32, call: LayoutSyscall) {
        let LayoutSyscall::Madvise {
            addr,
            len,
            huge: Some(advice),
            ..
        } = call
        else {
            return;
        };
        if advice == HugeAdvice::Advise && self.config.thp == ThpPolicy::Never {
            return;
        }
        let range = addr..addr.saturating_add(len);
        let Some((_, space)) = self.space_of(tid) else {
            return;
        };
        if advice == HugeAdvice::Advise {
            self.note_huge_advice(space, range.clone());
        }
        let sample = self.config.sample;
        let Some(s) = self.spaces.get_mut(&space) else {
            return;
        };
        // A handle of its own: the shadow is marked below while the uffd is in use.
        let (Some(uffd), Some(_)) = (s.uffd().cloned(), s.pagemap.as_ref()) else {
            return;
        };
        // Advised again (common under `always`): nothing to read.
        if s.shadow.covers(Marks::SCANNED, &range) {
            return;
        }
        let Ok(maps) = procfs::read_maps(tid) else {
            return;
        };
        let mut converted = RangeSet::new();
        {
            for entry in maps.iter().filter(|m| m.is_private_anon()) {
                let whole = entry.start..entry.end;
                if whole.end <= range.start || range.end <= whole.start {
                    continue;
                }
                let part = match advice {
                    HugeAdvice::Advise => whole.start.max(range.start)..whole.end.min(range.end),
                    HugeAdvice::Collapse => whole.clone(),
                };
                let stack = entry.path == "[stack]" || s.shadow.overlaps(Marks::STACK, &whole);
                if part.is_empty() || stack || s.shadow.overlaps(Marks::SCANNED, &part) {
                    continue;
                }
                // Only what the stream tracks: a mapping the selection left out stays so.
                if !s.shadow.covers(Marks::TRACKED, &part) {
                    continue;
                }
                if let Err(e) = uffd.unregister(part.start, part.end) {
                    tracing::debug!(
                        tid,
                        ?part,
                        "a range to have huge pages stays registered: {e}"
                    );
                    continue;
                }
                s.shadow.add(part.clone(), Marks::SCANNED);
                self.control.hasten_tick(sample);
                converted.insert(part);
            }
        }
        if !converted.is_empty() {
            self.describe_again(tid, space, converted);
        }
    }

    /// Whether a new range (an `mmap`'s, a heap's growth) was merged by the kernel into a
    /// mapping beside it that is followed by scans: a collapsed one sets no flag, so a mapping
    /// placed beside it joins it, and registering the new part would split what the program
    /// sees as one mapping (a later `mremap` over it would fail with `EFAULT`). Read only when
    /// such a mapping is beside it.
    pub(super) fn merged_into_scanned(&self, space: SpaceId, pid: i32, range: &Range<u64>) -> bool {
        let Some(s) = self.spaces.get(&space) else {
            return false;
        };
        let beside = s
            .shadow
            .contains(Marks::SCANNED, range.start.saturating_sub(1))
            || s.shadow.contains(Marks::SCANNED, range.end);
        if !beside {
            return false;
        }
        let Ok(maps) = procfs::read_maps(pid) else {
            return false;
        };
        maps.iter()
            .find(|m| m.start <= range.start && range.start < m.end)
            .is_some_and(|m| {
                let whole = m.start..m.end;
                whole != *range && s.shadow.overlaps(Marks::SCANNED, &whole)
            })
    }

    /// Whether anything of the space is followed by scans.
    pub(super) fn has_scanned(&self, space: SpaceId) -> bool {
        self.spaces
            .get(&space)
            .is_some_and(|s| s.shadow.any(Marks::SCANNED))
    }

    /// A syscall about to release part of a range followed by scans (unmap, discard, move, map
    /// over): the pages there now are reported first, so that a page present until the release
    /// is not lost. Read while its thread is stopped at the syscall's entry; under `--faults
    /// records`, what the read found absent where a fault would make a page (unread.rs).
    pub(super) fn scan_before(&mut self, tid: i32, call: &LayoutSyscall) -> Option<Unread> {
        let (pid, space) = self.space_of(tid)?;
        let changes = self.may_change(space, call);
        if changes.is_empty() || !self.has_scanned(space) {
            return None;
        }
        // It may unmap, discard or move part of a stack's growth not written yet.
        self.find_stack_growth(pid, space);
        self.scan(pid, space, &changes, Running::OthersMayRun);
        self.unread_at_entry(space, call, changes)
    }

    /// An `execve` about to run: if it succeeds, the space's mm is gone by its first stop after,
    /// with the pages touched since the last scan. They are read now (those the space's other
    /// threads touch until the exec kills them are not: `unseen` counts them).
    pub(super) fn scan_before_exec(&mut self, tid: i32) {
        if let Some((pid, space)) = self.space_of(tid)
            && self.has_scanned(space)
        {
            self.find_stack_growth(pid, space);
            self.scan(pid, space, &everywhere(), Running::OthersMayRun);
        }
    }

    /// What the begun layout syscalls of a space may be changing: their reports decide there.
    /// An `MADV_FREE` too: it drops the range's pages in swap as it runs, which a look between
    /// its entry and its report would take for pages gone by themselves.
    pub(super) fn begun_may_change(&self, space: SpaceId) -> RangeSet<u64> {
        let mut changes = RangeSet::new();
        for call in self
            .threads_in(space)
            .filter_map(|(_, t)| t.syscalls.layout_call())
        {
            changes.extend(self.may_change(space, &call));
            let page = self.config.lane.page_size;
            changes.extend(
                call.frees_lazily()
                    .map(|r| crate::kernel::whole_pages(r, page))
                    .filter(|r| !r.is_empty()),
            );
        }
        changes
    }

    /// Where a layout syscall may drop or replace pages or mappings, from its arguments: its
    /// reach, and the heap a shrinking `brk` releases.
    fn may_change(&self, space: SpaceId, call: &LayoutSyscall) -> RangeSet<u64> {
        let page = self.config.lane.page_size;
        let mut changes: RangeSet<u64> = call
            .reach()
            .into_iter()
            .map(|r| crate::kernel::whole_pages(r, page))
            .filter(|r| !r.is_empty())
            .collect();
        if let LayoutSyscall::Brk { .. } = call
            && let Some(s) = self.spaces.get(&space)
            && let Some(released) = call.released(s.brk, self.config.lane.page_size)
        {
            changes.insert(released);
        }
        changes
    }

    /// Reads every range of `space` followed by scans, and every tracked page for what left
    /// memory or came back (pressure.rs), at a point where its threads are all stopped (a
    /// check, its last exit stop): the stream is then exact there.
    pub(super) fn scan_whole(&mut self, pid: i32, space: SpaceId) {
        // Before a check, also the growth of stacks the selection left out.
        self.find_stack_growth(pid, space);
        if self.has_scanned(space) {
            self.scan(pid, space, &everywhere(), Running::AllStopped);
        }
        self.look_for_evictions_whole(pid, space);
    }

    /// At a fork: the pages of the parent followed by scans and not seen yet are read, so that
    /// its `fork` line comes after them, as it does after the faults of a space followed by
    /// faults. The child's copies are then the parent's pages the stream has (the tree counts
    /// the frames they share once: docs/schema.md, "The tree's figure").
    pub(super) fn scan_at_fork(&mut self, pid: i32, space: SpaceId) {
        if self.has_scanned(space) {
            self.scan(pid, space, &everywhere(), Running::OthersMayRun);
        }
    }

    /// At a thread's exit stop: if no other thread of its space can run user code any more, the
    /// ranges followed by scans are read for the last time (the mm is still whole here). Its
    /// io_uring workers may still run (checkpoints.rs): what they touch after this is not seen,
    /// unless `--verify` checks the space once they are gone.
    /// `faults_now`: its process's count of faults, read at this stop (unseen.rs).
    pub(super) fn scan_at_exit(&mut self, tid: i32, faults_now: Option<u64>) {
        if let Some((pid, space)) = self.space_of(tid)
            && self.space_is_quiescent(space)
        {
            self.scan_whole(pid, space);
            // What the space copied on write before the last timed read, while its memory is
            // whole (shared.rs).
            self.look_for_unshared(pid, space);
            self.write_unseen(pid, space, faults_now);
        }
    }

    /// Timed scans of the spaces that are due, every `--sample-ms`: what each has not seen yet.
    /// A space whose scan takes long is read less often (`COST_FACTOR`), and a tick that has
    /// used its share leaves the rest due at the next.
    pub(super) fn scan_if_due(&mut self) {
        let now = Instant::now();
        let mut due: Vec<(Instant, SpaceId)> = self
            .spaces
            .iter()
            .filter_map(|(&id, s)| {
                let sampled = s.shadow.any(Marks::SCANNED) || s.sampled().is_some();
                (sampled && s.scans.due <= now).then_some((s.scans.due, id))
            })
            .collect();
        // The longest waiting first.
        due.sort_unstable();
        let budget = self.config.sample / COST_FACTOR;
        for (_, space) in due {
            if now.elapsed() > budget {
                break;
            }
            let Some(pid) = self.threads_in(space).map(|(_, t)| t.pid).min() else {
                continue;
            };
            let began = tick::thread_cpu_time();
            // An attached space's layout (its stacks' growth too) and drops are only seen so:
            // it is read whole.
            self.sample_layout(pid, space);
            self.find_stack_growth(pid, space);
            let within = match self.spaces.get(&space) {
                Some(s) if s.sampled().is_some() => everywhere(),
                Some(s) => not_seen(&s.shadow),
                None => continue,
            };
            self.scan(pid, space, &within, Running::OthersMayRun);
            let took = tick::thread_cpu_time().saturating_sub(began);
            let next = next_read(self.config.sample, took);
            if let Some(s) = self.spaces.get_mut(&space) {
                s.scans.due = next;
            }
        }
    }

    /// Reads the pages of `within` followed by scans and writes a `resident` line for each run
    /// not written yet; while other threads run, less what a begun syscall of theirs may be
    /// changing (a page of a mapping placed there is not the old mapping's, and the syscall's
    /// report comes after this). In a space whose syscalls are not stopped at (`attach`), pages
    /// written and now gone are written as a `discard` too.
    fn scan(&mut self, pid: i32, space: SpaceId, within: &RangeSet<u64>, running: Running) {
        let Some(s) = self.spaces.get(&space) else {
            return;
        };
        let Some(pagemap) = s.pagemap.clone() else {
            return;
        };
        let mut ranges = s.shadow.within_set(Marks::SCANNED, within);
        if running == Running::OthersMayRun {
            for r in self.begun_may_change(space).iter() {
                ranges.remove(r.clone());
            }
        }
        let page = self.config.lane.page_size;
        let ranges: Vec<Range<u64>> = ranges.into_iter().collect();
        for (range, (_, runs)) in ranges.iter().zip(pagemap.populated_each(&ranges)) {
            let runs = match runs {
                Ok(runs) => runs,
                Err(e) => {
                    // The space is going (ESRCH), or the read failed: the next scan tries
                    // again, and a check reads the kernel's side itself.
                    tracing::debug!(space, ?range, "a scan failed: {e}");
                    continue;
                }
            };
            if self
                .spaces
                .get(&space)
                .is_some_and(|s| s.sampled().is_some())
            {
                self.write_gone(pid, space, range.clone(), &runs);
            }
            let Some(s) = self.spaces.get_mut(&space) else {
                return;
            };
            for run in runs {
                let mut new: RangeSet<u64> = std::iter::once(run.range.clone()).collect();
                for seen in s.shadow.within(Marks::SEEN, &run.range) {
                    new.remove(seen);
                }
                // The pages seen in the huge frames of the run, before it.
                let frames = run.range.start / HUGE_PAGE * HUGE_PAGE
                    ..run.range.end.div_ceil(HUGE_PAGE) * HUGE_PAGE;
                let seen_before: RangeSet<u64> = match run.huge {
                    true => s.shadow.within(Marks::SEEN, &frames).into_iter().collect(),
                    false => RangeSet::new(),
                };
                s.scans.found += faults_found(&new, &seen_before, run.huge, page);
                s.shadow.add(run.range.clone(), Marks::SEEN);
                for r in new.iter() {
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
                        site: None,
                        sampled: 0,
                        from: None,
                        withheld: false,
                    });
                }
            }
        }
    }
}

/// The faults that made `new` present (pages no scan had seen; `seen` as it was before): a
/// page each, or for huge pages one per 2 MiB frame of which no page was seen before (a fault
/// maps a huge page whole; a frame partly seen was filled by a collapse, not a fault).
pub(super) fn faults_found(
    new: &RangeSet<u64>,
    seen: &RangeSet<u64>,
    huge: bool,
    page: u64,
) -> u64 {
    if !huge {
        return new.iter().map(|r| (r.end - r.start) / page).sum();
    }
    let frames: std::collections::BTreeSet<u64> = new
        .iter()
        .flat_map(|r| r.start / HUGE_PAGE..r.end.div_ceil(HUGE_PAGE))
        .collect();
    frames
        .into_iter()
        .filter(|f| !seen.overlaps(&(f * HUGE_PAGE..(f + 1) * HUGE_PAGE)))
        .count() as u64
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
    fn a_timed_scan_reads_what_is_unseen_joined_across_small_gaps() {
        let mut shadow = Shadow::default();
        for r in set(&[(0x10, 0x20), (0x1000, 0x1010)]).iter() {
            shadow.add(r.clone(), Marks::SCANNED);
        }
        shadow.scanned_as(0x10 * P..0x20 * P, &Vec::from_iter(set(&[(0x12, 0x14)])));
        // 0x10-0x12 and 0x14-0x20 are one piece (a gap of 2 pages); 0x1000 is 16 MiB further.
        assert_eq!(not_seen(&shadow), set(&[(0x10, 0x20), (0x1000, 0x1010)]));
        shadow.scanned_as(
            0x1000 * P..0x1010 * P,
            &Vec::from_iter(set(&[(0x1000, 0x1010)])),
        );
        assert_eq!(not_seen(&shadow), set(&[(0x10, 0x20)]));
    }

    #[test]
    fn a_huge_page_is_one_fault_unless_part_of_it_was_seen() {
        let huge = 512;
        // Two whole huge pages, newly found: two faults; as small pages, 1024.
        let new = set(&[(0, 2 * huge)]);
        assert_eq!(faults_found(&new, &RangeSet::new(), true, P), 2);
        assert_eq!(faults_found(&new, &RangeSet::new(), false, P), 1024);
        // The second frame had a page seen already: filled by a collapse, no fault.
        let seen = set(&[(huge + 3, huge + 4)]);
        assert_eq!(faults_found(&new, &seen, true, P), 1);
    }
}
