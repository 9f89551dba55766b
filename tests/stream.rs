//! The stream as a product: numbering, replay, separation from the program's output, the demo.

use std::process::Command;
use std::time::{Duration, Instant};

use mevi_actors::event::{Event, Line};
use mevi_actors::model::Replay;

use std::path::PathBuf;

use crate::util::{
    MachineHold, bin, parse_stream, run_bounded, run_in_background, scratch, trace, workload,
};

#[test]
fn seq_has_no_gaps_and_time_never_goes_back() {
    let t = trace(&[], &[workload("fork_touch")]);
    assert!(!t.lines.is_empty());
    for (i, line) in t.lines.iter().enumerate() {
        assert_eq!(line.seq, i as u64);
    }
    assert!(t.lines.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
    assert!(matches!(t.lines[0].event, Event::Start { schema: 1, .. }));
    assert!(matches!(
        t.lines.last().unwrap().event,
        Event::Summary { .. }
    ));
}

#[test]
fn replayed_state_equals_the_state_actors_at_every_exit_and_at_the_end() {
    let t = trace(&[], &[workload("fork_touch")]);
    let mut replay = Replay::new();
    let mut exits = 0;
    for line in &t.lines {
        if let Event::Exit {
            space,
            resident_bytes,
            peak_resident_bytes,
            ..
        } = &line.event
        {
            // The state actor filled these from its own model as it wrote the line, before the
            // line ended the space.
            let s = &replay.spaces[space];
            assert_eq!(s.resident_bytes, *resident_bytes);
            assert_eq!(s.peak_resident_bytes, *peak_resident_bytes);
            exits += 1;
        }
        replay.apply_line(line);
    }
    assert_eq!(exits, 2);
    let Event::Summary { processes, .. } = &t.lines.last().unwrap().event else {
        panic!("no summary");
    };
    for p in processes {
        let space = t.space_of(p.pid);
        assert_eq!(
            p.resident_bytes,
            t.space_at_end(space).resident_bytes,
            "pid {}",
            p.pid
        );
        // Every process has exited: its space has ended, and kept only its peak.
        assert_eq!(replay.spaces[&space].resident_bytes, 0, "pid {}", p.pid);
        assert_eq!(
            replay.spaces[&space].peak_resident_bytes,
            p.peak_resident_bytes
        );
    }
}

#[test]
fn nothing_the_program_prints_reaches_the_stream() {
    // Printed words are assembled at run time, so they appear in no argv the stream records.
    let script =
        r#"echo '{"seq":0,"t_ns":0,"ev":"exit"}'; echo pl$(echo ain) text; printf 'no new%s' line"#;
    let (status, stdout, stderr) =
        run_bounded(Command::new(bin()).args(["run", "--no-summary", "--", "sh", "-c", script]));
    assert_eq!(status, 0);
    let lines: Vec<Line> = parse_stream(&stdout);
    assert!(!stdout.contains("plain text") && !stdout.contains("no newline"));
    // The fake line says seq 0: had it got in, numbering would break.
    assert!(lines.iter().enumerate().all(|(i, l)| l.seq == i as u64));
    assert!(matches!(lines[0].event, Event::Start { .. }));
    assert!(stderr.contains("plain text") && stderr.contains("\"ev\":\"exit\""));
    // With -o the program keeps its stdout.
    let t = trace(&["--no-summary"], &["sh", "-c", "echo kept"]);
    assert_eq!(t.stdout, "kept\n");
}

#[test]
fn the_human_summary_goes_to_stderr() {
    let t = trace(&[], &[workload("fork_touch")]);
    let first = t.stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("mevi-actors: 2 process(es), 2 address space(s)"),
        "{}",
        t.stderr
    );
    assert!(t.stderr.contains("peak") && t.stderr.contains("exit 0"));
}

#[test]
fn the_stream_is_flushed_while_the_program_runs() {
    let file = scratch("live");
    let handle = run_in_background(&file, &["sleep", "3"], false);
    // Timed from the run's start, after any wait for the machine (`util::MachineHold`).
    let started = Instant::now();
    let mut seen_live = false;
    while started.elapsed() < Duration::from_secs(2) {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if text.contains("\"ev\":\"exec\"") {
            seen_live = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, _, _) = handle.join().unwrap();
    assert_eq!(status, 0);
    assert!(
        seen_live,
        "the exec line was not written while the program ran"
    );
}

#[test]
fn demo_runs_a_multithreaded_workload_with_nothing_installed() {
    let file = scratch("demo");
    let (status, _, stderr) = run_bounded(Command::new(bin()).arg("demo").arg("-o").arg(&file));
    assert_eq!(status, 0, "{stderr}");
    let text = std::fs::read_to_string(&file).unwrap();
    let lines = parse_stream(&text);
    let tids: std::collections::HashSet<i32> = lines
        .iter()
        .filter_map(|l| match l.event {
            Event::Resident { tid, .. } => tid,
            _ => None,
        })
        .collect();
    assert!(
        tids.len() >= 5,
        "faults from the main thread and 4 workers: {tids:?}"
    );
    for ev in [
        "exec", "thread", "fork", "map", "unmap", "discard", "resident", "exit",
    ] {
        assert!(
            text.contains(&format!("\"ev\":\"{ev}\"")),
            "no {ev} in the demo"
        );
    }
    let replay = Replay::from_jsonl(&text).unwrap();
    assert!(replay.problems.is_empty(), "{:?}", replay.problems);
    let (status, out, _) = run_bounded(Command::new(bin()).arg("replay").arg(&file));
    assert_eq!(status, 0);
    assert!(out.lines().count() >= 3, "{out}");
}

/// `--coalesce-ms` changes how many `resident` lines there are, never what they replay to: the
/// same program, with ASLR off so that both runs use the same addresses, traced with one line per
/// fault and with touches gathered, ends in the same page states, and both agree with the kernel.
#[test]
fn coalesced_first_touches_replay_to_the_same_state_as_one_line_per_fault() {
    let program = [
        "setarch".into(),
        "--addr-no-randomize".into(),
        workload("coalesce"),
    ];
    let one_per_fault = trace(&["--verify", "--coalesce-ms", "0"], &program);
    let coalesced = trace(&["--verify", "--coalesce-ms", "1000"], &program);
    // Lines and first touches; each line's `faults` is its number of pages.
    let resident = |t: &crate::util::Traced| -> (u64, u64) {
        let (mut lines, mut faults) = (0, 0);
        for e in t.events("resident") {
            if let Event::Resident {
                faults: n,
                start,
                end,
                ..
            } = e
            {
                assert_eq!(*n, (end - start) / crate::util::PAGE, "{e:?}");
                lines += 1;
                faults += n;
            }
        }
        (lines, faults)
    };
    for t in [&one_per_fault, &coalesced] {
        assert_eq!(t.status, 0, "{}", t.stderr);
        t.assert_matches_kernel();
        for name in ["ascending", "descending", "read", "dropped"] {
            let region = &t.truth("region", name)[0];
            assert_eq!(region.present, 512, "{name}: the kernel's count");
        }
    }
    let (lines, faults) = resident(&one_per_fault);
    assert_eq!(lines, faults, "--coalesce-ms 0 writes one line per fault");
    // The counts of first touches can differ by a page or two between runs: a page the
    // loader touches before its range is registered is resident in its `map` line instead.
    let (coalesced_lines, coalesced_faults) = resident(&coalesced);
    assert!(
        coalesced_lines * 4 < coalesced_faults,
        "{coalesced_lines} coalesced lines for {coalesced_faults} faults"
    );
    let root = |t: &crate::util::Traced| {
        let pid = t.lines.iter().find_map(|l| match l.event {
            Event::Exec { pid, .. } => Some(pid),
            _ => None,
        });
        let space = t.space_of(pid.expect("an exec line"));
        t.space_at_end(space).clone()
    };
    let (a, b) = (root(&one_per_fault), root(&coalesced));
    assert_eq!(a.resident, b.resident, "resident pages differ");
    assert_eq!(a.resident_bytes, b.resident_bytes);
    assert_eq!(a.peak_resident_bytes, b.peak_resident_bytes);
    let tracked = |s: &mevi_actors::model::AddressSpace| -> Vec<std::ops::Range<u64>> {
        s.mappings
            .iter()
            .filter(|(_, m)| m.tracked)
            .map(|(r, _)| r.clone())
            .collect()
    };
    assert_eq!(tracked(&a), tracked(&b), "tracked mappings differ");
}

/// Thread names as the kernel has them: a `thread` line names the new thread as it starts (its
/// creator's name), its `thread_exit` line as it ends, however it was named meanwhile
/// (`prctl(PR_SET_NAME)` by itself, `pthread_setname_np` by another thread); an `exit` line names
/// the program (argv[0], a fork child's its creator's). The `start` line's wall clock is the run's.
#[test]
fn lines_carry_the_wall_clock_and_the_names_the_kernel_gives() {
    let program = workload("names");
    let before = std::time::SystemTime::now();
    let t = crate::util::trace(&[], &[&program]);
    let after = std::time::SystemTime::now();
    assert_eq!(t.status, 0, "{}", t.stderr);
    // The kernel's names, printed by each thread just before it ends.
    let printed: std::collections::HashMap<i32, String> = t
        .stdout
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("name ")?.splitn(2, ' ');
            Some((w.next()?.parse().ok()?, w.next()?.to_string()))
        })
        .collect();
    assert_eq!(printed.len(), 3, "{}", t.stdout);
    let mut started = Vec::new();
    let mut ended = std::collections::HashMap::new();
    let mut exits = Vec::new();
    for line in &t.lines {
        match &line.event {
            Event::Start { wall_ns, wall, .. } => {
                let wall_ns = wall_ns.expect("start has wall_ns");
                let since = |t: std::time::SystemTime| {
                    t.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
                };
                assert!(since(before) <= wall_ns && wall_ns <= since(after));
                let parsed = humantime::parse_rfc3339(wall.as_deref().unwrap()).unwrap();
                assert_eq!(since(parsed), wall_ns, "wall and wall_ns are one instant");
            }
            Event::Thread { name, .. } => started.push(name.clone()),
            Event::ThreadExit { tid, name, .. } => {
                ended.insert(*tid, name.clone());
            }
            Event::Exit { pid, name, .. } => exits.push((*pid, name.clone())),
            _ => {}
        }
    }
    assert_eq!(started, vec![Some("boss".to_string()); 2]);
    let threads: Vec<i32> = printed
        .keys()
        .copied()
        .filter(|tid| ended.contains_key(tid))
        .collect();
    assert_eq!(threads.len(), 2, "{ended:?} {printed:?}");
    for tid in threads {
        assert_eq!(ended[&tid].as_deref(), Some(printed[&tid].as_str()));
    }
    let mut names: Vec<&str> = printed.values().map(String::as_str).collect();
    names.sort();
    assert_eq!(names, ["boss", "named-by-boss", "self-named"]);
    let argv0 = program.to_str().unwrap();
    assert_eq!(exits.len(), 2, "{exits:?}");
    for (pid, name) in exits {
        assert_eq!(name.as_deref(), Some(argv0), "pid {pid}");
    }
}

/// Runs `touch_then_mark PAGES MARKER STATUS` traced one line per fault, with the stream on a
/// pipe that this test reads as it likes; the child and its marker file. The caller holds the
/// machine for the run (`util::MachineHold`).
fn traced_on_a_pipe(flags: &[&str], pages: u32, status: i32) -> (std::process::Child, PathBuf) {
    let marker = scratch("marker");
    let child = Command::new(bin())
        .args(["run", "--coalesce-ms", "0"])
        .args(flags)
        .arg("--")
        .arg(workload("touch_then_mark"))
        .arg(pages.to_string())
        .arg(&marker)
        .arg(status.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    (child, marker)
}

/// Whether a stream is whole: its last line is the summary.
fn ends_with_summary(lines: &[Line]) -> bool {
    matches!(lines.last().map(|l| &l.event), Some(Event::Summary { .. }))
}

/// Waits for `path` to exist, up to `limit`.
fn appears_within(path: &std::path::Path, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    path.exists()
}

/// Reads the rest of a run's stdout and stderr, failing the test if it outlives two minutes.
fn finish_reading(child: std::process::Child) -> (i32, String, String) {
    crate::util::finish_within(child, Duration::from_secs(120), "mevi-actors")
}

/// `--buffer`: with nobody reading the stream, a program whose lines fit in the buffer runs to
/// its end; with a small buffer it waits for the reader (it cannot end until the stream is read),
/// and then ends with every line in the stream.
#[test]
fn a_buffer_lets_the_program_run_ahead_of_a_slow_reader_until_it_is_full() {
    // 16,384 lines of about 190 bytes: 3 MiB, far beyond the pipe and every inbox on the way.
    let pages = 16384;
    let _runs = MachineHold::shared();
    let (child, marker) = traced_on_a_pipe(&["--buffer", "64MiB"], pages, 0);
    assert!(
        appears_within(&marker, Duration::from_secs(60)),
        "with a 64 MiB buffer the program should end without a reader"
    );
    let (status, out, stderr) = finish_reading(child);
    assert_eq!(status, 0, "{stderr}");
    let lines = parse_stream(&out);
    let faults: u64 = lines
        .iter()
        .map(|l| match l.event {
            Event::Resident { faults, .. } => faults,
            _ => 0,
        })
        .sum();
    assert!(faults >= pages as u64);

    let (child, marker) = traced_on_a_pipe(&["--buffer", "4KiB"], pages, 0);
    assert!(
        !appears_within(&marker, Duration::from_secs(3)),
        "with a 4 KiB buffer and no reader the program cannot reach its end"
    );
    let (status, out, stderr) = finish_reading(child);
    assert_eq!(status, 0, "{stderr}");
    assert!(marker.exists());
    let lines = parse_stream(&out);
    assert!(ends_with_summary(&lines));
}

/// The stream's reader going away (`| head`) ends neither the program nor its trace: it runs to
/// its end, mevi-actors exits with its status, says once on stderr that the stream was dropped,
/// and still prints the summary.
#[test]
fn a_reader_that_goes_away_leaves_the_program_running_to_its_end() {
    use std::io::Read;
    let _run = MachineHold::shared();
    let (mut child, marker) = traced_on_a_pipe(&[], 16384, 7);
    // Its first 1000 bytes, read on a thread of its own so that a run that never writes them
    // fails the test rather than hanging it.
    let mut stdout = child.stdout.take().unwrap();
    let (first_read, read) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut first = [0u8; 1000];
        let _ = first_read.send(stdout.read_exact(&mut first).map(|()| stdout));
    });
    let Ok(read) = read.recv_timeout(crate::util::TIMEOUT) else {
        child.kill().ok();
        panic!("no 1000 bytes of stream within {:?}", crate::util::TIMEOUT);
    };
    // The reader goes.
    drop(read.unwrap());
    let (status, _, stderr) = finish_reading(child);
    assert_eq!(status, 7, "the program's status: {stderr}");
    assert!(marker.exists(), "the program reached its end");
    assert_eq!(
        stderr.matches("can no longer be written").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("its reader has gone"), "{stderr}");
    assert!(stderr.contains("first touches"), "the summary: {stderr}");
}

/// A stream on a pipe left non-blocking (`O_NONBLOCK` on its write end, as some parents leave
/// their descriptors) is waited for when full, like any other: EAGAIN is not a reader gone.
#[test]
fn a_non_blocking_pipe_is_waited_for_not_given_up() {
    use std::io::Read;
    use std::os::fd::AsFd;
    let (read_end, write_end) = nix::unistd::pipe().unwrap();
    let flags = nix::fcntl::fcntl(write_end.as_fd(), nix::fcntl::FcntlArg::F_GETFL).unwrap();
    let flags = nix::fcntl::OFlag::from_bits_truncate(flags) | nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(write_end.as_fd(), nix::fcntl::FcntlArg::F_SETFL(flags)).unwrap();
    let marker = scratch("marker");
    let _run = MachineHold::shared();
    let child = Command::new(bin())
        .args(["run", "--coalesce-ms", "0", "--buffer", "4KiB", "--"])
        .arg(workload("touch_then_mark"))
        .arg("16384")
        .arg(&marker)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::from(write_end))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Full long before the program's end: it waits, and nothing is dropped.
    assert!(!appears_within(&marker, Duration::from_secs(2)));
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::fs::File::from(read_end).read_to_string(&mut text).ok();
        text
    });
    let (status, _, stderr) = finish_reading(child);
    let text = reader.join().unwrap();
    assert_eq!(status, 0, "{stderr}");
    assert!(!stderr.contains("can no longer be written"), "{stderr}");
    let lines = parse_stream(&text);
    assert!(ends_with_summary(&lines));
}

/// A stderr that cannot be written (`2>/dev/full`, or `2>&1 | head` once head has gone) changes
/// nothing: the exit status is the program's, never a panic's.
#[test]
fn a_stderr_that_cannot_be_written_leaves_the_status_the_programs() {
    let file = scratch("stream");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let mut cmd = Command::new(bin());
    cmd.args(["run", "-o"])
        .arg(&file)
        .args(["--", "sh", "-c", "echo to stderr >&2; exit 7"])
        .stderr(full);
    let _run = MachineHold::shared();
    let child = cmd.stdout(std::process::Stdio::null()).spawn().unwrap();
    let (status, _, _) = crate::util::finish_within(child, Duration::from_secs(60), "mevi-actors");
    assert_eq!(status, 7);
    let lines = parse_stream(&std::fs::read_to_string(&file).unwrap());
    assert!(ends_with_summary(&lines));
}

/// The summary's table rows of a run's stderr, by pid, and the line after them, if any.
fn summary_rows(stderr: &str) -> (Vec<(i32, String)>, Option<String>) {
    let mut lines = stderr
        .lines()
        .skip_while(|l| !l.starts_with("     pid "))
        .skip(1);
    let mut rows = Vec::new();
    for line in lines.by_ref() {
        match line.split_whitespace().next().map(str::parse::<i32>) {
            Some(Ok(pid)) if !line.contains(" pressure: ") => rows.push((pid, line.to_string())),
            _ => return (rows, Some(line.to_string())),
        }
    }
    (rows, None)
}

/// A shell running many short programs: the table shows the 10 largest processes, largest
/// first, and one line for the rest; `--summary all` shows every one, a long argv cut in the
/// middle so that its program and last arguments stay; `--no-summary` still shows none.
#[test]
fn the_summary_shows_the_largest_processes_and_cuts_argv_in_the_middle() {
    let long = "/bin/true -quiet -imultiarch x86_64-linux-gnu src/some/deeply/nested/parse.c \
                -dumpdir build/ -dumpbase parse.c -mtune=generic -march=x86-64 -O2 -o \
                /tmp/ccXYZ123.s";
    let script = format!(
        "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14; do /bin/true; done; {long}; exec {}",
        workload("one_thread").display()
    );
    let program = ["sh", "-c", script.as_str()];
    let t = trace(&[], &program);
    assert_eq!(t.status, 0, "{}", t.stderr);
    let (processes, _) = t.summary();
    assert!(processes.len() >= 16, "{} processes", processes.len());
    let mut largest: Vec<_> = processes.iter().collect();
    largest.sort_by_key(|p| std::cmp::Reverse(p.peak_resident_bytes));
    let (rows, after) = summary_rows(&t.stderr);
    let pids: Vec<i32> = rows.iter().map(|(pid, _)| *pid).collect();
    let expected: Vec<i32> = largest.iter().take(10).map(|p| p.pid).collect();
    assert_eq!(pids, expected, "{}", t.stderr);
    // The workload, the largest, comes first.
    assert!(rows[0].1.contains("one_thread"), "{}", t.stderr);
    let after = after.unwrap_or_else(|| panic!("no line for the rest: {}", t.stderr));
    assert!(
        after.trim_start().starts_with(&format!(
            "… and {} more process(es), ",
            processes.len() - 10
        )),
        "{after}"
    );
    assert!(
        after.ends_with("`--summary all` lists every one"),
        "{after}"
    );

    let t = trace(&["--summary", "all"], &program);
    assert_eq!(t.status, 0, "{}", t.stderr);
    let (processes, _) = t.summary();
    let (rows, after) = summary_rows(&t.stderr);
    assert_eq!(rows.len(), processes.len(), "{}", t.stderr);
    assert!(
        after.is_none_or(|l| !l.contains("more process")),
        "{}",
        t.stderr
    );
    let cut = rows
        .iter()
        .find(|(_, row)| row.contains("/bin/true -quiet"))
        .unwrap_or_else(|| panic!("no row of the long argv: {}", t.stderr));
    let argv = &cut.1[cut.1.find("/bin/true").unwrap()..];
    assert!(argv.contains(" … "), "{argv}");
    assert!(argv.ends_with(" -O2 -o /tmp/ccXYZ123.s"), "{argv}");
    assert!(argv.chars().count() <= 80, "{argv}");

    let t = trace(&["--no-summary"], &program);
    assert_eq!(t.status, 0, "{}", t.stderr);
    assert!(!t.stderr.contains("     pid "), "{}", t.stderr);
    let (status, _, stderr) = run_bounded(Command::new(bin()).args([
        "run",
        "--no-summary",
        "--summary",
        "all",
        "/bin/true",
    ]));
    assert_eq!(status, 2, "{stderr}");
}

/// Runs `cmd` in `dir` with its stdout a pseudo-terminal, as at a shell's prompt (stderr piped,
/// stdin empty): its status, what reached the terminal, and stderr.
fn on_a_terminal(cmd: Command, dir: &std::path::Path) -> (i32, String, String) {
    use std::io::Read;
    use std::process::Stdio;
    let pty = nix::pty::openpty(None, None).expect("a pseudo-terminal");
    let mut cmd = cmd;
    cmd.current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(pty.slave))
        .stderr(Stdio::piped());
    let what = format!("{cmd:?}");
    let _run = MachineHold::shared();
    let child = cmd.spawn().expect("spawning mevi-actors");
    // Our copy of the terminal's other end goes, so that reading ends when theirs do.
    drop(cmd);
    let mut master = std::fs::File::from(pty.master);
    let screen = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        // EIO once every holder of the terminal's end has closed it.
        while let Ok(n @ 1..) = master.read(&mut buf) {
            seen.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    let (status, _, stderr) = crate::util::finish_within(child, crate::util::TIMEOUT, &what);
    (status, screen.join().unwrap(), stderr)
}

fn streams_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("mevi-actors."))
        .collect();
    names.sort();
    names
}

/// With stdout a terminal and no -o, the stream goes to a new file named after the program
/// (`mevi-actors.PROG.PID.jsonl`, here), stderr says which and how to read it, and the program
/// keeps the terminal for its own stdout; `-o -` puts the stream on the terminal all the same.
/// A file of that name already there is never overwritten.
#[test]
fn on_a_terminal_the_stream_goes_to_a_file_named_after_the_program() {
    let dir = scratch("terminal");
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new(bin());
    cmd.args(["run", "--", "sh", "-c", "echo from-the-program"]);
    let (status, screen, stderr) = on_a_terminal(cmd, &dir);
    assert_eq!(status, 0, "{stderr}");
    assert!(screen.contains("from-the-program"), "{screen:?}");
    let start: String = screen.chars().take(300).collect();
    assert!(
        !screen.contains("\"seq\""),
        "no stream on the terminal: {start:?}…"
    );
    assert!(
        !stderr.lines().any(|l| l == "from-the-program"),
        "the program kept its stdout: {stderr}"
    );
    let names = streams_in(&dir);
    assert_eq!(names.len(), 1, "{names:?}");
    let name = &names[0];
    let pid: u32 = name
        .strip_prefix("mevi-actors.sh.")
        .and_then(|rest| rest.strip_suffix(".jsonl"))
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("{name} is not mevi-actors.sh.PID.jsonl"));
    assert!(pid > 1, "{name}");
    assert!(
        stderr.lines().next().unwrap_or_default().contains(&format!(
            "stdout is a terminal: the stream goes to {name} (-o - writes it here)"
        )),
        "{stderr}"
    );
    assert!(
        stderr.lines().last().unwrap_or_default().contains(&format!(
            "the stream is in {name}: `mevi-actors report {name}` draws it as a page, \
             `mevi-actors replay {name}` answers questions about it"
        )),
        "{stderr}"
    );
    let lines = parse_stream(&std::fs::read_to_string(dir.join(name)).unwrap());
    assert!(matches!(lines[0].event, Event::Start { .. }));
    assert!(matches!(lines.last().unwrap().event, Event::Summary { .. }));
    let (status, table, stderr) =
        run_bounded(Command::new(bin()).arg("replay").arg(dir.join(name)));
    assert_eq!(status, 0, "{stderr}");
    assert!(table.contains("sh -c echo from-the-program"), "{table}");

    // -o - is the terminal's: the stream on it, the program's stdout on stderr, no file.
    let mut cmd = Command::new(bin());
    cmd.args(["run", "--no-summary", "-o", "-", "/bin/echo", "hi"]);
    let (status, screen, stderr) = on_a_terminal(cmd, &dir);
    assert_eq!(status, 0, "{stderr}");
    assert!(screen.contains("{\"seq\":0"), "{screen:?}");
    assert!(stderr.lines().any(|l| l == "hi"), "{stderr}");
    assert_eq!(streams_in(&dir), names);

    // A program that is not there leaves no empty file behind.
    let mut cmd = Command::new(bin());
    cmd.args(["run", "no-such-program-xyz"]);
    let (status, _, stderr) = on_a_terminal(cmd, &dir);
    assert_eq!(status, 127, "{stderr}");
    assert_eq!(streams_in(&dir), names);
    std::fs::remove_dir_all(&dir).ok();

    // Never over a file that is there: mevi-actors as pid 1 of a namespace of its own knows
    // the name it will pick.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return crate::util::skip("not run as root");
    }
    if !crate::util::installed("unshare") {
        return;
    }
    let dir = scratch("terminal-taken");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("mevi-actors.true.1.jsonl"), "keep me\n").unwrap();
    let mut cmd = Command::new("unshare");
    cmd.args(["--pid", "--fork", "--mount-proc"])
        .arg(bin())
        .args(["run", "--no-summary", "/bin/true"]);
    let (status, _, stderr) = on_a_terminal(cmd, &dir);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.join("mevi-actors.true.1.jsonl")).unwrap(),
        "keep me\n"
    );
    assert_eq!(
        streams_in(&dir),
        ["mevi-actors.true.1.1.jsonl", "mevi-actors.true.1.jsonl"]
    );
    assert!(
        stderr.contains("the stream goes to mevi-actors.true.1.1.jsonl"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
