//! `--faults records`: pages made resident and released between two reads. A release is read
//! at its entry while the other threads run (scans.rs, `scan_before`): a page they fault between
//! that read and the release is never read, but its fault was recorded. For a release under the
//! mmap write lock (an unmap, a mapping or heap placed over, a heap shrink), the pages the read
//! found absent, where a fault would have made a page, go to the lane with the release, which
//! writes those with a record made before the release began (`by` `record_only`), then the
//! release (docs/ordering.md, "Fault records"). Where a record cannot tell what its fault made
//! (a discard runs beside faults; a huge page may have been made; the fault may have failed: no
//! write permission, a protection key, a guard region, the program's own userfaultfd), nothing
//! is written, and the page stays in `unseen`'s count.

use std::ops::Range;
use std::time::Instant;

use rangemap::RangeSet;

use super::Tracer;
use super::shadow::Marks;
use crate::actors::lane::LaneMessage;
use crate::event::SpaceId;
use crate::kernel::ptrace;
use crate::kernel::syscall::LayoutSyscall;
use crate::kernel::thp::ThpPolicy;
use crate::test_hooks::{self, Fault};

/// What a release's entry read found absent where a fault would have made a page, and when the
/// release had not begun yet (its thread was still stopped at its entry).
#[derive(Debug)]
pub(super) struct Unread {
    pages: RangeSet<u64>,
    before: Instant,
}

/// Whether `call` drops the pages it reaches under the mmap write lock, which waits for every
/// fault in progress to complete (a fault begun before it made its page before the drop). Not a
/// discard: `MADV_DONTNEED` runs beside faults, and one begun before it may complete after it
/// (a preempted thread), its page made after the drop; nor a move, which keeps the pages.
fn releases(call: &LayoutSyscall) -> bool {
    match call {
        LayoutSyscall::Munmap { .. } | LayoutSyscall::Mmap { .. } | LayoutSyscall::Brk { .. } => {
            true
        }
        LayoutSyscall::Madvise { .. }
        | LayoutSyscall::Mremap { .. }
        | LayoutSyscall::Mprotect { .. }
        | LayoutSyscall::UffdRegister { .. }
        | LayoutSyscall::UffdMove { .. }
        | LayoutSyscall::Other { .. } => false,
    }
}

impl Tracer {
    /// At a release's entry, right after its read of `changes` (less what another thread's
    /// begun syscall may be changing, which it did not read): the pages there the stream does
    /// not have where a fault would have made one. None outside `--faults records`, under the
    /// `always` huge page policy (any fault may have made a huge page), or when there are none.
    pub(super) fn unread_at_entry(
        &self,
        space: SpaceId,
        call: &LayoutSyscall,
        mut changes: RangeSet<u64>,
    ) -> Option<Unread> {
        let s = self.spaces.get(&space)?;
        if !s.records_at_stops() || !releases(call) || self.config.thp == ThpPolicy::Always {
            return None;
        }
        for begun in self.begun_may_change(space).iter() {
            changes.remove(begun.clone());
        }
        if test_hooks::fails(Fault::SlowRelease, Some(space)) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let pages = self.unread_in(space, &changes);
        (!pages.is_empty()).then(|| Unread {
            pages,
            before: Instant::now(),
        })
    }

    /// The pages of `within` a recorded fault would have made, which the stream does not have
    /// (shadow.rs, `unread`).
    fn unread_in(&self, space: SpaceId, within: &RangeSet<u64>) -> RangeSet<u64> {
        self.spaces.get(&space).map_or_else(RangeSet::new, |s| {
            s.shadow.unread(within, self.config.thp == ThpPolicy::Never)
        })
    }

    /// Before the line of a release of `released` goes to the lane (and before the shadow
    /// forgets it): the pages of `unread` it dropped. Not those the stream has or that may
    /// refuse faults by now (a check or a fork while it ran, an `mprotect` reported since), nor
    /// those another thread's begun syscall may be changing (a release reported since made this
    /// one raced: it has no unread pages).
    pub(super) fn send_unread(
        &self,
        space: SpaceId,
        unread: Option<Unread>,
        released: &Range<u64>,
    ) {
        let (Some(Unread { pages, before }), Some(s)) = (unread, self.spaces.get(&space)) else {
            return;
        };
        // An empty range is no range of a set's (rangemap would give the one around it).
        if released.is_empty() {
            return;
        }
        let reached: RangeSet<u64> = pages
            .overlapping(released)
            .map(|r| r.start.max(released.start)..r.end.min(released.end))
            .filter(|r| !r.is_empty())
            .collect();
        let mut dropped = self.unread_in(space, &reached);
        for begun in self.begun_may_change(space).iter() {
            dropped.remove(begun.clone());
        }
        if !dropped.is_empty() {
            s.lane.send(LaneMessage::Unread {
                pages: dropped,
                before,
            });
        }
    }

    /// A mapping's protection is `writable` or not over `range` from now on (`--faults records`):
    /// only a writable one's recorded faults made pages for sure.
    pub(super) fn note_protection(&mut self, space: SpaceId, range: Range<u64>, writable: bool) {
        let Some(s) = self.spaces.get_mut(&space).filter(|s| s.records_at_stops()) else {
            return;
        };
        if !writable {
            return s.shadow.remove(range, Marks::WRITABLE);
        }
        for tracked in s.shadow.within(Marks::TRACKED, &range) {
            s.shadow.add(tracked, Marks::WRITABLE);
        }
    }

    /// At a SIGSEGV or SIGBUS the kernel raised for `tid`'s access (`--faults records`): the
    /// fault failed, and its record (in the thread's ring before this stop) made no page, for
    /// a read to claim or a release to write. Told to the lane now, long before any later
    /// release of the page (this thread runs again only after this stop).
    pub(super) fn note_refused_access(&self, tid: i32) {
        let Some((_, space)) = self.space_of(tid) else {
            return;
        };
        let Some(s) = self.spaces.get(&space).filter(|s| s.records()) else {
            return;
        };
        match ptrace::refused_access(tid) {
            Ok(Some(addr)) => s.lane.send(LaneMessage::Refused { tid, addr }),
            Ok(None) => {}
            // ESRCH: it died; its records die with it.
            Err(e) => tracing::debug!(tid, "PTRACE_GETSIGINFO at a SIGSEGV or SIGBUS: {e}"),
        }
    }

    /// `range` may refuse or hold faults from now on, whatever its protection, until its
    /// mapping is replaced (`--faults records`): guard markers (a `MADV_GUARD_REMOVE` is not
    /// trusted: the faults before it failed), the program's own userfaultfd, a protection key.
    pub(super) fn note_may_refuse(&mut self, space: SpaceId, range: Range<u64>) {
        if let Some(s) = self.spaces.get_mut(&space).filter(|s| s.records_at_stops()) {
            s.shadow.add(range, Marks::MAY_REFUSE);
        }
    }

    /// `MADV_HUGEPAGE` over `range` (`--faults records`): a fault there may make a huge page.
    pub(super) fn note_huge_advice(&mut self, space: SpaceId, range: Range<u64>) {
        if let Some(s) = self.spaces.get_mut(&space).filter(|s| s.records_at_stops()) {
            s.shadow.add(range, Marks::HUGE_ADVISED);
        }
    }
}
