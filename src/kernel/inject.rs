//! Running a system call inside a stopped tracee, and fetching its file descriptors.
//!
//! The tracee's instruction pointer is moved to a `syscall` instruction inside its vDSO (so none
//! of its memory is written), its registers carry our call, and one `PTRACE_SINGLESTEP` runs
//! it; then registers and signal mask are put back as they were. All signals are blocked while
//! it runs, so no handler can run on borrowed registers. Only the tracer thread calls this.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::procfs;

/// Why an injection did not complete.
#[derive(Debug)]
pub enum InjectError {
    /// The tracee died or left a stop we can use; the status is for the caller's main loop.
    Died(WaitStatus),
    /// ptrace or /proc refused.
    Io(io::Error),
}

impl From<Errno> for InjectError {
    fn from(e: Errno) -> Self {
        InjectError::Io(io::Error::from(e))
    }
}

impl From<io::Error> for InjectError {
    fn from(e: io::Error) -> Self {
        InjectError::Io(e)
    }
}

/// Where the vDSO's `syscall` instruction is, as an offset from the vDSO start. The vDSO image is
/// the kernel's and the same in every process, so one search serves the whole trace.
#[derive(Default)]
pub struct SyscallSite {
    offset: Option<u64>,
}

impl SyscallSite {
    /// The address of a `syscall` instruction (bytes 0f 05) in `pid`'s vDSO; `maps` is its
    /// `/proc/PID/maps`, read by the caller, which needs it anyway.
    pub fn address(&mut self, pid: i32, maps: &[procfs::MapsEntry]) -> io::Result<u64> {
        let vdso = maps
            .iter()
            .find(|m| m.path == "[vdso]")
            .ok_or_else(|| io::Error::other("the tracee has no vDSO to borrow a syscall from"))?;
        if let Some(off) = self.offset {
            return Ok(vdso.start + off);
        }
        let mut image = vec![0u8; (vdso.end - vdso.start) as usize];
        let mem = std::fs::File::open(format!("/proc/{pid}/mem"))?;
        std::os::unix::fs::FileExt::read_exact_at(&mem, &mut image, vdso.start)?;
        let off = image
            .windows(2)
            .position(|w| w == [0x0f, 0x05])
            .ok_or_else(|| io::Error::other("no syscall instruction in the vDSO"))?
            as u64;
        self.offset = Some(off);
        Ok(vdso.start + off)
    }
}

/// A tracee whose registers and signal mask we have borrowed; `finish` gives them back.
pub struct Injection {
    tid: Pid,
    saved: libc::user_regs_struct,
    saved_mask: u64,
    site: u64,
    /// A group stop (SIGSTOP, SIGTSTP...) began while it ran our calls: it must stay stopped.
    group_stop: bool,
    /// Registers and mask are back (or the tracee is gone): nothing left for `Drop`.
    restored: bool,
}

const PTRACE_GETSIGMASK: libc::c_uint = 0x420a;
const PTRACE_SETSIGMASK: libc::c_uint = 0x420b;

fn sigmask(tid: Pid) -> io::Result<u64> {
    let mut mask: u64 = 0;
    // SAFETY: the kernel writes 8 bytes (sizeof(sigset_t) as the kernel sees it) into `mask`.
    let r = unsafe {
        libc::ptrace(
            PTRACE_GETSIGMASK,
            tid.as_raw(),
            8usize,
            &mut mask as *mut u64,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(mask)
}

fn set_sigmask(tid: Pid, mask: u64) -> io::Result<()> {
    // SAFETY: the kernel reads 8 bytes from `mask`.
    let r = unsafe { libc::ptrace(PTRACE_SETSIGMASK, tid.as_raw(), 8usize, &mask as *const u64) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Injection {
    /// Borrows a tracee that is in a ptrace-stop (syscall-exit, event or attach stop).
    pub fn begin(tid: Pid, site: u64) -> Result<Self, InjectError> {
        let saved = ptrace::getregs(tid)?;
        let saved_mask = sigmask(tid)?;
        // SIGKILL and SIGSTOP cannot be blocked; the kernel ignores those bits.
        set_sigmask(tid, !0u64)?;
        Ok(Self {
            tid,
            saved,
            saved_mask,
            site,
            group_stop: false,
            restored: false,
        })
    }

    /// Runs `nr(args)` in the tracee and returns its raw result (negative errno on failure).
    pub fn syscall(&mut self, nr: i64, args: &[u64]) -> Result<i64, InjectError> {
        let mut regs = self.saved;
        regs.rip = self.site;
        regs.rax = nr as u64;
        // -1: we are not inside a syscall, so the kernel must not try to restart one on resume.
        regs.orig_rax = u64::MAX;
        let slots = [
            &mut regs.rdi,
            &mut regs.rsi,
            &mut regs.rdx,
            &mut regs.r10,
            &mut regs.r8,
            &mut regs.r9,
        ];
        for (slot, arg) in slots.into_iter().zip(args) {
            *slot = *arg;
        }
        ptrace::setregs(self.tid, regs)?;
        self.step_over_syscall()?;
        let regs = ptrace::getregs(self.tid)?;
        Ok(regs.rax as i64)
    }

    /// Runs the one `syscall` instruction at `rip` with `PTRACE_SINGLESTEP`: the tracee stops
    /// once, with a SIGTRAP, when the call has returned (`syscall_exit_work` reports the step).
    /// Two `PTRACE_SYSCALL` stops (entry and exit) cost a round trip more.
    fn step_over_syscall(&mut self) -> Result<(), InjectError> {
        ptrace::step(self.tid, None)?;
        loop {
            let status = wait_for(self.tid)?;
            match status {
                // Our step's trap. Every blockable signal is blocked, so no SIGTRAP of anyone
                // else's can be delivered now; it is discarded by the next resume, which passes
                // no signal.
                WaitStatus::Stopped(_, Signal::SIGTRAP) => return Ok(()),
                // SIGSTOP (or another forced signal): deliver it now, so that the kernel settles
                // it against a SIGCONT as it would untraced.
                WaitStatus::Stopped(_, sig) => ptrace::step(self.tid, sig)?,
                // A group stop: our call must finish first; the caller then keeps it stopped.
                // (A later stop, such as our PTRACE_INTERRUPT's trap, never clears an earlier
                // group stop.)
                WaitStatus::PtraceEvent(_, sig, libc::PTRACE_EVENT_STOP) => {
                    self.group_stop |= super::ptrace::is_group_stop_signal(sig);
                    ptrace::step(self.tid, None)?;
                }
                // The tracee's own seccomp filter traces our call: let it run.
                WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_SECCOMP) => {
                    ptrace::step(self.tid, None)?
                }
                other => return Err(InjectError::Died(other)),
            }
        }
    }

    /// Writes `bytes` into the tracee's stack, 1 KiB below its stack pointer (well past the 128-byte
    /// red zone: memory a signal handler may clobber at any time, so nothing of the tracee's lives
    /// there), and returns their address.
    pub fn scratch(&self, bytes: &[u8]) -> io::Result<u64> {
        use std::os::unix::fs::FileExt;
        let addr = (self.saved.rsp - 1024 - bytes.len() as u64) & !15;
        let mem = std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/{}/mem", self.tid))?;
        mem.write_all_at(bytes, addr)?;
        Ok(addr)
    }

    /// Puts registers and signal mask back. Returns whether a group stop began meanwhile (the
    /// caller must then leave the tracee stopped with `PTRACE_LISTEN`). A tracee that died is
    /// not an error here: its exit status is still waiting for the main loop.
    pub fn finish(mut self) -> Result<bool, InjectError> {
        self.restored = true;
        match self.restore() {
            Ok(()) | Err(Errno::ESRCH) => Ok(self.group_stop),
            Err(e) => Err(e.into()),
        }
    }

    fn restore(&self) -> Result<(), Errno> {
        ptrace::setregs(self.tid, self.saved)?;
        set_sigmask(self.tid, self.saved_mask)
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
    }
}

impl Drop for Injection {
    /// An injection abandoned half-way (an error) still gives the tracee its registers back: it
    /// must never resume inside the vDSO with every signal blocked.
    fn drop(&mut self) {
        if !self.restored {
            let _ = self.restore();
        }
    }
}

/// `USERFAULTFD_IOC_NEW`, `_IO(0xAA, 0x00)` of `<linux/userfaultfd.h>` (Linux 6.1).
pub(super) const USERFAULTFD_IOC_NEW: u64 = 0xaa00;

/// Creates a userfaultfd inside the tracee, non-blocking and close-on-exec, and returns its number
/// there. `userfaultfd(2)` needs `CAP_SYS_PTRACE` (or `vm.unprivileged_userfaultfd=1`); a process
/// that dropped its capabilities but kept uid 0 (stress-ng's workers do) still gets one through
/// `/dev/userfaultfd`, where the device file's mode decides and no capability is checked.
pub fn create_userfaultfd(injection: &mut Injection) -> Result<i32, InjectError> {
    let flags = (libc::O_CLOEXEC | libc::O_NONBLOCK) as u64;
    let fd = injection.syscall(libc::SYS_userfaultfd, &[flags])?;
    if fd >= 0 {
        return Ok(fd as i32);
    }
    let refused = io::Error::from_raw_os_error(-fd as i32);
    if -fd != libc::EPERM as i64 {
        return Err(InjectError::Io(refused));
    }
    let path = injection.scratch(b"/dev/userfaultfd\0")?;
    let open_flags = (libc::O_RDWR | libc::O_CLOEXEC) as u64;
    let dev = injection.syscall(
        libc::SYS_openat,
        &[libc::AT_FDCWD as i64 as u64, path, open_flags],
    )?;
    if dev < 0 {
        let why = io::Error::from_raw_os_error(-dev as i32);
        return Err(InjectError::Io(io::Error::new(
            refused.kind(),
            format!("userfaultfd(): {refused}; /dev/userfaultfd: {why}"),
        )));
    }
    let fd = injection.syscall(libc::SYS_ioctl, &[dev as u64, USERFAULTFD_IOC_NEW, flags]);
    injection.syscall(libc::SYS_close, &[dev as u64])?;
    match fd? {
        fd if fd >= 0 => Ok(fd as i32),
        err => Err(InjectError::Io(io::Error::new(
            refused.kind(),
            format!(
                "userfaultfd(): {refused}; USERFAULTFD_IOC_NEW: {}",
                io::Error::from_raw_os_error(-err as i32)
            ),
        ))),
    }
}

/// Copies file descriptor `fd` of process `pid` into ours (`pidfd_getfd`, Linux 5.6).
pub fn take_fd(pid: i32, fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscalls with integer arguments; each returned fd is owned by us at once.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: see above.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    use std::os::fd::AsRawFd;
    // SAFETY: see above.
    let ours = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if ours < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: see above.
    Ok(unsafe { OwnedFd::from_raw_fd(ours as RawFd) })
}

/// Whether two tasks share one address space (`kcmp(KCMP_VM)`); both must be stopped.
pub fn same_address_space(a: i32, b: i32) -> io::Result<bool> {
    const KCMP_VM: i32 = 1;
    // SAFETY: kcmp with integer arguments only.
    let r = unsafe { libc::syscall(libc::SYS_kcmp, a, b, KCMP_VM, 0, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r == 0)
}

/// Runs a tracee at an event stop on to its syscall's exit stop (`PTRACE_SYSCALL`): None once
/// there, or the status it reported instead (it was killed on the way).
pub fn run_to_syscall_exit(tid: i32) -> nix::Result<Option<WaitStatus>> {
    let tid = Pid::from_raw(tid);
    ptrace::syscall(tid, None)?;
    match wait_for(tid)? {
        WaitStatus::PtraceSyscall(_) => Ok(None),
        other => Ok(Some(other)),
    }
}

/// Waits for one tracee's next status. `EINTR` (the tracer's ticker, see `kernel::tick`) means
/// nothing happened: wait again.
pub fn wait_for(tid: Pid) -> nix::Result<WaitStatus> {
    loop {
        match waitpid(tid, Some(WaitPidFlag::__WALL)) {
            Err(Errno::EINTR) => continue,
            other => return other,
        }
    }
}
