//! Layout syscalls a program's own seccomp filter hides from ours. A filter that answers
//! `SECCOMP_RET_USER_NOTIF` outranks our `SECCOMP_RET_TRACE`: the syscall goes to the program's
//! supervisor, which may let it run (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`) with no seccomp stop
//! of ours. Such a filter needs a listener, which only `seccomp(SECCOMP_SET_MODE_FILTER,
//! SECCOMP_FILTER_FLAG_NEW_LISTENER)` gives, and that call stops (spawn.rs, `ESCAPES`). From
//! then on the threads under the filter (the caller, every thread of its process with
//! `TSYNC`, and their children, which inherit filters) are resumed with `PTRACE_SYSCALL`: a
//! syscall-entry stop comes before seccomp runs (Linux 4.8+), and a layout syscall is begun
//! there as at a seccomp stop. If our filter's stop comes after it, it is the same syscall,
//! already begun. Only those threads pay the two stops per syscall.

use super::Tracer;
use crate::kernel::ptrace::Resume;
use crate::kernel::spawn;
use crate::kernel::syscall::{self, EntryStop, SeccompEntry};

impl Tracer {
    /// At the seccomp stop of a `seccomp` call installing a filter with a listener: the caller,
    /// or with `SECCOMP_FILTER_FLAG_TSYNC` every thread of its process, stops at every syscall
    /// from now on. If the call fails, they still do: it only costs them stops.
    pub(super) fn on_filter_with_listener(&mut self, tid: i32, args: [u64; 6]) {
        let tsync = args[1] & libc::SECCOMP_FILTER_FLAG_TSYNC != 0;
        let Some(pid) = self.threads.get(&tid).map(|t| t.pid) else {
            return;
        };
        tracing::debug!(tid, tsync, "a filter with a listener: every syscall stops");
        for (&other, t) in self.threads.iter_mut() {
            if other == tid || (tsync && t.pid == pid) {
                t.syscalls.stops.stop_at_every_syscall();
            }
        }
    }

    /// A new thread or process has its creator's filters.
    pub(super) fn inherit_every_syscall(&mut self, parent_tid: i32, child: i32) {
        if self
            .threads
            .get(&parent_tid)
            .is_some_and(|t| t.syscalls.stops.every_syscall())
            && let Some(t) = self.threads.get_mut(&child)
        {
            t.syscalls.stops.stop_at_every_syscall();
        }
    }

    /// A syscall about to run: a layout syscall our filter stops (escapes that are not layout
    /// changes excepted: their seccomp stop handles them) is begun now.
    pub(super) fn on_entry_stop(&mut self, tid: i32, stop: EntryStop) {
        if stop.native && stop.nr == libc::SYS_prctl && spawn::filter_stops(stop.nr, stop.args) {
            // A thread naming itself, which its supervisor may let run with no stop of ours.
            if let Some(t) = self.threads.get_mut(&tid) {
                t.syscalls.stops.begun_at_entry();
            }
            return self.on_set_name(tid);
        }
        let layout = stop.native
            && spawn::filter_stops(stop.nr, stop.args)
            && !matches!(
                stop.nr,
                libc::SYS_clone
                    | libc::SYS_clone3
                    | libc::SYS_ptrace
                    | libc::SYS_seccomp
                    | libc::SYS_execve
                    | libc::SYS_execveat
            );
        if !layout {
            // A program's own supervisor may let an exec run with no stop of ours after this
            // one (its `USER_NOTIF` outranks our `RET_TRACE`): its last pages are read here.
            if stop.native && matches!(stop.nr, libc::SYS_execve | libc::SYS_execveat) {
                self.scan_before_exec(tid);
            }
            return self.go(tid, Resume::Cont(None));
        }
        if let Some(t) = self.threads.get_mut(&tid) {
            t.syscalls.next_syscall();
            t.syscalls.stops.begun_at_entry();
        }
        let stopped = SeccompEntry {
            nr: stop.nr,
            args: stop.args,
            ret_data: spawn::OUR_TRACE_DATA.into(),
        };
        self.begin_layout_syscall(tid, Some(stopped));
    }

    /// At a seccomp stop: whether its syscall was begun at its entry stop already. Then it runs
    /// on to its exit stop; a stop the program's own filter asked for gets `ENOSYS`, as
    /// untraced (escapes.rs).
    pub(super) fn begun_at_entry(&mut self, tid: i32) -> bool {
        let Some(t) = self.threads.get_mut(&tid) else {
            return false;
        };
        if !t.syscalls.stops.take_begun_at_entry() {
            return false;
        }
        if let Ok(Some(s)) = syscall::seccomp_entry(tid)
            && !(s.ret_data == u32::from(spawn::OUR_TRACE_DATA)
                && spawn::filter_stops(s.nr, s.args))
            && let Err(e) = syscall::skip_syscall(tid)
        {
            tracing::debug!(tid, "skipping a syscall: {e}");
        }
        self.go(tid, Resume::Syscall);
        true
    }
}
