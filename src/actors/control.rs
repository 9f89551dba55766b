//! The run's control: what the run asks of its actors, and what they tell the run, through one
//! handle that `run` makes and hands to those that need it. Flags rather than messages: the
//! tracer thread sleeps in `waitpid` and looks at them at every wake-up (at least every tick),
//! and the signal handlers and the stream's writer must never wait on it.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::kernel::tick::{self, Tick, Ticker, TracerWaker};

/// One run's control; clones share it.
#[derive(Clone, Debug, Default)]
pub struct RunControl {
    flags: Arc<Flags>,
    /// Shared with the ticking thread, which knows nothing of the rest.
    tick: Arc<Tick>,
}

#[derive(Debug, Default)]
struct Flags {
    /// An `attach` trace is to end by detaching: Ctrl-C, SIGTERM or SIGHUP to mevi-actors.
    detach_asked: AtomicBool,
    /// The stream could not be written (its reader gone, a full disk): an `attach` detaches,
    /// and its exit status, its own, is then 1.
    stream_lost: AtomicBool,
    /// A signal meant for all of mevi-actors came (SIGTERM or SIGHUP under `run`, any under
    /// `attach`): no lingering after the trace (`--serve`).
    stop_asked: AtomicBool,
}

impl RunControl {
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks an `attach` trace to detach and end; from any thread. A `run` trace never looks.
    pub fn ask_to_detach(&self) {
        self.flags.detach_asked.store(true, Ordering::SeqCst);
    }

    pub fn detach_asked(&self) -> bool {
        self.flags.detach_asked.load(Ordering::SeqCst)
    }

    /// Says that the stream can no longer be written; the writer's, once.
    pub fn lose_stream(&self) {
        self.flags.stream_lost.store(true, Ordering::SeqCst);
    }

    /// Whether the stream could not be written to its end.
    pub fn stream_lost(&self) -> bool {
        self.flags.stream_lost.load(Ordering::SeqCst)
    }

    /// Asks mevi-actors to end once the trace has (no lingering).
    pub fn ask_to_stop(&self) {
        self.flags.stop_asked.store(true, Ordering::SeqCst);
    }

    pub fn stop_asked(&self) -> bool {
        self.flags.stop_asked.load(Ordering::SeqCst)
    }

    /// Wakes the tracer every `every` (or less, once [`hasten_tick`](Self::hasten_tick)ed),
    /// with [`tick_due`](Self::tick_due) true after each tick, until the ticker is dropped.
    pub fn start_ticking(&self, every: Duration, tracer: TracerWaker) -> io::Result<Ticker> {
        tick::start(self.tick.clone(), every, tracer)
    }

    /// Ticks at least every `every` from now on.
    pub fn hasten_tick(&self, every: Duration) {
        self.tick.hasten(every);
    }

    /// Whether a tick came since the last call.
    pub fn tick_due(&self) -> bool {
        self.tick.due()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_one_control_and_runs_do_not() {
        let run = RunControl::new();
        let writer = run.clone();
        writer.lose_stream();
        assert!(run.stream_lost());
        assert!(!run.detach_asked() && !run.stop_asked());
        assert!(!RunControl::new().stream_lost());
    }
}
