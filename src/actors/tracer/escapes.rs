//! Seccomp stops that are not a program's layout change, and registrations given up for one:
//! the program's own filter (answered `ENOSYS`, as with no tracer), `clone`/`clone3` with
//! `CLONE_UNTRACED` (the flag cleared), `ptrace` (lending.rs), a program's filter with a
//! listener (notif.rs), a thread naming itself (names.rs), a program's own userfaultfd (its `UFFDIO_REGISTER`: our range given up;
//! its `UFFDIO_MOVE`, decoded here and described again at its exit by layout.rs), and `mremap`
//! sources the kernel would refuse or never finish while registered (several mappings moved at
//! once, locked memory filled).

use std::ops::Range;
use std::sync::mpsc;

use super::lending::PtraceCall;
use super::{AtExit, Tracer};
use crate::actors::lane::LaneMessage;
use crate::event::SpaceId;
use crate::kernel::ptrace::Resume;
use crate::kernel::syscall::{self, LayoutSyscall, SeccompEntry};
use crate::kernel::{procfs, spawn};

impl Tracer {
    /// Handles a seccomp stop that is not a layout syscall, and lets its thread go; whether it
    /// was one (false: a layout syscall, for the caller). A stop the program's own filter asked
    /// for gets what it would get with no tracer (`ENOSYS`); a `clone` or `clone3` loses
    /// `CLONE_UNTRACED`, so its child is followed; a `ptrace` call may borrow a thread of its own
    /// space (lending.rs), and is held until it has it.
    pub(super) fn handle_other_stop(&mut self, tid: i32, stopped: SeccompEntry) -> bool {
        let ours = stopped.ret_data == u32::from(spawn::OUR_TRACE_DATA)
            && spawn::filter_stops(stopped.nr, stopped.args);
        if !ours {
            tracing::debug!(
                tid,
                nr = stopped.nr,
                "the program's own filter asked for a stop"
            );
            if let Err(e) = syscall::skip_syscall(tid) {
                tracing::debug!(tid, "skipping a syscall: {e}");
            }
            self.go(tid, Resume::Cont(None));
            return true;
        }
        if stopped.nr == libc::SYS_ptrace {
            match self.on_ptrace_call(tid, stopped.args) {
                PtraceCall::Run => self.go(tid, Resume::Cont(None)),
                PtraceCall::Held => {}
                PtraceCall::RunToExit => self.go(tid, Resume::Syscall),
            }
            return true;
        }
        if matches!(stopped.nr, libc::SYS_execve | libc::SYS_execveat) {
            self.scan_before_exec(tid);
            self.go(tid, Resume::Cont(None));
            return true;
        }
        if stopped.nr == libc::SYS_prctl {
            self.on_set_name(tid);
            return true;
        }
        if stopped.nr == libc::SYS_seccomp {
            self.on_filter_with_listener(tid, stopped.args);
            self.go(tid, Resume::Cont(None));
            return true;
        }
        if matches!(stopped.nr, libc::SYS_clone | libc::SYS_clone3) {
            match syscall::clear_clone_untraced(tid, stopped) {
                // The program's memory is put back at the exit.
                Ok(Some(saved)) => {
                    if let Some(t) = self.threads.get_mut(&tid) {
                        t.syscalls.at_exit = AtExit::CloneFlags(saved);
                    }
                    self.go(tid, Resume::Syscall);
                    return true;
                }
                Ok(None) => {}
                // A bad `clone_args` pointer: the kernel answers EFAULT itself.
                Err(e) => tracing::debug!(tid, "clearing CLONE_UNTRACED: {e}"),
            }
            self.go(tid, Resume::Cont(None));
            return true;
        }
        false
    }

    /// The layout syscall a thread stopped at, decoded.
    pub(super) fn decode(&self, tid: i32, stopped: SeccompEntry) -> LayoutSyscall {
        let page_size = self.config.lane.page_size;
        if stopped.nr == libc::SYS_ioctl {
            match syscall::uffd_ioctl(tid, stopped.args, page_size) {
                Ok(Some(call)) => return call,
                Ok(None) => {}
                // An unreadable argument: the kernel answers EFAULT itself.
                Err(e) => tracing::debug!(tid, "reading a userfaultfd ioctl's argument: {e}"),
            }
        }
        LayoutSyscall::decode(stopped.nr, stopped.args, page_size)
    }

    /// A program registering a range with its own userfaultfd gets `EBUSY` where the range is
    /// registered with ours: ours is given up first, so the program works as untraced. At the
    /// exit the range is described again: untracked if the program's registration took, followed
    /// again if it failed.
    pub(super) fn give_up_range(&self, tid: i32, range: Range<u64>) {
        let Some((_, space)) = self.space_of(tid) else {
            return;
        };
        let Some(uffd) = self.spaces.get(&space).and_then(|s| s.uffd()) else {
            return;
        };
        // Mapping by mapping: one unregister over a range that also holds a file mapping fails
        // whole, and the kernel would then answer EBUSY, not the program's own error.
        let maps = procfs::read_maps(tid).unwrap_or_default();
        for entry in maps.iter().filter(|m| m.is_private_anon()) {
            let clip = entry.start.max(range.start)..entry.end.min(range.end);
            if clip.is_empty() {
                continue;
            }
            if let Err(e) = uffd.unregister(clip.start, clip.end) {
                tracing::debug!(tid, ?clip, "giving up a range the program registers: {e}");
            }
        }
    }

    /// The source of an `mremap` that the kernel would refuse, or never finish, while it is
    /// registered: given back to the kernel for the syscall's duration (the kernel then acts on
    /// it as it would untraced), registered and read again at the exit. Which source that is:
    ///
    /// - A move without resize (`MREMAP_FIXED`, equal lengths) over several mappings: since Linux
    ///   6.17 the kernel moves them one by one, but refuses with `EFAULT` when one of them is
    ///   registered with a userfaultfd (its REMAP event needs the mmap lock dropped mid-way).
    ///   The source is always unregistered then, and marked even in a space with no userfaultfd:
    ///   a later mapping's error can come after earlier ones moved, so a failure is described
    ///   again too.
    /// - A move that grows a locked mapping populates the new part inside the syscall, while
    ///   the move keeps the userfaultfd's `mmap_changing` raised: every fill is refused with
    ///   `EAGAIN` and the thread faults again forever. Locked memory is rare: one read of `VmLck`
    ///   tells.
    pub(super) fn unregister_source(&self, tid: i32, call: LayoutSyscall) -> Option<Range<u64>> {
        let LayoutSyscall::Mremap {
            old_addr,
            old_len,
            new_len,
            flags,
            ..
        } = call
        else {
            return None;
        };
        if old_len == 0 || flags & libc::MREMAP_MAYMOVE == 0 {
            return None;
        }
        let source = old_addr..old_addr.saturating_add(old_len);
        if call.moves_only() {
            return self.unregister_multi_mapping_source(tid, source);
        }
        if new_len <= old_len {
            return None;
        }
        let (pid, space) = self.space_of(tid)?;
        let uffd = self.spaces.get(&space)?.uffd()?;
        if procfs::locked_bytes(pid).unwrap_or(0) == 0 {
            return None;
        }
        match uffd.unregister(source.start, source.end) {
            Ok(()) => {
                self.quiesce_lane(space);
                Some(source)
            }
            Err(e) => {
                tracing::debug!(tid, ?source, "a locked mremap source stays registered: {e}");
                None
            }
        }
    }

    /// Waits until the space's lane has stamped every resolution it made before a range was
    /// unregistered for a syscall about to run. That syscall gives no event the lane must read
    /// before it completes, so without this a resolution made in the range just before could be
    /// stamped after the thread went on and a later read of the page tables (a mapping placed
    /// there), and be taken for a page of that mapping (R3). Later fills of the range are refused.
    /// A guard region's install waits the same way, after its fence (R4).
    pub(super) fn quiesce_lane(&self, space: SpaceId) {
        let Some(s) = self.spaces.get(&space) else {
            return;
        };
        let (done, answer) = mpsc::sync_channel(1);
        s.lane.send(LaneMessage::Quiesce { done });
        // However it ends, the syscall runs then: a lane gone or failed resolves nothing more.
        self.await_lane(&answer);
    }

    /// A move-only `mremap` whose source is not inside one mapping (the kernel's multi-VMA
    /// path, `remap_move`): its private anonymous parts unregistered, mapping by mapping (one
    /// unregister over a range that also holds a file mapping fails whole). None for a source
    /// inside one mapping, which the kernel moves registered (with a REMAP event).
    fn unregister_multi_mapping_source(&self, tid: i32, source: Range<u64>) -> Option<Range<u64>> {
        let maps = procfs::read_maps(tid).ok()?;
        if maps
            .iter()
            .any(|m| m.start <= source.start && source.end <= m.end)
        {
            return None;
        }
        let space = self.space_of(tid).map(|(_, space)| space);
        let uffd = space
            .and_then(|space| self.spaces.get(&space))
            .and_then(|s| s.uffd());
        for entry in maps.iter().filter(|m| m.is_private_anon()) {
            let clip = entry.start.max(source.start)..entry.end.min(source.end);
            if let Some(uffd) = uffd
                && !clip.is_empty()
                && let Err(e) = uffd.unregister(clip.start, clip.end)
            {
                tracing::debug!(
                    tid,
                    ?clip,
                    "a multi-mapping mremap source stays registered: {e}"
                );
            }
        }
        if uffd.is_some()
            && let Some(space) = space
        {
            self.quiesce_lane(space);
        }
        Some(source)
    }
}
