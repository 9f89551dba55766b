//! `mevi-actors check TRACE` (issue 28): a gate for CI. Limits under and over the figures the
//! kernel gave the workload (its pagemap), a saved baseline within and over its tolerance, and a
//! JUnit report that a real XML parser (python3's) reads.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::sites::{Build, c_workload};
use crate::util::{PAGE, Traced, bin, installed, run_bounded, scratch, traced_to};

/// A trace on disk, removed when dropped, and what the workload said of its pages.
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
    /// export_sites.c with map_growing's region `pages` long, run without address
    /// randomization (two runs touch the same pages), agreeing with the kernel.
    fn export_sites(pages: &str) -> Trace {
        let program = c_workload("export_sites", Build::DwarfOnly);
        let file = scratch("check");
        let traced = traced_to(
            Command::new("setarch")
                .args(["-R", bin(), "run", "-o"])
                .arg(&file)
                .arg("--")
                .arg(&program)
                .arg(pages),
            &file,
        );
        traced.assert_matches_kernel();
        Trace { file, traced }
    }

    /// The bytes the kernel had present in region `name` at the workload's end.
    fn present(&self, name: &str) -> u64 {
        self.traced.truth("region", name)[0].present * PAGE
    }

    /// `check ARGS TRACE`: its status and stdout; stderr says nothing but what it saved.
    fn check(&self, args: &[&str]) -> (i32, String) {
        let (status, stdout, stderr) =
            run_bounded(Command::new(bin()).arg("check").args(args).arg(&self.file));
        assert!(
            stderr.lines().all(|l| l.contains("saved to")),
            "check {args:?}: {stderr}"
        );
        (status, stdout)
    }
}

/// The figure `check` says is over, on the row naming `what`.
fn over_row<'a>(stdout: &'a str, what: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.contains(what) && !l.starts_with("check of"))
        .unwrap_or_else(|| panic!("no row for {what}:\n{stdout}"))
}

/// Limits at and just under what the kernel had: within, then over, for a site, a process and
/// the whole tree.
#[test]
fn limits_at_the_kernels_figures_pass_and_a_byte_under_them_fail() {
    if !installed("setarch") {
        return;
    }
    let trace = Trace::export_sites("256");
    let growing = trace.present("growing");
    let both = growing + trace.present("steady");
    let bytes = |n: u64| format!("{n}B");

    let (status, out) = trace.check(&["--site", "map_growing", "--max-peak", &bytes(growing)]);
    assert_eq!(status, 0, "{out}");
    assert!(
        out.starts_with("check of") && out.contains("0 of 1 figure(s) over"),
        "{out}"
    );
    let (status, out) = trace.check(&["--site", "map_growing", "--max-peak", &bytes(growing - 1)]);
    assert_eq!(status, 1, "{out}");
    over_row(&out, "map_growing (export_sites.c:");

    // The process holds both regions at its peak, and more (its stack, the loader's pages).
    let (status, out) =
        trace.check(&["--process", "export_sites*", "--max-peak", &bytes(both - 1)]);
    assert_eq!(status, 1, "{out}");
    over_row(&out, "export_sites");
    let (status, out) = trace.check(&["--max-tree-peak", &bytes(both - 1)]);
    assert_eq!(status, 1, "{out}");
    assert!(
        over_row(&out, "the whole tree's peak").contains("MiB"),
        "{out}"
    );
    // What is over comes with where to look: the largest sites, map_growing among them.
    let hints: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.contains("largest sites"))
        .collect();
    assert!(hints.iter().any(|l| l.contains("map_growing")), "{out}");
    let (status, out) = trace.check(&["--max-tree-peak", "1GiB", "--max-final", "1GiB"]);
    assert_eq!(status, 0, "{out}");

    // A pattern that matches nothing fails: a gate that checks nothing must not pass.
    let (status, out) = trace.check(&["--process", "no-such-program", "--max-peak", "1GiB"]);
    assert_eq!(status, 1, "{out}");
    over_row(&out, "no process of the trace matches no-such-program");
}

/// A baseline saved from one run: a second run of the same program is within 5%; a run whose
/// map_growing grew by 512 pages is over, and the site that grew comes first, by the kernel's
/// growth. A trace works as a baseline too.
#[test]
fn a_baseline_passes_the_same_run_and_fails_the_grown_one() {
    if !installed("setarch") {
        return;
    }
    let first = Trace::export_sites("256");
    let baseline = scratch("baseline").with_extension("json");
    let saved = baseline.display().to_string();
    let (status, out) = first.check(&["--save-baseline", &saved]);
    assert_eq!(status, 0, "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&baseline).unwrap()).unwrap();
    assert_eq!(json["mevi_baseline"], 1, "{json}");

    let again = Trace::export_sites("256");
    let (status, out) = again.check(&["--baseline", &saved, "--tolerance", "5%"]);
    assert_eq!(status, 0, "{out}");
    assert!(out.contains("0 of 3 figure(s) over"), "{out}");

    let grown = Trace::export_sites("768");
    let growth = grown.present("growing") - first.present("growing");
    for base in [saved.as_str(), &first.file.display().to_string()] {
        let (status, out) = grown.check(&["--baseline", base]);
        assert_eq!(status, 1, "{out}");
        over_row(&out, "the whole tree's peak");
        let grew: Vec<&str> = out
            .lines()
            .skip_while(|l| !l.contains("grew most"))
            .collect();
        assert!(grew.len() > 1, "{out}");
        assert!(grew[1].contains("map_growing"), "{out}");
        assert!(
            grew[1]
                .trim_start()
                .starts_with(&format!("+{} ", size(growth))),
            "{out}"
        );
    }
    // A tolerance wide enough lets it through.
    let (status, out) = grown.check(&["--baseline", &saved, "--tolerance", "200%"]);
    assert_eq!(status, 0, "{out}");
    std::fs::remove_file(baseline).ok();
}

/// `2 MiB` as the tables write sizes.
fn size(bytes: u64) -> String {
    humansize::format_size(bytes, humansize::BINARY)
}

/// `--junit`: one test case per figure, a failure for each one over, read by python3's XML
/// parser.
#[test]
fn junit_report_has_a_case_per_figure_and_a_failure_per_one_over() {
    if !installed("setarch") || !installed("python3") {
        return;
    }
    let trace = Trace::export_sites("256");
    let report = scratch("junit").with_extension("xml");
    let growing = trace.present("growing");
    let (status, _) = trace.check(&[
        "--site",
        "map_*",
        "--max-peak",
        &format!("{growing}B"),
        "--max-final",
        "1B",
        "--junit",
        &report.display().to_string(),
    ]);
    assert_eq!(status, 1);
    let parsed = parse_junit(&report);
    // Two sites (map_steady, map_growing), two limits each; both finals are over.
    assert_eq!(
        parsed,
        "tests=4 failures=2 cases=4 failed=2",
        "{}",
        std::fs::read_to_string(&report).unwrap()
    );
    std::fs::remove_file(report).ok();
}

/// `tests=N failures=F cases=C failed=D` of a JUnit file, as python3's ElementTree reads it.
fn parse_junit(path: &Path) -> String {
    let script = "import sys, xml.etree.ElementTree as E\n\
                  root = E.parse(sys.argv[1]).getroot()\n\
                  cases = list(root.iter('testcase'))\n\
                  failed = [c for c in cases if c.find('failure') is not None]\n\
                  print(f\"tests={root.get('tests')} failures={root.get('failures')} \
                  cases={len(cases)} failed={len(failed)}\")";
    let (status, stdout, stderr) =
        run_bounded(Command::new("python3").args(["-c", script]).arg(path));
    assert_eq!(status, 0, "{stderr}");
    stdout.trim().to_string()
}

/// Usage errors: one line and status 2.
#[test]
fn check_of_bad_input_says_one_line_and_exits_2() {
    let trace = Trace::export_sites("256");
    let garbage = scratch("garbage");
    std::fs::write(&garbage, "{\"not\": \"a baseline\"}\n").unwrap();
    let empty = scratch("empty");
    std::fs::write(&empty, "").unwrap();
    let g = garbage.display().to_string();
    let e = empty.display().to_string();
    let t = trace.file.display().to_string();
    let cases: [(&[&str], &str, bool); 6] = [
        (&[&t], "nothing to check", false),
        (&["--max-peak", "12Q", &t], "12Q", true),
        (&["--baseline", &t, "--tolerance", "lots", &t], "lots", true),
        (
            &["--process", "a", "--site", "b", "--max-peak", "1", &t],
            "cannot be used with",
            true,
        ),
        (
            &["--baseline", &g, &t],
            "neither a trace nor a baseline",
            false,
        ),
        (&["--max-peak", "1", &e], "no stream line", false),
    ];
    for (args, says, usage) in cases {
        let (status, _, stderr) = run_bounded(Command::new(bin()).arg("check").args(args));
        assert_eq!(status, 2, "check {args:?}: {stderr}");
        assert!(
            stderr.lines().next().unwrap_or("").contains(says),
            "check {args:?}: {stderr}"
        );
        if !usage {
            assert_eq!(stderr.lines().count(), 1, "check {args:?}: {stderr}");
        }
    }
    for p in [garbage, empty] {
        std::fs::remove_file(p).ok();
    }
}
