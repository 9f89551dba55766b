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

use super::layout::By;
use super::scans::{Running, everywhere};
use super::shadow::{Marks, Shadow};
use super::{Tracer, next_read};
use crate::actors::lane::{Dropped, LaneMessage, PagesAtExit};
use crate::event::{Event, EvictedHow, FoundBy, ResidentFrom, SpaceId};
use crate::kernel::procfs::{self, PopulatedRun};
use crate::kernel::tick;
use crate::kernel::vmas::Vmas;

/// When a space's pages the kernel can take away unasked are looked at next (what the stream
/// tracks, has in swap or freed lazily is in the space's shadow: shadow.rs).
#[derive(Debug, Default)]
pub(super) struct Pressure {
    /// When the next timed look is due.
    due: Option<Instant>,
    /// The machine's count of reclaimed `MADV_FREE`d pages at the last timed look.
    lazy_freed_at_look: Option<u64>,
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
    pub(super) fn on_lazy_free(&mut self, by: By, range: Range<u64>) {
        let By {
            pid,
            tid,
            space,
            site,
        } = by;
        let Some(s) = self.spaces.get_mut(&space) else {
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
        let was_in_swap = s.shadow.within(Marks::SWAPPED, &range);
        s.shadow.remove(range.clone(), Marks::SWAPPED);
        s.shadow.freed_lazily(range.clone(), &populated);
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
            s.shadow.dropped(dropped.clone());
            s.lane.send(LaneMessage::Discard {
                pid,
                tid,
                range: dropped,
                advice: Dropped::Advice("free"),
                site,
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
    fn track_stack_growth(&mut self, pid: i32, space: SpaceId) {
        let Some(s) = self.spaces.get_mut(&space) else {
            return;
        };
        let stacks: Vec<Range<u64>> = s.shadow.ranges(Marks::STACK).into_iter().collect();
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
            if !grown.is_empty() && s.shadow.chosen_for(&stack) == Some(true) {
                s.shadow.add(grown, Marks::TRACKED | Marks::STACK);
            }
        }
    }

    /// Timed looks at the spaces due whose kernel figures say pages may have left or come back.
    pub(super) fn look_for_evictions_if_due(&mut self) {
        let now = Instant::now();
        let any_lazy = self.spaces.values().any(|s| s.shadow.any(Marks::LAZY));
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
                let lazy_reclaimed =
                    lazy_freed.is_none() || s.pressure.lazy_freed_at_look != lazy_freed;
                let worth = in_swap
                    || s.shadow.any(Marks::SWAPPED)
                    || (lazy_reclaimed && s.shadow.any(Marks::LAZY));
                (s.pressure.due.is_none_or(|d| d <= now), worth)
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
                in_swap_or_lazy(&s.shadow)
            };
            self.look_for_evictions(pid, space, &within, Running::OthersMayRun);
            let took = tick::thread_cpu_time().saturating_sub(began);
            let next = next_read(self.config.sample, took);
            if let Some(s) = self.spaces.get_mut(&space) {
                s.pressure.due = Some(next);
                s.pressure.lazy_freed_at_look = lazy_freed;
            }
        }
    }

    /// A look at a whole space while its threads are all stopped (a check, its last exit stop):
    /// every tracked page if the machine has swap, else only what the stream has in swap or
    /// freed lazily (nothing, mostly: then nothing is read).
    pub(super) fn look_for_evictions_whole(&mut self, pid: i32, space: SpaceId) {
        let within = if procfs::swap_configured() {
            everywhere()
        } else {
            let Some(s) = self.spaces.get(&space) else {
                return;
            };
            in_swap_or_lazy(&s.shadow)
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
        &mut self,
        pid: i32,
        space: SpaceId,
        within: &RangeSet<u64>,
        running: Running,
    ) {
        let Some(s) = self.spaces.get(&space) else {
            return;
        };
        let Some(pagemap) = s.pagemap.clone().filter(|_| s.follows_pages()) else {
            return;
        };
        if s.uffd().is_some() {
            self.track_stack_growth(pid, space);
        }
        let Some(s) = self.spaces.get(&space) else {
            return;
        };
        let mut ranges = s.shadow.within_set(Marks::TRACKED, within);
        // Pages followed by scans are the stream's once a scan found them (scans run first).
        for r in s.shadow.unseen().iter() {
            ranges.remove(r.clone());
        }
        if running == Running::OthersMayRun {
            for r in self.begun_may_change(space).iter() {
                ranges.remove(r.clone());
            }
        }
        let Some(s) = self.spaces.get_mut(&space) else {
            return;
        };
        let ranges: Vec<Range<u64>> = ranges.into_iter().collect();
        for (range, (read_at, runs)) in ranges.iter().zip(pagemap.populated_each(&ranges)) {
            let runs = match runs {
                Ok(runs) => runs,
                Err(e) => {
                    tracing::debug!(space, ?range, "a look for evicted pages failed: {e}");
                    continue;
                }
            };
            let found = found(&mut s.shadow, range, &runs);
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
                        s.shadow.dropped(r.clone());
                        s.lane.send(dropped(Dropped::Reclaimed));
                    }
                    // An attached space's scans write what is gone themselves (attach.rs).
                    Found::Gone if s.sampled().is_some() => {}
                    Found::Gone => {
                        s.shadow.dropped(r.clone());
                        s.lane.send(dropped(Dropped::Advice("scan")));
                    }
                }
            }
        }
    }
}

/// The parts of `set` within `range`.
fn within_set(set: &RangeSet<u64>, range: &Range<u64>) -> Vec<Range<u64>> {
    set.overlapping(range)
        .map(|r| r.start.max(range.start)..r.end.min(range.end))
        .collect()
}

/// What the stream has in swap or freed lazily.
fn in_swap_or_lazy(shadow: &Shadow) -> RangeSet<u64> {
    let mut within = shadow.ranges(Marks::SWAPPED);
    within.extend(shadow.ranges(Marks::LAZY));
    within
}

/// What a read of `range` (its populated `runs`) shows against what the stream has, in
/// address order; the shadow is brought up to it.
fn found(
    shadow: &mut Shadow,
    range: &Range<u64>,
    runs: &[PopulatedRun],
) -> Vec<(Range<u64>, Found)> {
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
        let mut new: RangeSet<u64> = std::iter::once(r.clone()).collect();
        for was in shadow.within(Marks::SWAPPED, r) {
            new.remove(was);
        }
        found.extend(new.into_iter().map(|new| (new, Found::Swapped)));
    }
    // In swap before: back, still there, or gone with no release seen.
    for was in shadow.within(Marks::SWAPPED, range) {
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
    for r in shadow.within(Marks::LAZY, range) {
        let mut gone: RangeSet<u64> = std::iter::once(r).collect();
        for k in in_swap.iter().chain(present.iter()) {
            gone.remove(k.clone());
        }
        found.extend(gone.into_iter().map(|g| (g, Found::Reclaimed)));
    }
    for (r, how) in &found {
        match how {
            // A page written to swap was written since it was freed: no longer lazily.
            Found::Swapped => shadow.update_marks(r.clone(), Marks::SWAPPED, Marks::LAZY),
            // Back, it may have been freed lazily since (before this look).
            Found::Back => shadow.remove(r.clone(), Marks::SWAPPED),
            Found::Reclaimed | Found::Gone => {
                shadow.remove(r.clone(), Marks::SWAPPED | Marks::LAZY)
            }
        }
    }
    found.sort_by_key(|(r, _)| r.start);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;

    fn run(pages: (u64, u64), swapped: bool) -> PopulatedRun {
        PopulatedRun {
            range: pages.0 * P..pages.1 * P,
            zero: false,
            huge: false,
            swapped,
        }
    }

    fn set(pages: &[(u64, u64)]) -> RangeSet<u64> {
        pages.iter().map(|&(s, e)| s * P..e * P).collect()
    }

    /// One read against the stream: newly in swap, back, still in swap, gone from swap unseen,
    /// freed lazily and reclaimed, freed lazily and still there.
    #[test]
    fn a_read_is_sorted_into_what_left_and_what_came_back() {
        let mut shadow = Shadow::default();
        shadow.described(
            0x10 * P..0x40 * P,
            true,
            &Vec::from_iter(set(&[(0x10, 0x40)])),
        );
        shadow.add(0x20 * P..0x28 * P, Marks::SWAPPED);
        shadow.add(0x30 * P..0x38 * P, Marks::LAZY);
        // 0x24-0x28 (in swap before) and 0x34-0x38 (freed lazily) are in no run.
        let runs = [
            run((0x10, 0x14), true),
            run((0x14, 0x20), false),
            run((0x20, 0x22), false),
            run((0x22, 0x24), true),
            run((0x30, 0x34), false),
        ];
        let read = found(&mut shadow, &(0x10 * P..0x40 * P), &runs);
        let read: Vec<((u64, u64), Found)> = read
            .iter()
            .map(|(r, f)| ((r.start / P, r.end / P), *f))
            .collect();
        assert_eq!(
            read,
            [
                ((0x10, 0x14), Found::Swapped),
                ((0x20, 0x22), Found::Back),
                ((0x24, 0x28), Found::Gone),
                ((0x34, 0x38), Found::Reclaimed),
            ]
        );
        assert_eq!(
            shadow.ranges(Marks::SWAPPED),
            set(&[(0x10, 0x14), (0x22, 0x24)])
        );
        assert_eq!(shadow.ranges(Marks::LAZY), set(&[(0x30, 0x34)]));
        // Read again, nothing changed: nothing found.
        assert!(found(&mut shadow, &(0x10 * P..0x40 * P), &runs).is_empty());
    }
}
