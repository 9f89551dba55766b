//! Rebuilds every space's state at a time from the record bytes alone: the tests' check on the
//! encoder, and the reference the page's script follows.

use std::collections::BTreeMap;
use std::ops::Range;

use rangemap::RangeMap;

use crate::event::{SiteId, SpaceId};
use crate::model::{AddressSpace, Made, Mapping};

use super::format::{Piece, Record, Run, SitePiece, WRITTEN, ZERO};
use super::records::{KINDS, KeyframeAt};
use super::wire::{Cursor, Reader};

/// A space as the records left it.
#[derive(Clone, Debug, Default)]
pub struct DecodedSpace {
    /// Mappings, resident and zero pages, resident bytes and peak, as the model keeps them.
    pub state: AddressSpace,
    /// A process is in it.
    pub live: bool,
    /// The call site of each range that has one (`model::sites::Sites`'s).
    pub sites: RangeMap<u64, SiteId>,
}

/// Decodes records in order, up to a time.
pub struct Decoder<'a> {
    bytes: &'a [u8],
    at: usize,
    cursor: Cursor,
    space: Option<SpaceId>,
    strings: Vec<String>,
    pub spaces: BTreeMap<SpaceId, DecodedSpace>,
    /// The time of the last record applied.
    pub t_ns: u64,
}

impl<'a> Decoder<'a> {
    /// From the first byte.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self::from_offset(bytes, 0)
    }

    /// From `offset`, which must be where a record starts: 0 or a keyframe's.
    pub fn from_offset(bytes: &'a [u8], offset: usize) -> Self {
        Decoder {
            bytes,
            at: offset,
            cursor: Cursor::default(),
            space: None,
            strings: Vec::new(),
            spaces: BTreeMap::new(),
            t_ns: 0,
        }
    }

    /// The state after every record with a time up to `t_ns`, starting from the last keyframe
    /// in `keyframes` at or before it.
    pub fn at(bytes: &'a [u8], keyframes: &[KeyframeAt], t_ns: u64) -> Result<Self, String> {
        let offset = keyframes
            .iter()
            .rev()
            .find(|k| k.t_ns <= t_ns)
            .map_or(0, |k| k.offset);
        let mut decoder = Self::from_offset(bytes, offset);
        decoder.advance_to(t_ns)?;
        Ok(decoder)
    }

    /// Applies records up to the first with a time after `t_ns` (left unread).
    pub fn advance_to(&mut self, t_ns: u64) -> Result<(), String> {
        while self.at < self.bytes.len() {
            let (mut reader, mut cursor) = (Reader::new(self.bytes, self.at), self.cursor);
            let record = Record::read(&mut reader, &mut cursor)?;
            if record.t_ns().is_some_and(|t| t > t_ns) {
                break;
            }
            self.at = reader.at;
            self.cursor = cursor;
            self.apply(record)?;
        }
        Ok(())
    }

    fn space_mut(&mut self) -> Result<&mut DecodedSpace, String> {
        let space = self.space.ok_or("a record before any SPACE record")?;
        Ok(self.spaces.entry(space).or_default())
    }

    fn mapping(&self, p: &Piece) -> Result<Mapping, String> {
        let string = |id: u64| {
            self.strings
                .get(id as usize)
                .cloned()
                .ok_or_else(|| format!("unknown string id {id}"))
        };
        Ok(Mapping {
            kind: *KINDS
                .get(usize::from(p.kind))
                .ok_or_else(|| format!("unknown kind {}", p.kind))?,
            prot: string(p.prot)?,
            path: p.path.map(string).transpose()?,
            tracked: p.tracked,
            made: Made {
                seq: p.made_seq,
                t_ns: p.made_t_ns,
                tid: p.made_tid,
            },
        })
    }

    fn apply(&mut self, record: Record) -> Result<(), String> {
        if let Some(t) = record.t_ns() {
            self.t_ns = t;
        }
        match record {
            Record::PageSize(_) => {}
            Record::Space(s) => self.space = Some(s),
            Record::String(s) => self.strings.push(s),
            Record::Pages {
                start, len, runs, ..
            } => set_pages(&mut self.space_mut()?.state, start, len, &runs),
            Record::Range {
                start,
                len,
                pieces,
                runs,
                sites,
                ..
            } => {
                let mappings = self.mappings(start, &pieces)?;
                let space = self.space_mut()?;
                let s = &mut space.state;
                s.mappings.remove(start..start + len);
                for (r, m) in mappings {
                    s.mappings.insert(r, m);
                }
                set_pages(s, start, len, &runs);
                set_sites(&mut space.sites, start, len, &sites);
            }
            Record::Create { space, copy_of, .. } => {
                let parent = copy_of.and_then(|p| self.spaces.get(&p));
                let mut state = parent.map(|p| p.state.clone()).unwrap_or_default();
                let sites = parent.map(|p| p.sites.clone()).unwrap_or_default();
                state.peak_resident_bytes = state.resident_bytes;
                let live = self.spaces.get(&space).is_some_and(|s| s.live);
                self.spaces
                    .insert(space, DecodedSpace { state, live, sites });
            }
            Record::Live { space, .. } => self.spaces.entry(space).or_default().live = true,
            Record::Ended { space, .. } => {
                let s = self.spaces.entry(space).or_default();
                let peak = s.state.peak_resident_bytes;
                s.state = AddressSpace {
                    peak_resident_bytes: peak,
                    ..Default::default()
                };
                s.live = false;
                s.sites = RangeMap::new();
            }
            Record::Keyframe {
                strings, spaces, ..
            } => {
                self.strings = strings;
                self.space = None;
                self.spaces.clear();
                for k in spaces {
                    let mappings = self.mappings(k.start, &k.pieces)?;
                    let mut state = AddressSpace::default();
                    for (r, m) in mappings {
                        state.mappings.insert(r, m);
                    }
                    set_pages(&mut state, k.start, k.len, &k.runs);
                    state.peak_resident_bytes = k.peak_resident_bytes;
                    let mut sites = RangeMap::new();
                    set_sites(&mut sites, k.start, k.len, &k.sites);
                    self.spaces.insert(
                        k.space,
                        DecodedSpace {
                            state,
                            live: k.live,
                            sites,
                        },
                    );
                }
            }
        }
        Ok(())
    }

    fn mappings(&self, start: u64, pieces: &[Piece]) -> Result<Vec<(Range<u64>, Mapping)>, String> {
        let mut at = start;
        let mut out = Vec::new();
        for p in pieces {
            let begin = at + p.gap;
            at = begin + p.len;
            if p.len > 0 {
                out.push((begin..at, self.mapping(p)?));
            }
        }
        Ok(out)
    }
}

/// Sets the sites of `[start, start+len)` to `pieces` (what they leave out has none).
fn set_sites(sites: &mut RangeMap<u64, SiteId>, start: u64, len: u64, pieces: &[SitePiece]) {
    if len > 0 {
        sites.remove(start..start.saturating_add(len));
    }
    let mut at = start;
    for p in pieces {
        let begin = at.saturating_add(p.gap);
        at = begin.saturating_add(p.len);
        if at > begin {
            sites.insert(begin..at, p.site);
        }
    }
}

/// Sets the pages of `[start, start+len)` to `runs`, keeping resident bytes and the peak.
fn set_pages(s: &mut AddressSpace, start: u64, len: u64, runs: &[Run]) {
    let range = start..start + len;
    if range.is_empty() {
        return;
    }
    let before = s.resident_in(range.clone());
    s.resident.remove(range.clone());
    s.zero.remove(range.clone());
    let mut at = start;
    for run in runs {
        let r = at..at + run.len;
        if run.state == WRITTEN || run.state == ZERO {
            s.resident.insert(r.clone());
        }
        if run.state == ZERO {
            s.zero.insert(r);
        }
        at += run.len;
    }
    // Saturating: bytes that do not describe a real trace must not panic.
    s.resident_bytes = (s.resident_bytes + s.resident_in(range)).saturating_sub(before);
    s.peak_resident_bytes = s.peak_resident_bytes.max(s.resident_bytes);
}
