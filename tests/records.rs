//! `run --faults records`: residency found by page-table reads as under `--faults scan`, and the
//! thread of each first touch from the kernel's own records of its page faults. The stream
//! must agree with the kernel at every check, and name the thread that really faulted.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::process::Command;
use std::time::Duration;

use mevi_actors::event::{Event, FoundBy, WarningKind};

use crate::util::{TRUTH_WORKLOADS, Traced, run_within, trace_with_env, trace_within, workload};

const HANG: Duration = Duration::from_secs(120);

const RECORDS: [&str; 5] = ["--faults", "records", "--verify", "--verify-every", "5"];

/// The pages of `[start, end)` each resident line gives a thread: page number → tid, and the
/// `by` of each line.
fn threads_of_pages(
    t: &Traced,
    start: u64,
    end: u64,
) -> BTreeMap<u64, (Option<i32>, Option<FoundBy>)> {
    let mut pages = BTreeMap::new();
    for event in t.events("resident") {
        let Event::Resident {
            tid,
            start: s,
            end: e,
            by,
            ..
        } = event
        else {
            continue;
        };
        let mut page = (*s).max(start);
        while page < (*e).min(end) {
            pages.entry((page - start) / 4096).or_insert((*tid, *by));
            page += 4096;
        }
    }
    pages
}

/// `name` traced under records with the test hook `hook`: it exited 0, and the stream agrees
/// with the kernel at every check and at its end.
fn exact_with_hook(hook: &str, name: &str) -> Traced {
    let t = trace_with_env(
        &[("MEVI_TEST_FAULT", hook)],
        &RECORDS,
        &[workload(name)],
        HANG,
    );
    assert_eq!(t.status, 0, "{}", t.stderr);
    assert_eq!(t.verify_totals().mismatched_pages, 0, "{}", t.evidence());
    t.assert_matches_kernel();
    t
}

/// What the workload printed after `what` at the start of a line.
fn said<'t>(t: &'t Traced, what: &str) -> &'t str {
    t.stdout
        .lines()
        .find_map(|l| l.strip_prefix(what))
        .unwrap_or_else(|| panic!("no {what:?} in {}", t.stdout))
}

/// The messages of the run's `records_lost` warnings.
fn records_lost(t: &Traced) -> Vec<&str> {
    t.warnings()
        .into_iter()
        .filter_map(|l| match &l.event {
            Event::Warning {
                what: WarningKind::RecordsLost,
                message,
                ..
            } => Some(message.as_str()),
            _ => None,
        })
        .collect()
}

/// How many `resident` lines name their thread from a record.
fn named_by_records(t: &Traced) -> usize {
    t.events("resident")
        .filter(|e| {
            matches!(
                e,
                Event::Resident {
                    by: Some(FoundBy::Record),
                    tid: Some(_),
                    ..
                }
            )
        })
        .count()
}

/// Every workload of the suite that prints its own truth, traced with records and checked
/// every 5 ms: each check finds 0 mismatches, the replayed end equals what the workload read
/// from its own page tables, and pages are found with their thread.
#[test]
fn every_memory_workload_ends_where_the_kernel_does() {
    for (name, args) in TRUTH_WORKLOADS {
        let mut program: Vec<OsString> = vec![workload(name).into()];
        program.extend(args.iter().map(OsString::from));
        let t = trace_within(&RECORDS, &program, HANG);
        assert_eq!(t.status, 0, "{name}: {}", t.stderr);
        let v = t.verify_totals();
        assert_eq!(v.mismatched_pages, 0, "{name}: {}", t.evidence());
        assert!(v.points > 0, "{name}: nothing was checked");
        t.assert_matches_kernel();
        assert!(
            t.lines.first().is_some_and(|l| matches!(
                &l.event,
                Event::Start { follow: Some(f), .. } if f == "records"
            )),
            "{name}: the start line does not say records"
        );
        assert!(
            named_by_records(&t) > 0,
            "{name}: no page was found with its thread"
        );
        // Records may be lost on a loaded machine (a ring fills before its lane gets a CPU):
        // said, and the pages still found. Nothing else is warned of.
        assert_eq!(
            t.warnings().len(),
            records_lost(&t).len(),
            "{name}: warnings: {:?}",
            t.warnings()
        );
    }
}

/// One thread per page (threads_region: thread i writes the pages p < 768 with p % 8 == i):
/// under records, as under uffd, the pages of each thread are exactly those of one residue,
/// and no two residues share a thread; every one of those pages is attributed.
#[test]
fn each_page_has_the_thread_that_wrote_it_as_under_uffd() {
    let program = [workload("threads_region"), "8".into()];
    for flags in [&RECORDS[..], &["--verify"][..]] {
        let t = trace_within(flags, &program, HANG);
        assert_eq!(t.status, 0, "{flags:?}: {}", t.stderr);
        assert_eq!(t.verify_totals().mismatched_pages, 0, "{}", t.evidence());
        let region = &t.truth("region", "shared")[0];
        let pages = threads_of_pages(&t, region.start, region.end);
        let mut by_residue: BTreeMap<u64, BTreeSet<Option<i32>>> = BTreeMap::new();
        for p in 0..768u64 {
            let (tid, _) = pages.get(&p).copied().unwrap_or((None, None));
            assert!(tid.is_some(), "{flags:?}: page {p} has no thread");
            by_residue.entry(p % 8).or_default().insert(tid);
        }
        let mut seen = BTreeSet::new();
        for (residue, tids) in &by_residue {
            assert_eq!(
                tids.len(),
                1,
                "{flags:?}: residue {residue} has threads {tids:?}"
            );
            assert!(
                seen.insert(*tids.iter().next().unwrap()),
                "{flags:?}: two residues share a thread"
            );
        }
        // The pages every thread races to read are each a worker's, whichever came first.
        let main = t.truth("region", "shared")[0].pid;
        for p in 1000..1008u64 {
            let (tid, _) = pages[&p];
            assert!(
                tid.is_some_and(|t| t != main),
                "{flags:?}: page {p}: {tid:?}"
            );
        }
    }
}

/// Pages made resident only inside system calls (`read()` from `/dev/zero` and from a pipe into
/// fresh memory) are the kernel's faults, taken for the thread that called: each region is its
/// reader's alone, and no two readers share a thread.
#[test]
fn a_page_faulted_inside_a_syscall_has_the_thread_that_called() {
    let t = trace_within(&RECORDS, &[workload("u27_syscall_faults")], HANG);
    assert_eq!(t.status, 0, "{}", t.stderr);
    assert_eq!(t.verify_totals().mismatched_pages, 0, "{}", t.evidence());
    t.assert_matches_kernel();
    let main = t.truth("region", "zero0")[0].pid;
    let mut readers = BTreeSet::new();
    for i in 0..4 {
        let zero = &t.truth("region", &format!("zero{i}"))[0];
        let pipe = &t.truth("region", &format!("pipe{i}"))[0];
        let mut tids = BTreeSet::new();
        for (region, pages) in [(zero, 32), (pipe, 16)] {
            let found = threads_of_pages(&t, region.start, region.end);
            assert_eq!(found.len(), pages, "region {}: {found:?}", region.name);
            for (page, (tid, by)) in found {
                assert_eq!(by, Some(FoundBy::Record), "{} page {page}", region.name);
                tids.insert(tid.expect("a recorded page has a thread"));
            }
        }
        assert_eq!(tids.len(), 1, "reader {i}'s regions have threads {tids:?}");
        let tid = *tids.iter().next().unwrap();
        assert_ne!(tid, main, "reader {i}'s pages are the main thread's");
        assert!(readers.insert(tid), "two readers share thread {tid}");
    }
}

/// Records a thread's ring had no room for are never silent: a `records_lost` warning says how
/// many, and the pages they were of are still found (by reads, without their thread), so the
/// stream still agrees with the kernel.
#[test]
fn lost_records_are_said_and_the_pages_still_found() {
    let t = exact_with_hook("tiny-record-ring", "u27_many_faults");
    let lost = records_lost(&t);
    assert!(
        !lost.is_empty(),
        "no records_lost warning: {}",
        t.evidence()
    );
    assert!(lost.iter().all(|m| m.contains("lost")), "{lost:?}");
    let by_scan = t
        .events("resident")
        .filter(|e| {
            matches!(
                e,
                Event::Resident {
                    by: Some(FoundBy::Scan),
                    ..
                }
            )
        })
        .count();
    assert!(by_scan > 0, "no page was found without its record");
}

/// 1,000 threads alive at once, each writing its own page of one region: every page has a thread
/// of its own, none the main thread's, and the stream agrees with the kernel at every check.
/// Most of the threads are gone by the last checks: their rings have hung up (a drain that
/// waited for fewer of them than it had room for once never ended).
#[test]
fn a_thousand_threads_each_have_their_own_page() {
    let t = trace_within(&RECORDS, &[workload("u27_thousand_threads")], HANG);
    assert_eq!(t.status, 0, "{}", t.stderr);
    assert_eq!(t.verify_totals().mismatched_pages, 0, "{}", t.evidence());
    t.assert_matches_kernel();
    let region = &t.truth("region", "shared")[0];
    let pages = threads_of_pages(&t, region.start, region.end);
    assert_eq!(pages.len(), 1000, "pages found: {}", pages.len());
    let tids: BTreeSet<i32> = pages
        .values()
        .map(|(tid, by)| {
            assert_eq!(*by, Some(FoundBy::Record));
            tid.expect("a recorded page has a thread")
        })
        .collect();
    assert_eq!(tids.len(), 1000, "1,000 pages, {} threads", tids.len());
    assert!(!tids.contains(&region.pid), "a page is the main thread's");
}

/// A fork child that goes on without an exec, as a prefork worker does: its first ring of
/// records is a small one, replaced by a whole one at its first layout syscall (an `mmap`), the
/// old one read to that moment and no further. Every page it wrote, before that syscall and
/// after, names it, in one line only. (Records a loaded machine's lane had no room for are said,
/// and their pages found by reads.)
#[test]
fn a_fork_child_that_goes_on_names_every_page_it_wrote() {
    let t = trace_within(&RECORDS, &[workload("fork_goes_on")], HANG);
    assert_eq!(t.status, 0, "{}", t.stderr);
    assert_eq!(t.verify_totals().mismatched_pages, 0, "{}", t.evidence());
    t.assert_matches_kernel();
    let own = t.truth("region", "own")[0].clone();
    let child = own.pid;
    let inherited = t
        .truth("region", "inherited")
        .into_iter()
        .find(|r| r.pid == child)
        .expect("the child's truth of the inherited region");
    let lost = !records_lost(&t).is_empty();
    for (region, pages) in [(&inherited, 4096), (&own, 1024)] {
        let found = threads_of_pages(&t, region.start, region.end);
        assert_eq!(found.len(), pages, "{}: {} pages", region.name, found.len());
        for (page, (tid, by)) in found {
            if lost && by == Some(FoundBy::Scan) {
                continue;
            }
            assert_eq!(
                (tid, by),
                (Some(child), Some(FoundBy::Record)),
                "{} page {page}: {}",
                region.name,
                t.evidence()
            );
        }
        let written: u64 = t
            .events("resident")
            .filter_map(|e| match e {
                Event::Resident {
                    pid, start, end, ..
                } if *pid == child => Some(
                    end.min(&region.end)
                        .saturating_sub(*start.max(&region.start)),
                ),
                _ => None,
            })
            .sum();
        assert_eq!(
            written / 4096,
            pages as u64,
            "{}: a page written twice",
            region.name
        );
    }
}

/// One address mapped, written and unmapped 256 times: each round's pages are named by the
/// round's own records, however far behind its thread the lane reads them (a page's earlier
/// rounds' records are each claimed by their own read, or forgotten with their release).
#[test]
fn a_page_written_again_after_each_release_is_named_each_time() {
    let t = trace_within(&RECORDS, &[workload("u27_retouch")], HANG);
    assert_eq!(t.status, 0, "{}", t.stderr);
    assert_eq!(t.verify_totals().mismatched_pages, 0, "{}", t.evidence());
    t.assert_matches_kernel();
    let region = &t.truth("region", "round")[0];
    let lines: Vec<&Event> = t
        .events("resident")
        .filter(|e| matches!(e, Event::Resident { start, end, .. } if *start < region.end && region.start < *end))
        .collect();
    assert!(lines.len() >= 256, "{} lines for 256 rounds", lines.len());
    let unnamed = lines
        .iter()
        .filter(|e| {
            !matches!(
                e,
                Event::Resident {
                    by: Some(FoundBy::Record),
                    tid: Some(_),
                    ..
                }
            )
        })
        .count();
    assert_eq!(
        unnamed,
        0,
        "{unnamed} of {} lines without their thread",
        lines.len()
    );
}

/// A page's line goes at its fault's time, not at the read that finds it: a thread writes 16
/// pages and exits, the main thread maps and unmaps eight times, and only the read at the last
/// munmap's entry finds the pages (timed reads are a second apart). Their lines, the writer's,
/// come before the first of those maps, in `seq` and in time, and before the writer's
/// `thread_exit`.
#[test]
fn a_page_found_late_is_written_at_its_fault() {
    let t = trace_within(
        &["--faults", "records", "--sample-ms", "1000", "--verify"],
        &[workload("u27_placed")],
        HANG,
    );
    assert_eq!(t.status, 0, "{}", t.stderr);
    assert_eq!(t.verify_totals().mismatched_pages, 0, "{}", t.evidence());
    let writer: i32 = said(&t, "writer ").parse().unwrap();
    let after = u64::from_str_radix(said(&t, "after 0x"), 16).unwrap();
    let region = u64::from_str_radix(said(&t, "written 0x"), 16).unwrap();
    let region = region..region + 16 * 4096;
    let seq_of = |found: &dyn Fn(&Event) -> bool| {
        t.lines
            .iter()
            .find(|l| found(&l.event))
            .map(|l| (l.seq, l.t_ns))
            .unwrap_or_else(|| panic!("no such line"))
    };
    let first_after = seq_of(&|e| matches!(e, Event::Map { start, .. } if *start == after));
    let writer_exit = seq_of(&|e| matches!(e, Event::ThreadExit { tid, .. } if *tid == writer));
    let written: Vec<(u64, u64, u64)> = t
        .lines
        .iter()
        .filter_map(|l| match l.event {
            Event::Resident {
                tid: Some(tid),
                start,
                end,
                ..
            } if tid == writer && region.contains(&start) => {
                Some((l.seq, l.t_ns, (end - start) / 4096))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        written.iter().map(|w| w.2).sum::<u64>(),
        16,
        "the writer's lines: {written:?}"
    );
    for (seq, t_ns, _) in &written {
        assert!(
            *seq < writer_exit.0 && *seq < first_after.0 && *t_ns <= first_after.1,
            "a line of the writer's at seq {seq}, t_ns {t_ns}: after its thread_exit (seq {}) or \
             the map after (seq {}, t_ns {})",
            writer_exit.0,
            first_after.0,
            first_after.1
        );
    }
}

/// Processes that share their parent's space (`clone(CLONE_VM)`) and exit while it goes on:
/// no line names one after its `exit` (its last pages, found by a later read, are written as
/// found), so the stream replays cleanly and verifies.
#[test]
fn no_line_names_a_process_of_a_shared_space_after_its_exit() {
    let program = [workload("u27_clone_vm")];
    let (status, stdout, _) = run_within(&mut Command::new(&program[0]), HANG);
    let t = trace_within(&RECORDS, &program, HANG);
    assert_eq!((t.status, &t.stdout), (status, &stdout), "{}", t.stderr);
    assert!(t.replay.problems.is_empty(), "{:?}", t.replay.problems);
    assert_eq!(t.verify_totals().mismatched_pages, 0, "{}", t.evidence());
}

/// Where kernel-mode faults may not be recorded (`perf_event_paranoid` 2 without
/// `CAP_PERFMON`, here by the `perf-kernel` hook), user-mode ones still are: one warning says
/// so, the pages a thread made resident inside `read()` are found without their thread, and
/// the stream still agrees with the kernel.
#[test]
fn without_kernel_mode_faults_the_pages_of_syscalls_are_found_without_their_thread() {
    let t = exact_with_hook("perf-kernel", "u27_syscall_faults");
    let said = records_lost(&t)
        .into_iter()
        .filter(|m| m.contains("inside system calls"))
        .count();
    assert_eq!(said, 1, "{:?}", t.warnings());
    let zero = &t.truth("region", "zero0")[0];
    let found = threads_of_pages(&t, zero.start, zero.end);
    assert_eq!(found.len(), 32);
    assert!(
        found
            .values()
            .all(|(tid, by)| tid.is_none() && *by == Some(FoundBy::Scan)),
        "{found:?}"
    );
    // User-mode faults are still named: the stacks and heaps the threads touched.
    assert!(named_by_records(&t) > 0, "no page was named at all");
}

/// Pages made resident and dropped between two reads are written, in order: a thread writes a
/// region page by page while the main thread unmaps it, and the tracer (`slow-release`) waits
/// 20 ms at the munmap's entry after its read. The pages written in that window have
/// `record_only` lines of the writer, each among the pages it wrote while the munmap ran,
/// before the `unmap` line that drops them. Writes that fail (SIGSEGV) are recorded and make
/// no line at all: to a region the thread may only read, to one it may not touch that is made
/// writable after them, to guard pages made writable before, and to guard pages
/// `process_madvise` put there unseen.
#[test]
fn pages_made_and_dropped_between_reads_are_written_from_their_records() {
    let t = exact_with_hook("slow-release", "u27_unread");
    let writer: i32 = said(&t, "writer ").parse().unwrap();
    let (before, after): (u64, u64) = (
        said(&t, "before ").parse().unwrap(),
        said(&t, "after ").parse().unwrap(),
    );
    // Where the kernel has no guard pages, their regions are "(nil)": not written.
    let refused: Vec<std::ops::Range<u64>> = ["denied ", "opened ", "guarded ", "madvised "]
        .iter()
        .filter_map(|what| {
            let start = u64::from_str_radix(said(&t, what).strip_prefix("0x")?, 16).unwrap();
            Some(start..start + 16 * 4096)
        })
        .collect();
    assert!(refused.len() >= 2, "{}", t.stdout);
    let region = u64::from_str_radix(said(&t, "region 0x"), 16).unwrap();
    let region = region..region + 32768 * 4096;
    let unmap = t
        .lines
        .iter()
        .find(|l| matches!(l.event, Event::Unmap { start, .. } if start == region.start))
        .map(|l| l.seq)
        .unwrap_or_else(|| panic!("no unmap of the region: {}", t.evidence()));
    let mut unread = 0;
    for l in &t.lines {
        let Event::Resident {
            tid,
            start,
            end,
            by: Some(FoundBy::RecordOnly),
            write,
            ..
        } = l.event
        else {
            continue;
        };
        assert!(
            region.start <= start && end <= region.end,
            "a record_only line outside the region: {l:?}"
        );
        assert_eq!(tid, Some(writer), "{l:?}");
        assert!(write, "{l:?}");
        assert!(l.seq < unmap, "after the unmap (seq {unmap}): {l:?}");
        // A page each side: the one being written as the count was read.
        let pages = (start - region.start) / 4096..(end - region.start) / 4096;
        assert!(
            before.saturating_sub(1) <= pages.start && pages.end <= after + 1,
            "pages {pages:?} were not written while the munmap ran ({before}..{after})"
        );
        unread += pages.end - pages.start;
    }
    assert!(unread > 0, "no record_only line: {}", t.evidence());
    for refused in refused {
        let nothing = t.events("resident").all(|e| match e {
            Event::Resident { start, end, .. } => *end <= refused.start || refused.end <= *start,
            _ => true,
        });
        assert!(nothing, "a failed write made a line: {}", t.evidence());
    }
}
