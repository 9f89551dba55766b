//! Stacks of first touches (`--touch-stacks N`): a software `page-faults` perf event per thread,
//! sampling every Nth fault with the fault's address, the thread's user registers and a copy of
//! its user stack, taken by the kernel where the fault begins, before userfaultfd puts the thread
//! to sleep. The lane that resolves a fault finds its sample in the thread's buffer by address.
//! perf-event2 holds the `perf_event_open` and ring-buffer plumbing (and its `unsafe`).

use std::io;

use perf_event::data::Record;
use perf_event::events::Software;
use perf_event::{Builder, SampleFlag, Sampler};

use super::stack::StartRegisters;

/// Bytes of user stack a sample copies: enough for the frames between a touch and `main` in C
/// and Rust, small enough that a buffer holds several.
const STACK_BYTES: u32 = 8 << 10;
/// A thread's ring buffer: a faulting thread sleeps until its fault is read, so few samples wait.
const BUFFER_BYTES: usize = 128 << 10;
/// `PERF_REG_X86_BP`, `_SP`, `_IP`: a sample's registers come in this order.
const REGS_BP_SP_IP: u64 = (1 << 6) | (1 << 7) | (1 << 8);

/// One thread's sampler.
pub struct TouchSampler {
    sampler: Sampler,
}

/// A sampled fault: where it was, and the thread's registers and stack then.
pub struct TouchSample {
    pub addr: u64,
    pub regs: StartRegisters,
    /// The stack from `regs.sp` up.
    pub stack: Vec<u8>,
}

impl TouchSampler {
    /// Samples every `period`th page fault of thread `tid` from now on.
    pub fn open(tid: i32, period: u64) -> io::Result<Self> {
        let counter = Builder::new(Software::PAGE_FAULTS)
            .observe_pid(tid)
            .any_cpu()
            .sample_period(period)
            .sample(SampleFlag::ADDR | SampleFlag::REGS_USER | SampleFlag::STACK_USER)
            .sample_regs_user(REGS_BP_SP_IP)
            .sample_stack_user(STACK_BYTES)
            // A first touch inside a syscall (`read` into a fresh page) is the kernel's fault:
            // its sample still has the user registers at the syscall.
            .exclude_kernel(false)
            .exclude_hv(true)
            .enabled(true)
            .build()?;
        Ok(Self {
            sampler: counter.sampled(BUFFER_BYTES)?,
        })
    }

    /// Drops the samples taken so far.
    pub fn discard(&mut self) {
        while self.sampler.next_record().is_some() {}
    }

    /// The sample of the fault at `page` (page-aligned), if the buffer holds one; the samples of
    /// other faults (of files, copy-on-write, pages no lane follows) are dropped on the way.
    pub fn sample_at(&mut self, page: u64, page_mask: u64) -> Option<TouchSample> {
        let mut found = None;
        while let Some(record) = self.sampler.next_record() {
            let Ok(Record::Sample(sample)) = record.parse_record() else {
                continue;
            };
            let Some(addr) = sample.addr() else { continue };
            if addr & page_mask != page {
                continue;
            }
            let (Some(regs), Some(stack)) = (sample.regs_user(), sample.stack_user()) else {
                continue;
            };
            let [bp, sp, ip] = regs.regs[..] else {
                continue;
            };
            found = Some(TouchSample {
                addr,
                regs: StartRegisters { ip, sp, bp },
                stack: stack.to_vec(),
            });
        }
        found
    }
}
