//! The benches' C workloads (benches/workloads/NAME.c), compiled once per bench run.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `cc -O2 -pthread` of NAME.c into `dir`; the binary's path.
pub fn compile(dir: &Path, name: &str) -> PathBuf {
    compile_from(dir, "benches/workloads", name)
}

/// The tests' `separate_maps` workload (tests/workloads/separate_maps.c), which the bench's mapping
/// series runs: one program for both (the report bench, which includes this file, has no use).
#[allow(dead_code)]
pub fn separate_maps(dir: &Path) -> PathBuf {
    compile_from(dir, "tests/workloads", "separate_maps")
}

/// `cc -O2 -pthread` of FOLDER/NAME.c (FOLDER in the source tree) into `dir`.
fn compile_from(dir: &Path, folder: &str, name: &str) -> PathBuf {
    let out = dir.join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(folder)
        .join(format!("{name}.c"));
    let status = Command::new("cc")
        .args(["-O2", "-pthread", "-Wall", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("running cc");
    assert!(status.success(), "cc failed for {}", src.display());
    out
}
