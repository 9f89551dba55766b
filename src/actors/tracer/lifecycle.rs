//! Threads and processes: clone, fork, vfork, exec, exit, and job control.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use nix::sys::signal::Signal;
use rangemap::RangeSet;

use super::records::FirstRing;
use super::spaces::Origin;
use super::{Phase, Process, ProgramEnd, Thread, Tracer, USER_SPACE_END};
use crate::actors::lane::LaneMessage;
use crate::actors::sequencer::{SequencerMessage, Stamped};
use crate::event::{Event, ForkKind, SpaceId, WarningKind, signal_name};
use crate::kernel::inject::{self, InjectError};
use crate::kernel::ptrace::{self, ChildEvent, Resume, is_group_stop_signal};
use crate::kernel::syscall;
use crate::kernel::{oom, procfs};
use crate::test_hooks::{self, Fault};

/// The traced program's first process and end, and what is known of processes between two of
/// their stops.
#[derive(Default)]
pub(super) struct Lineage {
    /// The program's first process (`run`), whose end is the trace's status; 0 under `attach`.
    root: i32,
    root_end: Option<ProgramEnd>,
    /// Attach stops of children whose parent's fork/clone event has not been seen yet, with
    /// the process whose event they wait for (their parent, or their own process for a thread)
    /// and the stop's signal (a group stop must be kept).
    early_attach: HashMap<i32, (i32, Option<Signal>)>,
    /// Processes killed between their exec event and execve's exit stop: filed under their old
    /// space, whose memory is gone, so nothing is checked at their exit.
    interrupted_execs: HashSet<i32>,
}

impl Lineage {
    pub(super) fn root(&self) -> i32 {
        self.root
    }

    pub(super) fn set_root(&mut self, pid: i32) {
        self.root = pid;
    }

    /// How the program's first process ended, once it has.
    pub(super) fn root_end(&self) -> Option<ProgramEnd> {
        self.root_end
    }

    /// New children stopped at their attach stop, waiting for their creator's event.
    pub(super) fn early_children(&self) -> impl Iterator<Item = i32> + '_ {
        self.early_attach.keys().copied()
    }

    /// Whether `pid` was killed between its exec event and execve's exit stop.
    pub(super) fn exec_interrupted(&self, pid: i32) -> bool {
        self.interrupted_execs.contains(&pid)
    }
}

impl Tracer {
    /// A new child's first stop (its attach stop): it is set up, and let go.
    pub(super) fn on_attach_stop(&mut self, tid: i32, group_stop: bool) {
        let Some(thread) = self.threads.get_mut(&tid) else {
            return;
        };
        // A child created while its group is stopped (or stopping) has a group stop for its
        // first stop: it must stay stopped once set up, as it would untraced.
        thread.group_stopped |= group_stop;
        self.on_attached(tid);
    }

    /// A group stop (job control) of a thread past its attach stop: it stays stopped, listened
    /// to. Before the first exec there is no job control to keep.
    pub(super) fn on_group_stop(&mut self, tid: i32, signal: Signal) {
        let Some(thread) = self.threads.get(&tid) else {
            return self.on_unknown_stop(tid, Some(signal));
        };
        let pre_exec = self
            .processes
            .get(&thread.pid)
            .is_some_and(|p| p.space.is_none());
        match pre_exec {
            true => self.go(tid, Resume::Cont(None)),
            false => self.go(tid, Resume::Listen),
        }
    }

    /// Our `PTRACE_INTERRUPT`'s trap. It may come late, after another stop it was sent during;
    /// then it is resumed like any other (or held, if a checkpoint is on).
    pub(super) fn on_interrupt_stop(&mut self, tid: i32) {
        if !self.threads.contains_key(&tid) {
            // A new task's first stop, before the event that announces it.
            return self.on_unknown_stop(tid, Some(Signal::SIGTRAP));
        }
        self.go(tid, Resume::Cont(None));
    }

    /// Resumes a thread we held to set up (at its attach stop or after an injection): a group
    /// stop that began meanwhile is kept, as job control would have it.
    pub(super) fn resume_after_setup(&mut self, tid: i32) {
        let group_stopped = self
            .threads
            .get_mut(&tid)
            .is_some_and(|t| std::mem::take(&mut t.group_stopped));
        if group_stopped {
            self.go(tid, Resume::Listen);
        } else {
            self.go(tid, Resume::Cont(None));
        }
    }

    /// A fork, vfork or clone is under way in `parent_tid`.
    pub(super) fn on_new_child(&mut self, parent_tid: i32, event: ChildEvent) {
        let child = match ptrace::event_message(parent_tid) {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(parent_tid, "no child id for a {event:?} event: {e}");
                return self.go_on_in_syscall(parent_tid);
            }
        };
        // A fork child that makes a thread or a process of its own goes on: a whole ring.
        self.grow_ring(parent_tid);
        if event == ChildEvent::Vfork
            && let Some(t) = self.threads.get_mut(&parent_tid)
        {
            t.phase.vforked();
        }
        let Some((pid, space_id)) = self.space_of(parent_tid) else {
            // A parent whose space we do not follow (it died while being set up): its child is
            // still followed, on its own, or it would wait at its attach stop forever.
            let parent = self.threads.get(&parent_tid).map_or(parent_tid, |t| t.pid);
            self.follow_child_alone(child, parent, None);
            self.inherit_every_syscall(parent_tid, child);
            return self.child_announced(parent_tid, child);
        };
        let (is_thread, shares_mm) = self.sharing(parent_tid, pid, space_id, child, event);
        let mut new_space = None;
        if is_thread {
            self.observed(
                space_id,
                Event::Thread {
                    pid,
                    tid: parent_tid,
                    child,
                    space: space_id,
                    // Not run yet: the name it starts with, its creator's.
                    name: procfs::comm(pid, child),
                },
            );
        } else {
            let (kind, child_space) = if shares_mm {
                let kind = match event {
                    ChildEvent::Vfork => ForkKind::Vfork,
                    _ => ForkKind::CloneVm,
                };
                if let Some(space) = self.spaces.get_mut(&space_id) {
                    space.members += 1;
                }
                (kind, space_id)
            } else {
                self.scan_at_fork(pid, space_id);
                let id = self.maker.allocate();
                new_space = Some((id, self.inherited_from(Some(space_id))));
                (ForkKind::Fork, id)
            };
            self.processes.insert(
                child,
                Process {
                    space: shares_mm.then_some(space_id),
                    faults_at_join: 0,
                    faults_at_exit: None,
                    rss: None,
                    memory_cgroup: None,
                },
            );
            self.observed(
                space_id,
                Event::Fork {
                    pid,
                    tid: parent_tid,
                    child,
                    kind,
                    space: space_id,
                    child_space,
                },
            );
        }
        let own_space = new_space.is_some();
        self.threads.insert(
            child,
            Thread::new(
                if is_thread { pid } else { child },
                Phase::AwaitingAttach { new_space },
            ),
        );
        self.inherit_every_syscall(parent_tid, child);
        if !own_space && shares_mm {
            self.held.started_thread(child);
        }
        // A fork child's space is made at its attach stop; its lane is told there.
        if !own_space {
            self.namespaces
                .learn(child, is_thread.then_some(parent_tid));
            self.tell_namespace(child, space_id);
        }
        self.child_announced(parent_tid, child);
    }

    /// Whether a new child is a thread of its creator's process, and whether it shares its
    /// creator's memory: from the clone flags, read while the creator is stopped inside the
    /// call. `kcmp` is only a cross-check; a disagreement is said in the stream.
    fn sharing(
        &self,
        parent_tid: i32,
        pid: i32,
        space: SpaceId,
        child: i32,
        event: ChildEvent,
    ) -> (bool, bool) {
        let flags = match syscall::clone_flags(parent_tid) {
            Ok(flags) => flags,
            Err(e) => {
                // The event alone: a vfork shares; a fork does not; a clone is a thread if the
                // child is in our thread group (a signal 0 to it as one of the group's threads
                // says so, with no file to open), and shares memory if the kernel says so.
                tracing::debug!(parent_tid, "cannot read the clone flags: {e}");
                let is_thread = event == ChildEvent::Clone && ptrace::is_thread_of(pid, child);
                let shares = match event {
                    ChildEvent::Vfork => true,
                    ChildEvent::Fork => false,
                    ChildEvent::Clone => is_thread || self.kcmp(parent_tid, child) == Some(true),
                };
                return (is_thread, shares);
            }
        };
        let is_thread = flags & libc::CLONE_THREAD as u64 != 0;
        let shares = flags & libc::CLONE_VM as u64 != 0;
        // A thread shares by definition (the kernel refuses CLONE_THREAD without CLONE_VM): no
        // cross-check, which spares a syscall per thread.
        if !is_thread
            && let Some(kernel_says) = self.kcmp(parent_tid, child)
            && kernel_says != shares
        {
            self.warn(
                Some(pid),
                Some(space),
                WarningKind::SharingDisagrees,
                format!(
                    "clone flags {flags:#x} of {parent_tid} say the child {child} {} its memory, \
                     kcmp says it {}; the flags are followed",
                    if shares { "shares" } else { "does not share" },
                    if kernel_says { "does" } else { "does not" },
                ),
            );
        }
        (is_thread, shares)
    }

    /// `kcmp(KCMP_VM)` of two stopped tasks; None if it cannot answer.
    fn kcmp(&self, a: i32, b: i32) -> Option<bool> {
        if test_hooks::fails(Fault::Kcmp, None) {
            return None;
        }
        match inject::same_address_space(a, b) {
            Ok(same) => Some(same),
            Err(e) => {
                tracing::debug!(a, b, "kcmp: {e}");
                None
            }
        }
    }

    /// The creator goes on; the child is set up now if its attach stop came first.
    fn child_announced(&mut self, parent_tid: i32, child: i32) {
        self.go_on_in_syscall(parent_tid);
        if let Some(signal) = self.lineage.early_attach.remove(&child).map(|(_, s)| s) {
            if let Some(thread) = self.threads.get_mut(&child) {
                thread.group_stopped |= signal.is_some_and(is_group_stop_signal);
            }
            self.on_attached(child);
        }
    }

    /// A new child's first stop: it has run no code of its own yet.
    pub(super) fn on_attached(&mut self, tid: i32) {
        self.sample_touches(tid);
        let Some((new_space, inherited)) =
            self.threads.get_mut(&tid).and_then(|t| t.phase.attached())
        else {
            // A thread, or a process sharing its creator's space: its faults go to that space.
            if let Some((pid, space)) = self.space_of(tid) {
                self.record_faults(pid, tid, space, FirstRing::Whole);
            }
            return self.resume_after_setup(tid);
        };
        self.namespaces.learn(tid, None);
        let result = self.create_space(tid, new_space, Origin::Fork(Box::new(inherited)));
        self.tell_namespace(tid, new_space);
        self.processes.insert(
            tid,
            Process {
                space: Some(new_space),
                faults_at_join: 0,
                faults_at_exit: None,
                rss: None,
                memory_cgroup: None,
            },
        );
        self.after_setup(tid, result, "fork child");
    }

    /// Resumes a thread after its space was made, or learns that it died meanwhile.
    fn after_setup(&mut self, tid: i32, result: Result<(), InjectError>, what: &str) {
        match result {
            Ok(()) => self.resume_after_setup(tid),
            Err(InjectError::Died(status)) => {
                let stop = self.stop_of(status);
                self.pending.extend(stop);
            }
            Err(InjectError::Io(e)) => {
                tracing::warn!(tid, "cannot follow the memory of {what} {tid}: {e}");
                self.resume_after_setup(tid);
            }
        }
    }

    /// An execve succeeded: every other thread of the process is gone, and the process gets a
    /// new space.
    pub(super) fn on_exec(&mut self, tid: i32) {
        let former_tid = ptrace::event_message(tid).unwrap_or(tid);
        let pid = tid;
        let old_space = self.space_of_process(pid);
        // The execing thread now has the leader's id. The dead threads' exit statuses may never
        // be reported, so their ends are said here.
        let mut gone: Vec<i32> = self
            .threads
            .iter()
            .filter(|&(&t, th)| th.pid == pid && t != pid && t != former_tid)
            .map(|(&t, _)| t)
            .collect();
        gone.sort_unstable();
        if let Some(space) = old_space {
            for tid in gone {
                // Killed by the exec: their exit stops, if any, came before it.
                let name = self.threads.get(&tid).and_then(|t| match &t.phase {
                    Phase::Exiting { name_at_exit, .. } => name_at_exit.clone(),
                    Phase::AwaitingAttach { .. }
                    | Phase::Running
                    | Phase::Listening
                    | Phase::InVfork => None,
                });
                self.observed(
                    space,
                    Event::ThreadExit {
                        pid,
                        tid,
                        space,
                        name,
                    },
                );
            }
        }
        let killed: Vec<i32> = self
            .threads
            .iter()
            .filter(|&(&t, th)| th.pid == pid && t != tid)
            .map(|(&t, _)| t)
            .collect();
        // Its id in a child PID namespace is the process's now (read again: the leader's).
        let elsewhere = self.namespaces.elsewhere(pid) || self.namespaces.elsewhere(former_tid);
        if let Some((_, samplers)) = &self.config.touch_stacks {
            // The exec's own thread lives on as the leader: its sampler moves, not goes.
            for &t in killed.iter().filter(|&&t| t != former_tid) {
                samplers.gone(t);
            }
            samplers.exec(former_tid, tid);
        }
        for t in killed.into_iter().chain([former_tid, tid]) {
            // A change held at its entry (woken.rs) died with its thread.
            self.forget_held_change(t);
            self.forget_deferred(t);
            self.namespaces.forget(t);
        }
        if elsewhere {
            self.namespaces.read(tid);
        }
        // Filters outlive exec: a thread that stopped at every syscall still does.
        let every_syscall = self
            .threads
            .get(&former_tid)
            .is_some_and(|t| t.syscalls.stops.every_syscall());
        self.threads.retain(|&t, th| th.pid != pid || t == tid);
        self.threads.remove(&former_tid);
        let mut thread = Thread::new(pid, Phase::Running);
        if every_syscall {
            thread.syscalls.stops.stop_at_every_syscall();
        }
        self.threads.insert(tid, thread);
        // Registers can only be borrowed at execve's exit stop: at this event stop the kernel has
        // yet to write execve's return value over them.
        match inject::run_to_syscall_exit(tid) {
            Ok(None) => {}
            Ok(Some(status)) => {
                // Killed between the exec and its syscall exit: the process is still filed under
                // its old space, whose memory is gone; there is nothing to check.
                self.lineage.interrupted_execs.insert(pid);
                let stop = self.stop_of(status);
                self.pending.extend(stop);
                return;
            }
            Err(e) => {
                tracing::debug!(tid, "after exec: {e}");
                return;
            }
        }
        let new_space = self.maker.allocate();
        // For a space followed by scans, what the kernel counts of its faults: the old space's
        // last, the new one's first (unseen.rs).
        let scanned = |tracer: &Self, space: Option<SpaceId>| {
            space
                .and_then(|s| tracer.spaces.get(&s))
                .is_some_and(|s| s.scans_only())
        };
        let mut faults_at_exec = (self.config.follow_by.scans_everything()
            || scanned(self, old_space))
        .then(|| procfs::minor_faults(pid))
        .flatten();
        if let Some(old) = old_space {
            self.faults_leaving(pid, old, faults_at_exec);
        }
        if let Some(old) = old_space {
            // Every line about it on the old space's lane precedes its exec line. A lane that is
            // gone has sent everything already: the sequencer hears so from us.
            match self.spaces.get(&old) {
                Some(space) => space.lane.send(LaneMessage::Left { pid }),
                None => self
                    .sequencer
                    .send_blocking(SequencerMessage::Left { space: old, pid }),
            }
        }
        let result = self.create_space(tid, new_space, Origin::Exec { former_tid });
        // A space that got no userfaultfd is followed by scans: the same count, still stopped.
        if faults_at_exec.is_none() && scanned(self, Some(new_space)) {
            faults_at_exec = procfs::minor_faults(pid);
        }
        self.tell_namespace(tid, new_space);
        if let Some(old) = old_space {
            self.leave_space(old);
        }
        self.processes.insert(
            pid,
            Process {
                space: Some(new_space),
                faults_at_join: faults_at_exec.unwrap_or(0),
                faults_at_exit: None,
                rss: None,
                memory_cgroup: None,
            },
        );
        self.after_setup(tid, result, "process after exec");
    }

    /// A stop of a task we have not heard of: a new child whose creator's event is still to
    /// come. If its creator is not a live traced process (killed between the fork and the report
    /// of it), that event will never come: the child is adopted now rather than left stopped.
    /// `signal` is an event stop's (a group stop must be kept).
    pub(super) fn on_unknown_stop(&mut self, tid: i32, signal: Option<Signal>) {
        let creator = match procfs::tgid(tid) {
            Some(tgid) if tgid != tid => tgid,
            _ => procfs::parent(tid).unwrap_or(0),
        };
        tracing::debug!(tid, creator, "stop of a task not yet announced");
        if self.processes.contains_key(&creator) {
            self.lineage.early_attach.insert(tid, (creator, signal));
        } else {
            self.adopt(tid, creator, None, signal);
        }
    }

    /// Follows a fork child whose fork event was lost with its parent.
    /// `child` is at its attach stop.
    fn adopt(
        &mut self,
        child: i32,
        parent: i32,
        parent_space: Option<SpaceId>,
        signal: Option<Signal>,
    ) {
        tracing::debug!(
            child,
            parent,
            ?parent_space,
            "adopting a child whose fork event was lost"
        );
        self.follow_child_alone(child, parent, parent_space);
        if let Some(t) = self.threads.get_mut(&child) {
            t.group_stopped |= signal.is_some_and(is_group_stop_signal);
        }
        self.on_attached(child);
    }

    /// Announces `child` as a fork of `parent` with a space of its own, to be made at its attach
    /// stop. Without a live parent space, the child's space is its own origin.
    fn follow_child_alone(&mut self, child: i32, parent: i32, parent_space: Option<SpaceId>) {
        let id = self.maker.allocate();
        let parent_space = parent_space.filter(|s| self.spaces.contains_key(s));
        let inherited = self.inherited_from(parent_space);
        let fork = Event::Fork {
            pid: parent,
            tid: parent,
            child,
            kind: ForkKind::Fork,
            // With its parent's space gone, the child's space is its own origin.
            space: parent_space.unwrap_or(id),
            child_space: id,
        };
        match parent_space.and_then(|s| self.spaces.get(&s)) {
            Some(s) => s.lane.observed(fork),
            None => {
                self.maker.announce_on_its_lane(id, fork);
            }
        }
        self.processes.insert(
            child,
            Process {
                space: None,
                faults_at_join: 0,
                faults_at_exit: None,
                rss: None,
                memory_cgroup: None,
            },
        );
        self.threads.insert(
            child,
            Thread::new(
                child,
                Phase::AwaitingAttach {
                    new_space: Some((id, inherited)),
                },
            ),
        );
    }

    /// PTRACE_EVENT_EXIT: the thread is leaving, its mm still whole. If no other thread of its
    /// space can run user code any more, this is a quiescent point: `--verify` checks it.
    pub(super) fn on_exit_stop(&mut self, tid: i32) {
        // Killed while held at a layout syscall's entry (woken.rs): never begun.
        self.forget_held_change(tid);
        let pid = self.threads.get(&tid).map_or(tid, |t| t.pid);
        let name = procfs::comm(pid, tid);
        let begun = self.threads.get_mut(&tid).and_then(|t| {
            t.phase.exit_stop(name);
            t.syscalls.take_layout()
        });
        if let (Some(_), Some((_, space))) = (begun, self.space_of(tid)) {
            // Killed inside a layout syscall: its exit will never be reported, and it may or may
            // not have changed the layout. The mm is still whole here: describe it again from
            // the kernel.
            self.describe_whole_space(Some(tid), space, tid);
        }
        let faults_now = self.note_faults_at_exit(pid);
        if self
            .space_of(tid)
            .is_some_and(|(_, space)| self.space_is_quiescent(space))
        {
            self.sample_layout_of(tid);
        }
        self.scan_at_exit(tid, faults_now);
        self.verify_at_exit(tid);
        // Never held by a checkpoint: past this stop it runs no user code, and a multithreaded
        // execve waits (where ptrace cannot stop it) until the threads it kills have gone.
        self.checkpoints.forget(tid);
        self.release_now(tid, Resume::Cont(None));
    }

    /// A thread killed inside a layout syscall with no exit stop at all (a SIGKILL skips
    /// `PTRACE_EVENT_EXIT`): what the syscall did is in the kernel and not in the stream. The
    /// space is described again through a thread of it still traced, before any later check
    /// of it; with none left, the space is gone and nothing is owed.
    fn describe_after_killed_syscall(&mut self, tid: i32, space: SpaceId) {
        // A thread that is dying too may have dropped the mm already: one whose maps still read.
        let mut others: Vec<i32> = self.threads_in(space).map(|(t, _)| t).collect();
        others.sort_unstable();
        let alive = others
            .into_iter()
            .find(|&t| procfs::read_maps(t).is_ok_and(|maps| !maps.is_empty()));
        self.describe_whole_space(alive, space, tid);
    }

    /// Describes a whole space again through `through` (a thread whose maps can be read), if
    /// any, and ends `ended`'s syscall in its lane.
    fn describe_whole_space(&mut self, through: Option<i32>, space: SpaceId, ended: i32) {
        if let Some(through) = through {
            let mut whole = RangeSet::new();
            whole.insert(0..USER_SPACE_END);
            self.describe_again(through, space, whole);
        }
        if let Some(s) = self.spaces.get(&space)
            && s.uffd().is_some()
        {
            s.lane.send(LaneMessage::Ended { tid: ended });
        }
    }

    /// A thread is gone; for the last one, its process.
    pub(super) fn on_death(&mut self, tid: i32, end: ProgramEnd) {
        self.lineage.early_attach.remove(&tid);
        if let Some((_, samplers)) = &self.config.touch_stacks {
            samplers.gone(tid);
        }
        self.forget_held_change(tid);
        self.forget_deferred(tid);
        self.namespaces.forget(tid);
        self.unrecorded.thread_gone(tid);
        self.reclaim_from(tid);
        let Some(thread) = self.threads.remove(&tid) else {
            return;
        };
        let pid = thread.pid;
        let (name_at_exit, unborn_space) = match thread.phase {
            Phase::Exiting {
                name_at_exit,
                unborn_space,
                ..
            } => (name_at_exit, unborn_space),
            // Killed before its first stop.
            Phase::AwaitingAttach { new_space } => (None, new_space.map(|(id, _)| id)),
            Phase::Running | Phase::Listening | Phase::InVfork => (None, None),
        };
        let space = self.space_of_process(pid);
        if thread.syscalls.layout_call().is_some()
            && let Some(space) = space
        {
            self.describe_after_killed_syscall(tid, space);
        }
        let lane = space
            .and_then(|s| self.spaces.get(&s))
            .map(|s| s.lane.clone());
        if tid != pid {
            if let (Some(space), Some(lane)) = (space, lane) {
                lane.observed(Event::ThreadExit {
                    pid,
                    tid,
                    space,
                    name: name_at_exit,
                });
            }
            return;
        }
        let end = self.signals.end_of(pid, end);
        if tid == self.lineage.root {
            self.lineage.root_end = Some(end);
            // Nothing to pass signals on to any more (and its pid may be reused).
            self.signals.root_pid.store(0, Ordering::SeqCst);
        }
        self.faults_of_the_dead(pid);
        let process = self.processes.remove(&pid);
        let oom = match end {
            ProgramEnd::Signaled(libc::SIGKILL) => {
                // A zombie still names its cgroup; a reaped process, the last look's.
                let cgroup =
                    oom::memory_cgroup(pid).or_else(|| process.and_then(|p| p.memory_cgroup));
                self.oom
                    .killed(pid, cgroup.as_ref())
                    .map(|kill| crate::event::OomKill {
                        cgroup: kill.cgroup,
                        limit: kill.limit,
                        log: kill.log,
                    })
            }
            _ => None,
        };
        self.lineage.interrupted_execs.remove(&pid);
        // Children whose fork event died with this process.
        let orphans: Vec<(i32, Option<Signal>)> = self
            .lineage
            .early_attach
            .iter()
            .filter(|&(_, &(creator, _))| creator == pid)
            .map(|(&child, &(_, signal))| (child, signal))
            .collect();
        for (child, signal) in orphans {
            self.lineage.early_attach.remove(&child);
            if procfs::tgid(child) == Some(child) {
                self.adopt(child, pid, space, signal);
            }
        }
        let (space_id, lane, joined) = match (space, lane, unborn_space) {
            (Some(space_id), Some(lane), _) => (space_id, lane, true),
            // A fork child killed before its first stop: its `fork` line named a space that was
            // never made. A lane of its own, following nothing, writes its end there.
            (None, _, Some(space_id)) => (space_id, self.unborn_space_lane(space_id), false),
            _ => return,
        };
        let (status, signal) = match end {
            ProgramEnd::Exited(code) => (Some(code), None),
            ProgramEnd::Signaled(sig) => (None, Some(signal_name(sig))),
        };
        let exit = Stamped::now(Event::Exit {
            pid,
            tid,
            space: space_id,
            status,
            signal,
            // The state actor puts the argv[0] it knows in its place.
            name: name_at_exit,
            resident_bytes: 0,
            peak_resident_bytes: 0,
            oom,
        });
        // First, so that what other lanes saw after this end waits for the `exit` line
        // (the sequencer's rule 4): a parent that reaped this process runs on only now.
        self.sequencer.send_blocking(SequencerMessage::Exiting {
            space: space_id,
            pid,
            at: exit.at,
        });
        // A lane that has ended (it failed) cannot write it: it goes straight on, after
        // everything that lane sent.
        if let Err(refused) = lane.deliver(LaneMessage::Observed(Box::new(exit)))
            && let LaneMessage::Observed(exit) = *refused
        {
            self.sequencer.send_blocking(SequencerMessage::Line(*exit));
        }
        if joined {
            self.leave_space(space_id);
        }
    }
}
