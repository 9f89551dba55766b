//! The threads the lane woke and that may not have run since, for the tracer: a thread woken
//! from a first touch waits for a CPU, and a layout change that reaches the page it touched
//! must not run before it has had one (docs/ordering.md, "Threads woken before a change").
//! Pure bookkeeping, shared between the lane (which notes each wake) and the tracer (which
//! asks at a change's entry, and says which threads it saw run).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A wake this old is forgotten, run or not: only a thread left without a CPU for this long
/// would still be waiting, and the thread's end is not told here (a program may make threads
/// by the million).
const FORGET_AFTER: Duration = Duration::from_secs(2);

/// One wake: the page the thread's fault was on, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wake {
    pub tid: i32,
    pub page: u64,
    pub at: Instant,
}

/// Each thread's latest wake by the lane, until the tracer saw it run: a thread that faulted
/// again since ran since, so only the latest matters.
#[derive(Debug, Default)]
pub(super) struct Woken {
    latest: Mutex<HashMap<i32, (u64, Instant)>>,
}

impl Woken {
    /// The lane woke `tid` from its fault on `page` (a fill accepted or refused: both wake it).
    pub(super) fn woke(&self, tid: i32, page: u64, at: Instant) {
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        latest.insert(tid, (page, at));
    }

    /// The wakes not seen run yet of the threads but `except` from a page in one of `reach`,
    /// as of `now` (older ones are forgotten).
    pub(super) fn in_reach(&self, reach: &[Range<u64>], except: i32, now: Instant) -> Vec<Wake> {
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        latest.retain(|_, &mut (_, at)| now.saturating_duration_since(at) < FORGET_AFTER);
        let mut wakes: Vec<Wake> = latest
            .iter()
            .filter(|&(&tid, &(page, _))| tid != except && reach.iter().any(|r| r.contains(&page)))
            .map(|(&tid, &(page, at))| Wake { tid, page, at })
            .collect();
        wakes.sort_unstable_by_key(|w| w.tid);
        wakes
    }

    /// The tracer saw these threads run after these wakes: they are forgotten (a later wake of
    /// the same thread is kept).
    pub(super) fn ran(&self, wakes: &[Wake]) {
        let mut latest = self.latest.lock().unwrap_or_else(|e| e.into_inner());
        for w in wakes {
            if latest.get(&w.tid).is_some_and(|&(_, at)| at == w.at) {
                latest.remove(&w.tid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reach of one range.
    fn reach(r: Range<u64>) -> [Range<u64>; 1] {
        [r]
    }

    #[test]
    fn wakes_in_the_reach_of_other_threads_count_until_seen_run() {
        let t0 = Instant::now();
        let woken = Woken::default();
        woken.woke(1, 0x10000, t0);
        woken.woke(2, 0x11000, t0);
        woken.woke(3, 0x40000, t0); // outside the reach
        woken.woke(4, 0x12000, t0); // the changing thread itself
        let range = reach(0x10000..0x20000);
        let wakes = woken.in_reach(&range, 4, t0);
        assert_eq!(wakes.iter().map(|w| w.tid).collect::<Vec<_>>(), vec![1, 2]);
        woken.ran(&wakes[..1]);
        let left = woken.in_reach(&range, 4, t0);
        assert_eq!(left.iter().map(|w| w.tid).collect::<Vec<_>>(), vec![2]);
        // Long after, nothing is waited for.
        assert!(woken.in_reach(&range, 4, t0 + FORGET_AFTER).is_empty());
    }

    #[test]
    fn a_later_wake_is_kept_and_replaces_the_earlier() {
        let t0 = Instant::now();
        let woken = Woken::default();
        woken.woke(1, 0x10000, t0);
        let seen = woken.in_reach(&reach(0x10000..0x20000), 0, t0);
        // It ran, and faulted again elsewhere, before the tracer said it saw it run.
        woken.woke(1, 0x90000, t0 + Duration::from_millis(1));
        woken.ran(&seen);
        assert!(woken.in_reach(&reach(0x10000..0x20000), 0, t0).is_empty());
        assert_eq!(woken.in_reach(&reach(0x90000..0x91000), 0, t0).len(), 1);
    }
}
