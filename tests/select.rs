//! `run --only GLOB`: the pages of the programs selected are followed; the others' processes,
//! execs, exits and mappings are in the stream, with no page.

use std::ffi::OsString;
use std::time::Duration;

use mevi_actors::event::Event;

use crate::util::{run_bounded, trace_within, workload};

const HANG: Duration = Duration::from_secs(120);

/// A shell runs two programs, one selected: the shell and the other are written (their `exec`
/// lines say `"followed":false`) with no page, the selected one page by page, as its own page
/// tables say; `--verify` checks it alone and agrees; the summary says how many were followed.
#[test]
fn only_the_selected_program_has_its_pages_followed() {
    let one_thread = workload("one_thread");
    let threads_region = workload("threads_region");
    let script = format!(
        "{} > /dev/null; {} 2 > /dev/null",
        one_thread.display(),
        threads_region.display()
    );
    let program: Vec<OsString> = vec!["sh".into(), "-c".into(), script.into()];
    for how in ["uffd", "scan", "records"] {
        let flags = ["--faults", how, "--only", "one_thread", "--verify"];
        let t = trace_within(&flags, &program, HANG);
        assert_eq!(t.status, 0, "{how}: {}", t.evidence());
        let execs: Vec<(String, bool, u64)> = t
            .lines
            .iter()
            .filter_map(|l| match &l.event {
                Event::Exec {
                    path,
                    followed,
                    space,
                    ..
                } => Some((
                    path.rsplit('/').next().unwrap().to_string(),
                    *followed,
                    *space,
                )),
                _ => None,
            })
            .collect();
        let followed: Vec<&str> = execs.iter().filter(|e| e.1).map(|e| e.0.as_str()).collect();
        assert_eq!(followed, ["one_thread"], "{how}: {execs:?}");
        assert_eq!(execs.len(), 3, "{how}: {execs:?}");
        // Pages only in the selected program's space, and every range elsewhere untracked.
        let selected = execs.iter().find(|e| e.1).unwrap().2;
        for l in &t.lines {
            match &l.event {
                Event::Resident { space, .. } => assert_eq!(*space, selected, "{how}: {l:?}"),
                Event::Map {
                    space,
                    tracked: true,
                    ..
                } => assert_eq!(*space, selected, "{how}: {l:?}"),
                _ => {}
            }
        }
        let (_, totals) = t.summary();
        assert_eq!(totals.not_selected_spaces, Some(2), "{how}");
        let v = t.verify_totals();
        assert_eq!(v.mismatched_pages, 0, "{how}: {}", t.evidence());
        assert!(v.points > 0, "{how}: nothing was checked");
        assert!(
            t.stderr.contains("1 of 3 address space(s) followed"),
            "{}",
            t.stderr
        );
    }
}

/// A pattern that is not one: a usage error.
#[test]
fn only_with_a_bad_pattern_is_a_usage_error() {
    let (status, stdout, stderr) =
        run_bounded(std::process::Command::new(crate::util::bin()).args([
            "run",
            "--only",
            "[",
            "--",
            "/bin/true",
        ]));
    assert_eq!(status, 2, "{stderr}");
    assert!(stdout.is_empty());
    assert!(stderr.contains("not a shell pattern"), "{stderr}");
}

/// `select_two`'s fixed mappings (tests/workloads/select_two.c).
const BIG: std::ops::Range<u64> = 0x2000_0000_0000..0x2000_0040_0000;
const SMALL: std::ops::Range<u64> = 0x3000_0000_0000..0x3000_0001_0000;

/// The workload's threads as it printed them: name to tid.
fn threads_of(stdout: &str) -> std::collections::HashMap<String, i32> {
    stdout
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("thread ")?.split(' ');
            Some((w.next()?.to_string(), w.next()?.parse().ok()?))
        })
        .collect()
}

/// `--threads`: the named thread's first touches are written, the other's are not, and are
/// counted; the checks against the kernel still see every page (0 mismatched), since the
/// replayed state has them all.
#[test]
fn threads_writes_the_first_touches_of_the_named_threads_only() {
    let program = workload("select_two");
    for (how, pattern, written) in [
        ("uffd", "worker-big", &["worker-big"][..]),
        ("uffd", "worker-*", &["worker-big", "worker-small"][..]),
        ("records", "worker-big", &["worker-big"][..]),
        ("records", "worker-*", &["worker-big", "worker-small"][..]),
    ] {
        let t = trace_within(
            &["--faults", how, "--threads", pattern, "--verify"],
            &[&program],
            HANG,
        );
        assert_eq!(t.status, 0, "{how} {pattern}: {}", t.evidence());
        let threads = threads_of(&t.stdout);
        let allowed: Vec<i32> = written.iter().map(|n| threads[*n]).collect();
        let pages_in = |range: &std::ops::Range<u64>| -> u64 {
            t.lines
                .iter()
                .filter_map(|l| match &l.event {
                    Event::Resident {
                        tid: Some(tid),
                        start,
                        end,
                        ..
                    } => {
                        assert!(allowed.contains(tid), "{how} {pattern}: {l:?}");
                        (range.start <= *start && *end <= range.end).then(|| (end - start) / 4096)
                    }
                    _ => None,
                })
                .sum()
        };
        assert_eq!(pages_in(&BIG), 1024, "{how} {pattern}");
        let small = if written.contains(&"worker-small") {
            16
        } else {
            0
        };
        assert_eq!(pages_in(&SMALL), small, "{how} {pattern}");
        let (_, totals) = t.summary();
        let not = totals.threads_not_selected.clone().unwrap();
        assert!(
            not.lines > 0 && not.first_touches >= 16 - small,
            "{how} {pattern}: {not:?}"
        );
        let v = t.verify_totals();
        assert!(
            v.points > 0 && v.mismatched_pages == 0,
            "{how} {pattern}: {}",
            t.evidence()
        );
        assert!(t.stderr.contains("--threads: "), "{}", t.stderr);
    }
    // A scan knows no thread.
    let (status, _, stderr) = run_bounded(std::process::Command::new(crate::util::bin()).args([
        "run",
        "--faults",
        "scan",
        "--threads",
        "x",
        "--",
        "/bin/true",
    ]));
    assert_eq!(status, 2, "{stderr}");
}

/// `--region` and `--min-size`: only the mappings selected are tracked (their pages followed),
/// the others are written `tracked: false` with no page; `--verify` agrees on what is followed.
/// `--only` on the same workload follows its second program alone.
#[test]
fn region_and_min_size_follow_the_mappings_selected_only() {
    let program = workload("select_two");
    let region = format!("{:#x}-{:#x}", BIG.start, BIG.start + 0x1000);
    for how in ["uffd", "scan", "records"] {
        for flags in [["--region", region.as_str()], ["--min-size", "1M"]] {
            let mut all = vec!["--faults", how, "--verify"];
            all.extend(flags);
            let t = trace_within(&all, &[&program], HANG);
            assert_eq!(t.status, 0, "{how} {flags:?}: {}", t.evidence());
            let tracked = |range: &std::ops::Range<u64>| {
                t.lines.iter().find_map(|l| match &l.event {
                    Event::Map {
                        start,
                        end,
                        tracked,
                        cause: None,
                        ..
                    } if *start == range.start && *end == range.end => Some(*tracked),
                    _ => None,
                })
            };
            assert_eq!(tracked(&BIG), Some(true), "{how} {flags:?}");
            assert_eq!(tracked(&SMALL), Some(false), "{how} {flags:?}");
            let resident_in_small = t.lines.iter().any(
                |l| matches!(&l.event, Event::Resident { start, .. } if SMALL.contains(start)),
            );
            assert!(!resident_in_small, "{how} {flags:?}");
            let v = t.verify_totals();
            assert!(
                v.points > 0 && v.mismatched_pages == 0,
                "{how}: {}",
                t.evidence()
            );
            if flags[0] == "--region" {
                // Nothing outside the region is followed: the stacks and the heap neither.
                assert!(
                    t.lines.iter().all(|l| !matches!(&l.event,
                        Event::Map { tracked: true, start, end, .. } if *end <= BIG.start || *start >= BIG.end)),
                    "{how}"
                );
            }
        }
        // --only the second program: only its space is followed.
        let t = trace_within(
            &["--faults", how, "--only", "select-child", "--verify"],
            &[&program],
            HANG,
        );
        assert_eq!(t.status, 0, "{how}: {}", t.evidence());
        let (_, totals) = t.summary();
        assert_eq!(totals.not_selected_spaces, Some(2), "{how}");
        assert!(t.lines.iter().all(|l| !matches!(&l.event,
            Event::Resident { start, .. } if BIG.contains(start) || SMALL.contains(start))));
    }
}

/// A mapping made beside one `--min-size` leaves out is merged into it by the kernel: under
/// `--faults uffd` it is followed by scans, since registering it alone would split the
/// program's one mapping in two (its `mremap` over the whole would then fail). The program
/// runs as untraced.
#[test]
fn a_mapping_merged_into_one_left_out_is_followed_by_scans() {
    let program = workload("select_merge");
    let (status, untraced, _) = run_bounded(&mut std::process::Command::new(&program));
    assert_eq!(
        (status, untraced.as_str()),
        (0, "mremap ok\nmappings at 200000000000: 1\n")
    );
    for how in ["uffd", "scan", "records"] {
        let t = trace_within(
            &["--faults", how, "--min-size", "1M", "--verify"],
            &[&program],
            HANG,
        );
        assert_eq!(
            (t.status, t.stdout.as_str()),
            (0, untraced.as_str()),
            "{how}: {}",
            t.stderr
        );
        let v = t.verify_totals();
        assert_eq!(v.mismatched_pages, 0, "{how}: {}", t.evidence());
        let tracked_there = t.lines.iter().any(
            |l| matches!(&l.event, Event::Map { tracked: true, start, .. } if *start >> 44 == 2),
        );
        // Followed by scans even under uffd, which register nothing, so split nothing: the
        // 4 MiB are followed as made.
        assert!(tracked_there, "{how}");
    }
}

/// What `--min-size` left out stays out as it changes: advised `MADV_HUGEPAGE` (not scanned
/// then), grown in place past the size, merged with its neighbour and copied by a fork. No page
/// of them is written; `--verify` agrees on what is followed.
#[test]
fn what_min_size_left_out_stays_out_as_it_changes() {
    let program = workload("select_edges");
    for how in ["uffd", "scan", "records"] {
        let t = trace_within(
            &["--faults", how, "--min-size", "1MiB", "--verify"],
            &[&program],
            HANG,
        );
        assert_eq!(
            (t.status, t.stdout.as_str()),
            (0, "done\n"),
            "{how}: {}",
            t.stderr
        );
        let v = t.verify_totals();
        assert_eq!(v.mismatched_pages, 0, "{how}: {}", t.evidence());
        // 0x20..., 0x21..., 0x22...: A, B and C.
        let ours = |start: u64| (0x20..=0x22).contains(&(start >> 40));
        for l in &t.lines {
            match &l.event {
                Event::Resident { start, .. } => assert!(!ours(*start), "{how}: {l:?}"),
                Event::Map {
                    start,
                    tracked: true,
                    ..
                } => assert!(!ours(*start), "{how}: {l:?}"),
                _ => {}
            }
        }
    }
}
