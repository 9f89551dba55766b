//! Address spaces: making one (a userfaultfd injected into the tracee, a lane, a snapshot of
//! its mappings with their present pages: mappings.rs), and ending one.

use std::collections::HashMap;
use std::sync::Arc;

use super::USER_SPACE_END;
use super::mappings::MapAt;
use super::pressure::Pressure;
use super::records::FirstRing;
use super::scans::{Scans, everywhere};
use super::shadow::Shadow;
use super::{FollowBy, Tracer};
use crate::actors::lane::{Lane, LaneHandle, LaneMessage};
use crate::actors::sequencer::{SequencerMessage, Stamped};
use crate::event::{Event, MapCause, SpaceId, WarningKind};
use crate::kernel::inject::{self, InjectError, Injection, SyscallSite};
use crate::kernel::procfs::{self, MapsEntry, Pagemap};
use crate::kernel::uffd::AddressSpaceUffd;
use crate::kernel::vmas::Vmas;
use crate::stacks::TouchStacks;

/// What an attached space was last sampled as: its mappings, as `/proc/PID/maps` gave them.
#[derive(Debug)]
pub(super) struct Sampled {
    maps: Vec<MapsEntry>,
}

impl Sampled {
    pub(super) fn new(maps: Vec<MapsEntry>) -> Self {
        Self { maps }
    }

    pub(super) fn maps(&self) -> &[MapsEntry] {
        &self.maps
    }
}

pub(super) struct Space {
    pub(super) lane: LaneHandle,
    /// How its pages are followed.
    pub(super) following: Following,
    /// None only if the process was gone before it could be opened.
    pub(super) pagemap: Option<Arc<Pagemap>>,
    /// The program break as the last brk returned it (the heap is per mm, not per thread).
    pub(super) brk: u64,
    /// Processes living in this space (more than one after vfork or clone(CLONE_VM)).
    pub(super) members: usize,
    /// What the tracer follows of it beside the stream: ranges followed by scans and their
    /// pages seen, stacks, what it tracks, left out, has in swap, freed lazily or shared.
    pub(super) shadow: Shadow,
    /// When its ranges followed by scans are read next, and what scans found (scans.rs).
    pub(super) scans: Scans,
    /// Its mappings, asked one by one: where its stacks have grown, and an attached space's
    /// layout. Beside `following`, not in it: a stack `--region` or `--min-size` leaves out
    /// grows unseen by faults too, and opening it can fail under any way of following.
    pub(super) vmas: Option<Vmas>,
    /// Its program is one `--only` selects (or there is no `--only`).
    pub(super) selected: bool,
    /// Its program is a 32-bit one: nothing of its memory is followed.
    pub(super) runs_32_bit: bool,
    /// When what of it the kernel can take away unasked is looked at next (pressure.rs).
    pub(super) pressure: Pressure,
}

/// How a space's private anonymous pages are followed: what `FollowBy` asked for, as the
/// space could have it. Each question a call site asks is a method on `Space` whose match
/// names every arm, so a new way of following (the kernel's fault records, say) is one more
/// arm and an answer in each.
pub(super) enum Following {
    /// Every first touch through a userfaultfd; the ranges that may get huge pages by scans.
    Faults { uffd: Arc<AddressSpaceUffd> },
    /// Page-table scans only: `--faults scan`, or a space that could get no userfaultfd (a
    /// `scans_instead` warning said why).
    Scans,
    /// Page-table scans, and each thread's fault records, which its lane reads for whose fault
    /// made each page resident (`--faults records`; the tracer opens a thread's ring before it
    /// runs in the space: `Tracer::record_faults`).
    Records,
    /// `attach`: scans only, and none of its syscalls is stopped at, so its layout is sampled
    /// too (attach.rs): `last` is what it was sampled as. With `records`, its threads' faults
    /// are recorded as under `Records` (the attach's `--faults records`).
    Sampled { last: Sampled, records: bool },
    /// Not at all: `--no-faults`, `--only`, a 32-bit program, or no way of following left.
    Nothing,
}

impl Space {
    /// Its userfaultfd, if its faults come through one.
    pub(super) fn uffd(&self) -> Option<&Arc<AddressSpaceUffd>> {
        match &self.following {
            Following::Faults { uffd } => Some(uffd),
            Following::Scans
            | Following::Records
            | Following::Sampled { .. }
            | Following::Nothing => None,
        }
    }

    /// Whether its pages are followed by scans only (no fault of it goes through us).
    pub(super) fn scans_only(&self) -> bool {
        match self.following {
            Following::Scans | Following::Records | Following::Sampled { .. } => true,
            Following::Faults { .. } | Following::Nothing => false,
        }
    }

    /// Whether its threads' page faults are recorded for its lane (`--faults records`).
    pub(super) fn records(&self) -> bool {
        match self.following {
            Following::Records => true,
            Following::Sampled { records, .. } => records,
            Following::Faults { .. } | Following::Scans | Following::Nothing => false,
        }
    }

    /// Whether its faults are recorded and its layout syscalls stopped at (`run --faults
    /// records`; not `attach`'s, whose releases no read comes before).
    pub(super) fn records_at_stops(&self) -> bool {
        match self.following {
            Following::Records => true,
            Following::Sampled { .. }
            | Following::Faults { .. }
            | Following::Scans
            | Following::Nothing => false,
        }
    }

    /// What an attached space (whose layout is sampled, not stopped at) was last sampled as.
    pub(super) fn sampled(&self) -> Option<&Sampled> {
        match &self.following {
            Following::Sampled { last, .. } => Some(last),
            Following::Faults { .. }
            | Following::Scans
            | Following::Records
            | Following::Nothing => None,
        }
    }

    /// An attached space's new sample, replacing the last (none taken in another space).
    pub(super) fn resampled(&mut self, sample: Sampled) {
        match &mut self.following {
            Following::Sampled { last, .. } => *last = sample,
            Following::Faults { .. }
            | Following::Scans
            | Following::Records
            | Following::Nothing => {}
        }
    }

    /// Whether its pages are followed at all, so that a check can compare them: its page tables
    /// can be read, and it has a userfaultfd or is followed by scans only.
    pub(super) fn follows_pages(&self) -> bool {
        let followed = match self.following {
            Following::Faults { .. }
            | Following::Scans
            | Following::Records
            | Following::Sampled { .. } => true,
            Following::Nothing => false,
        };
        followed && self.pagemap.is_some()
    }
}

/// Where a new space comes from.
pub(super) enum Origin {
    Exec {
        former_tid: i32,
    },
    Fork(Box<Inherited>),
    /// A running process `attach` began following.
    Attach,
}

/// What a fork child's space has of its parent's besides its mappings.
#[derive(Debug)]
pub(super) struct Inherited {
    /// The parent's program break (the child's mm is a copy, brk included).
    pub(super) brk: u64,
    /// Whether the parent's memory is followed (`--only`): the child runs the same program.
    pub(super) selected: bool,
    /// Whether the parent runs a 32-bit program (None without a parent space: read it).
    pub(super) runs_32_bit: Option<bool>,
    /// The parent's shadow as its copies inherit it: followed by scans, growing down, tracked,
    /// left out and freed lazily as the parent's were (`Shadow::inheriting`).
    pub(super) shadow: Shadow,
}

/// What new spaces are made with: their ids, the lines that announce them, where a syscall is
/// injected, and the runtime their lanes run on.
pub(super) struct SpaceMaker {
    next: SpaceId,
    /// The line that creates a space whose creator's lane is gone: sent first on the new lane.
    announce: HashMap<SpaceId, Event>,
    site: SyscallSite,
    runtime: tokio::runtime::Handle,
}

impl SpaceMaker {
    pub(super) fn new(runtime: tokio::runtime::Handle) -> Self {
        Self {
            next: 0,
            announce: HashMap::new(),
            site: SyscallSite::default(),
            runtime,
        }
    }

    pub(super) fn allocate(&mut self) -> SpaceId {
        let id = self.next;
        self.next += 1;
        id
    }

    /// `birth` creates space `id` but its creator's lane is gone: the new lane sends it first.
    pub(super) fn announce_on_its_lane(&mut self, id: SpaceId, birth: Event) {
        self.announce.insert(id, birth);
    }
}

impl Tracer {
    /// Gives a stopped process (at exec's exit or a fork child's attach stop) its own space:
    /// a userfaultfd, a lane, and the mappings it has, with their present pages.
    pub(super) fn create_space(
        &mut self,
        tid: i32,
        id: SpaceId,
        origin: Origin,
    ) -> Result<(), InjectError> {
        let page_size = self.config.lane.page_size;
        let forked = matches!(origin, Origin::Fork(_));
        // The space is made whatever happens below: its creation is already announced (or about
        // to be), and the process's exit needs a lane to be reported on.
        let mut died = None;
        let mut warnings = Vec::new();
        // A 32-bit program's layout syscalls are another ABI's, which the filter lets through
        // undecoded, and a syscall injected into it would run as another ABI's syscall: its
        // memory is not followed at all, only its process lines.
        let foreign = match &origin {
            // The child runs its parent's program: asked again, /proc/PID/exe is opened for
            // nothing (a path walk and a read) at every fork.
            Origin::Fork(inherited) => inherited
                .runs_32_bit
                .unwrap_or_else(|| procfs::runs_32_bit(tid)),
            Origin::Exec { .. } | Origin::Attach => procfs::runs_32_bit(tid),
        };
        // `--only`: a program not selected has its pages followed by nothing (its mappings,
        // fork, exec and exit lines are written all the same); a fork child runs its parent's.
        let selected = match &origin {
            Origin::Fork(inherited) => inherited.selected,
            Origin::Exec { .. } | Origin::Attach => self.selects(tid),
        };
        let followed = selected && !foreign;
        if foreign && selected {
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
        // Why a space meant to have a userfaultfd has none, when its pages can be followed by
        // scans instead: no descriptor free in it, a seccomp filter of its own that forbids
        // a call we inject, no capability.
        let mut no_uffd = None;
        let uffd = if self.config.follow_by == FollowBy::Faults && followed {
            let injected = match &maps_error {
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
                Err(InjectError::Io(e)) if maps_error.is_some() => {
                    warnings.push((
                        WarningKind::NoUserfaultfd,
                        format!("no userfaultfd for this space ({e}): mappings only"),
                    ));
                    None
                }
                Err(InjectError::Io(e)) => {
                    no_uffd = Some(e);
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
        let pagemap = match followed.then(|| Pagemap::open(tid, page_size)) {
            None => None,
            Some(Ok(p)) => Some(Arc::new(p)),
            Some(Err(e)) => {
                if died.is_none() {
                    warnings.push((
                        WarningKind::PagesUnknown,
                        format!("cannot open /proc/{tid}/pagemap ({e}): its pages are unknown"),
                    ));
                }
                None
            }
        };
        let scans_only = followed
            && (self.config.follow_by.scans_everything()
                || (no_uffd.is_some() && pagemap.is_some()));
        if let Some(e) = no_uffd {
            warnings.push(if scans_only {
                (
                    WarningKind::ScansInstead,
                    format!(
                        "no userfaultfd for this space ({e}): its pages are followed by \
                         page-table scans instead (first touches without their thread, up to \
                         --sample-ms late)"
                    ),
                )
            } else {
                (
                    WarningKind::NoUserfaultfd,
                    format!("no userfaultfd for this space ({e}): mappings only"),
                )
            });
        }
        // Without it, a stack's growth is not seen: the stacks are then not followed. Under
        // faults, only the growth of a stack `--region` or `--min-size` leaves out needs it.
        let asks_for_growth = scans_only || (followed && self.config.selection.selects_ranges());
        let vmas = match asks_for_growth.then(|| Vmas::open(tid)) {
            Some(Ok(vmas)) => Some(vmas),
            Some(Err(e)) => {
                if died.is_none() {
                    warnings.push((
                        WarningKind::NotFollowed,
                        format!("cannot open /proc/{tid}/maps ({e}): its stacks are not followed"),
                    ));
                }
                None
            }
            None => None,
        };
        // One way, whichever the above left: an attached space has no userfaultfd (its
        // syscalls are not stopped at), and a 32-bit one is followed by nothing.
        let following = match uffd.clone() {
            Some(uffd) => Following::Faults { uffd },
            None if !scans_only => Following::Nothing,
            None if self.attaching() => Following::Sampled {
                last: Sampled::new(maps.clone()),
                records: self.config.follow_by == FollowBy::Records,
            },
            None if self.config.follow_by == FollowBy::Records => Following::Records,
            None => Following::Scans,
        };
        // Its first stack is walked through the code read here: the threads are all stopped, and
        // code is only mapped by a syscall the stacks hear of. Not an attached process's, whose
        // other threads may run on, nor one whose page tables were not opened (a program `--only`
        // leaves out: its stacks open them themselves).
        if let Some(stacks) = self.config.stacks.as_mut()
            && maps_error.is_none()
            && pagemap.is_some()
            && !matches!(origin, Origin::Attach)
        {
            stacks.space_made(id, &maps, pagemap.clone());
        }
        let lane = self.spawn_lane(id, uffd, pagemap.clone());
        // Exec made the new program's mappings; a fork child's are its parent's, described again.
        let cause = match origin {
            Origin::Exec { .. } | Origin::Attach => None,
            Origin::Fork(_) => Some(MapCause::Redescribe),
        };
        let (brk, mut shadow) = match origin {
            Origin::Exec { .. } | Origin::Attach => {
                let (former_tid, attached) = match origin {
                    Origin::Exec { former_tid } => (former_tid, false),
                    _ => (tid, true),
                };
                lane.send(LaneMessage::Observed(Box::new(Stamped::now(Event::Exec {
                    pid: tid,
                    tid: former_tid,
                    space: id,
                    path: procfs::exe(tid),
                    argv: procfs::cmdline(tid),
                    attached,
                    followed: selected,
                }))));
                let brk = maps
                    .iter()
                    .find(|e| e.path == "[heap]")
                    .map(|e| e.end)
                    .or_else(|| procfs::start_brk(tid))
                    .unwrap_or(0);
                (brk, Shadow::default())
            }
            Origin::Fork(inherited) => {
                if let Some(birth) = self.maker.announce.remove(&id) {
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
                    site: None,
                });
                (inherited.brk, inherited.shadow)
            }
        };
        // The parent's, as the tracer had it when it handled the fork: what is no longer
        // private anonymous memory in the child is not followed by scans.
        shadow.keep_private_anon(&everywhere(), &maps);
        self.spaces.insert(
            id,
            Space {
                lane,
                following,
                pagemap,
                brk,
                members: 1,
                vmas,
                selected,
                runs_32_bit: foreign,
                pressure: Pressure::default(),
                shadow,
                scans: Scans::new(std::time::Instant::now() + self.config.sample),
            },
        );
        if died.is_none() {
            // Attached, a child is never stopped at a syscall: it could not grow its ring.
            let ring = if forked && !self.attaching() {
                FirstRing::Provisional
            } else {
                FirstRing::Whole
            };
            self.record_faults(tid, tid, id, ring);
        }
        for (what, message) in warnings {
            self.warn(Some(tid), Some(id), what, message);
        }
        self.send_snapshot(id, tid, &maps, cause);
        match died {
            Some(status) => Err(InjectError::Died(status)),
            None => Ok(()),
        }
    }

    /// Whether `--only` selects the program `tid` runs now: its argv[0], that path's file name,
    /// or its `comm` matches a pattern (every program without `--only`).
    fn selects(&self, tid: i32) -> bool {
        if self.config.selection.only.is_empty() {
            return true;
        }
        let argv0 = procfs::cmdline(tid).into_iter().next().unwrap_or_default();
        let file_name = argv0.rsplit('/').next().unwrap_or_default().to_string();
        let comm = procfs::comm(tid, tid).unwrap_or_default();
        self.config.selection.only.iter().any(|p| {
            [&argv0, &file_name, &comm]
                .iter()
                .any(|name| p.matches(name))
        })
    }

    /// What a fork child of a process in `parent` has of its space (nothing without one).
    pub(super) fn inherited_from(&mut self, parent: Option<SpaceId>) -> Inherited {
        let parent = parent.and_then(|s| self.spaces.get_mut(&s));
        let shadow = parent.as_ref().map(|s| Shadow::inheriting(&s.shadow));
        Inherited {
            brk: parent.as_ref().map_or(0, |s| s.brk),
            selected: parent.as_ref().is_none_or(|s| s.selected),
            runs_32_bit: parent.as_ref().map(|s| s.runs_32_bit),
            shadow: match parent {
                Some(parent) => {
                    parent.shadow.forked();
                    shadow.unwrap_or_default()
                }
                None => Shadow::default(),
            },
        }
    }

    /// A lane for a space announced by a `fork` line but never made (its process died before its
    /// first stop), following nothing: its birth line first if it was kept for it.
    pub(super) fn unborn_space_lane(&mut self, id: SpaceId) -> LaneHandle {
        let lane = self.spawn_lane(id, None, None);
        if let Some(birth) = self.maker.announce.remove(&id) {
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
            self.config
                .touch_stacks
                .as_ref()
                .map(|(shared, samplers)| TouchStacks::new(shared.clone(), samplers.clone())),
        );
        let actor = actor.noting_thread_names(self.config.thread_names.clone());
        let supervisor = self.supervisor.clone();
        let sequencer = self.sequencer.clone();
        self.maker.runtime.spawn(async move {
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
        let site = self.maker.site.address(tid, maps)?;
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
                self.unrecorded.forget(id);
                self.shared_reads.space_left(self.config.sample);
                if let Some(stacks) = self.config.stacks.as_mut() {
                    stacks.forget(id);
                }
            }
        }
    }

    /// Describes a space whole, as its page tables say: every mapping, with its present pages.
    fn send_snapshot(
        &mut self,
        id: SpaceId,
        tid: i32,
        maps: &[MapsEntry],
        cause: Option<MapCause>,
    ) {
        for entry in maps {
            let at = MapAt {
                pid: tid,
                tid,
                space: id,
                range: entry.start..entry.end,
                cause,
                site: None,
            };
            let tracked = self.send_maps_entry(at, entry);
            if self.grows_down(id, entry)
                && tracked
                && let Some(space) = self.spaces.get(&id)
                && !space.scans_only()
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
}
