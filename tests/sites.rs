//! Call sites of layout changes (`run --stacks`, issue 13). Workloads map, malloc, brk and fill a
//! `Vec` from named functions and print where in their source they did it and what the kernel
//! made of it (`{"truth":"site",...}` lines, tests/workloads/sites_*.c and sites_rust.rs). The
//! stream's `site` lines must name those functions, files and lines, with frames that stay
//! meaningful after the run (module, build-id, file offset), and `replay --by-site` must add up
//! to the kernel's bytes, function by function.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use mevi_actors::event::{Event, Frame, Line, MapCause, MapKind, SiteId, Truncated, WarningKind};
use mevi_actors::model::sites::is_system_frame;
use object::{Object, ObjectSegment, ObjectSymbol};
use serde_json::Value;

use crate::util::{PAGE, Traced, bin, run_bounded, scratch, traced_to};

/// How a C workload is built: all must unwind to the same sites.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Build {
    /// `-fno-omit-frame-pointer`: the workload's own frames chain by frame pointer (and have
    /// DWARF CFI too, as gcc emits it by default).
    FramePointers,
    /// `-fomit-frame-pointer`: only DWARF CFI (`.eh_frame`) unwinds the workload's frames.
    DwarfOnly,
    /// Frame pointers and no CFI for the workload's own code (no unwind tables, and the
    /// `.debug_frame` that `-g` would give instead removed): only the frame pointer chain
    /// unwinds its frames.
    FramePointersOnly,
}

/// `tests/workloads/NAME.c` built with debug info, `-O1` and `build`'s flags, once per test
/// run, where `util::workload` keeps its builds but named after the build (one source, several
/// programs).
pub(crate) fn c_workload(name: &str, build: Build) -> PathBuf {
    let (suffix, flags): (&str, &[&str]) = match build {
        Build::FramePointers => ("fp", &["-fno-omit-frame-pointer"]),
        Build::DwarfOnly => ("dwarf", &["-fomit-frame-pointer"]),
        Build::FramePointersOnly => (
            "fponly",
            &[
                "-fno-omit-frame-pointer",
                "-fno-asynchronous-unwind-tables",
                "-fno-unwind-tables",
            ],
        ),
    };
    built(
        &format!("{name}-{suffix}"),
        &format!("{name}.c"),
        |src, out| {
            let mut cc = Command::new("cc");
            cc.args(["-O1", "-g", "-pthread", "-Wall"])
                .args(flags)
                .arg("-o")
                .arg(out)
                .arg(src);
            let mut steps = vec![cc];
            if let Build::FramePointersOnly = build {
                let mut objcopy = Command::new("objcopy");
                objcopy.args(["--remove-section", ".debug_frame"]).arg(out);
                steps.push(objcopy);
            }
            steps
        },
    )
}

/// `tests/workloads/sites_rust.rs`, with debug info, as a crate of its own (no dependencies).
fn rust_workload() -> PathBuf {
    built("sites_rust", "sites_rust.rs", |src, out| {
        let mut rustc = Command::new("rustc");
        rustc
            .args(["--edition", "2021", "-g", "-C", "opt-level=1", "-o"])
            .arg(out)
            .arg(src);
        vec![rustc]
    })
}

/// Runs the commands `steps(source, program)` gives, in order, once per test run; the program's
/// canonical path (the one `/proc/PID/maps` names).
fn built(program: &str, source: &str, steps: impl FnOnce(&Path, &Path) -> Vec<Command>) -> PathBuf {
    static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(path) = built.get(program) {
        return path.clone();
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/workloads")
        .join(source);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("workloads");
    std::fs::create_dir_all(&dir).unwrap();
    for mut step in steps(&src, &dir.join(program)) {
        let (status, stdout, stderr) = run_bounded(&mut step);
        assert_eq!(status, 0, "{step:?}\n{stdout}{stderr}");
    }
    let path = std::fs::canonicalize(dir.join(program)).unwrap();
    built.insert(program.to_string(), path.clone());
    path
}

/// What a workload printed about one of its layout calls.
#[derive(Debug)]
pub(crate) struct Call {
    pid: i32,
    /// The function that made the call.
    pub(crate) function: String,
    /// `mmap`, `munmap`, `sbrk` (the line is the call's), or `malloc`, `vec` (the line is
    /// within `lines`, the function's).
    pub(crate) call: String,
    file: String,
    line: u32,
    lines: Option<(u32, u32)>,
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// Pages of [start, end) present when the workload looked (see each workload).
    present: u64,
    /// Whether [start, end) is still mapped at exit.
    kept: bool,
}

impl Call {
    fn bytes(&self) -> u64 {
        self.end - self.start
    }

    fn maps(&self) -> bool {
        self.call != "munmap"
    }
}

/// One `run --stacks` of a program, its stream kept on disk for `replay`.
pub(crate) struct Run {
    pub(crate) file: PathBuf,
    program: PathBuf,
    traced: Traced,
    pub(crate) calls: Vec<Call>,
}

impl Drop for Run {
    fn drop(&mut self) {
        std::fs::remove_file(&self.file).ok();
    }
}

impl Run {
    /// `mevi-actors run --stacks FLAGS -o FILE -- program`, which must succeed and follow the
    /// kernel page for page (stacks change nothing of that).
    pub(crate) fn of(flags: &[&str], program: &Path) -> Run {
        Run::with_args(flags, program, &[])
    }

    /// The same, with arguments for the program.
    pub(crate) fn with_args(flags: &[&str], program: &Path, args: &[&str]) -> Run {
        Run::with_env(&[], flags, program, args)
    }

    /// The same, with `env` set for mevi-actors (`MEVI_TEST_FAULT`).
    fn with_env(env: &[(&str, &str)], flags: &[&str], program: &Path, args: &[&str]) -> Run {
        Run::launched(&[bin()], env, flags, program, args)
    }

    /// The same, mevi-actors started by `launcher` (its last word is mevi-actors).
    fn launched(
        launcher: &[&str],
        env: &[(&str, &str)],
        flags: &[&str],
        program: &Path,
        args: &[&str],
    ) -> Run {
        let run = Run::unchecked(launcher, env, flags, program, args);
        run.traced.assert_matches_kernel();
        run
    }

    /// `launched` without comparing the pages with the kernel's (a program whose pages
    /// are not followed).
    fn unchecked(
        launcher: &[&str],
        env: &[(&str, &str)],
        flags: &[&str],
        program: &Path,
        args: &[&str],
    ) -> Run {
        let file = scratch("sites");
        let traced = traced_to(
            Command::new(launcher[0])
                .args(&launcher[1..])
                .envs(env.iter().copied())
                .args(["run", "--stacks"])
                .args(flags)
                .arg("-o")
                .arg(&file)
                .arg("--")
                .arg(program)
                .args(args),
            &file,
        );
        let calls = calls(&traced.stdout);
        assert!(!calls.is_empty(), "no site truth:\n{}", traced.stdout);
        Run {
            file,
            program: program.to_path_buf(),
            traced,
            calls,
        }
    }

    /// Each `site` line by id: its position in the stream, frames and truncation. Ids are 1,
    /// 2, 3... in the stream's order: a stack is written once.
    fn sites(&self) -> HashMap<SiteId, (u64, &[Frame], Option<Truncated>)> {
        let mut sites = HashMap::new();
        for l in &self.traced.lines {
            if let Event::Site {
                id,
                frames,
                truncated,
            } = &l.event
            {
                assert_eq!(*id, sites.len() as u64 + 1, "site ids out of order");
                sites.insert(*id, (l.seq, frames.as_slice(), *truncated));
            }
        }
        sites
    }

    /// The lines the workload's `call` made: the `map` lines (and the `split` rest) within its
    /// range, its `munmap`'s `unmap` lines, or its `brk` line.
    fn lines_of(&self, call: &Call) -> Vec<&Line> {
        let made: Vec<&Line> = self
            .traced
            .lines
            .iter()
            .filter(|l| match &l.event {
                Event::Map {
                    pid,
                    start,
                    end,
                    cause,
                    ..
                } => {
                    call.maps()
                        && call.call != "sbrk"
                        && *pid == call.pid
                        && *start >= call.start
                        && *end <= call.end
                        && *cause != Some(MapCause::Redescribe)
                }
                Event::Unmap {
                    pid,
                    start,
                    end,
                    cause,
                    ..
                } => {
                    !call.maps()
                        && *pid == call.pid
                        && *start >= call.start
                        && *end <= call.end
                        && cause.is_none()
                }
                Event::Brk { pid, old, new, .. } => {
                    call.call == "sbrk"
                        && *pid == call.pid
                        && *old == call.start
                        && *new == call.end
                }
                _ => false,
            })
            .collect();
        let covered: u64 = made
            .iter()
            .map(|l| match &l.event {
                Event::Map { start, end, .. } | Event::Unmap { start, end, .. } => end - start,
                Event::Brk { old, new, .. } => new - old,
                _ => 0,
            })
            .sum();
        assert_eq!(
            covered,
            call.bytes(),
            "the lines of {call:?} should cover its range: {made:?}"
        );
        made
    }

    /// Every line `call` made names a site written before it, whose user frame is `call`'s
    /// function at its source line, in the program, at a file offset within that function;
    /// the site's frames are normalized. The site, for comparing runs.
    fn assert_site_of(&self, call: &Call) -> SiteId {
        let sites = self.sites();
        let mut named = Vec::new();
        for line in self.lines_of(call) {
            let id = line.event.site().unwrap_or_else(|| {
                panic!(
                    "no site on {} for {call:?}",
                    serde_json::to_string(line).unwrap()
                )
            });
            let (seq, frames, truncated) = sites
                .get(&id)
                .unwrap_or_else(|| panic!("no site line {id} in the stream, for {call:?}"));
            assert!(*seq < line.seq, "site {id} written after its first use");
            let shown = show(frames);
            assert_eq!(*truncated, None, "{call:?}: a stack cut short:\n{shown}");
            let first = frames.first().expect("a stack of no frames");
            assert!(
                first.module.as_deref().is_some_and(|m| {
                    let name = file_name(m);
                    name.starts_with("libc.so") || name.starts_with("libc-")
                }),
                "{call:?}: the first frame should be libc's syscall wrapper:\n{shown}"
            );
            assert_normalized(frames);

            let user = user_frame(frames);
            let want = format!("{}:{}", call.function, call.file);
            assert!(
                names(user, &call.function),
                "{call:?}: the user frame should be {want}:\n{shown}"
            );
            let file = user.file.as_deref().map(file_name);
            assert_eq!(file, Some(call.file.as_str()), "{call:?}:\n{shown}");
            let line = user
                .line
                .unwrap_or_else(|| panic!("{call:?}: no line\n{shown}"));
            match call.lines {
                None => assert_eq!(line, call.line, "{call:?}: the call's line\n{shown}"),
                Some((low, high)) => assert!(
                    (low..=high).contains(&line),
                    "{call:?}: line {line} is not the function's\n{shown}"
                ),
            }
            assert_eq!(
                user.module.as_deref().map(Path::new),
                Some(self.program.as_path()),
                "{call:?}: the user frame's module\n{shown}"
            );
            let offset = user.offset.unwrap();
            let (low, high) = function_offsets(&self.program, &call.function);
            assert!(
                low < offset && offset < high,
                "{call:?}: offset {offset:#x} is not in {}'s file offsets {low:#x}..{high:#x}\n{shown}",
                call.function
            );
            named.push(id);
        }
        named.dedup();
        assert_eq!(
            named.len(),
            1,
            "{call:?}: one syscall, one stack: {named:?}"
        );
        named[0]
    }

    /// The start line gives the depth cap; the summary counts the site lines.
    fn assert_totals(&self) {
        let (_, totals) = self.traced.summary();
        let sites = self.sites().len() as u64;
        assert_eq!(totals.sites, Some(sites), "{totals:?}");
        let depth = self.traced.lines.iter().find_map(|l| match &l.event {
            Event::Start { stack_depth, .. } => Some(*stack_depth),
            _ => None,
        });
        assert_eq!(depth, Some(Some(64)), "the start line's stack_depth");
    }

    /// `replay --by-site --json FILE`'s bottom-up rows.
    pub(crate) fn by_site(&self) -> Vec<Value> {
        let (status, stdout, stderr) = run_bounded(
            Command::new(bin())
                .args(["replay", "--by-site", "--json"])
                .arg(&self.file),
        );
        assert_eq!(status, 0, "{stderr}");
        // JSON lines or one array: whichever, its objects.
        let values: Vec<Value> = serde_json::Deserializer::from_str(&stdout)
            .into_iter::<Value>()
            .map(|v| v.unwrap_or_else(|e| panic!("{e}: {stdout}")))
            .flat_map(|v| match v {
                Value::Array(items) => items,
                v => vec![v],
            })
            .filter(|v| v["view"] == "bottom_up")
            .collect();
        assert!(!values.is_empty(), "no bottom_up rows: {stdout}");
        values
    }

    /// `replay --by-site`'s figures for each function that made a call, added over its rows,
    /// equal the kernel's. All four are exact here, because of how the workloads are written:
    /// - mapped: each call's range, as the syscall gave it (ranges are whole pages);
    /// - resident at peak: every page a call's range will ever hold is written (or made
    ///   present by glibc) before any page of it goes, and the process's peak comes when they
    ///   all are (sites_arena unmaps arena a only after arena b is written, and touches first
    ///   what the truth's measurement adds later; sites_malloc_threads' threads end, and glibc
    ///   drops their stacks' unused pages, only once both have written their blocks; the
    ///   others release nothing): so the site's own largest figure and its figure at the
    ///   process's peak are both the pages the workload saw present;
    /// - resident at exit: the same pages for a range kept to the end (nothing touches it
    ///   after, and truth_finish's region line says so), 0 for one unmapped;
    /// - alive at exit: the kept ranges' bytes.
    fn assert_by_site_equals_truth(&self) {
        let rows = self.by_site();
        let functions: BTreeSet<&str> = self
            .calls
            .iter()
            .filter(|c| c.maps())
            .map(|c| c.function.as_str())
            .collect();
        for function in functions {
            let calls: Vec<&Call> = self
                .calls
                .iter()
                .filter(|c| c.maps() && c.function == function)
                .collect();
            for c in calls.iter().filter(|c| c.kept) {
                if let Some(region) = self
                    .traced
                    .truths()
                    .into_iter()
                    .find(|t| t.kind == "region" && t.start == c.start && t.end == c.end)
                {
                    assert_eq!(region.present, c.present, "{c:?} changed before the exit");
                }
            }
            let want = [
                calls.iter().map(|c| c.bytes()).sum::<u64>(),
                calls.iter().map(|c| c.present * PAGE).sum(),
                calls
                    .iter()
                    .filter(|c| c.kept)
                    .map(|c| c.present * PAGE)
                    .sum(),
                calls.iter().filter(|c| c.kept).map(|c| c.bytes()).sum(),
            ];
            let mine: Vec<&Value> = rows
                .iter()
                .filter(|r| {
                    r["function"]
                        .as_str()
                        .is_some_and(|f| same_function(f, function))
                })
                .collect();
            assert!(!mine.is_empty(), "no row for {function}: {rows:#?}");
            let keys = [
                "mapped_bytes",
                "resident_at_peak_bytes",
                "resident_at_exit_bytes",
                "alive_at_exit_bytes",
            ];
            let got = keys.map(|k| {
                mine.iter()
                    .map(|r| r[k].as_u64().unwrap_or_else(|| panic!("no {k} in {r}")))
                    .sum::<u64>()
            });
            assert_eq!(
                got, want,
                "{function}: {keys:?} by site vs the kernel's\nrows: {mine:#?}\ncalls: {calls:#?}"
            );
            // The workloads map anonymous memory only: all of it is under the anon keys.
            let keys = [
                "anon_mapped_bytes",
                "file_mapped_bytes",
                "anon_left_at_exit_bytes",
                "file_left_at_exit_bytes",
            ];
            let got = keys.map(|k| {
                mine.iter()
                    .map(|r| r[k].as_u64().unwrap_or_else(|| panic!("no {k} in {r}")))
                    .sum::<u64>()
            });
            assert_eq!(
                got,
                [want[0], 0, want[3], 0],
                "{function}: {keys:?}: {mine:#?}"
            );
            for r in &mine {
                assert_eq!(
                    r["file"].as_str().map(file_name),
                    Some(calls[0].file.as_str()),
                    "{r}"
                );
            }
        }
    }

    fn call(&self, function: &str, call: &str) -> &Call {
        self.calls
            .iter()
            .find(|c| c.function == function && c.call == call)
            .unwrap_or_else(|| panic!("no {call} by {function}: {:?}", self.calls))
    }

    /// The frames of site `id` without what is meaningful in one process only.
    fn frames_of(&self, id: SiteId) -> Vec<(Option<String>, Option<String>, Option<u64>)> {
        self.sites()[&id]
            .1
            .iter()
            .map(|f| (f.module.clone(), f.build_id.clone(), f.offset))
            .collect()
    }
}

/// The workload's `{"truth":"site"}` lines.
fn calls(stdout: &str) -> Vec<Call> {
    stdout
        .lines()
        .filter(|l| l.starts_with("{\"truth\":\"site\""))
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {l}"));
            let s = |k: &str| v[k].as_str().unwrap_or_else(|| panic!("no {k} in {l}"));
            Call {
                pid: n("pid") as i32,
                function: s("name").to_string(),
                call: s("call").to_string(),
                file: s("file").to_string(),
                line: n("line") as u32,
                lines: v
                    .get("first_line")
                    .map(|_| (n("first_line") as u32, n("last_line") as u32)),
                start: n("start"),
                end: n("end"),
                present: n("present"),
                kept: n("kept") == 1,
            }
        })
        .collect()
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The innermost frame that is not a system frame (the outermost when all are).
fn user_frame(frames: &[Frame]) -> &Frame {
    frames
        .iter()
        .find(|f| !is_system_frame(f))
        .unwrap_or_else(|| frames.last().unwrap())
}

/// Whether `frame` is `function`'s: a C name as it is, a Rust one as its path in the crate.
fn names(frame: &Frame, function: &str) -> bool {
    frame
        .function
        .as_deref()
        .is_some_and(|f| same_function(f, function))
}

/// `sites_rust::make_buffers` (or with its legacy hash, `::h` and 16 hex digits) is the
/// workload's `make_buffers`; a C function is named as it is.
fn same_function(symbolized: &str, function: &str) -> bool {
    let unhashed = match symbolized.rsplit_once("::h") {
        Some((path, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            path
        }
        _ => symbolized,
    };
    unhashed == function || unhashed == format!("sites_rust::{function}")
}

/// A stack for a failure message, one frame a line.
fn show(frames: &[Frame]) -> String {
    frames
        .iter()
        .map(|f| format!("  {}", serde_json::to_string(f).unwrap()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Frames in a file carry the module, its build-id (the file's own) and a file offset, and no
/// address; frames in no file, an address only.
fn assert_normalized(frames: &[Frame]) {
    for f in frames {
        match &f.module {
            Some(module) if module.starts_with('[') => {
                assert!(f.offset.is_some() && f.addr.is_none(), "{f:?}")
            }
            Some(module) => {
                assert!(f.offset.is_some() && f.addr.is_none(), "{f:?}");
                let data = std::fs::read(module).unwrap_or_else(|e| panic!("{module}: {e}"));
                let elf = object::File::parse(&*data).unwrap();
                let id = elf.build_id().unwrap().map(hex);
                assert_eq!(f.build_id, id, "the build-id of {module}");
            }
            None => assert!(
                f.addr.is_some() && f.offset.is_none() && f.build_id.is_none(),
                "{f:?}"
            ),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The file offsets of `function`'s code in `program`: from its symbol's address, through the
/// segment that loads it. A Rust function is found by its name in the mangled symbol.
fn function_offsets(program: &Path, function: &str) -> (u64, u64) {
    let data = std::fs::read(program).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let symbol = elf
        .symbols()
        .find(|s| {
            s.name().is_ok_and(|n| {
                n == function
                    || ((n.starts_with("_ZN") || n.starts_with("_R")) && n.contains(function))
            }) && s.size() > 0
        })
        .unwrap_or_else(|| panic!("no symbol {function} in {}", program.display()));
    let segment = elf
        .segments()
        .find(|s| (s.address()..s.address() + s.size()).contains(&symbol.address()))
        .unwrap();
    let offset = symbol.address() - segment.address() + segment.file_range().0;
    (offset, offset + symbol.size())
}

fn arena_sites_name_each_function_and_line(build: Build) {
    let run = Run::of(&[], &c_workload("sites_arena", build));
    for call in &run.calls {
        run.assert_site_of(call);
    }
    assert_eq!(run.calls.len(), 3, "{:?}", run.calls);
    run.assert_totals();
    run.assert_by_site_equals_truth();
}

#[test]
fn arena_sites_name_each_function_and_line_with_frame_pointers() {
    arena_sites_name_each_function_and_line(Build::FramePointers);
}

#[test]
fn arena_sites_name_each_function_and_line_with_dwarf_unwind_tables_only() {
    arena_sites_name_each_function_and_line(Build::DwarfOnly);
}

#[test]
fn arena_sites_name_each_function_and_line_with_frame_pointers_only() {
    arena_sites_name_each_function_and_line(Build::FramePointersOnly);
}

/// Without address randomization (`setarch -R`, as gdb runs a program) the main thread's stack
/// ends at the very top of user memory: its stacks are read up to there, whole.
#[test]
fn arena_sites_name_each_function_and_line_without_address_randomization() {
    if !crate::util::installed("setarch") {
        return;
    }
    let program = c_workload("sites_arena", Build::DwarfOnly);
    let run = Run::launched(&["setarch", "-R", bin()], &[], &[], &program, &[]);
    for call in run.calls.iter().filter(|c| c.maps()) {
        run.assert_site_of(call);
    }
    run.assert_by_site_equals_truth();
}

#[test]
fn two_runs_of_one_binary_give_its_stacks_the_same_frames() {
    let program = c_workload("sites_arena", Build::DwarfOnly);
    let (one, two) = (Run::of(&[], &program), Run::of(&[], &program));
    for (function, call) in [
        ("alloc_arena_a", "mmap"),
        ("alloc_arena_b", "mmap"),
        ("main", "munmap"),
    ] {
        let a = one.assert_site_of(one.call(function, call));
        let b = two.assert_site_of(two.call(function, call));
        assert_eq!(one.frames_of(a), two.frames_of(b), "{function}'s {call}");
    }
}

/// A program `--only` leaves out is not followed (no page tables of it are read for its
/// pages), but its mappings' lines still name their stacks.
#[test]
fn a_program_only_leaves_out_still_has_its_stacks() {
    let program = c_workload("sites_arena", Build::DwarfOnly);
    let only = ["--only", "no-such-program"];
    let run = Run::unchecked(&[bin()], &[], &only, &program, &[]);
    for (function, call) in [("alloc_arena_a", "mmap"), ("main", "munmap")] {
        run.assert_site_of(run.call(function, call));
    }
}

#[test]
fn a_stack_depth_cap_cuts_stacks_and_says_so() {
    let run = Run::of(
        &["--stack-depth", "2"],
        &c_workload("sites_arena", Build::DwarfOnly),
    );
    let call = run.call("alloc_arena_a", "mmap");
    let id = run.lines_of(call)[0].event.site().expect("a site");
    let (_, frames, truncated) = run.sites()[&id];
    assert_eq!(truncated, Some(Truncated::Depth), "{}", show(frames));
    let physical = frames.iter().filter(|f| !f.inlined).count();
    assert_eq!(physical, 2, "{}", show(frames));
    // libc's wrapper, then the function that called it.
    assert!(
        names(user_frame(frames), "alloc_arena_a"),
        "{}",
        show(frames)
    );
}

#[test]
fn malloc_sites_in_two_threads_name_each_threads_function() {
    let run = Run::of(&[], &c_workload("sites_malloc_threads", Build::DwarfOnly));
    assert_eq!(run.calls.len(), 4, "{:?}", run.calls);
    for call in &run.calls {
        run.assert_site_of(call);
        let tids: Vec<i32> = run
            .lines_of(call)
            .iter()
            .map(|l| match l.event {
                Event::Map { tid, .. } => tid,
                _ => unreachable!(),
            })
            .collect();
        assert!(!tids.contains(&call.pid), "made by a thread: {tids:?}");
    }
    run.assert_by_site_equals_truth();
}

#[test]
fn brk_site_in_a_thread_names_its_function_and_line() {
    let run = Run::of(&[], &c_workload("sites_brk_thread", Build::DwarfOnly));
    assert_eq!(run.calls.len(), 1, "{:?}", run.calls);
    run.assert_site_of(&run.calls[0]);
    run.assert_by_site_equals_truth();
}

#[test]
fn rust_vec_site_names_the_function_that_made_it() {
    let run = Run::of(&[], &rust_workload());
    assert_eq!(run.calls.len(), 1, "{:?}", run.calls);
    run.assert_site_of(&run.calls[0]);
    run.assert_by_site_equals_truth();
}

// --- sampled first touches (--touch-stacks) ---

impl Run {
    /// The `resident` lines within the range a `write` call of the workload wrote.
    fn touches_of(&self, call: &Call) -> Vec<&Line> {
        self.traced
            .lines
            .iter()
            .filter(|l| {
                matches!(l.event, Event::Resident { start, end, .. }
                    if start >= call.start && end <= call.end)
            })
            .collect()
    }
}

/// The sites_touch workload under `--touch-stacks N`, one line per fault, with `noise` faults
/// no lane follows before each first touch of write_pages_here.
fn touch_run(period: &str, noise: u32) -> Run {
    let run = Run::with_args(
        &["--touch-stacks", period, "--coalesce-ms", "0"],
        &c_workload("sites_touch", Build::DwarfOnly),
        &[&noise.to_string()],
    );
    assert_eq!(run.calls.len(), 2, "{:?}", run.calls);
    run
}

impl Run {
    /// Each write call's first touches: (lines, lines with a site naming the call's function).
    fn sampled_touches(&self) -> Vec<(u64, u64)> {
        let sites = self.sites();
        self.calls
            .iter()
            .map(|call| {
                let touches = self.touches_of(call);
                let named = touches
                    .iter()
                    .filter_map(|line| line.event.site())
                    .filter(|id| names(user_frame(sites[id].1), &call.function))
                    .count();
                (touches.len() as u64, named as u64)
            })
            .collect()
    }
}

#[test]
fn every_sampled_first_touch_names_the_function_that_wrote_it() {
    let run = touch_run("1", 0);
    let sites = run.sites();
    for call in &run.calls {
        let touches = run.touches_of(call);
        assert_eq!(touches.len() as u64, call.present, "{call:?}");
        for line in touches {
            let id = line
                .event
                .site()
                .unwrap_or_else(|| panic!("a first touch of {call:?} without a site: {line:?}"));
            let (seq, frames, _) = sites[&id];
            assert!(seq < line.seq, "site {id} written after its first use");
            let user = user_frame(frames);
            assert!(names(user, &call.function), "{call:?}: {}", show(frames));
            assert!(
                user.file
                    .as_deref()
                    .is_some_and(|f| f.ends_with(&call.file)),
                "{call:?}: {}",
                show(frames)
            );
            assert_eq!(user.line, Some(call.line), "{call:?}: {}", show(frames));
        }
    }
    // Bytes first touched by each function, as replay --by-site adds them up: its pages.
    let rows = run.by_site();
    for call in &run.calls {
        let touched: u64 = rows
            .iter()
            .filter(|r| {
                r["function"]
                    .as_str()
                    .is_some_and(|f| same_function(f, &call.function))
            })
            .map(|r| r["sampled_touches"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(touched, call.present, "{call:?}: {rows:#?}");
    }
}

#[test]
fn one_first_touch_in_sixteen_gets_a_stack() {
    let run = touch_run("16", 0);
    let (lines, named) = run
        .sampled_touches()
        .iter()
        .fold((0, 0), |(l, n), &(lines, named)| (l + lines, n + named));
    // About 768 / 16 = 48.
    assert!(
        (lines / 32..=lines / 8).contains(&named),
        "{named} of {lines} first touches got a stack naming their function"
    );
}

/// Faults no lane follows come between the followed ones, 15 to each, as a loop does: a
/// sampling that counted every fault with a fixed period of 16 would see every first touch of
/// the loop or none.
#[test]
fn one_first_touch_in_sixteen_gets_a_stack_whatever_faults_come_between() {
    let run = touch_run("16", 15);
    let [(here, here_named), _] = run.sampled_touches()[..] else {
        panic!("{:?}", run.calls);
    };
    assert_eq!(here, 512, "{:?}", run.calls);
    // About 32; below 12 by chance about once in 10^5 runs.
    assert!(
        (12..=here / 8).contains(&here_named),
        "{here_named} of {here} first touches got a stack naming write_pages_here"
    );
}

/// Many faults no lane follows between two followed ones (20 here, a fork child's copies on
/// write) must not crowd a followed fault's sample out of the thread's buffer.
#[test]
fn every_first_touch_gets_its_stack_however_many_faults_come_between() {
    let run = touch_run("1", 20);
    for (call, (lines, named)) in run.calls.iter().zip(run.sampled_touches()) {
        assert_eq!(lines, call.present, "{call:?}");
        assert_eq!(named, lines, "{call:?}: first touches without their stack");
    }
}

/// A sampler holds a descriptor per live thread. Under a low descriptor limit the samplers
/// stop short of it, and say so; the tracer keeps what it needs, so every thread is still a
/// thread (its clone flags are read without a descriptor) and the stream stays exact.
#[test]
fn touch_stacks_under_a_low_descriptor_limit_leave_the_trace_whole() {
    let file = scratch("threads-held");
    let program = crate::util::workload("threads_held");
    let script = format!(
        "ulimit -n 160; exec {} run --touch-stacks 1 --verify -o {} -- {} 200",
        bin(),
        file.display(),
        program.display()
    );
    let (status, stdout, stderr) = crate::util::run_within(
        Command::new("sh").args(["-c", &script]),
        std::time::Duration::from_secs(120),
    );
    assert_eq!((status, stdout.as_str()), (0, "ok\n"), "{stderr}");
    let lines = crate::util::parse_stream(&std::fs::read_to_string(&file).unwrap());
    let count = |f: &dyn Fn(&Event) -> bool| lines.iter().filter(|l| f(&l.event)).count();
    assert_eq!(
        count(&|e| matches!(e, Event::Thread { .. })),
        200,
        "{stderr}"
    );
    assert_eq!(count(&|e| matches!(e, Event::Fork { .. })), 0, "{stderr}");
    let warnings: Vec<&Event> = lines
        .iter()
        .map(|l| &l.event)
        .filter(|e| matches!(e, Event::Warning { .. }))
        .collect();
    assert!(
        matches!(&warnings[..], [Event::Warning { what: WarningKind::NoTouchStacks, message, .. }]
            if message.contains("RLIMIT_NOFILE")),
        "{warnings:?}"
    );
    // The threads that got a sampler before the limit have their stacks.
    let named = count(&|e| matches!(e, Event::Resident { site: Some(_), .. }));
    assert!(named >= 20, "only {named} first touches got a stack");
}

/// A thread that is not the leader execs: it becomes the leader, and its sampler goes with it,
/// so the new program's first touches have their stacks.
#[test]
fn first_touches_after_an_exec_from_a_thread_have_stacks() {
    let t = crate::util::trace(
        &["--touch-stacks", "1", "--coalesce-ms", "0"],
        &[crate::util::workload("exec_thread")],
    );
    assert_eq!(t.status, 0, "{}", t.stderr);
    t.assert_matches_kernel();
    let [region] = &t.truth("region", "after_exec")[..] else {
        panic!("{}", t.stdout);
    };
    let touches: Vec<&Event> = t
        .lines
        .iter()
        .map(|l| &l.event)
        .filter(|e| {
            matches!(e, Event::Resident { start, end, .. }
                if *start >= region.start && *end <= region.end)
        })
        .collect();
    assert_eq!(touches.len(), 5, "{touches:?}");
    assert!(
        touches.iter().all(|e| e.site().is_some()),
        "first touches after the exec without a stack: {touches:?}"
    );
}

/// Where the kernel refuses kernel-mode faults (`perf_event_paranoid` 2) and the program that
/// draws the samples (no `CAP_BPF`): the run says both, once, and every thread, the first one
/// included, is still sampled, every 2nd fault.
#[test]
fn touch_stacks_without_kernel_faults_or_bpf_still_sample_every_thread() {
    let run = Run::with_env(
        &[("MEVI_TEST_FAULT", "perf-kernel,bpf")],
        &["--touch-stacks", "2", "--coalesce-ms", "0"],
        &c_workload("sites_touch", Build::DwarfOnly),
        &[],
    );
    let mut warned: Vec<&str> = run
        .traced
        .lines
        .iter()
        .filter_map(|l| match &l.event {
            Event::Warning {
                what: WarningKind::NoTouchStacks,
                message,
                ..
            } => Some(message.as_str()),
            _ => None,
        })
        .collect();
    warned.sort();
    assert!(
        matches!(&warned[..], [a, b] if a.contains("inside system calls") && b.contains("fixed stride")),
        "{warned:?}"
    );
    // Every other fault of each thread is sampled (nearly all of them are these first touches).
    for (call, (lines, named)) in run.calls.iter().zip(run.sampled_touches()) {
        assert!(named >= lines / 4, "{call:?}: {named} of {lines} named");
    }
}

/// A page first touched by `write_page`, discarded, then made resident again by
/// `MADV_POPULATE_WRITE` (faults the kernel takes for the thread, never sampled): the refill
/// is no sampled first touch, and never takes `write_page`'s older sample of the same page.
#[test]
fn a_refill_the_kernel_does_not_sample_never_takes_an_older_stack() {
    let file = scratch("refill");
    let program = c_workload("sites_refill", Build::DwarfOnly);
    let (status, stdout, stderr) = run_bounded(
        Command::new(bin())
            .args(["run", "--touch-stacks", "1", "--coalesce-ms", "0", "-o"])
            .arg(&file)
            .arg("--")
            .arg(&program),
    );
    let traced = Traced::read(&file, status, stdout, stderr);
    assert_eq!(traced.status, 0, "{}", traced.stderr);
    traced.assert_matches_kernel();
    let [region] = &traced.truth("region", "refill")[..] else {
        panic!("{}", traced.stdout);
    };
    let (start, end) = (region.start, region.end);
    let sites: HashMap<SiteId, &[Frame]> = traced
        .lines
        .iter()
        .filter_map(|l| match &l.event {
            Event::Site { id, frames, .. } => Some((*id, &frames[..])),
            _ => None,
        })
        .collect();
    // Each page: its first touch, then its refill, in that order.
    let mut by_page: BTreeMap<u64, Vec<Option<SiteId>>> = BTreeMap::new();
    for line in &traced.lines {
        if let Event::Resident {
            start: s, end: e, ..
        } = line.event
            && s >= start
            && e <= end
        {
            by_page.entry(s).or_default().push(line.event.site());
        }
    }
    assert_eq!(by_page.len() as u64, (end - start) / PAGE, "{by_page:?}");
    for (page, touches) in &by_page {
        let [first, refill] = touches[..] else {
            panic!("page {page:#x}: {touches:?}");
        };
        let first = first.unwrap_or_else(|| panic!("page {page:#x}: an unsampled first touch"));
        assert!(
            names(user_frame(sites[&first]), "write_page"),
            "{}",
            show(sites[&first])
        );
        assert_eq!(
            refill,
            None,
            "page {page:#x}: the refill took {:?}",
            refill.map(|s| show(sites[&s]))
        );
    }
}

/// `--by-site` keeps anonymous and file bytes apart, and "Σ at exits" adds each space's end
/// over the spaces: two runs of sites_arena one after the other end with twice what one ends
/// with, more than the tree ever held at once (the peak, which the rows add up to).
#[test]
fn by_site_keeps_file_bytes_apart_and_adds_the_ends_of_spaces() {
    let workload = c_workload("sites_arena", Build::FramePointers);
    let script = format!("{0} && {0}", workload.display());
    let run = Run::with_args(&[], Path::new("/bin/sh"), &["-c", &script]);
    let rows = run.by_site();
    let n = |r: &Value, k: &str| r[k].as_u64().unwrap_or_else(|| panic!("no {k} in {r}"));
    for r in &rows {
        assert_eq!(
            n(r, "mapped_bytes"),
            n(r, "anon_mapped_bytes") + n(r, "file_mapped_bytes"),
            "{r}"
        );
        assert_eq!(
            n(r, "alive_at_exit_bytes"),
            n(r, "anon_left_at_exit_bytes") + n(r, "file_left_at_exit_bytes"),
            "{r}"
        );
    }
    let sum = |k: &str| rows.iter().map(|r| n(r, k)).sum::<u64>();
    // File bytes: what the stream's map lines of files (and shared memory) mapped, the loader's
    // libraries and the programs' own files as exec mapped them.
    let file_lines: u64 = run
        .traced
        .lines
        .iter()
        .filter_map(|l| match &l.event {
            Event::Map {
                start,
                end,
                kind,
                cause: None,
                ..
            } if !matches!(kind, MapKind::Anon | MapKind::Heap | MapKind::Stack) => {
                Some(end - start)
            }
            _ => None,
        })
        .sum();
    assert!(file_lines > 0);
    assert_eq!(sum("file_mapped_bytes"), file_lines);
    assert!(sum("file_left_at_exit_bytes") > 0);
    // Resident at peak adds up to the tree's peak; at the ends, to more.
    let (_, totals) = run.traced.summary();
    assert_eq!(
        sum("resident_at_peak_bytes"),
        totals.tree_peak_resident_bytes
    );
    assert!(
        sum("resident_at_exit_bytes") > totals.tree_peak_resident_bytes,
        "{} at exits, {} at peak",
        sum("resident_at_exit_bytes"),
        totals.tree_peak_resident_bytes
    );
    let b = run.call("alloc_arena_b", "mmap");
    let row = rows
        .iter()
        .find(|r| r["function"] == "alloc_arena_b")
        .unwrap_or_else(|| panic!("no alloc_arena_b row: {rows:#?}"));
    assert_eq!(n(row, "resident_at_peak_bytes"), b.present * PAGE, "{row}");
    assert_eq!(
        n(row, "resident_at_exit_bytes"),
        2 * b.present * PAGE,
        "{row}"
    );
    assert_eq!(n(row, "anon_left_at_exit_bytes"), 2 * b.bytes(), "{row}");
    assert_eq!(n(row, "file_mapped_bytes"), 0, "{row}");

    // The table names its columns for what they count.
    let (status, table, stderr) = run_bounded(
        Command::new(bin())
            .args(["replay", "--by-site"])
            .arg(&run.file),
    );
    assert_eq!(status, 0, "{stderr}");
    assert!(
        table.contains(
            "anon mapped file mapped     at peak  Σ at exits   anon left   file left  where"
        ),
        "{table}"
    );
    assert!(table.contains("can exceed the peak"), "{table}");
}
