//! Signals a traced process cannot take. Untraced, a signal whose default action ends a process
//! (SIGTERM, SIGHUP, SIGINT; not those that dump core, which take no shortcut) ends it at once,
//! waking even a killable wait (`complete_signal`'s group exit); traced, it must first reach its
//! signal-delivery stop, which a thread in a killable wait (a fork waiting on its own
//! userfaultfd's reader) never does. run.rs tells us of each such signal that came; a grace
//! period later, each traced process for which it is still pending and would end it is ended
//! with `SIGKILL`, its `exit` line naming the signal. A process in a group stop keeps it pending,
//! as untraced.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::{ProgramEnd, Tracer};
use crate::kernel::signals;

/// How long a process has to take such a signal at its signal stop.
const GRACE: Duration = Duration::from_millis(500);

/// What `run`'s signal handling (run.rs) shares with the tracer: the program's pid, to pass
/// signals on to (0 once it has ended), the signals that came, and the processes ended for one.
#[derive(Default)]
pub struct ProgramSignals {
    pub(super) root_pid: AtomicI32,
    arrived: Mutex<Vec<Arrived>>,
    ended_for: Mutex<HashMap<i32, Signal>>,
}

/// A signal that came, and whom it was for.
struct Arrived {
    at: Instant,
    signal: Signal,
    /// Passed on to the program alone (SIGTERM, SIGHUP), else sent by the terminal to the
    /// whole group (SIGINT).
    program_only: bool,
}

impl ProgramSignals {
    /// The program's pid while it lives, else 0.
    pub fn root_pid(&self) -> i32 {
        self.root_pid.load(Ordering::SeqCst)
    }

    /// `signal` came (passed on to the program alone, or sent to the whole group): the tracer
    /// looks, a grace period from now, for the processes that could not take it.
    pub fn arrived(&self, signal: Signal, program_only: bool) {
        let mut arrived = self.arrived.lock().unwrap_or_else(|e| e.into_inner());
        arrived.push(Arrived {
            at: Instant::now(),
            signal,
            program_only,
        });
    }

    /// The signals whose grace period is over.
    fn due(&self) -> Vec<Arrived> {
        let mut arrived = self.arrived.lock().unwrap_or_else(|e| e.into_inner());
        let (due, later) = arrived.drain(..).partition(|a| a.at.elapsed() >= GRACE);
        *arrived = later;
        due
    }

    /// How a process that died ended: the signal it was ended for, if we killed it for one.
    pub(super) fn end_of(&self, pid: i32, end: ProgramEnd) -> ProgramEnd {
        let mut ended = self.ended_for.lock().unwrap_or_else(|e| e.into_inner());
        match (ended.remove(&pid), end) {
            (Some(signal), ProgramEnd::Signaled(libc::SIGKILL)) => {
                ProgramEnd::Signaled(signal as i32)
            }
            (_, end) => end,
        }
    }
}

impl Tracer {
    /// Ends, as the kernel would have untraced, each traced process that a signal whose grace
    /// period is over would end but that has not taken it. Only traced processes (the tracer
    /// reaps them, so their pids are theirs), and none in a group stop.
    pub(super) fn end_for_untaken_signals(&mut self) {
        for arrived in self.signals.due() {
            let pids: Vec<i32> = if arrived.program_only {
                vec![self.lineage.root()]
            } else {
                self.processes.keys().copied().collect()
            };
            for pid in pids {
                let stopped = self
                    .threads
                    .values()
                    .any(|t| t.pid == pid && (t.phase.listening() || t.group_stopped));
                if stopped
                    || !self.processes.contains_key(&pid)
                    || !signals::would_end(pid, arrived.signal)
                {
                    continue;
                }
                tracing::debug!(pid, signal = %arrived.signal, "not taken: ended as untraced");
                let mut ended = self
                    .signals
                    .ended_for
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                ended.insert(pid, arrived.signal);
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}
