//! A rehearsal of what `run` does to a program before the program runs an instruction of its own:
//! start it seized by ptrace under mevi-actors' seccomp filter, and at its exec create a
//! userfaultfd inside it, take the descriptor over and do the handshake, as the tracer does for
//! every address space (`tracer/spaces.rs`). Then the program is killed. `mevi-actors doctor`
//! rehearses on `/bin/true` to say what `run` will meet, which sysctls alone cannot tell: capabilities
//! lost at exec, a container's seccomp profile, Yama, a user namespace.

use std::fmt;
use std::path::Path;

use nix::sys::ptrace;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::inject::{self, InjectError, Injection, SyscallSite};
use super::spawn::{self, Prepared, Spawned};
use super::{procfs, uffd};

/// How far a rehearsal got: the step that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Starting the program under ptrace with the seccomp filter, up to its exec.
    Trace,
    /// Running system calls inside it (its registers borrowed at execve's exit stop).
    Inject,
    /// Creating the userfaultfd inside it: `userfaultfd(2)`, then `/dev/userfaultfd`.
    Userfaultfd,
    /// Taking the descriptor over (`pidfd_getfd`, Linux 5.6).
    Handover,
    /// `UFFDIO_API` with the features the tracer asks for.
    Handshake,
}

impl Stage {
    /// What was being done, for a message.
    pub fn doing(self) -> &'static str {
        match self {
            Stage::Trace => "starting it under ptrace with mevi-actors' seccomp filter",
            Stage::Inject => "running a system call inside it",
            Stage::Userfaultfd => "creating a userfaultfd inside it",
            Stage::Handover => "taking its userfaultfd over (pidfd_getfd)",
            Stage::Handshake => "the UFFDIO_API handshake with the tracer's features",
        }
    }
}

/// A rehearsal that failed, at `stage`, with the kernel's answer.
#[derive(Debug)]
pub struct Failed {
    pub stage: Stage,
    pub error: String,
}

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.stage.doing(), self.error)
    }
}

fn failed(stage: Stage) -> impl Fn(std::io::Error) -> Failed {
    move |e| Failed {
        stage,
        error: e.to_string(),
    }
}

fn inject_failed(stage: Stage) -> impl Fn(InjectError) -> Failed {
    move |e| Failed {
        stage,
        error: match e {
            InjectError::Io(e) => e.to_string(),
            InjectError::Died(status) => ended(status),
        },
    }
}

/// How the program ended where it should have stopped.
fn ended(status: WaitStatus) -> String {
    match status {
        WaitStatus::Exited(_, 126) => "it exited with status 126 before its exec: it could not \
                                       install the seccomp filter, or exec it (its message is \
                                       above)"
            .into(),
        WaitStatus::Exited(_, code) => format!("it exited with status {code} before its exec"),
        WaitStatus::Signaled(_, signal, _) => format!("it was killed by {signal} before its exec"),
        other => format!("it reported {other:?} instead of stopping"),
    }
}

/// Rehearses `run` on `program` (which is never let run: it is killed at its exec). Must be
/// called on a thread that makes no other ptrace call meanwhile.
pub fn rehearse(program: &Path) -> Result<(), Failed> {
    let filter = spawn::seccomp_filter(false).map_err(failed(Stage::Trace))?;
    let argv = [program.as_os_str().to_owned()];
    let prepared =
        Prepared::new(program, &argv, false, Some(filter)).map_err(failed(Stage::Trace))?;
    let pid = match spawn::spawn_seized(prepared).map_err(failed(Stage::Trace))? {
        Spawned::Seized(pid) => pid,
        Spawned::DiedFirst(how) => {
            return Err(Failed {
                stage: Stage::Trace,
                error: format!("it ended before its first stop ({how:?})"),
            });
        }
    };
    let tracee = Killed(pid);
    tracee.run_to_exec()?;
    let tid = pid.as_raw();
    let maps = procfs::read_maps(tid).map_err(failed(Stage::Inject))?;
    let site = SyscallSite::default()
        .address(tid, &maps)
        .map_err(failed(Stage::Inject))?;
    let mut injection = Injection::begin(pid, site).map_err(inject_failed(Stage::Inject))?;
    let fd =
        inject::create_userfaultfd(&mut injection).map_err(inject_failed(Stage::Userfaultfd))?;
    let ours = inject::take_fd(tid, fd).map_err(failed(Stage::Handover));
    // The program is killed next: its registers need not come back, nor its descriptor close.
    drop(injection);
    uffd::AddressSpaceUffd::handshake(ours?, super::page_size())
        .map_err(failed(Stage::Handshake))?;
    Ok(())
}

/// The rehearsed program, killed and reaped when dropped (on every path out of `rehearse`).
struct Killed(Pid);

impl Killed {
    /// Lets the program go on to its exec, and on to execve's exit stop, where the tracer injects
    /// (registers set at the exec stop itself would be overwritten: docs/kernel-facts.md).
    fn run_to_exec(&self) -> Result<(), Failed> {
        let trace_failed = |e: nix::errno::Errno| failed(Stage::Trace)(e.into());
        // Its stops before the exec: its `execve`'s seccomp stop; a few at most.
        for _ in 0..64 {
            match inject::wait_for(self.0).map_err(trace_failed)? {
                WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_EXEC) => {
                    return match inject::run_to_syscall_exit(self.0.as_raw()) {
                        Ok(None) => Ok(()),
                        Ok(Some(status)) => Err(Failed {
                            stage: Stage::Trace,
                            error: ended(status),
                        }),
                        Err(e) => Err(trace_failed(e)),
                    };
                }
                WaitStatus::Stopped(_, signal) => {
                    ptrace::cont(self.0, signal).map_err(trace_failed)?
                }
                WaitStatus::PtraceEvent(..) | WaitStatus::PtraceSyscall(_) => {
                    ptrace::cont(self.0, None).map_err(trace_failed)?
                }
                status @ (WaitStatus::Exited(..) | WaitStatus::Signaled(..)) => {
                    return Err(Failed {
                        stage: Stage::Trace,
                        error: ended(status),
                    });
                }
                WaitStatus::Continued(_) | WaitStatus::StillAlive => {}
            }
        }
        Err(Failed {
            stage: Stage::Trace,
            error: "it stopped 64 times without reaching its exec".into(),
        })
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = kill(self.0, Signal::SIGKILL);
        // Reaped, so that no zombie outlives the rehearsal; a stop on the way (its exit event)
        // is let go.
        for _ in 0..64 {
            match waitpid(self.0, Some(WaitPidFlag::__WALL)) {
                Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) => return,
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return,
                Ok(_) => {
                    let _ = ptrace::cont(self.0, None);
                }
            }
        }
    }
}
