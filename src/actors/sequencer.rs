//! The sequencer: one inbox for every space's lane, one ordered stream out.
//!
//! Within a space, order is made by its lane, which serializes fault resolutions and
//! the tracer's layout changes (docs/ordering.md). Across spaces the one causal rule is birth: a
//! space's events may not precede the `exec` or `fork` that creates it, even though the child's
//! lane and the parent's lane race to this inbox. The sequencer holds such early events back, then
//! numbers every line (`seq`) and gives it a time that never goes backwards.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use async_channel::{Receiver, Sender};

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
    /// A line for the stream, in its lane's order.
    Line(Stamped),
    /// A `verify` line, with how to read the kernel's side beside it.
    Check(Stamped, Probe),
    /// The traced program's pid, sent by the tracer before any lane exists: its first `exec`
    /// line announces it.
    Root { pid: i32 },
    /// A process left a space (it exec'd): that space's lane has sent every line about it.
    Left { space: SpaceId, pid: i32 },
}

#[derive(Clone, Debug)]
pub struct SequencerHandle {
    tx: Sender<SequencerMessage>,
}

impl SequencerHandle {
    /// Waits while the stream is behind: the tracee is slowed, nothing is dropped.
    pub async fn send(&self, message: SequencerMessage) {
        // Closed only once the state actor is gone, at the very end: nothing left to say.
        let _ = self.tx.send(message).await;
    }

    /// From the tracer thread, which is no task.
    pub fn send_blocking(&self, message: SequencerMessage) {
        let _ = self.tx.send_blocking(message);
    }
}

/// A line held back, with its probe if it is a check.
type Held = (Stamped, Option<Probe>);

pub struct Sequencer {
    inbox: Receiver<SequencerMessage>,
    state: StateHandle,
    started: Instant,
    next_seq: u64,
    last_t_ns: u64,
    born: HashSet<SpaceId>,
    held: HashMap<SpaceId, Vec<Held>>,
}

impl Sequencer {
    pub fn new(capacity: usize, state: StateHandle, started: Instant) -> (Self, SequencerHandle) {
        let (tx, inbox) = async_channel::bounded(capacity);
        let actor = Self {
            inbox,
            state,
            started,
            next_seq: 0,
            last_t_ns: 0,
            born: HashSet::new(),
            held: HashMap::new(),
        };
        (actor, SequencerHandle { tx })
    }

    pub async fn run(mut self, start: Event) {
        self.emit(
            Stamped {
                at: self.started,
                event: start,
            },
            None,
        )
        .await;
        while let Ok(message) = self.inbox.recv().await {
            match message {
                SequencerMessage::Line(stamped) => self.admit(stamped, None).await,
                SequencerMessage::Check(stamped, probe) => self.admit(stamped, Some(probe)).await,
                SequencerMessage::Root { .. } | SequencerMessage::Left { .. } => {}
            }
        }
        // Every lane has closed. Anything still held belongs to a space whose birth was never
        // reported (its creator died mid-report); write it rather than lose it.
        let mut orphans: Vec<Held> = self.held.drain().flat_map(|(_, v)| v).collect();
        orphans.sort_by_key(|(s, _)| s.at);
        for (stamped, probe) in orphans {
            tracing::warn!(?stamped.event, "event for a space whose creation was never seen");
            self.emit(stamped, probe).await;
        }
    }

    async fn admit(&mut self, stamped: Stamped, probe: Option<Probe>) {
        let mut ready = VecDeque::from([(stamped, probe)]);
        while let Some((stamped, probe)) = ready.pop_front() {
            let event = &stamped.event;
            let creates = event.creates_space();
            if let Some(space) = event.space()
                && !self.born.contains(&space)
                && creates != Some(space)
            {
                self.held.entry(space).or_default().push((stamped, probe));
                continue;
            }
            self.emit(stamped, probe).await;
            if let Some(space) = creates {
                self.born.insert(space);
                ready.extend(self.held.remove(&space).unwrap_or_default());
            }
        }
    }

    async fn emit(&mut self, stamped: Stamped, probe: Option<Probe>) {
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
