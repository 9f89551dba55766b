//! The tracer: one dedicated OS thread that makes every ptrace call of the trace.
//!
//! It starts the program seized, with a seccomp filter so that only memory-layout syscalls stop,
//! follows every clone, fork, vfork, exec and exit, gives each new address space a userfaultfd
//! (injected into the tracee) and a lane, and reports what it sees to the space's lane while the
//! thread that caused it is still stopped. It never waits on a lane to resolve anything: besides
//! `waitpid` it blocks only on a full lane (backpressure) and, with `--verify`, on a check of a
//! space whose threads are all stopped.
//!
//! Under `attach` it seizes processes already running instead, with event stops only, and
//! samples their layout (attach.rs).
//!
//! The rooms: this file has the loop and the one place every [`Stop`] is matched; `thread.rs`
//! a traced thread's phase and what its syscalls' stops are for;
//! `lifecycle.rs` follows threads and processes (clone, fork, exec, exit, job control);
//! `layout.rs` reports layout syscalls; `stacks.rs` takes their call stacks (`--stacks`);
//! `escapes.rs` answers seccomp stops that are not the program's layout changes;
//! `names.rs` threads naming themselves; `untaken.rs` ends
//! a process that cannot take a fatal signal, as untraced; `notif.rs` sees
//! those a program's own filter hides from ours; `lending.rs` lends a thread to a ptrace
//! caller of its own space (LeakSanitizer); `races.rs` holds and describes again what raced;
//! `woken.rs` holds a change until the threads the lane woke in its reach have run;
//! `spaces.rs` makes address spaces (injection, registration, snapshots); `mappings.rs` writes
//! a mapping to its lane and follows it (registered, or by scans); `shadow.rs` is each space's
//! shadow of what it follows (scanned, seen, stacks, tracked, swapped, ...); `scans.rs`,
//! `stack_growth.rs` and `unseen.rs` follow pages by page-table scans; `unread.rs` the pages
//! recorded and released between two of them (`--faults records`); `attach.rs` is `attach`;
//! `rss.rs` the `rss` lines; `shared.rs` frames shared since a fork (`unshared` lines);
//! `pressure.rs` what the kernel takes away unasked; `checkpoints.rs` is `--verify`;
//! `namespaces.rs` tells lanes the ids of threads in a child PID namespace; `records.rs` gives
//! each thread followed by `--faults records` its ring of fault records.

mod attach;
mod checkpoints;
mod escapes;
mod layout;
mod lending;
mod lifecycle;
mod mappings;
mod names;
mod namespaces;
mod notif;
mod pressure;
mod races;
mod records;
mod rss;
mod scans;
mod shadow;
mod shared;
mod spaces;
mod stack_growth;
mod stacks;
mod thread;
mod unread;
mod unseen;
mod untaken;
mod woken;

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::control::RunControl;
use super::lane::LaneConfig;
use super::sequencer::{SequencerHandle, SequencerMessage, Stamped};
use super::supervisor::Supervisor;
use crate::event::{Event, SpaceId, WarningKind};
use crate::kernel::ptrace::{self, Expect, Resume, Stop};
use crate::kernel::spawn::{self, Prepared};
use crate::kernel::thp::ThpPolicy;
use crate::kernel::tick::{self, TracerWaker};
use crate::stacks::{StackShared, Stacks, TouchSamplers};

use spaces::Space;
use thread::{AtExit, BegunLayout, Phase, Thread};
pub use untaken::ProgramSignals;

/// The program as [`Tracer::start_program`] left it, for the tracer made after: seized (or
/// already dead), and its first stop unless that was its `execve`'s, which it was let past.
pub struct StartedProgram {
    spawned: spawn::Spawned,
    first_stop: Option<WaitStatus>,
}

impl StartedProgram {
    /// Kills and reaps it: the run failed to start.
    pub fn abandon(self) {
        self.spawned.abandon();
    }
}

/// What a trace follows.
#[derive(Clone)]
pub enum Target {
    /// A program started for the trace (`run`): its argv, and whether its stdout goes to stderr
    /// (the stream has stdout).
    Spawn {
        program: PathBuf,
        argv: Vec<OsString>,
        stdout_to_stderr: bool,
    },
    /// Processes already running (`attach`), and with `follow_forks` the children they make.
    Attach { pids: Vec<i32>, follow_forks: bool },
}

pub struct TracerConfig {
    pub target: Target,
    /// How each space's private anonymous pages are followed.
    pub follow_by: FollowBy,
    /// How each space's lane is set up; its page size is the tracer's too.
    pub lane: LaneConfig,
    /// `--verify`: check the stream against the kernel at each process's last exit stop.
    pub verify: bool,
    /// `--verify-every`: also stop every traced thread this often and check every space.
    pub verify_every: Option<Duration>,
    /// Which private anonymous ranges may get transparent huge pages, and so are followed by
    /// scans rather than registered (under `FollowBy::Faults`).
    pub thp: ThpPolicy,
    /// `--sample-ms`: how often the ranges followed by scans are read while the program runs.
    pub sample: Duration,
    /// `--stacks`: the stack taker, whose new sites go to the symbolizer.
    pub stacks: Option<Stacks>,
    /// `--touch-stacks`: what each lane takes its first touches' stacks with, and the samplers
    /// the tracer opens on every thread.
    pub touch_stacks: Option<(StackShared, Arc<TouchSamplers>)>,
    /// `--only`, `--region`, `--min-size`: the programs and mappings whose memory is followed
    /// (`--threads` is the state actor's).
    pub selection: crate::selection::Selection,
    /// `--threads`: where each lane notes the names of the threads whose faults it resolves.
    pub thread_names: Option<Arc<crate::selection::ThreadNames>>,
}

/// How each space's private anonymous pages are followed (`run --faults`, `--no-faults`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FollowBy {
    /// A userfaultfd injected into each space: every first touch with its thread, in order; the
    /// ranges that may get huge pages by scans.
    Faults,
    /// Page-table scans only: nothing injected or registered, so the kernel behaves as untraced.
    Scans,
    /// Page-table scans for residency, and the kernel's records of each thread's page faults
    /// for whose fault made each page resident (`--faults records`).
    Records,
    /// Not at all: mappings only.
    Nothing,
}

impl FollowBy {
    /// Whether every private anonymous range is followed by page-table scans.
    pub fn scans_everything(self) -> bool {
        match self {
            FollowBy::Scans | FollowBy::Records => true,
            FollowBy::Faults | FollowBy::Nothing => false,
        }
    }
}

/// How the traced program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramEnd {
    Exited(i32),
    Signaled(i32),
}

impl ProgramEnd {
    /// The exit status a shell would report.
    pub fn shell_status(self) -> i32 {
        match self {
            ProgramEnd::Exited(code) => code,
            ProgramEnd::Signaled(sig) => 128 + sig,
        }
    }
}

/// Why a trace ended before the program did.
#[derive(Debug)]
pub enum TraceError {
    /// The program could not be started, or ptrace refused us.
    Io(io::Error),
    /// An actor failed (see `Supervisor`); the traced program was killed.
    ActorFailed(String),
    /// `attach` could not take a process: the line to print.
    Attach(String),
}

impl From<io::Error> for TraceError {
    fn from(e: io::Error) -> Self {
        TraceError::Io(e)
    }
}

#[derive(Debug)]
struct Process {
    /// None before the first exec of the traced program.
    space: Option<SpaceId>,
    /// Its minor faults by the kernel's count when it joined its space (0 for a new child),
    /// and at its last exit stop (`--faults scan` only: unseen.rs).
    faults_at_join: u64,
    faults_at_exit: Option<u64>,
    /// Its memory by the kernel's count, as the last `rss` line gave it (rss.rs).
    rss: Option<crate::kernel::procfs::RssFigures>,
    /// Its memory cgroup when its figures last changed: where an OOM kill would be counted.
    memory_cgroup: Option<crate::kernel::oom::Cgroup>,
}

/// A periodic read (timed scans, `rss` lines, looks for evicted pages) may take at most this
/// share of the tracer's time: the next one waits this many times as long as the last one took
/// on the tracer's CPU, if that is longer than the sample period.
const COST_FACTOR: u32 = 50;

/// When a periodic read that took `took` of the tracer's CPU is next due: a sample period from
/// now, or longer by `COST_FACTOR`.
fn next_read(sample: Duration, took: Duration) -> Instant {
    Instant::now() + sample.max(took * COST_FACTOR)
}

/// The end of the x86_64 user address space (47-bit, 4-level paging; the kernel places nothing
/// above it unless a program asks for 5-level addresses with a hint).
const USER_SPACE_END: u64 = 0x7fff_ffff_f000;

/// The tracer's state: what every room reads (the configuration, the threads, processes and
/// spaces, the actors it writes to, the stops still to handle), then what one room owns, each in
/// a type of that room's file whose fields only it touches.
pub struct Tracer {
    config: TracerConfig,
    sequencer: SequencerHandle,
    supervisor: Supervisor,
    signals: Arc<ProgramSignals>,
    control: RunControl,
    threads: HashMap<i32, Thread>,
    processes: HashMap<i32, Process>,
    spaces: HashMap<SpaceId, Space>,
    /// Stops learned of while handling another (a tracee that died during an injection, a held
    /// syscall exit whose turn came): handled before the next `waitpid`.
    pending: VecDeque<Stop>,
    /// The OOM killer's kills, to tell one from any other `SIGKILL` (kernel/oom.rs): watched
    /// where `rss` lines find each process, read at its death.
    oom: crate::kernel::oom::OomWatch,
    /// lifecycle.rs: the program's first process, and children and execs between two stops.
    lineage: lifecycle::Lineage,
    /// spaces.rs: ids, announcements and the lanes' runtime for new spaces.
    maker: spaces::SpaceMaker,
    /// checkpoints.rs: `--verify-every`.
    checkpoints: checkpoints::Checkpoints,
    /// races.rs: syscall exits held back for another thread's report.
    deferred: races::DeferredExits,
    /// woken.rs: layout changes held at their entry for the threads woken in their reach.
    held: woken::HeldChanges,
    /// lending.rs: threads lent to a tracer of their own space.
    lent: lending::Lent,
    /// shared.rs: when shared pages are next read.
    shared_reads: shared::SharedReads,
    /// rss.rs: when the `rss` figures are next read.
    rss_reads: rss::RssReads,
    /// namespaces.rs: the ids of threads in a child PID namespace.
    namespaces: namespaces::NamespaceIds,
    /// records.rs: the spaces told their threads' rings would take too many descriptors.
    unrecorded: records::Unrecorded,
}

impl Tracer {
    pub fn new(
        config: TracerConfig,
        runtime: tokio::runtime::Handle,
        sequencer: SequencerHandle,
        supervisor: Supervisor,
        signals: Arc<ProgramSignals>,
        control: RunControl,
    ) -> Self {
        Self {
            config,
            sequencer,
            supervisor,
            signals,
            control,
            threads: HashMap::new(),
            processes: HashMap::new(),
            spaces: HashMap::new(),
            pending: VecDeque::new(),
            oom: crate::kernel::oom::OomWatch::start(),
            lineage: lifecycle::Lineage::default(),
            maker: spaces::SpaceMaker::new(runtime),
            checkpoints: checkpoints::Checkpoints::default(),
            deferred: races::DeferredExits::default(),
            held: woken::HeldChanges::new(),
            lent: lending::Lent::default(),
            shared_reads: shared::SharedReads::new(),
            rss_reads: rss::RssReads::new(),
            namespaces: namespaces::NamespaceIds::default(),
            unrecorded: records::Unrecorded::default(),
        }
    }

    /// `run`: starts the program seized, under the filter, on the thread that will be the
    /// tracer's, before the tracer and its actors are made (their making overlaps the program's
    /// start and exec); no program for `attach`. Raises the descriptor limit either way.
    pub fn start_program(
        target: &Target,
        follow_by: FollowBy,
    ) -> Result<Option<StartedProgram>, TraceError> {
        // For `attach` too: two descriptors per live space, whoever made it.
        if let Err(e) = spawn::raise_descriptor_limit() {
            tracing::debug!("raising the descriptor limit: {e}");
        }
        let Target::Spawn {
            program,
            argv,
            stdout_to_stderr,
        } = target
        else {
            return Ok(None);
        };
        // Execs stop where pages may be followed by scans (a collapse is, whatever the policy):
        // their last ones are read there.
        let filter = spawn::seccomp_filter(follow_by != FollowBy::Nothing)?;
        let prepared = Prepared::new(program, argv, *stdout_to_stderr, Some(filter))?;
        let spawned = spawn::spawn_seized(prepared)?;
        let first_stop = match spawned {
            spawn::Spawned::Seized(child) => spawn::past_exec_entry(child),
            spawn::Spawned::DiedFirst(_) => None,
        };
        Ok(Some(StartedProgram {
            spawned,
            first_stop,
        }))
    }

    /// Runs the whole trace, of the program [`Tracer::start_program`] started on this thread
    /// (`run`) or of the processes it attaches to; returns when no traced task is left, or once
    /// detached (`attach`).
    pub fn run(
        mut self,
        started: Result<Option<StartedProgram>, TraceError>,
    ) -> Result<ProgramEnd, TraceError> {
        let started = started?;
        let waker = TracerWaker::install()?;
        self.supervisor.set_tracer(waker);
        let attaching = match &self.config.target {
            Target::Spawn { .. } => {
                if let Some(end) = started.and_then(|started| self.adopt_program(started)) {
                    return Ok(end);
                }
                false
            }
            Target::Attach { pids, follow_forks } => {
                let (pids, follow_forks) = (pids.clone(), *follow_forks);
                self.attach_all(&pids, follow_forks)?;
                true
            }
        };
        // The ticker wakes the loop at least every `checkpoints::TICK`: for a due checkpoint, to
        // give up a stuck one on time, and to see an actor's failure even if the supervisor's own
        // wake-up came just before a wait.
        self.checkpoints.start(self.config.verify_every);
        // Under `--faults scan` every space is sampled from the start; otherwise a space's first
        // range followed by scans hastens it (scans.rs).
        let mut tick = self
            .config
            .verify_every
            .map_or(checkpoints::TICK, |every| every.min(checkpoints::TICK));
        // `rss` lines every sample period, whatever the mode; scans too under `--faults scan`.
        tick = tick.min(self.config.sample);
        let _ticker = self.control.start_ticking(tick, waker)?;
        // While a change is held (woken.rs), the loop looks at it again soon, stop or not.
        let mut wake_after = tick::WakeAfter::new(waker)
            .inspect_err(|e| tracing::debug!("a timer to wake the tracer: {e}; it polls instead"))
            .ok();
        loop {
            if let Some(failure) = self.supervisor.failure() {
                self.end_everything(attaching);
                return Err(TraceError::ActorFailed(failure));
            }
            if attaching && self.detach_asked() {
                self.detach_all();
                break;
            }
            if self.control.tick_due() {
                // A checkpoint whose last threads will not stop is given up on time, even when
                // no other stop comes meanwhile.
                self.settle_checkpoint();
                self.checkpoint_if_due();
                self.scan_if_due();
                self.sample_rss_if_due();
                self.look_for_unshared_if_due();
                // After the scans (a page they find may be in swap already) and the rss
                // figures (whose swap says whether to look).
                self.look_for_evictions_if_due();
                self.end_for_untaken_signals();
            }
            self.release_held_changes();
            // While a change is held, `waitpid` is woken soon after, or does not wait at all
            // with no timer to wake it (woken.rs).
            let mut wait = WaitPidFlag::__WALL;
            if self.held.any() && self.pending.is_empty() {
                let poll = self.held.poll();
                if wake_after.as_mut().is_some_and(|w| w.arm(poll).is_ok()) {
                    self.held.waited();
                } else {
                    wait |= WaitPidFlag::WNOHANG;
                }
            }
            let stop = match self.pending.pop_front() {
                Some(stop) => stop,
                None => match waitpid(None::<Pid>, Some(wait)) {
                    Ok(WaitStatus::StillAlive) => {
                        std::thread::sleep(self.held.poll());
                        self.held.waited();
                        continue;
                    }
                    Ok(status) => match self.stop_of(status) {
                        Some(stop) => stop,
                        None => continue,
                    },
                    Err(Errno::ECHILD) => break,
                    // The ticker's or the supervisor's wake-up (see kernel::tick).
                    Err(Errno::EINTR) => continue,
                    Err(e) => return Err(io::Error::other(format!("waitpid: {e}")).into()),
                },
            };
            self.dispatch(stop);
            if self.deferred.any() {
                self.replay_deferred();
            }
            self.settle_checkpoint();
        }
        // An attach ends with mevi-actors' own status: its processes go on, or ended their way.
        if attaching {
            return Ok(ProgramEnd::Exited(0));
        }
        Ok(self.lineage.root_end().unwrap_or(ProgramEnd::Exited(1)))
    }

    /// Follows the program started for the trace; its end if it died before anything of it ran.
    fn adopt_program(&mut self, started: StartedProgram) -> Option<ProgramEnd> {
        let child = match started.spawned {
            spawn::Spawned::Seized(child) => child,
            // Nothing ran of it: nothing to trace, and its status is the run's.
            spawn::Spawned::DiedFirst(Ok(code)) => return Some(ProgramEnd::Exited(code)),
            spawn::Spawned::DiedFirst(Err(signal)) => {
                return Some(ProgramEnd::Signaled(signal as i32));
            }
        };
        let root = child.as_raw();
        self.lineage.set_root(root);
        self.signals.root_pid.store(root, Ordering::SeqCst);
        // Before any lane exists, so it is the sequencer's first message from us.
        self.sequencer
            .send_blocking(SequencerMessage::Root { pid: root });
        self.threads.insert(root, Thread::new(root, Phase::Running));
        self.sample_touches(root);
        self.processes.insert(
            root,
            Process {
                space: None,
                faults_at_join: 0,
                faults_at_exit: None,
                rss: None,
                memory_cgroup: None,
            },
        );
        // Its first stop, if it was not the one let past before the tracer was made.
        if let Some(stop) = started.first_stop.and_then(|status| self.stop_of(status)) {
            self.pending.push_back(stop);
        }
        None
    }

    /// The stop a wait status reports, told apart by what the tracer expects of the thread.
    fn stop_of(&self, status: WaitStatus) -> Option<Stop> {
        Stop::from_wait_status(status, |tid| {
            self.threads
                .get(&tid)
                .map_or(Expect::default(), |t| Expect {
                    attach: t.phase.awaiting_attach(),
                    entries: t.syscalls.stops.every_syscall(),
                })
        })
    }

    /// The one place every stop is matched.
    fn dispatch(&mut self, stop: Stop) {
        if self.hand_over(stop) {
            return;
        }
        match stop {
            Stop::SeccompEntry { tid } => self.on_seccomp_stop(tid),
            Stop::SyscallEntry { tid, entry } => self.on_entry_stop(tid, entry),
            Stop::SyscallExit { tid } => self.on_syscall_exit_stop(tid),
            Stop::NewChild { tid, event } => self.on_new_child(tid, event),
            Stop::Exec { tid } => self.on_exec(tid),
            Stop::Exiting { tid } => self.on_exit_stop(tid),
            Stop::VforkDone { tid } => {
                if let Some(t) = self.threads.get_mut(&tid) {
                    t.phase.vfork_done();
                }
                self.go_on_in_syscall(tid);
            }
            Stop::Attach { tid, group_stop } => self.on_attach_stop(tid, group_stop),
            Stop::GroupStop { tid, signal } => self.on_group_stop(tid, signal),
            Stop::Interrupt { tid } => self.on_interrupt_stop(tid),
            Stop::Signal { tid, signal } => {
                if !self.threads.contains_key(&tid) {
                    return self.on_unknown_stop(tid, None);
                }
                if matches!(signal, Signal::SIGSEGV | Signal::SIGBUS) {
                    self.note_refused_access(tid);
                }
                // Signal-delivery-stop: deliver it.
                self.go(tid, Resume::Cont(Some(signal)));
            }
            Stop::UnknownEvent { tid, event } => {
                tracing::debug!(tid, event, "a ptrace event we did not ask for");
                self.go(tid, Resume::Cont(None));
            }
            Stop::Exited { tid, code } => self.on_death(tid, ProgramEnd::Exited(code)),
            Stop::Killed { tid, signal } => self.on_death(tid, ProgramEnd::Signaled(signal as i32)),
        }
    }

    /// Lets a stopped thread go, unless a checkpoint is under way: then it is held until every
    /// thread has stopped and the check is done.
    fn go(&mut self, tid: i32, how: Resume) {
        if !self.checkpoints.park(tid, how) {
            self.release_now(tid, how);
        }
    }

    /// Lets a thread go on from an event stop inside its syscall (a clone's, a vfork's end): to
    /// that syscall's exit stop if something waits for it there (a `clone3`'s flags to put back).
    fn go_on_in_syscall(&mut self, tid: i32) {
        let to_exit = self
            .threads
            .get(&tid)
            .is_some_and(|t| t.syscalls.puts_clone_flags_back());
        self.go(
            tid,
            if to_exit {
                Resume::Syscall
            } else {
                Resume::Cont(None)
            },
        );
    }

    /// Lets a stopped thread go, and remembers whether it stayed in a group stop.
    fn release_now(&mut self, tid: i32, how: Resume) {
        let how = match how {
            Resume::Cont(sig)
                if self
                    .threads
                    .get(&tid)
                    .is_some_and(|t| t.syscalls.stops.every_syscall()) =>
            {
                Resume::EverySyscall(sig)
            }
            how => how,
        };
        let listening = ptrace::release(tid, how);
        if let Some(t) = self.threads.get_mut(&tid) {
            t.phase.released(listening);
        }
    }

    /// An actor failed: nothing the trace writes from here can be trusted to be complete, so
    /// the program ends with it, as it would if mevi-actors itself died (`PTRACE_O_EXITKILL`).
    /// Processes attached to are let go instead.
    fn end_everything(&mut self, attached: bool) {
        if attached {
            // Not ours to kill: they go on untraced.
            return self.detach_all();
        }
        for &pid in self.processes.keys() {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
    }

    fn page_align(&self, n: u64) -> u64 {
        crate::kernel::page_align(n, self.config.lane.page_size)
    }

    /// The process and live space of a thread.
    fn space_of(&self, tid: i32) -> Option<(i32, SpaceId)> {
        let pid = self.threads.get(&tid)?.pid;
        let space = self.processes.get(&pid)?.space?;
        self.spaces.contains_key(&space).then_some((pid, space))
    }

    /// The space of a process, if it has one.
    fn space_of_process(&self, pid: i32) -> Option<SpaceId> {
        self.processes.get(&pid).and_then(|p| p.space)
    }

    /// `--touch-stacks`: sample the page faults of a new thread, stopped before it runs.
    fn sample_touches(&self, tid: i32) {
        let Some((_, samplers)) = &self.config.touch_stacks else {
            return;
        };
        for why in samplers.open(tid) {
            let pid = self.threads.get(&tid).map(|t| t.pid);
            self.warn(pid, None, WarningKind::NoTouchStacks, why);
        }
    }

    /// Sends an event to a space's lane, if the space is still there.
    fn observed(&self, space: SpaceId, event: Event) {
        match self.spaces.get(&space) {
            Some(s) => s.lane.observed(event),
            None => tracing::debug!(space, ?event, "an event for a space that is gone"),
        }
    }

    /// The threads of a space, with their process.
    fn threads_in(&self, space: SpaceId) -> impl Iterator<Item = (i32, &Thread)> {
        self.threads
            .iter()
            .filter(move |(_, t)| self.space_of_process(t.pid) == Some(space))
            .map(|(&tid, t)| (tid, t))
    }

    /// Writes a `warning` line: on the space's lane, in its order, if it has one; else straight
    /// to the sequencer.
    fn warn(&self, pid: Option<i32>, space: Option<SpaceId>, what: WarningKind, message: String) {
        tracing::warn!(?pid, ?space, ?what, "{message}");
        let event = Event::Warning {
            pid,
            space,
            what,
            message,
        };
        match space.and_then(|s| self.spaces.get(&s)) {
            Some(s) => s.lane.observed(event),
            None => self
                .sequencer
                .send_blocking(SequencerMessage::Line(Stamped::now(event))),
        }
    }
}
