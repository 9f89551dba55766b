//! One record of the stream and its bytes (docs/report.md, "Records"). Both sides go through
//! [`Record`], so the encoder and the decoder cannot disagree on a layout.

use crate::event::{SiteId, SpaceId};

use super::wire::{Cursor, Reader, put_i64, put_len, put_str, put_u64};

/// A page's state in a run.
pub const UNTOUCHED: u8 = 0;
pub const WRITTEN: u8 = 1;
pub const ZERO: u8 = 2;

/// `len` bytes in one state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub len: u64,
    pub state: u8,
}

/// A mapping's part within a record's range: `gap` bytes after the previous piece (or the
/// range's start), then `len` bytes. Strings are ids into the table the STRING records build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    pub gap: u64,
    pub len: u64,
    pub kind: u8,
    pub tracked: bool,
    pub prot: u64,
    pub path: Option<u64>,
    pub made_seq: u64,
    pub made_t_ns: u64,
    pub made_tid: i32,
}

/// A part of a record's range made by a call site (the site lines of a `run --stacks` trace):
/// `gap` bytes after the previous one (or the range's start), then `len` bytes of `site`. What
/// no `SitePiece` covers has no site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SitePiece {
    pub gap: u64,
    pub len: u64,
    pub site: SiteId,
}

/// A space's whole state in a keyframe: its extent's pieces, runs and sites.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeySpace {
    pub space: SpaceId,
    pub live: bool,
    pub peak_resident_bytes: u64,
    pub start: u64,
    pub len: u64,
    pub pieces: Vec<Piece>,
    pub runs: Vec<Run>,
    pub sites: Vec<SitePiece>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    PageSize(u64),
    Space(SpaceId),
    String(String),
    /// The page states of `[start, start+len)` after a line that changed only pages.
    Pages {
        t_ns: u64,
        start: u64,
        len: u64,
        runs: Vec<Run>,
    },
    /// Mappings, page states and sites of `[start, start+len)` after a layout line.
    Range {
        t_ns: u64,
        start: u64,
        len: u64,
        pieces: Vec<Piece>,
        runs: Vec<Run>,
        sites: Vec<SitePiece>,
    },
    /// The space made anew: empty, or a copy of `copy_of` (a fork).
    Create {
        t_ns: u64,
        space: SpaceId,
        copy_of: Option<SpaceId>,
    },
    /// A process is in the space now.
    Live {
        t_ns: u64,
        space: SpaceId,
    },
    /// Its last process left: the space is empty from here (its peak stays).
    Ended {
        t_ns: u64,
        space: SpaceId,
    },
    Keyframe {
        t_ns: u64,
        page: u64,
        strings: Vec<String>,
        spaces: Vec<KeySpace>,
    },
}

const PAGE_SIZE: u8 = 0;
const SPACE: u8 = 1;
const STRING: u8 = 2;
const PAGES: u8 = 3;
const RANGE: u8 = 4;
const CREATE: u8 = 5;
const LIVE: u8 = 6;
const ENDED: u8 = 7;
const KEYFRAME: u8 = 8;

fn put_runs(out: &mut Vec<u8>, runs: &[Run], page: u64) {
    for run in runs {
        let rem = run.len % page;
        put_u64(
            out,
            (run.len / page) << 3 | u64::from(rem != 0) << 2 | u64::from(run.state),
        );
        if rem != 0 {
            put_u64(out, rem);
        }
    }
}

/// Runs until they cover `len` bytes.
fn get_runs(r: &mut Reader, len: u64, page: u64) -> Result<Vec<Run>, String> {
    let mut runs = Vec::new();
    let mut covered = 0u64;
    while covered < len {
        let v = r.u64()?;
        let rem = if v & 4 != 0 { r.u64()? } else { 0 };
        let state = (v & 3) as u8;
        let run_len = (v >> 3).saturating_mul(page).saturating_add(rem);
        if state > ZERO || run_len == 0 || run_len > len - covered {
            return Err(format!("bad page run before byte {}", r.at));
        }
        covered += run_len;
        runs.push(Run {
            len: run_len,
            state,
        });
    }
    Ok(runs)
}

fn put_pieces(out: &mut Vec<u8>, pieces: &[Piece], page: u64) {
    put_u64(out, pieces.len() as u64);
    for p in pieces {
        put_len(out, p.gap, page);
        put_len(out, p.len, page);
        put_u64(out, u64::from(p.kind) << 1 | u64::from(p.tracked));
        put_u64(out, p.prot);
        put_u64(out, p.path.map_or(0, |id| id + 1));
        put_u64(out, p.made_seq);
        put_u64(out, p.made_t_ns);
        put_i64(out, i64::from(p.made_tid));
    }
}

fn get_pieces(r: &mut Reader, page: u64) -> Result<Vec<Piece>, String> {
    let n = r.u64()?;
    let mut pieces = Vec::new();
    for _ in 0..n {
        let gap = r.len(page)?;
        let len = r.len(page)?;
        let flags = r.u64()?;
        let prot = r.u64()?;
        let path = r.u64()?.checked_sub(1);
        let made_seq = r.u64()?;
        let made_t_ns = r.u64()?;
        let made_tid = i32::try_from(r.i64()?).map_err(|e| format!("thread id: {e}"))?;
        pieces.push(Piece {
            gap,
            len,
            kind: (flags >> 1) as u8,
            tracked: flags & 1 == 1,
            prot,
            path,
            made_seq,
            made_t_ns,
            made_tid,
        });
    }
    Ok(pieces)
}

fn put_sites(out: &mut Vec<u8>, sites: &[SitePiece], page: u64) {
    put_u64(out, sites.len() as u64);
    for p in sites {
        put_len(out, p.gap, page);
        put_len(out, p.len, page);
        put_u64(out, p.site);
    }
}

fn get_sites(r: &mut Reader, page: u64) -> Result<Vec<SitePiece>, String> {
    let n = r.u64()?;
    let mut sites = Vec::new();
    for _ in 0..n {
        let gap = r.len(page)?;
        let len = r.len(page)?;
        let site = r.u64()?;
        sites.push(SitePiece { gap, len, site });
    }
    Ok(sites)
}

impl Record {
    /// Appends the record's bytes, moving `cursor` on.
    pub fn write(&self, out: &mut Vec<u8>, cursor: &mut Cursor) {
        match self {
            Record::PageSize(page) => {
                out.push(PAGE_SIZE);
                put_u64(out, *page);
                cursor.page = (*page).max(2);
            }
            Record::Space(s) => {
                out.push(SPACE);
                put_u64(out, *s);
            }
            Record::String(s) => {
                out.push(STRING);
                put_str(out, s);
            }
            Record::Pages {
                t_ns,
                start,
                len,
                runs,
            } => {
                out.push(PAGES);
                cursor.put_dt(out, *t_ns);
                cursor.put_start(out, *start);
                put_len(out, *len, cursor.page);
                put_runs(out, runs, cursor.page);
            }
            Record::Range {
                t_ns,
                start,
                len,
                pieces,
                runs,
                sites,
            } => {
                out.push(RANGE);
                cursor.put_dt(out, *t_ns);
                cursor.put_start(out, *start);
                put_len(out, *len, cursor.page);
                put_pieces(out, pieces, cursor.page);
                put_runs(out, runs, cursor.page);
                put_sites(out, sites, cursor.page);
            }
            Record::Create {
                t_ns,
                space,
                copy_of,
            } => {
                out.push(CREATE);
                cursor.put_dt(out, *t_ns);
                put_u64(out, *space);
                put_u64(out, copy_of.map_or(0, |s| s + 1));
            }
            Record::Live { t_ns, space } | Record::Ended { t_ns, space } => {
                out.push(if matches!(self, Record::Live { .. }) {
                    LIVE
                } else {
                    ENDED
                });
                cursor.put_dt(out, *t_ns);
                put_u64(out, *space);
            }
            Record::Keyframe {
                t_ns,
                page,
                strings,
                spaces,
            } => {
                // Absolute, not deltas: a reader may start here.
                *cursor = Cursor {
                    page: (*page).max(2),
                    t_ns: *t_ns,
                    start: 0,
                };
                out.push(KEYFRAME);
                put_u64(out, *t_ns);
                put_u64(out, *page);
                put_u64(out, strings.len() as u64);
                for s in strings {
                    put_str(out, s);
                }
                put_u64(out, spaces.len() as u64);
                for k in spaces {
                    put_u64(out, k.space);
                    put_u64(out, u64::from(k.live));
                    put_u64(out, k.peak_resident_bytes);
                    put_u64(out, k.start);
                    put_len(out, k.len, cursor.page);
                    put_pieces(out, &k.pieces, cursor.page);
                    put_runs(out, &k.runs, cursor.page);
                    put_sites(out, &k.sites, cursor.page);
                }
            }
        }
    }

    /// Reads the record at `r`, moving `cursor` on as the writer did.
    pub fn read(r: &mut Reader, cursor: &mut Cursor) -> Result<Record, String> {
        let at = r.at;
        Ok(match r.byte()? {
            PAGE_SIZE => {
                let page = r.u64()?;
                cursor.page = page.max(2);
                Record::PageSize(page)
            }
            SPACE => Record::Space(r.u64()?),
            STRING => Record::String(r.str()?),
            PAGES => {
                let t_ns = cursor.get_dt(r)?;
                let start = cursor.get_start(r)?;
                let len = r.len(cursor.page)?;
                let runs = get_runs(r, len, cursor.page)?;
                Record::Pages {
                    t_ns,
                    start,
                    len,
                    runs,
                }
            }
            RANGE => {
                let t_ns = cursor.get_dt(r)?;
                let start = cursor.get_start(r)?;
                let len = r.len(cursor.page)?;
                let pieces = get_pieces(r, cursor.page)?;
                let runs = get_runs(r, len, cursor.page)?;
                let sites = get_sites(r, cursor.page)?;
                Record::Range {
                    t_ns,
                    start,
                    len,
                    pieces,
                    runs,
                    sites,
                }
            }
            CREATE => {
                let t_ns = cursor.get_dt(r)?;
                let space = r.u64()?;
                let copy_of = r.u64()?.checked_sub(1);
                Record::Create {
                    t_ns,
                    space,
                    copy_of,
                }
            }
            LIVE => Record::Live {
                t_ns: cursor.get_dt(r)?,
                space: r.u64()?,
            },
            ENDED => Record::Ended {
                t_ns: cursor.get_dt(r)?,
                space: r.u64()?,
            },
            KEYFRAME => {
                let t_ns = r.u64()?;
                let page = r.u64()?;
                *cursor = Cursor {
                    page: page.max(2),
                    t_ns,
                    start: 0,
                };
                let strings = (0..r.u64()?).map(|_| r.str()).collect::<Result<_, _>>()?;
                let mut spaces = Vec::new();
                for _ in 0..r.u64()? {
                    let space = r.u64()?;
                    let live = r.u64()? == 1;
                    let peak_resident_bytes = r.u64()?;
                    let start = r.u64()?;
                    let len = r.len(cursor.page)?;
                    let pieces = get_pieces(r, cursor.page)?;
                    let runs = get_runs(r, len, cursor.page)?;
                    let sites = get_sites(r, cursor.page)?;
                    spaces.push(KeySpace {
                        space,
                        live,
                        peak_resident_bytes,
                        start,
                        len,
                        pieces,
                        runs,
                        sites,
                    });
                }
                Record::Keyframe {
                    t_ns,
                    page,
                    strings,
                    spaces,
                }
            }
            kind => return Err(format!("unknown record kind {kind} at byte {at}")),
        })
    }

    /// The record's time, if it has one (SPACE, STRING and PAGE_SIZE only set up the next).
    pub fn t_ns(&self) -> Option<u64> {
        match self {
            Record::PageSize(_) | Record::Space(_) | Record::String(_) => None,
            Record::Pages { t_ns, .. }
            | Record::Range { t_ns, .. }
            | Record::Create { t_ns, .. }
            | Record::Live { t_ns, .. }
            | Record::Ended { t_ns, .. }
            | Record::Keyframe { t_ns, .. } => Some(*t_ns),
        }
    }
}
