//! The sequencer's rules as plain data: which line may go out now, and which waits for what.
//! No channels here, and no clock but the one rule 4's patience reads, so every rule is tested
//! on its own (tests.rs).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use super::Stamped;
use crate::event::{Event, SpaceId, WarningKind};
use crate::verify::Probe;

/// A line on its way out, with its probe if it is a check.
#[derive(Debug)]
pub struct Held {
    pub stamped: Stamped,
    pub probe: Option<Probe>,
    /// When the tracer saw the change, for a line the tracer saw (a layout change, a fork, an
    /// exec, an exit, a page read); `None` for a line a lane made (first touches, a lane's
    /// warning), which rule 4 never holds.
    pub seen: Option<Instant>,
}

/// What the head of a held lane waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Wait {
    /// The line creating the space: its `exec`, or the `fork` naming it `child_space`.
    Birth(SpaceId),
    /// The line announcing the process: the root's first `exec`, or a `fork` naming it `child`.
    Announce(i32),
    /// The lane of the space the process lived in has sent every line about it (`Left`), and
    /// none of them is still held here.
    Left { space: SpaceId, pid: i32 },
    /// The `exit` line of a process the tracer saw end (`Exiting`, named by its number), which
    /// is on another lane.
    Exit(u64),
}

/// A process the tracer saw end, whose `exit` line has not been written yet.
#[derive(Debug)]
struct Ending {
    at: Instant,
    lane: LaneKey,
    pid: i32,
    /// When a line first waited for it here: the patience runs from then, not from the end,
    /// so a sequencer that is behind does not let lines go the moment they come.
    waited_since: Option<Instant>,
}

/// A lane, named by the `space` its lines carry (a `fork` line carries its parent's space, which
/// is the lane that sends it). Lines with no space (none come from a lane) form their own queue.
type LaneKey = Option<SpaceId>;

/// Past this many held lines, the lane held the longest is let go with a warning: an
/// announcement that has not come by then was lost (a failure elsewhere), and holding on would
/// only grow without bound. Normally a few hundred lines are held at most.
pub const HELD_LIMIT: usize = 1 << 18;

/// How long after an end lines held for it (rule 4) may wait. Its lane sends the `exit` within
/// milliseconds (the tracer wakes it); a wait this long means the line cannot come before
/// them, and they go on as if it had: in the order they came, as without the rule.
pub const ENDING_PATIENCE: Duration = Duration::from_secs(1);

/// The ordering state: what has been written, and the lanes held back.
#[derive(Debug)]
pub struct Gate {
    /// The traced program's pid (`Root`): its first `exec` announces it.
    root: Option<i32>,
    root_announced: bool,
    /// Spaces whose creating line has been written.
    born: HashSet<SpaceId>,
    /// Processes announced and not yet exited (a count, in case a pid is reused while the last
    /// line of its former process is still on its way).
    announced: HashMap<i32, u32>,
    /// Processes whose `exit` has been written: a late line of no lane about one goes on, as
    /// nothing more will announce it. An `exec` of such a pid is a new process (the pid was
    /// reused; a process's `exec` always precedes its own `exit`), which waits for its `fork`.
    exited: HashSet<i32>,
    /// The space each process lives in, per the lines written.
    living_in: HashMap<i32, SpaceId>,
    /// `Left` messages not yet used by an `exec`.
    left: HashSet<(SpaceId, i32)>,
    /// Held lanes: their lines in lane order, the head waiting. Never empty.
    lanes: HashMap<LaneKey, VecDeque<Held>>,
    /// What each held lane's head waits for.
    lane_waits: HashMap<LaneKey, Wait>,
    /// The lanes waiting for each thing (may name a lane that now waits for something else).
    waiting: HashMap<Wait, Vec<LaneKey>>,
    /// Things that just happened; the lanes waiting for them are looked at again.
    woken: Vec<Wait>,
    /// Processes the tracer saw end whose `exit` line is not written yet, by number (the order
    /// the tracer saw them end in).
    endings: BTreeMap<u64, Ending>,
    next_ending: u64,
    held: usize,
    limit: usize,
    /// Lines to write, in order.
    ready: VecDeque<Held>,
}

impl Default for Gate {
    fn default() -> Self {
        Self::with_limit(HELD_LIMIT)
    }
}

impl Gate {
    pub fn with_limit(limit: usize) -> Self {
        Self {
            root: None,
            root_announced: false,
            born: HashSet::new(),
            announced: HashMap::new(),
            exited: HashSet::new(),
            living_in: HashMap::new(),
            left: HashSet::new(),
            lanes: HashMap::new(),
            lane_waits: HashMap::new(),
            waiting: HashMap::new(),
            woken: Vec::new(),
            endings: BTreeMap::new(),
            next_ending: 0,
            held: 0,
            limit,
            ready: VecDeque::new(),
        }
    }

    /// The next line to write, if any.
    pub fn next_ready(&mut self) -> Option<Held> {
        self.ready.pop_front()
    }

    /// How many lines are held back.
    pub fn held(&self) -> usize {
        self.held
    }

    pub fn root(&mut self, pid: i32) {
        self.root = Some(pid);
    }

    /// `attach`: no process is the root; each announces itself with its attached `exec`.
    pub fn attaching(&mut self) {
        self.root_announced = true;
    }

    /// The tracer saw `pid` end at `at`; its `exit` line will come on the lane of `space`.
    /// Until it is written, what the tracer saw after that moment on any other lane waits for
    /// it (rule 4).
    pub fn exiting(&mut self, space: SpaceId, pid: i32, at: Instant) {
        let lane = Some(space);
        self.endings.insert(
            self.next_ending,
            Ending {
                at,
                lane,
                pid,
                waited_since: None,
            },
        );
        self.next_ending += 1;
    }

    /// A line from a lane, in that lane's order.
    pub fn line(&mut self, held: Held) {
        let key = held.stamped.event.space();
        let creates_own_lane = key.is_some() && held.stamped.event.creates_space() == key;
        match self.lanes.get_mut(&key) {
            // Every line of a lane comes after the one creating its space, so whatever is queued
            // before it was sent by someone else (a tracer `warning` about the space) and must
            // not keep it waiting.
            Some(queue) if creates_own_lane => {
                queue.push_front(held);
                self.held += 1;
                self.advance(key);
            }
            Some(queue) => {
                queue.push_back(held);
                self.held += 1;
            }
            None => match self.wait_for(key, &held) {
                None => self.pass(held),
                Some(wait) => {
                    self.lanes.insert(key, VecDeque::from([held]));
                    self.held += 1;
                    self.block(key, wait);
                }
            },
        }
        self.wake();
        while self.held > self.limit {
            self.release_longest_held();
        }
    }

    /// `pid` left `space` (it exec'd): that space's lane has sent every line about it.
    pub fn left(&mut self, space: SpaceId, pid: i32) {
        self.left.insert((space, pid));
        self.woken.push(Wait::Left { space, pid });
        self.wake();
    }

    /// The end of the stream: every lane still held goes out, each after a warning saying what it
    /// waited for, merged in time order (each lane in its own order).
    pub fn release_all(&mut self) {
        let mut keys: Vec<LaneKey> = self.lanes.keys().copied().collect();
        keys.sort_by_key(|k| self.lanes[k][0].stamped.at);
        for key in &keys {
            let warning = self.warning(*key, "the end of the trace");
            self.ready.push_back(warning);
        }
        let mut queues: Vec<VecDeque<Held>> =
            keys.iter().filter_map(|k| self.lanes.remove(k)).collect();
        self.lane_waits.clear();
        self.waiting.clear();
        self.endings.clear();
        self.held = 0;
        while let Some(oldest) = (0..queues.len())
            .filter(|&i| !queues[i].is_empty())
            .min_by_key(|&i| queues[i][0].stamped.at)
        {
            let held = queues[oldest].pop_front().expect("not empty");
            self.pass(held);
        }
        self.woken.clear();
    }

    /// What a line of lane `key` still waits for, if anything.
    fn wait_for(&self, key: LaneKey, held: &Held) -> Option<Wait> {
        let event = &held.stamped.event;
        if let Some(space) = event.space()
            && !self.born.contains(&space)
            && event.creates_space() != Some(space)
        {
            return Some(Wait::Birth(space));
        }
        // Only an `exec` (or a line of no lane) waits for its process's announcement: any other
        // line about a process is in a lane whose creation announced it, or on the lane that
        // carries its `fork` (a shared space), so rule 1 and lane order keep it behind. Holding
        // a line whose pid nobody will announce (a wrong pid, a bug elsewhere) would hold its
        // lane, and any check behind it, to the end; it goes, and `replay` reports it.
        if let Some(pid) = event.pid()
            && (matches!(event, Event::Exec { .. }) || event.space().is_none())
            && !self.announced.contains_key(&pid)
            && !(self.exited.contains(&pid) && event.space().is_none())
            && !self.announces(event)
        {
            return Some(Wait::Announce(pid));
        }
        if let Event::Exec { pid, space, .. } = event
            && let Some(&old) = self.living_in.get(pid)
            && old != *space
            && (!self.left.contains(&(old, *pid)) || self.holds_about(old, *pid, held.stamped.at))
        {
            return Some(Wait::Left {
                space: old,
                pid: *pid,
            });
        }
        // A check waits for nothing of other spaces: the tracer waits for it, and it is about
        // one space.
        if held.probe.is_some() {
            return None;
        }
        held.seen
            .and_then(|seen| self.ending_before(key, seen))
            .map(Wait::Exit)
    }

    /// Rule 4: the first process of another lane that the tracer saw end before `seen`, and
    /// before any process of this lane still to end, whose `exit` is not written yet. A lane
    /// sends what the tracer saw in the tracer's order, so what is ahead of that `exit` on its
    /// lane was seen before the end and waits only for earlier ends, and the lines it may wait
    /// for under rules 1 to 3 were seen earlier still: following the waits goes back in the
    /// tracer's time. The second bound keeps it so if a stamp were out of order, and
    /// `ENDING_PATIENCE` ends any wait that still would not.
    fn ending_before(&self, key: LaneKey, seen: Instant) -> Option<u64> {
        let own = self
            .endings
            .values()
            .filter(|e| e.lane == key)
            .map(|e| e.at)
            .min();
        let bound = own.map_or(seen, |own| own.min(seen));
        self.endings
            .iter()
            .find(|(_, e)| e.lane != key && e.at < bound)
            .map(|(&n, _)| n)
    }

    /// When the end waited for longest runs out of patience, if any end is waited for.
    pub fn ending_deadline(&self) -> Option<Instant> {
        self.endings
            .values()
            .filter_map(|e| e.waited_since)
            .map(|since| since + ENDING_PATIENCE)
            .min()
    }

    /// Lets the lines that have waited `ENDING_PATIENCE` for an end go on.
    pub fn give_up_endings(&mut self, now: Instant) {
        let stale: Vec<u64> = self
            .endings
            .iter()
            .filter(|(_, e)| e.waited_since.is_some_and(|s| s + ENDING_PATIENCE <= now))
            .map(|(&n, _)| n)
            .collect();
        for n in stale {
            if let Some(e) = self.endings.remove(&n) {
                tracing::warn!(
                    pid = e.pid,
                    "the exit line of a process did not come within {ENDING_PATIENCE:?}: \
                     what other lanes saw after its end goes on before it"
                );
            }
            self.woken.push(Wait::Exit(n));
        }
        self.wake();
    }

    /// The `exit` line of `pid` on `lane` is written: the first ending the tracer saw of it.
    fn ended(&mut self, lane: LaneKey, pid: i32) {
        if let Some(n) = self
            .endings
            .iter()
            .find(|(_, e)| e.lane == lane && e.pid == pid)
            .map(|(&n, _)| n)
        {
            self.endings.remove(&n);
            self.woken.push(Wait::Exit(n));
        }
    }

    /// Whether a line about `pid` from the lane of `space` is still held.
    /// Only lines from before the exec at `before` count: a later one with the pid is of a
    /// new process that reused it, and may itself wait (rule 4) for this one's `exit`.
    fn holds_about(&self, space: SpaceId, pid: i32, before: Instant) -> bool {
        self.lanes.get(&Some(space)).is_some_and(|q| {
            q.iter()
                .any(|h| h.stamped.event.pid() == Some(pid) && h.stamped.at <= before)
        })
    }

    /// Whether this line is the root's first `exec` (without a `Root`, the first `exec` at all),
    /// or the `exec` line of a process `attach` began following.
    fn announces(&self, event: &Event) -> bool {
        match event {
            Event::Exec { attached: true, .. } => true,
            Event::Exec { pid, .. } => {
                !self.root_announced && self.root.is_none_or(|root| root == *pid)
            }
            _ => false,
        }
    }

    /// Writes a line, and notes what it brings about.
    fn pass(&mut self, held: Held) {
        let event = &held.stamped.event;
        if let Some(space) = event.creates_space() {
            self.born.insert(space);
            self.woken.push(Wait::Birth(space));
        }
        let announces = self.announces(event);
        match *event {
            Event::Exec { pid, space, .. } => {
                if announces {
                    // Under `attach` there is no root: a later exec (of a child followed with
                    // `-f`) waits for its `fork`, as every exec but the root's first.
                    self.root_announced = true;
                    self.announce(pid);
                }
                if let Some(old) = self.living_in.insert(pid, space) {
                    self.left.remove(&(old, pid));
                }
            }
            Event::Fork {
                child, child_space, ..
            } => {
                self.announce(child);
                self.living_in.insert(child, child_space);
            }
            Event::Exit { pid, space, .. } => {
                if let Some(n) = self.announced.get_mut(&pid) {
                    *n -= 1;
                    if *n == 0 {
                        self.announced.remove(&pid);
                        self.exited.insert(pid);
                    }
                }
                if self.living_in.get(&pid) == Some(&space) {
                    self.living_in.remove(&pid);
                }
                self.ended(Some(space), pid);
            }
            _ => {}
        }
        self.ready.push_back(held);
    }

    fn announce(&mut self, pid: i32) {
        self.exited.remove(&pid);
        *self.announced.entry(pid).or_insert(0) += 1;
        self.woken.push(Wait::Announce(pid));
    }

    fn block(&mut self, key: LaneKey, wait: Wait) {
        if let Wait::Exit(n) = wait
            && let Some(ending) = self.endings.get_mut(&n)
        {
            ending.waited_since.get_or_insert_with(Instant::now);
        }
        if self.lane_waits.insert(key, wait) != Some(wait) {
            self.waiting.entry(wait).or_default().push(key);
        }
    }

    /// Writes the lane's lines from its head on, until one has to wait.
    fn advance(&mut self, key: LaneKey) {
        loop {
            let Some(queue) = self.lanes.get(&key) else {
                self.lane_waits.remove(&key);
                return;
            };
            if let Some(wait) = self.wait_for(key, &queue[0]) {
                return self.block(key, wait);
            }
            let queue = self.lanes.get_mut(&key).expect("just seen");
            let held = queue.pop_front().expect("never empty");
            if queue.is_empty() {
                self.lanes.remove(&key);
            }
            self.held -= 1;
            // An exec may wait for the held lines about its process in the space it left.
            if let (Some(space), Some(pid)) = (key, held.stamped.event.pid()) {
                self.woken.push(Wait::Left { space, pid });
            }
            self.pass(held);
        }
    }

    /// Looks again at every lane waiting for something that happened.
    fn wake(&mut self) {
        while let Some(wait) = self.woken.pop() {
            for key in self.waiting.remove(&wait).unwrap_or_default() {
                if self.lane_waits.get(&key) == Some(&wait) {
                    self.lane_waits.remove(&key);
                    self.advance(key);
                }
            }
        }
    }

    /// The bound: the lane whose head has waited longest goes on as if what it waits for had
    /// come, after a warning.
    fn release_longest_held(&mut self) {
        let Some(key) = self
            .lanes
            .iter()
            .min_by_key(|(_, q)| q[0].stamped.at)
            .map(|(k, _)| *k)
        else {
            return;
        };
        let warning = self.warning(key, "too many lines held back");
        tracing::warn!(held = self.held, "releasing a held lane: {warning:?}");
        self.ready.push_back(warning);
        // Its head goes now, whatever else it would wait for.
        while let Some(wait) = self.wait_for(key, &self.lanes[&key][0]) {
            match wait {
                Wait::Birth(space) => {
                    self.born.insert(space);
                }
                Wait::Announce(pid) => self.announce(pid),
                Wait::Left { pid, .. } => {
                    // As if it had lived nowhere: its exec waits for no lane.
                    self.living_in.remove(&pid);
                }
                Wait::Exit(n) => {
                    self.endings.remove(&n);
                }
            }
            self.woken.push(wait);
        }
        self.lane_waits.remove(&key);
        self.advance(key);
        self.wake();
    }

    /// The `warning` line written before a held lane is let go.
    fn warning(&self, key: LaneKey, why: &str) -> Held {
        let queue = &self.lanes[&key];
        let head = &queue[0];
        let (pid, space, waited) = match self.lane_waits.get(&key) {
            Some(Wait::Birth(space)) => (
                head.stamped.event.pid(),
                Some(*space),
                format!("the line creating space {space}"),
            ),
            Some(Wait::Announce(pid)) => (
                Some(*pid),
                key,
                format!("the line announcing process {pid} (its fork, or the program's exec)"),
            ),
            Some(Wait::Left { space, pid }) => (
                Some(*pid),
                Some(*space),
                format!("the last line about process {pid} in space {space}, before its exec"),
            ),
            Some(Wait::Exit(n)) => match self.endings.get(n) {
                Some(e) => (
                    Some(e.pid),
                    e.lane,
                    format!("the exit of process {}, which ended before them", e.pid),
                ),
                None => (head.stamped.event.pid(), key, "an exit".to_string()),
            },
            None => (head.stamped.event.pid(), key, "nothing".to_string()),
        };
        let lane = key.map_or("no space".to_string(), |s| format!("space {s}"));
        Held {
            stamped: Stamped {
                at: head.stamped.at,
                event: Event::Warning {
                    pid,
                    space,
                    what: WarningKind::Unannounced,
                    message: format!(
                        "{} line(s) of {lane} waited for {waited}, which did not come before \
                         {why}: they are written now, and may come before the line they waited for",
                        queue.len()
                    ),
                },
            },
            probe: None,
            seen: None,
        }
    }
}
