//! Page states of every address space, rebuilt from the stream by the replay rules of
//! `docs/schema.md`. The state actor keeps one of these while it writes the stream, and
//! `mevi-actors replay` (and the tests) rebuild one from a written stream: both use this code, so
//! what a user replays is what the tracer believed.

pub mod frames;
pub mod processes;
pub mod remap;
pub mod sites;

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::ops::Range;

use rangemap::{RangeMap, RangeSet};

use self::frames::{Frame, FrameChange, SharedFrames};
use self::remap::Remap;
use crate::event::{
    Event, EvictedHow, ForkKind, Line, MapCause, MapKind, PageState, SpaceId, WarningKind,
};

/// What occupies a range of an address space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub kind: MapKind,
    pub prot: String,
    pub path: Option<String>,
    pub tracked: bool,
    /// Where it was made (so mappings made apart stay apart, as the program made them).
    pub made: Made,
}

/// Where a mapping was made: the line that mapped it, its time and thread. The rest of a
/// change split in lines, a range described again, the heap's growth and a fork child's copies
/// keep the maker of what they continue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Made {
    pub seq: u64,
    pub t_ns: u64,
    pub tid: i32,
}

impl Mapping {
    /// Whether a mapping described again as `kind` at `path` is this one: a thread's stack the
    /// kernel no longer calls `[stack]` (a fork child's) is still the stack.
    fn continued_by(&self, kind: MapKind, path: Option<&str>) -> bool {
        let same_kind = self.kind == kind
            || matches!(
                (self.kind, kind),
                (MapKind::Stack, MapKind::Anon) | (MapKind::Anon, MapKind::Stack)
            );
        same_kind && self.path.as_deref() == path
    }
}

/// What a `redescribe` unmap removed: the mappings and zero pages its `map` lines bring back.
#[derive(Clone, Debug)]
struct Redescribed {
    space: SpaceId,
    mappings: RangeMap<u64, Mapping>,
    zero: RangeSet<u64>,
    shared: RangeMap<u64, Frame>,
}

/// One address space as the stream describes it.
#[derive(Clone, Debug, Default)]
pub struct AddressSpace {
    pub mappings: RangeMap<u64, Mapping>,
    pub resident: RangeSet<u64>,
    /// The resident pages whose first touch was a read: the shared zero page. A later write
    /// replaces it with a page of its own and no line, so these are at most the zero pages.
    pub zero: RangeSet<u64>,
    /// Pages of tracked mappings evicted to swap: not resident, not gone (`evicted` lines).
    pub swapped: RangeSet<u64>,
    /// The resident pages that map a frame another space may map too (shared since a fork,
    /// `frames.rs`), and their bytes.
    pub shared: RangeMap<u64, Frame>,
    pub shared_bytes: u64,
    pub resident_bytes: u64,
    pub peak_resident_bytes: u64,
    /// What changed of the shared frames this space maps, for the tree's count (`Replay::apply`).
    pub(crate) frame_changes: Vec<FrameChange>,
}

impl AddressSpace {
    fn add_resident(&mut self, range: Range<u64>) {
        if range.is_empty() {
            return;
        }
        let added: u64 = self.resident.gaps(&range).map(|g| g.end - g.start).sum();
        self.resident.insert(range);
        self.resident_bytes += added;
        self.peak_resident_bytes = self.peak_resident_bytes.max(self.resident_bytes);
    }

    /// Pages first touched by a read: resident, as the zero page (those not resident already).
    fn add_zero(&mut self, range: Range<u64>) {
        let fresh: Vec<Range<u64>> = self.resident.gaps(&range).collect();
        for r in fresh {
            self.zero.insert(r);
        }
        self.add_resident(range);
    }

    fn remove_resident(&mut self, range: Range<u64>) {
        if range.is_empty() {
            return;
        }
        let removed: u64 = self
            .resident
            .overlapping(&range)
            .map(|r| r.end.min(range.end) - r.start.max(range.start))
            .sum();
        self.resident.remove(range.clone());
        self.zero.remove(range.clone());
        self.swapped.remove(range.clone());
        self.resident_bytes -= removed;
        self.unshare(range);
    }

    /// Resident bytes that map a frame of this space's own: the tree counts each of them, and
    /// each shared frame once (`Replay::tree_resident_bytes`).
    pub fn own_bytes(&self) -> u64 {
        self.resident_bytes - self.shared_bytes
    }

    /// The pages of `range` map frames of their own from here on (an `unshared` line, or they
    /// are gone): not shared as far as the tree is concerned.
    fn unshare(&mut self, range: Range<u64>) {
        if range.is_empty() {
            return;
        }
        let pieces: Vec<(Range<u64>, Frame)> = self
            .shared
            .overlapping(&range)
            .map(|(r, f)| (r.start.max(range.start)..r.end.min(range.end), *f))
            .collect();
        for (r, frame) in pieces {
            self.shared_bytes -= r.end - r.start;
            self.frame_changes
                .push(FrameChange::Unmapped(frame, r.clone()));
        }
        self.shared.remove(range);
    }

    /// The resident pages of `range` map the shared frames `frame` names.
    fn share(&mut self, range: Range<u64>, frame: Frame) {
        let resident: Vec<Range<u64>> = self
            .resident
            .overlapping(&range)
            .map(|r| r.start.max(range.start)..r.end.min(range.end))
            .collect();
        for r in resident {
            self.unshare(r.clone());
            self.shared_bytes += r.end - r.start;
            self.frame_changes
                .push(FrameChange::Mapped(frame, r.clone()));
            self.shared.insert(r, frame);
        }
    }

    /// A fork shares every resident page: those of a frame of their own get one of `group`'s.
    fn share_all(&mut self, group: u64) {
        let own: Vec<Range<u64>> = self
            .resident
            .iter()
            .flat_map(|r| self.shared.gaps(r).collect::<Vec<_>>())
            .collect();
        for r in own {
            self.share(r, Frame { group, shift: 0 });
        }
    }

    /// A fork child's copy of this space: the same pages, mapping the same frames.
    fn forked(&self) -> Self {
        let mut copy = self.clone();
        copy.frame_changes = self
            .shared
            .iter()
            .map(|(r, f)| FrameChange::Mapped(*f, r.clone()))
            .collect();
        // The child's peak starts at what it inherits.
        copy.peak_resident_bytes = copy.resident_bytes;
        copy
    }

    /// The space ended: every page gone, every shared frame let go.
    fn end(&mut self) {
        self.unshare(0..u64::MAX);
        self.mappings = RangeMap::new();
        self.resident = RangeSet::new();
        self.zero = RangeSet::new();
        self.swapped = RangeSet::new();
        self.resident_bytes = 0;
    }

    /// The resident pages of `range` left memory (`evicted`): to swap, where they stay until
    /// they come back or are released, or reclaimed, gone. Pages not resident are left as they
    /// are (the line is about the stream's resident pages only).
    fn evict(&mut self, range: Range<u64>, how: EvictedHow) {
        let resident: Vec<Range<u64>> = self
            .resident
            .overlapping(&range)
            .map(|r| r.start.max(range.start)..r.end.min(range.end))
            .collect();
        for r in resident {
            self.remove_resident(r.clone());
            if how == EvictedHow::Swap {
                self.swapped.insert(r);
            }
        }
    }

    /// Gives the mappings within `range` a new `prot`; holes stay holes, pages stay as they are.
    fn protect(&mut self, range: Range<u64>, prot: &str) {
        if range.is_empty() {
            return;
        }
        let parts: Vec<(Range<u64>, Mapping)> = self
            .mappings
            .overlapping(&range)
            .map(|(r, m)| {
                let clip = r.start.max(range.start)..r.end.min(range.end);
                let mut m = m.clone();
                m.prot = prot.to_string();
                (clip, m)
            })
            .collect();
        for (clip, m) in parts {
            self.mappings.insert(clip, m);
        }
    }

    fn replace(&mut self, range: Range<u64>, mapping: Option<Mapping>, state: Option<PageState>) {
        if range.is_empty() {
            return;
        }
        self.remove_resident(range.clone());
        self.mappings.remove(range.clone());
        if let Some(m) = mapping {
            let tracked = m.tracked;
            self.mappings.insert(range.clone(), m);
            if tracked && state == Some(PageState::Resident) {
                self.add_resident(range);
            }
        }
    }

    /// Bytes resident within `range`.
    pub fn resident_in(&self, range: Range<u64>) -> u64 {
        self.resident
            .overlapping(&range)
            .map(|r| r.end.min(range.end) - r.start.max(range.start))
            .sum()
    }

    /// Bytes within `range` evicted to swap.
    pub fn swapped_bytes_in(&self, range: Range<u64>) -> u64 {
        self.swapped
            .overlapping(&range)
            .map(|r| r.end.min(range.end) - r.start.max(range.start))
            .sum()
    }

    /// Bytes within `range` first touched by a read (see `zero`).
    pub fn zero_in(&self, range: Range<u64>) -> u64 {
        self.zero
            .overlapping(&range)
            .map(|r| r.end.min(range.end) - r.start.max(range.start))
            .sum()
    }

    /// Bytes covered by tracked mappings.
    pub fn tracked_bytes(&self) -> u64 {
        self.mappings
            .iter()
            .filter(|(_, m)| m.tracked)
            .map(|(r, _)| r.end - r.start)
            .sum()
    }

    fn remap(&mut self, old: Range<u64>, new: Range<u64>, dontunmap: bool) {
        let remap = Remap::new(old.clone(), new.clone());
        let src = remap.source();
        let pieces: Vec<(Range<u64>, Mapping)> = self
            .mappings
            .overlapping(&old)
            .map(|(r, m)| (r.clone(), m.clone()))
            .collect();
        let shifted = |set: &RangeSet<u64>| -> Vec<Range<u64>> {
            set.overlapping(&src)
                .filter_map(|r| remap.shifted(r))
                .collect()
        };
        let resident = shifted(&self.resident);
        let zero = shifted(&self.zero);
        let swapped = shifted(&self.swapped);
        let by = new.start.wrapping_sub(old.start);
        // Moved pages map the frames they mapped: taken out here without letting them go.
        let shared: Vec<(Range<u64>, Frame)> = self
            .shared
            .overlapping(&src)
            .filter_map(|(r, f)| remap.shifted(r).map(|moved| (moved, f.moved(by))))
            .collect();
        for (r, _) in &shared {
            self.shared_bytes -= r.end - r.start;
        }
        self.shared.remove(src.clone());
        if dontunmap {
            // The old range stays mapped, with every page gone.
            self.remove_resident(old.clone());
        } else {
            self.replace(old.clone(), None, None);
        }
        self.replace(new.clone(), None, None);
        let mut last: Option<Mapping> = None;
        for (r, m) in pieces {
            if let Some(moved) = remap.shifted(&r) {
                self.mappings.insert(moved, m.clone());
            }
            last = Some(m);
        }
        // A grown tail belongs to the mapping that was at the old end.
        if let (Some(grown), Some(m)) = (remap.grown(), last) {
            self.mappings.insert(grown, m);
        }
        for r in resident {
            self.add_resident(r);
        }
        for r in zero {
            self.zero.insert(r);
        }
        for r in swapped {
            self.swapped.insert(r);
        }
        for (moved, frame) in shared {
            self.shared_bytes += moved.end - moved.start;
            self.shared.insert(moved, frame);
        }
    }
}

/// A `warning` line of the stream.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamWarning {
    pub seq: Option<u64>,
    pub pid: Option<i32>,
    pub space: Option<SpaceId>,
    pub what: WarningKind,
    pub message: String,
}

impl fmt::Display for StreamWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(seq) = self.seq {
            write!(f, "seq {seq}: ")?;
        }
        write!(f, "{:?}", self.what)?;
        if let Some(pid) = self.pid {
            write!(f, " pid {pid}")?;
        }
        if let Some(space) = self.space {
            write!(f, " space {space}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Process order as the stream has it (docs/schema.md, "Process order"): no line about a pid
/// before the line announcing it, none after its `exit`.
#[derive(Clone, Debug, Default)]
struct ProcessOrder {
    /// Some `exec` line has been seen: the first one announces the traced program.
    first_exec_seen: bool,
    /// Announced and not exited.
    live: HashSet<i32>,
    exited: HashSet<i32>,
    /// Named by an `unannounced` warning: the stream itself says their order is not kept.
    excused: HashSet<i32>,
    /// (pid, after its exit) already reported: one problem per process and kind, not per line.
    reported: HashSet<(i32, bool)>,
}

impl ProcessOrder {
    /// The problem with this line's place, if any.
    fn check(&mut self, event: &Event) -> Option<String> {
        match event {
            Event::Warning {
                what: WarningKind::Unannounced,
                pid,
                ..
            } => {
                if let Some(pid) = pid {
                    self.excused.insert(*pid);
                    self.live.insert(*pid);
                }
                return None;
            }
            // The program's first exec announces it; under `attach`, each process's attached one.
            Event::Exec { pid, attached, .. } if *attached || !self.first_exec_seen => {
                self.first_exec_seen = true;
                self.live.insert(*pid);
            }
            _ => {}
        }
        // A `fork`'s `pid` is its creator, which may be gone already when the child was adopted
        // (its creator was killed before its fork was reported): the line is about the child.
        let about = match event {
            Event::Fork { .. } => None,
            _ => event.pid(),
        };
        let problem = match about {
            Some(pid) if !self.live.contains(&pid) && !self.excused.contains(&pid) => {
                let after_exit = self.exited.contains(&pid);
                self.reported.insert((pid, after_exit)).then(|| {
                    let ev = serde_json::to_value(event)
                        .ok()
                        .and_then(|v| v.get("ev").and_then(|e| e.as_str()).map(str::to_string))
                        .unwrap_or_default();
                    if after_exit {
                        format!("a `{ev}` line about pid {pid} after its `exit`")
                    } else {
                        format!(
                            "a `{ev}` line about pid {pid} before the line announcing it \
                             (its `fork`, or the first `exec`)"
                        )
                    }
                })
            }
            _ => None,
        };
        match event {
            Event::Fork { child, .. } => {
                self.live.insert(*child);
                self.exited.remove(child);
            }
            Event::Exit { pid, .. } => {
                self.live.remove(pid);
                self.exited.insert(*pid);
            }
            _ => {}
        }
        problem
    }
}

/// Every address space of a trace, rebuilt event by event.
#[derive(Clone, Debug, Default)]
pub struct Replay {
    pub spaces: BTreeMap<SpaceId, AddressSpace>,
    /// Which space each live process (thread group) is in.
    pub process_space: BTreeMap<i32, SpaceId>,
    next_seq: u64,
    /// Problems found in the stream itself: gaps in `seq`, events for unknown spaces, lines
    /// out of process order.
    pub problems: Vec<String>,
    /// A `summary` line was seen.
    complete: bool,
    /// The stream's `warning` lines: what it says is no longer exact, or out of order.
    pub warnings: Vec<StreamWarning>,
    order: ProcessOrder,
    /// Spaces named by an `unannounced` warning: lines of theirs may come before their creation.
    excused_spaces: HashSet<SpaceId>,
    /// The `seq` of the line being applied, for the warnings.
    current_seq: Option<u64>,
    /// The `t_ns` of the line being applied (or the last one), for `Made`.
    current_t_ns: u64,
    /// Where the last `map` or `brk` line's mapping was made, in which space: the maker of the
    /// `split` lines that continue it.
    last_made: Option<(SpaceId, Made)>,
    /// What a `redescribe` unmap just removed, in which space: its `map` lines describe the
    /// same mappings again, and keep their makers and zero pages.
    redescribed: Option<Redescribed>,
    /// The frames every live space maps, counted once (a frame shared since a fork once, not
    /// once per process as each process's own figure has it), and the largest that has been:
    /// the tree's concurrent peak, and the time (`t_ns`) of the line that first reached it.
    pub tree_resident_bytes: u64,
    pub tree_peak_resident_bytes: u64,
    pub tree_peak_t_ns: u64,
    /// The frames shared since a fork, counted once while some space maps them.
    frames: SharedFrames,
    /// The name the next fork gives the frames it shares (`frames::Frame::group`).
    next_frame_group: u64,
}

impl Replay {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one line, checking that `seq` has no gap.
    pub fn apply_line(&mut self, line: &Line) {
        if line.seq != self.next_seq {
            self.problems.push(format!(
                "seq {} where {} was expected",
                line.seq, self.next_seq
            ));
        }
        self.next_seq = line.seq + 1;
        if line.t_ns < self.current_t_ns {
            self.problems.push(format!(
                "seq {}: t_ns {} goes back from {}",
                line.seq, line.t_ns, self.current_t_ns
            ));
        }
        if let Some(range) = inverted_range(&line.event) {
            // Not a change anything could make: a damaged or forged line.
            self.problems.push(format!(
                "seq {}: its {range} ends before it starts",
                line.seq
            ));
            return;
        }
        self.current_seq = Some(line.seq);
        self.current_t_ns = line.t_ns;
        let peak_before = self.tree_peak_resident_bytes;
        self.apply(&line.event);
        self.current_seq = None;
        if self.tree_peak_resident_bytes > peak_before {
            self.tree_peak_t_ns = line.t_ns;
        }
    }

    /// Applies a line that is not in the written stream (`--threads`): its change, with no `seq`
    /// of the stream's.
    pub fn apply_aside(&mut self, line: &Line) {
        let next = self.next_seq;
        self.apply_line(&Line {
            seq: next,
            ..line.clone()
        });
        self.next_seq = next;
    }

    /// Applies one event by the replay rules of `docs/schema.md`, and keeps the tree's total.
    pub fn apply(&mut self, event: &Event) {
        // The spaces this event can change: its own, the one it creates, and the one a process
        // leaves by exec or exit.
        let touched = [
            event.space(),
            event.creates_space(),
            event
                .pid()
                .and_then(|pid| self.process_space.get(&pid).copied()),
        ];
        let own_of = |replay: &Self| -> u64 {
            let mut seen: Vec<SpaceId> = Vec::with_capacity(3);
            touched
                .iter()
                .flatten()
                .filter(|&&s| {
                    let new = !seen.contains(&s);
                    seen.push(s);
                    new
                })
                .filter_map(|s| replay.spaces.get(s))
                .map(|s| s.own_bytes())
                .sum::<u64>()
                + replay.frames.bytes
        };
        let before = own_of(self);
        self.apply_to_spaces(event);
        for space in touched.iter().flatten() {
            if let Some(s) = self.spaces.get_mut(space) {
                for change in s.frame_changes.drain(..) {
                    self.frames.apply(change);
                }
            }
        }
        let after = own_of(self);
        self.tree_resident_bytes = (self.tree_resident_bytes + after).saturating_sub(before);
        self.tree_peak_resident_bytes = self.tree_peak_resident_bytes.max(self.tree_resident_bytes);
    }

    fn apply_to_spaces(&mut self, event: &Event) {
        if let Some(problem) = self.order.check(event) {
            self.problems.push(problem);
        }
        // A description again is over at the space's next line of any other kind.
        if let Some(r) = &self.redescribed
            && event.space() == Some(r.space)
            && !matches!(event, Event::Map { cause: Some(_), .. })
        {
            self.redescribed = None;
        }
        if let Event::Warning {
            pid,
            space,
            what,
            message,
        } = event
        {
            if let (WarningKind::Unannounced, Some(space)) = (what, space) {
                self.excused_spaces.insert(*space);
            }
            self.warnings.push(StreamWarning {
                seq: self.current_seq,
                pid: *pid,
                space: *space,
                what: *what,
                message: message.clone(),
            });
        }
        if let Some(space) = event.creates_space() {
            let copy = match event {
                Event::Fork { space: parent, .. } => {
                    let group = self.next_frame_group;
                    self.next_frame_group += 1;
                    match self.spaces.get_mut(parent) {
                        Some(parent) => {
                            parent.share_all(group);
                            parent.forked()
                        }
                        None => AddressSpace::default(),
                    }
                }
                _ => AddressSpace::default(),
            };
            self.spaces.insert(space, copy);
        }
        if let Some(space) = event.space()
            && !self.spaces.contains_key(&space)
        {
            if !self.excused_spaces.contains(&space) {
                self.problems
                    .push(format!("event for unknown space {space}: {event:?}"));
            }
            self.spaces.insert(space, AddressSpace::default());
        }
        match event {
            Event::Exec { pid, space, .. } => {
                if let Some(old) = self.process_space.insert(*pid, *space)
                    && old != *space
                {
                    self.left(old);
                }
            }
            Event::Fork {
                child,
                kind,
                space,
                child_space,
                ..
            } => {
                let s = if *kind == ForkKind::Fork {
                    *child_space
                } else {
                    *space
                };
                self.process_space.insert(*child, s);
            }
            Event::Map {
                tid,
                space,
                start,
                end,
                prot,
                kind,
                path,
                tracked,
                state,
                cause,
                ..
            } => {
                let mapping = |made| Mapping {
                    kind: *kind,
                    prot: prot.clone(),
                    path: path.clone(),
                    tracked: *tracked,
                    made,
                };
                if cause.is_some()
                    && let Some(r) = self.redescribed.take_if(|r| r.space == *space)
                {
                    // The same mappings again, as the kernel has them (in runs of one page
                    // state, `split`): merged ones come back as one line, and each part keeps its
                    // own maker and zero pages. What was not there before is made now.
                    let now = self.made_now(*tid);
                    let range = *start..*end;
                    let s = self.space_mut(*space);
                    s.replace(range.clone(), Some(mapping(now)), *state);
                    for (part, before) in r.mappings.overlapping(&range) {
                        if before.continued_by(*kind, path.as_deref()) {
                            let clip = part.start.max(range.start)..part.end.min(range.end);
                            s.mappings.insert(clip, mapping(before.made));
                        }
                    }
                    if *state == Some(PageState::Resident) && *tracked {
                        for zero in r.zero.overlapping(&range) {
                            s.zero
                                .insert(zero.start.max(range.start)..zero.end.min(range.end));
                        }
                        for (shared, frame) in r.shared.overlapping(&range) {
                            let clip = shared.start.max(range.start)..shared.end.min(range.end);
                            s.share(clip, *frame);
                        }
                    }
                    self.last_made = Some((*space, now));
                    self.redescribed = Some(r);
                    return;
                }
                let made = self.made_by(*space, *cause, *start, *kind, path.as_deref(), *tid);
                self.space_mut(*space)
                    .replace(*start..*end, Some(mapping(made)), *state);
            }
            Event::Unmap {
                space,
                start,
                end,
                cause,
                ..
            } => {
                let s = self.space_mut(*space);
                if *cause == Some(MapCause::Redescribe) {
                    let range = *start..*end;
                    let mut mappings = RangeMap::new();
                    for (r, m) in s.mappings.overlapping(&range) {
                        mappings.insert(r.start.max(range.start)..r.end.min(range.end), m.clone());
                    }
                    let mut zero = RangeSet::new();
                    for r in s.zero.overlapping(&range) {
                        zero.insert(r.start.max(range.start)..r.end.min(range.end));
                    }
                    let mut shared = RangeMap::new();
                    for (r, f) in s.shared.overlapping(&range) {
                        shared.insert(r.start.max(range.start)..r.end.min(range.end), *f);
                    }
                    self.redescribed = Some(Redescribed {
                        space: *space,
                        mappings,
                        zero,
                        shared,
                    });
                }
                self.space_mut(*space).replace(*start..*end, None, None)
            }
            Event::Remap {
                space,
                old_start,
                old_end,
                new_start,
                new_end,
                dontunmap,
                ..
            } => {
                self.space_mut(*space)
                    .remap(*old_start..*old_end, *new_start..*new_end, *dontunmap)
            }
            Event::Brk {
                tid,
                space,
                old,
                new,
                tracked,
                ..
            } => {
                let now = self.made_now(*tid);
                let s = self.space_mut(*space);
                if new > old {
                    // The heap grows: the part it adds is the heap that was made before.
                    let made = old
                        .checked_sub(1)
                        .and_then(|last| s.mappings.get(&last))
                        .filter(|m| m.kind == MapKind::Heap)
                        .map_or(now, |m| m.made);
                    let heap = Mapping {
                        kind: MapKind::Heap,
                        prot: "rw-".into(),
                        path: None,
                        tracked: *tracked,
                        made,
                    };
                    self.last_made = Some((*space, made));
                    let s = self.space_mut(*space);
                    s.replace(*old..*new, Some(heap), Some(PageState::NotResident));
                } else {
                    s.replace(*new..*old, None, None);
                }
            }
            Event::Discard {
                space, start, end, ..
            } => self.space_mut(*space).remove_resident(*start..*end),
            Event::Protect {
                space,
                start,
                end,
                prot,
                ..
            } => self.space_mut(*space).protect(*start..*end, prot),
            Event::Resident {
                space,
                start,
                end,
                write,
                ..
            } => {
                let s = self.space_mut(*space);
                // Back from swap (`from`), or made anew where a page in swap was dropped.
                s.swapped.remove(*start..*end);
                if *write {
                    s.add_resident(*start..*end)
                } else {
                    s.add_zero(*start..*end)
                }
            }
            Event::Evicted {
                space,
                start,
                end,
                how,
                ..
            } => self.space_mut(*space).evict(*start..*end, *how),
            Event::Unshared {
                space, start, end, ..
            } => self.space_mut(*space).unshare(*start..*end),
            Event::Exit { pid, .. } => {
                if let Some(space) = self.process_space.remove(pid) {
                    self.left(space);
                }
            }
            Event::Summary { .. } => self.complete = true,
            Event::Start { .. }
            | Event::Site { .. }
            | Event::Verify { .. }
            | Event::Unseen { .. }
            | Event::Rss { .. }
            | Event::Thread { .. }
            | Event::ThreadName { .. }
            | Event::ThreadExit { .. }
            | Event::Warning { .. } => {}
        }
    }

    /// A process left `space` (it exited or exec'd): if it was the last, the space ends, as the
    /// kernel's mm does. Its mappings and pages are gone; its peak stays.
    fn left(&mut self, space: SpaceId) {
        if self.process_space.values().any(|&s| s == space) {
            return;
        }
        if let Some(s) = self.spaces.get_mut(&space) {
            s.end();
        }
    }

    /// Where the mapping of a `map` line was made: here and now, unless the line continues a
    /// mapping made before (the rest of a change split in lines, or the same mapping described
    /// again: same kind and path at its start).
    fn made_by(
        &mut self,
        space: SpaceId,
        cause: Option<MapCause>,
        start: u64,
        kind: MapKind,
        path: Option<&str>,
        tid: i32,
    ) -> Made {
        let same = |m: &&Mapping| m.kind == kind && m.path.as_deref() == path;
        let before = match cause {
            None => None,
            Some(MapCause::Split) => self
                .last_made
                .filter(|(s, _)| *s == space)
                .map(|(_, made)| made),
            Some(MapCause::Redescribe) => self
                .spaces
                .get(&space)
                .and_then(|s| s.mappings.get(&start))
                .filter(same)
                .map(|m| m.made),
        };
        let made = before.unwrap_or_else(|| self.made_now(tid));
        self.last_made = Some((space, made));
        made
    }

    /// A mapping made by the line being applied, in thread `tid`.
    fn made_now(&self, tid: i32) -> Made {
        Made {
            seq: self.current_seq.unwrap_or_default(),
            t_ns: self.current_t_ns,
            tid,
        }
    }

    fn space_mut(&mut self, space: SpaceId) -> &mut AddressSpace {
        self.spaces.entry(space).or_default()
    }

    /// Whether the stream had its closing `summary` line (a trace cut short has none).
    pub fn complete(&self) -> bool {
        self.complete
    }

    /// Rebuilds the state from a written stream.
    pub fn from_jsonl(text: &str) -> Result<Self, String> {
        let mut replay = Replay::new();
        for (i, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let line: Line =
                serde_json::from_str(raw).map_err(|e| format!("line {}: {e}: {raw}", i + 1))?;
            replay.apply_line(&line);
        }
        Ok(replay)
    }
}

/// The range of an event that ends before it starts, if one does.
fn inverted_range(event: &Event) -> Option<&'static str> {
    match *event {
        Event::Map { start, end, .. }
        | Event::Unmap { start, end, .. }
        | Event::Discard { start, end, .. }
        | Event::Protect { start, end, .. }
        | Event::Resident { start, end, .. }
        | Event::Evicted { start, end, .. }
        | Event::Unshared { start, end, .. }
            if end < start =>
        {
            Some("range")
        }
        Event::Remap {
            old_start, old_end, ..
        } if old_end < old_start => Some("old range"),
        Event::Remap {
            new_start, new_end, ..
        } if new_end < new_start => Some("new range"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::ResidentFrom;
    use crate::event::samples::{exit, fork};

    fn map(space: SpaceId, start: u64, end: u64, state: PageState) -> Event {
        Event::Map {
            pid: 1,
            tid: 1,
            space,
            start,
            end,
            prot: "rw-".into(),
            kind: MapKind::Anon,
            path: None,
            tracked: true,
            state: Some(state),
            follow: crate::event::Follow::Faults,
            cause: None,
            site: None,
        }
    }

    fn resident(start: u64, end: u64) -> Event {
        resident_in(1, 0, start, end)
    }

    fn resident_in(pid: i32, space: SpaceId, start: u64, end: u64) -> Event {
        Event::Resident {
            pid,
            tid: Some(pid),
            space,
            start,
            end,
            write: true,
            faults: (end - start) / 4096,
            by: None,
            huge: false,
            writer: None,
            site: None,
            sampled: 0,
            from: None,
            withheld: false,
        }
    }

    fn evicted(start: u64, end: u64, how: EvictedHow) -> Event {
        Event::Evicted {
            pid: 1,
            space: 0,
            start,
            end,
            how,
        }
    }

    /// Swapped pages leave the resident figure, move with their mapping, come back by a
    /// `resident` line `from` `swap`, and end with a discard; reclaimed ones are just gone.
    #[test]
    fn evicted_pages_leave_memory_and_swapped_ones_come_back() {
        let mut r = Replay::new();
        r.apply(&exec());
        r.apply(&map(0, 0x10000, 0x20000, PageState::NotResident));
        r.apply(&resident(0x10000, 0x18000));
        r.apply(&evicted(0x10000, 0x14000, EvictedHow::Swap));
        // Only resident pages are evicted: 0x18000.. was never touched.
        r.apply(&evicted(0x16000, 0x1a000, EvictedHow::Reclaim));
        let s = &r.spaces[&0];
        assert_eq!(s.resident_bytes, 0x2000);
        assert_eq!(s.swapped_bytes_in(0..u64::MAX), 0x4000);
        assert_eq!(s.swapped_bytes_in(0x10000..0x14000), 0x4000);
        r.apply(&Event::Remap {
            pid: 1,
            tid: 1,
            space: 0,
            old_start: 0x10000,
            old_end: 0x20000,
            new_start: 0x40000,
            new_end: 0x50000,
            dontunmap: false,
            site: None,
        });
        let mut back = resident(0x40000, 0x42000);
        if let Event::Resident { from, faults, .. } = &mut back {
            *from = Some(ResidentFrom::Swap);
            *faults = 0;
        }
        r.apply(&back);
        let s = &r.spaces[&0];
        assert_eq!(s.swapped_bytes_in(0..u64::MAX), 0x2000);
        assert_eq!(s.swapped_bytes_in(0x42000..0x44000), 0x2000);
        assert_eq!(s.resident_bytes, 0x4000);
        r.apply(&Event::Discard {
            pid: 1,
            tid: 1,
            space: 0,
            start: 0x40000,
            end: 0x50000,
            advice: "dontneed".into(),
            site: None,
        });
        let s = &r.spaces[&0];
        assert!(s.swapped.is_empty());
        assert_eq!(s.resident_bytes, 0);
    }

    fn exec() -> Event {
        Event::Exec {
            pid: 1,
            tid: 1,
            space: 0,
            path: "/x".into(),
            argv: vec![],
            attached: false,
            followed: true,
        }
    }

    #[test]
    fn a_time_that_goes_back_is_a_problem() {
        let mut r = Replay::new();
        for (seq, t_ns) in [(0, 10), (1, 5)] {
            r.apply_line(&Line {
                seq,
                t_ns,
                event: exec(),
            });
        }
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert!(r.problems[0].contains("goes back"));
    }

    #[test]
    fn a_range_that_ends_before_it_starts_is_a_problem_not_a_panic() {
        let mut r = Replay::new();
        let remap = Event::Remap {
            pid: 1,
            tid: 1,
            space: 0,
            old_start: 0x10000,
            old_end: 0x14000,
            new_start: 0x48000,
            new_end: 0x40000,
            dontunmap: false,
            site: None,
        };
        for (seq, event) in [exec(), remap].into_iter().enumerate() {
            r.apply_line(&Line {
                seq: seq as u64,
                t_ns: 0,
                event,
            });
        }
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert!(r.problems[0].contains("new range ends before it starts"));
    }

    #[test]
    fn remap_moves_pages_and_grows_an_empty_tail() {
        let mut r = Replay::new();
        r.apply(&exec());
        r.apply(&map(0, 0x10000, 0x14000, PageState::NotResident));
        r.apply(&resident(0x10000, 0x12000));
        r.apply(&Event::Remap {
            pid: 1,
            tid: 1,
            space: 0,
            old_start: 0x10000,
            old_end: 0x14000,
            new_start: 0x40000,
            new_end: 0x48000,
            dontunmap: false,
            site: None,
        });
        let s = &r.spaces[&0];
        assert_eq!(s.resident_bytes, 0x2000);
        assert_eq!(s.resident_in(0x40000..0x42000), 0x2000);
        assert!(s.mappings.get(&0x10000).is_none());
        assert!(s.mappings.get(&0x47000).is_some());
        assert!(r.problems.is_empty());
    }

    #[test]
    fn dontunmap_leaves_the_old_range_mapped_and_empty() {
        let mut r = Replay::new();
        r.apply(&exec());
        r.apply(&map(0, 0x10000, 0x12000, PageState::Resident));
        r.apply(&Event::Remap {
            pid: 1,
            tid: 1,
            space: 0,
            old_start: 0x10000,
            old_end: 0x12000,
            new_start: 0x20000,
            new_end: 0x22000,
            dontunmap: true,
            site: None,
        });
        let s = &r.spaces[&0];
        assert!(s.mappings.get(&0x10000).is_some());
        assert_eq!(s.resident_in(0x10000..0x12000), 0);
        assert_eq!(s.resident_in(0x20000..0x22000), 0x2000);
    }

    #[test]
    fn fork_copies_the_parent_and_peak_survives_discard() {
        let mut r = Replay::new();
        r.apply(&exec());
        r.apply(&map(0, 0x10000, 0x14000, PageState::Resident));
        r.apply(&Event::Fork {
            pid: 1,
            tid: 1,
            child: 2,
            kind: ForkKind::Fork,
            space: 0,
            child_space: 1,
        });
        r.apply(&Event::Discard {
            pid: 1,
            tid: 1,
            space: 0,
            start: 0x10000,
            end: 0x14000,
            advice: "dontneed".into(),
            site: None,
        });
        assert_eq!(r.spaces[&0].resident_bytes, 0);
        assert_eq!(r.spaces[&0].peak_resident_bytes, 0x4000);
        assert_eq!(r.spaces[&1].resident_bytes, 0x4000);
        assert_eq!(r.process_space[&2], 1);
    }

    /// The tree's peak is the largest sum at one instant: a child's pages made after its
    /// parent dropped its own do not add to the parent's gone ones.
    #[test]
    fn the_tree_peak_is_the_largest_concurrent_sum() {
        let mut r = Replay::new();
        let mut seq = 0;
        let mut line = |r: &mut Replay, event: Event| {
            r.apply_line(&Line {
                seq,
                t_ns: seq * 10,
                event,
            });
            seq += 1;
        };
        line(&mut r, exec());
        line(&mut r, map(0, 0x10000, 0x14000, PageState::Resident));
        line(&mut r, crate::event::samples::fork(1, 2, 0, 1));
        // The child's copies are its parent's frames: the tree holds them once.
        assert_eq!(r.tree_resident_bytes, 0x4000);
        line(&mut r, unshared(2, 1, 0x10000, 0x12000));
        assert_eq!(r.tree_resident_bytes, 0x6000);
        line(&mut r, crate::event::samples::exit(1, 0));
        assert_eq!(r.tree_resident_bytes, 0x4000);
        line(&mut r, resident_in(2, 1, 0x20000, 0x22000));
        assert_eq!(r.tree_resident_bytes, 0x6000);
        assert_eq!(r.tree_peak_resident_bytes, 0x6000);
        assert_eq!(r.tree_peak_t_ns, 30);
        assert_eq!(r.spaces[&1].peak_resident_bytes, 0x6000);
    }

    fn unshared(pid: i32, space: SpaceId, start: u64, end: u64) -> Event {
        Event::Unshared {
            pid,
            space,
            start,
            end,
        }
    }

    /// A frame shared by forks is counted once while any space maps it: through a grandchild,
    /// a move, a description again, a discard on one side and a write (`unshared`) on another.
    #[test]
    fn frames_shared_by_forks_count_once_in_the_tree() {
        let mut r = Replay::new();
        r.apply(&exec());
        r.apply(&map(0, 0x10000, 0x18000, PageState::Resident));
        r.apply(&fork(1, 2, 0, 1));
        r.apply(&fork(2, 3, 1, 2));
        assert_eq!(r.tree_resident_bytes, 0x8000);
        assert_eq!(r.spaces[&2].resident_bytes, 0x8000);
        // The grandchild moves its copy: the same frames, elsewhere.
        r.apply(&Event::Remap {
            pid: 3,
            tid: 3,
            space: 2,
            old_start: 0x10000,
            old_end: 0x18000,
            new_start: 0x40000,
            new_end: 0x48000,
            dontunmap: false,
            site: None,
        });
        assert_eq!(r.tree_resident_bytes, 0x8000);
        // The parent drops half; the others still map those frames.
        r.apply(&Event::Discard {
            pid: 1,
            tid: 1,
            space: 0,
            start: 0x10000,
            end: 0x14000,
            advice: "dontneed".into(),
            site: None,
        });
        assert_eq!(r.tree_resident_bytes, 0x8000);
        // The child describes its copy again: its pages keep their frames.
        r.apply(&Event::Unmap {
            pid: 2,
            tid: 2,
            space: 1,
            start: 0x10000,
            end: 0x18000,
            cause: Some(MapCause::Redescribe),
            site: None,
        });
        let mut again = map(1, 0x10000, 0x18000, PageState::Resident);
        if let Event::Map { cause, .. } = &mut again {
            *cause = Some(MapCause::Redescribe);
        }
        r.apply(&again);
        assert_eq!(r.tree_resident_bytes, 0x8000);
        // The grandchild writes a page of its moved copy: a frame of its own.
        r.apply(&unshared(3, 2, 0x47000, 0x48000));
        assert_eq!(r.tree_resident_bytes, 0x9000);
        // An `unshared` line for pages of a frame of their own already changes nothing.
        r.apply(&unshared(3, 2, 0x47000, 0x48000));
        assert_eq!(r.tree_resident_bytes, 0x9000);
        r.apply(&exit(3, 2));
        r.apply(&exit(2, 1));
        assert_eq!(r.tree_resident_bytes, 0x4000);
        r.apply(&exit(1, 0));
        assert_eq!(r.tree_resident_bytes, 0);
        assert_eq!(r.frames.bytes, 0);
        assert_eq!(r.tree_peak_resident_bytes, 0x9000);
        // Each process's own figure counts its copies, as RssAnon does.
        assert_eq!(r.spaces[&2].peak_resident_bytes, 0x8000);
    }

    /// A fork child killed before it was described: its space is a copy of its parent's, and
    /// ends with it. A space shared with a vfork child ends with the last of the two; one left
    /// by exec ends there.
    #[test]
    fn a_space_ends_when_its_last_process_leaves_and_keeps_its_peak() {
        let mut r = Replay::new();
        r.apply(&exec());
        r.apply(&map(0, 0x10000, 0x14000, PageState::Resident));
        r.apply(&fork(1, 2, 0, 1));
        assert_eq!(r.spaces[&1].resident_bytes, 0x4000);
        r.apply(&exit(2, 1));
        assert_eq!(r.spaces[&1].resident_bytes, 0);
        assert_eq!(r.spaces[&1].peak_resident_bytes, 0x4000);
        assert!(r.spaces[&1].mappings.is_empty());
        r.apply(&Event::Fork {
            pid: 1,
            tid: 1,
            child: 3,
            kind: ForkKind::Vfork,
            space: 0,
            child_space: 0,
        });
        r.apply(&exit(1, 0));
        assert_eq!(r.spaces[&0].resident_bytes, 0x4000, "3 is still in it");
        r.apply(&Event::Exec {
            pid: 3,
            tid: 3,
            space: 2,
            path: "/bin/true".into(),
            argv: Vec::new(),
            attached: false,
            followed: true,
        });
        assert_eq!(r.spaces[&0].resident_bytes, 0);
        assert_eq!(r.spaces[&0].peak_resident_bytes, 0x4000);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }

    fn child_map(pid: i32, space: SpaceId) -> Event {
        Event::Unmap {
            pid,
            tid: pid,
            space,
            start: 0,
            end: 0x1000,
            cause: None,
            site: None,
        }
    }

    #[test]
    fn process_order_is_kept_by_announcement_and_exit() {
        let mut r = Replay::new();
        r.apply(&exec());
        r.apply(&fork(1, 2, 0, 1));
        r.apply(&child_map(2, 1));
        r.apply(&exit(2, 1));
        // A reused pid is announced again by its fork.
        r.apply(&fork(1, 2, 0, 2));
        r.apply(&child_map(2, 2));
        r.apply(&exit(1, 0));
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }

    #[test]
    fn a_line_before_its_announcement_or_after_its_exit_is_a_problem() {
        let mut r = Replay::new();
        r.apply(&exec());
        // 2 before its fork (twice: reported once), then 2 after its exit.
        r.apply(&child_map(2, 0));
        r.apply(&child_map(2, 0));
        r.apply(&fork(1, 2, 0, 1));
        r.apply(&exit(2, 1));
        r.apply(&child_map(2, 1));
        assert_eq!(r.problems.len(), 2, "{:?}", r.problems);
        assert!(r.problems[0].contains("before the line announcing it"));
        assert!(r.problems[1].contains("after its `exit`"));
    }

    #[test]
    fn warnings_are_kept_and_an_unannounced_one_excuses_its_process() {
        let mut r = Replay::new();
        r.apply_line(&Line {
            seq: 0,
            t_ns: 0,
            event: exec(),
        });
        r.apply_line(&Line {
            seq: 1,
            t_ns: 0,
            event: Event::Warning {
                pid: Some(7),
                space: Some(4),
                what: WarningKind::Unannounced,
                message: "held to the end".into(),
            },
        });
        r.apply_line(&Line {
            seq: 2,
            t_ns: 0,
            event: child_map(7, 4),
        });
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.warnings.len(), 1);
        assert_eq!(r.warnings[0].seq, Some(1));
        assert_eq!(r.warnings[0].what, WarningKind::Unannounced);
        assert!(r.warnings[0].to_string().contains("pid 7"));
    }

    // --- replay as a query tool (issue 11): zero pages and where mappings were made ---

    /// Applies `events` as lines 0, 1, 2... at 10 ns apart.
    fn lines(r: &mut Replay, events: Vec<Event>) {
        for event in events {
            let seq = r.next_seq;
            r.apply_line(&Line {
                seq,
                t_ns: seq * 10,
                event,
            });
        }
    }

    fn with_cause(mut event: Event, why: MapCause) -> Event {
        if let Event::Map { cause, .. } | Event::Unmap { cause, .. } = &mut event {
            *cause = Some(why);
        }
        event
    }

    /// Pages first touched by a read are the zero page until dropped; they move with a remap and
    /// end with the space. A read over pages already resident adds none.
    #[test]
    fn zero_pages_follow_reads_remaps_and_discards() {
        let mut r = Replay::new();
        let read = |start: u64, end: u64| match resident(start, end) {
            Event::Resident {
                pid,
                tid,
                space,
                faults,
                ..
            } => Event::Resident {
                pid,
                tid,
                space,
                start,
                end,
                write: false,
                faults,
                by: None,
                huge: false,
                writer: None,
                site: None,
                sampled: 0,
                from: None,
                withheld: false,
            },
            _ => unreachable!(),
        };
        lines(
            &mut r,
            vec![
                exec(),
                map(0, 0x10000, 0x18000, PageState::NotResident),
                resident(0x10000, 0x12000),
                read(0x11000, 0x14000),
            ],
        );
        let s = &r.spaces[&0];
        assert_eq!(s.resident_in(0x10000..0x18000), 0x4000);
        assert_eq!(s.zero_in(0x10000..0x18000), 0x2000, "0x12000..0x14000 only");
        lines(
            &mut r,
            vec![
                Event::Remap {
                    pid: 1,
                    tid: 1,
                    space: 0,
                    old_start: 0x10000,
                    old_end: 0x18000,
                    new_start: 0x40000,
                    new_end: 0x48000,
                    dontunmap: false,
                    site: None,
                },
                Event::Discard {
                    pid: 1,
                    tid: 1,
                    space: 0,
                    start: 0x43000,
                    end: 0x44000,
                    advice: "dontneed".into(),
                    site: None,
                },
            ],
        );
        let s = &r.spaces[&0];
        assert_eq!(s.zero_in(0..u64::MAX), 0x1000);
        assert_eq!(s.zero_in(0x42000..0x43000), 0x1000);
        lines(&mut r, vec![exit(1, 0)]);
        assert!(r.spaces[&0].zero.is_empty());
    }

    /// Where a mapping was made survives what continues it: the rest of a change (`split`), a
    /// description again, heap growth, a move, a fork child's copy; a new `map` is made anew.
    #[test]
    fn a_mapping_keeps_its_maker_across_what_continues_it() {
        let mut r = Replay::new();
        let brk = |old: u64, new: u64| Event::Brk {
            pid: 1,
            tid: 1,
            space: 0,
            old,
            new,
            tracked: true,
            follow: Default::default(),
            site: None,
        };
        lines(
            &mut r,
            vec![
                exec(),
                map(0, 0x10000, 0x12000, PageState::Resident),
                with_cause(
                    map(0, 0x12000, 0x14000, PageState::NotResident),
                    MapCause::Split,
                ),
                brk(0x80000, 0x82000),
                brk(0x82000, 0x84000),
            ],
        );
        let made = |r: &Replay, space: SpaceId, addr: u64| {
            r.spaces[&space].mappings.get(&addr).unwrap().made
        };
        let first = made(&r, 0, 0x10000);
        assert_eq!((first.seq, first.t_ns, first.tid), (1, 10, 1));
        assert_eq!(made(&r, 0, 0x13000), first, "the split's rest");
        assert_eq!(
            r.spaces[&0].mappings.iter().count(),
            2,
            "one mapping and the heap"
        );
        assert_eq!(made(&r, 0, 0x83000).seq, 3, "the heap as it was first made");
        // Described again (as a fork child's snapshot is): same kind and path, same maker.
        lines(
            &mut r,
            vec![
                fork(1, 2, 0, 1),
                Event::Unmap {
                    pid: 2,
                    tid: 2,
                    space: 1,
                    start: 0,
                    end: 0x7ffffffff000,
                    cause: Some(MapCause::Redescribe),
                    site: None,
                },
                with_cause(
                    Event::Map {
                        pid: 2,
                        tid: 2,
                        space: 1,
                        start: 0x10000,
                        end: 0x14000,
                        prot: "rw-".into(),
                        kind: MapKind::Anon,
                        path: None,
                        tracked: true,
                        state: Some(PageState::NotResident),
                        follow: Default::default(),
                        cause: None,
                        site: None,
                    },
                    MapCause::Redescribe,
                ),
            ],
        );
        assert_eq!(made(&r, 1, 0x10000), first, "inherited, made by the parent");
        // Moved, it keeps its maker; mapped over, it is made anew.
        lines(
            &mut r,
            vec![
                Event::Remap {
                    pid: 1,
                    tid: 1,
                    space: 0,
                    old_start: 0x10000,
                    old_end: 0x14000,
                    new_start: 0x40000,
                    new_end: 0x44000,
                    dontunmap: false,
                    site: None,
                },
                map(0, 0x41000, 0x42000, PageState::NotResident),
            ],
        );
        assert_eq!(made(&r, 0, 0x40000), first);
        assert_eq!(made(&r, 0, 0x41000).seq, 9);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }
}
