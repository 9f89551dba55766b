//! `replay`'s default answer: one row per process, written as it exits.

use std::io::{self, Write};

use serde::Serialize;

use crate::event::{Line, OomKill};
use crate::model::processes::pressure_lines;
pub(crate) use crate::model::processes::{Process, Processes};

use super::format::{self, Clock};
use super::{Flow, Query, State};

/// Who a process is, in `--json`.
#[derive(Serialize)]
pub(crate) struct Who<'a> {
    pid: i32,
    name: &'a str,
    argv: &'a [String],
}

impl<'a> Who<'a> {
    pub fn new(p: &'a Process) -> Self {
        Who {
            pid: p.pid,
            name: p.name(),
            argv: &p.argv,
        }
    }
}

/// A process in `--json` (docs/schema.md, "replay --json").
#[derive(Serialize)]
struct ProcessJson<'a> {
    pid: i32,
    name: &'a str,
    argv: &'a [String],
    started_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    started_wall: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ended_ns: Option<u64>,
    lifetime_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<&'a str>,
    peak_resident_bytes: u64,
    resident_bytes: u64,
    first_touches: u64,
    maps: u64,
    unmaps: u64,
    #[serde(skip_serializing_if = "is_zero")]
    swapped_out_bytes: u64,
    #[serde(skip_serializing_if = "is_zero")]
    swapped_in_bytes: u64,
    #[serde(skip_serializing_if = "is_zero")]
    reclaimed_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    oom: Option<&'a OomKill>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl<'a> ProcessJson<'a> {
    /// `p`, whose lifetime ends at `end_ns` if the stream never said it exited.
    fn new(p: &'a Process, clock: &Clock, end_ns: u64) -> Self {
        ProcessJson {
            pid: p.pid,
            name: p.name(),
            argv: &p.argv,
            started_ns: p.started_ns,
            started_wall: clock.wall_ns(p.started_ns),
            ended_ns: p.ended_ns,
            lifetime_ns: p.ended_ns.unwrap_or(end_ns).saturating_sub(p.started_ns),
            status: p.status,
            signal: p.signal.as_deref(),
            peak_resident_bytes: p.peak_resident_bytes,
            resident_bytes: p.resident_bytes,
            first_touches: p.first_touches,
            maps: p.maps,
            unmaps: p.unmaps,
            swapped_out_bytes: p.swapped_out_bytes,
            swapped_in_bytes: p.swapped_in_bytes,
            reclaimed_bytes: p.reclaimed_bytes,
            oom: p.oom.as_ref(),
        }
    }
}

/// `replay FILE`: a row per process as it exits, then the ones the stream never saw exit.
pub(crate) struct Table {
    json: bool,
    header_written: bool,
}

impl Table {
    pub fn new(json: bool) -> Self {
        Table {
            json,
            header_written: false,
        }
    }

    fn row(&mut self, state: &State, p: &Process, out: &mut dyn Write) -> io::Result<()> {
        if self.json {
            format::json_line(out, &ProcessJson::new(p, &state.clock, state.t_ns()))?;
            return out.flush();
        }
        if !self.header_written {
            self.header_written = true;
            if let Some(wall) = state.clock.wall_ms(0) {
                writeln!(out, "trace started {wall}; times in ms since then")?;
            }
            writeln!(
                out,
                "{:>8} {:>11} {:>11} {:>8} {:>5} {:>6} {:>10} {:>10}  {:<8} argv",
                "pid", "peak", "final", "touches", "maps", "unmaps", "start ms", "end ms", "end"
            )?;
        }
        writeln!(
            out,
            "{:>8} {:>11} {:>11} {:>8} {:>5} {:>6} {:>10} {:>10}  {:<8} {}",
            p.pid,
            measured(state, p.peak_resident_bytes),
            measured(state, p.resident_bytes),
            // Scans find pages, not first touches.
            if state.faults && !state.scanned {
                p.first_touches.to_string()
            } else {
                "-".into()
            },
            p.maps,
            p.unmaps,
            Clock::ms(p.started_ns),
            p.ended_ns.map_or("-".into(), Clock::ms),
            p.end(),
            format::argv_short(&p.argv),
        )?;
        let trips = [p.swapped_out_bytes, p.swapped_in_bytes, p.reclaimed_bytes];
        for line in pressure_lines(p.pid, trips, p.oom.as_ref()) {
            writeln!(out, "{line}")?;
        }
        out.flush()
    }
}

impl Query for Table {
    fn after(&mut self, state: &State, _line: &Line, out: &mut dyn Write) -> io::Result<Flow> {
        if let Some(p) = &state.processes.ended {
            self.row(state, p, out)?;
        }
        Ok(Flow::Go)
    }

    fn end(&mut self, state: &State, out: &mut dyn Write) -> io::Result<()> {
        for p in state.processes.still_alive(&state.replay) {
            self.row(state, &p, out)?;
        }
        if self.json {
            return Ok(());
        }
        if !state.faults {
            return writeln!(
                out,
                "resident: not measured (the trace was made with --no-faults)"
            );
        }
        let replay = &state.replay;
        let one_space = replay
            .spaces
            .values()
            .map(|s| s.peak_resident_bytes)
            .max()
            .unwrap_or(0);
        writeln!(
            out,
            "resident (private anonymous memory, followed page by page): peak {} in one space \
             (a page shared since a fork counted in each process), {} in the whole tree at once \
             (each frame once), at {}",
            format::size(one_space),
            format::size(replay.tree_peak_resident_bytes),
            state.clock.when(replay.tree_peak_t_ns)
        )
    }
}

/// A resident figure for a table, or `-` when the trace did not measure it (`--no-faults`).
fn measured(state: &State, bytes: u64) -> String {
    if state.faults {
        format::size(bytes)
    } else {
        "-".into()
    }
}
