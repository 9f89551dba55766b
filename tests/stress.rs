//! The stress suite: every case of docs/ordering.md raced on purpose by `workloads/stress.c`,
//! with 8 to 64 threads and several seeds, under `--verify --verify-every`. A case passes only
//! with zero mismatched pages at every check, the traced program exiting as it does untraced,
//! and no run outliving its timeout.
//!
//! `cargo test` runs a short profile (8 and 64 threads, seeds 1 and 2, 300 ms each). The soak
//! profile (`MEVI_SOAK=1 cargo test stress`, or `cargo test -- --ignored soak`) runs each case for
//! `MEVI_SOAK_SECS` seconds (default 30) per thread count and seed, and prints its figures.

use std::process::Command;
use std::time::Duration;

use mevi_actors::event::{Event, FoundBy};

use mevi_actors::model::Replay;

use crate::util::{run_within, trace_with_env, workload};

/// How hard to race.
struct Profile {
    threads: &'static [u32],
    seeds: &'static [u64],
    millis: u64,
    /// `MEVI_TEST_FAULT` for mevi-actors, if any.
    fault: Option<&'static str>,
    /// Options of `run` besides `--verify --verify-every 5`.
    flags: &'static [&'static str],
}

const SHORT: Profile = Profile {
    threads: &[8, 64],
    seeds: &[1, 2],
    millis: 300,
    fault: None,
    flags: &[],
};

fn soak() -> Profile {
    let secs: u64 = std::env::var("MEVI_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    Profile {
        threads: &[8, 64],
        seeds: &[1, 2],
        millis: secs * 1000,
        fault: None,
        flags: &[],
    }
}

fn profile() -> Profile {
    if std::env::var_os("MEVI_SOAK").is_some() {
        soak()
    } else {
        SHORT
    }
}

/// What the checks of one case added up to, and what went wrong.
#[derive(Debug, Default)]
struct Checked {
    points: u64,
    pages: u64,
    mismatched: u64,
    skipped: u64,
    /// `resident` lines found by a scan (ranges followed by scans).
    scanned: u64,
    /// `resident` lines written from their records alone (`--faults records`).
    record_only: u64,
    failures: Vec<String>,
}

impl Checked {
    /// Adds another's figures and failures to these.
    fn add(&mut self, other: Checked) {
        self.points += other.points;
        self.pages += other.pages;
        self.mismatched += other.mismatched;
        self.skipped += other.skipped;
        self.scanned += other.scanned;
        self.record_only += other.record_only;
        self.failures.extend(other.failures);
    }

    fn assert_passed(&self) {
        assert!(self.failures.is_empty(), "{}", self.failures.join("\n"));
    }
}

/// Races `case` under the tracer for every thread count and seed of the profile.
fn race(case: &str, profile: &Profile) -> Checked {
    let stress = workload("stress");
    let mut total = Checked::default();
    for &threads in profile.threads {
        for &seed in profile.seeds {
            let args = [
                case.to_string(),
                threads.to_string(),
                seed.to_string(),
                profile.millis.to_string(),
            ];
            // Generous: a checkpoint every 5 ms stops every thread, and the machine is shared.
            let timeout = Duration::from_millis(profile.millis * 20).max(Duration::from_secs(120));
            // The exit status does not depend on how long the race lasts: a short untraced run
            // gives it.
            let mut short = args.clone();
            short[3] = profile.millis.min(300).to_string();
            let (untraced, _, err) = run_within(Command::new(&stress).args(&short), timeout);
            let mut program = vec![stress.to_str().unwrap().to_string()];
            program.extend(args.iter().cloned());
            let env: Vec<(&str, &str)> = profile
                .fault
                .map(|f| ("MEVI_TEST_FAULT", f))
                .into_iter()
                .collect();
            let mut flags = vec!["--verify", "--verify-every", "5"];
            flags.extend(profile.flags);
            let t = trace_with_env(&env, &flags, &program, timeout);
            let what = format!("stress {case} {threads} threads seed {seed}");
            let mut run = Checked::default();
            if t.status != untraced {
                run.failures.push(format!(
                    "{what}: exit status {} traced, {untraced} untraced ({})\n{}",
                    t.status,
                    err.trim(),
                    t.stderr
                ));
            }
            for line in &t.lines {
                if let Event::Resident { by: Some(by), .. } = &line.event {
                    run.scanned += 1;
                    run.record_only += u64::from(*by == FoundBy::RecordOnly);
                }
                if let Event::Verify {
                    checked_pages,
                    mismatched_pages,
                    first_mismatches,
                    skipped,
                    ..
                } = &line.event
                {
                    if skipped.is_some() {
                        run.skipped += 1;
                        continue;
                    }
                    run.points += 1;
                    run.pages += checked_pages;
                    run.mismatched += mismatched_pages;
                    if *mismatched_pages > 0 {
                        run.failures.push(format!(
                            "{what}: seq {} differs from the kernel: {first_mismatches:?}",
                            line.seq
                        ));
                    }
                }
            }
            // A scan writes only pages the stream does not have yet, in tracked mappings.
            let mut replay = Replay::new();
            for line in &t.lines {
                if let Event::Resident {
                    by: Some(_),
                    space,
                    start,
                    end,
                    ..
                } = line.event
                {
                    let s = replay.spaces.get(&space);
                    let range = start..end;
                    let again = s.is_some_and(|s| s.resident.overlaps(&range));
                    let untracked = s.is_none_or(|s| {
                        s.mappings.gaps(&range).next().is_some()
                            || s.mappings.overlapping(&range).any(|(_, m)| !m.tracked)
                    });
                    if again || untracked {
                        run.failures.push(format!(
                            "{what}: seq {}: a scan's line for pages {} ({line:?})",
                            line.seq,
                            if again {
                                "the stream has already"
                            } else {
                                "outside tracked mappings"
                            }
                        ));
                    }
                }
                replay.apply_line(line);
            }
            if run.points == 0 {
                run.failures
                    .push(format!("{what}: no check was made\n{}", t.stderr));
            }
            if !t.replay.problems.is_empty() {
                run.failures
                    .push(format!("{what}: {:?}", t.replay.problems));
            }
            eprintln!(
                "{what}: {} checks, {} pages checked, {} mismatched, {} skipped",
                run.points, run.pages, run.mismatched, run.skipped
            );
            total.add(run);
        }
    }
    total
}

#[test]
fn case_01_address_reuse() {
    race("reuse", &profile()).assert_passed();
}

#[test]
fn case_02_touch_during_discard() {
    race("discard", &profile()).assert_passed();
}

#[test]
fn case_03_fault_across_a_layout_change() {
    race("layout", &profile()).assert_passed();
}

#[test]
fn case_04_mremap_while_faulting() {
    race("mremap", &profile()).assert_passed();
}

#[test]
fn case_05_brk_from_several_threads() {
    race("brk", &profile()).assert_passed();
}

#[test]
fn case_06_fork_while_threads_fault() {
    race("fork", &profile()).assert_passed();
}

#[test]
fn case_07_vfork_posix_spawn_and_clone_vm() {
    race("vfork", &profile()).assert_passed();
}

#[test]
fn case_08_exec_from_a_thread_that_is_not_the_leader() {
    race("exec", &profile()).assert_passed();
}

#[test]
fn case_09_map_fixed_over_a_live_mapping() {
    race("fixed", &profile()).assert_passed();
}

#[test]
fn case_10_threads_exiting_while_others_fault() {
    race("exits", &profile()).assert_passed();
}

#[test]
fn case_10_a_process_killed_by_sigkill_mid_fault() {
    race("kill", &profile()).assert_passed();
}

#[test]
fn case_11_madv_free_against_madv_dontneed() {
    race("free", &profile()).assert_passed();
}

#[test]
fn case_12_populated_and_inherited_pages_without_faults() {
    race("populate", &profile()).assert_passed();
}

/// Every case again with every private anonymous range followed by scans, as on a machine whose
/// transparent huge page policy is `always` (the test hook `thp-always`): the `resident` lines
/// a scan finds, written before each release, at each check and at each exit, agree with the
/// kernel at every checkpoint, as those of faults do.
#[test]
fn every_case_with_ranges_followed_by_scans() {
    let profile = Profile {
        threads: &[8],
        seeds: &[1],
        millis: 300,
        fault: Some("thp-always"),
        flags: &[],
    };
    every_case_found_by_reads(&profile);
}

/// `run --faults scan`: every private anonymous range but the stacks is followed by scans.
/// Racing threads map, touch, discard, remap, fork and exec; the stream agrees with the kernel
/// at every checkpoint, and what it checked was found by scans.
#[test]
fn cases_under_faults_scan() {
    let profile = Profile {
        threads: &[8],
        seeds: &[2],
        millis: 300,
        fault: None,
        flags: &["--faults", "scan"],
    };
    for case in ["reuse", "discard", "mremap", "fork", "exec", "free"] {
        let c = race(case, &profile);
        c.assert_passed();
        assert!(c.scanned > 0, "{case}: no resident line found by a scan");
    }
}

/// `run --faults records`: as under scans, every case, with each page found also named by the
/// kernel's record of the fault that made it resident; the stream agrees with the kernel at
/// every checkpoint.
#[test]
fn cases_under_faults_records() {
    let profile = Profile {
        threads: &[8],
        seeds: &[2],
        millis: 300,
        fault: None,
        flags: &["--faults", "records"],
    };
    every_case_found_by_reads(&profile);
}

/// Under records, with the tracer waiting 20 ms at every release's entry after its read (the
/// `slow-release` hook), so that the racing threads make and lose pages no read sees: the
/// stream stays equal to the kernel at every checkpoint, with whatever `record_only` lines the
/// races gave (how many depends on them; records::pages_made_and_dropped_between_reads_are_
/// written_from_their_records makes some for sure).
#[test]
fn cases_under_faults_records_with_slow_releases() {
    let profile = Profile {
        threads: &[8],
        seeds: &[1],
        millis: 300,
        fault: Some("slow-release"),
        flags: &["--faults", "records"],
    };
    for case in ["reuse", "discard", "layout", "brk", "fixed", "free"] {
        let c = race(case, &profile);
        c.assert_passed();
        eprintln!("{case}: {} record_only line(s)", c.record_only);
    }
}

/// Every case under `profile`, each passed, and not vacuously: what was checked was found by
/// reads of the page tables. (The populate case's pages are all there at each mapping's exit:
/// nothing is left for a read to find.)
fn every_case_found_by_reads(profile: &Profile) {
    for case in CASES {
        let c = race(case, profile);
        c.assert_passed();
        assert!(
            c.scanned > 0 || case == "populate",
            "{case}: no resident line found by a read"
        );
    }
}

/// Every race case of the stress workload.
const CASES: [&str; 13] = [
    "reuse", "discard", "layout", "mremap", "brk", "fork", "vfork", "exec", "fixed", "exits",
    "kill", "free", "populate",
];

/// Every case for minutes: `cargo test -- --ignored soak`.
#[test]
#[ignore]
fn soak_every_case() {
    let cases = CASES;
    let profile = soak();
    let mut all = Checked::default();
    // Every case runs to the end; what went wrong is said at the end, all of it.
    for case in cases {
        let c = race(case, &profile);
        eprintln!(
            "soak {case}: {} checks, {} pages checked, {} mismatched, {} skipped",
            c.points, c.pages, c.mismatched, c.skipped
        );
        all.add(c);
    }
    eprintln!(
        "soak total: {} checks, {} pages checked, {} mismatched, {} skipped",
        all.points, all.pages, all.mismatched, all.skipped
    );
    all.assert_passed();
    assert!(all.points >= 1000, "only {} checks", all.points);
}
