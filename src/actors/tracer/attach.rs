//! `attach`: following processes that were already running, and letting them go, each as it
//! was. Their threads are seized with event stops only (kernel/attach.rs): forks, execs and
//! exits are exact, as under `run`; their layout and pages are sampled every `--sample-ms`
//! (the mappings read again and compared, the pages scanned) and read whole at every exit stop,
//! check and detach, where every thread is stopped (docs/architecture.md, "attach").

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use rangemap::RangeSet;

use super::checkpoints::PATIENCE;
use super::records::FirstRing;
use super::shadow::Marks;
use super::spaces::{Origin, Sampled};
use super::{Phase, Process, ProgramEnd, Thread, TraceError, Tracer};
use crate::actors::sequencer::SequencerMessage;
use crate::event::{Event, SpaceId, VerifyPoint, WarningKind};
use crate::kernel::attach;
use crate::kernel::procfs::{self, MapsEntry, PopulatedRun};
use crate::kernel::ptrace::{self, Resume, Stop};

impl Tracer {
    /// Whether an `attach` trace is to end by detaching: Ctrl-C, SIGTERM or SIGHUP to
    /// mevi-actors, or the stream lost (its reader gone). Looked at every wake-up (at least
    /// every tick).
    pub(super) fn detach_asked(&self) -> bool {
        self.control.detach_asked() || self.control.stream_lost()
    }
}

impl Tracer {
    /// Seizes every thread of each process, then gives each process a space: an `exec` line
    /// marked `attached`, and its mappings with their present pages. A process that cannot be
    /// attached to fails the whole attach, and those already seized are let go.
    pub(super) fn attach_all(
        &mut self,
        pids: &[i32],
        follow_forks: bool,
    ) -> Result<(), TraceError> {
        // Before any lane exists: no exec but an attached one may announce a process.
        self.sequencer.send_blocking(SequencerMessage::Attaching);
        let options = attach::options(follow_forks);
        let mut seized: Vec<(i32, Vec<i32>)> = Vec::new();
        for &pid in pids {
            match attach::seize_process(pid, options) {
                Ok(tids) => seized.push((pid, tids)),
                Err(e) => {
                    for (pid, tids) in &seized {
                        for &tid in tids {
                            self.threads.insert(tid, Thread::new(*pid, Phase::Running));
                        }
                    }
                    self.detach_all();
                    return Err(TraceError::Attach(e.message(pid)));
                }
            }
        }
        for (pid, tids) in seized {
            for &tid in &tids {
                self.threads.insert(tid, Thread::new(pid, Phase::Running));
            }
            let space = self.maker.allocate();
            self.processes.insert(
                pid,
                Process {
                    space: Some(space),
                    faults_at_join: procfs::minor_faults(pid).unwrap_or(0),
                    faults_at_exit: None,
                    rss: None,
                    memory_cgroup: None,
                },
            );
            // The only failure is its death meanwhile, which its exit reports.
            if let Err(e) = self.create_space(pid, space, Origin::Attach) {
                tracing::debug!(pid, "attaching: {e:?}");
                continue;
            }
            // The space's making recorded its first thread's faults; the others run on
            // meanwhile (seized, not stopped): a page one of them faults before its ring opens
            // is found by a scan, without its thread.
            for &tid in tids.iter().filter(|&&tid| tid != pid) {
                self.record_faults(pid, tid, space, FirstRing::Whole);
            }
        }
        Ok(())
    }

    /// Reads an attached space's mappings again and writes those that changed since the last
    /// sample as the kernel has them now (an `unmap` and `map` lines, `redescribe`). No syscall
    /// of it is stopped at: this is the only way its layout is known.
    pub(super) fn sample_layout(&mut self, pid: i32, space: SpaceId) {
        let Some(s) = self.spaces.get(&space) else {
            return;
        };
        let (Some(last), Some(vmas)) = (s.sampled(), s.vmas.as_ref()) else {
            return;
        };
        // Through the space's own mm: a read by pid between an exec and its event stop would
        // be the new program's mappings.
        let maps = match vmas.read_maps() {
            Ok(maps) if !maps.is_empty() => maps,
            // The mm is gone: its end is reported by its processes' exits or exec.
            _ => return,
        };
        let changed = changed_ranges(last.maps(), &maps);
        if !changed.is_empty() {
            let seen_before = s.shadow.within_set(Marks::SEEN, &changed);
            self.describe_from(pid, space, changed.clone(), &maps);
            self.found_in_redescribed(space, &changed, &seen_before);
        }
        if let Some(s) = self.spaces.get_mut(&space) {
            s.resampled(Sampled::new(maps));
        }
    }

    /// The pages a sample's description found present in `changed` that no scan had seen
    /// (`seen_before`) were made by faults since the attach, as those a scan finds: counted as
    /// found, or `unseen` would take each for one that came and went.
    fn found_in_redescribed(
        &mut self,
        space: SpaceId,
        changed: &RangeSet<u64>,
        seen_before: &RangeSet<u64>,
    ) {
        let page = self.config.lane.page_size;
        let Some(s) = self.spaces.get_mut(&space) else {
            return;
        };
        let Some(pagemap) = s.pagemap.as_ref() else {
            return;
        };
        let mut found = 0;
        for range in changed.iter() {
            let Ok(runs) = pagemap.populated(range.clone()) else {
                continue;
            };
            for run in runs {
                let mut new: RangeSet<u64> = std::iter::once(run.range.clone()).collect();
                for r in seen_before.overlapping(&run.range) {
                    new.remove(r.clone());
                }
                // Only what the description wrote as resident (seen now).
                let written = s.shadow.within_set(Marks::SEEN, &new);
                found += super::scans::faults_found(&written, seen_before, run.huge, page);
            }
        }
        s.scans.found += found;
    }

    /// In an attached space, whose releases are not stopped at: the pages of `range` written
    /// as resident and absent now (`runs`: what is present) are written as a `discard`, with
    /// `advice` "scan" (dropped by some syscall, or by the kernel, since the last scan).
    pub(super) fn write_gone(
        &mut self,
        pid: i32,
        space: SpaceId,
        range: Range<u64>,
        runs: &[PopulatedRun],
    ) {
        let Some(s) = self.spaces.get_mut(&space) else {
            return;
        };
        let gone = s.shadow.gone(&range, runs);
        for r in gone.iter() {
            s.lane.observed(Event::Discard {
                pid,
                tid: pid,
                space,
                start: r.start,
                end: r.end,
                advice: "scan".to_string(),
                site: None,
            });
        }
    }

    /// Whether this trace follows processes attached to (whose syscalls are never stopped at).
    pub(super) fn attaching(&self) -> bool {
        matches!(self.config.target, super::Target::Attach { .. })
    }

    /// Lets every traced thread go, each as it was, and ends the trace's hold on them. Each is
    /// stopped first (`PTRACE_INTERRUPT`), so that the spaces are read whole once more (and
    /// checked, with `--verify`) while nothing runs, and so that a thread stopped to deliver a
    /// signal is let go with it: a signal held at our exit would be lost. A thread in a group
    /// stop stays stopped. A thread that does not stop in time (a vfork parent, an
    /// uninterruptible sleep) is left to the kernel, which detaches it when the tracer thread
    /// ends.
    pub(super) fn detach_all(&mut self) {
        let mut signals: HashMap<i32, Option<Signal>> = HashMap::new();
        // Threads held by a checkpoint are in a stop of ours already.
        for (tid, how) in self.checkpoints.abandon() {
            signals.insert(tid, delivered(how));
        }
        // New children stopped at their attach stop, waiting for their creator's event.
        for child in self.lineage.early_children() {
            signals.insert(child, None);
        }
        // A vfork parent cannot stop until its child execs or exits: left to the kernel.
        let mut waiting: Vec<i32> = self
            .threads
            .iter()
            .filter(|(tid, t)| !signals.contains_key(tid) && !t.phase.in_vfork())
            .map(|(&tid, _)| tid)
            .filter(|&tid| ptrace::interrupt(tid).is_ok())
            .collect();
        let began = Instant::now();
        while !waiting.is_empty() && began.elapsed() < PATIENCE {
            // Without blocking: the ticker may not run yet (an attach that failed half way).
            let status = match waitpid(
                None::<Pid>,
                Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG),
            ) {
                Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => {
                    std::thread::sleep(Duration::from_micros(200));
                    continue;
                }
                Ok(status) => status,
                Err(_) => break,
            };
            let Some(stop) = self.stop_of(status) else {
                continue;
            };
            let tid = stop.tid();
            waiting.retain(|&t| t != tid);
            let signal = match stop {
                Stop::Exited { code, .. } => {
                    self.on_death(tid, ProgramEnd::Exited(code));
                    continue;
                }
                Stop::Killed { signal, .. } => {
                    self.on_death(tid, ProgramEnd::Signaled(signal as i32));
                    continue;
                }
                Stop::Signal { signal, .. } => Some(signal),
                Stop::NewChild { .. } => {
                    // Its new child stops too, at its attach stop (unless that came already):
                    // it is let go the same way.
                    if let Ok(child) = ptrace::event_message(tid)
                        && !signals.contains_key(&child)
                    {
                        waiting.push(child);
                    }
                    None
                }
                // A group stop (its signal is kept by the kernel: it stays stopped), our
                // interrupt's trap, or another event or syscall stop: nothing to deliver.
                Stop::Attach { .. }
                | Stop::GroupStop { .. }
                | Stop::Interrupt { .. }
                | Stop::SeccompEntry { .. }
                | Stop::SyscallEntry { .. }
                | Stop::SyscallExit { .. }
                | Stop::Exec { .. }
                | Stop::Exiting { .. }
                | Stop::VforkDone { .. }
                | Stop::UnknownEvent { .. } => None,
            };
            signals.insert(tid, signal);
        }
        self.read_before_detach(&signals);
        for (tid, signal) in signals {
            if let Err(e) = ptrace::detach(tid, signal) {
                tracing::debug!(tid, "PTRACE_DETACH: {e}");
            }
            self.threads.remove(&tid);
        }
    }

    /// Every thread of the spaces being let go is stopped: each is read whole a last time (and
    /// checked with `--verify`), so the stream ends where the kernel is. A space with a thread
    /// that did not stop is not: it may be changing.
    fn read_before_detach(&mut self, stopped: &HashMap<i32, Option<Signal>>) {
        let mut targets: Vec<(SpaceId, i32)> = Vec::new();
        let spaces: Vec<SpaceId> = self.spaces.keys().copied().collect();
        for space in spaces {
            // A vfork parent runs no user code until its child (stopped) execs or exits.
            let threads: Vec<(i32, i32)> = self
                .threads_in(space)
                .filter(|(_, t)| !t.phase.in_vfork())
                .map(|(tid, t)| (tid, t.pid))
                .collect();
            if let Some(&(running, pid)) =
                threads.iter().find(|(tid, _)| !stopped.contains_key(tid))
            {
                if self.config.verify {
                    self.warn(
                        Some(pid),
                        Some(space),
                        WarningKind::CheckpointSkipped,
                        format!(
                            "space {space} was not checked at the detach: thread {running} ({}) \
                             did not stop",
                            procfs::whereabouts(running)
                        ),
                    );
                }
                continue;
            }
            let Some(&(tid, pid)) = threads.iter().min() else {
                continue;
            };
            self.sample_layout(pid, space);
            targets.push((space, tid));
        }
        if self.config.verify {
            // io_uring workers may write while the threads are stopped: such a space is read,
            // not checked, as at a checkpoint.
            let (checked, read): (Vec<_>, Vec<_>) = targets
                .iter()
                .partition(|(space, _)| self.io_workers_in(*space).is_empty());
            self.check(&checked, VerifyPoint::Checkpoint);
            for &(space, tid) in &read {
                if let Some(pid) = self.threads.get(&tid).map(|t| t.pid) {
                    self.scan_whole(pid, space);
                }
            }
        } else {
            for &(space, tid) in &targets {
                if let Some(pid) = self.threads.get(&tid).map(|t| t.pid) {
                    self.scan_whole(pid, space);
                }
            }
        }
        // What the scans may have missed while attached.
        for (space, tid) in targets {
            if let Some(pid) = self.threads.get(&tid).map(|t| t.pid) {
                self.write_unseen(pid, space, None);
            }
        }
    }

    /// At a stop in an attached space where every thread is stopped (a check, an exit stop):
    /// its layout is read again first, so the pages read next are of the mappings it has.
    pub(super) fn sample_layout_of(&mut self, tid: i32) {
        if let Some((pid, space)) = self.space_of(tid)
            && self
                .spaces
                .get(&space)
                .is_some_and(|s| s.sampled().is_some())
        {
            self.sample_layout(pid, space);
        }
    }
}

/// The signal a parked thread was to be let go with.
fn delivered(how: Resume) -> Option<Signal> {
    match how {
        Resume::Cont(signal) | Resume::EverySyscall(signal) => signal,
        _ => None,
    }
}

/// Where two readings of `/proc/PID/maps` differ: every range a mapping of either covers that
/// the other has not exactly alike (same bounds, protection, file and offset).
fn changed_ranges(old: &[MapsEntry], new: &[MapsEntry]) -> RangeSet<u64> {
    let mut changed = RangeSet::new();
    for (these, those) in [(old, new), (new, old)] {
        // Thousands of mappings (a JVM, a browser) are read every sample: by hash, not pairs.
        let those: HashSet<&MapsEntry> = those.iter().collect();
        for m in these.iter().filter(|m| !those.contains(m)) {
            changed.insert(m.start..m.end);
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::procfs::Prot;

    fn entry(start: u64, end: u64, prot: Prot) -> MapsEntry {
        MapsEntry {
            start,
            end,
            prot,
            offset: 0,
            dev: "00:00".to_string(),
            inode: 0,
            path: Default::default(),
        }
    }

    #[test]
    fn only_what_differs_is_changed() {
        let rw = Prot::READ | Prot::WRITE;
        let old = [entry(0x1000, 0x3000, rw), entry(0x5000, 0x6000, Prot::READ)];
        // The first grew, the second is alike, a third is new.
        let new = [
            entry(0x1000, 0x4000, rw),
            entry(0x5000, 0x6000, Prot::READ),
            entry(0x8000, 0x9000, rw),
        ];
        let changed: Vec<_> = changed_ranges(&old, &new).into_iter().collect();
        assert_eq!(changed, vec![0x1000..0x4000, 0x8000..0x9000]);
    }
}
