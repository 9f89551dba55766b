//! The tracer's end of a lane, and how it wakes the lane: the lane does not listen to its inbox
//! itself (R1 only needs a message to be *in* the inbox before the thread resumes), so the
//! tracer wakes it when something waits, and otherwise at most once every [`INBOX_LATENCY`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};

use super::LaneMessage;
use crate::actors::sequencer::Stamped;
use crate::event::Event;

/// How late the lane may take in a message that nothing waits for. Most of what the tracer sends
/// need only be in the inbox before the thread resumes (R1: the lane drains its inbox after
/// every read of the descriptor), not handled at once; waking the lane for each one cost about
/// a fifth of a fork+exec's time (docs/performance.md). So the tracer wakes the lane for such
/// messages at most once per this interval, and the lane, once woken, takes in the inbox again
/// this long after: every message is handled within it.
pub(super) const INBOX_LATENCY: Duration = Duration::from_millis(5);

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

    pub fn observed(&self, event: Event) {
        self.send(LaneMessage::Observed(Stamped::now(event)));
    }
}
