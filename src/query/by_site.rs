//! `replay --by-site`: bytes by call site. Each range of a live space carries the site (the call
//! stack of a `site` line) of the line that mapped it; the figures of a site are the bytes of its
//! ranges: mapped, resident at the whole tree's resident peak, resident and still mapped as each
//! space ended. The views (bottom-up, top-down) are in `views`.

mod views;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{self, Write};
use std::ops::Range;

use rangemap::{RangeMap, RangeSet};
use serde::Serialize;

use crate::event::{Event, ForkKind, Frame, Line, MapCause, SiteId, SpaceId, Truncated};
use crate::model::{AddressSpace, Replay};

use super::{Flow, Query, State};

/// What bytes are counted under: a site, or none ("(no stack)": lines without a `site`).
type Key = Option<SiteId>;

/// A whole address space, as a range.
const EVERYWHERE: Range<u64> = 0..u64::MAX;

/// A frame of libc, the dynamic loader, an allocator or a language runtime: not where the
/// program's own code asked for memory (docs/schema.md, "replay --by-site").
pub(crate) fn is_system_frame(frame: &Frame) -> bool {
    const MODULES: &[&str] = &[
        "libc.so",
        "libc-",
        "ld-linux",
        "ld-musl",
        "libpthread",
        "libstdc++",
        "libgcc_s",
        "libjemalloc",
        "libtcmalloc",
        "libmimalloc",
    ];
    const FUNCTIONS: &[&str] = &[
        "malloc",
        "calloc",
        "realloc",
        "free",
        "__libc_",
        "_int_",
        "sysmalloc",
        "__GI_",
        "__mmap",
        "mmap",
        "__munmap",
        "munmap",
        "__brk",
        "brk",
        "__sbrk",
        "sbrk",
        "mremap",
        "madvise",
        "operator new",
        "__rust_",
        "__rdl_",
        "__rg_",
        "alloc::",
        "core::",
        "std::",
        "<alloc::",
        "<core::",
        "<std::",
    ];
    let module = frame
        .module
        .as_deref()
        .map(|path| path.rsplit('/').next().unwrap_or(path));
    // Rust's standard library, built into the program: its source says so, where a name cannot
    // (`<u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem` is std's, `<MyType as
    // core::fmt::Display>::fmt` the program's).
    let rust_std = |file: &str| file.starts_with("/rustc/") && file.contains("/library/");
    module.is_some_and(|name| MODULES.iter().any(|p| name.starts_with(p)))
        || frame
            .function
            .as_deref()
            .is_some_and(|f| FUNCTIONS.iter().any(|p| f.starts_with(p)))
        || frame.file.as_deref().is_some_and(rust_std)
}

/// A `site` line: its frames, innermost first, and why it stops short of the root, if it does.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stack {
    pub frames: Vec<Frame>,
    pub truncated: Option<Truncated>,
}

impl Stack {
    /// The frame that stands for the stack: the innermost user frame, or, when every frame is a
    /// system frame, the outermost one. None for a stack without frames.
    pub fn user_frame(&self) -> Option<usize> {
        let innermost_user = self.frames.iter().position(|f| !is_system_frame(f));
        innermost_user.or(self.frames.len().checked_sub(1))
    }
}

/// The figures of a site, a row or a node, in bytes (first touches in pages).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Figures {
    #[serde(rename = "mapped_bytes")]
    pub mapped: u64,
    #[serde(rename = "resident_at_peak_bytes")]
    pub resident_at_peak: u64,
    #[serde(rename = "resident_at_exit_bytes")]
    pub resident_at_exit: u64,
    #[serde(rename = "alive_at_exit_bytes")]
    pub alive_at_exit: u64,
    pub first_touches: u64,
}

impl Figures {
    pub fn add(&mut self, other: &Figures) {
        self.mapped += other.mapped;
        self.resident_at_peak += other.resident_at_peak;
        self.resident_at_exit += other.resident_at_exit;
        self.alive_at_exit += other.alive_at_exit;
        self.first_touches += other.first_touches;
    }

    pub fn is_zero(&self) -> bool {
        *self == Figures::default()
    }
}

/// The sites of one live space's ranges.
#[derive(Clone, Debug, Default)]
struct SpaceSites {
    /// The site of each range mapped by a line that had one; a range not here has none.
    sites: RangeMap<u64, SiteId>,
    /// The ranges of the change being written, a `map` or `brk` line and the `split` lines that
    /// continue it: bytes a `split` line maps again (the heap pages present when the break
    /// moved) count once as mapped.
    change: RangeSet<u64>,
}

/// Which site mapped each range of every live space, by the rules of docs/schema.md,
/// "replay --by-site" (they follow the replay's own, as `model` applies them).
#[derive(Debug, Default)]
struct Attribution {
    spaces: HashMap<SpaceId, SpaceSites>,
    /// What a `redescribe` unmap took away, in which space: the `map` lines after it describe the
    /// same memory again and get it back.
    redescribed: Option<(SpaceId, RangeMap<u64, SiteId>)>,
}

impl Attribution {
    /// Applies `line`, which `replay` has just applied; the bytes it maps anew, and under what.
    fn apply(&mut self, line: &Line, replay: &Replay) -> Option<(Key, u64)> {
        let event = &line.event;
        if inverted(event) {
            // Not applied by the replay either.
            return None;
        }
        if let Some((space, _)) = &self.redescribed
            && event.space() == Some(*space)
            && !matches!(event, Event::Map { cause: Some(_), .. })
        {
            self.redescribed = None;
        }
        match *event {
            Event::Exec { space, .. } => {
                self.spaces.insert(space, SpaceSites::default());
                None
            }
            Event::Fork {
                kind: ForkKind::Fork,
                space,
                child_space,
                ..
            } => {
                let sites = self
                    .spaces
                    .get(&space)
                    .map(|s| s.sites.clone())
                    .unwrap_or_default();
                let child = SpaceSites {
                    sites,
                    change: RangeSet::new(),
                };
                self.spaces.insert(child_space, child);
                None
            }
            Event::Map {
                space,
                start,
                end,
                cause,
                site,
                ..
            } => self.map(line.seq, space, start..end, cause, site, replay),
            Event::Unmap {
                space,
                start,
                end,
                cause,
                ..
            } => {
                let s = self.spaces.entry(space).or_default();
                if cause == Some(MapCause::Redescribe) {
                    self.redescribed = Some((space, within(&s.sites, &(start..end))));
                }
                set(&mut s.sites, start..end, None);
                None
            }
            Event::Remap {
                space,
                old_start,
                old_end,
                new_start,
                new_end,
                dontunmap,
                site,
                ..
            } => {
                let s = self.spaces.entry(space).or_default();
                s.remap(old_start..old_end, new_start..new_end, dontunmap, site)
            }
            Event::Brk {
                space,
                old,
                new,
                site,
                ..
            } => {
                let s = self.spaces.entry(space).or_default();
                if new > old {
                    set(&mut s.sites, old..new, site);
                    s.change = RangeSet::new();
                    s.change.insert(old..new);
                    Some((site, new - old))
                } else {
                    set(&mut s.sites, new..old, None);
                    None
                }
            }
            _ => None,
        }
    }

    fn map(
        &mut self,
        seq: u64,
        space: SpaceId,
        range: Range<u64>,
        cause: Option<MapCause>,
        site: Option<SiteId>,
        replay: &Replay,
    ) -> Option<(Key, u64)> {
        if range.is_empty() {
            return None;
        }
        // As the replay does: lines with a cause after a `redescribe` unmap bring back what it
        // took away.
        let redescribed = match cause {
            Some(_) => self
                .redescribed
                .take_if(|(s, _)| *s == space)
                .map(|(_, before)| before),
            None => None,
        };
        let now = replay.spaces.get(&space);
        let s = self.spaces.entry(space).or_default();
        match (cause, redescribed) {
            (_, Some(before)) => {
                s.describe_again(range, &before, seq, now);
                self.redescribed = Some((space, before));
                None
            }
            (Some(MapCause::Redescribe), None) => {
                let before = within(&s.sites, &range);
                s.describe_again(range, &before, seq, now);
                None
            }
            (Some(MapCause::Split), None) => {
                let fresh: u64 = s.change.gaps(&range).map(|r| r.end - r.start).sum();
                set(&mut s.sites, range.clone(), site);
                s.change.insert(range);
                Some((site, fresh))
            }
            (None, None) => {
                set(&mut s.sites, range.clone(), site);
                s.change = RangeSet::new();
                s.change.insert(range.clone());
                Some((site, range.end - range.start))
            }
        }
    }
}

impl SpaceSites {
    /// `range` described again (the replay has applied its line, `seq`): each part keeps the
    /// site `before` gave it where the replay keeps the maker of its mapping (the same memory);
    /// what the line made anew has none.
    fn describe_again(
        &mut self,
        range: Range<u64>,
        before: &RangeMap<u64, SiteId>,
        seq: u64,
        now: Option<&AddressSpace>,
    ) {
        set(&mut self.sites, range.clone(), None);
        let Some(now) = now else {
            return;
        };
        for (r, m) in now.mappings.overlapping(&range) {
            if m.made.seq == seq {
                continue;
            }
            let part = clip(r, &range);
            for (b, site) in before.overlapping(&part) {
                set(&mut self.sites, clip(b, &part), Some(*site));
            }
        }
    }

    /// A `remap`: the sites move with the range (the source of a `dontunmap` keeps its own); a
    /// grown tail is the remap's (else the moved range's end's), and is mapped anew.
    fn remap(
        &mut self,
        old: Range<u64>,
        new: Range<u64>,
        dontunmap: bool,
        site: Option<SiteId>,
    ) -> Option<(Key, u64)> {
        let pieces: Vec<(Range<u64>, SiteId)> = self
            .sites
            .overlapping(&old)
            .map(|(r, s)| (clip(r, &old), *s))
            .collect();
        if !dontunmap {
            set(&mut self.sites, old.clone(), None);
        }
        set(&mut self.sites, new.clone(), None);
        let shift = |a: u64| a - old.start + new.start;
        for (r, s) in &pieces {
            let moved = shift(r.start)..shift(r.end).min(new.end);
            set(&mut self.sites, moved, Some(*s));
        }
        let old_len = old.end - old.start;
        if new.end - new.start <= old_len {
            return None;
        }
        let tail = new.start + old_len..new.end;
        let at_end = pieces
            .last()
            .filter(|(r, _)| r.end == old.end)
            .map(|(_, s)| *s);
        let key = site.or(at_end);
        set(&mut self.sites, tail.clone(), key);
        Some((key, tail.end - tail.start))
    }
}

/// Gives `range` to `site`, or takes it from every site.
fn set(sites: &mut RangeMap<u64, SiteId>, range: Range<u64>, site: Option<SiteId>) {
    if range.is_empty() {
        return;
    }
    match site {
        Some(site) => sites.insert(range, site),
        None => sites.remove(range),
    }
}

fn clip(r: &Range<u64>, within: &Range<u64>) -> Range<u64> {
    r.start.max(within.start)..r.end.min(within.end)
}

/// The sites within `range`.
fn within(sites: &RangeMap<u64, SiteId>, range: &Range<u64>) -> RangeMap<u64, SiteId> {
    let mut part = RangeMap::new();
    for (r, s) in sites.overlapping(range) {
        set(&mut part, clip(r, range), Some(*s));
    }
    part
}

/// A line whose range ends before it starts: the replay does not apply it.
fn inverted(event: &Event) -> bool {
    match *event {
        Event::Map { start, end, .. }
        | Event::Unmap { start, end, .. }
        | Event::Discard { start, end, .. }
        | Event::Resident { start, end, .. } => end < start,
        Event::Remap {
            old_start,
            old_end,
            new_start,
            new_end,
            ..
        } => old_end < old_start || new_end < new_start,
        _ => false,
    }
}

/// Splits the bytes of `ranges` by the site each byte has in `sites`.
fn by_site(
    ranges: impl Iterator<Item = Range<u64>>,
    sites: Option<&SpaceSites>,
    mut add: impl FnMut(Key, u64),
) {
    for r in ranges {
        let mut attributed = 0;
        if let Some(sites) = sites {
            for (piece, site) in sites.sites.overlapping(&r) {
                let bytes = {
                    let c = clip(piece, &r);
                    c.end - c.start
                };
                attributed += bytes;
                add(Some(*site), bytes);
            }
        }
        if r.end - r.start > attributed {
            add(None, r.end - r.start - attributed);
        }
    }
}

/// The space whose last process this line takes away (its `exit`, or its `exec` of a new
/// program): the replay ends it.
fn ending_space(replay: &Replay, event: &Event) -> Option<SpaceId> {
    let pid = match event {
        Event::Exit { pid, .. } | Event::Exec { pid, .. } => *pid,
        _ => return None,
    };
    let space = *replay.process_space.get(&pid)?;
    let last = replay
        .process_space
        .values()
        .filter(|&&s| s == space)
        .count()
        == 1;
    (last && event.creates_space() != Some(space)).then_some(space)
}

/// The parts of spaces whose resident pages `event` can change.
fn regions(replay: &Replay, event: &Event) -> Vec<(SpaceId, Range<u64>)> {
    let mut regions: BTreeMap<SpaceId, RangeSet<u64>> = BTreeMap::new();
    let mut add = |space: SpaceId, r: Range<u64>| {
        if !r.is_empty() {
            regions.entry(space).or_default().insert(r);
        }
    };
    match *event {
        Event::Map {
            space, start, end, ..
        }
        | Event::Unmap {
            space, start, end, ..
        }
        | Event::Discard {
            space, start, end, ..
        }
        | Event::Resident {
            space, start, end, ..
        } => add(space, start..end),
        Event::Brk {
            space, old, new, ..
        } => add(space, old.min(new)..old.max(new)),
        Event::Remap {
            space,
            old_start,
            old_end,
            new_start,
            new_end,
            ..
        } => {
            add(space, old_start..old_end);
            add(space, new_start..new_end);
        }
        Event::Fork {
            kind: ForkKind::Fork,
            child_space,
            ..
        } => add(child_space, EVERYWHERE),
        Event::Exec { pid, space, .. } => {
            add(space, EVERYWHERE);
            if let Some(&old) = replay.process_space.get(&pid) {
                add(old, EVERYWHERE);
            }
        }
        Event::Exit { pid, .. } => {
            if let Some(&space) = replay.process_space.get(&pid) {
                add(space, EVERYWHERE);
            }
        }
        _ => {}
    }
    regions
        .into_iter()
        .flat_map(|(space, set)| set.into_iter().map(move |r| (space, r)))
        .collect()
}

/// `replay --by-site`.
pub(crate) struct BySite {
    json: bool,
    /// The stream's name, for what is said on stderr.
    name: String,
    attribution: Attribution,
    stacks: HashMap<SiteId, Stack>,
    /// Mapped bytes, first touches and the figures at each space's end, by key.
    figures: HashMap<Key, Figures>,
    /// Resident bytes of every live space now, by key: kept by difference, what the parts of
    /// spaces a line can change held before it and after (they add up to the tree's total).
    resident: HashMap<Key, u64>,
    /// The same at the whole tree's resident peak so far (its first line), and the keys whose
    /// resident bytes have changed since.
    at_peak: HashMap<Key, u64>,
    changed: HashSet<Key>,
    peak_bytes: u64,
    /// Between `before` and `after` of a line: the parts it can change, what they held by key
    /// (negated, to add what they hold after), and the space it ends.
    regions: Vec<(SpaceId, Range<u64>)>,
    delta: HashMap<Key, i128>,
    ending: Option<SpaceId>,
    /// The `start` line's `stack_depth`: traced with `--stacks`.
    stacks_taken: bool,
}

impl BySite {
    pub fn new(json: bool, name: String) -> Self {
        BySite {
            json,
            name,
            attribution: Attribution::default(),
            stacks: HashMap::new(),
            figures: HashMap::new(),
            resident: HashMap::new(),
            at_peak: HashMap::new(),
            changed: HashSet::new(),
            peak_bytes: 0,
            regions: Vec::new(),
            delta: HashMap::new(),
            ending: None,
            stacks_taken: false,
        }
    }

    /// Adds `sign` × the resident bytes of the regions, by key, to `delta`.
    fn count_regions(&mut self, replay: &Replay, sign: i128) {
        for (space, region) in &self.regions {
            let Some(s) = replay.spaces.get(space) else {
                continue;
            };
            let resident = s.resident.overlapping(region).map(|r| clip(r, region));
            by_site(
                resident,
                self.attribution.spaces.get(space),
                |key, bytes| {
                    *self.delta.entry(key).or_default() += sign * i128::from(bytes);
                },
            );
        }
    }

    /// `space` as it ends: its resident and mapped bytes, by key.
    fn ended(&mut self, replay: &Replay, space: SpaceId) {
        let Some(s) = replay.spaces.get(&space) else {
            return;
        };
        let sites = self.attribution.spaces.get(&space);
        let figures = &mut self.figures;
        by_site(s.resident.iter().cloned(), sites, |key, bytes| {
            figures.entry(key).or_default().resident_at_exit += bytes;
        });
        by_site(
            s.mappings.iter().map(|(r, _)| r.clone()),
            sites,
            |key, bytes| {
                figures.entry(key).or_default().alive_at_exit += bytes;
            },
        );
    }

    /// Every key's figures, resident at peak included.
    fn all_figures(&self) -> HashMap<Key, Figures> {
        let mut all = self.figures.clone();
        for (key, bytes) in &self.at_peak {
            all.entry(*key).or_default().resident_at_peak += bytes;
        }
        all
    }
}

impl Query for BySite {
    fn before(&mut self, state: &State, line: &Line, _out: &mut dyn Write) -> io::Result<Flow> {
        let replay = &state.replay;
        self.ending = ending_space(replay, &line.event);
        if let Some(space) = self.ending {
            self.ended(replay, space);
        }
        self.regions = regions(replay, &line.event);
        self.count_regions(replay, -1);
        Ok(Flow::Go)
    }

    fn after(&mut self, state: &State, line: &Line, _out: &mut dyn Write) -> io::Result<Flow> {
        let replay = &state.replay;
        match &line.event {
            Event::Start { stack_depth, .. } => self.stacks_taken = stack_depth.is_some(),
            Event::Site {
                id,
                frames,
                truncated,
            } => {
                let stack = Stack {
                    frames: frames.clone(),
                    truncated: *truncated,
                };
                self.stacks.insert(*id, stack);
            }
            // Sampled first touches carry the site of the thread that made them.
            Event::Resident { faults, .. } => {
                if let Some(site) = line.event.site() {
                    self.figures.entry(Some(site)).or_default().first_touches += faults;
                }
            }
            _ => {}
        }
        if let Some((key, bytes)) = self.attribution.apply(line, replay) {
            self.figures.entry(key).or_default().mapped += bytes;
        }
        if let Some(space) = self.ending.take() {
            self.attribution.spaces.remove(&space);
        }
        self.count_regions(replay, 1);
        for (key, delta) in self.delta.drain() {
            if delta != 0 {
                let now = self.resident.entry(key).or_default();
                *now = u64::try_from(i128::from(*now) + delta).unwrap_or(0);
                self.changed.insert(key);
            }
        }
        // The first line at which the tree's total is largest, as `--at peak` takes it.
        if replay.tree_peak_resident_bytes > self.peak_bytes {
            self.peak_bytes = replay.tree_peak_resident_bytes;
            for key in self.changed.drain() {
                let now = self.resident.get(&key).copied().unwrap_or(0);
                self.at_peak.insert(key, now);
            }
        }
        Ok(Flow::Go)
    }

    fn end(&mut self, state: &State, out: &mut dyn Write) -> io::Result<()> {
        // The spaces still alive at the last line end there (ended ones have no mapping left).
        let live: Vec<SpaceId> = state.replay.spaces.keys().copied().collect();
        for space in live {
            self.ended(&state.replay, space);
        }
        if self.stacks.is_empty() {
            let why = if self.stacks_taken {
                "traced with --stacks, but no line names a site"
            } else {
                "it was traced without `run --stacks`"
            };
            crate::to_stderr!(
                "mevi-actors: {}: no call stacks in this trace ({why}): every byte is under \
                 (no stack)",
                self.name
            );
        }
        let figures = self.all_figures();
        let views = views::Views::new(&figures, &self.stacks);
        if self.json {
            views.write_json(out)
        } else {
            views.write_text(state, out)
        }
    }
}

#[cfg(test)]
mod tests;
