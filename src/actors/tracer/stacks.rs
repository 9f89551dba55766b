//! `--stacks`: the call stack of a layout syscall, taken at its exit stop while the thread is
//! still stopped (src/stacks/ walks it), and what the syscall tells the stacks about the
//! space's code and, for `--touch-stacks`, about the samples taken so far.

use super::Tracer;
use super::layout::By;
use crate::event::{SiteId, SpaceId};
use crate::kernel::syscall::LayoutSyscall;

impl Tracer {
    /// With `--stacks`: the site of the thread's stack, for a syscall that succeeded (it
    /// returned `rval`) and whose lines name one.
    pub(super) fn stack_of(&mut self, by: By, call: LayoutSyscall, rval: u64) -> Option<SiteId> {
        let brk_moves = self
            .spaces
            .get(&by.space)
            .is_some_and(|s| self.page_align(s.brk) != self.page_align(rval));
        let stacks = self.config.stacks.as_mut()?;
        match call {
            LayoutSyscall::Mmap { prot, .. } => {
                if prot & libc::PROT_EXEC as u64 != 0 {
                    stacks.code_changed(by.space);
                }
            }
            LayoutSyscall::Mremap {
                old_addr, old_len, ..
            } => stacks.moved(by.space, &(old_addr..old_addr.saturating_add(old_len))),
            LayoutSyscall::Mprotect { prot, .. } => {
                if prot & libc::PROT_EXEC as u64 != 0 {
                    stacks.code_changed(by.space);
                }
                return None;
            }
            // A break that stays within its page is no line.
            LayoutSyscall::Brk { .. } => {
                if !brk_moves {
                    return None;
                }
            }
            LayoutSyscall::Munmap { .. }
            | LayoutSyscall::Madvise {
                discard: Some(_), ..
            } => {}
            LayoutSyscall::Madvise { discard: None, .. }
            | LayoutSyscall::UffdRegister { .. }
            | LayoutSyscall::UffdMove { .. }
            | LayoutSyscall::Other { .. } => return None,
        }
        stacks.take(by.tid, by.space)
    }

    /// A syscall that failed may have changed the mappings before it did (an `mprotect` over
    /// a hole changes what comes before the hole, then returns ENOMEM): the stacks read the
    /// space's code again at their next walk that leaves what they know.
    pub(super) fn code_may_have_changed(&mut self, space: SpaceId, call: LayoutSyscall) {
        let Some(stacks) = self.config.stacks.as_mut() else {
            return;
        };
        if matches!(
            call,
            LayoutSyscall::Mmap { .. }
                | LayoutSyscall::Mprotect { .. }
                | LayoutSyscall::Mremap { .. }
        ) {
            stacks.code_changed(space);
        }
    }

    /// `--touch-stacks`: a layout syscall that took effect (`rval` its return value) may have
    /// taken pages of the space away. Its threads' newest samples in that range are dropped: a
    /// page filled again later by a fault the kernel does not sample (`MADV_POPULATE_WRITE`, an
    /// `O_DIRECT` read, `process_vm_writev`) would otherwise find an older sample of that very
    /// page the newest, and take its stack.
    pub(super) fn forget_touch_samples(&self, space: SpaceId, call: LayoutSyscall, rval: u64) {
        let Some((_, samplers)) = &self.config.touch_stacks else {
            return;
        };
        let released = match call {
            LayoutSyscall::Brk { .. } => self.spaces.get(&space).and_then(|s| {
                let (now, before) = (self.page_align(rval), self.page_align(s.brk));
                (now < before).then_some(now..before)
            }),
            call => call.releases(),
        };
        let Some(released) = released else { return };
        let in_space: Vec<i32> = self
            .threads
            .iter()
            .filter(|(_, t)| self.processes.get(&t.pid).and_then(|p| p.space) == Some(space))
            .map(|(&tid, _)| tid)
            .collect();
        samplers.forget_samples(&in_space, &released);
    }
}
