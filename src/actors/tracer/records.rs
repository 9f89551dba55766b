//! `--faults records`: each thread of a space followed so gets a ring of the kernel's records of
//! its page faults, opened while it is stopped before it runs there (its space's creation, or
//! its first stop as a new thread), and handed to the space's lane, which reads it
//! (lane/records.rs). A ring lives until its thread exits or execs (the kernel drops the event
//! at the exec: `remove_on_exec`); the exec'd program's space gets a new one.
//!
//! A fork child's first ring is small ([`SMALL_RING`]) until it makes a layout syscall: most
//! fork children exec at once, and a ring's pages are allocated and mapped when it is opened
//! (about 1 µs a page here: 70 µs for a whole one, twice a fork and exec). One that goes on
//! gets a whole ring at its first layout syscall's stop, or at its first clone, fork or vfork
//! ([`Tracer::grow_ring`]: a stop of that very thread, whose ring it is). Not under
//! `attach`, whose threads are never stopped at a syscall: there every ring is whole.

use std::collections::{HashMap, HashSet};
use std::os::fd::AsRawFd;

use super::Tracer;
use crate::actors::lane::LaneMessage;
use crate::event::{SpaceId, WarningKind};
use crate::kernel::fault_records::{
    FaultRing, FaultsSeen, RECORD_BYTES, RecordsError, RingSize, monotonic_now,
};
use crate::test_hooks::{self, Fault};

/// A thread's ring: 8,192 records (256 KiB), the lane woken at an eighth of that. At about 2 µs
/// a fault (a first touch and its record), a thread that does nothing but fault fills it in
/// 16 ms: the lane's CPU may be taken that long on a loaded machine.
const RING: RingSize = RingSize {
    bytes: 8192 * RECORD_BYTES,
    wake_at: 1024 * RECORD_BYTES,
};

/// The rings of a space's threads beyond its first `FULL_RINGS` are smaller (2,048 records,
/// 64 KiB): pinned memory grows with the threads, and a thousand threads fault a thousand
/// times slower each than one.
const FULL_RINGS: usize = 64;
const SMALL_RING: RingSize = RingSize {
    bytes: 2048 * RECORD_BYTES,
    wake_at: 256 * RECORD_BYTES,
};

/// Which ring a thread gets first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FirstRing {
    Whole,
    /// A fork child's: [`SMALL_RING`], grown at its first layout syscall, clone or fork. What
    /// a child does between its fork and its exec (a shell's redirections, a `posix_spawn`'s
    /// setup) faults a few dozen pages; one that goes on without a syscall of ours (touching
    /// the memory it inherited) is read as fast as it faults while the lane has a CPU (65,536
    /// pages written by such a child, beside a job of `stress-ng --cpu 1`: no record lost).
    Provisional,
}

/// What the kernel lets the trace record, the rings each space was given, and the spaces told
/// that their threads' rings would take the descriptors the trace needs, or more pinned memory
/// than it may have (said once each).
pub(super) struct Unrecorded {
    /// `All` until the kernel refuses kernel-mode faults once: `UserOnly` from then on.
    seen: FaultsSeen,
    opened: HashMap<SpaceId, usize>,
    scarce: HashSet<SpaceId>,
    unpinned: HashSet<SpaceId>,
    /// The threads with a fork child's ring, and their space.
    provisional: HashMap<i32, SpaceId>,
}

impl Default for Unrecorded {
    fn default() -> Self {
        Self {
            seen: FaultsSeen::All,
            opened: HashMap::new(),
            scarce: HashSet::new(),
            unpinned: HashSet::new(),
            provisional: HashMap::new(),
        }
    }
}

impl Unrecorded {
    /// A space ended: nothing more is said or counted of it.
    pub(super) fn forget(&mut self, space: SpaceId) {
        self.opened.remove(&space);
        self.scarce.remove(&space);
        self.unpinned.remove(&space);
    }

    /// A thread ended.
    pub(super) fn thread_gone(&mut self, tid: i32) {
        self.provisional.remove(&tid);
    }
}

impl Tracer {
    /// Opens thread `tid`'s ring, if its space is followed by records, and sends it to the
    /// space's lane. One that cannot be had is said in a warning: that thread's pages are found
    /// by reads, without their thread. A ring whose descriptor would leave the trace too few
    /// (`kernel::fd_ceiling`) is closed again, and said once for the space.
    pub(super) fn record_faults(&mut self, pid: i32, tid: i32, space: SpaceId, first: FirstRing) {
        if !self.spaces.get(&space).is_some_and(|s| s.records()) {
            return;
        }
        let size = if test_hooks::fails(Fault::TinyRecordRing, Some(space)) {
            RingSize {
                bytes: 4096,
                wake_at: 4096,
            }
        } else if first == FirstRing::Provisional {
            self.unrecorded.provisional.insert(tid, space);
            SMALL_RING
        } else {
            self.ring_size(space)
        };
        let (ceiling, limit) = crate::kernel::fd_ceiling();
        let opened = self.open_ring(pid, tid, space, size);
        let Some(s) = self.spaces.get(&space) else {
            return;
        };
        match opened {
            Ok(ring) if ring.as_raw_fd() < ceiling => {
                *self.unrecorded.opened.entry(space).or_default() += 1;
                // `--threads`: its name now, while it is stopped (a later one is in its ring).
                let name = self
                    .config
                    .thread_names
                    .as_ref()
                    .and_then(|_| crate::kernel::procfs::comm(pid, tid));
                s.lane.send(LaneMessage::Records {
                    pid,
                    tid,
                    name,
                    ring,
                    replaces_before: None,
                })
            }
            Ok(_) => {
                if self.unrecorded.scarce.insert(space) {
                    self.warn(
                        Some(pid),
                        Some(space),
                        WarningKind::RecordsLost,
                        format!(
                            "thread {tid} and the next get no ring of fault records: a ring per \
                             thread would leave fewer than {} of the {limit} file descriptors \
                             RLIMIT_NOFILE allows to the trace (raise it: ulimit -n); their pages \
                             are found by reads, without their thread",
                            limit - ceiling
                        ),
                    );
                }
            }
            // Gone meanwhile: its death is reported, and it faults no more.
            Err(RecordsError::Open(e)) if e.raw_os_error() == Some(libc::ESRCH) => {
                tracing::debug!(tid, "a thread gone before its ring was opened");
            }
            // Past the pinned memory a user may have (`perf_event_mlock_kb` and
            // `RLIMIT_MEMLOCK`): every later ring fails the same way, said once a space.
            Err(RecordsError::Map(e)) => {
                if self.unrecorded.unpinned.insert(space) {
                    self.warn(
                        Some(pid),
                        Some(space),
                        WarningKind::RecordsLost,
                        format!(
                            "thread {tid} gets no ring of fault records, nor may later ones (said \
                             once): its memory cannot be pinned ({e}; kernel.perf_event_mlock_kb \
                             and ulimit -l bound it, root and CAP_IPC_LOCK are exempt); their \
                             pages are found by reads, without their thread"
                        ),
                    );
                }
            }
            Err(e) => self.warn(
                Some(pid),
                Some(space),
                WarningKind::RecordsLost,
                format!(
                    "thread {tid}'s page faults cannot be recorded ({e}): its pages are found by \
                     reads, without their thread"
                ),
            ),
        }
    }

    /// The whole ring a thread of `space` gets: smaller past its first `FULL_RINGS`.
    fn ring_size(&self, space: SpaceId) -> RingSize {
        if self.unrecorded.opened.get(&space).copied().unwrap_or(0) >= FULL_RINGS {
            SMALL_RING
        } else {
            RING
        }
    }

    /// At a layout syscall's stop of thread `tid`, or a clone's, fork's or vfork's: a fork
    /// child's ring is replaced by a whole one. The thread is stopped, so every fault it made
    /// is in the old ring, and the new one records from here on; the old one records on until
    /// the lane has drained and closed it, and what it holds from now on (the new one has it
    /// too) is dropped there (`replaces_before`). If no whole ring can be had, the small one
    /// stays.
    pub(super) fn grow_ring(&mut self, tid: i32) {
        let Some(space) = self.unrecorded.provisional.remove(&tid) else {
            return;
        };
        let Some(pid) = self
            .space_of(tid)
            .filter(|&(_, now)| now == space)
            .map(|(pid, _)| pid)
        else {
            return;
        };
        let size = self.ring_size(space);
        let (ceiling, _) = crate::kernel::fd_ceiling();
        match FaultRing::of_thread(tid, self.unrecorded.seen, size) {
            Ok(ring) if ring.as_raw_fd() < ceiling => {
                let before = monotonic_now();
                if let Some(s) = self.spaces.get(&space) {
                    s.lane.send(LaneMessage::Records {
                        pid,
                        tid,
                        name: None,
                        ring,
                        replaces_before: Some(before),
                    });
                }
            }
            Ok(_) => tracing::debug!(tid, "no descriptor for a whole ring: the small one stays"),
            Err(e) => tracing::debug!(tid, "a whole ring: {e}; the small one stays"),
        }
    }

    /// Opens thread `tid`'s ring. Once the kernel refuses kernel-mode faults
    /// (`perf_event_paranoid` 2, no `CAP_PERFMON`), user-mode ones, for this thread and every
    /// later one, said once.
    fn open_ring(
        &mut self,
        pid: i32,
        tid: i32,
        space: SpaceId,
        size: RingSize,
    ) -> Result<FaultRing, RecordsError> {
        let opened = match self.unrecorded.seen {
            FaultsSeen::All if test_hooks::fails(Fault::PerfKernel, None) => Err(
                RecordsError::Open(std::io::Error::from_raw_os_error(libc::EACCES)),
            ),
            seen => FaultRing::of_thread(tid, seen, size),
        };
        match opened {
            Err(RecordsError::Open(e))
                if self.unrecorded.seen == FaultsSeen::All
                    && matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) =>
            {
                let user = FaultRing::of_thread(tid, FaultsSeen::UserOnly, size);
                if user.is_ok() {
                    self.unrecorded.seen = FaultsSeen::UserOnly;
                    self.warn(
                        Some(pid),
                        Some(space),
                        WarningKind::RecordsLost,
                        format!(
                            "page faults inside system calls cannot be recorded ({e}; \
                             kernel.perf_event_paranoid is {}: 1, or CAP_PERFMON, records them): \
                             the pages made resident there are found by reads, without their \
                             thread",
                            crate::kernel::procfs::sysctl("kernel.perf_event_paranoid")
                                .unwrap_or_else(|| "?".into())
                        ),
                    );
                }
                user
            }
            other => other,
        }
    }
}
