//! A periodic wake-up for the tracer thread, which otherwise sleeps in `waitpid` until a tracee
//! stops. A small thread sends the tracer thread a signal whose handler does nothing and is
//! installed without `SA_RESTART`, so the tracer's `waitpid` returns `EINTR` and it can look at
//! the clock. Every wait of the tracer thread therefore treats `EINTR` as "look again".

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

/// Set by the ticking thread just before it signals; taken by [`due`].
static DUE: AtomicBool = AtomicBool::new(false);

/// Stops its thread when dropped.
pub struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

extern "C" fn wake(_: libc::c_int) {}

/// Starts ticking the calling thread every `every`.
pub fn start(every: Duration) -> io::Result<Ticker> {
    let action = SigAction::new(SigHandler::Handler(wake), SaFlags::empty(), SigSet::empty());
    // SAFETY: the handler is async-signal-safe (it does nothing), and SIGURG is not used by
    // anything else in this process (its default action is to ignore it, so a stray one sent to
    // another thread is harmless too).
    unsafe { sigaction(Signal::SIGURG, &action) }.map_err(io::Error::from)?;
    let pid = std::process::id() as libc::pid_t;
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::Builder::new()
        .name("mevi-actors-tick".into())
        .spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                std::thread::sleep(every);
                DUE.store(true, Ordering::SeqCst);
                // SAFETY: tgkill with a thread of our own process; if that thread has ended
                // (the trace is over), the call fails with ESRCH and we stop.
                if unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGURG) } != 0 {
                    break;
                }
            }
        })?;
    Ok(Ticker { stop })
}

/// Whether a tick came since the last call.
pub fn due() -> bool {
    DUE.swap(false, Ordering::SeqCst)
}
