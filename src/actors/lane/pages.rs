//! Which pages of a range are present (docs/ordering.md, R3 and R4): those the tracer read at the
//! syscall's exit, with those the lane resolved since. Pure bookkeeping: no I/O, nothing async.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::Instant;

/// The populated pages of a range, read by the tracer while the thread that changed the range
/// was stopped at its syscall's exit.
#[derive(Debug)]
pub struct PagesAtExit {
    /// When the read began: a resolution by the lane after this may not be in `present`.
    pub read_at: Instant,
    pub present: Vec<Range<u64>>,
    /// The thread stopped from before its syscall changed the range until after the read
    /// (None for a read while threads ran): each of its own faults was resolved either before
    /// its syscall or after the read, which the resolution's start tells.
    pub stopped: Option<i32>,
}

/// One page the lane made present: when its resolution began and ended (the thread it woke may
/// run before the lane takes its second look at the clock), and whose fault it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Resolved {
    pub began: Instant,
    pub done: Instant,
    pub tid: i32,
    pub page: u64,
}

/// How many recent resolutions the lane remembers, with their times. Only those made since the
/// oldest page read still in the inbox matter, and the lane drains its inbox after every read of
/// the descriptor (at most 64 faults): this is far more than enough.
const RECENT_RESOLUTIONS: usize = 1 << 16;

/// The pages the lane resolved lately, with when, oldest first.
#[derive(Debug)]
pub(super) struct RecentResolutions {
    page_size: u64,
    recent: VecDeque<Resolved>,
}

impl RecentResolutions {
    pub(super) fn new(page_size: u64) -> Self {
        Self {
            page_size,
            recent: VecDeque::new(),
        }
    }

    /// The lane made a page present.
    pub(super) fn resolved(&mut self, resolution: Resolved) {
        if self.recent.len() == RECENT_RESOLUTIONS {
            self.recent.pop_front();
        }
        self.recent.push_back(resolution);
    }

    /// The pages of `range` present at the exit, with those resolved after that read began.
    /// Reads reach the lane in the order they were made, so what was resolved before this one
    /// is forgotten.
    pub(super) fn present_since(
        &mut self,
        range: &Range<u64>,
        at_exit: PagesAtExit,
    ) -> Vec<Range<u64>> {
        let read_at = at_exit.read_at;
        while self.recent.front().is_some_and(|r| r.done < read_at) {
            self.recent.pop_front();
        }
        let mut present: rangemap::RangeSet<u64> = at_exit.present.into_iter().collect();
        for r in &self.recent {
            // Begun before the read and done after it: the stopped thread's own fault was
            // resolved before its syscall (it ran on into it), another's may be either.
            let before_the_read = r.began < read_at && at_exit.stopped == Some(r.tid);
            if range.contains(&r.page) && !before_the_read {
                present.insert(r.page..r.page + self.page_size);
            }
        }
        present.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const PAGE: u64 = 4096;

    /// A resolution of thread 7's fault of `page`, begun and done at `at`.
    fn at(at: Instant, page: u64) -> Resolved {
        Resolved {
            began: at,
            done: at,
            tid: 7,
            page,
        }
    }

    fn read(read_at: Instant, present: Vec<Range<u64>>, stopped: Option<i32>) -> PagesAtExit {
        PagesAtExit {
            read_at,
            present,
            stopped,
        }
    }

    #[test]
    fn resolutions_after_the_read_in_the_range_are_added() {
        let t0 = Instant::now();
        let mut recent = RecentResolutions::new(PAGE);
        let read_at = t0 + Duration::from_millis(1);
        recent.resolved(at(t0, 0x10000)); // before the read: in it already, or gone since
        recent.resolved(at(read_at, 0x13000));
        recent.resolved(at(read_at + Duration::from_millis(1), 0x14000));
        recent.resolved(at(read_at + Duration::from_millis(1), 0x30000)); // outside the range
        let at_exit = read(read_at, vec![0x11000..0x12000, 0x1a000..0x1b000], None);
        assert_eq!(
            recent.present_since(&(0x10000..0x20000), at_exit),
            [0x11000..0x12000, 0x13000..0x15000, 0x1a000..0x1b000]
        );
    }

    #[test]
    fn resolutions_before_the_read_are_forgotten() {
        let t0 = Instant::now();
        let mut recent = RecentResolutions::new(PAGE);
        recent.resolved(at(t0, 0x10000));
        let later = t0 + Duration::from_millis(5);
        assert_eq!(
            recent.present_since(&(0x10000..0x20000), read(later, Vec::new(), None)),
            []
        );
        // Forgotten for good: an older read that comes later sees nothing either.
        assert_eq!(
            recent.present_since(&(0x10000..0x20000), read(t0, Vec::new(), None)),
            []
        );
    }

    #[test]
    fn a_resolution_across_the_read_counts_unless_it_woke_the_stopped_thread() {
        // The lane woke thread 7, which ran into its madvise, was stopped at its exit and read
        // before the lane looked at the clock again: the drop came after that resolution.
        let t0 = Instant::now();
        let read_at = t0 + Duration::from_millis(1);
        let across = |tid| Resolved {
            began: t0,
            done: read_at + Duration::from_millis(1),
            tid,
            page: 0x13000,
        };
        let mut recent = RecentResolutions::new(PAGE);
        recent.resolved(across(7));
        let stopped = recent.present_since(&(0x10000..0x20000), read(read_at, Vec::new(), Some(7)));
        assert_eq!(stopped, []);
        // Another thread's may have made the page after the read: it is kept.
        let mut recent = RecentResolutions::new(PAGE);
        recent.resolved(across(8));
        let other = recent.present_since(&(0x10000..0x20000), read(read_at, Vec::new(), Some(7)));
        assert_eq!(other, vec![0x13000..0x14000]);
    }

    #[test]
    fn with_nothing_resolved_the_read_is_the_answer() {
        let mut recent = RecentResolutions::new(PAGE);
        let present = vec![0x10000..0x12000, 0x12000..0x13000, 0x20000..0x21000];
        // Adjacent runs join; what lies outside the range is kept as read.
        assert_eq!(
            recent.present_since(&(0x10000..0x18000), read(Instant::now(), present, None)),
            [0x10000..0x13000, 0x20000..0x21000]
        );
    }

    #[test]
    fn the_memory_is_bounded() {
        let t0 = Instant::now();
        let mut recent = RecentResolutions::new(PAGE);
        for i in 0..=RECENT_RESOLUTIONS as u64 {
            recent.resolved(at(t0, i * PAGE));
        }
        assert_eq!(recent.recent.len(), RECENT_RESOLUTIONS);
        assert_eq!(recent.recent.front(), Some(&at(t0, PAGE)));
    }
}
