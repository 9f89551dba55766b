//! Fences (docs/ordering.md, R2): which faults must wait for the report of a layout change
//! before they are resolved. Pure bookkeeping: no I/O, nothing async.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use crate::kernel::syscall::LayoutSyscall;
use crate::kernel::uffd::{PageFault, UffdMessage};

/// A range where a layout change is under way whose report has not reached the lane yet: a
/// fault resolved there now could land in the new layout and be written before the change that
/// made it. Such faults are held until every syscall the fence waits for has ended.
#[derive(Debug)]
struct Fence {
    range: Range<u64>,
    waiting: HashSet<i32>,
}

/// The layout syscalls under way in one space, the fences up, and the faults they hold.
#[derive(Debug)]
pub(super) struct Fences {
    /// Threads inside a layout syscall, between its `Begun` and `Ended`, and the syscall.
    begun: HashMap<i32, LayoutSyscall>,
    fences: Vec<Fence>,
    /// Faults read inside a fence, in the order read.
    held: Vec<PageFault>,
}

impl Fences {
    pub(super) fn new() -> Self {
        Self {
            begun: HashMap::new(),
            fences: Vec::new(),
            held: Vec::new(),
        }
    }

    /// `tid` entered a layout syscall (it is stopped at its seccomp stop).
    pub(super) fn begin(&mut self, tid: i32, call: LayoutSyscall) {
        self.begun.insert(tid, call);
    }

    /// A placement fence from the tracer: faults in `range` wait for `tid`'s report. Ignored
    /// unless `tid` is inside a syscall (its report is then already in).
    pub(super) fn fence(&mut self, tid: i32, range: Range<u64>) {
        if self.begun.contains_key(&tid) {
            self.fences.push(Fence {
                range,
                waiting: HashSet::from([tid]),
            });
        }
    }

    /// An event fence: a layout event read from the descriptor fences its ranges until every
    /// syscall begun now has ended (its own among them: its `Begun` was sent before it ran).
    /// Whether `message` was a layout event.
    pub(super) fn event(&mut self, message: &UffdMessage) -> bool {
        let ranges = match *message {
            UffdMessage::Fault(_) | UffdMessage::Fork => return false,
            UffdMessage::Unmap { start, end } | UffdMessage::Remove { start, end } => {
                [Some(start..end), None]
            }
            UffdMessage::Remap { from, to, len } => {
                // The event gives the old length; a move that grows has a longer new range.
                let new_len = self
                    .begun
                    .values()
                    .find_map(|call| match *call {
                        LayoutSyscall::Mremap {
                            old_addr, new_len, ..
                        } if old_addr == from => Some(new_len.max(len)),
                        _ => None,
                    })
                    .unwrap_or(len);
                [
                    Some(from..from.saturating_add(len)),
                    Some(to..to.saturating_add(new_len)),
                ]
            }
        };
        // With no syscall under way, its report is already forwarded: nothing to wait for.
        if self.begun.is_empty() {
            return true;
        }
        for range in ranges.into_iter().flatten() {
            self.fences.push(Fence {
                range,
                waiting: self.begun.keys().copied().collect(),
            });
        }
        true
    }

    /// A fault read from the descriptor: appends to `ready` what may be resolved now, in order
    /// (this fault, unless a fence holds it, after any it let go).
    pub(super) fn admit(&mut self, fault: PageFault, ready: &mut Vec<PageFault>) {
        // A thread that faults inside its own layout syscall (MADV_POPULATE_*) did not cause
        // any fence's event: the syscall that did is blocked until its event is read, then
        // touches no registered page. Waiting for it would wait for this very fault.
        if self.begun.contains_key(&fault.tid) && self.unfence(fault.tid) {
            self.let_go(ready);
        }
        if self.fences.iter().any(|f| f.range.contains(&fault.addr)) {
            self.held.push(fault);
            return;
        }
        ready.push(fault);
    }

    /// `tid`'s syscall has been reported (or `tid` is gone): fences that waited only for it come
    /// down, and what they held is appended to `ready`, in the order read.
    pub(super) fn end(&mut self, tid: i32, ready: &mut Vec<PageFault>) {
        if self.begun.remove(&tid).is_none() {
            return;
        }
        if self.unfence(tid) {
            self.let_go(ready);
        }
    }

    /// Every held fault goes through `admit` again, in order: a fence still up holds it again.
    fn let_go(&mut self, ready: &mut Vec<PageFault>) {
        for fault in std::mem::take(&mut self.held) {
            self.admit(fault, ready);
        }
    }

    /// Stops the fences waiting for `tid`; whether any came down.
    fn unfence(&mut self, tid: i32) -> bool {
        let before = self.fences.len();
        for fence in &mut self.fences {
            fence.waiting.remove(&tid);
        }
        self.fences.retain(|f| !f.waiting.is_empty());
        self.fences.len() < before
    }

    /// Whether faults are held (an `Ended` may let them go).
    pub(super) fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// The syscall `tid` is inside, with its arguments.
    #[cfg(test)]
    fn begun(&self, tid: i32) -> Option<&LayoutSyscall> {
        self.begun.get(&tid)
    }

    /// Forgets the held faults (their threads were woken some other way: the descriptor was
    /// released); how many there were.
    pub(super) fn forget_held(&mut self) -> usize {
        std::mem::take(&mut self.held).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: u64 = 4096;

    fn fault(tid: i32, addr: u64) -> PageFault {
        PageFault {
            addr,
            write: true,
            tid,
        }
    }

    fn admit(fences: &mut Fences, f: PageFault) -> Vec<PageFault> {
        let mut ready = Vec::new();
        fences.admit(f, &mut ready);
        ready
    }

    fn end(fences: &mut Fences, tid: i32) -> Vec<PageFault> {
        let mut ready = Vec::new();
        fences.end(tid, &mut ready);
        ready
    }

    #[test]
    fn a_fault_outside_every_fence_is_resolved_at_once() {
        let mut fences = Fences::new();
        fences.begin(1, LayoutSyscall::decode(libc::SYS_munmap, [0; 6], PAGE));
        fences.event(&UffdMessage::Unmap {
            start: 0x10000,
            end: 0x20000,
        });
        assert_eq!(admit(&mut fences, fault(2, 0x20000)), [fault(2, 0x20000)]);
        assert!(!fences.holding());
    }

    #[test]
    fn a_fault_in_an_event_fence_waits_for_every_syscall_begun_then() {
        let mut fences = Fences::new();
        fences.begin(
            1,
            LayoutSyscall::decode(libc::SYS_munmap, [0x10000, 0x10000, 0, 0, 0, 0], PAGE),
        );
        fences.begin(2, LayoutSyscall::decode(libc::SYS_mmap, [0; 6], PAGE));
        assert!(fences.event(&UffdMessage::Unmap {
            start: 0x10000,
            end: 0x20000,
        }));
        // Begun after the event: the fence does not wait for it.
        fences.begin(4, LayoutSyscall::decode(libc::SYS_brk, [0; 6], PAGE));
        let (a, b) = (fault(3, 0x10000), fault(3, 0x1f000));
        assert_eq!(admit(&mut fences, a), []);
        assert_eq!(admit(&mut fences, b), []);
        assert!(fences.holding());
        assert_eq!(end(&mut fences, 4), []);
        assert_eq!(end(&mut fences, 1), []);
        assert!(fences.holding());
        // The last one it waits for: the held faults go, in the order read.
        assert_eq!(end(&mut fences, 2), [a, b]);
        assert!(!fences.holding());
        // Nothing fenced any more.
        assert_eq!(admit(&mut fences, a), [a]);
    }

    #[test]
    fn an_event_with_no_syscall_under_way_fences_nothing() {
        let mut fences = Fences::new();
        assert!(fences.event(&UffdMessage::Remove {
            start: 0x10000,
            end: 0x20000,
        }));
        assert!(!fences.event(&UffdMessage::Fault(fault(1, 0x10000))));
        assert_eq!(admit(&mut fences, fault(1, 0x10000)), [fault(1, 0x10000)]);
    }

    #[test]
    fn a_remap_fences_the_source_and_the_destination_at_its_new_length() {
        let mut fences = Fences::new();
        // mremap(0x10000, 2 pages, 5 pages - 1 byte (rounded up), MAYMOVE)
        fences.begin(
            1,
            LayoutSyscall::decode(
                libc::SYS_mremap,
                [0x10000, 2 * PAGE, 5 * PAGE - 1, 1, 0, 0],
                PAGE,
            ),
        );
        fences.event(&UffdMessage::Remap {
            from: 0x10000,
            to: 0x80000,
            len: 2 * PAGE,
        });
        assert_eq!(admit(&mut fences, fault(2, 0x11000)), []);
        assert_eq!(admit(&mut fences, fault(2, 0x80000 + 4 * PAGE)), []);
        let past = fault(2, 0x80000 + 5 * PAGE);
        assert_eq!(admit(&mut fences, past), [past]);
        assert_eq!(
            end(&mut fences, 1),
            [fault(2, 0x11000), fault(2, 0x80000 + 4 * PAGE)]
        );
    }

    #[test]
    fn a_placement_fence_holds_until_its_syscall_ends() {
        let mut fences = Fences::new();
        fences.begin(1, LayoutSyscall::decode(libc::SYS_mmap, [0; 6], PAGE));
        fences.fence(1, 0x10000..0x20000);
        assert_eq!(admit(&mut fences, fault(2, 0x10000)), []);
        assert_eq!(end(&mut fences, 1), [fault(2, 0x10000)]);
        assert_eq!(fences.begun(1), None);
    }

    #[test]
    fn a_fence_for_a_thread_not_in_a_syscall_is_ignored() {
        let mut fences = Fences::new();
        fences.fence(1, 0x10000..0x20000);
        assert_eq!(admit(&mut fences, fault(2, 0x10000)), [fault(2, 0x10000)]);
        // An `Ended` without a `Begun` lets nothing go and does not fail.
        assert_eq!(end(&mut fences, 1), []);
    }

    #[test]
    fn a_thread_faulting_in_its_own_syscall_takes_down_the_fences_waiting_for_it() {
        // MADV_POPULATE_WRITE by thread 1 while thread 2's munmap event fenced the range: the
        // fence waits for both; thread 1's own fault stops it waiting for thread 1.
        let mut fences = Fences::new();
        fences.begin(
            1,
            LayoutSyscall::decode(libc::SYS_madvise, [0x10000, 0x10000, 23, 0, 0, 0], PAGE),
        );
        fences.fence(1, 0x10000..0x20000);
        let other = fault(3, 0x10000);
        assert_eq!(admit(&mut fences, other), []);
        let own = fault(1, 0x11000);
        // The fence came down: the fault held before goes first, then this one.
        assert_eq!(admit(&mut fences, own), [other, own]);
        assert!(!fences.holding());
        // Its syscall is still begun: a later event fence waits for it again.
        assert!(fences.begun(1).is_some());
    }

    #[test]
    fn a_thread_faulting_in_its_own_syscall_still_waits_for_the_others() {
        let mut fences = Fences::new();
        fences.begin(1, LayoutSyscall::decode(libc::SYS_madvise, [0; 6], PAGE));
        fences.begin(2, LayoutSyscall::decode(libc::SYS_munmap, [0; 6], PAGE));
        fences.event(&UffdMessage::Unmap {
            start: 0x10000,
            end: 0x20000,
        });
        let own = fault(1, 0x10000);
        assert_eq!(admit(&mut fences, own), []);
        assert_eq!(end(&mut fences, 2), [own]);
    }

    #[test]
    fn a_fault_let_go_by_one_fence_is_held_again_by_another() {
        let mut fences = Fences::new();
        fences.begin(1, LayoutSyscall::decode(libc::SYS_mmap, [0; 6], PAGE));
        fences.begin(2, LayoutSyscall::decode(libc::SYS_mmap, [0; 6], PAGE));
        fences.fence(1, 0x10000..0x20000);
        fences.fence(2, 0x10000..0x11000);
        let f = fault(3, 0x10000);
        assert_eq!(admit(&mut fences, f), []);
        assert_eq!(end(&mut fences, 1), []);
        assert!(fences.holding());
        assert_eq!(end(&mut fences, 2), [f]);
    }

    #[test]
    fn forgetting_the_held_faults_empties_the_hold() {
        let mut fences = Fences::new();
        fences.begin(1, LayoutSyscall::decode(libc::SYS_mmap, [0; 6], PAGE));
        fences.fence(1, 0x10000..0x20000);
        assert_eq!(admit(&mut fences, fault(2, 0x10000)), []);
        assert_eq!(fences.forget_held(), 1);
        assert!(!fences.holding());
        assert_eq!(end(&mut fences, 1), []);
    }
}
