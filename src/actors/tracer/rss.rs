//! Every `--sample-ms`, each process's memory by the kernel's own count (`rss` lines): file-backed
//! and shared memory, which the stream does not follow page by page, beside the anonymous memory
//! it does, and what is in swap. A line is written only when the figures changed.

use std::time::Instant;

use super::{Tracer, next_read};
use crate::event::Event;
use crate::kernel::{oom, procfs, tick};

/// When the processes' figures are next read.
pub(super) struct RssReads {
    due: Instant,
}

impl RssReads {
    pub(super) fn new() -> Self {
        Self {
            due: Instant::now(),
        }
    }
}

impl Tracer {
    /// At a tick: the processes' figures, if a sample period has passed since the last look.
    pub(super) fn sample_rss_if_due(&mut self) {
        let now = Instant::now();
        if self.rss_reads.due > now {
            return;
        }
        let cpu = tick::thread_cpu_time();
        let pids: Vec<i32> = self.processes.keys().copied().collect();
        for pid in pids {
            let Some(space) = self.space_of_process(pid) else {
                continue;
            };
            // Gone meanwhile, or a zombie: its exit line says the rest.
            let Some(figures) = procfs::rss(pid) else {
                continue;
            };
            let Some(process) = self.processes.get_mut(&pid) else {
                continue;
            };
            if process.rss == Some(figures) {
                continue;
            }
            process.rss = Some(figures);
            // Its memory changed: where an OOM kill of it would be counted, as it is now.
            process.memory_cgroup = oom::memory_cgroup(pid);
            if let Some(cgroup) = &process.memory_cgroup {
                self.oom.watch(cgroup);
            }
            if let Some(s) = self.spaces.get(&space) {
                s.lane.observed(Event::Rss {
                    pid,
                    space,
                    anon: figures.anon,
                    file: figures.file,
                    shmem: figures.shmem,
                    swap: figures.swap,
                });
            }
        }
        // Many processes (a read each): at most a fiftieth of the tracer's time.
        let took = tick::thread_cpu_time().saturating_sub(cpu);
        self.rss_reads.due = next_read(self.config.sample, took);
    }
}
