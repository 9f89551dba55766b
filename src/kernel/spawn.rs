//! Starting the traced program: finding it, refusing what cannot be traced with the right exit
//! status, and starting it seized by ptrace with a seccomp filter that stops only the syscalls
//! that change memory layout.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::sys::ptrace;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};

use super::abi::{TRACE_OPTIONS, UFFDIO_MOVE, UFFDIO_REGISTER};
use crate::test_hooks::{self, Fault};

/// A refusal to start, with the exit status a shell would give.
#[derive(Debug)]
pub struct SpawnError {
    pub status: i32,
    pub message: String,
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The syscalls that stop at a seccomp stop; every other one runs untouched. Process lifecycle
/// (clone, fork, exec, exit) is followed through ptrace events, which need no syscall stop.
pub const TRACED_SYSCALLS: &[i64] = &[
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mremap,
    libc::SYS_madvise,
    libc::SYS_brk,
    libc::SYS_mprotect,
    libc::SYS_pkey_mprotect,
];

/// When a syscall stops, beyond [`TRACED_SYSCALLS`] (always).
#[derive(Clone, Copy)]
enum StopWhen {
    Always,
    /// These bits of argument `.0` are all set (a 64-bit argument).
    BitsSet(u8, u64),
    /// Argument `.0`'s low 32 bits equal `.1` (an `unsigned int` argument).
    Equals32(u8, u32),
}

/// The few calls a program could escape or trip over the trace with: `clone` asking for
/// `CLONE_UNTRACED` and every `clone3` (whose flags are in memory, out of the filter's sight),
/// so that no child runs with the filter but without a tracer; a program's `UFFDIO_REGISTER`
/// (the range may be registered with ours) and `UFFDIO_MOVE` (pages leave a range of ours with
/// no event); `ptrace` (a thread of its own space may have to be
/// lent); a program's own filter installed with a listener (`seccomp` with
/// `SECCOMP_FILTER_FLAG_NEW_LISTENER`), whose `SECCOMP_RET_USER_NOTIF` outranks our stops.
/// Also `prctl(PR_SET_NAME)`, a thread naming itself (its `thread_name` line), and no other
/// `prctl`: the option is an `int`, so its low 32 bits are compared, as the kernel reads it.
/// And, when pages may be followed by scans, `execve`/`execveat` (`EXECS`).
const ESCAPES: &[(i64, StopWhen)] = &[
    (
        libc::SYS_clone,
        StopWhen::BitsSet(0, libc::CLONE_UNTRACED as u64),
    ),
    (libc::SYS_clone3, StopWhen::Always),
    (libc::SYS_ioctl, StopWhen::Equals32(1, UFFDIO_REGISTER)),
    (libc::SYS_ioctl, StopWhen::Equals32(1, UFFDIO_MOVE)),
    (libc::SYS_ptrace, StopWhen::Always),
    (
        libc::SYS_seccomp,
        StopWhen::BitsSet(1, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER),
    ),
    (
        libc::SYS_prctl,
        StopWhen::Equals32(0, libc::PR_SET_NAME as u32),
    ),
];

/// A successful exec drops the old mm with no stop while it is whole: where pages may be followed
/// by scans, they are read for the last time at its entry (one stop per exec).
const EXECS: &[i64] = &[libc::SYS_execve, libc::SYS_execveat];

/// Whether our filter stops this syscall: a stop for one it lets through is the program's own
/// filter's, whatever its data (an exec counts as stopped: without `EXECS`, no stop comes).
pub fn filter_stops(nr: i64, args: [u64; 6]) -> bool {
    TRACED_SYSCALLS.contains(&nr)
        || EXECS.contains(&nr)
        || ESCAPES.iter().any(|&(n, when)| {
            n == nr
                && match when {
                    StopWhen::Always => true,
                    StopWhen::BitsSet(i, bits) => args[i as usize] & bits == bits,
                    StopWhen::Equals32(i, value) => args[i as usize] as u32 == value,
                }
        })
}

/// The `SECCOMP_RET_DATA` of our filter's stops. A seccomp stop with other data comes from the
/// program's own filter (the kernel reports the data of the filter that asked); untraced, it
/// would get `ENOSYS`, and so it does under us.
pub const OUR_TRACE_DATA: u16 = 0x6d65;

/// The filter installed in the traced program (and inherited by every descendant): it stops
/// [`TRACED_SYSCALLS`] and [`ESCAPES`], and with `stop_execs` [`EXECS`]. A syscall of another ABI
/// (`int $0x80`, a 32-bit program) is let through: the filter never kills.
pub fn seccomp_filter(stop_execs: bool) -> io::Result<BpfProgram> {
    use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};
    let built = |e: seccompiler::BackendError| {
        io::Error::other(format!("building the seccomp filter: {e}"))
    };
    let execs = if stop_execs { EXECS } else { &[] };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = TRACED_SYSCALLS
        .iter()
        .chain(execs)
        .map(|&nr| (nr, Vec::new()))
        .collect();
    for &(nr, when) in ESCAPES {
        let condition = match when {
            StopWhen::Always => None,
            StopWhen::BitsSet(i, bits) => Some(SeccompCondition::new(
                i,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(bits),
                bits,
            )),
            StopWhen::Equals32(i, value) => Some(SeccompCondition::new(
                i,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Eq,
                value.into(),
            )),
        };
        // Rules of one syscall are alternatives, and none at all stops it always: a condition
        // must not narrow a syscall stopped always (filter_stops would disagree).
        let always = rules.get(&nr).is_some_and(Vec::is_empty);
        match condition {
            None => {
                rules.insert(nr, Vec::new());
            }
            Some(_) if always => {
                return Err(io::Error::other(format!(
                    "building the seccomp filter: syscall {nr} is stopped always and on a condition"
                )));
            }
            Some(c) => rules
                .entry(nr)
                .or_default()
                .push(SeccompRule::new(vec![c.map_err(built)?]).map_err(built)?),
        }
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Trace(OUR_TRACE_DATA.into()),
        TargetArch::x86_64,
    )
    .map_err(built)?;
    let mut program = BpfProgram::try_from(filter)
        .map_err(|e| io::Error::other(format!("compiling the seccomp filter: {e}")))?;
    allow_other_abis(&mut program)?;
    Ok(program)
}

/// seccompiler's program begins by checking the architecture and kills the whole process on a
/// mismatch: an `int $0x80` in a 64-bit program, or any syscall of a 32-bit one. Untraced these
/// run, so the mismatch returns `ALLOW` instead. The instruction is checked before it is changed,
/// so that another layout of seccompiler's program is an error, not a wrong filter.
fn allow_other_abis(program: &mut BpfProgram) -> io::Result<()> {
    const BPF_RET_K: u16 = 0x06;
    match program.get_mut(2) {
        Some(ret) if ret.code == BPF_RET_K && ret.k == libc::SECCOMP_RET_KILL_PROCESS => {
            ret.k = libc::SECCOMP_RET_ALLOW;
            Ok(())
        }
        _ => Err(io::Error::other(
            "the seccomp filter does not begin with the architecture check it should",
        )),
    }
}

/// Finds `program` as a shell would and checks that it can be traced.
pub fn resolve(program: &OsStr) -> Result<PathBuf, SpawnError> {
    let shown = program.to_string_lossy();
    let path = if program.as_bytes().contains(&b'/') {
        PathBuf::from(program)
    } else {
        let search = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
        std::env::split_paths(&search)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file() && is_executable(p))
            .or_else(|| {
                std::env::split_paths(&search)
                    .map(|dir| dir.join(program))
                    .find(|p| p.is_file())
            })
            .ok_or_else(|| SpawnError {
                status: 127,
                message: format!("mevi-actors: {shown}: command not found"),
            })?
    };
    let meta = std::fs::metadata(&path).map_err(|e| SpawnError {
        status: if e.kind() == io::ErrorKind::NotFound {
            127
        } else {
            126
        },
        message: format!("mevi-actors: {}: {}", path.display(), short(&e)),
    })?;
    if meta.is_dir() {
        return Err(SpawnError {
            status: 126,
            message: format!("mevi-actors: {}: is a directory", path.display()),
        });
    }
    if !is_executable(&path) {
        return Err(SpawnError {
            status: 126,
            message: format!("mevi-actors: {}: permission denied", path.display()),
        });
    }
    Ok(path)
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p)
        .map(|m| m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
        && nix::unistd::access(p, nix::unistd::AccessFlags::X_OK).is_ok()
}

fn short(e: &io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_lowercase()
}

/// Everything the child needs, prepared before it starts (after, it makes raw syscalls only).
pub struct Prepared {
    path: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
    stdout_to_stderr: bool,
    filter: Option<BpfProgram>,
    /// Test hook `killed-first`: the child is killed before its first stop, as a `kill -9`
    /// sent the moment it appears would.
    killed_first: bool,
    /// Test hook `interrupted-first`: the child sends itself SIGINT before its exec.
    interrupted_first: bool,
    /// The descriptor limit mevi-actors was started with, which the program gets back: the
    /// tracer raises its own (see [`raise_descriptor_limit`]).
    nofile: libc::rlimit,
    /// The signal mask mevi-actors was started with, which the program gets back: mevi-actors
    /// unblocks the signals it needs itself (kernel/signals.rs).
    mask: u64,
}

impl Prepared {
    pub fn new(
        path: &Path,
        argv: &[OsString],
        stdout_to_stderr: bool,
        filter: Option<BpfProgram>,
    ) -> io::Result<Self> {
        let cstr =
            |s: &[u8]| CString::new(s).map_err(|_| io::Error::other("argument holds a NUL byte"));
        Ok(Self {
            path: cstr(path.as_os_str().as_bytes())?,
            argv: argv
                .iter()
                .map(|a| cstr(a.as_bytes()))
                .collect::<io::Result<_>>()?,
            env: environment()?,
            stdout_to_stderr,
            filter,
            killed_first: test_hooks::fails(Fault::KilledFirst, None),
            interrupted_first: test_hooks::fails(Fault::InterruptedFirst, None),
            nofile: ORIGINAL_NOFILE.get().copied().unwrap_or(libc::rlimit {
                rlim_cur: libc::RLIM_INFINITY,
                rlim_max: libc::RLIM_INFINITY,
            }),
            mask: super::signals::started_with(),
        })
    }
}

/// The environment mevi-actors was started with, entry by entry and byte for byte, for the
/// program: `/proc/self/environ` (mevi-actors changes none of its own), since std's `vars_os`
/// leaves out an entry with no `=`, which a program may be given and read. std's view if the
/// file cannot be read.
fn environment() -> io::Result<Vec<CString>> {
    let entries = match std::fs::read("/proc/self/environ") {
        Ok(block) => block
            .split(|&b| b == 0)
            .filter(|entry| !entry.is_empty())
            .map(<[u8]>::to_vec)
            .collect(),
        Err(_) => std::env::vars_os()
            .map(|(k, v)| {
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                kv
            })
            .collect::<Vec<_>>(),
    };
    entries
        .into_iter()
        .map(|entry| CString::new(entry).map_err(|_| io::Error::other("a NUL in the environment")))
        .collect()
}

/// The descriptor limit mevi-actors was started with, saved by [`raise_descriptor_limit`].
static ORIGINAL_NOFILE: std::sync::OnceLock<libc::rlimit> = std::sync::OnceLock::new();

/// Raises our soft limit on open descriptors to the hard limit: the tracer holds two per live
/// address space (its userfaultfd and its pagemap), and a soft limit of 1,024 would leave
/// hundreds of concurrent processes untraced. The program is started with the limit as it was.
pub fn raise_descriptor_limit() -> io::Result<()> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only into `limit`, a live rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let _ = ORIGINAL_NOFILE.set(limit);
    let raised = libc::rlimit {
        rlim_cur: limit.rlim_max,
        ..limit
    };
    // SAFETY: setrlimit only reads `raised`, a live rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The program's process, traced from its first instruction on, or how it ended before it
/// could be (killed in the microseconds between its start and its first stop).
pub enum Spawned {
    Seized(Pid),
    /// Its exit code, or the signal that killed it.
    DiedFirst(Result<i32, Signal>),
}

impl Spawned {
    /// Ends a program that is not to be traced after all (it could not be seized, or the run
    /// failed to start): killed and reaped on the thread that started it, never left running
    /// untraced or as a zombie.
    pub fn abandon(self) {
        let Spawned::Seized(child) = self else { return };
        let _ = kill(child, Signal::SIGKILL);
        loop {
            match waitpid(child, Some(WaitPidFlag::__WALL)) {
                Err(nix::errno::Errno::EINTR) => {}
                Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(_) => return,
                // A stop reached before the kill: let it go on to its death.
                Ok(_) => {
                    let _ = ptrace::cont(child, None);
                }
            }
        }
    }
}

/// Lets a program just seized past its first stop, its `execve`'s seccomp stop, as the tracer
/// would (nothing of a process is followed before its first exec): the kernel's exec then runs
/// while the tracer is still being made. Any other first stop (a signal, its death) is returned
/// for the tracer to handle as the first of its loop.
pub fn past_exec_entry(child: Pid) -> Option<WaitStatus> {
    let status = loop {
        match waitpid(child, Some(WaitPidFlag::__WALL)) {
            Ok(status) => break status,
            Err(nix::errno::Errno::EINTR) => continue,
            // The tracer's own wait will find what became of it.
            Err(e) => {
                tracing::debug!(child = child.as_raw(), "waiting for the first stop: {e}");
                return None;
            }
        }
    };
    if let WaitStatus::PtraceEvent(_, _, libc::PTRACE_EVENT_SECCOMP) = status
        && let Ok(Some(entry)) = super::syscall::seccomp_entry(child.as_raw())
        && entry.ret_data == u32::from(OUR_TRACE_DATA)
        && matches!(entry.nr, libc::SYS_execve | libc::SYS_execveat)
        && ptrace::cont(child, None).is_ok()
    {
        return None;
    }
    Some(status)
}

/// Seizes the child while it waits to read `go`, then writes it the byte it waits for. A seize
/// does not stop a thread, so the child goes on untouched to its first stop, its `execve`'s:
/// no stop of its own, no SIGCONT's delivery to pass on (three round trips with the tracer
/// when the child stopped itself with SIGSTOP).
fn seize_waiting(child: Pid, go: OwnedFd) -> io::Result<Spawned> {
    if let Err(e) = ptrace::seize(child, TRACE_OPTIONS) {
        // A child already dead (a `kill -9` the moment it appeared) cannot be seized: its end
        // is the run's.
        return match waitpid(child, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => Ok(Spawned::DiedFirst(Ok(code))),
            Ok(WaitStatus::Signaled(_, signal, _)) => Ok(Spawned::DiedFirst(Err(signal))),
            _ => Err(io::Error::other(format!("PTRACE_SEIZE: {e}"))),
        };
    }
    // Refused only if the child has died since (its end of the pipe closed): traced, its end
    // comes to the tracer's loop as any traced thread's.
    let _ = nix::unistd::write(&go, &[1]);
    Ok(Spawned::Seized(child))
}

/// How much stack the child has until its `execve`: it runs a few calls deep, no more.
const CHILD_STACK_BYTES: usize = 64 << 10;
/// Below it, a page no access: an overflow faults instead of writing into whatever mapping the
/// kernel put under the stack.
const GUARD_BYTES: usize = 4096;

/// What the child reads until its `execve` has replaced the memory it shares with us
/// (`CLONE_VM`): its arguments, its environment, the filter, and the stack it runs on. Never
/// freed: only the program's exec event or its death would say the kernel is done with them,
/// and they are one program's arguments and 68 KiB of address space (a few pages touched),
/// once a run (and once a `doctor`).
struct ChildArgs {
    prepared: Prepared,
    argv: Vec<*const libc::c_char>,
    env: Vec<*const libc::c_char>,
    fprog: Option<libc::sock_fprog>,
    wait_fd: libc::c_int,
    go_fd: libc::c_int,
}

/// Starts the child, seizes it while it waits on a pipe, and lets it go on to install the
/// filter and exec. Must be called on the thread that will make every later ptrace call.
///
/// The child shares our memory until its `execve` (`CLONE_VM`, as `posix_spawn` does, without
/// its `CLONE_VFORK`: this thread must seize it meanwhile): no page table of ours is copied,
/// and no page of ours becomes copy-on-write, for the milliseconds until its exec, for every
/// thread of ours that writes one (a fork of our threaded process cost about a millisecond of
/// CPU that way, with TLB shootdowns). It runs on a stack of its own, with the signals blocked
/// until it has reset our handlers, so that none of ours runs in it. Nothing of it may be read
/// or written before its exec (its maps and pagemap are ours then): the tracer reads a process
/// only once it has a space, which its first exec makes.
pub fn spawn_seized(p: Prepared) -> io::Result<Spawned> {
    use nix::sys::mman::{MapFlags, ProtFlags, mmap_anonymous, mprotect};
    // The child waits for one byte on `wait`, which the tracer writes once it has seized it.
    // Both ends close at the exec; the child's end of `go` is closed at once, so that a tracer
    // that dies first leaves it reading the end of the file, not waiting for ever.
    let (wait, go) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    let mapped =
        std::num::NonZeroUsize::new(GUARD_BYTES + CHILD_STACK_BYTES).expect("a stack has a size");
    // SAFETY: a new private anonymous mapping, at an address the kernel chooses; never unmapped
    // (ChildArgs).
    let stack = unsafe {
        mmap_anonymous(
            None,
            mapped,
            ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
            MapFlags::MAP_PRIVATE | MapFlags::MAP_STACK,
        )
    }
    .map_err(io::Error::from)?;
    // SAFETY: the lowest page of the mapping just made, which nothing uses.
    unsafe { mprotect(stack, GUARD_BYTES, ProtFlags::PROT_NONE) }.map_err(io::Error::from)?;
    let mut argv: Vec<*const libc::c_char> = p.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut env: Vec<*const libc::c_char> = p.env.iter().map(|a| a.as_ptr()).collect();
    env.push(std::ptr::null());
    let fprog = p.filter.as_ref().map(|f| libc::sock_fprog {
        len: f.len() as u16,
        filter: f.as_ptr() as *mut libc::sock_filter,
    });

    // SAFETY: sigfillset and pthread_sigmask write only into the live sets given; the mask is
    // this thread's, put back right after the clone. glibc keeps its own two signals
    // (SIGCANCEL, SIGSETXID) unblocked; their handlers act only on signals glibc sends to our
    // own threads, never to the child.
    let was = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut was: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut was);
        was
    };
    let args: &'static ChildArgs = Box::leak(Box::new(ChildArgs {
        prepared: p,
        argv,
        env,
        fprog,
        wait_fd: wait.as_raw_fd(),
        go_fd: go.as_raw_fd(),
    }));
    // SAFETY: the child runs `child_main` on the stack mapped above (its top, page-aligned),
    // with a pointer to `args`, which is never freed nor changed (ChildArgs). It shares our
    // memory, so it makes raw syscalls only, on that data and its own stack (see child_main).
    let clone = unsafe {
        let top = stack
            .as_ptr()
            .cast::<u8>()
            .add(GUARD_BYTES + CHILD_STACK_BYTES);
        libc::clone(
            child_main,
            top.cast(),
            libc::CLONE_VM | libc::SIGCHLD,
            (&raw const *args).cast_mut().cast(),
        )
    };
    let cloned = (clone < 0).then(io::Error::last_os_error);
    // SAFETY: as above: this thread's own mask back as it was.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &was, std::ptr::null_mut());
    }
    if let Some(e) = cloned {
        return Err(e);
    }
    let child = Pid::from_raw(clone);
    drop(wait);
    // Never leave it waiting and untraced (EXITKILL does not cover it yet).
    seize_waiting(child, go).inspect_err(|_| Spawned::Seized(child).abandon())
}

/// A syscall with nothing in between: the child shares the tracer thread's thread-local
/// storage, where libc's wrappers would write errno and their cancellation state. Returns what
/// the kernel returns (`-errno` on failure).
///
/// # Safety
/// As the syscall `nr` is with these arguments.
#[inline(always)]
unsafe fn raw_syscall(nr: libc::c_long, args: [usize; 6]) -> isize {
    let ret: isize;
    // SAFETY: the x86_64 syscall convention: the number in rax, the arguments in rdi, rsi, rdx,
    // r10, r8, r9; the instruction overwrites rcx and r11 (the return address and flags), and
    // nothing is pushed on our stack.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => ret,
            in("rdi") args[0],
            in("rsi") args[1],
            in("rdx") args[2],
            in("r10") args[3],
            in("r8") args[4],
            in("r9") args[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// The child, until its `execve`: on its own stack, in our memory (CLONE_VM), making raw
/// syscalls only, so that it writes nothing of ours but its stack. It must stay free of panics
/// (no indexing out of bounds, no allocation): a panic's hook would run on the tracer thread's
/// thread-local state and our allocator, shared.
extern "C" fn child_main(args: *mut libc::c_void) -> libc::c_int {
    /// The kernel's `struct sigaction` (handler, flags, restorer, mask): what `rt_sigaction`
    /// reads and writes, not libc's.
    #[repr(C)]
    #[derive(Default)]
    struct KernelSigaction {
        handler: usize,
        flags: u64,
        restorer: usize,
        mask: u64,
    }
    const SIGSET_BYTES: usize = 8;
    // SAFETY: `args` is the ChildArgs `spawn_seized` passed, never freed nor changed after the
    // clone; every call below is a raw syscall on it, on the child's own stack, or on the
    // child's own copies of the descriptor table, the signal handlers and the limits.
    unsafe {
        let a = &*(args as *const ChildArgs);
        let p = &a.prepared;
        let syscall = |nr, args| raw_syscall(nr, args);
        let exit = |status: usize| -> ! {
            syscall(libc::SYS_exit_group, [status, 0, 0, 0, 0, 0]);
            // exit_group does not return.
            loop {
                std::hint::spin_loop();
            }
        };
        let write = |bytes: &[u8]| {
            syscall(
                libc::SYS_write,
                [2, bytes.as_ptr() as usize, bytes.len(), 0, 0, 0],
            );
        };
        // Our handlers go first, as the exec would take them: a signal the child gets before
        // its exec (a Ctrl-C as the run starts) acts as on the program, not on a copy of
        // mevi-actors that would take it and run the program all the same. An ignored
        // signal stays ignored, as across an exec (nohup's SIGHUP).
        let default = KernelSigaction::default();
        for signal in 1..=64usize {
            let mut was = KernelSigaction::default();
            let asked = [signal, 0, (&raw mut was) as usize, SIGSET_BYTES, 0, 0];
            if syscall(libc::SYS_rt_sigaction, asked) == 0
                && was.handler != libc::SIG_DFL
                && was.handler != libc::SIG_IGN
            {
                let reset = [signal, (&raw const default) as usize, 0, SIGSET_BYTES, 0, 0];
                syscall(libc::SYS_rt_sigaction, reset);
            }
        }
        // Rust ignores SIGPIPE; programs expect the default.
        let pipe = [
            libc::SIGPIPE as usize,
            (&raw const default) as usize,
            0,
            SIGSET_BYTES,
            0,
            0,
        ];
        syscall(libc::SYS_rt_sigaction, pipe);
        // Then the mask mevi-actors was started with: signals blocked for the clone arrive now,
        // to defaults.
        let mask = [
            libc::SIG_SETMASK as usize,
            (&raw const p.mask) as usize,
            0,
            SIGSET_BYTES,
            0,
            0,
        ];
        syscall(libc::SYS_rt_sigprocmask, mask);
        if p.stdout_to_stderr {
            syscall(libc::SYS_dup2, [2, 1, 0, 0, 0, 0]);
        }
        let raise = |signal: libc::c_int| {
            let pid = syscall(libc::SYS_getpid, [0; 6]) as usize;
            syscall(libc::SYS_kill, [pid, signal as usize, 0, 0, 0, 0]);
        };
        if p.killed_first {
            raise(libc::SIGKILL);
        }
        if p.interrupted_first {
            raise(libc::SIGINT);
        }
        if p.nofile.rlim_cur != libc::RLIM_INFINITY {
            let limit = (&raw const p.nofile) as usize;
            syscall(
                libc::SYS_prlimit64,
                [0, libc::RLIMIT_NOFILE as usize, limit, 0, 0, 0],
            );
        }
        syscall(libc::SYS_close, [a.go_fd as usize, 0, 0, 0, 0, 0]);
        let mut byte = 0u8;
        loop {
            let read = [a.wait_fd as usize, (&raw mut byte) as usize, 1, 0, 0, 0];
            match syscall(libc::SYS_read, read) {
                1 => break,
                e if e == -(libc::EINTR as isize) => continue,
                // The tracer is gone before it seized us: nothing to run traced.
                _ => exit(126),
            }
        }
        syscall(libc::SYS_close, [a.wait_fd as usize, 0, 0, 0, 0, 0]);
        if let Some(fprog) = &a.fprog {
            let filter = [
                libc::PR_SET_SECCOMP as usize,
                libc::SECCOMP_MODE_FILTER as usize,
                fprog as *const libc::sock_fprog as usize,
                0,
                0,
                0,
            ];
            // Without CAP_SYS_ADMIN a filter needs no_new_privs (which stops setuid).
            if syscall(libc::SYS_prctl, filter) != 0 {
                let no_new_privs = [libc::PR_SET_NO_NEW_PRIVS as usize, 1, 0, 0, 0, 0];
                syscall(libc::SYS_prctl, no_new_privs);
                if syscall(libc::SYS_prctl, filter) != 0 {
                    write(b"mevi-actors: cannot install the seccomp filter\n");
                    exit(126);
                }
            }
        }
        let exec = [
            p.path.as_ptr() as usize,
            a.argv.as_ptr() as usize,
            a.env.as_ptr() as usize,
            0,
            0,
            0,
        ];
        let errno = -syscall(libc::SYS_execve, exec) as i32;
        let (status, why): (usize, &[u8]) = match errno {
            libc::ENOENT => (
                127,
                b": cannot execute: a required file (its interpreter?) was not found\n",
            ),
            libc::ENOEXEC => (126, b": cannot execute: exec format error\n"),
            libc::EACCES => (126, b": cannot execute: permission denied\n"),
            _ => (126, b": cannot execute\n"),
        };
        write(b"mevi-actors: ");
        write(p.path.as_bytes());
        write(why);
        exit(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_builds_and_stops_what_filter_stops_says() {
        seccomp_filter(true).expect("the filter builds");
        seccomp_filter(false).expect("the filter builds");
        let ioctl = |request: u32| [3, request as u64 | (1 << 40), 0, 0, 0, 0];
        assert!(filter_stops(libc::SYS_ioctl, ioctl(super::UFFDIO_REGISTER)));
        assert!(filter_stops(libc::SYS_ioctl, ioctl(super::UFFDIO_MOVE)));
        assert!(!filter_stops(libc::SYS_ioctl, ioctl(libc::TCGETS as u32)));
        let prctl = |option: i32| [option as u64, 0x7000, 0, 0, 0, 0];
        assert!(filter_stops(libc::SYS_prctl, prctl(libc::PR_SET_NAME)));
        for other in [libc::PR_GET_NAME, libc::PR_SET_DUMPABLE, libc::PR_SET_VMA] {
            assert!(!filter_stops(libc::SYS_prctl, prctl(other)));
        }
        assert!(filter_stops(libc::SYS_mmap, [0; 6]));
        assert!(!filter_stops(libc::SYS_read, [0; 6]));
    }
}
