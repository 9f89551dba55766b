//! `replay --timeline MS`: the resident bytes of every live process every MS milliseconds.

use std::io::{self, Write};

use serde::Serialize;

use crate::event::{Line, SpaceId};

use super::format::{self, Clock};
use super::{Flow, Query, State};

/// One sample in `--json` (docs/schema.md, "replay --json").
#[derive(Serialize)]
struct TickJson<'a> {
    t_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    wall: Option<String>,
    tree_resident_bytes: u64,
    processes: Vec<ProcessJson<'a>>,
}

#[derive(Serialize)]
struct ProcessJson<'a> {
    pid: i32,
    name: &'a str,
    space: SpaceId,
    resident_bytes: u64,
}

pub(crate) struct Timeline {
    every_ns: u64,
    json: bool,
    /// The next instant to sample: it is written once a line after it comes (every line up to
    /// it applied), or at the end.
    next_ns: u64,
    header_written: bool,
}

impl Timeline {
    pub fn new(every_ns: u64, json: bool) -> Self {
        Timeline {
            every_ns: every_ns.max(1),
            json,
            next_ns: 0,
            header_written: false,
        }
    }

    /// The state now, as the sample at `t_ns`.
    fn sample(&mut self, state: &State, t_ns: u64, out: &mut dyn Write) -> io::Result<()> {
        let replay = &state.replay;
        let rows = replay.process_space.iter().map(|(pid, space)| {
            let resident = replay.spaces.get(space).map_or(0, |s| s.resident_bytes);
            (*pid, *space, resident, state.processes.live.get(pid))
        });
        if self.json {
            let v = TickJson {
                t_ns,
                wall: state.clock.wall_ns(t_ns),
                tree_resident_bytes: replay.tree_resident_bytes,
                processes: rows
                    .map(|(pid, space, resident_bytes, p)| ProcessJson {
                        pid,
                        name: p.map_or("?", |p| p.name()),
                        space,
                        resident_bytes,
                    })
                    .collect(),
            };
            format::json_line(out, &v)?;
            return out.flush();
        }
        if !self.header_written {
            self.header_written = true;
            write!(
                out,
                "resident bytes per process every {} ms",
                Clock::ms(self.every_ns)
            )?;
            match state.clock.wall_ms(0) {
                Some(wall) => writeln!(out, "; the trace started {wall}")?,
                None => writeln!(out)?,
            }
            writeln!(
                out,
                "{:>12} {:>8} {:>11}  program",
                "t (ms)", "pid", "resident"
            )?;
        }
        let at = Clock::ms(t_ns);
        writeln!(
            out,
            "{at:>12} {:>8} {:>11}  ({} process(es) at once)",
            "all",
            format::size(replay.tree_resident_bytes),
            replay.process_space.len()
        )?;
        for (pid, _, resident, p) in rows {
            writeln!(
                out,
                "{at:>12} {pid:>8} {:>11}  {}",
                format::size(resident),
                p.map_or("?", |p| p.short_name())
            )?;
        }
        out.flush()
    }
}

/// Samples of one unchanged state beyond which the rest are left out (half at each end).
const QUIET_SAMPLES: u64 = 1000;

impl Query for Timeline {
    fn before(&mut self, state: &State, line: &Line, out: &mut dyn Write) -> io::Result<Flow> {
        // Nothing changes between two lines: a long quiet stretch (or a damaged `t_ns` far ahead)
        // gives its first samples and its last, not millions of the same.
        let ticks = line
            .t_ns
            .saturating_sub(self.next_ns)
            .div_ceil(self.every_ns);
        if ticks > QUIET_SAMPLES {
            for _ in 0..QUIET_SAMPLES / 2 {
                self.sample(state, self.next_ns, out)?;
                self.next_ns = self.next_ns.saturating_add(self.every_ns);
            }
            let skipped = ticks - QUIET_SAMPLES;
            self.next_ns = self
                .next_ns
                .saturating_add(skipped.saturating_mul(self.every_ns));
            if !self.json {
                writeln!(out, "{:>12} (unchanged: {skipped} samples left out)", "...")?;
            }
        }
        while line.t_ns > self.next_ns {
            self.sample(state, self.next_ns, out)?;
            self.next_ns = self.next_ns.saturating_add(self.every_ns);
        }
        Ok(Flow::Go)
    }

    fn end(&mut self, state: &State, out: &mut dyn Write) -> io::Result<()> {
        // The samples up to the last line, and the first one after it: the end.
        while self.next_ns <= state.t_ns() {
            self.sample(state, self.next_ns, out)?;
            self.next_ns = self.next_ns.saturating_add(self.every_ns);
        }
        self.sample(state, self.next_ns, out)
    }
}
