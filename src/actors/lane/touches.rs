//! Coalesced first touches (docs/ordering.md, R9): per thread, one run of adjacent pages touched
//! one way with one access, written as a single `resident` line when it ends. Pure bookkeeping:
//! no I/O, nothing async; the lines to send are appended to a buffer the lane then sends.
//!
//! Holding a run back is safe because every other line of the lane flushes the runs first: the
//! only lines a run can move past are other threads' `resident` lines, which are about other
//! pages (a page is resolved once until a discard or an unmap, and those are lines of this
//! lane), so a replay comes to the same state.

use std::time::{Duration, Instant};

use crate::actors::sequencer::Stamped;
use crate::event::{Event, SiteId, SpaceId};

/// First touches by one thread of adjacent pages, one way, with the same access, not yet sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TouchRun {
    pub(super) at: Instant,
    pub(super) pid: i32,
    pub(super) tid: i32,
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) write: bool,
    pub(super) faults: u64,
    /// Made by another process (attribution.rs): its pid, when known.
    pub(super) writer: Option<i32>,
    /// Made by a task that is no thread of the space: never in a run of one that is.
    pub(super) remote: bool,
    /// `--touch-stacks`: the stack of its pages whose faults were sampled.
    pub(super) site: Option<SiteId>,
    /// How many of its faults were sampled (all at `site`).
    pub(super) sampled: u64,
    /// `--threads` selects its thread, by its name when it touched (true without `--threads`):
    /// a run is of one name.
    pub(super) thread_selected: bool,
}

impl TouchRun {
    fn into_stamped(self, space: SpaceId) -> Stamped {
        Stamped {
            at: self.at,
            event: Event::Resident {
                pid: self.pid,
                tid: Some(self.tid),
                space,
                start: self.start,
                end: self.end,
                write: self.write,
                faults: self.faults,
                by: None,
                huge: false,
                writer: self.writer,
                site: self.site,
                sampled: self.sampled,
                from: None,
                withheld: !self.thread_selected,
            },
        }
    }

    /// Whether `touch` is by the same toucher as this run: a writer's touches (whose `tid` is
    /// the owner's) never join a thread's run.
    fn same_toucher(&self, touch: &TouchRun) -> bool {
        self.tid == touch.tid && self.remote == touch.remote && self.writer == touch.writer
    }

    /// Takes in `touch` if it extends this run, up or down.
    fn extend(&mut self, touch: &TouchRun) -> bool {
        if self.write != touch.write
            || self.pid != touch.pid
            || !self.same_toucher(touch)
            || self.thread_selected != touch.thread_selected
        {
            return false;
        }
        // A run names one stack: a page sampled at another ends it.
        if self.site.is_some() && touch.site.is_some() && self.site != touch.site {
            return false;
        }
        if self.end == touch.start {
            self.end = touch.end;
        } else if self.start == touch.end {
            self.start = touch.start;
        } else {
            return false;
        }
        self.faults += touch.faults;
        // One thread's run of adjacent first touches is one loop of its code: a sampled page
        // names it.
        self.site = self.site.or(touch.site);
        self.sampled += touch.sampled;
        true
    }
}

/// The lane's lines on their way out: the runs of first touches held back, and the rule that
/// any other line goes out after them.
#[derive(Debug)]
pub(super) struct Touches {
    space: SpaceId,
    /// `--coalesce-ms`; `None` writes one line per fault.
    window: Option<Duration>,
    /// The runs not yet sent, oldest first (at most one per thread, and one per writer).
    runs: Vec<TouchRun>,
}

impl Touches {
    pub(super) fn new(space: SpaceId, window: Option<Duration>) -> Self {
        Self {
            space,
            window,
            runs: Vec::new(),
        }
    }

    /// A first touch resolved (one page, one fault): it extends its thread's run, or ends it
    /// (the run goes out) and starts a new one.
    pub(super) fn touched(&mut self, touch: TouchRun, out: &mut Vec<Stamped>) {
        if self.window.is_none() {
            return out.push(touch.into_stamped(self.space));
        }
        if let Some(i) = self.runs.iter().position(|r| r.same_toucher(&touch)) {
            if self.runs[i].extend(&touch) {
                return;
            }
            let ended = self.runs.remove(i);
            out.push(ended.into_stamped(self.space));
        }
        self.runs.push(touch);
    }

    /// Any line of the lane other than a first touch: every run goes out before it (R9).
    pub(super) fn line(&mut self, line: Stamped, out: &mut Vec<Stamped>) {
        self.flush(out);
        out.push(line);
    }

    /// Every run goes out, oldest first.
    pub(super) fn flush(&mut self, out: &mut Vec<Stamped>) {
        let space = self.space;
        out.extend(self.runs.drain(..).map(|run| run.into_stamped(space)));
    }

    /// When the oldest run must go out.
    pub(super) fn due(&self) -> Option<Instant> {
        Some(self.runs.first()?.at + self.window?)
    }

    /// The runs whose window is over at `now` go out, oldest first.
    pub(super) fn flush_due(&mut self, now: Instant, out: &mut Vec<Stamped>) {
        let Some(window) = self.window else { return };
        // Oldest first (a run keeps the time of its first touch): the due ones are a prefix.
        let due = self.runs.partition_point(|r| r.at + window <= now);
        let space = self.space;
        out.extend(self.runs.drain(..due).map(|run| run.into_stamped(space)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: u64 = 4096;
    const WINDOW: Duration = Duration::from_millis(10);

    fn touch(at: Instant, tid: i32, page: u64, write: bool) -> TouchRun {
        TouchRun {
            at,
            pid: 100,
            tid,
            start: page * PAGE,
            end: (page + 1) * PAGE,
            write,
            faults: 1,
            writer: None,
            remote: false,
            site: None,
            sampled: 0,
            thread_selected: true,
        }
    }

    /// `--threads`: a thread's touches under a name selected and under one not are two runs.
    #[test]
    fn a_run_is_of_one_thread_name() {
        let t = Instant::now();
        let mut touches = Touches::new(7, Some(WINDOW));
        let mut out = Vec::new();
        touches.touched(touch(t, 100, 10, true), &mut out);
        let renamed = TouchRun {
            thread_selected: false,
            ..touch(t, 100, 11, true)
        };
        touches.touched(renamed, &mut out);
        touches.flush(&mut out);
        let withheld: Vec<bool> = out
            .iter()
            .map(|s| matches!(s.event, Event::Resident { withheld: true, .. }))
            .collect();
        assert_eq!(withheld, [false, true]);
    }

    fn sampled(mut run: TouchRun, site: SiteId) -> TouchRun {
        run.site = Some(site);
        run.sampled = 1;
        run
    }

    /// (tid, first page, end page, write, faults) of each `resident` line.
    fn runs(out: &[Stamped]) -> Vec<(i32, u64, u64, bool, u64)> {
        out.iter()
            .map(|s| match s.event {
                Event::Resident {
                    tid,
                    start,
                    end,
                    write,
                    faults,
                    ..
                } => (tid.unwrap(), start / PAGE, end / PAGE, write, faults),
                ref other => panic!("not a resident line: {other:?}"),
            })
            .collect()
    }

    fn other_line(at: Instant) -> Stamped {
        Stamped {
            at,
            event: Event::Unmap {
                pid: 100,
                tid: 1,
                space: 7,
                start: 0,
                end: PAGE,
                cause: None,
                site: None,
            },
        }
    }

    #[test]
    fn a_run_names_one_stack_and_counts_its_samples() {
        let t = Instant::now();
        let mut touches = Touches::new(7, Some(WINDOW));
        let mut out = Vec::new();
        touches.touched(touch(t, 1, 10, true), &mut out);
        touches.touched(sampled(touch(t, 1, 11, true), 3), &mut out);
        touches.touched(touch(t, 1, 12, true), &mut out);
        touches.touched(sampled(touch(t, 1, 13, true), 3), &mut out);
        // Another stack's sample ends the run; an unsampled page then joins the new one.
        touches.touched(sampled(touch(t, 1, 14, true), 4), &mut out);
        touches.touched(touch(t, 1, 15, true), &mut out);
        touches.flush(&mut out);
        let sites: Vec<_> = out
            .iter()
            .map(|s| match s.event {
                Event::Resident {
                    start,
                    end,
                    site,
                    sampled,
                    ..
                } => (start / PAGE, end / PAGE, site, sampled),
                ref other => panic!("not a resident line: {other:?}"),
            })
            .collect();
        assert_eq!(sites, [(10, 14, Some(3), 2), (14, 16, Some(4), 1)]);
    }

    #[test]
    fn adjacent_touches_of_one_thread_merge_up_and_down() {
        let t = Instant::now();
        let mut touches = Touches::new(7, Some(WINDOW));
        let mut out = Vec::new();
        for page in [10, 11, 12] {
            touches.touched(touch(t, 1, page, true), &mut out);
        }
        touches.touched(touch(t, 2, 50, false), &mut out);
        for page in [49, 48] {
            touches.touched(touch(t, 2, page, false), &mut out);
        }
        assert!(out.is_empty());
        touches.flush(&mut out);
        assert_eq!(runs(&out), [(1, 10, 13, true, 3), (2, 48, 51, false, 3)]);
        assert!(out.iter().all(|s| s.event.space() == Some(7)));
    }

    #[test]
    fn a_touch_that_does_not_extend_the_run_ends_it() {
        let t = Instant::now();
        let mut touches = Touches::new(7, Some(WINDOW));
        let mut out = Vec::new();
        touches.touched(touch(t, 1, 10, true), &mut out);
        touches.touched(touch(t, 1, 11, true), &mut out);
        // Not adjacent.
        touches.touched(touch(t, 1, 20, true), &mut out);
        assert_eq!(runs(&out), [(1, 10, 12, true, 2)]);
        // Adjacent, but the other access.
        touches.touched(touch(t, 1, 21, false), &mut out);
        assert_eq!(runs(&out)[1..], [(1, 20, 21, true, 1)]);
        // Another thread's touch, adjacent, neither ends nor joins this run.
        touches.touched(touch(t, 2, 22, false), &mut out);
        assert_eq!(out.len(), 2);
        touches.flush(&mut out);
        assert_eq!(
            runs(&out)[2..],
            [(1, 21, 22, false, 1), (2, 22, 23, false, 1)]
        );
    }

    #[test]
    fn runs_are_due_after_the_window_oldest_first() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_millis(4);
        let mut touches = Touches::new(7, Some(WINDOW));
        let mut out = Vec::new();
        assert_eq!(touches.due(), None);
        touches.touched(touch(t0, 1, 10, true), &mut out);
        touches.touched(touch(t1, 2, 20, true), &mut out);
        // Growing does not make a run younger.
        touches.touched(touch(t1, 1, 11, true), &mut out);
        assert_eq!(touches.due(), Some(t0 + WINDOW));
        touches.flush_due(t0 + WINDOW - Duration::from_nanos(1), &mut out);
        assert!(out.is_empty());
        touches.flush_due(t0 + WINDOW, &mut out);
        assert_eq!(runs(&out), [(1, 10, 12, true, 2)]);
        assert_eq!(touches.due(), Some(t1 + WINDOW));
        touches.flush_due(t1 + 2 * WINDOW, &mut out);
        assert_eq!(runs(&out)[1..], [(2, 20, 21, true, 1)]);
        assert_eq!(touches.due(), None);
    }

    #[test]
    fn any_other_line_goes_out_after_every_run() {
        let t = Instant::now();
        let mut touches = Touches::new(7, Some(WINDOW));
        let mut out = Vec::new();
        touches.touched(touch(t, 1, 10, true), &mut out);
        touches.touched(touch(t, 2, 30, false), &mut out);
        touches.line(other_line(t), &mut out);
        assert_eq!(
            runs(&out[..2]),
            [(1, 10, 11, true, 1), (2, 30, 31, false, 1)]
        );
        assert!(matches!(out[2].event, Event::Unmap { .. }));
        assert_eq!(out.len(), 3);
        assert_eq!(touches.due(), None);
        // A touch after the line starts a new run rather than joining the one sent.
        touches.touched(touch(t, 1, 11, true), &mut out);
        touches.flush(&mut out);
        assert_eq!(runs(&out[3..]), [(1, 11, 12, true, 1)]);
    }

    /// A writer's touches carry the owner's pid and tid (100): adjacent to a run of the owner's
    /// main thread, they neither join it nor end it.
    #[test]
    fn a_writers_touches_never_join_a_threads_run() {
        let t = Instant::now();
        let mut touches = Touches::new(7, Some(WINDOW));
        let mut out = Vec::new();
        touches.touched(touch(t, 100, 10, true), &mut out);
        let by_writer = |page| TouchRun {
            writer: Some(200),
            remote: true,
            ..touch(t, 100, page, true)
        };
        touches.touched(by_writer(11), &mut out);
        touches.touched(by_writer(12), &mut out);
        touches.touched(touch(t, 100, 11, true), &mut out);
        assert!(out.is_empty(), "{out:?}");
        touches.flush(&mut out);
        assert_eq!(runs(&out), [(100, 10, 12, true, 2), (100, 11, 13, true, 2)]);
        let writers: Vec<Option<i32>> = out
            .iter()
            .map(|s| match s.event {
                Event::Resident { writer, .. } => writer,
                _ => None,
            })
            .collect();
        assert_eq!(writers, [None, Some(200)]);
    }

    #[test]
    fn without_a_window_each_fault_is_a_line() {
        let t = Instant::now();
        let mut touches = Touches::new(7, None);
        let mut out = Vec::new();
        touches.touched(touch(t, 1, 10, true), &mut out);
        touches.touched(touch(t, 1, 11, true), &mut out);
        assert_eq!(runs(&out), [(1, 10, 11, true, 1), (1, 11, 12, true, 1)]);
        assert_eq!(touches.due(), None);
        touches.flush_due(t + WINDOW, &mut out);
        touches.line(other_line(t), &mut out);
        assert_eq!(out.len(), 3);
    }
}
