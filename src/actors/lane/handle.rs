//! The tracer's end of a lane, and how it wakes the lane: the lane does not listen to its inbox
//! itself (R1 only needs a message to be *in* the inbox before the thread resumes), so the
//! tracer wakes it when something waits, and otherwise at most once every [`INBOX_LATENCY`].

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};

use super::woken::{Wake, Woken};
use super::{LaneMessage, PagesAtExit};
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

/// A count of the lane's reads of its descriptor ([`LaneHandle::unhandled_faults`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadMark(u64);

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
    pub(super) reads_begun: AtomicU64,
    pub(super) reads_handled: AtomicU64,
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
        // Refused only by a lane that has ended, which nothing needs to hear from any more.
        let _ = self.deliver(message);
    }

    /// As `send`, but gives the message back if the lane has ended.
    pub fn deliver(&self, message: LaneMessage) -> Result<(), Box<LaneMessage>> {
        let LaneSender { tx, wake } = &*self.inner;
        // A process's end, which the sequencer holds other lanes' later lines for: at once.
        let urgent = match &message {
            LaneMessage::Checkpoint { .. } | LaneMessage::Quiesce { .. } => true,
            LaneMessage::Observed(stamped) => matches!(stamped.event, Event::Exit { .. }),
            _ => false,
        };
        let ended = matches!(message, LaneMessage::Ended { .. });
        match wake.credits.try_acquire() {
            Ok(credit) => credit.forget(),
            // Closed: the lane has ended.
            Err(tokio::sync::TryAcquireError::Closed) => return Err(Box::new(message)),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                wake.wake();
                match futures::executor::block_on(wake.credits.acquire()) {
                    Ok(credit) => credit.forget(),
                    Err(_) => return Err(Box::new(message)),
                }
            }
        }
        if let Err(refused) = tx.try_send(message) {
            return Err(Box::new(refused.into_inner()));
        }
        // Pairs with the lane's store of `holding` and its drain after it: either the lane
        // sees this message, or this sees `holding`.
        std::sync::atomic::fence(Ordering::SeqCst);
        if urgent || (ended && wake.holding.load(Ordering::SeqCst)) || wake.stale() {
            wake.wake();
        }
        Ok(())
    }

    /// The read of its descriptor the lane must have handled (resolved, or held behind a
    /// fence) for every fault raised on `uffd` by now to be: None once it has, waiting for it
    /// a moment first.
    pub fn unhandled_faults(&self, uffd: &AddressSpaceUffd) -> Option<ReadMark> {
        // The lane counts a read before it makes it. A fault it took off the queue before the
        // poll is in a read counted below; one still queued is in the next read, which begins
        // after the count is loaded and takes up to 64 messages, and a thread has one fault
        // queued at a time.
        let pending = uffd.has_pending();
        let begun = self.inner.wake.reads_begun.load(Ordering::SeqCst);
        let mark = ReadMark(begun + u64::from(pending));
        let until = Instant::now() + READ_PATIENCE;
        while !self.handled(mark) {
            if Instant::now() >= until {
                return Some(mark);
            }
            std::hint::spin_loop();
        }
        None
    }

    /// Whether the lane has handled the reads up to `mark`.
    pub fn handled(&self, mark: ReadMark) -> bool {
        self.inner.wake.reads_handled.load(Ordering::SeqCst) >= mark.0
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
        self.send(LaneMessage::Observed(Box::new(Stamped::now(event))));
    }

    /// A new mapping or heap growth, with the pages found present at its exit if its range is
    /// tracked (`LaneMessage::Mapped`), else as any observation.
    pub fn mapped(&self, event: Event, at_exit: Option<PagesAtExit>) {
        match at_exit {
            Some(at_exit) => self.send(LaneMessage::Mapped {
                event: Box::new(Stamped::now(event)),
                at_exit,
            }),
            None => self.observed(event),
        }
    }
}
