//! Threads naming themselves. `prctl(PR_SET_NAME)` (what `pthread_setname_np` makes on the
//! calling thread: a JVM's and Rust's named threads each name themselves so as they start)
//! stops at our seccomp stop, by its option alone (spawn.rs): no other `prctl` stops. It runs to its
//! exit stop, and if it succeeded the thread's name, read from `/proc` while the thread is still
//! stopped, goes to its space's lane as a `thread_name` line, in the space's order.
//!
//! Not seen: a name written into `/proc/PID/task/TID/comm` (what `pthread_setname_np` does for
//! another thread), which is no syscall of ours to stop; that thread's `thread_exit` line has it.

use super::{AtExit, Tracer};
use crate::event::Event;
use crate::kernel::procfs;
use crate::kernel::ptrace::Resume;
use crate::kernel::syscall;

impl Tracer {
    /// At the seccomp stop (or, under a program's filter with a listener, the entry stop) of a
    /// thread's `prctl(PR_SET_NAME)`: it runs to its exit stop.
    pub(super) fn on_set_name(&mut self, tid: i32) {
        if let Some(t) = self.threads.get_mut(&tid) {
            t.syscalls.at_exit = AtExit::Naming;
        }
        self.go(tid, Resume::Syscall);
    }

    /// At a syscall's exit stop: whether it was a `prctl(PR_SET_NAME)`'s, handled here (its line
    /// written if it succeeded) and the thread let go.
    pub(super) fn on_set_name_exit(&mut self, tid: i32) -> bool {
        let naming = self
            .threads
            .get_mut(&tid)
            .is_some_and(|t| t.syscalls.take_naming());
        if !naming {
            return false;
        }
        match syscall::exit_value(tid) {
            Ok(Some(ret)) if !ret.is_error => self.named(tid),
            Ok(_) => {}
            // ESRCH: it died; its end is still to be reported.
            Err(e) => tracing::debug!(tid, "PTRACE_GET_SYSCALL_INFO at prctl's exit: {e}"),
        }
        self.go(tid, Resume::Cont(None));
        true
    }

    /// Writes the name `tid` has now, as the kernel keeps it (cut to 15 bytes), rather than the
    /// string it passed: that is the name every later reader of `/proc` sees.
    fn named(&self, tid: i32) {
        let Some((pid, space)) = self.space_of(tid) else {
            return;
        };
        let Some(name) = procfs::comm(pid, tid) else {
            return;
        };
        self.observed(
            space,
            Event::ThreadName {
                pid,
                tid,
                space,
                name,
            },
        );
    }
}
