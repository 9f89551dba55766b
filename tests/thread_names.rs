//! Threads naming themselves (`thread_name` lines) and `replay --by-thread`, on the real kernel:
//! `tests/workloads/thread_names.c`'s three threads each name themselves by `prctl` and by
//! `pthread_setname_np(pthread_self())`, touch known pages, and are named again by the main
//! thread through `/proc` (no line: not a syscall the filter stops).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use mevi_actors::event::{Event, Line};
use serde_json::Value;

use crate::util::{PAGE, bin, parse_stream, run_bounded, scratch, workload};

/// What the workload says of one of its threads.
#[derive(Debug)]
struct Worker {
    /// Its index, as in its names (`prctl-1`).
    index: usize,
    region: std::ops::Range<u64>,
    pages: u64,
    comm: String,
}

/// Its pages written under its first name (by prctl), then under its second.
fn halves(w: &Worker) -> (std::ops::Range<u64>, std::ops::Range<u64>) {
    let first = 40 * (w.index as u64 + 1);
    let middle = w.region.start + first * PAGE;
    (
        w.region.start..middle,
        middle..w.region.start + w.pages * PAGE,
    )
}

struct Run {
    file: PathBuf,
    lines: Vec<Line>,
    pid: i32,
    workers: HashMap<i32, Worker>,
}

fn run(faults: &str) -> Run {
    let program = workload("thread_names");
    let file = scratch("thread-names");
    let (status, stdout, stderr) = run_bounded(
        Command::new(bin())
            .args(["run", "--faults", faults, "-o"])
            .arg(&file)
            .arg("--")
            .arg(&program),
    );
    assert_eq!(status, 0, "{stderr}");
    let mut workers = HashMap::new();
    for (index, line) in stdout
        .lines()
        .filter_map(|l| l.strip_prefix("thread "))
        .enumerate()
    {
        let w: Vec<&str> = line.split(' ').collect();
        let num = |i: usize| w[i].parse::<u64>().unwrap();
        workers.insert(
            w[0].parse().unwrap(),
            Worker {
                index,
                region: num(1)..num(2),
                pages: num(3),
                comm: w[4].to_string(),
            },
        );
    }
    assert_eq!(workers.len(), 3, "{stdout}");
    let lines = parse_stream(&std::fs::read_to_string(&file).unwrap());
    let pid = crate::util::exec_pid(&lines);
    Run {
        file,
        lines,
        pid,
        workers,
    }
}

/// `replay --by-thread [--json] FILE`: its stdout and stderr.
fn by_thread(file: &Path, json: bool) -> (String, String) {
    let mut cmd = Command::new(bin());
    cmd.args(["replay", "--by-thread"]);
    if json {
        cmd.arg("--json");
    }
    let (status, stdout, stderr) = run_bounded(cmd.arg(file));
    assert_eq!(status, 0, "{stderr}");
    (stdout, stderr)
}

/// The `thread_name` lines, per thread, in the stream's order, with their `seq`; checked to be
/// exactly the names the threads gave themselves: none for a `prctl` of another option, one
/// that failed, or a name written through `/proc` by another thread.
fn name_lines(r: &Run) -> HashMap<i32, Vec<(u64, String)>> {
    let mut names: HashMap<i32, Vec<(u64, String)>> = HashMap::new();
    for line in &r.lines {
        if let Event::ThreadName {
            pid,
            tid,
            space,
            name,
        } = &line.event
        {
            assert_eq!(*pid, r.pid);
            assert_eq!(
                Some(*space),
                r.lines.iter().find_map(|l| match l.event {
                    Event::Exec { space, .. } => Some(space),
                    _ => None,
                })
            );
            names
                .entry(*tid)
                .or_default()
                .push((line.seq, name.clone()));
        }
    }
    let only = |tid: i32| -> Vec<&str> {
        names
            .get(&tid)
            .map(|n| n.iter().map(|(_, name)| name.as_str()).collect())
            .unwrap_or_default()
    };
    assert_eq!(only(r.pid), ["boss"], "{names:?}");
    for (tid, w) in &r.workers {
        let i = w.index;
        assert_eq!(
            only(*tid),
            [format!("prctl-{i}"), format!("self-{i}")],
            "{names:?}"
        );
    }
    assert_eq!(names.values().map(Vec::len).sum::<usize>(), 7, "{names:?}");
    names
}

/// The `thread` lines name the new threads as they start (their creator's name), and the
/// `thread_exit` lines as they end: the name another thread gave them, which no line said.
fn check_thread_lines(r: &Run) {
    for line in &r.lines {
        match &line.event {
            Event::Thread { child, name, .. } if r.workers.contains_key(child) => {
                assert_eq!(name.as_deref(), Some("boss"));
            }
            Event::ThreadExit { tid, name, .. } if r.workers.contains_key(tid) => {
                let w = &r.workers[tid];
                assert_eq!(w.comm, format!("other-{}", w.index));
                assert_eq!(name.as_deref(), Some(w.comm.as_str()));
            }
            _ => {}
        }
    }
}

/// The by-thread rows of the program's process, by tid.
fn thread_rows(r: &Run, json: &str) -> HashMap<i64, Value> {
    json.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["pid"] == r.pid && v.get("tid").is_some())
        .map(|v| (v["tid"].as_i64().unwrap(), v))
        .collect()
}

fn expected_names(w: &Worker) -> Value {
    let i = w.index;
    serde_json::json!([
        format!("other-{i}"),
        format!("self-{i}"),
        format!("prctl-{i}"),
        "boss"
    ])
}

/// Each name a thread gives itself is a line, in its space's order: the thread's touches before
/// it come before it, and those after it after (coalesced runs end at the line).
#[test]
fn threads_naming_themselves_get_their_lines_in_order() {
    let r = run("uffd");
    let names = name_lines(&r);
    check_thread_lines(&r);
    for (tid, w) in &r.workers {
        let (named_first, named_second) = (names[tid][0].0, names[tid][1].0);
        let (first, second) = halves(w);
        let mut in_region = 0;
        for line in &r.lines {
            let Event::Resident {
                tid: by,
                start,
                end,
                faults,
                ..
            } = &line.event
            else {
                continue;
            };
            if *end <= w.region.start || *start >= w.region.end {
                continue;
            }
            assert_eq!(
                *by,
                Some(*tid),
                "a page of {tid}'s region touched by {by:?}"
            );
            in_region += faults;
            if *start < first.end {
                assert!(
                    named_first < line.seq && line.seq < named_second && *end <= first.end,
                    "{tid}'s touch of its first pages at seq {} (named at {named_first}, \
                     {named_second})",
                    line.seq
                );
            } else {
                assert!(
                    named_second < line.seq && *end <= second.end,
                    "{tid}'s touch of its next pages at seq {} (named again at {named_second})",
                    line.seq
                );
            }
        }
        assert_eq!(in_region, w.pages, "thread {tid}'s pages in its region");
    }
}

/// Under `--faults scan` the filter and its stops are the same: the same lines.
#[test]
fn under_scans_threads_naming_themselves_get_their_lines() {
    let r = run("scan");
    name_lines(&r);
    check_thread_lines(&r);
}

/// The report's meta (the threads view's, and a live page's) has the names each thread gave
/// itself, with their times, beside its name at its start and at its exit; its events table has
/// the lines.
#[test]
fn the_report_knows_the_names_threads_gave_themselves() {
    let r = run("uffd");
    let html = scratch("thread-names.html");
    let (status, _, stderr) = run_bounded(
        Command::new(bin())
            .arg("report")
            .arg(&r.file)
            .arg("-o")
            .arg(&html),
    );
    assert_eq!(status, 0, "{stderr}");
    let page = std::fs::read_to_string(&html).unwrap();
    std::fs::remove_file(&html).ok();
    let open = "id=\"mevi-meta\">";
    let start = page.find(open).unwrap() + open.len();
    let len = page[start..].find("</script>").unwrap();
    let meta: Value = serde_json::from_str(&page[start..start + len]).unwrap();
    let names = name_lines(&r);
    for (tid, w) in &r.workers {
        let thread = meta["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["tid"] == *tid)
            .unwrap_or_else(|| panic!("thread {tid} not in the meta"));
        assert_eq!(thread["name"], "boss");
        assert_eq!(thread["name_at_exit"], w.comm.as_str());
        let at_line = |seq: u64| {
            r.lines
                .iter()
                .find(|l| l.seq == seq)
                .map(|l| l.t_ns)
                .unwrap()
        };
        let expected: Vec<Value> = names[tid]
            .iter()
            .map(|(seq, name)| serde_json::json!([at_line(*seq), name]))
            .collect();
        assert_eq!(thread["renamed"], Value::Array(expected), "{thread}");
    }
    let rows = meta["events"]["rows"].as_array().unwrap();
    let named = rows
        .iter()
        .filter(|row| {
            row.as_array()
                .is_some_and(|r| r.iter().any(|v| v == "thread_name"))
        })
        .count();
    assert_eq!(named, 7, "{rows:?}");
}

/// A program whose own filter sends `prctl` to its supervisor (`SECCOMP_RET_USER_NOTIF`, which
/// outranks our stop; the supervisor lets it run): its thread stops at every syscall's entry
/// (notif.rs), and its naming is seen there.
#[test]
fn a_name_a_user_notif_supervisor_lets_through_has_its_line() {
    let t = crate::util::trace(
        &[],
        &[workload("u10_user_notif").as_os_str(), "name".as_ref()],
    );
    assert_eq!(
        (t.status, t.stdout.as_str()),
        (0, "ok 8\nnamed\n"),
        "{}",
        t.stderr
    );
    let pid = crate::util::exec_pid(&t.lines);
    let names: Vec<(i32, &str)> = t
        .lines
        .iter()
        .filter_map(|l| match &l.event {
            Event::ThreadName { tid, name, .. } => Some((*tid, name.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(names, [(pid, "notified")]);
}

/// `replay --by-thread` gives each thread the pages of its own first touches (its region's, the
/// workload's truth, and the few of its stack it touched), its names the last first, largest
/// first; the table writes `last (was: ...)`.
#[test]
fn by_thread_counts_each_threads_pages_under_its_names() {
    let r = run("uffd");
    let mut touched: HashMap<i32, u64> = HashMap::new();
    for line in &r.lines {
        if let Event::Resident {
            tid: Some(tid),
            faults,
            ..
        } = &line.event
        {
            *touched.entry(*tid).or_default() += faults;
        }
    }
    let (json, _) = by_thread(&r.file, true);
    let rows = thread_rows(&r, &json);
    let program = r
        .lines
        .iter()
        .find_map(|l| match &l.event {
            Event::Exec { argv, .. } => Some(Value::from(argv[0].clone())),
            _ => None,
        })
        .unwrap();
    for (tid, w) in &r.workers {
        let row = &rows[&i64::from(*tid)];
        assert_eq!(row["names"], expected_names(w), "{row}");
        let pages = row["pages"].as_u64().unwrap();
        assert_eq!(pages, touched[tid], "{row}");
        assert!(
            (w.pages..w.pages + 8).contains(&pages),
            "thread {tid}: {pages} pages, {} in its region",
            w.pages
        );
        assert_eq!(row["bytes"].as_u64(), Some(pages * PAGE));
        assert_eq!(row["program"], program);
    }
    let main = &rows[&i64::from(r.pid)];
    assert_eq!(main["names"], serde_json::json!(["boss", "thread_names"]));
    assert_eq!(main["pages"].as_u64(), Some(touched[&r.pid]));
    assert_eq!(rows.len(), 4, "{json}");
    // Largest first: the threads wrote 64, 128 and 192 pages.
    let order: Vec<i64> = json
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["pid"] == r.pid)
        .filter_map(|v| v["tid"].as_i64())
        .collect();
    let mut by_size = order.clone();
    by_size.sort_by_key(|tid| std::cmp::Reverse(rows[tid]["pages"].as_u64().unwrap()));
    assert_eq!(order, by_size);

    let (table, _) = by_thread(&r.file, false);
    for (tid, w) in &r.workers {
        let row = table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&tid.to_string()))
            .unwrap_or_else(|| panic!("no row for {tid}:\n{table}"));
        let i = w.index;
        assert!(
            row.ends_with(&format!("other-{i} (was: self-{i}, prctl-{i}, boss)")),
            "{row}"
        );
        let pages: u64 = row.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert_eq!(pages, touched[tid], "{row}");
    }
}

/// Under `--faults scan` no first touch has a thread: each thread has its names and `-`, and
/// the process's pages are on its row of pages found by scans, with a line on stderr saying so.
#[test]
fn by_thread_under_scans_has_the_names_and_no_threads_pages() {
    let r = run("scan");
    let (json, stderr) = by_thread(&r.file, true);
    assert!(stderr.contains("--faults scan"), "{stderr}");
    let rows = thread_rows(&r, &json);
    for (tid, w) in &r.workers {
        let row = &rows[&i64::from(*tid)];
        assert_eq!(row["names"], expected_names(w), "{row}");
        assert!(row.get("pages").is_none(), "{row}");
    }
    let scanned: Vec<Value> = json
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["pid"] == r.pid && v["by"] == "scan")
        .collect();
    assert_eq!(scanned.len(), 1, "{json}");
    let regions: u64 = r.workers.values().map(|w| w.pages).sum();
    let found = scanned[0]["pages"].as_u64().unwrap();
    assert!(found >= regions, "{found} pages found, {regions} written");
    let (table, _) = by_thread(&r.file, false);
    for tid in r.workers.keys() {
        let row = table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&tid.to_string()))
            .unwrap();
        assert_eq!(row.split_whitespace().nth(1), Some("-"), "{row}");
    }
}
