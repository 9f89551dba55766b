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

use super::Tracer;
use super::scans::{Running, everywhere};
use crate::event::{Event, EvictedHow, FoundBy, ResidentFrom, SpaceId};
use crate::kernel::{procfs, tick};

/// A look may take at most this share of the tracer's time: the next one waits this many times
/// as long as the last one took.
const COST_FACTOR: u32 = 50;

/// What the stream says of a space's pages that the kernel can take away unasked.
#[derive(Debug, Default)]
pub(super) struct Pressure {
    /// The ranges the stream tracks (`map` and `brk` lines with `tracked` true).
    tracked: RangeSet<u64>,
    /// Their pages the stream has in swap (`evicted` lines with `how` `swap`).
    swapped: RangeSet<u64>,
    /// Their pages freed with `MADV_FREE`, present then and resident in the stream since: the
    /// kernel may reclaim them at any time.
    lazy: RangeSet<u64>,
    /// When the next timed look is due.
    due: Option<Instant>,
    /// The machine's count of reclaimed `MADV_FREE`d pages at the last timed look.
    lazy_freed_at_look: Option<u64>,
}

impl Pressure {
    /// A fork child's: its parent's `MADV_FREE`d pages are its own too (its snapshot's lines
    /// keep those still present).
    pub(super) fn inheriting(lazy: RangeSet<u64>) -> Self {
        Self {
            lazy,
            ..Self::default()
        }
    }

    /// Whether the stream tracks the page at `addr`.
    pub(super) fn tracks(&self, addr: u64) -> bool {
        self.tracked.contains(&addr)
    }

    /// The parts of `range` the stream tracks.
    pub(super) fn tracked_within(&self, range: &Range<u64>) -> Vec<Range<u64>> {
        self.tracked
            .overlapping(range)
            .map(|t| t.start.max(range.start)..t.end.min(range.end))
            .collect()
    }

    pub(super) fn lazy(&self) -> &RangeSet<u64> {
        &self.lazy
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
            let mut gone: RangeSet<u64> = std::iter::once(range).collect();
            for p in present {
                gone.remove(p.clone());
            }
            for r in gone.iter() {
                self.lazy.remove(r.clone());
            }
        } else {
            self.tracked.remove(range.clone());
            self.lazy.remove(range);
        }
    }

    /// `range` is no longer mapped (or about to be described again).
    pub(super) fn forget(&mut self, range: Range<u64>) {
        if !range.is_empty() {
            self.tracked.remove(range.clone());
            self.swapped.remove(range.clone());
            self.lazy.remove(range);
        }
    }

    /// A discard dropped every page of `range` absent at its exit (in swap or not).
    pub(super) fn discarded(&mut self, range: Range<u64>, populated_at_exit: &[Range<u64>]) {
        for (run, populated) in procfs::split_by_presence(range, populated_at_exit) {
            if !populated {
                self.swapped.remove(run.clone());
                self.lazy.remove(run);
            }
        }
    }

    /// An mremap moved `old` to `new` (DONTUNMAP: leaving `old` mapped, tracked and empty); the
    /// part of `new` beyond the old length, if any, is the mapping at the old end grown.
    pub(super) fn moved(&mut self, old: Range<u64>, new: Range<u64>, dontunmap: bool) {
        let tail_tracked = old.end > old.start && self.tracked.contains(&(old.end - 1));
        let tracked = shifted(&self.tracked, &old, &new);
        let swapped = shifted(&self.swapped, &old, &new);
        let lazy = shifted(&self.lazy, &old, &new);
        if dontunmap {
            self.swapped.remove(old.clone());
            self.lazy.remove(old.clone());
        } else {
            self.forget(old.clone());
        }
        self.forget(new.clone());
        self.tracked.extend(tracked);
        self.swapped.extend(swapped);
        self.lazy.extend(lazy);
        let grown = new.start + (old.end - old.start)..new.end;
        if tail_tracked && !grown.is_empty() && new.end - new.start > old.end - old.start {
            self.tracked.insert(grown);
        }
    }

    /// `MADV_FREE` over `range`, whose pages `present` were present at its exit.
    fn freed_lazily(&mut self, range: Range<u64>, present: &[Range<u64>]) {
        for p in present {
            let clip = p.start.max(range.start)..p.end.min(range.end);
            if clip.is_empty() {
                continue;
            }
            let tracked: Vec<Range<u64>> = self
                .tracked
                .overlapping(&clip)
                .map(|t| t.start.max(clip.start)..t.end.min(clip.end))
                .collect();
            self.lazy.extend(tracked);
        }
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
    /// `MADV_FREE` returned: its pages present now may be reclaimed from here on.
    pub(super) fn on_lazy_free(&self, pid: i32, space: SpaceId, range: Range<u64>) {
        let Some(pages) = self.present_at(pid, space, range.clone()) else {
            return;
        };
        if let Some(s) = self.spaces.get(&space) {
            s.pressure.borrow_mut().freed_lazily(range, &pages.present);
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
        let spaces: Vec<SpaceId> = self.spaces.keys().copied().collect();
        for space in spaces {
            let Some(s) = self.spaces.get(&space) else {
                continue;
            };
            if !s.follows_pages() {
                continue;
            }
            let in_swap = self
                .processes
                .values()
                .any(|p| p.space == Some(space) && p.rss.is_some_and(|r| r.swap > 0));
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
        let mut ranges: RangeSet<u64> = RangeSet::new();
        {
            let p = s.pressure.borrow();
            for w in within.iter() {
                for t in p.tracked.overlapping(w) {
                    ranges.insert(t.start.max(w.start)..t.end.min(w.end));
                }
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
        for range in ranges.iter() {
            let runs = match pagemap.populated(range.clone()) {
                Ok(runs) => runs,
                Err(e) => {
                    tracing::debug!(space, ?range, "a look for evicted pages failed: {e}");
                    continue;
                }
            };
            let mut in_swap: RangeSet<u64> = RangeSet::new();
            let mut present: RangeSet<u64> = RangeSet::new();
            for run in runs {
                match run.swapped {
                    true => in_swap.insert(run.range),
                    false => present.insert(run.range),
                }
            }
            let mut lines = Vec::new();
            {
                let mut p = s.pressure.borrow_mut();
                // Newly in swap.
                for r in in_swap.iter() {
                    for new in p.swapped.gaps(r) {
                        lines.push((new, Found::Swapped));
                    }
                }
                // Back from swap, or gone from it unseen (a release the tracer does not stop).
                let was: Vec<Range<u64>> = p
                    .swapped
                    .overlapping(range)
                    .map(|r| r.start.max(range.start)..r.end.min(range.end))
                    .collect();
                for r in was {
                    let mut left: RangeSet<u64> = std::iter::once(r).collect();
                    for k in in_swap.iter() {
                        left.remove(k.clone());
                    }
                    for l in left.iter() {
                        let mut gone: RangeSet<u64> = std::iter::once(l.clone()).collect();
                        for back in present.overlapping(l) {
                            let back = back.start.max(l.start)..back.end.min(l.end);
                            gone.remove(back.clone());
                            lines.push((back, Found::Back));
                        }
                        for g in gone.iter() {
                            lines.push((g.clone(), Found::Gone));
                        }
                    }
                }
                // Freed lazily, and now neither present nor in swap: reclaimed.
                let lazy: Vec<Range<u64>> = p
                    .lazy
                    .overlapping(range)
                    .map(|r| r.start.max(range.start)..r.end.min(range.end))
                    .collect();
                for r in lazy {
                    let mut gone: RangeSet<u64> = std::iter::once(r).collect();
                    for k in in_swap.iter().chain(present.iter()) {
                        gone.remove(k.clone());
                    }
                    for g in gone.iter() {
                        lines.push((g.clone(), Found::Reclaimed));
                    }
                }
                for (r, found) in &lines {
                    p.lazy.remove(r.clone());
                    match found {
                        Found::Swapped => p.swapped.insert(r.clone()),
                        Found::Back | Found::Reclaimed | Found::Gone => p.swapped.remove(r.clone()),
                    }
                }
            }
            lines.sort_by_key(|(r, _)| r.start);
            for (r, found) in lines {
                if matches!(found, Found::Reclaimed | Found::Gone) {
                    // Gone: a scan finds a page made there again.
                    s.scans.borrow_mut().dropped(r.clone());
                }
                let evicted = |how| Event::Evicted {
                    pid,
                    space,
                    start: r.start,
                    end: r.end,
                    how,
                };
                s.lane.observed(match found {
                    Found::Swapped => evicted(EvictedHow::Swap),
                    Found::Reclaimed => evicted(EvictedHow::Reclaim),
                    Found::Gone => Event::Discard {
                        pid,
                        tid: pid,
                        space,
                        start: r.start,
                        end: r.end,
                        advice: "scan".into(),
                        site: None,
                    },
                    Found::Back => Event::Resident {
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
                    },
                });
            }
        }
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
        let mut p = Pressure::inheriting(set(&[(0x10, 0x14)]));
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
    fn a_discard_forgets_what_it_dropped_only() {
        let mut p = Pressure::default();
        p.described(
            0x10 * P..0x20 * P,
            true,
            &Vec::from_iter(set(&[(0x10, 0x20)])),
        );
        p.swapped.insert(0x10 * P..0x14 * P);
        p.discarded(0x10 * P..0x14 * P, &Vec::from_iter(set(&[(0x12, 0x13)])));
        assert_eq!(p.swapped, set(&[(0x12, 0x13)]));
    }
}
