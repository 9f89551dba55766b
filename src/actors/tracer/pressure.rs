//! Memory under pressure: pages the stream has resident that leave memory with no release by the
//! program (written to swap, or reclaimed after `MADV_FREE`), and swapped pages that come back.
//! Neither raises a userfaultfd fault or stops a syscall; both show in the page tables, which
//! are read over what the stream tracks (docs/ordering.md, "memory under pressure"):
//! - at a sample tick, where the kernel says something may have happened (the space's processes
//!   have swap, the stream has pages in swap, or the machine reclaimed `MADV_FREE`d pages since
//!   the last look), spaced by what the reads cost;
//! - at the exit of a `MADV_PAGEOUT` (what it swapped out);
//! - at each check and last exit stop, whatever the kernel says: the stream is exact there.

use std::ops::Range;
use std::time::Instant;

use rangemap::RangeSet;

use super::scans::{Running, everywhere};
use super::{COST_FACTOR, Tracer};
use crate::actors::lane::{Dropped, LaneMessage, PagesAtExit};
use crate::event::{Event, EvictedHow, FoundBy, ResidentFrom, SpaceId};
use crate::kernel::procfs::{self, PopulatedRun};
use crate::kernel::tick;
use crate::kernel::vmas::Vmas;

/// What the stream says of a space's pages that the kernel can take away unasked.
#[derive(Debug, Default)]
pub(super) struct Pressure {
    /// The ranges the stream tracks (`map` and `brk` lines with `tracked` true).
    tracked: RangeSet<u64>,
    /// Private anonymous ranges `--region` or `--min-size` left out: described again, moved,
    /// grown or copied by a fork, they stay out (as `tracked` stays in).
    left_out: RangeSet<u64>,
    /// Tracked pages the stream has in swap (`evicted` lines with `how` `swap`).
    swapped: RangeSet<u64>,
    /// Tracked pages freed with `MADV_FREE`, present then and resident in the stream since: the
    /// kernel may reclaim them at any time.
    lazy: RangeSet<u64>,
    /// Tracked ranges whose pages may map a frame another process maps too: a fork's copies,
    /// until a read finds them the space's own (shared.rs). Pages made since the fork are in it
    /// too; a read finds them the space's own at once.
    pub(super) shared: RangeSet<u64>,
    /// Pages of `shared` the last timed read found of the space's own, not written yet: a timed
    /// read writes a page only when the one before found it so too (shared.rs).
    pub(super) exclusive_seen: RangeSet<u64>,
    /// When the next timed look is due.
    due: Option<Instant>,
    /// The machine's count of reclaimed `MADV_FREE`d pages at the last timed look.
    lazy_freed_at_look: Option<u64>,
}

/// The part of `r` within `range`.
fn clip(r: &Range<u64>, range: &Range<u64>) -> Range<u64> {
    r.start.max(range.start)..r.end.min(range.end)
}

/// The parts of `set` within `range`.
fn within_set(set: &RangeSet<u64>, range: &Range<u64>) -> Vec<Range<u64>> {
    set.overlapping(range).map(|r| clip(r, range)).collect()
}

impl Pressure {
    /// A fork child's: its copies are tracked, left out and freed lazily as its parent's were
    /// (its snapshot's lines then keep what is still there). What was in swap is described as
    /// resident, and found in swap again by the next look.
    pub(super) fn inheriting(parent: &Pressure) -> Self {
        Self {
            tracked: parent.tracked.clone(),
            left_out: parent.left_out.clone(),
            lazy: parent.lazy.clone(),
            shared: parent.tracked.clone(),
            ..Self::default()
        }
    }

    /// The parent's side of a fork: every page it tracks is shared with the child's copy now.
    pub(super) fn forked(&mut self) {
        self.shared = self.tracked.clone();
        self.exclusive_seen = RangeSet::new();
    }

    /// Whether the page at `addr` is in a range the selection left out.
    pub(super) fn leaves_out(&self, addr: u64) -> bool {
        self.left_out.contains(&addr)
    }

    /// What was chosen for a mapping already known, in part or whole: followed (some of it is
    /// tracked), left out, or None for a mapping new to the stream.
    pub(super) fn chosen_for(&self, mapping: &Range<u64>) -> Option<bool> {
        if self.tracked.overlaps(mapping) {
            Some(true)
        } else if self.left_out.overlaps(mapping) {
            Some(false)
        } else {
            None
        }
    }

    /// The parts of `range` the stream tracks.
    pub(super) fn tracked_within(&self, range: &Range<u64>) -> Vec<Range<u64>> {
        within_set(&self.tracked, range)
    }

    /// A line described `range` (`tracked` or not) with `present` its pages there: none in swap
    /// as far as the stream is concerned, and only those present still freed lazily.
    pub(super) fn described(&mut self, range: Range<u64>, tracked: bool, present: &[Range<u64>]) {
        if range.is_empty() {
            return;
        }
        self.swapped.remove(range.clone());
        if tracked {
            self.tracked.insert(range.clone());
            self.left_out.remove(range.clone());
            let mut gone: RangeSet<u64> = std::iter::once(range).collect();
            for p in present {
                gone.remove(p.clone());
            }
            for r in gone.iter() {
                self.lazy.remove(r.clone());
            }
        } else {
            self.tracked.remove(range.clone());
            self.shared.remove(range.clone());
            self.lazy.remove(range);
        }
    }

    /// The selection left `range` out (it is described untracked).
    pub(super) fn leave_out(&mut self, range: Range<u64>) {
        self.forget(range.clone());
        self.left_out.insert(range);
    }

    /// Part of a stack's growth, which the lane followed and wrote (`--faults uffd`).
    pub(super) fn grown(&mut self, range: Range<u64>) {
        self.tracked.insert(range);
    }

    /// `range` is no longer mapped.
    pub(super) fn forget(&mut self, range: Range<u64>) {
        if !range.is_empty() {
            self.tracked.remove(range.clone());
            self.left_out.remove(range.clone());
            self.shared.remove(range.clone());
            self.forget_pages(range);
        }
    }

    /// The pages of `range` are about to be described again: none is in swap or freed lazily
    /// as far as the stream is concerned (a look finds them again). Frames they share stay
    /// shared (the description keeps its pages).
    pub(super) fn forget_pages(&mut self, range: Range<u64>) {
        if !range.is_empty() {
            self.swapped.remove(range.clone());
            self.lazy.remove(range);
        }
    }

    /// A discard dropped every page of `range` absent at its exit, and every swap entry there
    /// (a page present at the exit is a new one).
    pub(super) fn discarded(&mut self, range: Range<u64>, populated_at_exit: &[Range<u64>]) {
        self.swapped.remove(range.clone());
        // A page there now was made after the discard: the space's own.
        self.shared.remove(range.clone());
        for (run, populated) in procfs::split_by_presence(range, populated_at_exit) {
            if !populated {
                self.lazy.remove(run);
            }
        }
    }

    /// An mremap moved `old` to `new` (DONTUNMAP: leaving `old` mapped, tracked and empty); the
    /// part of `new` beyond the old length, if any, is the mapping at the old end grown.
    pub(super) fn moved(&mut self, old: Range<u64>, new: Range<u64>, dontunmap: bool) {
        let tail = old.end.checked_sub(1).filter(|_| old.end > old.start);
        let tail_tracked = tail.is_some_and(|t| self.tracked.contains(&t));
        let tail_left_out = tail.is_some_and(|t| self.left_out.contains(&t));
        let tracked = shifted(&self.tracked, &old, &new);
        let left_out = shifted(&self.left_out, &old, &new);
        let swapped = shifted(&self.swapped, &old, &new);
        let lazy = shifted(&self.lazy, &old, &new);
        let shared = shifted(&self.shared, &old, &new);
        if dontunmap {
            self.forget_pages(old.clone());
            self.shared.remove(old.clone());
        } else {
            self.forget(old.clone());
        }
        self.forget(new.clone());
        self.tracked.extend(tracked);
        self.left_out.extend(left_out);
        self.swapped.extend(swapped);
        self.lazy.extend(lazy);
        self.shared.extend(shared);
        let grown = new.start + (old.end - old.start)..new.end;
        if new.end - new.start > old.end - old.start && !grown.is_empty() {
            if tail_tracked {
                self.tracked.insert(grown);
            } else if tail_left_out {
                self.left_out.insert(grown);
            }
        }
    }

    /// `MADV_FREE` over `range`, whose pages `present` were present at its exit (those in swap
    /// were dropped: `populated` no longer has them).
    fn freed_lazily(&mut self, range: Range<u64>, present: &[Range<u64>]) {
        for p in present {
            let tracked = within_set(&self.tracked, &clip(p, &range));
            self.lazy.extend(tracked);
        }
    }
}

/// A `resident` line `from` `swap`: pages found in memory again.
fn back_from_swap(pid: i32, space: SpaceId, r: Range<u64>) -> Event {
    Event::Resident {
        pid,
        tid: None,
        space,
        start: r.start,
        end: r.end,
        write: true,
        faults: 0,
        writer: None,
        by: Some(FoundBy::Scan),
        huge: false,
        site: None,
        sampled: 0,
        from: Some(ResidentFrom::Swap),
        withheld: false,
    }
}

/// The parts of `set` within the moved part of `old`, where they are in `new`.
fn shifted(set: &RangeSet<u64>, old: &Range<u64>, new: &Range<u64>) -> Vec<Range<u64>> {
    let moved_end = old.end.min(old.start + (new.end - new.start));
    set.overlapping(old)
        .filter_map(|r| {
            let (s, e) = (r.start.max(old.start), r.end.min(moved_end));
            (s < e).then(|| new.start + (s - old.start)..new.start + (e - old.start))
        })
        .collect()
}

/// What a look found of a run of pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Found {
    /// Written to swap.
    Swapped,
    /// Back from swap.
    Back,
    /// Freed lazily and reclaimed.
    Reclaimed,
    /// Neither in swap nor present any more, with no release seen (another ABI's syscall,
    /// `process_madvise`): gone, as a discard.
    Gone,
}

impl Tracer {
    /// `MADV_FREE` returned: its pages present now may be reclaimed from here on, and those it
    /// found in swap it dropped (written as a `discard`, `advice` `free`).
    pub(super) fn on_lazy_free(&self, pid: i32, tid: i32, space: SpaceId, range: Range<u64>) {
        let Some(s) = self.spaces.get(&space) else {
            return;
        };
        let Some(pagemap) = s.pagemap.as_ref().filter(|_| s.follows_pages()) else {
            return;
        };
        let read_at = Instant::now();
        // Nothing of the stream is claimed from it, so a failed read needs no warning: the
        // pages are simply not known to be freed lazily.
        let populated = match pagemap.populated_runs(range.clone()) {
            Ok(runs) => runs,
            Err(e) => {
                tracing::debug!(space, ?range, "reading pages freed lazily: {e}");
                return;
            }
        };
        let was_in_swap = {
            let mut p = s.pressure.borrow_mut();
            let was_in_swap = within_set(&p.swapped, &range);
            p.swapped.remove(range.clone());
            p.freed_lazily(range.clone(), &populated);
            was_in_swap
        };
        // What the stream had in swap: dropped, or back in memory before the free (no look has
        // said so yet), and now freed lazily.
        let mut dropped_from_swap = Vec::new();
        for was in was_in_swap {
            for (run, present) in procfs::split_by_presence(was, &populated) {
                match present {
                    true => s.lane.observed(back_from_swap(pid, space, run)),
                    false => dropped_from_swap.push(run),
                }
            }
        }
        for dropped in dropped_from_swap {
            // Gone: a scan finds a page made there again.
            s.scans.borrow_mut().dropped(dropped.clone());
            s.lane.send(LaneMessage::Discard {
                pid,
                tid,
                range: dropped,
                advice: Dropped::Advice("free"),
                site: self.exit_site,
                at: read_at,
                at_exit: PagesAtExit {
                    read_at,
                    present: populated.clone(),
                    stopped: Some(tid),
                },
            });
        }
    }

    /// Under `--faults uffd` the lane follows a stack's growth (a fault below it) and writes it:
    /// what it grew to is tracked, and read by a look, from the stack's mapping as it is now.
    fn track_stack_growth(&self, pid: i32, space: SpaceId) {
        let Some(s) = self.spaces.get(&space) else {
            return;
        };
        let stacks: Vec<Range<u64>> = s.scans.borrow().stacks.iter().cloned().collect();
        if stacks.is_empty() {
            return;
        }
        // The mappings of the stacks' first pages only: a look costs no read of every mapping.
        let firsts: Vec<u64> = stacks.iter().map(|s| s.start).collect();
        let Ok(vmas) = Vmas::open(pid).and_then(|v| v.covering_each(&firsts)) else {
            return;
        };
        for (stack, vma) in stacks.into_iter().zip(vmas) {
            let Some(vma) = vma else {
                continue;
            };
            let grown = vma.range.start..stack.start;
            if !grown.is_empty() && s.pressure.borrow().chosen_for(&stack) == Some(true) {
                s.pressure.borrow_mut().grown(grown.clone());
                s.scans.borrow_mut().stacks.insert(grown);
            }
        }
    }

    /// Timed looks at the spaces due whose kernel figures say pages may have left or come back.
    pub(super) fn look_for_evictions_if_due(&self) {
        let now = Instant::now();
        let any_lazy = self
            .spaces
            .values()
            .any(|s| !s.pressure.borrow().lazy.is_empty());
        // The machine's count of reclaimed `MADV_FREE`d pages (one read for all): a space
        // with such pages looks again when it moved since its last look. Without the count,
        // it looks every time.
        let lazy_freed = if any_lazy {
            procfs::vmstat("pglazyfreed")
        } else {
            None
        };
        // The spaces some process of which has swap, by its last `rss` reading.
        let with_swap: std::collections::HashSet<SpaceId> = self
            .processes
            .values()
            .filter(|p| p.rss.is_some_and(|r| r.swap > 0))
            .filter_map(|p| p.space)
            .collect();
        let spaces: Vec<SpaceId> = self.spaces.keys().copied().collect();
        for space in spaces {
            let Some(s) = self.spaces.get(&space) else {
                continue;
            };
            if !s.follows_pages() {
                continue;
            }
            let in_swap = with_swap.contains(&space);
            let (due, worth) = {
                let p = s.pressure.borrow();
                let lazy_reclaimed = lazy_freed.is_none() || p.lazy_freed_at_look != lazy_freed;
                let worth =
                    in_swap || !p.swapped.is_empty() || (lazy_reclaimed && !p.lazy.is_empty());
                (p.due.is_none_or(|d| d <= now), worth)
            };
            if !due || !worth {
                continue;
            }
            let Some(pid) = self.threads_in(space).map(|(_, t)| t.pid).min() else {
                continue;
            };
            let began = tick::thread_cpu_time();
            // With no process in swap, only the pages the stream has in swap or freed lazily.
            let within = if in_swap {
                everywhere()
            } else {
                let p = s.pressure.borrow();
                p.swapped.iter().chain(p.lazy.iter()).cloned().collect()
            };
            self.look_for_evictions(pid, space, &within, Running::OthersMayRun);
            let took = tick::thread_cpu_time().saturating_sub(began);
            if let Some(s) = self.spaces.get(&space) {
                let mut p = s.pressure.borrow_mut();
                p.due = Some(Instant::now() + self.config.sample.max(took * COST_FACTOR));
                p.lazy_freed_at_look = lazy_freed;
            }
        }
    }

    /// A look at a whole space while its threads are all stopped (a check, its last exit stop):
    /// every tracked page if the machine has swap, else only what the stream has in swap or
    /// freed lazily (nothing, mostly: then nothing is read).
    pub(super) fn look_for_evictions_whole(&self, pid: i32, space: SpaceId) {
        let within = if procfs::swap_configured() {
            everywhere()
        } else {
            let Some(s) = self.spaces.get(&space) else {
                return;
            };
            let p = s.pressure.borrow();
            p.swapped.iter().chain(p.lazy.iter()).cloned().collect()
        };
        if !within.is_empty() {
            self.look_for_evictions(pid, space, &within, Running::AllStopped);
        }
    }

    /// Reads the page tables of what the stream tracks within `within` and writes what left
    /// memory or came back: `evicted` lines for pages newly in swap and for `MADV_FREE`d pages
    /// now gone, `resident` lines `from` `swap` for pages back. While other threads run, less
    /// what a begun syscall of theirs may be changing (its report comes after this).
    pub(super) fn look_for_evictions(
        &self,
        pid: i32,
        space: SpaceId,
        within: &RangeSet<u64>,
        running: Running,
    ) {
        let Some(s) = self.spaces.get(&space) else {
            return;
        };
        let Some(pagemap) = s.pagemap.as_ref().filter(|_| s.follows_pages()) else {
            return;
        };
        if s.uffd.is_some() {
            self.track_stack_growth(pid, space);
        }
        let mut ranges: RangeSet<u64> = RangeSet::new();
        {
            let p = s.pressure.borrow();
            for w in within.iter() {
                ranges.extend(within_set(&p.tracked, w));
            }
        }
        if running == Running::OthersMayRun {
            for r in self.begun_may_change(space).iter() {
                ranges.remove(r.clone());
            }
        }
        // Pages followed by scans are the stream's once a scan found them (scans run first).
        for r in s.scans.borrow().unseen().iter() {
            ranges.remove(r.clone());
        }
        let ranges: Vec<Range<u64>> = ranges.into_iter().collect();
        for (range, (read_at, runs)) in ranges.iter().zip(pagemap.populated_each(&ranges)) {
            let runs = match runs {
                Ok(runs) => runs,
                Err(e) => {
                    tracing::debug!(space, ?range, "a look for evicted pages failed: {e}");
                    continue;
                }
            };
            let found = s.pressure.borrow_mut().found(range, &runs);
            for (r, found) in found {
                let dropped = |advice| LaneMessage::Discard {
                    pid,
                    tid: pid,
                    range: r.clone(),
                    advice,
                    site: None,
                    at: read_at,
                    // The lane leaves out what it resolved since the read (touched again).
                    at_exit: PagesAtExit {
                        read_at,
                        present: Vec::new(),
                        stopped: None,
                    },
                };
                match found {
                    Found::Swapped => s.lane.observed(Event::Evicted {
                        pid,
                        space,
                        start: r.start,
                        end: r.end,
                        how: EvictedHow::Swap,
                    }),
                    Found::Back => s.lane.observed(back_from_swap(pid, space, r)),
                    Found::Reclaimed => {
                        s.scans.borrow_mut().dropped(r.clone());
                        s.lane.send(dropped(Dropped::Reclaimed));
                    }
                    // An attached space's scans write what is gone themselves (attach.rs).
                    Found::Gone if s.sampled.is_some() => {}
                    Found::Gone => {
                        s.scans.borrow_mut().dropped(r.clone());
                        s.lane.send(dropped(Dropped::Advice("scan")));
                    }
                }
            }
        }
    }
}

impl Pressure {
    /// What a read of `range` (its populated `runs`) shows against what the stream has, in
    /// address order; the stream's sets are brought up to it.
    fn found(&mut self, range: &Range<u64>, runs: &[PopulatedRun]) -> Vec<(Range<u64>, Found)> {
        let mut in_swap: RangeSet<u64> = RangeSet::new();
        let mut present: RangeSet<u64> = RangeSet::new();
        for run in runs {
            match run.swapped {
                true => in_swap.insert(run.range.clone()),
                false => present.insert(run.range.clone()),
            }
        }
        let mut found = Vec::new();
        // Newly in swap.
        for r in in_swap.iter() {
            found.extend(self.swapped.gaps(r).map(|new| (new, Found::Swapped)));
        }
        // In swap before: back, still there, or gone with no release seen.
        for was in within_set(&self.swapped, range) {
            let mut left: RangeSet<u64> = std::iter::once(was).collect();
            for k in in_swap.iter() {
                left.remove(k.clone());
            }
            for l in left.iter() {
                let back = within_set(&present, l);
                let mut gone: RangeSet<u64> = std::iter::once(l.clone()).collect();
                for b in &back {
                    gone.remove(b.clone());
                }
                found.extend(back.into_iter().map(|b| (b, Found::Back)));
                found.extend(gone.into_iter().map(|g| (g, Found::Gone)));
            }
        }
        // Freed lazily, and now neither present nor in swap: reclaimed.
        for r in within_set(&self.lazy, range) {
            let mut gone: RangeSet<u64> = std::iter::once(r).collect();
            for k in in_swap.iter().chain(present.iter()) {
                gone.remove(k.clone());
            }
            found.extend(gone.into_iter().map(|g| (g, Found::Reclaimed)));
        }
        for (r, how) in &found {
            match how {
                // A page written to swap was written since it was freed: no longer lazily.
                Found::Swapped => {
                    self.swapped.insert(r.clone());
                    self.lazy.remove(r.clone());
                }
                // Back, it may have been freed lazily since (before this look).
                Found::Back => self.swapped.remove(r.clone()),
                Found::Reclaimed | Found::Gone => {
                    self.swapped.remove(r.clone());
                    self.lazy.remove(r.clone());
                }
            }
        }
        found.sort_by_key(|(r, _)| r.start);
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;

    fn set(pages: &[(u64, u64)]) -> RangeSet<u64> {
        pages.iter().map(|&(s, e)| s * P..e * P).collect()
    }

    #[test]
    fn a_move_takes_swapped_and_lazy_pages_along_and_grows_the_tracked_tail() {
        let mut p = Pressure::default();
        p.described(
            0x10 * P..0x20 * P,
            true,
            &Vec::from_iter(set(&[(0x10, 0x20)])),
        );
        p.swapped.insert(0x11 * P..0x12 * P);
        p.freed_lazily(0x1e * P..0x20 * P, &Vec::from_iter(set(&[(0x1f, 0x20)])));
        p.moved(0x10 * P..0x20 * P, 0x40 * P..0x58 * P, false);
        assert_eq!(p.tracked, set(&[(0x40, 0x58)]));
        assert_eq!(p.swapped, set(&[(0x41, 0x42)]));
        assert_eq!(p.lazy, set(&[(0x4f, 0x50)]));
    }

    #[test]
    fn a_description_clears_swap_and_keeps_lazy_pages_still_present() {
        let parent = Pressure {
            lazy: set(&[(0x10, 0x14)]),
            ..Pressure::default()
        };
        let mut p = Pressure::inheriting(&parent);
        p.swapped.insert(0x10 * P..0x11 * P);
        p.described(
            0x10 * P..0x20 * P,
            true,
            &Vec::from_iter(set(&[(0x12, 0x13)])),
        );
        assert!(p.swapped.is_empty());
        assert_eq!(p.lazy, set(&[(0x12, 0x13)]));
        p.described(0x10 * P..0x20 * P, false, &[]);
        assert!(p.lazy.is_empty() && p.tracked.is_empty());
    }

    #[test]
    fn a_discard_drops_every_swap_entry_and_the_lazy_pages_it_dropped() {
        let mut p = Pressure::default();
        p.described(
            0x10 * P..0x20 * P,
            true,
            &Vec::from_iter(set(&[(0x10, 0x20)])),
        );
        p.swapped.insert(0x10 * P..0x14 * P);
        p.freed_lazily(0x14 * P..0x18 * P, &Vec::from_iter(set(&[(0x14, 0x18)])));
        p.discarded(
            0x10 * P..0x18 * P,
            &Vec::from_iter(set(&[(0x12, 0x13), (0x15, 0x16)])),
        );
        assert!(p.swapped.is_empty());
        assert_eq!(p.lazy, set(&[(0x15, 0x16)]));
    }

    fn run(pages: (u64, u64), swapped: bool) -> PopulatedRun {
        PopulatedRun {
            range: pages.0 * P..pages.1 * P,
            zero: false,
            huge: false,
            swapped,
        }
    }

    /// One read against the stream: newly in swap, back, still in swap, gone from swap unseen,
    /// freed lazily and reclaimed, freed lazily and still there.
    #[test]
    fn a_read_is_sorted_into_what_left_and_what_came_back() {
        let mut p = Pressure::default();
        p.described(
            0x10 * P..0x40 * P,
            true,
            &Vec::from_iter(set(&[(0x10, 0x40)])),
        );
        p.swapped = set(&[(0x20, 0x28)]);
        p.lazy = set(&[(0x30, 0x38)]);
        // 0x24-0x28 (in swap before) and 0x34-0x38 (freed lazily) are in no run.
        let runs = [
            run((0x10, 0x14), true),
            run((0x14, 0x20), false),
            run((0x20, 0x22), false),
            run((0x22, 0x24), true),
            run((0x30, 0x34), false),
        ];
        let found = p.found(&(0x10 * P..0x40 * P), &runs);
        let found: Vec<((u64, u64), Found)> = found
            .iter()
            .map(|(r, f)| ((r.start / P, r.end / P), *f))
            .collect();
        assert_eq!(
            found,
            [
                ((0x10, 0x14), Found::Swapped),
                ((0x20, 0x22), Found::Back),
                ((0x24, 0x28), Found::Gone),
                ((0x34, 0x38), Found::Reclaimed),
            ]
        );
        assert_eq!(p.swapped, set(&[(0x10, 0x14), (0x22, 0x24)]));
        assert_eq!(p.lazy, set(&[(0x30, 0x34)]));
        // Read again, nothing changed: nothing found.
        assert!(p.found(&(0x10 * P..0x40 * P), &runs).is_empty());
    }

    /// `--region`/`--min-size`: what was left out stays out when moved and grown, and in a fork
    /// child.
    #[test]
    fn what_is_left_out_stays_out() {
        let mut p = Pressure::default();
        p.leave_out(0x10 * P..0x20 * P);
        p.moved(0x10 * P..0x20 * P, 0x40 * P..0x60 * P, false);
        assert_eq!(p.chosen_for(&(0x40 * P..0x60 * P)), Some(false));
        assert_eq!(p.chosen_for(&(0x58 * P..0x60 * P)), Some(false));
        let child = Pressure::inheriting(&p);
        assert_eq!(child.chosen_for(&(0x40 * P..0x41 * P)), Some(false));
        assert_eq!(child.chosen_for(&(0x70 * P..0x71 * P)), None);
    }
}
