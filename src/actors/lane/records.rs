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
//! A read claims only records made before it (a later one is another fault's, kept for the next
//! read). A release (unmap, discard, move, a mapping or heap placed over the range, a heap
//! shrink) forgets the records of its range made before its line; a record made after it is
//! kept for the page's next read. A huge page is one fault, recorded at one of its 4 KiB pages:
//! its frame is claimed whole by the frame's earliest record. A record no read claims (a fault
//! on a file page, a copy on write, a fault that failed) is forgotten once it is older than
//! `UNCLAIMED_FOR`, or sooner once more than `MOST_UNCLAIMED` wait.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rangemap::{RangeMap, RangeSet};
use tokio::sync::Notify;

use crate::event::{Event, FoundBy, SpaceId, WarningKind};
use crate::kernel::fault_records::{
    Drained, FaultRing, RingsWatcher, ThreadRings, monotonic_now, monotonic_of,
};
use crate::kernel::thp::HUGE_PAGE;
use crate::selection::ThreadNames;

/// A record no read claimed by then is forgotten: far longer than the longest a followed page
/// waits for a read (`--sample-ms`, spaced by the reads' cost).
const UNCLAIMED_FOR: Duration = Duration::from_secs(10);

/// At most this many unclaimed records are kept (40 bytes each, with the map's own): past it,
/// those older than `CROWDED_FOR` are forgotten.
const MOST_UNCLAIMED: usize = 1 << 20;
const CROWDED_FOR: Duration = Duration::from_secs(1);

/// Records lost are said at most this often for a space (with their sum since the last
/// warning), and once more at the space's end: a ring that overflows at every drain would
/// otherwise write a warning at each.
const LOST_SAID_EVERY: Duration = Duration::from_secs(1);

/// A fault recorded at a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Toucher {
    pid: i32,
    tid: i32,
    /// `CLOCK_MONOTONIC`, in nanoseconds.
    time: u64,
    /// `--threads`: whether the thread's name when it faulted is one selected.
    selected: bool,
}

impl Toucher {
    /// Whose a run of pages is: one line holds one thread's, as its name was then.
    fn thread(&self) -> (i32, i32, bool) {
        (self.pid, self.tid, self.selected)
    }
}

/// A space's rings and the records drained from them that no read has claimed yet.
pub(super) struct Records {
    rings: ThreadRings,
    /// Wakes the lane through `wake` when a ring passes its watermark.
    _watcher: RingsWatcher,
    /// By page and time, in address order (a release or a huge page takes a range of them):
    /// every record not claimed or forgotten yet, since a lane that runs behind its threads may
    /// hold several faults of a page, each to be claimed by its own read.
    unclaimed: BTreeMap<(u64, u64), Toucher>,
    drained: Vec<Drained>,
    page_size: u64,
    /// Records lost since the stream last said so, and whose rings lost them.
    lost: u64,
    lost_by: Vec<i32>,
    /// When the stream last said records were lost.
    lost_said: Option<Instant>,
    /// Pages written from their records alone (`unread`): found, as a scan's are, for the
    /// space's `unseen` line.
    pub(super) unread_pages: u64,
    /// Ranges an `mprotect` made writable, with when (`CLOCK_MONOTONIC`): a record there from
    /// before may be of a write the old protection refused, which made no page.
    writable_since: RangeMap<u64, u64>,
    /// When unclaimed records were last forgotten.
    pruned: Instant,
    /// Processes of the space whose `exit` has gone out (a `clone(CLONE_VM)` child's, before
    /// the space's end): a line about them now would come after their end, so their records
    /// name no page (it is written as the read found it).
    ended: HashSet<i32>,
    /// `--threads`: the names selected, and whether each thread's name is one now (as its
    /// ring has it: a name it gives itself comes between its faults).
    names: Option<Arc<ThreadNames>>,
    selected: HashMap<i32, bool>,
}

impl Records {
    /// Must be called on the runtime. With `names` (`--threads`), the lines of threads whose
    /// names are not selected are withheld.
    pub(super) fn new(
        page_size: u64,
        wake: Arc<Notify>,
        names: Option<Arc<ThreadNames>>,
    ) -> io::Result<Self> {
        let rings = ThreadRings::new()?;
        let watcher = RingsWatcher::start(&rings, wake)?;
        Ok(Self {
            rings,
            _watcher: watcher,
            unclaimed: BTreeMap::new(),
            drained: Vec::new(),
            page_size,
            lost: 0,
            lost_by: Vec::new(),
            lost_said: None,
            unread_pages: 0,
            writable_since: RangeMap::new(),
            pruned: Instant::now(),
            ended: HashSet::new(),
            names,
            selected: HashMap::new(),
        })
    }

    /// Runs `with` on the rings, and takes in what it drained from them.
    fn with_rings(&mut self, with: impl FnOnce(&mut ThreadRings, &mut Vec<Drained>)) {
        let mut drained = std::mem::take(&mut self.drained);
        with(&mut self.rings, &mut drained);
        self.drained = drained;
        self.take_drained();
    }

    /// Thread `tid` of process `pid`, named `name` when its ring was opened (if it could be
    /// read), records its faults in `ring` from now on; its ring before it, if it replaces
    /// one, until `replaces_before`.
    pub(super) fn add(
        &mut self,
        pid: i32,
        tid: i32,
        name: Option<&str>,
        ring: FaultRing,
        replaces_before: Option<u64>,
    ) -> io::Result<()> {
        if let (Some(names), Some(name)) = (&self.names, name) {
            self.selected.insert(tid, names.selects(name));
        }
        let mut added = Ok(());
        self.with_rings(|rings, drained| {
            added = rings.add(pid, tid, ring, replaces_before, drained)
        });
        added
    }

    /// A thread ended: what its ring holds is taken, and the ring dropped.
    pub(super) fn thread_gone(&mut self, tid: i32) {
        self.with_rings(|rings, drained| rings.remove(tid, drained));
        self.selected.remove(&tid);
    }

    /// Process `pid`'s `exit` line is going out.
    pub(super) fn process_ended(&mut self, pid: i32) {
        self.ended.insert(pid);
    }

    /// Process `pid` was made (its pid may be an ended one's, reused).
    pub(super) fn process_made(&mut self, pid: i32) {
        self.ended.remove(&pid);
    }

    /// A process left the space (it exec'd, and its events went with the old program).
    pub(super) fn process_left(&mut self, pid: i32) {
        self.with_rings(|rings, drained| rings.remove_process(pid, drained));
    }

    /// Takes in every record written so far.
    pub(super) fn take(&mut self) {
        self.with_rings(|rings, drained| {
            rings.drain(drained);
        });
    }

    fn take_drained(&mut self) {
        let page_mask = !(self.page_size - 1);
        for drained in self.drained.drain(..) {
            match drained {
                Drained::Fault(fault) => {
                    // A thread whose name is unknown is written: nothing is left out that was
                    // not chosen to be.
                    let toucher = Toucher {
                        pid: fault.pid,
                        tid: fault.tid,
                        time: fault.time,
                        selected: self.selected.get(&fault.tid).copied().unwrap_or(true),
                    };
                    self.unclaimed
                        .insert((fault.addr & page_mask, fault.time), toucher);
                }
                Drained::Lost { count, tid } => {
                    self.lost += count;
                    if !self.lost_by.contains(&tid) {
                        self.lost_by.push(tid);
                    }
                }
                Drained::Named { tid, name } => {
                    if let Some(names) = &self.names {
                        self.selected.insert(tid, names.selects(&name));
                    }
                }
            }
        }
        let crowded = self.unclaimed.len() > MOST_UNCLAIMED;
        if crowded || self.pruned.elapsed() >= UNCLAIMED_FOR {
            self.pruned = Instant::now();
            let age = if crowded { CROWDED_FOR } else { UNCLAIMED_FOR };
            let oldest = monotonic_now().saturating_sub(age.as_nanos() as u64);
            self.unclaimed.retain(|_, record| record.time >= oldest);
            // Every record left is newer than these: they filter none.
            let stale: Vec<Range<u64>> = self
                .writable_since
                .iter()
                .filter(|(_, since)| **since < oldest)
                .map(|(range, _)| range.clone())
                .collect();
            for range in stale {
                self.writable_since.remove(range);
            }
        }
    }

    /// A `warning` line for the records lost since the last, if any were and the last is
    /// `LOST_SAID_EVERY` old, or `at_end` (the space's end: nothing is left unsaid).
    pub(super) fn lost_warning(&mut self, space: SpaceId, at_end: bool) -> Option<Event> {
        let recently = self
            .lost_said
            .is_some_and(|said| said.elapsed() < LOST_SAID_EVERY);
        if self.lost == 0 || (recently && !at_end) {
            return None;
        }
        self.lost_said = Some(Instant::now());
        let lost = std::mem::take(&mut self.lost);
        let by = std::mem::take(&mut self.lost_by);
        let whose = by
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        Some(Event::Warning {
            pid: None,
            space: Some(space),
            what: WarningKind::RecordsLost,
            message: format!(
                "{lost} fault record(s) lost by the ring(s) of thread(s) {whose}: the pages they \
                 were of are found by reads, without their thread"
            ),
        })
    }

    /// Pages in `range` were released at `at` (their mapping unmapped, moved, discarded or
    /// replaced): the records made there before are forgotten.
    pub(super) fn released(&mut self, range: &Range<u64>, at: Instant) {
        // An empty range (`start >= end`) releases nothing, and is no range of the map's.
        if !self.unclaimed.is_empty() && !range.is_empty() {
            self.take_made_by(range.clone(), monotonic_of(at));
        }
        if !range.is_empty() {
            self.writable_since.remove(range.clone());
        }
    }

    /// The kernel refused thread `tid`'s access at `addr` (SIGSEGV, SIGBUS): its records at that
    /// page are of faults that failed, for no read to claim nor release to write.
    pub(super) fn refused(&mut self, tid: i32, addr: u64) {
        let page = addr & !(self.page_size - 1);
        let failed: Vec<(u64, u64)> = self
            .unclaimed
            .range((page, 0)..=(page, u64::MAX))
            .filter(|(_, record)| record.tid == tid)
            .map(|(&key, _)| key)
            .collect();
        for key in failed {
            self.unclaimed.remove(&key);
        }
    }

    /// `range` was made writable at `at`: no record there from before makes an unread page.
    pub(super) fn made_writable(&mut self, range: &Range<u64>, at: Instant) {
        if !range.is_empty() {
            self.writable_since.insert(range.clone(), monotonic_of(at));
        }
    }

    /// Pages of `pages` that a release is about to drop, which no read found present: the
    /// first record at each made before `before` (the release had not begun then) is of a fault
    /// that made it resident and that no read saw. Their `resident` lines (`by` `record_only`),
    /// in runs of one thread's adjacent pages, each with its latest record's time, in time
    /// order; the space's count of such pages grows by theirs.
    pub(super) fn unread(
        &mut self,
        space: SpaceId,
        pages: &RangeSet<u64>,
        before: Instant,
    ) -> Vec<(Event, u64)> {
        let before = monotonic_of(before);
        let mut runs: Vec<(Range<u64>, Toucher)> = Vec::new();
        for range in pages.iter() {
            if self.unclaimed.is_empty() {
                break;
            }
            // In page order, and by time within a page: the first of each page is its earliest
            // (of those made while it was writable).
            let mut taken = self.take_made_by(range.clone(), before);
            taken.retain(|(page, t)| t.time >= self.writable_since.get(page).copied().unwrap_or(0));
            taken.dedup_by_key(|(page, _)| *page);
            for (page, whose) in taken {
                if self.ended.contains(&whose.pid) {
                    continue;
                }
                match runs.last_mut() {
                    Some((run, last)) if run.end == page && last.thread() == whose.thread() => {
                        run.end = page + self.page_size;
                        last.time = last.time.max(whose.time);
                    }
                    _ => runs.push((page..page + self.page_size, whose)),
                }
            }
        }
        self.unread_pages += runs
            .iter()
            .map(|(run, _)| (run.end - run.start) / self.page_size)
            .sum::<u64>();
        runs.sort_by_key(|(_, whose)| whose.time);
        runs.into_iter()
            .map(|(run, whose)| {
                let event = Event::Resident {
                    pid: whose.pid,
                    tid: Some(whose.tid),
                    space,
                    start: run.start,
                    end: run.end,
                    write: true,
                    faults: (run.end - run.start) / self.page_size,
                    writer: None,
                    by: Some(FoundBy::RecordOnly),
                    huge: false,
                    site: None,
                    sampled: 0,
                    from: None,
                    withheld: !whose.selected,
                };
                (event, whose.time)
            })
            .collect()
    }

    /// Takes out the records at the pages of `range` made by `before` (a read claims the
    /// earliest of them; a release forgets them all).
    fn take_made_by(&mut self, range: Range<u64>, before: u64) -> Vec<(u64, Toucher)> {
        self.unclaimed
            .extract_if((range.start, 0)..(range.end, 0), |_, record| {
                record.time <= before
            })
            .map(|((page, _), record)| (page, record))
            .collect()
    }

    /// A read's `resident` line (`by` `scan`, read at `read_at`), split into runs by whose
    /// record each page has (a huge page's frame by the frame's): those with one carry its pid
    /// and tid (`by` `record`), its faults (a page each, a huge page one) and the time of the
    /// run's latest record, withheld if `--threads` does not select its thread's name then; the
    /// others are as found (no time of their own). Runs with a time come first, in time order.
    pub(super) fn attribute(
        &mut self,
        event: Event,
        read_at: Instant,
    ) -> Vec<(Event, Option<u64>)> {
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
            return vec![(event, None)];
        };
        let before = monotonic_of(read_at);
        let step = if huge { HUGE_PAGE } else { self.page_size };
        // Each run with its faults: the pieces (pages, or huge pages' frames) it took.
        let mut runs: Vec<(Range<u64>, Option<Toucher>, u64)> = Vec::new();
        // The line's records, taken at once, by page and time; a huge page's are taken by frame
        // below, as its record may be at any page of its frame, even outside the line.
        let mut taken = if huge {
            Vec::new()
        } else {
            self.take_made_by(start..end, before)
        }
        .into_iter()
        .peekable();
        let mut piece = start;
        while piece < end {
            let next = ((piece / step + 1) * step).min(end);
            let earliest = if huge {
                let frame = piece / step * step..piece / step * step + step;
                self.take_made_by(frame, before)
                    .into_iter()
                    .map(|(_, t)| t)
                    .min_by_key(|t| t.time)
            } else {
                std::iter::from_fn(|| taken.next_if(|(page, _)| *page < next))
                    .map(|(_, t)| t)
                    .min_by_key(|t| t.time)
            };
            let whose = earliest.filter(|t| !self.ended.contains(&t.pid));
            match runs.last_mut() {
                Some((run, last, pieces))
                    if run.end == piece
                        && last.as_ref().map(Toucher::thread)
                            == whose.as_ref().map(Toucher::thread) =>
                {
                    run.end = next;
                    *pieces += 1;
                    // The run's line comes once all of its pages are resident: at its latest
                    // record, after every release of any of them (which forgot older ones).
                    if let (Some(last), Some(whose)) = (last.as_mut(), whose) {
                        last.time = last.time.max(whose.time);
                    }
                }
                _ => runs.push((piece..next, whose, 1)),
            }
            piece = next;
        }
        runs.sort_by_key(|(_, whose, _)| whose.map_or(u64::MAX, |t| t.time));
        runs.into_iter()
            .map(|(run, whose, pieces)| {
                let event = Event::Resident {
                    pid: whose.map_or(pid, |t| t.pid),
                    tid: whose.map(|t| t.tid),
                    space,
                    start: run.start,
                    end: run.end,
                    write,
                    faults: whose.map_or(faults, |_| pieces),
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
                    withheld: withheld || whose.is_some_and(|t| !t.selected),
                };
                (event, whose.map(|t| t.time))
            })
            .collect()
    }
}

/// The warning for a thread, or a whole space, whose faults cannot be recorded.
pub(super) fn unrecorded(
    pid: i32,
    space: SpaceId,
    whose: &str,
    why: &dyn std::fmt::Display,
) -> Event {
    Event::Warning {
        pid: Some(pid),
        space: Some(space),
        what: WarningKind::RecordsLost,
        message: format!(
            "{whose} fault records cannot be read ({why}): its pages are found by reads, \
             without their thread"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;
    /// A millisecond in nanoseconds: far wider than the error of converting an `Instant`.
    const MS: u64 = 1_000_000;

    fn resident(start: u64, end: u64, huge: bool) -> Event {
        Event::Resident {
            pid: 1,
            tid: None,
            space: 0,
            start,
            end,
            write: true,
            faults: 0,
            writer: None,
            by: Some(FoundBy::Scan),
            huge,
            site: None,
            sampled: 0,
            from: None,
            withheld: false,
        }
    }

    fn touched(records: &mut Records, page: u64, tid: i32, time: u64) {
        records.unclaimed.insert(
            (page, time),
            Toucher {
                pid: 1,
                tid,
                time,
                selected: true,
            },
        );
    }

    /// (start, end, tid) of each line.
    fn lines(lines: &[(Event, Option<u64>)]) -> Vec<(u64, u64, Option<i32>)> {
        lines
            .iter()
            .map(|(e, _)| match e {
                Event::Resident {
                    start, end, tid, ..
                } => (*start, *end, *tid),
                _ => unreachable!(),
            })
            .collect()
    }

    #[tokio::test]
    async fn a_read_takes_the_earliest_record_made_before_it_and_no_later_one() {
        let mut records = Records::new(P, Arc::new(Notify::new()), None).unwrap();
        let now = Instant::now();
        let before = monotonic_of(now);
        touched(&mut records, 0, 10, before - 2 * MS);
        touched(&mut records, P, 11, before - MS);
        // Made after the read: another fault's, kept.
        touched(&mut records, 2 * P, 12, before + 1000 * MS);
        let split = records.attribute(resident(0, 3 * P, false), now);
        assert_eq!(
            lines(&split),
            vec![(0, P, Some(10)), (P, 2 * P, Some(11)), (2 * P, 3 * P, None)]
        );
        assert_eq!(records.unclaimed.len(), 1);
    }

    #[tokio::test]
    async fn a_huge_page_is_claimed_whole_by_its_frames_record() {
        let mut records = Records::new(P, Arc::new(Notify::new()), None).unwrap();
        let now = Instant::now();
        let before = monotonic_of(now);
        // The fault was recorded at a page in the middle of the frame.
        touched(&mut records, HUGE_PAGE + 100 * P, 7, before - MS);
        let split = records.attribute(resident(HUGE_PAGE, 2 * HUGE_PAGE, true), now);
        assert_eq!(lines(&split), vec![(HUGE_PAGE, 2 * HUGE_PAGE, Some(7))]);
    }

    #[tokio::test]
    async fn threads_not_selected_by_their_name_at_the_fault_are_withheld() {
        let names = ThreadNames::new(vec![glob::Pattern::new("keep*").unwrap()]);
        let mut records = Records::new(P, Arc::new(Notify::new()), Some(Arc::new(names))).unwrap();
        let now = Instant::now();
        let before = monotonic_of(now);
        let fault = |page: u64, time: u64| {
            Drained::Fault(crate::kernel::fault_records::FaultRecord {
                pid: 1,
                tid: 5,
                time,
                addr: page + 12,
            })
        };
        records.selected.insert(5, false);
        records.drained.extend([
            fault(0, before - 3 * MS),
            Drained::Named {
                tid: 5,
                name: "keeper".into(),
            },
            fault(P, before - 2 * MS),
        ]);
        records.take_drained();
        let split = records.attribute(resident(0, 2 * P, false), now);
        let withheld: Vec<(u64, bool, u64)> = split
            .iter()
            .map(|(e, _)| match e {
                Event::Resident {
                    start,
                    withheld,
                    faults,
                    ..
                } => (*start, *withheld, *faults),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(withheld, vec![(0, true, 1), (P, false, 1)]);
    }

    #[tokio::test]
    async fn a_release_forgets_the_records_made_before_it() {
        let mut records = Records::new(P, Arc::new(Notify::new()), None).unwrap();
        let at = Instant::now();
        let release = monotonic_of(at);
        touched(&mut records, 0, 1, release - MS);
        touched(&mut records, P, 2, release + MS);
        touched(&mut records, 5 * P, 3, release - MS);
        records.released(&(0..2 * P), at);
        let kept: Vec<u64> = records.unclaimed.keys().map(|&(page, _)| page).collect();
        assert_eq!(kept, vec![P, 5 * P]);
    }

    /// Records lost at every drain come as one warning a second with their sum, and what is
    /// lost after the last is said at the end.
    #[tokio::test]
    async fn lost_records_are_said_once_a_second_and_all_by_the_end() {
        let mut records = Records::new(P, Arc::new(Notify::new()), None).unwrap();
        let count_in = |warning: Option<Event>| match warning {
            Some(Event::Warning { message, .. }) => {
                message.split(' ').next().unwrap().parse::<u64>().unwrap()
            }
            other => panic!("{other:?}"),
        };
        records.drained.push(Drained::Lost { count: 3, tid: 7 });
        records.take_drained();
        assert_eq!(count_in(records.lost_warning(0, false)), 3);
        for tid in [7, 8] {
            records.drained.push(Drained::Lost { count: 2, tid });
            records.take_drained();
            assert!(
                records.lost_warning(0, false).is_none(),
                "said twice in a second"
            );
        }
        assert_eq!(count_in(records.lost_warning(0, true)), 4);
        assert!(
            records.lost_warning(0, true).is_none(),
            "nothing lost since"
        );
        records.lost_said = Some(Instant::now() - LOST_SAID_EVERY);
        records.drained.push(Drained::Lost { count: 1, tid: 8 });
        records.take_drained();
        assert_eq!(count_in(records.lost_warning(0, false)), 1);
    }

    /// A release's unread pages take each page's earliest record made before the release
    /// began and, where an `mprotect` made the page writable, after that: runs of one thread's
    /// adjacent pages, in time order; the rest is left for the release to forget.
    #[tokio::test]
    async fn unread_pages_are_written_from_their_earliest_record_before_the_release() {
        let mut records = Records::new(P, Arc::new(Notify::new()), None).unwrap();
        let now = Instant::now();
        let began = monotonic_of(now);
        touched(&mut records, 0, 10, began - 3 * MS);
        touched(&mut records, 0, 11, began - 2 * MS);
        touched(&mut records, P, 10, began - MS);
        touched(&mut records, 2 * P, 12, began - 4 * MS);
        // After the release began: of a fault that may have failed on the hole.
        touched(&mut records, 3 * P, 12, began + MS);
        // Made writable after this record: the write it was of may have been refused.
        touched(&mut records, 4 * P, 13, began - 5 * MS);
        records.made_writable(&(4 * P..5 * P), now - Duration::from_millis(4));
        let pages: RangeSet<u64> = std::iter::once(0..5 * P).collect();
        let lines: Vec<(u64, u64, Option<i32>, u64)> = records
            .unread(0, &pages, now)
            .into_iter()
            .map(|(e, time)| match e {
                Event::Resident {
                    start,
                    end,
                    tid,
                    by: Some(FoundBy::RecordOnly),
                    write: true,
                    ..
                } => (start, end, tid, time),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            lines,
            vec![
                (2 * P, 3 * P, Some(12), began - 4 * MS),
                (0, 2 * P, Some(10), began - MS)
            ]
        );
        assert_eq!(records.unread_pages, 3);
        assert_eq!(
            records.unclaimed.len(),
            1,
            "only the record after the release began"
        );
    }

    /// A refused access (SIGSEGV, SIGBUS) forgets that thread's records at that page only.
    #[tokio::test]
    async fn a_refused_access_forgets_its_threads_records_at_its_page() {
        let mut records = Records::new(P, Arc::new(Notify::new()), None).unwrap();
        touched(&mut records, P, 10, MS);
        touched(&mut records, P, 10, 2 * MS);
        touched(&mut records, P, 11, 3 * MS);
        touched(&mut records, 2 * P, 10, 4 * MS);
        records.refused(10, P + 123);
        let kept: Vec<(u64, i32)> = records
            .unclaimed
            .iter()
            .map(|(k, t)| (k.0, t.tid))
            .collect();
        assert_eq!(kept, vec![(P, 11), (2 * P, 10)]);
    }
}
