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
    /// Exited, not yet reaped by its parent.
    Zombie,
    /// Its main thread has exited, its other threads run on: ptrace takes a process by it.
    LeaderExited,
    /// mevi-actors itself.
    Ourselves,
    /// A kernel thread: no user memory.
    KernelThread,
    /// Traced by this process already.
    Traced(i32),
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

/// What `/proc/PID/status` says of a process that the preflight needs.
struct Status {
    tgid: i32,
    state: char,
    tracer: i32,
    threads: u32,
    /// A kernel thread (`Kthread: 1`, Linux 6.x; absent before).
    kernel: bool,
    /// Real, effective, saved and filesystem ids.
    uids: [u32; 4],
    gids: [u32; 4],
}

impl Status {
    fn of(pid: i32) -> Option<Self> {
        let text = super::procfs::text(format!("/proc/{pid}/status")).ok()?;
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        };
        let ids = |key: &str| -> Option<[u32; 4]> {
            let ids: Vec<u32> = field(key)?
                .split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect();
            ids.try_into().ok()
        };
        Some(Self {
            tgid: field("Tgid")?.trim().parse().ok()?,
            state: field("State")?.trim().chars().next()?,
            tracer: field("TracerPid")?.trim().parse().ok()?,
            threads: field("Threads")?.trim().parse().ok()?,
            kernel: field("Kthread").is_some_and(|k| k.trim() == "1"),
            uids: ids("Uid")?,
            gids: ids("Gid")?,
        })
    }
}

/// `CAP_SYS_PTRACE`, as a bit of a capability set (capability.h).
pub const CAP_SYS_PTRACE: u64 = 1 << 19;

/// What can be told before anything is started, by ptrace's rules (`ptrace(2)`, "Ptrace access
/// mode checking") and Yama's: whether `pid` is a live process (not a thread of one, not a
/// zombie), not traced already, and ours to trace. Yama's scope 1 lets a process name its
/// tracer (`PR_SET_PTRACER`), which only the seize can tell: it has the last word.
pub fn preflight(pid: i32) -> Result<(), AttachError> {
    let status = match Status::of(pid) {
        Some(status) if status.tgid == pid => status,
        _ => return Err(AttachError::NoSuchProcess),
    };
    if pid == std::process::id() as i32 {
        return Err(AttachError::Ourselves);
    }
    if status.kernel {
        return Err(AttachError::KernelThread);
    }
    if status.state == 'Z' {
        return Err(if status.threads > 1 {
            AttachError::LeaderExited
        } else {
            AttachError::Zombie
        });
    }
    if status.tracer != 0 {
        return Err(AttachError::Traced(status.tracer));
    }
    let scope = super::procfs::sysctl("kernel/yama/ptrace_scope");
    let privileged = own_capabilities() & CAP_SYS_PTRACE != 0;
    // Attach compares our real ids with the target's real, effective and saved ones.
    let (uid, gid) = (
        nix::unistd::getuid().as_raw(),
        nix::unistd::getgid().as_raw(),
    );
    let same_user =
        status.uids[..3].iter().all(|&u| u == uid) && status.gids[..3].iter().all(|&g| g == gid);
    let refused = match scope.as_deref() {
        Some("3") => true,
        Some("2") => !privileged,
        _ => !privileged && !same_user,
    };
    if refused {
        return Err(AttachError::NotPermitted);
    }
    Ok(())
}

/// This process's effective capabilities (`CapEff` of /proc/self/status).
pub fn own_capabilities() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
            u64::from_str_radix(hex.trim(), 16).ok()
        })
        .unwrap_or(0)
}

impl AttachError {
    /// The one line an attach that failed prints, naming the fix.
    pub fn message(&self, pid: i32) -> String {
        match self {
            AttachError::NoSuchProcess => format!("mevi-actors: attach: no process {pid}"),
            AttachError::Zombie => format!(
                "mevi-actors: attach: process {pid} has exited (a zombie, waiting for its parent)"
            ),
            AttachError::LeaderExited => format!(
                "mevi-actors: attach: process {pid}'s main thread has exited (its other threads \
                 run on), and ptrace attaches to a process through it"
            ),
            AttachError::Ourselves => {
                format!("mevi-actors: attach: process {pid} is this mevi-actors")
            }
            AttachError::KernelThread => format!(
                "mevi-actors: attach: process {pid} is a kernel thread: it has no user memory"
            ),
            AttachError::Traced(tracer) => format!(
                "mevi-actors: attach: process {pid} is traced by process {tracer} already (a \
                 debugger, strace?); only one tracer at a time"
            ),
            AttachError::NotPermitted => {
                let owner =
                    Status::of(pid).map_or(String::new(), |s| format!(" (real uid {})", s.uids[0]));
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
                if own_capabilities() & CAP_SYS_PTRACE == 0 {
                    return format!(
                        "mevi-actors: attach: not permitted to trace process {pid}{owner}: run \
                         as root or with CAP_SYS_PTRACE{yama}"
                    );
                }
                // Privileged, and refused all the same: by something above the permissions.
                let filters = super::procfs::seccomp_filters(nix::unistd::gettid().as_raw())
                    .filter(|&n| n > 0)
                    .map_or(String::new(), |n| {
                        format!(" (mevi-actors runs under {n} seccomp filter(s) itself)")
                    });
                format!(
                    "mevi-actors: attach: ptrace refused process {pid}{owner} though mevi-actors \
                     has CAP_SYS_PTRACE: a seccomp filter{filters}, as a container's profile \
                     has, a security module (AppArmor, SELinux) or the kernel's lockdown \
                     forbids it{yama}"
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
