//! Signal dispositions mevi-actors was started with, so that the program inherits them as it
//! would untraced: a signal its parent ignored (`nohup`'s SIGHUP, SIGINT and SIGQUIT of a job a
//! shell started with `&`) stays ignored in it.

use nix::sys::signal::Signal;

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
