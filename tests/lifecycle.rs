//! Processes and threads: exit statuses, signals, spawn, exec from a thread, and what happens
//! when mevi-actors itself is interrupted or killed.

use std::process::Command;
use std::time::{Duration, Instant};

use mevi_actors::event::{Event, ForkKind};

use crate::util::{bin, exec_pid, run_in_background, scratch, trace, wait_for_line, workload};

#[test]
fn exit_status_is_the_programs() {
    for (arg, status) in [("0", 0), ("42", 42), ("255", 255)] {
        let t = trace(&[], &[workload("exit_code").as_os_str(), arg.as_ref()]);
        assert_eq!(t.status, status);
        let exit = t.events("exit").last().cloned().expect("an exit event");
        assert!(matches!(exit, Event::Exit { status: Some(s), signal: None, .. } if s == status));
    }
}

#[test]
fn death_by_signal_gives_128_plus_n_and_the_signal_name() {
    for (arg, sig, name) in [
        ("segv", 11, "SIGSEGV"),
        ("abort", 6, "SIGABRT"),
        ("kill", 9, "SIGKILL"),
    ] {
        let t = trace(&[], &[workload("exit_code").as_os_str(), arg.as_ref()]);
        assert_eq!(t.status, 128 + sig, "{arg}");
        let exit = t.events("exit").last().cloned().expect("an exit event");
        assert!(
            matches!(&exit, Event::Exit { signal: Some(s), status: None, .. } if s == name),
            "{exit:?}"
        );
    }
}

#[test]
fn posix_spawn_children_share_then_leave_the_parents_space() {
    let t = trace(&[], &[workload("spawn")]);
    assert_eq!(t.status, 0, "{}", t.stderr);
    t.assert_matches_kernel();
    let vforks: Vec<(i32, u64, u64)> = t
        .events("fork")
        .filter_map(|e| match e {
            Event::Fork {
                child,
                kind: ForkKind::Vfork,
                space,
                child_space,
                ..
            } => Some((*child, *space, *child_space)),
            _ => None,
        })
        .collect();
    assert_eq!(
        vforks.len(),
        2,
        "posix_spawn is a vfork-like clone: {vforks:?}"
    );
    for (child, space, child_space) in &vforks {
        assert_eq!(
            space, child_space,
            "a vfork child shares its parent's space"
        );
        let exec_space = t
            .events("exec")
            .find_map(|e| match e {
                Event::Exec { pid, space, .. } if pid == child => Some(*space),
                _ => None,
            })
            .expect("the spawned child execs");
        assert_ne!(exec_space, *space, "exec gives the child a new space");
    }
    let statuses: Vec<Option<i32>> = t
        .events("exit")
        .filter_map(|e| match e {
            Event::Exit { pid, status, .. } if vforks.iter().any(|v| v.0 == *pid) => Some(*status),
            _ => None,
        })
        .collect();
    assert_eq!(statuses.len(), 2);
    assert!(
        statuses.contains(&Some(0)) && statuses.contains(&Some(5)),
        "{statuses:?}"
    );
}

#[test]
fn exec_from_a_thread_that_is_not_the_leader() {
    let t = trace(&[], &[workload("exec_thread")]);
    assert_eq!(t.status, 0, "{}", t.stderr);
    t.assert_matches_kernel();
    let execs: Vec<(i32, i32, u64)> = t
        .events("exec")
        .filter_map(|e| match e {
            Event::Exec {
                pid, tid, space, ..
            } => Some((*pid, *tid, *space)),
            _ => None,
        })
        .collect();
    assert_eq!(execs.len(), 2, "{execs:?}");
    let (pid, tid, space) = execs[1];
    assert_eq!(pid, execs[0].0, "the process keeps its pid");
    assert_ne!(
        tid, pid,
        "the exec was made by a thread that was not the leader"
    );
    assert_ne!(space, execs[0].2, "exec starts a new space");
    let after = &t.truth("region", "after_exec")[0];
    assert_eq!(after.pid, pid);
}

#[test]
fn ctrl_c_reaches_the_program_and_mevi_actors_reports_it() {
    let file = scratch("ctrl-c");
    let child = run_in_background(&file, &["sleep", "60"], true);
    let lines = wait_for_line(&file, "exec");
    let sleeper = exec_pid(&lines);
    let pgid = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(sleeper))).unwrap();
    // What a terminal does on Ctrl-C: SIGINT to the whole foreground process group.
    nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGINT).unwrap();
    let (status, _, stderr) = child.join().unwrap();
    assert_eq!(status, 130, "{stderr}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("\"signal\":\"SIGINT\""), "{text}");
    assert!(text.lines().last().unwrap().contains("\"ev\":\"summary\""));
}

#[test]
fn killing_mevi_actors_never_leaves_the_program_hung() {
    let file = scratch("sigkill");
    let _run = crate::util::MachineHold::shared();
    let mut child = Command::new(bin())
        .args(["run", "-o"])
        .arg(&file)
        .args(["--", "sleep", "60"])
        .spawn()
        .unwrap();
    let lines = wait_for_line(&file, "exec");
    let sleeper = exec_pid(&lines);
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::path::Path::new(&format!("/proc/{sleeper}")).exists() {
        let state = std::fs::read_to_string(format!("/proc/{sleeper}/stat")).unwrap_or_default();
        if state.contains(") Z") {
            break; // a zombie waiting for init to reap it: not running, not hung
        }
        assert!(
            Instant::now() < deadline,
            "the traced program outlived mevi-actors"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_to_mevi_actors_is_passed_on() {
    let file = scratch("sigterm");
    let handle = run_in_background(&file, &["sleep", "60"], false);
    wait_for_line(&file, "exec");
    // Our own child is the mevi-actors process: find it by the stream file in its argv.
    let me = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .find(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline);
            cmdline.starts_with(bin()) && cmdline.contains(file.to_str().unwrap())
        })
        .expect("mevi-actors is running");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(me),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let (status, _, stderr) = handle.join().unwrap();
    assert_eq!(status, 128 + 15, "{stderr}");
}

#[test]
fn children_stopped_and_continued_while_being_set_up_still_finish() {
    // A SIGSTOP landing while the tracer injects into the new child used to leave it stopped.
    for delay in ["0", "150", "600"] {
        let t = trace(
            &["--no-summary"],
            &[workload("job_control").as_os_str(), delay.as_ref()],
        );
        assert_eq!(t.status, 0, "delay {delay}: {}", t.stderr);
        assert_eq!(t.events("exit").count(), 41);
    }
}

#[test]
fn a_child_whose_parent_is_killed_before_its_fork_is_reported_is_still_followed() {
    for _ in 0..5 {
        let t = trace(&["--no-summary"], &[workload("orphans")]);
        assert_eq!(t.status, 0, "{}", t.stderr);
        assert!(t.replay.problems.is_empty(), "{:?}", t.replay.problems);
        // Every process that was announced has an exit line.
        let born = t.events("fork").count();
        assert_eq!(t.events("exit").count(), born + 1);
    }
}

/// `--idle-poll` holds the kernel's CPU latency request at 0 while the program runs (the program
/// reads the request's current value itself), and changes nothing in what the stream says.
#[test]
fn idle_poll_holds_the_cpu_latency_request_while_tracing() {
    // The request's value: one native 32-bit integer.
    let read_request = ["od", "-An", "-td4", "-N4", "/dev/cpu_dma_latency"];
    let t = trace(&["--idle-poll"], &read_request);
    assert_eq!(t.status, 0, "{}", t.stderr);
    assert_eq!(
        t.stdout.trim(),
        "0",
        "the latency request seen by the program"
    );
    let t = trace(
        &["--idle-poll", "--verify"],
        &[workload("threads_region").as_os_str(), "4".as_ref()],
    );
    assert_eq!(t.status, 0, "{}", t.stderr);
    t.assert_matches_kernel();
}

/// A fork child killed before its first stop is never set up, yet it was announced: its `exit`
/// line must still come, with the signal, and its summary row must say how it ended.
#[test]
fn a_child_killed_before_its_first_stop_still_has_its_exit() {
    let children = 20;
    let t = trace(
        &["--verify"],
        &[
            workload("killed_at_birth").as_os_str(),
            children.to_string().as_ref(),
        ],
    );
    assert_eq!(t.status, 0, "{}", t.stderr);
    assert!(
        t.stdout.contains(&format!("killed {children}")),
        "{}",
        t.stdout
    );
    let root = exec_pid(&t.lines);
    let forked: Vec<i32> = t
        .events("fork")
        .filter_map(|e| match e {
            Event::Fork { pid, child, .. } if *pid == root => Some(*child),
            _ => None,
        })
        .collect();
    assert_eq!(forked.len(), children);
    for child in &forked {
        let ended = t.events("exit").any(|e| {
            matches!(e, Event::Exit { pid, signal: Some(s), .. } if pid == child && s == "SIGKILL")
        });
        assert!(ended, "no exit line with SIGKILL for child {child}");
    }
    let rows = t.summary().0;
    for child in &forked {
        let row = rows
            .iter()
            .find(|p| p.pid == *child)
            .expect("a summary row");
        assert_eq!(row.signal.as_deref(), Some("SIGKILL"), "{row:?}");
    }
    assert!(t.replay.problems.is_empty(), "{:?}", t.replay.problems);
}
