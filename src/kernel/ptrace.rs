//! Every ptrace stop the tracer can see, as one enum built from the wait status in one place, and
//! the ways a stopped thread is let go. The tracer matches [`Stop`] exhaustively, in one place.
//! Some stops look alike in the wait status: what the tracer expects of the thread ([`Expect`])
//! tells them apart here.

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;

use super::syscall::{self, EntryStop};

/// How a fork, vfork or clone was reported (the event, not the flags: a thread and a
/// `clone(CLONE_VM)` child are both `Clone`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildEvent {
    Fork,
    Vfork,
    Clone,
}

/// One stop (or end) of a traced thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// A layout syscall at its seccomp stop, before it runs.
    SeccompEntry { tid: i32 },
    /// The entry stop of a syscall of a thread resumed with [`Resume::EverySyscall`]: `entry`
    /// is the call about to run.
    SyscallEntry { tid: i32, entry: EntryStop },
    /// The exit stop of a syscall we asked to see (`PTRACE_SYSCALL`).
    SyscallExit { tid: i32 },
    /// A fork, vfork or clone is under way in `tid`; the child's id is the event message.
    NewChild { tid: i32, event: ChildEvent },
    /// An execve succeeded in `tid` (which now has the process's id).
    Exec { tid: i32 },
    /// The thread is about to exit; its mm is still whole.
    Exiting { tid: i32 },
    /// A vfork parent's child has exec'd or exited: the parent runs again.
    VforkDone { tid: i32 },
    /// `PTRACE_EVENT_STOP` as a new child's first stop; `group_stop` when it is a group stop
    /// too (its group is stopped or stopping).
    Attach { tid: i32, group_stop: bool },
    /// `PTRACE_EVENT_STOP` of job control: `signal` is the stopping one.
    GroupStop { tid: i32, signal: Signal },
    /// `PTRACE_EVENT_STOP` with `SIGTRAP`: the trap of our `PTRACE_INTERRUPT`.
    Interrupt { tid: i32 },
    /// A signal is about to be delivered.
    Signal { tid: i32, signal: Signal },
    /// A ptrace event we never ask for (the options in `spawn.rs` make it impossible); resumed.
    UnknownEvent { tid: i32, event: i32 },
    /// The thread has exited with `code` (for the last thread: the process's status).
    Exited { tid: i32, code: i32 },
    /// The thread was killed by `signal`.
    Killed { tid: i32, signal: Signal },
}

impl Stop {
    /// The thread it is about.
    pub fn tid(&self) -> i32 {
        match *self {
            Stop::SeccompEntry { tid }
            | Stop::SyscallEntry { tid, .. }
            | Stop::SyscallExit { tid }
            | Stop::NewChild { tid, .. }
            | Stop::Exec { tid }
            | Stop::Exiting { tid }
            | Stop::VforkDone { tid }
            | Stop::Attach { tid, .. }
            | Stop::GroupStop { tid, .. }
            | Stop::Interrupt { tid }
            | Stop::Signal { tid, .. }
            | Stop::UnknownEvent { tid, .. }
            | Stop::Exited { tid, .. }
            | Stop::Killed { tid, .. } => tid,
        }
    }

    /// The stop a wait status reports, the thread being as `expect` says; None for statuses
    /// that are no stop of ours (`WCONTINUED`, `WNOHANG`'s nothing), which we never ask for.
    /// A syscall-stop of a thread that may stop at entries asks the kernel which it is.
    pub fn from_wait_status(status: WaitStatus, expect: impl Fn(i32) -> Expect) -> Option<Stop> {
        Some(match status {
            WaitStatus::PtraceEvent(pid, signal, event) => {
                let tid = pid.as_raw();
                match event {
                    libc::PTRACE_EVENT_SECCOMP => Stop::SeccompEntry { tid },
                    libc::PTRACE_EVENT_FORK => Stop::NewChild {
                        tid,
                        event: ChildEvent::Fork,
                    },
                    libc::PTRACE_EVENT_VFORK => Stop::NewChild {
                        tid,
                        event: ChildEvent::Vfork,
                    },
                    libc::PTRACE_EVENT_CLONE => Stop::NewChild {
                        tid,
                        event: ChildEvent::Clone,
                    },
                    libc::PTRACE_EVENT_EXEC => Stop::Exec { tid },
                    libc::PTRACE_EVENT_EXIT => Stop::Exiting { tid },
                    libc::PTRACE_EVENT_VFORK_DONE => Stop::VforkDone { tid },
                    libc::PTRACE_EVENT_STOP if expect(tid).attach => Stop::Attach {
                        tid,
                        group_stop: is_group_stop_signal(signal),
                    },
                    libc::PTRACE_EVENT_STOP if is_group_stop_signal(signal) => {
                        Stop::GroupStop { tid, signal }
                    }
                    libc::PTRACE_EVENT_STOP => Stop::Interrupt { tid },
                    event => Stop::UnknownEvent { tid, event },
                }
            }
            WaitStatus::PtraceSyscall(pid) => {
                let tid = pid.as_raw();
                let entry = match expect(tid).entries {
                    true => syscall::entry_stop(tid).unwrap_or_else(|e| {
                        // ESRCH: it died; its end is still to be reported.
                        tracing::debug!(tid, "PTRACE_GET_SYSCALL_INFO at a syscall stop: {e}");
                        None
                    }),
                    false => None,
                };
                match entry {
                    Some(entry) => Stop::SyscallEntry { tid, entry },
                    None => Stop::SyscallExit { tid },
                }
            }
            WaitStatus::Stopped(pid, signal) => Stop::Signal {
                tid: pid.as_raw(),
                signal,
            },
            WaitStatus::Exited(pid, code) => Stop::Exited {
                tid: pid.as_raw(),
                code,
            },
            WaitStatus::Signaled(pid, signal, _) => Stop::Killed {
                tid: pid.as_raw(),
                signal,
            },
            WaitStatus::Continued(_) | WaitStatus::StillAlive => return None,
        })
    }
}

/// What the tracer expects of a stopped thread, which tells stops that look alike apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Expect {
    /// A new child whose first stop (its attach stop) has not been seen.
    pub attach: bool,
    /// Resumed with [`Resume::EverySyscall`]: a syscall-stop may be an entry.
    pub entries: bool,
}

/// Whether a `PTRACE_EVENT_STOP` with this signal is a group stop (job control).
pub fn is_group_stop_signal(signal: Signal) -> bool {
    matches!(
        signal,
        Signal::SIGSTOP | Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU
    )
}

/// How a stopped thread is let go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// `PTRACE_CONT`, delivering the signal if there is one.
    Cont(Option<Signal>),
    /// `PTRACE_SYSCALL`: run the syscall and stop at its exit (from a seccomp stop).
    Syscall,
    /// `PTRACE_LISTEN`: stay in the group stop, with the next event still reported.
    Listen,
    /// `PTRACE_SYSCALL`, delivering the signal if there is one: stop at every syscall's entry
    /// and exit (a thread whose layout syscalls a program's own filter may hide from ours).
    EverySyscall(Option<Signal>),
}

/// Lets a stopped thread go as asked; true if it was left in a group stop. A thread that died
/// meanwhile (`ESRCH`) is not an error: its exit status is still to be reported.
pub fn release(tid: i32, how: Resume) -> bool {
    match how {
        Resume::Cont(sig) => resume(tid, sig),
        Resume::Listen => return listen(tid),
        Resume::Syscall => to_syscall_stop(tid, None),
        Resume::EverySyscall(sig) => to_syscall_stop(tid, sig),
    }
    false
}

/// Leaves a group-stopped tracee stopped until SIGCONT, as without a tracer, while its next
/// event is still reported; true if it is. `PTRACE_LISTEN` only works at the event stop of a
/// group stop. A thread whose group stop began while we held it elsewhere (running an
/// injected syscall took its part in the group stop, and its last stop is our call's exit) is
/// not at one: it is resumed with an interrupt pending, so that it traps again before any user
/// code, this time at a group stop's event stop if its group is still stopped, which the tracer
/// then listens at. False then.
fn listen(tid: i32) -> bool {
    // SAFETY: PTRACE_LISTEN takes no pointers.
    if unsafe { libc::ptrace(libc::PTRACE_LISTEN, tid, 0, 0) } == 0 {
        return true;
    }
    if let Err(e) = interrupt(tid) {
        tracing::debug!(
            tid,
            "PTRACE_INTERRUPT before resuming a group-stopped thread: {e}"
        );
    }
    resume(tid, None);
    false
}

fn to_syscall_stop(tid: i32, sig: Option<Signal>) {
    if let Err(e) = ptrace::syscall(Pid::from_raw(tid), sig) {
        tracing::debug!(tid, "PTRACE_SYSCALL: {e}");
    }
}

fn resume(tid: i32, sig: Option<Signal>) {
    if let Err(e) = ptrace::cont(Pid::from_raw(tid), sig) {
        tracing::debug!(tid, "PTRACE_CONT: {e}");
    }
}

/// The message of the last ptrace event of `tid` (a new child's id, the former id of an exec'ing
/// thread).
pub fn event_message(tid: i32) -> Result<i32, Errno> {
    ptrace::getevent(Pid::from_raw(tid)).map(|m| m as i32)
}

/// Lets a stopped thread go out of our trace (`PTRACE_DETACH`), delivering `signal` if any.
pub fn detach(tid: i32, signal: Option<Signal>) -> Result<(), Errno> {
    ptrace::detach(Pid::from_raw(tid), signal)
}

/// Takes a running thread into our trace again (`PTRACE_SEIZE`, with the options of every
/// traced thread); it goes on running.
pub fn seize(tid: i32) -> Result<(), Errno> {
    ptrace::seize(Pid::from_raw(tid), super::abi::TRACE_OPTIONS)
}

/// Asks a running thread to stop (`PTRACE_INTERRUPT`); `Err(ESRCH)` if it is dying.
pub fn interrupt(tid: i32) -> Result<(), Errno> {
    ptrace::interrupt(Pid::from_raw(tid))
}

/// Whether `tid` is a thread of process `pid`: `tgkill` with signal 0 checks exactly that,
/// and needs no file descriptor (a `/proc` read would).
pub fn is_thread_of(pid: i32, tid: i32) -> bool {
    // SAFETY: signal 0 sends nothing; the kernel only checks that `tid` is in group `pid` and
    // that we may signal it.
    unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, 0) == 0 }
}

/// At a signal-delivery-stop of SIGSEGV or SIGBUS: the address of the access the kernel refused,
/// if the kernel raised it for a fault (a positive `si_code`: not `kill`, `tgkill` or `sigqueue`,
/// whose `si_addr` means nothing).
pub fn refused_access(tid: i32) -> Result<Option<u64>, Errno> {
    let info = ptrace::getsiginfo(Pid::from_raw(tid))?;
    let fault = matches!(info.si_signo, libc::SIGSEGV | libc::SIGBUS) && info.si_code > 0;
    // SAFETY: for SIGSEGV and SIGBUS raised by the kernel (`si_code` > 0), the union's
    // `_sigfault` member is the one set, and `si_addr` reads that member's first field.
    Ok(fault.then(|| unsafe { info.si_addr() } as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ptrace_event_we_ask_for_has_its_own_stop() {
        let pid = Pid::from_raw(7);
        let nothing = |_| Expect::default();
        let cases = [
            (libc::PTRACE_EVENT_SECCOMP, Stop::SeccompEntry { tid: 7 }),
            (
                libc::PTRACE_EVENT_FORK,
                Stop::NewChild {
                    tid: 7,
                    event: ChildEvent::Fork,
                },
            ),
            (
                libc::PTRACE_EVENT_VFORK,
                Stop::NewChild {
                    tid: 7,
                    event: ChildEvent::Vfork,
                },
            ),
            (
                libc::PTRACE_EVENT_CLONE,
                Stop::NewChild {
                    tid: 7,
                    event: ChildEvent::Clone,
                },
            ),
            (libc::PTRACE_EVENT_EXEC, Stop::Exec { tid: 7 }),
            (libc::PTRACE_EVENT_EXIT, Stop::Exiting { tid: 7 }),
            (libc::PTRACE_EVENT_VFORK_DONE, Stop::VforkDone { tid: 7 }),
            (libc::PTRACE_EVENT_STOP, Stop::Interrupt { tid: 7 }),
            (99, Stop::UnknownEvent { tid: 7, event: 99 }),
        ];
        for (event, stop) in cases {
            let status = WaitStatus::PtraceEvent(pid, Signal::SIGTRAP, event);
            assert_eq!(Stop::from_wait_status(status, nothing), Some(stop));
        }
        // The same trap, of a new child: its attach stop; of job control: a group stop.
        let trap = WaitStatus::PtraceEvent(pid, Signal::SIGTRAP, libc::PTRACE_EVENT_STOP);
        let child = |_| Expect {
            attach: true,
            entries: false,
        };
        assert_eq!(
            Stop::from_wait_status(trap, child),
            Some(Stop::Attach {
                tid: 7,
                group_stop: false
            })
        );
        let stopped = WaitStatus::PtraceEvent(pid, Signal::SIGTSTP, libc::PTRACE_EVENT_STOP);
        assert_eq!(
            Stop::from_wait_status(stopped, nothing),
            Some(Stop::GroupStop {
                tid: 7,
                signal: Signal::SIGTSTP
            })
        );
        assert_eq!(
            Stop::from_wait_status(stopped, child),
            Some(Stop::Attach {
                tid: 7,
                group_stop: true
            })
        );
        assert_eq!(
            Stop::from_wait_status(WaitStatus::Signaled(pid, Signal::SIGKILL, false), nothing),
            Some(Stop::Killed {
                tid: 7,
                signal: Signal::SIGKILL
            })
        );
        assert_eq!(
            Stop::from_wait_status(WaitStatus::PtraceSyscall(pid), nothing),
            Some(Stop::SyscallExit { tid: 7 })
        );
        assert_eq!(
            Stop::from_wait_status(WaitStatus::Continued(pid), nothing),
            None
        );
    }

    #[test]
    fn only_job_control_signals_make_a_group_stop() {
        assert!(is_group_stop_signal(Signal::SIGTSTP));
        assert!(is_group_stop_signal(Signal::SIGSTOP));
        assert!(!is_group_stop_signal(Signal::SIGTRAP));
        assert!(!is_group_stop_signal(Signal::SIGCONT));
    }
}
