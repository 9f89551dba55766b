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
}

/// A lane's inbox: the tracer's end, the lane's end, and the wake both share.
pub(super) fn inbox(capacity: usize) -> (LaneHandle, Receiver<LaneMessage>, Arc<LaneWake>) {
    let (tx, rx) = async_channel::bounded(capacity);
    let wake = Arc::new(LaneWake {
        notify: tokio::sync::Notify::new(),
        last_wake_ns: AtomicU64::new(0),
        epoch: Instant::now(),
        holding: AtomicBool::new(false),
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
    /// Called from the tracer thread; blocks while the lane is full (the tracee waits).
    pub fn send(&self, message: LaneMessage) {
        let LaneSender { tx, wake } = &*self.inner;
        let checkpoint = matches!(message, LaneMessage::Checkpoint { .. });
        let ended = matches!(message, LaneMessage::Ended { .. });
        match tx.try_send(message) {
            Ok(()) => {}
            Err(async_channel::TrySendError::Full(message)) => {
                wake.wake();
                let _ = tx.send_blocking(message);
            }
            Err(async_channel::TrySendError::Closed(_)) => return,
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
