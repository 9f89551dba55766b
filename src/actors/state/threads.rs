//! `--threads GLOB`: `resident` lines only for the threads whose name matches. The other threads'
//! first touches are still resolved, applied to the replayed state (so that checks against the
//! kernel stay exact) and counted; their lines are not written.

use std::collections::HashMap;
use std::sync::Arc;

use crate::event::Event;
use crate::selection::ThreadNames;

pub struct ThreadFilter {
    /// The patterns, and the names the lanes read as the threads faulted.
    noted: Arc<ThreadNames>,
    /// Names from `thread` lines, for a thread no lane noted (a write by another process).
    born_as: HashMap<i32, String>,
    /// `resident` lines not written, and their first touches.
    pub withheld_lines: u64,
    pub withheld_faults: u64,
}

impl ThreadFilter {
    pub fn new(noted: Arc<ThreadNames>) -> Self {
        Self {
            noted,
            born_as: HashMap::new(),
            withheld_lines: 0,
            withheld_faults: 0,
        }
    }

    /// Whether `event` is written: every line but a `resident` line of a thread whose name no
    /// pattern matches (a line found by a scan has no thread, and is written).
    pub fn writes(&mut self, event: &Event) -> bool {
        match event {
            Event::Thread {
                child,
                name: Some(name),
                ..
            } => {
                self.born_as.insert(*child, name.clone());
                true
            }
            // A thread, or a process's main thread, that ended: its number may be reused.
            Event::ThreadExit { tid, .. } | Event::Exit { tid, .. } => {
                self.born_as.remove(tid);
                self.noted.forget(*tid);
                true
            }
            Event::Resident {
                tid: Some(tid),
                faults,
                ..
            } => {
                let selected = self.noted.selected(*tid).unwrap_or_else(|| {
                    self.born_as
                        .get(tid)
                        .is_some_and(|name| self.noted.selects(name))
                });
                if !selected {
                    self.withheld_lines += 1;
                    self.withheld_faults += faults;
                }
                selected
            }
            _ => true,
        }
    }
}
