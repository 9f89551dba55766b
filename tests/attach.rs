//! `mevi-actors attach` (issue 14): following a process that is already running, and leaving it
//! as it was. The workload (tests/workloads/attach_target.c) is started by the test without
//! mevi-actors and takes one command a line on its stdin, so a test drives it in phases: before
//! the attach, while attached, after the detach. What it reads from its own page tables while
//! attached must equal the replayed stream, and all it prints and its exit status must be those
//! of a run that was never attached. Every wait is bounded: a hang fails the test.

use std::io::{BufRead, BufReader, Write};
use std::ops::Range;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mevi_actors::event::{Event, ForkKind, FoundBy, MapCause};
use mevi_actors::model::Replay;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use crate::util::{
    MachineHold, PAGE, Traced, WorldCopy, as_nobody, bin, can_become_nobody, exit_status_within,
    finish_within, lines_so_far, run_within, scratch, workload,
};

/// Every run here takes a few seconds at most; beyond this it hangs.
const HANG: Duration = Duration::from_secs(60);
/// Not a command of the workload's but the test's: attached, it waits until scans have seen
/// every change the commands before it made (`Attached::wait_until_scanned`).
const SCANNED: &str = "scanned";

/// What the workload is told before the attach: a thread that is there when attach comes, and a
/// region with pages present for the snapshot to find.
const BEFORE: &[&str] = &["thread", "map 64", "touch 0 0 16"];
/// While attached: a new mapping, pages touched, then some of them discarded after a scan saw
/// them (and seen gone by a scan before the next layout change, which would have the mapping
/// described again instead), a thread made, part of a mapping unmapped, a fork whose child
/// touches pages and prints its truth, another mapping, and last the parent's truth, with
/// nothing changed after it.
const WHILE: &[&str] = &[
    "map 32",
    "touch 1 0 32",
    "touch 0 16 8",
    SCANNED,
    "discard 1 8 16",
    SCANNED,
    "thread",
    "unmap 0 48 16",
    "fork 1 8 4",
    "map 16",
    "touch 2 0 4",
    "truth",
    SCANNED,
];
/// After the detach: it goes on changing its memory, as it would have.
const AFTER: &[&str] = &["touch 2 4 4", "discard 0 0 8", "truth"];
/// The status it is told to end with at last.
const LAST_STATUS: i32 = 3;

/// The workload, started without mevi-actors, its stdin and stdout the test's; killed if the test
/// fails.
struct Target {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    /// Every line it printed so far.
    said: Vec<String>,
    pid: i32,
}

impl Target {
    /// Starts it and reads its `pid` line.
    fn start() -> Target {
        let mut child = Command::new(workload("attach_target"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting attach_target");
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut target = Target {
            stdin: child.stdin.take().unwrap(),
            child,
            lines,
            said: Vec::new(),
            pid: 0,
        };
        let first = target.next_line();
        target.pid = first
            .strip_prefix("pid ")
            .and_then(|pid| pid.parse().ok())
            .unwrap_or_else(|| panic!("the workload began with {first:?}"));
        target
    }

    fn next_line(&mut self) -> String {
        match self.lines.recv_timeout(HANG) {
            Ok(line) => {
                self.said.push(line.clone());
                line
            }
            Err(e) => panic!(
                "the workload said nothing more within {HANG:?} ({e}); it said:\n{}",
                self.said.join("\n")
            ),
        }
    }

    fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}")
            .and_then(|()| self.stdin.flush())
            .unwrap_or_else(|e| panic!("telling the workload {command:?}: {e}"));
    }

    /// Does `commands` one after the other: the lines it answered, each answer ending with its
    /// `ok` line. `SCANNED` is nothing here: nothing is attached.
    fn ask(&mut self, commands: &[&str]) -> Vec<String> {
        self.ask_under(commands, None)
    }

    /// `ask`, with `attached` following it: there `SCANNED` waits for its scans.
    fn ask_under(&mut self, commands: &[&str], mut attached: Option<&mut Attached>) -> Vec<String> {
        let mut answers = Vec::new();
        for &command in commands {
            if command == SCANNED {
                if let Some(attached) = attached.as_deref_mut() {
                    attached.wait_until_scanned(&[self.pid]);
                }
                continue;
            }
            self.send(command);
            loop {
                let line = self.next_line();
                let done = line.starts_with("ok");
                answers.push(line);
                if done {
                    break;
                }
            }
        }
        answers
    }

    /// Tells it to exit with `code`: its exit status (128+N for signal N).
    fn exit(&mut self, code: i32) -> i32 {
        self.send(&format!("exit {code}"));
        let what = format!("the workload (it said:\n{}\n)", self.said.join("\n"));
        exit_status_within(&mut self.child, HANG, &what)
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `mevi-actors attach -p PID FLAGS -o STREAM` in the background; killed if the test fails.
struct Attached {
    child: Option<Child>,
    stream: PathBuf,
    _run: MachineHold,
}

impl Attached {
    fn start(pids: &str, flags: &[&str]) -> Attached {
        let stream = scratch("attach.jsonl");
        let run = MachineHold::shared();
        let child = Command::new(bin())
            .args(["attach", "-p", pids])
            .args(flags)
            .arg("-o")
            .arg(&stream)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting mevi-actors attach");
        Attached {
            child: Some(child),
            stream,
            _run: run,
        }
    }

    /// Waits until the stream has the snapshot's first `map` line (after its `exec` line).
    fn wait_for_snapshot(&mut self) {
        let deadline = Instant::now() + HANG;
        loop {
            let text = std::fs::read_to_string(&self.stream).unwrap_or_default();
            let mapped = text
                .lines()
                .filter(|l| l.ends_with('}'))
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .any(|l| l["ev"] == "map");
            if mapped {
                return;
            }
            self.assert_running("its snapshot");
            assert!(
                Instant::now() < deadline,
                "no map line within {HANG:?} in {}",
                self.stream.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the stream has as many pages of each of `pids` as the kernel has of its
    /// private anonymous memory (each process waiting for its next command meanwhile): scans have
    /// seen every change it made.
    fn wait_until_scanned(&mut self, pids: &[i32]) {
        let deadline = Instant::now() + HANG;
        loop {
            let mut replay = Replay::new();
            for line in &lines_so_far(&self.stream) {
                replay.apply_line(line);
            }
            let behind: Vec<(i32, Option<u64>, u64)> = pids
                .iter()
                .map(|&pid| {
                    let stream = replay
                        .process_space
                        .get(&pid)
                        .and_then(|space| replay.spaces.get(space))
                        .map(|s| s.resident_bytes / PAGE);
                    (pid, stream, anon_in_memory(pid))
                })
                .filter(|&(_, stream, kernel)| stream != Some(kernel))
                .collect();
            if behind.is_empty() {
                return;
            }
            self.assert_running("its scans caught up");
            assert!(
                Instant::now() < deadline,
                "(pid, the stream's pages, the kernel's) not the same within {HANG:?}: {behind:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the stream has an `rss` line about `pid`: a timed sample has looked at it.
    fn wait_for_a_sample_of(&mut self, pid: i32) {
        let deadline = Instant::now() + HANG;
        while !lines_so_far(&self.stream)
            .iter()
            .any(|l| matches!(l.event, Event::Rss { pid: p, .. } if p == pid))
        {
            self.assert_running("a sample");
            assert!(
                Instant::now() < deadline,
                "no rss line about {pid} within {HANG:?} in {}",
                self.stream.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Fails the test, with what attach said, if it has ended before `awaited`.
    fn assert_running(&mut self, awaited: &str) {
        if self.child.as_mut().unwrap().try_wait().unwrap().is_some() {
            let (status, _, stderr) =
                finish_within(self.child.take().unwrap(), HANG, "mevi-actors attach");
            panic!("attach ended with {status} before {awaited}:\n{stderr}");
        }
    }

    /// Sends `signal` (or not: it is to end by itself), waits for the end: the run, read as
    /// `util::Traced` with `truth` as the workload's output to compare with, and the stream's
    /// lines as JSON (for the fields `event.rs` may not have yet).
    fn end(&mut self, signal: Option<Signal>, truth: &[String]) -> (Traced, Vec<Value>) {
        let child = self.child.take().unwrap();
        if let Some(signal) = signal {
            kill(Pid::from_raw(child.id() as i32), signal).unwrap();
        }
        let (status, _, stderr) = finish_within(child, HANG, "mevi-actors attach");
        let text = std::fs::read_to_string(&self.stream).unwrap_or_default();
        let json = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
            .collect();
        let traced = Traced::read(&self.stream, status, truth.join("\n"), stderr);
        (traced, json)
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        std::fs::remove_file(&self.stream).ok();
    }
}

/// A process of the test's killed when the test ends, however it ends.
struct KilledAtEnd(Child);

impl Drop for KilledAtEnd {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every thread of `pid` and its `TracerPid` (`/proc/PID/task/TID/status`).
fn tracers(pid: i32) -> Vec<(i32, i32)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .map(|task| {
            let task = task.unwrap();
            let tid = task.file_name().to_str().unwrap().parse().unwrap();
            let status = std::fs::read_to_string(task.path().join("status")).unwrap();
            let tracer = status
                .lines()
                .find_map(|l| l.strip_prefix("TracerPid:"))
                .unwrap_or_else(|| panic!("no TracerPid in {status}"));
            (tid, tracer.trim().parse().unwrap())
        })
        .collect()
}

/// Pages of `pid`'s private anonymous memory in memory now, counted as the workloads' truth counts
/// them (tests/workloads/truth.h: `truth_measure_anon`, `truth_in_memory`).
fn anon_in_memory(pid: i32) -> u64 {
    use std::os::unix::fs::FileExt;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let pagemap = std::fs::File::open(format!("/proc/{pid}/pagemap")).unwrap();
    let mut pages = 0;
    for line in maps.lines() {
        let mut fields = line.split_ascii_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
            continue;
        };
        let path = fields.nth(3).unwrap_or("");
        let anon = matches!(path, "" | "[heap]" | "[stack]") || path.starts_with("[anon:");
        if !perms.ends_with('p') || !anon {
            continue;
        }
        let address = |hex| u64::from_str_radix(hex, 16).unwrap();
        let (start, end) = range.split_once('-').unwrap();
        let (start, end) = (address(start), address(end));
        let mut entries = vec![0u8; ((end - start) / PAGE * 8) as usize];
        pagemap
            .read_exact_at(&mut entries, start / PAGE * 8)
            .unwrap();
        pages += entries
            .chunks_exact(8)
            .map(|entry| u64::from_ne_bytes(entry.try_into().unwrap()))
            .filter(|&entry| {
                // Present, or a migration entry (swap type 24 to 30, shown to root).
                let swap_type = entry & 0x1f;
                entry >> 63 == 1 || (entry >> 62 & 1 == 1 && (24..31).contains(&swap_type))
            })
            .count() as u64;
    }
    pages
}

/// The state letter of process `pid` (`/proc/PID/stat`).
fn state(pid: i32) -> char {
    crate::util::proc_state(format!("/proc/{pid}/stat")).expect("the process is there")
}

/// What the workload prints that is the same in every run of it: its answers, and its truth
/// lines about its regions (name, size, pages present); not its pid, addresses, or whole-process
/// figures (anon, rollup), which vary with the layout.
fn same_in_every_run(said: &[String]) -> Vec<String> {
    said.iter()
        .filter_map(|l| {
            if l.starts_with("pid ") {
                return None;
            }
            if !l.starts_with("{\"truth\"") {
                return Some(l.clone());
            }
            let v: Value = serde_json::from_str(l).unwrap();
            (v["truth"] == "region").then(|| {
                format!(
                    "region {} of {} bytes: {} present",
                    v["name"],
                    v["end"].as_u64().unwrap() - v["start"].as_u64().unwrap(),
                    v["present"]
                )
            })
        })
        .collect()
}

/// The pid of the one process but `pid` whose truth the run has: its fork child's.
fn child_of(t: &Traced, pid: i32) -> i32 {
    t.truths()
        .iter()
        .map(|truth| truth.pid)
        .find(|&p| p != pid)
        .expect("the child's truth")
}

/// The range of region `name` of process `pid`, from its truth lines.
fn region(said: &[String], pid: i32, name: &str) -> Range<u64> {
    said.iter()
        .filter(|l| l.starts_with("{\"truth\""))
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["truth"] == "region" && v["pid"] == pid && v["name"] == name)
        .map(|v| v["start"].as_u64().unwrap()..v["end"].as_u64().unwrap())
        .unwrap_or_else(|| panic!("no truth about {name} of {pid} in {said:?}"))
}

fn overlaps(line: &Event, range: &Range<u64>) -> bool {
    let v = serde_json::to_value(line).unwrap();
    match (v["start"].as_u64(), v["end"].as_u64()) {
        (Some(start), Some(end)) => start < range.end && end > range.start,
        _ => false,
    }
}

/// Attach (`--faults scan`) follows a process that was running before it, with a thread already
/// there: its first lines are the `start` line naming the pid, an `exec` line marked `attached`,
/// and the snapshot (the pages present before the attach); then what the process does while
/// attached, seen by scans only: a new mapping as `redescribe` lines, new pages as `resident` lines `by` a scan
/// with no thread, pages dropped after a scan saw them as a `discard` by `scan`, a child it forks
/// (`-f`) with its own exit. The replayed stream equals what the parent and the child read from
/// their own page tables, and every `--verify` checkpoint agrees. On SIGINT attach detaches and
/// exits 0; then no thread has a tracer, and the process goes on to print and exit exactly as a
/// run of it driven the same way that was never attached.
#[test]
fn attach_follows_a_running_process_and_detach_leaves_it_as_it_was() {
    let mut alone = Target::start();
    for phase in [BEFORE, WHILE, AFTER] {
        alone.ask(phase);
    }
    let alone_status = alone.exit(LAST_STATUS);
    assert_eq!(alone_status, LAST_STATUS, "{:?}", alone.said);

    let mut target = Target::start();
    let pid = target.pid;
    target.ask(BEFORE);
    let mut attached = Attached::start(
        &pid.to_string(),
        &["-f", "--faults", "scan", "--verify", "--verify-every", "20"],
    );
    attached.wait_for_snapshot();
    let while_attached = target.ask_under(WHILE, Some(&mut attached));
    let (t, json) = attached.end(Some(Signal::SIGINT), &while_attached);
    assert_eq!(t.status, 0, "{}", t.evidence());

    // Detached: every thread (the main one and the two it made) is untraced, and it runs on.
    let tracers = tracers(pid);
    assert_eq!(tracers.len(), 3, "{tracers:?}");
    assert!(
        tracers.iter().all(|&(_, tracer)| tracer == 0),
        "still traced after the detach: {tracers:?}"
    );
    target.ask(AFTER);
    let status = target.exit(LAST_STATUS);
    assert_eq!(
        (status, same_in_every_run(&target.said)),
        (alone_status, same_in_every_run(&alone.said)),
        "attached then detached (left) and never attached (right)"
    );

    // The stream's first lines: the start line, the exec line, the snapshot.
    assert_eq!(json[0]["ev"], "start", "{}", json[0]);
    assert_eq!(json[0]["follow"], "scan", "{}", json[0]);
    assert_eq!(json[0]["attach"], serde_json::json!([pid]), "{}", json[0]);
    let execs: Vec<(usize, bool, &str)> = t
        .lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| match &l.event {
            Event::Exec {
                pid: p,
                attached,
                path,
                ..
            } if *p == pid => Some((i, *attached, path.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(execs.len(), 1, "{execs:?}");
    let (exec_at, attached_line, path) = execs[0];
    assert!(attached_line, "the exec line is not marked attached");
    assert!(path.ends_with("attach_target"), "{path}");
    // The snapshot is the run of `map` lines right after the exec line: replayed to its end, the
    // region made before the attach has the 16 pages touched then.
    let snapshot_end = exec_at
        + 1
        + t.lines[exec_at + 1..]
            .iter()
            .take_while(|l| matches!(l.event, Event::Map { .. }))
            .count();
    let mut at_snapshot = Replay::new();
    for line in &t.lines[..snapshot_end] {
        at_snapshot.apply_line(line);
    }
    let before = region(&while_attached, pid, "r0");
    let space = t.space_of(pid);
    let snapshot_pages = at_snapshot.spaces[&space].resident_in(before) / PAGE;
    assert_eq!(snapshot_pages, 16, "pages of r0 in the snapshot");

    // Changes, seen by scans only.
    let made_while_attached = region(&while_attached, pid, "r1");
    let redescribed = t.lines[snapshot_end..].iter().any(|l| {
        matches!(
            l.event,
            Event::Map {
                cause: Some(MapCause::Redescribe),
                ..
            }
        ) && overlaps(&l.event, &made_while_attached)
    });
    assert!(
        redescribed,
        "no redescribe line for the mapping made while attached"
    );
    let residents: Vec<&Event> = t.events("resident").collect();
    assert!(!residents.is_empty(), "no resident line");
    for line in &residents {
        assert!(
            matches!(
                line,
                Event::Resident {
                    tid: None,
                    by: Some(FoundBy::Scan),
                    ..
                }
            ),
            "a resident line not by a scan: {line:?}"
        );
    }
    let discarded = made_while_attached.start + 8 * PAGE..made_while_attached.start + 24 * PAGE;
    assert!(
        t.events("discard").any(|l| matches!(
            l,
            Event::Discard { pid: p, advice, .. } if *p == pid && advice == "scan"
        ) && overlaps(l, &discarded)),
        "no discard by scan of the pages dropped while attached"
    );

    // The child (-f): forked, followed to its exit.
    let child = child_of(&t, pid);
    assert!(
        t.events("fork").any(|l| matches!(
            l,
            Event::Fork { pid: p, child: c, kind: ForkKind::Fork, .. } if *p == pid && *c == child
        )),
        "no fork line for child {child}"
    );
    let exits: Vec<(i32, Option<i32>)> = t
        .events("exit")
        .filter_map(|l| match l {
            Event::Exit { pid, status, .. } => Some((*pid, *status)),
            _ => None,
        })
        .collect();
    assert_eq!(
        exits,
        [(child, Some(0))],
        "the child exits; the detached parent does not"
    );

    // The stream equals the kernel.
    t.assert_matches_kernel();
    let v = t.verify_totals();
    assert!(v.points > 0, "nothing was checked: {}", t.stderr);
    assert_eq!(v.mismatched_pages, 0, "{}", t.evidence());
}

/// Attached, each page is found with the thread whose fault the kernel recorded there (the
/// default where the kernel allows records): pages written by two threads already running at
/// the attach, by the main thread, and by sixteen threads made while attached (each writes one
/// page and exits before the scan finds it) are `by` `record` with their writer's tid, every
/// one, and so are a fork child's (`-f`) in its own space; the stream equals the kernel, at
/// every `--verify-every` checkpoint too.
#[test]
fn attached_pages_have_the_thread_that_wrote_them() {
    if let Err(e) = mevi_actors::kernel::fault_records::recordable() {
        return crate::util::skip(&format!("page faults cannot be recorded here: {e}"));
    }
    let mut target = Target::start();
    let pid = target.pid;
    // A fence below r0, so that no mapping made while attached (the new threads' stacks) joins
    // it: a sample would describe the joined mapping again, with the pages written before as
    // its state (no thread), before a scan could find them.
    target.ask(&["worker", "worker", "map 64", "fence 0"]);
    let mut attached = Attached::start(&pid.to_string(), &["-f", "--verify-every", "20"]);
    // A sample has begun: every thread's ring was opened before the trace's first.
    attached.wait_for_a_sample_of(pid);
    let said = target.ask_under(
        &[
            "work 0 0 0 8",
            "work 1 0 8 8",
            "touch 0 16 8",
            "threads 0 24 16",
            "fork 0 40 4",
            "truth",
            SCANNED,
        ],
        Some(&mut attached),
    );
    let (t, json) = attached.end(Some(Signal::SIGINT), &said);
    assert_eq!(t.status, 0, "{}", t.evidence());
    assert_eq!(json[0]["follow"], "records", "{}", json[0]);
    target.exit(0);

    // Who wrote each page of r0, as the workload says.
    let r0 = region(&said, pid, "r0");
    let page_of = |i: u64| r0.start + i * PAGE;
    let workers: Vec<i32> = said
        .iter()
        .filter_map(|l| l.strip_prefix("tid ").and_then(|t| t.parse().ok()))
        .collect();
    assert!(workers.len() >= 2, "{said:?}");
    let mut expected: std::collections::BTreeMap<u64, i32> = std::collections::BTreeMap::new();
    for i in 0..8 {
        expected.insert(page_of(i), workers[0]);
        expected.insert(page_of(8 + i), workers[1]);
        expected.insert(page_of(16 + i), pid);
    }
    for l in &said {
        if let Some(rest) = l.strip_prefix("tid ")
            && let Some((tid, page)) = rest.split_once(" page 0x")
        {
            let page = u64::from_str_radix(page, 16).unwrap();
            expected.insert(page, tid.parse().unwrap());
        }
    }
    assert_eq!(expected.len(), 40, "{said:?}");
    let mut found = std::collections::BTreeMap::new();
    for line in t.events("resident") {
        if let Event::Resident {
            start,
            end,
            tid,
            by,
            ..
        } = line
        {
            for page in (*start..*end).step_by(PAGE as usize) {
                if r0.contains(&page) {
                    found.insert(page, (*tid, *by));
                }
            }
        }
    }
    let wrong: Vec<String> = expected
        .iter()
        .filter(|&(page, &tid)| found.get(page) != Some(&(Some(tid), Some(FoundBy::Record))))
        .map(|(page, tid)| {
            format!(
                "page {}: written by {tid}, in the stream {:?}",
                (page - r0.start) / PAGE,
                found.get(page)
            )
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{} of 40 pages:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    // The fork child (-f): its 4 pages, written in its own space, are its own.
    let child = child_of(&t, pid);
    let childs: Vec<(Option<i32>, Option<FoundBy>, u64)> = t
        .events("resident")
        .filter_map(|l| match l {
            Event::Resident {
                pid: p,
                tid,
                by,
                start,
                end,
                ..
            } if *p == child && r0.contains(start) => Some((*tid, *by, (end - start) / PAGE)),
            _ => None,
        })
        .collect();
    assert_eq!(
        childs.iter().map(|c| c.2).sum::<u64>(),
        4,
        "the child's lines in r0: {childs:?}"
    );
    assert!(
        childs
            .iter()
            .all(|c| (c.0, c.1) == (Some(child), Some(FoundBy::Record))),
        "the child's lines in r0: {childs:?}"
    );
    t.assert_matches_kernel();
    let v = t.verify_totals();
    assert!(v.points > 0, "nothing was checked: {}", t.stderr);
    assert_eq!(v.mismatched_pages, 0, "{}", t.evidence());
}

/// A followed process that exits ends the attach by itself, with status 0, and the stream has
/// its `exit` line with the process's own status, then the summary.
#[test]
fn attach_to_a_process_that_then_exits_ends_by_itself() {
    let mut target = Target::start();
    let pid = target.pid;
    let mut attached = Attached::start(&pid.to_string(), &[]);
    attached.wait_for_snapshot();
    target.ask(&["map 8", "touch 0 0 8"]);
    assert_eq!(target.exit(7), 7);
    let (t, _) = attached.end(None, &[]);
    assert_eq!(t.status, 0, "{}", t.stderr);
    let exits: Vec<Option<i32>> = t
        .events("exit")
        .filter_map(|l| match l {
            Event::Exit { pid: p, status, .. } if *p == pid => Some(*status),
            _ => None,
        })
        .collect();
    assert_eq!(exits, [Some(7)], "{}", t.stderr);
    assert!(
        matches!(
            t.lines.last().map(|l| &l.event),
            Some(Event::Summary { .. })
        ),
        "the stream does not end with its summary"
    );
}

/// Two processes at once: each is announced by its own attached `exec` line, each space is
/// checked, and the stream replays cleanly (`-p A,B`).
#[test]
fn attach_to_two_processes_at_once() {
    let mut first = Target::start();
    let mut second = Target::start();
    let pids = format!("{},{}", first.pid, second.pid);
    let mut attached = Attached::start(&pids, &["--verify", "--verify-every", "20"]);
    attached.wait_for_snapshot();
    first.ask(&["map 16", "touch 0 0 16"]);
    second.ask(&["map 8", "touch 0 0 4"]);
    attached.wait_until_scanned(&[first.pid, second.pid]);
    let (t, _) = attached.end(Some(Signal::SIGINT), &[]);
    assert_eq!(t.status, 0, "{}", t.evidence());
    assert!(t.replay.problems.is_empty(), "{:?}", t.replay.problems);
    let v = t.verify_totals();
    assert_eq!(v.mismatched_pages, 0, "{}", t.evidence());
    assert!(v.points >= 2, "{v:?}");
    let mut attached_pids: Vec<i32> = t
        .events("exec")
        .filter_map(|e| match e {
            Event::Exec {
                pid,
                attached: true,
                ..
            } => Some(*pid),
            _ => None,
        })
        .collect();
    attached_pids.sort_unstable();
    let mut pids = [first.pid, second.pid];
    pids.sort_unstable();
    assert_eq!(attached_pids, pids, "{}", t.stderr);
    assert_eq!(first.exit(0), 0);
    assert_eq!(second.exit(0), 0);
}

/// With `-f`, a child the process forks and that execs is followed from its fork on: its
/// `fork` line comes before its `exec` (which is not marked attached) and its exit, the stream
/// replays cleanly, and every check agrees.
#[test]
fn attach_f_follows_a_child_that_execs() {
    let mut target = Target::start();
    let pid = target.pid;
    let mut attached = Attached::start(&pid.to_string(), &["-f", "--verify"]);
    attached.wait_for_snapshot();
    target.ask(&["spawn 5", "spawn 6"]);
    assert_eq!(target.exit(0), 0);
    let (t, _) = attached.end(None, &[]);
    assert_eq!(t.status, 0, "{}", t.evidence());
    assert!(t.replay.problems.is_empty(), "{:?}", t.replay.problems);
    assert_eq!(t.verify_totals().mismatched_pages, 0, "{}", t.evidence());
    let children: Vec<i32> = t
        .events("fork")
        .filter_map(|e| match e {
            Event::Fork { pid: p, child, .. } if *p == pid => Some(*child),
            _ => None,
        })
        .collect();
    assert_eq!(children.len(), 2, "{}", t.stderr);
    for child in children {
        let fork_at = t
            .lines
            .iter()
            .position(|l| matches!(&l.event, Event::Fork { child: c, .. } if *c == child));
        let exec_at = t.lines.iter().position(
            |l| matches!(&l.event, Event::Exec { pid: p, attached: false, .. } if *p == child),
        );
        assert!(
            matches!((fork_at, exec_at), (Some(f), Some(e)) if f < e),
            "child {child}: fork at {fork_at:?}, exec at {exec_at:?}"
        );
    }
    let statuses: Vec<Option<i32>> = t
        .events("exit")
        .filter_map(|e| match e {
            Event::Exit { pid: p, status, .. } if *p != pid => Some(*status),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, [Some(5), Some(6)], "{}", t.stderr);
}

/// A process stopped by SIGSTOP (state `T`) is followed as it is and, once attach has detached,
/// is still stopped, untraced; SIGCONT lets it go on as ever.
#[test]
fn attach_to_a_stopped_process_leaves_it_stopped() {
    let mut target = Target::start();
    let pid = target.pid;
    target.ask(&["map 8", "touch 0 0 4"]);
    kill(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
    let deadline = Instant::now() + HANG;
    while state(pid) != 'T' {
        assert!(Instant::now() < deadline, "not stopped: {}", state(pid));
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut attached = Attached::start(&pid.to_string(), &[]);
    attached.wait_for_snapshot();
    // Followed while stopped: a timed sample has read it.
    attached.wait_for_a_sample_of(pid);
    let (t, _) = attached.end(Some(Signal::SIGINT), &[]);
    assert_eq!(t.status, 0, "{}", t.stderr);
    assert!(
        t.events("exec").any(|l| matches!(
            l,
            Event::Exec { pid: p, attached: true, .. } if *p == pid
        )),
        "no attached exec line for {pid}"
    );
    // Stopped, and it stays so (a process let go would run within these 300 ms).
    for _ in 0..3 {
        assert_eq!(state(pid), 'T', "after the detach");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(tracers(pid).iter().all(|&(_, tracer)| tracer == 0));
    kill(Pid::from_raw(pid), Signal::SIGCONT).unwrap();
    let answers = target.ask(&["touch 0 4 4", "truth"]);
    assert_eq!(
        same_in_every_run(&answers),
        [
            "ok touch",
            "region \"r0\" of 32768 bytes: 8 present",
            "ok truth"
        ]
    );
    assert_eq!(target.exit(0), 0);
}

/// A pid that names no process: exit 1, one line on stderr naming it, nothing on stdout; in a
/// list with a live process, that process is left as it was.
#[test]
fn attach_to_a_pid_that_does_not_exist_is_one_line() {
    let mut gone = Command::new("true").spawn().expect("running true");
    gone.wait().unwrap();
    let gone = gone.id().to_string();
    let target = Target::start();
    for pids in [gone.clone(), format!("{},{gone}", target.pid)] {
        let mut cmd = Command::new(bin());
        let (status, stdout, stderr) = run_within(cmd.args(["attach", "-p", &pids]), HANG);
        assert_eq!(status, 1, "-p {pids}: {stderr}");
        assert_eq!(stdout, "", "-p {pids}");
        assert_eq!(stderr.lines().count(), 1, "-p {pids}: {stderr}");
        assert!(stderr.contains(&gone), "-p {pids}: {stderr}");
    }
    let mut target = target;
    assert!(tracers(target.pid).iter().all(|&(_, tracer)| tracer == 0));
    assert_eq!(target.ask(&["map 1"]), ["ok map r0"]);
    assert_eq!(target.exit(0), 0);
}

/// A user who may not trace another user's process is told, in one line, what would let them:
/// root or `CAP_SYS_PTRACE`.
#[test]
fn attach_as_another_user_names_the_fix() {
    if !can_become_nobody() {
        return;
    }
    let copy = WorldCopy::new();
    let sleeper = KilledAtEnd(
        Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("running sleep"),
    );
    let pid = sleeper.0.id().to_string();
    let (status, stdout, stderr) =
        run_within(&mut as_nobody(&copy.0, &[], &["attach", "-p", &pid]), HANG);
    assert_eq!(status, 1, "{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("CAP_SYS_PTRACE") && stderr.contains("root"),
        "{stderr}"
    );
    let sleeper_pid = sleeper.0.id() as i32;
    assert!(tracers(sleeper_pid).iter().all(|&(_, tracer)| tracer == 0));
}

/// No `-p`, a pid 0, a pid that is not a number: usage errors (2), which name the option.
#[test]
fn attach_usage_errors() {
    for args in [
        &["attach"][..],
        &["attach", "-p", "0"],
        &["attach", "-p", "abc"],
    ] {
        let (status, stdout, stderr) = run_within(Command::new(bin()).args(args), HANG);
        assert_eq!(status, 2, "{args:?}: {stderr}");
        assert_eq!(stdout, "", "{args:?}");
        assert!(stderr.contains("-p"), "{args:?}: {stderr}");
    }
    // A userfaultfd would have to be made inside the running program: one line, status 2.
    let (status, stdout, stderr) = run_within(
        Command::new(bin()).args(["attach", "-p", "1", "--faults", "uffd"]),
        HANG,
    );
    assert_eq!((status, stdout.as_str()), (2, ""), "{stderr}");
    assert!(
        stderr.contains("--faults records or --faults scan")
            && stderr.contains("Usage: mevi-actors attach"),
        "{stderr}"
    );
}

/// The pages a process makes while attached are found, by scans or by the samples that describe
/// its new mappings: `unseen` bounds only what came and went (it used to take every page of a
/// new mapping for one that might have: "scans found 0 faults' pages; at most 2240").
#[test]
fn pages_made_while_attached_are_found_not_unseen() {
    let mut target = Target::start();
    let mut attached = Attached::start(&target.pid.to_string(), &[]);
    attached.wait_for_snapshot();
    target.ask(&["map 512", "touch 0 0 512"]);
    assert_eq!(target.exit(0), 0);
    let (t, _) = attached.end(None, &[]);
    assert_eq!(t.status, 0, "{}", t.stderr);
    let unseen = t
        .events("unseen")
        .find_map(|e| match e {
            Event::Unseen { found, at_most, .. } => Some((*found, *at_most)),
            _ => None,
        })
        .expect("an unseen line");
    assert!(unseen.0 >= 512, "{unseen:?}: {}", t.stderr);
    // A few faults of the program's own (its stack, libc) are not pages of a mapping it made.
    assert!(unseen.1 < 64, "{unseen:?}: {}", t.stderr);
}

/// Root with CAP_SYS_PTRACE whose ptrace calls are refused all the same (a seccomp filter, as a
/// container's profile may have) is told so, in one line, with no summary table: not "run as
/// root".
#[test]
fn attach_refused_though_privileged_says_why_in_one_line() {
    let mut target = Target::start();
    let wrapper = crate::util::workload("u25_no_ptrace");
    let (status, _, stderr) = crate::util::run_bounded(Command::new(&wrapper).arg(bin()).args([
        "attach",
        "-p",
        &target.pid.to_string(),
        "-o",
        "/dev/null",
    ]));
    assert_eq!(status, 1, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("ptrace refused") && stderr.contains("seccomp"),
        "{stderr}"
    );
    assert!(!stderr.contains("run as root"), "{stderr}");
    assert_eq!(target.exit(0), 0);
}
