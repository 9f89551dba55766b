//! A program runs under `mevi-actors run` as it runs without it (issue 10): the same output and
//! status, no hang, and under `--verify` a stream that agrees with the kernel, or a status that
//! says it could not be checked, never a vacuous pass. Each case is one of `tests/workloads/u10_*`,
//! run untraced first, then traced, each bounded by a timeout that fails the test.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use mevi_actors::event::{
    Event, Follow, FoundBy, Line, MapCause, MapKind, VerifyPoint, WarningKind,
};
use mevi_actors::run::VERIFY_INCOMPLETE;

use crate::util::{
    HostSetting, Traced, bin, parse_stream, run_within, scratch, skip, trace_within, workload,
    workload_needing,
};

/// Every case here runs in well under a second untraced; beyond this it hangs.
const HANG: Duration = Duration::from_secs(60);

/// The program's status and stdout without mevi-actors.
fn untraced<S: AsRef<OsStr>>(program: &[S]) -> (i32, String) {
    let (status, stdout, _) = run_within(Command::new(&program[0]).args(&program[1..]), HANG);
    (status, stdout)
}

/// Runs `program` untraced and under `run --verify`: same status and stdout, and a stream that
/// agrees with the kernel. The traced run, for more checks.
fn runs_as_untraced<S: AsRef<OsStr>>(program: &[S]) -> Traced {
    let (status, stdout) = untraced(program);
    let [uffd, _scan, _records] = ["uffd", "scan", "records"].map(|how| {
        let t = trace_within(&["--faults", how, "--verify"], program, HANG);
        assert_eq!(
            (t.status, &t.stdout),
            (status, &stdout),
            "traced with --faults {how} (left) and untraced (right) differ: {}",
            t.stderr
        );
        let v = t.verify_totals();
        assert_eq!(v.mismatched_pages, 0, "--faults {how}: {}", t.evidence());
        assert!(
            v.points > 0,
            "--faults {how}: nothing was checked: {}",
            t.stderr
        );
        t
    });
    // What the tests look at further is the default mode's stream.
    uffd
}

fn warnings(t: &Traced, what: WarningKind) -> usize {
    t.lines
        .iter()
        .filter(|l| matches!(&l.event, Event::Warning { what: w, .. } if *w == what))
        .count()
}

/// A child made with `clone(CLONE_UNTRACED)` (as LeakSanitizer's helper is) inherits the filter;
/// untraced by us, its `mmap` would fail with ENOSYS. The flag is cleared, and the child is
/// followed like any other.
#[test]
fn a_clone_untraced_child_is_followed() {
    for how in [None, Some("clone3")] {
        let mut program = vec![workload("u10_untraced_clone").into_os_string()];
        program.extend(how.map(Into::into));
        let t = runs_as_untraced(&program);
        let forks = t.events("fork").count();
        assert_eq!(forks, 1, "{how:?}: the child is announced and followed");
    }
}

/// An AddressSanitizer build that leaks: LeakSanitizer's helper (a `CLONE_UNTRACED` process in
/// the program's address space) ptrace-attaches every thread to check for leaks. The tracer
/// lends it the threads, so the report and the status are the untraced ones, with threads still
/// running during the check or not (and the stream agrees with the kernel), or inside layout
/// syscalls the whole time ("busy": a thread is lent at its first stop between syscalls; this
/// used to hang for good). Every variant runs under `--verify`: "busy" used to give a mismatch in
/// about 1 run of 15 under load, and gave none in 32 (two at a time beside `stress-ng --cpu 1`)
/// once a thread killed inside a layout syscall had its space described again.
#[test]
fn leak_sanitizer_reports_as_untraced() {
    let Some(program) = workload_needing(
        "AddressSanitizer's runtime (libasan)",
        "u10_asan_leak",
        &["-fsanitize=address", "-g", "-pthread"],
    ) else {
        return;
    };
    for args in [&[][..], &["threads"][..], &["busy"][..]] {
        let mut argv = vec![program.clone().into_os_string()];
        argv.extend(args.iter().map(Into::into));
        let (status, stdout, stderr) = run_within(Command::new(&argv[0]).args(&argv[1..]), HANG);
        assert_eq!(status, 1, "untraced: {stderr}");
        let report = "ERROR: LeakSanitizer: detected memory leaks";
        assert!(stderr.contains(report), "untraced: {stderr}");
        let t = trace_within(&["--verify"], &argv, HANG);
        assert_eq!(
            (t.status, &t.stdout),
            (status, &stdout),
            "{args:?}: {}",
            t.evidence()
        );
        assert!(t.stderr.contains(report), "{args:?}: {}", t.stderr);
        assert!(
            t.stderr.contains("4096 byte(s) leaked in 1 allocation(s)"),
            "{args:?}: {}",
            t.stderr
        );
        assert_eq!(
            t.verify_totals().mismatched_pages,
            0,
            "{args:?}: {}",
            t.stderr
        );
    }
}

/// `int $0x80` in a 64-bit program is another architecture to seccomp: the filter used to kill
/// the process. It runs.
#[test]
fn a_32_bit_syscall_in_a_64_bit_program_runs() {
    runs_as_untraced(&[workload("u10_int80")]);
}

/// A 32-bit program, started directly or by a traced parent, runs as untraced. Its memory is
/// not followed (its syscalls are another ABI's): a `not_followed` warning says so, and `--verify`
/// says it could not check it (4), never that all is well.
#[test]
fn a_32_bit_program_runs_and_verify_says_it_could_not_check_it() {
    let Some(program) = workload_needing(
        "a C compiler for 32-bit x86 (-m32)",
        "u10_i386",
        &["-m32", "-O1", "-nostdlib", "-static", "-fno-pie", "-no-pie"],
    ) else {
        return;
    };
    let (status, stdout) = untraced(&[&program]);
    assert_eq!((status, stdout.as_str()), (5, "ok32\n"));
    let script = format!("{}; echo child $?", program.display());
    let by_a_parent = ["sh", "-c", script.as_str()];
    for (traced_program, expected) in [
        (vec![program.as_os_str()], "ok32\n"),
        (
            by_a_parent.iter().map(OsStr::new).collect(),
            "ok32\nchild 5\n",
        ),
    ] {
        let t = trace_within(&[], &traced_program, HANG);
        assert_eq!(t.stdout, expected, "{}", t.stderr);
        assert_eq!(warnings(&t, WarningKind::NotFollowed), 1, "{}", t.stderr);
        let v = trace_within(&["--verify"], &traced_program, HANG);
        assert_eq!(v.status, VERIFY_INCOMPLETE, "{}", v.stderr);
        assert_eq!(v.verify_totals().unfollowed_spaces, 1);
    }
}

/// A fork child of a 32-bit program runs its parent's program: it is not followed either (a
/// `not_followed` warning for each space), nothing is injected into it, and both run as untraced.
#[test]
fn a_32_bit_programs_fork_child_is_not_followed_either() {
    let Some(program) = workload_needing(
        "a C compiler for 32-bit x86 (-m32)",
        "u10_i386_fork",
        &["-m32", "-O1", "-nostdlib", "-static", "-fno-pie", "-no-pie"],
    ) else {
        return;
    };
    let (status, stdout) = untraced(&[&program]);
    assert_eq!((status, stdout.as_str()), (5, "child32\nok32\n"));
    for mode in ["uffd", "scan", "records"] {
        let t = trace_within(&["--faults", mode], &[program.as_os_str()], HANG);
        assert_eq!(t.status, 5, "{mode}: {}", t.stderr);
        assert_eq!(t.stdout, "child32\nok32\n", "{mode}: {}", t.stderr);
        assert_eq!(
            warnings(&t, WarningKind::NotFollowed),
            2,
            "{mode}: {}",
            t.stderr
        );
        let v = trace_within(
            &["--faults", mode, "--verify"],
            &[program.as_os_str()],
            HANG,
        );
        assert_eq!(v.status, VERIFY_INCOMPLETE, "{mode}: {}", v.stderr);
        assert_eq!(v.verify_totals().unfollowed_spaces, 2, "{mode}");
    }
}

/// A program whose own seccomp filter returns `SECCOMP_RET_TRACE` for `openat` gets ENOSYS from
/// it with no tracer, and so it does under mevi-actors.
#[test]
fn the_programs_own_trace_filter_gets_what_it_would_untraced() {
    runs_as_untraced(&[workload("u10_own_seccomp")]);
}

/// A program registering its own userfaultfd on memory the tracer registered used to get EBUSY.
/// The tracer gives the range up, and the stream says it is no longer tracked.
#[test]
fn a_program_with_its_own_userfaultfd_works() {
    let t = runs_as_untraced(&[workload("u10_own_uffd")]);
    let untracked_anon = t.lines.iter().any(|l| {
        matches!(&l.event, Event::Map { tracked: false, kind, cause, .. }
            if *kind == MapKind::Anon && *cause == Some(MapCause::Redescribe))
    });
    assert!(
        untracked_anon,
        "the program's range is described again, untracked"
    );
}

/// Locked memory grown by an `mremap` that moves it is populated inside the syscall, where the
/// move keeps every fill refused: this livelocked for good. It runs, and the populated pages are
/// in the stream.
#[test]
fn locked_memory_grown_by_mremap_does_not_hang() {
    runs_as_untraced(&[workload("u10_mlock_mremap")]);
    runs_as_untraced(&[
        workload("u10_mlock_mremap").into_os_string(),
        "mlockall".into(),
    ]);
}

/// The program finds no descriptor of ours among its own. With the stream on stdout (no `-o`),
/// the copy of stdout it is written to used to be the program's fd 3.
#[test]
fn the_program_finds_no_descriptor_of_ours() {
    let list = ["/bin/sh", "-c", "ls /proc/self/fd"];
    let (_, untraced) = untraced(&list);
    let (status, _, stderr) = run_within(
        Command::new(bin())
            .args(["run", "--no-summary", "--"])
            .args(list),
        HANG,
    );
    assert_eq!(status, 0, "{stderr}");
    // Its stdout is our stderr: the stream has stdout.
    assert_eq!(stderr, untraced, "the program's descriptors");
}

/// A program killed in the microseconds between its fork and its first stop (as a `kill -9`
/// sent the moment it appears is) ends with 137, as it would untraced: nothing of it ran, and
/// the stream says no process was followed. It used to be exit 1, "died before it could be
/// traced".
#[test]
fn a_program_killed_before_its_first_stop_exits_137() {
    ends_before_its_exec("killed-first", &["/bin/true"], 137);
}

/// A SIGINT that reaches the program's child before its exec (a Ctrl-C as the run starts) ends
/// it as it would the program untraced: the child had mevi-actors' own handlers until its exec,
/// which took the signal, and the program ran all the same.
#[test]
fn a_program_interrupted_before_its_exec_exits_130() {
    ends_before_its_exec("interrupted-first", &["/bin/echo", "ran"], 130);
}

/// Runs `program` with the test hook `fault`, which ends its child before the exec: the run's
/// status is `status`, and its stream is whole all the same.
fn ends_before_its_exec(fault: &str, program: &[&str], status: i32) {
    let file = scratch(fault);
    let (got, _, stderr) = run_within(
        Command::new(bin())
            .env("MEVI_TEST_FAULT", fault)
            .args(["run", "-o"])
            .arg(&file)
            .arg("--")
            .args(program),
        HANG,
    );
    assert_eq!(got, status, "{stderr}");
    let lines = parse_stream(&std::fs::read_to_string(&file).unwrap());
    assert!(
        matches!(lines.last().map(|l| &l.event), Some(Event::Summary { .. })),
        "a complete stream: {lines:?}"
    );
}

/// A syscall the kernel refuses up front changed nothing, so it writes nothing: 1,000 failed
/// `madvise(p + 16, ...)` (EINVAL: unaligned) used to write 2,000 `unmap`/`map` lines starting
/// at `p + 16`, counted as the program's maps and unmaps.
#[test]
fn a_refused_syscall_writes_no_line() {
    let t = runs_as_untraced(&[workload("u10_bad_madvise")]);
    let page = 4096;
    for l in &t.lines {
        if let Event::Map { start, end, .. } | Event::Unmap { start, end, .. } = &l.event {
            assert!(
                start % page == 0 && end % page == 0,
                "an unaligned range: {l:?}"
            );
        }
    }
    let (_, totals) = t.summary();
    assert!(
        totals.maps < 40 && totals.unmaps < 10,
        "the program makes about 25 mappings and no unmap: {totals:?}"
    );
}

/// `mprotect` gives a `protect` line, so `prot` is never stale: the workload leaves the upper
/// half of its 8-page region read-only, and the replayed state says so. A hugetlb mapping is its
/// own kind.
#[test]
fn mprotect_is_in_the_stream_and_hugetlb_is_its_own_kind() {
    let t = runs_as_untraced(&[workload("u10_mprotect_hugetlb")]);
    let region: u64 = t
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("region ")?.parse().ok())
        .expect("the workload names its region");
    // As the program left it: the space ends at its exit.
    let space = t.space_at_end(0);
    let prot_at = |addr: u64| space.mappings.get(&addr).map(|m| m.prot.as_str());
    assert_eq!(prot_at(region), Some("rw-"));
    assert_eq!(prot_at(region + 3 * 4096), Some("rw-"));
    assert_eq!(prot_at(region + 4 * 4096), Some("r--"));
    assert_eq!(prot_at(region + 7 * 4096), Some("r--"));
    assert!(t.events("protect").count() >= 3);

    // A huge page can be reserved only while none is in use; the count is put back after.
    let program = [
        workload("u10_mprotect_hugetlb").into_os_string(),
        "hugetlb".into(),
    ];
    let reserved = match HostSetting::set("/proc/sys/vm/nr_hugepages", "1") {
        Ok(reserved) => reserved,
        Err(e) => {
            eprintln!("/proc/sys/vm/nr_hugepages: {e}");
            return skip("cannot reserve a huge page");
        }
    };
    let (status, stdout) = untraced(&program);
    let h = trace_within(&[], &program, HANG);
    drop(reserved);
    assert_eq!((status, stdout.as_str()), (0, "hugetlb ok\n"));
    assert_eq!(
        (h.status, h.stdout.as_str()),
        (0, "hugetlb ok\n"),
        "{}",
        h.stderr
    );
    let hugetlb = h.lines.iter().any(|l| {
        matches!(&l.event, Event::Map { kind: MapKind::Hugetlb, tracked: false, end, start, .. }
            if end - start == 2 << 20)
    });
    assert!(hugetlb, "a hugetlb map line of 2 MiB");
}

/// With a soft descriptor limit of 1,024, 600 concurrent processes used to leave about a hundred
/// spaces without a userfaultfd ("mappings only", blamed on a missing vDSO). The tracer raises its
/// own soft limit to the hard one; the program still sees the limit it was given.
#[test]
fn many_processes_under_a_soft_descriptor_limit_are_all_followed() {
    let file = scratch("many-procs");
    let program = workload("u10_many_procs");
    let script = format!(
        "ulimit -Sn 1024; exec {} run --verify -o {} -- {} 600",
        bin(),
        file.display(),
        program.display()
    );
    let (status, stdout, stderr) = run_within(Command::new("sh").args(["-c", &script]), HANG);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(stdout, untraced(&[&program, Path::new("600")]).1);
    let lines = parse_stream(&std::fs::read_to_string(&file).unwrap());
    let unfollowed: Vec<&Line> = lines
        .iter()
        .filter(|l| matches!(&l.event, Event::Warning { .. }))
        .collect();
    assert!(unfollowed.is_empty(), "{unfollowed:?}");

    let script = format!("ulimit -Sn 1024; exec {} run -- sh -c 'ulimit -Sn'", bin());
    let (status, stdout, stderr) = run_within(Command::new("sh").args(["-c", &script]), HANG);
    assert_eq!(status, 0, "{stderr}");
    assert!(
        stderr.starts_with("1024\n"),
        "the program's own limit: {stderr}"
    );
    assert!(!stdout.is_empty());
}

/// Checkpoints every 5 ms stop all of 1,000 threads each time; the next interval is measured from
/// the end of the last checkpoint, so the program makes progress between them and finishes (it
/// used to run for minutes: each checkpoint began as soon as the threads resumed).
#[test]
fn frequent_checkpoints_do_not_starve_many_threads() {
    let t = trace_within(
        &["--verify", "--verify-every", "5"],
        &[workload("u10_many_threads")],
        HANG,
    );
    assert_eq!((t.status, t.stdout.as_str()), (0, "ok\n"), "{}", t.stderr);
    let v = t.verify_totals();
    assert_eq!(v.mismatched_pages, 0);
    assert!(v.points >= 2, "{v:?}");
}

/// `ptrace` inside one address space: a thread attaching a sibling of its own thread group gets
/// EPERM as untraced (no thread is lent within a thread group), and a helper process sharing the
/// memory whose seize is refused, then attaches and detaches, leaves the main thread traced and
/// working: every `mmap` succeeds and the stream agrees with the kernel.
#[test]
fn ptrace_calls_within_a_space_leave_every_thread_traced() {
    for _ in 0..3 {
        let t = runs_as_untraced(&[workload("u10_ptrace_own_space")]);
        assert!(t.stdout.ends_with("main mmap ok\n"), "{}", t.stdout);
    }
}

/// A `MAP_GROWSDOWN` mapping grows down through a fault below it, as the main stack does: the
/// growth is a `map` line before the page that caused it (it was missing: `--verify` failed).
#[test]
fn a_growsdown_mapping_growing_is_in_the_stream() {
    let t = runs_as_untraced(&[workload("u10_growsdown")]);
    assert_eq!(t.stdout, "grew 16 pages\n");
}

/// A checkpoint can stop a thread inside a fault that grew the main stack: the kernel takes the
/// fault's message back to retry it after the stop, so the growth reaches no lane before the
/// check. The lane reads its stacks' mappings before each check, and writes such a growth.
/// Two mappings that grow down, one just below the other, are merged by the kernel: that is not
/// the upper one's growth, and the lower one's pages stay in the stream.
#[test]
fn a_stack_growing_under_checkpoints_agrees_with_the_kernel() {
    for mode in ["deep", "adjacent"] {
        let program = [workload("u10_growsdown").into_os_string(), mode.into()];
        let (status, stdout) = untraced(&program);
        for how in ["uffd", "scan", "records"] {
            let flags = ["--faults", how, "--verify", "--verify-every", "5"];
            let t = trace_within(&flags, &program, HANG);
            assert_eq!((t.status, &t.stdout), (status, &stdout), "{}", t.stderr);
            let v = t.verify_totals();
            assert_eq!(v.mismatched_pages, 0, "{mode} {how}: {}", t.evidence());
            assert!(v.points > 1, "checkpoints were made: {v:?}");
        }
    }
}

/// The first "NAME N" line of a workload's output, as a number.
fn figure(text: &str, name: &str) -> Option<i64> {
    text.lines().find_map(|l| {
        l.strip_prefix(name)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

/// A region the program asks to be huge keeps its huge pages: registering it with a userfaultfd
/// would make every fault a 4 KiB one (0 kB of `AnonHugePages` before), and refuse
/// `MADV_COLLAPSE` with `EBUSY`. Such a range is followed by scans instead: the same
/// `AnonHugePages` and present pages as untraced, the pages it gets in `resident` lines found by a
/// scan (huge, and not written for the huge zero page), and `--verify` agrees.
#[test]
fn a_region_asked_to_be_huge_keeps_its_huge_pages() {
    for mode in [
        "huge",
        "collapse",
        "collapse-mremap",
        "collapse-beside",
        "reads",
        "heap",
        "stack",
    ] {
        let program = [workload("u10_thp").into_os_string(), mode.into()];
        let (_, stdout) = untraced(&program);
        let huge_kb = figure(&stdout, "AnonHugePages ").unwrap_or(0);
        assert!(
            huge_kb > 0,
            "{mode}: no huge page untraced on this machine (is THP off?): {stdout}"
        );
        // Whether the kernel finds free 2 MiB blocks is the machine's state, not ours: one more
        // pair of runs before two differing figures count.
        let t = match std::panic::catch_unwind(|| runs_as_untraced(&program)) {
            Ok(t) => t,
            Err(_) => runs_as_untraced(&program),
        };
        let region: Vec<u64> = t
            .stderr
            .lines()
            .find_map(|l| l.strip_prefix("region "))
            .expect("the workload names its region")
            .split_whitespace()
            .map(|h| u64::from_str_radix(h, 16).unwrap())
            .collect();
        let (start, end) = (region[0], region[1]);
        let scanned_map = t.lines.iter().any(|l| {
            matches!(&l.event, Event::Map { start: s, end: e, follow: Follow::Scans, .. }
                if *s <= start && start < *e)
        });
        assert!(scanned_map, "{mode}: the region is followed by scans");
        let huge: u64 = t
            .lines
            .iter()
            .filter_map(|l| match l.event {
                Event::Resident {
                    start: s,
                    end: e,
                    by: Some(FoundBy::Scan),
                    huge: true,
                    write: true,
                    tid: None,
                    ..
                } if start <= s && e <= end => Some(e - s),
                _ => None,
            })
            .sum();
        // `AnonHugePages` leaves out the huge zero page. A collapse changes no page's presence:
        // its pages came by faults before it.
        if !mode.starts_with("collapse") {
            assert_eq!(
                huge / 1024,
                huge_kb as u64,
                "{mode}: huge pages in the stream"
            );
        }
        if mode == "reads" {
            let zero_huge = t.lines.iter().any(|l| {
                matches!(
                    l.event,
                    Event::Resident {
                        huge: true,
                        write: false,
                        by: Some(_),
                        ..
                    }
                )
            });
            assert!(zero_huge, "the huge zero page is a read");
        }
    }
}

// --- multi-VMA mremap, mprotect(PROT_GROWSDOWN), seccomp USER_NOTIF ---

/// A move without resize over two mappings (Linux >= 6.17 moves them one by one) is refused with
/// EFAULT when one is registered with a userfaultfd: the source is given back to the kernel for
/// the syscall, so the move succeeds as untraced, and the moved range is followed again after
/// it. Two mappings that merge untraced merge traced too (the workload counts its VMAs).
#[test]
fn a_move_over_several_mappings_succeeds_as_untraced() {
    let t = runs_as_untraced(&[workload("u10_multi_vma_mremap")]);
    assert_eq!(t.stdout, "vmas 1 ok moved 2\n");
    let program = [
        workload("u10_multi_vma_mremap").into_os_string(),
        "move".into(),
    ];
    let t = runs_as_untraced(&program);
    assert_eq!(t.stdout, "vmas 2 ok moved 2\n");
    let Some(Event::Remap {
        new_start, new_end, ..
    }) = t.events("remap").last()
    else {
        panic!("no remap line: {:?}", t.lines);
    };
    let space = t.space_at_end(0);
    for addr in (*new_start..*new_end).step_by(4096) {
        let mapping = space
            .mappings
            .get(&addr)
            .expect("the moved range is mapped");
        assert!(mapping.tracked, "{addr:#x} is followed after the move");
    }
}

/// `mprotect(PROT_GROWSDOWN)` on a mapping that grows down changes the protection from the start
/// of the mapping, below the range passed (here 17 pages below it, 16 of them grown): the
/// `protect` line covers what the kernel changed, so the replayed protection of every page of the
/// mapping is what `/proc/PID/maps` says at the end. `PROT_GROWSUP` is refused on x86_64: no line.
#[test]
fn a_growsdown_mprotect_covers_what_the_kernel_changed() {
    let program = [workload("u10_growsdown").into_os_string(), "protect".into()];
    let t = runs_as_untraced(&program);
    assert_eq!(t.stdout, "grew 16 pages\ngrowsdown ok growsup EINVAL\n");
    let maps: Vec<(u64, u64, &str)> = t
        .stderr
        .lines()
        .filter_map(|l| {
            let mut f = l.strip_prefix("maps ")?.split(' ');
            Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?, f.next()?))
        })
        .collect();
    assert_eq!(
        maps.iter().map(|m| m.2).collect::<Vec<_>>(),
        ["r--", "rw-"],
        "{}",
        t.stderr
    );
    let (low, high) = (maps[0].0, maps[1].1);
    let space = t.space_at_end(0);
    for (start, end, prot) in maps {
        for addr in (start..end).step_by(4096) {
            let replayed = space.mappings.get(&addr).map(|m| m.prot.as_str());
            assert_eq!(replayed, Some(prot), "the protection of {addr:#x}");
        }
    }
    let protects = t
        .events("protect")
        .filter(|e| matches!(e, Event::Protect { start, end, .. } if *start < high && low < *end))
        .count();
    assert_eq!(protects, 1, "one line, for the call that succeeded");
}

/// A program's own filter answers `mmap` with `SECCOMP_RET_USER_NOTIF`, which outranks our stop,
/// and its supervisor lets the call run (CONTINUE): the mapping was missing (`--verify` exit 3).
/// The thread that installed the filter stops at every syscall from then on, and a fork child
/// inherits that with the filter: both 8-page mappings are in the stream.
#[test]
fn a_mapping_a_user_notif_supervisor_lets_run_is_in_the_stream() {
    for (how, expected) in [(None, "ok 8\n"), (Some("fork"), "ok 8\nchild ok 8\n")] {
        let mut program = vec![workload("u10_user_notif").into_os_string()];
        program.extend(how.map(Into::into));
        let t = runs_as_untraced(&program);
        assert_eq!(t.stdout, expected);
        let eight_pages: std::collections::BTreeSet<i32> = t
            .lines
            .iter()
            .filter_map(|l| match &l.event {
                Event::Map {
                    pid,
                    start,
                    end,
                    tracked: true,
                    cause: None,
                    ..
                } if end - start == 8 * 4096 => Some(*pid),
                _ => None,
            })
            .collect();
        let processes = if how.is_some() { 2 } else { 1 };
        assert_eq!(
            eight_pages.len(),
            processes,
            "an 8-page map line per process: {eight_pages:?}"
        );
    }
}

// --- io_uring workers and --verify ---

/// io_uring's io-wq workers (`iou-wrk-*`) are threads of the program that ptrace cannot stop, and
/// they take first touches: a checkpoint while they live is not quiescent, and used to report
/// pages the stream did not have yet as mismatches (exit 3, 6 runs of 6). The space is left out
/// of those checkpoints, each with a `checkpoint_skipped` warning that names the workers, and it
/// is checked at its last exit stop, once the workers killed by the group's exit have ended.
#[test]
fn io_uring_workers_leave_their_space_out_of_checkpoints() {
    let program = [workload("u10_io_uring").into_os_string(), "3".into()];
    let (status, stdout) = untraced(&program);
    assert_eq!((status, stdout.as_str()), (0, "ok\n"));
    let t = trace_within(&["--verify", "--verify-every", "20"], &program, HANG);
    assert_eq!((t.status, t.stdout.as_str()), (0, "ok\n"), "{}", t.stderr);
    let v = t.verify_totals();
    assert_eq!(v.mismatched_pages, 0, "{}", t.stderr);
    let left_out = t
        .lines
        .iter()
        .filter(|l| {
            matches!(&l.event, Event::Warning { what: WarningKind::CheckpointSkipped, message, .. }
                if message.contains("io_uring worker thread(s)"))
        })
        .count();
    assert!(left_out > 10, "checkpoints with workers alive: {left_out}");
    let checked_at_exit = t.lines.iter().any(|l| {
        matches!(&l.event, Event::Verify { point: VerifyPoint::Exit, skipped: None, checked_pages, .. }
            if *checked_pages > 0)
    });
    assert!(
        checked_at_exit,
        "the last exit stop is checked: {}",
        t.stderr
    );
    assert_eq!(v.unchecked_spaces, 0);

    // Main ends with `exit`, not `exit_group`: its worker is not killed and lives past the last
    // exit stop, so the space is never checked, and `--verify` says so (4) rather than pass.
    let program = [
        workload("u10_io_uring").into_os_string(),
        "0.3".into(),
        "thread-exit".into(),
    ];
    assert_eq!(untraced(&program), (0, "ok\n".into()));
    let t = trace_within(&["--verify"], &program, HANG);
    assert_eq!(t.stdout, "ok\n", "{}", t.stderr);
    assert_eq!(t.status, VERIFY_INCOMPLETE, "{}", t.stderr);
    let v = t.verify_totals();
    assert_eq!((v.unchecked_spaces, v.mismatched_pages), (1, 0), "{v:?}");
    assert!(t.stderr.contains("never checked"), "{}", t.stderr);
}

// --- attribution of first touches; replay ends a space ---

/// The pids the stream announces (the first `exec`, every `fork` child) and the threads it
/// announces (those, and every `thread` child).
fn announced(t: &Traced) -> (Vec<i32>, Vec<i32>) {
    let mut pids = Vec::new();
    let mut tids = Vec::new();
    for l in &t.lines {
        match l.event {
            Event::Exec { pid, .. } if pids.is_empty() => pids.push(pid),
            Event::Fork { child, .. } => pids.push(child),
            Event::Thread { child, .. } => tids.push(child),
            _ => {}
        }
    }
    tids.extend(&pids);
    (pids, tids)
}

/// No line and no summary row names a process the stream did not announce.
fn no_phantom(t: &Traced) {
    let (pids, _) = announced(t);
    for l in &t.lines {
        if let Some(pid) = l.event.pid() {
            assert!(pids.contains(&pid), "unannounced pid {pid}: {l:?}");
        }
    }
    let (processes, _) = t.summary();
    let mut rows: Vec<i32> = processes.iter().map(|p| p.pid).collect();
    let mut expected = pids.clone();
    rows.sort_unstable();
    expected.sort_unstable();
    expected.dedup();
    assert_eq!(rows, expected, "summary rows");
}

/// The `writer` field of a line, read from its JSON.
fn writer_of(event: &Event) -> Option<i64> {
    serde_json::to_value(event).unwrap()["writer"].as_i64()
}

/// A parent writes into its child's untouched pages with `process_vm_writev`: the first touches
/// are the child's (its space, its pid), with the parent named as `writer`; no phantom process.
#[test]
fn a_first_touch_by_another_process_is_the_owners_with_the_writer_named() {
    let t = runs_as_untraced(&[workload("u10_vm_writev")]);
    assert_eq!(t.stdout, "present 4\n");
    let (parent, child, child_space) = t
        .lines
        .iter()
        .find_map(|l| match l.event {
            Event::Fork {
                pid,
                child,
                child_space,
                ..
            } => Some((pid, child, child_space)),
            _ => None,
        })
        .expect("a fork line");
    let mut written = 0;
    for l in &t.lines {
        if let Event::Resident {
            pid,
            tid,
            space,
            faults,
            ..
        } = l.event
            && space == child_space
        {
            assert_eq!((pid, tid), (child, Some(child)), "{l:?}");
            if let Some(writer) = writer_of(&l.event) {
                assert_eq!(writer, i64::from(parent), "{l:?}");
                written += faults;
            }
        }
    }
    assert_eq!(written, 4, "the 4 pages the parent wrote");
    no_phantom(&t);
    let (processes, _) = t.summary();
    let row = processes.iter().find(|p| p.pid == child).unwrap();
    assert!(row.faults >= 4, "{row:?}");
}

/// Under `unshare -pf` the program's processes are 1, 2... in their namespace, which is what the
/// userfaultfd says of a faulting thread: the stream has our ids all the same (those of its
/// `exec`/`fork`/`thread` lines), in every line and in the summary, and the stream agrees with
/// the kernel.
#[test]
fn in_a_child_pid_namespace_first_touches_carry_our_ids() {
    let cases: [Vec<std::ffi::OsString>; 2] = [
        vec![workload("fork_touch").into()],
        vec![workload("threads_region").into(), "4".into()],
    ];
    for program in cases {
        let mut argv: Vec<std::ffi::OsString> =
            vec!["unshare".into(), "-pf".into(), "--mount-proc".into()];
        argv.extend(program);
        let t = trace_within(&["--verify"], &argv, HANG);
        assert_eq!(t.status, 0, "{}", t.stderr);
        assert_eq!(t.verify_totals().mismatched_pages, 0, "{}", t.stderr);
        assert!(t.replay.problems.is_empty(), "{:?}", t.replay.problems);
        no_phantom(&t);
        let (pids, tids) = announced(&t);
        let mut faulting = std::collections::BTreeSet::new();
        for l in &t.lines {
            if let Event::Resident { pid, tid, .. } = l.event {
                let tid = tid.expect("a fault's line names its thread");
                assert!(tids.contains(&tid), "unannounced tid {tid}: {l:?}");
                faulting.insert(pid);
            }
        }
        // The programs in the namespace (every process but `unshare`) made first touches.
        assert!(
            pids[1..].iter().all(|p| faulting.contains(p)),
            "{pids:?} {faulting:?}"
        );
    }
}

/// Children SIGKILLed right after `fork`, some before mevi-actors could describe them: each has
/// an `exit` line, and its space (a copy of its parent's) ends with it: nothing stays resident
/// in a replay. The summary's row for each is its `exit` line's.
#[test]
fn replay_ends_the_spaces_of_children_killed_right_after_fork() {
    let t = trace_within(&[], &[workload("u10_fork_kill"), "50".into()], HANG);
    assert_eq!((t.status, t.stdout.as_str()), (0, "done 50 killed 50\n"));
    assert!(t.replay.problems.is_empty(), "{:?}", t.replay.problems);
    let (processes, _) = t.summary();
    let mut killed = 0;
    for l in &t.lines {
        if let Event::Exit {
            pid,
            space,
            signal: Some(ref signal),
            resident_bytes,
            ..
        } = l.event
        {
            assert_eq!(signal, "SIGKILL");
            killed += 1;
            assert_eq!(
                t.replay.spaces[&space].resident_bytes, 0,
                "space {space} of killed pid {pid}"
            );
            let row = processes.iter().find(|p| p.pid == pid).unwrap();
            assert_eq!(row.resident_bytes, resident_bytes, "pid {pid}");
            assert_eq!(t.space_at_end(space).resident_bytes, resident_bytes);
        }
    }
    assert_eq!(killed, 50);
    // The program's own space ends too, at its exit.
    assert!(t.replay.spaces.values().all(|s| s.resident_bytes == 0));
}

/// A program that drops root and execs (a daemon, a setuid helper) leaves a space that cannot get
/// a userfaultfd: it has no `CAP_SYS_PTRACE`, and `/dev/userfaultfd` is root's. It runs as
/// untraced, its space is followed by page-table scans instead, with a warning naming both
/// refusals, and `--verify` checks it (it used to be traced as mappings only, exit 4).
#[test]
fn a_program_that_drops_root_is_followed_by_scans() {
    // The user it becomes must be able to exec it: a world-readable copy.
    let copy = std::env::temp_dir().join(format!("u10_drop_root-{}", std::process::id()));
    std::fs::copy(workload("u10_drop_root"), &copy).unwrap();
    std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let program = [copy.clone()];
    let (status, stdout) = untraced(&program);
    let t = trace_within(&["--verify"], &program, HANG);
    std::fs::remove_file(&copy).ok();
    assert_eq!((status, stdout.as_str()), (0, "uid 65534 wrote 1 MiB\n"));
    assert_eq!(t.stdout, stdout, "{}", t.stderr);
    assert_eq!(t.status, 0, "{}", t.evidence());
    assert_eq!(warnings(&t, WarningKind::ScansInstead), 1, "{}", t.stderr);
    assert_eq!(warnings(&t, WarningKind::NoUserfaultfd), 0, "{}", t.stderr);
    let said = t
        .stderr
        .lines()
        .find(|l| l.contains("scans instead"))
        .unwrap();
    assert!(
        said.contains("userfaultfd():") && said.contains("/dev/userfaultfd"),
        "{said}"
    );
    let v = t.verify_totals();
    assert_eq!((v.unfollowed_spaces, v.mismatched_pages), (0, 0), "{v:?}");
    // Its megabyte, written after the exec, was checked.
    assert!(v.checked_pages >= 256, "{v:?}");
}

/// `MADV_GUARD_INSTALL` drops the pages of its range: a `discard` line, and its markers (swap
/// entries to pagemap) are not taken for pages, by the stream or by `--verify`.
#[test]
fn a_guard_region_drops_its_pages_in_the_stream() {
    let t = runs_as_untraced(&[workload("u10_guard")]);
    if t.stdout.starts_with("guard -1") {
        return skip("no guard regions in this kernel");
    }
    assert_eq!(t.stdout, "guard 0 present 12\n");
    let guard = t.lines.iter().any(|l| {
        matches!(&l.event, Event::Discard { advice, start, end, .. }
            if advice == "guard_install" && end - start == 4 * 4096)
    });
    assert!(guard, "a discard line for the guard region");
}

/// A program's own `UFFDIO_MOVE` takes pages out of a range of ours with no event: the call is
/// stopped, and its source and destination are described again at its exit.
#[test]
fn pages_a_program_moves_with_its_own_userfaultfd_leave_the_stream() {
    let t = runs_as_untraced(&[workload("u10_uffd_move")]);
    if t.stdout == "no move\n" {
        return skip("no UFFDIO_MOVE in this kernel");
    }
    assert_eq!(t.stdout, "moved 131072 source 32\n");
}

/// The environment is the program's entry by entry, byte for byte, as untraced: an entry with
/// no `=` too (std's `vars_os`, which the program's environment was once made from, leaves it
/// out), in its place.
#[test]
fn an_environment_entry_with_no_equals_sign_reaches_the_program() {
    let raw = workload("raw_env_exec");
    let (status, stdout) = untraced(&[raw.as_os_str(), "/usr/bin/env".as_ref()]);
    assert_eq!((status, stdout.as_str()), (0, "A=1\nNOEQUALS\nB=2\n"));
    let file = scratch("stream");
    let mut traced = Command::new(&raw);
    traced.args([bin(), "run", "-o"]).arg(&file);
    traced.args(["--", "/usr/bin/env"]);
    let (status, traced_stdout, stderr) = run_within(&mut traced, HANG);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(traced_stdout, stdout);
}

/// The signal mask mevi-actors was started with is the program's, as across any exec, and
/// mevi-actors runs all the same: it unblocks in its own threads the two it needs (SIGURG wakes
/// the tracer, SIGCHLD comes with the program's stops), which a parent that blocked both made
/// it wait for good, every run with call stacks (the program's end never reached the tracer).
/// Real-time signals and glibc's own two are kept too.
#[test]
fn the_signal_mask_the_parent_set_is_the_programs_and_mevi_actors_still_ends() {
    let blocked_line = |stdout: &str| -> String {
        stdout
            .lines()
            .find(|l| l.starts_with("SigBlk:"))
            .unwrap_or_else(|| panic!("no SigBlk in {stdout}"))
            .to_string()
    };
    let masked = workload("masked_exec");
    let signals = "2,10,15,17,23,32,33,34,64";
    let (status, stdout) = untraced(&[
        masked.as_os_str(),
        signals.as_ref(),
        "grep".as_ref(),
        "SigBlk".as_ref(),
        "/proc/self/status".as_ref(),
    ]);
    assert_eq!(status, 0);
    let expected = blocked_line(&stdout);
    let mask = u64::from_str_radix(expected["SigBlk:".len()..].trim(), 16).unwrap();
    // glibc unblocks its own two (32, 33) as the program starts, traced or not.
    for n in [2, 10, 15, 17, 23, 34, 64] {
        assert!(
            mask & 1 << (n - 1) != 0,
            "{n} is not blocked untraced: {expected}"
        );
    }
    for flags in [&[][..], &["--no-stacks"][..]] {
        let file = scratch("stream");
        let mut traced = Command::new(&masked);
        traced.args([signals, bin(), "run", "-o"]);
        traced.arg(&file).args(flags);
        traced.args(["--", "grep", "SigBlk", "/proc/self/status"]);
        let (status, stdout, stderr) = run_within(&mut traced, HANG);
        assert_eq!(status, 0, "{flags:?}: {stderr}");
        assert_eq!(blocked_line(&stdout), expected, "{flags:?}: {stdout}");
    }
}

/// Signals the program's parent ignored stay ignored in it, as across any exec (`nohup`'s
/// SIGHUP; SIGINT and SIGQUIT of a job a shell starts with `&`): mevi-actors installs no handler
/// of its own for them. SIGPIPE is the exception the README names: Rust programs start with it
/// ignored, whatever their parent did, so the program always gets the default.
#[test]
fn signals_the_parent_ignored_stay_ignored_in_the_program() {
    // The signals mevi-actors handles (the others it leaves as they were given to it).
    let handled = [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM]
        .iter()
        .fold(0u64, |bits, s| bits | 1 << (s - 1));
    let ignored = |stdout: &str| -> u64 {
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:"))
            .unwrap_or_else(|| panic!("no SigIgn in {stdout}"));
        u64::from_str_radix(line.trim(), 16).unwrap() & handled
    };
    let read_own = "grep SigIgn /proc/self/status";
    let (status, stdout) = untraced(&[
        "sh",
        "-c",
        &format!("trap '' HUP INT QUIT; exec {read_own}"),
    ]);
    assert_eq!(status, 0);
    let expected = ignored(&stdout);
    // HUP, INT and QUIT ignored; TERM handled by default.
    assert_eq!(expected, handled & !(1 << (libc::SIGTERM - 1)));
    let file = scratch("stream");
    let traced = format!(
        "trap '' HUP INT QUIT; exec {} run -o {} -- {read_own}",
        bin(),
        file.display()
    );
    let (status, stdout, stderr) = run_within(Command::new("sh").args(["-c", &traced]), HANG);
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(ignored(&stdout), expected, "{stdout}");
}
