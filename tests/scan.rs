//! `run --faults scan`: pages followed by page-table scans, with no userfaultfd. The stream must
//! still end where the kernel does, agree with it at every check, and leave the kernel's own
//! behaviour (huge pages, privileges) as untraced.

use std::ffi::OsString;
use std::time::Duration;

use crate::util::{WorldCopy, as_nobody, can_become_nobody, run_within, trace_within, workload};

const HANG: Duration = Duration::from_secs(120);

/// Every workload of the suite that prints its own truth, traced with scans and checked every
/// 20 ms: each check finds 0 mismatches, and the replayed end equals what the workload read
/// from its own page tables.
#[test]
fn every_memory_workload_ends_where_the_kernel_does() {
    let workloads: &[(&str, &[&str])] = &[
        ("one_thread", &[]),
        ("threads_region", &["8"]),
        ("thread_brk", &[]),
        ("malloc4", &[]),
        ("fork_touch", &[]),
        ("race", &["1"]),
        ("nocaps_fork", &[]),
        ("edges", &[]),
    ];
    for (name, args) in workloads {
        let mut program: Vec<OsString> = vec![workload(name).into()];
        program.extend(args.iter().map(OsString::from));
        let flags = ["--faults", "scan", "--verify", "--verify-every", "20"];
        let t = trace_within(&flags, &program, HANG);
        assert_eq!(t.status, 0, "{name}: {}", t.stderr);
        let v = t.verify_totals();
        assert_eq!(v.mismatched_pages, 0, "{name}: {}", t.evidence());
        assert!(v.points > 0, "{name}: nothing was checked");
        t.assert_matches_kernel();
        // Nothing is registered, so nothing faults through a lane: every page a scan found.
        assert_eq!(t.summary().1.faults, 0, "{name}: a fault was resolved");
        assert!(
            t.events("resident").count() > 0,
            "{name}: no page was found"
        );
    }
}

/// Scan mode needs no userfaultfd: a user who may not make one (here
/// `vm.unprivileged_userfaultfd=0`, or a user without `CAP_SYS_PTRACE` where it is 1 and the
/// kernel then allows only user-mode faults) traces pages all the same, and `--verify` agrees.
#[test]
fn scans_need_no_userfaultfd() {
    if !can_become_nobody() {
        return;
    }
    let copy = WorldCopy::new();
    // dd touches a 16 MiB buffer of its own: pages that only a scan can find.
    let args = [
        "run",
        "--faults",
        "scan",
        "--verify",
        "--",
        "dd",
        "if=/dev/zero",
        "of=/dev/null",
        "bs=16M",
        "count=1",
        "status=none",
    ];
    let (status, stdout, stderr) = run_within(&mut as_nobody(&copy.0, &[], &args), HANG);
    assert_eq!(status, 0, "{stderr}");
    assert!(stdout.contains("\"follow\":\"scan\""), "{stdout}");
    let lines = crate::util::parse_stream(&stdout);
    let found: u64 = lines
        .iter()
        .filter_map(|l| match &l.event {
            mevi_actors::event::Event::Resident { start, end, .. } => Some(end - start),
            _ => None,
        })
        .sum();
    assert!(found >= 16 << 20, "only {found} bytes found: {stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
}
