//! `replay --maps-at-exit`: the mappings still there when each space's last process exited (or
//! left it by `exec`), largest first, with where each was made: the mapping-level view of what a
//! program never gave back.

use std::io::{self, Write};
use std::ops::Range;

use serde::Serialize;

use crate::event::{Event, Line, SpaceId};
use crate::model::{AddressSpace, Mapping};

use super::format::{self, MappingJson};
use super::processes::Process;
use super::{Flow, Query, State};

/// A space as its last process left it, in `--json` (docs/schema.md, "replay --json").
#[derive(Serialize)]
struct SpaceJson<'a> {
    pid: i32,
    name: &'a str,
    argv: &'a [String],
    space: SpaceId,
    t_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    wall: Option<String>,
    /// False for a process still running at the last line, or one that left by `exec`.
    exited: bool,
    /// The program a process that left its space by `exec` went on to run.
    #[serde(skip_serializing_if = "Option::is_none")]
    exec: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<&'a str>,
    resident_bytes: u64,
    peak_resident_bytes: u64,
    mappings: Vec<MappingJson<'a>>,
}

pub(crate) struct MapsAtExit {
    json: bool,
}

/// How the last process of a space left it.
#[derive(Clone, Copy)]
enum Left<'a> {
    /// Its `exit` (the process's status and signal say how).
    Exit,
    /// An `exec` of this program: the old program's space ended there.
    Exec(&'a str),
    /// Not seen: still running at the last line.
    Running,
}

impl MapsAtExit {
    pub fn new(json: bool) -> Self {
        MapsAtExit { json }
    }

    /// The mappings of `space`, largest first: by resident bytes, then by size (untracked
    /// ones, whose pages are not followed, count as none resident).
    fn largest_first(s: &AddressSpace) -> Vec<(&Range<u64>, &Mapping)> {
        let mut maps: Vec<(&Range<u64>, &Mapping)> = s.mappings.iter().collect();
        let resident = |r: &Range<u64>, m: &Mapping| {
            if m.tracked {
                s.resident_in(r.clone())
            } else {
                0
            }
        };
        maps.sort_by_key(|&(r, m)| {
            (
                std::cmp::Reverse(resident(r, m)),
                std::cmp::Reverse(r.end - r.start),
                r.start,
            )
        });
        maps
    }

    /// One space as its last process `p` leaves it at `t_ns`.
    fn write(
        &self,
        state: &State,
        space: SpaceId,
        p: &Process,
        (t_ns, left): (u64, Left),
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let Some(s) = state.replay.spaces.get(&space) else {
            return Ok(());
        };
        let maps = Self::largest_first(s);
        if self.json {
            let v = SpaceJson {
                pid: p.pid,
                name: p.name(),
                argv: &p.argv,
                space,
                t_ns,
                wall: state.clock.wall_ns(t_ns),
                exited: matches!(left, Left::Exit),
                exec: match left {
                    Left::Exec(path) => Some(path),
                    _ => None,
                },
                status: p.status,
                signal: p.signal.as_deref(),
                resident_bytes: s.resident_bytes,
                peak_resident_bytes: s.peak_resident_bytes,
                mappings: maps
                    .iter()
                    .map(|(r, m)| MappingJson::new(s, r, m, state.page_size))
                    .collect(),
            };
            format::json_line(out, &v)?;
            return out.flush();
        }
        let mapped: u64 = maps.iter().map(|(r, _)| r.end - r.start).sum();
        let end = match left {
            Left::Exit => p.end(),
            Left::Exec(path) => format!("exec'd {path}"),
            Left::Running => "still running at the last line".into(),
        };
        writeln!(
            out,
            "pid {} ({}), {end} at {}, space {space}: {} mapping(s), {} mapped, {} resident",
            p.pid,
            p.name(),
            state.clock.when(t_ns),
            maps.len(),
            format::size(mapped),
            format::size(s.resident_bytes)
        )?;
        format::mapping_header(out, true)?;
        for (r, m) in maps {
            format::mapping_row(out, s, r, m, state.page_size, true)?;
        }
        writeln!(out)?;
        out.flush()
    }
}

impl Query for MapsAtExit {
    fn before(&mut self, state: &State, line: &Line, out: &mut dyn Write) -> io::Result<Flow> {
        let (pid, left) = match &line.event {
            Event::Exit { pid, .. } => (*pid, Left::Exit),
            Event::Exec { pid, path, .. } => (*pid, Left::Exec(path)),
            _ => return Ok(Flow::Go),
        };
        let replay = &state.replay;
        // Only the last process of a space ends it (a vfork child leaves its parent's behind);
        // the traced program's first exec leaves no space.
        let Some(&space) = replay.process_space.get(&pid) else {
            return Ok(Flow::Go);
        };
        let last = replay
            .process_space
            .values()
            .filter(|&&s| s == space)
            .count()
            == 1;
        if !last || line.event.creates_space() == Some(space) {
            return Ok(Flow::Go);
        }
        let mut p = state.processes.live.get(&pid).cloned().unwrap_or_default();
        p.pid = pid;
        if let Event::Exit {
            name,
            status,
            signal,
            ..
        } = &line.event
        {
            p.name = name.clone().or(p.name);
            p.status = *status;
            p.signal = signal.clone();
            p.ended_ns = Some(line.t_ns);
        }
        self.write(state, space, &p, (line.t_ns, left), out)?;
        Ok(Flow::Go)
    }

    fn end(&mut self, state: &State, out: &mut dyn Write) -> io::Result<()> {
        // Spaces whose last process the stream never saw exit: as they were at its last line.
        let mut seen: Vec<SpaceId> = Vec::new();
        for p in state.processes.still_alive(&state.replay) {
            let Some(&space) = state.replay.process_space.get(&p.pid) else {
                continue;
            };
            if seen.contains(&space) {
                continue;
            }
            seen.push(space);
            self.write(state, space, &p, (state.t_ns(), Left::Running), out)?;
        }
        Ok(())
    }
}
