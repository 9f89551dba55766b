//! Frames of JIT code (issue 28): code that no file holds, named by the map its JIT writes
//! (`perf-PID.map`). node, with `--perf-basic-prof --interpreted-frames-native-stack`, runs a
//! named JavaScript function that makes typed arrays (tests/workloads/jit_typed_arrays.js); the
//! stacks unwind through its code by frame pointers, and `replay --by-site` names it, with the
//! bytes the kernel says it made resident.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::util::{bin, installed, run_bounded, scratch};

#[test]
fn replay_by_site_names_the_javascript_function_that_made_typed_arrays() {
    if !installed("node") {
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/jit_typed_arrays.js");
    let file = scratch("jit");
    // node writes a log of its code (isolate-*-v8.log) where it runs: in a folder of the test's.
    let cwd = scratch("jit-cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    let (status, stdout, stderr) = run_bounded(
        Command::new(bin())
            .current_dir(&cwd)
            .args(["run", "-o"])
            .arg(&file)
            .args([
                "--",
                "node",
                "--perf-basic-prof",
                "--interpreted-frames-native-stack",
            ])
            .arg(&script),
    );
    assert_eq!(status, 0, "{stderr}");
    let truth: Value = stdout
        .lines()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(|v| v["truth"] == "anonymous")
        })
        .unwrap_or_else(|| panic!("no truth line: {stdout}"));
    let grew = truth["after"].as_u64().unwrap() - truth["before"].as_u64().unwrap();
    let written = truth["written"].as_u64().unwrap();

    let (status, out, stderr) = run_bounded(
        Command::new(bin())
            .args(["replay", "--by-site", "--json"])
            .arg(&file),
    );
    assert_eq!(status, 0, "{stderr}");
    let rows: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["view"] == "bottom_up")
        .collect();
    let named: Vec<&Value> = rows
        .iter()
        .filter(|r| {
            r["function"]
                .as_str()
                .is_some_and(|f| f.starts_with("JS:") && f.contains("allocateTypedArrays"))
        })
        .collect();
    assert_eq!(named.len(), 1, "one row for allocateTypedArrays: {rows:#?}");
    let row = named[0];
    // Its code is in no file: the frame has an address and no module.
    assert!(row.get("module").is_none(), "{row}");
    let resident: u64 = row["resident_at_peak_bytes"].as_u64().unwrap();
    // Every byte the arrays hold was written and kept; all of it came while the process's
    // anonymous memory grew by `grew` (a page of slack per array for its allocator's header).
    assert!(resident >= written, "{resident} < {written}: {row}");
    assert!(
        resident <= grew + 3 * 4096 + (1 << 20),
        "{resident} > {grew}: {row}"
    );
    // node leaves its map in /tmp: gone with the test.
    let text = std::fs::read_to_string(&file).unwrap();
    let pid = crate::util::exec_pid(&crate::util::parse_stream(&text));
    std::fs::remove_file(format!("/tmp/perf-{pid}.map")).ok();
    std::fs::remove_file(file).ok();
    std::fs::remove_dir_all(cwd).ok();
}
