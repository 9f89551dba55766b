//! Address spaces: making one (a userfaultfd injected into the tracee, a lane, a snapshot of
//! its mappings with their present pages), registering and describing mappings, and ending one.

use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use rangemap::RangeSet;

use super::Tracer;
use super::USER_SPACE_END;
use super::scans::{Scans, everywhere};
use crate::actors::lane::{Lane, LaneHandle, LaneMessage, PagesAtExit};
use crate::actors::sequencer::{SequencerMessage, Stamped};
use crate::event::{Event, Follow, MapCause, MapKind, PageState, SpaceId, WarningKind};
use crate::kernel::inject::{self, InjectError, Injection};
use crate::kernel::procfs::{self, MapsEntry, Pagemap};
use crate::kernel::uffd::AddressSpaceUffd;
use crate::test_hooks::{self, Fault};

pub(super) struct Space {
    pub(super) lane: LaneHandle,
    pub(super) uffd: Option<Arc<AddressSpaceUffd>>,
    /// None only if the process was gone before it could be opened.
    pub(super) pagemap: Option<Arc<Pagemap>>,
    /// The program break as the last brk returned it (the heap is per mm, not per thread).
    pub(super) brk: u64,
    /// Processes living in this space (more than one after vfork or clone(CLONE_VM)).
    pub(super) members: usize,
    /// The ranges followed by scans rather than faults (transparent huge pages).
    pub(super) scans: RefCell<Scans>,
}

/// Where a new space comes from.
pub(super) enum Origin {
    Exec { former_tid: i32 },
    Fork(Inherited),
}

/// What a fork child's space has of its parent's besides its mappings.
#[derive(Debug)]
pub(super) struct Inherited {
    /// The parent's program break (the child's mm is a copy, brk included).
    pub(super) brk: u64,
    /// The parent's ranges followed by scans: the child's copies have the same advice.
    pub(super) scanned: RangeSet<u64>,
    /// The parent's mappings that grow down: the child's copies do too.
    pub(super) stacks: RangeSet<u64>,
}

/// Where a new mapping is, and who made it.
pub(super) struct MapAt {
    pub(super) pid: i32,
    pub(super) tid: i32,
    pub(super) space: SpaceId,
    pub(super) range: Range<u64>,
    /// Set when the line is not the syscall's own change (a range described again).
    pub(super) cause: Option<MapCause>,
}

/// A mapping to be written, as the syscall or `/proc/PID/maps` describes it.
pub(super) struct NewMapping {
    pub(super) prot: String,
    pub(super) kind: MapKind,
    pub(super) path: Option<String>,
    /// How it is followed: registered with the space's userfaultfd, or scanned; None if not.
    pub(super) follow: Option<Follow>,
}

impl Tracer {
    pub(super) fn allocate_space(&mut self) -> SpaceId {
        let id = self.next_space;
        self.next_space += 1;
        id
    }

    /// Gives a stopped process (at exec's exit or a fork child's attach stop) its own space:
    /// a userfaultfd, a lane, and the mappings it has, with their present pages.
    pub(super) fn create_space(
        &mut self,
        tid: i32,
        id: SpaceId,
        origin: Origin,
    ) -> Result<(), InjectError> {
        let page_size = self.config.lane.page_size;
        // The space is made whatever happens below: its creation is already announced (or about
        // to be), and the process's exit needs a lane to be reported on.
        let mut died = None;
        let mut warnings = Vec::new();
        // A 32-bit program's layout syscalls are another ABI's, which the filter lets through
        // undecoded, and a syscall injected into it would run as another ABI's syscall: its
        // memory is not followed at all, only its process lines.
        let foreign = procfs::runs_32_bit(tid);
        if foreign {
            warnings.push((
                WarningKind::NotFollowed,
                "a 32-bit program: its memory is not followed (only its fork, exec and exit \
                 lines)"
                    .to_string(),
            ));
        }
        // Read first: the injection needs the vDSO's place, and changes no mapping.
        let maps = if foreign {
            Ok(Vec::new())
        } else {
            procfs::read_maps(tid)
        };
        let (maps, maps_error) = match maps {
            Ok(maps) => (maps, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        let uffd = if self.config.faults && !foreign {
            let injected = match maps_error {
                // The injection borrows a `syscall` instruction from the vDSO, found in the maps.
                Some(e) => Err(InjectError::Io(std::io::Error::new(
                    e.kind(),
                    format!("cannot read /proc/{tid}/maps: {e}"),
                ))),
                None => self.inject_uffd(tid, &maps),
            };
            match injected {
                Ok(u) => Some(Arc::new(u)),
                // It is dying (killed during the injection): nothing of it is left to follow,
                // and its end is still to be reported.
                Err(InjectError::Io(e)) if e.raw_os_error() == Some(libc::ESRCH) => None,
                Err(InjectError::Io(e)) => {
                    warnings.push((
                        WarningKind::NoUserfaultfd,
                        format!("no userfaultfd for this space ({e}): mappings only"),
                    ));
                    None
                }
                Err(InjectError::Died(status)) => {
                    died = Some(status);
                    None
                }
            }
        } else {
            None
        };
        let pagemap = match Pagemap::open(tid, page_size) {
            _ if foreign => None,
            Ok(p) => Some(Arc::new(p)),
            Err(e) => {
                if died.is_none() {
                    warnings.push((
                        WarningKind::PagesUnknown,
                        format!("cannot open /proc/{tid}/pagemap ({e}): its pages are unknown"),
                    ));
                }
                None
            }
        };
        let lane = self.spawn_lane(id, uffd.clone(), pagemap.clone());
        // Exec made the new program's mappings; a fork child's are its parent's, described again.
        let cause = match origin {
            Origin::Exec { .. } => None,
            Origin::Fork(_) => Some(MapCause::Redescribe),
        };
        let (brk, scanned, stacks) = match origin {
            Origin::Exec { former_tid } => {
                lane.send(LaneMessage::Observed(Stamped::now(Event::Exec {
                    pid: tid,
                    tid: former_tid,
                    space: id,
                    path: procfs::exe(tid),
                    argv: procfs::cmdline(tid),
                })));
                let brk = maps
                    .iter()
                    .find(|e| e.path == "[heap]")
                    .map(|e| e.end)
                    .or_else(|| procfs::start_brk(tid))
                    .unwrap_or(0);
                (brk, RangeSet::new(), RangeSet::new())
            }
            Origin::Fork(inherited) => {
                if let Some(birth) = self.announce.remove(&id) {
                    lane.observed(birth);
                }
                // The child starts as a copy of the parent in the stream; its own page tables
                // then describe it whole (ranges it did not inherit, MADV_DONTFORK, are gone).
                lane.observed(Event::Unmap {
                    pid: tid,
                    tid,
                    space: id,
                    start: 0,
                    end: USER_SPACE_END,
                    cause: Some(MapCause::Redescribe),
                });
                (inherited.brk, inherited.scanned, inherited.stacks)
            }
        };
        self.spaces.insert(
            id,
            Space {
                lane,
                uffd,
                pagemap,
                brk,
                members: 1,
                scans: RefCell::new({
                    // The parent's, as the tracer had them when it handled the fork: what is
                    // no longer private anonymous memory in the child is not followed.
                    let mut scans = Scans::new(scanned, stacks);
                    scans.keep_private_anon(&everywhere(), &maps);
                    scans
                }),
            },
        );
        for (what, message) in warnings {
            self.warn(Some(tid), Some(id), what, message);
        }
        self.send_snapshot(id, tid, &maps, cause);
        match died {
            Some(status) => Err(InjectError::Died(status)),
            None => Ok(()),
        }
    }

    /// What a fork child of a process in `parent` has of its space (nothing without one).
    pub(super) fn inherited_from(&self, parent: Option<SpaceId>) -> Inherited {
        let parent = parent.and_then(|s| self.spaces.get(&s));
        Inherited {
            brk: parent.map_or(0, |s| s.brk),
            scanned: parent
                .map(|s| s.scans.borrow().followed.clone())
                .unwrap_or_default(),
            stacks: parent
                .map(|s| s.scans.borrow().stacks.clone())
                .unwrap_or_default(),
        }
    }

    /// A lane for a space announced by a `fork` line but never made (its process died before its
    /// first stop), following nothing: its birth line first if it was kept for it.
    pub(super) fn unborn_space_lane(&mut self, id: SpaceId) -> LaneHandle {
        let lane = self.spawn_lane(id, None, None);
        if let Some(birth) = self.announce.remove(&id) {
            lane.observed(birth);
        }
        lane
    }

    /// Starts a space's lane under the supervisor: a lane that panics releases its userfaultfd
    /// (the program's threads fault natively again) and ends the trace.
    fn spawn_lane(
        &self,
        id: SpaceId,
        uffd: Option<Arc<AddressSpaceUffd>>,
        pagemap: Option<Arc<Pagemap>>,
    ) -> LaneHandle {
        let (actor, lane) = Lane::new(
            id,
            uffd.clone(),
            pagemap,
            self.sequencer.clone(),
            self.config.lane,
        );
        let supervisor = self.supervisor.clone();
        let sequencer = self.sequencer.clone();
        self.runtime.spawn(async move {
            let name = format!("the lane of space {id}");
            let Err(failure) = supervisor.watch(&name, actor.run()).await else {
                return;
            };
            if let Some(uffd) = uffd
                && let Err(e) = uffd.release()
            {
                tracing::warn!(
                    space = id,
                    "releasing the userfaultfd of a failed lane: {e}"
                );
            }
            let warning = Event::Warning {
                pid: None,
                space: Some(id),
                what: WarningKind::ActorFailed,
                message: failure,
            };
            sequencer
                .send(SequencerMessage::Line(Stamped::now(warning)))
                .await;
        });
        lane
    }

    /// Creates a userfaultfd inside the tracee (so that it is bound to the tracee's mm), takes a
    /// copy, and closes the tracee's: if we die, the kernel releases everything.
    fn inject_uffd(
        &mut self,
        tid: i32,
        maps: &[MapsEntry],
    ) -> Result<AddressSpaceUffd, InjectError> {
        let site = self.site.address(tid, maps)?;
        let mut injection = Injection::begin(nix::unistd::Pid::from_raw(tid), site)?;
        let fd = match inject::create_userfaultfd(&mut injection) {
            Ok(fd) => fd,
            Err(InjectError::Io(e)) => {
                self.finish_injection(tid, injection)?;
                return Err(InjectError::Io(e));
            }
            Err(died) => return Err(died),
        };
        let ours = inject::take_fd(tid, fd);
        let closed = injection.syscall(libc::SYS_close, &[fd as u64]);
        self.finish_injection(tid, injection)?;
        closed?;
        Ok(AddressSpaceUffd::handshake(
            ours?,
            self.config.lane.page_size,
        )?)
    }

    /// Gives the tracee its registers back; a group stop that began meanwhile is kept.
    fn finish_injection(&mut self, tid: i32, injection: Injection) -> Result<(), InjectError> {
        if injection.finish()?
            && let Some(t) = self.threads.get_mut(&tid)
        {
            t.group_stopped = true;
        }
        Ok(())
    }

    /// A process left a space (exit or exec); the last one out ends it.
    pub(super) fn leave_space(&mut self, id: SpaceId) {
        if let Some(space) = self.spaces.get_mut(&id) {
            space.members = space.members.saturating_sub(1);
            if space.members == 0 {
                // Dropping the lane handle ends the lane once it has forwarded everything.
                self.spaces.remove(&id);
            }
        }
    }

    /// Describes a space whole, as its page tables say: every mapping, with its present pages.
    fn send_snapshot(&self, id: SpaceId, tid: i32, maps: &[MapsEntry], cause: Option<MapCause>) {
        for entry in maps {
            let at = MapAt {
                pid: tid,
                tid,
                space: id,
                range: entry.start..entry.end,
                cause,
            };
            let tracked = self.send_maps_entry(at, entry);
            if self.grows_down(id, entry)
                && tracked
                && let Some(space) = self.spaces.get(&id)
            {
                // Unlimited: the legacy layout keeps mappings far from the stack.
                let limit = procfs::stack_limit(tid).unwrap_or(1 << 40);
                space.lane.send(LaneMessage::Stack {
                    pid: tid,
                    range: entry.start..entry.end,
                    limit,
                });
            }
        }
    }

    /// Sends `at.range` (all or part of a `/proc/PID/maps` entry) to its lane as that mapping,
    /// registered if it is private anonymous memory; whether it is tracked.
    pub(super) fn send_maps_entry(&self, at: MapAt, entry: &MapsEntry) -> bool {
        // The whole mapping, never a part: registering part of an unregistered mapping (another
        // thread's, not reported yet) would split it, and the program could then see EFAULT from
        // an mremap that spans the two halves.
        let follow = if entry.is_private_anon() {
            let grows_down = self.grows_down(at.space, entry);
            self.follow(
                at.space,
                entry.start..entry.end,
                at.range.clone(),
                grows_down,
            )
        } else {
            None
        };
        let mapping = NewMapping {
            prot: entry.prot.clone(),
            kind: stream_kind(entry),
            path: stream_path(entry),
            follow,
        };
        self.send_map(at, mapping)
    }

    /// Whether a mapping grows down: the main stack, or one the space knows was mapped
    /// `MAP_GROWSDOWN` (`/proc/PID/maps` does not say), by it or by a parent before a fork.
    fn grows_down(&self, space: SpaceId, entry: &MapsEntry) -> bool {
        entry.path == "[stack]"
            || self
                .spaces
                .get(&space)
                .is_some_and(|s| s.scans.borrow().stacks.overlaps(&(entry.start..entry.end)))
    }

    /// Follows a private anonymous mapping, of which a line describes `described`: by scans if
    /// it may get huge pages (scans.rs), or registered (whole) with the space's userfaultfd;
    /// None if it cannot be followed. Only what the line describes is followed by scans: the
    /// rest of the mapping may be another syscall's, not reported yet.
    pub(super) fn follow(
        &self,
        space: SpaceId,
        mapping: Range<u64>,
        described: Range<u64>,
        grows_down: bool,
    ) -> Option<Follow> {
        if grows_down && let Some(s) = self.spaces.get(&space) {
            s.scans.borrow_mut().stacks.insert(mapping.clone());
        }
        if self.scans_follow(space, &mapping, grows_down) {
            let s = self.spaces.get(&space)?;
            s.scans.borrow_mut().followed.insert(described);
            Some(Follow::Scans)
        } else {
            self.register(space, mapping).then_some(Follow::Faults)
        }
    }

    /// Registers a range with the space's userfaultfd again after the syscall that moved or
    /// grew it (or that it was given back to the kernel for), unless it is followed by scans:
    /// then it is made sure not to be (a description while the syscall ran may have registered
    /// the mapping where it landed, before it was known to be followed by scans).
    pub(super) fn register_again(&self, space: SpaceId, range: Range<u64>) {
        let Some(s) = self.spaces.get(&space) else {
            return;
        };
        if !s.scans.borrow().followed.overlaps(&range) {
            self.register(space, range);
        } else if let Some(uffd) = s.uffd.as_ref()
            && let Err(e) = uffd.unregister(range.start, range.end)
        {
            tracing::debug!(space, ?range, "a range followed by scans: {e}");
        }
    }

    /// Registers a range with the space's userfaultfd; whether it is now followed. A space
    /// whose page tables cannot be read registers nothing: its pages present at each change
    /// would be unknown (its creation's warning said so).
    pub(super) fn register(&self, space: SpaceId, range: Range<u64>) -> bool {
        let Some(uffd) = self
            .spaces
            .get(&space)
            .filter(|s| s.pagemap.is_some())
            .and_then(|s| s.uffd.as_ref())
        else {
            return false;
        };
        match uffd.register(range.start, range.end) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(space, ?range, "not tracked: {e}");
                false
            }
        }
    }

    /// Sends a new mapping to its lane; whether it is tracked. Its pages can already be present
    /// (`MAP_POPULATE`, locked memory, a space seen for the first time, or a touch by another
    /// thread before the range was registered): for a tracked range the lane reads which, in its
    /// own order (docs/ordering.md). A range whose pages cannot be read is unregistered and
    /// written untracked.
    pub(super) fn send_map(&self, at: MapAt, mapping: NewMapping) -> bool {
        let MapAt {
            pid,
            tid,
            space: space_id,
            range,
            cause,
        } = at;
        let Some(space) = self.spaces.get(&space_id) else {
            tracing::debug!(space_id, "a mapping for a space that is gone");
            return false;
        };
        let at_exit = mapping
            .follow
            .and_then(|f| self.present_in_followed(f, pid, space_id, range.clone()));
        let tracked = at_exit.is_some();
        let event = Event::Map {
            pid,
            tid,
            space: space_id,
            start: range.start,
            end: range.end,
            prot: mapping.prot,
            kind: mapping.kind,
            path: mapping.path,
            tracked,
            state: tracked.then_some(PageState::NotResident),
            follow: mapping.follow.filter(|_| tracked).unwrap_or_default(),
            cause,
        };
        match at_exit {
            Some(at_exit) => space.lane.send(LaneMessage::Mapped {
                event: Stamped::now(event),
                at_exit,
            }),
            None => space.lane.observed(event),
        }
        tracked
    }

    /// The pages present now in a range just followed. A registered one whose pages cannot be
    /// read is unregistered again; a scanned one's are what the stream has there from now on
    /// (scans.rs), and one whose pages cannot be read is followed no more.
    pub(super) fn present_in_followed(
        &self,
        follow: Follow,
        pid: i32,
        space: SpaceId,
        range: Range<u64>,
    ) -> Option<PagesAtExit> {
        match follow {
            Follow::Faults => self.present_or_unregister(pid, space, range),
            Follow::Scans => {
                let pages = self.present_at(pid, space, range.clone());
                if let Some(s) = self.spaces.get(&space) {
                    let mut scans = s.scans.borrow_mut();
                    match &pages {
                        Some(pages) => scans.described(range, &pages.present),
                        None => scans.forget(range),
                    }
                }
                pages
            }
        }
    }

    /// The pages of a registered range present now; if they cannot be read, the range is
    /// unregistered again, so that nothing about it is claimed.
    pub(super) fn present_or_unregister(
        &self,
        pid: i32,
        space: SpaceId,
        range: Range<u64>,
    ) -> Option<PagesAtExit> {
        let pages = self.present_at(pid, space, range.clone());
        if pages.is_none()
            && let Some(uffd) = self.spaces.get(&space).and_then(|s| s.uffd.as_ref())
            && let Err(e) = uffd.unregister(range.start, range.end)
        {
            tracing::warn!(
                space,
                ?range,
                "unregistering a range whose pages are unknown: {e}"
            );
        }
        pages
    }

    /// The pages of a range present now, read while the thread that changed the range is
    /// stopped. A read that fails is tried once more; then the range's pages are unknown, which
    /// a `warning` line says (never "none present"). None without a word for a space whose
    /// pagemap could not be opened (its creation's warning said so), or that is gone.
    pub(super) fn present_at(
        &self,
        pid: i32,
        space: SpaceId,
        range: Range<u64>,
    ) -> Option<PagesAtExit> {
        let pagemap = self.spaces.get(&space)?.pagemap.as_ref()?;
        let read = || -> std::io::Result<PagesAtExit> {
            let read_at = Instant::now();
            if test_hooks::fails(Fault::Pagemap, Some(space)) {
                return Err(std::io::Error::other("injected by MEVI_TEST_FAULT"));
            }
            let present = pagemap.populated_runs(range.clone())?;
            Ok(PagesAtExit { read_at, present })
        };
        match read().or_else(|_| read()) {
            Ok(pages) => Some(pages),
            // The address space is gone (its last thread died meanwhile): nothing of it will be
            // checked or shown any more, and its lines are about to end.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {
                tracing::debug!(space, "page tables of a space that is gone");
                None
            }
            Err(e) => {
                self.warn(
                    Some(pid),
                    Some(space),
                    WarningKind::PagesUnknown,
                    format!(
                        "the page tables of {:#x}-{:#x} could not be read ({e}): its pages are \
                         unknown",
                        range.start, range.end
                    ),
                );
                None
            }
        }
    }
}

/// How the stream names a `/proc/PID/maps` entry.
pub(super) fn stream_kind(entry: &MapsEntry) -> MapKind {
    match entry.path.as_str() {
        "[heap]" => MapKind::Heap,
        "[stack]" => MapKind::Stack,
        p if p.starts_with("/anon_hugepage") => MapKind::Hugetlb,
        _ if entry.is_shared_memory() => MapKind::Shmem,
        "" => MapKind::Anon,
        // Named anonymous memory (prctl PR_SET_VMA_ANON_NAME): `[anon:NAME]`.
        p if p.starts_with("[anon:") => MapKind::Anon,
        _ => MapKind::File,
    }
}

/// The path the stream reports for a `/proc/PID/maps` entry, if it has one.
pub(super) fn stream_path(entry: &MapsEntry) -> Option<String> {
    (!entry.path.is_empty() && !matches!(entry.path.as_str(), "[heap]" | "[stack]"))
        .then(|| entry.path.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_entries_get_the_streams_kind_and_path() {
        let text = "55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]\n\
                    7f0000000000-7f0000001000 r-xp 00001000 fd:01 1234   /usr/lib/libc.so.6\n\
                    7f0000002000-7f0000003000 rw-s 00000000 00:01 5      /dev/zero (deleted)\n\
                    7f0000004000-7f0000005000 ---p 00000000 00:00 0 \n\
                    7f0000006000-7f0000007000 rw-s 00000000 00:01 9      /memfd:pool (deleted)\n\
                    7f0000008000-7f0000009000 rw-p 00000000 00:00 0      [anon:arena]\n";
        let m = procfs::parse_maps(text);
        let kinds: Vec<MapKind> = m.iter().map(stream_kind).collect();
        assert_eq!(
            kinds,
            vec![
                MapKind::Heap,
                MapKind::File,
                MapKind::Shmem,
                MapKind::Anon,
                MapKind::Shmem,
                MapKind::Anon
            ]
        );
        assert_eq!(stream_path(&m[0]), None);
        assert_eq!(stream_path(&m[1]).as_deref(), Some("/usr/lib/libc.so.6"));
        assert_eq!(stream_path(&m[5]).as_deref(), Some("[anon:arena]"));
    }
}
