//! The checks of `doctor`, one function per line of its report: what is examined, and the fix
//! for each thing missing.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

use super::{Check, Credentials, Mark};
use crate::kernel::procfs::{Pagemap, sysctl};
use crate::kernel::rehearsal::{self, Stage};
use crate::kernel::thp::ThpPolicy;
use crate::kernel::uffd;

pub(super) use crate::kernel::attach::CAP_SYS_PTRACE;
pub(super) const CAP_SYS_ADMIN: u64 = 1 << 21;
/// The inodes of the initial PID and user namespaces (`PROC_PID_INIT_INO`, `PROC_USER_INIT_INO`
/// of `<linux/proc_ns.h>`).
pub(super) const INITIAL_PID_NAMESPACE: u64 = 0xEFFF_FFFC;
pub(super) const INITIAL_USER_NAMESPACE: u64 = 0xEFFF_FFFD;
/// The oldest kernel `run` works on: `pidfd_getfd` (5.6) takes the userfaultfd over.
pub(super) const OLDEST_KERNEL: (u32, u32) = (5, 6);

/// What `run --no-faults` still does, for the lines about the userfaultfd.
pub(super) const WITHOUT_FAULTS: &str = "`mevi-actors run --faults scan` follows pages by page-table \
                              scans instead (no userfaultfd; no thread per first touch), and \
                              `run --no-faults` traces mappings only";
/// What is left when nothing can be traced.
pub(super) const WITHOUT_TRACING: &str = "nothing can be traced here (not even with --no-faults); \
                               `mevi-actors replay` reads streams written elsewhere";

/// The command that runs mevi-actors as root, for a fix.
fn as_root_command() -> String {
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "mevi-actors".into());
    format!("sudo {exe} run -- PROGRAM")
}

pub(super) fn kernel() -> Check {
    // uname(2), not /proc/sys: a container may hide /proc/sys, never the syscall.
    let release = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_else(|_| "?".into());
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let version = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    let (major, minor) = OLDEST_KERNEL;
    let found = format!("Linux {release} on {}", std::env::consts::ARCH);
    if version >= OLDEST_KERNEL && std::env::consts::ARCH == "x86_64" {
        Check::new(
            Mark::Ok,
            "kernel",
            format!("{found} ({major}.{minor} or later on x86_64 is needed)"),
        )
    } else {
        Check::new(
            Mark::Missing,
            "kernel",
            format!(
                "{found}: mevi-actors needs Linux {major}.{minor} or later (pidfd_getfd), on \
                 x86_64"
            ),
        )
        .fix(
            format!("boot Linux {major}.{minor} or later on x86_64   # this one is {release}"),
            WITHOUT_TRACING,
        )
    }
}

pub(super) fn ptrace(me: &Credentials) -> Check {
    let what = "ptrace";
    let has_ptrace = me.effective & CAP_SYS_PTRACE != 0;
    match sysctl("kernel.yama.ptrace_scope").as_deref() {
        None => Check::new(
            Mark::Ok,
            what,
            "no Yama (kernel.yama.ptrace_scope absent): run traces its own child",
        ),
        Some(scope @ ("0" | "1")) => Check::new(
            Mark::Ok,
            what,
            format!("kernel.yama.ptrace_scope = {scope}: allows run to trace its own child"),
        ),
        Some("2") if has_ptrace => Check::new(
            Mark::Ok,
            what,
            "kernel.yama.ptrace_scope = 2: only CAP_SYS_PTRACE may trace; this process has it",
        ),
        Some("2") => Check::new(
            Mark::Missing,
            what,
            "kernel.yama.ptrace_scope = 2: only CAP_SYS_PTRACE may trace; this process lacks it",
        )
        .fix("sudo sysctl -w kernel.yama.ptrace_scope=1", WITHOUT_TRACING),
        Some(scope) => Check::new(
            Mark::Missing,
            what,
            format!(
                "kernel.yama.ptrace_scope = {scope}: no process may trace, and that cannot be \
                 undone until reboot"
            ),
        )
        .fix(
            "sudo reboot   # then keep kernel.yama.ptrace_scope at 1 or less",
            WITHOUT_TRACING,
        ),
    }
}

/// `attach -p`: who this process may attach to, by ptrace's rules and Yama's.
pub(super) fn attach(me: &Credentials) -> Check {
    let what = "attach";
    let has_ptrace = me.effective & CAP_SYS_PTRACE != 0;
    let scope = sysctl("kernel.yama.ptrace_scope");
    match (scope.as_deref(), has_ptrace) {
        (Some("3"), _) => Check::new(
            Mark::Note,
            what,
            "kernel.yama.ptrace_scope = 3: no running process can be attached to until reboot",
        ),
        (scope, true) => Check::new(
            Mark::Ok,
            what,
            format!(
                "this process has CAP_SYS_PTRACE: `attach -p PID` can follow any process (kernel.\
                 yama.ptrace_scope = {})",
                scope.unwrap_or("absent")
            ),
        ),
        (None | Some("0"), false) => Check::new(
            Mark::Ok,
            what,
            format!(
                "`attach -p PID` can follow the processes of {} (another user's needs root or \
                 CAP_SYS_PTRACE)",
                me.who()
            ),
        ),
        (Some(scope), false) => Check::new(
            Mark::Note,
            what,
            format!(
                "kernel.yama.ptrace_scope = {scope}: `attach -p PID` needs root or \
                 CAP_SYS_PTRACE (or `sudo sysctl -w kernel.yama.ptrace_scope=0` for your own \
                 processes)"
            ),
        ),
    }
}

pub(super) fn seccomp(me: &Credentials) -> Check {
    let what = "seccomp";
    let Some(mode) = me.seccomp else {
        return Check::new(
            Mark::Missing,
            what,
            "this kernel has no seccomp (no `Seccomp:` in /proc/self/status)",
        )
        .fix(
            "boot a kernel built with CONFIG_SECCOMP_FILTER",
            WITHOUT_TRACING,
        );
    };
    let actions = sysctl("kernel.seccomp.actions_avail");
    if let Some(actions) = &actions
        && !actions.split_whitespace().any(|a| a == "trace")
    {
        return Check::new(
            Mark::Missing,
            what,
            format!("filters cannot stop a syscall for the tracer (actions: {actions})"),
        )
        .fix(
            "boot a kernel built with CONFIG_SECCOMP_FILTER",
            WITHOUT_TRACING,
        );
    }
    let mut found = String::from(
        "filters that stop a syscall for the tracer (run's stops only the layout syscalls)",
    );
    if mode != 0 {
        found += &format!(
            "; this process is itself under {} filter(s), which the program inherits",
            me.seccomp_filters
        );
    }
    if me.effective & CAP_SYS_ADMIN == 0 {
        found += "; without CAP_SYS_ADMIN the filter comes with no_new_privs: setuid programs \
                  run without their privileges";
    }
    Check::new(Mark::Ok, what, found)
}

/// One way to a userfaultfd for the traced program.
struct Way {
    open: bool,
    what: &'static str,
    found: String,
    /// None when nothing can be changed here (the kernel lacks it).
    fix: Option<String>,
}

/// The three ways a traced program gets a userfaultfd that sees kernel-mode faults; any one is
/// enough. Each that is closed is ✗ (with its fix) only when all three are.
pub(super) fn userfaultfd(me: &Credentials) -> Vec<Check> {
    let ways = [by_capability(me), by_sysctl(), by_device(me)];
    let any = ways.iter().any(|way| way.open);
    let mut first = true;
    ways.into_iter()
        .map(|way| match (way.open, way.fix) {
            (true, _) => Check::new(Mark::Ok, way.what, way.found),
            (false, _) if any => {
                Check::new(Mark::Note, way.what, format!("{}; not needed", way.found))
            }
            (false, None) => Check::new(Mark::Note, way.what, way.found),
            (false, Some(fix)) => {
                let mut found = way.found;
                if std::mem::take(&mut first) {
                    found += "; any one of these three userfaultfd fixes is enough";
                }
                Check::new(Mark::Missing, way.what, found).fix(fix, WITHOUT_FAULTS)
            }
        })
        .collect()
}

fn by_capability(me: &Credentials) -> Way {
    let syscall = match uffd::syscall_permitted(0) {
        Ok(()) => "allowed".to_string(),
        Err(e) => e.to_string(),
    };
    let open = me.after_exec() & CAP_SYS_PTRACE != 0 && me.in_initial_user_namespace();
    let found = if !me.in_initial_user_namespace() {
        format!(
            "{} of a user namespace: its capabilities are not the host's, and userfaultfd(2) \
             asks the host's",
            me.who()
        )
    } else if open && me.euid == 0 {
        "a program run by root has it".into()
    } else if open {
        format!("a program run by {} has it (ambient)", me.who())
    } else if me.euid == 0 {
        "a program run by root here lacks it (not in the bounding set)".into()
    } else {
        format!("a program run by {} lacks it", me.who())
    };
    let fix = if me.euid == 0 {
        "docker run --cap-add SYS_PTRACE ...   # start the container with it".to_string()
    } else {
        as_root_command()
    };
    Way {
        open,
        what: "userfaultfd: CAP_SYS_PTRACE",
        found: format!("{found} (userfaultfd(2) in mevi-actors itself: {syscall})"),
        fix: Some(fix),
    }
}

fn by_sysctl() -> Way {
    let value = sysctl("vm.unprivileged_userfaultfd");
    let user_mode = match uffd::syscall_permitted(uffd::UFFD_USER_MODE_ONLY) {
        Ok(()) => "allowed".to_string(),
        Err(e) => e.to_string(),
    };
    let found = match value.as_deref() {
        Some("1") => "= 1: every user may create one".to_string(),
        Some(v) => format!(
            "= {v}: without CAP_SYS_PTRACE only descriptors limited to user-mode faults \
             (UFFD_USER_MODE_ONLY here: {user_mode}), which miss those taken inside system calls"
        ),
        None => "absent (Linux before 5.2): only CAP_SYS_PTRACE".to_string(),
    };
    Way {
        open: value.as_deref() == Some("1"),
        what: "userfaultfd: vm.unprivileged_userfaultfd",
        found,
        fix: value.is_some().then(|| {
            "sudo sysctl -w vm.unprivileged_userfaultfd=1   # every user; until reboot".to_string()
        }),
    }
}

fn by_device(me: &Credentials) -> Way {
    let what = "userfaultfd: /dev/userfaultfd";
    let meta = match std::fs::metadata("/dev/userfaultfd") {
        Ok(meta) => meta,
        Err(e) => {
            return Way {
                open: false,
                what,
                found: format!("{e} (Linux 6.1 or later has it)"),
                fix: None,
            };
        }
    };
    let file = format!(
        "{} uid {} gid {}",
        mode_string(&meta),
        meta.uid(),
        meta.gid()
    );
    let (open, found) = match uffd::device_permitted() {
        Ok(()) => (true, format!("{file}: usable by {}", me.who())),
        Err(e) => (false, format!("{file}: {e}")),
    };
    Way {
        open,
        what,
        found,
        fix: Some("sudo chmod 0666 /dev/userfaultfd   # every user; until reboot".to_string()),
    }
}

/// `crw-------`, as `ls -l` shows a device file's type and mode.
fn mode_string(meta: &std::fs::Metadata) -> String {
    let kind = if meta.file_type().is_char_device() {
        'c'
    } else {
        '?'
    };
    let mode = meta.permissions().mode();
    let bits: String = (0..9)
        .map(|i| {
            let on = mode & (0o400 >> i) != 0;
            match (on, i % 3) {
                (false, _) => '-',
                (true, 0) => 'r',
                (true, 1) => 'w',
                (true, _) => 'x',
            }
        })
        .collect();
    format!("{kind}{bits}")
}

/// The rehearsal's line: the verdict's ground. Its fix is that of the first ✗ line that explains
/// the failure, else what a container needs.
pub(super) fn rehearsal_check(
    program: &Path,
    rehearsed: &Result<(), rehearsal::Failed>,
    checks: &[Check],
    container: Option<&str>,
) -> Check {
    let what = "rehearsal";
    let failure = match rehearsed {
        Ok(()) => {
            return Check::new(
                Mark::Ok,
                what,
                format!(
                    "{} started as run starts a program (ptrace, seccomp filter) got a \
                     userfaultfd at its exec",
                    program.display()
                ),
            );
        }
        Err(f) => f,
    };
    let explains = |c: &&Check| {
        c.mark == Mark::Missing
            && match failure.stage {
                Stage::Trace => matches!(c.what.as_str(), "kernel" | "ptrace" | "seccomp"),
                Stage::Userfaultfd => c.what.starts_with("userfaultfd"),
                Stage::Inject | Stage::Handover | Stage::Handshake => c.what == "kernel",
            }
    };
    let fix = match (checks.iter().find(explains), container) {
        (Some(c), _) => c.fix.clone().unwrap_or_default(),
        (None, Some(_)) => {
            "docker run --cap-add SYS_PTRACE --security-opt seccomp=unconfined ...   \
                            # start the container so"
                .to_string()
        }
        (None, None) => "none known: please report this line".to_string(),
    };
    let without = match failure.stage {
        Stage::Trace => WITHOUT_TRACING,
        _ => WITHOUT_FAULTS,
    };
    Check::new(
        Mark::Missing,
        what,
        format!(
            "{} started as run starts a program: {failure}",
            program.display()
        ),
    )
    .fix(fix, without)
}

pub(super) fn pagemap_scan() -> Check {
    let what = "PAGEMAP_SCAN";
    let answer = Pagemap::open(std::process::id() as i32, crate::kernel::page_size())
        .and_then(|p| p.scans());
    match answer {
        Ok(true) => Check::new(
            Mark::Ok,
            what,
            "answered on /proc/self/pagemap (page-table scans, `run --faults scan` and checks \
             read runs of pages)",
        ),
        Ok(false) => Check::new(
            Mark::Note,
            what,
            "not in this kernel (Linux 6.7 or later): pages are read from pagemap one entry at \
             a time, slower, and without telling the zero page or huge pages apart",
        ),
        Err(e) => Check::new(Mark::Note, what, format!("/proc/self/pagemap: {e}")),
    }
}

pub(super) fn thp() -> Check {
    let policy = ThpPolicy::of_this_machine();
    let effect = match policy {
        ThpPolicy::Always => {
            "every private anonymous range but the stacks may get huge pages, so under --faults \
             uffd those are followed by page-table scans instead of faults (first touches seen at \
             the next scan); under --faults scan every range is"
        }
        ThpPolicy::Madvise => {
            "under --faults uffd, ranges advised MADV_HUGEPAGE are followed by page-table scans \
             instead of faults, the rest by faults; under --faults scan every range is"
        }
        ThpPolicy::Never => {
            "under --faults uffd every private anonymous range is followed by faults; under \
             --faults scan by page-table scans"
        }
    };
    Check::new(
        Mark::Note,
        "transparent huge pages",
        format!("{}: {effect}", policy.name()),
    )
}

/// `--touch-stacks` samples each thread's page faults with a perf event: tried on this thread.
pub(super) fn perf_event_paranoid() -> Check {
    use crate::kernel::perf::{FaultsSeen, OneFaultIn, TouchSampler};
    let level = sysctl("kernel.perf_event_paranoid");
    let level = level.as_deref().unwrap_or("absent");
    let me = nix::unistd::gettid().as_raw();
    let every = OneFaultIn::EveryNth(64);
    match TouchSampler::open(me, every, FaultsSeen::All) {
        Ok(_) => match crate::kernel::bpf::OneInN::load(64) {
            Ok(_) => Check::new(
                Mark::Ok,
                "kernel.perf_event_paranoid",
                format!("= {level}; page faults can be sampled, at random (--touch-stacks)"),
            ),
            Err(e) => Check::new(
                Mark::Note,
                "kernel.perf_event_paranoid",
                format!(
                    "= {level}; page faults can be sampled (--touch-stacks), every Nth rather \
                     than at random (the BPF program that draws them: {e}; it needs CAP_BPF and \
                     CAP_PERFMON)"
                ),
            ),
        },
        Err(_) if TouchSampler::open(me, every, FaultsSeen::UserOnly).is_ok() => Check::new(
            Mark::Note,
            "kernel.perf_event_paranoid",
            format!(
                "= {level}; user-mode page faults can be sampled (--touch-stacks), not those \
                 inside system calls (`sysctl kernel.perf_event_paranoid=1`, or CAP_PERFMON)"
            ),
        ),
        // Optional: `run` works without it.
        Err(e) => Check::new(
            Mark::Note,
            "kernel.perf_event_paranoid",
            format!(
                "= {level}; page faults cannot be sampled ({e}): --touch-stacks names no first \
                 touch (`sysctl kernel.perf_event_paranoid=1`, or CAP_PERFMON)"
            ),
        ),
    }
}

/// `--faults records` opens a ring of fault records per thread: tried on this thread.
pub(super) fn fault_records() -> Check {
    use crate::kernel::fault_records::{FaultsSeen, recordable};
    match recordable() {
        Ok(FaultsSeen::All) => Check::new(
            Mark::Ok,
            "fault records",
            "each thread's page faults can be recorded, inside system calls too (--faults \
             records; attach follows so by default)",
        ),
        Ok(FaultsSeen::UserOnly) => Check::new(
            Mark::Note,
            "fault records",
            "user-mode page faults can be recorded (--faults records), not those inside system \
             calls, whose pages are then found without their thread \
             (`sysctl kernel.perf_event_paranoid=1`, or CAP_PERFMON)",
        ),
        // Optional: the default mode does not need it.
        Err(e) => Check::new(
            Mark::Note,
            "fault records",
            format!(
                "page faults cannot be recorded ({e}): --faults records names no thread, and \
                 attach follows by scans only (`sysctl kernel.perf_event_paranoid=1`, or \
                 CAP_PERFMON)"
            ),
        ),
    }
}

/// What says this is a container, if anything does.
pub(super) fn container() -> Option<String> {
    let marker = |path: &str, name: &str| {
        Path::new(path)
            .exists()
            .then(|| format!("{path} exists ({name}?)"))
    };
    marker("/.dockerenv", "docker")
        .or_else(|| marker("/run/.containerenv", "podman"))
        .or_else(|| {
            // systemd's convention; readable by root only.
            let environ = std::fs::read("/proc/1/environ").ok()?;
            environ
                .split(|&b| b == 0)
                .find_map(|v| v.strip_prefix(b"container="))
                .map(|name| format!("{} (container= of pid 1)", String::from_utf8_lossy(name)))
        })
}

pub(super) fn namespaces(me: &Credentials, container: Option<&str>) -> Check {
    let pid = match me.pid_namespace {
        Some(INITIAL_PID_NAMESPACE) => "the initial PID namespace".to_string(),
        Some(_) => "a PID namespace of its own (the stream's pids are that namespace's)".into(),
        None => "PID namespace unknown".into(),
    };
    let user = if me.in_initial_user_namespace() {
        "the initial user namespace"
    } else {
        "a user namespace of its own"
    };
    let place = match container {
        Some(c) => c.to_string(),
        None => "no sign of one".into(),
    };
    Check::new(Mark::Note, "container", format!("{place}; {pid}; {user}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_file_mode_reads_as_ls_shows_it() {
        let null = std::fs::metadata("/dev/null").unwrap();
        assert_eq!(mode_string(&null), "crw-rw-rw-");
    }
}
