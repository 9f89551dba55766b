//! The benches' C workloads (benches/workloads/NAME.c), compiled once per bench run.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `cc -O2 -pthread` of NAME.c into `dir`; the binary's path.
pub fn compile(dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches/workloads")
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
