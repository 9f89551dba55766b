//! The kernel's own record of every page fault (`--faults records`): a software `page-faults`
//! perf event with `sample_period = 1` and `PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
//! PERF_SAMPLE_ADDR` on `CLOCK_MONOTONIC` writes, synchronously in the fault path and without
//! putting the thread to sleep, each fault's pid, tid, time and address to a ring we read.
//!
//! The kernel allows two shapes (docs/kernel-facts.md, "Behind `--faults records`"): a ring per
//! thread, or a ring per CPU. It refuses to map an inherited event that follows a task on any
//! CPU (`EINVAL`), and a per-thread ring serves one task only (`PERF_EVENT_IOC_SET_OUTPUT`
//! between two threads' any-CPU events: `EINVAL`). A [`FaultRing`] is one thread's ring, on
//! every CPU, not inherited, dropped at an exec: `--faults records` opens one for each thread and
//! reads a space's together ([`ThreadRings`]). (Per-CPU rings, and the choice between the two at
//! scale, are measured in docs/performance.md.)
//!
//! With `exclude_kernel = 0`, a fault taken inside a syscall on a user address (a `read()` into a
//! fresh page) is recorded too; that needs `CAP_PERFMON` or `perf_event_paranoid` ≤ 1 (root is
//! exempt). Faults the kernel takes for the program through `get_user_pages`
//! (`MADV_POPULATE_*`, `MAP_POPULATE`, `mlock`, `O_DIRECT`, `process_vm_writev`) raise no
//! `page-faults` event: a record is never the only way a page is found.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use std::sync::Arc;

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use perf_event::data::Record;

pub use super::perf::FaultsSeen;
use perf_event::events::Software;
use perf_event::{Builder, Clock, SampleFlag, Sampler};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

/// One fault, as the kernel recorded it where the fault began (before it was handled: the
/// fault may yet fail, or be retried and recorded again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultRecord {
    pub pid: i32,
    pub tid: i32,
    /// `CLOCK_MONOTONIC`, in nanoseconds.
    pub time: u64,
    /// The faulting address (not page-aligned).
    pub addr: u64,
}

/// What a ring holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Drained {
    Fault(FaultRecord),
    /// The ring of thread `tid` was full: the kernel dropped this many records, and wrote this
    /// instead once there was room again.
    Lost {
        count: u64,
        tid: i32,
    },
    /// Thread `tid` was named `name` (`PR_SET_NAME`, or a write to its `comm`), in order with
    /// its faults when it named itself.
    Named {
        tid: i32,
        name: String,
    },
}

/// How a ring is sized and when its reader is woken.
#[derive(Clone, Copy, Debug)]
pub struct RingSize {
    /// Bytes of records (a power of two, at least a page): 32 bytes a fault.
    pub bytes: usize,
    /// Wake the reader once this many bytes are unread (`wakeup_watermark`).
    pub wake_at: usize,
}

/// Bytes the kernel writes for one fault: the header, pid and tid, time, address.
pub const RECORD_BYTES: usize = 32;

/// Why records could not be had.
#[derive(Debug)]
pub enum RecordsError {
    /// `perf_event_open` refused (`perf_event_paranoid`, no perf support, the task gone).
    Open(io::Error),
    /// The ring could not be mapped (pinned memory: `perf_event_mlock_kb`, `RLIMIT_MEMLOCK`).
    Map(io::Error),
}

impl std::fmt::Display for RecordsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordsError::Open(e) => write!(f, "perf_event_open: {e}"),
            RecordsError::Map(e) => write!(f, "mapping its ring: {e}"),
        }
    }
}

/// A thread's ring of fault records, on every CPU.
pub struct FaultRing {
    sampler: Sampler,
    tid: i32,
}

impl std::fmt::Debug for FaultRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultRing")
            .field("fd", &self.as_raw_fd())
            .field("tid", &self.tid)
            .finish()
    }
}

impl AsRawFd for FaultRing {
    fn as_raw_fd(&self) -> RawFd {
        self.sampler.as_raw_fd()
    }
}

impl AsFd for FaultRing {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor is the sampler's, open for as long as the ring (and so the
        // borrow) lives.
        unsafe { BorrowedFd::borrow_raw(self.sampler.as_raw_fd()) }
    }
}

/// What the kernel lets this process record of a thread's faults, tried on the calling thread:
/// all of them, or those of user mode only (`perf_event_paranoid` 2 without `CAP_PERFMON`), or
/// none (the error of the last try).
pub fn recordable() -> Result<FaultsSeen, RecordsError> {
    let me = nix::unistd::gettid().as_raw();
    let size = RingSize {
        bytes: 4096,
        wake_at: 4096,
    };
    FaultRing::of_thread(me, FaultsSeen::All, size)
        .map(|_| FaultsSeen::All)
        .or_else(|_| {
            FaultRing::of_thread(me, FaultsSeen::UserOnly, size).map(|_| FaultsSeen::UserOnly)
        })
}

impl FaultRing {
    /// Records every fault of thread `tid` from now on, on any CPU, until it exits or execs
    /// (`remove_on_exec`); those taken inside system calls too unless `seen` is `UserOnly`
    /// (what a user without `CAP_PERFMON` may have under `perf_event_paranoid` 2).
    pub fn of_thread(tid: i32, seen: FaultsSeen, size: RingSize) -> Result<Self, RecordsError> {
        let mut builder = Builder::new(Software::PAGE_FAULTS);
        builder
            .observe_pid(tid)
            .any_cpu()
            .sample_period(1)
            .sample(SampleFlag::TID | SampleFlag::TIME | SampleFlag::ADDR)
            .clockid(Clock::MONOTONIC)
            .remove_on_exec(true)
            // Its names too, for `--threads`: a name it gives itself is written in its ring
            // between the faults before and after.
            .comm(true)
            .exclude_kernel(seen == FaultsSeen::UserOnly)
            .exclude_hv(true)
            .wakeup_watermark(size.wake_at.max(1))
            .enabled(true);
        let counter = builder.build().map_err(RecordsError::Open)?;
        let sampler = counter.sampled(size.bytes).map_err(RecordsError::Map)?;
        Ok(Self { sampler, tid })
    }

    /// Takes every record written so far, oldest first, into `into`; how many. Records of
    /// another kind than a fault, a loss or a name (none is asked for) are passed over.
    pub fn drain(&mut self, into: &mut Vec<Drained>) -> usize {
        let before = into.len();
        while let Some(record) = self.sampler.next_record() {
            if let Some(fault) = fault_of(&record) {
                into.push(Drained::Fault(fault));
                continue;
            }
            let drained = match record.parse_record() {
                Ok(Record::Sample(sample)) => {
                    match (sample.pid(), sample.tid(), sample.time(), sample.addr()) {
                        (Some(pid), Some(tid), Some(time), Some(addr)) => {
                            Some(Drained::Fault(FaultRecord {
                                pid: pid as i32,
                                tid: tid as i32,
                                time,
                                addr,
                            }))
                        }
                        _ => None,
                    }
                }
                Ok(Record::Lost(lost)) => Some(Drained::Lost {
                    count: lost.lost,
                    tid: self.tid,
                }),
                Ok(Record::Comm(comm)) => Some(Drained::Named {
                    tid: comm.tid as i32,
                    name: String::from_utf8_lossy(&comm.comm).into_owned(),
                }),
                Ok(_) => None,
                Err(e) => {
                    tracing::debug!("a fault record that does not parse: {e}");
                    None
                }
            };
            into.extend(drained);
        }
        into.len() - before
    }
}

/// A fault's record read as the ring holds it: with `TID | TIME | ADDR` sampled and nothing
/// else, a `PERF_RECORD_SAMPLE` is `pid, tid: u32`, `time: u64`, `addr: u64`, in the machine's
/// order. Read here, not by the general parser, which took two thirds of the lane's time per
/// record (perf: 1.2 of 1.8 us, of which a copy of the parse configuration for each record);
/// any other record, or a sample of another size, goes to the general parser.
fn fault_of(record: &perf_event::Record<'_>) -> Option<FaultRecord> {
    const SAMPLE_BYTES: usize = 24;
    if record.ty() != perf_event_open_sys::bindings::PERF_RECORD_SAMPLE
        || record.len() != SAMPLE_BYTES
    {
        return None;
    }
    let bytes = record.to_contiguous();
    let (pid, rest) = bytes.split_first_chunk::<4>()?;
    let (tid, rest) = rest.split_first_chunk::<4>()?;
    let (time, rest) = rest.split_first_chunk::<8>()?;
    let (addr, _) = rest.split_first_chunk::<8>()?;
    Some(FaultRecord {
        pid: u32::from_ne_bytes(*pid) as i32,
        tid: u32::from_ne_bytes(*tid) as i32,
        time: u64::from_ne_bytes(*time),
        addr: u64::from_ne_bytes(*addr),
    })
}

/// The rings of the threads of one address space, read together: an epoll set over them that
/// the runtime polls (`AsyncFd`), readable once any ring holds `wake_at` bytes unread.
pub struct ThreadRings {
    epoll: Epoll,
    /// By thread id, with its process.
    rings: HashMap<i32, (i32, FaultRing)>,
    /// Where a wait on the set lands: room for every ring.
    events: Vec<EpollEvent>,
}

impl ThreadRings {
    pub fn new() -> io::Result<Self> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(io::Error::from)?;
        Ok(Self {
            epoll,
            rings: HashMap::new(),
            events: Vec::new(),
        })
    }

    /// Adds thread `tid`'s ring (of process `pid`); one it had before is drained first, into
    /// `into` (only what it recorded before `replaces_before`, if given).
    pub fn add(
        &mut self,
        pid: i32,
        tid: i32,
        ring: FaultRing,
        replaces_before: Option<u64>,
        into: &mut Vec<Drained>,
    ) -> io::Result<()> {
        match replaces_before {
            None => self.remove(tid, into),
            // The thread's ring before this one, which recorded on beside it from `before`:
            // what it holds from its first fault at or past that moment on (faults, a loss, a
            // name; a ring is in its thread's order) the new ring has too.
            Some(before) => {
                let mut old = Vec::new();
                self.remove(tid, &mut old);
                let past = old
                    .iter()
                    .position(|d| matches!(d, Drained::Fault(f) if f.time >= before))
                    .unwrap_or(old.len());
                old.truncate(past);
                into.append(&mut old);
            }
        }
        let event = EpollEvent::new(EpollFlags::EPOLLIN, tid as u64);
        self.epoll.add(&ring, event).map_err(io::Error::from)?;
        self.rings.insert(tid, (pid, ring));
        Ok(())
    }

    /// Drains and drops thread `tid`'s ring: the thread is gone, or exec'd (its event went at
    /// the exec, `remove_on_exec`).
    pub fn remove(&mut self, tid: i32, into: &mut Vec<Drained>) {
        if let Some((_, mut ring)) = self.rings.remove(&tid) {
            ring.drain(into);
            if let Err(e) = self.epoll.delete(&ring) {
                tracing::debug!(tid, "taking a ring out of its epoll set: {e}");
            }
        }
    }

    /// Drains and drops the rings of process `pid`'s threads.
    pub fn remove_process(&mut self, pid: i32, into: &mut Vec<Drained>) {
        let tids: Vec<i32> = self
            .rings
            .iter()
            .filter(|(_, (p, _))| *p == pid)
            .map(|(&tid, _)| tid)
            .collect();
        for tid in tids {
            self.remove(tid, into);
        }
    }

    /// Takes every record written so far into `into`, ring by ring (each oldest first), and
    /// takes the epoll set's readiness with them: the set is readable again only once a ring
    /// reaches its watermark anew. A ring whose thread is gone (its event hung up, which would
    /// keep the set readable) is drained and dropped.
    pub fn drain(&mut self, into: &mut Vec<Drained>) -> usize {
        // One wait with room for every ring: a hung-up ring stays ready until it is dropped
        // below, so waiting again until fewer come than there is room for would never end.
        self.events
            .resize(self.rings.len().max(1), EpollEvent::empty());
        let mut hung_up = Vec::new();
        if let Ok(n) = self.epoll.wait(&mut self.events, EpollTimeout::ZERO) {
            for event in &self.events[..n] {
                if event
                    .events()
                    .intersects(EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR)
                {
                    hung_up.push(event.data() as i32);
                }
            }
        }
        let before = into.len();
        for (_, ring) in self.rings.values_mut() {
            ring.drain(into);
        }
        for tid in hung_up {
            self.remove(tid, into);
        }
        into.len() - before
    }

    pub fn is_empty(&self) -> bool {
        self.rings.is_empty()
    }
}

impl AsRawFd for ThreadRings {
    fn as_raw_fd(&self) -> RawFd {
        self.epoll.0.as_raw_fd()
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: a record's clock.
pub fn monotonic_now() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
    })
}

/// One `Instant` and the `CLOCK_MONOTONIC` reading beside it, taken once: every conversion
/// between the two goes through this pair, so that converting a time one way and back gives
/// it again (two reads of two clocks each time would put each conversion off by its own
/// delay, and a record made just after a line could come out before it).
fn clocks_paired() -> (Instant, u64) {
    static PAIRED: std::sync::OnceLock<(Instant, u64)> = std::sync::OnceLock::new();
    *PAIRED.get_or_init(|| (Instant::now(), monotonic_now()))
}

/// An `Instant` (which is `CLOCK_MONOTONIC` too, but opaque) on a record's clock.
pub fn monotonic_of(at: Instant) -> u64 {
    let (instant, clock) = clocks_paired();
    match at.checked_duration_since(instant) {
        Some(since) => clock + since.as_nanos() as u64,
        None => clock.saturating_sub(instant.duration_since(at).as_nanos() as u64),
    }
}

/// The moment a record's time names, as an `Instant`.
pub fn instant_of(time: u64) -> Instant {
    let (instant, clock) = clocks_paired();
    match time.checked_sub(clock) {
        Some(since) => instant + Duration::from_nanos(since),
        None => instant
            .checked_sub(Duration::from_nanos(clock - time))
            .unwrap_or(instant),
    }
}

/// Wakes a space's lane when its rings hold records past their watermark: a task of the
/// runtime waiting on the rings' epoll set (a descriptor of its own on the same set), so that
/// the lane, which owns the rings, is not borrowed while it waits.
pub struct RingsWatcher {
    task: tokio::task::JoinHandle<()>,
}

impl RingsWatcher {
    /// Notifies `wake` each time the set becomes readable. Must be called on the runtime.
    pub fn start(rings: &ThreadRings, wake: Arc<Notify>) -> io::Result<Self> {
        let epoll: OwnedFd = rings.epoll.0.try_clone()?;
        // SAFETY: the AsyncFd owns the descriptor, which stays open on the same epoll set until
        // the AsyncFd (moved into the task) is dropped with it.
        let fd = unsafe { AsyncFd::register_with_interest(epoll, Interest::READABLE) }
            .map_err(io::Error::from)?;
        let task = tokio::spawn(async move {
            loop {
                let Ok(mut guard) = fd.readable().await else {
                    return;
                };
                wake.notify_one();
                guard.clear_ready();
            }
        });
        Ok(Self { task })
    }
}

impl Drop for RingsWatcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring of the calling thread's faults (user-mode ones where kernel-mode ones are
    /// refused), and its tid.
    fn this_threads_ring() -> (i32, FaultRing) {
        let tid = nix::unistd::gettid().as_raw();
        let size = RingSize {
            bytes: 1 << 20,
            wake_at: 4096,
        };
        let ring = FaultRing::of_thread(tid, FaultsSeen::All, size)
            .or_else(|_| FaultRing::of_thread(tid, FaultsSeen::UserOnly, size))
            .expect("a ring of this thread's faults");
        (tid, ring)
    }

    /// The kernel's side: this thread's own faults on fresh pages, each in its ring with this
    /// thread's ids and its address (user-mode faults, where kernel-mode ones are refused).
    #[test]
    fn every_fault_of_a_thread_is_recorded_with_its_ids_and_address() {
        let (tid, mut ring) = this_threads_ring();
        let page = crate::kernel::page_size() as usize;
        let pages = 64;
        let mut memory =
            crate::kernel::anon_memory::AnonMapping::new(pages).expect("anonymous memory");
        for i in 0..pages {
            memory.write(i, 1);
        }
        let mut drained = Vec::new();
        ring.drain(&mut drained);
        let start = memory.start();
        let ours: std::collections::BTreeSet<u64> = drained
            .iter()
            .filter_map(|d| match d {
                Drained::Fault(f) => Some(f),
                Drained::Lost { .. } | Drained::Named { .. } => None,
            })
            .filter(|f| f.tid == tid && f.pid == std::process::id() as i32)
            .map(|f| f.addr / page as u64 * page as u64)
            .filter(|&p| p >= start && p < start + (pages * page) as u64)
            .collect();
        assert_eq!(
            ours.len(),
            pages,
            "one record at least for each page touched"
        );
    }

    /// A thread's ring replaced by another opened beside it: what the old one recorded before
    /// the replacement's moment comes out of it, what it recorded after (the new one has it
    /// too) does not, and the new one has the faults from that moment on.
    #[test]
    fn a_replaced_ring_gives_what_it_recorded_before_the_replacement_only() {
        let (tid, old) = this_threads_ring();
        let pid = std::process::id() as i32;
        let mut rings = ThreadRings::new().expect("an epoll set");
        let mut drained = Vec::new();
        rings
            .add(pid, tid, old, None, &mut drained)
            .expect("the first ring");
        let page = crate::kernel::page_size();
        let mut memory =
            crate::kernel::anon_memory::AnonMapping::new(16).expect("anonymous memory");
        let start = memory.start();
        for i in 0..8 {
            memory.write(i, 1);
        }
        let (_, new) = this_threads_ring();
        let before = monotonic_now();
        for i in 8..16 {
            memory.write(i, 1);
        }
        // The pages of `memory` this thread's records in `drained` are of.
        let pages_of = |drained: &[Drained]| -> std::collections::BTreeSet<u64> {
            drained
                .iter()
                .filter_map(|d| match d {
                    Drained::Fault(f) if f.tid == tid => f.addr.checked_sub(start),
                    _ => None,
                })
                .map(|offset| offset / page)
                .filter(|&p| p < 16)
                .collect()
        };
        let mut from_old = Vec::new();
        rings
            .add(pid, tid, new, Some(before), &mut from_old)
            .expect("the replacing ring");
        assert_eq!(pages_of(&from_old), (0..8).collect());
        let mut from_new = Vec::new();
        rings.drain(&mut from_new);
        assert_eq!(pages_of(&from_new), (8..16).collect());
    }

    /// A time converted to a record's clock and back is the same time, to the nanosecond.
    #[test]
    fn a_time_converted_and_back_is_the_same() {
        let now = Instant::now();
        for at in [
            now,
            now - Duration::from_millis(3),
            now + Duration::from_secs(2),
        ] {
            assert_eq!(instant_of(monotonic_of(at)), at);
        }
        let clock = monotonic_now();
        assert_eq!(monotonic_of(instant_of(clock)), clock);
    }

    /// A name the thread gives itself is in its ring between the faults before and after.
    #[test]
    fn a_threads_name_is_recorded_between_its_faults() {
        std::thread::spawn(|| {
            let (tid, mut ring) = this_threads_ring();
            let mut memory =
                crate::kernel::anon_memory::AnonMapping::new(2).expect("anonymous memory");
            let start = memory.start();
            memory.write(0, 1);
            nix::sys::prctl::set_name(c"mevi-renamed").expect("PR_SET_NAME");
            memory.write(1, 1);
            let mut drained = Vec::new();
            ring.drain(&mut drained);
            let page = crate::kernel::page_size();
            let seen: Vec<String> = drained
                .iter()
                .filter_map(|d| match d {
                    Drained::Fault(f) if f.tid == tid && f.addr / page * page == start => {
                        Some("first".to_string())
                    }
                    Drained::Fault(f) if f.tid == tid && f.addr / page * page == start + page => {
                        Some("second".to_string())
                    }
                    Drained::Named { tid: t, name } if *t == tid => Some(name.clone()),
                    Drained::Fault(_) | Drained::Named { .. } | Drained::Lost { .. } => None,
                })
                .collect();
            assert_eq!(seen, ["first", "mevi-renamed", "second"]);
        })
        .join()
        .unwrap();
    }
}
