//! `mevi-actors diff A B` (issue 28): two traces compared per program and per call site. The
//! grown site's change is the kernel's (the workload's pagemap), two runs of one deterministic
//! workload differ by at most 1% on every row, and what only one trace has is listed.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::sites::{Build, c_workload};
use crate::util::{PAGE, Traced, bin, installed, run_bounded, scratch, traced_to, workload};

/// A trace on disk, removed when dropped.
struct TraceFile(PathBuf);

impl Drop for TraceFile {
    fn drop(&mut self) {
        std::fs::remove_file(&self.0).ok();
    }
}

/// `setarch -R mevi-actors run -o FILE -- program args`: with the address space laid out the
/// same in every run (no randomization), a deterministic program touches the same pages each
/// time, to the page. Its exit must be 0; the stream, and what the program printed.
fn traced(program: &[&str]) -> (TraceFile, Traced) {
    let file = TraceFile(scratch("diff"));
    let traced = traced_to(
        Command::new("setarch")
            .args(["-R", bin(), "run", "-o"])
            .arg(&file.0)
            .arg("--")
            .args(program),
        &file.0,
    );
    (file, traced)
}

/// `diff --json A B`'s rows.
fn diff(a: &Path, b: &Path) -> Vec<Value> {
    let (status, stdout, stderr) =
        run_bounded(Command::new(bin()).args(["diff", "--json"]).arg(a).arg(b));
    assert_eq!(status, 0, "{stderr}");
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn figure(row: &Value, side: &str, key: &str) -> Option<u64> {
    row.get(side).map(|s| s[key].as_u64().unwrap())
}

const FIGURES: [&str; 3] = ["peak_bytes", "final_bytes", "touched_bytes"];

/// Two runs of a shell running export_sites.c twice (three processes one after another): every
/// row, the tree, each program and each site, is in both and differs by at most 1%.
#[test]
fn two_runs_of_one_deterministic_workload_differ_by_at_most_one_percent_on_every_row() {
    if !installed("setarch") {
        return;
    }
    let path = c_workload("export_sites", Build::DwarfOnly);
    let program = path.display().to_string();
    let name = path.file_name().unwrap().to_string_lossy();
    let script = format!("{program} 256; {program} 512");
    let (a, _) = traced(&["sh", "-c", &script]);
    let (b, _) = traced(&["sh", "-c", &script]);
    let rows = diff(&a.0, &b.0);
    let programs: Vec<&Value> = rows.iter().filter(|r| r["table"] == "program").collect();
    assert_eq!(programs.len(), 3, "sh and two export_sites: {programs:#?}");
    let names: Vec<&str> = programs
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    // Two processes of one program, told apart by the argument that differs.
    assert!(names.contains(&format!("{name} 256").as_str()), "{names:?}");
    assert!(names.contains(&format!("{name} 512").as_str()), "{names:?}");
    assert!(
        rows.iter()
            .any(|r| r["name"].as_str().unwrap().starts_with("map_growing"))
    );
    for row in &rows {
        for key in FIGURES {
            let (x, y) = (figure(row, "a", key), figure(row, "b", key));
            let (Some(x), Some(y)) = (x, y) else {
                panic!("a row in one run only: {row}");
            };
            assert!(
                x.abs_diff(y) * 100 <= x.max(y),
                "{key} differs by more than 1%: {row}"
            );
        }
    }
}

/// export_sites.c with map_growing's region grown by 512 pages: the first site row is
/// map_growing, changed by what the kernel had present more, at the peak, the end and in first
/// touches; the program's row has grown by as much; map_steady has not changed.
#[test]
fn diff_puts_the_grown_site_first_with_the_kernels_growth() {
    if !installed("setarch") {
        return;
    }
    let program = c_workload("export_sites", Build::DwarfOnly)
        .display()
        .to_string();
    let (a, before) = traced(&[&program, "256"]);
    let (b, after) = traced(&[&program, "768"]);
    before.assert_matches_kernel();
    after.assert_matches_kernel();
    let present = |t: &Traced, region: &str| t.truth("region", region)[0].present;
    let growth = (present(&after, "growing") - present(&before, "growing")) * PAGE;
    assert!(growth > 0);
    let rows = diff(&a.0, &b.0);
    let sites: Vec<&Value> = rows.iter().filter(|r| r["table"] == "site").collect();
    assert_eq!(sites[0]["site"]["function"], "map_growing", "{sites:#?}");
    for key in FIGURES {
        assert_eq!(
            sites[0]["change"][key].as_i64(),
            Some(growth as i64),
            "{key}"
        );
    }
    let steady = sites
        .iter()
        .find(|r| r["site"]["function"] == "map_steady")
        .expect("a map_steady row");
    for key in FIGURES {
        assert_eq!(steady["change"][key], 0, "{steady}");
    }
    let programs: Vec<&Value> = rows.iter().filter(|r| r["table"] == "program").collect();
    assert_eq!(programs.len(), 1, "{programs:#?}");
    let grown = programs[0]["change"]["peak_bytes"].as_i64().unwrap();
    assert!(grown.abs_diff(growth as i64) <= 2 * PAGE, "{}", programs[0]);
    let tree = &rows[0];
    assert_eq!(tree["table"], "tree");
    assert_eq!(
        tree["change"]["peak_bytes"],
        programs[0]["change"]["peak_bytes"]
    );

    // The table says the same, the grown site first.
    let (status, text, stderr) = run_bounded(Command::new(bin()).arg("diff").arg(&a.0).arg(&b.0));
    assert_eq!(status, 0, "{stderr}");
    let first_site = text
        .lines()
        .skip_while(|l| !l.starts_with("by call site"))
        .nth(2)
        .unwrap_or("");
    assert!(
        first_site.contains("map_growing (export_sites.c:"),
        "{text}"
    );
    assert!(first_site.trim_start().starts_with('+'), "{text}");
}

/// Processes only one trace has are listed as such, with their figures.
#[test]
fn processes_of_one_trace_only_are_listed_apart() {
    if !installed("setarch") {
        return;
    }
    let (a, _) = traced(&[&workload("one_thread").display().to_string()]);
    let (b, _) = traced(&[&workload("thread_names").display().to_string()]);
    let rows = diff(&a.0, &b.0);
    let programs: Vec<&Value> = rows.iter().filter(|r| r["table"] == "program").collect();
    assert_eq!(programs.len(), 2, "{programs:#?}");
    let only = |side: &str, other: &str, name: &str| {
        programs
            .iter()
            .find(|r| r["name"] == name)
            .filter(|r| r.get(side).is_some() && r.get(other).is_none())
            .unwrap_or_else(|| panic!("{name} in {side} only: {programs:#?}"))
    };
    let one = only("a", "b", "one_thread");
    assert!(figure(one, "a", "peak_bytes").unwrap() > 0);
    assert_eq!(
        one["change"]["peak_bytes"].as_i64(),
        Some(-(figure(one, "a", "peak_bytes").unwrap() as i64))
    );
    only("b", "a", "thread_names");
}

/// What `diff` cannot compare: one line and status 2.
#[test]
fn diff_of_bad_input_says_one_line_and_exits_2() {
    let (a, _) = traced(&[&workload("one_thread").display().to_string()]);
    let text = std::fs::read_to_string(&a.0).unwrap();
    let other_schema = TraceFile(scratch("schema"));
    std::fs::write(
        &other_schema.0,
        text.replacen("\"schema\":1,", "\"schema\":2,", 1),
    )
    .unwrap();
    let not_a_stream = TraceFile(scratch("not-a-stream"));
    std::fs::write(&not_a_stream.0, "hello\n").unwrap();
    let a_path = a.0.display().to_string();
    let cases: [(&[&str], &str); 3] = [
        (&[&a_path, &other_schema.0.display().to_string()], "schema"),
        (
            &[&a_path, &not_a_stream.0.display().to_string()],
            "not a stream line",
        ),
        (&["-", "-"], "not both"),
    ];
    for (args, says) in cases {
        let (status, stdout, stderr) = run_bounded(Command::new(bin()).arg("diff").args(args));
        assert_eq!(status, 2, "diff {args:?}: {stderr}");
        assert_eq!(stdout, "", "diff {args:?}");
        assert_eq!(stderr.lines().count(), 1, "diff {args:?}: {stderr}");
        assert!(stderr.contains(says), "diff {args:?}: {stderr}");
    }
}
