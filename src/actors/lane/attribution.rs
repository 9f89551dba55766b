//! Whose a first touch is (docs/schema.md, `resident`). The userfaultfd names the faulting task
//! by its id in its *own* PID namespace (`task_pid_vnr(current)` in fs/userfaultfd.c); the stream
//! uses ids in mevi-actors' namespace. And the faulting task need not be a thread of the space:
//! another process writing into it (`process_vm_writev`, a ptrace poke) faults there too.
//!
//! The rules:
//! - A thread of the space in a child PID namespace is known by its id there too, told by the
//!   tracer before the thread runs (`LaneMessage::NsTid`); a fault naming that id is the thread's.
//!   Only such threads have an entry, so the common case looks up nothing more. When ids are
//!   reused, the latest thread told wins (as for ids in our namespace). When two threads of the
//!   space have the same id as seen by the kernel (a space shared across namespaces, by `vfork`
//!   or `CLONE_VM` across an `unshare`), the fault is the child namespace's thread's: the message
//!   cannot say which it was.
//! - A task that is no thread of the space is a *writer*. The touch is the space's owner's (the
//!   process that joined the space last and is still in it, not the writer; when every process
//!   has left, the last one that left), with `tid == pid` as for lines no thread of the process
//!   caused, and the writer's pid in `writer` when it can be known: from `/proc` when the space's
//!   threads are in our namespace. In a child namespace the id cannot be read back, and the
//!   writer is not named.

use std::collections::HashMap;

use crate::event::{Event, SpaceId};

/// Who a first touch is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Toucher {
    pub(super) pid: i32,
    pub(super) tid: i32,
    /// Another process made the touch: its pid, when known.
    pub(super) writer: Option<i32>,
    /// Made by a task that is no thread of the space.
    pub(super) remote: bool,
}

/// What the lane knows of the tasks that fault in its space.
#[derive(Debug)]
pub(super) struct Attribution {
    space: SpaceId,
    /// Which process each thread of this space belongs to. A thread that has exited keeps its
    /// entry: a fault it raised before it died can still be read after its `thread_exit` line,
    /// and belongs to its process all the same.
    tids: HashMap<i32, i32>,
    /// Threads of this space in a child PID namespace: their id there, to ours.
    ns_tids: HashMap<i32, i32>,
    /// The processes in this space now, in the order they joined it.
    members: Vec<i32>,
    /// The last process that left the space.
    last_member: Option<i32>,
    /// Tasks seen writing into the space from outside: their process, if it could be read.
    writers: HashMap<i32, Option<i32>>,
}

impl Attribution {
    pub(super) fn new(space: SpaceId) -> Self {
        Self {
            space,
            tids: HashMap::new(),
            ns_tids: HashMap::new(),
            members: Vec::new(),
            last_member: None,
            writers: HashMap::new(),
        }
    }

    /// Our id of the task the userfaultfd calls `ptid`.
    pub(super) fn our_tid(&self, ptid: i32) -> i32 {
        if self.ns_tids.is_empty() {
            return ptid;
        }
        self.ns_tids.get(&ptid).copied().unwrap_or(ptid)
    }

    /// Whether this space's threads are in a child PID namespace: an id that is no thread of
    /// the space cannot be looked up in our `/proc`.
    pub(super) fn in_child_namespace(&self) -> bool {
        !self.ns_tids.is_empty()
    }

    /// Thread `tid` (ours) is `ns_tid` in its own namespace.
    pub(super) fn ns_tid(&mut self, tid: i32, ns_tid: i32) {
        self.ns_tids.insert(ns_tid, tid);
    }

    /// The toucher, if `tid` (ours) is known without asking `/proc`.
    pub(super) fn known(&self, tid: i32) -> Option<Toucher> {
        if let Some(&pid) = self.tids.get(&tid) {
            return Some(Toucher {
                pid,
                tid,
                writer: None,
                remote: false,
            });
        }
        self.writers.get(&tid).map(|&writer| self.remote(writer))
    }

    /// The toucher for a task the lane had not heard of, given its thread group from `/proc`
    /// (None: gone, or not to be read in our namespace). A thread of a process of the space not
    /// yet reported is the space's; anything else is a writer.
    pub(super) fn unknown(&mut self, tid: i32, tgid: Option<i32>) -> Toucher {
        if let Some(pid) = tgid.filter(|p| self.members.contains(p)) {
            self.tids.insert(tid, pid);
            return Toucher {
                pid,
                tid,
                writer: None,
                remote: false,
            };
        }
        self.writers.insert(tid, tgid);
        self.remote(tgid)
    }

    /// A touch by another process: the owner's, naming the writer.
    fn remote(&self, writer: Option<i32>) -> Toucher {
        let owner = self
            .members
            .iter()
            .rev()
            .copied()
            .find(|&p| Some(p) != writer)
            .or(self.last_member)
            .or(writer)
            .unwrap_or(0);
        Toucher {
            pid: owner,
            tid: owner,
            writer,
            remote: true,
        }
    }

    /// Learns the threads and processes of the space from a line of its lane.
    pub(super) fn learn(&mut self, event: &Event) {
        match *event {
            Event::Exec { pid, space, .. } if space == self.space => {
                self.thread(pid, pid);
            }
            Event::Thread { pid, child, .. } => self.thread(child, pid),
            // A `vfork` or `clone_vm` child joins this space; a `fork` child has its own.
            Event::Fork {
                child, child_space, ..
            } if child_space == self.space => self.thread(child, child),
            Event::Map { pid, tid, .. } => self.thread(tid, pid),
            Event::Exit { pid, .. } => self.left(pid),
            _ => {}
        }
    }

    /// A process left the space (it exited or exec'd).
    pub(super) fn left(&mut self, pid: i32) {
        let before = self.members.len();
        self.members.retain(|&p| p != pid);
        if self.members.len() != before {
            self.last_member = Some(pid);
        }
    }

    fn thread(&mut self, tid: i32, pid: i32) {
        self.tids.insert(tid, pid);
        self.writers.remove(&tid);
        if !self.members.contains(&pid) {
            self.members.push(pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::ForkKind;

    fn fork(pid: i32, child: i32, kind: ForkKind, space: SpaceId, child_space: SpaceId) -> Event {
        Event::Fork {
            pid,
            tid: pid,
            child,
            kind,
            space,
            child_space,
        }
    }

    fn exec(pid: i32, space: SpaceId) -> Event {
        Event::Exec {
            pid,
            tid: pid,
            space,
            path: String::new(),
            argv: Vec::new(),
            attached: false,
            followed: true,
        }
    }

    #[test]
    fn a_writer_from_outside_is_named_and_the_touch_is_the_owners() {
        let mut who = Attribution::new(3);
        who.learn(&exec(10, 3));
        who.learn(&fork(10, 11, ForkKind::Fork, 3, 4));
        assert_eq!(
            who.known(11),
            None,
            "a fork child lives in a space of its own"
        );
        let t = who.unknown(11, Some(11));
        assert_eq!((t.pid, t.tid, t.writer, t.remote), (10, 10, Some(11), true));
        // Known from then on without /proc.
        assert_eq!(who.known(11), Some(t));
        // A vfork child joins, and is the owner from then on, unless it is the writer.
        who.learn(&fork(10, 12, ForkKind::Vfork, 3, 3));
        assert_eq!(who.known(11).unwrap().pid, 12);
        assert_eq!(who.unknown(12, Some(12)).writer, None);
        // Every process gone: the last one that left.
        who.left(12);
        who.learn(&Event::Exit {
            pid: 10,
            tid: 10,
            space: 3,
            status: Some(0),
            signal: None,
            resident_bytes: 0,
            peak_resident_bytes: 0,
            oom: None,
            name: None,
        });
        assert_eq!(who.known(11).unwrap().pid, 10);
    }

    #[test]
    fn a_thread_not_yet_reported_of_a_process_of_the_space_is_local() {
        let mut who = Attribution::new(0);
        who.learn(&exec(10, 0));
        let t = who.unknown(15, Some(10));
        assert_eq!((t.pid, t.tid, t.writer, t.remote), (10, 15, None, false));
    }

    #[test]
    fn ids_in_a_child_namespace_are_turned_into_ours() {
        let mut who = Attribution::new(0);
        assert_eq!(who.our_tid(1), 1);
        who.learn(&fork(100, 200, ForkKind::Fork, 0, 0));
        who.ns_tid(200, 1);
        assert!(who.in_child_namespace());
        assert_eq!(who.our_tid(1), 200);
        assert_eq!(who.known(who.our_tid(1)).map(|t| t.pid), Some(200));
        // The id reused by a later thread: the latest told wins.
        who.learn(&Event::Thread {
            pid: 200,
            tid: 200,
            child: 205,
            space: 0,
            name: None,
        });
        who.ns_tid(205, 1);
        assert_eq!(who.our_tid(1), 205);
        // An id no thread of the space has: a writer that cannot be named.
        let t = who.unknown(who.our_tid(7), None);
        assert_eq!((t.pid, t.writer, t.remote), (200, None, true));
    }
}
