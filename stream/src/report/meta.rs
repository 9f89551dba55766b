//! What the page is told beside the records (docs/report.md, "Meta"): who lived when, the
//! overview curves, the layout events, the checks, and the figures the page shows as they are.

use std::collections::VecDeque;

use serde::Serialize;
use serde_json::Value;

use super::buckets::Buckets;
use super::stacks::Stacks;
use crate::event::{Mismatch, VerifyTotals, WarningKind};

/// The page checks it: 2 added the call sites (`stacks`, the records' site pieces).
pub const FORMAT: u32 = 2;
/// Layout and lifecycle rows kept from the start and from the end of a trace.
pub const EVENTS_KEPT: usize = 20_000;
/// Checks listed: the first so many failed ones, and as many passed ones.
pub const POINTS_KEPT: usize = 2_000;
pub const WARNINGS_KEPT: usize = 10_000;

#[derive(Debug, Serialize)]
pub struct Meta {
    pub format: u32,
    /// A page served while the program runs (`run --serve`): more comes over its event stream.
    pub live: bool,
    pub version: &'static str,
    pub page_size: u64,
    pub faults: bool,
    pub title: String,
    pub argv: Vec<String>,
    pub wall_ns: Option<u64>,
    pub wall: Option<String>,
    pub end_ns: u64,
    /// The whole tree's largest resident total and the first line that reached it (the
    /// instant `replay --at peak` shows).
    pub tree_peak_resident_bytes: u64,
    pub tree_peak_t_ns: u64,
    /// The summary was read: every process's end is known.
    pub complete: bool,
    pub records: RecordsIndex,
    pub processes: Vec<ProcessLife>,
    pub threads: Vec<ThreadLife>,
    pub spaces: Vec<SpaceLife>,
    pub buckets: Buckets,
    pub events: Events,
    pub verify: Option<Verify>,
    pub warnings: Vec<Warning>,
    pub summary: Option<Value>,
    pub problems: Vec<String>,
    /// The call stacks of the `site` lines (empty without `run --stacks`).
    pub stacks: Stacks,
}

#[derive(Debug, Default, Serialize)]
pub struct RecordsIndex {
    pub count: u64,
    pub bytes: u64,
    /// `[t_ns, record index, byte offset]`, ascending.
    pub keyframes: Vec<[u64; 3]>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProcessLife {
    pub pid: i32,
    pub ppid: Option<i32>,
    pub argv: Vec<String>,
    pub name: String,
    pub born_ns: u64,
    pub ended_ns: Option<u64>,
    pub status: Option<i32>,
    pub signal: Option<String>,
    /// `exit 0`, the signal, or `-` when the trace never said.
    pub end: String,
    pub execs: Vec<u64>,
    /// `[t_ns, space]`: the space it is in from then on.
    pub spaces: Vec<[u64; 2]>,
    pub peak_resident_bytes: u64,
    pub resident_bytes: u64,
    pub first_touches: u64,
    pub maps: u64,
    pub unmaps: u64,
    pub threads: Vec<i32>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ThreadLife {
    pub tid: i32,
    pub pid: i32,
    pub born_ns: u64,
    pub ended_ns: Option<u64>,
    pub name: Option<String>,
    /// `[t_ns, name]` of each of its `thread_name` lines: the names it gave itself.
    pub renamed: Vec<(u64, String)>,
    pub name_at_exit: Option<String>,
    pub first_touches: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SpaceLife {
    pub id: u64,
    pub born_ns: u64,
    pub ended_ns: Option<u64>,
    pub peak_resident_bytes: u64,
    pub pids: Vec<i32>,
    /// The figures of its last `rss` line (the kernel's count), or none before one came.
    pub rss: Option<RssFigures>,
}

/// What an `rss` line says, in bytes.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RssFigures {
    pub anon: u64,
    pub file: u64,
    pub shmem: u64,
    pub swap: u64,
}

/// One layout or lifecycle line: `[seq, t_ns, ev, pid, tid, space, start, end, detail]`.
pub type EventRow = (
    u64,
    u64,
    &'static str,
    Option<i32>,
    Option<i32>,
    Option<u64>,
    Option<u64>,
    Option<u64>,
    String,
);

/// The first and the last rows of a trace, with how many between were left out.
#[derive(Debug, Serialize)]
pub struct Events {
    pub columns: [&'static str; 9],
    pub rows: Vec<EventRow>,
    pub left_out: u64,
    #[serde(skip)]
    tail: VecDeque<EventRow>,
}

impl Default for Events {
    fn default() -> Self {
        Events {
            columns: [
                "seq", "t_ns", "ev", "pid", "tid", "space", "start", "end", "detail",
            ],
            rows: Vec::new(),
            left_out: 0,
            tail: VecDeque::new(),
        }
    }
}

impl Events {
    pub fn push(&mut self, row: EventRow) {
        if self.rows.len() < EVENTS_KEPT {
            self.rows.push(row);
            return;
        }
        if self.tail.len() == EVENTS_KEPT {
            self.tail.pop_front();
            self.left_out += 1;
        }
        self.tail.push_back(row);
    }

    pub fn finish(&mut self) {
        self.rows.extend(self.tail.drain(..));
    }

    /// The last `n` rows so far.
    pub fn last(&self, n: usize) -> Vec<EventRow> {
        let from_tail = self.tail.len().min(n);
        let from_rows = (n - from_tail).min(self.rows.len());
        let mut last: Vec<EventRow> = self.rows[self.rows.len() - from_rows..].to_vec();
        last.extend(self.tail.iter().skip(self.tail.len() - from_tail).cloned());
        last
    }
}

#[derive(Debug, Default, Serialize)]
pub struct Verify {
    pub totals: VerifyTotals,
    pub points: Vec<VerifyPoint>,
    /// Checks not listed.
    pub left_out: u64,
}

#[derive(Debug, Serialize)]
pub struct VerifyPoint {
    pub seq: u64,
    pub t_ns: u64,
    pub pid: i32,
    pub space: u64,
    pub point: Value,
    pub checked_pages: u64,
    pub mismatched_pages: u64,
    pub first_mismatches: Vec<Mismatch>,
    pub skipped: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Warning {
    pub seq: u64,
    pub t_ns: u64,
    pub what: WarningKind,
    pub pid: Option<i32>,
    pub space: Option<u64>,
    pub message: String,
}
