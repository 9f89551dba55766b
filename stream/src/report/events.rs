//! The rows of the report's event table: one per layout or lifecycle line, the rest said in a
//! short `detail` a person reads.

use super::meta::EventRow;
use crate::event::{Event, Line};
use crate::model::processes::{argv_line, how_it_ended};

/// The table's row for `line`, or none for lines the table leaves to other views (`resident`,
/// `verify`, `start`, `summary`).
pub fn row(line: &Line) -> Option<EventRow> {
    let (seq, t) = (line.seq, line.t_ns);
    let row = |ev, pid, tid, space, range: Option<(u64, u64)>, detail: String| {
        Some((
            seq,
            t,
            ev,
            pid,
            tid,
            space,
            range.map(|r| r.0),
            range.map(|r| r.1),
            detail,
        ))
    };
    match &line.event {
        Event::Map {
            pid,
            tid,
            space,
            start,
            end,
            prot,
            kind,
            path,
            tracked,
            cause,
            ..
        } => {
            let mut detail = format!("{} {prot}", json_name(kind));
            if let Some(path) = path {
                detail += &format!(" {path}");
            }
            if !tracked {
                detail += " untracked";
            }
            if let Some(cause) = cause {
                detail += &format!(" ({})", json_name(cause));
            }
            row(
                "map",
                Some(*pid),
                Some(*tid),
                Some(*space),
                Some((*start, *end)),
                detail,
            )
        }
        Event::Unmap {
            pid,
            tid,
            space,
            start,
            end,
            cause,
            ..
        } => row(
            "unmap",
            Some(*pid),
            Some(*tid),
            Some(*space),
            Some((*start, *end)),
            cause.map(|c| json_name(&c)).unwrap_or_default(),
        ),
        Event::Remap {
            pid,
            tid,
            space,
            old_start,
            old_end,
            new_start,
            new_end,
            dontunmap,
            ..
        } => row(
            "remap",
            Some(*pid),
            Some(*tid),
            Some(*space),
            Some((*new_start, *new_end)),
            format!(
                "from {old_start:#x}-{old_end:#x}{}",
                if *dontunmap { " (dontunmap)" } else { "" }
            ),
        ),
        Event::Brk {
            pid,
            tid,
            space,
            old,
            new,
            tracked,
            ..
        } => row(
            "brk",
            Some(*pid),
            Some(*tid),
            Some(*space),
            // The span between the old and the new break, in address order.
            Some((*old.min(new), *old.max(new))),
            format!(
                "{}{}",
                if new >= old { "grows" } else { "shrinks" },
                if *tracked { "" } else { " untracked" }
            ),
        ),
        Event::Protect {
            pid,
            tid,
            space,
            start,
            end,
            prot,
        } => row(
            "protect",
            Some(*pid),
            Some(*tid),
            Some(*space),
            Some((*start, *end)),
            prot.clone(),
        ),
        Event::Discard {
            pid,
            tid,
            space,
            start,
            end,
            advice,
            ..
        } => row(
            "discard",
            Some(*pid),
            Some(*tid),
            Some(*space),
            Some((*start, *end)),
            advice.clone(),
        ),
        Event::Exec {
            pid,
            tid,
            space,
            argv,
            ..
        } => row(
            "exec",
            Some(*pid),
            Some(*tid),
            Some(*space),
            None,
            argv_line(argv),
        ),
        Event::Fork {
            pid,
            tid,
            child,
            kind,
            space,
            child_space,
        } => row(
            "fork",
            Some(*pid),
            Some(*tid),
            Some(*space),
            None,
            format!("{} child {child} in space {child_space}", json_name(kind)),
        ),
        Event::Thread {
            pid,
            tid,
            child,
            space,
            name,
        } => row(
            "thread",
            Some(*pid),
            Some(*tid),
            Some(*space),
            None,
            format!("child {child} {}", name.as_deref().unwrap_or("")),
        ),
        Event::ThreadName {
            pid,
            tid,
            space,
            name,
        } => row(
            "thread_name",
            Some(*pid),
            Some(*tid),
            Some(*space),
            None,
            name.clone(),
        ),
        Event::ThreadExit {
            pid,
            tid,
            space,
            name,
        } => row(
            "thread_exit",
            Some(*pid),
            Some(*tid),
            Some(*space),
            None,
            name.clone().unwrap_or_default(),
        ),
        Event::Exit {
            pid,
            tid,
            space,
            status,
            signal,
            name,
            ..
        } => {
            let end = how_it_ended(*status, signal.as_deref()).unwrap_or_default();
            let name = name.as_deref().unwrap_or("");
            row(
                "exit",
                Some(*pid),
                Some(*tid),
                Some(*space),
                None,
                format!("{end} {name}"),
            )
        }
        Event::Warning {
            pid,
            space,
            what,
            message,
        } => row(
            "warning",
            *pid,
            None,
            *space,
            None,
            format!("{}: {message}", json_name(what)),
        ),
        Event::Unseen {
            pid,
            space,
            faults,
            found,
            at_most,
        } => row(
            "unseen",
            Some(*pid),
            None,
            Some(*space),
            None,
            format!("at most {at_most} pages ({faults} faults counted, {found} found)"),
        ),
        Event::Evicted {
            pid,
            space,
            start,
            end,
            how,
        } => row(
            "evicted",
            Some(*pid),
            None,
            Some(*space),
            Some((*start, *end)),
            json_name(how),
        ),
        Event::Unshared {
            pid,
            space,
            start,
            end,
        } => row(
            "unshared",
            Some(*pid),
            None,
            Some(*space),
            Some((*start, *end)),
            "copy-on-write: a frame of its own".to_string(),
        ),
        Event::Start { .. }
        | Event::Site { .. }
        | Event::Rss { .. }
        | Event::Resident { .. }
        | Event::Verify { .. }
        | Event::Summary { .. } => None,
    }
}

/// A field's name as the stream writes it (`anon`, `redescribe`, `clone_vm`).
fn json_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}
