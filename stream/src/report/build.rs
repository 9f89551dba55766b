//! The report's data, built line by line beside the replay: the records (exact state over time)
//! and the meta (lives, curves, events, checks). Fed by `report` as it reads a trace, and by the
//! state actor as it writes one (`run --report`): memory follows what is alive, plus the record
//! bytes (about 7 a line) and the capped tables.

use std::collections::HashMap;

use serde_json::Value;

use super::buckets::Buckets;
use super::meta::{
    Events, FORMAT, Meta, POINTS_KEPT, ProcessLife, RecordsIndex, RssFigures, SpaceLife,
    ThreadLife, Verify, VerifyPoint, WARNINGS_KEPT, Warning,
};
use super::records::{Encoder, KEYFRAME_EVERY};
use crate::event::{Event, Line, SpaceId};
use crate::model::Replay;
use crate::model::processes::{Process, Processes, argv_line};

const PROBLEMS_KEPT: usize = 1_000;
/// Rows of the event table a live page is sent each time.
const LIVE_EVENT_ROWS: usize = 2_000;

pub struct Builder {
    pub encoder: Encoder,
    meta: Meta,
    /// Indexes into the meta's lists of the processes, threads and spaces alive now.
    process_at: HashMap<i32, usize>,
    thread_at: HashMap<i32, usize>,
    space_at: HashMap<SpaceId, usize>,
    /// Verify totals counted from the lines (the summary's replace them when it comes).
    verify: Verify,
    saw_verify: bool,
    /// Failed and passed checks listed so far (each kind up to `POINTS_KEPT`).
    verify_listed: (usize, usize),
}

impl Default for Builder {
    fn default() -> Self {
        Self::new(KEYFRAME_EVERY)
    }
}

impl Builder {
    pub fn new(keyframe_every: u64) -> Self {
        Builder {
            encoder: Encoder::new(keyframe_every),
            meta: Meta {
                format: FORMAT,
                live: false,
                version: env!("CARGO_PKG_VERSION"),
                page_size: 4096,
                faults: true,
                title: String::new(),
                argv: Vec::new(),
                wall_ns: None,
                wall: None,
                end_ns: 0,
                tree_peak_resident_bytes: 0,
                tree_peak_t_ns: 0,
                complete: false,
                records: RecordsIndex::default(),
                processes: Vec::new(),
                threads: Vec::new(),
                spaces: Vec::new(),
                buckets: Buckets::default(),
                events: Events::default(),
                verify: None,
                warnings: Vec::new(),
                summary: None,
                problems: Vec::new(),
                stacks: Default::default(),
            },
            process_at: HashMap::new(),
            thread_at: HashMap::new(),
            space_at: HashMap::new(),
            verify: Verify::default(),
            saw_verify: false,
            verify_listed: (0, 0),
        }
    }

    /// `line` is about to be applied to `replay`.
    pub fn before(&mut self, replay: &Replay, line: &Line) {
        self.encoder.before(replay, line);
    }

    /// `line` has been applied to `replay` and `processes`.
    pub fn after(&mut self, replay: &Replay, processes: &Processes, line: &Line) {
        self.encoder.after(replay, line);
        let t = line.t_ns;
        self.meta.end_ns = self.meta.end_ns.max(t);
        self.meta.tree_peak_resident_bytes = replay.tree_peak_resident_bytes;
        self.meta.tree_peak_t_ns = replay.tree_peak_t_ns;
        self.lives(replay, processes, line);
        self.meta.buckets.tree(t, replay.tree_resident_bytes);
        if let Some(space) = line.event.space()
            && let Some(s) = replay.spaces.get(&space)
            && let Some(&i) = self.space_at.get(&space)
        {
            self.meta.buckets.space(t, space, s.resident_bytes);
            let life = &mut self.meta.spaces[i];
            life.peak_resident_bytes = life.peak_resident_bytes.max(s.peak_resident_bytes);
        }
        self.tables(line);
    }

    fn thread_born(&mut self, tid: i32, pid: i32, t: u64, name: Option<String>) {
        self.thread_at.insert(tid, self.meta.threads.len());
        self.meta.threads.push(ThreadLife {
            tid,
            pid,
            born_ns: t,
            ended_ns: None,
            name,
            renamed: Vec::new(),
            name_at_exit: None,
            first_touches: 0,
        });
        if let Some(&p) = self.process_at.get(&pid) {
            self.meta.processes[p].threads.push(tid);
        }
    }

    fn thread_ended(&mut self, tid: i32, t: u64, name: Option<String>) {
        if let Some(i) = self.thread_at.remove(&tid) {
            let thread = &mut self.meta.threads[i];
            thread.ended_ns = Some(t);
            thread.name_at_exit = name;
        }
    }

    fn process_born(&mut self, pid: i32, ppid: Option<i32>, t: u64, argv: Vec<String>) -> usize {
        let i = self.meta.processes.len();
        self.process_at.insert(pid, i);
        self.meta.processes.push(ProcessLife {
            pid,
            ppid,
            name: argv.first().cloned().unwrap_or_default(),
            argv,
            born_ns: t,
            ended_ns: None,
            status: None,
            signal: None,
            end: "-".into(),
            execs: Vec::new(),
            spaces: Vec::new(),
            peak_resident_bytes: 0,
            resident_bytes: 0,
            first_touches: 0,
            maps: 0,
            unmaps: 0,
            threads: Vec::new(),
        });
        self.thread_born(pid, pid, t, None);
        i
    }

    /// Process `p` is in `space` from `t` on.
    fn enters(&mut self, p: usize, space: SpaceId, t: u64) {
        let life = &mut self.meta.processes[p];
        if life.spaces.last().map(|s| s[1]) != Some(space) {
            life.spaces.push([t, space]);
        }
        let pid = life.pid;
        let s = *self.space_at.entry(space).or_insert_with(|| {
            self.meta.spaces.push(SpaceLife {
                id: space,
                born_ns: t,
                ended_ns: None,
                peak_resident_bytes: 0,
                pids: Vec::new(),
                rss: None,
            });
            self.meta.spaces.len() - 1
        });
        if !self.meta.spaces[s].pids.contains(&pid) {
            self.meta.spaces[s].pids.push(pid);
        }
    }

    /// The spaces with no process left end now.
    fn spaces_left(&mut self, replay: &Replay, t: u64) {
        let ended: Vec<SpaceId> = self
            .space_at
            .keys()
            .copied()
            .filter(|s| !replay.process_space.values().any(|v| v == s))
            .collect();
        for space in ended {
            if let Some(i) = self.space_at.remove(&space) {
                self.meta.spaces[i].ended_ns = Some(t);
                self.meta.buckets.space_ended(t, space);
            }
        }
    }

    fn lives(&mut self, replay: &Replay, processes: &Processes, line: &Line) {
        let t = line.t_ns;
        match &line.event {
            Event::Start {
                argv,
                page_size,
                faults,
                wall_ns,
                wall,
                ..
            } => {
                self.meta.title = argv_line(argv);
                self.meta.argv = argv.clone();
                self.meta.page_size = *page_size;
                self.meta.faults = *faults;
                self.meta.wall_ns = *wall_ns;
                self.meta.wall = wall.clone();
            }
            Event::Exec {
                pid, space, argv, ..
            } => {
                let p = match self.process_at.get(pid) {
                    Some(&p) => p,
                    None => self.process_born(*pid, None, t, argv.clone()),
                };
                let life = &mut self.meta.processes[p];
                life.argv = argv.clone();
                life.name = argv.first().cloned().unwrap_or_default();
                life.execs.push(t);
                self.enters(p, *space, t);
                self.spaces_left(replay, t);
            }
            Event::Fork {
                pid,
                child,
                child_space,
                ..
            } => {
                let argv = self
                    .process_at
                    .get(pid)
                    .map(|&p| self.meta.processes[p].argv.clone())
                    .unwrap_or_default();
                let c = self.process_born(*child, Some(*pid), t, argv);
                self.enters(c, *child_space, t);
                // A fork's copy is born with its parent's pages: its curve starts here.
                if let Some(s) = replay.spaces.get(child_space) {
                    self.meta.buckets.space(t, *child_space, s.resident_bytes);
                }
            }
            Event::Thread {
                pid, child, name, ..
            } => self.thread_born(*child, *pid, t, name.clone()),
            Event::Site {
                id,
                frames,
                truncated,
            } => self.meta.stacks.add(*id, frames, *truncated),
            Event::ThreadName { tid, name, .. } => {
                if let Some(&i) = self.thread_at.get(tid) {
                    self.meta.threads[i].renamed.push((t, name.clone()));
                }
            }
            Event::ThreadExit { tid, name, .. } => self.thread_ended(*tid, t, name.clone()),
            Event::Rss {
                space,
                anon,
                file,
                shmem,
                swap,
                ..
            } => {
                // The kernel's figures are the space's (its processes share one mm): the last
                // line of any of them is the space's now. A line about a space already left
                // (read just before an exit or an exec) has nothing to add to its curve.
                if let Some(&i) = self.space_at.get(space) {
                    self.meta
                        .buckets
                        .rss(t, *space, [*anon, *file, *shmem, *swap]);
                    self.meta.spaces[i].rss = Some(RssFigures {
                        anon: *anon,
                        file: *file,
                        shmem: *shmem,
                        swap: *swap,
                    });
                }
            }
            Event::Resident { tid, faults, .. } => {
                // Pages found by a scan have no thread: their curve is thread 0's.
                let tid = tid.unwrap_or(0);
                self.meta.buckets.touches(t, tid, *faults);
                if let Some(&i) = self.thread_at.get(&tid) {
                    self.meta.threads[i].first_touches += faults;
                }
            }
            Event::Exit { pid, tid, .. } => {
                // Its threads end with it (those that ended before are ended already).
                let tids: Vec<i32> = self
                    .process_at
                    .get(pid)
                    .map(|&p| self.meta.processes[p].threads.clone())
                    .unwrap_or_default()
                    .into_iter()
                    .chain([*tid])
                    .collect();
                for tid in tids {
                    self.thread_ended(tid, t, None);
                }
                if let Some(ended) = &processes.ended {
                    self.process_ended(ended);
                }
                self.spaces_left(replay, t);
            }
            _ => {}
        }
    }

    /// The figures of a process as the model keeps them: the same as `replay`'s and the
    /// summary's.
    fn process_ended(&mut self, ended: &Process) {
        let Some(p) = self.process_at.remove(&ended.pid) else {
            return;
        };
        let life = &mut self.meta.processes[p];
        life.name = ended.name().to_string();
        life.ended_ns = ended.ended_ns;
        life.status = ended.status;
        life.signal = ended.signal.clone();
        life.end = ended.end();
        life.peak_resident_bytes = ended.peak_resident_bytes;
        life.resident_bytes = ended.resident_bytes;
        life.first_touches = ended.first_touches;
        life.maps = ended.maps;
        life.unmaps = ended.unmaps;
    }

    /// The event table, checks, warnings and the summary.
    fn tables(&mut self, line: &Line) {
        let (seq, t) = (line.seq, line.t_ns);
        if let Some(row) = super::events::row(line) {
            self.meta.events.push(row);
        }
        match &line.event {
            Event::Verify {
                pid,
                space,
                point,
                checked_pages,
                mismatched_pages,
                first_mismatches,
                skipped,
            } => {
                self.saw_verify = true;
                let totals = &mut self.verify.totals;
                if skipped.is_some() {
                    totals.skipped_points += 1;
                } else {
                    totals.points += 1;
                    totals.failed_points += u64::from(*mismatched_pages > 0);
                }
                totals.checked_pages += checked_pages;
                totals.mismatched_pages += mismatched_pages;
                let failed = *mismatched_pages > 0;
                let (failed_listed, passed_listed) = &mut self.verify_listed;
                let listed = if failed { failed_listed } else { passed_listed };
                if *listed < POINTS_KEPT {
                    *listed += 1;
                    self.verify.points.push(VerifyPoint {
                        seq,
                        t_ns: t,
                        pid: *pid,
                        space: *space,
                        point: serde_json::to_value(point).unwrap_or(Value::Null),
                        checked_pages: *checked_pages,
                        mismatched_pages: *mismatched_pages,
                        first_mismatches: first_mismatches.clone(),
                        skipped: skipped.clone(),
                    });
                } else {
                    self.verify.left_out += 1;
                }
            }
            Event::Warning {
                pid,
                space,
                what,
                message,
            } if self.meta.warnings.len() < WARNINGS_KEPT => self.meta.warnings.push(Warning {
                seq,
                t_ns: t,
                what: *what,
                pid: *pid,
                space: *space,
                message: message.clone(),
            }),
            Event::Summary { processes, totals } => {
                if let Some(v) = &totals.verify {
                    self.saw_verify = true;
                    self.verify.totals = v.clone();
                }
                self.meta.summary = Some(serde_json::json!({
                    "processes": processes,
                    "totals": totals,
                }));
            }
            _ => {}
        }
    }

    /// The meta so far as JSON, for a page following the run: the processes alive with their
    /// figures now, and the last rows of the event table (the whole table comes at the end).
    pub fn snapshot(&mut self, replay: &Replay, processes: &Processes) -> String {
        self.alive_now(replay, processes);
        self.meta.buckets.finish(self.meta.end_ns);
        self.meta.records = self.records_index();
        self.meta.live = true;
        if self.saw_verify {
            self.meta.verify = Some(Verify {
                totals: self.verify.totals.clone(),
                points: Vec::new(),
                left_out: self.verify.left_out + self.verify.points.len() as u64,
            });
        }
        let last = self.meta.events.last(LIVE_EVENT_ROWS);
        let kept = std::mem::replace(&mut self.meta.events.rows, last);
        let json = serde_json::to_string(&self.meta).unwrap_or_default();
        self.meta.events.rows = kept;
        self.meta.live = false;
        self.meta.verify = None;
        json
    }

    /// The figures of the processes alive, as they are now.
    fn alive_now(&mut self, replay: &Replay, processes: &Processes) {
        for alive in processes.still_alive(replay) {
            if let Some(&p) = self.process_at.get(&alive.pid) {
                let life = &mut self.meta.processes[p];
                life.peak_resident_bytes = alive.peak_resident_bytes;
                life.resident_bytes = alive.resident_bytes;
                life.first_touches = alive.first_touches;
                life.maps = alive.maps;
                life.unmaps = alive.unmaps;
            }
        }
    }

    fn records_index(&self) -> RecordsIndex {
        let encoder = &self.encoder;
        RecordsIndex {
            count: encoder.records,
            bytes: encoder.bytes.len() as u64,
            keyframes: encoder
                .keyframes
                .iter()
                .map(|k| [k.t_ns, k.record, k.offset as u64])
                .collect(),
        }
    }

    /// The trace ended: the last keyframe, the processes still alive, and the meta whole.
    pub fn finish(mut self, replay: &Replay, processes: &Processes) -> (Meta, Vec<u8>) {
        let end = self.meta.end_ns;
        self.encoder.keyframe(replay, end);
        self.alive_now(replay, processes);
        self.meta.buckets.finish(end);
        self.meta.events.finish();
        self.meta.complete = self.meta.summary.is_some();
        self.meta.records = self.records_index();
        self.meta.problems = replay
            .problems
            .iter()
            .take(PROBLEMS_KEPT)
            .cloned()
            .collect();
        if self.saw_verify {
            self.meta.verify = Some(self.verify);
        }
        (self.meta, self.encoder.bytes)
    }
}
