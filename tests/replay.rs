//! `replay` as a query tool: each mode on real traces, checked against the kernel's truth the
//! workloads print; damaged streams; a reader that stops early; memory on a large stream.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{PAGE, bin, run_bounded, scratch, workload};

/// A traced run kept on disk: its stream, and the program's stdout (its truth lines).
struct Stream {
    file: PathBuf,
    truths: Vec<Value>,
    lines: Vec<Value>,
}

impl Drop for Stream {
    fn drop(&mut self) {
        std::fs::remove_file(&self.file).ok();
    }
}

impl Stream {
    /// `mevi-actors run -o FILE -- program`, which must succeed.
    fn of<S: AsRef<OsStr>>(program: &[S]) -> Stream {
        let file = scratch("replay-stream");
        let (status, stdout, stderr) = run_bounded(
            Command::new(bin())
                .args(["run", "-o"])
                .arg(&file)
                .arg("--")
                .args(program),
        );
        assert_eq!(status, 0, "{stderr}");
        let text = std::fs::read_to_string(&file).unwrap();
        Stream {
            file,
            truths: json_lines(&stdout)
                .into_iter()
                .filter(|v| v.get("truth").is_some())
                .collect(),
            lines: json_lines(&text),
        }
    }

    fn path(&self) -> &str {
        self.file.to_str().unwrap()
    }

    /// The truth line of `kind` named `name`.
    fn truth(&self, kind: &str, name: &str) -> &Value {
        self.truths
            .iter()
            .find(|t| t["truth"] == kind && t["name"].as_str().unwrap_or("") == name)
            .unwrap_or_else(|| panic!("no {kind} truth named {name:?}: {:?}", self.truths))
    }

    /// `t_ns` of each marker `map` line of u11_phases (7 pages, `r--`, anonymous), in order.
    fn markers(&self) -> Vec<u64> {
        self.lines
            .iter()
            .filter(|l| {
                l["ev"] == "map"
                    && l["prot"] == "r--"
                    && l["kind"] == "anon"
                    && n(l, "end") - n(l, "start") == 7 * PAGE
            })
            .map(|l| n(l, "t_ns"))
            .collect()
    }

    /// `replay ARGS FILE`.
    fn replay(&self, args: &[&str]) -> (i32, String, String) {
        replay_file(args, self.path())
    }
}

fn replay_file(args: &[&str], file: &str) -> (i32, String, String) {
    run_bounded(Command::new(bin()).arg("replay").args(args).arg(file))
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn n(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

/// `replay ARGS --json FILE`, which must succeed: its objects.
fn replay_json(stream: &Stream, args: &[&str]) -> Vec<Value> {
    let mut all = args.to_vec();
    all.push("--json");
    let (status, stdout, stderr) = stream.replay(&all);
    assert_eq!(status, 0, "{stderr}");
    assert!(!stderr.contains("incomplete"), "{stderr}");
    json_lines(&stdout)
}

/// The mappings of `space` (a `--json` object) within `[start, end)`, which they must cover
/// exactly: (resident, zero, untouched) pages added up.
fn pages_within(space: &Value, start: u64, end: u64) -> (u64, u64, u64) {
    let inside: Vec<&Value> = space["mappings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| n(m, "start") >= start && n(m, "end") <= end)
        .collect();
    let covered: u64 = inside.iter().map(|m| n(m, "end") - n(m, "start")).sum();
    assert_eq!(
        covered,
        end - start,
        "mappings of {start:#x}-{end:#x}: {inside:?}"
    );
    inside.iter().fold((0, 0, 0), |(r, z, u), m| {
        (
            r + n(m, "resident_pages"),
            z + n(m, "zero_pages"),
            u + n(m, "untouched_pages"),
        )
    })
}

/// The object of a `--json` answer that is about `pid` (in `processes`, or its own `pid`).
fn about(objects: &[Value], pid: u64) -> &Value {
    objects
        .iter()
        .find(|o| {
            o.get("pid").and_then(Value::as_u64) == Some(pid)
                || o["processes"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().any(|p| n(p, "pid") == pid))
        })
        .unwrap_or_else(|| panic!("nothing about pid {pid} in {objects:?}"))
}

fn phases() -> Stream {
    Stream::of(&[workload("u11_phases")])
}

#[test]
fn replay_gives_each_process_with_its_peak_and_final_resident_as_the_kernel_had_them() {
    let s = phases();
    let pid = n(s.truth("anon", ""), "pid");
    let rows = replay_json(&s, &[]);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(n(row, "pid"), pid);
    assert_eq!(row["argv"][0], workload("u11_phases").to_str().unwrap());
    // Its final figure is the kernel's at its last look; its peak, the end of phase 1.
    assert_eq!(
        n(row, "resident_bytes"),
        n(s.truth("anon", ""), "present") * PAGE
    );
    assert_eq!(
        n(row, "peak_resident_bytes"),
        n(s.truth("phase_anon", "1"), "present") * PAGE
    );
    assert_eq!(row["status"], 0);
    assert!(n(row, "first_touches") >= 2048 + 16 + 10 + 32, "{row}");
    // Two pauses of 300 ms.
    assert!(
        n(row, "ended_ns") - n(row, "started_ns") >= 600_000_000,
        "{row}"
    );
    assert_eq!(
        n(row, "lifetime_ns"),
        n(row, "ended_ns") - n(row, "started_ns")
    );
    assert!(
        row["started_wall"].as_str().unwrap().ends_with('Z'),
        "{row}"
    );

    // The same for a person: human sizes, the wall clock of the start.
    let (status, table, stderr) = s.replay(&[]);
    assert_eq!(status, 0, "{stderr}");
    assert!(table.starts_with("trace started 20"), "{table}");
    let line = table
        .lines()
        .find(|l| l.trim_start().starts_with(&pid.to_string()))
        .unwrap_or_else(|| panic!("no row for {pid}: {table}"));
    use humansize::{BINARY, format_size};
    assert!(
        line.contains(&format_size(n(row, "peak_resident_bytes"), BINARY)),
        "{line}"
    );
    assert!(line.contains("exit 0"), "{line}");
}

#[test]
fn replay_of_a_fork_gives_each_process_its_own_final_resident() {
    let s = Stream::of(&[workload("fork_touch")]);
    let rows = replay_json(&s, &[]);
    assert_eq!(rows.len(), 2, "{rows:?}");
    for t in s.truths.iter().filter(|t| t["truth"] == "anon") {
        let row = about(&rows, n(t, "pid"));
        assert_eq!(n(row, "resident_bytes"), n(t, "present") * PAGE, "{row}");
        assert!(n(row, "peak_resident_bytes") >= n(row, "resident_bytes"));
    }
    // The child is listed at its exit, before its parent.
    let child = n(&s.truths[0], "pid");
    assert_eq!(n(&rows[0], "pid"), child);
}

#[test]
fn replay_at_a_time_shows_every_mapping_as_the_kernel_had_it() {
    let s = phases();
    let markers = s.markers();
    assert_eq!(markers.len(), 2, "two pauses");
    let pid = n(s.truth("anon", ""), "pid");
    for (phase, marker) in ["1", "2"].iter().zip(&markers) {
        // In the pause: every line of the phase is applied, none of the next.
        let at = format!("{:.3}", (marker + 100_000_000) as f64 / 1e6);
        let answer = replay_json(&s, &["--at", &at]);
        let space = about(&answer, pid);
        assert_eq!(space["peak"], false);
        assert_eq!(
            n(space, "resident_bytes"),
            n(s.truth("phase_anon", phase), "present") * PAGE,
            "phase {phase}"
        );
        for t in s
            .truths
            .iter()
            .filter(|t| t["truth"] == "phase_region")
            .filter(|t| {
                t["name"]
                    .as_str()
                    .unwrap()
                    .starts_with(&format!("{phase}:"))
            })
        {
            let (start, end) = (n(t, "start"), n(t, "end"));
            let (resident, _, untouched) = pages_within(space, start, end);
            assert_eq!(resident, n(t, "present"), "{t}");
            assert_eq!(resident + untouched, (end - start) / PAGE);
        }
        // z's first 16 pages were only read: the zero page, moved with z by mremap.
        let z = s.truth("phase_region", &format!("{phase}:z"));
        assert_eq!(pages_within(space, n(z, "start"), n(z, "end")).1, 16);
    }
    // A person sees the ranges in hex.
    let a = s.truth("phase_region", "1:a");
    let at = format!("{:.3}", (markers[0] + 100_000_000) as f64 / 1e6);
    let (status, text, stderr) = s.replay(&["--at", &at]);
    assert_eq!(status, 0, "{stderr}");
    let row = format!("{:#014x}-{:#014x}", n(a, "start"), n(a, "end"));
    let line = text
        .lines()
        .find(|l| l.contains(&row))
        .unwrap_or_else(|| panic!("no {row}: {text}"));
    assert!(line.contains(" 2048 "), "{line}");
    assert!(text.starts_with(&format!("state at {at} ms (20")), "{text}");
}

#[test]
fn replay_at_peak_is_the_instant_the_tree_held_the_most() {
    let s = phases();
    let markers = s.markers();
    let pid = n(s.truth("anon", ""), "pid");
    let answer = replay_json(&s, &["--at", "peak"]);
    let space = about(&answer, pid);
    assert_eq!(space["peak"], true);
    // Phase 1 held the most (8 MiB more than anything after), and nothing was touched between
    // its look and the discard that began phase 2.
    let phase1 = n(s.truth("phase_anon", "1"), "present") * PAGE;
    assert_eq!(n(space, "tree_resident_bytes"), phase1);
    assert_eq!(n(space, "resident_bytes"), phase1);
    let summary = s.lines.last().unwrap();
    assert_eq!(
        n(space, "tree_resident_bytes"),
        n(&summary["totals"], "tree_peak_resident_bytes")
    );
    assert!(n(space, "t_ns") <= markers[0], "{space}");
    let a = s.truth("phase_region", "1:a");
    assert_eq!(pages_within(space, n(a, "start"), n(a, "end")).0, 2048);
    // The instant is said, and read the same from stdin and from a pipe that cannot be rewound.
    for input in [format!("- < {}", s.path()), format!("<(cat {})", s.path())] {
        let (status, text, stderr) = run_bounded(
            Command::new("bash").args(["-c", &format!("{} replay --at peak {input}", bin())]),
        );
        assert_eq!(status, 0, "{input}: {stderr}");
        let first = text.lines().next().unwrap();
        let seq = n(space, "seq");
        assert!(
            first.contains("peak") && first.contains(&format!("seq {seq}")),
            "{input}: {first}"
        );
    }
}

#[test]
fn maps_at_exit_are_the_kernels_last_look_largest_first_with_their_makers() {
    let s = phases();
    let markers = s.markers();
    let pid = n(s.truth("anon", ""), "pid");
    let answer = replay_json(&s, &["--maps-at-exit"]);
    assert_eq!(answer.len(), 1, "{answer:?}");
    let space = &answer[0];
    assert_eq!(n(space, "pid"), pid);
    assert_eq!(
        (&space["exited"], &space["status"]),
        (&true.into(), &0.into())
    );
    assert_eq!(
        n(space, "resident_bytes"),
        n(s.truth("anon", ""), "present") * PAGE
    );
    for name in ["z", "c", "d"] {
        let t = s.truth("region", name);
        assert_eq!(
            pages_within(space, n(t, "start"), n(t, "end")).0,
            n(t, "present"),
            "{name}"
        );
    }
    // Largest first: by resident bytes, then by size.
    let maps = space["mappings"].as_array().unwrap();
    let key = |m: &Value| {
        (
            m.get("resident_pages").and_then(Value::as_u64).unwrap_or(0),
            n(m, "end") - n(m, "start"),
        )
    };
    assert!(
        maps.windows(2).all(|w| key(&w[0]) >= key(&w[1])),
        "{maps:?}"
    );
    // Where each was made: c by the thread in phase 2; d by the main thread in phase 3; z in
    // phase 1, though mremap moved it in phase 2.
    let made = |name: &str| {
        let t = s.truth("region", name);
        let m = maps
            .iter()
            .find(|m| n(m, "start") == n(t, "start"))
            .unwrap();
        (n(m, "made_t_ns"), n(m, "made_tid"))
    };
    let tid = n(s.truth("made_by", "c"), "tid");
    let (t_c, tid_c) = made("c");
    assert_eq!(tid_c, tid);
    assert!(markers[0] < t_c && t_c < markers[1]);
    let (t_d, tid_d) = made("d");
    assert_eq!(tid_d, pid);
    assert!(t_d > markers[1]);
    assert!(made("z").0 < markers[0]);
    // A person sees them in hex with their maker.
    let (status, text, stderr) = s.replay(&["--maps-at-exit"]);
    assert_eq!(status, 0, "{stderr}");
    let c = s.truth("region", "c");
    let line = text
        .lines()
        .find(|l| l.contains(&format!("{:#014x}-", n(c, "start"))))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains(&format!(", {tid}")), "{line}");
}

#[test]
fn a_fork_childs_inherited_mappings_keep_their_maker_in_the_parent() {
    let s = Stream::of(&[workload("fork_touch")]);
    let answer = replay_json(&s, &["--maps-at-exit"]);
    assert_eq!(answer.len(), 2, "{answer:?}");
    let fork_t = s
        .lines
        .iter()
        .find(|l| l["ev"] == "fork")
        .map(|l| n(l, "t_ns"))
        .unwrap();
    let parent = n(s.lines.iter().find(|l| l["ev"] == "exec").unwrap(), "pid");
    for t in s.truths.iter().filter(|t| t["truth"] == "region") {
        let space = about(&answer, n(t, "pid"));
        assert_eq!(
            pages_within(space, n(t, "start"), n(t, "end")).0,
            n(t, "present")
        );
        let m = space["mappings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| n(m, "start") == n(t, "start"))
            .unwrap();
        assert_eq!(n(m, "made_tid"), parent, "{m}");
        assert!(n(m, "made_t_ns") < fork_t, "{m}");
    }
}

#[test]
fn the_timeline_samples_what_the_kernel_had_in_each_pause() {
    let s = phases();
    let markers = s.markers();
    let pid = n(s.truth("anon", ""), "pid");
    let ticks = replay_json(&s, &["--timeline", "50"]);
    for (i, tick) in ticks.iter().enumerate() {
        assert_eq!(n(tick, "t_ns"), i as u64 * 50_000_000, "{tick}");
        let sum: u64 = tick["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| n(p, "resident_bytes"))
            .sum();
        assert_eq!(sum, n(tick, "tree_resident_bytes"), "{tick}");
    }
    assert_eq!(ticks.last().unwrap()["processes"], Value::Array(vec![]));
    for (phase, marker) in ["1", "2"].iter().zip(&markers) {
        let tick = ticks
            .iter()
            .find(|t| n(t, "t_ns") > marker + 20_000_000)
            .unwrap();
        assert!(n(tick, "t_ns") < marker + 250_000_000);
        let p = &tick["processes"][0];
        assert_eq!(n(p, "pid"), pid);
        assert_eq!(
            n(p, "resident_bytes"),
            n(s.truth("phase_anon", phase), "present") * PAGE,
            "phase {phase}: {tick}"
        );
    }
    let (status, table, stderr) = s.replay(&["--timeline", "50"]);
    assert_eq!(status, 0, "{stderr}");
    assert!(table.contains(&format!("{pid:>8}")), "{table}");
    assert_eq!(
        table.lines().filter(|l| l.contains(" all ")).count(),
        ticks.len()
    );
}

#[test]
fn the_modes_are_exclusive_and_say_so() {
    let s = Stream::of(&["/bin/true"]);
    for args in [
        &["--at", "1", "--maps-at-exit"][..],
        &["--timeline", "5", "--at", "peak"],
        &["--maps-at-exit", "--timeline", "5"],
        &["--timeline", "0"],
        &["--at", "soon"],
    ] {
        let (status, stdout, stderr) = s.replay(args);
        assert_eq!(status, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty());
        assert!(stderr.contains("error:"), "{stderr}");
    }
}

/// Every mode on a stream cut mid-line and on one with a garbage line: exit 2 naming the line,
/// or with `--lenient` the answer for the good lines and, when cut, a word that it is incomplete.
#[test]
fn every_mode_names_a_damaged_line_and_lenient_answers_all_the_same() {
    let s = phases();
    let text = std::fs::read_to_string(&s.file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let pid = n(s.truth("anon", ""), "pid");
    let cut_at = lines.len() - 4;
    let cut = scratch("replay-cut");
    std::fs::write(
        &cut,
        format!("{}\n{}", lines[..cut_at].join("\n"), &lines[cut_at][..15]),
    )
    .unwrap();
    let mut garbage = lines.clone();
    garbage.insert(5, "{\"seq\": garbage");
    let garbled = scratch("replay-garbage");
    std::fs::write(&garbled, garbage.join("\n")).unwrap();
    let modes: [&[&str]; 4] = [
        &[],
        &["--at", "peak"],
        &["--maps-at-exit"],
        &["--timeline", "100"],
    ];
    for mode in modes {
        for (file, line, is_cut) in [(&cut, cut_at + 1, true), (&garbled, 6, false)] {
            let file = file.to_str().unwrap();
            let (status, _, stderr) = replay_file(mode, file);
            assert_eq!(status, 2, "{mode:?} {file}: {stderr}");
            assert!(stderr.contains(&format!("line {line} ")), "{stderr}");
            let mut lenient = vec!["--lenient", "--json"];
            lenient.extend(mode);
            let (status, stdout, stderr) = replay_file(&lenient, file);
            assert_eq!(status, 0, "{mode:?} {file}: {stderr}");
            assert!(stderr.contains(&format!("line {line} skipped")), "{stderr}");
            assert!(!json_lines(&stdout).is_empty(), "{mode:?}: {stdout}");
            if is_cut {
                assert!(stderr.contains("incomplete"), "{stderr}");
            }
        }
    }
    // Cut before its exit, the process is still running at the last line.
    let (_, stdout, _) = replay_file(
        &["--lenient", "--json", "--maps-at-exit"],
        cut.to_str().unwrap(),
    );
    let space = about(&json_lines(&stdout), pid).clone();
    assert_eq!(space["exited"], false, "{space}");
    let (_, stdout, _) = replay_file(&["--lenient", "--json"], cut.to_str().unwrap());
    let row = about(&json_lines(&stdout), pid).clone();
    assert!(
        row.get("status").is_none() && row.get("ended_ns").is_none(),
        "{row}"
    );
    std::fs::remove_file(&cut).ok();
    std::fs::remove_file(&garbled).ok();
}

/// A reader that stops after one line ends every mode quietly: status 0, no panic.
#[test]
fn every_mode_ends_quietly_when_its_reader_goes() {
    let s = phases();
    let modes: [&str; 5] = [
        "",
        "--at peak",
        "--at 100",
        "--maps-at-exit",
        "--timeline 1",
    ];
    for mode in modes {
        for json in ["", "--json"] {
            let (status, stdout, stderr) = run_bounded(Command::new("bash").args([
                "-c",
                &format!(
                    "set -o pipefail; {} replay {mode} {json} {} | head -1",
                    bin(),
                    s.path()
                ),
            ]));
            assert_eq!(
                (status, stdout.lines().count()),
                (0, 1),
                "{mode} {json}: {stderr}"
            );
            assert!(stderr.is_empty(), "{mode} {json}: {stderr}");
        }
    }
}

/// Repeats a real trace's cycle of one mapping (its `map`, the `resident` lines in it, its
/// `unmap`) until the stream is `bytes` long, renumbered, between the trace's own beginning and
/// end: a long stream whose state stays small.
fn long_stream(s: &Stream, bytes: u64, path: &Path) {
    use std::io::Write;
    let big = |l: &&Value| {
        l["ev"] == "map" && l["kind"] == "anon" && n(l, "end") - n(l, "start") == 2048 * PAGE
    };
    let map = s.lines.iter().find(big).unwrap();
    let (start, end) = (n(map, "start"), n(map, "end"));
    let within = |l: &Value| n(l, "start") >= start && n(l, "end") <= end;
    let mut cycle = vec![map];
    cycle.extend(
        s.lines
            .iter()
            .filter(|l| l["ev"] == "resident" && within(l)),
    );
    cycle.push(
        s.lines
            .iter()
            .find(|l| l["ev"] == "unmap" && n(l, "start") == start)
            .unwrap(),
    );
    let map_seq = n(map, "seq");
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let (mut seq, mut t, mut written) = (0u64, 0u64, 0u64);
    let mut write = |l: &Value, shift: u64| {
        let mut l = l.clone();
        t = t.max(n(&l, "t_ns")) + shift;
        l["seq"] = seq.into();
        l["t_ns"] = t.into();
        seq += 1;
        let text = format!("{l}\n");
        written += text.len() as u64;
        out.write_all(text.as_bytes()).unwrap();
        written
    };
    for l in s.lines.iter().filter(|l| n(l, "seq") < map_seq) {
        write(l, 0);
    }
    'fill: loop {
        for l in &cycle {
            if write(l, 1000) >= bytes {
                break 'fill;
            }
        }
    }
    for l in s
        .lines
        .iter()
        .filter(|l| l["ev"] == "exit" || l["ev"] == "summary")
    {
        write(l, 0);
    }
    out.flush().unwrap();
}

/// `replay FILE` and its peak resident set (`VmHWM`, read while it runs: `ru_maxrss` would
/// count the test process, whose memory the child shared until its exec), failing the test if
/// it outlives a few minutes.
fn replay_peak_rss(path: &Path) -> (i32, u64) {
    let mut child = Command::new(bin())
        .arg("replay")
        .arg(path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // `spawn` returns once the child runs mevi-actors: from here on VmHWM is its own.
    let status_file = format!("/proc/{}/status", child.id());
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut peak = 0;
    loop {
        let hwm = std::fs::read_to_string(&status_file)
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_string();
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .map_or(0, |kib| kib * 1024);
        peak = peak.max(hwm);
        if let Some(status) = child.try_wait().unwrap() {
            return (status.code().unwrap_or(-1), peak);
        }
        if Instant::now() > deadline {
            child.kill().ok();
            panic!("replay of {} did not finish in time", path.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Memory follows the spaces alive at once, not the file: a stream of 160 MiB whose state never
/// exceeds one small process replays in far less than the file.
#[test]
fn replay_of_a_long_stream_stays_within_its_live_state() {
    const STREAM: u64 = 160 << 20;
    const BOUND: u64 = 64 << 20;
    let s = phases();
    let path = scratch("replay-long");
    long_stream(&s, STREAM, &path);
    let (status, peak) = replay_peak_rss(&path);
    std::fs::remove_file(&path).ok();
    assert_eq!(status, 0);
    assert!(peak > 0, "VmHWM was never read");
    assert!(
        peak <= BOUND,
        "replay of a {} MiB stream peaked at {} MiB",
        STREAM >> 20,
        peak >> 20
    );
}

/// Two mappings made apart that the kernel merged come back to a fork child as one line of
/// `/proc/PID/maps`: the child still has them apart, each made where its parent made it, and
/// keeps the pages its parent had only read as zero pages (the kernel copies them as they are).
#[test]
fn a_fork_child_keeps_merged_mappings_apart_and_its_zero_pages() {
    let s = Stream::of(&[workload("u11_fork_merged")]);
    let answer = replay_json(&s, &["--maps-at-exit"]);
    let parent_pid = n(s.lines.iter().find(|l| l["ev"] == "exec").unwrap(), "pid");
    let child_pid = n(s.lines.iter().find(|l| l["ev"] == "fork").unwrap(), "child");
    let parent = about(&answer, parent_pid);
    let child = about(&answer, child_pid);
    let mapping_at = |space: &Value, start: u64| -> Value {
        space["mappings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| n(m, "start") == start)
            .unwrap_or_else(|| panic!("no mapping at {start:#x}: {space}"))
            .clone()
    };
    let mut makers = Vec::new();
    for name in ["first", "second"] {
        let t = s.truth("region", name);
        let (start, end) = (n(t, "start"), n(t, "end"));
        let made = |m: &Value| (n(m, "made_t_ns"), n(m, "made_tid"));
        let in_parent = mapping_at(parent, start);
        let in_child = mapping_at(child, start);
        assert_eq!(n(&in_child, "end"), end, "{name} on its own: {in_child}");
        assert_eq!(made(&in_child), made(&in_parent), "{name}: {in_child}");
        makers.push(made(&in_parent));
        // Present pages as the kernel counts them, in both; the read ones are zero pages.
        let (resident, zero, _) = pages_within(child, start, end);
        assert_eq!(resident, n(t, "present"), "{name}");
        assert_eq!(
            pages_within(parent, start, end),
            (resident, zero, 64 - resident)
        );
        assert_eq!(zero, if name == "first" { 8 } else { 0 }, "{name}");
    }
    assert!(makers[0].0 < makers[1].0, "made apart: {makers:?}");
}

/// A trace made with `--no-faults` measured no resident memory: replay says so, never 0 B.
#[test]
fn a_trace_without_faults_is_said_not_to_measure_resident_memory() {
    let file = crate::util::scratch("no-faults");
    let (status, _, stderr) = run_bounded(
        Command::new(bin())
            .args(["run", "--no-faults", "-o"])
            .arg(&file)
            .args(["--", "/bin/true"]),
    );
    assert_eq!(status, 0, "{stderr}");
    let (status, stdout, stderr) = run_bounded(Command::new(bin()).arg("replay").arg(&file));
    std::fs::remove_file(&file).ok();
    assert_eq!(status, 0, "{stderr}");
    assert!(stdout.contains("not measured"), "{stdout}");
    assert!(!stdout.contains(" 0 B"), "{stdout}");
    assert!(stderr.contains("--no-faults"), "{stderr}");
}

/// A quiet stretch of a trace (here a damaged `t_ns` far ahead, 3 years in) gives `--timeline`
/// its first and last samples, not one per tick: it ends at once, and says what it left out.
#[test]
fn a_timeline_over_a_long_quiet_stretch_leaves_the_same_samples_out() {
    let s = Stream::of(&["/bin/true"]);
    let text = std::fs::read_to_string(s.path()).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let last = lines.pop().unwrap();
    let mut summary: Value = serde_json::from_str(&last).unwrap();
    summary["t_ns"] = Value::from(100_000_000_000_000_000u64);
    lines.push(summary.to_string());
    let far = scratch("far");
    std::fs::write(&far, lines.join("\n") + "\n").unwrap();
    let (status, stdout, stderr) = run_bounded(
        Command::new(bin())
            .args(["replay", "--timeline", "1"])
            .arg(&far),
    );
    std::fs::remove_file(&far).ok();
    assert_eq!(status, 0, "{stderr}");
    assert!(
        stdout.lines().count() < 5000,
        "{} lines",
        stdout.lines().count()
    );
    assert!(stdout.contains("samples left out"), "{stdout}");
}

/// A space its last process leaves by `exec` ends there: `--maps-at-exit` lists it too, saying
/// which program the process went on to run, and then the new space at the process's exit.
#[test]
fn maps_at_exit_lists_a_space_left_by_exec() {
    let s = Stream::of(&[workload("exec_thread")]);
    let answer = replay_json(&s, &["--maps-at-exit"]);
    let execs: Vec<&Value> = s.lines.iter().filter(|l| l["ev"] == "exec").collect();
    assert_eq!(execs.len(), 2);
    let pid = n(execs[0], "pid");
    assert_eq!(answer.len(), 2, "{answer:?}");
    let left = &answer[0];
    assert_eq!(n(left, "pid"), pid);
    assert_eq!(n(left, "space"), n(execs[0], "space"));
    assert_eq!(left["exec"], execs[1]["path"], "{left}");
    assert_eq!(left["exited"], false);
    assert!(n(left, "resident_bytes") > 0, "{left}");
    let ended = &answer[1];
    assert_eq!(n(ended, "space"), n(execs[1], "space"));
    assert_eq!(ended["exited"], true);
    assert!(ended.get("exec").is_none());
}

/// Runs `cmd` (stderr piped) with `feed` writing its stdin, failing the test after `timeout`:
/// its status, stderr and peak resident set (`VmHWM`, read while it runs, as
/// `replay_peak_rss` does).
fn peak_rss_fed(
    cmd: &mut Command,
    feed: impl FnOnce(std::process::ChildStdin) + Send + 'static,
    timeout: Duration,
) -> (i32, String, u64) {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    std::thread::spawn(move || feed(stdin));
    let mut stderr = child.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        stderr.read_to_string(&mut s).ok();
        s
    });
    let status_file = format!("/proc/{}/status", child.id());
    let deadline = Instant::now() + timeout;
    let mut peak = 0;
    let status = loop {
        let hwm = std::fs::read_to_string(&status_file)
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("VmHWM:"))?.to_string();
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .map_or(0, |kib| kib * 1024);
        peak = peak.max(hwm);
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            child.kill().ok();
            panic!("{cmd:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    (status, err.join().unwrap(), peak)
}

/// A line with no newline (`/dev/zero`, a binary file given by mistake) is refused once it
/// passes 64 MiB, in bounded memory: one line naming the file and the line, exit 2 as for any
/// line that is not a stream line, from stdin and from a file, for `replay` and for `report`;
/// `--lenient` skips it and reads on.
#[test]
fn a_line_without_a_newline_is_refused_at_64_mib_in_bounded_memory() {
    use std::io::Write;
    const FED: usize = 256 << 20;
    const BOUND: u64 = 100 << 20;
    // Zeros through a pipe until the reader goes (it must go long before the end).
    let zeros = |mut stdin: std::process::ChildStdin| {
        let chunk = vec![0u8; 1 << 20];
        for _ in 0..FED >> 20 {
            if stdin.write_all(&chunk).is_err() {
                return;
            }
        }
    };
    let started = Instant::now();
    let (status, stderr, peak) = peak_rss_fed(
        Command::new(bin()).args(["replay", "-"]),
        zeros,
        Duration::from_secs(60),
    );
    assert_eq!(status, 2, "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    assert!(
        lines[0].starts_with("mevi-actors: -: line 1 is longer than 64 MiB"),
        "{stderr}"
    );
    assert!(peak > 0, "VmHWM was never read");
    assert!(
        peak < BOUND,
        "reading a line of {} MiB of zeros peaked at {} MiB after {:?}",
        FED >> 20,
        peak >> 20,
        started.elapsed()
    );

    // A file: a blank first line, then 100 MiB of zeros (a sparse file: nothing on disk), then
    // a real stream after a newline.
    let trace = scratch("long-line-trace");
    let (status, _, stderr) = run_bounded(
        Command::new(bin())
            .args(["run", "--no-summary", "-o"])
            .arg(&trace)
            .arg("/bin/true"),
    );
    assert_eq!(status, 0, "{stderr}");
    let stream = std::fs::read(&trace).unwrap();
    std::fs::remove_file(&trace).ok();
    let path = scratch("long-line");
    {
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(b"\n").unwrap();
        f.set_len(1 + (100 << 20)).unwrap();
        use std::io::Seek;
        f.seek(std::io::SeekFrom::End(0)).unwrap();
        f.write_all(b"\n").unwrap();
        f.write_all(&stream).unwrap();
    }
    let file = path.to_str().unwrap();
    let html = scratch("long-line-page");
    for args in [
        vec!["replay", file],
        vec!["report", "-o", html.to_str().unwrap(), file],
    ] {
        let (status, stderr, peak) = peak_rss_fed(
            Command::new(bin()).args(&args),
            drop,
            Duration::from_secs(60),
        );
        assert_eq!(status, 2, "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim_end(),
            format!(
                "mevi-actors: {file}: line 2 is longer than 64 MiB: not a stream line (none is \
                 that long); --lenient skips such lines"
            ),
            "{args:?}"
        );
        assert!(peak < BOUND, "{args:?}: peaked at {} MiB", peak >> 20);
    }
    assert!(!html.exists(), "no page of a stream that could not be read");
    let (status, stdout, stderr) = replay_file(&["--lenient"], file);
    assert_eq!(status, 0, "{stderr}");
    assert!(
        stderr.contains(&format!("{file}: line 2 skipped: longer than 64 MiB")),
        "{stderr}"
    );
    assert!(
        stdout.contains("/bin/true"),
        "the stream after it: {stdout}"
    );
    std::fs::remove_file(&path).ok();
}
