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
use std::sync::atomic::{Ordering, fence};

use perf_event::data::Record;
use perf_event::data::endian::Native;
use perf_event::data::parse::{ParseConfig, Parser};
use perf_event::events::Software;
use perf_event::{Builder, Counter, ReadFormat, SampleFlag};
use perf_event_open_sys::bindings::{
    PAUSE_OUTPUT, PERF_RECORD_SAMPLE, perf_event_header, perf_event_mmap_page,
};

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
    /// Declared before the counter, so it is unmapped first. Raw: the kernel writes it, so it
    /// is read through pointers only, never a Rust reference.
    ring: memmap2::MmapRaw,
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
    /// thread's latest counted fault (a sample of an earlier one has a smaller count) and of
    /// that page. A fill the kernel makes for the thread is not counted: the samples of a
    /// released range are dropped at the release for that (`TouchSampler::forget_in`).
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
            regs: StartRegisters { ip, sp, bp },
            stack: sample.stack_user()?.to_vec(),
        })
    }
}

/// A sampled fault: where it was, and the thread's registers and stack then.
pub struct TouchSample {
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
        let ring = memmap2::MmapOptions::new()
            .len(page + RING_BYTES.max(page))
            .map_raw_read_only(&counter)
            .map_err(SamplerError::Map)?;
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

    /// Drops the newest sample if it is of a page in `range` (which went away).
    pub fn forget_in(&mut self, range: &std::ops::Range<u64>) {
        let head = self.data_head();
        if head == self.seen_head {
            return;
        }
        // The sample's first field is its address (ADDR comes first of the fields asked for).
        let mut addr = [0u8; 8];
        self.read_ring(head.wrapping_add(8), &mut addr);
        if range.contains(&u64::from_ne_bytes(addr)) {
            self.seen_head = head;
        }
    }

    /// The thread's newest record, if one was taken since the last look, copied while the
    /// thread sleeps in its fault (before the lane resolves it), with the thread's count of
    /// faults now. Parsed later, once the fault is resolved: [`Taken::sample_at`].
    pub fn take(&mut self) -> Option<Taken> {
        let head = self.data_head();
        if head == self.seen_head {
            return None;
        }
        // The thread may be running (its fault resolved by another's, or left for a signal):
        // the kernel writes nothing meanwhile (a sample it takes then is lost), and a record
        // newer than `head` makes the count differ.
        self.pause_output(true);
        let head = self.data_head();
        let record = self.copy_record(head);
        self.pause_output(false);
        self.seen_head = head;
        Some(Taken {
            record: record?,
            count_now: self.counter.read().ok()?,
            config: self.counter.config().clone(),
        })
    }

    /// `PERF_EVENT_IOC_PAUSE_OUTPUT`: while paused, the kernel writes no record to the ring.
    fn pause_output(&self, paused: bool) {
        // SAFETY: an ioctl on our perf event's descriptor with an integer argument.
        let rc = unsafe {
            libc::ioctl(
                self.counter.as_raw_fd(),
                PAUSE_OUTPUT as _,
                libc::c_ulong::from(paused),
            )
        };
        if rc != 0 {
            tracing::debug!(
                "PERF_EVENT_IOC_PAUSE_OUTPUT: {}",
                io::Error::last_os_error()
            );
        }
    }

    fn data_head(&self) -> u64 {
        let at = offset_of!(perf_event_mmap_page, data_head);
        // SAFETY: the first page of the mapping is the kernel's `perf_event_mmap_page`, and
        // `data_head` an aligned u64 in it, which the kernel stores whole; the fence pairs with
        // the kernel's barrier before it publishes a record (READ_ONCE, then smp_rmb).
        let head = unsafe { (self.ring.as_ptr().add(at) as *const u64).read_volatile() };
        fence(Ordering::Acquire);
        head
    }

    /// Fills `into` from the ring's data area, from `offset` on (taken modulo its size).
    fn read_ring(&self, offset: u64, into: &mut [u8]) {
        let page = super::page_size() as usize;
        let size = self.ring.len() - page;
        let start = offset as usize % size;
        let first = into.len().min(size - start);
        // SAFETY: `data` is the ring's data area, the `size` bytes after its header page, and
        // `into` is at most `size` bytes (callers check): `[start, start + first)` and
        // `[0, into.len() - first)` are within it. Raw copies, no reference to memory the
        // kernel writes.
        unsafe {
            let data = self.ring.as_ptr().add(page);
            std::ptr::copy_nonoverlapping(data.add(start), into.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(data, into.as_mut_ptr().add(first), into.len() - first);
        }
    }

    /// A copy of the record that begins at `head` (the newest: the event writes backward),
    /// header included; `None` if its size makes no sense.
    fn copy_record(&self, head: u64) -> Option<Vec<u8>> {
        let size = self.ring.len() - super::page_size() as usize;
        let mut header = [0u8; size_of::<perf_event_header>()];
        self.read_ring(head, &mut header);
        let length = usize::from(u16::from_ne_bytes([header[6], header[7]]));
        if length < header.len() || length > size {
            return None;
        }
        let mut record = vec![0u8; length];
        self.read_ring(head, &mut record);
        Some(record)
    }
}
