//! The record stream the report's page decodes (docs/report.md, "Records"): built line by line
//! from the replayed model, so it is exact by construction: each record carries the state a
//! line left in the range it changed, read from [`Replay`], never re-derived from the line.

use std::collections::HashMap;
use std::ops::Range;

use rangemap::RangeMap;

use crate::event::{Event, ForkKind, Line, MapKind, SiteId, SpaceId};
use crate::model::sites::{Sites, clip};
use crate::model::{AddressSpace, Replay};

use super::format::{KeySpace, Piece, Record, Run, SitePiece, UNTOUCHED, WRITTEN, ZERO};
use super::wire::Cursor;

/// Records between keyframes by default: a seek decodes at most this many after one.
pub const KEYFRAME_EVERY: u64 = 65_536;

/// Where a keyframe is: its time, how many records came before it, its byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyframeAt {
    pub t_ns: u64,
    pub record: u64,
    pub offset: usize,
}

pub const KINDS: [MapKind; 6] = [
    MapKind::Anon,
    MapKind::Heap,
    MapKind::Stack,
    MapKind::Shmem,
    MapKind::File,
    MapKind::Hugetlb,
];

/// What a line may change, seen before it is applied.
enum Change {
    Nothing,
    /// Only pages, in this range; the resident bytes there before (unchanged: no record).
    Pages(SpaceId, Range<u64>, u64),
    /// Mappings and pages in these ranges (a remap's two; an empty one is none).
    Ranges(SpaceId, [Range<u64>; 2]),
    /// Spaces made, entered or left; whether each candidate had a process before.
    Lives(Vec<(SpaceId, bool)>),
}

/// Builds the records, fed every line before and after the replay applies it.
pub struct Encoder {
    pub bytes: Vec<u8>,
    pub keyframes: Vec<KeyframeAt>,
    pub records: u64,
    keyframe_every: u64,
    since_keyframe: u64,
    cursor: Cursor,
    space: Option<SpaceId>,
    strings: HashMap<String, u64>,
    string_list: Vec<String>,
    change: Change,
    page_said: bool,
    /// The call site of each range (`run --stacks`), by the rules `replay --by-site` follows.
    pub sites: Sites,
}

impl Encoder {
    pub fn new(keyframe_every: u64) -> Self {
        Encoder {
            bytes: Vec::new(),
            keyframes: Vec::new(),
            records: 0,
            keyframe_every: keyframe_every.max(1),
            since_keyframe: 0,
            cursor: Cursor::default(),
            space: None,
            strings: HashMap::new(),
            string_list: Vec::new(),
            change: Change::Nothing,
            page_said: false,
            sites: Sites::default(),
        }
    }

    fn put(&mut self, record: Record) {
        if !self.page_said {
            self.page_said = true;
            Record::PageSize(self.cursor.page).write(&mut self.bytes, &mut self.cursor);
            self.records += 1;
        }
        record.write(&mut self.bytes, &mut self.cursor);
        self.records += 1;
        self.since_keyframe += 1;
    }

    fn in_space(&mut self, space: SpaceId) {
        if self.space != Some(space) {
            self.space = Some(space);
            self.put(Record::Space(space));
        }
    }

    fn string_id(&mut self, s: &str) -> u64 {
        if let Some(&id) = self.strings.get(s) {
            return id;
        }
        let id = self.string_list.len() as u64;
        self.strings.insert(s.to_string(), id);
        self.string_list.push(s.to_string());
        self.put(Record::String(s.to_string()));
        id
    }

    /// The mappings within `range`, clipped to it.
    fn pieces(&mut self, s: &AddressSpace, range: &Range<u64>) -> Vec<Piece> {
        let mut pieces = Vec::new();
        let mut at = range.start;
        for (r, m) in s.mappings.overlapping(range) {
            let (start, end) = (r.start.max(range.start), r.end.min(range.end));
            pieces.push(Piece {
                gap: start - at,
                len: end - start,
                kind: KINDS.iter().position(|&k| k == m.kind).unwrap_or(0) as u8,
                tracked: m.tracked,
                prot: self.string_id(&m.prot),
                path: m.path.as_deref().map(|p| self.string_id(p)),
                made_seq: m.made.seq,
                made_t_ns: m.made.t_ns,
                made_tid: m.made.tid,
            });
            at = end;
        }
        pieces
    }

    /// A line is about to be applied to `replay`.
    pub fn before(&mut self, replay: &Replay, line: &Line) {
        self.sites.before(replay, line);
        if let Event::Start { page_size, .. } = &line.event
            && !self.page_said
        {
            self.cursor.page = (*page_size).max(2);
        }
        let span = |a: u64, b: u64| a.min(b)..a.max(b);
        self.change = match &line.event {
            Event::Resident {
                space, start, end, ..
            }
            | Event::Discard {
                space, start, end, ..
            }
            | Event::Evicted {
                space, start, end, ..
            } => {
                let resident = replay
                    .spaces
                    .get(space)
                    .map_or(0, |s| s.resident_in(*start..*end));
                Change::Pages(*space, *start..*end, resident)
            }
            Event::Map {
                space, start, end, ..
            }
            | Event::Unmap {
                space, start, end, ..
            }
            | Event::Protect {
                space, start, end, ..
            } => Change::Ranges(*space, [*start..*end, 0..0]),
            Event::Brk {
                space, old, new, ..
            } => Change::Ranges(*space, [span(*old, *new), 0..0]),
            Event::Remap {
                space,
                old_start,
                old_end,
                new_start,
                new_end,
                ..
            } => Change::Ranges(*space, [*old_start..*old_end, *new_start..*new_end]),
            Event::Exec { .. } | Event::Fork { .. } | Event::Exit { .. } => {
                let mut spaces: Vec<SpaceId> = Vec::new();
                let pid_space = line
                    .event
                    .pid()
                    .and_then(|p| replay.process_space.get(&p).copied());
                for s in [line.event.space(), line.event.creates_space(), pid_space]
                    .into_iter()
                    .flatten()
                {
                    if !spaces.contains(&s) {
                        spaces.push(s);
                    }
                }
                let live = |s: SpaceId| replay.process_space.values().any(|&v| v == s);
                Change::Lives(spaces.into_iter().map(|s| (s, live(s))).collect())
            }
            _ => Change::Nothing,
        };
    }

    /// `line` has been applied to `replay`: the records of what it changed.
    pub fn after(&mut self, replay: &Replay, line: &Line) {
        // A line changes sites only within the ranges whose RANGE records it gives.
        self.sites.after(replay, line);
        let t_ns = line.t_ns;
        match std::mem::replace(&mut self.change, Change::Nothing) {
            Change::Nothing => {}
            Change::Pages(space, range, resident_before) => {
                let Some(s) = replay.spaces.get(&space) else {
                    return;
                };
                // Resident pages are only added (or only removed) here, and zero pages are
                // resident ones: same resident bytes, same pages.
                if range.is_empty() || s.resident_in(range.clone()) == resident_before {
                    return;
                }
                self.in_space(space);
                let runs = page_runs(s, &range);
                self.put(Record::Pages {
                    t_ns,
                    start: range.start,
                    len: range.end - range.start,
                    runs,
                });
            }
            Change::Ranges(space, ranges) => {
                let Some(s) = replay.spaces.get(&space) else {
                    return;
                };
                for range in ranges.into_iter().filter(|r| !r.is_empty()) {
                    let pieces = self.pieces(s, &range);
                    self.in_space(space);
                    let runs = page_runs(s, &range);
                    let sites = site_pieces(self.sites.of(space), &range);
                    let len = range.end - range.start;
                    self.put(Record::Range {
                        t_ns,
                        start: range.start,
                        len,
                        pieces,
                        runs,
                        sites,
                    });
                }
            }
            Change::Lives(spaces) => {
                if let Some(space) = line.event.creates_space() {
                    let copy_of = match &line.event {
                        Event::Fork {
                            kind: ForkKind::Fork,
                            space: parent,
                            ..
                        } => Some(*parent),
                        _ => None,
                    };
                    self.put(Record::Create {
                        t_ns,
                        space,
                        copy_of,
                    });
                }
                for (space, was_live) in spaces {
                    let live = replay.process_space.values().any(|&v| v == space);
                    if live && !was_live {
                        self.put(Record::Live { t_ns, space });
                    } else if was_live && !live {
                        self.put(Record::Ended { t_ns, space });
                    }
                }
            }
        }
        if self.since_keyframe >= self.keyframe_every {
            self.keyframe(replay, t_ns);
        }
    }

    /// The whole state now, so a reader can start here.
    pub fn keyframe(&mut self, replay: &Replay, t_ns: u64) {
        let mut spaces = Vec::new();
        for (&space, s) in &replay.spaces {
            let live = replay.process_space.values().any(|&v| v == space);
            let sites = self.sites.of(space);
            let first = [
                s.mappings.iter().next().map(|(r, _)| r.start),
                s.resident.iter().next().map(|r| r.start),
                sites.and_then(|m| m.iter().next()).map(|(r, _)| r.start),
            ];
            let last = [
                s.mappings.iter().next_back().map(|(r, _)| r.end),
                s.resident.iter().next_back().map(|r| r.end),
                sites.and_then(|m| m.iter().next_back()).map(|(r, _)| r.end),
            ];
            let start = first.into_iter().flatten().min().unwrap_or(0);
            let end = last.into_iter().flatten().max().unwrap_or(0);
            if !live && start == end {
                continue;
            }
            let sites = site_pieces(sites, &(start..end));
            let pieces = self.pieces(s, &(start..end));
            let runs = page_runs(s, &(start..end));
            spaces.push(KeySpace {
                space,
                live,
                peak_resident_bytes: s.peak_resident_bytes,
                start,
                len: end - start,
                pieces,
                runs,
                sites,
            });
        }
        self.keyframes.push(KeyframeAt {
            t_ns,
            record: self.records,
            offset: self.bytes.len(),
        });
        let page = self.cursor.page;
        self.put(Record::Keyframe {
            t_ns,
            page,
            strings: self.string_list.clone(),
            spaces,
        });
        self.space = None;
        self.since_keyframe = 0;
    }
}

/// The page states of `range`: resident pages are written unless in `zero`.
pub fn page_runs(s: &AddressSpace, range: &Range<u64>) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    let mut push = |len: u64, state: u8| {
        if len == 0 {
            return;
        }
        match runs.last_mut() {
            Some(last) if last.state == state => last.len += len,
            _ => runs.push(Run { len, state }),
        }
    };
    let mut at = range.start;
    for r in s.resident.overlapping(range) {
        let (a, b) = (r.start.max(range.start), r.end.min(range.end));
        push(a - at, UNTOUCHED);
        let mut p = a;
        for z in s.zero.overlapping(&(a..b)) {
            let (za, zb) = (z.start.max(a), z.end.min(b));
            push(za - p, WRITTEN);
            push(zb - za, ZERO);
            p = zb;
        }
        push(b - p, WRITTEN);
        at = b;
    }
    push(range.end - at, UNTOUCHED);
    runs
}

/// The sites within `range`, clipped to it.
pub fn site_pieces(sites: Option<&RangeMap<u64, SiteId>>, range: &Range<u64>) -> Vec<SitePiece> {
    let mut pieces = Vec::new();
    let mut at = range.start;
    for (r, &site) in sites.into_iter().flat_map(|s| s.overlapping(range)) {
        let r = clip(r, range);
        pieces.push(SitePiece {
            gap: r.start - at,
            len: r.end - r.start,
            site,
        });
        at = r.end;
    }
    pieces
}

/// The records of a whole stream of lines, replayed from the start.
pub fn encode<'l>(lines: impl IntoIterator<Item = &'l Line>, keyframe_every: u64) -> Encoder {
    let mut replay = Replay::new();
    let mut encoder = Encoder::new(keyframe_every);
    let mut t_ns = 0;
    for line in lines {
        encoder.before(&replay, line);
        replay.apply_line(line);
        encoder.after(&replay, line);
        t_ns = line.t_ns;
    }
    encoder.keyframe(&replay, t_ns);
    encoder
}
