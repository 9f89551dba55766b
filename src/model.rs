//! Page states of every address space, rebuilt from the stream by the replay rules of
//! `docs/schema.md`. The state actor keeps one of these while it writes the stream, and
//! `mevi-actors replay` (and the tests) rebuild one from a written stream: both use this code, so
//! what a user replays is what the tracer believed.

use std::collections::BTreeMap;
use std::ops::Range;

use rangemap::{RangeMap, RangeSet};

use crate::event::{Event, ForkKind, Line, MapKind, PageState, SpaceId};

/// What occupies a range of an address space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub kind: MapKind,
    pub prot: String,
    pub path: Option<String>,
    pub tracked: bool,
}

/// One address space as the stream describes it.
#[derive(Clone, Debug, Default)]
pub struct AddressSpace {
    pub mappings: RangeMap<u64, Mapping>,
    pub resident: RangeSet<u64>,
    pub resident_bytes: u64,
    pub peak_resident_bytes: u64,
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

    fn remove_resident(&mut self, range: Range<u64>) {
        if range.is_empty() {
            return;
        }
        let removed: u64 = self
            .resident
            .overlapping(&range)
            .map(|r| r.end.min(range.end) - r.start.max(range.start))
            .sum();
        self.resident.remove(range);
        self.resident_bytes -= removed;
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

    /// Bytes covered by tracked mappings.
    pub fn tracked_bytes(&self) -> u64 {
        self.mappings
            .iter()
            .filter(|(_, m)| m.tracked)
            .map(|(r, _)| r.end - r.start)
            .sum()
    }

    fn remap(&mut self, old: Range<u64>, new: Range<u64>, dontunmap: bool) {
        let old_len = old.end - old.start;
        let moved_len = old_len.min(new.end - new.start);
        let src = old.start..old.start + moved_len;
        let pieces: Vec<(Range<u64>, Mapping)> = self
            .mappings
            .overlapping(&old)
            .map(|(r, m)| (r.start.max(old.start)..r.end.min(old.end), m.clone()))
            .collect();
        let resident: Vec<Range<u64>> = self
            .resident
            .overlapping(&src)
            .map(|r| r.start.max(src.start)..r.end.min(src.end))
            .collect();
        if dontunmap {
            // The old range stays mapped, with every page gone.
            self.remove_resident(old.clone());
        } else {
            self.replace(old.clone(), None, None);
        }
        self.replace(new.clone(), None, None);
        let shift = |a: u64| a - old.start + new.start;
        let mut last: Option<Mapping> = None;
        for (r, m) in pieces {
            let start = shift(r.start);
            let end = shift(r.end).min(new.end);
            if start < end {
                self.mappings.insert(start..end, m.clone());
            }
            last = Some(m);
        }
        // A grown tail belongs to the mapping that was at the old end.
        if new.end - new.start > old_len
            && let Some(m) = last
        {
            self.mappings.insert(new.start + old_len..new.end, m);
        }
        for r in resident {
            self.add_resident(shift(r.start)..shift(r.end));
        }
    }
}

/// Every address space of a trace, rebuilt event by event.
#[derive(Clone, Debug, Default)]
pub struct Replay {
    pub spaces: BTreeMap<SpaceId, AddressSpace>,
    /// Which space each live process (thread group) is in.
    pub process_space: BTreeMap<i32, SpaceId>,
    next_seq: u64,
    /// Problems found in the stream itself (gaps in `seq`, events for unknown spaces).
    pub problems: Vec<String>,
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
        self.apply(&line.event);
    }

    /// Applies one event by the replay rules of `docs/schema.md`.
    pub fn apply(&mut self, event: &Event) {
        if let Some(space) = event.creates_space() {
            let copy = match event {
                Event::Fork { space: parent, .. } => {
                    let mut copy = self.spaces.get(parent).cloned().unwrap_or_default();
                    // The child's peak starts at what it inherits.
                    copy.peak_resident_bytes = copy.resident_bytes;
                    copy
                }
                _ => AddressSpace::default(),
            };
            self.spaces.insert(space, copy);
        }
        if let Some(space) = event.space()
            && !self.spaces.contains_key(&space)
        {
            self.problems
                .push(format!("event for unknown space {space}: {event:?}"));
            self.spaces.insert(space, AddressSpace::default());
        }
        match event {
            Event::Exec { pid, space, .. } => {
                self.process_space.insert(*pid, *space);
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
                space,
                start,
                end,
                prot,
                kind,
                path,
                tracked,
                state,
                ..
            } => {
                let m = Mapping {
                    kind: *kind,
                    prot: prot.clone(),
                    path: path.clone(),
                    tracked: *tracked,
                };
                self.space_mut(*space)
                    .replace(*start..*end, Some(m), *state);
            }
            Event::Unmap {
                space, start, end, ..
            } => self.space_mut(*space).replace(*start..*end, None, None),
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
                space,
                old,
                new,
                tracked,
                ..
            } => {
                let s = self.space_mut(*space);
                if new > old {
                    let heap = Mapping {
                        kind: MapKind::Heap,
                        prot: "rw-".into(),
                        path: None,
                        tracked: *tracked,
                    };
                    s.replace(*old..*new, Some(heap), Some(PageState::NotResident));
                } else {
                    s.replace(*new..*old, None, None);
                }
            }
            Event::Discard {
                space, start, end, ..
            } => self.space_mut(*space).remove_resident(*start..*end),
            Event::Resident {
                space, start, end, ..
            } => self.space_mut(*space).add_resident(*start..*end),
            Event::Exit { pid, .. } => {
                self.process_space.remove(pid);
            }
            Event::Start { .. }
            | Event::Verify { .. }
            | Event::Thread { .. }
            | Event::ThreadExit { .. }
            | Event::Warning { .. }
            | Event::Summary { .. } => {}
        }
    }

    fn space_mut(&mut self, space: SpaceId) -> &mut AddressSpace {
        self.spaces.entry(space).or_default()
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

#[cfg(test)]
mod tests {
    use super::*;

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
        }
    }

    fn resident(start: u64, end: u64) -> Event {
        Event::Resident {
            pid: 1,
            tid: 1,
            space: 0,
            start,
            end,
            write: true,
            faults: (end - start) / 4096,
        }
    }

    fn exec() -> Event {
        Event::Exec {
            pid: 1,
            tid: 1,
            space: 0,
            path: "/x".into(),
            argv: vec![],
        }
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
        });
        assert_eq!(r.spaces[&0].resident_bytes, 0);
        assert_eq!(r.spaces[&0].peak_resident_bytes, 0x4000);
        assert_eq!(r.spaces[&1].resident_bytes, 0x4000);
        assert_eq!(r.process_space[&2], 1);
    }
}
