//! Waking the tracer thread, which otherwise sleeps in `waitpid` until a tracee stops: for
//! `--verify-every`'s checkpoints (a small ticking thread), and when another actor fails. The
//! tracer thread is sent a signal whose handler does nothing and is installed without
//! `SA_RESTART`, so its `waitpid` returns `EINTR` and it can look at the clock and at the run's
//! failures. Every wait of the tracer thread therefore treats `EINTR` as "look again".

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};

/// One run's ticks, shared by the ticking thread and whoever looks (the run's control).
#[derive(Debug)]
pub struct Tick {
    /// Set by the ticking thread just before it signals; taken by [`Tick::due`].
    due: AtomicBool,
    /// The ticking thread's period, in nanoseconds: set by [`start`], shortened by
    /// [`Tick::hasten`].
    period_ns: AtomicU64,
}

impl Default for Tick {
    fn default() -> Self {
        Self {
            due: AtomicBool::new(false),
            period_ns: AtomicU64::new(u64::MAX),
        }
    }
}

impl Tick {
    /// Ticks at least every `every` from now on (the next sleep already started runs out first).
    pub fn hasten(&self, every: Duration) {
        self.period_ns
            .fetch_min(every.as_nanos() as u64, Ordering::SeqCst);
    }

    /// Whether a tick came since the last call.
    pub fn due(&self) -> bool {
        self.due.swap(false, Ordering::SeqCst)
    }
}

extern "C" fn wake(_: libc::c_int) {}

/// Interrupts the tracer thread's wait, from any thread.
#[derive(Clone, Copy, Debug)]
pub struct TracerWaker {
    pid: libc::pid_t,
    tid: libc::pid_t,
}

impl TracerWaker {
    /// Installs the empty handler and names the calling thread (the tracer) as the one to wake.
    pub fn install() -> io::Result<Self> {
        let action = SigAction::new(SigHandler::Handler(wake), SaFlags::empty(), SigSet::empty());
        // SAFETY: the handler is async-signal-safe (it does nothing), and SIGURG is not used by
        // anything else in this process (its default action is to ignore it, so a stray one sent
        // to another thread is harmless too).
        unsafe { sigaction(Signal::SIGURG, &action) }.map_err(io::Error::from)?;
        Ok(Self {
            pid: std::process::id() as libc::pid_t,
            // SAFETY: gettid has no preconditions.
            tid: unsafe { libc::gettid() },
        })
    }

    /// Interrupts the tracer's wait; false once the tracer thread has ended.
    pub fn wake(&self) -> bool {
        // SAFETY: tgkill with a thread of our own process and a signal whose handler does
        // nothing; if that thread has ended (the trace is over), the call fails with ESRCH.
        unsafe { libc::syscall(libc::SYS_tgkill, self.pid, self.tid, libc::SIGURG) == 0 }
    }
}

/// A one-shot wake-up of the tracer out of `waitpid` after a while (the SIGURG that
/// [`TracerWaker::wake`] sends, from a timer aimed at the tracer's thread): for a loop that must
/// look at something again soon though no stop may come (a layout change held until another
/// thread has run).
pub struct WakeAfter(nix::sys::timer::Timer);

impl WakeAfter {
    pub fn new(tracer: TracerWaker) -> io::Result<Self> {
        use nix::sys::signal::{SigEvent, SigevNotify};
        let event = SigEvent::new(SigevNotify::SigevThreadId {
            signal: Signal::SIGURG,
            thread_id: tracer.tid,
            si_value: 0,
        });
        nix::sys::timer::Timer::new(nix::time::ClockId::CLOCK_MONOTONIC, event)
            .map(Self)
            .map_err(io::Error::from)
    }

    /// Wakes the tracer once, `after` from now (replacing a wake-up not yet come).
    pub fn arm(&mut self, after: Duration) -> io::Result<()> {
        let when = nix::sys::time::TimeSpec::from_duration(after);
        self.0
            .set(
                nix::sys::timer::Expiration::OneShot(when),
                nix::sys::timer::TimerSetTimeFlags::empty(),
            )
            .map_err(io::Error::from)
    }
}

/// Stops its thread when dropped.
pub struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Wakes the tracer every `every` (or less, once [`Tick::hasten`]ed), with [`Tick::due`] true
/// after each tick.
pub fn start(tick: Arc<Tick>, every: Duration, tracer: TracerWaker) -> io::Result<Ticker> {
    tick.period_ns
        .store(every.as_nanos() as u64, Ordering::SeqCst);
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::Builder::new()
        .name("mevi-actors-tick".into())
        .spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_nanos(tick.period_ns.load(Ordering::SeqCst)));
                tick.due.store(true, Ordering::SeqCst);
                if !tracer.wake() {
                    break;
                }
            }
        })?;
    Ok(Ticker { stop })
}

/// The calling thread's CPU time so far. What a periodic read costs the tracer is measured so:
/// on a busy machine a wall-clock figure counts the time the thread waited for a CPU, and would
/// space the next read far beyond its period.
pub fn thread_cpu_time() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}
