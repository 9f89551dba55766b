//! `mevi-actors doctor`: its lines, its exit status, and that its verdict is what `run` meets, as
//! root and as an unprivileged user (with and without each way to a userfaultfd the tests can
//! give that user without touching the machine's settings).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::util::{
    WorldCopy, as_nobody, bin, can_become_nobody, installed, run_within, scratch, skip,
};

/// Enough for a doctor (one rehearsal) or a trace of /bin/true; only catches hangs.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The checks every report has, in order.
const CHECKS: &[&str] = &[
    "kernel",
    "ptrace",
    "seccomp",
    "userfaultfd: CAP_SYS_PTRACE",
    "userfaultfd: vm.unprivileged_userfaultfd",
    "userfaultfd: /dev/userfaultfd",
    "rehearsal",
    "PAGEMAP_SCAN",
    "attach",
    "transparent huge pages",
    "kernel.perf_event_paranoid",
    "fault records",
    "container",
];

/// A report's lines, checked for shape: each check is `MARK what: found`, each ✗ is followed by
/// the command that fixes it and what works without it, and the last line is the verdict with
/// the exit status. Returns the checks as (mark, what).
fn checks_of(report: &str, status: i32) -> Vec<(char, String)> {
    let lines: Vec<&str> = report.lines().collect();
    let mut checks = Vec::new();
    let mut i = 0;
    while i + 1 < lines.len() {
        let line = lines[i];
        let mark = line.chars().next().unwrap();
        assert!(matches!(mark, '✓' | '✗' | '-'), "{line:?} in\n{report}");
        let rest = &line[mark.len_utf8() + 1..];
        let what = rest
            .split(": ")
            .take(if rest.starts_with("userfaultfd: ") {
                2
            } else {
                1
            })
            .collect::<Vec<_>>()
            .join(": ");
        i += 1;
        if mark == '✗' {
            let fix = lines[i].strip_prefix("    fix: ");
            assert!(
                fix.is_some_and(|f| !f.trim().is_empty()),
                "a ✗ line without a fix: {line:?} in\n{report}"
            );
            assert!(
                lines[i + 1].starts_with("    without it: "),
                "a ✗ line without what works without it: {line:?} in\n{report}"
            );
            i += 2;
        }
        checks.push((mark, what));
    }
    let verdict = lines.last().unwrap();
    assert!(verdict.starts_with("verdict: "), "{report}");
    assert!(verdict.ends_with(&format!("(exit {status})")), "{report}");
    let names: Vec<&str> = checks.iter().map(|(_, what)| what.as_str()).collect();
    assert_eq!(names, CHECKS, "{report}");
    let missing = checks.iter().filter(|(mark, _)| *mark == '✗').count();
    if status == 0 {
        assert_eq!(missing, 0, "ready, yet something is missing:\n{report}");
        assert!(verdict.starts_with("verdict: ready"), "{report}");
    } else {
        assert_eq!(status, 1, "{report}");
        assert!(missing > 0, "not ready, yet nothing is missing:\n{report}");
        assert!(
            checks.contains(&('✗', "rehearsal".into())),
            "not ready, yet the rehearsal worked:\n{report}"
        );
    }
    checks
}

/// What `run` did with /bin/true: Ok(true) if it followed first touches, Ok(false) if it traced
/// without them; Err(stderr) if it refused.
fn run_outcome(status: i32, stdout: &str, stderr: &str) -> Result<bool, String> {
    if status != 0 {
        return Err(stderr.to_string());
    }
    assert!(stdout.contains("\"ev\":\"summary\""), "{stdout}");
    Ok(stdout.contains("\"ev\":\"resident\"") && !stdout.contains("no_userfaultfd"))
}

/// Doctor's verdict and `run`'s outcome agree: 0 when `run` follows first touches, 1 when it
/// refuses (pointing to doctor) or cannot follow them.
fn assert_agree(doctor: (i32, String, String), run: (i32, String, String)) {
    let (status, report, errors) = doctor;
    checks_of(&report, status);
    match (status, run_outcome(run.0, &run.1, &run.2)) {
        (0, Ok(true)) => {}
        (1, Err(refusal)) => assert!(
            refusal.contains("`mevi-actors doctor`"),
            "run's refusal should point to doctor: {refusal}"
        ),
        (1, Ok(false)) => {}
        (status, outcome) => panic!(
            "doctor exited {status}, run gave {outcome:?}\n{report}{errors}\nrun's stderr: {}",
            run.2
        ),
    }
}

#[test]
fn doctor_as_root_says_ready_and_run_follows_faults() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skip("not run as root");
    }
    let doctor = run_within(Command::new(bin()).arg("doctor"), TIMEOUT);
    assert_eq!(doctor.0, 0, "{}{}", doctor.1, doctor.2);
    let checks = checks_of(&doctor.1, doctor.0);
    assert!(checks.contains(&('✓', "rehearsal".into())));
    assert!(checks.contains(&('✓', "userfaultfd: CAP_SYS_PTRACE".into())));
    // PAGEMAP_SCAN is there exactly from Linux 6.7 on.
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut numbers = release.split('.').map(|n| n.parse::<u32>().unwrap_or(0));
    let scans = (numbers.next().unwrap(), numbers.next().unwrap_or(0)) >= (6, 7);
    let mark = if scans { '✓' } else { '-' };
    assert!(
        checks.contains(&(mark, "PAGEMAP_SCAN".into())),
        "{}",
        doctor.1
    );
    let run = run_within(
        Command::new(bin()).args(["run", "--no-summary", "--", "/bin/true"]),
        TIMEOUT,
    );
    assert_agree(doctor, run);
}

#[test]
fn doctor_as_an_unprivileged_user_agrees_with_run() {
    if !can_become_nobody() {
        return;
    }
    let copy = WorldCopy::new();
    let doctor = run_within(&mut as_nobody(&copy.0, &[], &["doctor"]), TIMEOUT);
    let run = run_within(
        &mut as_nobody(&copy.0, &[], &["run", "--no-summary", "--", "/bin/true"]),
        TIMEOUT,
    );
    let unprivileged = std::fs::read_to_string("/proc/sys/vm/unprivileged_userfaultfd")
        .is_ok_and(|v| v.trim() == "1");
    let device_open = std::fs::metadata("/dev/userfaultfd")
        .is_ok_and(|m| m.permissions().mode() & 0o006 == 0o006);
    if !unprivileged && !device_open {
        // This machine's default: the user cannot have a userfaultfd, and each way to one is a
        // ✗ line with its fix.
        assert_eq!(doctor.0, 1, "{}{}", doctor.1, doctor.2);
        let checks = checks_of(&doctor.1, doctor.0);
        for way in &CHECKS[3..6] {
            if Path::new("/dev/userfaultfd").exists() || !way.contains("/dev/") {
                assert!(checks.contains(&('✗', way.to_string())), "{}", doctor.1);
            }
        }
        assert!(
            doctor
                .1
                .contains("fix: sudo sysctl -w vm.unprivileged_userfaultfd=1")
        );
        assert!(doctor.1.contains("fix: sudo chmod 0666 /dev/userfaultfd"));
        assert!(doctor.1.contains(" run -- PROGRAM"));
        // Scan mode needs no userfaultfd: the verdict says it is there to use.
        assert!(doctor.1.contains("`run --faults scan`"), "{}", doctor.1);
    }
    // Attaching to a process of another user needs CAP_SYS_PTRACE, whatever Yama says.
    let attach = doctor.1.lines().find(|l| l.contains(" attach: "));
    assert!(
        attach.is_some_and(|l| l.contains("CAP_SYS_PTRACE")),
        "{}",
        doctor.1
    );
    assert_agree(doctor, run);
}

/// An unprivileged user given `CAP_SYS_PTRACE` as an ambient capability (so that the traced
/// program keeps it across exec, as root's programs have it): ready, and `run` follows faults.
#[test]
fn doctor_as_an_unprivileged_user_with_cap_sys_ptrace_says_ready() {
    if !can_become_nobody() {
        return;
    }
    let copy = WorldCopy::new();
    let caps = ["--inh-caps=+sys_ptrace", "--ambient-caps=+sys_ptrace"];
    let doctor = run_within(&mut as_nobody(&copy.0, &caps, &["doctor"]), TIMEOUT);
    assert_eq!(doctor.0, 0, "{}{}", doctor.1, doctor.2);
    assert!(
        checks_of(&doctor.1, 0).contains(&('✓', "userfaultfd: CAP_SYS_PTRACE".into())),
        "{}",
        doctor.1
    );
    let run = run_within(
        &mut as_nobody(&copy.0, &caps, &["run", "--no-summary", "--", "/bin/true"]),
        TIMEOUT,
    );
    assert_agree(doctor, run);
}

/// The fix `chmod 0666 /dev/userfaultfd`, applied to a device file of this test's own in a mount
/// namespace of its own (the machine's stays as it is): the unprivileged user is then ready, and
/// `run` follows faults through `/dev/userfaultfd`.
#[test]
fn doctor_as_an_unprivileged_user_with_dev_userfaultfd_says_ready() {
    if !can_become_nobody() || !installed("unshare") {
        return;
    }
    let device = std::fs::read_to_string("/proc/misc")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_suffix(" userfaultfd")?.trim().parse::<u32>().ok());
    let (Some(minor), true) = (device, Path::new("/dev/userfaultfd").exists()) else {
        return skip("no /dev/userfaultfd (Linux 6.1 or later)");
    };
    let copy = WorldCopy::new();
    let dir = scratch("doctor-dev");
    std::fs::create_dir_all(&dir).unwrap();
    let outcome = |args: &str| {
        // In a private mount namespace: a tmpfs (device files work there), a node of the misc
        // device open to everyone, bound over /dev/userfaultfd.
        let script = format!(
            "set -e; mount -t tmpfs none {dir}; mknod -m 0666 {dir}/uffd c 10 {minor}; \
             mount --bind {dir}/uffd /dev/userfaultfd; \
             exec setpriv --reuid=65534 --regid=65534 --clear-groups -- {copy} {args}",
            dir = dir.display(),
            copy = copy.0.display(),
        );
        run_within(
            Command::new("unshare")
                .args(["--mount", "--propagation", "private", "sh", "-c", &script])
                .current_dir("/"),
            TIMEOUT,
        )
    };
    let doctor = outcome("doctor");
    let run = outcome("run --no-summary -- /bin/true");
    std::fs::remove_dir(&dir).ok();
    assert_eq!(doctor.0, 0, "{}{}", doctor.1, doctor.2);
    assert!(
        checks_of(&doctor.1, 0).contains(&('✓', "userfaultfd: /dev/userfaultfd".into())),
        "{}",
        doctor.1
    );
    assert_agree(doctor, run);
}
