//! Noticing a dead actor. Every actor task runs under [`Supervisor::watch`]: a panic is caught
//! and recorded as the run's failure (the first one wins), and the tracer is woken, so that it
//! ends the trace; `run` then exits 70 (`EX_SOFTWARE`) with one line naming the actor. The tracer
//! thread's own panic is seen when it is joined, and ends the traced program with it
//! (`PTRACE_O_EXITKILL`).

use std::cell::RefCell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, OnceLock};

use futures::FutureExt;

use crate::kernel::tick::TracerWaker;

/// Watches the actors of one run.
#[derive(Clone, Debug, Default)]
pub struct Supervisor {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    first_failure: Mutex<Option<String>>,
    tracer: OnceLock<TracerWaker>,
}

impl Supervisor {
    pub fn new() -> Self {
        Self::default()
    }

    /// The tracer thread, woken when an actor fails.
    pub fn set_tracer(&self, waker: TracerWaker) {
        let _ = self.inner.tracer.set(waker);
    }

    /// Records that `actor` failed, and wakes the tracer to end the trace; what to say of it.
    pub fn fail(&self, actor: &str, why: &str) -> String {
        let failure = format!("{actor} failed: {why}");
        let mut first = self
            .inner
            .first_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if first.is_none() {
            *first = Some(failure.clone());
        }
        drop(first);
        if let Some(tracer) = self.inner.tracer.get() {
            tracer.wake();
        }
        failure
    }

    /// The run's first failure, if an actor failed.
    pub fn failure(&self) -> Option<String> {
        self.inner
            .first_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Runs an actor's task; if it panicked, the failure (recorded as the run's) is the error.
    /// Not an `async fn`: that would hold `task` twice in its state (the argument, and the
    /// future it awaits), doubling the memory of every lane's task.
    pub fn watch<'a, F: Future + 'a>(
        &'a self,
        actor: &'a str,
        task: F,
    ) -> impl Future<Output = Result<F::Output, String>> + 'a {
        AssertUnwindSafe(task).catch_unwind().map(move |done| {
            done.map_err(|payload| self.fail(actor, &panic_message(payload.as_ref())))
        })
    }
}

thread_local! {
    /// Where the last panic on this thread happened, kept by the hook for [`panic_message`].
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Keeps each panic's place and message for the one line that reports it, instead of the
/// default report of several lines. Panics on threads that are not ours keep the default report.
pub fn install_panic_hook() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let ours = std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("mevi-actors-"));
            if !ours {
                return default(info);
            }
            let place = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let text = format!("panicked{place}: {}", payload_text(info.payload()));
            tracing::debug!("{text}");
            LAST_PANIC.with(|last| *last.borrow_mut() = Some(text));
        }));
    });
}

/// The panic's place and message, as the hook kept it on this thread, or its payload's text.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    LAST_PANIC
        .with(|last| last.borrow_mut().take())
        .unwrap_or_else(|| format!("panicked: {}", payload_text(payload)))
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failure_is_kept() {
        let s = Supervisor::new();
        assert_eq!(s.failure(), None);
        s.fail("the lane of space 3", "boom");
        s.fail("the state actor", "later");
        assert_eq!(
            s.failure().as_deref(),
            Some("the lane of space 3 failed: boom")
        );
    }

    #[test]
    fn a_panicking_task_is_caught_and_named() {
        let s = Supervisor::new();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let out = rt.block_on(s.watch("the sequencer", async { panic!("bad state") }));
        let failure = s.failure().unwrap();
        assert_eq!(out, Err::<(), _>(failure.clone()));
        assert!(
            failure.starts_with("the sequencer failed: panicked"),
            "{failure}"
        );
        assert!(failure.contains("bad state"), "{failure}");
        assert_eq!(rt.block_on(s.watch("x", async { 5 })), Ok(5));
    }
}
