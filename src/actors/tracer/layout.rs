//! Layout syscalls: what each one did, reported to its space's lane at its exit stop, while the
//! thread that made it is still stopped.

use std::ops::Range;
use std::time::Instant;

use rangemap::RangeSet;

use super::mappings::{MapAt, NewMapping};
use super::scans::Running;
use super::shadow::Marks;
use super::unread::Unread;
use super::{AtExit, BegunLayout, Tracer};
use crate::actors::lane::{Dropped, LaneMessage, PagesAtExit};
use crate::event::{Event, Follow, MapKind, SiteId, SpaceId, prot_string};
use crate::kernel::procfs;
use crate::kernel::ptrace::Resume;
use crate::kernel::syscall::{self, DiscardAdvice, LayoutSyscall, SeccompEntry, SyscallReturn};
use crate::model::remap::Remap;

/// What a layout syscall's exit report says beyond its lines.
#[derive(Default)]
pub(super) struct ExitReport {
    /// It returned an error.
    pub(super) failed: bool,
    /// It returned an error after it may have acted half way.
    pub(super) partly_done: bool,
    /// The ranges its lines changed.
    pub(super) changed: RangeSet<u64>,
    /// Ranges whose pages are read again at the exit, since a fill the lane could not order can
    /// have landed there: the part of an mremap's new range beyond the old length, and the
    /// source an `MREMAP_DONTUNMAP` move leaves behind.
    pub(super) read_again: RangeSet<u64>,
    /// The thread was killed out of this exit stop and already sits at its `PTRACE_EVENT_EXIT`
    /// stop: the syscall stays begun for that stop, and the thread is not resumed (that would
    /// resume it out of the exit stop unseen).
    pub(super) gone: bool,
}

/// Who made a change, in which space, and from where: the call stack its lines name
/// (`--stacks`, once the syscall is known to have succeeded).
#[derive(Clone, Copy)]
pub(super) struct By {
    pub(super) pid: i32,
    pub(super) tid: i32,
    pub(super) space: SpaceId,
    pub(super) site: Option<SiteId>,
}

impl Tracer {
    pub(super) fn on_seccomp_stop(&mut self, tid: i32) {
        if self.begun_at_entry(tid) {
            return;
        }
        // A new syscall: whatever waited for the last one's exit stop is over.
        if let Some(t) = self.threads.get_mut(&tid) {
            t.syscalls.next_syscall();
        }
        let stopped = match syscall::seccomp_entry(tid) {
            Ok(stopped) => stopped,
            Err(e) => {
                // ESRCH: it died; its end is still to be reported.
                tracing::debug!(tid, "PTRACE_GET_SYSCALL_INFO at a seccomp stop: {e}");
                None
            }
        };
        if let Some(stopped) = stopped
            && self.handle_other_stop(tid, stopped)
        {
            return;
        }
        self.begin_layout_syscall(tid, stopped);
    }

    /// A layout syscall about to run (at its seccomp stop, or its entry stop: notif.rs): begun,
    /// then run to its exit stop.
    pub(super) fn begin_layout_syscall(&mut self, tid: i32, stopped: Option<SeccompEntry>) {
        if stopped.is_some() {
            // A fork child that goes on without an exec: a whole ring of fault records.
            self.grow_ring(tid);
        }
        let entry = stopped.map(|s| self.decode(tid, s));
        // Held, stopped, until the threads woken in its reach have run (woken.rs).
        if let Some(call) = entry
            && self.hold_for_woken(tid, call)
        {
            return;
        }
        self.begin_decoded(tid, entry);
    }

    /// `begin_layout_syscall` once its syscall is decoded, and let go if it was held.
    pub(super) fn begin_decoded(&mut self, tid: i32, entry: Option<LayoutSyscall>) {
        let unregistered = entry.and_then(|call| match call {
            LayoutSyscall::UffdRegister { start, len } => {
                self.give_up_range(tid, start..start.saturating_add(len));
                None
            }
            call => self.unregister_source(tid, call),
        });
        let mut unread = None;
        if let Some(call) = entry {
            // Ranges followed by scans: those it turns to scans, and pages it may release.
            self.scans_instead(tid, call);
            unread = self.scan_before(tid, &call);
        }
        if let Some(thread) = self.threads.get_mut(&tid) {
            thread.syscalls.begin_layout(entry, unregistered, unread);
        }
        // The lane holds back faults behind a layout change until the syscalls begun before it
        // have ended (docs/ordering.md); a space with no userfaultfd has no fault to hold.
        if let Some(call) = entry
            && let Some((_, id)) = self.space_of(tid)
            && let Some(space) = self.spaces.get(&id)
            && space.uffd().is_some()
        {
            space.lane.send(LaneMessage::Begun { tid, call });
            if let Some(tail) = call.grown_tail() {
                // A mapping grown in place keeps its registration: a racing touch of the new
                // tail faults through the lane before this mremap is reported, and must wait.
                space.lane.send(LaneMessage::Fence { tid, range: tail });
            }
            if let Some(range) = call.drops_unannounced() {
                // A guard region zaps with no event to make it wait for the lane: a fill of
                // another thread's fault could land before the zap and be stamped after the
                // exit read, or the reverse (R4). Fills there wait for this report, and every
                // fill the lane began before this is done before the syscall runs.
                space.lane.send(LaneMessage::Fence { tid, range });
                self.quiesce_lane(id);
            }
        }
        // Run the syscall and stop again at its exit.
        self.go(tid, Resume::Syscall);
    }

    /// A syscall's exit stop: reported now, or held until a release it must follow is reported
    /// (docs/ordering.md, case 1).
    pub(super) fn on_syscall_exit_stop(&mut self, tid: i32) {
        if let Some(t) = self.threads.get_mut(&tid) {
            // At every syscall (notif.rs): the next entry begins nothing yet.
            t.syscalls.stops.take_begun_at_entry();
        }
        if let Some(reclaim) = self
            .threads
            .get_mut(&tid)
            .and_then(|t| t.syscalls.take_reclaim())
        {
            return self.after_ptrace_call(tid, reclaim);
        }
        if let Some(saved) = self
            .threads
            .get_mut(&tid)
            .and_then(|t| t.syscalls.take_clone_flags())
        {
            if let Err(e) = syscall::restore_clone_args_flags(tid, saved) {
                tracing::debug!(tid, "putting clone3's flags back: {e}");
            }
            return self.go(tid, Resume::Cont(None));
        }
        if self.on_set_name_exit(tid) {
            return;
        }
        if let Some(releaser) = self.must_wait_for(tid) {
            self.defer(tid, releaser);
            return;
        }
        if self.on_syscall_exit(tid) {
            self.go(tid, Resume::Cont(None));
        }
    }

    /// Reports a layout syscall's exit; false if the thread is no longer at that stop and must
    /// not be resumed (`ExitReport::gone`).
    fn on_syscall_exit(&mut self, tid: i32) -> bool {
        let Some(BegunLayout {
            call,
            raced,
            unregistered,
            unread,
        }) = self
            .threads
            .get_mut(&tid)
            .and_then(|t| t.syscalls.take_layout())
        else {
            return true;
        };
        let Some((pid, space)) = self.space_of(tid) else {
            return true;
        };
        let by = By {
            pid,
            tid,
            space,
            site: None,
        };
        let ExitReport {
            failed,
            partly_done,
            changed,
            mut read_again,
            gone,
        } = {
            // A release another's report raced is described again, which forgets its records.
            let unread = unread.filter(|_| raced.is_empty());
            self.report_syscall_exit(by, call, unregistered.is_some(), unread)
        };
        if gone {
            return false;
        }
        if let Some(source) = unregistered
            && failed
        {
            // The source is followed again, and its pages read again (another thread's touch of
            // it meanwhile was the kernel's own). A move of several mappings can fail after the
            // first ones moved: its target is read again too.
            self.register_again(space, source.clone());
            read_again.insert(source);
            if let LayoutSyscall::Mremap {
                new_addr, new_len, ..
            } = call
                && call.moves_only()
            {
                read_again.insert(new_addr..new_addr.saturating_add(new_len));
            }
        }
        // Begun syscalls of other threads that may have acted on what this one reported: which
        // came first is unknown, so each will describe the range again once it is reported.
        self.note_races(tid, space, &changed);
        let mut again = RangeSet::new();
        if partly_done {
            // An error return says nothing of what was done before the error (an mremap that
            // ran out of memory half way, a MAP_FIXED that unmapped and then failed). An
            // argument the kernel refused up front changed nothing: no line.
            again.extend(call.reach());
        }
        if !raced.is_empty() {
            again.extend(raced);
            again.extend(changed);
        }
        // A grown tail is registered the moment it exists, and no event says so: a racing touch
        // can be resolved there before this report, which replays the tail as not resident. The
        // same goes for a DONTUNMAP source. Their pages are read as they are at this exit (R3).
        again.extend(read_again);
        if !again.is_empty() {
            self.describe_again(tid, space, again);
        }
        if let Some(s) = self.spaces.get(&space)
            && s.uffd().is_some()
        {
            s.lane.send(LaneMessage::Ended { tid });
        }
        true
    }

    /// A thread killed out of its exit stop before it was read: its syscall stays begun, so
    /// that its exit stop (or its death) describes the space again (docs/ordering.md, R7).
    fn keep_begun(&mut self, tid: i32, call: LayoutSyscall) {
        if let Some(t) = self.threads.get_mut(&tid) {
            t.syscalls.at_exit = AtExit::Layout(BegunLayout::new(call, None));
        }
    }

    /// Reports what a layout syscall did, and what it changed, as ranges. `unregistered`: its
    /// source was given back to the kernel's faults for its duration (escapes.rs).
    fn report_syscall_exit(
        &mut self,
        by: By,
        call: LayoutSyscall,
        unregistered: bool,
        unread: Option<Unread>,
    ) -> ExitReport {
        let nothing = ExitReport::default();
        let ret = match syscall::exit_value(by.tid) {
            Ok(Some(ret)) => ret,
            // Killed out of its exit stop (SIGKILL wakes a stopped tracee), it already sits at
            // PTRACE_EVENT_EXIT, which waitpid has yet to report, with the mm whole: the syscall
            // stays begun, and that stop describes the space again (on_exit_stop). Resumed
            // here, it would leave that stop unseen, and what the kernel did would be lost.
            Ok(None) => {
                self.keep_begun(by.tid, call);
                return ExitReport {
                    gone: true,
                    ..nothing
                };
            }
            Err(e) => {
                tracing::debug!(
                    tid = by.tid,
                    "PTRACE_GET_SYSCALL_INFO at a syscall exit: {e}"
                );
                // Killed out of its exit stop before it was read (SIGKILL, another thread's
                // exit_group): the syscall stays begun, so that its exit stop describes the
                // space again, and what the kernel did is not lost.
                if e.raw_os_error() == Some(libc::ESRCH) {
                    self.keep_begun(by.tid, call);
                }
                return nothing;
            }
        };
        // madvise(MADV_DONTNEED) over a hole drops the mapped pages, then returns ENOMEM: the
        // lane's reconciliation finds which pages went.
        let partial =
            matches!(call, LayoutSyscall::Madvise { .. }) && ret.value == -(libc::ENOMEM as i64);
        if !ret.is_error || partial || call.may_have_acted_on_error(-ret.value) {
            self.forget_touch_samples(by.space, call, ret.value as u64);
        }
        if ret.is_error && !partial {
            if call.may_have_acted_on_error(-ret.value) {
                self.code_may_have_changed(by.space, call);
            }
            return ExitReport {
                failed: true,
                partly_done: call.may_have_acted_on_error(-ret.value),
                ..nothing
            };
        }
        let SyscallReturn { value, .. } = ret;
        let rval = value as u64;
        // Its lines name the stack the thread has now.
        let by = By {
            site: self.stack_of(by, call, rval),
            ..by
        };
        let mut changed = RangeSet::new();
        let mut read_again = RangeSet::new();
        let mut add = |r: Range<u64>| {
            if !r.is_empty() {
                changed.insert(r);
            }
        };
        match call {
            LayoutSyscall::Mmap {
                len,
                prot,
                flags,
                fd,
                ..
            } => {
                let range = rval..rval.saturating_add(len);
                add(range.clone());
                // Placed over a mapping (`MAP_FIXED`): its pages are dropped first.
                self.send_unread(by.space, unread, &range);
                self.on_mmap(by, range, prot, flags, fd);
            }
            LayoutSyscall::Munmap { addr, len } => {
                let range = addr..addr.saturating_add(len);
                add(range.clone());
                self.send_unread(by.space, unread, &range);
                if let Some(s) = self.spaces.get_mut(&by.space) {
                    s.shadow.forget(range.clone());
                }
                self.observed(
                    by.space,
                    Event::Unmap {
                        pid: by.pid,
                        tid: by.tid,
                        space: by.space,
                        start: range.start,
                        end: range.end,
                        cause: None,
                        site: by.site,
                    },
                );
            }
            LayoutSyscall::Mremap {
                old_len: 0,
                new_len,
                ..
            } => {
                // old_size 0: a second mapping of shared memory; nothing moved.
                add(rval..rval.saturating_add(new_len));
                self.on_new_mapping_of(by, rval);
            }
            LayoutSyscall::Mremap {
                old_addr,
                old_len,
                new_len,
                flags,
                ..
            } => {
                add(old_addr..old_addr.saturating_add(old_len));
                add(rval..rval.saturating_add(new_len));
                if unregistered {
                    // The kernel's own faults filled it during the syscall: all of it is read.
                    read_again.insert(rval..rval.saturating_add(new_len));
                } else if new_len > old_len {
                    read_again.insert(rval.saturating_add(old_len)..rval.saturating_add(new_len));
                }
                let dontunmap = flags & libc::MREMAP_DONTUNMAP != 0;
                if dontunmap {
                    // The source stays mapped and registered, empty. A fill of it can complete
                    // after the page tables moved and before the kernel raises mmap_changing
                    // for the REMAP event, which comes after: such a page is written before the
                    // `remap` line, which replays the source as empty (docs/ordering.md, R6b).
                    read_again.insert(old_addr..old_addr.saturating_add(old_len));
                }
                let old = old_addr..old_addr.saturating_add(old_len);
                let new = rval..rval.saturating_add(new_len);
                if let Some(s) = self.spaces.get_mut(&by.space) {
                    s.shadow.moved(&Remap::new(old, new.clone()), dontunmap);
                }
                // The moved or grown mapping keeps its registration (EVENT_REMAP); this only
                // matters where the kernel made a new VMA, and fails harmlessly elsewhere.
                self.register_again(by.space, new);
                self.observed(
                    by.space,
                    Event::Remap {
                        pid: by.pid,
                        tid: by.tid,
                        space: by.space,
                        old_start: old_addr,
                        old_end: old_addr.saturating_add(old_len),
                        new_start: rval,
                        new_end: rval.saturating_add(new_len),
                        dontunmap,
                        site: by.site,
                    },
                );
            }
            LayoutSyscall::Brk { .. } => {
                // A shrink drops the heap's pages above the new break.
                let heap_top = self.spaces.get(&by.space).map_or(0, |s| s.brk);
                let released = self.page_align(rval)..self.page_align(heap_top);
                self.send_unread(by.space, unread, &released);
                self.on_brk(by, rval)
            }
            LayoutSyscall::Madvise {
                addr,
                len,
                discard: Some(advice),
                ..
            } => {
                let range = addr..addr.saturating_add(len);
                add(range.clone());
                self.on_discard(by, range.clone(), advice);
                if advice == DiscardAdvice::PageOut && !range.is_empty() {
                    // What it wrote to swap is known now, exactly (a length of 0 wrote none).
                    let range: RangeSet<u64> = std::iter::once(range).collect();
                    self.look_for_evictions(by.pid, by.space, &range, Running::OthersMayRun);
                }
            }
            LayoutSyscall::Madvise {
                addr,
                len,
                lazy_free: true,
                ..
            } => self.on_lazy_free(by, addr..addr.saturating_add(len)),
            LayoutSyscall::Mprotect {
                addr,
                len,
                prot,
                keyed,
            } => {
                let range = protected_range(by.pid, addr..addr.saturating_add(len), prot);
                if keyed {
                    // The key stays with the mapping through later plain mprotects.
                    self.note_may_refuse(by.space, range.clone());
                }
                let writable = prot & libc::PROT_WRITE as u64 != 0;
                self.note_protection(by.space, range.clone(), writable);
                self.observed(
                    by.space,
                    Event::Protect {
                        pid: by.pid,
                        tid: by.tid,
                        space: by.space,
                        start: range.start,
                        end: range.end,
                        prot: prot_string(prot),
                    },
                );
            }
            LayoutSyscall::UffdRegister { start, len } => {
                // The program's own userfaultfd has it now: described again (untracked where
                // ours had it; followed by scans, its faults held by the program's handler).
                let range = start..start.saturating_add(len);
                if !range.is_empty() {
                    self.note_may_refuse(by.space, range.clone());
                    read_again.insert(range);
                }
            }
            LayoutSyscall::UffdMove { .. } => {
                // Pages left the source (and came to a range the program's userfaultfd has),
                // with no event: both described again.
                read_again.extend(call.reach());
            }
            LayoutSyscall::Madvise { discard: None, .. } | LayoutSyscall::Other { .. } => {}
        }
        ExitReport {
            changed,
            read_again,
            ..nothing
        }
    }

    fn on_mmap(&mut self, by: By, range: Range<u64>, prot: u64, flags: i32, fd: i32) {
        let anon = flags & libc::MAP_ANONYMOUS != 0;
        // The mapping type is the low two bits, compared whole: MAP_SHARED_VALIDATE (3) shares
        // a bit with MAP_PRIVATE (2).
        let map_type = flags & libc::MAP_SHARED_VALIDATE;
        let shared = map_type == libc::MAP_SHARED || map_type == libc::MAP_SHARED_VALIDATE;
        let kind = match (anon, shared) {
            (true, false) if flags & (libc::MAP_STACK | libc::MAP_GROWSDOWN) != 0 => MapKind::Stack,
            (true, false) => MapKind::Anon,
            (true, true) => MapKind::Shmem,
            (false, _) => MapKind::File,
        };
        let path = (!anon).then(|| procfs::fd_path(by.pid, fd)).flatten();
        let kind = match (&kind, &path) {
            _ if flags & libc::MAP_HUGETLB != 0 => MapKind::Hugetlb,
            (MapKind::File, Some(p))
                if shared && (p.starts_with("/memfd:") || p.starts_with("/dev/shm/")) =>
            {
                MapKind::Shmem
            }
            _ => kind,
        };
        let trackable = anon && !shared && flags & libc::MAP_HUGETLB == 0;
        let followed = self
            .spaces
            .get(&by.space)
            .is_some_and(|s| s.uffd().is_some());
        let grows_down = flags & libc::MAP_GROWSDOWN != 0;
        if let Some(s) = self.spaces.get_mut(&by.space) {
            // What was mapped there before (MAP_FIXED) is gone, with its advice.
            s.shadow.forget(range.clone());
        }
        if trackable
            && followed
            && let Some(space) = self.spaces.get(&by.space)
        {
            // Once registered, a touch by a thread racing this report faults through the lane:
            // it must wait for the report (docs/ordering.md, the fences).
            space.lane.send(LaneMessage::Fence {
                tid: by.tid,
                range: range.clone(),
            });
        }
        let follow = if trackable {
            self.follow(by.space, by.pid, range.clone(), range.clone(), grows_down)
        } else {
            None
        };
        let at = MapAt {
            cause: None,
            site: by.site,
            pid: by.pid,
            tid: by.tid,
            space: by.space,
            range: range.clone(),
        };
        let mapping = NewMapping {
            prot: prot_string(prot),
            kind,
            path,
            follow,
        };
        let tracked = self.send_map(at, mapping);
        if grows_down
            && tracked
            && let Some(space) = self.spaces.get(&by.space)
            && !space.scans_only()
        {
            // It grows through faults below it, as the main stack does, within the stack limit.
            space.lane.send(LaneMessage::Stack {
                pid: by.pid,
                range,
                limit: procfs::stack_limit(by.pid).unwrap_or(1 << 40),
            });
        }
    }

    /// A mapping the syscall's arguments do not describe well enough: as `/proc/PID/maps` says.
    fn on_new_mapping_of(&mut self, by: By, addr: u64) {
        let Some(entry) = procfs::read_maps(by.pid)
            .ok()
            .and_then(|maps| maps.into_iter().find(|m| m.start <= addr && addr < m.end))
        else {
            return;
        };
        let at = MapAt {
            cause: None,
            site: by.site,
            pid: by.pid,
            tid: by.tid,
            space: by.space,
            range: entry.start..entry.end,
        };
        // Only shared memory can be mapped again this way (the kernel refuses old_size 0 for a
        // private mapping), so this never registers anything.
        self.send_maps_entry(at, &entry);
    }

    fn on_brk(&mut self, by: By, new_brk: u64) {
        let Some(space) = self.spaces.get_mut(&by.space) else {
            return;
        };
        let old_brk = std::mem::replace(&mut space.brk, new_brk);
        let (old, new) = (self.page_align(old_brk), self.page_align(new_brk));
        if old == new {
            return;
        }
        let Some(space) = self.spaces.get_mut(&by.space) else {
            return;
        };
        if new > old && space.uffd().is_some() {
            space.lane.send(LaneMessage::Fence {
                tid: by.tid,
                range: old..new,
            });
        }
        let shrunk_scanned = new < old && space.shadow.overlaps(Marks::SCANNED, &(new..old));
        if new < old {
            space.shadow.forget(new..old);
        }
        let follow = if new > old {
            self.follow(by.space, by.pid, old..new, old..new, false)
        } else {
            None
        };
        // Another thread can touch the new heap before it was registered above: the lane reads
        // which pages are already there.
        let at_exit =
            follow.and_then(|f| self.present_in_followed(f, by.pid, by.tid, by.space, old..new));
        let Some(space) = self.spaces.get_mut(&by.space) else {
            return;
        };
        if new > old {
            let present = at_exit.as_ref().map_or(&[][..], |a| &a.present[..]);
            space.shadow.described(old..new, at_exit.is_some(), present);
        }
        let scanned = shrunk_scanned || follow == Some(Follow::Scans);
        let event = Event::Brk {
            pid: by.pid,
            tid: by.tid,
            space: by.space,
            old,
            new,
            // A shrinking heap stays as tracked as it was.
            tracked: at_exit.is_some() || (new < old && space.follows_pages()),
            follow: if scanned {
                Follow::Scans
            } else {
                Follow::Faults
            },
            site: by.site,
        };
        space.lane.mapped(event, at_exit);
        if new > old {
            // The heap is read and write.
            self.note_protection(by.space, old..new, true);
        }
    }

    /// `madvise` dropped pages: the lane finds which, from the pages absent now. If they cannot
    /// be read, the range is described again, untracked: its pages are unknown, never "all
    /// dropped" (the warning says so).
    fn on_discard(&mut self, by: By, range: Range<u64>, advice: DiscardAdvice) {
        let at = Instant::now();
        let Some(space) = self.spaces.get(&by.space) else {
            return;
        };
        let at_exit = match space.pagemap {
            // Nothing is tracked in such a space: the discard only concerns untracked ranges.
            None => PagesAtExit {
                read_at: at,
                present: Vec::new(),
                stopped: Some(by.tid),
            },
            Some(_) => match self.present_at(by.pid, by.tid, by.space, range.clone()) {
                Some(pages) => {
                    if let Some(space) = self.spaces.get_mut(&by.space) {
                        space.shadow.discarded(range.clone(), &pages.present);
                    }
                    pages
                }
                None => {
                    let mut unknown = RangeSet::new();
                    unknown.insert(range);
                    return self.describe_again(by.tid, by.space, unknown);
                }
            },
        };
        if advice == DiscardAdvice::GuardInstall {
            // A fault there raises SIGSEGV from now on: its record made no page.
            self.note_may_refuse(by.space, range.clone());
        }
        if let Some(space) = self.spaces.get(&by.space) {
            space.lane.send(LaneMessage::Discard {
                pid: by.pid,
                tid: by.tid,
                range,
                advice: Dropped::Advice(advice_name(advice)),
                site: by.site,
                at,
                at_exit,
            });
        }
    }
}

/// What a successful `mprotect` changed. With `PROT_GROWSDOWN` (on a mapping that grows down,
/// or the kernel refuses it), the kernel starts at the start of the first mapping in the range,
/// whatever the start passed (mm/mprotect.c): that mapping is read at the exit, where it may
/// have merged with a neighbour below, which then had this protection already. `PROT_GROWSUP`
/// always fails on x86_64 (no `VM_GROWSUP`).
fn protected_range(pid: i32, range: Range<u64>, prot: u64) -> Range<u64> {
    if prot & libc::PROT_GROWSDOWN as u64 == 0 {
        return range;
    }
    let first = procfs::read_maps(pid).ok().and_then(|maps| {
        maps.into_iter()
            .find(|m| m.end > range.start && m.start < range.end)
    });
    match first {
        Some(entry) => entry.start..range.end,
        None => range,
    }
}

/// The stream's name for an advice that drops pages at once.
fn advice_name(advice: DiscardAdvice) -> &'static str {
    match advice {
        DiscardAdvice::DontNeed => "dontneed",
        DiscardAdvice::Remove => "remove",
        DiscardAdvice::DontNeedLocked => "dontneed_locked",
        DiscardAdvice::PageOut => "pageout",
        DiscardAdvice::GuardInstall => "guard_install",
    }
}
