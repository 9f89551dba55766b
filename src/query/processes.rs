//! Processes as the stream tells their lives, and `replay`'s default answer: one row per
//! process, written as it exits.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

use crate::event::{Event, Line, SpaceId, WarningKind};
use crate::model::Replay;

use super::format::{self, Clock};
use super::{Flow, Query, State};

/// One process, from the line announcing it to its `exit`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Process {
    pub pid: i32,
    /// Its last `exec`'s, or its creator's at the `fork` until it execs.
    pub argv: Vec<String>,
    /// As its `exit` line names it.
    pub name: Option<String>,
    pub started_ns: u64,
    pub ended_ns: Option<u64>,
    pub status: Option<i32>,
    pub signal: Option<String>,
    /// The largest resident figure of the space it was in, while it was in it.
    pub peak_resident_bytes: u64,
    /// Its space's at its `exit` (or at the last line read).
    pub resident_bytes: u64,
    /// `faults` of its `resident` lines.
    pub first_touches: u64,
    /// Its `map` and `brk` lines, and its `unmap` lines (those with a `cause` are no syscall of
    /// its own, as in the summary).
    pub maps: u64,
    pub unmaps: u64,
}

impl Process {
    /// The program: as its `exit` names it, else its argv[0].
    pub fn name(&self) -> &str {
        self.name
            .as_deref()
            .or(self.argv.first().map(String::as_str))
            .unwrap_or("?")
    }

    /// The program's file name alone (`cc1`), for narrow columns.
    pub fn short_name(&self) -> &str {
        let name = self.name();
        Path::new(name)
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or(name)
    }

    /// How it ended: `exit 0`, `SIGKILL`, or `-` when its end was not read.
    pub fn end(&self) -> String {
        match (&self.status, &self.signal) {
            (_, Some(signal)) => signal.clone(),
            (Some(code), None) => format!("exit {code}"),
            (None, None) => "-".into(),
        }
    }
}

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
        }
    }
}

/// The processes alive at the line being read, and the one whose `exit` it was.
#[derive(Debug, Default)]
pub(crate) struct Processes {
    pub live: BTreeMap<i32, Process>,
    /// The process the last line ended (its `exit`).
    pub ended: Option<Process>,
    /// The space of the line being applied and its resident bytes before it.
    watched: Option<(SpaceId, u64)>,
}

impl Processes {
    fn entry(&mut self, pid: i32, t_ns: u64) -> &mut Process {
        self.live.entry(pid).or_insert_with(|| Process {
            pid,
            started_ns: t_ns,
            ..Default::default()
        })
    }

    /// Before `replay` applies `line`: what it says of its process.
    pub fn before(&mut self, replay: &Replay, line: &Line) {
        self.ended = None;
        let t = line.t_ns;
        let event = &line.event;
        self.watched = event
            .space()
            .map(|s| (s, replay.spaces.get(&s).map_or(0, |x| x.resident_bytes)));
        match event {
            Event::Exec { pid, argv, .. } => self.entry(*pid, t).argv = argv.clone(),
            Event::Fork { pid, child, .. } => {
                // A child runs its creator's program until it execs.
                let argv = self.live.get(pid).map(|p| p.argv.clone());
                let child = Process {
                    pid: *child,
                    argv: argv.unwrap_or_default(),
                    started_ns: t,
                    ..Default::default()
                };
                self.live.insert(child.pid, child);
            }
            Event::Warning {
                what: WarningKind::Unannounced,
                pid: Some(pid),
                ..
            } => {
                self.entry(*pid, t);
            }
            Event::Map { cause: Some(_), .. } | Event::Unmap { cause: Some(_), .. } => {}
            Event::Map { pid, .. } | Event::Brk { pid, .. } => self.entry(*pid, t).maps += 1,
            Event::Unmap { pid, .. } => self.entry(*pid, t).unmaps += 1,
            Event::Resident { pid, faults, .. } => self.entry(*pid, t).first_touches += faults,
            Event::Exit {
                pid,
                space,
                status,
                signal,
                name,
                ..
            } => {
                let mut p = self.live.remove(pid).unwrap_or(Process {
                    pid: *pid,
                    started_ns: t,
                    ..Default::default()
                });
                p.resident_bytes = replay.spaces.get(space).map_or(0, |s| s.resident_bytes);
                p.peak_resident_bytes = p.peak_resident_bytes.max(p.resident_bytes);
                p.ended_ns = Some(t);
                p.status = *status;
                p.signal = signal.clone();
                if name.is_some() {
                    p.name = name.clone();
                }
                self.ended = Some(p);
            }
            _ => {}
        }
    }

    /// After `replay` applied `line`: the peaks of the processes whose space grew or that joined
    /// one.
    pub fn after(&mut self, replay: &Replay, line: &Line) {
        let joined = match line.event {
            Event::Exec { pid, .. } => Some(pid),
            Event::Fork { child, .. } => Some(child),
            _ => None,
        };
        if let Some(pid) = joined
            && let Some(space) = replay.process_space.get(&pid)
            && let Some(p) = self.live.get_mut(&pid)
        {
            let now = replay.spaces.get(space).map_or(0, |s| s.resident_bytes);
            p.peak_resident_bytes = p.peak_resident_bytes.max(now);
        }
        let Some((space, before)) = self.watched.take() else {
            return;
        };
        let now = replay.spaces.get(&space).map_or(0, |s| s.resident_bytes);
        if now <= before {
            return;
        }
        for (pid, _) in replay.process_space.iter().filter(|(_, s)| **s == space) {
            if let Some(p) = self.live.get_mut(pid) {
                p.peak_resident_bytes = p.peak_resident_bytes.max(now);
            }
        }
    }

    /// The processes still alive, with their space's resident bytes now as their final figure.
    pub fn still_alive(&self, replay: &Replay) -> Vec<Process> {
        self.live
            .values()
            .map(|p| {
                let mut p = p.clone();
                p.resident_bytes = replay
                    .process_space
                    .get(&p.pid)
                    .and_then(|s| replay.spaces.get(s))
                    .map_or(0, |s| s.resident_bytes);
                p
            })
            .collect()
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
            format::size(p.peak_resident_bytes),
            format::size(p.resident_bytes),
            p.first_touches,
            p.maps,
            p.unmaps,
            Clock::ms(p.started_ns),
            p.ended_ns.map_or("-".into(), Clock::ms),
            p.end(),
            format::argv_short(&p.argv),
        )?;
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
        let replay = &state.replay;
        let one_space = replay
            .spaces
            .values()
            .map(|s| s.peak_resident_bytes)
            .max()
            .unwrap_or(0);
        writeln!(
            out,
            "resident (private anonymous memory, followed page by page): peak {} in one space, \
             {} in the whole tree at once, at {}",
            format::size(one_space),
            format::size(replay.tree_peak_resident_bytes),
            state.clock.when(replay.tree_peak_t_ns)
        )
    }
}
