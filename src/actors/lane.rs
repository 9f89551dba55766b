//! The lane of one address space: it reads the space's userfaultfd, resolves first touches, and
//! is the one place where the tracer's layout changes and the space's fault resolutions are put
//! in order before they go to the sequencer.
//!
//! The rules (argued in docs/ordering.md): the tracer sends a change to this inbox *before* it
//! resumes the thread that made it, so any fault that depends on the change is raised after the
//! message is in the inbox; after each `read()` of the descriptor the lane therefore drains its
//! inbox before it resolves what it read (R1). Faults that a racing thread can raise before the
//! report of the change they land in are held behind fences until that report is in (R2).
//! Discards and the pages of new ranges are read from the page tables here, where no resolution
//! can come in between (R3, R4).

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use userfaultfd::EventBuffer;

use super::sequencer::{SequencerHandle, SequencerMessage, Stamped};
use crate::event::{Event, MapKind, PageState, SpaceId, VerifyPoint};
use crate::kernel;
use crate::kernel::procfs::{self, Pagemap};
use crate::kernel::uffd::{AddressSpaceUffd, Resolution, UffdMessage};
use crate::verify::Probe;

/// What the tracer tells a space's lane.
#[derive(Debug)]
pub enum LaneMessage {
    /// An event the tracer saw while the thread that caused it was stopped.
    Observed(Stamped),
    /// `madvise` dropped pages: the ones gone are those absent at the exit, less those this lane
    /// resolved since (a concurrent touch refilled them, and their lines have gone out).
    Discard {
        pid: i32,
        tid: i32,
        range: Range<u64>,
        advice: &'static str,
        at: Instant,
        at_exit: PagesAtExit,
    },
    /// Where the main thread's stack is: it grows down through faults, not through syscalls, by
    /// at most `limit` bytes below its top.
    Stack {
        pid: i32,
        range: Range<u64>,
        limit: u64,
    },
    /// A thread entered a layout syscall (it is stopped at the seccomp stop).
    Begun { tid: i32, nr: i64, args: [u64; 6] },
    /// Faults in `range` wait until `tid`'s syscall has been reported: it is making the range
    /// fault through the lane, and its report is not in yet.
    Fence { tid: i32, range: Range<u64> },
    /// A new mapping (`map`) or heap growth (`brk`) over a tracked range, already registered,
    /// with the pages the tracer found present at the syscall's exit (`MAP_POPULATE`, locked
    /// memory, touches by other threads before registration). The lane adds those it resolved
    /// itself since (their lines went out before this one).
    Mapped {
        event: Stamped,
        at_exit: PagesAtExit,
    },
    /// That syscall's exit has been reported (everything it changed is before this message).
    Ended { tid: i32 },
    /// A process left this space (it exec'd): every line about it has been sent.
    Left { pid: i32 },
    /// Every thread of the space is stopped (`--verify`): resolve what the descriptor still
    /// holds, then send the check on in lane order. `done` is told once the kernel's side has
    /// been read, and only then may the threads run again.
    Checkpoint {
        pid: i32,
        point: VerifyPoint,
        done: SyncSender<()>,
    },
}

/// The populated pages of a range, read by the tracer while the thread that changed the range
/// was stopped at its syscall's exit.
#[derive(Debug)]
pub struct PagesAtExit {
    /// When the read began: a resolution by the lane after this may not be in `present`.
    pub read_at: Instant,
    pub present: Vec<Range<u64>>,
}

/// How many recent resolutions the lane remembers, with their times. Only those made since the
/// oldest page read still in the inbox matter, and the lane drains its inbox after every read of
/// the descriptor (at most 64 faults): this is far more than enough.
const RECENT_RESOLUTIONS: usize = 1 << 16;

/// How a lane is set up.
#[derive(Clone, Copy, Debug)]
pub struct LaneConfig {
    pub page_size: u64,
    /// Inbox size: the tracer blocks (and its tracee waits) when the lane is this far behind.
    pub capacity: usize,
    /// `--coalesce-ms`: how long a run of adjacent first touches by one thread may grow before
    /// its `resident` line goes out; `None` writes one line per fault.
    pub coalesce: Option<Duration>,
    /// How long the lane keeps reading an empty descriptor after a batch before it sleeps
    /// until the descriptor is readable (docs/performance.md).
    pub busy_read: Duration,
    /// Read again only while fewer threads of the space fault than there are CPUs: with idle
    /// CPUs polling (`--idle-poll`) a wake-up is cheap, and a spinning lane only takes a CPU
    /// that a faulting thread could use.
    pub busy_read_needs_free_cpu: bool,
}

/// First touches by one thread of adjacent pages, one way, with the same access, not yet sent:
/// one `resident` line once it ends.
///
/// Holding them back is safe because every other line of this lane flushes them first: the only
/// lines a run can move past are other threads' `resident` lines, which are about other pages
/// (a page is resolved once until a discard or an unmap, and those are lines of this lane), so
/// a replay comes to the same state (docs/ordering.md, R9).
#[derive(Debug)]
struct TouchRun {
    at: Instant,
    pid: i32,
    tid: i32,
    start: u64,
    end: u64,
    write: bool,
    faults: u64,
}

impl TouchRun {
    fn into_stamped(self, space: SpaceId) -> Stamped {
        Stamped {
            at: self.at,
            event: Event::Resident {
                pid: self.pid,
                tid: self.tid,
                space,
                start: self.start,
                end: self.end,
                write: self.write,
                faults: self.faults,
            },
        }
    }
}

/// A range where a layout change is under way: the userfaultfd has said so (`UNMAP`, `REMAP`,
/// `REMOVE`), but the syscall's report has not reached the lane yet. A fault resolved there now
/// could land in the new layout and be written before the change that made it: such faults are
/// held until every syscall that had begun when the event was read has ended.
#[derive(Debug)]
struct Fence {
    range: Range<u64>,
    waiting: HashSet<i32>,
}

/// How late the lane may take in a message that nothing waits for. Most of what the tracer sends
/// need only be in the inbox before the thread resumes (R1: the lane drains its inbox after
/// every read of the descriptor), not handled at once; waking the lane for each one cost about
/// a fifth of a fork+exec's time (docs/performance.md). So the tracer wakes the lane for such
/// messages at most once per this interval, and the lane, once woken, takes in the inbox again
/// this long after: every message is handled within it.
const INBOX_LATENCY: Duration = Duration::from_millis(5);

/// The tracer's end of a lane. Dropping the last one ends the lane.
#[derive(Clone, Debug)]
pub struct LaneHandle {
    inner: Arc<LaneSender>,
}

#[derive(Debug)]
struct LaneSender {
    tx: Sender<LaneMessage>,
    wake: Arc<LaneWake>,
}

/// How the tracer wakes a lane (the lane does not listen to its inbox itself).
#[derive(Debug)]
struct LaneWake {
    notify: tokio::sync::Notify,
    /// When the tracer last woke the lane, in nanoseconds since `epoch` (only the tracer
    /// thread writes it).
    last_wake_ns: AtomicU64,
    epoch: Instant,
    /// The lane holds faults behind fences: an `Ended` may release them and must wake it.
    holding: AtomicBool,
}

impl LaneWake {
    fn wake(&self) {
        let now = self.epoch.elapsed().as_nanos() as u64;
        self.last_wake_ns.store(now, Ordering::Relaxed);
        self.notify.notify_one();
    }

    /// Whether a message sent now might not be taken in by the drain that follows the last wake.
    fn stale(&self) -> bool {
        let now = self.epoch.elapsed().as_nanos() as u64;
        now.saturating_sub(self.last_wake_ns.load(Ordering::Relaxed))
            >= INBOX_LATENCY.as_nanos() as u64
    }
}

impl Drop for LaneSender {
    fn drop(&mut self) {
        // Closed first, so that the lane, once woken, finds the inbox closed and ends.
        self.tx.close();
        self.wake.notify.notify_one();
    }
}

impl LaneHandle {
    /// Called from the tracer thread; blocks while the lane is full (the tracee waits).
    pub fn send(&self, message: LaneMessage) {
        let LaneSender { tx, wake } = &*self.inner;
        let checkpoint = matches!(message, LaneMessage::Checkpoint { .. });
        let ended = matches!(message, LaneMessage::Ended { .. });
        match tx.try_send(message) {
            Ok(()) => {}
            Err(async_channel::TrySendError::Full(message)) => {
                wake.wake();
                let _ = tx.send_blocking(message);
            }
            Err(async_channel::TrySendError::Closed(_)) => return,
        }
        // Pairs with the lane's store of `holding` and its drain after it: either the lane
        // sees this message, or this sees `holding`.
        std::sync::atomic::fence(Ordering::SeqCst);
        if checkpoint || (ended && wake.holding.load(Ordering::SeqCst)) || wake.stale() {
            wake.wake();
        }
    }

    pub fn observed(&self, event: Event) {
        self.send(LaneMessage::Observed(Stamped::now(event)));
    }
}

struct SharedUffd(Arc<AddressSpaceUffd>);

impl AsRawFd for SharedUffd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Counts of what the descriptor said, for the debug log.
#[derive(Debug, Default)]
struct Counters {
    resolved: u64,
    refused: u64,
    layout_events: u64,
}

pub struct Lane {
    space: SpaceId,
    uffd: Option<Arc<AddressSpaceUffd>>,
    pagemap: Option<Arc<Pagemap>>,
    inbox: Receiver<LaneMessage>,
    wake: Arc<LaneWake>,
    out: SequencerHandle,
    page_size: u64,
    coalesce: Option<Duration>,
    busy_read: Duration,
    /// With `busy_read_needs_free_cpu`: the CPUs, and when each thread last faulted.
    spin_cpus: Option<usize>,
    faulted_at: HashMap<i32, Instant>,
    /// Runs of first touches not yet sent, oldest first (at most one per thread).
    runs: Vec<TouchRun>,
    /// Which process each thread of this space belongs to.
    tids: HashMap<i32, i32>,
    /// The main thread's stack: its process, its range, and how far it may grow.
    stack: Option<(i32, Range<u64>, u64)>,
    /// Threads inside a layout syscall, between its `Begun` and `Ended`: the syscall and its
    /// arguments.
    begun: HashMap<i32, (i64, [u64; 6])>,
    fences: Vec<Fence>,
    /// Faults read inside a fence, in the order read.
    held: Vec<UffdMessage>,
    /// Pages resolved lately, with when, oldest first (see `PagesAtExit`).
    recent: std::collections::VecDeque<(Instant, u64)>,
    counters: Counters,
    /// Where reads of the descriptor land.
    buf: EventBuffer,
}

impl Lane {
    pub fn new(
        space: SpaceId,
        uffd: Option<Arc<AddressSpaceUffd>>,
        pagemap: Option<Arc<Pagemap>>,
        out: SequencerHandle,
        config: LaneConfig,
    ) -> (Self, LaneHandle) {
        let (tx, inbox) = async_channel::bounded(config.capacity);
        let wake = Arc::new(LaneWake {
            notify: tokio::sync::Notify::new(),
            last_wake_ns: AtomicU64::new(0),
            epoch: Instant::now(),
            holding: AtomicBool::new(false),
        });
        let actor = Self {
            space,
            uffd,
            pagemap,
            inbox,
            wake: wake.clone(),
            out,
            page_size: config.page_size,
            coalesce: config.coalesce,
            busy_read: config.busy_read,
            spin_cpus: config
                .busy_read_needs_free_cpu
                .then(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
            faulted_at: HashMap::new(),
            runs: Vec::new(),
            tids: HashMap::new(),
            stack: None,
            begun: HashMap::new(),
            fences: Vec::new(),
            held: Vec::new(),
            recent: std::collections::VecDeque::new(),
            counters: Counters::default(),
            buf: EventBuffer::new(64),
        };
        let handle = LaneHandle {
            inner: Arc::new(LaneSender { tx, wake }),
        };
        (actor, handle)
    }

    pub async fn run(mut self) {
        let fd = match &self.uffd {
            Some(uffd) => {
                // SAFETY: the Arc inside keeps the descriptor open for as long as the AsyncFd
                // lives, and nothing closes or replaces it meanwhile.
                let registered = unsafe {
                    AsyncFd::register_with_interest(SharedUffd(uffd.clone()), Interest::READABLE)
                };
                match registered {
                    Ok(fd) => Some(fd),
                    Err(e) => {
                        tracing::error!(space = self.space, "cannot poll the userfaultfd: {e}");
                        None
                    }
                }
            }
            None => None,
        };
        let inbox = self.inbox.clone();
        let mut read = Vec::new();
        // When the oldest run of first touches is due (reset only when that changes).
        let flush_timer = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(flush_timer);
        let mut timer_for: Option<Instant> = None;
        // The inbox is taken in again INBOX_LATENCY after each wake by the tracer; the lane's
        // creation counts as one.
        let wake = self.wake.clone();
        let again = tokio::time::sleep(INBOX_LATENCY);
        tokio::pin!(again);
        let mut again_armed = true;
        loop {
            // Say whether an `Ended` must wake us; then take in what was sent before the tracer
            // could see it (pairs with the fence in `LaneHandle::send`).
            let holding = !self.held.is_empty();
            wake.holding.store(holding, Ordering::SeqCst);
            if holding {
                std::sync::atomic::fence(Ordering::SeqCst);
                if !inbox.is_empty() {
                    if self.take_inbox(&inbox).await {
                        break;
                    }
                    continue;
                }
            }
            let due = self.runs_due();
            if due != timer_for {
                if let Some(due) = due {
                    flush_timer.as_mut().reset(due.into());
                }
                timer_for = due;
            }
            let readable = async {
                match &fd {
                    Some(fd) => fd.readable().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = wake.notify.notified() => {
                    if self.take_inbox(&inbox).await {
                        break;
                    }
                    again.as_mut().reset((Instant::now() + INBOX_LATENCY).into());
                    again_armed = true;
                }
                () = &mut again, if again_armed => {
                    again_armed = false;
                    if self.take_inbox(&inbox).await {
                        break;
                    }
                }
                () = &mut flush_timer, if timer_for.is_some() => {
                    self.flush_runs_due().await;
                }
                guard = readable => {
                    let Ok(mut guard) = guard else { break };
                    self.read_uffd(&mut read);
                    if read.is_empty() {
                        guard.clear_ready();
                        continue;
                    }
                    drop(guard);
                    self.on_read(&mut read, &inbox).await;
                    // Faults come in streams: the next one is usually raised a few microseconds
                    // after its thread is woken. Reading again for a moment before going back to
                    // sleep spares both sides a wake-up through the scheduler.
                    let mut until = Instant::now() + self.busy_read_now();
                    while Instant::now() < until {
                        self.read_uffd(&mut read);
                        if read.is_empty() {
                            std::hint::spin_loop();
                            continue;
                        }
                        self.on_read(&mut read, &inbox).await;
                        until = Instant::now() + self.busy_read_now();
                    }
                }
            }
        }
        self.flush_runs().await;
        tracing::debug!(space = self.space, counters = ?self.counters, "lane done");
    }

    /// How long to read again now (see `LaneConfig`).
    fn busy_read_now(&mut self) -> Duration {
        let Some(cpus) = self.spin_cpus else {
            return self.busy_read;
        };
        // Threads that faulted within the last millisecond are taken to be running.
        let now = Instant::now();
        self.faulted_at
            .retain(|_, &mut at| now.duration_since(at) < Duration::from_millis(1));
        if self.faulted_at.len() < cpus {
            self.busy_read
        } else {
            Duration::ZERO
        }
    }

    /// Handles everything in the inbox; whether it is closed (the space has no process left:
    /// nothing more can fault in it).
    async fn take_inbox(&mut self, inbox: &Receiver<LaneMessage>) -> bool {
        loop {
            match inbox.try_recv() {
                Ok(message) => self.handle(message).await,
                Err(async_channel::TryRecvError::Empty) => return false,
                Err(async_channel::TryRecvError::Closed) => return true,
            }
        }
    }

    /// What one read returned: the inbox first (R1), then the batch; then the runs of first
    /// touches that are due, since a stream of faults may keep the loop here past their time.
    async fn on_read(&mut self, read: &mut Vec<UffdMessage>, inbox: &Receiver<LaneMessage>) {
        while let Ok(message) = inbox.try_recv() {
            if let LaneMessage::Checkpoint { .. } = message {
                // Everything before the checkpoint is in (the tracer sends nothing until it is
                // over): what was read must be resolved before the check.
                self.on_batch(std::mem::take(read)).await;
            }
            self.handle(message).await;
        }
        self.on_batch(std::mem::take(read)).await;
        if self.runs_due().is_some_and(|due| due <= Instant::now()) {
            self.flush_runs_due().await;
        }
    }

    /// One non-blocking read of the descriptor into `read` (emptied first).
    fn read_uffd(&mut self, read: &mut Vec<UffdMessage>) {
        read.clear();
        let Some(uffd) = self.uffd.as_ref() else {
            return;
        };
        if let Err(e) = uffd.read_pending(&mut self.buf, read) {
            // What was read before the error is off the kernel's queue: it must still be
            // handled, or its threads would never be woken.
            tracing::warn!(space = self.space, "reading the userfaultfd: {e}");
        }
    }

    /// At a checkpoint: resolves every message still queued on the descriptor. Nothing new can be
    /// queued meanwhile (every thread is stopped), and the tracer sends nothing to the inbox
    /// until the checkpoint is over, so there is no inbox to drain first.
    async fn drain_uffd(&mut self) {
        let mut read = Vec::new();
        loop {
            self.read_uffd(&mut read);
            if read.is_empty() {
                return;
            }
            self.on_batch(std::mem::take(&mut read)).await;
        }
    }

    /// One read's worth of messages. The kernel returns every pending fault before any pending
    /// event, so a fault in a batch may have been raised after an event of the same batch: the
    /// events' fences go up first.
    async fn on_batch(&mut self, batch: Vec<UffdMessage>) {
        for message in &batch {
            let ranges = match *message {
                UffdMessage::Fault { .. } => continue,
                UffdMessage::Unmap { start, end } | UffdMessage::Remove { start, end } => {
                    [Some(start..end), None]
                }
                UffdMessage::Remap { from, to, len } => {
                    // The event gives the old length; a move that grows has a longer new range.
                    let new_len = self
                        .begun
                        .values()
                        .find(|(nr, a)| *nr == libc::SYS_mremap && a[0] == from)
                        .map_or(len, |(_, a)| self.page_align(a[2]).max(len));
                    [
                        Some(from..from.saturating_add(len)),
                        Some(to..to.saturating_add(new_len)),
                    ]
                }
                UffdMessage::Fork => continue,
            };
            self.counters.layout_events += 1;
            tracing::trace!(space = self.space, ?message, "layout event");
            // With no syscall under way, its report is already forwarded: nothing to wait for.
            if self.begun.is_empty() {
                continue;
            }
            for range in ranges.into_iter().flatten() {
                self.fences.push(Fence {
                    range,
                    waiting: self.begun.keys().copied().collect(),
                });
            }
        }
        for message in batch {
            if let UffdMessage::Fault { .. } = message {
                self.on_fault(message).await;
            }
        }
    }

    /// A layout syscall has been reported: fences that waited only for it come down, and the
    /// faults they held are resolved now, after the report.
    async fn end_syscall(&mut self, tid: i32) {
        if self.begun.remove(&tid).is_none() {
            return;
        }
        if self.unfence(tid) {
            for fault in std::mem::take(&mut self.held) {
                self.on_fault(fault).await;
            }
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

    async fn handle(&mut self, message: LaneMessage) {
        match message {
            LaneMessage::Observed(stamped) => self.forward(stamped).await,
            LaneMessage::Begun { tid, nr, args } => {
                self.begun.insert(tid, (nr, args));
            }
            LaneMessage::Mapped { event, at_exit } => self.forward_mapped(event, at_exit).await,
            LaneMessage::Fence { tid, range } => {
                if self.begun.contains_key(&tid) {
                    self.fences.push(Fence {
                        range,
                        waiting: HashSet::from([tid]),
                    });
                }
            }
            LaneMessage::Ended { tid } => self.end_syscall(tid).await,
            LaneMessage::Left { pid } => {
                self.flush_runs().await;
                let left = SequencerMessage::Left {
                    space: self.space,
                    pid,
                };
                self.out.send(left).await;
            }
            LaneMessage::Discard {
                pid,
                tid,
                range,
                advice,
                at,
                at_exit,
            } => {
                // Discarded: the pages absent at the syscall's exit, less those resolved here
                // since (touched again after the drop; their lines have gone out). Not the page
                // tables as they are now: a later change (a move) may already be in them, and its
                // report comes after this line.
                let present = self.present_since(&range, at_exit);
                for (run, present) in procfs::split_by_presence(range, &present) {
                    if !present {
                        let event = Event::Discard {
                            pid,
                            tid,
                            space: self.space,
                            start: run.start,
                            end: run.end,
                            advice: advice.to_string(),
                        };
                        self.emit(Stamped { at, event }).await;
                    }
                }
            }
            LaneMessage::Stack { pid, range, limit } => self.stack = Some((pid, range, limit)),
            LaneMessage::Checkpoint { pid, point, done } => {
                self.drain_uffd().await;
                let probe = Probe {
                    pid,
                    pagemap: self.pagemap.clone(),
                    done,
                };
                let event = Event::Verify {
                    pid,
                    space: self.space,
                    point,
                    checked_pages: 0,
                    mismatched_pages: 0,
                    first_mismatches: Vec::new(),
                    skipped: None,
                };
                self.flush_runs().await;
                let check = SequencerMessage::Check(Stamped::now(event), probe);
                self.out.send(check).await;
            }
        }
    }

    /// Sends an observed event on, in lane order. A thread that ends ends its syscall too.
    async fn forward(&mut self, stamped: Stamped) {
        self.learn_threads(&stamped.event);
        let ended = match stamped.event {
            Event::ThreadExit { tid, .. } | Event::Exit { tid, .. } => Some(tid),
            _ => None,
        };
        self.emit(stamped).await;
        if let Some(tid) = ended {
            self.end_syscall(tid).await;
        }
    }

    /// A new tracked range, with the pages present in it now: a `map` split into runs of one
    /// state, or a `brk` followed by the heap pages already there.
    async fn forward_mapped(&mut self, stamped: Stamped, at_exit: PagesAtExit) {
        let at = stamped.at;
        let range = match &stamped.event {
            Event::Map { start, end, .. } => *start..*end,
            Event::Brk { old, new, .. } => *old..*new,
            _ => return self.forward(stamped).await,
        };
        // Present at the syscall's exit, or resolved here since (their lines are out, and this
        // one would undo them). Not the page tables as they are now: a later change may already
        // be in them, and its report comes after this line.
        let present = self.present_since(&range, at_exit);
        match stamped.event {
            Event::Map {
                pid,
                tid,
                space,
                prot,
                kind,
                path,
                tracked,
                ..
            } => {
                for (run, present) in procfs::split_by_presence(range, &present) {
                    let state = if present {
                        PageState::Resident
                    } else {
                        PageState::NotResident
                    };
                    let event = Event::Map {
                        pid,
                        tid,
                        space,
                        start: run.start,
                        end: run.end,
                        prot: prot.clone(),
                        kind,
                        path: path.clone(),
                        tracked,
                        state: Some(state),
                    };
                    self.forward(Stamped { at, event }).await;
                }
            }
            brk @ Event::Brk { pid, tid, .. } => {
                self.forward(Stamped { at, event: brk }).await;
                for run in present {
                    let event = Event::Map {
                        pid,
                        tid,
                        space: self.space,
                        start: run.start,
                        end: run.end,
                        prot: "rw-".into(),
                        kind: MapKind::Heap,
                        path: None,
                        tracked: true,
                        state: Some(PageState::Resident),
                    };
                    self.forward(Stamped { at, event }).await;
                }
            }
            other => self.forward(Stamped { at, event: other }).await,
        }
    }

    /// The pages of `range` present at the exit, with those this lane resolved after that read.
    fn present_since(&mut self, range: &Range<u64>, at_exit: PagesAtExit) -> Vec<Range<u64>> {
        // Reads reach the lane in the order they were made: what came before this one can go.
        while self
            .recent
            .front()
            .is_some_and(|&(t, _)| t < at_exit.read_at)
        {
            self.recent.pop_front();
        }
        let mut present: rangemap::RangeSet<u64> = at_exit.present.into_iter().collect();
        for &(_, page) in &self.recent {
            if range.contains(&page) {
                present.insert(page..page + self.page_size);
            }
        }
        present.iter().cloned().collect()
    }

    fn page_align(&self, n: u64) -> u64 {
        kernel::page_align(n, self.page_size)
    }

    fn learn_threads(&mut self, event: &Event) {
        match *event {
            Event::Exec { pid, .. } => {
                self.tids.insert(pid, pid);
            }
            Event::Thread { pid, child, .. } => {
                self.tids.insert(child, pid);
            }
            Event::Fork { child, .. } => {
                self.tids.insert(child, child);
            }
            Event::Map { pid, tid, .. } => {
                self.tids.insert(tid, pid);
            }
            Event::ThreadExit { tid, .. } => {
                self.tids.remove(&tid);
            }
            _ => {}
        }
    }

    fn pid_of(&mut self, tid: i32) -> i32 {
        if let Some(&pid) = self.tids.get(&tid) {
            return pid;
        }
        let pid = procfs::tgid(tid).unwrap_or(tid);
        self.tids.insert(tid, pid);
        pid
    }

    async fn on_fault(&mut self, message: UffdMessage) {
        let UffdMessage::Fault { addr, write, tid } = message else {
            return;
        };
        // A thread that faults inside its own layout syscall (MADV_POPULATE_*) did not cause
        // any fence's event: the syscall that did is blocked until its event is read, then
        // touches no registered page. Waiting for it would wait for this very fault.
        if self.begun.contains_key(&tid) && self.unfence(tid) {
            for fault in std::mem::take(&mut self.held) {
                Box::pin(self.on_fault(fault)).await;
            }
        }
        if self.fences.iter().any(|f| f.range.contains(&addr)) {
            tracing::trace!(space = self.space, addr, tid, "held behind a fence");
            self.held.push(message);
            return;
        }
        let uffd = self.uffd.as_ref().expect("fault read without a descriptor");
        match uffd.resolve(addr, write) {
            Resolution::Resolved => {
                tracing::trace!(space = self.space, addr, tid, write, "resolved");
                let at = Instant::now();
                if self.spin_cpus.is_some() {
                    self.faulted_at.insert(tid, at);
                }
                if self.recent.len() == RECENT_RESOLUTIONS {
                    self.recent.pop_front();
                }
                self.recent.push_back((at, addr));
                self.counters.resolved += 1;
                let pid = self.pid_of(tid);
                self.grow_stack(addr, tid, at).await;
                self.touched(TouchRun {
                    at,
                    pid,
                    tid,
                    start: addr,
                    end: addr + self.page_size,
                    write,
                    faults: 1,
                })
                .await;
            }
            Resolution::Refused(errno) => {
                self.counters.refused += 1;
                tracing::trace!(space = self.space, addr, errno, "resolution refused");
            }
            Resolution::Gone => {}
        }
    }

    /// Sends a line on in lane order, after the first touches held back so far.
    async fn emit(&mut self, stamped: Stamped) {
        self.flush_runs().await;
        self.out.send(SequencerMessage::Line(stamped)).await;
    }

    /// A first touch resolved: it extends its thread's run when adjacent, else goes in a new one.
    async fn touched(&mut self, touch: TouchRun) {
        if self.coalesce.is_none() {
            return self
                .out
                .send(SequencerMessage::Line(touch.into_stamped(self.space)))
                .await;
        }
        if let Some(i) = self.runs.iter().position(|r| r.tid == touch.tid) {
            let run = &mut self.runs[i];
            if run.write == touch.write && run.pid == touch.pid {
                if run.end == touch.start {
                    run.end = touch.end;
                    run.faults += 1;
                    return;
                }
                if run.start == touch.end {
                    run.start = touch.start;
                    run.faults += 1;
                    return;
                }
            }
            let ended = self.runs.remove(i);
            self.out
                .send(SequencerMessage::Line(ended.into_stamped(self.space)))
                .await;
        }
        self.runs.push(touch);
    }

    /// When the oldest held run must go out.
    fn runs_due(&self) -> Option<Instant> {
        Some(self.runs.first()?.at + self.coalesce?)
    }

    async fn flush_runs_due(&mut self) {
        let Some(window) = self.coalesce else { return };
        let now = Instant::now();
        // Oldest first: the due ones are a prefix.
        let due = self.runs.partition_point(|r| r.at + window <= now);
        for run in self.runs.drain(..due).collect::<Vec<_>>() {
            self.out
                .send(SequencerMessage::Line(run.into_stamped(self.space)))
                .await;
        }
    }

    async fn flush_runs(&mut self) {
        for run in std::mem::take(&mut self.runs) {
            self.out
                .send(SequencerMessage::Line(run.into_stamped(self.space)))
                .await;
        }
    }

    /// A resolved fault just below the main stack means the kernel grew it: report the growth as a
    /// mapping before the page that caused it.
    async fn grow_stack(&mut self, addr: u64, tid: i32, at: Instant) {
        let Some((pid, stack, limit)) = self.stack.clone() else {
            return;
        };
        // The kernel keeps mmap_base at least the stack limit below the stack's top
        // (mm/util.c, mmap_base()): a fault further down is mapped memory, not growth, and
        // costs no /proc read on this hot path.
        if addr >= stack.start || addr < stack.end.saturating_sub(limit) {
            return;
        }
        let grown = procfs::read_maps(pid).ok().and_then(|maps| {
            maps.into_iter()
                .find(|m| m.path == "[stack]" && m.start <= addr && m.end >= stack.start)
        });
        let Some(entry) = grown else { return };
        self.stack = Some((pid, entry.start..stack.end, limit));
        let event = Event::Map {
            pid,
            tid,
            space: self.space,
            start: entry.start,
            end: stack.start,
            prot: entry.prot.clone(),
            kind: MapKind::Stack,
            path: None,
            tracked: true,
            state: Some(PageState::NotResident),
        };
        self.emit(Stamped { at, event }).await;
    }
}
