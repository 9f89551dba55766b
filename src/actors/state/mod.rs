//! The state actor: applies each line to the replay model (a `RangeMap` per address space),
//! answers `verify` checks against it, hands the line to the stream's writer (output.rs), and at
//! the end writes the summary, on the stream and for a person on stderr (summary.rs).
//!
//! Nothing here blocks a tokio worker: the stream is written by a thread of its own, and a
//! check's `/proc` and pagemap reads run on a blocking thread that the actor awaits before it
//! takes the next line, so every check still sees exactly the lines before it.

mod output;
mod report;
mod sites;
mod summary;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::time::Duration;

use async_channel::Receiver;
use tokio::sync::mpsc;

use self::output::Output;
pub use self::output::{DEFAULT_BUFFER, DEFAULT_BUFFER_BYTES, WaitsForRoom};
pub use self::report::ReportTap;
use self::sites::SiteLines;
pub use self::summary::{SUMMARY_ROWS, human_summary};
use super::control::RunControl;
use crate::event::{
    Event, ForkKind, Line, NotWritten, ProcessSummary, RunTotals, SpaceId, UnseenTotals,
    VerifyTotals, WarningKind,
};
use crate::model::Replay;
use crate::model::processes::{Process, Processes};
use crate::test_hooks::{self, Fault};
use crate::verify::{self, KernelView, Probe, Unreadable};

/// A numbered line for the stream; a `verify` line comes with how to read the kernel's side.
#[derive(Debug)]
pub struct StateMessage {
    pub line: Line,
    pub probe: Option<Probe>,
}

#[derive(Clone, Debug)]
pub struct StateHandle {
    tx: mpsc::Sender<StateMessage>,
}

impl StateHandle {
    /// A handle whose lines a test reads from the returned inbox.
    #[cfg(test)]
    pub fn for_test(capacity: usize) -> (Self, mpsc::Receiver<StateMessage>) {
        let (tx, rx) = mpsc::channel(capacity);
        (Self { tx }, rx)
    }

    pub async fn send(&self, message: StateMessage) {
        let _ = self.tx.send(message).await;
    }
}

/// The end of a run, as the state actor saw it.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub model: Replay,
    pub processes: Vec<ProcessSummary>,
    pub totals: RunTotals,
}

/// How the state actor is asked to behave.
#[derive(Clone, Copy, Debug)]
pub struct StateOptions {
    pub human_summary: bool,
    /// The summary table's rows: the largest processes, at most this many (None: every one).
    pub summary_rows: Option<usize>,
    /// `--verify`: the summary carries the verify totals.
    pub verify: bool,
    /// Test hook (`--test-corrupt-state`): the first page made resident is dropped from the
    /// replayed state (not from the stream), so that a check against the kernel must fail.
    pub corrupt_first_touch: bool,
    pub page_size: u64,
    /// First touches are followed (not `--no-faults`): resident figures are measured.
    pub faults: bool,
    /// `--faults scan` or `records`: pages are found by scans, and the summary says how many
    /// were missed.
    pub scan: bool,
    /// `--faults records`: each first touch a scan finds is counted, by its record.
    pub records: bool,
    /// `--only`: the summary says how many spaces were not followed.
    pub only: bool,
    /// `--region`, `--min-size`: the summary says checks compare the mappings selected only.
    pub mappings_selected: bool,
    /// `--buffer`: bytes of lines that may wait for the stream's reader before the state actor
    /// (and so the program) waits.
    pub buffer_bytes: u32,
}

pub struct StateActor {
    inbox: mpsc::Receiver<StateMessage>,
    model: Replay,
    output: Output,
    /// The processes alive, as the stream tells their lives, and those that ended.
    lives: Processes,
    ended: Vec<Process>,
    totals: RunTotals,
    last_t_ns: u64,
    next_seq: u64,
    options: StateOptions,
    /// Spaces some check compared, and spaces some check left out (`--verify`): a space only in
    /// the second was never checked.
    checked_spaces: BTreeSet<SpaceId>,
    left_out_spaces: BTreeSet<SpaceId>,
    /// `--report`: the page's builder, fed every line.
    report: Option<ReportTap>,
    /// `--stacks`: the `site` lines, from the symbolizer.
    sites: Option<SiteLines>,
    /// `site` lines written so far: every later line's `seq` is the sequencer's plus this.
    inserted: u64,
    /// `--faults scan`: each space's last `unseen` line, which replaces any before it.
    unseen: BTreeMap<SpaceId, UnseenTotals>,
    /// `--only`: the spaces of programs not selected.
    not_selected: BTreeSet<SpaceId>,
    /// `--threads`: the `resident` lines of threads not selected, applied and not written;
    /// every later line's `seq` is the sequencer's less their count.
    withheld: Option<NotWritten>,
}

impl StateActor {
    pub fn new(
        capacity: usize,
        writer: Box<dyn Write + Send>,
        options: StateOptions,
        report: Option<ReportTap>,
        sites: Option<Receiver<Event>>,
        control: RunControl,
    ) -> (Self, StateHandle) {
        // Its slots allocated as they fill, as the sequencer's (sequencer/mod.rs).
        let (tx, inbox) = mpsc::channel(capacity);
        let actor = Self {
            inbox,
            model: Replay::new(),
            output: Output::start(writer, options.buffer_bytes, control),
            lives: Processes::default(),
            ended: Vec::new(),
            totals: RunTotals {
                verify: options.verify.then(VerifyTotals::default),
                ..RunTotals::default()
            },
            last_t_ns: 0,
            next_seq: 0,
            options,
            checked_spaces: BTreeSet::new(),
            left_out_spaces: BTreeSet::new(),
            report,
            sites: sites.map(SiteLines::new),
            inserted: 0,
            unseen: BTreeMap::new(),
            not_selected: BTreeSet::new(),
            withheld: None,
        };
        (actor, StateHandle { tx })
    }

    /// `--threads`: the summary counts the `resident` lines not written (the lanes mark them).
    pub fn selecting_threads(mut self, selecting: bool) -> Self {
        self.withheld = selecting.then(NotWritten::default);
        self
    }

    pub async fn run(mut self) -> RunReport {
        // The contract: flushed at least every 100 ms, so `| jq` sees events live.
        // A live page (`--serve`) hears of a quiet spell's last lines within its interval.
        let every = Duration::from_millis(100);
        let every = self
            .report
            .as_ref()
            .and_then(ReportTap::interval)
            .map_or(every, |ui| ui.clamp(Duration::from_millis(1), every));
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                message = self.inbox.recv() => match message {
                    Some(StateMessage { line, probe }) => self.on_line(line, probe).await,
                    None => break,
                },
                _ = tick.tick() => {
                    self.output.flush().await;
                    if let Some(tap) = &mut self.report {
                        tap.publish(&self.model, &self.lives);
                    }
                }
            }
        }
        self.finish().await
    }

    /// A line from the sequencer, after the `site` line it is the first to name.
    async fn on_line(&mut self, mut line: Line, probe: Option<Probe>) {
        let withheld = self.withheld.as_ref().map_or(0, |w| w.lines);
        line.seq = (line.seq + self.inserted).saturating_sub(withheld);
        if let Event::Resident { withheld: true, .. } = line.event {
            return self.withhold(line);
        }
        if let Some(sites) = &mut self.sites
            && let Some(site) = sites.name_site_of(&mut line.event).await
        {
            let site = Line {
                seq: line.seq,
                t_ns: line.t_ns,
                event: site,
            };
            self.inserted += 1;
            line.seq += 1;
            self.write(site, None).await;
        }
        self.write(line, probe).await;
    }

    async fn write(&mut self, mut line: Line, probe: Option<Probe>) {
        if matches!(line.event, Event::Exit { .. }) && test_hooks::fails(Fault::StatePanic, None) {
            panic!("test hook state-panic: the state actor fails at the first exit line");
        }
        self.last_t_ns = line.t_ns;
        self.next_seq = line.seq + 1;
        self.count(&mut line);
        if let Some(tap) = &mut self.report {
            tap.before(&self.model, &line);
        }
        self.lives.apply(&mut self.model, &line);
        match probe {
            Some(probe) => self.verify(&mut line.event, probe).await,
            None => self.not_checked(&mut line.event),
        }
        // After the check: the page shows what it found.
        if let Some(tap) = &mut self.report {
            tap.after(&self.model, &self.lives, &line);
        }
        self.ended.extend(self.lives.ended.take());
        if self.options.corrupt_first_touch
            && let Event::Resident {
                pid,
                tid,
                space,
                start,
                ..
            } = line.event
        {
            self.options.corrupt_first_touch = false;
            self.model.apply(&Event::Discard {
                pid,
                tid: tid.unwrap_or(pid),
                space,
                start,
                end: start + self.options.page_size,
                advice: "test-corruption".into(),
                site: None,
            });
        }
        self.output.push(line).await;
    }

    /// A `resident` line of a thread `--threads` does not select: the replayed state, the
    /// processes' counts and the page have it (so checks stay exact); the stream does not.
    fn withhold(&mut self, line: Line) {
        if let Event::Resident { faults, .. } = line.event {
            self.totals.faults += faults;
            let withheld = self.withheld.get_or_insert_default();
            withheld.lines += 1;
            withheld.first_touches += faults;
        }
        if let Some(tap) = &mut self.report {
            tap.before(&self.model, &line);
        }
        self.lives.apply_aside(&mut self.model, &line);
        if let Some(tap) = &mut self.report {
            tap.after(&self.model, &self.lives, &line);
        }
    }

    /// Compares the replayed space with the kernel's page tables, which the probe reads now: the
    /// tracer holds every thread of the space stopped until it is told the check is done.
    async fn verify(&mut self, event: &mut Event, probe: Probe) {
        let Event::Verify {
            pid,
            space,
            point,
            checked_pages,
            mismatched_pages,
            first_mismatches,
            skipped,
        } = event
        else {
            return;
        };
        let at = *space;
        let read = tokio::task::spawn_blocking(move || {
            let kernel = KernelView::read(&probe, at);
            // The threads may run again once the kernel's side is read. If the tracer stopped
            // waiting (it gives a check a minute), they ran during the read: nothing to compare.
            let answered = probe.done.send(()).is_ok();
            match kernel {
                Ok(_) if !answered => Err(Unreadable::Failed(io::Error::other(
                    "the tracer stopped waiting for this check; the threads ran during the read",
                ))),
                read => read,
            }
        })
        .await
        .unwrap_or_else(|e| {
            Err(Unreadable::Failed(io::Error::other(format!(
                "the read failed: {e}"
            ))))
        });
        let kernel = match read {
            Ok(k) => k,
            Err(why) => {
                tracing::debug!(
                    pid,
                    space,
                    ?point,
                    "cannot read the kernel's page tables: {why}"
                );
                *skipped = Some(format!("the kernel's page tables could not be read: {why}"));
                if let Some(t) = self.totals.verify.as_mut() {
                    match why {
                        Unreadable::Gone(_) => t.skipped_points += 1,
                        Unreadable::Failed(_) => t.unchecked_points += 1,
                    }
                }
                return;
            }
        };
        let empty = crate::model::AddressSpace::default();
        let replayed = self.model.spaces.get(space).unwrap_or(&empty);
        let c = verify::compare(replayed, &kernel, self.options.page_size);
        *checked_pages = c.checked_pages;
        *mismatched_pages = c.mismatched_pages;
        *first_mismatches = c.first_mismatches;
        self.checked_spaces.insert(at);
        if let Some(t) = self.totals.verify.as_mut() {
            t.points += 1;
            t.checked_pages += c.checked_pages;
            t.mismatched_pages += c.mismatched_pages;
            if c.mismatched_pages > 0 {
                t.failed_points += 1;
            }
        }
    }

    /// A `verify` line that came without a probe: its lane could not check (it says why), so
    /// it is a check that could not run.
    fn not_checked(&mut self, event: &mut Event) {
        let Event::Verify { skipped, .. } = event else {
            return;
        };
        skipped.get_or_insert_with(|| "no way to read the kernel's side came with it".into());
        if let Some(t) = self.totals.verify.as_mut() {
            t.unchecked_points += 1;
        }
    }

    fn space_resident(&self, space: SpaceId) -> (u64, u64) {
        self.model
            .spaces
            .get(&space)
            .map(|s| (s.resident_bytes, s.peak_resident_bytes))
            .unwrap_or_default()
    }

    /// Keeps the run's totals, and fills in an `exit`'s resident figures and program name, which
    /// only the replayed state and the process's life know.
    fn count(&mut self, line: &mut Line) {
        match &mut line.event {
            Event::Exec {
                space, followed, ..
            } => {
                self.totals.spaces += 1;
                if !*followed {
                    self.not_selected.insert(*space);
                }
            }
            Event::Fork {
                kind: ForkKind::Fork,
                space,
                child_space,
                ..
            } => {
                self.totals.spaces += 1;
                // A fork child runs its parent's program.
                if self.not_selected.contains(space) {
                    self.not_selected.insert(*child_space);
                }
            }
            // A range described again, or the rest of a change split in lines, is no syscall of
            // the program's.
            Event::Map { cause: Some(_), .. } | Event::Unmap { cause: Some(_), .. } => {}
            Event::Map { .. } | Event::Brk { .. } => self.totals.maps += 1,
            Event::Unmap { .. } => self.totals.unmaps += 1,
            Event::Resident { faults, .. } => {
                self.totals.faults += *faults;
                self.totals.resident_events += 1;
            }
            Event::Unseen {
                space,
                faults,
                found,
                at_most,
                ..
            } => {
                let figures = UnseenTotals {
                    faults: *faults,
                    found: *found,
                    at_most: *at_most,
                };
                self.unseen.insert(*space, figures);
            }
            Event::Exit {
                pid,
                space,
                name,
                resident_bytes,
                peak_resident_bytes,
                ..
            } => {
                let (now, peak) = self.space_resident(*space);
                *resident_bytes = now;
                *peak_resident_bytes = peak;
                // The tracer gave its comm; argv[0] is the program's own name for itself.
                if let Some(argv0) = self.lives.live.get(pid).and_then(|p| p.argv.first()) {
                    *name = Some(program_name(argv0));
                }
            }
            Event::Warning { what, space, .. } => {
                self.totals.warnings += 1;
                if let Some(v) = self.totals.verify.as_mut() {
                    if !what.stream_still_exact() {
                        v.inexact_warnings += 1;
                    }
                    match what {
                        WarningKind::CheckpointSkipped => {
                            v.skipped_points += 1;
                            self.left_out_spaces.extend(*space);
                        }
                        WarningKind::NoUserfaultfd | WarningKind::NotFollowed => {
                            v.unfollowed_spaces += 1
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }

    async fn finish(mut self) -> RunReport {
        // Processes never reaped (the tracer stopped early) count as they are now.
        let end = self.last_t_ns;
        let mut lives = std::mem::take(&mut self.ended);
        lives.extend(self.lives.still_alive(&self.model));
        lives.sort_by_key(|p| (p.pid, p.started_ns));
        let processes: Vec<ProcessSummary> = lives
            .iter()
            .map(|p| ProcessSummary {
                pid: p.pid,
                name: p
                    .name
                    .clone()
                    .or_else(|| p.argv.first().map(|a| program_name(a))),
                argv: p.argv.clone(),
                resident_bytes: p.resident_bytes,
                peak_resident_bytes: p.peak_resident_bytes,
                faults: p.first_touches,
                maps: p.maps,
                unmaps: p.unmaps,
                lifetime_ns: p.ended_ns.unwrap_or(end).saturating_sub(p.started_ns),
                status: p.status,
                signal: p.signal.clone(),
                oom: p.oom.clone(),
                swapped_out_bytes: p.swapped_out_bytes,
                swapped_in_bytes: p.swapped_in_bytes,
                reclaimed_bytes: p.reclaimed_bytes,
            })
            .collect();
        self.totals.processes = processes.len() as u64;
        self.totals.peak_resident_bytes = self
            .model
            .spaces
            .values()
            .map(|s| s.peak_resident_bytes)
            .max()
            .unwrap_or(0);
        self.totals.tree_peak_resident_bytes = self.model.tree_peak_resident_bytes;
        self.totals.sites = self.sites.as_ref().map(SiteLines::written);
        self.totals.lines = self.next_seq + 1;
        if let Some(v) = self.totals.verify.as_mut() {
            v.unchecked_spaces = self
                .left_out_spaces
                .difference(&self.checked_spaces)
                .count() as u64;
        }
        self.totals.tracer_peak_rss_bytes = own_peak_rss_bytes();
        self.totals.mappings_selected = self.options.mappings_selected;
        if self.options.only {
            self.totals.not_selected_spaces = Some(self.not_selected.len() as u64);
        }
        self.totals.threads_not_selected = self.withheld.clone();
        if self.options.scan {
            let mut all = UnseenTotals::default();
            for u in self.unseen.values() {
                all.faults += u.faults;
                all.found += u.found;
                all.at_most += u.at_most;
            }
            self.totals.unseen = Some(all);
        }
        let summary = Line {
            seq: self.next_seq,
            t_ns: self.last_t_ns,
            event: Event::Summary {
                processes: processes.clone(),
                totals: self.totals.clone(),
            },
        };
        let tap = self.report.take().map(|mut tap| {
            tap.before(&self.model, &summary);
            tap.after(&self.model, &self.lives, &summary);
            tap
        });
        self.output.push(summary).await;
        // The stream's last line is on its way before the page (megabytes) is written.
        if let Some(tap) = tap {
            tap.finish(&self.model, &self.lives).await;
        }
        self.output.finish().await;
        // A trace that followed no process (an attach refused, a program that never ran) has
        // nothing to tell a person: its one line of error says it all.
        if self.options.human_summary && self.totals.processes > 0 {
            // Never a panic on a stderr that has gone (to_stderr!).
            use std::io::Write as _;
            let summary = human_summary(
                &processes,
                &self.totals,
                self.options.faults,
                self.options.records,
                self.options.summary_rows,
            );
            let _ = std::io::stderr().write_all(summary.as_bytes());
        }
        RunReport {
            model: self.model,
            processes,
            totals: self.totals,
        }
    }
}

/// A program's name from its argv[0], at most a path's length (`PATH_MAX`): an argv[0] of
/// megabytes is a program's right, not a name to repeat on every line.
fn program_name(argv0: &str) -> String {
    const PATH_MAX: usize = 4096;
    if argv0.len() <= PATH_MAX {
        return argv0.to_string();
    }
    let mut end = PATH_MAX;
    while !argv0.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &argv0[..end])
}

/// This process's peak resident set so far: the high-water mark of its own memory. Neither
/// rusage figure is that: `wait4`'s includes the traced program, and even `RUSAGE_SELF` includes
/// the peak of whoever spawned us, which `execve` folds in (docs/kernel-facts.md).
fn own_peak_rss_bytes() -> u64 {
    crate::kernel::procfs::own_peak_rss().unwrap_or(0)
}
