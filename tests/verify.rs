//! `--verify`: the stream checked against the kernel's page tables while the program runs, and
//! proof that the check can fail.

use mevi_actors::event::{Event, KernelPage, StreamPage, VerifyPoint};

use crate::util::{bin, run_bounded, trace, workload};

/// Every `verify` line of a run: (point, checked pages, mismatched pages).
fn verify_lines(t: &crate::util::Traced) -> Vec<(VerifyPoint, u64, u64)> {
    t.lines
        .iter()
        .filter_map(|l| match &l.event {
            Event::Verify {
                point,
                checked_pages,
                mismatched_pages,
                ..
            } => Some((*point, *checked_pages, *mismatched_pages)),
            _ => None,
        })
        .collect()
}

#[test]
fn each_process_is_checked_at_its_last_exit_and_agrees_with_the_kernel() {
    let t = trace(&["--verify"], &[workload("fork_touch")]);
    assert_eq!(t.status, 0, "{}", t.stderr);
    let checks = verify_lines(&t);
    let exits: Vec<_> = checks
        .iter()
        .filter(|(p, _, _)| *p == VerifyPoint::Exit)
        .collect();
    // The parent and its fork child.
    assert_eq!(exits.len(), 2, "{checks:?}");
    assert!(
        exits
            .iter()
            .all(|(_, checked, bad)| *checked > 0 && *bad == 0)
    );
    assert!(t.stderr.contains("verify: 2 checks"), "{}", t.stderr);
    t.assert_matches_kernel();
}

#[test]
fn checkpoints_stop_every_thread_and_agree_with_the_kernel() {
    let t = trace(
        &["--verify", "--verify-every", "2"],
        &[workload("race").to_str().unwrap(), "0.5"],
    );
    assert_eq!(t.status, 0, "{}", t.stderr);
    let checks = verify_lines(&t);
    let checkpoints = checks
        .iter()
        .filter(|(p, _, _)| *p == VerifyPoint::Checkpoint)
        .count();
    // Each followed by twice its hold (up to 10 ms) for the program: 91 idle, 55 beside two
    // CPU hogs.
    assert!(checkpoints >= 6, "only {checkpoints} checkpoints in 0.5 s");
    let bad: u64 = checks.iter().map(|c| c.2).sum();
    assert_eq!(bad, 0, "{}", t.stderr);
    // The summary adds them up.
    let totals = t.verify_totals();
    assert_eq!(totals.points, checks.len() as u64);
    assert_eq!(
        totals.checked_pages,
        checks.iter().map(|c| c.1).sum::<u64>()
    );
}

/// An mremap interrupted half way (issue 14): with a checkpoint's interrupt pending, moving a
/// MADV_MERGEABLE mapping returns -ERESTARTSYS after it unmapped the shrunk tail, and runs again.
/// Each such exit describes its ranges again, so no check in between sees a tail the kernel
/// has dropped (before: mismatches in every run, in both modes).
#[test]
fn an_mremap_interrupted_half_way_agrees_with_the_kernel() {
    for how in ["uffd", "scan", "records"] {
        let t = trace(
            &["--faults", how, "--verify", "--verify-every", "2"],
            &[workload("u14_mremap_restart").to_str().unwrap(), "1"],
        );
        assert_eq!(t.status, 0, "{how}: {}", t.stderr);
        let checks = verify_lines(&t);
        // Every 2 ms, each followed by twice its hold (up to 10 ms) for the program: 130 idle,
        // 40 in a loaded CI run.
        assert!(
            checks.len() >= 25,
            "{how}: only {} checks in 1 s",
            checks.len()
        );
        let bad: u64 = checks.iter().map(|c| c.2).sum();
        assert_eq!(bad, 0, "{how}: {}", t.stderr);
    }
}

#[test]
fn a_state_corrupted_on_purpose_is_caught_and_exits_3() {
    let t = trace(
        &["--verify", "--test-corrupt-state"],
        &[workload("one_thread")],
    );
    assert_eq!(t.status, 3, "{}", t.stderr);
    assert!(
        t.stderr.contains("verify failed: 1 pages differ"),
        "{}",
        t.stderr
    );
    let mismatch = t
        .lines
        .iter()
        .find_map(|l| match &l.event {
            Event::Verify {
                mismatched_pages: 1,
                first_mismatches,
                ..
            } => first_mismatches.first().copied(),
            _ => None,
        })
        .expect("a verify line with the mismatch");
    // The page forgotten is the first one the stream reported resident.
    let first_touch = t
        .events("resident")
        .find_map(|e| match e {
            Event::Resident { start, .. } => Some(*start),
            _ => None,
        })
        .unwrap();
    assert_eq!(mismatch.start, first_touch);
    assert_eq!(mismatch.stream, StreamPage::NotResident);
    assert_eq!(mismatch.kernel, KernelPage::Present);
}

#[test]
fn without_verify_a_corrupted_state_goes_unnoticed_and_the_status_is_the_programs() {
    // The hook alone changes nothing a user sees but the replayed figures: the check is what
    // catches it.
    let t = trace(
        &["--test-corrupt-state"],
        &[workload("exit_code"), "7".into()],
    );
    assert_eq!(t.status, 7, "{}", t.stderr);
    assert!(verify_lines(&t).is_empty());
}

#[test]
fn verify_needs_page_states() {
    let (status, _, stderr) = run_bounded(std::process::Command::new(bin()).args([
        "run",
        "--verify",
        "--no-faults",
        "--",
        "true",
    ]));
    assert_eq!(status, 2);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--verify"), "{stderr}");
}

/// Thousands of separate mappings, each written on one page (issue 25 item 11, the shape of LTP
/// `munmap04`): every check reads their pages together rather than a mapping at a time, and
/// still agrees with the kernel page by page, in both modes; each mapping's page is in the
/// stream.
#[test]
fn thousands_of_separate_mappings_are_checked_together_and_agree() {
    let n = 3000u64;
    for how in ["uffd", "scan", "records"] {
        // A pause once all are written: a read finds them all at once (the peak below).
        let t = crate::util::trace_with_env(
            &[("SEPARATE_MAPS_PAUSE", "1")],
            &["--faults", how, "--verify", "--verify-every", "2"],
            &[workload("separate_maps"), n.to_string().into()],
            crate::util::TIMEOUT,
        );
        assert_eq!(t.status, 0, "{how}: {}", t.stderr);
        let checks = verify_lines(&t);
        let checkpoints = checks
            .iter()
            .filter(|(p, _, _)| *p == VerifyPoint::Checkpoint)
            .count();
        assert!(checkpoints >= 3, "{how}: only {checkpoints} checkpoints");
        let bad: u64 = checks.iter().map(|c| c.2).sum();
        assert_eq!(bad, 0, "{how}: {}", t.stderr);
        let pid = crate::util::exec_pid(&t.lines);
        let one_page = t
            .events("map")
            .filter(|e| matches!(e, Event::Map { pid: p, start, end, .. } if *p == pid && end - start == crate::util::PAGE))
            .count() as u64;
        assert!(one_page >= n, "{how}: {one_page} one-page mappings of {n}");
        let peak = t.space_at_end(t.space_of(pid)).peak_resident_bytes / crate::util::PAGE;
        assert!(peak >= n, "{how}: a peak of {peak} pages for {n} written");
    }
}

/// Issue 26: a mapped file whose name is not UTF-8 makes a line of /proc/PID/maps that is not,
/// and a thread's name one of its status; both are still read (lossily), so a fork child's
/// space is described from its maps, followed and checked with no warning, and its memory by
/// the kernel's count is in `rss` lines, in both modes.
#[test]
fn a_file_named_in_no_utf8_leaves_the_maps_file_readable() {
    let dir = crate::util::scratch("non-utf8");
    std::fs::create_dir_all(&dir).unwrap();
    for mode in ["uffd", "scan", "records"] {
        let program = workload("u26_non_utf8_path");
        let t = trace(
            &["--faults", mode, "--verify", "--verify-every", "20"],
            &[program.as_os_str(), dir.as_os_str()],
        );
        assert_eq!(
            (t.status, t.stdout.as_str()),
            (0, "done\n"),
            "{mode}: {}",
            t.stderr
        );
        let warnings = t.warnings();
        assert!(warnings.is_empty(), "{mode}: {warnings:?}");
        let v = t.verify_totals();
        assert!(v.checked_pages >= 512, "{mode}: {v:?}");
        assert_eq!(v.mismatched_pages, 0, "{mode}: {v:?}");
        assert!(
            t.lines.iter().any(|l| matches!(&l.event,
                Event::Map { path: Some(p), .. } if p.contains("mevi-\u{fffd}\u{fffd}-"))),
            "{mode}: no map line names the file"
        );
        // The child's status is read too (its name is not UTF-8): its memory by the kernel's count.
        let child = t.lines.iter().find_map(|l| match &l.event {
            Event::Fork { child, .. } => Some(*child),
            _ => None,
        });
        assert!(
            t.lines
                .iter()
                .any(|l| matches!(&l.event, Event::Rss { pid, anon, .. }
                if Some(*pid) == child && *anon >= 256 * 4096)),
            "{mode}: no rss line of the child {child:?}"
        );
    }
}
