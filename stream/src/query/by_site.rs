//! `replay --by-site`: bytes by call site. Each range of a live space carries the site (the call
//! stack of a `site` line) of the line that mapped it; the figures of a site are the bytes of its
//! ranges: mapped (anonymous and file apart), resident at the whole tree's resident peak,
//! resident and still mapped (anonymous and file apart) as each space ended, added over spaces. The views (bottom-up, top-down) are in `views`.

mod views;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{self, Write};
use std::ops::Range;

use rangemap::{RangeMap, RangeSet};
use serde::Serialize;

use crate::event::{Event, ForkKind, Line, MapKind, SiteId, SpaceId};
use crate::model::Replay;
use crate::model::sites::{Key, Sites, Stack, clip};

use super::{Flow, Query, State};

/// A whole address space, as a range.
const EVERYWHERE: Range<u64> = 0..u64::MAX;

/// The figures of a site, a row or a node, in bytes (first touches in pages). Anonymous means
/// private anonymous memory (kinds `anon`, `heap`, `stack`: what resident counts); file, every
/// other mapping (files, and shared memory: `shmem`, `hugetlb`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Figures {
    /// Mapped by the site's lines, anonymous and file.
    pub anon_mapped: u64,
    pub file_mapped: u64,
    /// Resident at the whole tree's resident peak: the rows add up to it.
    pub resident_at_peak: u64,
    /// Resident as each space ended, added over the spaces: no one instant, so the rows can add
    /// up to more than the peak (spaces that ended one after another, a fork child's copies).
    pub resident_at_exit: u64,
    /// Still mapped as each space ended, added over the spaces, anonymous and file.
    pub anon_left: u64,
    pub file_left: u64,
    /// First touches that got a stack with `--touch-stacks N`: about 1 in N of them.
    pub sampled_touches: u64,
}

/// [`Figures`] in `--json` (docs/schema.md, "replay --by-site"): the keys of before the split
/// into anonymous and file (`mapped_bytes`, `alive_at_exit_bytes`) stay, as their sums.
#[derive(Serialize)]
struct FiguresJson {
    anon_mapped_bytes: u64,
    file_mapped_bytes: u64,
    mapped_bytes: u64,
    resident_at_peak_bytes: u64,
    resident_at_exit_bytes: u64,
    anon_left_at_exit_bytes: u64,
    file_left_at_exit_bytes: u64,
    alive_at_exit_bytes: u64,
    sampled_touches: u64,
}

impl Serialize for Figures {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        FiguresJson {
            anon_mapped_bytes: self.anon_mapped,
            file_mapped_bytes: self.file_mapped,
            mapped_bytes: self.mapped(),
            resident_at_peak_bytes: self.resident_at_peak,
            resident_at_exit_bytes: self.resident_at_exit,
            anon_left_at_exit_bytes: self.anon_left,
            file_left_at_exit_bytes: self.file_left,
            alive_at_exit_bytes: self.left(),
            sampled_touches: self.sampled_touches,
        }
        .serialize(serializer)
    }
}

impl Figures {
    pub fn add(&mut self, other: &Figures) {
        self.anon_mapped += other.anon_mapped;
        self.file_mapped += other.file_mapped;
        self.resident_at_peak += other.resident_at_peak;
        self.resident_at_exit += other.resident_at_exit;
        self.anon_left += other.anon_left;
        self.file_left += other.file_left;
        self.sampled_touches += other.sampled_touches;
    }

    /// Mapped, anonymous and file.
    pub fn mapped(&self) -> u64 {
        self.anon_mapped + self.file_mapped
    }

    /// Still mapped at the ends, anonymous and file.
    pub fn left(&self) -> u64 {
        self.anon_left + self.file_left
    }

    pub fn is_zero(&self) -> bool {
        *self == Figures::default()
    }
}

/// Private anonymous memory: what `resident` lines follow.
fn anonymous(kind: MapKind) -> bool {
    matches!(kind, MapKind::Anon | MapKind::Heap | MapKind::Stack)
}

/// Whether the bytes `event` mapped anew (its range, a `brk` growth, a `remap`'s grown tail),
/// now applied to `replay`, are anonymous.
fn maps_anonymous(replay: &Replay, event: &Event) -> bool {
    match *event {
        Event::Map { kind, .. } => anonymous(kind),
        Event::Remap { space, new_end, .. } => replay
            .spaces
            .get(&space)
            .and_then(|s| s.mappings.get(&new_end.saturating_sub(1)))
            .is_none_or(|m| anonymous(m.kind)),
        _ => true,
    }
}

/// Splits the bytes of `ranges` by the site each byte has in `sites`.
fn by_site(
    ranges: impl Iterator<Item = Range<u64>>,
    sites: Option<&RangeMap<u64, SiteId>>,
    mut add: impl FnMut(Key, u64),
) {
    for r in ranges {
        let mut attributed = 0;
        if let Some(sites) = sites {
            for (piece, site) in sites.overlapping(&r) {
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
    attribution: Sites,
    stacks: HashMap<SiteId, Stack>,
    /// Mapped bytes, sampled first touches and the figures at each space's end, by key.
    figures: HashMap<Key, Figures>,
    /// Resident bytes of every live space now, by key: kept by difference, what the parts of
    /// spaces a line can change held before it and after (they add up to the tree's total).
    resident: HashMap<Key, u64>,
    /// The same at the whole tree's resident peak so far (its first line), and the keys whose
    /// resident bytes have changed since.
    at_peak: HashMap<Key, u64>,
    changed: HashSet<Key>,
    peak_bytes: u64,
    /// Between `before` and `after` of a line: the parts it can change, and what they held by
    /// key (negated, to add what they hold after).
    regions: Vec<(SpaceId, Range<u64>)>,
    delta: HashMap<Key, i128>,
    /// The `start` line's `stack_depth`: traced with `--stacks`.
    stacks_taken: bool,
    /// The `start` line's `touch_stacks`: one first touch in about N was sampled.
    touch_period: Option<u64>,
}

impl BySite {
    pub fn new(json: bool, name: String) -> Self {
        BySite {
            json,
            name,
            attribution: Sites::default(),
            stacks: HashMap::new(),
            figures: HashMap::new(),
            resident: HashMap::new(),
            at_peak: HashMap::new(),
            changed: HashSet::new(),
            peak_bytes: 0,
            regions: Vec::new(),
            delta: HashMap::new(),
            stacks_taken: false,
            touch_period: None,
        }
    }

    /// Adds `sign` × the resident bytes of the regions, by key, to `delta`.
    fn count_regions(&mut self, replay: &Replay, sign: i128) {
        for (space, region) in &self.regions {
            let Some(s) = replay.spaces.get(space) else {
                continue;
            };
            let resident = s.resident.overlapping(region).map(|r| clip(r, region));
            by_site(resident, self.attribution.of(*space), |key, bytes| {
                *self.delta.entry(key).or_default() += sign * i128::from(bytes);
            });
        }
    }

    /// `space` as it ends: its resident and mapped bytes, by key.
    fn ended(&mut self, replay: &Replay, space: SpaceId) {
        let Some(s) = replay.spaces.get(&space) else {
            return;
        };
        let sites = self.attribution.of(space);
        let figures = &mut self.figures;
        by_site(s.resident.iter().cloned(), sites, |key, bytes| {
            figures.entry(key).or_default().resident_at_exit += bytes;
        });
        for (r, m) in s.mappings.iter() {
            let anon = anonymous(m.kind);
            by_site(std::iter::once(r.clone()), sites, |key, bytes| {
                let f = figures.entry(key).or_default();
                if anon {
                    f.anon_left += bytes;
                } else {
                    f.file_left += bytes;
                }
            });
        }
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
        if let Some(space) = self.attribution.before(replay, line) {
            self.ended(replay, space);
        }
        self.regions = regions(replay, &line.event);
        self.count_regions(replay, -1);
        Ok(Flow::Go)
    }

    fn after(&mut self, state: &State, line: &Line, _out: &mut dyn Write) -> io::Result<Flow> {
        let replay = &state.replay;
        match &line.event {
            Event::Start {
                stack_depth,
                touch_stacks,
                ..
            } => {
                self.stacks_taken = stack_depth.is_some();
                self.touch_period = *touch_stacks;
            }
            Event::Site { .. } => self.stacks.extend(Stack::of_site_line(&line.event)),
            // Sampled first touches carry the site of the thread that made them.
            Event::Resident { sampled, .. } => {
                if let Some(site) = line.event.site() {
                    self.figures.entry(Some(site)).or_default().sampled_touches += sampled;
                }
            }
            _ => {}
        }
        if let Some((key, bytes)) = self.attribution.after(replay, line) {
            let f = self.figures.entry(key).or_default();
            if maps_anonymous(replay, &line.event) {
                f.anon_mapped += bytes;
            } else {
                f.file_mapped += bytes;
            }
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
                "stacks were taken, but no line names a site"
            } else {
                "it was traced with `run --no-stacks`, or by a version without stacks"
            };
            crate::to_stderr!(
                "mevi-actors: {}: no call stacks in this trace ({why}): every byte is under \
                 (no stack)",
                self.name
            );
        }
        let figures = self.all_figures();
        let views = views::Views::new(&figures, &self.stacks, self.touch_period);
        if self.json {
            views.write_json(out)
        } else {
            views.write_text(state, out)
        }
    }
}

#[cfg(test)]
mod tests;
