//! `--verify`: checks of the stream against the kernel's page tables, at each process's last
//! exit stop and, with `--verify-every`, at checkpoints where every traced thread is stopped.
//!
//! A space with io_uring workers (`iou-wrk-*`, `iou-sqp-*`) is never quiescent while they live:
//! they are threads of the program that ptrace cannot stop, and they take first touches. Such a
//! space is left out of checkpoints, and its last check waits for the workers to end
//! (docs/ordering.md, *io_uring workers*).

use std::collections::{BTreeSet, HashSet};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::Tracer;
use crate::actors::lane::LaneMessage;
use crate::event::{Event, SpaceId, VerifyPoint, WarningKind};
use crate::kernel::procfs::{self, IoWorker};
use crate::kernel::ptrace::{self, Resume};
use crate::test_hooks::{self, Fault};

/// How long a checkpoint waits for every thread to stop before it gives up and lets them go (a
/// thread can be stuck where ptrace cannot stop it, e.g. in an uninterruptible sleep).
pub(super) const PATIENCE: Duration = Duration::from_secs(2);

/// How long the tracer waits for a check to be answered before it lets the threads go: far
/// longer than any check takes, even behind a slow reader of the stream; it only bounds a wait
/// that something went wrong in.
const ANSWER_PATIENCE: Duration = Duration::from_secs(60);

/// How often a wait for a check's answer looks whether an actor failed meanwhile.
const ANSWER_SLICE: Duration = Duration::from_secs(1);

/// After a checkpoint, the threads run at least this many times as long as it held them, but
/// never more than `MOST_RESTS` intervals (`--verify-every`): one slow check does not space out
/// the rest.
const RUN_SHARE: u32 = 2;
const MOST_RESTS: u32 = 5;

/// The longest the tracer sleeps in `waitpid`: a stuck checkpoint is given up on time whatever
/// the interval, and an actor's failure is seen.
pub(super) const TICK: Duration = Duration::from_millis(100);

/// `--verify-every`: the checkpoint under way, when the next is due, and the spaces whose
/// io_uring workers stderr was told of (the stream has a warning per checkpoint; stderr, the
/// first).
#[derive(Default)]
pub(super) struct Checkpoints {
    under_way: Option<Checkpoint>,
    next_due: Option<Instant>,
    told_io_workers: HashSet<SpaceId>,
}

impl Checkpoints {
    /// The trace begins: the first checkpoint is due an interval from now.
    pub(super) fn start(&mut self, every: Option<Duration>) {
        self.next_due = every.map(|every| Instant::now() + every);
    }

    pub(super) fn under_way(&self) -> bool {
        self.under_way.is_some()
    }

    /// Holds a stopped thread until the check under way is done; false if none is.
    pub(super) fn park(&mut self, tid: i32, how: Resume) -> bool {
        match self.under_way.as_mut() {
            Some(c) => {
                c.park(tid, how);
                true
            }
            None => false,
        }
    }

    /// A thread that will run no user code any more, or is held elsewhere: the check under way
    /// does not wait for it.
    pub(super) fn forget(&mut self, tid: i32) {
        if let Some(c) = self.under_way.as_mut() {
            c.waiting.remove(&tid);
        }
    }

    /// A parked thread is let go by someone else (`how` names the stop it was parked at).
    pub(super) fn unpark(&mut self, tid: i32, how: Resume) {
        if let Some(c) = self.under_way.as_mut() {
            c.parked.retain(|&parked| parked != (tid, how));
        }
    }

    /// The check under way is given up (the trace detaches): the threads it parked, to let go.
    pub(super) fn abandon(&mut self) -> Vec<(i32, Resume)> {
        self.under_way.take().map(|c| c.parked).unwrap_or_default()
    }
}

/// A stop-the-world check in progress (`--verify-every`): every thread is asked to stop, and
/// each one that stops, for whatever reason, is held until all have.
struct Checkpoint {
    /// Threads asked to stop whose stop has not been seen yet.
    waiting: HashSet<i32>,
    /// Stopped threads and how each is to be let go, in the order they stopped.
    parked: Vec<(i32, Resume)>,
    began: Instant,
    /// Spaces left out because io_uring workers run in them: their threads were not stopped.
    with_io_workers: Vec<(SpaceId, i32, Vec<IoWorker>)>,
}

impl Checkpoint {
    /// Holds a stopped thread until the check is done.
    fn park(&mut self, tid: i32, how: Resume) {
        self.waiting.remove(&tid);
        self.parked.push((tid, how));
    }
}

impl Tracer {
    /// Starts a checkpoint if one is due. The next one is due an interval after this one ends,
    /// so that a checkpoint longer than the interval cannot starve the program.
    pub(super) fn checkpoint_if_due(&mut self) {
        if let (Some(every), Some(next)) = (self.config.verify_every, self.checkpoints.next_due)
            && Instant::now() >= next
            && !self.checkpoints.under_way()
        {
            self.checkpoints.next_due = Some(Instant::now() + every);
            self.begin_checkpoint();
        }
    }

    /// Asks every thread that can run user code to stop, but those of a space with io_uring
    /// workers, which cannot be checked anyway: they are not disturbed.
    fn begin_checkpoint(&mut self) {
        let mut waiting = HashSet::new();
        let held = self.held_borrowers();
        let with_io_workers: Vec<(SpaceId, i32, Vec<IoWorker>)> = self
            .spaces
            .iter()
            .filter(|(_, s)| s.follows_pages())
            .flat_map(|(&id, _)| self.io_workers_in(id))
            .collect();
        for (&tid, t) in self.threads.iter() {
            // Not yet attached, waiting for a vfork child, left in a group stop, or past the
            // exit stop: none of these can touch memory.
            // Held at a `ptrace` call until the thread it borrows is handed over: it stopped.
            if !t.phase.may_touch_memory() || held.contains(&tid) {
                continue;
            }
            let space = self.space_of_process(t.pid);
            if with_io_workers.iter().any(|(id, ..)| Some(*id) == space) {
                continue;
            }
            // ESRCH: it is dying; its end will be reported, and it needs no stopping.
            if ptrace::interrupt(tid).is_ok() {
                waiting.insert(tid);
            }
        }
        self.checkpoints.under_way = Some(Checkpoint {
            waiting,
            parked: Vec::new(),
            began: Instant::now(),
            with_io_workers,
        });
    }

    /// Once every thread of a checkpoint has stopped (or died), checks every space and lets them
    /// all go. A thread that cannot be stopped in time (it is inside a syscall that ptrace cannot
    /// interrupt, such as a large `MADV_POPULATE_WRITE` under load) only costs its own space this
    /// check: the spaces whose threads all stopped are checked, and the stream says which was not.
    pub(super) fn settle_checkpoint(&mut self) {
        let threads = &self.threads;
        let Some(c) = self.checkpoints.under_way.as_mut() else {
            return;
        };
        c.waiting.retain(|t| threads.contains_key(t));
        let patience = if test_hooks::fails(Fault::CheckpointImpatient, None) {
            Duration::from_millis(20)
        } else {
            PATIENCE
        };
        let late = c.began.elapsed() > patience;
        if !c.waiting.is_empty() && !late {
            return;
        }
        let Some(mut c) = self.checkpoints.under_way.take() else {
            return;
        };
        let mut unstopped: Vec<(SpaceId, i32)> = c
            .waiting
            .iter()
            .filter_map(|&tid| self.space_of(tid).map(|(_, space)| (space, tid)))
            .collect();
        unstopped.sort_unstable();
        let mut targets: Vec<(SpaceId, i32)> = self
            .spaces
            .iter()
            .filter(|(_, s)| s.follows_pages())
            .filter(|(id, _)| !unstopped.iter().any(|(space, _)| space == *id))
            .filter_map(|(&id, _)| self.parked_in(id, &c.parked).map(|tid| (id, tid)))
            .collect();
        // Workers made since the checkpoint began (every thread of the space is stopped now, so
        // none can be made until they are let go).
        for &(space, _) in &targets {
            c.with_io_workers.extend(self.io_workers_in(space));
        }
        targets.retain(|(space, _)| !c.with_io_workers.iter().any(|(id, ..)| id == space));
        for &(_, tid) in &targets {
            self.sample_layout_of(tid);
        }
        self.check(&targets, VerifyPoint::Checkpoint);
        for (space, pid, workers) in c.with_io_workers {
            let message = format!(
                "space {space} was not checked at this checkpoint: io_uring worker thread(s) {} \
                 of process {pid} run where ptrace cannot stop them",
                tids(&workers)
            );
            let what = WarningKind::CheckpointSkipped;
            if self.checkpoints.told_io_workers.insert(space) {
                self.warn(Some(pid), Some(space), what, message);
            } else {
                // Every checkpoint while they live: on stderr once is enough.
                tracing::debug!(pid, space, "{message}");
                let event = Event::Warning {
                    pid: Some(pid),
                    space: Some(space),
                    what,
                    message,
                };
                self.observed(space, event);
            }
        }
        for (space, tid) in unstopped {
            let pid = self.threads.get(&tid).map(|t| t.pid);
            self.warn(
                pid,
                Some(space),
                WarningKind::CheckpointSkipped,
                format!(
                    "space {space} was not checked at this checkpoint: thread {tid} ({}) did not \
                     stop within {patience:?}",
                    procfs::whereabouts(tid)
                ),
            );
        }
        // Taken before the threads go, as it was before they were kept here: a wake during
        // the releases below is one since the end (woken.rs).
        let end = Instant::now();
        let mut released = Vec::new();
        for (tid, how) in c.parked {
            // A layout change held at its entry by woken.rs goes from there, after these.
            if !self.held.holds(tid) {
                self.release_now(tid, how);
                released.push(tid);
            }
        }
        self.held.checkpoint_ended(end, released);
        // The next interval starts now that the threads run again, and lets them run at least
        // twice as long as this checkpoint held them, up to `MOST_RESTS` intervals: back to
        // back, checks that take longer than the interval (many threads that wait for a CPU to
        // reach their stop, on a loaded machine) leave the program a sliver of time in which a
        // thread that must wait for a CPU never gets one.
        if let Some(every) = self.config.verify_every {
            let held = end.saturating_duration_since(c.began);
            let rest = (RUN_SHARE * held).min(MOST_RESTS * every);
            self.checkpoints.next_due = Some(Instant::now() + every.max(rest));
        }
    }

    /// A thread of the space held in a ptrace stop, to read its maps through: a stopped thread
    /// still has its mm (one that is dying may already have dropped it). A space with none has
    /// no thread left to check it with.
    fn parked_in(&self, space: SpaceId, parked: &[(i32, Resume)]) -> Option<i32> {
        let in_space: std::collections::HashSet<i32> =
            self.threads_in(space).map(|(tid, _)| tid).collect();
        parked
            .iter()
            .map(|&(tid, _)| tid)
            .filter(|tid| in_space.contains(tid))
            .min()
    }

    /// At a thread's exit stop: if no other thread of its space can run user code any more, this
    /// is a quiescent point, and `--verify` checks it, once its io_uring workers have ended.
    pub(super) fn verify_at_exit(&mut self, tid: i32) {
        if self.config.verify
            && let Some((pid, space)) = self.space_of(tid)
            && !self.lineage.exec_interrupted(pid)
            && self.spaces.get(&space).is_some_and(|s| s.follows_pages())
            && self.space_is_quiescent(space)
        {
            match self.io_workers_ended(space) {
                Ok(()) => self.check(&[(space, tid)], VerifyPoint::Exit),
                Err(why) => self.warn(
                    Some(pid),
                    Some(space),
                    WarningKind::CheckpointSkipped,
                    format!("space {space} was not checked at its last exit stop: {why}"),
                ),
            }
        }
    }

    /// The io_uring workers of each process of a space that has any (threads we trace are not
    /// looked at). A process that cannot be read is gone, and so are its workers.
    pub(super) fn io_workers_in(&self, space: SpaceId) -> Vec<(SpaceId, i32, Vec<IoWorker>)> {
        let pids: BTreeSet<i32> = self.threads_in(space).map(|(_, t)| t.pid).collect();
        pids.into_iter()
            .filter_map(|pid| {
                let workers =
                    procfs::io_workers(pid, |tid| self.threads.contains_key(&tid)).ok()?;
                (!workers.is_empty()).then_some((space, pid, workers))
            })
            .collect()
    }

    /// Waits, at the exit stop of a space's last thread, until its io_uring workers have ended.
    /// When the thread group exits, each worker has SIGKILL pending: it finishes the work item
    /// it is in and exits, untouched by the stop we hold its last thread in. A worker without
    /// it (the last thread called `exit`, not `exit_group`) lives until that thread's exit
    /// cancels its io_uring, after this stop: nothing can be checked then.
    fn io_workers_ended(&self, space: SpaceId) -> Result<(), String> {
        let began = Instant::now();
        // Between taking SIGKILL off its pending set and marking itself exiting, a worker looks
        // like one that is not ending: only a few looks in a row say it is not.
        let mut not_ending = 0;
        loop {
            let workers: Vec<IoWorker> = self
                .io_workers_in(space)
                .into_iter()
                .flat_map(|(_, _, w)| w)
                .collect();
            if workers.is_empty() {
                return Ok(());
            }
            if workers.iter().all(|w| w.ending) {
                not_ending = 0;
            } else {
                not_ending += 1;
            }
            if not_ending >= 3 {
                return Err(format!(
                    "io_uring worker thread(s) {} still run (the thread group is not exiting)",
                    tids(&workers)
                ));
            }
            if began.elapsed() > PATIENCE {
                return Err(format!(
                    "io_uring worker thread(s) {} did not end within {PATIENCE:?}",
                    tids(&workers)
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Whether no thread of the space can run user code (each has reached its exit stop, waits
    /// for a vfork child, or has not started).
    pub(super) fn space_is_quiescent(&self, space: SpaceId) -> bool {
        self.threads_in(space)
            .all(|(_, t)| !t.phase.may_run_user_code())
    }

    /// Asks each space's lane to check the stream against the kernel, and waits until each has
    /// read the kernel's side (the threads must not run before that). A lane that cannot check
    /// sends its `verify` line as skipped and drops the reply; an answer that does not come in
    /// time is given up with a warning.
    pub(super) fn check(&mut self, targets: &[(SpaceId, i32)], point: VerifyPoint) {
        let mut answers = Vec::new();
        for &(id, tid) in targets {
            if !self.spaces.contains_key(&id) {
                continue;
            }
            let Some(pid) = self.threads.get(&tid).map(|t| t.pid) else {
                continue;
            };
            // Ranges followed by scans are read now, while the threads are stopped: the check
            // then compares a stream that is exact there too.
            self.scan_whole(pid, id);
            let Some(space) = self.spaces.get(&id) else {
                continue;
            };
            let (done, answer) = mpsc::sync_channel(1);
            space.lane.send(LaneMessage::Checkpoint {
                pid,
                tid,
                point,
                done,
            });
            answers.push((id, answer));
        }
        for (id, answer) in answers {
            match self.await_lane(&answer) {
                LaneAnswer::Answered | LaneAnswer::ActorFailed => {}
                // The lane could not check (it failed: its `verify` line says `skipped`), or
                // the stream's actors are gone (the supervisor ends the run).
                LaneAnswer::Dropped => {
                    tracing::debug!(space = id, "a check got no answer: skipped");
                }
                LaneAnswer::Late => self.warn(
                    None,
                    Some(id),
                    WarningKind::CheckpointSkipped,
                    format!(
                        "a check of space {id} got no answer within {ANSWER_PATIENCE:?}; its \
                         threads were let go"
                    ),
                ),
            }
        }
    }

    /// Waits for a lane's answer to a message the tracer must not go on before (a check, a
    /// quiesce), looking every second whether an actor failed meanwhile; gives up after
    /// `ANSWER_PATIENCE`.
    pub(super) fn await_lane(&self, answer: &mpsc::Receiver<()>) -> LaneAnswer {
        let asked = Instant::now();
        loop {
            match answer.recv_timeout(ANSWER_SLICE) {
                Ok(()) => return LaneAnswer::Answered,
                Err(mpsc::RecvTimeoutError::Disconnected) => return LaneAnswer::Dropped,
                Err(mpsc::RecvTimeoutError::Timeout) if self.supervisor.failure().is_some() => {
                    return LaneAnswer::ActorFailed;
                }
                Err(mpsc::RecvTimeoutError::Timeout) if asked.elapsed() >= ANSWER_PATIENCE => {
                    return LaneAnswer::Late;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
    }
}

/// How a wait for a lane's answer ended.
pub(super) enum LaneAnswer {
    Answered,
    /// The reply was dropped: the lane could not do it, or is gone.
    Dropped,
    /// An actor failed meanwhile: the run is ending.
    ActorFailed,
    /// No answer within `ANSWER_PATIENCE`.
    Late,
}

/// Worker thread ids for a message: `[123, 124]`.
fn tids(workers: &[IoWorker]) -> String {
    format!("{:?}", workers.iter().map(|w| w.tid).collect::<Vec<_>>())
}
