//! Programs nobody here wrote, under `--verify`, followed by faults and by scans: the stream must
//! agree with the kernel for them too. stress-ng and python3 are installed by
//! `.ci/install-deps`; elsewhere a test whose program is missing says so in one line and passes
//! (under `CI=true` it fails).

use std::time::Duration;

use crate::util::{installed, trace_within};

#[test]
fn stress_ng_memory_stressors_agree_with_the_kernel() {
    if !installed("stress-ng") {
        return;
    }
    for how in ["uffd", "scan", "records"] {
        stress_ng_under(how);
    }
}

fn stress_ng_under(how: &str) {
    let t = trace_within(
        &["--faults", how, "--verify", "--verify-every", "50"],
        &[
            "stress-ng",
            "--vm",
            "1",
            "--vm-bytes",
            "64m",
            "--mmap",
            "1",
            "--mmap-bytes",
            "64m",
            "--madvise",
            "1",
            "--mremap",
            "1",
            "--mremap-bytes",
            "64m",
            "--brk",
            "1",
            "--fork",
            "1",
            "--timeout",
            "3s",
        ],
        Duration::from_secs(300),
    );
    assert_eq!(t.status, 0, "{how}: {}", t.evidence());
    let v = t.verify_totals();
    assert_eq!(v.mismatched_pages, 0, "{how}: {}", t.evidence());
    assert!(v.points >= 10, "{how}: only {} checks", v.points);
}

/// Four threads growing and dropping Python objects (the allocator's arenas, mmap'd buffers).
const THREADED_ALLOCATION: &str = r#"
import threading
def work(seed):
    keep = []
    for i in range(3000):
        keep.append(bytearray((i * 37 + seed) % 65536 + 1))
        if len(keep) > 64:
            del keep[: (i + seed) % 48]
        if i % 500 == 0:
            keep.append([0] * 200000)
threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"#;

#[test]
fn python_threads_allocating_agree_with_the_kernel() {
    // Debian's interpreter, not a version-manager shim that forks a shell first.
    let python = if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    };
    if !installed(python) {
        return;
    }
    for how in ["uffd", "scan", "records"] {
        let t = trace_within(
            &["--faults", how, "--verify", "--verify-every", "20"],
            &[python, "-c", THREADED_ALLOCATION],
            Duration::from_secs(300),
        );
        assert_eq!(t.status, 0, "{how}: {}", t.evidence());
        let v = t.verify_totals();
        assert_eq!(v.mismatched_pages, 0, "{how}: {}", t.evidence());
        assert!(v.points >= 2, "{how}: only {} checks", v.points);
    }
}
