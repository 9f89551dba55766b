//! A traced thread as the tracer knows it: where it is in its life (`Phase`), and what its
//! syscalls' stops are for (`Syscalls`), each one enum, so that a state no stop can lead to
//! cannot be written.

use std::ops::Range;

use rangemap::RangeSet;

use super::unread::Unread;
use super::{lending, spaces};
use crate::event::SpaceId;
use crate::kernel::syscall::LayoutSyscall;

/// A traced thread.
#[derive(Debug)]
pub(super) struct Thread {
    /// The thread group.
    pub(super) pid: i32,
    /// Where it is in its life, as its stops tell it.
    pub(super) phase: Phase,
    /// In a group stop that began while we held it (at its attach stop, or while we ran
    /// syscalls in it): it must be left stopped, not resumed. Not part of `phase`: it is noted
    /// in any (an injection into a thread attached to, which no setup resumes; a thread killed
    /// during its setup reaches its exit stop with it), and only the resume after a setup takes
    /// it (lifecycle.rs).
    pub(super) group_stopped: bool,
    /// Its syscalls, as far as their stops are ours.
    pub(super) syscalls: Syscalls,
}

impl Thread {
    pub(super) fn new(pid: i32, phase: Phase) -> Self {
        Self {
            pid,
            phase,
            group_stopped: false,
            syscalls: Syscalls {
                stops: SyscallStops::Seccomp,
                at_exit: AtExit::Nothing,
                serial: 0,
            },
        }
    }
}

/// Where a traced thread is in its life, as its stops tell it.
#[derive(Debug)]
pub(super) enum Phase {
    /// A new child whose attach stop has not been seen yet. A fork child has the space it must
    /// be given there, and what it has of its parent's space.
    AwaitingAttach {
        new_space: Option<(SpaceId, spaces::Inherited)>,
    },
    /// Attached, neither waiting for a vfork child, nor left in a group stop, nor exiting: it
    /// may run user code whenever we let it go.
    Running,
    /// Left in a group stop (PTRACE_LISTEN) until SIGCONT.
    Listening,
    /// A vfork parent waiting for its child: it runs no user code until the child execs or exits,
    /// and ptrace cannot stop it meanwhile.
    InVfork,
    /// Past its exit stop: it runs no user code any more.
    Exiting {
        /// Its name (`comm`) as read at its exit stop, for its `thread_exit` or `exit` line.
        name_at_exit: Option<String>,
        /// A fork child that reached its exit stop before its attach stop: the space its `fork`
        /// line named, never made, where its end is written.
        unborn_space: Option<SpaceId>,
        /// Killed while waiting for its vfork child: a detach leaves it to the kernel, as it
        /// does a vfork parent (attach.rs).
        in_vfork: bool,
    },
}

impl Phase {
    /// At its first stop, a new child is attached: the space it must be given there, if any.
    pub(super) fn attached(&mut self) -> Option<(SpaceId, spaces::Inherited)> {
        match self {
            Phase::AwaitingAttach { new_space } => {
                let new_space = new_space.take();
                *self = Phase::Running;
                new_space
            }
            Phase::Running | Phase::Listening | Phase::InVfork | Phase::Exiting { .. } => None,
        }
    }

    /// How its last release left it: in a group stop, or not. A thread not yet attached, in a
    /// vfork or exiting is never left listening.
    pub(super) fn released(&mut self, listening: bool) {
        match self {
            Phase::Running | Phase::Listening => {
                *self = if listening {
                    Phase::Listening
                } else {
                    Phase::Running
                };
            }
            Phase::AwaitingAttach { .. } | Phase::InVfork | Phase::Exiting { .. } => {}
        }
    }

    /// Its vfork event: it waits for its child from here. (A child not yet attached makes none.)
    pub(super) fn vforked(&mut self) {
        match self {
            Phase::Running | Phase::Listening | Phase::InVfork => *self = Phase::InVfork,
            Phase::Exiting { in_vfork, .. } => *in_vfork = true,
            Phase::AwaitingAttach { .. } => {}
        }
    }

    /// Its vfork child execed or exited.
    pub(super) fn vfork_done(&mut self) {
        match self {
            Phase::InVfork => *self = Phase::Running,
            Phase::Exiting { in_vfork, .. } => *in_vfork = false,
            Phase::AwaitingAttach { .. } | Phase::Running | Phase::Listening => {}
        }
    }

    /// Its exit stop, with its name as read there. What it was waiting for that still matters
    /// at its death is kept.
    pub(super) fn exit_stop(&mut self, name: Option<String>) {
        let (unborn_space, in_vfork) = match std::mem::replace(self, Phase::Running) {
            Phase::AwaitingAttach { new_space } => (new_space.map(|(id, _)| id), false),
            Phase::Running | Phase::Listening => (None, false),
            Phase::InVfork => (None, true),
            Phase::Exiting {
                unborn_space,
                in_vfork,
                ..
            } => (unborn_space, in_vfork),
        };
        *self = Phase::Exiting {
            name_at_exit: name,
            unborn_space,
            in_vfork,
        };
    }

    pub(super) fn awaiting_attach(&self) -> bool {
        match self {
            Phase::AwaitingAttach { .. } => true,
            Phase::Running | Phase::Listening | Phase::InVfork | Phase::Exiting { .. } => false,
        }
    }

    pub(super) fn listening(&self) -> bool {
        match self {
            Phase::Listening => true,
            Phase::AwaitingAttach { .. }
            | Phase::Running
            | Phase::InVfork
            | Phase::Exiting { .. } => false,
        }
    }

    pub(super) fn exiting(&self) -> bool {
        match self {
            Phase::Exiting { .. } => true,
            Phase::AwaitingAttach { .. } | Phase::Running | Phase::Listening | Phase::InVfork => {
                false
            }
        }
    }

    /// Waits for a vfork child, so that ptrace cannot stop it.
    pub(super) fn in_vfork(&self) -> bool {
        match self {
            Phase::InVfork => true,
            Phase::Exiting { in_vfork, .. } => *in_vfork,
            Phase::AwaitingAttach { .. } | Phase::Running | Phase::Listening => false,
        }
    }

    /// Whether it can touch memory before another stop of ours: not before its attach stop,
    /// while a vfork child runs, in a group stop we left it in, or past its exit stop.
    pub(super) fn may_touch_memory(&self) -> bool {
        match self {
            Phase::Running => true,
            Phase::AwaitingAttach { .. }
            | Phase::Listening
            | Phase::InVfork
            | Phase::Exiting { .. } => false,
        }
    }

    /// Whether it may still run user code: not before its attach stop, while a vfork child
    /// runs, or past its exit stop (a thread left in a group stop may, once continued).
    pub(super) fn may_run_user_code(&self) -> bool {
        match self {
            Phase::Running | Phase::Listening => true,
            Phase::AwaitingAttach { .. } | Phase::InVfork | Phase::Exiting { .. } => false,
        }
    }
}

/// A thread's syscalls, as far as their stops are ours.
#[derive(Debug)]
pub(super) struct Syscalls {
    /// Which of its syscalls stop.
    pub(super) stops: SyscallStops,
    /// What the exit stop of the syscall it is inside is for.
    pub(super) at_exit: AtExit,
    /// Counts the layout syscalls it began, so that a wait for "this syscall's exit" is not
    /// confused with the next syscall's.
    pub(super) serial: u64,
}

impl Syscalls {
    /// The layout syscall it is inside, from its seccomp (or entry) stop to its exit stop.
    pub(super) fn layout_call(&self) -> Option<LayoutSyscall> {
        match &self.at_exit {
            AtExit::Layout(begun) => Some(begun.call),
            AtExit::Nothing | AtExit::CloneFlags(_) | AtExit::Reclaim(_) | AtExit::Naming => None,
        }
    }

    /// A layout syscall begun (or, with no call decoded, nothing to do at its exit).
    pub(super) fn begin_layout(
        &mut self,
        call: Option<LayoutSyscall>,
        unregistered: Option<Range<u64>>,
        unread: Option<Unread>,
    ) {
        self.serial += 1;
        self.at_exit = match call {
            Some(call) => AtExit::Layout(BegunLayout {
                unread,
                ..BegunLayout::new(call, unregistered)
            }),
            None => AtExit::Nothing,
        };
    }

    /// Ranges another thread's report changed within the reach of its begun layout syscall.
    pub(super) fn raced(&mut self, ranges: RangeSet<u64>) {
        match &mut self.at_exit {
            AtExit::Layout(begun) => begun.raced.extend(ranges),
            AtExit::Nothing | AtExit::CloneFlags(_) | AtExit::Reclaim(_) | AtExit::Naming => {}
        }
    }

    /// A new syscall's stop: whatever waited for the last one's exit stop is over (it never
    /// came: nothing may take this syscall's exit for it). A layout syscall is left to its own
    /// exit stop.
    pub(super) fn next_syscall(&mut self) {
        match self.at_exit {
            AtExit::CloneFlags(_) | AtExit::Reclaim(_) | AtExit::Naming => {
                self.at_exit = AtExit::Nothing;
            }
            AtExit::Nothing | AtExit::Layout(_) => {}
        }
    }

    /// Its begun layout syscall, now over.
    pub(super) fn take_layout(&mut self) -> Option<BegunLayout> {
        match std::mem::replace(&mut self.at_exit, AtExit::Nothing) {
            AtExit::Layout(begun) => Some(begun),
            kept @ (AtExit::Nothing
            | AtExit::CloneFlags(_)
            | AtExit::Reclaim(_)
            | AtExit::Naming) => {
                self.at_exit = kept;
                None
            }
        }
    }

    /// The lent thread its `ptrace` call's exit takes back, now over.
    pub(super) fn take_reclaim(&mut self) -> Option<lending::Reclaim> {
        match self.at_exit {
            AtExit::Reclaim(reclaim) => {
                self.at_exit = AtExit::Nothing;
                Some(reclaim)
            }
            AtExit::Nothing | AtExit::Layout(_) | AtExit::CloneFlags(_) | AtExit::Naming => None,
        }
    }

    /// The `clone3` flags its exit puts back, now over.
    pub(super) fn take_clone_flags(&mut self) -> Option<crate::kernel::syscall::CloneArgsFlags> {
        match self.at_exit {
            AtExit::CloneFlags(saved) => {
                self.at_exit = AtExit::Nothing;
                Some(saved)
            }
            AtExit::Nothing | AtExit::Layout(_) | AtExit::Reclaim(_) | AtExit::Naming => None,
        }
    }

    /// Whether it was naming itself, now over.
    pub(super) fn take_naming(&mut self) -> bool {
        match self.at_exit {
            AtExit::Naming => {
                self.at_exit = AtExit::Nothing;
                true
            }
            AtExit::Nothing | AtExit::Layout(_) | AtExit::CloneFlags(_) | AtExit::Reclaim(_) => {
                false
            }
        }
    }

    /// Whether its exit stop puts `clone3` flags back, so that it must run to it.
    pub(super) fn puts_clone_flags_back(&self) -> bool {
        match self.at_exit {
            AtExit::CloneFlags(_) => true,
            AtExit::Nothing | AtExit::Layout(_) | AtExit::Reclaim(_) | AtExit::Naming => false,
        }
    }
}

/// Which of a thread's syscalls stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SyscallStops {
    /// Those our seccomp filter stops.
    Seccomp,
    /// Every syscall, at its entry and its exit: under a program's own filter with a listener,
    /// whose `USER_NOTIF` hides syscalls from our seccomp stops (notif.rs). For good: filters
    /// are never removed.
    Every {
        /// Its syscall was begun at its entry stop: our seccomp stop for it, if one comes, is
        /// not a new one.
        begun_at_entry: bool,
    },
}

impl SyscallStops {
    pub(super) fn every_syscall(self) -> bool {
        match self {
            SyscallStops::Every { .. } => true,
            SyscallStops::Seccomp => false,
        }
    }

    /// From now on every syscall stops.
    pub(super) fn stop_at_every_syscall(&mut self) {
        match self {
            SyscallStops::Seccomp => {
                *self = SyscallStops::Every {
                    begun_at_entry: false,
                }
            }
            SyscallStops::Every { .. } => {}
        }
    }

    /// Its syscall is begun at its entry stop (only a thread stopping at every syscall has one).
    pub(super) fn begun_at_entry(&mut self) {
        match self {
            SyscallStops::Every { begun_at_entry } => *begun_at_entry = true,
            SyscallStops::Seccomp => {}
        }
    }

    /// Whether its syscall was begun at its entry stop; its next syscall is not.
    pub(super) fn take_begun_at_entry(&mut self) -> bool {
        match self {
            SyscallStops::Every { begun_at_entry } => std::mem::take(begun_at_entry),
            SyscallStops::Seccomp => false,
        }
    }
}

/// What the exit stop of the syscall a thread is inside is for. One thing at a time: each is
/// set at a syscall's seccomp (or entry) stop, and taken at that syscall's exit stop, which
/// comes before any other syscall's stop.
#[derive(Debug)]
pub(super) enum AtExit {
    /// Nothing: between syscalls, or in one whose exit stop is not ours to see to.
    Nothing,
    /// A layout syscall, reported at its exit stop.
    Layout(BegunLayout),
    /// A `clone3` whose `CLONE_UNTRACED` was cleared in its memory: its flags, put back there.
    CloneFlags(crate::kernel::syscall::CloneArgsFlags),
    /// A `ptrace` call whose exit takes a lent thread back (lending.rs).
    Reclaim(lending::Reclaim),
    /// A `prctl(PR_SET_NAME)`: its exit stop writes the new name (names.rs).
    Naming,
}

/// A layout syscall a thread is inside.
#[derive(Debug)]
pub(super) struct BegunLayout {
    pub(super) call: LayoutSyscall,
    /// What other threads' reports changed within its reach: which came first in the kernel,
    /// ptrace cannot tell (docs/ordering.md, racing changes).
    pub(super) raced: RangeSet<u64>,
    /// A range given back to the kernel's own faults for its duration (an `mremap` source the
    /// kernel would refuse or never finish while registered: escapes.rs), registered again at
    /// its exit.
    pub(super) unregistered: Option<Range<u64>>,
    /// `--faults records`: what its entry's read found absent where a fault would make a page,
    /// if it drops pages (unread.rs).
    pub(super) unread: Option<Unread>,
}

impl BegunLayout {
    /// `call`, just begun: nothing raced it yet.
    pub(super) fn new(call: LayoutSyscall, unregistered: Option<Range<u64>>) -> Self {
        Self {
            call,
            raced: RangeSet::new(),
            unregistered,
            unread: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_stop_keeps_what_the_death_needs() {
        let inherited = spaces::Inherited {
            brk: 0,
            selected: true,
            runs_32_bit: None,
            shadow: Default::default(),
        };
        let mut unborn = Phase::AwaitingAttach {
            new_space: Some((7, inherited)),
        };
        unborn.exit_stop(Some("child".into()));
        assert!(matches!(
            unborn,
            Phase::Exiting {
                unborn_space: Some(7),
                in_vfork: false,
                ..
            }
        ));
        assert!(!unborn.may_run_user_code() && !unborn.in_vfork());

        let mut parent = Phase::Running;
        parent.vforked();
        assert!(parent.in_vfork() && !parent.may_touch_memory());
        parent.exit_stop(None);
        assert!(parent.exiting() && parent.in_vfork());
        // Released at its exit stop, it stays there.
        parent.released(false);
        assert!(parent.exiting());
    }

    #[test]
    fn only_a_running_thread_is_left_listening() {
        let mut phase = Phase::Running;
        phase.released(true);
        assert!(phase.listening() && phase.may_run_user_code() && !phase.may_touch_memory());
        phase.released(false);
        assert!(phase.may_touch_memory());
        let mut new = Phase::AwaitingAttach { new_space: None };
        new.released(true);
        assert!(new.awaiting_attach());
        assert!(new.attached().is_none());
        assert!(new.may_touch_memory());
    }

    #[test]
    fn a_syscall_exit_is_for_one_thing() {
        let mut syscalls = Thread::new(1, Phase::Running).syscalls;
        syscalls.at_exit = AtExit::Naming;
        // A new syscall's stop: the naming's exit never came.
        syscalls.next_syscall();
        assert!(!syscalls.take_naming());
        let call = LayoutSyscall::Munmap {
            addr: 0x1000,
            len: 0x1000,
        };
        syscalls.begin_layout(Some(call), None, None);
        syscalls.next_syscall();
        assert_eq!(syscalls.layout_call(), Some(call));
        assert!(syscalls.take_reclaim().is_none() && syscalls.layout_call().is_some());
        assert_eq!(syscalls.serial, 1);
        syscalls.stops.begun_at_entry();
        assert!(
            !syscalls.stops.take_begun_at_entry(),
            "only under every syscall"
        );
        syscalls.stops.stop_at_every_syscall();
        syscalls.stops.begun_at_entry();
        assert!(syscalls.stops.take_begun_at_entry());
        assert!(!syscalls.stops.take_begun_at_entry());
        assert!(syscalls.take_layout().is_some() && syscalls.layout_call().is_none());
    }
}
