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
}

/// How many recent resolutions the lane remembers, with their times. Only those made since the
/// oldest page read still in the inbox matter, and the lane drains its inbox after every read of
/// the descriptor (at most 64 faults): this is far more than enough.
const RECENT_RESOLUTIONS: usize = 1 << 16;

/// The pages the lane resolved lately, with when, oldest first.
#[derive(Debug)]
pub(super) struct RecentResolutions {
    page_size: u64,
    recent: VecDeque<(Instant, u64)>,
}

impl RecentResolutions {
    pub(super) fn new(page_size: u64) -> Self {
        Self {
            page_size,
            recent: VecDeque::new(),
        }
    }

    /// The lane made `page` present at `at`.
    pub(super) fn resolved(&mut self, at: Instant, page: u64) {
        if self.recent.len() == RECENT_RESOLUTIONS {
            self.recent.pop_front();
        }
        self.recent.push_back((at, page));
    }

    /// The pages of `range` present at the exit, with those resolved after that read began.
    /// Reads reach the lane in the order they were made, so what was resolved before this one
    /// is forgotten.
    pub(super) fn present_since(
        &mut self,
        range: &Range<u64>,
        at_exit: PagesAtExit,
    ) -> Vec<Range<u64>> {
        while self
            .recent
            .front()
            .is_some_and(|&(t, _)| t < at_exit.read_at)
        {
            self.recent.pop_front();
        }
        let mut present: rangemap::RangeSet<u64> = at_exit.present.into_iter().collect();
        for &(_, page) in &self.recent {
            if range.contains(&page) {
                present.insert(page..page + self.page_size);
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

    #[test]
    fn resolutions_after_the_read_in_the_range_are_added() {
        let t0 = Instant::now();
        let mut recent = RecentResolutions::new(PAGE);
        let read_at = t0 + Duration::from_millis(1);
        recent.resolved(t0, 0x10000); // before the read: in it already, or gone since
        recent.resolved(read_at, 0x13000);
        recent.resolved(read_at + Duration::from_millis(1), 0x14000);
        recent.resolved(read_at + Duration::from_millis(1), 0x30000); // outside the range
        let at_exit = PagesAtExit {
            read_at,
            present: vec![0x11000..0x12000, 0x1a000..0x1b000],
        };
        assert_eq!(
            recent.present_since(&(0x10000..0x20000), at_exit),
            [0x11000..0x12000, 0x13000..0x15000, 0x1a000..0x1b000]
        );
    }

    #[test]
    fn resolutions_before_the_read_are_forgotten() {
        let t0 = Instant::now();
        let mut recent = RecentResolutions::new(PAGE);
        recent.resolved(t0, 0x10000);
        let later = t0 + Duration::from_millis(5);
        let at_exit = |read_at| PagesAtExit {
            read_at,
            present: Vec::new(),
        };
        assert_eq!(
            recent.present_since(&(0x10000..0x20000), at_exit(later)),
            []
        );
        // Forgotten for good: an older read that comes later sees nothing either.
        assert_eq!(recent.present_since(&(0x10000..0x20000), at_exit(t0)), []);
    }

    #[test]
    fn with_nothing_resolved_the_read_is_the_answer() {
        let mut recent = RecentResolutions::new(PAGE);
        let at_exit = PagesAtExit {
            read_at: Instant::now(),
            present: vec![0x10000..0x12000, 0x12000..0x13000, 0x20000..0x21000],
        };
        // Adjacent runs join; what lies outside the range is kept as read.
        assert_eq!(
            recent.present_since(&(0x10000..0x18000), at_exit),
            [0x10000..0x13000, 0x20000..0x21000]
        );
    }

    #[test]
    fn the_memory_is_bounded() {
        let t0 = Instant::now();
        let mut recent = RecentResolutions::new(PAGE);
        for i in 0..=RECENT_RESOLUTIONS as u64 {
            recent.resolved(t0, i * PAGE);
        }
        assert_eq!(recent.recent.len(), RECENT_RESOLUTIONS);
        assert_eq!(recent.recent.front(), Some(&(t0, PAGE)));
    }
}
