//! What the lane does with what its userfaultfd says: layout events put fences up (R2), and
//! first touches are resolved, in lane order, each becoming part of a `resident` run (R9).

use std::time::Instant;

use super::Lane;
use super::attribution::Toucher;
use super::pages::Resolved;
use super::touches::TouchRun;
use crate::actors::sequencer::Stamped;
use crate::event::{Event, Follow, MapKind, PageState};
use crate::kernel::procfs;
use crate::kernel::uffd::{PageFault, Resolution, UffdMessage};
use crate::kernel::vmas::{Vma, Vmas};
use crate::test_hooks::{self, Fault};

impl Lane {
    /// One read's worth of messages. The kernel returns every pending fault before any pending
    /// event, so a fault in a batch may have been raised after an event of the same batch: the
    /// events' fences go up first.
    pub(super) async fn on_batch(&mut self, batch: Vec<UffdMessage>) {
        for message in &batch {
            if self.fences.event(message) {
                self.counters.layout_events += 1;
                tracing::trace!(space = self.space, ?message, "layout event");
            }
        }
        for message in batch {
            if let UffdMessage::Fault(fault) = message {
                self.on_fault(fault).await;
            }
        }
    }

    /// A layout syscall has been reported (or its thread is gone): fences that waited only for
    /// it come down, and the faults they held are resolved now, after the report.
    pub(super) async fn end_syscall(&mut self, tid: i32) {
        self.guards.end(tid);
        let mut ready = std::mem::take(&mut self.ready);
        self.fences.end(tid, &mut ready);
        self.resolve_all(ready).await;
    }

    async fn on_fault(&mut self, mut fault: PageFault) {
        // From here on a thread has our id, as the tracer's messages give it (the fences too).
        fault.tid = self.who.our_tid(fault.tid);
        let mut ready = std::mem::take(&mut self.ready);
        self.fences.admit(fault, &mut ready);
        if ready.is_empty() {
            tracing::trace!(space = self.space, ?fault, "held behind a fence");
        }
        self.resolve_all(ready).await;
    }

    /// Resolves the faults the fences let go, in order; keeps the buffer for the next time.
    async fn resolve_all(&mut self, mut ready: Vec<PageFault>) {
        for fault in ready.drain(..) {
            self.resolve(fault).await;
        }
        self.ready = ready;
    }

    async fn resolve(&mut self, PageFault { addr, write, tid }: PageFault) {
        // A lane that failed resolves nothing: the release wakes the thread.
        let Some(uffd) = self.uffd.as_ref().filter(|_| self.failed.is_none()) else {
            return;
        };
        // Its sample is copied before the thread runs on to its next fault (and looked at
        // after); only a thread of the space's own has one (another process's sampler holds
        // faults of its own memory).
        let own_thread = self
            .who
            .known(tid)
            .is_some_and(|who| who.writer.is_none() && !who.remote);
        let taken = self
            .touch_stacks
            .as_ref()
            .filter(|_| own_thread)
            .and_then(|stacks| stacks.take(tid));
        // `--threads`: the thread's name as it touched, read while it waits in the fault.
        let thread_selected = self
            .thread_names
            .as_ref()
            .is_none_or(|names| names.selects_now(tid));
        // The thread runs again from inside the resolution: the clock is read before it too.
        let began = Instant::now();
        // A write fill over a guard marker would replace it (R4): where one may be, the page's
        // entry is read first, and a page found taken is left as it is, as COPY would leave a
        // page there (`EEXIST`). No guard install can run between the read and the fill: it
        // waits for this lane's answer to a `Quiesce`, and nothing here awaits.
        let occupied = write
            && self.guards.may_hold_marker(addr)
            && self.pagemap.as_ref().is_some_and(|pagemap| {
                pagemap.occupied(addr).unwrap_or_else(|e| {
                    tracing::debug!(space = self.space, addr, "pagemap unread: {e}");
                    false
                })
            });
        let resolution = if occupied {
            self.counters.unfilled_markers += 1;
            uffd.wake_unfilled(addr)
        } else {
            uffd.resolve(addr, write)
        };
        match resolution {
            Resolution::Resolved => {
                if test_hooks::fails(Fault::LanePanic, Some(self.space)) {
                    panic!(
                        "the lane of space {} panics (test hook lane-panic)",
                        self.space
                    );
                }
                tracing::trace!(space = self.space, addr, tid, write, "resolved");
                let at = Instant::now();
                self.wake.woken.woke(tid, addr, at);
                if self.spin_cpus.is_some() {
                    self.faulted_at.insert(tid, at);
                }
                self.recent.resolved(Resolved {
                    began,
                    done: at,
                    tid,
                    page: addr,
                });
                self.counters.resolved += 1;
                let who = self.toucher(tid).await;
                self.grow_stack(addr, who.tid, at).await;
                let site = self
                    .touch_stacks
                    .as_mut()
                    .zip(taken)
                    .and_then(|(stacks, taken)| stacks.site_of(tid, addr, taken));
                let touch = TouchRun {
                    at,
                    pid: who.pid,
                    tid: who.tid,
                    writer: who.writer,
                    remote: who.remote,
                    start: addr,
                    end: addr + self.page_size,
                    write,
                    faults: 1,
                    sampled: u64::from(site.is_some()),
                    site,
                    thread_selected,
                };
                self.touches.touched(touch, &mut self.outgoing);
                self.send_out().await;
            }
            Resolution::Refused(errno) => {
                // Woken all the same, to fault again.
                self.wake.woken.woke(tid, addr, Instant::now());
                self.counters.refused += 1;
                tracing::trace!(space = self.space, addr, errno, "resolution refused");
            }
            Resolution::Gone => {}
        }
    }

    /// Whose the touch by `tid` (our id) is (attribution.rs). The tracer reports each thread
    /// of the space before it runs, so this is nearly always known; else `/proc` says, off the
    /// async workers, whether it is a thread of a process of the space or another process.
    async fn toucher(&mut self, tid: i32) -> Toucher {
        if let Some(who) = self.who.known(tid) {
            return who;
        }
        // An id from a child namespace means nothing in our `/proc`.
        let tgid = if self.who.in_child_namespace() {
            None
        } else {
            tokio::task::spawn_blocking(move || procfs::tgid(tid))
                .await
                .ok()
                .flatten()
        };
        self.who.unknown(tid, tgid)
    }

    /// A resolved fault just below a mapping that grows down (the main stack, a `MAP_GROWSDOWN`
    /// mapping) means the kernel grew it: report the growth as a mapping before the page that
    /// caused it.
    async fn grow_stack(&mut self, addr: u64, tid: i32, at: Instant) {
        // The kernel grows a stack by at most its limit below the top, and keeps mmap_base that
        // far below the main stack (mm/util.c, mmap_base()): a fault further down is mapped
        // memory, not growth, and costs no /proc read on this hot path.
        let Some(i) = self.stacks.iter().position(|(_, stack, floor)| {
            addr < stack.start && addr >= stack.end.saturating_sub(*floor)
        }) else {
            return;
        };
        let stack = self.stacks[i].1.clone();
        // Rare (once per growth), and off the async workers; through the faulting thread, whose
        // mm this is (the stack's process may have exec'd away from a shared space). The one
        // mapping asked for, not the whole file: a space can have tens of thousands.
        let vma = tokio::task::spawn_blocking(move || Vmas::open(tid)?.covering(addr)).await;
        let Some(vma) = vma.ok().and_then(Result::ok).flatten() else {
            return;
        };
        if vma.range.end < stack.start {
            // Another mapping below it, not growth: faults there need no read again.
            self.stacks[i].2 = stack.end - vma.range.end;
            return;
        }
        self.report_growth(i, vma, tid, at).await;
    }

    /// Before a check: a stack the kernel grew for a fault that has not reached us (the thread
    /// was stopped while it waited, and the kernel took its message back to retry the fault
    /// after the stop) is grown in the stream too, with no page.
    pub(super) async fn grown_stacks(&mut self, tid: i32) {
        if self.stacks.is_empty() {
            return;
        }
        // One mm: any thread of the space reads its maps. Only the mappings that hold the
        // stacks' first pages are asked for: a check costs no read of every mapping here.
        let firsts: Vec<u64> = self.stacks.iter().map(|(_, s, _)| s.start).collect();
        let vmas =
            tokio::task::spawn_blocking(move || Vmas::open(tid)?.covering_each(&firsts)).await;
        let Some(vmas) = vmas.ok().and_then(Result::ok) else {
            return;
        };
        for (i, vma) in vmas.into_iter().enumerate() {
            let (pid, stack, _) = self.stacks[i].clone();
            // Grown: the mapping holding its first page now begins below it.
            if let Some(vma) = vma.filter(|v| v.range.start < stack.start) {
                self.report_growth(i, vma, pid, Instant::now()).await;
            }
        }
    }

    /// Stack `i` now begins at `entry`'s start: the grown part, not resident, as a `map` line.
    /// Only what the stream has as a hole: another mapping that grows down just below merges
    /// into one mapping with it, and is not growth.
    async fn report_growth(&mut self, i: usize, entry: Vma, tid: i32, at: Instant) {
        let (pid, stack, _) = self.stacks[i].clone();
        let below = self
            .stacks
            .iter()
            .map(|(_, other, _)| other.end)
            .filter(|&end| end <= stack.start)
            .max()
            .unwrap_or(0);
        let start = entry.range.start.max(below);
        if start >= stack.start {
            return;
        }
        self.stacks[i].1 = start..stack.end;
        let event = Event::Map {
            pid,
            tid,
            space: self.space,
            start,
            end: stack.start,
            prot: entry.prot.rwx().to_string(),
            kind: MapKind::Stack,
            path: None,
            tracked: true,
            state: Some(PageState::NotResident),
            follow: Follow::Faults,
            site: None,
            cause: None,
        };
        self.emit(Stamped { at, event }).await;
    }
}
