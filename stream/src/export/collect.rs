//! What `export` counts, line by line beside the replay: the pages resident at one instant and
//! the pages first touched over the whole trace, each under who touched it (process, thread and
//! the thread's name then), the kind of its mapping and a stack: the call site that mapped it,
//! or for `--touch-stacks`' sampled first touches the faulting thread's own.

use std::collections::HashMap;
use std::io::{self, Write};
use std::ops::Range;

use rangemap::RangeMap;

use crate::event::{Event, ForkKind, Line, MapCause, MapKind, ResidentFrom, SiteId, SpaceId};
use crate::model::remap::Remap;
use crate::model::sites::{Key, Sites, Stack, clip};
use crate::query::by_thread::program_name;
use crate::query::{Flow, Query, State};

use super::profile::Tables;

/// Which instant's resident pages are counted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Target {
    /// After the line at which the whole tree's resident total was largest (None: nothing was
    /// ever resident; the end then).
    Peak(Option<u64>),
    /// Each space as it ended: added over the spaces, no one instant.
    End,
    /// After every line with `t_ns` up to this.
    Ns(u64),
}

/// Who first touched a page: the `resident` line's process and thread, and the thread's name
/// as it touched (a string of [`Tables`]; 0 when unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Toucher {
    tid: Option<i32>,
    thread: i64,
    /// A page another process wrote (`process_vm_writev`, a ptrace poke): that process.
    writer: Option<i32>,
}

/// The stack a sample stands at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum StackOf {
    /// The call site of the line that mapped the pages (none: "(no stack)").
    Mapping(Key),
    /// A sampled first touch's own stack (`--touch-stacks`).
    Touch(SiteId),
}

/// What a sample is counted under: its labels and its stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SampleKey {
    /// The process of the space (resident pages) or of the `resident` line (first touches).
    pub pid: i32,
    /// Its argv[0], a string of [`Tables`] (0: unknown).
    pub program: i64,
    pub tid: Option<i32>,
    /// The touching thread's name then, a string (0: unknown).
    pub thread: i64,
    /// Written by another process, this one (no `tid` then).
    pub writer: Option<i32>,
    pub kind: Option<MapKind>,
    pub stack: StackOf,
}

/// A sample's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Values {
    /// Resident at the instant.
    pub resident_bytes: u64,
    /// First touched over the trace: the pages of its `resident` lines (those back from swap
    /// are no first touch).
    pub touched_bytes: u64,
    /// First touches sampled at the stack (`sampled` of `resident` lines), in pages.
    pub sampled_pages: u64,
}

/// The instant measured, for the profile's time and comments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Taken {
    pub seq: u64,
    pub t_ns: u64,
    pub tree_resident_bytes: u64,
}

/// `export`'s reading of a stream.
pub(crate) struct Collect {
    target: Target,
    pub tables: Tables,
    sites: Sites,
    pub stacks: HashMap<SiteId, Stack>,
    touchers: HashMap<SpaceId, RangeMap<u64, Toucher>>,
    /// The space the line between `before` and `after` ends.
    ending: Option<SpaceId>,
    /// Each thread's name now, a string.
    threads: HashMap<i32, i64>,
    pub samples: HashMap<SampleKey, Values>,
    /// The instant resident pages were counted at (`End`: the last space's end).
    pub taken: Option<Taken>,
    /// The `start` line's `touch_stacks`.
    pub touch_period: Option<u64>,
    /// The `start` line's `host`, `cgroup` and `container`: labels of every sample.
    pub whereabouts: Vec<(&'static str, String)>,
    /// The file of the trace's first program (its first `exec`).
    pub program: Option<String>,
    /// The `start` line's wall clock and the stream's last `t_ns`.
    pub wall_ns: Option<u64>,
    pub last_t_ns: u64,
}

impl Collect {
    pub fn new(target: Target) -> Self {
        Collect {
            target,
            tables: Tables::default(),
            sites: Sites::default(),
            stacks: HashMap::new(),
            touchers: HashMap::new(),
            ending: None,
            threads: HashMap::new(),
            samples: HashMap::new(),
            taken: None,
            touch_period: None,
            whereabouts: Vec::new(),
            program: None,
            wall_ns: None,
            last_t_ns: 0,
        }
    }

    /// The resident pages of every live space now.
    fn take_all(&mut self, state: &State) {
        let spaces: Vec<SpaceId> = state.replay.spaces.keys().copied().collect();
        for space in spaces {
            self.take_space(state, space);
        }
        self.taken = Some(taken(state));
    }

    /// The resident pages of `space` now, under its first process.
    fn take_space(&mut self, state: &State, space: SpaceId) {
        let replay = &state.replay;
        let Some(s) = replay.spaces.get(&space) else {
            return;
        };
        let Some(pid) = replay
            .process_space
            .iter()
            .find_map(|(&pid, &sp)| (sp == space).then_some(pid))
        else {
            return;
        };
        let program = self.program(state, pid);
        let touchers = self.touchers.get(&space);
        let sites = self.sites.of(space);
        for r in s.resident.iter() {
            for (by_kind, mapping) in pieces(Some(&s.mappings), r) {
                for (by_site, site) in pieces(sites, &by_kind) {
                    for (piece, toucher) in pieces(touchers, &by_site) {
                        let key = SampleKey {
                            pid,
                            program,
                            tid: toucher.and_then(|t| t.tid),
                            thread: toucher.map_or(0, |t| t.thread),
                            writer: toucher.and_then(|t| t.writer),
                            kind: mapping.map(|m| m.kind),
                            stack: StackOf::Mapping(site.copied()),
                        };
                        let v = self.samples.entry(key).or_default();
                        v.resident_bytes = v.resident_bytes.saturating_add(piece.end - piece.start);
                    }
                }
            }
        }
    }

    /// A `resident` line, applied: its pages are first touches by its thread, unless back from
    /// swap (then their first toucher stays).
    fn resident(&mut self, state: &State, line: &Line) {
        let Event::Resident {
            pid,
            tid,
            space,
            start,
            end,
            site,
            sampled,
            from,
            writer,
            ..
        } = line.event
        else {
            return;
        };
        if from == Some(ResidentFrom::Swap) || end <= start {
            return;
        }
        // A write by another process names the space's owner as its `tid`: no thread of its.
        let tid = tid.filter(|_| writer.is_none());
        let toucher = Toucher {
            tid,
            thread: tid.and_then(|t| self.threads.get(&t).copied()).unwrap_or(0),
            writer,
        };
        self.touchers
            .entry(space)
            .or_default()
            .insert(start..end, toucher);
        let program = self.program(state, pid);
        let Some(s) = state.replay.spaces.get(&space) else {
            return;
        };
        let range = start..end;
        let key = |kind, stack| SampleKey {
            pid,
            program,
            tid,
            thread: toucher.thread,
            writer,
            kind,
            stack,
        };
        for (by_kind, mapping) in pieces(Some(&s.mappings), &range) {
            let kind = mapping.map(|m| m.kind);
            for (piece, site) in pieces(self.sites.of(space), &by_kind) {
                let v = self
                    .samples
                    .entry(key(kind, StackOf::Mapping(site.copied())))
                    .or_default();
                v.touched_bytes = v.touched_bytes.saturating_add(piece.end - piece.start);
            }
        }
        if let Some(site) = site
            && sampled > 0
        {
            let kind = s.mappings.get(&start).map(|m| m.kind);
            let v = self
                .samples
                .entry(key(kind, StackOf::Touch(site)))
                .or_default();
            v.sampled_pages = v.sampled_pages.saturating_add(sampled);
        }
    }

    /// A process's argv[0], as a string.
    fn program(&mut self, state: &State, pid: i32) -> i64 {
        match state.processes.live.get(&pid).and_then(|p| p.argv.first()) {
            Some(argv0) => self.tables.string(argv0),
            None => 0,
        }
    }

    /// What a line says of threads' names.
    fn name_threads(&mut self, event: &Event) {
        match event {
            Event::Exec {
                pid, path, argv, ..
            } => {
                // The kernel names a program's main thread after the file it was asked to run
                // (a link's name, a script's), in 15 bytes: argv[0] is that file, as a rule;
                // `path` is where the link led.
                let asked = argv.first().filter(|a| !a.is_empty()).unwrap_or(path);
                let name = self.tables.string(&program_name(asked));
                self.threads.insert(*pid, name);
            }
            Event::Fork { tid, child, .. } => {
                if let Some(&name) = self.threads.get(tid) {
                    self.threads.insert(*child, name);
                }
            }
            // The name a `thread` line reads is its creator's, as the kernel has it: it
            // replaces the creator's guess from its exec, and starts the new thread's.
            Event::Thread {
                tid, child, name, ..
            } => {
                let name = match name {
                    Some(name) => {
                        let name = self.tables.string(name);
                        self.threads.insert(*tid, name);
                        Some(name)
                    }
                    None => self.threads.get(tid).copied(),
                };
                if let Some(name) = name {
                    self.threads.insert(*child, name);
                }
            }
            Event::ThreadName { tid, name, .. } => {
                let name = self.tables.string(name);
                self.threads.insert(*tid, name);
            }
            _ => {}
        }
    }

    /// What a line does to the first touchers of pages: they go with the pages.
    fn move_touchers(&mut self, event: &Event) {
        match *event {
            Event::Fork {
                kind: ForkKind::Fork,
                space,
                child_space,
                ..
            } => {
                let parent = self.touchers.get(&space).cloned().unwrap_or_default();
                self.touchers.insert(child_space, parent);
            }
            // A range described again (after a fork, a race) keeps its pages: not a release.
            Event::Unmap {
                space,
                start,
                end,
                cause,
                ..
            } if start < end && cause != Some(MapCause::Redescribe) => {
                if let Some(t) = self.touchers.get_mut(&space) {
                    t.remove(start..end);
                }
            }
            Event::Discard {
                space, start, end, ..
            } if start < end => {
                if let Some(t) = self.touchers.get_mut(&space) {
                    t.remove(start..end);
                }
            }
            Event::Remap {
                space,
                old_start,
                old_end,
                new_start,
                new_end,
                ..
            } if old_start < old_end && new_start < new_end => {
                let Some(t) = self.touchers.get_mut(&space) else {
                    return;
                };
                let remap = Remap::new(old_start..old_end, new_start..new_end);
                let moved = remap.carried(t);
                t.remove(old_start..old_end);
                t.remove(new_start..new_end);
                for (r, who) in moved {
                    t.insert(r, who);
                }
            }
            _ => {}
        }
    }
}

impl Query for Collect {
    fn before(&mut self, state: &State, line: &Line, _: &mut dyn Write) -> io::Result<Flow> {
        let ending = self.sites.before(&state.replay, line);
        self.ending = ending;
        match self.target {
            Target::End => {
                if let Some(space) = ending {
                    self.take_space(state, space);
                    self.taken = Some(taken(state));
                }
            }
            Target::Ns(t) if line.t_ns > t && self.taken.is_none() => self.take_all(state),
            _ => {}
        }
        Ok(Flow::Go)
    }

    fn after(&mut self, state: &State, line: &Line, _: &mut dyn Write) -> io::Result<Flow> {
        let event = &line.event;
        match event {
            Event::Start {
                wall_ns,
                touch_stacks,
                host,
                cgroup,
                container,
                ..
            } => {
                self.wall_ns = *wall_ns;
                self.touch_period = *touch_stacks;
                let labels = [("host", host), ("cgroup", cgroup), ("container", container)];
                self.whereabouts = labels
                    .into_iter()
                    .filter_map(|(k, v)| Some((k, v.clone()?)))
                    .collect();
            }
            Event::Site { .. } => self.stacks.extend(Stack::of_site_line(event)),
            Event::Resident { .. } => self.resident(state, line),
            Event::Exec { path, .. } if self.program.is_none() => {
                self.program = Some(path.clone());
            }
            _ => {}
        }
        self.name_threads(event);
        self.move_touchers(event);
        let ending = self.ending.take();
        self.sites.after(&state.replay, line);
        if let Some(space) = ending {
            self.touchers.remove(&space);
        }
        self.last_t_ns = line.t_ns;
        // Once: a stream with its peak line twice (two traces run together) says so as a
        // problem, and is not counted twice.
        if self.target == Target::Peak(Some(line.seq)) && self.taken.is_none() {
            self.take_all(state);
        }
        Ok(Flow::Go)
    }

    fn end(&mut self, state: &State, _: &mut dyn Write) -> io::Result<()> {
        match self.target {
            // The spaces still alive at the last line end there.
            Target::End => {
                let live: Vec<SpaceId> = state.replay.spaces.keys().copied().collect();
                for space in live {
                    self.take_space(state, space);
                }
                self.taken = Some(taken(state));
            }
            Target::Peak(None) => self.take_all(state),
            Target::Ns(t) if self.taken.is_none() && t <= state.t_ns() => self.take_all(state),
            _ => {}
        }
        Ok(())
    }
}

/// The instant `state` is at.
fn taken(state: &State) -> Taken {
    let (seq, t_ns) = state.last.unwrap_or((0, 0));
    Taken {
        seq,
        t_ns,
        tree_resident_bytes: state.replay.tree_resident_bytes,
    }
}

/// `r` cut where `map`'s ranges begin and end: each piece with its value, or none.
fn pieces<'a, V: Clone + Eq>(
    map: Option<&'a RangeMap<u64, V>>,
    r: &Range<u64>,
) -> Vec<(Range<u64>, Option<&'a V>)> {
    let mut out = Vec::new();
    let mut at = r.start;
    for (p, v) in map.into_iter().flat_map(|m| m.overlapping(r)) {
        let c = clip(p, r);
        if c.start > at {
            out.push((at..c.start, None));
        }
        at = c.end;
        out.push((c, Some(v)));
    }
    if at < r.end {
        out.push((at..r.end, None));
    }
    out
}
