//! Running a system call inside a stopped tracee, and fetching its file descriptors.
//!
//! The tracee's instruction pointer is moved to a `syscall` instruction inside its vDSO (so none
//! of its memory is written), its registers carry our call, and `PTRACE_SYSCALL` runs it from
//! its entry stop to its exit stop; then registers and signal mask are put back as they were. All signals are blocked while
//! it runs, so no handler can run on borrowed registers. Only the tracer thread calls this.
//!
//! Each call is first put to the tracee's seccomp filters (seccomp_filters.rs): one they would
//! answer by killing, signalling or blocking the program is never made. A call that needs
//! memory (a path) gets a page mapped for it and unmapped after: nothing of the program's is
//! ever written.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::abi::USERFAULTFD_IOC_NEW;
use super::procfs;
use super::seccomp_filters::{Filters, Read, Verdict};

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
    /// The tracee's seccomp filters, which judge every call before it is made.
    filters: Filters,
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
        let filters = match Filters::read(tid.as_raw()) {
            Read::Filters(filters) => filters,
            // Without CAP_SYS_ADMIN the filters cannot be read; those we run under ourselves
            // and our own allow what we inject (we are judged by them too), any other may not.
            Read::Unreadable { count, why } => match count {
                Some(n) if n <= trusted_filters() => Filters::default(),
                _ => {
                    return Err(InjectError::Io(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!(
                            "the program has seccomp filters of its own, which may forbid the calls \
                             injected, and they cannot be read ({why})"
                        ),
                    )));
                }
            },
        };
        let saved = ptrace::getregs(tid)?;
        let saved_mask = sigmask(tid)?;
        // SIGKILL and SIGSTOP cannot be blocked; the kernel ignores those bits.
        set_sigmask(tid, !0u64)?;
        Ok(Self {
            tid,
            saved,
            saved_mask,
            site,
            filters,
            group_stop: false,
            restored: false,
        })
    }

    /// Runs `nr(args)` in the tracee and returns its raw result (negative errno on failure).
    /// A call the tracee's filters fail with an errno is not made: the errno is its result, as
    /// the kernel would give it. One they would answer with a kill, a trap or a notification to
    /// a supervisor is refused (`PermissionDenied`, naming the answer).
    pub fn syscall(&mut self, nr: i64, args: &[u64]) -> Result<i64, InjectError> {
        self.judged(nr, args)?;
        match self
            .filters
            .verdict(nr, &self.registers_for(args), self.site)
        {
            Verdict::Fails(errno) => return Ok(-i64::from(errno)),
            Verdict::Runs | Verdict::Forbidden(_) => {}
        }
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

    /// Whether `nr(args)` may be injected: refused (`PermissionDenied`, naming the answer) if
    /// the tracee's filters would answer it with a kill, a trap or a notification, or with
    /// `SECCOMP_RET_ERRNO` 0, a success that did nothing (a descriptor it "returned" is not ours
    /// to use, nor to close).
    pub fn judged(&self, nr: i64, args: &[u64]) -> Result<(), InjectError> {
        // An undo (close, munmap) must run: skipped, it would leave what it undoes behind.
        let undo = matches!(nr, libc::SYS_close | libc::SYS_munmap);
        let answer = match self
            .filters
            .verdict(nr, &self.registers_for(args), self.site)
        {
            Verdict::Runs => return Ok(()),
            Verdict::Fails(1..) if !undo => return Ok(()),
            Verdict::Fails(0) => "SECCOMP_RET_ERRNO 0",
            Verdict::Fails(_) => "SECCOMP_RET_ERRNO",
            Verdict::Forbidden(answer) => answer,
        };
        Err(InjectError::Io(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "the program's seccomp filter answers {} with {answer}",
                syscall_name(nr)
            ),
        )))
    }

    /// The `n` lowest descriptor numbers free in the tracee: those the next calls that make
    /// descriptors will get (the kernel gives the lowest free one).
    pub fn free_descriptors(&self, n: usize) -> io::Result<Vec<u64>> {
        let used: std::collections::BTreeSet<u64> =
            std::fs::read_dir(format!("/proc/{}/fd", self.tid))?
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect();
        Ok((0..).filter(|fd| !used.contains(fd)).take(n).collect())
    }

    /// The six argument registers a call of `args` is made with, as the filters see them: the
    /// tracee's own beyond those given.
    fn registers_for(&self, args: &[u64]) -> [u64; 6] {
        let r = &self.saved;
        let mut regs = [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9];
        regs[..args.len().min(6)].copy_from_slice(&args[..args.len().min(6)]);
        regs
    }

    /// Runs the one `syscall` instruction at `rip` from its entry stop to its exit stop
    /// (`PTRACE_SYSCALL`; with `PTRACE_O_TRACESYSGOOD` both are ptrace stops, not signals).
    /// Not `PTRACE_SINGLESTEP`, one stop fewer: its trap is a SIGTRAP forced on the tracee,
    /// and forcing a blocked or ignored signal resets the tracee's disposition of it to the
    /// default, so a fork child would lose its SIGTRAP handler, or a program SIGTRAP ignored.
    fn step_over_syscall(&mut self) -> Result<(), InjectError> {
        ptrace::syscall(self.tid, None)?;
        let mut entered = false;
        loop {
            let status = wait_for(self.tid)?;
            match status {
                WaitStatus::PtraceSyscall(_) if !entered => {
                    entered = true;
                    ptrace::syscall(self.tid, None)?
                }
                WaitStatus::PtraceSyscall(_) => return Ok(()),
                // A filter trapped our call after all (the judgement above is the kernel's
                // own, so this should not happen): the SIGSYS is the program's never, and the
                // next resume, passing no signal, discards it.
                WaitStatus::Stopped(_, Signal::SIGSYS) if from_seccomp(self.tid) => {
                    return Err(InjectError::Io(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        "the program's seccomp filter trapped an injected call",
                    )));
                }
                // SIGSTOP (or another forced signal): deliver it now, so that the kernel settles
                // it against a SIGCONT as it would untraced. Every blockable signal is blocked,
                // so no handler runs.
                WaitStatus::Stopped(_, sig) => ptrace::syscall(self.tid, sig)?,
                // A group stop: our call must finish first; the caller then keeps it stopped.
                // (A later stop, such as our PTRACE_INTERRUPT's trap, never clears an earlier
                // group stop.)
                WaitStatus::PtraceEvent(_, sig, libc::PTRACE_EVENT_STOP) => {
                    self.group_stop |= super::ptrace::is_group_stop_signal(sig);
                    ptrace::syscall(self.tid, None)?;
                }
                // Our filter, or the tracee's own, traces our call: let it run.
                WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_SECCOMP) => {
                    ptrace::syscall(self.tid, None)?
                }
                other => return Err(InjectError::Died(other)),
            }
        }
    }

    /// Maps a page in the tracee for an injected call's memory, with `bytes` at its start, and
    /// returns its address; `unmap` removes it. Never the program's own memory: what lies below
    /// its stack pointer is not always free (a green thread's small stack sits above its data).
    /// Shared anonymous memory has a file of its own, so the page merges with no mapping of the
    /// program's and leaves its layout exactly as it was.
    pub fn scratch_page(&mut self, bytes: &[u8]) -> Result<u64, InjectError> {
        use std::os::unix::fs::FileExt;
        let len = super::page_size();
        let prot = (libc::PROT_READ | libc::PROT_WRITE) as u64;
        let flags = (libc::MAP_SHARED | libc::MAP_ANONYMOUS) as u64;
        // A page that could not be unmapped again would stay in the program: both calls are
        // judged first (the address does not matter to a filter that cares about anything else).
        self.judged(libc::SYS_munmap, &[0, len])?;
        let addr = self.syscall(libc::SYS_mmap, &[0, len, prot, flags, u64::MAX, 0])?;
        if (-4095..0).contains(&addr) {
            return Err(InjectError::Io(io::Error::from_raw_os_error(-addr as i32)));
        }
        let addr = addr as u64;
        let written = std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/{}/mem", self.tid))
            .and_then(|mem| mem.write_all_at(&bytes[..bytes.len().min(len as usize)], addr));
        if let Err(e) = written {
            self.unmap(addr)?;
            return Err(InjectError::Io(e));
        }
        Ok(addr)
    }

    /// Removes a page `scratch_page` mapped.
    pub fn unmap(&mut self, addr: u64) -> Result<(), InjectError> {
        match self.syscall(libc::SYS_munmap, &[addr, super::page_size()])? {
            0 => Ok(()),
            err => Err(InjectError::Io(io::Error::from_raw_os_error(-err as i32))),
        }
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

/// Creates a userfaultfd inside the tracee, non-blocking and close-on-exec, and returns its number
/// there. `userfaultfd(2)` needs `CAP_SYS_PTRACE` (or `vm.unprivileged_userfaultfd=1`); a process
/// that dropped its capabilities but kept uid 0 (stress-ng's workers do) still gets one through
/// `/dev/userfaultfd`, where the device file's mode decides and no capability is checked.
///
/// Every call of a way is judged by the tracee's filters before the first is made, with the
/// descriptors it will be given: one refused half way would leave what the others made (a
/// descriptor, the scratch page) in the program. The caller closes the descriptor returned.
pub fn create_userfaultfd(injection: &mut Injection) -> Result<i32, InjectError> {
    let flags = (libc::O_CLOEXEC | libc::O_NONBLOCK) as u64;
    let free = injection.free_descriptors(2)?;
    injection.judged(libc::SYS_userfaultfd, &[flags])?;
    injection.judged(libc::SYS_close, &[free[0]])?;
    let fd = injection.syscall(libc::SYS_userfaultfd, &[flags])?;
    if fd >= 0 {
        return Ok(fd as i32);
    }
    let refused = io::Error::from_raw_os_error(-fd as i32);
    if -fd != libc::EPERM as i64 {
        return Err(InjectError::Io(io::Error::new(
            refused.kind(),
            format!("userfaultfd(): {refused}"),
        )));
    }
    let open_flags = (libc::O_RDWR | libc::O_CLOEXEC) as u64;
    let at_cwd = libc::AT_FDCWD as i64 as u64;
    // The device is opened as free[0], the new userfaultfd is free[1]; both are closed.
    injection.judged(libc::SYS_openat, &[at_cwd, 0, open_flags])?;
    injection.judged(libc::SYS_ioctl, &[free[0], USERFAULTFD_IOC_NEW, flags])?;
    injection.judged(libc::SYS_close, &[free[0]])?;
    injection.judged(libc::SYS_close, &[free[1]])?;
    let path = injection.scratch_page(b"/dev/userfaultfd\0")?;
    let dev = injection.syscall(libc::SYS_openat, &[at_cwd, path, open_flags]);
    injection.unmap(path)?;
    let dev = dev?;
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

/// How many seccomp filters an injected call may meet that are not the program's own: those
/// mevi-actors runs under (a container's, inherited by the program) and the one it installs.
/// Trusted since `run` makes the same calls itself first, under the same filters
/// (`uffd::permitted`: `userfaultfd`, the device's open and ioctl). Only the scratch page's
/// shared `mmap` is taken on trust: a profile that kills that would be a strange one.
fn trusted_filters() -> u64 {
    static OWN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *OWN.get_or_init(|| {
        let tid = nix::unistd::gettid().as_raw();
        procfs::seccomp_filters(tid).unwrap_or(0) + 1
    })
}

/// Whether the signal `tid` is stopped with was sent by a seccomp filter (`SYS_SECCOMP`).
fn from_seccomp(tid: Pid) -> bool {
    const SYS_SECCOMP: i32 = 1;
    ptrace::getsiginfo(tid).is_ok_and(|info| info.si_code == SYS_SECCOMP)
}

/// The name of a syscall we inject, for messages.
fn syscall_name(nr: i64) -> String {
    match nr {
        libc::SYS_userfaultfd => "userfaultfd".into(),
        libc::SYS_openat => "openat".into(),
        libc::SYS_ioctl => "ioctl".into(),
        libc::SYS_close => "close".into(),
        libc::SYS_mmap => "mmap".into(),
        libc::SYS_munmap => "munmap".into(),
        nr => format!("syscall {nr}"),
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
