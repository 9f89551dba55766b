//! Traces gathered from many machines (issue 28, docs/fleet.md): the `start` line says where a
//! trace was made (host, cgroup, container), and docs/fleet.md's DuckDB recipe, run as written
//! over three traces, gives the per-program peaks `replay` gives.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use mevi_actors::event::Event;
use serde_json::Value;

use crate::sites::{Build, c_workload};
use crate::util::{bin, parse_stream, run_bounded, scratch, skip, workload};

/// `run -o FILE -- program`, which must exit 0.
fn traced(dir: &Path, name: &str, program: &[&str]) -> PathBuf {
    let file = dir.join(name);
    let (status, _, stderr) = run_bounded(
        Command::new(bin())
            .arg("run")
            .arg("-o")
            .arg(&file)
            .arg("--")
            .args(program),
    );
    assert_eq!(status, 0, "{stderr}");
    file
}

/// The `start` line names the machine and the cgroup the program ran in: ours, as the kernel
/// gives them to this test.
#[test]
fn the_start_line_names_the_host_and_the_cgroup() {
    let dir = scratch("fleet-start");
    std::fs::create_dir_all(&dir).unwrap();
    let file = traced(
        &dir,
        "one.jsonl",
        &[&workload("one_thread").display().to_string()],
    );
    let lines = parse_stream(&std::fs::read_to_string(&file).unwrap());
    let Event::Start {
        host,
        cgroup,
        container,
        ..
    } = &lines[0].event
    else {
        panic!("no start line first: {:?}", lines[0]);
    };
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(host.as_deref(), Some(hostname.trim()));
    let ours = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let unified = ours.lines().find_map(|l| l.strip_prefix("0::"));
    assert_eq!(cgroup.as_deref(), unified, "{ours}");
    // A container's id is a 64-digit hex name in the path; the test's own cgroup says whether
    // it runs in one.
    let in_container = unified.is_some_and(|p| {
        p.split(['/', '-', '.', ':'])
            .any(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
    });
    assert_eq!(
        container.is_some(),
        in_container,
        "{cgroup:?} {container:?}"
    );
    std::fs::remove_dir_all(dir).ok();
}

/// docs/fleet.md's SQL, between its `-- per-program peaks` markers.
fn fleet_query() -> String {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/fleet.md"))
        .unwrap();
    let start = doc
        .find("-- per-program peaks")
        .expect("docs/fleet.md has the per-program peaks query");
    let end = doc[start..].find("```").unwrap() + start;
    doc[start..end].to_string()
}

/// Three traces of one, two and several programs; docs/fleet.md's query over them in DuckDB
/// (python3's, from PyPI: .ci/install-deps) equals, host by host and program by program, the
/// largest `peak_resident_bytes` of `replay --json`'s processes.
#[test]
fn the_duckdb_recipe_gives_the_per_program_peaks_replay_gives() {
    let probe = Command::new("python3")
        .args(["-c", "import duckdb"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        skip("duckdb (python3) not installed");
        return;
    }
    let dir = scratch("fleet");
    std::fs::create_dir_all(&dir).unwrap();
    let sites = c_workload("export_sites", Build::DwarfOnly)
        .display()
        .to_string();
    let script = format!("{sites} 300; ls / >/dev/null");
    let traces = [
        traced(&dir, "a.jsonl", &[&sites, "256"]),
        traced(&dir, "b.jsonl", &["sh", "-c", &script]),
        traced(
            &dir,
            "c.jsonl",
            &[&workload("fork_touch").display().to_string()],
        ),
    ];

    // What replay says: the largest peak of each program, by host.
    let mut want: BTreeMap<(String, String), u64> = BTreeMap::new();
    for trace in &traces {
        let lines = parse_stream(&std::fs::read_to_string(trace).unwrap());
        let Event::Start { host, .. } = &lines[0].event else {
            panic!("no start line");
        };
        let (status, stdout, stderr) =
            run_bounded(Command::new(bin()).args(["replay", "--json"]).arg(trace));
        assert_eq!(status, 0, "{stderr}");
        for row in stdout
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
        {
            let key = (
                host.clone().unwrap(),
                row["name"].as_str().unwrap().to_string(),
            );
            let peak = row["peak_resident_bytes"].as_u64().unwrap();
            let max = want.entry(key).or_default();
            *max = (*max).max(peak);
        }
    }
    assert!(want.len() >= 4, "{want:?}");

    // What DuckDB says, of the glob the recipe reads.
    let query = fleet_query().replace("traces/*.jsonl", &format!("{}/*.jsonl", dir.display()));
    let script = "import duckdb, json, sys\n\
                  for host, program, processes, peak in duckdb.sql(sys.argv[1]).fetchall():\n\
                  \x20   print(json.dumps([host, program, processes, peak]))";
    let (status, stdout, stderr) =
        run_bounded(Command::new("python3").args(["-c", script, &query]));
    assert_eq!(status, 0, "{query}\n{stderr}");
    let mut got: BTreeMap<(String, String), u64> = BTreeMap::new();
    for row in stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
    {
        let key = (
            row[0].as_str().unwrap().to_string(),
            row[1].as_str().unwrap().to_string(),
        );
        got.insert(key, row[3].as_u64().unwrap());
    }
    assert_eq!(got, want, "{stdout}");
    std::fs::remove_dir_all(dir).ok();
}
