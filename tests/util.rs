//! The harness: builds the C workloads, runs the real binary on the real kernel, and reads both
//! the stream and the kernel truth each workload prints about itself.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mevi_actors::event::{Event, Line, ProcessSummary, RunTotals, SpaceId, VerifyTotals};
use mevi_actors::model::{AddressSpace, Replay};

pub const PAGE: u64 = 4096;
/// No traced run in this suite takes more than a few seconds; this only catches hangs.
pub const TIMEOUT: Duration = Duration::from_secs(120);

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_mevi-actors")
}

/// A fresh path for one test's files: tests run in parallel in one process.
pub fn scratch(name: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scratch");
    std::fs::create_dir_all(&dir).unwrap();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("{name}-{}-{n}", std::process::id()))
}

/// Compiles `tests/workloads/NAME.c` once per test run and returns the program's path.
pub fn workload(name: &str) -> PathBuf {
    try_workload(name, &["-O1", "-pthread"]).unwrap_or_else(|e| panic!("{e}"))
}

/// The workloads of the suite that print their own truth and touch memory of many kinds, with
/// their arguments: every way of following pages is checked on each.
pub const TRUTH_WORKLOADS: &[(&str, &[&str])] = &[
    ("one_thread", &[]),
    ("threads_region", &["8"]),
    ("thread_brk", &[]),
    ("malloc4", &[]),
    ("fork_touch", &[]),
    ("race", &["1"]),
    ("nocaps_fork", &[]),
    ("edges", &[]),
];

/// The variable naming the file a skipped test is recorded in (`.ci/run` sets it and counts).
const SKIPS_FILE_VAR: &str = "MEVI_TEST_SKIPS";

/// Something this test needs is missing here, so it does not run: the caller returns after this.
/// Under `CI=true` (as root, where .ci/install-deps installs everything) that fails the test with
/// `why`. Elsewhere the test passes as far as the harness knows, so the skip is recorded: a line
/// `TEST<tab>why` appended to the file `$MEVI_TEST_SKIPS` names, or, without one, said on stderr
/// past the harness's capture. `why` is short and the same for each test it stops ("chromium not
/// installed"): `.ci/run` counts the skips by it. Every skip in the suite comes through here.
pub fn skip(why: &str) {
    use std::io::Write;
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{why} (under CI=true a test does not skip)");
    }
    let test = std::thread::current()
        .name()
        .filter(|name| *name != "main")
        .unwrap_or("a test")
        .to_string();
    let why = why.replace(['\t', '\n'], " ");
    let line = format!("{test}\t{why}\n");
    match std::env::var_os(SKIPS_FILE_VAR) {
        Some(file) => {
            // One write of the whole line, appended: tests skip in parallel.
            let mut skips = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&file)
                .unwrap_or_else(|e| panic!("${SKIPS_FILE_VAR} {file:?}: {e}"));
            skips.write_all(line.as_bytes()).unwrap();
        }
        None => {
            // Not `eprintln!`: the harness keeps that to itself for a test that passes.
            let said = format!("skipped: {test}: {why}\n");
            std::io::stderr().write_all(said.as_bytes()).ok();
        }
    }
}

impl crate::browser::Browser {
    /// A browser for a test: None, the test skipped (`skip`), when there is no Chromium; any
    /// other failure to start it fails the test. (Here, not in browser.rs, which the benches
    /// share.)
    pub fn for_test() -> Option<Self> {
        if !crate::browser::binary_exists() {
            eprintln!(
                "no browser at {} (set MEVI_CHROMIUM to one; .ci/install-deps installs Debian's)",
                crate::browser::binary()
            );
            skip("chromium not installed");
            return None;
        }
        Some(Self::launch().unwrap_or_else(|e| panic!("{e}")))
    }
}

/// A workload that needs more than a bare C compiler (`needs`: a sanitizer's runtime, 32-bit
/// code): None, the test skipped (`skip`), when it cannot be built.
pub fn workload_needing(needs: &str, name: &str, flags: &[&str]) -> Option<PathBuf> {
    match try_workload(name, flags) {
        Ok(program) => Some(program),
        Err(e) => {
            eprintln!("{e}");
            skip(&format!("{needs} not available"));
            None
        }
    }
}

fn try_workload(name: &str, flags: &[&str]) -> Result<PathBuf, String> {
    static BUILT: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let built = built.get_or_insert_with(HashMap::new);
    if let Some(p) = built.get(name) {
        return Ok(p.clone());
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/workloads/{name}.c"));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("workloads");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(name);
    let status = Command::new("cc")
        .args(flags)
        .args(["-Wall", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .map_err(|e| format!("running cc: {e}"))?;
    if !status.success() {
        return Err(format!(
            "cc {} failed for {}",
            flags.join(" "),
            src.display()
        ));
    }
    built.insert(name.to_string(), out.clone());
    Ok(out)
}

/// Runs `cmd`, a `run -o FILE` of mevi-actors that must exit 0, and reads the stream it wrote to
/// `file`, which stays on disk for `replay`, `export` and the other readers.
pub fn traced_to(cmd: &mut Command, file: &Path) -> Traced {
    let (status, stdout, stderr) = run_bounded(cmd);
    // Traced::read takes (and removes) its file: give it a copy.
    let copy = file.with_extension("read");
    std::fs::copy(file, &copy).unwrap_or_else(|e| panic!("no stream ({e}):\n{stderr}"));
    let traced = Traced::read(&copy, status, stdout, stderr);
    assert_eq!(traced.status, 0, "{}", traced.stderr);
    traced
}

/// Runs a command to completion, failing the test if it outlives TIMEOUT.
pub fn run_bounded(cmd: &mut Command) -> (i32, String, String) {
    run_within(cmd, TIMEOUT)
}

/// Runs a command to completion, failing the test if it outlives `timeout`; a traced run (or any
/// other) holds the machine shared while it runs (`MachineHold`).
pub fn run_within(cmd: &mut Command, timeout: Duration) -> (i32, String, String) {
    let _hold = MachineHold::shared();
    run_held_within(cmd, timeout)
}

/// `run_within` for a caller that holds the machine for the run.
fn run_held_within(cmd: &mut Command, timeout: Duration) -> (i32, String, String) {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawning mevi-actors");
    finish_within(child, timeout, &format!("{cmd:?}"))
}

/// Waits for a started child, reading whatever of its stdout and stderr is piped to us (and not
/// taken already), failing the test if it outlives `timeout`: its status (128+N for signal N),
/// stdout and stderr.
pub fn finish_within(
    mut child: std::process::Child,
    timeout: Duration,
    what: &str,
) -> (i32, String, String) {
    let read_all = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut pipe) = pipe {
                pipe.read_to_string(&mut s).ok();
            }
            s
        })
    };
    let out = read_all(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = read_all(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            panic!("{what} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    (code, out.join().unwrap(), err.join().unwrap())
}

/// A run started on a thread of its own, holding the machine shared from this thread until
/// joined.
pub struct Background {
    run: std::thread::JoinHandle<(i32, String, String)>,
    _hold: MachineHold,
}

impl Background {
    /// Its outcome, as `run_bounded`'s.
    pub fn join(self) -> std::thread::Result<(i32, String, String)> {
        self.run.join()
    }
}

/// Starts `mevi-actors run -o FILE -- program` on its own thread (in a process group of its own
/// with `own_group`, as a shell's job would be); joining gives `run_bounded`'s outcome.
pub fn run_in_background(file: &Path, program: &[&str], own_group: bool) -> Background {
    run_in_background_with(&[], file, program, own_group)
}

/// `run_in_background`, with `flags` for `run`.
pub fn run_in_background_with(
    flags: &[&str],
    file: &Path,
    program: &[&str],
    own_group: bool,
) -> Background {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(bin());
    cmd.arg("run")
        .args(flags)
        .arg("-o")
        .arg(file)
        .arg("--")
        .args(program);
    if own_group {
        cmd.process_group(0);
        // A job control shell's foreground job gets SIGINT and SIGQUIT at their default action,
        // whatever the shell inherited (a test run started in the background ignores them).
        // SAFETY: signal(2) is async-signal-safe, and nothing else runs between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                libc::signal(libc::SIGQUIT, libc::SIG_DFL);
                Ok(())
            });
        }
    }
    // Held here, where the test waits for it: the run's own thread holds nothing.
    let hold = MachineHold::shared();
    Background {
        run: std::thread::spawn(move || run_held_within(&mut cmd, TIMEOUT)),
        _hold: hold,
    }
}

/// The whole lines a run writing `file` has written so far (none while there is no file).
pub fn lines_so_far(file: &Path) -> Vec<Line> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let whole = text.rfind('\n').map_or("", |end| &text[..=end]);
    parse_stream(whole)
}

/// Waits until a run writing `file` has written a line of kind `ev`; the complete lines so far.
pub fn wait_for_line(file: &Path, ev: &str) -> Vec<Line> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let lines = lines_so_far(file);
        if lines
            .iter()
            .any(|l| serde_json::to_value(&l.event).unwrap()["ev"] == ev)
        {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "no {ev} line in {}",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pid of the first `exec` line: the traced program's.
pub fn exec_pid(lines: &[Line]) -> i32 {
    lines
        .iter()
        .find_map(|l| match l.event {
            Event::Exec { pid, .. } => Some(pid),
            _ => None,
        })
        .unwrap()
}

/// One traced run: its exit status, the stream, the program's stdout (its truth lines), stderr.
pub struct Traced {
    pub status: i32,
    pub lines: Vec<Line>,
    pub stdout: String,
    pub stderr: String,
    pub replay: Replay,
    /// Each space as it was when its last process left it (a space ends then, and replays
    /// empty from there), or at the end of the stream for one still in use.
    pub at_end: BTreeMap<SpaceId, AddressSpace>,
}

/// `mevi-actors run [flags] -o FILE -- program args`.
pub fn trace<S: AsRef<OsStr>>(flags: &[&str], program: &[S]) -> Traced {
    trace_within(flags, program, TIMEOUT)
}

/// `trace`, failing the test if the run outlives `timeout`.
pub fn trace_within<S: AsRef<OsStr>>(flags: &[&str], program: &[S], timeout: Duration) -> Traced {
    trace_with_env(&[], flags, program, timeout)
}

/// `trace_within`, with `env` set for mevi-actors (and so for the program).
pub fn trace_with_env<S: AsRef<OsStr>>(
    env: &[(&str, &str)],
    flags: &[&str],
    program: &[S],
    timeout: Duration,
) -> Traced {
    let file = scratch("stream");
    let mut cmd = Command::new(bin());
    cmd.envs(env.iter().copied());
    cmd.arg("run").args(flags).arg("-o").arg(&file).arg("--");
    cmd.args(program);
    let (status, stdout, stderr) = run_within(&mut cmd, timeout);
    Traced::read(&file, status, stdout, stderr)
}

/// Replays `lines`, keeping each space as it was just before its last process left it (its
/// `exit`, or its `exec` into another space), or at the end for a space still in use.
pub fn replay_keeping_ends(lines: &[Line]) -> (Replay, BTreeMap<SpaceId, AddressSpace>) {
    let mut replay = Replay::new();
    let mut at_end = BTreeMap::new();
    for line in lines {
        let leaving = match line.event {
            Event::Exit { pid, .. } | Event::Exec { pid, .. } => {
                replay.process_space.get(&pid).copied()
            }
            _ => None,
        };
        if let Some(space) = leaving
            && let Some(s) = replay.spaces.get(&space)
        {
            at_end.insert(space, s.clone());
        }
        replay.apply_line(line);
    }
    for &space in replay.process_space.values() {
        if let Some(s) = replay.spaces.get(&space) {
            at_end.insert(space, s.clone());
        }
    }
    for (&space, s) in &replay.spaces {
        at_end.entry(space).or_insert_with(|| s.clone());
    }
    (replay, at_end)
}

/// The fields of a `stat` file of /proc (`/proc/PID/stat`, `/proc/PID/task/TID/stat`) from the
/// third on, the state letter first: after the command name, which a program may fill with
/// spaces and parentheses, so counted from its last `)`. None once the task is gone.
pub fn proc_stat_fields(path: impl AsRef<Path>) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(path).ok()?;
    let fields = stat.get(stat.rfind(')')? + 1..)?;
    Some(fields.split_whitespace().map(str::to_string).collect())
}

/// The state letter of a `stat` file of /proc (`R`, `S`, `t`, `Z`, ...); None once the task is
/// gone.
pub fn proc_state(path: impl AsRef<Path>) -> Option<char> {
    proc_stat_fields(path)?.first()?.chars().next()
}

/// A stream cut inside its line `at`, as a SIGKILL of mevi-actors leaves it: the whole lines before,
/// then the first 20 bytes of that one (every stream line is longer). A cut at a line's end would be
/// a trace that merely stops, which readers take with a warning, not the damage this stands for.
pub fn cut_inside_line(text: &str, at: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[at].len() > 20,
        "line {at} is too short to cut: {:?}",
        lines[at]
    );
    format!("{}\n{}", lines[..at].join("\n"), &lines[at][..20])
}

pub fn parse_stream(text: &str) -> Vec<Line> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect()
}

/// A line of kernel truth a workload printed about itself (tests/workloads/README.md).
#[derive(Debug, Clone)]
pub struct Truth {
    pub kind: String,
    pub pid: i32,
    pub name: String,
    pub start: u64,
    pub end: u64,
    pub present: u64,
    pub pages: u64,
}

impl Traced {
    /// A finished run: its stream is read from `file` (then removed) and replayed.
    pub fn read(file: &Path, status: i32, stdout: String, stderr: String) -> Self {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        std::fs::remove_file(file).ok();
        let lines = parse_stream(&text);
        let (replay, at_end) = replay_keeping_ends(&lines);
        Traced {
            status,
            lines,
            stdout,
            stderr,
            replay,
            at_end,
        }
    }

    /// `space` as its last process left it (see `at_end`).
    pub fn space_at_end(&self, space: SpaceId) -> &AddressSpace {
        &self.at_end[&space]
    }

    /// The closing `summary` line's processes and totals.
    pub fn summary(&self) -> (&[ProcessSummary], &RunTotals) {
        self.lines
            .iter()
            .find_map(|l| match &l.event {
                Event::Summary { processes, totals } => Some((processes.as_slice(), totals)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no summary line in the stream\n{}", self.stderr))
    }

    /// For a failed run: the `verify` lines that found mismatches, every warning, and the
    /// stream's lines about the first mismatched ranges (what each side was told), then stderr.
    pub fn evidence(&self) -> String {
        let mut out = Vec::new();
        let mut ranges = Vec::new();
        for l in &self.lines {
            match &l.event {
                Event::Verify {
                    space,
                    mismatched_pages,
                    first_mismatches,
                    ..
                } if *mismatched_pages > 0 => {
                    out.push(serde_json::to_string(l).unwrap());
                    ranges.extend(first_mismatches.iter().map(|m| (*space, m.start..m.end)));
                }
                Event::Warning { .. } => out.push(serde_json::to_string(l).unwrap()),
                _ => {}
            }
        }
        ranges.truncate(3);
        let touches = |l: &Line| {
            let v = serde_json::to_value(&l.event).unwrap();
            let n = |k: &str| v.get(k).and_then(serde_json::Value::as_u64);
            let spans = [
                ("start", "end"),
                ("old_start", "old_end"),
                ("new_start", "new_end"),
                ("old", "new"),
            ];
            ranges.iter().any(|(space, r)| {
                l.event.space() == Some(*space)
                    && spans.iter().any(|(a, b)| match (n(a), n(b)) {
                        (Some(a), Some(b)) => a.min(b) < r.end && a.max(b) > r.start,
                        _ => false,
                    })
            })
        };
        let about: Vec<String> = self
            .lines
            .iter()
            .filter(|l| touches(l))
            .map(|l| serde_json::to_string(l).unwrap())
            .collect();
        let skip = about.len().saturating_sub(60);
        out.push(format!(
            "lines about the first mismatched ranges (last 60 of {}):",
            about.len()
        ));
        out.extend(about.into_iter().skip(skip));
        out.push(self.stderr.clone());
        out.join("\n")
    }

    /// The stream's `warning` lines.
    pub fn warnings(&self) -> Vec<&Line> {
        self.lines
            .iter()
            .filter(|l| matches!(&l.event, Event::Warning { .. }))
            .collect()
    }

    /// The summary's `--verify` totals.
    pub fn verify_totals(&self) -> VerifyTotals {
        self.summary()
            .1
            .verify
            .clone()
            .expect("verify totals in the summary")
    }

    pub fn truths(&self) -> Vec<Truth> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with("{\"truth\""))
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let n = |k: &str| v[k].as_u64().unwrap_or(0);
                Truth {
                    kind: v["truth"].as_str().unwrap().to_string(),
                    pid: n("pid") as i32,
                    name: v["name"].as_str().unwrap_or("").to_string(),
                    start: n("start"),
                    end: n("end"),
                    present: n("present"),
                    pages: n("pages"),
                }
            })
            .collect()
    }

    pub fn truth(&self, kind: &str, name: &str) -> Vec<Truth> {
        self.truths()
            .into_iter()
            .filter(|t| t.kind == kind && t.name == name)
            .collect()
    }

    /// The last space the stream put `pid` in.
    pub fn space_of(&self, pid: i32) -> SpaceId {
        self.lines
            .iter()
            .filter_map(|l| match l.event {
                Event::Exec { pid: p, space, .. } if p == pid => Some(space),
                Event::Fork {
                    child, child_space, ..
                } if child == pid => Some(child_space),
                _ => None,
            })
            .next_back()
            .unwrap_or_else(|| panic!("no space for pid {pid} in the stream"))
    }

    /// Resident pages of `pid`'s space in `[start, end)`, by replaying the whole stream.
    pub fn resident_pages(&self, pid: i32, start: u64, end: u64) -> u64 {
        self.space_at_end(self.space_of(pid))
            .resident_in(start..end)
            / PAGE
    }

    pub fn total_resident_pages(&self, pid: i32) -> u64 {
        self.space_at_end(self.space_of(pid)).resident_bytes / PAGE
    }

    pub fn events<'a>(&'a self, ev: &'a str) -> impl Iterator<Item = &'a Event> + 'a {
        self.lines
            .iter()
            .map(|l| &l.event)
            .filter(move |e| serde_json::to_value(e).unwrap()["ev"].as_str() == Some(ev))
    }

    /// Every region and anon truth line equals the replayed stream, page for page.
    pub fn assert_matches_kernel(&self) {
        let truths = self.truths();
        assert!(
            !truths.is_empty(),
            "the workload printed no truth:\n{}",
            self.stderr
        );
        for t in &truths {
            match t.kind.as_str() {
                "region" => assert_eq!(
                    self.resident_pages(t.pid, t.start, t.end),
                    t.present,
                    "region {} of pid {}: stream vs kernel pagemap",
                    t.name,
                    t.pid
                ),
                "anon" => assert_eq!(
                    self.total_resident_pages(t.pid),
                    t.present,
                    "all private anonymous memory of pid {}: stream vs kernel pagemap",
                    t.pid
                ),
                _ => {}
            }
        }
        assert!(
            self.replay.problems.is_empty(),
            "{:?}",
            self.replay.problems
        );
    }
}

/// Whether a program this test needs is installed (on `PATH`, or a path that exists); if not, the
/// test is skipped (`skip`).
pub fn installed(program: &str) -> bool {
    let found = if program.contains('/') {
        Path::new(program).exists()
    } else {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).exists()))
    };
    if !found {
        let name = Path::new(program).file_name().unwrap_or(program.as_ref());
        skip(&format!("{} not installed", name.to_string_lossy()));
    }
    found
}

/// A copy of the binary where an unprivileged user can run it (the build tree may not be),
/// removed when dropped.
pub struct WorldCopy(pub PathBuf);

impl WorldCopy {
    pub fn new() -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let copy = std::env::temp_dir().join(format!(
            "mevi-actors-doctor-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::copy(bin(), &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self(copy)
    }
}

impl Drop for WorldCopy {
    fn drop(&mut self) {
        std::fs::remove_file(&self.0).ok();
    }
}

/// Whether the tests can become an unprivileged user here (root and setpriv); if not, the test is
/// skipped (`skip`).
pub fn can_become_nobody() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip("not run as root");
        return false;
    }
    installed("setpriv")
}

/// `setpriv` as uid/gid 65534 with no groups, then `extra` setpriv options, then the copy with
/// `args`.
pub fn as_nobody(copy: &Path, extra: &[&str], args: &[&str]) -> Command {
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(extra)
        .arg("--")
        .arg(copy)
        .args(args)
        .current_dir("/");
    cmd
}

/// A child's exit status as a shell gives it (128+N for signal N), failing the test if it has not
/// exited within `patience`; `what` names it in the failure.
pub fn exit_status_within(child: &mut std::process::Child, patience: Duration, what: &str) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    let deadline = std::time::Instant::now() + patience;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not exit within {patience:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A file of /proc/sys or /sys set to a value of the test's while this lives, the machine held
/// alone (`MachineHold`); what it was is written back when dropped, however the test ends.
pub struct HostSetting {
    path: PathBuf,
    was: String,
    _alone: MachineHold,
}

impl HostSetting {
    pub fn set(path: impl AsRef<Path>, value: &str) -> std::io::Result<HostSetting> {
        let alone = MachineHold::alone();
        let path = path.as_ref().to_path_buf();
        let was = std::fs::read_to_string(&path)?.trim().to_string();
        std::fs::write(&path, value)?;
        Ok(HostSetting {
            path,
            was,
            _alone: alone,
        })
    }
}

impl Drop for HostSetting {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(&self.path, &self.was) {
            let what = format!(
                "{} not set back to {:?}: {e}",
                self.path.display(),
                self.was
            );
            // A panic while unwinding would abort the whole suite.
            if std::thread::panicking() {
                eprintln!("{what}");
            } else {
                panic!("{what}");
            }
        }
    }
}

/// How tests share the machine. Every traced run holds it shared (the helpers that start one
/// take a `MachineHold`: `run_within`, `run_in_background`, and the harnesses of attach and
/// serve); a test that changes the machine under them (swap on, a memory cgroup, huge pages
/// reserved, compaction) holds it alone, so that no run sees its pages move, go to swap or be
/// reclaimed. A test waiting to hold it alone keeps new runs from starting, so it is not starved.
struct Holders {
    /// Threads holding it shared.
    shared: usize,
    /// Whether a thread holds it alone.
    alone: bool,
    /// Threads waiting to hold it alone.
    waiting_alone: usize,
}

static HOLDERS: Mutex<Holders> = Mutex::new(Holders {
    shared: 0,
    alone: false,
    waiting_alone: 0,
});
static HOLDERS_CHANGED: std::sync::Condvar = std::sync::Condvar::new();

#[derive(Clone, Copy, PartialEq, Debug)]
enum HoldKind {
    Shared,
    Alone,
}

thread_local! {
    /// How this thread holds the machine (as its first hold was taken) and how many holds it
    /// has. A thread with a hold is granted more at once (a traced run of a test that holds the
    /// machine alone, a `replay` while a served run is held) and lets go at its last, whatever
    /// their order: queued behind a test waiting for holders to finish, it would wait for itself.
    static HELD_HERE: std::cell::Cell<(Option<HoldKind>, usize)> =
        const { std::cell::Cell::new((None, 0)) };
}

/// One hold of the machine, let go when dropped (a failing test's too). Not `Send`: holds are
/// counted per thread.
#[must_use]
pub struct MachineHold(std::marker::PhantomData<*const ()>);

impl MachineHold {
    /// A hold for a traced run: beside other runs, never beside a test that changes the machine.
    pub fn shared() -> MachineHold {
        Self::take(HoldKind::Shared)
    }

    /// A hold for a test that changes the machine: once every run started has ended, and none
    /// beside it until it is dropped. Taken before the change, dropped once it is undone.
    pub fn alone() -> MachineHold {
        Self::take(HoldKind::Alone)
    }

    fn take(kind: HoldKind) -> MachineHold {
        let hold = || MachineHold(std::marker::PhantomData);
        match HELD_HERE.get() {
            (Some(held), n) => {
                assert!(
                    kind == HoldKind::Shared || held == HoldKind::Alone,
                    "a test holding a run cannot then hold the machine alone"
                );
                HELD_HERE.set((Some(held), n + 1));
                return hold();
            }
            (None, _) => HELD_HERE.set((Some(kind), 1)),
        }
        let wait = |holders| {
            HOLDERS_CHANGED
                .wait(holders)
                .unwrap_or_else(|e| e.into_inner())
        };
        let mut holders = HOLDERS.lock().unwrap_or_else(|e| e.into_inner());
        match kind {
            HoldKind::Shared => {
                while holders.alone || holders.waiting_alone > 0 {
                    holders = wait(holders);
                }
                holders.shared += 1;
            }
            HoldKind::Alone => {
                holders.waiting_alone += 1;
                while holders.alone || holders.shared > 0 {
                    holders = wait(holders);
                }
                holders.waiting_alone -= 1;
                holders.alone = true;
            }
        }
        hold()
    }
}

impl Drop for MachineHold {
    fn drop(&mut self) {
        let (kind, n) = HELD_HERE.get();
        if n > 1 {
            HELD_HERE.set((kind, n - 1));
            return;
        }
        HELD_HERE.set((None, 0));
        let mut holders = HOLDERS.lock().unwrap_or_else(|e| e.into_inner());
        match kind {
            Some(HoldKind::Shared) => holders.shared -= 1,
            Some(HoldKind::Alone) => holders.alone = false,
            None => unreachable!("a hold let go twice"),
        }
        drop(holders);
        HOLDERS_CHANGED.notify_all();
    }
}
