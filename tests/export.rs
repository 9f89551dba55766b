//! `mevi-actors export --format pprof` (issue 28): a trace as a gzipped profile.proto, read by
//! the real `go tool pprof` (Debian's golang-go, installed by .ci/install-deps). Its figures are
//! checked against what the workloads' own pages say in /proc/self/pagemap, and against
//! `replay`, which reads the same trace.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use mevi_actors::event::Event;
use serde_json::Value;

use crate::sites::{Build, c_workload};
use crate::util::{
    PAGE, Traced, bin, cut_inside_line, installed, run_bounded, scratch, traced_to, workload,
};

/// `go tool pprof ARGS`: its stdout. It must succeed and say nothing on stderr: no warning
/// about the profile.
fn pprof(args: &[&str]) -> String {
    let (status, stdout, stderr) =
        run_bounded(Command::new("go").args(["tool", "pprof"]).args(args));
    assert_eq!(status, 0, "go tool pprof {args:?}:\n{stderr}");
    assert_eq!(stderr, "", "go tool pprof {args:?} warned");
    stdout
}

/// A traced run kept on disk, and what the program printed and the stream says.
struct Trace {
    file: PathBuf,
    traced: Traced,
}

impl Drop for Trace {
    fn drop(&mut self) {
        std::fs::remove_file(&self.file).ok();
    }
}

impl Trace {
    /// `run -o FILE -- program args`, which must succeed and agree with the kernel (with
    /// `truth`, the workload's own truth lines say what the kernel had).
    fn of(program: &Path, args: &[&str], truth: bool) -> Trace {
        let file = scratch("export");
        let traced = traced_to(
            Command::new(bin())
                .arg("run")
                .arg("-o")
                .arg(&file)
                .arg("--")
                .arg(program)
                .args(args),
            &file,
        );
        if truth {
            traced.assert_matches_kernel();
        }
        Trace { file, traced }
    }

    /// `export FLAGS -o PROFILE TRACE`, which must succeed: the profile, and what it said.
    fn export(&self, flags: &[&str]) -> (PathBuf, String) {
        let profile = self
            .file
            .with_extension(format!("{}.pb.gz", flags.join("")));
        let (status, stdout, stderr) = run_bounded(
            Command::new(bin())
                .arg("export")
                .args(flags)
                .arg("-o")
                .arg(&profile)
                .arg(&self.file),
        );
        assert_eq!(status, 0, "{stderr}");
        assert_eq!(stdout, "", "export writes its profile to -o alone");
        (profile, stderr)
    }

    /// The pages the kernel had present in the workload's region `name` at its exit.
    fn present(&self, name: &str) -> u64 {
        let regions = self.traced.truth("region", name);
        assert_eq!(regions.len(), 1, "{name}: {regions:?}");
        regions[0].present
    }

    /// `replay ARGS --json TRACE`'s objects.
    fn replay(&self, args: &[&str]) -> Vec<Value> {
        let (status, stdout, stderr) = run_bounded(
            Command::new(bin())
                .arg("replay")
                .args(args)
                .arg("--json")
                .arg(&self.file),
        );
        assert_eq!(status, 0, "{stderr}");
        serde_json::Deserializer::from_str(&stdout)
            .into_iter::<Value>()
            .map(|v| v.unwrap_or_else(|e| panic!("{e}: {stdout}")))
            .flat_map(|v| match v {
                Value::Array(items) => items,
                v => vec![v],
            })
            .collect()
    }

    /// `replay --by-site`'s `key` for the bottom-up rows of `function`, added up.
    fn by_site(&self, function: &str, key: &str) -> u64 {
        let rows: Vec<Value> = self
            .replay(&["--by-site"])
            .into_iter()
            .filter(|r| r["view"] == "bottom_up" && r["function"] == function)
            .collect();
        assert!(!rows.is_empty(), "no by-site row for {function}");
        rows.iter().map(|r| r[key].as_u64().unwrap()).sum()
    }
}

/// `go tool pprof -top` of one sample type, every node kept: each function's flat and
/// cumulative value, in bytes or pages.
fn top(
    profile: &Path,
    sample_index: &str,
    diff_base: Option<&Path>,
) -> HashMap<String, (i64, i64)> {
    let index = format!("-sample_index={sample_index}");
    let base = diff_base.map(|b| format!("-diff_base={}", b.display()));
    let mut args = vec![
        "-top",
        "-unit=B",
        "-nodefraction=0",
        "-edgefraction=0",
        &index,
    ];
    args.extend(base.as_deref());
    let profile = profile.display().to_string();
    args.push(&profile);
    let out = pprof(&args);
    let value = |s: &str| -> i64 {
        s.trim_end_matches(['B', 's'])
            .trim_end_matches("page")
            .parse()
            .unwrap_or_else(|e| panic!("{s}: {e}\n{out}"))
    };
    let mut rows = HashMap::new();
    let header = out
        .lines()
        .position(|l| l.trim_start().starts_with("flat"))
        .unwrap_or_else(|| panic!("no table in:\n{out}"));
    for line in out.lines().skip(header + 1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert!(cols.len() >= 6, "a row of -top: {line}");
        let name = cols[5..].join(" ");
        rows.insert(name, (value(cols[0]), value(cols[3])));
    }
    rows
}

/// The cumulative value of `function` in `rows` (0 when pprof shows no row for it).
fn cum(rows: &HashMap<String, (i64, i64)>, function: &str) -> i64 {
    rows.get(function).map_or(0, |r| r.1)
}

/// The mapping sites of export_sites.c under `go tool pprof -top` hold the bytes the kernel had
/// present in each, which are also what `replay --by-site` gives: resident at the peak, at the
/// end, and first touched; and the whole profile's resident bytes are the tree's peak.
#[test]
fn pprof_top_names_both_sites_with_the_bytes_replay_by_site_gives() {
    if !installed("go") {
        return;
    }
    let trace = Trace::of(&c_workload("export_sites", Build::DwarfOnly), &[], true);
    let (profile, said) = trace.export(&[]);
    assert!(said.contains("samples"), "{said}");
    let resident = top(&profile, "resident_space", None);
    let touched = top(&profile, "touched_space", None);
    for (function, region) in [("map_steady", "steady"), ("map_growing", "growing")] {
        let kernel = trace.present(region) * PAGE;
        assert!(kernel > 0, "{region}: nothing present");
        let by_site = trace.by_site(function, "resident_at_peak_bytes");
        assert_eq!(
            by_site, kernel,
            "{function}: replay --by-site vs the kernel"
        );
        assert_eq!(
            cum(&resident, function) as u64,
            kernel,
            "{function}: {resident:#?}"
        );
        assert_eq!(
            cum(&touched, function) as u64,
            kernel,
            "{function}: {touched:#?}"
        );
        // Pages, the same.
        let pages = top(&profile, "resident_pages", None);
        assert_eq!(
            cum(&pages, function) as u64,
            kernel / PAGE,
            "{function}: {pages:#?}"
        );
    }
    // Every resident byte is somewhere: the flat values add up to the tree's peak.
    let flat: i64 = resident.values().map(|r| r.0).sum();
    let at_peak = trace.replay(&["--at", "peak"]);
    let peak = at_peak[0]["tree_resident_bytes"].as_u64().unwrap();
    assert_eq!(flat as u64, peak, "{resident:#?}");

    // Both regions are kept to the exit: at the end, the same bytes.
    let (at_end, said) = trace.export(&["--at", "end"]);
    assert!(said.contains("as it ended"), "{said}");
    let resident = top(&at_end, "resident_space", None);
    for (function, region) in [("map_steady", "steady"), ("map_growing", "growing")] {
        let kernel = trace.present(region) * PAGE;
        assert_eq!(trace.by_site(function, "resident_at_exit_bytes"), kernel);
        assert_eq!(
            cum(&resident, function) as u64,
            kernel,
            "{function}: {resident:#?}"
        );
    }
    // Before the program ran, nothing of it was resident.
    let (at_zero, _) = trace.export(&["--at", "0"]);
    let resident = top(&at_zero, "resident_space", None);
    assert_eq!(cum(&resident, "map_steady"), 0, "{resident:#?}");
    for p in [profile, at_end, at_zero] {
        std::fs::remove_file(p).ok();
    }
}

/// Two runs of export_sites.c, the second with map_growing's region grown by 512 pages:
/// `go tool pprof -diff_base` shows that growth at map_growing and its callers, and no change
/// anywhere else.
#[test]
fn pprof_diff_base_of_two_runs_shows_the_grown_site_and_no_other() {
    if !installed("go") {
        return;
    }
    let program = c_workload("export_sites", Build::DwarfOnly);
    let before = Trace::of(&program, &["256"], true);
    let after = Trace::of(&program, &["768"], true);
    let (base, _) = before.export(&[]);
    let (grown, _) = after.export(&[]);
    let growth = ((after.present("growing") - before.present("growing")) * PAGE) as i64;
    assert!(growth > 0);
    assert_eq!(after.present("steady"), before.present("steady"));
    for sample_index in ["resident_space", "touched_space"] {
        let diff = top(&grown, sample_index, Some(&base));
        assert_eq!(
            cum(&diff, "map_growing"),
            growth,
            "{sample_index}: {diff:#?}"
        );
        assert_eq!(cum(&diff, "map_steady"), 0, "{sample_index}: {diff:#?}");
        // What is outside map_growing's stacks did not change: the same program, the same
        // libraries. Only the pages without a stack may differ by a page or two: the stack's
        // start moves within its page from run to run (address space randomization).
        let others = top_ignoring(&grown, sample_index, &base, "map_growing");
        for (function, (flat, _)) in &others {
            let noise = if function == "(no stack)" {
                2 * PAGE as i64
            } else {
                0
            };
            assert!(
                flat.abs() <= noise,
                "{sample_index}: {function} changed by {flat}: {others:#?}"
            );
        }
    }
    for p in [base, grown] {
        std::fs::remove_file(p).ok();
    }
}

/// `-top -diff_base` of the samples whose stacks do not pass through `function`.
fn top_ignoring(
    profile: &Path,
    sample_index: &str,
    base: &Path,
    function: &str,
) -> HashMap<String, (i64, i64)> {
    let out = pprof(&[
        "-top",
        "-unit=B",
        "-nodefraction=0",
        &format!("-ignore=^{function}$"),
        &format!("-sample_index={sample_index}"),
        &format!("-diff_base={}", base.display()),
        &profile.display().to_string(),
    ]);
    let mut rows = HashMap::new();
    let Some(header) = out.lines().position(|l| l.trim_start().starts_with("flat")) else {
        return rows;
    };
    for line in out.lines().skip(header + 1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let flat: i64 = cols[0].trim_end_matches('B').parse().unwrap();
        rows.insert(cols[5..].join(" "), (flat, 0));
    }
    rows
}

/// One sample of `go tool pprof -raw`: its values and labels.
#[derive(Debug)]
struct RawSample {
    values: Vec<i64>,
    labels: HashMap<String, String>,
}

/// The sample types and samples `go tool pprof -raw` reads from `profile`.
fn raw(profile: &Path) -> (Vec<String>, Vec<RawSample>) {
    let out = pprof(&["-raw", &profile.display().to_string()]);
    let mut lines = out.lines().skip_while(|l| *l != "Samples:").skip(1);
    let types: Vec<String> = lines
        .next()
        .unwrap_or_else(|| panic!("no samples in:\n{out}"))
        .split_whitespace()
        .map(|t| t.split('/').next().unwrap().to_string())
        .collect();
    let mut samples: Vec<RawSample> = Vec::new();
    for line in lines.take_while(|l| !l.starts_with("Locations")) {
        // `V V V V: LOCATIONS` starts a sample; the lines after it are its labels.
        let numbers = |values: &str| {
            let mut values = values.split_whitespace().peekable();
            values.peek().is_some() && values.all(|v| v.parse::<i64>().is_ok())
        };
        match line.split_once(':') {
            Some((values, _)) if numbers(values) => {
                samples.push(RawSample {
                    values: values
                        .split_whitespace()
                        .map(|v| v.parse().unwrap())
                        .collect(),
                    labels: HashMap::new(),
                });
            }
            _ => {
                let sample = samples.last_mut().unwrap_or_else(|| panic!("{line}"));
                sample.labels.extend(labels_of(line));
            }
        }
    }
    (types, samples)
}

/// `key:[value] key:[value]` as -raw prints a sample's labels.
fn labels_of(line: &str) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    let mut rest = line.trim();
    while let Some((key, after)) = rest.split_once(":[") {
        let Some((value, next)) = after.split_once(']') else {
            break;
        };
        labels.push((key.trim().to_string(), value.to_string()));
        rest = next.trim_start();
    }
    labels
}

/// A program whose threads rename themselves between first touches (thread_names.c): every
/// sample of its profile parses under `go tool pprof -raw`, as many as `export` wrote, and the
/// labels say which thread, under which name, first touched each page.
#[test]
fn pprof_raw_parses_every_sample_with_the_thread_and_name_of_each_first_touch() {
    if !installed("go") {
        return;
    }
    let trace = Trace::of(&workload("thread_names"), &[], false);
    let (profile, said) = trace.export(&[]);
    let (types, samples) = raw(&profile);
    assert_eq!(
        types,
        [
            "resident_space",
            "resident_pages",
            "touched_space",
            "touched_pages"
        ]
    );
    let written: usize = said
        .split(" samples")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{said}"));
    assert_eq!(samples.len(), written, "{said}");
    for s in &samples {
        assert_eq!(s.values.len(), 4, "{s:?}");
        assert_eq!(s.values[0], s.values[1] * PAGE as i64, "{s:?}");
        assert_eq!(s.values[2], s.values[3] * PAGE as i64, "{s:?}");
        assert!(s.labels.contains_key("pid"), "{s:?}");
    }
    // The first touches are the stream's, each page once.
    let touched: u64 = trace
        .traced
        .events("resident")
        .map(|e| match e {
            Event::Resident { start, end, .. } => (end - start) / PAGE,
            _ => 0,
        })
        .sum();
    let in_profile: i64 = samples.iter().map(|s| s.values[3]).sum();
    assert_eq!(in_profile as u64, touched);

    // Each worker wrote 40*(i+1) pages as `prctl-i`, then 24*(i+1) more as `self-i`, and the
    // kernel had them all present at its end.
    let workers: Vec<(i32, u64)> = trace
        .traced
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("thread "))
        .map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            (w[0].parse().unwrap(), w[3].parse().unwrap())
        })
        .collect();
    assert_eq!(workers.len(), 3, "{}", trace.traced.stdout);
    for (i, (tid, pages)) in workers.into_iter().enumerate() {
        let under = |name: &str| -> i64 {
            samples
                .iter()
                .filter(|s| {
                    s.labels.get("tid") == Some(&tid.to_string())
                        && s.labels.get("thread").map(String::as_str) == Some(name)
                        && s.labels.get("kind").map(String::as_str) == Some("anon")
                })
                .map(|s| s.values[3])
                .sum()
        };
        let first = 40 * (i as i64 + 1);
        assert_eq!(under(&format!("prctl-{i}")), first, "thread {tid}");
        // Its stack's pages are first touched under its creator's name or its own.
        assert_eq!(
            under(&format!("self-{i}")),
            pages as i64 - first,
            "thread {tid}"
        );
    }
    std::fs::remove_file(profile).ok();
}

/// A fork child's copies of its parent's pages were first touched by the parent's thread: each
/// resident page of either process, of an anonymous mapping or the heap, is labelled with the
/// thread that touched it, across the child's description of its space after the fork. Pages
/// the two share are in each one's samples, and export says that the tree counts them once.
#[test]
fn a_fork_childs_copies_keep_the_thread_that_first_touched_them() {
    if !installed("go") {
        return;
    }
    let trace = Trace::of(&workload("fork_touch"), &[], true);
    let (profile, said) = trace.export(&[]);
    let (_, samples) = raw(&profile);
    let mut pids = std::collections::BTreeSet::new();
    for s in samples.iter().filter(|s| s.values[0] > 0) {
        pids.insert(s.labels["pid"].clone());
        let kind = s.labels.get("kind").map(String::as_str);
        if matches!(kind, Some("anon" | "heap")) {
            assert!(s.labels.contains_key("tid"), "no first toucher: {s:?}");
        }
    }
    assert!(pids.len() >= 2, "the parent and its child: {pids:?}");
    // Where the two shared pages at the peak, the samples hold more than the tree, and export
    // says why.
    let in_samples: i64 = samples.iter().map(|s| s.values[0]).sum();
    let at_peak = trace.replay(&["--at", "peak"]);
    let tree = at_peak[0]["tree_resident_bytes"].as_i64().unwrap();
    assert!(in_samples >= tree, "{in_samples} < {tree}");
    let says = said.contains("pages shared since a fork count in each process");
    assert_eq!(says, in_samples > tree, "{said}");
    std::fs::remove_file(profile).ok();
}

/// Input `export` cannot use gets one line on stderr and status 2, and no profile.
#[test]
fn export_of_bad_input_says_one_line_and_exits_2() {
    let trace = Trace::of(&workload("one_thread"), &[], true);
    let out = scratch("export-bad").with_extension("pb.gz");
    let not_a_stream = scratch("not-a-stream");
    std::fs::write(&not_a_stream, "hello\n").unwrap();
    let cut = scratch("cut");
    let text = std::fs::read_to_string(&trace.file).unwrap();
    // Inside a line: a cut at a line's end is a trace that merely stops (a warning, status 0).
    let at = text.lines().count() * 2 / 3;
    std::fs::write(&cut, cut_inside_line(&text, at)).unwrap();
    let file = trace.file.display().to_string();
    let empty = scratch("empty");
    std::fs::write(&empty, "").unwrap();
    // What the argument parser refuses (with its usage hint), then what export itself does.
    let cases: [(&[&str], &str, bool); 8] = [
        (&["--at", "soon", &file], "neither a time", true),
        (&["--at", "1e30", &file], "later than any trace", true),
        (&["--format", "svg", &file], "svg", true),
        (&["--at", "1e9", &file], "after the trace's end", false),
        (
            &[&not_a_stream.display().to_string()],
            "not a stream line",
            false,
        ),
        (&[&cut.display().to_string()], "line", false),
        (&[&empty.display().to_string()], "no stream line", false),
        (&["-"], "reading stdin", false),
    ];
    for (args, says, usage) in cases {
        let mut cmd = Command::new(bin());
        cmd.arg("export").args(args);
        if args != ["-"] {
            cmd.arg("-o").arg(&out);
        }
        let (status, _, stderr) = run_bounded(&mut cmd);
        assert_eq!(status, 2, "export {args:?}: {stderr}");
        assert!(stderr.contains(says), "export {args:?}: {stderr}");
        let first = stderr.lines().next().unwrap_or("");
        assert!(first.contains(says), "export {args:?}: {stderr}");
        if !usage {
            assert_eq!(stderr.lines().count(), 1, "export {args:?}: {stderr}");
        }
        assert!(!out.exists(), "export {args:?} wrote a profile");
    }
    // A trace read from a pipe or a device has no place beside it for the profile.
    let (status, _, stderr) = run_bounded(Command::new(bin()).args(["export", "/dev/stdin"]));
    assert_eq!(status, 2, "{stderr}");
    assert!(stderr.contains("give -o FILE"), "{stderr}");
    // The trace as its own output.
    let (status, _, stderr) = run_bounded(Command::new(bin()).args(["export", "-o", &file, &file]));
    assert_eq!(status, 2, "{stderr}");
    assert!(stderr.contains("the trace itself"), "{stderr}");

    // A cut trace with --lenient: a profile all the same, the cut said.
    let (status, _, stderr) = run_bounded(
        Command::new(bin())
            .args(["export", "--lenient", "-o"])
            .arg(&out)
            .arg(&cut),
    );
    assert!(status <= 1, "{stderr}");
    assert!(stderr.contains("incomplete"), "{stderr}");
    if installed("go") {
        pprof(&["-raw", &out.display().to_string()]);
    }
    for p in [out, not_a_stream, cut, empty] {
        std::fs::remove_file(p).ok();
    }
}
