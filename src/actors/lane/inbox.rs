//! What the lane does with each message of the tracer: layout events become lines, in lane
//! order, with the pages present in new ranges (R3) and the pages a discard dropped (R4);
//! syscalls begun and ended move the fences (R2); a checkpoint sends the `verify` line on.

use std::ops::Range;
use std::time::Instant;

use rangemap::RangeSet;

use super::records::{Records, unrecorded};
use super::{Dropped, Lane, LaneMessage, PagesAtExit};
use crate::actors::sequencer::{SequencerMessage, Stamped};
use crate::event::{Event, EvictedHow, FoundBy, MapCause, MapKind, PageState, VerifyPoint};
use crate::kernel::fault_records::{FaultRing, instant_of};
use crate::kernel::procfs;
use crate::verify::Probe;

impl Lane {
    pub(super) async fn handle(&mut self, message: LaneMessage) {
        let stamp = match &message {
            LaneMessage::Observed(stamped) | LaneMessage::Mapped { event: stamped, .. } => {
                Some(stamped.at)
            }
            LaneMessage::Discard { at, .. } => Some(*at),
            _ => None,
        };
        self.seen_until = self.seen_until.max(stamp);
        match message {
            // A failed lane writes every later mapping untracked (forward_mapped); pages found by
            // a scan there would be claimed in untracked ranges. Its warning said that first
            // touches are no longer seen in this space, scanned or not.
            LaneMessage::Observed(stamped)
                if self.failed.is_some()
                    && matches!(stamped.event, Event::Resident { by: Some(_), .. }) => {}
            LaneMessage::Observed(stamped) => self.forward(*stamped).await,
            LaneMessage::Begun { tid, call } => {
                self.guards.begin(tid, &call);
                self.fences.begin(tid, call)
            }
            LaneMessage::Mapped { event, at_exit } => self.forward_mapped(*event, at_exit).await,
            LaneMessage::Fence { tid, range } => self.fences.fence(tid, range),
            LaneMessage::Ended { tid } => self.end_syscall(tid).await,
            LaneMessage::NsTid { tid, ns_tid } => self.who.ns_tid(tid, ns_tid),
            LaneMessage::Records {
                pid,
                tid,
                name,
                ring,
                replaces_before,
            } => self.add_ring(pid, tid, name, ring, replaces_before).await,
            LaneMessage::Unread { pages, before } => self.forward_unread(&pages, before).await,
            LaneMessage::Refused { tid, addr } => {
                if let Some(records) = self.records.as_mut() {
                    records.take();
                    records.refused(tid, addr);
                }
            }
            LaneMessage::Left { pid } => {
                self.who.left(pid);
                if let Some(records) = self.records.as_mut() {
                    records.process_left(pid);
                }
                self.touches.flush(&mut self.outgoing);
                self.send_out().await;
                let left = SequencerMessage::Left {
                    space: self.space,
                    pid,
                };
                self.out.send(left).await;
            }
            LaneMessage::Discard {
                pid,
                tid,
                range,
                advice,
                site,
                at,
                at_exit,
            } => {
                // Discarded: the pages absent at the syscall's exit, less those resolved here
                // since (touched again after the drop; their lines have gone out). Not the page
                // tables as they are now: a later change (a move) may already be in them, and its
                // report comes after this line.
                if let Some(records) = self.records.as_mut() {
                    records.take();
                    records.released(&range, at);
                }
                let present = self.recent.present_since(&range, at_exit);
                for (run, present) in procfs::split_by_presence(range, &present) {
                    if !present {
                        let event = match advice {
                            Dropped::Advice(advice) => Event::Discard {
                                pid,
                                tid,
                                space: self.space,
                                start: run.start,
                                end: run.end,
                                advice: advice.to_string(),
                                site,
                            },
                            Dropped::Reclaimed => Event::Evicted {
                                pid,
                                space: self.space,
                                start: run.start,
                                end: run.end,
                                how: EvictedHow::Reclaim,
                            },
                        };
                        self.emit(Stamped { at, event }).await;
                    }
                }
            }
            LaneMessage::Stack { pid, range, limit } => self.stacks.push((pid, range, limit)),
            // Every resolution before this message is stamped: the lane is one task.
            LaneMessage::Quiesce { done } => {
                let _ = done.send(());
            }
            LaneMessage::Checkpoint {
                pid,
                tid,
                point,
                done,
            } => {
                self.drain_uffd().await;
                self.grown_stacks(tid).await;
                self.check(pid, tid, point, done).await;
            }
        }
    }

    /// Sends a check on in lane order, after every line before it: with a probe for the state
    /// actor, or, when the lane cannot read its userfaultfd, as skipped (the stream of this space
    /// can no longer be compared), with `done` dropped at once, which the tracer takes as a
    /// skipped check.
    async fn check(
        &mut self,
        pid: i32,
        tid: i32,
        point: VerifyPoint,
        done: std::sync::mpsc::SyncSender<()>,
    ) {
        let skipped = self
            .failed
            .as_ref()
            .map(|cause| format!("the lane cannot read its userfaultfd: {cause}"));
        let event = Event::Verify {
            pid,
            space: self.space,
            point,
            checked_pages: 0,
            mismatched_pages: 0,
            first_mismatches: Vec::new(),
            skipped: skipped.clone(),
        };
        if skipped.is_some() {
            drop(done);
            return self.emit(Stamped::now(event)).await;
        }
        let probe = Probe {
            pid: tid,
            pagemap: self.pagemap.clone(),
            done,
        };
        self.touches.flush(&mut self.outgoing);
        self.send_out().await;
        let check = SequencerMessage::Check(Stamped::now(event), probe);
        self.out.send(check).await;
    }

    /// Sends an observed event on, in lane order; under `--faults records`, a read's
    /// `resident` line with the threads whose faults made its pages resident (records.rs).
    pub(super) async fn forward(&mut self, mut stamped: Stamped) {
        let Some(records) = self.records.as_mut() else {
            return self.forward_one(stamped).await;
        };
        // The rings are drained where a record may be claimed or forgotten: before a read's
        // line, a release, and a thread's end (the rest of the time, at their watermarks).
        let released = match &mut stamped.event {
            Event::Resident {
                by: Some(FoundBy::Scan),
                tid: None,
                ..
            } => {
                records.take();
                // At the record's time (a fault before the read), which the sequencer moves up
                // to the line before it's if that is later: the stream's time never goes back.
                let read_at = stamped.at;
                for (event, time) in records.attribute(stamped.event, read_at) {
                    let at = time.map_or(read_at, |t| instant_of(t).min(read_at));
                    self.forward_one(Stamped { at, event }).await;
                }
                return self.say_records_lost().await;
            }
            // A range described again (`redescribe`) is too: the pages present there are in
            // its `map` lines' states, so no read claims their records. So is a discard the
            // tracer saw rather than stopped at (`attach`'s, by a scan: pages gone).
            Event::Unmap { start, end, .. } | Event::Discard { start, end, .. } => {
                [Some(*start..*end), None]
            }
            // A mapping placed over a range (`MAP_FIXED`, or a split of one) replaces its pages.
            Event::Map { start, end, .. } => [Some(*start..*end), None],
            Event::Remap {
                old_start,
                old_end,
                new_start,
                new_end,
                ..
            } => [Some(*old_start..*old_end), Some(*new_start..*new_end)],
            Event::Brk { old, new, .. } => [Some(*old.min(new)..*old.max(new)), None],
            Event::ThreadExit { tid, .. } => {
                records.thread_gone(*tid);
                [None, None]
            }
            Event::Exit { pid, tid, .. } => {
                records.thread_gone(*tid);
                records.process_ended(*pid);
                [None, None]
            }
            Event::Fork { child, .. } => {
                records.process_made(*child);
                [None, None]
            }
            Event::Protect {
                start, end, prot, ..
            } if prot.contains('w') => {
                records.made_writable(&(*start..*end), stamped.at);
                [None, None]
            }
            // The pages written from their records alone were found too, as a scan's are.
            Event::Unseen {
                faults,
                found,
                at_most,
                ..
            } => {
                *found += records.unread_pages;
                *at_most = faults.saturating_sub(*found);
                [None, None]
            }
            _ => [None, None],
        };
        if released.iter().any(Option::is_some) {
            records.take();
            for range in released.iter().flatten() {
                records.released(range, stamped.at);
            }
        }
        self.forward_one(stamped).await;
        self.say_records_lost().await;
    }

    /// `--faults records`: the pages of `pages` made resident by a recorded fault before the
    /// release that comes next, which no read saw: written from their records, before it.
    async fn forward_unread(&mut self, pages: &RangeSet<u64>, before: Instant) {
        let Some(records) = self.records.as_mut() else {
            return;
        };
        records.take();
        for (event, time) in records.unread(self.space, pages, before) {
            let at = instant_of(time).min(before);
            self.forward_one(Stamped { at, event }).await;
        }
        self.say_records_lost().await;
    }

    /// `--faults records`: takes in the records written so far (a ring passed its watermark).
    pub(super) async fn take_records(&mut self) {
        if let Some(records) = self.records.as_mut() {
            records.take();
        }
        self.say_records_lost().await;
    }

    /// A `warning` line for the fault records lost since the last, if any were (at most one
    /// a second: records.rs).
    async fn say_records_lost(&mut self) {
        self.say_lost(false).await;
    }

    /// At the lane's end: the records lost since the last warning, whenever that was.
    pub(super) async fn say_records_lost_at_end(&mut self) {
        self.say_lost(true).await;
    }

    async fn say_lost(&mut self, at_end: bool) {
        if at_end && let Some(records) = self.records.as_mut() {
            // What the rings still hold is counted too.
            records.take();
        }
        let warning = self
            .records
            .as_mut()
            .and_then(|records| records.lost_warning(self.space, at_end));
        if let Some(warning) = warning {
            self.emit(Stamped::now(warning)).await;
        }
    }

    /// Thread `tid`'s ring joins the space's. The space's rings that cannot be read at all
    /// are said once; a thread's that cannot join them, for that thread.
    async fn add_ring(
        &mut self,
        pid: i32,
        tid: i32,
        name: Option<String>,
        ring: FaultRing,
        replaces_before: Option<u64>,
    ) {
        let name = name.as_deref();
        let failure = match self.records.as_mut() {
            Some(records) => records
                .add(pid, tid, name, ring, replaces_before)
                .err()
                .map(|e| (format!("thread {tid}'s"), e)),
            None if self.records_failed => None,
            None => match Records::new(
                self.page_size,
                self.records_wake.clone(),
                self.thread_names.clone(),
            ) {
                Ok(mut records) => {
                    let added = records.add(pid, tid, name, ring, replaces_before);
                    self.records = Some(records);
                    added.err().map(|e| (format!("thread {tid}'s"), e))
                }
                Err(e) => {
                    self.records_failed = true;
                    Some(("this space's".to_string(), e))
                }
            },
        };
        if let Some((whose, e)) = failure {
            let warning = unrecorded(pid, self.space, &whose, &e);
            self.emit(Stamped::now(warning)).await;
        }
    }

    /// Sends an observed event on, in lane order. A thread that ends ends its syscall too.
    async fn forward_one(&mut self, stamped: Stamped) {
        self.who.learn(&stamped.event);
        self.forget_stacks(&stamped.event);
        self.code_changes(&stamped.event);
        let ended = match stamped.event {
            Event::ThreadExit { tid, .. } | Event::Exit { tid, .. } => Some(tid),
            _ => None,
        };
        self.emit(stamped).await;
        if let Some(tid) = ended {
            self.end_syscall(tid).await;
        }
    }

    /// A new tracked range, with the pages present in it now: a `map` split into runs of one
    /// state, or a `brk` followed by the heap pages already there.
    async fn forward_mapped(&mut self, mut stamped: Stamped, at_exit: PagesAtExit) {
        if self.failed.is_some() {
            // Registered before the tracer could know the lane had failed: this lane follows
            // nothing any more, so the range is written untracked, as every later one is.
            match &mut stamped.event {
                Event::Map { tracked, state, .. } => {
                    *tracked = false;
                    *state = None;
                }
                Event::Brk { tracked, .. } => *tracked = false,
                _ => {}
            }
            return self.forward(stamped).await;
        }
        let at = stamped.at;
        let range: Range<u64> = match &stamped.event {
            Event::Map { start, end, .. } => *start..*end,
            Event::Brk { old, new, .. } => *old..*new,
            _ => return self.forward(stamped).await,
        };
        // Present at the syscall's exit, or resolved here since (their lines are out, and this
        // one would undo them). Not the page tables as they are now: a later change may already
        // be in them, and its report comes after this line.
        let present = self.recent.present_since(&range, at_exit);
        match stamped.event {
            Event::Map {
                pid,
                tid,
                space,
                prot,
                kind,
                path,
                tracked,
                follow,
                cause,
                site,
                ..
            } => {
                let runs = procfs::split_by_presence(range, &present);
                for (i, (run, present)) in runs.into_iter().enumerate() {
                    let state = if present {
                        PageState::Resident
                    } else {
                        PageState::NotResident
                    };
                    let event = Event::Map {
                        pid,
                        tid,
                        space,
                        start: run.start,
                        end: run.end,
                        prot: prot.clone(),
                        kind,
                        path: path.clone(),
                        tracked,
                        state: Some(state),
                        follow,
                        cause: if i == 0 { cause } else { Some(MapCause::Split) },
                        site,
                    };
                    self.forward(Stamped { at, event }).await;
                }
            }
            brk @ Event::Brk {
                pid,
                tid,
                follow,
                site,
                ..
            } => {
                self.forward(Stamped { at, event: brk }).await;
                for run in present {
                    let event = Event::Map {
                        pid,
                        tid,
                        space: self.space,
                        start: run.start,
                        end: run.end,
                        prot: "rw-".into(),
                        kind: MapKind::Heap,
                        path: None,
                        tracked: true,
                        state: Some(PageState::Resident),
                        follow,
                        cause: Some(MapCause::Split),
                        site,
                    };
                    self.forward(Stamped { at, event }).await;
                }
            }
            other => self.forward(Stamped { at, event: other }).await,
        }
    }

    /// With `--touch-stacks`: code mapped, made executable or moved makes the lane's view of
    /// its space's code stale.
    fn code_changes(&mut self, event: &Event) {
        let Some(touch_stacks) = &mut self.touch_stacks else {
            return;
        };
        match event {
            Event::Map { prot, .. } | Event::Protect { prot, .. } if prot.contains('x') => {
                touch_stacks.code_changed()
            }
            Event::Remap {
                old_start, old_end, ..
            } => touch_stacks.moved(&(*old_start..*old_end)),
            _ => {}
        }
    }

    /// A mapping that grew down and is unmapped or moved is no longer followed for growth.
    fn forget_stacks(&mut self, event: &Event) {
        let gone = match *event {
            // Not a range described again: the mapping is still there.
            Event::Unmap {
                start,
                end,
                cause: None,
                ..
            } => start..end,
            Event::Remap {
                old_start, old_end, ..
            } => old_start..old_end,
            _ => return,
        };
        self.stacks
            .retain(|(_, stack, _)| stack.end <= gone.start || gone.end <= stack.start);
    }
}
