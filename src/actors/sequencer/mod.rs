//! The sequencer: one inbox for every space's lane, one ordered stream out.
//!
//! Within a space, order is made by its lane, which serializes fault resolutions and the
//! tracer's layout changes (docs/ordering.md). Across spaces and processes, order is made here.
//! The lanes race to this inbox, so a child's lines can arrive before the `fork` line (on its
//! parent's lane) that announces it. The rules, for every line:
//!
//! 1. **Birth.** A line of a space comes after the line creating it (the `exec`, or the `fork`
//!    naming it `child_space`).
//! 2. **Announcement.** A line about a process (`Event::pid`) comes after the line announcing it:
//!    the `fork` naming it `child` (any kind), or for the traced program (`Root`) its first `exec`.
//!    Only an `exec` has to wait for it here: every other line about a process is on a lane whose
//!    first line announced it (a fork child's space is created by the `fork` naming it, an
//!    exec'd space by the `exec`), or on the lane that carries its `fork` (a `vfork` or
//!    `clone_vm` child shares its parent's space), so rule 1 and lane order keep it behind. A
//!    line whose pid nobody announces (a wrong pid: a bug elsewhere) is not held, as that would
//!    hold its lane, and any check behind it, to the end; `replay` reports it. A `verify` line is
//!    held for rule 1 only: the tracer waits for it.
//! 3. **Leaving.** An `exec` of a process into a new space comes after every line about it in the
//!    space it leaves: it waits for that lane's `Left` (the tracer sends `Left` to the old lane
//!    before it makes the new space, and the lane forwards it after everything before it), and
//!    until none of that lane's lines about the process is still held here. A process's `exit`
//!    is on the lane of the space it ends in, after every line of that lane, and that lane's
//!    first line about it is its `exec` (rule 3) or its `fork` (rule 2): so `exit` is last. A
//!    line about a process after its `exit` (nothing will announce it again) is not held.
//! 4. **Ends.** What the tracer saw after a process ended comes after its `exit`. The tracer
//!    tells the sequencer of each end (`Exiting`, with the moment it saw it) before it sends
//!    the `exit` to the lane; until that line is written, a line of any other lane that the
//!    tracer saw after that moment waits. Lanes race, so without this a parent's lines after
//!    it reaped a child (its next `fork`, its own `exit`) could come before the child's last
//!    first touches and its `exit`, and a replay would hold the two at once, or neither. The
//!    waits go back in the tracer's time (gate.rs, `ending_before`); an `exec` waits only for
//!    lines about its process from before it (a later one is of a new process with the pid),
//!    so they do not form a cycle with rule 3. First touches wait for no end, nor does a check
//!    itself, though it stays behind what its lane holds (the tracer waits for it, for as long
//!    as the ended process's lane lags: milliseconds). A wait runs out after
//!    `ENDING_PATIENCE`.
//!
//! Holding is per lane and first in, first out (gate.rs): a lane is named by the `space` its
//! lines carry (a `fork` line carries its parent's space, the lane that sends it), and once a
//! line of a lane waits, every later line of that lane waits behind it. So the lines of one lane
//! are never reordered (here: placing.rs moves one kind, after the gate), and a held line cannot be overtaken by a later line about the same
//! process or space. Nothing waits on something later in its own lane, and what a line waits for
//! was sent (by the tracer, to a lane) before the thing the line reports happened, so the wait
//! ends as soon as that lane's line arrives.
//!
//! Nothing is dropped. The wait is bounded: when every lane has closed (the inbox ends), each
//! lane still held is written after a `warning` (`unannounced`) naming the process or space it
//! waited for, lanes merged in time order; and if more than 262144 lines are held
//! (`HELD_LIMIT`), the lane held longest goes on the same way. Both happen only when a line
//! waited for was lost (a failed actor: a lane that panicked never sends its `Left`); an actor
//! that panics ends the run, which closes the inbox, so nothing waits longer than the run. A
//! wait for an end (rule 4) lasts at most `ENDING_PATIENCE` from when it began; then the lines
//! go on as they came, with a warning in the log (the stream's lines are all there; only the
//! tree's order across that end is as it was before the rule).
//!
//! Every line written gets the next `seq` and a time that never goes backwards (a held line
//! written late takes the time of the line before it).
//!
//! Under fault records, lines ready to go out wait a window first, so that a read's line named
//! by a record can go back to its fault's time (placing.rs).

mod gate;
mod placing;
#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

use tokio::sync::mpsc::{Receiver, Sender};

use self::gate::{Gate, Held};
use self::placing::Placing;
use super::state::{StateHandle, StateMessage};
use crate::event::{Event, Line, SpaceId};
use crate::verify::Probe;

/// An event with the moment it was observed.
#[derive(Debug)]
pub struct Stamped {
    pub at: Instant,
    pub event: Event,
}

impl Stamped {
    pub fn now(event: Event) -> Self {
        Self {
            at: Instant::now(),
            event,
        }
    }
}

/// What the lanes (and, once, the tracer) tell the sequencer.
#[derive(Debug)]
pub enum SequencerMessage {
    /// A line the tracer sends itself (a warning of a space with no lane, an `exit` whose lane
    /// has ended), or a test: rule 4 takes it as seen at its stamp.
    Line(Stamped),
    /// A line from a lane, in its lane's order: one the tracer saw (`seen`, its stamp), or one
    /// the lane made (a first touch, a warning of its own).
    FromLane {
        stamped: Stamped,
        seen: Option<Instant>,
    },
    /// A `verify` line, with how to read the kernel's side beside it.
    Check(Stamped, Probe),
    /// The traced program's pid, sent by the tracer before any lane exists: its first `exec`
    /// line announces it.
    Root { pid: i32 },
    /// `attach`, sent before any lane exists: there is no root, and only `exec` lines marked
    /// `attached` announce themselves (any other waits for its `fork`).
    Attaching,
    /// A process left a space (it exec'd): that space's lane has sent every line about it.
    Left { space: SpaceId, pid: i32 },
    /// The tracer saw a process end at `at`, and will send its `exit` to the lane of `space`
    /// right after this message (or here, if that lane has ended).
    Exiting {
        space: SpaceId,
        pid: i32,
        at: Instant,
    },
}

#[derive(Clone, Debug)]
pub struct SequencerHandle {
    tx: Sender<SequencerMessage>,
}

impl SequencerHandle {
    /// Waits while the stream is behind: the tracee is slowed, nothing is dropped.
    pub async fn send(&self, message: SequencerMessage) {
        // Closed only once the sequencer has ended (at the very end, or it failed, which the
        // supervisor reports): nothing left to say.
        let _ = self.tx.send(message).await;
    }

    /// From the tracer thread, which is no task.
    pub fn send_blocking(&self, message: SequencerMessage) {
        let _ = self.tx.blocking_send(message);
    }
}

pub struct Sequencer {
    inbox: Receiver<SequencerMessage>,
    state: StateHandle,
    started: Instant,
    next_seq: u64,
    last_t_ns: u64,
    gate: Gate,
    /// Under fault records: the lines ready, waiting to go out.
    placing: Option<Placing>,
}

impl Sequencer {
    pub fn new(capacity: usize, state: StateHandle, started: Instant) -> (Self, SequencerHandle) {
        // Bounded, with its slots allocated as they fill (blocks of 32): a bounded
        // `async_channel` writes every slot when it is made, 1 ms of every run's start at 1,024.
        let (tx, inbox) = tokio::sync::mpsc::channel(capacity);
        let actor = Self {
            inbox,
            state,
            started,
            next_seq: 0,
            last_t_ns: 0,
            gate: Gate::default(),
            placing: None,
        };
        (actor, SequencerHandle { tx })
    }

    /// Under fault records: every line waits `window` before it goes out, so that a read's
    /// line named by a record found up to that long after its fault goes at the fault's time.
    pub fn placing_records(mut self, window: Duration) -> Self {
        self.placing = Some(Placing::new(window));
        self
    }

    pub async fn run(mut self, start: Event) {
        let start = Stamped {
            at: self.started,
            event: start,
        };
        self.emit(Held {
            stamped: start,
            probe: None,
            seen: None,
        })
        .await;
        loop {
            let placing = self.placing.as_ref().and_then(Placing::next_due);
            let patience = self.gate.ending_deadline();
            let due = placing.into_iter().chain(patience).min();
            let received = match due {
                Some(due) => tokio::select! {
                    received = self.inbox.recv() => received,
                    () = tokio::time::sleep_until(due.into()) => {
                        if patience.is_some_and(|p| p <= Instant::now()) {
                            self.gate.give_up_endings(Instant::now());
                            // Then what is due, as after any message.
                            self.emit_ready().await;
                        } else {
                            self.emit_due().await;
                        }
                        continue;
                    }
                },
                None => self.inbox.recv().await,
            };
            let Some(message) = received else {
                break;
            };
            match message {
                SequencerMessage::Line(stamped) => self.gate.line(Held {
                    seen: Some(stamped.at),
                    stamped,
                    probe: None,
                }),
                SequencerMessage::FromLane { stamped, seen } => self.gate.line(Held {
                    stamped,
                    probe: None,
                    seen,
                }),
                SequencerMessage::Check(stamped, probe) => self.gate.line(Held {
                    stamped,
                    probe: Some(probe),
                    seen: None,
                }),
                SequencerMessage::Root { pid } => self.gate.root(pid),
                SequencerMessage::Attaching => self.gate.attaching(),
                SequencerMessage::Left { space, pid } => self.gate.left(space, pid),
                SequencerMessage::Exiting { space, pid, at } => self.gate.exiting(space, pid, at),
            }
            self.emit_ready().await;
        }
        // Every lane has closed: what is still held waited for a line that will never come.
        if self.gate.held() > 0 {
            tracing::warn!(
                held = self.gate.held(),
                "lines whose announcement never came"
            );
            self.gate.release_all();
            self.emit_ready().await;
        }
        self.emit_waiting().await;
    }

    async fn emit_ready(&mut self) {
        while let Some(held) = self.gate.next_ready() {
            match self.placing.as_mut() {
                // A check goes out with everything before it: the tracer waits for it.
                Some(_) if held.probe.is_some() => {
                    self.emit_waiting().await;
                    self.emit(held).await;
                }
                Some(placing) => placing.push(held, Instant::now()),
                None => self.emit(held).await,
            }
        }
        self.emit_due().await;
    }

    /// The waiting lines due by now.
    async fn emit_due(&mut self) {
        let now = Instant::now();
        while let Some(held) = self.placing.as_mut().and_then(|p| p.pop_due(now)) {
            self.emit(held).await;
        }
    }

    /// Every waiting line, due or not.
    async fn emit_waiting(&mut self) {
        while let Some(held) = self.placing.as_mut().and_then(Placing::pop) {
            self.emit(held).await;
        }
    }

    async fn emit(&mut self, held: Held) {
        let Held { stamped, probe, .. } = held;
        let t = stamped
            .at
            .saturating_duration_since(self.started)
            .as_nanos() as u64;
        self.last_t_ns = self.last_t_ns.max(t);
        let line = Line {
            seq: self.next_seq,
            t_ns: self.last_t_ns,
            event: stamped.event,
        };
        self.next_seq += 1;
        self.state.send(StateMessage { line, probe }).await;
    }
}
