//! Signal dispositions: those mevi-actors was started with, so that the program inherits them as
//! it would untraced (a signal its parent ignored, `nohup`'s SIGHUP, SIGINT and SIGQUIT of a job
//! a shell started with `&`, stays ignored in it), and whether a traced process would be ended by
//! a signal pending for it (tracer/untaken.rs).

use std::sync::OnceLock;

use nix::sys::signal::Signal;

/// The signal mask mevi-actors was started with (the kernel's 64-bit set): the program starts
/// with it, as it would untraced.
static STARTED_WITH: OnceLock<u64> = OnceLock::new();

/// The signals mevi-actors itself needs to receive, whatever mask it was started with: SIGURG
/// wakes the tracer out of `waitpid` (kernel/tick.rs), and SIGCHLD, which the kernel sends for
/// the program's stops and exits. A caller that blocked both (a mask is inherited across exec)
/// left the tracer waiting for good.
const OURS: [Signal; 2] = [Signal::SIGURG, Signal::SIGCHLD];

/// Notes the mask this thread has (mevi-actors' first, before any other thread is made, which
/// inherits the mask) and unblocks [`OURS`] in it. Called once, at the start of a run.
pub fn unblock_our_own() {
    use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};
    let _ = STARTED_WITH.set(blocked_now());
    let mut ours = SigSet::empty();
    for signal in OURS {
        ours.add(signal);
    }
    if let Err(e) = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&ours), None) {
        tracing::warn!("unblocking SIGURG and SIGCHLD: {e}");
    }
}

/// The mask mevi-actors was started with, for the program; this thread's now if it was not
/// noted.
pub fn started_with() -> u64 {
    STARTED_WITH.get().copied().unwrap_or_else(blocked_now)
}

/// This thread's blocked signals, as the kernel's 64-bit set.
fn blocked_now() -> u64 {
    let mut now = std::mem::MaybeUninit::<libc::sigset_t>::zeroed();
    // SAFETY: with no new set, pthread_sigmask only writes the current one into `now`, a
    // buffer of the right type that lives through the call; a zeroed sigset_t is valid (empty).
    // A sigset_t starts with the kernel's 64-bit set of signals 1 to 64.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), now.as_mut_ptr());
        std::ptr::read(now.as_ptr().cast::<u64>())
    }
}

/// Whether `signal` is ignored (`SIG_IGN`) in this process now. Asked before the runtime installs
/// any handler of its own.
pub fn is_ignored(signal: Signal) -> bool {
    let mut current = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
    // SAFETY: with a null new action, sigaction only writes the current one into `current`, a
    // buffer of the right type that lives through the call.
    let asked = unsafe {
        libc::sigaction(
            signal as libc::c_int,
            std::ptr::null(),
            current.as_mut_ptr(),
        )
    };
    // SAFETY: a zeroed sigaction is a valid value, and on success the kernel filled it in.
    asked == 0 && unsafe { current.assume_init() }.sa_sigaction == libc::SIG_IGN
}

/// Whether `signal` is pending for process `pid` and would end it by its default action: it has
/// no handler and is not ignored, and some thread does not block it. A traced process gets no
/// shortcut for such a signal (untraced, the kernel makes it a group exit at once, waking even
/// killable waits), so a thread that cannot reach its signal stop keeps it pending for ever.
/// Read from `/proc/PID/status` and each thread's; false when they cannot be read.
pub fn would_end(pid: i32, signal: Signal) -> bool {
    let bit = 1u64 << (signal as i32 - 1);
    let mask = |status: &str, key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    };
    let Ok(process) = super::procfs::text(format!("/proc/{pid}/status")) else {
        return false;
    };
    let (Some(shared), Some(ignored), Some(caught)) = (
        mask(&process, "ShdPnd:"),
        mask(&process, "SigIgn:"),
        mask(&process, "SigCgt:"),
    ) else {
        return false;
    };
    if (ignored | caught) & bit != 0 {
        return false;
    }
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut pending = shared & bit != 0;
    let mut unblocked = false;
    for task in tasks.flatten() {
        let Ok(status) = super::procfs::text(task.path().join("status")) else {
            continue;
        };
        pending |= mask(&status, "SigPnd:").is_some_and(|m| m & bit != 0);
        unblocked |= mask(&status, "SigBlk:").is_some_and(|m| m & bit == 0);
    }
    pending && unblocked
}
