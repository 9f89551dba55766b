//! Races between threads of one space that ptrace cannot order (docs/ordering.md, R5-R7): a
//! placement held until the release it reuses is reported, and ranges described again from the
//! kernel when two syscalls raced over them or one failed half way.

use std::collections::HashMap;
use std::ops::Range;

use rangemap::RangeSet;

use super::Tracer;
use super::mappings::MapAt;
use crate::actors::lane::LaneMessage;
use crate::event::{Event, MapCause, SpaceId};
use crate::kernel::procfs::{self, MapsEntry};
use crate::kernel::ptrace::Stop;
use crate::kernel::syscall;

/// Threads at a syscall exit whose report waits for another thread's (case 1 of
/// docs/ordering.md): the release it began, which came first in the kernel.
struct Deferred {
    /// The releasing thread's syscall, by its `serial`.
    serial: u64,
    held: Vec<i32>,
}

/// Syscall exits held back, by the thread whose report they wait for.
#[derive(Default)]
pub(super) struct DeferredExits {
    by_releaser: HashMap<i32, Deferred>,
}

impl DeferredExits {
    pub(super) fn any(&self) -> bool {
        !self.by_releaser.is_empty()
    }
}

impl Tracer {
    /// Holds `tid`'s syscall exit, stopped and unreported, until `releaser`'s is reported.
    pub(super) fn defer(&mut self, tid: i32, releaser: i32) {
        let serial = self.threads.get(&releaser).map_or(0, |t| t.syscalls.serial);
        self.deferred
            .by_releaser
            .entry(releaser)
            .or_insert(Deferred {
                serial,
                held: Vec::new(),
            })
            .held
            .push(tid);
    }

    /// Marks the begun syscalls of other threads of the space that `changed` may have raced.
    pub(super) fn note_races(&mut self, tid: i32, space: SpaceId, changed: &RangeSet<u64>) {
        if changed.is_empty() {
            return;
        }
        let racers: Vec<(i32, RangeSet<u64>)> = self
            .threads_in(space)
            .filter(|&(other, _)| other != tid)
            .filter_map(|(other, t)| {
                let reach = t.syscalls.layout_call()?.reach();
                let hit: RangeSet<u64> = changed
                    .iter()
                    .filter(|r| reach.iter().any(|x| x.start < r.end && r.start < x.end))
                    .cloned()
                    .collect();
                (!hit.is_empty()).then_some((other, hit))
            })
            .collect();
        for (other, hit) in racers {
            if let Some(t) = self.threads.get_mut(&other) {
                t.syscalls.raced(hit);
            }
        }
    }

    /// Describes `ranges` of the space again as the kernel has them now: unmapped, then every
    /// mapping in them (the lane reads their present pages, in its order). Syscalls begun
    /// meanwhile may already be in what is read: they are marked raced, and describe their
    /// ranges again once reported.
    pub(super) fn describe_again(&mut self, tid: i32, space: SpaceId, ranges: RangeSet<u64>) {
        let maps = match procfs::read_maps(tid) {
            Ok(maps) if !maps.is_empty() => maps,
            // The mm is gone: nothing left to describe.
            _ => return,
        };
        self.describe_from(tid, space, ranges, &maps);
    }

    /// `describe_again`, from mappings already read (of this space's mm).
    pub(super) fn describe_from(
        &mut self,
        tid: i32,
        space: SpaceId,
        ranges: RangeSet<u64>,
        maps: &[MapsEntry],
    ) {
        // Whole pages, as the kernel acts on them (an argument may be unaligned).
        let page = self.config.lane.page_size;
        let ranges: RangeSet<u64> = ranges
            .iter()
            .map(|r| crate::kernel::whole_pages(r.clone(), page))
            .filter(|r| !r.is_empty())
            .collect();
        let Some(pid) = self.threads.get(&tid).map(|t| t.pid) else {
            return;
        };
        tracing::debug!(
            tid,
            space,
            ?ranges,
            "describing ranges again from the kernel"
        );
        if !self.spaces.contains_key(&space) {
            return;
        }
        // A range followed by scans stays so only where a private anonymous mapping is left (it
        // is the memory of the advice); a hole or another mapping now there is not. Except where
        // a begun syscall may be changing it: its report decides (a move takes the advice along).
        let mut settled = ranges.clone();
        for r in self.begun_may_change(space).iter() {
            settled.remove(r.clone());
        }
        let Some(space_ref) = self.spaces.get_mut(&space) else {
            return;
        };
        let followed = space_ref.uffd().is_some();
        space_ref.shadow.keep_private_anon(&settled, maps);
        for range in ranges.iter() {
            let Some(space_ref) = self.spaces.get_mut(&space) else {
                return;
            };
            // What is tracked or left out stays so (the selection's choice); pages in swap or
            // freed lazily are found again by the next look. A hole is no mapping any more.
            {
                space_ref.shadow.forget_pages(range.clone());
                let mut holes: RangeSet<u64> = std::iter::once(range.clone()).collect();
                for m in maps.iter() {
                    holes.remove(m.start..m.end);
                }
                for hole in holes.iter() {
                    space_ref.shadow.forget_tracking(hole.clone());
                }
            }
            space_ref.lane.observed(Event::Unmap {
                pid,
                tid,
                space,
                start: range.start,
                end: range.end,
                cause: Some(MapCause::Redescribe),
                site: None,
            });
            for entry in maps
                .iter()
                .filter(|m| m.start < range.end && range.start < m.end)
            {
                let clip = entry.start.max(range.start)..entry.end.min(range.end);
                if entry.is_private_anon()
                    && followed
                    && let Some(space_ref) = self.spaces.get(&space)
                {
                    // As at an mmap's exit: a racing touch of a mapping registered here waits for
                    // this description.
                    space_ref.lane.send(LaneMessage::Fence {
                        tid,
                        range: entry.start..entry.end,
                    });
                }
                let at = MapAt {
                    pid,
                    tid,
                    space,
                    range: clip,
                    cause: Some(MapCause::Redescribe),
                    site: None,
                };
                self.send_maps_entry(at, entry);
            }
        }
        self.note_races(tid, space, &ranges);
    }

    /// The other thread whose begun syscall released address space that this thread's syscall,
    /// now at its exit, has just been given: that release came first in the kernel, so it must be
    /// reported first (docs/ordering.md, case 1).
    pub(super) fn must_wait_for(&self, tid: i32) -> Option<i32> {
        let (_, space) = self.space_of(tid)?;
        let brk = self.spaces.get(&space)?.brk;
        let page_size = self.config.lane.page_size;
        let releasing: Vec<(i32, Range<u64>)> = self
            .threads_in(space)
            .filter(|&(other, _)| other != tid)
            .filter_map(|(other, t)| {
                Some((other, t.syscalls.layout_call()?.released(brk, page_size)?))
            })
            .collect();
        if releasing.is_empty() {
            return None;
        }
        let placed = self.placed_in_free_space(tid, brk)?;
        releasing
            .into_iter()
            .filter(|(_, freed)| freed.start < placed.end && placed.start < freed.end)
            .map(|(other, _)| other)
            .find(|&other| !self.waits_on(other, tid))
    }

    /// The free address space a syscall at its exit stop was given, if it was.
    fn placed_in_free_space(&self, tid: i32, brk: u64) -> Option<Range<u64>> {
        let call = self.threads.get(&tid)?.syscalls.layout_call()?;
        let ret = syscall::exit_value(tid).ok()??;
        if ret.is_error {
            return None;
        }
        call.placed(ret.value as u64, brk, self.config.lane.page_size)
    }

    /// Whether `tid` is already held, directly or through others, until `other` is reported.
    fn waits_on(&self, tid: i32, other: i32) -> bool {
        let mut at = tid;
        for _ in 0..self.deferred.by_releaser.len() {
            let Some((&releaser, _)) = self
                .deferred
                .by_releaser
                .iter()
                .find(|(_, d)| d.held.contains(&at))
            else {
                return false;
            };
            if releaser == other {
                return true;
            }
            at = releaser;
        }
        false
    }

    /// A thread gone (or replaced by exec) is not replayed: its tid may name another thread now.
    pub(super) fn forget_deferred(&mut self, tid: i32) {
        for d in self.deferred.by_releaser.values_mut() {
            d.held.retain(|&t| t != tid);
        }
        self.deferred.by_releaser.retain(|_, d| !d.held.is_empty());
    }

    /// Queues the held exits whose releasing thread has now been reported (or is gone).
    pub(super) fn replay_deferred(&mut self) {
        let ready: Vec<i32> = self
            .deferred
            .by_releaser
            .iter()
            .filter(|&(releaser, d)| {
                self.threads.get(releaser).is_none_or(|t| {
                    t.syscalls.layout_call().is_none() || t.syscalls.serial != d.serial
                })
            })
            .map(|(&releaser, _)| releaser)
            .collect();
        for releaser in ready {
            if let Some(d) = self.deferred.by_releaser.remove(&releaser) {
                self.pending
                    .extend(d.held.into_iter().map(|tid| Stop::SyscallExit { tid }));
            }
        }
    }
}
