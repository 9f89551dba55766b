//! The tracer: one dedicated OS thread that makes every ptrace call of the trace.
//!
//! It starts the program seized, with a seccomp filter so that only memory-layout syscalls stop,
//! follows every clone, fork, vfork, exec and exit, gives each new address space a userfaultfd
//! (injected into the tracee) and a lane, and reports what it sees to the space's lane while the
//! thread that caused it is still stopped. It never waits on a lane to resolve anything: besides
//! `waitpid` it blocks only on a full lane (backpressure) and, with `--verify`, on a check of a
//! space whose threads are all stopped.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rangemap::RangeSet;

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::lane::{Lane, LaneConfig, LaneHandle, LaneMessage, PagesAtExit};
use super::sequencer::{SequencerHandle, SequencerMessage, Stamped};
use crate::event::{
    Event, ForkKind, MapKind, PageState, SpaceId, VerifyPoint, prot_string, signal_name,
};
use crate::kernel::inject::{self, InjectError, Injection, SyscallSite};
use crate::kernel::procfs::{self, Pagemap};
use crate::kernel::spawn::{self, Prepared};
use crate::kernel::uffd::AddressSpaceUffd;
use crate::kernel::{self, tick};

pub struct TracerConfig {
    pub program: PathBuf,
    pub argv: Vec<OsString>,
    pub stdout_to_stderr: bool,
    /// False with `--no-faults`: no userfaultfd, mappings only.
    pub faults: bool,
    /// How each space's lane is set up; its page size is the tracer's too.
    pub lane: LaneConfig,
    /// `--verify`: check the stream against the kernel at each process's last exit stop.
    pub verify: bool,
    /// `--verify-every`: also stop every traced thread this often and check every space.
    pub verify_every: Option<Duration>,
}

/// How long a checkpoint waits for every thread to stop before it gives up and lets them go (a
/// thread can be stuck where ptrace cannot stop it, e.g. in an uninterruptible sleep).
const CHECKPOINT_PATIENCE: Duration = Duration::from_secs(2);

/// The longest the tracer sleeps in `waitpid` with `--verify-every`, so that a stuck checkpoint is
/// given up on time whatever the interval.
const CHECKPOINT_TICK: Duration = Duration::from_millis(100);

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

/// A syscall seen at its seccomp stop, waiting for its exit.
#[derive(Clone, Copy, Debug)]
struct SyscallEntry {
    nr: i64,
    args: [u64; 6],
}

#[derive(Debug)]
struct Thread {
    /// The thread group.
    pid: i32,
    entry: Option<SyscallEntry>,
    /// A new child whose attach stop has not been seen yet.
    awaiting_attach: bool,
    /// For a fork child: the space it must be given at its attach stop, and the parent's
    /// program break (the child's mm is a copy, brk included).
    new_space: Option<(SpaceId, u64)>,
    /// Past its exit stop: it runs no user code any more.
    exiting: bool,
    /// A vfork parent waiting for its child: it runs no user code until the child execs or exits,
    /// and ptrace cannot stop it meanwhile.
    in_vfork: bool,
    /// Left in a group stop (PTRACE_LISTEN) until SIGCONT.
    listening: bool,
    /// Counts seccomp stops, so that a wait for "this syscall's exit" is not confused with the
    /// next syscall's.
    serial: u64,
    /// What other threads' reports changed within this thread's begun syscall's reach: which
    /// came first in the kernel, ptrace cannot tell (docs/ordering.md, racing changes).
    raced: RangeSet<u64>,
}

/// What a layout syscall's exit report says beyond its lines.
#[derive(Default)]
struct ExitReport {
    /// It returned an error (it may still have acted half way).
    failed: bool,
    /// The ranges its lines changed.
    changed: RangeSet<u64>,
    /// Ranges whose pages are read again at the exit, since a fill the lane could not order can
    /// have landed there: the part of an mremap's new range beyond the old length, and the
    /// source an `MREMAP_DONTUNMAP` move leaves behind.
    read_again: RangeSet<u64>,
}

/// Threads at a syscall exit whose report waits for another thread's (case 1 of
/// docs/ordering.md): the release it began, which came first in the kernel.
struct Deferred {
    /// The releasing thread's syscall, by its `serial`.
    serial: u64,
    held: Vec<i32>,
}

impl Thread {
    fn new(pid: i32, awaiting_attach: bool, new_space: Option<(SpaceId, u64)>) -> Self {
        Self {
            pid,
            entry: None,
            awaiting_attach,
            new_space,
            exiting: false,
            in_vfork: false,
            listening: false,
            serial: 0,
            raced: RangeSet::new(),
        }
    }
}

/// How a stopped thread is let go.
#[derive(Clone, Copy, Debug)]
enum Resume {
    /// PTRACE_CONT, delivering the signal if there is one.
    Cont(Option<Signal>),
    /// PTRACE_SYSCALL: run the syscall and stop at its exit (from a seccomp stop).
    Syscall,
    /// PTRACE_LISTEN: stay in the group stop.
    Listen,
}

/// A stop-the-world check in progress (`--verify-every`): every thread is asked to stop, and
/// each one that stops, for whatever reason, is held until all have.
struct Checkpoint {
    /// Threads asked to stop whose stop has not been seen yet.
    waiting: HashSet<i32>,
    /// Stopped threads and how each is to be let go, in the order they stopped.
    parked: Vec<(i32, Resume)>,
    began: Instant,
}

#[derive(Debug)]
struct Process {
    /// None before the first exec of the traced program.
    space: Option<SpaceId>,
}

struct Space {
    lane: LaneHandle,
    uffd: Option<Arc<AddressSpaceUffd>>,
    /// None only if the process was gone before it could be opened.
    pagemap: Option<Arc<Pagemap>>,
    /// The program break as the last brk returned it (the heap is per mm, not per thread).
    brk: u64,
    /// Processes living in this space (more than one after vfork or clone(CLONE_VM)).
    members: usize,
}

/// The end of the x86_64 user address space (47-bit, 4-level paging; the kernel places nothing
/// above it unless a program asks for 5-level addresses with a hint).
const USER_SPACE_END: u64 = 0x7fff_ffff_f000;

/// Where a new space comes from.
enum Origin {
    Exec { former_tid: i32 },
    Fork { parent_brk: u64 },
}

pub struct Tracer {
    config: TracerConfig,
    runtime: tokio::runtime::Handle,
    sequencer: SequencerHandle,
    root_pid: Arc<AtomicI32>,
    threads: HashMap<i32, Thread>,
    processes: HashMap<i32, Process>,
    spaces: HashMap<SpaceId, Space>,
    next_space: SpaceId,
    site: SyscallSite,
    /// Attach stops of children whose parent's fork/clone event has not been seen yet, with
    /// the process whose event they wait for (their parent, or their own process for a thread).
    early_attach: HashMap<i32, i32>,
    /// Threads that entered a group stop while we ran syscalls in them.
    job_stopped: HashSet<i32>,
    /// The line that creates a space whose creator's lane is gone: sent first on the new lane.
    announce: HashMap<SpaceId, Event>,
    root: i32,
    root_end: Option<ProgramEnd>,
    checkpoint: Option<Checkpoint>,
    /// Syscall exits held back, by the thread whose report they wait for.
    deferred: HashMap<i32, Deferred>,
    /// A process between its exec event and its execve's exit stop.
    exec_in_progress: Option<i32>,
    /// When the next checkpoint is due (`--verify-every`).
    next_checkpoint: Option<Instant>,
}

impl Tracer {
    pub fn new(
        config: TracerConfig,
        runtime: tokio::runtime::Handle,
        sequencer: SequencerHandle,
        root_pid: Arc<AtomicI32>,
    ) -> Self {
        Self {
            config,
            runtime,
            sequencer,
            root_pid,
            threads: HashMap::new(),
            processes: HashMap::new(),
            spaces: HashMap::new(),
            next_space: 0,
            site: SyscallSite::default(),
            early_attach: HashMap::new(),
            job_stopped: HashSet::new(),
            announce: HashMap::new(),
            root: 0,
            root_end: None,
            checkpoint: None,
            deferred: HashMap::new(),
            exec_in_progress: None,
            next_checkpoint: None,
        }
    }

    /// Runs the whole trace; returns when no traced task is left.
    pub fn run(mut self) -> io::Result<ProgramEnd> {
        let filter = spawn::seccomp_filter()?;
        let prepared = Prepared::new(
            &self.config.program,
            &self.config.argv,
            self.config.stdout_to_stderr,
            Some(filter),
        )?;
        let child = spawn::spawn_seized(&prepared)?;
        self.root = child.as_raw();
        self.root_pid.store(self.root, Ordering::SeqCst);
        // Before any lane exists, so it is the sequencer's first message from us.
        self.sequencer
            .send_blocking(SequencerMessage::Root { pid: self.root });
        self.threads
            .insert(self.root, Thread::new(self.root, false, None));
        self.processes.insert(self.root, Process { space: None });
        // The ticker also bounds how late a stuck checkpoint is given up (CHECKPOINT_PATIENCE).
        let _ticker = match self.config.verify_every {
            Some(every) => {
                self.next_checkpoint = Some(Instant::now() + every);
                Some(tick::start(every.min(CHECKPOINT_TICK))?)
            }
            None => None,
        };
        loop {
            if tick::due()
                && let (Some(every), Some(next)) = (self.config.verify_every, self.next_checkpoint)
                && Instant::now() >= next
            {
                self.next_checkpoint = Some(Instant::now() + every);
                self.begin_checkpoint();
            }
            match waitpid(None::<Pid>, Some(WaitPidFlag::__WALL)) {
                Ok(status) => self.on_status(status),
                Err(Errno::ECHILD) => break,
                // The ticker's wake-up (see kernel::tick).
                Err(Errno::EINTR) => {}
                Err(e) => return Err(io::Error::other(format!("waitpid: {e}"))),
            }
            if !self.deferred.is_empty() {
                self.replay_deferred();
            }
            self.settle_checkpoint();
        }
        Ok(self.root_end.unwrap_or(ProgramEnd::Exited(1)))
    }

    fn on_status(&mut self, status: WaitStatus) {
        match status {
            WaitStatus::PtraceEvent(pid, sig, event) => {
                let tid = pid.as_raw();
                match event {
                    libc::PTRACE_EVENT_SECCOMP => self.on_seccomp_stop(tid),
                    libc::PTRACE_EVENT_FORK
                    | libc::PTRACE_EVENT_VFORK
                    | libc::PTRACE_EVENT_CLONE => self.on_new_child(tid, event),
                    libc::PTRACE_EVENT_EXEC => self.on_exec(tid),
                    libc::PTRACE_EVENT_STOP => self.on_event_stop(tid, sig),
                    libc::PTRACE_EVENT_EXIT => self.on_exit_stop(tid),
                    libc::PTRACE_EVENT_VFORK_DONE => {
                        if let Some(t) = self.threads.get_mut(&tid) {
                            t.in_vfork = false;
                        }
                        self.go(tid, Resume::Cont(None));
                    }
                    _ => self.go(tid, Resume::Cont(None)),
                }
            }
            WaitStatus::PtraceSyscall(pid) => {
                let tid = pid.as_raw();
                if let Some(releaser) = self.must_wait_for(tid) {
                    let serial = self.threads[&releaser].serial;
                    let d = self.deferred.entry(releaser).or_insert(Deferred {
                        serial,
                        held: Vec::new(),
                    });
                    d.held.push(tid);
                    return;
                }
                self.on_syscall_exit(tid);
                self.go(tid, Resume::Cont(None));
            }
            WaitStatus::Stopped(pid, sig) => {
                let tid = pid.as_raw();
                if !self.threads.contains_key(&tid) {
                    return self.on_unknown_stop(tid);
                }
                // Signal-delivery-stop: deliver it.
                self.go(tid, Resume::Cont(Some(sig)));
            }
            WaitStatus::Exited(pid, code) => self.on_death(pid.as_raw(), ProgramEnd::Exited(code)),
            WaitStatus::Signaled(pid, sig, _) => {
                self.on_death(pid.as_raw(), ProgramEnd::Signaled(sig as i32))
            }
            WaitStatus::Continued(_) | WaitStatus::StillAlive => {}
        }
    }

    fn on_event_stop(&mut self, tid: i32, sig: Signal) {
        let Some(thread) = self.threads.get_mut(&tid) else {
            return self.on_unknown_stop(tid);
        };
        if thread.awaiting_attach {
            thread.awaiting_attach = false;
            self.on_attached(tid);
            return;
        }
        // A SIGTRAP event stop is our PTRACE_INTERRUPT's trap. It may come late, after another stop
        // it was sent during; then it is resumed like any other (or held, if a checkpoint is on).
        let pre_exec = self
            .processes
            .get(&thread.pid)
            .is_some_and(|p| p.space.is_none());
        let group_stop = matches!(
            sig,
            Signal::SIGSTOP | Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU
        );
        if group_stop && !pre_exec {
            self.go(tid, Resume::Listen);
        } else {
            self.go(tid, Resume::Cont(None));
        }
    }

    /// Lets a stopped thread go, unless a checkpoint is under way: then it is held until every
    /// thread has stopped and the check is done.
    fn go(&mut self, tid: i32, how: Resume) {
        if let Some(c) = self.checkpoint.as_mut() {
            c.waiting.remove(&tid);
            c.parked.push((tid, how));
            return;
        }
        self.release_now(tid, how);
    }

    /// Lets a stopped thread go, and remembers whether it stayed in a group stop.
    fn release_now(&mut self, tid: i32, how: Resume) {
        let listening = release(tid, how);
        if let Some(t) = self.threads.get_mut(&tid) {
            t.listening = listening;
        }
    }

    /// `--verify-every`: asks every thread that can run user code to stop.
    fn begin_checkpoint(&mut self) {
        if self.checkpoint.is_some() {
            return;
        }
        let mut waiting = HashSet::new();
        for (&tid, t) in self.threads.iter_mut() {
            // Not yet attached, waiting for a vfork child, left in a group stop, or past the
            // exit stop: none of these can touch memory.
            if t.awaiting_attach || t.in_vfork || t.listening || t.exiting {
                continue;
            }
            // ESRCH: it is dying; its end will be reported, and it needs no stopping.
            if ptrace::interrupt(Pid::from_raw(tid)).is_ok() {
                waiting.insert(tid);
            }
        }
        self.checkpoint = Some(Checkpoint {
            waiting,
            parked: Vec::new(),
            began: Instant::now(),
        });
    }

    /// Once every thread of a checkpoint has stopped (or died), checks every space and lets them
    /// all go. A checkpoint that cannot complete in time is dropped without a check.
    fn settle_checkpoint(&mut self) {
        let threads = &self.threads;
        let Some(c) = self.checkpoint.as_mut() else {
            return;
        };
        c.waiting.retain(|t| threads.contains_key(t));
        let late = c.began.elapsed() > CHECKPOINT_PATIENCE;
        if !c.waiting.is_empty() && !late {
            return;
        }
        let c = self.checkpoint.take().expect("checked above");
        if c.waiting.is_empty() {
            let targets: Vec<(SpaceId, i32)> = self
                .spaces
                .iter()
                .filter(|(_, s)| s.uffd.is_some())
                .filter_map(|(&id, _)| self.parked_in(id, &c.parked).map(|tid| (id, tid)))
                .collect();
            self.check(&targets, VerifyPoint::Checkpoint);
        } else {
            tracing::warn!(
                waiting = ?c.waiting,
                "checkpoint abandoned: these threads did not stop in {CHECKPOINT_PATIENCE:?}"
            );
        }
        for (tid, how) in c.parked {
            self.release_now(tid, how);
        }
    }

    /// A thread of the space held in a ptrace stop, to read its maps through: a stopped thread
    /// still has its mm (one that is dying may already have dropped it). A space with none has
    /// no thread left to check it with.
    fn parked_in(&self, space: SpaceId, parked: &[(i32, Resume)]) -> Option<i32> {
        parked
            .iter()
            .map(|&(tid, _)| tid)
            .filter(|tid| {
                self.threads.get(tid).is_some_and(|t| {
                    self.processes.get(&t.pid).and_then(|p| p.space) == Some(space)
                })
            })
            .min()
    }

    /// Asks each space's lane to check the stream against the kernel, and waits until each has
    /// read the kernel's side (the threads must not run before that).
    fn check(&self, targets: &[(SpaceId, i32)], point: VerifyPoint) {
        let mut answers = Vec::new();
        for &(id, tid) in targets {
            let (done, answer) = mpsc::sync_channel(1);
            self.spaces[&id].lane.send(LaneMessage::Checkpoint {
                pid: tid,
                point,
                done,
            });
            answers.push(answer);
        }
        for answer in answers {
            // Err: the state actor is gone (the stream ended early); nothing to wait for.
            let _ = answer.recv();
        }
    }

    /// PTRACE_EVENT_EXIT: the thread is leaving, its mm still whole. If no other thread of its
    /// space can run user code any more, this is a quiescent point: `--verify` checks it.
    fn on_exit_stop(&mut self, tid: i32) {
        let begun = self.threads.get_mut(&tid).and_then(|t| {
            t.exiting = true;
            t.entry.take()
        });
        if let (Some(_), Some((_, space))) = (begun, self.space_of(tid)) {
            // Killed inside a layout syscall: its exit will never be reported, and it may or may
            // not have changed the layout. The mm is still whole here: describe it again from
            // the kernel.
            let mut whole = RangeSet::new();
            whole.insert(0..USER_SPACE_END);
            self.describe_again(tid, space, whole);
            self.spaces[&space].lane.send(LaneMessage::Ended { tid });
        }
        if self.config.verify
            && let Some((pid, space)) = self.space_of(tid)
            && self.exec_in_progress != Some(pid)
            && self.spaces[&space].uffd.is_some()
            && self.space_is_quiescent(space)
        {
            self.check(&[(space, tid)], VerifyPoint::Exit);
        }
        // Never held by a checkpoint: past this stop it runs no user code, and a multithreaded
        // execve waits (where ptrace cannot stop it) until the threads it kills have gone.
        if let Some(c) = self.checkpoint.as_mut() {
            c.waiting.remove(&tid);
        }
        self.release_now(tid, Resume::Cont(None));
    }

    /// Whether no thread of the space can run user code (each has reached its exit stop, waits
    /// for a vfork child, or has not started).
    fn space_is_quiescent(&self, space: SpaceId) -> bool {
        self.threads
            .values()
            .filter(|t| self.processes.get(&t.pid).and_then(|p| p.space) == Some(space))
            .all(|t| t.exiting || t.in_vfork || t.awaiting_attach)
    }

    fn on_seccomp_stop(&mut self, tid: i32) {
        let entry = ptrace::syscall_info(Pid::from_raw(tid))
            .ok()
            .filter(|info| info.op == libc::PTRACE_SYSCALL_INFO_SECCOMP)
            .map(|info| {
                // SAFETY: op == SECCOMP says the seccomp member of the union is the one filled.
                let s = unsafe { info.u.seccomp };
                SyscallEntry {
                    nr: s.nr as i64,
                    args: s.args,
                }
            });
        if let Some(thread) = self.threads.get_mut(&tid) {
            thread.entry = entry;
            thread.serial += 1;
            thread.raced = RangeSet::new();
        }
        // The lane holds back faults behind a layout change until the syscalls begun before it
        // have ended (docs/ordering.md).
        if entry.is_some()
            && let Some((_, space)) = self.space_of(tid)
        {
            let SyscallEntry { nr, args } = entry.expect("checked above");
            let lane = &self.spaces[&space].lane;
            lane.send(LaneMessage::Begun { tid, nr, args });
            let (old, new) = (self.page_align(args[1]), self.page_align(args[2]));
            if nr == libc::SYS_mremap && old != 0 && new > old {
                // A mapping grown in place keeps its registration: a racing touch of the new
                // tail faults through the lane before this mremap is reported, and must wait.
                let tail = args[0].saturating_add(old)..args[0].saturating_add(new);
                lane.send(LaneMessage::Fence { tid, range: tail });
            }
        }
        // Run the syscall and stop again at its exit.
        self.go(tid, Resume::Syscall);
    }

    fn page_align(&self, n: u64) -> u64 {
        kernel::page_align(n, self.config.lane.page_size)
    }

    /// The process and live space of a thread; `spaces[&id]` is safe with the id returned.
    fn space_of(&self, tid: i32) -> Option<(i32, SpaceId)> {
        let pid = self.threads.get(&tid)?.pid;
        let space = self.processes.get(&pid)?.space?;
        self.spaces.contains_key(&space).then_some((pid, space))
    }

    fn on_syscall_exit(&mut self, tid: i32) {
        let Some(entry) = self.threads.get_mut(&tid).and_then(|t| t.entry.take()) else {
            return;
        };
        let Some((_, space)) = self.space_of(tid) else {
            return;
        };
        let ExitReport {
            failed,
            changed,
            read_again,
        } = self.report_syscall_exit(tid, entry);
        // Begun syscalls of other threads that may have acted on what this one reported: which
        // came first is unknown, so each will describe the range again once it is reported.
        self.note_races(tid, space, &changed);
        let mut again = RangeSet::new();
        if failed {
            // An error return says nothing of what was done before the error (an mremap of
            // several mappings refused half way, a MAP_FIXED that unmapped and then failed).
            again.extend(self.reach(&entry));
        }
        let raced = self
            .threads
            .get_mut(&tid)
            .map(|t| std::mem::take(&mut t.raced))
            .unwrap_or_default();
        if !raced.is_empty() {
            again.extend(raced);
            again.extend(changed);
        }
        // A grown tail is registered the moment it exists, and no event says so: a racing touch
        // can be resolved there before this report, which replays the tail as not resident. The
        // same goes for a DONTUNMAP source. Their pages are read as they are at this exit (R3).
        again.extend(read_again);
        if !again.is_empty() {
            self.describe_again(tid, space, again);
        }
        self.spaces[&space].lane.send(LaneMessage::Ended { tid });
    }

    /// Where a syscall may change the layout, from its arguments alone (nothing for a placement
    /// in free space: those are ordered exactly, see `must_wait_for`).
    fn reach(&self, e: &SyscallEntry) -> RangeSet<u64> {
        let a = e.args;
        let mut reach = RangeSet::new();
        let mut add = |start: u64, len: u64| {
            let end = start.saturating_add(self.page_align(len));
            if start < end {
                reach.insert(start..end);
            }
        };
        match e.nr {
            libc::SYS_munmap => add(a[0], a[1]),
            libc::SYS_madvise if discard_advice(a[2] as i32).is_some() => add(a[0], a[1]),
            libc::SYS_mmap if a[3] as i32 & libc::MAP_FIXED != 0 => add(a[0], a[1]),
            libc::SYS_mremap => {
                add(a[0], self.page_align(a[1]).max(self.page_align(a[2])));
                if a[3] as i32 & libc::MREMAP_FIXED != 0 {
                    add(a[4], a[2]);
                }
            }
            _ => {}
        }
        reach
    }

    /// Marks the begun syscalls of other threads of the space that `changed` may have raced.
    fn note_races(&mut self, tid: i32, space: SpaceId, changed: &RangeSet<u64>) {
        if changed.is_empty() {
            return;
        }
        let racers: Vec<(i32, RangeSet<u64>)> = self
            .threads
            .iter()
            .filter(|&(&other, t)| other != tid && t.entry.is_some())
            .filter(|(_, t)| self.processes.get(&t.pid).and_then(|p| p.space) == Some(space))
            .filter_map(|(&other, t)| {
                let reach = self.reach(t.entry.as_ref()?);
                let hit: RangeSet<u64> = changed
                    .iter()
                    .filter(|r| reach.overlaps(r))
                    .cloned()
                    .collect();
                (!hit.is_empty()).then_some((other, hit))
            })
            .collect();
        for (other, hit) in racers {
            if let Some(t) = self.threads.get_mut(&other) {
                t.raced.extend(hit);
            }
        }
    }

    /// Describes `ranges` of the space again as the kernel has them now: unmapped, then every
    /// mapping in them (the lane reads their present pages, in its order). Syscalls begun
    /// meanwhile may already be in what is read: they are marked raced, and describe their
    /// ranges again once reported.
    fn describe_again(&mut self, tid: i32, space: SpaceId, ranges: RangeSet<u64>) {
        let Some(pid) = self.threads.get(&tid).map(|t| t.pid) else {
            return;
        };
        let maps = match procfs::read_maps(tid) {
            Ok(maps) if !maps.is_empty() => maps,
            // The mm is gone: nothing left to describe.
            _ => return,
        };
        tracing::debug!(
            tid,
            space,
            ?ranges,
            "describing ranges again from the kernel"
        );
        let space_ref = &self.spaces[&space];
        for range in ranges.iter() {
            space_ref.lane.observed(Event::Unmap {
                pid,
                tid,
                space,
                start: range.start,
                end: range.end,
            });
            for entry in maps
                .iter()
                .filter(|m| m.start < range.end && range.start < m.end)
            {
                let clip = entry.start.max(range.start)..entry.end.min(range.end);
                if entry.is_private_anon() && space_ref.uffd.is_some() {
                    // As at an mmap's exit: a racing touch of a mapping registered here waits for
                    // this description.
                    space_ref.lane.send(LaneMessage::Fence {
                        tid,
                        range: entry.start..entry.end,
                    });
                }
                let at = MapAt {
                    pid,
                    tid,
                    space,
                    range: clip,
                };
                send_maps_entry(space_ref, at, entry);
            }
        }
        self.note_races(tid, space, &ranges);
    }

    /// The other thread whose begun syscall released address space that this thread's syscall,
    /// now at its exit, has just been given: that release came first in the kernel, so it must be
    /// reported first (docs/ordering.md, case 1). Free-space placements are `mmap` without
    /// `MAP_FIXED`, `mremap` without `MREMAP_FIXED` and brk growth; releases are `munmap`, the
    /// source of an `mremap` that may move, the tail of one that shrinks, and brk shrinking.
    fn must_wait_for(&self, tid: i32) -> Option<i32> {
        let (_, space) = self.space_of(tid)?;
        let releasing: Vec<(i32, Range<u64>)> = self
            .threads
            .iter()
            .filter(|&(&other, _)| other != tid)
            .filter(|(_, t)| self.processes.get(&t.pid).and_then(|p| p.space) == Some(space))
            .filter_map(|(&other, t)| Some((other, self.released_by(space, t.entry.as_ref()?)?)))
            .collect();
        if releasing.is_empty() {
            return None;
        }
        let placed = self.placed_in_free_space(tid, space)?;
        releasing
            .into_iter()
            .filter(|(_, freed)| freed.start < placed.end && placed.start < freed.end)
            .map(|(other, _)| other)
            .find(|&other| !self.waits_on(other, tid))
    }

    /// The range a begun syscall may hand back to the kernel for others to reuse.
    fn released_by(&self, space: SpaceId, e: &SyscallEntry) -> Option<Range<u64>> {
        let a = e.args;
        let range = match e.nr {
            libc::SYS_munmap => a[0]..a[0].saturating_add(self.page_align(a[1])),
            libc::SYS_mremap => {
                let (old, new) = (self.page_align(a[1]), self.page_align(a[2]));
                let flags = a[3] as i32;
                if old == 0 {
                    return None;
                } else if flags & libc::MREMAP_MAYMOVE != 0 && flags & libc::MREMAP_DONTUNMAP == 0 {
                    a[0]..a[0].saturating_add(old)
                } else {
                    a[0].saturating_add(new)..a[0].saturating_add(old)
                }
            }
            // brk(0) is a query.
            libc::SYS_brk if a[0] != 0 => {
                self.page_align(a[0])..self.page_align(self.spaces[&space].brk)
            }
            _ => return None,
        };
        (!range.is_empty()).then_some(range)
    }

    /// The free address space a syscall at its exit stop was given, if it was.
    fn placed_in_free_space(&self, tid: i32, space: SpaceId) -> Option<Range<u64>> {
        let entry = self.threads.get(&tid)?.entry?;
        let info = ptrace::syscall_info(Pid::from_raw(tid)).ok()?;
        if info.op != libc::PTRACE_SYSCALL_INFO_EXIT {
            return None;
        }
        // SAFETY: op == EXIT says the exit member of the union is the one filled.
        let exit = unsafe { info.u.exit };
        if exit.is_error != 0 {
            return None;
        }
        let (rval, a) = (exit.sval as u64, entry.args);
        let range = match entry.nr {
            libc::SYS_mmap if a[3] as i32 & libc::MAP_FIXED == 0 => {
                rval..rval.saturating_add(self.page_align(a[1]))
            }
            libc::SYS_mremap if a[3] as i32 & libc::MREMAP_FIXED == 0 => {
                rval..rval.saturating_add(self.page_align(a[2]))
            }
            libc::SYS_brk => self.page_align(self.spaces[&space].brk)..self.page_align(rval),
            _ => return None,
        };
        (!range.is_empty()).then_some(range)
    }

    /// Whether `tid` is already held, directly or through others, until `other` is reported.
    fn waits_on(&self, tid: i32, other: i32) -> bool {
        let mut at = tid;
        for _ in 0..self.deferred.len() {
            let Some((&releaser, _)) = self.deferred.iter().find(|(_, d)| d.held.contains(&at))
            else {
                return false;
            };
            if releaser == other {
                return true;
            }
            at = releaser;
        }
        false
    }

    /// A thread gone (or replaced by exec) is not replayed: its tid may name another thread now.
    fn forget_deferred(&mut self, tid: i32) {
        for d in self.deferred.values_mut() {
            d.held.retain(|&t| t != tid);
        }
        self.deferred.retain(|_, d| !d.held.is_empty());
    }

    /// Reports held exits whose releasing thread has now been reported (or is gone).
    fn replay_deferred(&mut self) {
        loop {
            let ready = self.deferred.iter().find_map(|(&releaser, d)| {
                let reported = self
                    .threads
                    .get(&releaser)
                    .is_none_or(|t| t.entry.is_none() || t.serial != d.serial);
                reported.then_some(releaser)
            });
            let Some(releaser) = ready else { return };
            let d = self.deferred.remove(&releaser).expect("found above");
            for tid in d.held {
                self.on_status(WaitStatus::PtraceSyscall(Pid::from_raw(tid)));
            }
        }
    }

    /// Reports what a layout syscall did; whether it failed (a failure can still have changed
    /// part of the layout: an mremap of several mappings refused half way).
    /// Also says what it changed, as ranges.
    fn report_syscall_exit(&mut self, tid: i32, entry: SyscallEntry) -> ExitReport {
        let nothing = ExitReport::default();
        let Ok(info) = ptrace::syscall_info(Pid::from_raw(tid)) else {
            return nothing;
        };
        if info.op != libc::PTRACE_SYSCALL_INFO_EXIT {
            return nothing;
        }
        // SAFETY: op == EXIT says the exit member of the union is the one filled.
        let exit = unsafe { info.u.exit };
        // madvise(MADV_DONTNEED) over a hole drops the mapped pages, then returns ENOMEM: the
        // lane's reconciliation finds which pages went.
        let partial = entry.nr == libc::SYS_madvise && exit.sval == -(libc::ENOMEM as i64);
        if exit.is_error != 0 && !partial {
            return ExitReport {
                failed: true,
                ..nothing
            };
        }
        let Some((pid, space_id)) = self.space_of(tid) else {
            return nothing;
        };
        let rval = exit.sval as u64;
        let page_up = |n: u64| self.page_align(n);
        let a = entry.args;
        let mut read_again = RangeSet::new();
        let mut changed = RangeSet::new();
        let mut add = |start: u64, len: u64| {
            let end = start.saturating_add(page_up(len));
            if start < end {
                changed.insert(start..end);
            }
        };
        match entry.nr {
            libc::SYS_mmap => add(rval, a[1]),
            libc::SYS_munmap => add(a[0], a[1]),
            libc::SYS_madvise if discard_advice(a[2] as i32).is_some() => add(a[0], a[1]),
            libc::SYS_mremap => {
                add(a[0], a[1]);
                add(rval, a[2]);
            }
            _ => {}
        }
        match entry.nr {
            libc::SYS_mmap => self.on_mmap(pid, tid, space_id, rval, page_up(a[1]), a),
            libc::SYS_munmap => {
                let space = &self.spaces[&space_id];
                space.lane.observed(Event::Unmap {
                    pid,
                    tid,
                    space: space_id,
                    start: a[0],
                    end: a[0].saturating_add(page_up(a[1])),
                });
            }
            libc::SYS_mremap if page_up(a[1]) == 0 => {
                // old_size 0: a second mapping of shared memory; nothing moved.
                self.on_new_mapping_of(pid, tid, space_id, rval)
            }
            libc::SYS_mremap => {
                let (old_len, new_len) = (page_up(a[1]), page_up(a[2]));
                if new_len > old_len {
                    read_again.insert(rval.saturating_add(old_len)..rval.saturating_add(new_len));
                }
                let dontunmap = a[3] & libc::MREMAP_DONTUNMAP as u64 != 0;
                if dontunmap && old_len > 0 {
                    // The source stays mapped and registered, empty. A fill of it can complete
                    // after the page tables moved and before the kernel raises mmap_changing
                    // for the REMAP event, which comes after: such a page is written before the
                    // `remap` line, which replays the source as empty (docs/ordering.md, R6b).
                    read_again.insert(a[0]..a[0].saturating_add(old_len));
                }
                let space = &self.spaces[&space_id];
                if let Some(uffd) = &space.uffd {
                    // The moved or grown mapping keeps its registration (EVENT_REMAP); this only
                    // matters where the kernel made a new VMA, and fails harmlessly elsewhere.
                    let _ = uffd.register(rval, rval.saturating_add(new_len));
                }
                let event = Event::Remap {
                    pid,
                    tid,
                    space: space_id,
                    old_start: a[0],
                    old_end: a[0].saturating_add(old_len),
                    new_start: rval,
                    new_end: rval.saturating_add(new_len),
                    dontunmap,
                };
                space.lane.observed(event);
            }
            libc::SYS_brk => self.on_brk(pid, tid, space_id, rval),
            libc::SYS_madvise => {
                let Some(advice) = discard_advice(a[2] as i32) else {
                    return ExitReport { changed, ..nothing };
                };
                let range = a[0]..a[0].saturating_add(page_up(a[1]));
                let space = &self.spaces[&space_id];
                let at_exit = present_at(space, range.clone());
                space.lane.send(LaneMessage::Discard {
                    pid,
                    tid,
                    range,
                    advice,
                    at: std::time::Instant::now(),
                    at_exit,
                });
            }
            _ => {}
        }
        ExitReport {
            changed,
            read_again,
            ..nothing
        }
    }

    fn on_mmap(
        &mut self,
        pid: i32,
        tid: i32,
        space_id: SpaceId,
        start: u64,
        len: u64,
        a: [u64; 6],
    ) {
        let (prot, flags, fd) = (a[2], a[3] as i32, a[4] as i32);
        let end = start + len;
        let anon = flags & libc::MAP_ANONYMOUS != 0;
        // The mapping type is the low two bits, compared whole: MAP_SHARED_VALIDATE (3) shares
        // a bit with MAP_PRIVATE (2).
        let map_type = flags & libc::MAP_SHARED_VALIDATE;
        let shared = map_type == libc::MAP_SHARED || map_type == libc::MAP_SHARED_VALIDATE;
        let kind = match (anon, shared) {
            (true, false) if flags & (libc::MAP_STACK | libc::MAP_GROWSDOWN) != 0 => MapKind::Stack,
            (true, false) => MapKind::Anon,
            (true, true) => MapKind::Shmem,
            (false, _) => MapKind::File,
        };
        let path = (!anon).then(|| procfs::fd_path(pid, fd)).flatten();
        let kind = match (&kind, &path) {
            (MapKind::File, Some(p))
                if shared && (p.starts_with("/memfd:") || p.starts_with("/dev/shm/")) =>
            {
                MapKind::Shmem
            }
            _ => kind,
        };
        let space = &self.spaces[&space_id];
        let trackable = anon && !shared && flags & libc::MAP_HUGETLB == 0;
        if trackable {
            // Once registered, a touch by a thread racing this report faults through the lane:
            // it must wait for the report (docs/ordering.md, the fences).
            space.lane.send(LaneMessage::Fence {
                tid,
                range: start..end,
            });
        }
        let tracked = trackable
            && space
                .uffd
                .as_ref()
                .is_some_and(|u| match u.register(start, end) {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::debug!(start, end, "not tracked: {e}");
                        false
                    }
                });
        let at = MapAt {
            pid,
            tid,
            space: space_id,
            range: start..end,
        };
        send_map(space, at, &prot_string(prot), kind, path, tracked);
    }

    /// A mapping the syscall's arguments do not describe well enough: as `/proc/PID/maps` says.
    fn on_new_mapping_of(&mut self, pid: i32, tid: i32, space_id: SpaceId, addr: u64) {
        let Some(entry) = procfs::read_maps(pid)
            .ok()
            .and_then(|maps| maps.into_iter().find(|m| m.start <= addr && addr < m.end))
        else {
            return;
        };
        let at = MapAt {
            pid,
            tid,
            space: space_id,
            range: entry.start..entry.end,
        };
        // Only shared memory can be mapped again this way (the kernel refuses old_size 0 for a
        // private mapping), so this never registers anything.
        send_maps_entry(&self.spaces[&space_id], at, &entry);
    }

    fn on_brk(&mut self, pid: i32, tid: i32, space_id: SpaceId, new_brk: u64) {
        let (old, new) = (
            self.page_align(self.spaces[&space_id].brk),
            self.page_align(new_brk),
        );
        let space = self
            .spaces
            .get_mut(&space_id)
            .expect("space of a live thread");
        space.brk = new_brk;
        if old == new {
            return;
        }
        if new > old && space.uffd.is_some() {
            space.lane.send(LaneMessage::Fence {
                tid,
                range: old..new,
            });
        }
        let tracked = space
            .uffd
            .as_ref()
            .is_some_and(|u| new < old || u.register(old, new).is_ok());
        let event = Event::Brk {
            pid,
            tid,
            space: space_id,
            old,
            new,
            tracked,
        };
        // Another thread can touch the new heap before it was registered above: the lane reads
        // which pages are already there.
        if tracked && new > old {
            let at_exit = present_at(space, old..new);
            space.lane.send(LaneMessage::Mapped {
                event: Stamped::now(event),
                at_exit,
            });
        } else {
            space.lane.observed(event);
        }
    }

    fn on_new_child(&mut self, parent_tid: i32, event: i32) {
        let parent = Pid::from_raw(parent_tid);
        let child = match ptrace::getevent(parent) {
            Ok(c) => c as i32,
            Err(_) => return self.go(parent_tid, Resume::Cont(None)),
        };
        if event == libc::PTRACE_EVENT_VFORK
            && let Some(t) = self.threads.get_mut(&parent_tid)
        {
            t.in_vfork = true;
        }
        let Some((pid, space_id)) = self.space_of(parent_tid) else {
            // A parent whose space we do not follow (it died while being set up): its child is
            // still followed, on its own, or it would wait at its attach stop forever.
            let parent = self.threads.get(&parent_tid).map_or(parent_tid, |t| t.pid);
            self.follow_child_alone(child, parent, None);
            self.threads
                .get_mut(&child)
                .expect("just added")
                .awaiting_attach = true;
            return self.child_announced(parent_tid, child);
        };
        let is_thread = procfs::tgid(child) == Some(pid);
        let mut new_space = None;
        if is_thread {
            self.spaces[&space_id].lane.observed(Event::Thread {
                pid,
                tid: parent_tid,
                child,
                space: space_id,
            });
        } else {
            let shares_mm = event == libc::PTRACE_EVENT_VFORK
                || inject::same_address_space(parent_tid, child).unwrap_or(false);
            let (kind, child_space) = if shares_mm {
                let kind = if event == libc::PTRACE_EVENT_VFORK {
                    ForkKind::Vfork
                } else {
                    ForkKind::CloneVm
                };
                self.spaces.get_mut(&space_id).expect("live space").members += 1;
                (kind, space_id)
            } else {
                let id = self.allocate_space();
                new_space = Some((id, self.spaces[&space_id].brk));
                (ForkKind::Fork, id)
            };
            self.processes.insert(
                child,
                Process {
                    space: shares_mm.then_some(space_id),
                },
            );
            self.spaces[&space_id].lane.observed(Event::Fork {
                pid,
                tid: parent_tid,
                child,
                kind,
                space: space_id,
                child_space,
            });
        }
        self.threads.insert(
            child,
            Thread::new(if is_thread { pid } else { child }, true, new_space),
        );
        self.child_announced(parent_tid, child);
    }

    /// The creator goes on; the child is set up now if its attach stop came first.
    fn child_announced(&mut self, parent_tid: i32, child: i32) {
        self.go(parent_tid, Resume::Cont(None));
        if self.early_attach.remove(&child).is_some() {
            if let Some(thread) = self.threads.get_mut(&child) {
                thread.awaiting_attach = false;
            }
            self.on_attached(child);
        }
    }

    /// A new child's first stop: it has run no code of its own yet.
    fn on_attached(&mut self, tid: i32) {
        let Some((new_space, parent_brk)) =
            self.threads.get_mut(&tid).and_then(|t| t.new_space.take())
        else {
            return self.go(tid, Resume::Cont(None));
        };
        let result = self.create_space(tid, new_space, Origin::Fork { parent_brk });
        self.processes.insert(
            tid,
            Process {
                space: Some(new_space),
            },
        );
        match result {
            Ok(()) => self.resume_after_setup(tid),
            Err(InjectError::Died(status)) => self.on_status(status),
            Err(InjectError::Io(e)) => {
                tracing::warn!(tid, "cannot follow the memory of fork child: {e}");
                self.resume_after_setup(tid);
            }
        }
    }

    fn on_exec(&mut self, tid: i32) {
        let former_tid = ptrace::getevent(Pid::from_raw(tid))
            .map(|t| t as i32)
            .unwrap_or(tid);
        let pid = tid;
        let old_space = self.processes.get(&pid).and_then(|p| p.space);
        // Every other thread of the process is gone; the execing one now has the leader's id. The
        // dead ones' exit statuses may never be reported, so their ends are said here.
        let mut gone: Vec<i32> = self
            .threads
            .iter()
            .filter(|&(&t, th)| th.pid == pid && t != pid && t != former_tid)
            .map(|(&t, _)| t)
            .collect();
        gone.sort_unstable();
        if let Some(space) = old_space
            && let Some(old) = self.spaces.get(&space)
        {
            for tid in gone {
                old.lane.observed(Event::ThreadExit { pid, tid, space });
            }
        }
        let killed: Vec<i32> = self
            .threads
            .iter()
            .filter(|&(&t, th)| th.pid == pid && t != tid)
            .map(|(&t, _)| t)
            .collect();
        for t in killed.into_iter().chain([former_tid, tid]) {
            self.forget_deferred(t);
        }
        self.threads.retain(|&t, th| th.pid != pid || t == tid);
        self.threads.remove(&former_tid);
        self.threads.insert(tid, Thread::new(pid, false, None));
        let new_space = self.allocate_space();
        // Registers can only be borrowed at execve's exit stop: at this event stop the kernel has
        // yet to write execve's return value over them.
        if let Err(e) = ptrace::syscall(Pid::from_raw(tid), None) {
            tracing::debug!(tid, "PTRACE_SYSCALL after exec: {e}");
            return;
        }
        match inject::wait_for(Pid::from_raw(tid)) {
            Ok(WaitStatus::PtraceSyscall(_)) => {}
            Ok(other) => {
                // Killed between the exec and its syscall exit: the process is still filed under
                // its old space, whose memory is gone; there is nothing to check.
                self.exec_in_progress = Some(pid);
                self.on_status(other);
                self.exec_in_progress = None;
                return;
            }
            Err(_) => return,
        }
        if let Some(old) = old_space
            && let Some(space) = self.spaces.get(&old)
        {
            // Every line about it on the old space's lane precedes its exec line.
            space.lane.send(LaneMessage::Left { pid });
        }
        let result = self.create_space(tid, new_space, Origin::Exec { former_tid });
        if let Some(old) = old_space {
            self.leave_space(old);
        }
        self.processes.insert(
            pid,
            Process {
                space: Some(new_space),
            },
        );
        match result {
            Ok(()) => self.resume_after_setup(tid),
            Err(InjectError::Died(status)) => self.on_status(status),
            Err(InjectError::Io(e)) => {
                tracing::warn!(tid, "cannot follow the memory of {pid} after exec: {e}");
                self.resume_after_setup(tid);
            }
        }
    }

    fn allocate_space(&mut self) -> SpaceId {
        let id = self.next_space;
        self.next_space += 1;
        id
    }

    /// Gives a stopped process (at exec's exit or a fork child's attach stop) its own space:
    /// a userfaultfd, a lane, and the mappings it has, with their present pages.
    fn create_space(&mut self, tid: i32, id: SpaceId, origin: Origin) -> Result<(), InjectError> {
        let page_size = self.config.lane.page_size;
        // The space is made whatever happens below: its creation is already announced (or about
        // to be), and the process's exit needs a lane to be reported on.
        let mut died = None;
        // Read first: the injection needs the vDSO's place, and changes no mapping.
        let maps = procfs::read_maps(tid).unwrap_or_default();
        let uffd = if self.config.faults {
            match self.inject_uffd(tid, &maps) {
                Ok(u) => Some(Arc::new(u)),
                Err(InjectError::Io(e)) => {
                    tracing::warn!(tid, "no userfaultfd for space {id}: {e}; mappings only");
                    None
                }
                Err(InjectError::Died(status)) => {
                    died = Some(status);
                    None
                }
            }
        } else {
            None
        };
        let pagemap = Pagemap::open(tid, page_size).ok().map(Arc::new);
        let (actor, lane) = Lane::new(
            id,
            uffd.clone(),
            pagemap.clone(),
            self.sequencer.clone(),
            self.config.lane,
        );
        self.runtime.spawn(actor.run());
        let brk = match origin {
            Origin::Exec { former_tid } => {
                lane.send(LaneMessage::Observed(Stamped::now(Event::Exec {
                    pid: tid,
                    tid: former_tid,
                    space: id,
                    path: procfs::exe(tid),
                    argv: procfs::cmdline(tid),
                })));
                maps.iter()
                    .find(|e| e.path == "[heap]")
                    .map(|e| e.end)
                    .or_else(|| procfs::start_brk(tid))
                    .unwrap_or(0)
            }
            Origin::Fork { parent_brk } => {
                if let Some(birth) = self.announce.remove(&id) {
                    lane.observed(birth);
                }
                // The child starts as a copy of the parent in the stream; its own page tables
                // then describe it whole (ranges it did not inherit, MADV_DONTFORK, are gone).
                lane.observed(Event::Unmap {
                    pid: tid,
                    tid,
                    space: id,
                    start: 0,
                    end: USER_SPACE_END,
                });
                parent_brk
            }
        };
        let space = Space {
            lane,
            uffd,
            pagemap,
            brk,
            members: 1,
        };
        send_snapshot(&space, id, tid, tid, &maps);
        self.spaces.insert(id, space);
        match died {
            Some(status) => Err(InjectError::Died(status)),
            None => Ok(()),
        }
    }

    /// Creates a userfaultfd inside the tracee (so that it is bound to the tracee's mm), takes a
    /// copy, and closes the tracee's: if we die, the kernel releases everything.
    fn inject_uffd(
        &mut self,
        tid: i32,
        maps: &[procfs::MapsEntry],
    ) -> Result<AddressSpaceUffd, InjectError> {
        let site = self.site.address(tid, maps)?;
        let mut injection = Injection::begin(Pid::from_raw(tid), site)?;
        let fd = match inject::create_userfaultfd(&mut injection) {
            Ok(fd) => fd,
            Err(InjectError::Io(e)) => {
                self.finish_injection(tid, injection)?;
                return Err(InjectError::Io(e));
            }
            Err(died) => return Err(died),
        };
        let ours = inject::take_fd(tid, fd);
        let closed = injection.syscall(libc::SYS_close, &[fd as u64]);
        self.finish_injection(tid, injection)?;
        closed?;
        Ok(AddressSpaceUffd::handshake(
            ours?,
            self.config.lane.page_size,
        )?)
    }

    fn finish_injection(&mut self, tid: i32, injection: Injection) -> Result<(), InjectError> {
        if injection.finish()? {
            self.job_stopped.insert(tid);
        }
        Ok(())
    }

    /// Resumes a thread we injected into: a group stop that began meanwhile is kept, as job
    /// control would have it.
    fn resume_after_setup(&mut self, tid: i32) {
        if self.job_stopped.remove(&tid) {
            self.go(tid, Resume::Listen);
        } else {
            self.go(tid, Resume::Cont(None));
        }
    }

    fn leave_space(&mut self, id: SpaceId) {
        if let Some(space) = self.spaces.get_mut(&id) {
            space.members -= 1;
            if space.members == 0 {
                // Dropping the lane handle ends the lane once it has forwarded everything.
                self.spaces.remove(&id);
            }
        }
    }

    /// A stop of a task we have not heard of: a new child whose creator's event is still to
    /// come. If its creator is not a live traced process (killed between the fork and the report
    /// of it), that event will never come: the child is adopted now rather than left stopped.
    fn on_unknown_stop(&mut self, tid: i32) {
        let creator = match procfs::tgid(tid) {
            Some(tgid) if tgid != tid => tgid,
            _ => procfs::parent(tid).unwrap_or(0),
        };
        tracing::debug!(tid, creator, "stop of a task not yet announced");
        if self.processes.contains_key(&creator) {
            self.early_attach.insert(tid, creator);
        } else {
            self.adopt(tid, creator, None);
        }
    }

    /// Follows a fork child whose fork event was lost with its parent.
    /// `child` is at its attach stop.
    fn adopt(&mut self, child: i32, parent: i32, parent_space: Option<SpaceId>) {
        tracing::debug!(
            child,
            parent,
            ?parent_space,
            "adopting a child whose fork event was lost"
        );
        self.follow_child_alone(child, parent, parent_space);
        self.on_attached(child);
    }

    /// Announces `child` as a fork of `parent` with a space of its own, to be made at its attach
    /// stop. Without a live parent space, the child's space is its own origin.
    fn follow_child_alone(&mut self, child: i32, parent: i32, parent_space: Option<SpaceId>) {
        let id = self.allocate_space();
        let parent_space = parent_space.filter(|s| self.spaces.contains_key(s));
        let brk = parent_space.map_or(0, |s| self.spaces[&s].brk);
        let fork = Event::Fork {
            pid: parent,
            tid: parent,
            child,
            kind: ForkKind::Fork,
            // With its parent's space gone, the child's space is its own origin.
            space: parent_space.unwrap_or(id),
            child_space: id,
        };
        match parent_space {
            Some(s) => self.spaces[&s].lane.observed(fork),
            None => {
                self.announce.insert(id, fork);
            }
        }
        self.processes.insert(child, Process { space: None });
        self.threads
            .insert(child, Thread::new(child, false, Some((id, brk))));
    }

    fn on_death(&mut self, tid: i32, end: ProgramEnd) {
        self.early_attach.remove(&tid);
        self.forget_deferred(tid);
        let Some(thread) = self.threads.remove(&tid) else {
            return;
        };
        let pid = thread.pid;
        let space = self.processes.get(&pid).and_then(|p| p.space);
        let lane = space
            .and_then(|s| self.spaces.get(&s))
            .map(|s| s.lane.clone());
        if tid != pid {
            if let (Some(space), Some(lane)) = (space, lane) {
                lane.observed(Event::ThreadExit { pid, tid, space });
            }
            return;
        }
        if tid == self.root {
            self.root_end = Some(end);
            // Nothing to pass signals on to any more (and its pid may be reused).
            self.root_pid.store(0, Ordering::SeqCst);
        }
        self.processes.remove(&pid);
        // Children whose fork event died with this process.
        let orphans: Vec<i32> = self
            .early_attach
            .iter()
            .filter(|&(_, &creator)| creator == pid)
            .map(|(&child, _)| child)
            .collect();
        for child in orphans {
            self.early_attach.remove(&child);
            if procfs::tgid(child) == Some(child) {
                self.adopt(child, pid, space);
            }
        }
        let (Some(space_id), Some(lane)) = (space, lane) else {
            return;
        };
        let (status, signal) = match end {
            ProgramEnd::Exited(code) => (Some(code), None),
            ProgramEnd::Signaled(sig) => (None, Some(signal_name(sig))),
        };
        lane.observed(Event::Exit {
            pid,
            tid,
            space: space_id,
            status,
            signal,
            resident_bytes: 0,
            peak_resident_bytes: 0,
        });
        self.leave_space(space_id);
    }
}

/// Where a new mapping is, and who made it.
struct MapAt {
    pid: i32,
    tid: i32,
    space: SpaceId,
    range: Range<u64>,
}

/// The pages of a range present now, read while the thread that changed the range is stopped.
fn present_at(space: &Space, range: Range<u64>) -> PagesAtExit {
    let read_at = Instant::now();
    let present = space
        .pagemap
        .as_ref()
        .and_then(|p| p.populated_runs(range).ok())
        .unwrap_or_default();
    PagesAtExit { read_at, present }
}

/// The stream's name for a `madvise` advice that drops pages at once; None for the others.
fn discard_advice(advice: i32) -> Option<&'static str> {
    match advice {
        libc::MADV_DONTNEED => Some("dontneed"),
        libc::MADV_REMOVE => Some("remove"),
        24 /* MADV_DONTNEED_LOCKED */ => Some("dontneed_locked"),
        // Reclaims what it can at once: pages freed with MADV_FREE are dropped (and, with swap,
        // others swapped out, which the lane counts as still there).
        21 /* MADV_PAGEOUT */ => Some("pageout"),
        // MADV_FREE and the rest leave pages present until reclaim (or never drop them).
        _ => None,
    }
}

/// Describes a space whole, as its page tables say: every mapping, with its present pages.
fn send_snapshot(space: &Space, id: SpaceId, pid: i32, tid: i32, maps: &[procfs::MapsEntry]) {
    for entry in maps {
        let at = MapAt {
            pid,
            tid,
            space: id,
            range: entry.start..entry.end,
        };
        let tracked = send_maps_entry(space, at, entry);
        if entry.path == "[stack]" && tracked {
            // Unlimited: the legacy layout keeps mappings far from the stack.
            let limit = procfs::stack_limit(pid).unwrap_or(1 << 40);
            space.lane.send(LaneMessage::Stack {
                pid,
                range: entry.start..entry.end,
                limit,
            });
        }
    }
}

/// Sends `at.range` (all or part of a `/proc/PID/maps` entry) to its lane as that mapping,
/// registered if it is private anonymous memory; whether it is tracked.
fn send_maps_entry(space: &Space, at: MapAt, entry: &procfs::MapsEntry) -> bool {
    // The whole mapping, never a part: registering part of an unregistered mapping (another
    // thread's, not reported yet) would split it, and the program could then see EFAULT from an
    // mremap that spans the two halves.
    let tracked = entry.is_private_anon()
        && space
            .uffd
            .as_ref()
            .is_some_and(|u| u.register(entry.start, entry.end).is_ok());
    send_map(
        space,
        at,
        &entry.prot,
        entry.kind(),
        entry.stream_path(),
        tracked,
    );
    tracked
}

/// Sends a new mapping to its lane. Its pages can already be present (`MAP_POPULATE`, locked
/// memory, a space seen for the first time, or a touch by another thread before the range was
/// registered): for a tracked range the lane reads which, in its own order (docs/ordering.md).
fn send_map(
    space: &Space,
    at: MapAt,
    prot: &str,
    kind: MapKind,
    path: Option<String>,
    tracked: bool,
) {
    let MapAt {
        pid,
        tid,
        space: space_id,
        range,
    } = at;
    let event = Event::Map {
        pid,
        tid,
        space: space_id,
        start: range.start,
        end: range.end,
        prot: prot.to_string(),
        kind,
        path,
        tracked,
        state: tracked.then_some(PageState::NotResident),
    };
    if tracked {
        let at_exit = present_at(space, range);
        space.lane.send(LaneMessage::Mapped {
            event: Stamped::now(event),
            at_exit,
        });
    } else {
        space.lane.observed(event);
    }
}

/// Lets a stopped thread go as asked; true if it was left in a group stop.
fn release(tid: i32, how: Resume) -> bool {
    match how {
        Resume::Cont(sig) => resume(tid, sig),
        Resume::Listen => return listen(tid),
        Resume::Syscall => {
            if let Err(e) = ptrace::syscall(Pid::from_raw(tid), None) {
                tracing::debug!(tid, "PTRACE_SYSCALL: {e}");
            }
        }
    }
    false
}

/// Leaves a group-stopped tracee stopped until SIGCONT, as without a tracer, while its next
/// event is still reported. If that fails (not in a group stop after all: at an injected
/// syscall's exit, or the stop already ended), it is resumed instead; false then.
fn listen(tid: i32) -> bool {
    // SAFETY: PTRACE_LISTEN takes no pointers.
    if unsafe { libc::ptrace(libc::PTRACE_LISTEN, tid, 0, 0) } != 0 {
        resume(tid, None);
        return false;
    }
    true
}

/// Restarts a stopped tracee; it may have died meanwhile (ESRCH), which its exit status reports.
fn resume(tid: i32, sig: Option<Signal>) {
    if let Err(e) = ptrace::cont(Pid::from_raw(tid), sig) {
        tracing::debug!(tid, "PTRACE_CONT: {e}");
    }
}
