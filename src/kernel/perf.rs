//! Stacks of first touches (`--touch-stacks N`): a software `page-faults` perf event per thread
//! that samples one fault in N (at random, through bpf.rs's program, or every Nth) with its
//! address, the thread's user registers and a copy of its user stack, taken by the kernel where
//! the fault begins, before userfaultfd puts the thread to sleep. The lane that resolves a
//! fault reads the thread's newest sample: the thread sleeps in that very fault, so if the
//! fault was sampled, the newest is its sample.
//!
//! The ring buffer is mapped read-only, which makes the kernel overwrite its oldest records
//! (written backward, newest first) instead of stopping when it is full: the faults no lane
//! follows (files, copy-on-write, a fork child's) never crowd out a followed one, however many
//! come between two. Its record format is perf-event2's (its `Counter` opens the event, and
//! `perf-event-data` parses the record); the read of the newest record is ours, since the crate
//! reads forward buffers only.

use std::io;
use std::mem::offset_of;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use perf_event::data::Record;
use perf_event::data::endian::Native;
use perf_event::data::parse::{ParseConfig, Parser};
use perf_event::events::Software;
use perf_event::{Builder, Counter, ReadFormat, SampleFlag};
use perf_event_open_sys::bindings::{PERF_RECORD_SAMPLE, perf_event_header, perf_event_mmap_page};

use super::bpf::OneInN;
use super::stack::StartRegisters;

/// Bytes of user stack a sample copies: enough for the frames between a touch and `main` in C
/// and Rust.
const STACK_BYTES: u32 = 8 << 10;
/// A thread's ring: one sample (the stack, its registers, a header) fits with room to spare.
/// The kernel pins it, and charges it to `perf_event_mlock_kb` (and then `RLIMIT_MEMLOCK`).
pub const RING_BYTES: usize = 16 << 10;
/// `PERF_REG_X86_BP`, `_SP`, `_IP`: a sample's registers come in this order.
const REGS_BP_SP_IP: u64 = (1 << 6) | (1 << 7) | (1 << 8);

/// One thread's sampler.
pub struct TouchSampler {
    /// Declared before the counter, so it is unmapped first.
    ring: memmap2::Mmap,
    counter: Counter,
    /// `data_head` when the lane last looked: a sample since then moved it.
    seen_head: u64,
}

/// A thread's newest record, as taken before its fault was resolved.
pub struct Taken {
    record: Vec<u8>,
    /// The thread's count of faults when it was taken: the fault it slept in is the sample's
    /// only if the sample's count is this.
    count_now: u64,
    config: ParseConfig<Native>,
}

impl Taken {
    /// The sample of the fault at `page` (page-aligned), if the record is the sample of the
    /// thread's latest fault (an earlier sample at the same page has a smaller count) and of
    /// that page.
    pub fn sample_at(self, page: u64, page_mask: u64) -> Option<TouchSample> {
        let bytes = &self.record;
        let header = perf_event_header {
            type_: u32::from_ne_bytes(bytes[0..4].try_into().ok()?),
            misc: u16::from_ne_bytes(bytes[4..6].try_into().ok()?),
            size: u16::from_ne_bytes(bytes[6..8].try_into().ok()?),
        };
        if header.type_ != PERF_RECORD_SAMPLE {
            return None;
        }
        let mut parser = Parser::new(&bytes[8..], self.config);
        let Ok(Record::Sample(sample)) = Record::parse_with_header(&mut parser, header) else {
            return None;
        };
        let addr = sample.addr()?;
        if addr & page_mask != page || sample.values()?.get(0)?.value() != self.count_now {
            return None;
        }
        let [bp, sp, ip] = sample.regs_user()?.regs[..] else {
            return None;
        };
        Some(TouchSample {
            addr,
            regs: StartRegisters { ip, sp, bp },
            stack: sample.stack_user()?.to_vec(),
        })
    }
}

/// A sampled fault: where it was, and the thread's registers and stack then.
pub struct TouchSample {
    pub addr: u64,
    pub regs: StartRegisters,
    /// The stack from `regs.sp` up.
    pub stack: Vec<u8>,
}

/// How a sampler picks one fault in N.
#[derive(Clone, Copy)]
pub enum OneFaultIn<'a> {
    /// Each fault with a chance of 1 in N, through the program.
    Random(&'a OneInN),
    /// Every Nth fault (the kernel's period), where the program cannot be loaded.
    EveryNth(u64),
}

/// Which faults a sampler sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultsSeen {
    /// User and kernel mode: a first touch inside a syscall (`read` into a fresh page) is the
    /// kernel's fault, and its sample still has the user registers at the syscall. Needs
    /// `CAP_PERFMON` or `perf_event_paranoid` ≤ 1.
    All,
    /// User mode only: what an unprivileged user may sample (`perf_event_paranoid` ≤ 2).
    UserOnly,
}

/// Why a sampler could not be had.
#[derive(Debug)]
pub enum SamplerError {
    /// `perf_event_open` refused (`perf_event_paranoid`, no perf support).
    Open(io::Error),
    /// The ring could not be mapped (pinned memory: `perf_event_mlock_kb`, `RLIMIT_MEMLOCK`).
    Map(io::Error),
    /// The program that picks one fault in N could not be attached.
    Filter(io::Error),
}

impl std::fmt::Display for SamplerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SamplerError::Open(e) => write!(f, "perf_event_open: {e}"),
            SamplerError::Map(e) => write!(f, "mapping its sample buffer: {e}"),
            SamplerError::Filter(e) => write!(f, "attaching its BPF program: {e}"),
        }
    }
}

impl AsRawFd for TouchSampler {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.counter.as_raw_fd()
    }
}

impl TouchSampler {
    /// Samples one page fault in N of thread `tid` from now on.
    pub fn open(tid: i32, pick: OneFaultIn, seen: FaultsSeen) -> Result<Self, SamplerError> {
        let mut builder = Builder::new(Software::PAGE_FAULTS);
        builder
            .observe_pid(tid)
            .any_cpu()
            .sample_period(match pick {
                OneFaultIn::Random(_) => 1,
                OneFaultIn::EveryNth(n) => n,
            })
            // READ: the count of faults at the sample, to tell the newest fault's sample from
            // an older one at the same page.
            .sample(
                SampleFlag::ADDR
                    | SampleFlag::READ
                    | SampleFlag::REGS_USER
                    | SampleFlag::STACK_USER,
            )
            .read_format(ReadFormat::empty())
            .sample_regs_user(REGS_BP_SP_IP)
            .sample_stack_user(STACK_BYTES)
            .exclude_kernel(seen == FaultsSeen::UserOnly)
            .exclude_hv(true)
            .enabled(true);
        builder.attrs_mut().set_write_backward(1);
        let counter = builder.build().map_err(SamplerError::Open)?;
        if let OneFaultIn::Random(program) = pick {
            program
                .attach(counter.as_raw_fd())
                .map_err(SamplerError::Filter)?;
        }
        let page = super::page_size() as usize;
        // SAFETY: a read-only shared mapping of the event's ring. The kernel writes it while
        // it is mapped, which memmap2's `Mmap` does not expect of a file: it is never read
        // through a slice, only through raw pointers (`data_head`, `copy_record`).
        let ring = unsafe {
            memmap2::MmapOptions::new()
                .len(page + RING_BYTES.max(page))
                .map(&counter)
                .map_err(SamplerError::Map)?
        };
        Ok(Self {
            ring,
            counter,
            seen_head: 0,
        })
    }

    /// Drops the samples taken so far.
    pub fn discard(&mut self) {
        self.seen_head = self.data_head();
    }

    /// The thread's newest record, if one was taken since the last look, copied while the
    /// thread sleeps in its fault (before the lane resolves it), with the thread's count of
    /// faults now. Parsed later, once the fault is resolved: [`Taken::sample_at`].
    pub fn take(&mut self) -> Option<Taken> {
        let head = self.data_head();
        if head == self.seen_head {
            return None;
        }
        self.seen_head = head;
        let record = self.copy_record(head)?;
        // The thread was running (its fault resolved by another's, or left for a signal): the
        // copy may be torn.
        if self.data_head() != head {
            return None;
        }
        Some(Taken {
            record,
            count_now: self.counter.read().ok()?,
            config: self.counter.config().clone(),
        })
    }

    fn data_head(&self) -> u64 {
        let at = offset_of!(perf_event_mmap_page, data_head);
        // SAFETY: the first page of the mapping is the kernel's `perf_event_mmap_page`, and
        // `data_head` is an aligned u64 in it that the kernel stores to. The page is mapped
        // read-only, which std allows for a lock-free atomic load (AtomicU64 is on x86_64);
        // the acquire pairs with the kernel's barrier before it publishes a record.
        unsafe { AtomicU64::from_ptr(self.ring.as_ptr().add(at) as *mut u64) }
            .load(Ordering::Acquire)
    }

    /// A copy of the record that begins at `head` (the newest: the event writes backward),
    /// header included; `None` if its size makes no sense.
    fn copy_record(&self, head: u64) -> Option<Vec<u8>> {
        let page = super::page_size() as usize;
        let size = self.ring.len() - page;
        let start = head as usize % size;
        // SAFETY (both): `data` is the ring's data area, `size` bytes after its header page;
        // every offset below is reduced modulo `size` and every length bounded by it.
        let data = unsafe { self.ring.as_ptr().add(page) };
        let mut header = [0u8; size_of::<perf_event_header>()];
        for (i, byte) in header.iter_mut().enumerate() {
            *byte = unsafe { data.add((start + i) % size).read_volatile() };
        }
        let length = usize::from(u16::from_ne_bytes([header[6], header[7]]));
        if length < header.len() || length > size {
            return None;
        }
        // At most one wrap: the part up to the ring's end, then the rest from its start.
        let first = length.min(size - start);
        let mut record = vec![0u8; length];
        // SAFETY: `[start, start + first)` and `[0, length - first)` lie within the data area
        // and `record` holds `length` bytes; a concurrent write by the kernel can only tear
        // the copy, which `sample_at` then drops.
        unsafe {
            std::ptr::copy_nonoverlapping(data.add(start), record.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(data, record.as_mut_ptr().add(first), length - first);
        }
        Some(record)
    }
}
