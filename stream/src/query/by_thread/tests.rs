use serde_json::Value;

use super::*;
use crate::event::samples::{exit, fork};
use crate::event::{Follow, MapKind, PageState, SpaceId};

const PAGE: u64 = 4096;
const BASE: u64 = 0x7f00_0000_0000;

fn start(follow: Option<&str>) -> Event {
    Event::Start {
        schema: 1,
        version: "test".into(),
        argv: vec!["w".into()],
        page_size: PAGE,
        faults: true,
        follow: follow.map(str::to_string),
        thp: None,
        wall_ns: None,
        wall: None,
        stack_depth: None,
        touch_stacks: None,
        attach: None,
        only: None,
        threads: None,
        regions: None,
        min_size: None,
        host: None,
        cgroup: None,
        container: None,
    }
}

fn exec(pid: i32, space: SpaceId, path: &str) -> Event {
    Event::Exec {
        pid,
        tid: pid,
        space,
        path: path.into(),
        argv: vec![path.into()],
        attached: false,
        followed: true,
    }
}

fn map(pid: i32, space: SpaceId, pages: u64) -> Event {
    Event::Map {
        pid,
        tid: pid,
        space,
        start: BASE,
        end: BASE + pages * PAGE,
        prot: "rw-".into(),
        kind: MapKind::Anon,
        path: None,
        tracked: true,
        state: Some(PageState::NotResident),
        follow: Follow::Faults,
        cause: None,
        site: None,
    }
}

fn thread(pid: i32, tid: i32, child: i32, name: Option<&str>) -> Event {
    Event::Thread {
        pid,
        tid,
        child,
        space: 0,
        name: name.map(str::to_string),
    }
}

fn named(pid: i32, tid: i32, name: &str) -> Event {
    Event::ThreadName {
        pid,
        tid,
        space: 0,
        name: name.into(),
    }
}

fn thread_exit(pid: i32, tid: i32, name: Option<&str>) -> Event {
    Event::ThreadExit {
        pid,
        tid,
        space: 0,
        name: name.map(str::to_string),
    }
}

/// `tid` of `pid` first touches pages `[first, first + n)` of the mapping.
fn touch(pid: i32, tid: Option<i32>, space: SpaceId, first: u64, n: u64, write: bool) -> Event {
    Event::Resident {
        pid,
        tid,
        space,
        start: BASE + first * PAGE,
        end: BASE + (first + n) * PAGE,
        write,
        faults: if tid.is_some() { n } else { 0 },
        writer: None,
        by: tid.is_none().then_some(FoundBy::Scan),
        huge: false,
        site: None,
        sampled: 0,
        from: None,
        withheld: false,
    }
}

fn output(events: Vec<Event>, json: bool) -> String {
    let mut query = ByThread::new(json, "test".into());
    let mut out = Vec::new();
    let mut state = State::default();
    for (seq, event) in events.into_iter().enumerate() {
        let line = Line {
            seq: seq as u64,
            t_ns: seq as u64 * 1000,
            event,
        };
        query.before(&state, &line, &mut out).unwrap();
        state.apply(&line);
        query.after(&state, &line, &mut out).unwrap();
    }
    query.end(&state, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn rows(events: Vec<Event>) -> Vec<Value> {
    output(events, true)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A program whose main thread names itself, with two threads it starts: one names itself
/// twice, the other is named by another thread (its exit line says so).
fn named_threads() -> Vec<Event> {
    vec![
        start(None),
        exec(10, 0, "/usr/lib/jvm/bin/java-with-a-long-name"),
        map(10, 0, 64),
        touch(10, Some(10), 0, 0, 2, true),
        thread(10, 10, 11, Some("java")),
        thread(10, 10, 12, Some("java")),
        named(10, 11, "worker-0"),
        touch(10, Some(11), 0, 2, 5, true),
        named(10, 11, "worker-1"),
        touch(10, Some(11), 0, 7, 3, false),
        touch(10, Some(12), 0, 10, 1, true),
        touch(10, Some(12), 0, 11, 3, true),
        thread_exit(10, 12, Some("by-another")),
        thread_exit(10, 11, Some("worker-1")),
        named(10, 10, "main-loop"),
        exit(10, 0),
    ]
}

#[test]
fn each_thread_has_its_pages_and_its_names_the_last_first() {
    let rows = rows(named_threads());
    let got: Vec<(i64, Vec<&str>, u64, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["tid"].as_i64().unwrap(),
                r["names"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n.as_str().unwrap())
                    .collect(),
                r["pages"].as_u64().unwrap(),
                r["zero_pages"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (11, vec!["worker-1", "worker-0", "java"], 8, 3),
            (12, vec!["by-another", "java"], 4, 0),
            // The exec's guess (the file name cut to 15 bytes) gave way to the kernel's.
            (10, vec!["main-loop", "java"], 2, 0),
        ]
    );
    assert!(rows.iter().all(|r| r["pid"] == 10));
    assert_eq!(rows[0]["bytes"], 8 * PAGE);
}

#[test]
fn the_table_says_the_last_name_and_what_it_was_before() {
    let text = output(named_threads(), false);
    let line = |tid: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(tid))
            .unwrap_or_else(|| panic!("no row for {tid} in\n{text}"))
            .to_string()
    };
    assert!(
        line("11").ends_with("worker-1 (was: worker-0, java)"),
        "{text}"
    );
    assert!(line("10").ends_with("main-loop (was: java)"), "{text}");
    assert!(text.contains("pid 10 "), "{text}");
    let order: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| ["10", "11", "12"].contains(w))
        .collect();
    assert_eq!(order, ["11", "12", "10"], "largest first:\n{text}");
}

#[test]
fn a_main_thread_is_named_after_its_program_or_the_thread_that_forked_it() {
    let rows = rows(vec![
        start(None),
        exec(20, 0, "/opt/a-program-with-a-long-name"),
        map(20, 0, 8),
        touch(20, Some(20), 0, 0, 1, true),
        thread(20, 20, 21, None),
        named(20, 21, "forker"),
        fork(20, 30, 0, 1),
        Event::Fork {
            pid: 20,
            tid: 21,
            child: 31,
            kind: crate::event::ForkKind::Fork,
            space: 0,
            child_space: 2,
        },
        exit(30, 1),
        exit(31, 2),
        exit(20, 0),
    ]);
    let names = |pid: i64| {
        rows.iter()
            .find(|r| r["pid"] == pid && r["tid"] == pid)
            .map(|r| r["names"].clone())
            .unwrap()
    };
    // Cut to 15 bytes, as the kernel cuts it.
    assert_eq!(names(20), serde_json::json!(["a-program-with-"]));
    let renamed = self::rows(vec![
        start(None),
        exec(60, 0, "/usr/bin/prog"),
        named(60, 60, "boss"),
        exit(60, 0),
    ]);
    // The name it had before it named itself was the program's: it stays.
    assert_eq!(renamed[0]["names"], serde_json::json!(["boss", "prog"]));
    assert_eq!(names(30), serde_json::json!(["a-program-with-"]));
    assert_eq!(names(31), serde_json::json!(["forker"]));
}

#[test]
fn pages_found_by_scans_have_no_thread() {
    let scan_trace = vec![
        start(Some("scan")),
        exec(40, 0, "/w"),
        map(40, 0, 16),
        thread(40, 40, 41, Some("w")),
        named(40, 41, "scanned"),
        touch(40, None, 0, 0, 6, true),
        exit(40, 0),
    ];
    let rows = rows(scan_trace.clone());
    let thread = rows.iter().find(|r| r["tid"] == 41).unwrap();
    assert_eq!(thread["names"], serde_json::json!(["scanned", "w"]));
    assert!(thread.get("pages").is_none(), "{thread}");
    let scans = rows.iter().find(|r| r["by"] == "scan").unwrap();
    assert_eq!(scans["pages"], 6);
    assert!(scans.get("tid").is_none());
    let text = output(scan_trace, false);
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("41 "))
        .unwrap();
    assert_eq!(
        row.split_whitespace().take(4).collect::<Vec<_>>(),
        ["41", "-", "-", "-"]
    );
    assert!(text.contains("(found by page-table scans: no thread is known)"));
}

#[test]
fn pages_back_from_swap_and_writes_by_another_process_are_no_threads_first_touches() {
    let mut back = touch(50, None, 0, 0, 2, true);
    if let Event::Resident { from, .. } = &mut back {
        *from = Some(ResidentFrom::Swap);
    }
    let mut written = touch(50, Some(50), 0, 4, 3, true);
    if let Event::Resident { writer, .. } = &mut written {
        *writer = Some(77);
    }
    let rows = rows(vec![
        start(None),
        exec(50, 0, "/w"),
        map(50, 0, 16),
        touch(50, Some(50), 0, 0, 2, true),
        back,
        written,
        exit(50, 0),
    ]);
    let main = rows.iter().find(|r| r["tid"] == 50).unwrap();
    assert_eq!(main["pages"], 2);
    let writer = rows.iter().find(|r| r["by"] == "writer").unwrap();
    assert_eq!(
        (writer["writer"].clone(), writer["pages"].clone()),
        (77.into(), 3.into())
    );
    assert!(rows.iter().all(|r| r["by"] != "scan"), "{rows:?}");
}
