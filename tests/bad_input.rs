//! What cannot be traced is refused in one line with the status a shell would give.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::util::{bin, run_bounded, scratch, trace};

fn run_cli(args: &[&str]) -> (i32, String, String) {
    run_bounded(Command::new(bin()).args(args))
}

/// A fresh file holding `bytes`, with permission bits `mode`; returns its path.
fn file_with(name: &str, bytes: &[u8], mode: u32) -> String {
    let path = scratch(name);
    std::fs::write(&path, bytes).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path.to_str().unwrap().to_string()
}

/// The first 64 bytes of an ELF file of the given class (1: 32-bit, 2: 64-bit), and nothing else.
fn elf_header(class: u8) -> Vec<u8> {
    let mut header = vec![0x7f, b'E', b'L', b'F', class, 1, 1, 0];
    header.resize(64, 0);
    header
}

fn one_line(stderr: &str) -> &str {
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line of error, got: {stderr:?}");
    lines[0]
}

#[test]
fn a_program_that_does_not_exist_is_127() {
    let (status, stdout, stderr) = run_cli(&["run", "--", "no-such-program-xyz"]);
    assert_eq!(status, 127);
    assert!(stdout.is_empty());
    assert!(one_line(&stderr).contains("no-such-program-xyz: command not found"));
    let (status, _, stderr) = run_cli(&["run", "--", "/nonexistent/prog"]);
    assert_eq!(status, 127);
    assert!(one_line(&stderr).contains("/nonexistent/prog"));
}

#[test]
fn a_file_that_is_not_executable_is_126() {
    let path = file_with("not-executable", b"#!/bin/sh\n", 0o644);
    let (status, _, stderr) = run_cli(&["run", "--", &path]);
    assert_eq!(status, 126);
    assert!(one_line(&stderr).contains("permission denied"));
    let (status, _, stderr) = run_cli(&["run", "--", "/tmp"]);
    assert_eq!(status, 126);
    assert!(one_line(&stderr).contains("is a directory"));
}

/// Runs mevi-actors as an unprivileged user, as a user without root would.
fn as_nobody(args: &[&str]) -> Option<(i32, String, String)> {
    if !crate::util::can_become_nobody() {
        return None;
    }
    let copy = crate::util::WorldCopy::new();
    Some(run_bounded(&mut crate::util::as_nobody(&copy.0, &[], args)))
}

#[test]
fn userfaultfd_not_permitted_names_the_fixes_and_no_faults_still_traces() {
    let sysctl = std::fs::read_to_string("/proc/sys/vm/unprivileged_userfaultfd").unwrap();
    let Some((status, stdout, stderr)) = as_nobody(&["run", "--", "/bin/true"]) else {
        return;
    };
    if sysctl.trim() == "0" {
        assert_eq!(status, 1, "{stderr}");
        assert!(stdout.is_empty());
        let line = one_line(&stderr);
        for fix in ["root", "vm.unprivileged_userfaultfd=1", "--no-faults"] {
            assert!(line.contains(fix), "{line:?} should name {fix}");
        }
    } else {
        assert_eq!(status, 0, "{stderr}");
    }
    let (status, stdout, stderr) = as_nobody(&["run", "--no-faults", "--", "/bin/true"]).unwrap();
    assert_eq!(status, 0, "{stderr}");
    let lines = crate::util::parse_stream(&stdout);
    assert!(stdout.starts_with("{\"seq\":0,"));
    assert!(stdout.contains("\"faults\":false"));
    assert!(
        lines
            .iter()
            .any(|l| stdout.contains("\"ev\":\"map\"") && l.seq > 0)
    );
    assert!(!stdout.contains("\"ev\":\"resident\""));
}

#[test]
fn no_faults_traces_mappings_only() {
    let t = trace(&["--no-faults"], &["/bin/true"]);
    assert_eq!(t.status, 0, "{}", t.stderr);
    assert!(t.events("map").count() > 5);
    assert_eq!(t.events("resident").count(), 0);
    assert!(
        t.events("map")
            .all(|e| matches!(e, mevi_actors::event::Event::Map { tracked: false, .. }))
    );
}

#[test]
fn a_program_the_kernel_cannot_exec_gets_the_shells_status_and_reason() {
    // A 64-bit ELF header with nothing behind it: execve fails with ENOEXEC, after the checks.
    let elf = file_with("bad-elf", &elf_header(2), 0o755);
    let (status, _, stderr) = run_cli(&["run", "--no-summary", "--", &elf]);
    assert_eq!(status, 126);
    assert!(one_line(&stderr).contains("exec format error"), "{stderr}");
    // A script whose interpreter does not exist: ENOENT, 127.
    let script = file_with("bad-interpreter", b"#!/nonexistent/interpreter\n", 0o755);
    let (status, _, stderr) = run_cli(&["run", "--no-summary", "--", &script]);
    assert_eq!(status, 127);
    assert!(one_line(&stderr).contains("not found"), "{stderr}");
}

/// Options come before the program, as for strace: an unknown one is clap's error (exit 2), not
/// a program called `-p`.
#[test]
fn an_unknown_option_is_an_error_not_a_program() {
    for args in [
        &["run", "-p", "1234"][..],
        &["run", "--no-fault", "/bin/true"],
        &["run", "-e", "trace=mmap", "/bin/true"],
    ] {
        let (status, stdout, stderr) = run_cli(args);
        assert_eq!(status, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: nothing was run: {stdout}");
        assert!(stderr.contains("unexpected argument"), "{args:?}: {stderr}");
    }
    // The program's own options stay its own, after its name or after `--`.
    let (status, stdout, _) = run_cli(&["run", "-o", "/dev/null", "/bin/echo", "-n", "--x"]);
    assert_eq!((status, stdout.as_str()), (0, "--x"));
}

/// Options that cannot go together, or a value out of range: clap's error, exit 2, and nothing
/// is run.
#[test]
fn conflicting_or_out_of_range_options_are_usage_errors() {
    for (args, says) in [
        (
            &["run", "--no-faults", "--faults", "scan", "/bin/echo", "x"][..],
            "--no-faults",
        ),
        (
            &[
                "run",
                "--no-faults",
                "--touch-stacks",
                "4",
                "/bin/echo",
                "x",
            ],
            "--no-faults",
        ),
        (
            &[
                "run",
                "--faults",
                "scan",
                "--touch-stacks",
                "4",
                "/bin/echo",
                "x",
            ],
            "--faults scan",
        ),
        (
            &["run", "--no-faults", "--sample-ms", "5", "/bin/echo", "x"],
            "--no-faults",
        ),
        (&["run", "--sample-ms", "0", "/bin/echo", "x"], "1..=60000"),
        (
            &["run", "--faults", "sometimes", "/bin/echo", "x"],
            "possible values: uffd, scan",
        ),
        (
            &["run", "--touch-stacks", "2147483648", "/bin/echo", "x"],
            "0..=2147483647",
        ),
    ] {
        let (status, stdout, stderr) = run_cli(args);
        assert_eq!(status, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: nothing was run: {stdout}");
        // clap's form: `error: ` first, then what is wrong and how to go on.
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

/// `-o -` is stdout (the program's stdout then goes to stderr, as without -o).
#[test]
fn output_dash_is_stdout() {
    let (status, stdout, stderr) = run_cli(&["run", "--no-summary", "-o", "-", "/bin/echo", "hi"]);
    assert_eq!(status, 0, "{stderr}");
    assert!(!std::path::Path::new("-").exists(), "no file named -");
    assert!(stdout.starts_with("{\"seq\":0"), "{stdout}");
    assert!(
        stderr.contains("hi"),
        "the program's output went to stderr: {stderr}"
    );
}

#[test]
fn version_is_printed_at_the_top_and_for_each_command() {
    for args in [&["--version"][..], &["run", "--version"]] {
        let (status, stdout, _) = run_cli(args);
        assert_eq!(status, 0);
        let version = stdout.trim();
        assert!(
            version.starts_with("mevi-actors") && version.ends_with(env!("CARGO_PKG_VERSION")),
            "{args:?}: {version}"
        );
    }
}

/// `--verify-every` implies `--verify`; `demo` takes `--no-faults`, and its summary says the
/// resident figures were not measured; a log to a file is plain.
#[test]
fn verify_every_implies_verify_and_demo_takes_run_options() {
    let (status, _, stderr) = run_cli(&[
        "run",
        "--verify-every",
        "50",
        "-o",
        "/dev/null",
        "/bin/true",
    ]);
    assert_eq!(status, 0, "{stderr}");
    assert!(stderr.contains("checks against the kernel"), "{stderr}");

    let (status, stdout, stderr) = run_cli(&["demo", "--no-faults"]);
    assert_eq!(status, 0, "{stderr}");
    assert!(stdout.contains("\"faults\":false"), "{stdout}");
    // Not "peak resident 0 B": what was not followed was not measured.
    assert!(stderr.contains("not measured"), "{stderr}");
    assert!(!stderr.contains("peak resident 0 B"), "{stderr}");

    let (_, _, stderr) = run_bounded(Command::new(bin()).env("MEVI_LOG", "debug").args([
        "run",
        "-o",
        "/dev/null",
        "/bin/true",
    ]));
    assert!(stderr.contains("DEBUG"), "a debug log: {stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "no colour codes in a log that is not a terminal"
    );
}

/// `replay` on damaged streams: a line cut short or garbage is an error naming its line (exit 2),
/// or skipped with `--lenient`, which still gives the figures of the good lines and says the
/// trace is incomplete; a range that ends before it starts is a stream problem (exit 1), not a
/// panic (a remap's did panic); a reader that closes the pipe early ends it quietly.
#[test]
fn replay_says_what_is_wrong_with_a_damaged_stream() {
    let stream = scratch("replay-damaged");
    let (status, _, stderr) = run_cli(&[
        "run",
        "-o",
        stream.to_str().unwrap(),
        crate::util::workload("one_thread").to_str().unwrap(),
    ]);
    assert_eq!(status, 0, "{stderr}");
    let text = std::fs::read_to_string(&stream).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let damaged = |name: &str, body: String| {
        let path = scratch(name);
        std::fs::write(&path, body).unwrap();
        path.to_str().unwrap().to_string()
    };

    // Cut mid-line, as a SIGKILL of mevi-actors leaves it.
    let half = lines.len() / 2;
    let cut = damaged("replay-cut", crate::util::cut_inside_line(&text, half));
    let cut_line = half + 1;
    let (status, _, stderr) = run_cli(&["replay", &cut]);
    assert_eq!(status, 2, "{stderr}");
    assert!(stderr.contains(&format!("line {cut_line} ")), "{stderr}");
    let (status, stdout, stderr) = run_cli(&["replay", "--lenient", &cut]);
    assert_eq!(status, 0, "{stderr}");
    assert!(stdout.contains("     pid "), "{stdout}");
    assert!(stderr.contains("incomplete"), "{stderr}");

    // A garbage line in the middle.
    let mut garbage = lines.clone();
    garbage.insert(3, "not json");
    let garbage = damaged("replay-garbage", garbage.join("\n"));
    let (status, _, stderr) = run_cli(&["replay", &garbage]);
    assert_eq!(status, 2, "{stderr}");
    assert!(stderr.contains("line 4 "), "{stderr}");

    // A map line whose range ends before it starts.
    let mut events: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let map = events
        .iter_mut()
        .find(|e| e["ev"] == "map")
        .expect("a map line");
    let start = map["start"].as_u64().unwrap();
    map["end"] = (start - 4096).into();
    let inverted = damaged(
        "replay-inverted",
        events.iter().map(|e| format!("{e}\n")).collect(),
    );
    let (status, _, stderr) = run_cli(&["replay", &inverted]);
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("ends before it starts"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // A reader that stops after one line.
    let (status, stdout, stderr) = run_bounded(Command::new("bash").args([
        "-c",
        &format!(
            "set -o pipefail; {} replay {} | head -1",
            bin(),
            stream.display()
        ),
    ]));
    assert_eq!((status, stdout.lines().count()), (0, 1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `--buffer` takes a size with a unit; a size it cannot use is a usage error naming the option.
#[test]
fn a_buffer_size_that_cannot_be_used_is_a_usage_error() {
    for size in ["0", "lots", "4GiB"] {
        let (status, stdout, stderr) = run_cli(&["run", "--buffer", size, "/bin/true"]);
        assert_eq!(status, 2, "--buffer {size}: {stderr}");
        assert!(stdout.is_empty());
        assert!(stderr.contains("--buffer"), "{stderr}");
    }
    for size in ["1", "500k", "4k"] {
        let (status, _, stderr) =
            run_cli(&["run", "--buffer", size, "-o", "/dev/null", "/bin/true"]);
        assert_eq!(status, 0, "--buffer {size}: {stderr}");
    }
}
