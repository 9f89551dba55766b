//! A thread woken from a first touch runs before a layout change that reaches its page
//! (docs/ordering.md, "Threads woken before a change"). Untraced, the kernel resolves a first
//! touch in the faulting thread's own time: it runs its next instruction at once. Here the
//! thread sleeps until its lane resolves the fault, and once woken waits for a CPU. A change
//! that another thread makes meanwhile, which the program ordered after that touch by other
//! means, could run first: LTP `clone10` frees its raw thread's stack as soon as the thread
//! says it is done, and the thread's next instruction (a call, the first touch of its stack's
//! next page) was killed by SIGSEGV in about one run in six (issue 25).
//!
//! The change's thread is held, stopped, while the tracer goes on with every other stop; the
//! loop looks at the held changes again at each turn.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::Tracer;
use crate::actors::lane::{ReadMark, Wake};
use crate::kernel::procfs::{self, OffCpu, RunState};
use crate::kernel::ptrace::{self, Resume};
use crate::kernel::syscall::LayoutSyscall;

/// How long a change is held, at most, for the threads it waits for to run: in all, from its
/// first hold, whatever it waits for and however many times it is held, but for the time it is
/// parked for a checkpoint (every thread is stopped then). A woken thread gets a CPU within
/// microseconds on an idle machine, but was seen to wait 150 ms beside two CPU hogs on two CPUs
/// (and 450 ms after its clone); one left waiting longer is not waited for.
const RUN_PATIENCE: Duration = Duration::from_secs(1);

/// How long a change is held after a checkpoint, at most (within `RUN_PATIENCE`): the threads it
/// waits for there only may have been about to finish a fault, and the check stopped them all.
const AFTER_CHECKPOINT_PATIENCE: Duration = Duration::from_millis(20);

/// A thread started this long ago or less is waited for, if it is waiting for a CPU, by
/// another thread's change: on an idle machine it runs within microseconds of its start.
const STARTED_LATELY: Duration = Duration::from_millis(100);

/// At most this many threads are waited for by one change, the most lately woken: in a space
/// of many threads touching what others release, one woken long before has run by then, and
/// each look at a thread costs reads of `/proc`.
const MOST_WAITED: usize = 16;

/// How often held changes are looked at, at most, and how long the loop sleeps while no stop
/// comes: first soon, then less and less often (a waiting thread may need the CPU the tracer
/// would take), up to the last.
const HELD_POLL_FIRST: Duration = Duration::from_micros(20);
const HELD_POLL_LAST: Duration = Duration::from_millis(1);
const HELD_LOOK: Duration = Duration::from_micros(50);

/// The layout changes held at their entry, and the threads they may wait for besides those the
/// lane woke.
pub(super) struct HeldChanges {
    changes: Vec<HeldChange>,
    /// How long the loop sleeps before it looks at them again, and when it last did.
    poll: Duration,
    looked: Instant,
    /// The threads the last checkpoint let go at its end.
    released_by_checkpoint: Vec<i32>,
    /// Threads made lately in their creator's space, and when.
    started: VecDeque<(i32, Instant)>,
}

impl HeldChanges {
    pub(super) fn new() -> Self {
        Self {
            changes: Vec::new(),
            poll: HELD_POLL_FIRST,
            looked: Instant::now(),
            released_by_checkpoint: Vec::new(),
            started: VecDeque::new(),
        }
    }

    pub(super) fn any(&self) -> bool {
        !self.changes.is_empty()
    }

    /// How long the loop may wait before it looks at the held changes again.
    pub(super) fn poll(&self) -> Duration {
        self.poll
    }

    /// The loop waited `poll()`: the next wait is longer, up to `HELD_POLL_LAST`, until a change
    /// is held anew.
    pub(super) fn waited(&mut self) {
        self.poll = (self.poll * 2).min(HELD_POLL_LAST);
    }

    /// Whether a thread a checkpoint parked is one of ours, held at its entry: let go by
    /// `release_held_changes`, not with the others.
    pub(super) fn holds(&self, tid: i32) -> bool {
        self.changes.iter().any(|h| h.tid == tid)
    }

    /// Thread `tid` was just made in the space of its creator: a change waits for it to have run,
    /// for `STARTED_LATELY`.
    pub(super) fn started_thread(&mut self, tid: i32) {
        if self.started.len() >= MOST_WAITED {
            self.started.pop_front();
        }
        self.started.push_back((tid, Instant::now()));
    }

    /// The checkpoint under way let the threads go at `end`, `released` by it and the rest held
    /// here: the changes parked for it are told.
    pub(super) fn checkpoint_ended(&mut self, end: Instant, released: Vec<i32>) {
        self.released_by_checkpoint = released;
        for held in &mut self.changes {
            if held.stage == Stage::CheckpointEnd {
                held.course = held.course.after_checkpoint(held.held_at, end);
            }
        }
    }
}

/// A layout change held at its entry, nothing of it done yet (not begun: no fence waits for
/// it), until the threads it waits for have run.
#[derive(Debug)]
pub(super) struct HeldChange {
    tid: i32,
    call: LayoutSyscall,
    stage: Stage,
    course: Course,
    waiting: Vec<Waited>,
    /// The lane's wakes of the threads waited for: forgotten once seen run.
    wakes: Vec<Wake>,
    /// When this hold began, and when it ends whatever it waits for (none while parked for a
    /// checkpoint: that waits for the checkpoint's end).
    held_at: Instant,
    deadline: Option<Instant>,
}

/// Where a held change is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Held at its entry until the lane has handled the faults raised before it: up to
    /// this read of its descriptor.
    Draining(ReadMark),
    /// Held at its entry for the threads the lane woke in its reach.
    Entry,
    /// A checkpoint is under way: it waits, parked, for its end, however long that takes (no
    /// deadline: the program is stopped meanwhile, and the change's own patience is not spent).
    /// Once: it begins at the next, or each checkpoint would take it from the last one's hold
    /// to its own.
    CheckpointEnd,
    /// Held after a checkpoint for the threads woken in its reach and the others of its space
    /// the checkpoint stopped (by their counts alone: they were taken off their CPUs in the
    /// ptrace stop): untraced they would have run on meanwhile, and one may have been about to
    /// finish a first touch the checkpoint took it out of. Then looked at as at its entry.
    AfterCheckpoint,
}

/// How far a held change has come.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Course {
    /// A checkpoint came while it was held already: the next one finds it begun.
    crossed: bool,
    /// How many times it was held: at most `MOST_HOLDS`.
    holds: u8,
    /// The lane has handled the faults raised before its last look: the next looks at the
    /// threads alone, until they have been waited for again.
    drained: bool,
    /// When it goes on whatever it waits for: `RUN_PATIENCE` after its first hold that has a
    /// deadline, moved on by the time it was then parked for a checkpoint.
    deadline: Option<Instant>,
    /// When the checkpoint it crossed let the threads go.
    checkpoint_end: Option<Instant>,
}

impl Course {
    fn held_again(self) -> Self {
        Self {
            holds: self.holds.saturating_add(1),
            ..self
        }
    }

    /// The deadline of a hold at `stage` from `now`: the change's own, set at its first such
    /// hold, and sooner after a checkpoint; none while parked for one.
    fn deadline_of(&mut self, stage: Stage, now: Instant) -> Option<Instant> {
        if stage == Stage::CheckpointEnd {
            return None;
        }
        let whole = *self.deadline.get_or_insert(now + RUN_PATIENCE);
        Some(match stage {
            Stage::AfterCheckpoint => whole.min(now + AFTER_CHECKPOINT_PATIENCE),
            _ => whole,
        })
    }

    /// Whether it has been held long enough, as of `now`.
    fn out_of_time(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|deadline| now >= deadline)
    }

    /// Parked since `parked_at` for a checkpoint that let the threads go at `end`: that time is
    /// not counted against its deadline.
    fn after_checkpoint(self, parked_at: Instant, end: Instant) -> Self {
        Self {
            deadline: self
                .deadline
                .map(|deadline| deadline + end.saturating_duration_since(parked_at)),
            checkpoint_end: Some(end),
            ..self
        }
    }

    /// What a thread the lane woke at `at` must have got past: its release by the checkpoint
    /// this change crossed if it was woken before that checkpoint's end (the check stopped it
    /// since, and let it go), else its wake.
    fn since_wake(&self, at: Instant) -> Since {
        match self.checkpoint_end {
            Some(end) if at < end => Since::Release,
            _ => Since::Wake,
        }
    }
}

/// How many times a change is held at most: at its entry, for the lane and then for the
/// threads it woke, then again for a fault raised meanwhile (a thread let go by a checkpoint
/// faults again once it runs) and the threads that wakes.
const MOST_HOLDS: u8 = 4;

/// What a held change does next.
#[derive(Clone, Copy, Debug)]
enum Next {
    /// Begins: nothing more is waited for.
    Begin,
    /// Looked at as at its entry again (the lane has handled what it held, or the threads it waited for
    /// have run: they may have faulted again since).
    Enter,
    /// A checkpoint it waited for has ended.
    AfterCheckpoint,
}

/// A thread waited for: one that may not have run since the lane woke it.
#[derive(Clone, Copy, Debug)]
struct Waited {
    pid: i32,
    tid: i32,
    first: RunState,
    since: Since,
}

/// What a waited thread must have got past.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Since {
    /// The lane's wake from its fault.
    Wake,
    /// A checkpoint's letting it go from its ptrace stop.
    Release,
    /// Its start: a thread made lately, whose first instructions may be waiting for a CPU.
    Start,
}

/// What one look at held changes read of each thread, read once however many wait for it.
#[derive(Default)]
struct Look {
    states: HashMap<i32, Option<RunState>>,
    stacks: HashMap<i32, Option<OffCpu>>,
}

impl Look {
    fn state(&mut self, pid: i32, tid: i32) -> Option<RunState> {
        *self
            .states
            .entry(tid)
            .or_insert_with(|| procfs::run_state(pid, tid))
    }

    fn stack(&mut self, pid: i32, tid: i32) -> Option<OffCpu> {
        *self
            .stacks
            .entry(tid)
            .or_insert_with(|| procfs::off_cpu(pid, tid))
    }
}

impl Waited {
    /// Thread `tid` of process `pid`, if it may not have run since the lane woke it.
    fn first_look(pid: i32, tid: i32, since: Since, look: &mut Look) -> Option<Self> {
        let first = look.state(pid, tid)?;
        let waited = Self {
            pid,
            tid,
            first,
            since,
        };
        (!waited.ran(first, look)).then_some(waited)
    }

    fn still_waiting(&self, look: &mut Look) -> bool {
        look.state(self.pid, self.tid)
            .is_some_and(|now| !self.ran(now, look))
    }

    /// Whether it has got past its fault (or its release), as of `now`. Gone, sleeping or
    /// stopped, it has (a wake or a release leaves a thread runnable until it runs), or will
    /// run no more; a fault completed since the first look is its own (the kernel counts a
    /// userfaultfd fault once the thread has retried it). The kernel's stack of it tells the
    /// rest. Woken from a fault: last taken off a CPU in a page fault, it has not got past it;
    /// on a CPU now, it has once its time there has grown (at the next tick: the retry takes
    /// microseconds); elsewhere, it has. Let go from a ptrace stop: last taken off a CPU there,
    /// it has not run since; anywhere else or on a CPU, it has. With no stack to read: once it
    /// has been put on a CPU, or its time there has grown.
    fn ran(&self, now: RunState, look: &mut Look) -> bool {
        let first = self.first;
        if !now.runnable || now.faults > first.faults {
            return true;
        }
        let on_cpu_since = now.on_cpu_ns != first.on_cpu_ns;
        let counts = on_cpu_since || now.switched_in != first.switched_in;
        match (self.since, look.stack(self.pid, self.tid)) {
            (_, None) => counts,
            (Since::Wake, Some(OffCpu::InFault)) => false,
            (Since::Wake, Some(OffCpu::OnCpu)) => on_cpu_since,
            (Since::Release, Some(OffCpu::InPtraceStop)) => false,
            // On a CPU, it runs beside the change as it would untraced; taken off one (or
            // inside a fault, whose message may not be queued yet), it has run once its time
            // there has grown.
            (Since::Start, Some(OffCpu::OnCpu)) => true,
            (Since::Start, Some(_)) => on_cpu_since,
            (Since::Wake, Some(OffCpu::InPtraceStop | OffCpu::Elsewhere))
            | (Since::Release, Some(OffCpu::InFault | OffCpu::OnCpu | OffCpu::Elsewhere)) => true,
        }
    }
}

impl Tracer {
    /// At a layout syscall's entry, before anything of it is done: the faults in its reach that
    /// were raised before it are handled first (the lane's reads, only when one may be waiting), and
    /// if another thread the lane woke from a page in its reach may not have got past that
    /// fault, the syscall is held (true) until it has. During a checkpoint it is held until the
    /// checkpoint's end, and looked at then.
    pub(super) fn hold_for_woken(&mut self, tid: i32, call: LayoutSyscall) -> bool {
        if self.reaching(tid, &call).is_none() {
            return false;
        }
        // Stopped for the check (its maps can be read through it), and let go by us.
        if self.checkpoints.park(tid, Resume::Syscall) {
            let course = Course {
                crossed: true,
                holds: 1,
                ..Course::default()
            };
            self.push_held(
                tid,
                call,
                Stage::CheckpointEnd,
                course,
                Vec::new(),
                Vec::new(),
            );
            return true;
        }
        self.enter(tid, call, Course::default())
    }

    /// Looks at a layout syscall as at its entry (no checkpoint under way): held until the
    /// threads woken in its reach (and those the last checkpoint let go) have got past their
    /// faults, or else, if the descriptor may hold a fault, until the lane has resolved what it
    /// holds; false if not held. Held again after each (at most `MOST_HOLDS` times).
    fn enter(&mut self, tid: i32, call: LayoutSyscall, course: Course) -> bool {
        if course.holds >= MOST_HOLDS || course.out_of_time(Instant::now()) {
            return false;
        }
        let course = course.held_again();
        // The lane first: once it has handled every fault raised before now, each such
        // thread's wake is noted, and the look at the threads below sees it. Once: other
        // threads may fault on and on meanwhile.
        let Some(space) = self
            .reaching(tid, &call)
            .and_then(|id| self.spaces.get(&id))
        else {
            return false;
        };
        let unhandled = space
            .uffd()
            .filter(|_| !course.drained)
            .and_then(|uffd| space.lane.unhandled_faults(uffd));
        let Some(mark) = unhandled else {
            let wakes = self.wakes_in_reach(tid, &call).unwrap_or_default();
            let also = self.others_to_run(tid);
            return self.hold(tid, call, Stage::Entry, course, wakes, &also);
        };
        tracing::trace!(
            tid,
            "a change waits for the lane to handle faults raised before it"
        );
        self.push_held(
            tid,
            call,
            Stage::Draining(mark),
            course,
            Vec::new(),
            Vec::new(),
        );
        true
    }

    /// Holds `tid`'s change at `stage`, with the change's deadline.
    fn push_held(
        &mut self,
        tid: i32,
        call: LayoutSyscall,
        stage: Stage,
        mut course: Course,
        waiting: Vec<Waited>,
        wakes: Vec<Wake>,
    ) {
        let now = Instant::now();
        let deadline = course.deadline_of(stage, now);
        self.held.changes.push(HeldChange {
            tid,
            call,
            stage,
            course,
            waiting,
            wakes,
            held_at: now,
            deadline,
        });
        self.held.poll = HELD_POLL_FIRST;
    }

    /// The threads of `tid`'s space, other than those the lane woke, that a change waits for:
    /// those the last checkpoint let go that were not seen run since (one may have been about
    /// to finish a first touch the checkpoint took it out of, and would have, untraced, before
    /// another thread's change), and those started lately (a new thread's first instructions
    /// wait for a CPU that untraced no tracer would have taken).
    fn others_to_run(&mut self, tid: i32) -> Vec<(i32, Since)> {
        let now = Instant::now();
        self.held
            .started
            .retain(|&(_, at)| now.saturating_duration_since(at) < STARTED_LATELY);
        let space = self.space_of(tid).map(|(_, s)| s);
        let same_space = |t: i32| t != tid && self.space_of(t).map(|(_, s)| s) == space;
        let released = self
            .held
            .released_by_checkpoint
            .iter()
            .map(|&t| (t, Since::Release));
        let started = self.held.started.iter().map(|&(t, _)| (t, Since::Start));
        released
            .chain(started)
            .filter(|&(t, _)| same_space(t))
            .collect()
    }

    /// These threads let go by the last checkpoint, or started lately, were seen run since.
    fn others_ran(&mut self, ran: &[(i32, Since)]) {
        for &(tid, since) in ran {
            match since {
                Since::Release => self.held.released_by_checkpoint.retain(|&t| t != tid),
                Since::Start => self.held.started.retain(|&(t, _)| t != tid),
                Since::Wake => {}
            }
        }
    }

    /// Moves the held changes on: those whose threads have all run (or that waited long
    /// enough) to their next look or their begin; forgets those whose thread is gone. Called at
    /// each turn of the loop.
    pub(super) fn release_held_changes(&mut self) {
        let now = Instant::now();
        if self.held.changes.is_empty() || now < self.held.looked + HELD_LOOK {
            return;
        }
        self.held.looked = now;
        let checkpoint = self.checkpoints.under_way();
        let mut look = Look::default();
        let mut next = Vec::new();
        let mut seen_run = Vec::new();
        let mut i = 0;
        while i < self.held.changes.len() {
            let drained = self.drained(&self.held.changes[i]);
            let held = &mut self.held.changes[i];
            let then = match (held.stage, checkpoint) {
                (Stage::CheckpointEnd, true) => None,
                (Stage::CheckpointEnd, false) => {
                    // Told of the end by `checkpoint_ended`, or else taken to have ended now.
                    if held.course.checkpoint_end.is_none() {
                        held.course = held.course.after_checkpoint(held.held_at, now);
                    }
                    Some(Next::AfterCheckpoint)
                }
                // A checkpoint began while it was held: it waits for its end, parked (the
                // checkpoint drains the descriptor itself). Once; a second one finds it begun.
                (_, true) if !held.course.crossed => {
                    held.stage = Stage::CheckpointEnd;
                    held.course.crossed = true;
                    held.held_at = now;
                    held.deadline = None;
                    held.waiting.clear();
                    let tid = held.tid;
                    self.checkpoints.park(tid, Resume::Syscall);
                    None
                }
                (_, true) => Some(Next::Begin),
                (Stage::Draining(_), false) => {
                    if drained {
                        Some(Next::Enter)
                    } else {
                        held.deadline
                            .is_some_and(|d| now >= d)
                            .then_some(Next::Begin)
                    }
                }
                (Stage::Entry | Stage::AfterCheckpoint, false) => {
                    held.waiting.retain(|w| {
                        let still = w.still_waiting(&mut look);
                        if !still {
                            seen_run.push((w.tid, w.since));
                        }
                        still
                    });
                    // The threads it waited for may have faulted again meanwhile: it is looked
                    // at as at its entry again, unless it has waited long enough.
                    if held.deadline.is_some_and(|d| now >= d) {
                        Some(Next::Begin)
                    } else {
                        held.waiting.is_empty().then_some(Next::Enter)
                    }
                }
            };
            match then {
                Some(then) => next.push((self.held.changes.swap_remove(i), then)),
                None => i += 1,
            }
        }
        self.others_ran(&seen_run);
        for (held, then) in next {
            let ran: Vec<Wake> = held
                .wakes
                .iter()
                .filter(|w| !held.waiting.iter().any(|t| t.tid == w.tid))
                .copied()
                .collect();
            self.wakes_ran(held.tid, &ran);
            if !held.waiting.is_empty() {
                tracing::debug!(
                    tid = held.tid,
                    waiting = ?held.waiting,
                    "threads still waiting for a CPU: the change goes on"
                );
            }
            if !self.still_at_entry(held.tid) {
                continue;
            }
            let (tid, call, course) = (held.tid, held.call, held.course);
            let held_again = match then {
                Next::Begin => false,
                Next::Enter => {
                    let drained = matches!(held.stage, Stage::Draining(_));
                    self.enter(tid, call, Course { drained, ..course })
                }
                Next::AfterCheckpoint => {
                    let wakes = self.wakes_in_reach(tid, &call).unwrap_or_default();
                    let also = self.others_to_run(tid);
                    self.hold(tid, call, Stage::AfterCheckpoint, course, wakes, &also)
                        || self.enter(tid, call, course)
                }
            };
            if !held_again {
                self.begin_decoded(tid, Some(call));
            }
        }
    }

    /// Whether `tid` is still in the seccomp stop its change is held at, to be begun. A held
    /// thread leaves it only when killed (by SIGKILL, or an `exit_group` or `execve` of another
    /// thread), and then must not be begun: that would start a syscall it never makes, and resume
    /// it from a later stop not collected yet (its exit stop, whose work would be skipped). Its
    /// later stops come to the loop (one collected here is queued for it), which lets it go.
    fn still_at_entry(&mut self, tid: i32) -> bool {
        if self.threads.get(&tid).is_none_or(|t| t.phase.exiting())
            || self.pending.iter().any(|stop| stop.tid() == tid)
        {
            return false;
        }
        // A ptrace request on a thread that is not in a ptrace stop fails (ESRCH): killed, it
        // runs to its exit. One in a stop not collected yet is reported by `waitpid`.
        if ptrace::event_message(tid).is_err() {
            tracing::debug!(tid, "a held change's thread left its stop: it is dropped");
            return false;
        }
        match waitpid(
            Pid::from_raw(tid),
            Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG),
        ) {
            Ok(WaitStatus::StillAlive) => true,
            Ok(status) => {
                tracing::debug!(
                    tid,
                    ?status,
                    "a held change's thread stopped again: dropped"
                );
                let stop = self.stop_of(status);
                self.pending.extend(stop);
                false
            }
            Err(e) => {
                tracing::debug!(tid, "waiting for a held change's thread: {e}; dropped");
                false
            }
        }
    }

    /// `tid` left the stop its change is held at, or its id is another thread's now (an exec
    /// by another thread of its process takes the leader's): its change is forgotten, and
    /// whoever saw it leave lets it go. A checkpoint it was parked for lets it go no more.
    pub(super) fn forget_held_change(&mut self, tid: i32) {
        let Some(i) = self.held.changes.iter().position(|h| h.tid == tid) else {
            return;
        };
        let held = self.held.changes.swap_remove(i);
        if held.stage == Stage::CheckpointEnd {
            self.checkpoints.unpark(tid, Resume::Syscall);
        }
    }

    /// Whether a change held for its lane's reads (`Stage::Draining`) may go on: the lane has
    /// handled them, or is gone.
    fn drained(&self, held: &HeldChange) -> bool {
        let Stage::Draining(mark) = held.stage else {
            return false;
        };
        self.space_of(held.tid)
            .and_then(|(_, space)| self.spaces.get(&space))
            .is_none_or(|space| space.lane.handled(mark))
    }

    /// Holds `tid` at its entry until the threads of `wakes` that may not have got past their
    /// faults have, and those of `also` that have not run since; false (nothing held) if none
    /// may not have. At most `MOST_WAITED` are waited for, the last woken first.
    fn hold(
        &mut self,
        tid: i32,
        call: LayoutSyscall,
        stage: Stage,
        course: Course,
        mut wakes: Vec<Wake>,
        also: &[(i32, Since)],
    ) -> bool {
        wakes.sort_unstable_by_key(|w| std::cmp::Reverse(w.at));
        wakes.truncate(MOST_WAITED);
        let mut look = Look::default();
        let mut waiting = Vec::new();
        let (not_run, ran): (Vec<Wake>, Vec<Wake>) = wakes.into_iter().partition(|w| {
            // Woken before the checkpoint it crossed, a thread was stopped by it since: last
            // taken off its CPU in the ptrace stop, or let go from it. Woken after, it may
            // still be in the fault it was woken from.
            let since = course.since_wake(w.at);
            let waited = self
                .threads
                .get(&w.tid)
                .and_then(|t| Waited::first_look(t.pid, w.tid, since, &mut look));
            waiting.extend(waited);
            waited.is_some()
        });
        self.wakes_ran(tid, &ran);
        let mut seen_run = Vec::new();
        for &(other, other_since) in also {
            if waiting.len() >= MOST_WAITED {
                break;
            }
            if waiting.iter().any(|w| w.tid == other) {
                continue;
            }
            let waited = self
                .threads
                .get(&other)
                .and_then(|t| Waited::first_look(t.pid, other, other_since, &mut look));
            match waited {
                Some(waited) => waiting.push(waited),
                None => seen_run.push((other, other_since)),
            }
        }
        self.others_ran(&seen_run);
        tracing::trace!(tid, ?stage, ?waiting, "a change about to run");
        if waiting.is_empty() {
            return false;
        }
        self.push_held(tid, call, stage, course, waiting, not_run);
        true
    }

    /// Tells the lane of `tid`'s space that these threads were seen past their faults.
    fn wakes_ran(&self, tid: i32, ran: &[Wake]) {
        if let Some(space) = self
            .space_of(tid)
            .and_then(|(_, space)| self.spaces.get(&space))
        {
            space.lane.ran(ran);
        }
    }

    /// The space of `tid`, if `call` may change pages of it and its pages are followed by a
    /// userfaultfd.
    fn reaching(&self, tid: i32, call: &LayoutSyscall) -> Option<crate::event::SpaceId> {
        let (_, id) = self.space_of(tid)?;
        let space = self.spaces.get(&id)?;
        space.uffd()?;
        let reaches = !call.reach().is_empty()
            || call
                .released(space.brk, self.config.lane.page_size)
                .is_some();
        reaches.then_some(id)
    }

    /// The lane's wakes, not seen run, of the threads but `tid` from a page `call` may change.
    fn wakes_in_reach(&self, tid: i32, call: &LayoutSyscall) -> Option<Vec<Wake>> {
        let id = self.reaching(tid, call)?;
        let space = self.spaces.get(&id)?;
        let mut reach = call.reach();
        reach.extend(call.released(space.brk, self.config.lane.page_size));
        Some(space.lane.woken_in(&reach, tid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A thread runnable, off a CPU where `stack` says, its counts as they were at the first
    /// look: what `Waited::ran` decides on with nothing else to go by.
    fn ran_unchanged(since: Since, stack: OffCpu) -> bool {
        let state = RunState {
            runnable: true,
            faults: 7,
            on_cpu_ns: 1000,
            switched_in: 3,
        };
        let waited = Waited {
            pid: 1,
            tid: 2,
            first: state,
            since,
        };
        let mut look = Look::default();
        look.stacks.insert(2, Some(stack));
        waited.ran(state, &mut look)
    }

    #[test]
    fn a_thread_woken_after_the_checkpoint_is_waited_for_in_its_fault() {
        let t0 = Instant::now();
        let course = Course::default().after_checkpoint(t0, t0 + 10 * MS);
        // Woken before the check's end, and stopped by it since: in a fault now, it got past
        // its release and faults again.
        let before = course.since_wake(t0 + 5 * MS);
        assert_eq!(before, Since::Release);
        assert!(ran_unchanged(before, OffCpu::InFault));
        assert!(!ran_unchanged(before, OffCpu::InPtraceStop));
        // Woken after it: still in the fault it was woken from.
        let after = course.since_wake(t0 + 11 * MS);
        assert_eq!(after, Since::Wake);
        assert!(!ran_unchanged(after, OffCpu::InFault));
        // No checkpoint crossed: every wake is a wake.
        assert_eq!(Course::default().since_wake(t0), Since::Wake);
    }

    #[test]
    fn a_change_is_held_one_patience_in_all() {
        let t0 = Instant::now();
        let mut course = Course::default();
        assert_eq!(
            course.deadline_of(Stage::Entry, t0),
            Some(t0 + RUN_PATIENCE)
        );
        // Held again later: the first hold's deadline.
        let later = t0 + 600 * MS;
        assert_eq!(
            course.deadline_of(Stage::Entry, later),
            Some(t0 + RUN_PATIENCE)
        );
        assert!(!course.out_of_time(later));
        assert!(course.out_of_time(t0 + RUN_PATIENCE));
        // After a checkpoint, sooner still, never later than the change's own.
        let near_end = t0 + RUN_PATIENCE - 5 * MS;
        assert_eq!(
            course.deadline_of(Stage::AfterCheckpoint, near_end),
            Some(t0 + RUN_PATIENCE)
        );
        assert_eq!(
            course.deadline_of(Stage::AfterCheckpoint, later),
            Some(later + AFTER_CHECKPOINT_PATIENCE)
        );
    }

    #[test]
    fn the_time_parked_for_a_checkpoint_is_not_counted() {
        let t0 = Instant::now();
        let mut course = Course::default();
        // Parked at its entry: no deadline, none started.
        assert_eq!(course.deadline_of(Stage::CheckpointEnd, t0), None);
        assert_eq!(course.deadline, None);
        let _ = course.deadline_of(Stage::Entry, t0);
        // Parked from 200 ms to 900 ms: its deadline moves on by 700 ms.
        let course = course.after_checkpoint(t0 + 200 * MS, t0 + 900 * MS);
        assert_eq!(course.deadline, Some(t0 + RUN_PATIENCE + 700 * MS));
        assert_eq!(course.checkpoint_end, Some(t0 + 900 * MS));
    }
}
