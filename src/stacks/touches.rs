//! Stacks of first touches (`--touch-stacks N`). The tracer opens a sampler on each thread at
//! its first stop, before it runs (and moves it along when an exec gives the thread the
//! leader's id); the lane that resolves a fault of the thread looks for the fault's sample in
//! the thread's buffer, and walks the stack the kernel copied there. No tracee is stopped and
//! no tracee memory is read: the sample has the stack as it was at the fault.

use std::collections::HashMap;
use std::sync::Mutex;

use super::StackShared;
use super::space::SpaceCode;
use crate::event::SiteId;
pub use crate::kernel::perf::TouchSample;
use crate::kernel::perf::TouchSampler;

/// Every traced thread's sampler, by thread id.
pub struct TouchSamplers {
    period: u64,
    by_thread: Mutex<HashMap<i32, TouchSampler>>,
    /// Whether a failure to open one was said already (once is enough).
    told: std::sync::atomic::AtomicBool,
}

impl TouchSamplers {
    /// Samplers of one fault in `period`.
    pub fn new(period: u64) -> Self {
        Self {
            period,
            by_thread: Mutex::default(),
            told: Default::default(),
        }
    }

    fn threads(&self) -> std::sync::MutexGuard<'_, HashMap<i32, TouchSampler>> {
        self.by_thread.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new thread, stopped before it runs any code of its own.
    pub fn open(&self, tid: i32) {
        match TouchSampler::open(tid, self.period) {
            Ok(sampler) => {
                self.threads().insert(tid, sampler);
            }
            Err(e) => {
                use std::sync::atomic::Ordering;
                if !self.told.swap(true, Ordering::Relaxed) {
                    crate::to_stderr!(
                        "mevi-actors: --touch-stacks: cannot sample the page faults of thread \
                         {tid} (perf_event_open: {e}); its first touches get no stacks"
                    );
                }
            }
        }
    }

    /// An exec gave thread `former` the id `now` (the leader's); the samplers of the other
    /// threads of the process went with them. The faults of the exec itself (the new program's
    /// file pages, the loader's) are dropped: they would fill the buffer before the program's
    /// first touch is sampled.
    pub fn exec(&self, former: i32, now: i32) {
        let mut threads = self.threads();
        if let Some(mut sampler) = threads.remove(&former) {
            sampler.discard();
            threads.insert(now, sampler);
        }
    }

    /// The thread is gone.
    pub fn gone(&self, tid: i32) {
        self.threads().remove(&tid);
    }

    /// The sample of thread `tid`'s fault at `page`, if it was sampled.
    fn sample_at(&self, tid: i32, page: u64, page_mask: u64) -> Option<TouchSample> {
        self.threads().get_mut(&tid)?.sample_at(page, page_mask)
    }
}

/// A lane's taker of its first touches' stacks, with its own view of its space's code.
pub struct TouchStacks {
    shared: StackShared,
    samplers: std::sync::Arc<TouchSamplers>,
    code: Option<SpaceCode>,
}

impl TouchStacks {
    pub fn new(shared: StackShared, samplers: std::sync::Arc<TouchSamplers>) -> Self {
        Self {
            shared,
            samplers,
            code: None,
        }
    }

    /// The sample of thread `tid`'s fault at `page`, taken before the fault is resolved: the
    /// thread then runs on, and its next fault's sample follows in the buffer.
    pub fn sample_of(&self, tid: i32, page: u64) -> Option<TouchSample> {
        let mask = !(self.shared.page_size - 1);
        self.samplers.sample_at(tid, page, mask)
    }

    /// The site of a sampled first touch by thread `tid`.
    pub fn site_of(&mut self, tid: i32, sample: TouchSample) -> Option<SiteId> {
        let code = match &mut self.code {
            Some(code) if !code.stale => code,
            code => code.insert(self.shared.read_code(tid)?),
        };
        let sp = sample.regs.sp;
        let stack = &sample.stack;
        let mut read_stack = |addr: u64| {
            let at = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let word = stack.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_ne_bytes(word.try_into().map_err(|_| ())?))
        };
        let walked = super::walk(code, tid, sample.regs, self.shared.depth, &mut read_stack);
        Some(self.shared.site_of(code, walked))
    }

    /// The space mapped code or made some executable: read its mappings again at the next
    /// stack.
    pub fn code_changed(&mut self) {
        if let Some(code) = &mut self.code {
            code.stale = true;
        }
    }

    /// `range` moved or went: if it held code, read the mappings again at the next stack.
    pub fn moved(&mut self, range: &std::ops::Range<u64>) {
        if let Some(code) = &mut self.code
            && code.has_code_in(range)
        {
            code.stale = true;
        }
    }
}
