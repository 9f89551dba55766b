//! Lending a thread to a tracer inside its own address space. LeakSanitizer checks for leaks
//! from a helper process that shares the program's memory (`clone(CLONE_VM | CLONE_UNTRACED)`,
//! followed here since the flag is cleared) and ptrace-attaches every thread of the program to
//! stop them while it scans. A thread has one tracer: untraced, the attach succeeds; under us it
//! would get `EPERM`, and LeakSanitizer gives up ("does not work under ptrace").
//!
//! So at the helper's `ptrace(PTRACE_ATTACH or PTRACE_SEIZE, thread)` seccomp stop, the helper is
//! held, the thread is interrupted (again after each stop inside a syscall, since any trap clears
//! a pending interrupt), and at its first stop between syscalls (the interrupt's trap, a group
//! stop, a signal) it is detached from us; then the helper's attach runs. At the exit of that
//! attach, if the kernel refused it, or else of the helper's `PTRACE_DETACH` of it (or at the
//! helper's death), the thread is seized again. Only a thread of another process of the caller's
//! own space is lent. LeakSanitizer keeps it stopped while lent; a thread a borrower lets run
//! meets our filter with no tracer of ours, and its layout syscalls get `ENOSYS`
//! (docs/ordering.md). A thread of another space (a debugger's target) is not lent: `EPERM`, one
//! tracer per process (README).

use std::collections::{HashMap, HashSet};

use super::{AtExit, Tracer};
use crate::kernel::ptrace::{self, Resume, Stop};
use crate::kernel::{procfs, syscall};

/// A thread asked for by a tracer of its own space.
/// Threads lent to a tracer of their own space, or about to be, by their id.
#[derive(Default)]
pub(super) struct Lent {
    threads: HashMap<i32, Lending>,
}

struct Lending {
    /// The thread whose `ptrace` call asked for it, held at that call's seccomp stop until the
    /// thread is handed over.
    borrower: i32,
    /// Detached from us: the borrower traces it now.
    handed_over: bool,
}

/// What to do with a thread stopped at its `ptrace` call.
pub(super) enum PtraceCall {
    /// Let it run: nothing of ours is involved (a debugger's target gets `EPERM` from the kernel).
    Run,
    /// Hold it: the thread it attaches to is being handed over.
    Held,
    /// Run it to its exit stop: it detaches a lent thread, which is taken back there.
    RunToExit,
}

/// What a thread's `ptrace` call's exit stop is awaited for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reclaim {
    /// Its attach of a lent thread: if the kernel refused it, the thread is taken back at once.
    IfRefused(i32),
    /// Its detach of a lent thread: the thread is taken back.
    Always(i32),
}

impl Tracer {
    /// At the seccomp stop of a `ptrace` call by `tid`.
    pub(super) fn on_ptrace_call(&mut self, tid: i32, args: [u64; 6]) -> PtraceCall {
        let request = args[0] as libc::c_uint;
        let target = args[1] as i32;
        match request {
            libc::PTRACE_ATTACH | libc::PTRACE_SEIZE if self.lendable(tid, target) => {
                if let Err(e) = ptrace::interrupt(target) {
                    tracing::debug!(target, "interrupting a thread to lend it: {e}");
                    return PtraceCall::Run;
                }
                tracing::debug!(tid, target, "lending a thread to a tracer of its own space");
                self.lent.threads.insert(
                    target,
                    Lending {
                        borrower: tid,
                        handed_over: false,
                    },
                );
                // A checkpoint under way waits for neither: the borrower is held here, and the
                // target's stop is taken by the hand-over.
                self.checkpoints.forget(tid);
                PtraceCall::Held
            }
            libc::PTRACE_DETACH
                if self
                    .lent
                    .threads
                    .get(&target)
                    .is_some_and(|l| l.borrower == tid && l.handed_over) =>
            {
                if let Some(t) = self.threads.get_mut(&tid) {
                    t.syscalls.at_exit = AtExit::Reclaim(Reclaim::Always(target));
                }
                PtraceCall::RunToExit
            }
            _ => PtraceCall::Run,
        }
    }

    /// Whether `target` is a live thread of ours in `tid`'s space, of another process (the
    /// kernel refuses an attach within a thread group), neither lent already nor itself held at
    /// a `ptrace` call (two threads attaching to each other would wait for each other).
    fn lendable(&self, tid: i32, target: i32) -> bool {
        let (Some((pid, space)), Some((target_pid, target_space))) =
            (self.space_of(tid), self.space_of(target))
        else {
            return false;
        };
        let busy = self.lent.threads.contains_key(&target)
            || self.lent.threads.contains_key(&tid)
            || self.lent.threads.values().any(|l| l.borrower == target);
        target != tid
            && pid != target_pid
            && space == target_space
            && !busy
            && self
                .threads
                .get(&target)
                .is_some_and(|t| !t.phase.exiting() && !t.phase.awaiting_attach())
    }

    /// A stop of a thread being lent: at a stop between syscalls it is handed over, and its
    /// borrower goes on. Whether the stop was taken (otherwise it is handled as usual; the
    /// interrupt's trap is still to come).
    pub(super) fn hand_over(&mut self, stop: Stop) -> bool {
        let tid = stop.tid();
        let Some(lending) = self.lent.threads.get(&tid) else {
            return false;
        };
        let borrower = lending.borrower;
        if lending.handed_over {
            return false;
        }
        if !self.threads.contains_key(&borrower) {
            // The borrower died before it got the thread: nothing to hand over.
            self.lent.threads.remove(&tid);
            return false;
        }
        let signal = match stop {
            // The interrupt's trap, or a group stop (a detached thread stays in it).
            Stop::Interrupt { .. } | Stop::GroupStop { .. } | Stop::Attach { .. } => None,
            Stop::Signal { signal, .. } => Some(signal),
            Stop::Exiting { .. } | Stop::Exited { .. } | Stop::Killed { .. } => {
                self.lent.threads.remove(&tid);
                self.go(borrower, Resume::Cont(None));
                return false;
            }
            // Inside a syscall (its seccomp, entry or exit stop, or an event of one): it is
            // handled as usual. Any trap clears a pending interrupt (kernel/signal.c,
            // ptrace_stop), so it is asked again, to trap once back between syscalls.
            Stop::SeccompEntry { .. }
            | Stop::SyscallEntry { .. }
            | Stop::SyscallExit { .. }
            | Stop::NewChild { .. }
            | Stop::Exec { .. }
            | Stop::VforkDone { .. }
            | Stop::UnknownEvent { .. } => {
                if let Err(e) = ptrace::interrupt(tid) {
                    tracing::debug!(tid, "interrupting a thread to lend it, again: {e}");
                }
                return false;
            }
        };
        self.checkpoints.forget(tid);
        match ptrace::detach(tid, signal) {
            Ok(()) => {
                if let Some(l) = self.lent.threads.get_mut(&tid) {
                    l.handed_over = true;
                }
                // If the kernel refuses the borrower's attach (permissions, bad options), the
                // thread is taken back at the call's exit.
                if let Some(t) = self.threads.get_mut(&borrower) {
                    t.syscalls.at_exit = AtExit::Reclaim(Reclaim::IfRefused(tid));
                }
                self.go(borrower, Resume::Syscall);
            }
            // Dying: its end is still to come to us.
            Err(e) => {
                tracing::debug!(tid, "detaching a lent thread: {e}");
                self.lent.threads.remove(&tid);
                self.go(borrower, Resume::Cont(None));
            }
        }
        true
    }

    /// The threads held at a `ptrace` call until the thread they borrow is handed over.
    pub(super) fn held_borrowers(&self) -> HashSet<i32> {
        self.lent
            .threads
            .values()
            .filter(|l| !l.handed_over)
            .map(|l| l.borrower)
            .collect()
    }

    /// At the exit stop of a borrower's `ptrace` call that attached or detached a lent thread.
    pub(super) fn after_ptrace_call(&mut self, tid: i32, reclaim: Reclaim) {
        match reclaim {
            Reclaim::Always(lent) => self.reclaim(lent),
            Reclaim::IfRefused(lent) => {
                let refused = syscall::exit_value(tid)
                    .ok()
                    .flatten()
                    .is_none_or(|ret| ret.is_error);
                if refused {
                    self.reclaim(lent);
                }
            }
        }
        self.go(tid, Resume::Cont(None));
    }

    /// Takes a lent thread back (its borrower detached it, or died). A tid that names another
    /// process by now (the thread died while lent, and its id was reused) is not taken.
    pub(super) fn reclaim(&mut self, tid: i32) {
        let pid = self.threads.get(&tid).map(|t| t.pid);
        if pid.is_none() || procfs::tgid(tid) != pid {
            tracing::debug!(tid, "a lent thread is gone");
            self.lent.threads.remove(&tid);
            return;
        }
        match ptrace::seize(tid) {
            Ok(()) => {
                self.lent.threads.remove(&tid);
                // Seized anew: no group stop of ours holds it.
                if let Some(t) = self.threads.get_mut(&tid) {
                    t.phase.released(false);
                }
                tracing::debug!(tid, "a lent thread is traced again");
            }
            // EPERM: still the borrower's (its detach failed); tried again at its death.
            // ESRCH: it died while lent; its end went to the borrower.
            Err(e) => tracing::debug!(tid, "taking a lent thread back: {e}"),
        }
    }

    /// The borrower died: whatever it still held is ours again (the kernel detached it).
    pub(super) fn reclaim_from(&mut self, borrower: i32) {
        let held: Vec<i32> = self
            .lent
            .threads
            .iter()
            .filter(|(_, l)| l.borrower == borrower)
            .map(|(&tid, _)| tid)
            .collect();
        for tid in held {
            if self.lent.threads.get(&tid).is_some_and(|l| l.handed_over) {
                self.reclaim(tid);
            }
            self.lent.threads.remove(&tid);
        }
    }
}
