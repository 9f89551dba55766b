//! The lane of one address space: it reads the space's userfaultfd, resolves first touches, and
//! is the one place where the tracer's layout changes and the space's fault resolutions are put
//! in order before they go to the sequencer.
//!
//! The rules (argued in docs/ordering.md): the tracer sends a change to this inbox *before* it
//! resumes the thread that made it, so any fault that depends on the change is raised after the
//! message is in the inbox; after each `read()` of the descriptor the lane therefore drains its
//! inbox before it resolves what it read (R1). Faults that a racing thread can raise before the
//! report of the change they land in are held behind fences until that report is in (R2).
//! Discards and the pages of new ranges are read from the page tables by the tracer at the exit
//! stop; the lane adds what it resolved since (R3, R4). First touches are gathered into runs
//! (R9).
//!
//! A lane that cannot read its userfaultfd releases it (the program's threads then fault
//! natively), says so in a `warning` line, and goes on forwarding the tracer's messages: the
//! space is traced as mappings only from then on.
//!
//! The files: this one is the actor (its state, its loop, reading the descriptor); `inbox.rs`
//! turns the tracer's messages into lines, `faults.rs` resolves what the descriptor says,
//! `attribution.rs` says whose each first touch is; `records.rs` reads the space's threads'
//! fault records under `--faults records` and names the thread of each page a read found;
//! `handle.rs` is the tracer's end, `woken.rs` the threads it woke that may not have run
//! since (which the tracer asks about before a change). The pure rules have files of their own, with their tests:
//! `fences.rs` (R2), `touches.rs` (R9), `pages.rs` (R3, R4), `guards.rs` (R4).

mod attribution;
mod faults;
mod fences;
mod guards;
mod handle;
mod inbox;
mod pages;
mod records;
mod touches;
mod woken;

use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

use async_channel::Receiver;
use userfaultfd::EventBuffer;

use self::attribution::Attribution;
use self::fences::Fences;
use self::guards::Guards;
pub use self::handle::LaneHandle;
pub use self::handle::ReadMark;
use self::handle::{INBOX_LATENCY, LaneWake};
pub use self::pages::PagesAtExit;
use self::pages::RecentResolutions;
use self::records::Records;
use self::touches::Touches;
pub use self::woken::Wake;
use super::sequencer::{SequencerHandle, SequencerMessage, Stamped};
use crate::event::{Event, SiteId, SpaceId, VerifyPoint, WarningKind};
use crate::kernel::fault_records::FaultRing;
use crate::kernel::procfs::Pagemap;
use crate::kernel::syscall::LayoutSyscall;
use crate::kernel::uffd::{AddressSpaceUffd, PageFault, UffdMessage, UffdPoller};
use crate::selection::ThreadNames;
use crate::stacks::TouchStacks;
use crate::test_hooks::{self, Fault};

/// Who dropped the pages of a `LaneMessage::Discard`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// A syscall, or a release the tracer did not stop: a `discard` line with this advice.
    Advice(&'static str),
    /// Reclaim, of pages freed with `MADV_FREE`: an `evicted` line, `how` `reclaim`.
    Reclaimed,
}

/// What the tracer tells a space's lane.
#[derive(Debug)]
pub enum LaneMessage {
    /// An event the tracer saw while the thread that caused it was stopped. Boxed, as is
    /// `Mapped`'s: an event is 360 bytes, and an inbox's queue is blocks of 31 messages, one
    /// of which every lane holds while it lives (a message of 424 bytes made it 13 KiB).
    Observed(Box<Stamped>),
    /// `madvise` dropped pages (or the kernel did: a look at memory under pressure): the ones
    /// gone are those absent at the exit (or the look's read), less those this lane resolved
    /// since (a concurrent touch refilled them, and their lines have gone out).
    Discard {
        pid: i32,
        tid: i32,
        range: Range<u64>,
        /// The `discard` line's `advice`; `Dropped::Reclaimed`: written as `evicted` lines.
        advice: Dropped,
        /// The syscall's stack (`--stacks`).
        site: Option<SiteId>,
        at: Instant,
        at_exit: PagesAtExit,
    },
    /// A mapping that grows down through faults, not through syscalls, by at most `limit` bytes
    /// below its top: the main thread's stack, or a `MAP_GROWSDOWN` mapping.
    Stack {
        pid: i32,
        range: Range<u64>,
        limit: u64,
    },
    /// A thread entered a layout syscall (it is stopped at the seccomp stop).
    Begun { tid: i32, call: LayoutSyscall },
    /// Faults in `range` wait until `tid`'s syscall has been reported: it is making the range
    /// fault through the lane, and its report is not in yet.
    Fence { tid: i32, range: Range<u64> },
    /// A new mapping (`map`) or heap growth (`brk`) over a tracked range, already registered,
    /// with the pages the tracer found present at the syscall's exit (`MAP_POPULATE`, locked
    /// memory, touches by other threads before registration). The lane adds those it resolved
    /// itself since (their lines went out before this one).
    Mapped {
        event: Box<Stamped>,
        at_exit: PagesAtExit,
    },
    /// That syscall's exit has been reported (everything it changed is before this message).
    Ended { tid: i32 },
    /// A process left this space (it exec'd): every line about it has been sent.
    Left { pid: i32 },
    /// Thread `tid` of this space is in a child PID namespace, where its id is `ns_tid`: the
    /// userfaultfd names it by that id. Sent before the thread runs, only for such threads.
    NsTid { tid: i32, ns_tid: i32 },
    /// A syscall whose thread is stopped at its entry will act with no event that would make
    /// it wait for the lane: a range was just unregistered for it, or it installs a guard
    /// region (fenced just before). Told once every resolution made before is done and stamped,
    /// and the messages before are taken in (docs/ordering.md, R3 and R4: a resolution across a
    /// later read of the page tables cannot be placed).
    Quiesce { done: SyncSender<()> },
    /// `--faults records`: a release (the next line) drops `pages`, which its entry's read
    /// found absent; a record at one of them made `before` the release began is of a page made
    /// resident since that no read saw (records.rs, `unread`).
    Unread {
        pages: rangemap::RangeSet<u64>,
        before: Instant,
    },
    /// `--faults records`: the kernel refused thread `tid`'s access at `addr` (a SIGSEGV or
    /// SIGBUS it raised): the thread's records there are of faults that made no page.
    Refused { tid: i32, addr: u64 },
    /// `--faults records`: thread `tid` of process `pid` records its page faults in `ring`
    /// from now on (sent before the thread runs in this space).
    Records {
        pid: i32,
        tid: i32,
        /// Its name as the ring was opened, if it could be read (`--threads`).
        name: Option<String>,
        ring: FaultRing,
        /// It replaces the thread's ring in this space (a fork child's, grown), which recorded
        /// on beside it from this `CLOCK_MONOTONIC` time: what it holds from then on is
        /// dropped.
        replaces_before: Option<u64>,
    },
    /// Every thread of the space is stopped (`--verify`): resolve what the descriptor still
    /// holds, then send the check on in lane order. `done` is told once the kernel's side has
    /// been read, and only then may the threads run again. A lane that cannot read its
    /// descriptor sends the check as skipped and drops `done` at once.
    Checkpoint {
        /// The process the check is written for (a line about a process, so that the
        /// sequencer orders it after the process's announcement).
        pid: i32,
        /// A stopped thread of the space, whose `/proc/TID/maps` the check reads.
        tid: i32,
        point: VerifyPoint,
        done: SyncSender<()>,
    },
}

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

/// Counts of what the descriptor said, for the debug log.
#[derive(Debug, Default)]
struct Counters {
    resolved: u64,
    refused: u64,
    /// Write faults left unfilled over a guard marker (R4).
    unfilled_markers: u64,
    layout_events: u64,
}

pub struct Lane {
    space: SpaceId,
    /// The space's userfaultfd; `None` for a space traced as mappings only, and once the lane
    /// has released it.
    uffd: Option<Arc<AddressSpaceUffd>>,
    pagemap: Option<Arc<Pagemap>>,
    inbox: Receiver<LaneMessage>,
    wake: Arc<LaneWake>,
    out: SequencerHandle,
    page_size: u64,
    busy_read: Duration,
    /// With `busy_read_needs_free_cpu`: the CPUs, and when each thread last faulted.
    spin_cpus: Option<usize>,
    faulted_at: HashMap<i32, Instant>,
    /// The latest stamp of the tracer's messages taken in: a line with that stamp is the
    /// tracer's observation (the sequencer's rule 4 holds those only).
    seen_until: Option<Instant>,
    /// Runs of first touches not yet sent (R9).
    touches: Touches,
    /// Lines on their way to the sequencer (see `send_out`).
    outgoing: Vec<Stamped>,
    /// Faults the fences let go, on their way to be resolved.
    ready: Vec<PageFault>,
    /// Who each faulting task is (attribution.rs).
    who: Attribution,
    /// The mappings that grow down (the main thread's stack, `MAP_GROWSDOWN` mappings): their
    /// process, their range as last written, and how far below its top a fault may still be
    /// growth (the stack limit, less what another mapping below it takes).
    stacks: Vec<(i32, Range<u64>, u64)>,
    /// Syscalls under way, fences, held faults (R2).
    fences: Fences,
    /// Where a guard marker may be: write fills there look first (R4).
    guards: Guards,
    /// Pages resolved lately (R3, R4).
    recent: RecentResolutions,
    counters: Counters,
    /// Where reads of the descriptor land.
    buf: EventBuffer,
    /// Why the lane can no longer read its userfaultfd, once it cannot.
    failed: Option<String>,
    /// `--touch-stacks`: the stacks of sampled first touches.
    touch_stacks: Option<TouchStacks>,
    /// `--threads`: where the names of the faulting threads are noted.
    thread_names: Option<Arc<ThreadNames>>,
    /// `--faults records`: the rings of the space's threads, once it has one, and what wakes
    /// the lane when they fill.
    records: Option<Records>,
    records_wake: Arc<tokio::sync::Notify>,
    /// The space's rings could not be had (said once): later threads' are dropped.
    records_failed: bool,
}

impl Lane {
    pub fn new(
        space: SpaceId,
        uffd: Option<Arc<AddressSpaceUffd>>,
        pagemap: Option<Arc<Pagemap>>,
        out: SequencerHandle,
        config: LaneConfig,
        touch_stacks: Option<TouchStacks>,
    ) -> (Self, LaneHandle) {
        let (handle, inbox, wake) = handle::inbox(config.capacity);
        let actor = Self {
            space,
            uffd,
            pagemap,
            inbox,
            wake,
            out,
            page_size: config.page_size,
            busy_read: config.busy_read,
            spin_cpus: config
                .busy_read_needs_free_cpu
                .then(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
            faulted_at: HashMap::new(),
            seen_until: None,
            touches: Touches::new(space, config.coalesce),
            outgoing: Vec::new(),
            ready: Vec::new(),
            who: Attribution::new(space),
            stacks: Vec::new(),
            fences: Fences::new(),
            guards: Guards::default(),
            recent: RecentResolutions::new(config.page_size),
            counters: Counters::default(),
            buf: EventBuffer::new(64),
            failed: None,
            touch_stacks,
            thread_names: None,
            records: None,
            records_wake: Arc::new(tokio::sync::Notify::new()),
            records_failed: false,
        };
        (actor, handle)
    }

    /// `--threads`: notes the name of each thread whose fault it resolves, for the state actor.
    pub fn noting_thread_names(mut self, names: Option<Arc<ThreadNames>>) -> Self {
        self.thread_names = names;
        self
    }

    /// The lane's loop. What it awaits on a message, a read or a timer is boxed: a future holds
    /// the largest of the futures it may await, and a lane that waits (most of them, most of
    /// the time) would hold that much for nothing (take_inbox's is 6.6 KiB, of the 11 KiB a
    /// lane's task took unboxed; docs/performance.md, "Memory").
    pub async fn run(mut self) {
        let mut poller = match self.uffd.clone() {
            Some(uffd) => match self.poll(uffd) {
                Ok(poller) => Some(poller),
                Err(e) => {
                    Box::pin(self.fail(e.to_string())).await;
                    None
                }
            },
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
        let records_wake = self.records_wake.clone();
        let again = tokio::time::sleep(INBOX_LATENCY);
        tokio::pin!(again);
        let mut again_armed = true;
        loop {
            if self.failed.is_some()
                && let Some(uffd) = self.uffd.take()
            {
                // The runtime lets go of the descriptor before it is released.
                drop(poller.take());
                release(self.space, &uffd);
            }
            // Say whether an `Ended` must wake us; then take in what was sent before the tracer
            // could see it (pairs with the fence in `LaneHandle::send`).
            let holding = self.fences.holding();
            wake.holding.store(holding, Ordering::SeqCst);
            if holding {
                std::sync::atomic::fence(Ordering::SeqCst);
                if !inbox.is_empty() {
                    if Box::pin(self.take_inbox(&inbox)).await {
                        break;
                    }
                    continue;
                }
            }
            let due = self.touches.due();
            if due != timer_for {
                if let Some(due) = due {
                    flush_timer.as_mut().reset(due.into());
                }
                timer_for = due;
            }
            let readable = async {
                match &poller {
                    Some(poller) => poller.readable().await,
                    None => std::future::pending().await,
                }
            };
            let failure = tokio::select! {
                biased;
                () = wake.notify.notified() => {
                    if Box::pin(self.take_inbox(&inbox)).await {
                        break;
                    }
                    again.as_mut().reset((Instant::now() + INBOX_LATENCY).into());
                    again_armed = true;
                    None
                }
                () = &mut again, if again_armed => {
                    again_armed = false;
                    if Box::pin(self.take_inbox(&inbox)).await {
                        break;
                    }
                    None
                }
                () = records_wake.notified() => {
                    Box::pin(self.take_records()).await;
                    None
                }
                () = &mut flush_timer, if timer_for.is_some() => {
                    self.touches.flush_due(Instant::now(), &mut self.outgoing);
                    Box::pin(self.send_out()).await;
                    None
                }
                guard = readable => match guard {
                    Err(e) => Some(format!("waiting for its userfaultfd to be readable: {e}")),
                    Ok(mut guard) => match self.read_uffd(&mut read) {
                        Ok(()) if read.is_empty() => {
                            guard.clear_ready();
                            None
                        }
                        Ok(()) => {
                            drop(guard);
                            Box::pin(self.on_read(&mut read, &inbox)).await;
                            Box::pin(self.read_on(&mut read, &inbox)).await.err()
                        }
                        Err(e) => {
                            drop(guard);
                            // What was read before the error is off the kernel's queue: it
                            // is handled all the same.
                            Box::pin(self.on_read(&mut read, &inbox)).await;
                            Some(e.to_string())
                        }
                    },
                }
            };
            if let Some(cause) = failure {
                Box::pin(self.fail(cause)).await;
            }
        }
        if self.failed.is_some()
            && let Some(uffd) = self.uffd.take()
        {
            drop(poller);
            release(self.space, &uffd);
        }
        Box::pin(self.say_records_lost_at_end()).await;
        self.touches.flush(&mut self.outgoing);
        Box::pin(self.send_out()).await;
        tracing::debug!(space = self.space, counters = ?self.counters, "lane done");
    }

    /// Registers the descriptor with the runtime.
    fn poll(&self, uffd: Arc<AddressSpaceUffd>) -> io::Result<UffdPoller> {
        if test_hooks::fails(Fault::LaneRegister, Some(self.space)) {
            return Err(io::Error::other(
                "registering the userfaultfd with the runtime: made to fail by the test \
                 (lane-register)",
            ));
        }
        UffdPoller::new(uffd)
    }

    /// After a batch: faults come in streams, the next one usually raised a few microseconds
    /// after its thread is woken. Reading again for a moment before going back to sleep spares
    /// both sides a wake-up through the scheduler.
    async fn read_on(
        &mut self,
        read: &mut Vec<UffdMessage>,
        inbox: &Receiver<LaneMessage>,
    ) -> Result<(), String> {
        let mut until = Instant::now() + self.busy_read_now();
        while Instant::now() < until {
            let result = self.read_uffd(read);
            if read.is_empty() {
                result.map_err(|e| e.to_string())?;
                std::hint::spin_loop();
                continue;
            }
            self.on_read(read, inbox).await;
            result.map_err(|e| e.to_string())?;
            until = Instant::now() + self.busy_read_now();
        }
        Ok(())
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
                Ok(message) => {
                    self.wake.credits.add_permits(1);
                    self.handle(message).await
                }
                Err(async_channel::TryRecvError::Empty) => return false,
                Err(async_channel::TryRecvError::Closed) => return true,
            }
        }
    }

    /// What one read returned: the inbox first (R1), then the batch; then the runs of first
    /// touches that are due, since a stream of faults may keep the loop here past their time.
    async fn on_read(&mut self, read: &mut Vec<UffdMessage>, inbox: &Receiver<LaneMessage>) {
        while let Ok(message) = inbox.try_recv() {
            self.wake.credits.add_permits(1);
            if let LaneMessage::Checkpoint { .. } = message {
                // Everything before the checkpoint is in (the tracer sends nothing until it is
                // over): what was read must be resolved before the check.
                self.on_batch(std::mem::take(read)).await;
            }
            self.handle(message).await;
        }
        self.on_batch(std::mem::take(read)).await;
        self.read_handled();
        if self.touches.due().is_some_and(|due| due <= Instant::now()) {
            self.touches.flush_due(Instant::now(), &mut self.outgoing);
            self.send_out().await;
        }
    }

    /// One non-blocking read of the descriptor into `read` (emptied first). On an error, what
    /// was read before it is in `read` all the same. The read is counted before it is made,
    /// and handled at `read_handled` (see `LaneWake::reads_begun`); one that returns nothing is
    /// handled at once.
    fn read_uffd(&mut self, read: &mut Vec<UffdMessage>) -> io::Result<()> {
        read.clear();
        if self.uffd.is_none() || self.failed.is_some() {
            return Ok(());
        }
        self.wake.reads_begun.fetch_add(1, Ordering::SeqCst);
        let result = self.read_uffd_from(read);
        if read.is_empty() {
            self.read_handled();
        }
        result
    }

    /// What the last read returned has been handled (resolved, or held behind fences).
    fn read_handled(&self) {
        let begun = self.wake.reads_begun.load(Ordering::SeqCst);
        self.wake.reads_handled.store(begun, Ordering::SeqCst);
    }

    fn read_uffd_from(&mut self, read: &mut Vec<UffdMessage>) -> io::Result<()> {
        let Some(uffd) = self.uffd.as_ref() else {
            return Ok(());
        };
        if test_hooks::fails(Fault::LaneRead, Some(self.space)) {
            return Err(io::Error::other(
                "reading its userfaultfd: made to fail by the test (lane-read)",
            ));
        }
        uffd.read_pending(&mut self.buf, read)
            .map_err(|e| io::Error::new(e.kind(), format!("reading its userfaultfd: {e}")))
    }

    /// At a checkpoint: resolves every message still queued on the descriptor. Nothing new can be
    /// queued meanwhile (every thread is stopped), and the tracer sends nothing to the inbox
    /// until the checkpoint is over, so there is no inbox to drain first. A read that fails
    /// fails the lane.
    async fn drain_uffd(&mut self) {
        let mut read = Vec::new();
        loop {
            let result = self.read_uffd(&mut read);
            let empty = read.is_empty();
            self.on_batch(std::mem::take(&mut read)).await;
            self.read_handled();
            if let Err(e) = result {
                return self.fail(e.to_string()).await;
            }
            if empty {
                return;
            }
        }
    }

    /// The lane cannot read its userfaultfd. It says so in a line of its own, resolves nothing
    /// from here on, and forwards the tracer's messages as they come (mappings only). The run
    /// loop then releases the descriptor, at its next turn, once the runtime has let go of it:
    /// every thread of the program waiting on it goes on, and faults natively from then on.
    async fn fail(&mut self, cause: String) {
        if self.failed.is_some() {
            return;
        }
        // Their threads are woken by the release.
        let dropped = self.fences.forget_held();
        tracing::error!(
            space = self.space,
            dropped,
            "the lane cannot read its userfaultfd: {cause}; mappings only from here on"
        );
        let warning = Event::Warning {
            pid: None,
            space: Some(self.space),
            what: WarningKind::LaneFailed,
            message: format!(
                "the lane of space {} cannot read its userfaultfd ({cause}): it let go of it, \
                 and the space is traced as mappings only from here on",
                self.space
            ),
        };
        self.emit(Stamped::now(warning)).await;
        self.failed = Some(cause);
    }

    /// Sends a line on in lane order, after the first touches held back so far (R9).
    async fn emit(&mut self, stamped: Stamped) {
        self.touches.line(stamped, &mut self.outgoing);
        self.send_out().await;
    }

    /// Sends the lines gathered in `outgoing`, in order.
    async fn send_out(&mut self) {
        for stamped in self.outgoing.drain(..) {
            // A line stamped as the tracer's message just taken in is that message's change,
            // as the tracer saw it; the lane's own lines (first touches, its warnings) are not.
            let seen = (self.seen_until == Some(stamped.at)).then_some(stamped.at);
            self.out
                .send(SequencerMessage::FromLane { stamped, seen })
                .await;
        }
    }
}

/// Lets go of a space's userfaultfd for good (`AddressSpaceUffd::release`).
fn release(space: SpaceId, uffd: &AddressSpaceUffd) {
    match uffd.release() {
        Ok(()) => tracing::debug!(space, fd = uffd.as_raw_fd(), "userfaultfd released"),
        // Nothing more can be done from here: the threads that wait on it wait until the
        // descriptor is closed, when the last handle on it goes (the tracer's, at the space's end).
        Err(e) => tracing::error!(space, "cannot release the userfaultfd: {e}"),
    }
}

impl Drop for Lane {
    /// However the lane ends (its inbox closed, or a panic), a tracer waiting for room in its
    /// inbox stops waiting, and later messages are dropped at once.
    fn drop(&mut self) {
        self.wake.credits.close();
        self.inbox.close();
    }
}
