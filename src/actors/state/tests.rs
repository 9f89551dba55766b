//! The state actor over its inbox: per-process rows, warnings and checks counted.

use super::*;
use crate::event::{VerifyPoint, WarningKind};
use crate::kernel::procfs::Pagemap;
use std::sync::Arc;

fn line(seq: u64, event: Event) -> StateMessage {
    StateMessage {
        line: Line {
            seq,
            t_ns: seq,
            event,
        },
        probe: None,
    }
}

fn check(pid: i32) -> Event {
    Event::Verify {
        pid,
        space: 0,
        point: VerifyPoint::Checkpoint,
        checked_pages: 0,
        mismatched_pages: 0,
        first_mismatches: Vec::new(),
        skipped: None,
    }
}

/// Runs the actor over `messages` (with `--verify`) and returns its report.
async fn report(messages: Vec<StateMessage>) -> RunReport {
    let options = StateOptions {
        human_summary: false,
        summary_rows: None,
        verify: true,
        corrupt_first_touch: false,
        page_size: 4096,
        faults: true,
        scan: false,
        records: false,
        only: false,
        mappings_selected: false,
        buffer_bytes: super::DEFAULT_BUFFER_BYTES,
    };
    let (actor, handle) = StateActor::new(
        16,
        Box::new(std::io::sink()),
        options,
        None,
        None,
        RunControl::new(),
    );
    let task = tokio::spawn(actor.run());
    for m in messages {
        handle.send(m).await;
    }
    drop(handle);
    task.await.expect("the state actor ran to its end")
}

#[tokio::test]
async fn checks_that_could_not_run_are_told_from_processes_gone_and_warnings_counted() {
    let page_size = 4096;
    let own_pagemap = || {
        Some(Arc::new(
            Pagemap::open(std::process::id() as i32, page_size).unwrap(),
        ))
    };
    // No pid is this large: its /proc directory is missing, as a reaped process's is.
    let gone = i32::MAX;
    let probe = |pid, pagemap| {
        let (done, _) = std::sync::mpsc::sync_channel(1);
        Probe { pid, pagemap, done }
    };
    let warning = |what| Event::Warning {
        pid: Some(1),
        space: Some(0),
        what,
        message: "test".into(),
    };
    let exec = Event::Exec {
        pid: 1,
        tid: 1,
        space: 0,
        path: "/p".into(),
        argv: vec!["p".into()],
        attached: false,
        followed: true,
    };
    let mut messages = vec![line(0, exec)];
    messages.push(StateMessage {
        probe: Some(probe(gone, own_pagemap())),
        ..line(1, check(1))
    });
    messages.push(StateMessage {
        probe: Some(probe(1, None)),
        ..line(2, check(1))
    });
    // A lane that failed sends its check without a probe.
    messages.push(line(3, check(1)));
    messages.push(line(4, warning(WarningKind::SharingDisagrees)));
    messages.push(line(5, warning(WarningKind::PagesUnknown)));
    let report = report(messages).await;
    let v = report.totals.verify.expect("verify totals");
    assert_eq!((v.points, v.skipped_points, v.unchecked_points), (0, 1, 2));
    assert_eq!((report.totals.warnings, v.inexact_warnings), (2, 1));
    assert_eq!(report.model.warnings.len(), 2);
}

#[tokio::test]
async fn every_process_is_named_by_its_own_last_argv_with_its_end() {
    let exec = |pid, space, name: &str| Event::Exec {
        pid,
        tid: pid,
        space,
        path: format!("/bin/{name}"),
        argv: vec![name.to_string()],
        attached: false,
        followed: true,
    };
    let messages = vec![
        line(0, exec(1, 0, "make")),
        line(
            1,
            Event::Fork {
                pid: 1,
                tid: 1,
                child: 2,
                kind: ForkKind::Vfork,
                space: 0,
                child_space: 0,
            },
        ),
        line(
            2,
            Event::Fork {
                pid: 1,
                tid: 1,
                child: 3,
                kind: ForkKind::Fork,
                space: 0,
                child_space: 1,
            },
        ),
        line(3, exec(2, 2, "cc1")),
        line(
            4,
            Event::Exit {
                name: None,
                pid: 2,
                tid: 2,
                space: 2,
                status: None,
                signal: Some("SIGSEGV".into()),
                resident_bytes: 0,
                peak_resident_bytes: 0,
                oom: None,
            },
        ),
        line(
            5,
            Event::Exit {
                name: None,
                pid: 3,
                tid: 3,
                space: 1,
                status: Some(2),
                signal: None,
                resident_bytes: 0,
                peak_resident_bytes: 0,
                oom: None,
            },
        ),
    ];
    let report = report(messages).await;
    let rows: Vec<String> = report
        .processes
        .iter()
        .map(|p| format!("{} {:?} {:?} {:?}", p.pid, p.argv, p.status, p.signal))
        .collect();
    assert_eq!(
        rows,
        [
            r#"1 ["make"] None None"#,
            r#"2 ["cc1"] None Some("SIGSEGV")"#,
            r#"3 ["make"] Some(2) None"#,
        ]
    );
}
