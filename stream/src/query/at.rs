//! `replay --at T`: every mapping of every live space at one instant, a time or the tree's
//! peak.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use crate::event::{Line, SpaceId};

use super::format::{self, Clock, MappingJson};
use super::processes::Who;
use super::{Flow, Query, State};

/// Finds the line at which the whole tree's resident total was largest (the first to reach
/// it), in a first reading.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PeakFinder {
    bytes: u64,
    seq: Option<u64>,
}

impl PeakFinder {
    /// The line that reached the peak (None: nothing was ever resident).
    pub fn seq(&self) -> Option<u64> {
        self.seq
    }
}

impl Query for PeakFinder {
    fn after(&mut self, state: &State, line: &Line, _out: &mut dyn Write) -> io::Result<Flow> {
        if state.replay.tree_peak_resident_bytes > self.bytes {
            self.bytes = state.replay.tree_peak_resident_bytes;
            self.seq = Some(line.seq);
        }
        Ok(Flow::Go)
    }

    fn end(&mut self, _state: &State, _out: &mut dyn Write) -> io::Result<()> {
        Ok(())
    }
}

/// A live space at the instant, in `--json` (docs/schema.md, "replay --json").
#[derive(Serialize)]
struct SpaceJson<'a> {
    t_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    wall: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
    peak: bool,
    tree_resident_bytes: u64,
    space: SpaceId,
    processes: Vec<Who<'a>>,
    resident_bytes: u64,
    peak_resident_bytes: u64,
    mappings: Vec<MappingJson<'a>>,
}

enum Target {
    /// After every line up to this `t_ns`.
    Time(u64),
    /// After the line `seq` (none: nothing was ever resident; the end then).
    Peak(Option<u64>),
}

pub(crate) struct StateAt {
    target: Target,
    json: bool,
    written: bool,
}

impl StateAt {
    pub fn at_time(t_ns: u64, json: bool) -> Self {
        StateAt {
            target: Target::Time(t_ns),
            json,
            written: false,
        }
    }

    pub fn at_peak(finder: PeakFinder, json: bool) -> Self {
        StateAt {
            target: Target::Peak(finder.seq),
            json,
            written: false,
        }
    }

    /// The instant shown, and what it is, for a person.
    fn instant(&self, state: &State) -> (u64, String) {
        let (seq, t_last) = state.last.unwrap_or((0, 0));
        match self.target {
            Target::Time(t) if t > t_last && state.replay.complete() => (
                t,
                format!(
                    "after the end of the trace (its last line, seq {seq}, is at {})",
                    state.clock.when(t_last)
                ),
            ),
            Target::Time(t) => (t, format!("after line seq {seq}")),
            Target::Peak(Some(_)) => (
                t_last,
                format!("the whole tree's resident peak, reached by line seq {seq}"),
            ),
            Target::Peak(None) => (
                t_last,
                format!("nothing was ever resident: the end of the trace, seq {seq}"),
            ),
        }
    }

    fn write(&mut self, state: &State, out: &mut dyn Write) -> io::Result<()> {
        self.written = true;
        let replay = &state.replay;
        let (t_ns, what) = self.instant(state);
        let mut spaces: BTreeMap<SpaceId, Vec<i32>> = BTreeMap::new();
        for (&pid, &space) in &replay.process_space {
            spaces.entry(space).or_default().push(pid);
        }
        if !self.json {
            writeln!(
                out,
                "state at {}: {what}: {} resident in {} process(es), {} space(s)",
                state.clock.when(t_ns),
                format::size(replay.tree_resident_bytes),
                replay.process_space.len(),
                spaces.len()
            )?;
        }
        for (space, pids) in spaces {
            let Some(s) = replay.spaces.get(&space) else {
                continue;
            };
            let processes = pids.iter().filter_map(|pid| state.processes.live.get(pid));
            if self.json {
                let v = SpaceJson {
                    t_ns,
                    wall: state.clock.wall_ns(t_ns),
                    seq: state.last.map(|(seq, _)| seq),
                    peak: matches!(self.target, Target::Peak(_)),
                    tree_resident_bytes: replay.tree_resident_bytes,
                    space,
                    processes: processes.map(Who::new).collect(),
                    resident_bytes: s.resident_bytes,
                    peak_resident_bytes: s.peak_resident_bytes,
                    mappings: s
                        .mappings
                        .iter()
                        .map(|(r, m)| MappingJson::new(s, r, m, state.page_size))
                        .collect(),
                };
                format::json_line(out, &v)?;
                continue;
            }
            writeln!(
                out,
                "\nspace {space}: {} resident (its peak so far {}), {} mapping(s)",
                format::size(s.resident_bytes),
                format::size(s.peak_resident_bytes),
                s.mappings.iter().count()
            )?;
            for p in processes {
                writeln!(
                    out,
                    "  pid {} since {} ms: {}",
                    p.pid,
                    Clock::ms(p.started_ns),
                    format::argv_short(&p.argv)
                )?;
            }
            format::mapping_header(out, false)?;
            for (r, m) in s.mappings.iter() {
                format::mapping_row(out, s, r, m, state.page_size, false)?;
            }
        }
        out.flush()
    }
}

impl Query for StateAt {
    fn before(&mut self, state: &State, line: &Line, out: &mut dyn Write) -> io::Result<Flow> {
        match self.target {
            Target::Time(t) if line.t_ns > t => {
                self.write(state, out)?;
                Ok(Flow::Stop)
            }
            _ => Ok(Flow::Go),
        }
    }

    fn after(&mut self, state: &State, line: &Line, out: &mut dyn Write) -> io::Result<Flow> {
        match self.target {
            Target::Peak(Some(seq)) if line.seq == seq => {
                self.write(state, out)?;
                Ok(Flow::Stop)
            }
            _ => Ok(Flow::Go),
        }
    }

    fn end(&mut self, state: &State, out: &mut dyn Write) -> io::Result<()> {
        if self.written {
            return Ok(());
        }
        self.write(state, out)
    }
}
