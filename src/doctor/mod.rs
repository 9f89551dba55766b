//! `mevi-actors doctor`: whether `run` can follow first touches on this machine and, where it
//! cannot, the command that changes that. One line per thing the tracer needs or uses. The
//! verdict is a rehearsal of `run` on `/bin/true` (`kernel::rehearsal`), so it is what `run` will meet;
//! the lines before it say why.

mod checks;

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use self::checks::*;
use crate::kernel::rehearsal::{self, Stage};

/// How a line reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// There, as `run` needs it.
    Ok,
    /// Missing, and `run` needs it: the line names the fix.
    Missing,
    /// Said for information, or not needed here.
    Note,
}

impl Mark {
    fn symbol(self) -> &'static str {
        match self {
            Mark::Ok => "✓",
            Mark::Missing => "✗",
            Mark::Note => "-",
        }
    }
}

/// One thing checked.
#[derive(Clone, Debug)]
pub struct Check {
    pub mark: Mark,
    /// What is checked, e.g. `ptrace`.
    pub what: String,
    /// What was found.
    pub found: String,
    /// The command that fixes it (every `Missing` line has one).
    pub fix: Option<String>,
    /// What works without it.
    pub without: Option<&'static str>,
}

impl Check {
    fn new(mark: Mark, what: impl Into<String>, found: impl Into<String>) -> Self {
        Self {
            mark,
            what: what.into(),
            found: found.into(),
            fix: None,
            without: None,
        }
    }

    fn fix(mut self, fix: impl Into<String>, without: &'static str) -> Self {
        self.fix = Some(fix.into());
        self.without = Some(without);
        self
    }
}

/// What `run` will do here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It follows first touches.
    Ready,
    /// It traces mappings with `--no-faults`, and cannot follow first touches.
    MappingsOnly,
    /// It cannot trace at all.
    Nothing,
}

/// Every check and the verdict.
#[derive(Clone, Debug)]
pub struct Report {
    pub checks: Vec<Check>,
    pub verdict: Verdict,
}

impl Report {
    /// 0 when `run` will follow first touches, 1 otherwise.
    pub fn exit_status(&self) -> i32 {
        match self.verdict {
            Verdict::Ready => 0,
            Verdict::MappingsOnly | Verdict::Nothing => 1,
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for check in &self.checks {
            writeln!(f, "{} {}: {}", check.mark.symbol(), check.what, check.found)?;
            if let Some(fix) = &check.fix {
                writeln!(f, "    fix: {fix}")?;
            }
            if let Some(without) = check.without {
                writeln!(f, "    without it: {without}")?;
            }
        }
        let verdict = match self.verdict {
            Verdict::Ready => "ready: `mevi-actors run` will follow first touches here",
            Verdict::MappingsOnly => {
                "not ready: `mevi-actors run` cannot follow first touches here; `run --faults \
                 scan` follows pages by page-table scans, and `run --no-faults` traces mappings \
                 only"
            }
            Verdict::Nothing => "not ready: `mevi-actors run` cannot trace here at all",
        };
        writeln!(f, "verdict: {verdict} (exit {})", self.exit_status())
    }
}

/// This process's credentials and confinement, from `/proc/self/status`.
struct Credentials {
    euid: u32,
    effective: u64,
    bounding: u64,
    inheritable: u64,
    ambient: u64,
    /// `Seccomp:`: 0 none, 1 strict, 2 filters; None when the kernel has no seccomp.
    seccomp: Option<u32>,
    seccomp_filters: u32,
    user_namespace: Option<u64>,
    pid_namespace: Option<u64>,
}

impl Credentials {
    fn of_this_process() -> Self {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                .map(str::trim)
        };
        let caps = |key| {
            field(key)
                .and_then(|hex| u64::from_str_radix(hex, 16).ok())
                .unwrap_or(0)
        };
        let namespace = |name: &str| {
            std::fs::metadata(format!("/proc/self/ns/{name}"))
                .ok()
                .map(|m| m.ino())
        };
        Self {
            // Real, effective, saved, filesystem.
            euid: field("Uid")
                .and_then(|ids| ids.split_whitespace().nth(1)?.parse().ok())
                .unwrap_or(u32::MAX),
            effective: caps("CapEff"),
            bounding: caps("CapBnd"),
            inheritable: caps("CapInh"),
            ambient: caps("CapAmb"),
            seccomp: field("Seccomp").and_then(|n| n.parse().ok()),
            seccomp_filters: field("Seccomp_filters")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
            user_namespace: namespace("user"),
            pid_namespace: namespace("pid"),
        }
    }

    /// The capabilities a program without file capabilities has once this process has exec'd
    /// it, as the traced program has: root's are the bounding set (and inheritable ones), anyone
    /// else's only the ambient set (capabilities(7), "Transformation of capabilities during
    /// execve()").
    fn after_exec(&self) -> u64 {
        if self.euid == 0 {
            self.bounding | self.inheritable
        } else {
            self.ambient
        }
    }

    fn in_initial_user_namespace(&self) -> bool {
        self.user_namespace
            .is_none_or(|ino| ino == INITIAL_USER_NAMESPACE)
    }

    fn who(&self) -> String {
        match self.euid {
            0 => "root".into(),
            uid => format!("uid {uid}"),
        }
    }
}

/// Examines this machine, as the user running `doctor`.
pub fn examine() -> Report {
    let me = Credentials::of_this_process();
    // A plain program, as a user's is (our own executable may carry file capabilities that a
    // user's program would not), by its absolute path: a `true` first in PATH could be anything.
    // It is never let run: killed at its exec.
    let program = ["/bin/true", "/usr/bin/true"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("/bin/true"));
    let rehearsed = rehearsal::rehearse(&program);
    let container = container();

    let mut checks = vec![kernel(), ptrace(&me), seccomp(&me)];
    checks.extend(userfaultfd(&me));
    let verdict = match &rehearsed {
        Ok(()) => Verdict::Ready,
        Err(f) if f.stage == Stage::Trace => Verdict::Nothing,
        Err(_) => Verdict::MappingsOnly,
    };
    let rehearsal = rehearsal_check(&program, &rehearsed, &checks, container.as_deref());
    checks.push(rehearsal);
    checks.extend([
        pagemap_scan(),
        attach(&me),
        thp(),
        perf_event_paranoid(),
        fault_records(),
        namespaces(&me, container.as_deref()),
    ]);
    Report { checks, verdict }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traced_program_keeps_roots_bounding_set_and_anyone_elses_ambient_set() {
        let mut me = Credentials::of_this_process();
        me.bounding = CAP_SYS_PTRACE | CAP_SYS_ADMIN;
        me.inheritable = 0;
        me.ambient = 0;
        me.euid = 0;
        assert_eq!(me.after_exec(), CAP_SYS_PTRACE | CAP_SYS_ADMIN);
        me.euid = 65534;
        assert_eq!(me.after_exec(), 0);
        me.ambient = CAP_SYS_PTRACE;
        assert_eq!(me.after_exec(), CAP_SYS_PTRACE);
    }

    #[test]
    fn a_missing_line_is_followed_by_its_fix_and_what_works_without_it() {
        let report = Report {
            checks: vec![
                Check::new(Mark::Ok, "kernel", "Linux 6.18"),
                Check::new(Mark::Missing, "userfaultfd: x", "refused").fix("sudo true", "less"),
                Check::new(Mark::Note, "container", "none"),
            ],
            verdict: Verdict::MappingsOnly,
        };
        assert_eq!(report.exit_status(), 1);
        let text = report.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[..5],
            [
                "✓ kernel: Linux 6.18",
                "✗ userfaultfd: x: refused",
                "    fix: sudo true",
                "    without it: less",
                "- container: none",
            ]
        );
        assert!(lines[5].starts_with("verdict: not ready") && lines[5].ends_with("(exit 1)"));
    }
}
