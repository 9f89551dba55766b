//! Processes as the stream tells their lives: who each is (argv, name), when it started and
//! ended, what it did (first touches, maps) and the resident figures of the space it lived in.
//! The state actor keeps its summary with this, and `replay` its answers: one account of a
//! process, whoever asks.

use std::collections::BTreeMap;
use std::path::Path;

use super::Replay;
use crate::event::{Event, EvictedHow, Line, OomKill, ResidentFrom, SpaceId, WarningKind};

/// One process, from the line announcing it to its `exit`.
#[derive(Clone, Debug, Default)]
pub struct Process {
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
    /// Its pages' trips out of memory and back, in bytes (`evicted`, `resident` `from` `swap`).
    pub swapped_out_bytes: u64,
    pub swapped_in_bytes: u64,
    pub reclaimed_bytes: u64,
    /// As its `exit` line says.
    pub oom: Option<OomKill>,
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
        how_it_ended(self.status, self.signal.as_deref()).unwrap_or_else(|| "-".into())
    }
}

/// The processes alive at the line being read, and the one whose `exit` it was.
#[derive(Debug, Default)]
pub struct Processes {
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

    /// Applies `line` to `replay`, keeping each process's account of it: the one sequence the
    /// state actor and `replay` both follow.
    pub fn apply(&mut self, replay: &mut Replay, line: &Line) {
        self.before(replay, line);
        replay.apply_line(line);
        self.after(replay, line);
    }

    /// `apply`, for a line that is not written (`--threads`): it takes no `seq` of the stream's.
    pub fn apply_aside(&mut self, replay: &mut Replay, line: &Line) {
        self.before(replay, line);
        replay.apply_aside(line);
        self.after(replay, line);
    }

    /// Before `replay` applies `line`: what it says of its process.
    fn before(&mut self, replay: &Replay, line: &Line) {
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
            Event::Resident {
                pid,
                space,
                start,
                end,
                faults,
                from,
                ..
            } => {
                let back = match from {
                    Some(ResidentFrom::Swap) => replay
                        .spaces
                        .get(space)
                        .map_or(0, |s| s.swapped_bytes_in(*start..*end)),
                    None => 0,
                };
                let p = self.entry(*pid, t);
                p.first_touches += faults;
                p.swapped_in_bytes += back;
            }
            Event::Evicted {
                pid,
                space,
                start,
                end,
                how,
            } => {
                let bytes = replay
                    .spaces
                    .get(space)
                    .map_or(0, |s| s.resident_in(*start..*end));
                let p = self.entry(*pid, t);
                match how {
                    EvictedHow::Swap => p.swapped_out_bytes += bytes,
                    EvictedHow::Reclaim => p.reclaimed_bytes += bytes,
                }
            }
            Event::Exit {
                pid,
                space,
                status,
                signal,
                name,
                oom,
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
                p.oom = oom.clone();
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
    fn after(&mut self, replay: &Replay, line: &Line) {
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

/// What a process's pages went through under memory pressure, and its OOM kill: the lines under
/// the summary's table and `replay`'s ("   PID pressure: 8 MiB swapped out, 2 MiB back from
/// swap", "   PID killed by the kernel's OOM killer in memory cgroup /box (limit 32 MiB)").
pub fn pressure_lines(
    pid: i32,
    [swapped_out, swapped_in, reclaimed]: [u64; 3],
    oom: Option<&OomKill>,
) -> Vec<String> {
    use humansize::{BINARY, format_size};
    let mut lines = Vec::new();
    let trips: Vec<String> = [
        ("swapped out", swapped_out),
        ("back from swap", swapped_in),
        ("reclaimed after MADV_FREE", reclaimed),
    ]
    .into_iter()
    .filter(|(_, bytes)| *bytes > 0)
    .map(|(what, bytes)| format!("{} {what}", format_size(bytes, BINARY)))
    .collect();
    if !trips.is_empty() {
        lines.push(format!("{pid:>8} pressure: {}", trips.join(", ")));
    }
    if let Some(oom) = oom {
        let mut at = String::new();
        if let Some(cgroup) = &oom.cgroup {
            at += &format!(" in memory cgroup {cgroup}");
        }
        if let Some(limit) = oom.limit {
            at += &format!(" (limit {})", format_size(limit, BINARY));
        }
        lines.push(format!("{pid:>8} killed by the kernel's OOM killer{at}"));
    }
    lines
}

/// `exit 0` or the signal, as an `exit` line's `status` and `signal` say; none if neither.
pub fn how_it_ended(status: Option<i32>, signal: Option<&str>) -> Option<String> {
    match (status, signal) {
        (_, Some(signal)) => Some(signal.to_string()),
        (Some(code), None) => Some(format!("exit {code}")),
        (None, None) => None,
    }
}

/// An argv on one line: control characters escaped (a newline in a `bash -c` script would break
/// a table). The summary's and `replay`'s tables use it.
pub fn argv_line(argv: &[String]) -> String {
    let mut text = String::new();
    for (i, arg) in argv.iter().enumerate() {
        if i > 0 {
            text.push(' ');
        }
        for c in arg.chars() {
            if c.is_control() {
                text.extend(c.escape_default());
            } else {
                text.push(c);
            }
        }
    }
    text
}
