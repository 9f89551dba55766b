//! Under fault records (`--faults records`, `attach`): a page is written once a read of the page
//! tables finds it, up to a sample period after the fault, but its line carries the fault's
//! time (the record's). Lines ready to go out wait here for a window; a line named by a record
//! that comes meanwhile goes back among them to its time, past the lines observed after its
//! fault, so that its place in the stream is its fault's, as under `--faults uffd`.
//!
//! It never passes a line it must follow: the line announcing its process or thread (a `fork`
//! or `thread` naming it), its space's `exec`, any `exit`, `unseen`, `verify` or `start`; and a
//! check (`verify`) sends out every line before it at once, as the tracer waits for it with the
//! threads stopped. Lines of its own space it passes are no release of its page: a release
//! forgets the records made before it (lane/records.rs), so a record older than a release of
//! its page never names a line. No clock here: the caller says what time it is.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::gate::Held;
use crate::event::{Event, FoundBy};

/// Past this many lines waiting, the first goes out due or not: the window never holds more
/// than a burst's worth of memory (a line the window would have placed then comes at its read).
const MOST_WAITING: usize = 1 << 16;

/// A line waiting, and when it is due to go out.
#[derive(Debug)]
struct Waiting {
    held: Held,
    due: Instant,
}

/// The lines waiting to go out, in stream order, their times due in the same order.
#[derive(Debug)]
pub struct Placing {
    window: Duration,
    waiting: VecDeque<Waiting>,
}

impl Placing {
    /// Each line waits `window` from its coming here: a line named by a record placed up to
    /// that long after its fault goes at its time.
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            waiting: VecDeque::new(),
        }
    }

    /// Takes a line ready to go out at `now`. One named by a record goes back to its time.
    pub fn push(&mut self, held: Held, now: Instant) {
        let mut at = self.waiting.len();
        if is_placed_by_its_record(&held.stamped.event) {
            let time = held.stamped.at;
            while at > 0 {
                let before = &self.waiting[at - 1].held;
                if before.stamped.at <= time
                    || !may_pass(&held.stamped.event, &before.stamped.event)
                {
                    break;
                }
                at -= 1;
            }
        }
        // The deadlines stay in order: a line placed back goes out with the one after it.
        let due = self
            .waiting
            .get(at)
            .map_or(now + self.window, |after| after.due);
        self.waiting.insert(at, Waiting { held, due });
    }

    /// The first line, if it is due at `now` (or too many wait).
    pub fn pop_due(&mut self, now: Instant) -> Option<Held> {
        match self.waiting.front() {
            Some(first) if first.due <= now || self.waiting.len() > MOST_WAITING => {
                self.waiting.pop_front().map(|w| w.held)
            }
            _ => None,
        }
    }

    /// The first line, due or not (a check comes, or the stream ends).
    pub fn pop(&mut self) -> Option<Held> {
        self.waiting.pop_front().map(|w| w.held)
    }

    /// When the first line is due, if one waits.
    pub fn next_due(&self) -> Option<Instant> {
        self.waiting.front().map(|w| w.due)
    }
}

/// A line named by a record (a read's, or one no read found): it has the fault's time,
/// earlier than the read's or the release's.
fn is_placed_by_its_record(event: &Event) -> bool {
    matches!(
        event,
        Event::Resident {
            by: Some(FoundBy::Record | FoundBy::RecordOnly),
            ..
        }
    )
}

/// Whether a record's line (`moving`) may go before `over`, which was observed after its fault.
fn may_pass(moving: &Event, over: &Event) -> bool {
    let Event::Resident {
        space,
        pid,
        tid,
        start,
        end,
        ..
    } = *moving
    else {
        return false;
    };
    // Never past a change of its own pages' layout, whatever the times say (a release or a map
    // there forgot the older records already: this is the rule said twice).
    if over.space() == Some(space) && layout_over(over, &(start..end)) {
        return false;
    }
    match over {
        // What announces the process or thread that faulted, or the space.
        Event::Fork {
            child, child_space, ..
        } => *child != pid && *child_space != space,
        Event::Thread { child, .. } => Some(*child) != tid,
        Event::Exec { .. }
        | Event::Exit { .. }
        | Event::Unseen { .. }
        | Event::Verify { .. }
        | Event::Start { .. }
        | Event::Summary { .. } => false,
        // Lines about pages and layout, of any space: a release of the moving line's page
        // would have forgotten its record.
        Event::Site { .. }
        | Event::ThreadName { .. }
        | Event::ThreadExit { .. }
        | Event::Map { .. }
        | Event::Unmap { .. }
        | Event::Remap { .. }
        | Event::Brk { .. }
        | Event::Discard { .. }
        | Event::Protect { .. }
        | Event::Resident { .. }
        | Event::Evicted { .. }
        | Event::Unshared { .. }
        | Event::Rss { .. }
        | Event::Warning { .. } => true,
    }
}

/// Whether `over` is a layout line of a range overlapping `pages`.
fn layout_over(over: &Event, pages: &std::ops::Range<u64>) -> bool {
    let overlaps = |start: u64, end: u64| start < pages.end && pages.start < end;
    match *over {
        Event::Map { start, end, .. }
        | Event::Unmap { start, end, .. }
        | Event::Discard { start, end, .. }
        | Event::Protect { start, end, .. } => overlaps(start, end),
        Event::Remap {
            old_start,
            old_end,
            new_start,
            new_end,
            ..
        } => overlaps(old_start, old_end) || overlaps(new_start, new_end),
        Event::Brk { old, new, .. } => overlaps(old.min(new), old.max(new)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::sequencer::Stamped;

    const MS: Duration = Duration::from_millis(1);

    fn held(event: Event, at: Instant) -> Held {
        Held {
            stamped: Stamped { at, event },
            probe: None,
            seen: None,
        }
    }

    fn resident(start: u64, by: FoundBy, tid: i32) -> Event {
        Event::Resident {
            pid: 1,
            tid: Some(tid),
            space: 0,
            start,
            end: start + 4096,
            write: true,
            faults: 0,
            writer: None,
            by: Some(by),
            huge: false,
            site: None,
            sampled: 0,
            from: None,
            withheld: false,
        }
    }

    fn unmap(start: u64) -> Event {
        Event::Unmap {
            pid: 1,
            tid: 1,
            space: 0,
            start,
            end: start + 4096,
            cause: None,
            site: None,
        }
    }

    fn starts(placing: &mut Placing) -> Vec<u64> {
        std::iter::from_fn(|| placing.pop())
            .map(|h| match h.stamped.event {
                Event::Resident { start, .. } | Event::Unmap { start, .. } => start,
                Event::Thread { child, .. } => child as u64,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_records_line_goes_back_to_its_time_past_later_lines() {
        let t0 = Instant::now();
        let mut placing = Placing::new(50 * MS);
        placing.push(held(unmap(0x1000), t0 + 2 * MS), t0 + 2 * MS);
        placing.push(held(unmap(0x2000), t0 + 4 * MS), t0 + 4 * MS);
        // Read at 6 ms, faulted at 3 ms: between the two.
        placing.push(
            held(resident(0x9000, FoundBy::Record, 7), t0 + 3 * MS),
            t0 + 6 * MS,
        );
        // A scan's line has no time of its own: it stays where it came.
        placing.push(
            held(resident(0x8000, FoundBy::Scan, 7), t0 + 6 * MS),
            t0 + 6 * MS,
        );
        assert_eq!(starts(&mut placing), vec![0x1000, 0x9000, 0x2000, 0x8000]);
    }

    #[test]
    fn it_never_passes_the_line_announcing_its_thread() {
        let t0 = Instant::now();
        let mut placing = Placing::new(50 * MS);
        placing.push(held(unmap(0x1000), t0 + 2 * MS), t0 + 2 * MS);
        let thread = Event::Thread {
            pid: 1,
            tid: 1,
            child: 7,
            space: 0,
            name: None,
        };
        placing.push(held(thread, t0 + 4 * MS), t0 + 4 * MS);
        placing.push(
            held(resident(0x9000, FoundBy::Record, 7), t0 + 1 * MS),
            t0 + 6 * MS,
        );
        assert_eq!(starts(&mut placing), vec![0x1000, 7, 0x9000]);
    }

    #[test]
    fn it_never_passes_a_change_of_its_own_pages() {
        let t0 = Instant::now();
        // Its record older than the unmap of its page (which should have forgotten it).
        let mut placing = Placing::new(50 * MS);
        placing.push(held(unmap(0x9000), t0 + 2 * MS), t0 + 2 * MS);
        placing.push(
            held(resident(0x9000, FoundBy::Record, 7), t0 + MS),
            t0 + 6 * MS,
        );
        let kinds: Vec<&str> = std::iter::from_fn(|| placing.pop())
            .map(|h| match h.stamped.event {
                Event::Unmap { .. } => "unmap",
                _ => "resident",
            })
            .collect();
        assert_eq!(kinds, ["unmap", "resident"]);
    }

    #[test]
    fn lines_go_out_a_window_after_they_came_in_order() {
        let t0 = Instant::now();
        let mut placing = Placing::new(50 * MS);
        placing.push(held(unmap(0x1000), t0), t0);
        placing.push(held(unmap(0x2000), t0 + 10 * MS), t0 + 10 * MS);
        placing.push(
            held(resident(0x9000, FoundBy::Record, 7), t0 + 5 * MS),
            t0 + 20 * MS,
        );
        assert!(placing.pop_due(t0 + 49 * MS).is_none());
        assert!(placing.pop_due(t0 + 50 * MS).is_some());
        // The placed line goes with the one it was placed before.
        assert_eq!(placing.next_due(), Some(t0 + 60 * MS));
        assert!(placing.pop_due(t0 + 60 * MS).is_some());
        assert!(placing.pop_due(t0 + 60 * MS).is_some());
        assert!(placing.pop_due(t0 + 100 * MS).is_none());
        // A burst past the most that may wait goes out at once.
        for i in 0..=MOST_WAITING as u64 {
            placing.push(held(unmap(i * 4096), t0), t0);
        }
        assert!(placing.pop_due(t0).is_some());
        assert!(placing.pop_due(t0).is_none());
    }
}
