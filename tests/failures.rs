//! Failure paths between the kernel and the stream, made to happen (issue 9, "Nothing silent"):
//! a UTF-8 argv cut in the summary, a new thread in a stopped group, a lane that fails, a failed
//! pagemap read, a failed `kcmp`, a checkpoint that cannot complete, and an actor's panic. Every
//! run is bounded in time (a hang fails the test) and each checks the exit status and what the
//! stream says. Faults are injected with `MEVI_TEST_FAULT` (src/test_hooks.rs).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mevi_actors::event::{Event, ForkKind, Line, SpaceId, VerifyPoint, WarningKind};
use mevi_actors::run::VERIFY_FAILED;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::util::{
    Traced, bin, exec_pid, parse_stream, run_bounded, run_in_background, run_within, scratch,
    trace_within, wait_for_line, workload,
};

/// Every run here takes a few seconds at most, traced; beyond this it hangs.
const HANG: Duration = Duration::from_secs(60);
/// The exit status the issue asks for when an actor of mevi-actors fails (`EX_SOFTWARE`).
const ACTOR_FAILED: i32 = 70;
/// The address space of the program mevi-actors starts (`space` of the root's `exec` line).
const ROOT_SPACE: SpaceId = 0;

// ---------------------------------------------------------------------------------------------
// Runs with a fault injected.

/// `mevi-actors run FLAGS -o FILE -- PROGRAM` with `MEVI_TEST_FAULT=fault`.
fn fault_command<S: AsRef<OsStr>>(
    fault: &str,
    flags: &[&str],
    file: &Path,
    program: &[S],
) -> Command {
    let mut cmd = Command::new(bin());
    cmd.env("MEVI_TEST_FAULT", fault)
        .arg("run")
        .args(flags)
        .arg("-o")
        .arg(file)
        .arg("--")
        .args(program);
    cmd
}

/// `util::trace_within` with `MEVI_TEST_FAULT=fault`, failing the test if the run hangs.
fn trace_with_fault<S: AsRef<OsStr>>(fault: &str, flags: &[&str], program: &[S]) -> Traced {
    let file = scratch("fault-stream");
    let (status, stdout, stderr) =
        run_within(&mut fault_command(fault, flags, &file, program), HANG);
    Traced::read(&file, status, stdout, stderr)
}

/// The stdout of the program run without mevi-actors, which exits 0.
fn untraced_stdout<S: AsRef<OsStr>>(program: &[S]) -> String {
    let (status, stdout, stderr) = run_bounded(Command::new(&program[0]).args(&program[1..]));
    assert_eq!(status, 0, "untraced: {stderr}");
    stdout
}

/// What a workload prints that is the same in every run: its truth lines about the regions it
/// made (name, size, present pages) and the pages it expects; not addresses, pids, or the
/// whole-process figures (anon, rollup), which vary.
fn deterministic_output(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| l.starts_with("{\"truth\""))
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            match v["truth"].as_str()? {
                "region" => Some(format!(
                    "region {} of {} bytes: {} present",
                    v["name"],
                    v["end"].as_u64()? - v["start"].as_u64()?,
                    v["present"]
                )),
                "expect" => Some(format!("expect {}: {}", v["name"], v["pages"])),
                _ => None,
            }
        })
        .collect()
}

/// The traced program printed what it prints untraced (its deterministic part, not empty).
fn assert_same_output(traced: &Traced, untraced: &str) {
    let expected = deterministic_output(untraced);
    assert!(!expected.is_empty(), "untraced output: {untraced}");
    assert_eq!(
        deterministic_output(&traced.stdout),
        expected,
        "the program's own output, traced vs untraced; mevi-actors said:\n{}",
        traced.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// What the stream says.

/// The seq of the first `warning` line about `what` in `space`, failing the test without one.
/// It comes before the summary, which counts every warning line.
fn first_warning(t: &Traced, what: WarningKind, space: SpaceId) -> u64 {
    let warnings: Vec<&Line> = t
        .lines
        .iter()
        .filter(|l| matches!(l.event, Event::Warning { .. }))
        .collect();
    let seq = warnings
        .iter()
        .find(|l| {
            matches!(&l.event, Event::Warning { what: w, space: s, .. }
                if *w == what && *s == Some(space))
        })
        .unwrap_or_else(|| {
            panic!(
                "no {what:?} warning about space {space}; warnings: {warnings:?}\n{}",
                t.stderr
            )
        })
        .seq;
    let summary = t.lines.last().expect("a stream");
    let Event::Summary { totals, .. } = &summary.event else {
        panic!("the stream does not end with its summary: {summary:?}");
    };
    assert!(seq < summary.seq);
    assert_eq!(
        totals.warnings,
        warnings.len() as u64,
        "the summary counts the warning lines"
    );
    seq
}

/// The seq of the root process's `exit` line.
fn root_exit(t: &Traced) -> u64 {
    let root = t
        .lines
        .iter()
        .find_map(|l| match l.event {
            Event::Exec { pid, .. } => Some(pid),
            _ => None,
        })
        .expect("an exec line");
    t.lines
        .iter()
        .find(|l| matches!(l.event, Event::Exit { pid, .. } if pid == root))
        .expect("the root's exit line")
        .seq
}

/// The space's layout is still followed after line `seq`, and only its layout: later mappings
/// appear, later first touches do not (the space is traced as mappings only).
fn assert_mappings_only_after(t: &Traced, space: SpaceId, seq: u64) {
    let later = || {
        t.lines
            .iter()
            .filter(move |l| l.seq > seq && l.event.space() == Some(space))
    };
    let layout = later()
        .filter(|l| {
            matches!(
                l.event,
                Event::Map { .. } | Event::Unmap { .. } | Event::Remap { .. } | Event::Brk { .. }
            )
        })
        .count();
    assert!(
        layout > 0,
        "no layout line of space {space} after line {seq}"
    );
    let touches: Vec<&Line> = later()
        .filter(|l| matches!(l.event, Event::Resident { .. }))
        .collect();
    assert!(
        touches.is_empty(),
        "first touches in space {space} after its lane failed at line {seq}: {touches:?}"
    );
}

/// The `verify` lines of space `space` after line `seq`: whether each was skipped.
fn verify_skips_after(t: &Traced, space: SpaceId, seq: u64) -> Vec<bool> {
    t.lines
        .iter()
        .filter(|l| l.seq > seq)
        .filter_map(|l| match &l.event {
            Event::Verify {
                space: s, skipped, ..
            } if *s == space => Some(skipped.is_some()),
            _ => None,
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// A UTF-8 argv cut in the summary.

/// The summary row once cut `argv.join(" ")` at byte 57: inside a multibyte character the state
/// actor panicked, `run` dropped the panic, and the exit status 3 of `--verify` was lost.
#[test]
fn a_utf8_argv_in_the_summary_keeps_the_verify_failure() {
    let program = workload("one_thread");
    let path = program.to_str().unwrap();
    // The 'é' takes bytes 56 and 57 of the joined argv.
    let padding = 56usize
        .checked_sub(path.len() + 1)
        .unwrap_or_else(|| panic!("the workload path {path} is too long for this test"));
    let arg = format!("{}é-and-more-past-the-cut", "x".repeat(padding));
    let joined = format!("{path} {arg}");
    assert!(!joined.is_char_boundary(57) && joined.len() > 60);

    let t = trace_within(
        &["--verify", "--test-corrupt-state"],
        &[path, arg.as_str()],
        HANG,
    );
    assert_eq!(t.status, VERIFY_FAILED, "{}", t.stderr);
    let (root, argv) = t
        .summary()
        .0
        .first()
        .map(|p| (p.pid, p.argv.clone()))
        .expect("a summary with the program");
    assert_eq!(
        argv,
        [path, arg.as_str()],
        "the stream keeps the whole argv"
    );

    let row = t
        .stderr
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{root} ")) && l.contains(path))
        .unwrap_or_else(|| panic!("no summary row for pid {root}:\n{}", t.stderr));
    let shown = row[row.find(path).unwrap()..].trim_end();
    let shown = shown
        .strip_suffix("...")
        .or_else(|| shown.strip_suffix('…'))
        .unwrap_or(shown);
    assert!(
        joined.starts_with(shown) && shown.len() > path.len() + 1,
        "the row shows {shown:?}, not the start of {joined:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// A new thread created while its group is stopped.

/// Whether `ready` came true within `within` (polled).
fn ready_within(within: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while !ready() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// How many threads `pid` has (`num_threads` in `/proc/PID/stat`).
fn thread_count(pid: i32) -> Option<usize> {
    // Field 20, the 18th after the command name.
    crate::util::proc_stat_fields(format!("/proc/{pid}/stat"))?
        .get(17)?
        .parse()
        .ok()
}

/// Threads (tid) and their state letters (`/proc/PID/task/TID/stat`).
type ThreadStates = Vec<(i32, char)>;

/// Every thread of `pid` and its state letter. None when the list may be incomplete: reading
/// the directory while a thread is reaped can skip a live thread.
fn thread_states(pid: i32) -> Option<ThreadStates> {
    let before = thread_count(pid)?;
    let states: ThreadStates = std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|tid| {
            let state = crate::util::proc_state(format!("/proc/{pid}/task/{tid}/stat"))?;
            Some((tid, state))
        })
        .collect();
    let complete = thread_count(pid)? == before && states.len() == before;
    complete.then_some(states)
}

/// Waits until every thread of `pid` is stopped (`T`, or `t` under ptrace) or dead; the states
/// last seen if some are not within `within` (a thread the tracer lets go from one stop on its
/// way to the next runs for a moment).
fn all_stopped_within(pid: i32, within: Duration) -> Result<ThreadStates, ThreadStates> {
    let mut states = Vec::new();
    let stopped = ready_within(within, || {
        let Some(now) = thread_states(pid) else {
            return false;
        };
        states = now;
        !states.is_empty()
            && states
                .iter()
                .all(|(_, s)| matches!(s, 't' | 'T' | 'Z' | 'X'))
    });
    if stopped { Ok(states) } else { Err(states) }
}

/// Waits until every thread of `pid` is stopped and stays so, with `count` unchanged, over two
/// looks 50 ms apart; the count then. The states last seen if that does not happen `within`.
fn settled_within(
    pid: i32,
    count: &dyn Fn() -> String,
    within: Duration,
) -> Result<String, ThreadStates> {
    let deadline = Instant::now() + within;
    let mut last = Vec::new();
    while Instant::now() < deadline {
        let first = (all_stopped_within(pid, within).ok(), count());
        std::thread::sleep(Duration::from_millis(50));
        let second = (all_stopped_within(pid, within).ok(), count());
        if let (Some(a), Some(b)) = (&first.0, &second.0)
            && a == b
            && first.1 == second.1
        {
            return Ok(second.1);
        }
        last = second.0.unwrap_or_default();
    }
    Err(last)
}

/// Lets the stopped workload go on and end, however the test ends: a failed assertion must not
/// leave it stopped forever.
struct LetItFinish {
    pid: Option<i32>,
    done: PathBuf,
}

impl Drop for LetItFinish {
    fn drop(&mut self) {
        std::fs::write(&self.done, b"").ok();
        if let Some(pid) = self.pid {
            kill(Pid::from_raw(pid), Signal::SIGCONT).ok();
        }
    }
}

/// SIGSTOP to a program whose threads keep creating threads; a thread created just before the
/// group stop begins, which has not run yet, has the group stop as its first stop, and must stay
/// stopped like the others until SIGCONT. That window is narrow (a few stops in a hundred hit it),
/// so the program is stopped and continued many times.
#[test]
fn a_thread_created_while_its_group_is_stopped_stays_stopped() {
    const ROUNDS: usize = 40;
    const STOPPED_FOR: Duration = Duration::from_millis(100);
    let stream = scratch("stop-threads");
    let counter = scratch("stop-threads-counter");
    let done = scratch("stop-threads-done");
    let program = workload("fail_stop_threads");
    let args = [
        program.to_str().unwrap(),
        counter.to_str().unwrap(),
        done.to_str().unwrap(),
    ];
    let handle = run_in_background(&stream, &args, true);
    let mut release = LetItFinish {
        pid: None,
        done: done.clone(),
    };
    let pid = exec_pid(&wait_for_line(&stream, "exec"));
    release.pid = Some(pid);
    let count = || std::fs::read_to_string(&counter).unwrap_or_default();
    assert!(
        ready_within(HANG, || count().trim().parse::<u64>().unwrap_or(0) >= 50),
        "the workload creates no threads"
    );

    for round in 0..ROUNDS {
        kill(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
        let stopped = all_stopped_within(pid, Duration::from_secs(10)).unwrap_or_else(|states| {
            panic!("round {round}: not every thread stopped within 10 s of SIGSTOP: {states:?}")
        });
        // Under ptrace, a thread the tracer holds at a syscall or attach stop shows `t` too,
        // and may run on for a moment before the SIGSTOP reaches the group (its delivery is a
        // stop of its own, which the tracer answers). The group is stopped once nothing moves:
        // a thread left running would bump the counter every 200 us and never let it settle.
        let before =
            settled_within(pid, &count, Duration::from_secs(10)).unwrap_or_else(|states| {
                panic!("round {round}: the group did not settle within 10 s of SIGSTOP: {states:?}")
            });
        let until = Instant::now() + STOPPED_FOR;
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
            assert_eq!(
                count(),
                before,
                "round {round}: a thread made progress while its group was stopped; threads \
                 when all were stopped: {stopped:?}; now: {:?}",
                thread_states(pid)
            );
        }
        if let Err(states) = all_stopped_within(pid, Duration::from_secs(10)) {
            panic!("round {round}: a thread runs while its group is stopped: {states:?}");
        }
        kill(Pid::from_raw(pid), Signal::SIGCONT).unwrap();
        assert!(
            ready_within(Duration::from_secs(10), || count() != before),
            "round {round}: no progress within 10 s of SIGCONT"
        );
    }
    drop(release);

    let (status, stdout, stderr) = handle.join().unwrap();
    assert_eq!(status, 0, "{stderr}");
    let created: usize = stdout
        .lines()
        .find_map(|l| l.strip_prefix("created ")?.strip_suffix(" threads"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the workload did not finish: {stdout}"));
    let lines = parse_stream(&std::fs::read_to_string(&stream).unwrap());
    let threads = lines
        .iter()
        .filter(|l| matches!(l.event, Event::Thread { pid: p, .. } if p == pid))
        .count();
    // The workload's 4 creators, and the threads they created.
    assert_eq!(
        threads,
        created + 4,
        "a thread line for every thread created"
    );
    assert!(
        lines.iter().any(|l| matches!(
            l.event,
            Event::Exit { pid: p, status: Some(0), .. } if p == pid
        )),
        "the root's exit line with status 0"
    );
}

// ---------------------------------------------------------------------------------------------
// A lane that fails, and a checkpoint that cannot complete.

/// With the lane of the root's space failing: the program ends by itself with its own status and
/// output, the stream says so with a `lane_failed` warning and keeps following the space's
/// mappings, and `--verify` fails.
fn a_failed_lane_lets_the_program_finish(fault: &str) {
    let program = [workload("threads_region").into_os_string(), "8".into()];
    let stdout = untraced_stdout(&program);

    let t = trace_with_fault(fault, &[], &program);
    assert_eq!(t.status, 0, "the program's status: {}", t.stderr);
    assert_same_output(&t, &stdout);
    let warned = first_warning(&t, WarningKind::LaneFailed, ROOT_SPACE);
    assert!(warned < root_exit(&t), "the warning comes before the exit");
    assert_mappings_only_after(&t, ROOT_SPACE, warned);

    let v = trace_with_fault(fault, &["--verify"], &program);
    assert_eq!(
        v.status, VERIFY_FAILED,
        "the stream is no longer exact: {}",
        v.stderr
    );
    first_warning(&v, WarningKind::LaneFailed, ROOT_SPACE);
}

#[test]
fn a_lane_that_cannot_read_its_userfaultfd_lets_the_program_finish() {
    a_failed_lane_lets_the_program_finish("lane-read@0");
}

#[test]
fn a_lane_that_cannot_register_its_userfaultfd_lets_the_program_finish() {
    a_failed_lane_lets_the_program_finish("lane-register@0");
}

#[test]
fn a_checkpoint_that_cannot_complete_is_skipped_and_verify_fails() {
    let t = trace_with_fault(
        "lane-read@0",
        &["--verify", "--verify-every", "5"],
        &[workload("race").to_str().unwrap(), "1"],
    );
    assert_eq!(t.status, VERIFY_FAILED, "{}", t.stderr);
    let warned = first_warning(&t, WarningKind::LaneFailed, ROOT_SPACE);
    let skips = verify_skips_after(&t, ROOT_SPACE, warned);
    assert!(
        !skips.is_empty(),
        "no verify line of space {ROOT_SPACE} after its lane failed"
    );
    assert!(
        skips.iter().all(|skipped| *skipped),
        "checks of space {ROOT_SPACE} after its lane failed: {skips:?} (true: skipped)"
    );
    let skipped_lines = t
        .lines
        .iter()
        .filter(|l| {
            matches!(
                &l.event,
                Event::Verify {
                    skipped: Some(_),
                    ..
                }
            )
        })
        .count() as u64;
    let totals = t.verify_totals();
    assert_eq!(
        totals.skipped_points + totals.unchecked_points,
        skipped_lines,
        "the summary counts every verify line that compared nothing: {totals:?}"
    );
}

/// A thread inside a syscall that ptrace cannot interrupt (a 64 MiB `MADV_POPULATE_WRITE`) does
/// not stop for a checkpoint in time (20 ms here, 2 s in a real run, where a loaded machine was
/// enough): its space is left out of that checkpoint, with a warning that says which thread and
/// where it was, and the other spaces are still checked. Nothing in the stream became inexact, so
/// `--verify` passes, and the summary counts the checks that did not run.
#[test]
fn a_space_whose_thread_will_not_stop_is_left_out_of_that_checkpoint_only() {
    let t = trace_with_fault(
        "checkpoint-impatient",
        &["--verify", "--verify-every", "20"],
        &[workload("populate")],
    );
    assert_eq!(t.status, 0, "{}", t.stderr);
    let child_space = t
        .lines
        .iter()
        .find_map(|l| match l.event {
            Event::Fork { child_space, .. } => Some(child_space),
            _ => None,
        })
        .expect("a fork line");
    // Within 20 ms a loaded machine may not stop a running thread of the root's space either:
    // that space is then left out of that one checkpoint too, which is right; it must still be
    // checked at others (below).
    let all_skips = t
        .lines
        .iter()
        .filter(|l| {
            matches!(
                l.event,
                Event::Warning {
                    what: WarningKind::CheckpointSkipped,
                    ..
                }
            )
        })
        .count();
    let skips: Vec<&str> = t
        .lines
        .iter()
        .filter_map(|l| match &l.event {
            Event::Warning {
                what: WarningKind::CheckpointSkipped,
                space,
                message,
                ..
            } if *space == Some(child_space) => Some(message.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        !skips.is_empty(),
        "no checkpoint_skipped warning: {}",
        t.stderr
    );
    assert!(
        skips.iter().any(|m| m.contains("syscall 28")),
        "no warning names the madvise the thread was in: {skips:?}"
    );
    let root_checkpoints = t
        .lines
        .iter()
        .filter(|l| {
            matches!(
                l.event,
                Event::Verify {
                    space: ROOT_SPACE,
                    point: VerifyPoint::Checkpoint,
                    skipped: None,
                    ..
                }
            )
        })
        .count();
    assert!(root_checkpoints > 0, "the root's space was never checked");
    let totals = t.verify_totals();
    assert_eq!(totals.mismatched_pages, 0);
    assert!(
        totals.skipped_points >= all_skips as u64,
        "the summary counts the skipped checks: {totals:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// A failed pagemap read, a failed kcmp.

#[test]
fn a_failed_pagemap_read_is_a_warning_and_fails_verify() {
    let program = [workload("one_thread")];
    let stdout = untraced_stdout(&program);

    let t = trace_with_fault("pagemap@0", &[], &program);
    assert_eq!(t.status, 0, "the program's status: {}", t.stderr);
    assert_same_output(&t, &stdout);
    first_warning(&t, WarningKind::PagesUnknown, ROOT_SPACE);

    let v = trace_with_fault("pagemap@0", &["--verify"], &program);
    assert_eq!(
        v.status, VERIFY_FAILED,
        "the pages are not known: {}",
        v.stderr
    );
    first_warning(&v, WarningKind::PagesUnknown, ROOT_SPACE);
}

#[test]
fn without_kcmp_a_posix_spawn_child_still_shares_its_parents_space() {
    let t = trace_with_fault("kcmp", &["--verify"], &[workload("spawn")]);
    assert_eq!(t.status, 0, "{}", t.stderr);
    let shared: Vec<(i32, SpaceId, SpaceId)> = t
        .events("fork")
        .filter_map(|e| match e {
            Event::Fork {
                child,
                kind: ForkKind::Vfork | ForkKind::CloneVm,
                space,
                child_space,
                ..
            } => Some((*child, *space, *child_space)),
            _ => None,
        })
        .collect();
    assert_eq!(shared.len(), 2, "posix_spawn twice: {shared:?}");
    assert!(
        shared.iter().all(|(_, space, child)| space == child),
        "a vfork child is in its parent's space: {shared:?}"
    );
    t.assert_matches_kernel();
}

// ---------------------------------------------------------------------------------------------
// An actor's panic.

/// Processes whose command line holds `token` and that are not zombies.
fn still_there(token: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains(token)
                && crate::util::proc_state(format!("/proc/{pid}/stat")) != Some('Z')
        })
        .collect()
}

/// With an actor panicking: the run ends at once with status 70 and one line naming the actor,
/// and no process of the traced program is left running, stopped or hung. Returns how many pids
/// the workload wrote.
fn an_actor_panic_ends_the_run(fault: &str, actor: &str) -> usize {
    // The workload would run 30 s; the run must end long before.
    const WORKLOAD_SECONDS: &str = "30";
    let pids = scratch("actor-pids");
    let stream = scratch("actor-stream");
    let path = workload("fail_actor");
    let program = [
        path.to_str().unwrap(),
        pids.to_str().unwrap(),
        WORKLOAD_SECONDS,
    ];
    let (status, _, stderr) = run_within(
        &mut fault_command(fault, &[], &stream, &program),
        Duration::from_secs(20),
    );
    assert_eq!(status, ACTOR_FAILED, "{stderr}");
    let naming: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("mevi-actors:") && l.to_lowercase().contains(actor))
        .collect();
    assert_eq!(
        naming.len(),
        1,
        "one line naming the {actor} actor:\n{stderr}"
    );

    // Any process of the workload, by its command line, which holds the unique pid file name
    // (the pids it wrote may be none: the lane can fail before main).
    let written: Vec<i32> = std::fs::read_to_string(&pids)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.parse().ok())
        .collect();
    let token = pids.to_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = still_there(token);
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "processes of the traced program outlived the run: {left:?} (pids written: {written:?})"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::remove_file(&stream).ok();
    written.len()
}

#[test]
fn a_lane_panic_ends_the_run_with_70() {
    an_actor_panic_ends_the_run("lane-panic", "lane");
}

#[test]
fn a_state_actor_panic_ends_the_run_with_70() {
    // It panics at the first exit line: the child's, which wrote its pid, as its parent had.
    let written = an_actor_panic_ends_the_run("state-panic", "state");
    assert_eq!(written, 2);
}
