//! Under `--faults scan`: how many pages the scans may have missed, made resident and dropped
//! between two scans with no syscall we stop in between (docs/schema.md, `unseen`). The kernel
//! counts every minor fault of a process (`min_flt`); the scans count what they found; the
//! difference bounds what they missed. Only a bound: faults on files, shared memory and
//! copy-on-write faults count too, and pages a layout syscall itself populated are not
//! subtracted.

use super::Tracer;
use crate::event::{Event, SpaceId};
use crate::kernel::procfs;

impl Tracer {
    /// The faults `pid` made since it joined its space, by the kernel's count now.
    fn faults_in_space(&self, pid: i32, now: Option<u64>) -> u64 {
        let joined = self.processes.get(&pid).map_or(0, |p| p.faults_at_join);
        now.unwrap_or(joined).saturating_sub(joined)
    }

    /// `pid` leaves `space` by an exec, with `now` faults by the kernel's count (read only
    /// under `--faults scan`): its faults there stay the space's, and the space's `unseen` line
    /// is written if it was the last process in it.
    pub(super) fn faults_leaving(&mut self, pid: i32, space: SpaceId, now: Option<u64>) {
        let made = self.faults_in_space(pid, now);
        if let Some(s) = self.spaces.get_mut(&space) {
            s.scans.faults_gone += made;
        }
        if let (Some(p), Some(now)) = (self.processes.get_mut(&pid), now) {
            p.faults_at_join = now;
        }
        if self.spaces.get(&space).is_some_and(|s| s.members == 1) {
            self.write_unseen(pid, space, now);
        }
    }

    /// At an exit stop: the process's count so far, which is its last once its last thread
    /// is there (a vfork child's, say, whose space goes on with its parent). Returned too, for
    /// the `unseen` line written at the same stop.
    pub(super) fn note_faults_at_exit(&mut self, pid: i32) -> Option<u64> {
        let scanned = self
            .space_of_process(pid)
            .and_then(|space| self.spaces.get(&space))
            .is_some_and(|s| s.scans_only());
        let now = scanned.then(|| procfs::minor_faults(pid)).flatten()?;
        if let Some(p) = self.processes.get_mut(&pid) {
            p.faults_at_exit = Some(now);
        }
        Some(now)
    }

    /// A process is gone: the faults it made in its space stay the space's, for the `unseen`
    /// line its other processes write later.
    pub(super) fn faults_of_the_dead(&mut self, pid: i32) {
        let Some(p) = self.processes.get(&pid) else {
            return;
        };
        let made = self.faults_in_space(pid, p.faults_at_exit);
        if let Some(s) = p.space.and_then(|space| self.spaces.get_mut(&space)) {
            s.scans.faults_gone += made;
        }
    }

    /// Writes the space's `unseen` line: the faults of every process in it (those gone
    /// included), what the scans found, and the difference. At its last exit stop, where
    /// nothing of it can fault any more; a later one (a vfork parent going on) replaces it.
    /// `pid_now`: `pid`'s count, if the caller has just read it at this stop (`/proc/PID/stat`
    /// is not cheap: about 20 µs). Its threads are stopped or past their exit stop; only its
    /// io_uring workers could add a fault since, which the bound may leave out either way.
    pub(super) fn write_unseen(&self, pid: i32, space: SpaceId, pid_now: Option<u64>) {
        let Some(s) = self.spaces.get(&space).filter(|s| s.scans_only()) else {
            return;
        };
        let members: Vec<i32> = self
            .processes
            .iter()
            .filter(|(_, p)| p.space == Some(space))
            .map(|(&pid, _)| pid)
            .collect();
        let (found, gone) = (s.scans.found, s.scans.faults_gone);
        let faults = gone
            + members
                .into_iter()
                .map(|p| {
                    let now = pid_now.filter(|_| p == pid);
                    self.faults_in_space(p, now.or_else(|| procfs::minor_faults(p)))
                })
                .sum::<u64>();
        s.lane.observed(Event::Unseen {
            pid,
            space,
            faults,
            found,
            at_most: faults.saturating_sub(found),
        });
    }
}
