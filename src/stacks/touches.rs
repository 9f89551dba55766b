//! Stacks of first touches (`--touch-stacks N`). The tracer opens a sampler on each thread at
//! its first stop, before it runs (and moves it along when an exec gives the thread the
//! leader's id); the lane that resolves a fault of the thread looks for the fault's sample in
//! the thread's buffer, and walks the stack the kernel copied there. No tracee is stopped and
//! no tracee memory is read: the sample has the stack as it was at the fault.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::StackShared;
use super::space::SpaceCode;
use crate::event::SiteId;
use crate::kernel::bpf::OneInN;
use crate::kernel::perf::{FaultsSeen, OneFaultIn, RING_BYTES, SamplerError, Taken, TouchSampler};
use crate::test_hooks::{self, Fault};

/// Every traced thread's sampler, by thread id. The tracer opens and moves them; each lane
/// reads those of its threads. The table's lock is held for a lookup only, a sampler's for
/// one read of its ring.
pub struct TouchSamplers {
    period: u64,
    /// The program that picks faults at random: None when N = 1 or it cannot be loaded (every
    /// Nth fault is sampled then).
    program: Option<OneInN>,
    by_thread: Mutex<HashMap<i32, Arc<Mutex<TouchSampler>>>>,
    /// Kernel-mode faults are left out, since the kernel refused them.
    user_only: AtomicBool,
    told: Mutex<Told>,
}

/// What is wrong with the sampling, said in the stream once for each reason.
struct Told {
    said: HashSet<Refusal>,
    /// Why the program could not be loaded, to be said at the first sampler.
    not_random: Option<String>,
}

/// Why a thread's faults go unsampled, or are sampled less well.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Refusal {
    Paranoid,
    KernelFaults,
    Pinning,
    Descriptors,
    Other,
}

impl TouchSamplers {
    /// Samplers of one fault in `period`.
    pub fn new(period: u64) -> Self {
        let (program, not_random) = match period {
            1 => (None, None),
            n => match OneInN::load(n).and_then(|program| {
                if test_hooks::fails(Fault::Bpf, None) {
                    Err(io::Error::from_raw_os_error(libc::EPERM))
                } else {
                    Ok(program)
                }
            }) {
                Ok(program) => (Some(program), None),
                Err(e) => (
                    None,
                    Some(format!(
                        "--touch-stacks: one page fault in {n} is sampled at a fixed stride \
                         rather than each with a chance of 1 in {n}, so a loop whose faults \
                         repeat in step with it may have all of its first touches sampled or \
                         none (loading the BPF program that draws them: {e}; it needs CAP_BPF \
                         and CAP_PERFMON)"
                    )),
                ),
            },
        };
        Self {
            period,
            program,
            by_thread: Mutex::default(),
            user_only: AtomicBool::new(false),
            told: Mutex::new(Told {
                said: HashSet::new(),
                not_random,
            }),
        }
    }

    fn threads(&self) -> MutexGuard<'_, HashMap<i32, Arc<Mutex<TouchSampler>>>> {
        self.by_thread.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new thread, stopped before it runs any code of its own. What is wrong with its
    /// sampling, for the stream, the first time each reason comes up.
    pub fn open(&self, tid: i32) -> Vec<String> {
        let mut told = self.told.lock().unwrap_or_else(|e| e.into_inner());
        let mut said: Vec<String> = told.not_random.take().into_iter().collect();
        let told = &mut told.said;
        let pick = match &self.program {
            Some(program) => OneFaultIn::Random(program),
            None => OneFaultIn::EveryNth(self.period),
        };
        let seen = if self.user_only.load(Ordering::Relaxed) {
            FaultsSeen::UserOnly
        } else {
            FaultsSeen::All
        };
        let mut opened = if seen == FaultsSeen::All && test_hooks::fails(Fault::PerfKernel, None) {
            Err(SamplerError::Open(io::Error::from_raw_os_error(
                libc::EACCES,
            )))
        } else {
            TouchSampler::open(tid, pick, seen)
        };
        if seen == FaultsSeen::All && matches!(&opened, Err(SamplerError::Open(e)) if denied(e)) {
            opened = TouchSampler::open(tid, pick, FaultsSeen::UserOnly);
            if opened.is_ok() {
                self.user_only.store(true, Ordering::Relaxed);
                said.extend(tell(told, Refusal::KernelFaults, || {
                    format!(
                        "--touch-stacks: first touches made inside system calls (a read into a \
                         fresh page) are not sampled: kernel.perf_event_paranoid is {}, and \
                         sampling kernel-mode faults needs 1 or less, or CAP_PERFMON",
                        paranoid()
                    )
                }));
            }
        }
        // A sampler at or above the ceiling is closed again, and its thread goes without.
        let (fd_ceiling, fd_limit) = crate::kernel::fd_ceiling();
        let (refusal, message) = match opened {
            Ok(sampler) if sampler.as_raw_fd() < fd_ceiling => {
                self.threads().insert(tid, Arc::new(Mutex::new(sampler)));
                return said;
            }
            Ok(_) => (
                Refusal::Descriptors,
                format!(
                    "--touch-stacks: thread {tid} and those after it while descriptors are this \
                     scarce get no touch stacks, to leave {} of the {fd_limit} descriptors \
                     RLIMIT_NOFILE allows to the trace (raise it: ulimit -n)",
                    fd_limit - fd_ceiling
                ),
            ),
            Err(SamplerError::Open(e)) if denied(&e) => (
                Refusal::Paranoid,
                format!(
                    "--touch-stacks: perf_event_open refuses to sample page faults ({e}): \
                     kernel.perf_event_paranoid is {}; it needs 2 or less, or CAP_PERFMON; \
                     first touches get no stacks",
                    paranoid()
                ),
            ),
            Err(SamplerError::Map(e)) if denied(&e) || e.raw_os_error() == Some(libc::ENOMEM) => (
                Refusal::Pinning,
                format!(
                    "--touch-stacks: the {} KiB sample buffer of thread {tid} cannot be pinned \
                     ({e}): threads past kernel.perf_event_mlock_kb ({} KiB per CPU) and \
                     RLIMIT_MEMLOCK get no touch stacks (raise either: ulimit -l)",
                    RING_BYTES >> 10,
                    crate::kernel::procfs::sysctl("kernel.perf_event_mlock_kb")
                        .unwrap_or_else(|| "?".into()),
                ),
            ),
            Err(e) => (
                Refusal::Other,
                format!(
                    "--touch-stacks: cannot sample the page faults of thread {tid} ({e}); its \
                     first touches get no stacks"
                ),
            ),
        };
        said.extend(tell(told, refusal, || message));
        said
    }

    /// An exec gave thread `former` the id `now` (the leader's); the samplers of the other
    /// threads of the process went with them, and so does the old leader's, whose death is
    /// never reported. The faults of the exec itself (the new program's file pages, the
    /// loader's) are dropped.
    pub fn exec(&self, former: i32, now: i32) {
        let moved = {
            let mut threads = self.threads();
            if former != now {
                threads.remove(&now);
            }
            let moved = threads.remove(&former);
            if let Some(sampler) = &moved {
                threads.insert(now, sampler.clone());
            }
            moved
        };
        if let Some(sampler) = moved {
            lock(&sampler).discard();
        }
    }

    /// Pages in `released` went away: the newest samples of threads `tids` there are dropped.
    pub fn forget_samples(&self, tids: &[i32], released: &std::ops::Range<u64>) {
        let samplers: Vec<Arc<Mutex<TouchSampler>>> = {
            let threads = self.threads();
            tids.iter()
                .filter_map(|tid| threads.get(tid).cloned())
                .collect()
        };
        for sampler in samplers {
            lock(&sampler).forget_in(released);
        }
    }

    /// The thread is gone.
    pub fn gone(&self, tid: i32) {
        self.threads().remove(&tid);
    }

    /// Thread `tid`'s newest record, if it has a new one.
    fn take(&self, tid: i32) -> Option<Taken> {
        let sampler = self.threads().get(&tid)?.clone();
        lock(&sampler).take()
    }
}

fn lock(sampler: &Mutex<TouchSampler>) -> MutexGuard<'_, TouchSampler> {
    sampler.lock().unwrap_or_else(|e| e.into_inner())
}

/// `message()`, unless `refusal` was said already.
fn tell(
    told: &mut HashSet<Refusal>,
    refusal: Refusal,
    message: impl FnOnce() -> String,
) -> Option<String> {
    told.insert(refusal).then(message)
}

fn denied(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM))
}

fn paranoid() -> String {
    crate::kernel::procfs::sysctl("kernel.perf_event_paranoid").unwrap_or_else(|| "?".into())
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

    /// Thread `tid`'s newest record, taken before its fault is resolved: the thread then runs
    /// on, and its next sample overwrites it. Only a copy: what it is, is seen in `site_of`.
    pub fn take(&self, tid: i32) -> Option<Taken> {
        self.samplers.take(tid)
    }

    /// The site of thread `tid`'s first touch of `page`, if `taken` is its sample.
    pub fn site_of(&mut self, tid: i32, page: u64, taken: Taken) -> Option<SiteId> {
        let sample = taken.sample_at(page, !(self.shared.page_size - 1))?;
        let code = match &mut self.code {
            Some(code) if !code.stale => code,
            code => code.insert(self.shared.read_code(tid, None)?),
        };
        let sp = sample.regs.sp;
        let stack = &sample.stack;
        let mut read_stack = |addr: u64| {
            let at = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let word = stack.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_ne_bytes(word.try_into().map_err(|_| ())?))
        };
        let walked = super::walk(code, tid, sample.regs, self.shared.depth, &mut read_stack);
        Some(self.shared.site_of(code, tid, walked))
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
        if let Some(code) = &mut self.code {
            code.moved(range);
        }
    }
}
