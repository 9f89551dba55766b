//! The tracer's end of a lane, and how it wakes the lane: the lane does not listen to its inbox
//! itself (R1 only needs a message to be *in* the inbox before the thread resumes), so the
//! tracer wakes it when something waits, and otherwise at most once every [`INBOX_LATENCY`].

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};

use super::LaneMessage;
use super::woken::{Wake, Woken};
use crate::actors::sequencer::Stamped;
use crate::event::Event;
use crate::kernel::uffd::AddressSpaceUffd;

/// How late the lane may take in a message that nothing waits for. Most of what the tracer sends
/// need only be in the inbox before the thread resumes (R1: the lane drains its inbox after
/// every read of the descriptor), not handled at once; waking the lane for each one cost about
/// a fifth of a fork+exec's time (docs/performance.md). So the tracer wakes the lane for such
/// messages at most once per this interval, and the lane, once woken, takes in the inbox again
/// this long after: every message is handled within it.
pub(super) const INBOX_LATENCY: Duration = Duration::from_millis(5);

/// How long `LaneHandle::unhandled_faults` waits for a read under way to be handled before it
/// takes the lane to hold faults: an empty read takes about a microsecond.
const READ_PATIENCE: Duration = Duration::from_micros(20);

/// Messages one read of the descriptor takes at most. A read that returns fewer found the
/// kernel's queue empty behind them.
pub(super) const MESSAGES_PER_READ: usize = 64;

/// The reads of its descriptor the lane must have handled ([`LaneHandle::unhandled_faults`]):
/// those up to `read`, and, if a message was queued when it was taken, the first read after
/// `read` that came back short (the queue empty behind it: everything queued then was in it or
/// in a read before it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadMark {
    read: u64,
    until_drained: bool,
}

/// The tracer's end of a lane. Dropping the last one ends the lane.
#[derive(Clone, Debug)]
pub struct LaneHandle {
    inner: Arc<LaneSender>,
}

#[derive(Debug)]
struct LaneSender {
    tx: Sender<LaneMessage>,
    wake: Arc<LaneWake>,
}

/// How the tracer wakes a lane.
#[derive(Debug)]
pub(super) struct LaneWake {
    pub(super) notify: tokio::sync::Notify,
    /// When the tracer last woke the lane, in nanoseconds since `epoch` (only the tracer
    /// thread writes it).
    last_wake_ns: AtomicU64,
    epoch: Instant,
    /// The lane holds faults behind fences: an `Ended` may release them and must wake it.
    pub(super) holding: AtomicBool,
    /// Room left in the inbox. The channel itself is unbounded, so that its memory follows what
    /// is queued (a bounded one holds every slot from the start: 240 KiB per lane, most of the
    /// tracer's memory with many processes); the bound is kept here. The lane gives a credit
    /// back for each message it takes, and closes it when it ends.
    pub(super) credits: tokio::sync::Semaphore,
    /// Reads of its descriptor the lane has begun, and the number of the last whose messages
    /// it has handled (resolved, or held behind fences): while the two differ, a fault taken
    /// off the kernel's queue may not be resolved yet.
    reads_begun: AtomicU64,
    reads_handled: AtomicU64,
    /// The number of the last read that came back short of `MESSAGES_PER_READ` (the lane's
    /// alone), and of the last such read handled.
    short_read: AtomicU64,
    drained_handled: AtomicU64,
    /// The lane reads its descriptor no more (it failed, or ended): nothing is waited for.
    reads_stopped: AtomicBool,
    /// The threads it woke lately (woken.rs).
    pub(super) woken: Woken,
}

/// A lane's inbox: the tracer's end, the lane's end, and the wake both share.
pub(super) fn inbox(capacity: usize) -> (LaneHandle, Receiver<LaneMessage>, Arc<LaneWake>) {
    let (tx, rx) = async_channel::unbounded();
    let wake = Arc::new(LaneWake {
        notify: tokio::sync::Notify::new(),
        last_wake_ns: AtomicU64::new(0),
        epoch: Instant::now(),
        holding: AtomicBool::new(false),
        credits: tokio::sync::Semaphore::new(capacity),
        reads_begun: AtomicU64::new(0),
        reads_handled: AtomicU64::new(0),
        short_read: AtomicU64::new(0),
        drained_handled: AtomicU64::new(0),
        reads_stopped: AtomicBool::new(false),
        woken: Woken::default(),
    });
    let handle = LaneHandle {
        inner: Arc::new(LaneSender {
            tx,
            wake: wake.clone(),
        }),
    };
    (handle, rx, wake)
}

impl LaneWake {
    /// The lane is about to read its descriptor: counted before the read is made.
    pub(super) fn read_begun(&self) {
        self.reads_begun.fetch_add(1, Ordering::SeqCst);
    }

    /// The read under way returned `messages` messages.
    pub(super) fn read_returned(&self, messages: usize) {
        if messages < MESSAGES_PER_READ {
            let read = self.reads_begun.load(Ordering::Relaxed);
            self.short_read.store(read, Ordering::Relaxed);
        }
    }

    /// What the last read returned has been handled (resolved, or held behind fences).
    pub(super) fn read_handled(&self) {
        let read = self.reads_begun.load(Ordering::SeqCst);
        if self.short_read.load(Ordering::Relaxed) == read {
            self.drained_handled.store(read, Ordering::SeqCst);
        }
        self.reads_handled.store(read, Ordering::SeqCst);
    }

    /// The lane reads its descriptor no more: a change waits for none of its reads.
    pub(super) fn reads_stopped(&self) {
        self.reads_stopped.store(true, Ordering::SeqCst);
    }

    /// Whether the reads of `mark` have been handled.
    fn handled(&self, mark: ReadMark) -> bool {
        if self.reads_stopped.load(Ordering::SeqCst) {
            return true;
        }
        if mark.until_drained {
            self.drained_handled.load(Ordering::SeqCst) > mark.read
        } else {
            self.reads_handled.load(Ordering::SeqCst) >= mark.read
        }
    }

    fn wake(&self) {
        let now = self.epoch.elapsed().as_nanos() as u64;
        self.last_wake_ns.store(now, Ordering::Relaxed);
        self.notify.notify_one();
    }

    /// Whether a message sent now might not be taken in by the drain that follows the last wake.
    fn stale(&self) -> bool {
        let now = self.epoch.elapsed().as_nanos() as u64;
        now.saturating_sub(self.last_wake_ns.load(Ordering::Relaxed))
            >= INBOX_LATENCY.as_nanos() as u64
    }
}

impl Drop for LaneSender {
    fn drop(&mut self) {
        // Closed first, so that the lane, once woken, finds the inbox closed and ends.
        self.tx.close();
        self.wake.notify.notify_one();
    }
}

impl LaneHandle {
    /// Called from the tracer thread; blocks while the lane's inbox is full (the tracee waits).
    pub fn send(&self, message: LaneMessage) {
        let LaneSender { tx, wake } = &*self.inner;
        let checkpoint = matches!(
            message,
            LaneMessage::Checkpoint { .. } | LaneMessage::Quiesce { .. }
        );
        let ended = matches!(message, LaneMessage::Ended { .. });
        match wake.credits.try_acquire() {
            Ok(credit) => credit.forget(),
            // Closed: the lane has ended.
            Err(tokio::sync::TryAcquireError::Closed) => return,
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                wake.wake();
                match futures::executor::block_on(wake.credits.acquire()) {
                    Ok(credit) => credit.forget(),
                    Err(_) => return,
                }
            }
        }
        if tx.try_send(message).is_err() {
            return;
        }
        // Pairs with the lane's store of `holding` and its drain after it: either the lane
        // sees this message, or this sees `holding`.
        std::sync::atomic::fence(Ordering::SeqCst);
        if checkpoint || (ended && wake.holding.load(Ordering::SeqCst)) || wake.stale() {
            wake.wake();
        }
    }

    /// The read of its descriptor the lane must have handled (resolved, or held behind a
    /// fence) for every fault raised on `uffd` by now to be: None once it has, waiting for it
    /// a moment first.
    pub fn unhandled_faults(&self, uffd: &AddressSpaceUffd) -> Option<ReadMark> {
        // The lane counts a read before it makes it. A fault it took off the queue before the
        // poll is in a read counted below. One still queued is in a read that begins after the
        // count is loaded, at the latest the first of those that comes back short: a read
        // takes `MESSAGES_PER_READ` messages at most, and more may be queued.
        let pending = uffd.has_pending();
        let mark = ReadMark {
            read: self.inner.wake.reads_begun.load(Ordering::SeqCst),
            until_drained: pending,
        };
        let until = Instant::now() + READ_PATIENCE;
        while !self.handled(mark) {
            if Instant::now() >= until {
                return Some(mark);
            }
            std::hint::spin_loop();
        }
        None
    }

    /// Whether the lane has handled the reads of `mark`, or reads no more.
    pub fn handled(&self, mark: ReadMark) -> bool {
        self.inner.wake.handled(mark)
    }

    /// The wakes by the lane, not yet seen run, of the threads but `except` from a fault in
    /// one of `reach`.
    pub fn woken_in(&self, reach: &[Range<u64>], except: i32) -> Vec<Wake> {
        self.inner
            .wake
            .woken
            .in_reach(reach, except, Instant::now())
    }

    /// These threads were seen on a CPU after these wakes.
    pub fn ran(&self, wakes: &[Wake]) {
        self.inner.wake.woken.ran(wakes);
    }

    pub fn observed(&self, event: Event) {
        self.send(LaneMessage::Observed(Stamped::now(event)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lane's side of one read that returns `messages` messages, handled at once.
    fn read(wake: &LaneWake, messages: usize) {
        wake.read_begun();
        wake.read_returned(messages);
        wake.read_handled();
    }

    fn mark(wake: &LaneWake, pending: bool) -> ReadMark {
        ReadMark {
            read: wake.reads_begun.load(Ordering::SeqCst),
            until_drained: pending,
        }
    }

    #[test]
    fn with_nothing_queued_the_reads_begun_before_are_enough() {
        let (_handle, _rx, wake) = inbox(4);
        wake.read_begun();
        let before = mark(&wake, false);
        assert!(
            !wake.handled(before),
            "the read under way is not handled yet"
        );
        wake.read_returned(MESSAGES_PER_READ);
        wake.read_handled();
        assert!(wake.handled(before));
    }

    #[test]
    fn a_queue_longer_than_a_read_waits_for_the_read_that_drains_it() {
        let (_handle, _rx, wake) = inbox(4);
        read(&wake, 3);
        // 65 messages queued: the next read takes 64 of them, the one after the last.
        let queued = mark(&wake, true);
        assert!(!wake.handled(queued));
        read(&wake, MESSAGES_PER_READ);
        assert!(
            !wake.handled(queued),
            "a full read may leave messages queued"
        );
        wake.read_begun();
        wake.read_returned(1);
        assert!(!wake.handled(queued), "the short read is not handled yet");
        wake.read_handled();
        assert!(wake.handled(queued));
    }

    #[test]
    fn a_short_read_begun_before_the_look_does_not_count() {
        let (_handle, _rx, wake) = inbox(4);
        read(&wake, 0);
        let queued = mark(&wake, true);
        assert!(
            !wake.handled(queued),
            "the empty read came before the message"
        );
        read(&wake, 0);
        assert!(wake.handled(queued));
    }

    #[test]
    fn a_lane_that_reads_no_more_has_handled_everything() {
        let (_handle, _rx, wake) = inbox(4);
        let queued = mark(&wake, true);
        wake.reads_stopped();
        assert!(wake.handled(queued));
    }
}
