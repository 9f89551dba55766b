//! What `/proc` says about a process: its mappings, its page tables (pagemap), its argv.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::time::Instant;

use linux_raw_sys::general::{page_region, pm_scan_arg};

/// A sysctl's value (`kernel.perf_event_paranoid`), None when it does not exist here.
pub fn sysctl(name: &str) -> Option<String> {
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    text(path).ok().map(|v| v.trim().to_string())
}

/// A mapping's protection and sharing: the four letters of its `/proc/PID/maps` line
/// (`rw-p`), or the flags `PROCMAP_QUERY` gives.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Prot(u8);

impl Prot {
    pub const NONE: Prot = Prot(0);
    pub const READ: Prot = Prot(1);
    pub const WRITE: Prot = Prot(1 << 1);
    pub const EXEC: Prot = Prot(1 << 2);
    /// `MAP_SHARED` (`s`, not `p`): not a protection, but the same line's fourth letter.
    pub const SHARED: Prot = Prot(1 << 3);

    pub const fn union(self, other: Prot) -> Prot {
        Prot(self.0 | other.0)
    }

    /// Whether every flag of `other` is set here.
    pub const fn contains(self, other: Prot) -> bool {
        self.0 & other.0 == other.0
    }

    pub const fn is_shared(self) -> bool {
        self.contains(Prot::SHARED)
    }

    /// The protection as the stream writes it, `"rw-"`: three letters, without the sharing.
    pub fn rwx(self) -> &'static str {
        const LETTERS: [&str; 8] = ["---", "r--", "-w-", "rw-", "--x", "r-x", "-wx", "rwx"];
        LETTERS[usize::from(self.0 & 0b111)]
    }

    /// The permissions field of a maps line: `r` or `-`, `w` or `-`, `x` or `-`, `s` or `p`.
    fn from_maps_field(field: &[u8]) -> Option<Prot> {
        let [r, w, x, s] = field else {
            return None;
        };
        let flag = |letter: u8, set: u8, flag: Prot| match letter {
            b'-' | b'p' => Some(Prot::NONE),
            l if l == set => Some(flag),
            _ => None,
        };
        Some(
            flag(*r, b'r', Prot::READ)?
                | flag(*w, b'w', Prot::WRITE)?
                | flag(*x, b'x', Prot::EXEC)?
                | flag(*s, b's', Prot::SHARED)?,
        )
    }
}

impl std::ops::BitOr for Prot {
    type Output = Prot;

    fn bitor(self, other: Prot) -> Prot {
        self.union(other)
    }
}

/// As the maps file writes it: `rw-p`.
impl std::fmt::Debug for Prot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sharing = if self.is_shared() { "s" } else { "p" };
        write!(f, "{}{sharing}", self.rwx())
    }
}

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MapsEntry {
    pub start: u64,
    pub end: u64,
    pub prot: Prot,
    /// The offset in the file of the mapping's first byte.
    pub offset: u64,
    /// The file's device, as `major:minor` in hex (with `inode`, which file it is).
    pub dev: String,
    pub inode: u64,
    /// Empty for anonymous memory; `[heap]`, `[stack]`, `[vdso]`, `[anon:NAME]` or a file's
    /// path otherwise, as the kernel writes it: bytes, which need not be UTF-8.
    pub path: OsString,
}

impl MapsEntry {
    /// Shared memory (not a file's pages): shared anonymous, `/dev/zero`, memfd, POSIX and
    /// SysV shared memory.
    pub fn is_shared_memory(&self) -> bool {
        let path = self.path.as_bytes();
        path.starts_with(b"[anon_shmem:")
            || (self.prot.is_shared()
                && (self.inode == 0
                    || path.starts_with(b"/dev/zero")
                    || path.starts_with(b"/memfd:")
                    || path.starts_with(b"/dev/shm/")
                    || path.starts_with(b"/SYSV")))
    }

    /// Private anonymous memory (with heap, stacks, and mappings named with
    /// `PR_SET_VMA_ANON_NAME`): what userfaultfd can follow for us.
    pub fn is_private_anon(&self) -> bool {
        private_anon(self.prot, self.inode, self.path.as_bytes())
    }

    /// Whether the path begins with `prefix` (bytes: `[vdso`, `/memfd:`).
    pub fn path_starts_with(&self, prefix: &str) -> bool {
        self.path.as_bytes().starts_with(prefix.as_bytes())
    }
}

fn private_anon(prot: Prot, inode: u64, path: &[u8]) -> bool {
    !prot.is_shared()
        && inode == 0
        && (matches!(path, b"" | b"[heap]" | b"[stack]") || path.starts_with(b"[anon:"))
}

/// A line of `/proc/PID/maps`, in the bytes read: the one reader of the file's lines.
struct MapsLine<'a> {
    start: u64,
    end: u64,
    prot: Prot,
    offset: u64,
    dev: &'a str,
    inode: u64,
    path: &'a [u8],
}

impl MapsLine<'_> {
    /// `start-end perms offset dev inode path`; None for a line that is not one (the path
    /// may hold spaces: it is the rest of the line, after the padding).
    fn parse(line: &[u8]) -> Option<MapsLine<'_>> {
        let mut fields = line.splitn(6, |&b| b == b' ');
        let mut text = || std::str::from_utf8(fields.next()?).ok();
        let (start, end) = text()?.split_once('-')?;
        let perms = text()?;
        let offset = u64::from_str_radix(text()?, 16).ok()?;
        let dev = text()?;
        let inode = text()?.parse().ok()?;
        let path = fields.next().unwrap_or(b"").trim_ascii_start();
        Some(MapsLine {
            start: u64::from_str_radix(start, 16).ok()?,
            end: u64::from_str_radix(end, 16).ok()?,
            prot: Prot::from_maps_field(perms.as_bytes())?,
            offset,
            dev,
            inode,
            path,
        })
    }

    fn entry(&self) -> MapsEntry {
        MapsEntry {
            start: self.start,
            end: self.end,
            prot: self.prot,
            offset: self.offset,
            dev: self.dev.to_string(),
            inode: self.inode,
            path: OsStr::from_bytes(self.path).to_os_string(),
        }
    }
}

/// The lines of a maps file, as read.
fn maps_lines(bytes: &[u8]) -> impl Iterator<Item = MapsLine<'_>> {
    bytes.split(|&b| b == b'\n').filter_map(MapsLine::parse)
}

/// A file of /proc as text. What a program names (its threads' names in `status` and `stat`, a
/// cgroup's path) need not be UTF-8: read lossily, never refused whole.
pub fn text(path: impl AsRef<std::path::Path>) -> io::Result<String> {
    let bytes = small_file(path)?;
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// The bytes of a small file of /proc (a process's `stat`, `status`, `cmdline`, `comm`), in two
/// reads: the file says its size is 0, so `fs::read` (and `read_to_end` on a `File`) asks its
/// size (`statx`) for nothing and then reads 32, 32, 64, 128, 256 bytes at a time, six reads
/// for a `stat`.
fn small_file(path: impl AsRef<std::path::Path>) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = File::open(path)?;
    let mut bytes = vec![0u8; 4096];
    let mut filled = 0;
    loop {
        if filled == bytes.len() {
            bytes.resize(2 * filled, 0);
        }
        match file.read(&mut bytes[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    bytes.truncate(filled);
    Ok(bytes)
}

/// The mappings of a maps file's bytes.
pub fn parse_maps(bytes: &[u8]) -> Vec<MapsEntry> {
    maps_lines(bytes).map(|m| m.entry()).collect()
}

/// The mappings of `/proc/PID/maps`. A path is bytes (a file's name need not be UTF-8).
pub fn read_maps(pid: i32) -> io::Result<Vec<MapsEntry>> {
    read_maps_of(&open_maps(pid)?)
}

/// The mappings of an open maps file (`vmas::Vmas` keeps one open), read from its start.
pub fn read_maps_of(file: &File) -> io::Result<Vec<MapsEntry>> {
    Ok(parse_maps(&read_from_start(file)?))
}

/// `/proc/PID/maps`, open: read it with [`read_maps_of`].
pub fn open_maps(pid: i32) -> io::Result<File> {
    File::open(format!("/proc/{pid}/maps"))
}

/// The whole of a file of /proc, by reads at offsets from 0: the file may be shared (kept open
/// and read again), and no read moves its offset.
fn read_from_start(file: &File) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read_at(&mut buf, bytes.len() as u64)?;
        if n == 0 {
            return Ok(bytes);
        }
        bytes.extend_from_slice(&buf[..n]);
    }
}

/// The private anonymous mappings of `/proc/PID/maps` (`MapsEntry::is_private_anon`), in
/// address order, and how many mappings there are: what a check reads of every mapping, without
/// an entry made of each line.
pub fn read_private_anon(pid: i32) -> io::Result<(usize, Vec<Range<u64>>)> {
    Ok(private_anon_ranges(&read_from_start(&open_maps(pid)?)?))
}

fn private_anon_ranges(bytes: &[u8]) -> (usize, Vec<Range<u64>>) {
    let mut count = 0;
    let mut anon = Vec::new();
    for m in maps_lines(bytes) {
        count += 1;
        if private_anon(m.prot, m.inode, m.path) {
            anon.push(m.start..m.end);
        }
    }
    (count, anon)
}

/// argv from `/proc/PID/cmdline`.
pub fn cmdline(pid: i32) -> Vec<String> {
    small_file(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A thread's name (`comm`, at most 15 bytes), from `/proc/PID/task/TID/comm`: what
/// `prctl(PR_SET_NAME)` and `pthread_setname_np` set. None once the thread is reaped.
pub fn comm(pid: i32, tid: i32) -> Option<String> {
    let raw = small_file(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
    let name = raw.strip_suffix(b"\n").unwrap_or(&raw);
    Some(String::from_utf8_lossy(name).into_owned())
}

pub fn exe(pid: i32) -> String {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Whether a process runs a 32-bit program (`ELFCLASS32` in its executable's header): its
/// syscalls are another ABI's, which the tracer does not decode or inject into.
pub fn runs_32_bit(pid: i32) -> bool {
    use std::io::Read;
    let mut head = [0u8; 5];
    std::fs::File::open(format!("/proc/{pid}/exe"))
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head[..4] == b"\x7fELF" && head[4] == 1)
}

/// The thread group of a thread, from `/proc/TID/status`.
pub fn tgid(tid: i32) -> Option<i32> {
    status_number(tid, "Tgid:")
}

/// A thread's id in its own (innermost) PID namespace: the last number of `NSpid:` in
/// `/proc/TID/status`. The userfaultfd names a faulting thread by this id.
pub fn innermost_tid(tid: i32) -> Option<i32> {
    let status = text(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .next_back()?
        .parse()
        .ok()
}

/// The map a JIT writes of the code it made (`perf-PID.map` in the process's `/tmp`: node's
/// `--perf-basic-prof`, a JVM's perf map agent, python's `-X perf`), opened through the
/// process's own root, PID as the process knows itself (its innermost `NStgid`). None when
/// the process writes none.
pub fn open_jit_map(tid: i32) -> Option<std::fs::File> {
    let status = text(format!("/proc/{tid}/status")).ok()?;
    let pid: i32 = status
        .lines()
        .find_map(|l| l.strip_prefix("NStgid:"))?
        .split_whitespace()
        .next_back()?
        .parse()
        .ok()?;
    std::fs::File::open(format!("/proc/{tid}/root/tmp/perf-{pid}.map")).ok()
}

/// Whether a process is in another PID namespace than mevi-actors (its `/proc/PID/ns/pid` names
/// another one): its threads' ids there differ from ours. False when it cannot be read.
pub fn in_another_pid_namespace(pid: i32) -> bool {
    static OURS: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    let ours = OURS.get_or_init(|| std::fs::read_link("/proc/self/ns/pid").ok());
    match (std::fs::read_link(format!("/proc/{pid}/ns/pid")), ours) {
        (Ok(theirs), Some(ours)) => theirs != *ours,
        _ => false,
    }
}

/// How much of a process's memory is locked (`VmLck` of `/proc/PID/status`), in bytes.
pub fn locked_bytes(pid: i32) -> Option<u64> {
    status_number::<u64>(pid, "VmLck:").map(|kib| kib * 1024)
}

/// The parent process of a process, from `/proc/PID/status`.
pub fn parent(pid: i32) -> Option<i32> {
    status_number(pid, "PPid:")
}

/// How many seccomp filters a thread runs under (`Seccomp_filters`, Linux 5.9).
pub fn seccomp_filters(tid: i32) -> Option<u64> {
    status_number(tid, "Seccomp_filters:")
}

/// The number after `key` in `/proc/PID/status` (its first word: sizes are followed by `kB`).
fn status_number<T: std::str::FromStr>(pid: i32, key: &str) -> Option<T> {
    let status = text(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Where a thread is, for a message about a thread that would not stop: its state letter from
/// `/proc/TID/stat`, its syscall from `/proc/TID/syscall` and the kernel function it sleeps in
/// (`wchan`), e.g. `S in handle_userfault, syscall 25`.
pub fn whereabouts(tid: i32) -> String {
    let state = text(format!("/proc/{tid}/stat"))
        .ok()
        .and_then(|stat| Some(stat_fields(&stat)?.next()?.to_string()))
        .unwrap_or_else(|| "?".into());
    let wchan = text(format!("/proc/{tid}/wchan")).unwrap_or_default();
    let syscall = text(format!("/proc/{tid}/syscall")).unwrap_or_default();
    let syscall = syscall.split_whitespace().next().unwrap_or("?");
    let wchan = if wchan.is_empty() || wchan == "0" {
        "-"
    } else {
        wchan.trim()
    };
    format!("{state} in {wchan}, syscall {syscall}")
}

/// `PF_IO_WORKER` and `PF_EXITING` of `include/linux/sched.h` (since Linux 5.12), in the flags
/// word that `/proc/PID/task/TID/stat` shows as field 9 (docs/kernel-facts.md).
const PF_IO_WORKER: u32 = 0x10;
const PF_EXITING: u32 = 0x4;
/// SIGKILL's bit in the `SigPnd` mask of `/proc/PID/task/TID/status`.
const SIGKILL_PENDING: u64 = 1 << (libc::SIGKILL - 1);

/// A kernel thread of a process's io_uring (`iou-wrk-*`, `iou-sqp-*`): a member of its thread
/// group that ptrace cannot stop, and that touches the program's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoWorker {
    pub tid: i32,
    /// It will touch no memory of the program's any more, or is about to stop doing so: it is
    /// exiting, or has SIGKILL pending (its thread group is exiting: it finishes the work item
    /// it is in, then exits).
    pub ending: bool,
}

/// The io_uring workers of a process, by the kernel's `PF_IO_WORKER` flag, not by name (a thread
/// can call itself `iou-wrk-1`). `known` threads (the traced ones) are not looked at. A thread
/// that ends while it is read is left out: it is gone.
pub fn io_workers(pid: i32, known: impl Fn(i32) -> bool) -> io::Result<Vec<IoWorker>> {
    let mut workers = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let Some(tid) = entry?.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        if known(tid) {
            continue;
        }
        let Ok(stat) = text(format!("/proc/{pid}/task/{tid}/stat")) else {
            continue;
        };
        let Some(mut fields) = stat_fields(&stat) else {
            continue;
        };
        let state = fields.next().unwrap_or("?");
        let flags: u32 = fields.nth(9 - 4).and_then(|f| f.parse().ok()).unwrap_or(0);
        if flags & PF_IO_WORKER == 0 {
            continue;
        }
        let ending = flags & PF_EXITING != 0
            || matches!(state, "Z" | "X" | "x")
            || pending_signals(pid, tid).is_some_and(|p| p & SIGKILL_PENDING != 0);
        workers.push(IoWorker { tid, ending });
    }
    Ok(workers)
}

/// The thread's own pending signals (`SigPnd` of its status, a hex mask).
fn pending_signals(pid: i32, tid: i32) -> Option<u64> {
    let status = text(format!("/proc/{pid}/task/{tid}/status")).ok()?;
    let mask = status.lines().find_map(|l| l.strip_prefix("SigPnd:"))?;
    u64::from_str_radix(mask.trim(), 16).ok()
}

/// The soft limit on the main stack's size; None when unlimited or unreadable. Asked with
/// `prlimit` (a microsecond, against about 12 for the file), else read from `Max stack size` in
/// `/proc/PID/limits`.
pub fn stack_limit(pid: i32) -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: with a null new limit, prlimit only writes the current one into `limit`, a
    // struct of the right type that lives through the call.
    if unsafe { libc::prlimit(pid, libc::RLIMIT_STACK, std::ptr::null(), &mut limit) } == 0 {
        return (limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur);
    }
    let limits = text(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max stack size"))?;
    line["Max stack size".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Where the heap starts (`start_brk`, field 47 of `/proc/PID/stat`).
pub fn start_brk(pid: i32) -> Option<u64> {
    stat_field(pid, 47)
}

/// Whether the machine has swap turned on: the kernel's total of swap, which is what the swap
/// areas listed under `/proc/swaps`' header add up to. Asked at every space's last exit stop, so
/// by `sysinfo(2)`, one call, not a file opened and read. (An area being swapped off still
/// counts there for the pages left in it, as `/proc/swaps` still lists it.)
pub fn swap_configured() -> bool {
    nix::sys::sysinfo::sysinfo().is_ok_and(|info| info.swap_total() > 0)
}

/// A counter of the machine's memory management (`/proc/vmstat`), by its name.
pub fn vmstat(key: &str) -> Option<u64> {
    keyed_number(&text("/proc/vmstat").ok()?, key)
}

/// The number after `key` on a "key value" line of `text` (`/proc/vmstat`, a memory cgroup's
/// `memory.events`).
pub fn keyed_number(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// The minor faults of a whole process, its dead threads' included (`min_flt`, field 10 of
/// `/proc/PID/stat`): every fault served without I/O, by the kernel's own count.
pub fn minor_faults(pid: i32) -> Option<u64> {
    stat_field(pid, 10)
}

/// Whether a thread is runnable, how often and how long it has been on a CPU, and how many page
/// faults it has completed: `R` in `/proc/PID/task/TID/stat` (on a CPU, or waiting for one)
/// and its minor and major faults (a fault is counted once it is done, a userfaultfd one when
/// the thread has retried it after its wake), and `schedstat`'s time on a CPU (brought up to
/// date at each tick and switch) and count of times it was put on one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunState {
    pub runnable: bool,
    pub faults: u64,
    pub on_cpu_ns: u64,
    pub switched_in: u64,
}

/// The [`RunState`] of thread `tid` of process `pid` (its own figures: `/proc/TID/stat` would
/// count the faults of its whole process); None once it is gone, or without
/// `CONFIG_SCHED_INFO` (the file then says `0 0 0`).
pub fn run_state(pid: i32, tid: i32) -> Option<RunState> {
    // Lossily: the command name may hold any bytes.
    let stat = text(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    let rest: Vec<&str> = stat_fields(&stat)?.collect();
    let field = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    let runnable = rest.first()? == &"R";
    let faults = field(10)? + field(12)?;
    if !runnable {
        // Nothing more is asked of a thread that is not runnable.
        return Some(RunState {
            runnable,
            faults,
            on_cpu_ns: 0,
            switched_in: 0,
        });
    }
    let sched = text(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
    let mut fields = sched.split_whitespace().map(|f| f.parse::<u64>().ok());
    let on_cpu_ns = fields.next()??;
    let switched_in = fields.nth(1)??;
    (switched_in > 0).then_some(RunState {
        runnable,
        faults,
        on_cpu_ns,
        switched_in,
    })
}

/// Where the kernel last took a thread off a CPU, as far as page faults go
/// (`/proc/PID/task/TID/stack`); None if it does not say (the file needs `CAP_SYS_ADMIN` and
/// `CONFIG_STACKTRACE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffCpu {
    /// Inside a page fault (a userfaultfd wait, or the fault's retry after it).
    InFault,
    /// In a ptrace stop (or let go from one and not run since).
    InPtraceStop,
    /// Elsewhere.
    Elsewhere,
    /// It is on a CPU now (the kernel walks no running thread's stack: the file is empty).
    OnCpu,
}

/// Where the kernel last took thread `tid` of process `pid` off a CPU ([`OffCpu`]).
pub fn off_cpu(pid: i32, tid: i32) -> Option<OffCpu> {
    let stack = text(format!("/proc/{pid}/task/{tid}/stack")).ok()?;
    Some(
        if stack.contains("exc_page_fault") || stack.contains("handle_userfault") {
            OffCpu::InFault
        } else if stack.contains("ptrace_stop") {
            OffCpu::InPtraceStop
        } else if stack.trim().is_empty() {
            OffCpu::OnCpu
        } else {
            OffCpu::Elsewhere
        },
    )
}

/// Field `n` (from 1, as proc(5) numbers them) of `/proc/PID/stat`, as a number.
fn stat_field(pid: i32, n: usize) -> Option<u64> {
    let stat = text(format!("/proc/{pid}/stat")).ok()?;
    stat_fields(&stat)?
        .nth(n.checked_sub(3)?)
        .and_then(|v| v.parse().ok())
}

/// The fields of a `stat` file (`/proc/PID/stat`, `/proc/PID/task/TID/stat`) from the third on,
/// the state letter first: after the command name (field 2), which may hold spaces and
/// parentheses, so counted from its last `)`. None for a file cut short.
fn stat_fields(stat: &str) -> Option<std::str::Split<'_, char>> {
    Some(stat.get(stat.rfind(')')? + 2..)?.split(' '))
}

/// A process's memory by the kernel's own count (`/proc/PID/status`), in bytes: its resident
/// anonymous, file-backed and shared memory, and what it has in swap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RssFigures {
    pub anon: u64,
    pub file: u64,
    pub shmem: u64,
    pub swap: u64,
}

/// `RssAnon`, `RssFile`, `RssShmem` and `VmSwap` of a process; None once it is gone (or has no
/// memory left: a zombie's status has none of them).
pub fn rss(pid: i32) -> Option<RssFigures> {
    let status = text(format!("/proc/{pid}/status")).ok()?;
    let kib = |key| status_bytes(&status, key);
    Some(RssFigures {
        anon: kib("RssAnon:")?,
        file: kib("RssFile:")?,
        shmem: kib("RssShmem:")?,
        swap: kib("VmSwap:")?,
    })
}

/// The path behind a file descriptor of a process.
/// `VmHWM` of /proc/self/status, in bytes: the peak resident set of this process's memory.
pub fn own_peak_rss() -> Option<u64> {
    let status = text("/proc/self/status").ok()?;
    status_bytes(&status, "VmHWM:")
}

/// A size in a `/proc/PID/status` text (`key` with its colon: `"VmHWM:"`), given in kB there,
/// in bytes.
fn status_bytes(status: &str, key: &str) -> Option<u64> {
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(key))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

pub fn fd_path(pid: i32, fd: i32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

// `PAGEMAP_SCAN`'s categories, of `<linux/fs.h>` (Linux 6.7).
const PAGE_IS_PRESENT: u64 = linux_raw_sys::general::PAGE_IS_PRESENT as u64;
const PAGE_IS_SWAPPED: u64 = linux_raw_sys::general::PAGE_IS_SWAPPED as u64;
const PAGE_IS_PFNZERO: u64 = linux_raw_sys::general::PAGE_IS_PFNZERO as u64;
const PAGE_IS_HUGE: u64 = linux_raw_sys::general::PAGE_IS_HUGE as u64;
const PAGE_IS_GUARD: u64 = linux_raw_sys::general::PAGE_IS_GUARD as u64;
/// pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst).
const PM_PRESENT: u64 = 1 << 63;
const PM_SWAPPED: u64 = 1 << 62;
/// A guard region's marker (Linux 6.15), which also shows as swapped.
const PM_GUARD_REGION: u64 = 1 << 58;
/// The page is mapped by this process only (its frame's map count is one).
const PM_MMAP_EXCLUSIVE: u64 = 1 << 56;
/// A non-present entry's frame field: its swap type (5 bits) and offset, shown to
/// `CAP_SYS_ADMIN` only (zero otherwise).
const PM_FRAME: u64 = (1 << 55) - 1;
/// Swap types from here up are the kernel's own entries, not swap areas (`MAX_SWAPFILES` is 32
/// less the hwpoison, migration, device-private and marker types: 24 with them all): pages in
/// memory being moved (or on a device), but for the last.
const FIRST_SPECIAL_SWAP_TYPE: u64 = 24;
/// The type of a PTE marker (a guard region's, or userfaultfd's write-protect marker of a page
/// never made): no page at all.
const PTE_MARKER_SWAP_TYPE: u64 = 31;
/// Ranges closer than this are read by one `PAGEMAP_SCAN` (`Pagemap::populated_each`): a hole
/// between them costs nothing to walk, and another mapping's present pages there (at most 256)
/// about what a call of its own would. A kernel without the scan reads at most 2 KiB of entries
/// more for each.
const JOIN_GAP: u64 = 1 << 20;
// `PAGEMAP_SCAN`, `_IOWR('f', 16, struct pm_scan_arg)`: linux-raw-sys has the structure, not the
// request.
nix::ioctl_readwrite!(pagemap_scan, b'f', 16, pm_scan_arg);

/// A run of populated pages of one kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PopulatedRun {
    pub range: Range<u64>,
    /// Mapped to the shared zero page (read, never written).
    pub zero: bool,
    /// Mapped by huge pages (PMDs).
    pub huge: bool,
    /// Swapped out: a swap entry in the page tables, not in memory.
    pub swapped: bool,
}

/// An open `/proc/PID/pagemap`. It pins the mm it was opened on, so it keeps answering for that
/// address space (and only that one) across the opener's exec or exit; once the mm is gone it
/// reports nothing present.
#[derive(Debug)]
pub struct Pagemap {
    file: File,
    page_size: u64,
    scan: std::sync::atomic::AtomicBool,
    /// Whether `PAGEMAP_SCAN` knows guard regions (Linux 6.14): their markers are swap entries,
    /// which it also calls SWAPPED, though no page is there.
    scan_knows_guards: std::sync::atomic::AtomicBool,
}

impl Pagemap {
    pub fn open(pid: i32, page_size: u64) -> io::Result<Self> {
        Ok(Self {
            file: File::open(format!("/proc/{pid}/pagemap"))?,
            page_size,
            scan: std::sync::atomic::AtomicBool::new(true),
            scan_knows_guards: std::sync::atomic::AtomicBool::new(true),
        })
    }

    /// Whether the kernel answers `PAGEMAP_SCAN` here (Linux 6.7), asked about one page; without
    /// it, pages are read from pagemap one entry at a time.
    pub fn scans(&self) -> io::Result<bool> {
        self.populated(0..self.page_size)?;
        Ok(self.scan.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// The runs of populated pages inside `range` (page-aligned), in address order: present in
    /// memory or swapped out. A swapped-out page still exists (swapping it in raises no
    /// userfaultfd fault); only a page that is neither has to be touched again to exist.
    pub fn populated_runs(&self, range: Range<u64>) -> io::Result<Vec<Range<u64>>> {
        let mut runs: Vec<Range<u64>> = Vec::new();
        for run in self.populated(range)? {
            match runs.last_mut() {
                Some(last) if last.end == run.range.start => last.end = run.range.end,
                _ => runs.push(run.range),
            }
        }
        Ok(runs)
    }

    /// The populated pages inside `range` (page-aligned), in address order, in runs of one kind:
    /// swapped out or present; the shared zero page or not, mapped by a huge page (a PMD) or
    /// not. A kernel without `PAGEMAP_SCAN` tells only the first: every present run is then given
    /// as written, small pages.
    pub fn populated(&self, range: Range<u64>) -> io::Result<Vec<PopulatedRun>> {
        use std::sync::atomic::Ordering::Relaxed;
        // Whole pages (the kernel refuses an unaligned start with EINVAL, which would read as a
        // kernel without the scan), below the top of user memory.
        let range = below_user_top(super::whole_pages(range, self.page_size));
        if range.is_empty() {
            return Ok(Vec::new());
        }
        while self.scan.load(Relaxed) {
            let guards = self.scan_knows_guards.load(Relaxed);
            match self.scan_populated(range.clone(), guards) {
                Ok(runs) => return self.settled(runs),
                // EINVAL for the guard category: a kernel before 6.14; without it then.
                Err(e) if guards && e.raw_os_error() == Some(libc::EINVAL) => {
                    self.scan_knows_guards.store(false, Relaxed)
                }
                // ENOTTY/EINVAL: a kernel without PAGEMAP_SCAN; read the entries instead.
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTTY | libc::EINVAL)) => {
                    self.scan.store(false, Relaxed)
                }
                Err(e) => return Err(e),
            }
        }
        let runs = self.read_entries(range)?;
        self.settled(runs)
    }

    /// `runs` with the pages that only look swapped out given as present: a page the kernel is
    /// moving (compaction, NUMA balancing, `move_pages`) is a migration entry for an instant,
    /// which pagemap and `PAGEMAP_SCAN` call swapped, though the page is in memory. Its swap
    /// type tells (shown to `CAP_SYS_ADMIN`); without it, on a machine with no swap area, no
    /// page can be in swap.
    fn settled(&self, runs: Vec<PopulatedRun>) -> io::Result<Vec<PopulatedRun>> {
        if !runs.iter().any(|r| r.swapped) {
            return Ok(runs);
        }
        let areas = swap_areas();
        let swap_type = |entry: u64| (entry & PM_FRAME & 0x1f, (entry & PM_FRAME) >> 5);
        let in_swap = |entry: u64| match swap_type(entry) {
            // Not shown (offset 0 is a swap area's header, never a page's).
            (0, 0) => areas > 0,
            (kind, _) => kind < FIRST_SPECIAL_SWAP_TYPE || kind < areas,
        };
        let marker = |entry: u64| {
            entry & PM_GUARD_REGION != 0
                || (entry & PM_PRESENT == 0 && swap_type(entry).0 == PTE_MARKER_SWAP_TYPE)
        };
        let mut out: Vec<PopulatedRun> = Vec::with_capacity(runs.len());
        for run in runs {
            if !run.swapped {
                push_joined(&mut out, run);
                continue;
            }
            self.entries(run.range, |page, entry| {
                if entry & (PM_PRESENT | PM_SWAPPED) == 0 || marker(entry) {
                    return;
                }
                push_joined(
                    &mut out,
                    PopulatedRun {
                        range: page..page + self.page_size,
                        zero: false,
                        huge: false,
                        // Swapped in since, or moved on: as it is now.
                        swapped: entry & PM_PRESENT == 0 && in_swap(entry),
                    },
                );
            })?;
        }
        Ok(out)
    }

    /// The populated pages of each of `ranges` (in address order, apart), as `populated` gives
    /// them for each alone, with when each was read. Ranges less than `JOIN_GAP` apart are read
    /// with one scan, what lies between left out: thousands of small mappings cost a few calls,
    /// not one each (and the kernel's search for each one's first mapping).
    pub fn populated_each(
        &self,
        ranges: &[Range<u64>],
    ) -> Vec<(Instant, io::Result<Vec<PopulatedRun>>)> {
        let ranges: Vec<Range<u64>> = ranges
            .iter()
            .map(|r| super::whole_pages(r.clone(), self.page_size))
            .collect();
        let mut out = Vec::with_capacity(ranges.len());
        let mut first = 0;
        while first < ranges.len() {
            let mut end = first + 1;
            while end < ranges.len()
                && ranges[end].start.saturating_sub(ranges[end - 1].end) < JOIN_GAP
            {
                end += 1;
            }
            let read_at = Instant::now();
            let span = ranges[first].start..ranges[end - 1].end.max(ranges[first].start);
            match self.populated(span) {
                Ok(runs) => {
                    let mut next = 0;
                    for range in &ranges[first..end] {
                        while next < runs.len() && runs[next].range.end <= range.start {
                            next += 1;
                        }
                        let within = runs[next..]
                            .iter()
                            .take_while(|run| run.range.start < range.end)
                            .map(|run| PopulatedRun {
                                range: run.range.start.max(range.start)
                                    ..run.range.end.min(range.end),
                                ..run.clone()
                            })
                            .filter(|run| !run.range.is_empty())
                            .collect();
                        out.push((read_at, Ok(within)));
                    }
                }
                Err(e) => {
                    for _ in first..end {
                        let again = match e.raw_os_error() {
                            Some(code) => io::Error::from_raw_os_error(code),
                            None => io::Error::new(e.kind(), e.to_string()),
                        };
                        out.push((read_at, Err(again)));
                    }
                }
            }
            first = end;
        }
        out
    }

    fn scan_populated(&self, range: Range<u64>, guards: bool) -> io::Result<Vec<PopulatedRun>> {
        let mut runs: Vec<PopulatedRun> = Vec::new();
        let no_region = page_region {
            start: 0,
            end: 0,
            categories: 0,
        };
        let mut regions = vec![no_region; 512];
        let mut start = range.start;
        while start < range.end {
            let mut arg = pm_scan_arg {
                size: std::mem::size_of::<pm_scan_arg>() as u64,
                flags: 0,
                start,
                end: range.end,
                walk_end: 0,
                vec: regions.as_mut_ptr() as u64,
                vec_len: regions.len() as u64,
                max_pages: 0,
                category_anyof_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
                // Not a guard region's marker (the category inverted, then required).
                category_inverted: if guards { PAGE_IS_GUARD } else { 0 },
                category_mask: if guards { PAGE_IS_GUARD } else { 0 },
                return_mask: PAGE_IS_PRESENT | PAGE_IS_SWAPPED | PAGE_IS_PFNZERO | PAGE_IS_HUGE,
            };
            // SAFETY: `arg` describes `regions`, a live buffer of `vec_len` page_region structs
            // that the kernel fills; it writes nothing else of ours.
            let n = unsafe { pagemap_scan(self.file.as_raw_fd(), &mut arg) }
                .map_err(io::Error::from)? as usize;
            for r in &regions[..n.min(regions.len())] {
                let run = PopulatedRun {
                    range: r.start..r.end,
                    zero: r.categories & PAGE_IS_PFNZERO != 0,
                    huge: r.categories & PAGE_IS_HUGE != 0,
                    swapped: r.categories & PAGE_IS_SWAPPED != 0,
                };
                push_joined(&mut runs, run);
            }
            if arg.walk_end <= start {
                break;
            }
            start = arg.walk_end;
        }
        Ok(runs)
    }

    /// Whether the page table entry of `page` holds anything: a page (present or swapped), or a
    /// marker (a guard region's). `UFFDIO_COPY` refuses the first with `EEXIST` and replaces
    /// the second (docs/kernel-facts.md), so a fill looks here first where a marker may be.
    /// One entry's read; false once the mm is gone (the fill then finds it gone too).
    pub fn occupied(&self, page: u64) -> io::Result<bool> {
        let mut entry = [0u8; 8];
        let n = self.file.read_at(&mut entry, page / self.page_size * 8)?;
        Ok(n == 8 && u64::from_ne_bytes(entry) & (PM_PRESENT | PM_SWAPPED) != 0)
    }

    /// The pages of `range` present and mapped by this process alone (`PM_MMAP_EXCLUSIVE`: a
    /// frame of its own, no other process maps), in runs, in address order. A page of a fork's
    /// copy-on-write is not, until a write copies it or every other process lets it go.
    pub fn exclusive(&self, range: Range<u64>) -> io::Result<Vec<Range<u64>>> {
        let range = super::whole_pages(range, self.page_size);
        let mut runs: Vec<Range<u64>> = Vec::new();
        self.entries(range, |page, entry| {
            if entry & (PM_PRESENT | PM_MMAP_EXCLUSIVE) != PM_PRESENT | PM_MMAP_EXCLUSIVE {
                return;
            }
            match runs.last_mut() {
                Some(last) if last.end == page => last.end = page + self.page_size,
                _ => runs.push(page..page + self.page_size),
            }
        })?;
        Ok(runs)
    }

    /// The populated pages of `range`, read entry by entry (a kernel before `PAGEMAP_SCAN`).
    fn read_entries(&self, range: Range<u64>) -> io::Result<Vec<PopulatedRun>> {
        let mut runs: Vec<PopulatedRun> = Vec::new();
        self.entries(range, |page, entry| {
            if entry & (PM_PRESENT | PM_SWAPPED) != 0 && entry & PM_GUARD_REGION == 0 {
                let swapped = entry & PM_PRESENT == 0;
                match runs.last_mut() {
                    Some(last) if last.range.end == page && last.swapped == swapped => {
                        last.range.end = page + self.page_size
                    }
                    _ => runs.push(PopulatedRun {
                        range: page..page + self.page_size,
                        zero: false,
                        huge: false,
                        swapped,
                    }),
                }
            }
        })?;
        Ok(runs)
    }

    /// Calls `each` with every page of `range` (page-aligned) and its pagemap entry, in address
    /// order, reading 4096 entries at a time; up to where the file ends.
    fn entries(&self, range: Range<u64>, mut each: impl FnMut(u64, u64)) -> io::Result<()> {
        let pages = (range.end - range.start) / self.page_size;
        let mut buf = vec![0u8; 8 * pages.min(4096) as usize];
        let mut done = 0u64;
        while done < pages {
            let chunk = (pages - done).min(4096) as usize;
            let at = range.start + done * self.page_size;
            let n = self
                .file
                .read_at(&mut buf[..chunk * 8], at / self.page_size * 8)?;
            if n == 0 {
                break;
            }
            for (i, entry) in buf[..n].chunks_exact(8).enumerate() {
                let entry = u64::from_ne_bytes(entry.try_into().expect("8 bytes"));
                each(at + i as u64 * self.page_size, entry);
            }
            done += (n / 8) as u64;
        }
        Ok(())
    }
}

/// Adds `run` to `runs`, joined to the last one if it goes on from it and is of its kind.
fn push_joined(runs: &mut Vec<PopulatedRun>, run: PopulatedRun) {
    match runs.last_mut() {
        Some(last)
            if last.range.end == run.range.start
                && (last.zero, last.huge, last.swapped) == (run.zero, run.huge, run.swapped) =>
        {
            last.range.end = run.range.end
        }
        _ => runs.push(run),
    }
}

/// How many swap areas are in use (`/proc/swaps`, a line each under its heading).
fn swap_areas() -> u64 {
    text("/proc/swaps").map_or(0, |s| s.lines().skip(1).count() as u64)
}

/// Splits `range` into runs of one state each, given the present runs inside it.
pub fn split_by_presence(range: Range<u64>, present: &[Range<u64>]) -> Vec<(Range<u64>, bool)> {
    let mut out = Vec::new();
    let mut at = range.start;
    for p in present {
        let (s, e) = (p.start.max(range.start), p.end.min(range.end));
        if s >= e {
            continue;
        }
        if at < s {
            out.push((at..s, false));
        }
        out.push((s..e, true));
        at = e;
    }
    if at < range.end {
        out.push((at..range.end, false));
    }
    out
}

/// The end of user memory under 4-level page tables (x86_64's `TASK_SIZE`): the last page below
/// 2^47 is never mapped. `PAGEMAP_SCAN` refuses a range past it (EFAULT) and so does the pagemap
/// file; a stack at the very top (a program run without address randomization, as under gdb
/// or `setarch -R`) reads up to it.
const USER_TOP: u64 = (1 << 47) - 4096;

/// `range` cut at [`USER_TOP`]: what lies above it can hold no page. A range that starts above
/// it is left whole: with 5-level page tables (`la57`), a process that asks for addresses above
/// 2^47 gets them, and the kernel's limit is then higher.
fn below_user_top(range: Range<u64>) -> Range<u64> {
    if range.start < USER_TOP {
        range.start..range.end.min(USER_TOP)
    } else {
        range
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_file_is_read_past_a_name_of_parentheses_and_spaces() {
        // A thread names itself as it likes: ") R 1 (" would fool a split at its first ')'.
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let named = std::thread::Builder::new()
            .name(") R 1 (".into())
            .spawn(move || {
                tid_tx.send(nix::unistd::gettid().as_raw()).unwrap();
                let _ = done_rx.recv();
            })
            .unwrap();
        let tid = tid_rx.recv().unwrap();
        let me = std::process::id();
        let path = format!("/proc/{me}/task/{tid}/stat");
        // Asleep in its recv, by the kernel's account, once it has got there.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let stat = loop {
            let stat = text(&path).unwrap();
            if stat_fields(&stat).unwrap().next() == Some("S") {
                break stat;
            }
            assert!(std::time::Instant::now() < deadline, "never asleep: {stat}");
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        assert!(stat.contains("() R 1 ()"), "{stat}");
        // Field 4: the parent of the thread's process, ours.
        let ppid = stat_fields(&stat).unwrap().nth(1).unwrap();
        assert_eq!(
            ppid,
            std::os::unix::process::parent_id().to_string(),
            "{stat}"
        );
        done_tx.send(()).unwrap();
        named.join().unwrap();
        // A file cut right after the name has no fields to give.
        assert!(stat_fields("12 (x)").is_none());
    }

    #[test]
    fn the_stack_limit_asked_is_the_one_proc_shows() {
        let me = std::process::id() as i32;
        let limits = std::fs::read_to_string(format!("/proc/{me}/limits")).unwrap();
        let line = limits
            .lines()
            .find(|l| l.starts_with("Max stack size"))
            .unwrap();
        let shown = line["Max stack size".len()..]
            .split_whitespace()
            .next()
            .unwrap();
        assert_eq!(stack_limit(me), shown.parse().ok(), "{line}");
    }

    #[test]
    fn maps_lines_parse_with_and_without_paths() {
        let text =
            b"55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]\n\
                    7f0000000000-7f0000001000 r-xp 00001000 fd:01 1234   /usr/lib/libc.so.6\n\
                    7f0000002000-7f0000003000 rw-s 00000000 00:01 5      /dev/zero (deleted)\n\
                    7f0000004000-7f0000005000 ---p 00000000 00:00 0 \n";
        let m = parse_maps(text);
        assert_eq!(m.len(), 4);
        assert!(m[0].is_private_anon());
        assert_eq!(m[0].path, "[heap]");
        assert_eq!(m[0].prot, Prot::READ | Prot::WRITE);
        assert!(!m[1].is_shared_memory());
        assert_eq!(m[1].path, "/usr/lib/libc.so.6");
        assert_eq!(
            (m[1].prot.rwx(), format!("{:?}", m[1].prot)),
            ("r-x", "r-xp".into())
        );
        assert!(m[2].is_shared_memory());
        assert!(!m[2].is_private_anon());
        assert_eq!(m[2].prot, Prot::READ | Prot::WRITE | Prot::SHARED);
        assert_eq!(
            (m[2].prot.rwx(), format!("{:?}", m[2].prot)),
            ("rw-", "rw-s".into())
        );
        assert!(m[3].is_private_anon());
        assert_eq!(m[3].prot, Prot::NONE);
        assert_eq!(m[3].prot.rwx(), "---");
    }

    /// A path is the rest of its line, byte for byte: spaces, and bytes that are not UTF-8
    /// (Latin-1 0xe9), kept; a line that is not a mapping's is left out, not the file.
    #[test]
    fn a_path_is_kept_as_the_bytes_of_its_line() {
        let text = b"7f0000000000-7f0000001000 r--s 00000000 fd:01 77   /tmp/caf\xe9 au lait\n\
                     not a mapping\n\
                     7f0000002000-7f0000003000 rw?p 00000000 00:00 0\n\
                     7f0000004000-7f0000005000 rw-p 00000000 00:00 0      [anon:\xff]\n";
        let m = parse_maps(text);
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(m[0].path.as_bytes(), b"/tmp/caf\xe9 au lait");
        assert_eq!(
            (m[0].start, m[0].inode, m[0].dev.as_str()),
            (0x7f00_0000_0000, 77, "fd:01")
        );
        assert!(m[1].is_private_anon());
        let (count, anon) = private_anon_ranges(text);
        assert_eq!(
            (count, anon.len(), anon.first()),
            (2, 1, Some(&(m[1].start..m[1].end)))
        );
    }

    /// What a check reads of the mappings is what the entries say.
    #[test]
    fn the_private_anonymous_ranges_are_the_entries_ones() {
        let text =
            b"55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]\n\
                    7f0000000000-7f0000001000 r-xp 00001000 fd:01 1234   /usr/lib/libc.so.6\n\
                    7f0000002000-7f0000003000 rw-s 00000000 00:01 5      /dev/zero (deleted)\n\
                    7f0000004000-7f0000005000 ---p 00000000 00:00 0 \n\
                    7f0000006000-7f0000007000 rw-p 00000000 00:00 0      [anon:arena]\n\
                    7f0000008000-7f0000009000 rw-s 00000000 00:01 9      /memfd:pool (deleted)\n\
                    7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0      [stack]\n";
        let want: Vec<Range<u64>> = parse_maps(text)
            .iter()
            .filter(|m| m.is_private_anon())
            .map(|m| m.start..m.end)
            .collect();
        assert_eq!(want.len(), 4);
        assert_eq!(private_anon_ranges(text), (7, want));
    }

    #[test]
    fn our_own_pagemap_sees_a_touched_page() {
        let ps = 4096u64;
        let mut v = vec![0u8; 16 * 4096];
        let base = (v.as_mut_ptr() as u64).div_ceil(ps) * ps;
        // SAFETY: base..base+ps lies inside `v`.
        unsafe { std::ptr::write_volatile(base as *mut u8, 1) };
        let pm = Pagemap::open(std::process::id() as i32, ps).unwrap();
        let runs = pm.populated_runs(base..base + ps).unwrap();
        assert_eq!(runs, vec![base..base + ps]);
        let entries = pm.read_entries(base..base + ps).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(
            (entries[0].range.clone(), entries[0].swapped),
            (runs[0].clone(), false)
        );
    }

    /// Ranges read together give what each read alone gives: runs cut at their ends, nothing of
    /// what lies between.
    #[test]
    fn ranges_read_together_are_as_each_alone() {
        let ps = 4096u64;
        let len = 32 * ps as usize;
        // SAFETY: a fresh private anonymous mapping of ours, written only below its end.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let base = base as u64;
        for page in [1, 2, 3, 5, 9, 10, 11, 12, 20, 30] {
            // SAFETY: inside the mapping above.
            unsafe { std::ptr::write_volatile((base + page * ps) as *mut u8, 1) };
        }
        let at = |pages: Range<u64>| base + pages.start * ps..base + pages.end * ps;
        let ranges = [at(0..3), at(4..5), at(5..6), at(10..12), at(14..31)];
        let pm = Pagemap::open(std::process::id() as i32, ps).unwrap();
        let together = pm.populated_each(&ranges);
        assert_eq!(together.len(), ranges.len());
        for (range, (_, runs)) in ranges.iter().zip(together) {
            assert_eq!(
                runs.unwrap(),
                pm.populated(range.clone()).unwrap(),
                "{range:x?}"
            );
        }
        // SAFETY: the mapping made above, used no more.
        unsafe { libc::munmap(base as *mut libc::c_void, len) };
    }

    #[test]
    fn keyed_numbers_are_whole_keys() {
        let text = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(keyed_number(text, "oom_kill"), Some(3));
        assert_eq!(keyed_number(text, "oom"), None);
    }

    #[test]
    fn split_covers_the_range() {
        let s = split_by_presence(0..10, &[2..4, 6..7]);
        assert_eq!(
            s,
            vec![
                (0..2, false),
                (2..4, true),
                (4..6, false),
                (6..7, true),
                (7..10, false)
            ]
        );
    }

    // --- issue 11: PAGEMAP_SCAN's definitions from linux-raw-sys ---

    /// The request and categories are the ones written out by hand before: the structures'
    /// sizes make the request number (`_IOWR('f', 16, 96 bytes)`, 0xc0606610), and the kernel
    /// fills `page_region`s of 24 bytes.
    #[test]
    fn pagemap_scan_definitions_are_unchanged() {
        use std::mem::size_of;
        assert_eq!(size_of::<pm_scan_arg>(), 96);
        assert_eq!(
            nix::request_code_readwrite!(b'f', 16, size_of::<pm_scan_arg>()),
            0xc060_6610
        );
        assert_eq!(size_of::<page_region>(), 24);
        assert_eq!(
            [
                PAGE_IS_PRESENT,
                PAGE_IS_SWAPPED,
                PAGE_IS_PFNZERO,
                PAGE_IS_HUGE,
                PAGE_IS_GUARD
            ],
            [1 << 3, 1 << 4, 1 << 5, 1 << 6, 1 << 8]
        );
    }

    #[test]
    fn a_range_past_the_top_of_user_memory_is_cut_there() {
        let top = (1u64 << 47) - 4096;
        assert_eq!(below_user_top(top - 8192..top + 4096), top - 8192..top);
        assert_eq!(below_user_top(0x1000..0x3000), 0x1000..0x3000);
        // Above 2^47 (5-level page tables): left whole.
        assert_eq!(
            below_user_top(1 << 48..(1 << 48) + 4096),
            1 << 48..(1 << 48) + 4096
        );
    }
}
