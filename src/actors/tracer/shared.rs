//! Frames shared since a fork (`unshared` lines). A fork child's pages map its parent's frames
//! until one of them writes (copy-on-write) or lets its copy go; the tree's figure counts such
//! a frame once (docs/schema.md, "The tree's figure"). A write that copies a page raises no
//! userfaultfd fault and stops no syscall: the kernel's page tables say it, by the "exclusively
//! mapped" bit of each present page. They are read over the pages still taken for shared:
//! - at a sample tick, spaced by what the reads cost;
//! - at its last exit stop (a child that writes and exits: what the read before found too).
//!
//! The bit also says "the others let it go", and the kernel lets go of a process's memory
//! before the tracer sees the end that says so: an exiting process's at its teardown, before it
//! is reaped; an exec's old one before its exec stop; a discard before its syscall's exit stop.
//! Written then, the line would come before that end in the stream, and the tree would count
//! the frame twice in between. So no timed read is made while a space ends (its threads all
//! past their exit stops, not reaped yet) nor for a while after a process's end or exec (its
//! lane writes the end meanwhile), and a timed read writes a page only when the read before it,
//! a sample period earlier, found it so too (a discard's exit stop, an exec stop, come in that
//! time). A process that writes its copies while others end all the time (a build's driver) has
//! them counted late, or at its own end. The read at a space's last exit stop confirms so too:
//! the process whose `wait` reaped a child is read at its exit before the tracer has seen the
//! child's end.

use std::collections::HashMap;
use std::ops::Range;
use std::time::{Duration, Instant};

use rangemap::RangeSet;

use super::shadow::Marks;
use super::{Tracer, next_read};
use crate::event::{Event, SpaceId};
use crate::kernel::tick;

/// No timed read of shared pages before `after`: the last round's cost spaces them, and a space
/// that just ended may not have its end written yet.
pub(super) struct SharedReads {
    after: Instant,
}

impl SharedReads {
    pub(super) fn new() -> Self {
        Self {
            after: Instant::now(),
        }
    }

    /// A space ended (its last process exited or exec'd), letting go of the frames it shared:
    /// no read until its lane has written that (`SETTLE`, or three sample periods).
    pub(super) fn space_left(&mut self, sample: Duration) {
        let settled = Instant::now() + SETTLE.max(sample * 3);
        self.after = self.after.max(settled);
    }
}

impl Tracer {
    /// Timed reads of the spaces that have pages taken for shared.
    pub(super) fn look_for_unshared_if_due(&mut self) {
        let now = Instant::now();
        if now < self.shared_reads.after {
            return;
        }
        let mut exiting: HashMap<SpaceId, bool> = HashMap::new();
        for t in self.threads.values() {
            if let Some(space) = self.space_of_process(t.pid) {
                *exiting.entry(space).or_insert(true) &= t.phase.exiting();
            }
        }
        if exiting.values().any(|&all| all) {
            return;
        }
        let began = tick::thread_cpu_time();
        let spaces: Vec<SpaceId> = self
            .spaces
            .iter()
            .filter(|(_, s)| s.shadow.any(Marks::SHARED))
            .map(|(&id, _)| id)
            .collect();
        for space in spaces {
            if let Some(pid) = self.threads_in(space).map(|(_, t)| t.pid).min() {
                self.look_for_unshared(pid, space);
            }
        }
        // Many spaces (a read each): at most a fiftieth of the tracer's time, all together.
        let took = tick::thread_cpu_time().saturating_sub(began);
        self.shared_reads.after = next_read(self.config.sample, took);
    }

    /// Reads the pages of `space` taken for shared and writes `unshared` lines for those that
    /// map a frame of the space's own now and did at the read before.
    pub(super) fn look_for_unshared(&mut self, pid: i32, space: SpaceId) {
        let Some(s) = self.spaces.get_mut(&space) else {
            return;
        };
        let Some(pagemap) = s.pagemap.clone().filter(|_| s.follows_pages()) else {
            return;
        };
        let ranges: Vec<Range<u64>> = s.shadow.ranges(Marks::SHARED).into_iter().collect();
        if ranges.is_empty() {
            return;
        }
        let seen_before = s.shadow.ranges(Marks::EXCLUSIVE_SEEN);
        let mut seen: RangeSet<u64> = RangeSet::new();
        // What is not found of the space's own stays taken for shared: a page absent or in
        // swap at this read (moved by a syscall not reported yet, under migration, read back
        // since) is read again; the layout lines drop what is really gone.
        for (range, (_, runs)) in ranges.iter().zip(pagemap.populated_each(&ranges)) {
            let runs = match runs {
                Ok(runs) => runs,
                Err(e) => {
                    // Nothing of the stream is claimed from it: read again at the next look.
                    tracing::debug!(space, ?range, "reading shared pages: {e}");
                    continue;
                }
            };
            // The zero page is no frame of anyone's: shared until a write.
            for run in runs.iter().filter(|r| !r.swapped && !r.zero) {
                let own = match pagemap.exclusive(run.range.clone()) {
                    Ok(own) => own,
                    Err(e) => {
                        tracing::debug!(space, range = ?run.range, "reading shared pages: {e}");
                        continue;
                    }
                };
                for r in own {
                    seen.insert(r.clone());
                    let written: Vec<Range<u64>> = seen_before
                        .overlapping(&r)
                        .map(|b| b.start.max(r.start)..b.end.min(r.end))
                        .collect();
                    for w in written {
                        s.shadow.remove(w.clone(), Marks::SHARED);
                        seen.remove(w.clone());
                        s.lane.observed(Event::Unshared {
                            pid,
                            space,
                            start: w.start,
                            end: w.end,
                        });
                    }
                }
            }
        }
        s.shadow.replace(Marks::EXCLUSIVE_SEEN, &seen);
    }
}

/// How long after a process's end or exec no timed read is made: its lane writes the end in
/// that time, as a rule, and a read after it finds what that end let go written after it.
const SETTLE: Duration = Duration::from_millis(50);
