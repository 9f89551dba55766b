//! How `replay` writes times, sizes, addresses and mappings, for a person and as JSON.

use std::io::{self, Write};
use std::ops::Range;
use std::time::{Duration, UNIX_EPOCH};

use humansize::{BINARY, format_size};
use serde::Serialize;

use crate::event::MapKind;
use crate::model::{AddressSpace, Mapping};

/// The trace's clock: `t_ns` since its start, and the wall-clock time of that start when the
/// `start` line has it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Clock {
    pub wall_ns: Option<u64>,
}

impl Clock {
    /// `t_ns` as milliseconds since the start: `153.207`.
    pub fn ms(t_ns: u64) -> String {
        format!("{}.{:03}", t_ns / 1_000_000, t_ns / 1000 % 1000)
    }

    /// The wall-clock time of `t_ns`, in RFC 3339 (UTC) to the millisecond, when known.
    pub fn wall_ms(&self, t_ns: u64) -> Option<String> {
        let at = UNIX_EPOCH + Duration::from_nanos(self.wall_ns?.checked_add(t_ns)?);
        Some(humantime::format_rfc3339_millis(at).to_string())
    }

    /// The same to the nanosecond, for scripts.
    pub fn wall_ns(&self, t_ns: u64) -> Option<String> {
        let at = UNIX_EPOCH + Duration::from_nanos(self.wall_ns?.checked_add(t_ns)?);
        Some(humantime::format_rfc3339_nanos(at).to_string())
    }

    /// `153.207 ms (2026-11-30T18:10:07.346Z)`, or without the wall clock when unknown.
    pub fn when(&self, t_ns: u64) -> String {
        match self.wall_ms(t_ns) {
            Some(wall) => format!("{} ms ({wall})", Self::ms(t_ns)),
            None => format!("{} ms", Self::ms(t_ns)),
        }
    }
}

pub(crate) fn size(bytes: u64) -> String {
    format_size(bytes, BINARY)
}

/// `0x7f3a5c000000-0x7f3a5c021000`.
pub(crate) fn range(r: &Range<u64>) -> String {
    format!("{:#014x}-{:#014x}", r.start, r.end)
}

/// An argv on one line, its control characters escaped.
pub(crate) use crate::model::processes::argv_line as argv;

/// [`argv`] shortened for a table's last column (`--json` has it whole).
pub(crate) fn argv_short(words: &[String]) -> String {
    const CHARS: usize = 100;
    let text = argv(words);
    match text.char_indices().nth(CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// The kind as the stream writes it: `anon`, `heap`...
pub(crate) fn kind(kind: MapKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A mapping's pages: resident (the zero page included), of those the zero page, untouched;
/// `None` for an untracked mapping, whose pages the stream does not follow.
pub(crate) fn pages(
    space: &AddressSpace,
    r: &Range<u64>,
    m: &Mapping,
    page: u64,
) -> Option<(u64, u64, u64)> {
    if !m.tracked {
        return None;
    }
    let resident = space.resident_in(r.clone()) / page;
    let zero = space.zero_in(r.clone()) / page;
    let untouched = ((r.end - r.start) / page).saturating_sub(resident);
    Some((resident, zero, untouched))
}

/// The header of [`mapping_row`]'s table.
pub(crate) fn mapping_header(out: &mut dyn Write, made: bool) -> io::Result<()> {
    write!(
        out,
        "  {:<29} {:>10}  {:<7} {:<4} {:>9} {:>6} {:>9}",
        "range", "size", "kind", "prot", "resident", "zero", "untouched"
    )?;
    if made {
        write!(out, "  {:>22}", "made at (ms, tid)")?;
    }
    writeln!(out, "  path")
}

/// One mapping as a table row; page counts in pages, `-` where untracked.
pub(crate) fn mapping_row(
    out: &mut dyn Write,
    space: &AddressSpace,
    r: &Range<u64>,
    m: &Mapping,
    page: u64,
    made: bool,
) -> io::Result<()> {
    let (resident, zero, untouched) = match pages(space, r, m, page) {
        Some((a, b, c)) => (a.to_string(), b.to_string(), c.to_string()),
        None => ("-".into(), "-".into(), "-".into()),
    };
    write!(
        out,
        "  {:<29} {:>10}  {:<7} {:<4} {:>9} {:>6} {:>9}",
        range(r),
        size(r.end - r.start),
        kind(m.kind),
        m.prot,
        resident,
        zero,
        untouched
    )?;
    if made {
        let at = format!("{} ms, {}", Clock::ms(m.made.t_ns), m.made.tid);
        write!(out, "  {at:>22}")?;
    }
    match &m.path {
        Some(path) => writeln!(out, "  {path}"),
        None => writeln!(out),
    }
}

/// One mapping in `--json` (docs/schema.md, "replay --json").
#[derive(Serialize)]
pub(crate) struct MappingJson<'a> {
    start: u64,
    end: u64,
    kind: MapKind,
    prot: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<&'a str>,
    tracked: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    resident_pages: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    zero_pages: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    untouched_pages: Option<u64>,
    made_seq: u64,
    made_t_ns: u64,
    made_tid: i32,
}

impl<'a> MappingJson<'a> {
    pub fn new(space: &AddressSpace, r: &Range<u64>, m: &'a Mapping, page: u64) -> Self {
        let pages = pages(space, r, m, page);
        MappingJson {
            start: r.start,
            end: r.end,
            kind: m.kind,
            prot: &m.prot,
            path: m.path.as_deref(),
            tracked: m.tracked,
            resident_pages: pages.map(|p| p.0),
            zero_pages: pages.map(|p| p.1),
            untouched_pages: pages.map(|p| p.2),
            made_seq: m.made.seq,
            made_t_ns: m.made.t_ns,
            made_tid: m.made.tid,
        }
    }
}

/// Writes one JSON object and its line's end.
pub(crate) fn json_line(out: &mut dyn Write, value: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")
}
