//! Threads in a child PID namespace (`unshare -p`, `clone(CLONE_NEWPID)`): the userfaultfd names
//! a faulting thread by its id in its own namespace, the stream by ours. The lane of the thread's
//! space is told the thread's id there before the thread runs (lane/attribution.rs).
//!
//! Only such threads cost anything: a thread is in its creator's namespace (a thread group never
//! spans two), so only a new process is looked at, by one `readlink` of its `/proc/PID/ns/pid`;
//! its threads' ids there are read from `/proc/TID/status` only when it is in another namespace.

use std::collections::HashMap;

use super::Tracer;
use crate::actors::lane::LaneMessage;
use crate::event::SpaceId;
use crate::kernel::procfs;

/// Threads in another PID namespace than ours: their id there.
#[derive(Default)]
pub(super) struct NamespaceIds {
    ns_tids: HashMap<i32, i32>,
}

impl NamespaceIds {
    /// A new task, stopped before it ran any code: notes its id in its own namespace when that
    /// is not ours. `creator` is the thread that made a new thread of its own process (`None`
    /// for a new process).
    pub(super) fn learn(&mut self, tid: i32, creator: Option<i32>) {
        let elsewhere = match creator {
            Some(creator) => self.ns_tids.contains_key(&creator),
            None => procfs::in_another_pid_namespace(tid),
        };
        if elsewhere {
            self.read(tid);
        }
    }

    /// Whether `tid` is in another PID namespace than ours.
    pub(super) fn elsewhere(&self, tid: i32) -> bool {
        self.ns_tids.contains_key(&tid)
    }

    /// Reads `tid`'s id in its own namespace, known to be another.
    pub(super) fn read(&mut self, tid: i32) {
        match procfs::innermost_tid(tid) {
            Some(ns_tid) => {
                self.ns_tids.insert(tid, ns_tid);
            }
            None => tracing::debug!(tid, "no NSpid for a task in another PID namespace"),
        }
    }

    pub(super) fn forget(&mut self, tid: i32) {
        self.ns_tids.remove(&tid);
    }
}

impl Tracer {
    /// Tells `space`'s lane the namespace id of `tid`, if it has one of its own.
    pub(super) fn tell_namespace(&self, tid: i32, space: SpaceId) {
        if let (Some(&ns_tid), Some(s)) =
            (self.namespaces.ns_tids.get(&tid), self.spaces.get(&space))
        {
            s.lane.send(LaneMessage::NsTid { tid, ns_tid });
        }
    }
}
