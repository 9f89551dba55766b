//! Taking running processes into the trace (`attach`) and giving them back. Only event stops
//! are asked for: no seccomp filter (it could never be removed), no userfaultfd, nothing written
//! into the process, so that once detached it is exactly as it was.

use std::collections::BTreeSet;
use std::io;

use nix::errno::Errno;
use nix::sys::ptrace::{self, Options};
use nix::unistd::Pid;

/// The options of every attached thread: clones (threads), execs and exits, always; forks and
/// vforks only when children are followed. Never `PTRACE_O_EXITKILL`: if mevi-actors dies, the
/// kernel detaches, and the processes run on.
pub fn options(follow_forks: bool) -> Options {
    let mut options = Options::PTRACE_O_TRACESYSGOOD
        | Options::PTRACE_O_TRACECLONE
        | Options::PTRACE_O_TRACEEXEC
        | Options::PTRACE_O_TRACEEXIT
        | Options::PTRACE_O_TRACEVFORKDONE;
    if follow_forks {
        options |= Options::PTRACE_O_TRACEFORK | Options::PTRACE_O_TRACEVFORK;
    }
    options
}

/// Why a process could not be attached to.
#[derive(Debug)]
pub enum AttachError {
    NoSuchProcess,
    /// ptrace refused: another user's process, a process that is not dumpable, or Yama.
    NotPermitted,
    Io(io::Error),
}

/// Seizes every thread of process `pid`, running, with `options`: the threads listed in
/// `/proc/PID/task`, again and again until a listing finds none new (a thread not yet seized
/// can make threads meanwhile; once seized, its new threads are seized by the kernel). The
/// threads seized, the leader first.
pub fn seize_process(pid: i32, options: Options) -> Result<Vec<i32>, AttachError> {
    let mut seized: Vec<i32> = Vec::new();
    loop {
        let tids = match threads_of(pid) {
            Ok(tids) => tids,
            Err(e) if e.kind() == io::ErrorKind::NotFound && seized.is_empty() => {
                return Err(AttachError::NoSuchProcess);
            }
            // Gone while being seized: its exit is reported through the threads seized.
            Err(_) => return Ok(seized),
        };
        let new_tids: Vec<i32> = tids.into_iter().filter(|t| !seized.contains(t)).collect();
        let mut new = 0;
        for tid in new_tids {
            match ptrace::seize(Pid::from_raw(tid), options) {
                Ok(()) => {
                    seized.push(tid);
                    new += 1;
                }
                // Ended since the listing.
                Err(Errno::ESRCH) => {}
                Err(Errno::EPERM) if tid == pid => return Err(AttachError::NotPermitted),
                // An io_uring worker, which ptrace refuses: it runs no user code.
                Err(Errno::EPERM) => tracing::debug!(pid, tid, "not seized: EPERM"),
                Err(e) => return Err(AttachError::Io(io::Error::from(e))),
            }
        }
        if new == 0 {
            return Ok(seized);
        }
    }
}

/// The thread ids of a process, from `/proc/PID/task`.
fn threads_of(pid: i32) -> io::Result<BTreeSet<i32>> {
    let mut tids = BTreeSet::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        if let Some(tid) = entry?.file_name().to_str().and_then(|n| n.parse().ok()) {
            tids.insert(tid);
        }
    }
    Ok(tids)
}

/// The owner of a process, for an error message: `/proc/PID` belongs to its effective uid.
fn owner(pid: i32) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}"))
        .ok()
        .map(|m| m.uid())
}

/// What can be told before anything is started: whether `pid` is a process (not a thread of
/// one), and whether ptrace would let us attach to it (`ptrace(2)`, "Ptrace access mode
/// checking"; Yama's `ptrace_scope`). The seize itself is the last word.
pub fn preflight(pid: i32) -> Result<(), AttachError> {
    if super::procfs::tgid(pid) != Some(pid) {
        return Err(AttachError::NoSuchProcess);
    }
    let scope: u32 = super::procfs::sysctl("kernel/yama/ptrace_scope")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let privileged = has_cap_sys_ptrace();
    // Scope 1 allows only descendants (and a process that named us): a running process is
    // neither, unless privileged; scope 3 allows nobody.
    let refused =
        scope >= 3 || (!privileged && (scope >= 1 || owner(pid) != Some(effective_uid())));
    if refused {
        return Err(AttachError::NotPermitted);
    }
    Ok(())
}

/// `CAP_SYS_PTRACE`, as a bit of a capability set (capability.h).
pub const CAP_SYS_PTRACE: u64 = 1 << 19;

fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether this process holds `CAP_SYS_PTRACE` (`CapEff` of /proc/self/status).
fn has_cap_sys_ptrace() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
            u64::from_str_radix(hex.trim(), 16).ok()
        })
        .is_some_and(|caps| caps & CAP_SYS_PTRACE != 0)
}

impl AttachError {
    /// The one line an attach that failed prints, naming the fix.
    pub fn message(&self, pid: i32) -> String {
        match self {
            AttachError::NoSuchProcess => format!("mevi-actors: attach: no process {pid}"),
            AttachError::NotPermitted => {
                let owner =
                    owner(pid).map_or(String::new(), |uid| format!(" (owned by uid {uid})"));
                let yama = match super::procfs::sysctl("kernel/yama/ptrace_scope").as_deref() {
                    None | Some("0") => String::new(),
                    Some("3") => "; kernel.yama.ptrace_scope is 3: no process can be attached \
                                  to until reboot"
                        .to_string(),
                    Some(scope) => format!(
                        "; kernel.yama.ptrace_scope is {scope} (sysctl -w \
                         kernel.yama.ptrace_scope=0 allows same-user attach)"
                    ),
                };
                format!(
                    "mevi-actors: attach: not permitted to trace process {pid}{owner}: run as \
                     root or with CAP_SYS_PTRACE{yama}"
                )
            }
            AttachError::Io(e) => format!("mevi-actors: attach: process {pid}: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that runs and is seized, then detached: it goes on and exits as untraced.
    #[test]
    fn a_running_process_is_seized_and_let_go() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.3")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let tids = seize_process(pid, options(false)).unwrap();
        assert_eq!(tids, vec![pid]);
        // Seized threads run on: stop it to let it go.
        ptrace::interrupt(Pid::from_raw(pid)).unwrap();
        nix::sys::wait::waitpid(
            Pid::from_raw(pid),
            Some(nix::sys::wait::WaitPidFlag::__WALL),
        )
        .unwrap();
        ptrace::detach(Pid::from_raw(pid), None).unwrap();
        assert!(child.wait().unwrap().success());
        assert!(matches!(
            seize_process(pid, options(false)),
            Err(AttachError::NoSuchProcess)
        ));
    }
}
