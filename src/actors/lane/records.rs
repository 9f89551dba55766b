//! `--faults records`: whose fault made each page resident, from the kernel's own records of
//! its page faults (kernel/fault_records.rs), one ring per thread of the space.
//!
//! Whether a page is resident is known as under `--faults scan`: by the tracer's reads of the
//! page tables, whose `resident` lines (`by` `scan`) come through this lane. A record says who
//! faulted where and when, written where the fault began: every fault that made a page present
//! before a read has its record in its thread's ring by then (the read sees the page only once
//! the fault is done). So before a read's line goes on, the rings are drained, and the line is
//! split into runs by the first record of each page since it was last released: those pages are
//! written with the record's pid and tid (`by` `record`), the rest as the read found them (a
//! fault the kernel took through `get_user_pages`, which raises no `page-faults` event, or a
//! lost record).
//!
//! A release (unmap, discard, move) forgets the records of its range made before it; a record
//! made after it is kept for the page's next read. A record no read claims (a fault on a file
//! page, a copy on write, a fault that failed) is forgotten once it is older than
//! `UNCLAIMED_FOR`.

use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::event::{Event, FoundBy, SpaceId, WarningKind};
use crate::kernel::fault_records::{
    Drained, FaultRing, RingsWatcher, ThreadRings, monotonic_now, monotonic_of,
};

/// A record no read claimed by then is forgotten: far longer than the longest a followed page
/// waits for a read (`--sample-ms`, spaced by the reads' cost).
const UNCLAIMED_FOR: Duration = Duration::from_secs(10);

/// The first fault recorded at a page since it was last released.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Toucher {
    pid: i32,
    tid: i32,
    /// `CLOCK_MONOTONIC`, in nanoseconds.
    time: u64,
}

/// A space's rings and the records drained from them that no read has claimed yet.
pub(super) struct Records {
    rings: ThreadRings,
    /// Wakes the lane through `wake` when a ring passes its watermark.
    _watcher: RingsWatcher,
    first: HashMap<u64, Toucher>,
    drained: Vec<Drained>,
    page_mask: u64,
    /// Records lost since the stream last said so, and whose (the thread of the next record a
    /// full ring could take).
    lost: u64,
    lost_by: Option<i32>,
    /// When unclaimed records were last forgotten.
    pruned: Instant,
}

impl Records {
    /// Must be called on the runtime.
    pub(super) fn new(page_size: u64, wake: Arc<Notify>) -> io::Result<Self> {
        let rings = ThreadRings::new()?;
        let watcher = RingsWatcher::start(&rings, wake)?;
        Ok(Self {
            rings,
            _watcher: watcher,
            first: HashMap::new(),
            drained: Vec::new(),
            page_mask: !(page_size - 1),
            lost: 0,
            lost_by: None,
            pruned: Instant::now(),
        })
    }

    /// Thread `tid` of process `pid` records its faults in `ring` from now on.
    pub(super) fn add(&mut self, pid: i32, tid: i32, ring: FaultRing) -> io::Result<()> {
        let mut drained = std::mem::take(&mut self.drained);
        let added = self.rings.add(pid, tid, ring, &mut drained);
        self.drained = drained;
        self.take_drained();
        added
    }

    /// A thread ended: what its ring holds is taken, and the ring dropped.
    pub(super) fn thread_gone(&mut self, tid: i32) {
        let mut drained = std::mem::take(&mut self.drained);
        self.rings.remove(tid, &mut drained);
        self.drained = drained;
        self.take_drained();
    }

    /// A process left the space (it exec'd, and its events went with the old program).
    pub(super) fn process_left(&mut self, pid: i32) {
        let mut drained = std::mem::take(&mut self.drained);
        self.rings.remove_process(pid, &mut drained);
        self.drained = drained;
        self.take_drained();
    }

    /// Takes in every record written so far.
    pub(super) fn take(&mut self) {
        let mut drained = std::mem::take(&mut self.drained);
        self.rings.drain(&mut drained);
        self.drained = drained;
        self.take_drained();
    }

    fn take_drained(&mut self) {
        for drained in self.drained.drain(..) {
            match drained {
                Drained::Fault(fault) => {
                    let toucher = Toucher {
                        pid: fault.pid,
                        tid: fault.tid,
                        time: fault.time,
                    };
                    self.first
                        .entry(fault.addr & self.page_mask)
                        .and_modify(|first| {
                            if toucher.time < first.time {
                                *first = toucher;
                            }
                        })
                        .or_insert(toucher);
                }
                Drained::Lost { count, tid, .. } => {
                    self.lost += count;
                    self.lost_by = self.lost_by.or(tid);
                }
            }
        }
        if self.pruned.elapsed() >= UNCLAIMED_FOR {
            self.pruned = Instant::now();
            let Some(oldest) = monotonic_now().checked_sub(UNCLAIMED_FOR.as_nanos() as u64) else {
                return;
            };
            self.first.retain(|_, first| first.time >= oldest);
        }
    }

    /// A `warning` line for the records lost since the last, if any were.
    pub(super) fn lost_warning(&mut self, space: SpaceId) -> Option<Event> {
        if self.lost == 0 {
            return None;
        }
        let (lost, by) = (std::mem::take(&mut self.lost), self.lost_by.take());
        let whose = by.map_or(String::new(), |tid| {
            format!(" (thread {tid}'s ring among them)")
        });
        Some(Event::Warning {
            pid: None,
            space: Some(space),
            what: WarningKind::RecordsLost,
            message: format!(
                "{lost} fault record(s) lost{whose}: the pages they were of are found by reads, \
                 without their thread"
            ),
        })
    }

    /// Pages in `range` were released at `at` (their mapping unmapped, moved or discarded):
    /// the records made there before are forgotten.
    pub(super) fn released(&mut self, range: &Range<u64>, at: Instant) {
        if self.first.is_empty() {
            return;
        }
        let before = monotonic_of(at);
        let pages = (range.end.saturating_sub(range.start)) / (!self.page_mask + 1);
        if pages as usize > self.first.len() {
            self.first
                .retain(|page, first| !range.contains(page) || first.time > before);
        } else {
            let mut page = range.start & self.page_mask;
            while page < range.end {
                if self
                    .first
                    .get(&page)
                    .is_some_and(|first| first.time <= before)
                {
                    self.first.remove(&page);
                }
                page += !self.page_mask + 1;
            }
        }
    }

    /// A read's `resident` line (`by` `scan`), split into runs by whose record each page has:
    /// those with one carry its pid and tid (`by` `record`), the others are as found.
    pub(super) fn attribute(&mut self, event: Event) -> Vec<Event> {
        let Event::Resident {
            pid,
            tid: None,
            space,
            start,
            end,
            write,
            faults,
            writer,
            by: Some(FoundBy::Scan),
            huge,
            site,
            sampled,
            from: None,
            withheld,
        } = event
        else {
            return vec![event];
        };
        let page_size = !self.page_mask + 1;
        let mut runs: Vec<(Range<u64>, Option<Toucher>)> = Vec::new();
        let mut page = start;
        while page < end {
            let whose = self.first.remove(&page);
            match runs.last_mut() {
                Some((run, last))
                    if run.end == page
                        && last.map(|t| (t.pid, t.tid)) == whose.map(|t| (t.pid, t.tid)) =>
                {
                    run.end = page + page_size;
                }
                _ => runs.push((page..page + page_size, whose)),
            }
            page += page_size;
        }
        runs.into_iter()
            .map(|(run, whose)| Event::Resident {
                pid: whose.map_or(pid, |t| t.pid),
                tid: whose.map(|t| t.tid),
                space,
                start: run.start,
                end: run.end,
                write,
                faults,
                writer,
                by: Some(if whose.is_some() {
                    FoundBy::Record
                } else {
                    FoundBy::Scan
                }),
                huge,
                site,
                sampled,
                from: None,
                withheld,
            })
            .collect()
    }
}
