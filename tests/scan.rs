//! `run --faults scan`: pages followed by page-table scans, with no userfaultfd. The stream must
//! still end where the kernel does, agree with it at every check, and leave the kernel's own
//! behaviour (huge pages, privileges) as untraced.

use std::ffi::OsString;
use std::time::Duration;

use mevi_actors::event::Event;
use rangemap::RangeSet;

use crate::util::{
    TRUTH_WORKLOADS, WorldCopy, as_nobody, can_become_nobody, run_within, trace_within, workload,
};

const HANG: Duration = Duration::from_secs(120);

/// Every workload of the suite that prints its own truth, traced with scans and checked every
/// 20 ms: each check finds 0 mismatches, and the replayed end equals what the workload read
/// from its own page tables.
#[test]
fn every_memory_workload_ends_where_the_kernel_does() {
    for (name, args) in TRUTH_WORKLOADS {
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
            Event::Resident { start, end, .. } => Some(end - start),
            _ => None,
        })
        .sum();
    assert!(found >= 16 << 20, "only {found} bytes found: {stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
}

/// Pages touched with no syscall after them are found by the timed scans, within about
/// `--sample-ms` of the touch; with a sample period longer than the program's life, only by the
/// last scan at its exit.
#[test]
fn timed_scans_find_pages_within_the_sample_period() {
    let program: Vec<OsString> = vec![workload("scan_tick").into(), "600".into()];
    // (sample period, least and most time from the touch until every page was found)
    for (sample, least, most) in [("5", 0, 300), ("1000", 550, 5_000)] {
        let flags = ["--faults", "scan", "--sample-ms", sample];
        let t = trace_within(&flags, &program, HANG);
        assert_eq!(t.status, 0, "{}", t.stderr);
        let mut words = t.stdout.split_whitespace().skip(1);
        let touched: u64 = words.next().unwrap().parse().unwrap();
        let addr: u64 = words.next().unwrap().parse().unwrap();
        let wall_ns = t
            .lines
            .iter()
            .find_map(|l| match &l.event {
                Event::Start { wall_ns, .. } => *wall_ns,
                _ => None,
            })
            .expect("the start line's wall_ns");
        // The time the last of the 64 pages was found.
        let mut left: RangeSet<u64> = std::iter::once(addr..addr + 64 * 4096).collect();
        let mut found_at = None;
        for l in &t.lines {
            if let Event::Resident { start, end, .. } = &l.event
                && left.overlaps(&(*start..*end))
            {
                left.remove(*start..*end);
                found_at = Some(wall_ns + l.t_ns);
            }
        }
        assert!(
            left.is_empty(),
            "--sample-ms {sample}: {left:?} never found"
        );
        let late_ms = (found_at.unwrap() - touched) / 1_000_000;
        assert!(
            (least..most).contains(&late_ms),
            "--sample-ms {sample}: found {late_ms} ms after the touch, not within {least}..{most}"
        );
    }
}

/// Pages made resident and dropped with no syscall the tracer stops in between (here a discard
/// made through `int $0x80`, which the filter lets through) are never in the stream, but the
/// `unseen` line counts them: the kernel's minor faults less what the scans found. The stream
/// still agrees with the kernel, since those pages were never in it.
#[test]
fn pages_dropped_between_scans_are_counted_unseen() {
    // 10 rounds of 1024 pages; the program's start faults on its files a few dozen times.
    for (discard, least, most) in [(false, 0, 2_000), (true, 10_240, 12_240)] {
        let mut program: Vec<OsString> = vec![workload("scan_unseen").into(), "10".into()];
        if discard {
            program.push("discard".into());
        }
        // No timed scan in the program's life: only its exit's.
        let flags = ["--faults", "scan", "--sample-ms", "60000", "--verify"];
        let t = trace_within(&flags, &program, HANG);
        assert_eq!(
            (t.status, t.stdout.as_str()),
            (0, "rounds 10\n"),
            "{}",
            t.stderr
        );
        assert_eq!(t.verify_totals().mismatched_pages, 0, "{}", t.evidence());
        let unseen: Vec<(u64, u64, u64)> = t
            .lines
            .iter()
            .filter_map(|l| match l.event {
                Event::Unseen {
                    faults,
                    found,
                    at_most,
                    ..
                } => Some((faults, found, at_most)),
                _ => None,
            })
            .collect();
        let [(faults, found, at_most)] = unseen[..] else {
            panic!("discard {discard}: one unseen line expected: {unseen:?}");
        };
        assert_eq!(at_most, faults - found);
        // Without the drop, the 1024 pages are there at the exit's scan.
        if !discard {
            assert!(found >= 1024, "only {found} faults' pages found");
        }
        assert!(
            (least..=most).contains(&at_most),
            "discard {discard}: at most {at_most} unseen, not within {least}..={most}"
        );
        let totals = t
            .summary()
            .1
            .unseen
            .clone()
            .expect("the summary's unseen totals");
        assert_eq!(totals.at_most, at_most);
        assert!(
            t.stderr.contains(&format!("at most {at_most} pages")),
            "{}",
            t.stderr
        );
    }
}

/// A successful exec drops the old mm with no stop while it is whole: its pages touched since
/// the last scan are read at the execve's entry, so the old space ends with them.
#[test]
fn pages_touched_just_before_an_exec_are_found() {
    let flags = ["--faults", "scan", "--sample-ms", "60000", "--verify"];
    let t = trace_within(&flags, &[workload("scan_exec")], HANG);
    assert_eq!(t.status, 0, "{}", t.stderr);
    let addr: u64 = t
        .stdout
        .trim()
        .strip_prefix("touched ")
        .unwrap()
        .parse()
        .unwrap();
    let first = t
        .lines
        .iter()
        .find_map(|l| match l.event {
            Event::Exec { space, .. } => Some(space),
            _ => None,
        })
        .unwrap();
    let pages = t.space_at_end(first).resident_in(addr..addr + 1000 * 4096) / 4096;
    assert_eq!(pages, 1000, "{}", t.evidence());
}
