//! `cargo bench`: what tracing costs, measured side by side.
//!
//! Each workload (benches/workloads/bench.c, plus `sort`, `gcc -O2 -c`, `make -j2` and
//! `/bin/true`) runs untraced, under mevi-actors, and under every reference present: the floor
//! (a minimal userfaultfd handler in this file, on the fault workloads) and strace. Options that
//! take call stacks (`VARIANTS`) run on the workloads they are for, against mevi-actors without
//! them: the runner named "mevi-actors" runs with `--no-stacks` (the core's cost), and the
//! default run, with stacks, is the `--stacks` variant.
//! Runs alternate (one of each runner, then the next round), and each ratio is the median of the
//! ratios of one round, so that a slow spell of this shared machine weighs on both sides of a
//! pair. Nothing here asserts a time: the table is the result, and README.md shows one.
//!
//! `MEVI_BENCH_ROUNDS=N` changes the number of rounds (default 5); `MEVI_BENCH_ONLY=a,b` runs
//! the workloads whose name contains one of the comma-separated substrings;
//! `MEVI_BENCH_COMPARE=path` adds another build of mevi-actors beside this one, to try a change.

#[path = "workloads/compile.rs"]
mod compile;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use compile::{compile, separate_maps};

use mevi_actors::kernel::idle::IdlePolling;
use userfaultfd::{Event as UffdEvent, EventBuffer, ReadWrite, Uffd};

/// The workloads measured again with idle CPUs polling.
const IDLE_POLL_WORKLOADS: [&str; 6] = [
    "touch-write-1t",
    "touch-write-2t",
    "touch-read-1t",
    "churn",
    "forkexec",
    "malloc",
];

/// mevi-actors with an option that costs something per event it takes a stack at, measured
/// against mevi-actors without it on the workloads that option is for (issue 13's "Speed").
struct Variant {
    /// The runner's name in the table.
    label: &'static str,
    /// What is added to `mevi-actors run`.
    args: &'static [&'static str],
    /// The workloads it runs on (exact names).
    workloads: &'static [&'static str],
    /// The target: at most this many times mevi-actors' time without the option.
    max_ratio: f64,
    /// Which stream lines stand for one stack taken: the per-stack cost divides by their count.
    took_stack: fn(&serde_json::Value) -> bool,
    /// Text every line `took_stack` counts has (only those lines are parsed).
    marked_by: &'static str,
    /// What `took_stack` counts, for the table.
    counted: &'static str,
}

/// Each entry is a runner (`Runner::MeviVariant(its index)`), on its workloads, with its target
/// and per-stack cost in the table: adding one is adding an entry here.
static VARIANTS: [Variant; 3] = [
    Variant {
        label: "mevi-actors --stacks (the default)",
        args: &["--stacks"],
        workloads: &["churn", "malloc", "sort", "gcc", "true"],
        max_ratio: 1.3,
        // A stack per layout syscall, about: a syscall's `map`/`unmap`/`remap`/`discard`/`brk`
        // line with its `site`, not the `split` lines that repeat it nor the `redescribe` lines
        // (those carry `cause`). One munmap over several mappings counts once per mapping.
        took_stack: |line| line.get("site").is_some() && line.get("cause").is_none(),
        marked_by: "\"site\"",
        counted: "lines with a site and no cause, about the layout syscalls",
    },
    // `--touch-stacks 64`: a sampled page fault's stack, unwound by the lane (issue 13).
    Variant {
        label: "mevi-actors --touch-stacks 64",
        args: &["--touch-stacks", "64"],
        workloads: &["touch-write-1t"],
        max_ratio: 1.2,
        took_stack: |line| line["ev"] == "resident" && line.get("site").is_some(),
        marked_by: "\"site\"",
        counted: "resident lines with a site",
    },
    // Samples every 1 ms against the default 10 ms (issue 15: `--sample-ms 10` costs at most
    // 5%). Sampling ten times as often costs about nine times the default's sampling more: the
    // default costs at most 5% of an unsampled run while this is within 1.45x (1 + 9 x 5% over
    // 1.05). "Per stack" is per `rss` line here: a sample's cost, of which the default takes
    // 100 a second.
    Variant {
        label: "mevi-actors --sample-ms 1",
        args: &["--sample-ms", "1"],
        workloads: &["touch-write-1t"],
        max_ratio: 1.45,
        took_stack: |line| line["ev"] == "rss",
        marked_by: "\"rss\"",
        counted: "rss lines, a sample each",
    },
];

/// What `Runner::MeviOnlyLinker` adds to `mevi-actors run`: of a build, only the linker followed.
const ONLY_LINKER: [&str; 4] = ["--only", "ld", "--only", "collect2"];

/// How long the busy floor keeps reading an empty descriptor before it sleeps in `poll`.
const BUSY_READ: Duration = Duration::from_micros(50);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Runner {
    Untraced,
    Mevi,
    /// mevi-actors with `VARIANTS[i]`'s option: listed right after mevi-actors without it.
    MeviVariant(usize),
    /// `ONLY_LINKER`: what following some programs (`--only`) saves over following all.
    MeviOnlyLinker,
    /// Untraced, under a seccomp filter that allows everything: what any seccomp-based tracer
    /// costs a syscall it does not stop.
    SeccompOnly,
    /// mevi-actors without userfaultfd: the layout tracking alone.
    MeviNoFaults,
    /// `--faults scan`: pages by page-table scans, every 10 ms (issue 14).
    MeviScan,
    /// `--faults scan --sample-ms 1`.
    MeviScanFast,
    /// `--faults records`: scans, with each page's thread from the kernel's fault records
    /// (issue 27).
    MeviRecords,
    /// `--verify --verify-every 20`: a check of every space every 20 ms (the mapping series).
    MeviVerifyEvery,
    /// Another build of mevi-actors (`MEVI_BENCH_COMPARE`), for trying a change side by side.
    MeviCompared,
    /// One thread: poll, read a batch, resolve each fault.
    Floor,
    /// The same, reading again for `BUSY_READ` before each sleep.
    FloorBusy,
    /// Untraced, each thread recording its own faults as `--faults records` has the kernel do,
    /// a thread emptying the rings: the records' own cost, the floor of that mode.
    RecordsFloor,
    StraceSeccomp,
    Strace,
}

impl Runner {
    fn label(self) -> &'static str {
        match self {
            Runner::Untraced => "untraced",
            Runner::Mevi => "mevi-actors",
            Runner::MeviVariant(i) => VARIANTS[i].label,
            Runner::MeviOnlyLinker => "mevi-actors --only ld --only collect2",
            Runner::SeccompOnly => "seccomp filter, no tracer",
            Runner::MeviNoFaults => "mevi-actors --no-faults",
            Runner::MeviScan => "mevi-actors --faults scan",
            Runner::MeviScanFast => "mevi-actors --faults scan --sample-ms 1",
            Runner::MeviRecords => "mevi-actors --faults records",
            Runner::MeviVerifyEvery => "mevi-actors --verify --verify-every 20",
            Runner::MeviCompared => "MEVI_BENCH_COMPARE",
            Runner::Floor => "floor (poll)",
            Runner::FloorBusy => "floor (busy-read 50us)",
            Runner::RecordsFloor => "records floor",
            Runner::StraceSeccomp => "strace --seccomp-bpf",
            Runner::Strace => "strace",
        }
    }
}

#[derive(Clone)]
struct Workload {
    name: String,
    what: String,
    argv: Vec<String>,
    runners: Vec<Runner>,
    /// Runners too slow for every round (strace on a million syscalls): run once, and said so.
    once: Vec<Runner>,
}

/// One timed run.
#[derive(Clone, Debug)]
struct Sample {
    wall: Duration,
    /// From mevi-actors' summary line: lines written, its own peak RSS, and `site` lines.
    lines: Option<u64>,
    tracer_peak_rss: Option<u64>,
    sites: Option<u64>,
    /// Under a `Variant`: the stream's lines its `took_stack` counts.
    stacks: Option<u64>,
    /// From the summary line: the checks `--verify` made.
    checks: Option<u64>,
    /// Stopped at `ONCE_LIMIT`: `wall` is a lower bound.
    stopped: bool,
}

/// How long a runner too slow for every round may run before it is stopped (its time is then
/// reported as a lower bound).
const ONCE_LIMIT: Duration = Duration::from_secs(30);

struct Bench {
    mevi: PathBuf,
    compared: Option<PathBuf>,
    /// Run mevi-actors with `--idle-poll`.
    idle_poll: bool,
    strace: Option<PathBuf>,
    dir: PathBuf,
    /// The compiled benches/workloads/bench.c.
    workload: String,
    page_size: u64,
}

fn main() {
    // `cargo bench` passes `--bench`; there is nothing to filter by name beyond MEVI_BENCH_ONLY.
    let rounds: usize = std::env::var("MEVI_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let only: Option<Vec<String>> = std::env::var("MEVI_BENCH_ONLY")
        .ok()
        .map(|list| list.split(',').map(str::to_string).collect());
    let wanted = |name: &str| {
        only.as_ref()
            .is_none_or(|list| list.iter().any(|o| name.contains(o.as_str())))
    };
    let mut bench = Bench::new();
    let started = Instant::now();
    println!("mevi-actors overhead bench: {}", machine());
    println!(
        "{rounds} rounds, runners alternating; ratios are medians of per-round ratios to the \
         untraced run; \"mevi-actors\" is run --no-stacks"
    );
    if bench.strace.is_none() {
        println!("strace: not found and could not be installed; its columns are skipped");
    }
    let mut targets = Vec::new();
    let workloads = bench.workloads();
    let selected = |w: &&Workload| wanted(&w.name);
    for workload in workloads.iter().filter(selected) {
        let results = bench.measure(workload, rounds);
        report(workload, &results, "", &mut targets);
    }
    if wanted("touch-1g") {
        targets.push(bench.memory_for_one_gib());
    }
    if wanted("sleepers") {
        targets.push(bench.memory_per_live_space());
    }
    if wanted("attach") {
        targets.extend(bench.attach_cost(rounds));
    }
    if wanted("mappings") {
        targets.extend(bench.mapping_series(rounds));
    }
    // The same hand-offs with idle CPUs polling instead of halting, for every runner alike.
    match IdlePolling::hold() {
        Ok(_held) => {
            println!(
                "\n== idle CPUs polling: the bench holds /dev/cpu_dma_latency at 0 for every \
                 runner, and mevi-actors runs with --idle-poll =="
            );
            bench.idle_poll = true;
            for workload in workloads.iter().filter(selected) {
                if !IDLE_POLL_WORKLOADS.contains(&workload.name.as_str()) {
                    continue;
                }
                let workload = Workload {
                    runners: workload
                        .runners
                        .iter()
                        .copied()
                        .filter(|r| {
                            !matches!(
                                r,
                                Runner::Strace
                                    | Runner::MeviNoFaults
                                    | Runner::MeviVariant(_)
                                    | Runner::MeviScan
                                    | Runner::MeviScanFast
                                    | Runner::MeviRecords
                            )
                        })
                        .collect(),
                    once: vec![],
                    ..workload.clone()
                };
                let results = bench.measure(&workload, rounds);
                report(&workload, &results, "idle-poll: ", &mut targets);
            }
        }
        Err(e) => println!("\nidle polling: cannot hold /dev/cpu_dma_latency ({e}); skipped"),
    }
    println!("\ntargets");
    for t in &targets {
        println!("  {t}");
    }
    println!("\nbench took {:.0} s", started.elapsed().as_secs_f64());
}

impl Bench {
    fn new() -> Self {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench");
        std::fs::create_dir_all(&dir).expect("creating the bench's directory");
        // SAFETY: sysconf has no preconditions.
        let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
        Self {
            mevi: PathBuf::from(env!("CARGO_BIN_EXE_mevi-actors")),
            compared: std::env::var_os("MEVI_BENCH_COMPARE").map(PathBuf::from),
            idle_poll: false,
            strace: find_or_install_strace(),
            workload: compile(&dir, "bench").display().to_string(),
            dir,
            page_size,
        }
    }

    fn workloads(&self) -> Vec<Workload> {
        use Runner::*;
        let bench = &self.workload;
        let strace: Vec<Runner> = if self.strace.is_some() {
            vec![StraceSeccomp, Strace]
        } else {
            vec![]
        };
        let with = |base: &[Runner], extra: &[Runner]| -> Vec<Runner> {
            base.iter().chain(extra).copied().collect()
        };
        let faults = [
            Untraced,
            Mevi,
            MeviScan,
            MeviScanFast,
            MeviRecords,
            RecordsFloor,
            Floor,
            FloorBusy,
        ];
        let layout = [
            Untraced,
            Mevi,
            MeviNoFaults,
            MeviScan,
            MeviScanFast,
            MeviRecords,
        ];
        let mut list = Vec::new();
        for (threads, access) in [(1, "write"), (2, "write"), (1, "read"), (2, "read")] {
            list.push(Workload {
                name: format!("touch-{access}-{threads}t"),
                what: format!("touch 256 MiB, {threads} thread(s), {access} faults"),
                argv: vec![
                    bench.clone(),
                    "touch".into(),
                    threads.to_string(),
                    "256".into(),
                    access.into(),
                ],
                runners: faults.to_vec(),
                once: vec![],
            });
        }
        list.push(Workload {
            name: "churn".into(),
            what: "4 threads x 2000 rounds of mmap/touch/madvise/munmap 64 KiB".into(),
            argv: vec![bench.clone(), "churn".into(), "4".into(), "2000".into()],
            runners: with(&layout, &strace),
            once: vec![],
        });
        list.push(Workload {
            name: "syscalls".into(),
            what: "2 threads x 1,000,000 getppid()".into(),
            argv: vec![
                bench.clone(),
                "syscalls".into(),
                "2".into(),
                "1000000".into(),
            ],
            runners: vec![Untraced, Mevi, MeviScan, MeviRecords, SeccompOnly],
            // Each strace run takes over 2 minutes here: strace 6.1 stops every syscall of a
            // thread, filter or not. One run of the filtered one, to keep the bench short.
            once: strace
                .iter()
                .copied()
                .filter(|&r| r == StraceSeccomp)
                .collect(),
        });
        list.push(Workload {
            name: "forkexec".into(),
            what: "fork + exec /bin/true, 300 times".into(),
            argv: vec![bench.clone(), "forkexec".into(), "300".into()],
            runners: with(&layout, &strace),
            once: vec![],
        });
        list.push(Workload {
            name: "malloc".into(),
            what: "glibc malloc/memset/free, 4 threads x 20000".into(),
            argv: vec![bench.clone(), "malloc".into(), "4".into(), "20000".into()],
            runners: with(&layout, &strace),
            once: vec![],
        });
        let input = self.sort_input();
        list.push(Workload {
            name: "sort".into(),
            what: "GNU sort of a 16 MiB file (2 threads)".into(),
            argv: vec![
                "sort".into(),
                "--parallel=2".into(),
                "-o".into(),
                self.dir.join("sorted").display().to_string(),
                input.display().to_string(),
            ],
            runners: with(&layout, &strace),
            once: vec![],
        });
        // gcc runs cc1 and as: three programs, each mapping its libraries, and cc1 allocating.
        list.push(Workload {
            name: "gcc".into(),
            what: "gcc -O2 -c of benches/workloads/bench.c (cc1 and as)".into(),
            argv: vec![
                "gcc".into(),
                "-O2".into(),
                "-c".into(),
                "-o".into(),
                self.dir.join("gcc-bench.o").display().to_string(),
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("benches/workloads/bench.c")
                    .display()
                    .to_string(),
            ],
            runners: with(&layout, &strace),
            once: vec![],
        });
        // Of a build, --only follows the linker alone: make, sh, gcc, cc1 and as are layout stops.
        list.push(Workload {
            name: "make-j2".into(),
            what: "make -j2 -B of 8 generated C files (gcc -O2 -c each, then the link)".into(),
            argv: vec![
                "make".into(),
                "-j2".into(),
                // Every target remade: each run compiles everything.
                "-B".into(),
                "-C".into(),
                self.make_project().display().to_string(),
            ],
            runners: vec![
                Untraced,
                Mevi,
                MeviOnlyLinker,
                MeviNoFaults,
                MeviScan,
                MeviRecords,
            ],
            once: vec![],
        });
        list.push(Workload {
            name: "true".into(),
            what: "/bin/true".into(),
            argv: vec!["/bin/true".into()],
            runners: vec![Untraced, Mevi],
            once: vec![],
        });
        for w in &mut list {
            let after_mevi = w
                .runners
                .iter()
                .position(|&r| r == Mevi)
                .map_or(0, |i| i + 1);
            let variants = VARIANTS.iter().enumerate();
            let here = variants.filter(|(_, v)| v.workloads.contains(&w.name.as_str()));
            for (n, (i, _)) in here.enumerate() {
                w.runners.insert(after_mevi + n, MeviVariant(i));
            }
        }
        list
    }

    /// A file of random lines for `sort`, made once.
    fn sort_input(&self) -> PathBuf {
        let path = self.dir.join("sort-input");
        if std::fs::metadata(&path).is_ok_and(|m| m.len() > 16 << 20) {
            return path;
        }
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut text = String::with_capacity(17 << 20);
        while text.len() <= 16 << 20 {
            for _ in 0..(8 + seed % 40) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                text.push((b'a' + (seed % 26) as u8) as char);
            }
            text.push('\n');
        }
        std::fs::write(&path, text).expect("writing sort's input");
        path
    }

    /// A directory of 8 C files of 32 functions each (about 0.4 s of cc1 apiece here), a main,
    /// and a Makefile that compiles each and links them.
    fn make_project(&self) -> PathBuf {
        const FILES: usize = 8;
        const FUNCTIONS: usize = 32;
        // A loop around a switch, so that cc1 -O2 has work in each; NAME and K are replaced.
        const FUNCTION: &str = r"unsigned long NAME(const unsigned char *p, unsigned long n)
{
    unsigned long h = K;
    for (unsigned long i = 0; i < n; i++) {
        switch ((p[i] ^ K) & 7) {
        case 0: h = h * 31 + p[i]; break;
        case 1: h ^= h >> (K % 13 + 1); break;
        case 2: h += (unsigned long)p[i] << (K % 7); break;
        case 3: h = (h << 5) | (h >> 59); break;
        case 4: h -= p[i] * (K + 3ul); break;
        case 5: h *= 2 * K + 1ul; break;
        case 6: h ^= i * (K + 7ul); break;
        default: h += h / (p[i] + 1); break;
        }
    }
    return h;
}
";
        let dir = self.dir.join("make-j2");
        std::fs::create_dir_all(&dir).expect("creating the make project's directory");
        std::fs::write(dir.join("main.c"), "int main(void) { return 0; }\n")
            .expect("writing main.c");
        let mut objects = vec!["main.o".to_string()];
        for file in 0..FILES {
            let text: String = (0..FUNCTIONS)
                .map(|f| {
                    FUNCTION
                        .replace("NAME", &format!("f{file}_{f}"))
                        .replace('K', &(file * FUNCTIONS + f + 1).to_string())
                })
                .collect();
            std::fs::write(dir.join(format!("f{file}.c")), text).expect("writing a C file");
            objects.push(format!("f{file}.o"));
        }
        let makefile = format!(
            "prog: {}\n\tcc -o $@ $^\n%.o: %.c\n\tcc -O2 -c -o $@ $<\n",
            objects.join(" ")
        );
        std::fs::write(dir.join("Makefile"), makefile).expect("writing the Makefile");
        dir
    }

    fn measure(&self, w: &Workload, rounds: usize) -> BTreeMap<Runner, Vec<Sample>> {
        println!("\n{}: {}", w.name, w.what);
        let mut results: BTreeMap<Runner, Vec<Sample>> = BTreeMap::new();
        let mut runners = w.runners.clone();
        if self.compared.is_some() {
            runners.insert(2, Runner::MeviCompared);
        }

        // One run of each first, not counted: page cache, binaries, the file sort reads.
        for &r in &runners {
            self.run(r, &w.argv);
        }
        for _ in 0..rounds {
            for &r in &runners {
                results.entry(r).or_default().push(self.run(r, &w.argv));
            }
        }
        for &r in &w.once {
            let sample = self.run_limited(r, &w.argv, Some(ONCE_LIMIT));
            results.entry(r).or_default().push(sample);
        }
        results
    }

    fn run(&self, runner: Runner, argv: &[String]) -> Sample {
        self.run_limited(runner, argv, None)
    }

    /// `run`, stopping the run (strace and its tracees) once it has lasted `limit`.
    fn run_limited(&self, runner: Runner, argv: &[String], limit: Option<Duration>) -> Sample {
        match runner {
            Runner::Untraced => self.timed(Command::new(&argv[0]).args(&argv[1..]), None),
            Runner::SeccompOnly => self.timed(
                Command::new(&argv[0])
                    .args(&argv[1..])
                    .env("MEVI_BENCH_SECCOMP", "1"),
                None,
            ),
            Runner::RecordsFloor => self.timed(
                Command::new(&argv[0])
                    .args(&argv[1..])
                    .env("MEVI_BENCH_RECORDS_FLOOR", "1"),
                None,
            ),
            Runner::Mevi
            | Runner::MeviVariant(_)
            | Runner::MeviOnlyLinker
            | Runner::MeviNoFaults
            | Runner::MeviScan
            | Runner::MeviScanFast
            | Runner::MeviRecords
            | Runner::MeviVerifyEvery
            | Runner::MeviCompared => {
                let out = self.dir.join("stream.jsonl");
                let mevi = match runner {
                    Runner::MeviCompared => self.compared.as_ref().expect("MEVI_BENCH_COMPARE"),
                    _ => &self.mevi,
                };
                let mut cmd = Command::new(mevi);
                cmd.args(["run", "--no-summary", "-o"]).arg(&out);
                // The core's cost, as every figure before call stacks: they are the default
                // now, measured by their own variant against this.
                if runner != Runner::MeviCompared {
                    cmd.arg("--no-stacks");
                }
                match runner {
                    Runner::MeviNoFaults => {
                        cmd.arg("--no-faults");
                    }
                    Runner::MeviScan => {
                        cmd.args(["--faults", "scan"]);
                    }
                    Runner::MeviScanFast => {
                        cmd.args(["--faults", "scan", "--sample-ms", "1"]);
                    }
                    Runner::MeviRecords => {
                        cmd.args(["--faults", "records"]);
                    }
                    Runner::MeviVerifyEvery => {
                        cmd.args(["--verify", "--verify-every", "20"]);
                    }
                    Runner::MeviOnlyLinker => {
                        cmd.args(ONLY_LINKER);
                    }
                    _ => {}
                }
                if let Runner::MeviVariant(i) = runner {
                    cmd.args(VARIANTS[i].args);
                }
                if self.idle_poll {
                    cmd.arg("--idle-poll");
                }
                cmd.arg("--").args(argv);
                let mut sample = self.timed(&mut cmd, Some(&out));
                if let Runner::MeviVariant(i) = runner {
                    let v = &VARIANTS[i];
                    sample.stacks = Some(count_lines(&out, v.marked_by, v.took_stack));
                }
                sample
            }
            Runner::Floor => self.floor(argv, Duration::ZERO),
            Runner::FloorBusy => self.floor(argv, BUSY_READ),
            Runner::StraceSeccomp | Runner::Strace => {
                let strace = self.strace.as_ref().expect("strace runs only when present");
                let mut cmd = Command::new(strace);
                cmd.args(["-f", "-qq"]);
                if runner == Runner::StraceSeccomp {
                    cmd.arg("--seccomp-bpf");
                }
                cmd.args(["-e", "trace=%memory", "-o", "/dev/null", "--"])
                    .args(argv);
                self.timed_within(&mut cmd, None, limit)
            }
        }
    }

    /// Runs `cmd` to its end; with `stream`, reads mevi-actors' summary line from it.
    fn timed(&self, cmd: &mut Command, stream: Option<&Path>) -> Sample {
        self.timed_within(cmd, stream, None)
    }

    /// `timed`; past `limit`, the run's whole process group is killed and the sample says so.
    fn timed_within(
        &self,
        cmd: &mut Command,
        stream: Option<&Path>,
        limit: Option<Duration>,
    ) -> Sample {
        use std::os::unix::process::CommandExt;
        let start = Instant::now();
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
        let mut stopped = false;
        let status = loop {
            match limit {
                None => break child.wait(),
                Some(limit) => match child.try_wait() {
                    Ok(Some(status)) => break Ok(status),
                    Ok(None) if start.elapsed() < limit => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    Ok(None) => {
                        // The tracer and what it traces: a tracer killed alone would leave its
                        // tracees running.
                        let group = nix::unistd::Pid::from_raw(-(child.id() as i32));
                        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
                        stopped = true;
                        break child.wait();
                    }
                    Err(e) => break Err(e),
                },
            }
        }
        .unwrap_or_else(|e| panic!("waiting for {cmd:?}: {e}"));
        let wall = start.elapsed();
        assert!(stopped || status.success(), "{cmd:?} failed: {status}");
        let summary = stream.map(summary_of).unwrap_or_default();
        Sample {
            wall,
            lines: summary.lines,
            tracer_peak_rss: summary.tracer_peak_rss,
            sites: summary.sites,
            stacks: None,
            checks: summary.checks,
            stopped,
        }
    }

    /// The program with the floor's handler resolving its first touches.
    fn floor(&self, argv: &[String], busy: Duration) -> Sample {
        let sock = self.dir.join("floor.sock");
        let _ = std::fs::remove_file(&sock);
        let listener = UnixListener::bind(&sock).expect("binding the floor's socket");
        let start = Instant::now();
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .env("MEVI_BENCH_FLOOR_SOCK", &sock)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawning the workload");
        let (mut stream, _) = listener.accept().expect("the workload's connection");
        let uffd = receive_fd(&stream);
        let stop = Arc::new(AtomicBool::new(false));
        let handler = {
            let stop = stop.clone();
            let page_size = self.page_size;
            std::thread::spawn(move || floor_handler(uffd, page_size, busy, &stop))
        };
        stream.write_all(&[0]).expect("answering the workload");
        let status = child.wait().expect("waiting for the workload");
        let wall = start.elapsed();
        stop.store(true, Ordering::Relaxed);
        let resolved = handler.join().expect("the floor's handler");
        assert!(
            status.success(),
            "the workload failed under the floor: {status}"
        );
        assert!(resolved > 0, "the floor resolved no fault");
        Sample {
            wall,
            lines: None,
            tracer_peak_rss: None,
            sites: None,
            stacks: None,
            checks: None,
            stopped: false,
        }
    }

    /// mevi-actors' own peak RSS while it traces 1 GiB of first touches.
    /// mevi-actors' own memory per live, idle address space: its peak RSS with 1,500 processes
    /// asleep at once, less its peak with none, over 1,500.
    fn memory_per_live_space(&self) -> String {
        const SPACES: u64 = 1500;
        println!("\nsleepers: {SPACES} processes asleep at once (mevi-actors only, once)");
        let peak = |n: u64| {
            let argv = vec![self.workload.clone(), "sleepers".into(), n.to_string()];
            let s = self.run(Runner::Mevi, &argv);
            s.tracer_peak_rss.unwrap_or(0)
        };
        let (none, many) = (peak(0), peak(SPACES));
        let per_space = many.saturating_sub(none) / SPACES;
        println!(
            "  {:<24} peak RSS {} with none, {} with {SPACES}: {:.1} KiB per live space",
            Runner::Mevi.label(),
            mib(none),
            mib(many),
            per_space as f64 / 1024.0
        );
        target(
            "mevi-actors' memory per idle live address space <= 32 KiB",
            format!("{:.1} KiB", per_space as f64 / 1024.0),
            per_space <= 32 << 10,
        )
    }

    /// `attach` on a running 4-thread toucher (issue 14): the median round while attached, and
    /// after the detach, each against a never-attached run's, round for round. Attach comes
    /// once the first round is done, the detach after `ATTACHED_ROUNDS` traced rounds.
    fn attach_cost(&self, rounds: usize) -> Vec<String> {
        const ROUNDS: usize = 30;
        const ATTACHED_ROUNDS: usize = 10;
        let argv = [
            "retouch".to_string(),
            "4".into(),
            "64".into(),
            ROUNDS.to_string(),
        ];
        println!(
            "\nattach: {ROUNDS} rounds of touching 64 MiB from 4 threads (map, touch, unmap); \
             median ms a round"
        );
        let (mut attached, mut after) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let alone = median(
                self.retouch_rounds(&argv, None)
                    .into_iter()
                    .map(|r| r.0)
                    .collect(),
            );
            let with = self.retouch_rounds(&argv, Some(ATTACHED_ROUNDS));
            let traced: Vec<f64> = with.iter().filter(|r| r.1).map(|r| r.0).collect();
            let untraced_after: Vec<f64> = with.iter().filter(|r| r.2).map(|r| r.0).collect();
            println!(
                "  never attached {alone:.1} ms, attached {:.1} ms ({} rounds), after detach \
                 {:.1} ms ({} rounds)",
                median(traced.clone()),
                traced.len(),
                median(untraced_after.clone()),
                untraced_after.len()
            );
            attached.push(median(traced) / alone);
            after.push(median(untraced_after) / alone);
        }
        let (attached, after) = (median(attached), median(after));
        println!("  attached {attached:.2}x, after detach {after:.2}x the never-attached rounds");
        vec![
            target(
                "attach: a 4-thread toucher while attached <= 1.2x",
                format!("{attached:.2}x"),
                attached <= 1.2,
            ),
            target(
                "attach: the same after detach <= 1.05x (untouched)",
                format!("{after:.2}x"),
                after <= 1.05,
            ),
        ]
    }

    /// The rounds of one `bench retouch` run: ms, whether a tracer was attached, and whether
    /// it began after mevi-actors had ended. With `attach`, attached to from after its first
    /// round, and detached by SIGINT once that many rounds were traced.
    fn retouch_rounds(&self, argv: &[String], attach: Option<usize>) -> Vec<(f64, bool, bool)> {
        use std::io::BufRead;
        let mut child = Command::new(&self.workload)
            .args(argv)
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting bench retouch");
        let lines = std::io::BufReader::new(child.stdout.take().expect("its stdout"));
        let mut mevi: Option<std::process::Child> = None;
        let mut ended: Option<Instant> = None;
        let mut rounds = Vec::new();
        for line in lines.lines().map_while(Result::ok) {
            let mut words = line.split_whitespace().skip(1);
            let ms: f64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0.0);
            let traced = words.next() == Some("1");
            let began = Instant::now() - Duration::from_secs_f64(ms / 1e3);
            rounds.push((ms, traced, ended.is_some_and(|e| began > e)));
            let Some(limit) = attach else { continue };
            if rounds.len() == 1 {
                mevi = Some(
                    Command::new(&self.mevi)
                        .args(["attach", "--no-summary", "-o", "/dev/null", "-p"])
                        .arg(child.id().to_string())
                        .spawn()
                        .expect("starting mevi-actors attach"),
                );
            } else if rounds.iter().filter(|r| r.1).count() == limit
                && ended.is_none()
                && let Some(m) = &mut mevi
            {
                let pid = nix::unistd::Pid::from_raw(m.id() as i32);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
                // Rounds after the detach count once mevi-actors is gone: until then it
                // still writes the stream's end, on the same CPUs.
                let _ = m.wait();
                ended = Some(Instant::now());
            }
        }
        let _ = child.wait();
        if let Some(mut m) = mevi {
            let _ = m.wait();
        }
        rounds
    }

    /// The mapping-count series (issue 25 item 11): N separate one-page mappings, each written
    /// once and unmapped by its own munmap (tests/workloads/separate_maps.c), at 1k, 10k and 60k
    /// mappings; the cost per mapping of each runner, which is to stay flat as N grows. Under
    /// `--verify-every 20` each check reads every mapping, and the program runs 20 ms between
    /// checks, so the run's cost per mapping grows with N however cheap a check is: what is to
    /// stay flat there is a check's cost per mapping, (its run less mevi-actors' own) / checks /
    /// N. At most 3 rounds (60k mappings under checks take about a minute a run here).
    fn mapping_series(&self, rounds: usize) -> Vec<String> {
        const COUNTS: [u64; 3] = [1_000, 10_000, 60_000];
        use Runner::*;
        let runners = [Untraced, Mevi, MeviScan, MeviVerifyEvery];
        let rounds = rounds.clamp(1, 3);
        let program = separate_maps(&self.dir);
        println!(
            "\nmappings: N separate one-page mappings, each written once and unmapped \
             (tests/workloads/separate_maps.c); us per mapping, median of {rounds} round(s), runners \
             alternating; the last column is a check's us per mapping"
        );
        println!(
            "  {:>6}  {:>10}  {:>12}  {:>14}  {:>18}  {:>10}",
            "N", "untraced", "mevi-actors", "--faults scan", "--verify-every 20", "a check"
        );
        // (N, us per mapping of each runner, a check's us per mapping)
        let mut rows: Vec<(u64, Vec<f64>, f64)> = Vec::new();
        for n in COUNTS {
            let argv = vec![program.display().to_string(), n.to_string()];
            let mut results: BTreeMap<Runner, Vec<Sample>> = BTreeMap::new();
            for _ in 0..rounds {
                for &r in &runners {
                    results.entry(r).or_default().push(self.run(r, &argv));
                }
            }
            let per_mapping: Vec<f64> = runners
                .iter()
                .map(|r| median(secs(&results[r])) * 1e6 / n as f64)
                .collect();
            // Round by round: the checked run less the unchecked one, over its checks.
            let per_check = median(
                results[&MeviVerifyEvery]
                    .iter()
                    .zip(&results[&Mevi])
                    .map(|(checked, plain)| {
                        let extra = checked.wall.as_secs_f64() - plain.wall.as_secs_f64();
                        let checks = checked.checks.unwrap_or(0).max(1) as f64;
                        extra.max(0.0) * 1e6 / checks / n as f64
                    })
                    .collect(),
            );
            let checks = median(
                results[&MeviVerifyEvery]
                    .iter()
                    .map(|s| s.checks.unwrap_or(0) as f64)
                    .collect(),
            );
            println!(
                "  {n:>6}  {:>10.1}  {:>12.1}  {:>14.1}  {:>18.1}  {:>10.2}  ({checks:.0} checks)",
                per_mapping[0], per_mapping[1], per_mapping[2], per_mapping[3], per_check
            );
            rows.push((n, per_mapping, per_check));
        }
        let (first, last) = (&rows[0], &rows[rows.len() - 1]);
        let mut targets: Vec<String> = [(1, "mevi-actors"), (2, "mevi-actors --faults scan")]
            .into_iter()
            .map(|(i, name)| {
                let growth = last.1[i] / first.1[i];
                target(
                    &format!("mappings: {name}, us per mapping at 60k <= 1.5x at 1k"),
                    format!("{growth:.2}x"),
                    growth <= 1.5,
                )
            })
            .collect();
        // At 1k a run makes a handful of checks: their cost is compared from 10k on.
        let growth = last.2 / rows[1].2;
        targets.push(target(
            "mappings: a check's us per mapping at 60k <= 1.5x at 10k",
            format!("{growth:.2}x"),
            growth <= 1.5,
        ));
        targets
    }

    fn memory_for_one_gib(&self) -> String {
        let argv: Vec<String> = vec![
            self.workload.clone(),
            "touch".into(),
            "2".into(),
            "1024".into(),
            "write".into(),
        ];
        println!("\ntouch-1g: touch 1 GiB, 2 threads, write faults (mevi-actors only, once)");
        let s = self.run(Runner::Mevi, &argv);
        let rss = s.tracer_peak_rss.unwrap_or(0);
        println!(
            "  {:<24} {:>10.3} s  {} lines, mevi-actors peak RSS {}",
            Runner::Mevi.label(),
            s.wall.as_secs_f64(),
            s.lines.unwrap_or(0),
            mib(rss)
        );
        target(
            "mevi-actors' peak RSS tracing 1 GiB touched < 64 MiB",
            mib(rss),
            rss < 64 << 20,
        )
    }
}

/// The floor's one thread: wait for the descriptor to be readable, read a batch, resolve each
/// fault as mevi-actors does (a copied zero page for writes, the zero page for reads).
fn floor_handler(uffd: Uffd, page_size: u64, busy: Duration, stop: &AtomicBool) -> u64 {
    let mut buf = EventBuffer::new(64);
    let zeros = vec![0u8; page_size as usize];
    let mut resolved = 0;
    let mut last = Instant::now();
    loop {
        let mut read_any = false;
        let events = uffd.read_events(&mut buf).expect("reading the userfaultfd");
        for event in events {
            read_any = true;
            if let Ok(UffdEvent::Pagefault { addr, rw, .. }) = event {
                let page = (addr as u64 & !(page_size - 1)) as *mut libc::c_void;
                let len = page_size as usize;
                // SAFETY: the kernel checks that `page` is in the workload's registered range;
                // `zeros` is a live page-sized buffer that COPY only reads.
                let done = unsafe {
                    if rw == ReadWrite::Write {
                        uffd.copy(zeros.as_ptr().cast(), page, len, true)
                    } else {
                        uffd.zeropage(page, len, true)
                    }
                };
                match done {
                    Ok(_) => resolved += 1,
                    Err(_) => {
                        let _ = uffd.wake(page, len);
                    }
                }
            }
        }
        if read_any {
            last = Instant::now();
            continue;
        }
        if last.elapsed() < busy {
            std::hint::spin_loop();
            continue;
        }
        if stop.load(Ordering::Relaxed) {
            return resolved;
        }
        let mut fds = [libc::pollfd {
            fd: uffd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        // SAFETY: one valid pollfd; the timeout lets the thread see `stop`.
        unsafe { libc::poll(fds.as_mut_ptr(), 1, 20) };
    }
}

/// The userfaultfd the workload sent with SCM_RIGHTS.
fn receive_fd(stream: &std::os::unix::net::UnixStream) -> Uffd {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut byte = [0u8; 1];
    let mut iov = [std::io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!(std::os::fd::RawFd);
    let msg = recvmsg::<()>(
        stream.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::empty(),
    )
    .expect("receiving the userfaultfd");
    for cmsg in msg.cmsgs().expect("control messages") {
        if let ControlMessageOwned::ScmRights(fds) = cmsg
            && let Some(&fd) = fds.first()
        {
            // SAFETY: the kernel just installed `fd` in this process for us alone.
            let owned = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: `owned` is a userfaultfd the workload already did the API handshake on.
            return unsafe { Uffd::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(owned)) };
        }
    }
    panic!("the workload sent no descriptor");
}

/// What a run's summary line says, where it says it.
#[derive(Default)]
struct Summary {
    lines: Option<u64>,
    tracer_peak_rss: Option<u64>,
    sites: Option<u64>,
    checks: Option<u64>,
}

fn summary_of(stream: &Path) -> Summary {
    let text = std::fs::read_to_string(stream).unwrap_or_default();
    let Some(last) = text.lines().last() else {
        return Summary::default();
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(last) else {
        return Summary::default();
    };
    let totals = &v["totals"];
    Summary {
        lines: totals["lines"].as_u64(),
        tracer_peak_rss: totals["tracer_peak_rss_bytes"].as_u64(),
        sites: totals["sites"].as_u64(),
        checks: totals["verify"]["points"].as_u64(),
    }
}

/// The stream's lines that `counts`; only lines naming a site are parsed.
fn count_lines(stream: &Path, marked_by: &str, counts: fn(&serde_json::Value) -> bool) -> u64 {
    let text = std::fs::read_to_string(stream).unwrap_or_default();
    text.lines()
        .filter(|l| l.contains(marked_by))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(counts)
        .count() as u64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn secs(samples: &[Sample]) -> Vec<f64> {
    samples.iter().map(|s| s.wall.as_secs_f64()).collect()
}

/// The median of `a[i] / b[i]` over the rounds both ran in; a lone run against the median of `b`.
fn paired_ratio(a: &[Sample], b: &[Sample]) -> f64 {
    if a.len() == b.len() {
        median(
            a.iter()
                .zip(b)
                .map(|(x, y)| x.wall.as_secs_f64() / y.wall.as_secs_f64())
                .collect(),
        )
    } else {
        median(secs(a)) / median(secs(b))
    }
}

fn report(
    w: &Workload,
    results: &BTreeMap<Runner, Vec<Sample>>,
    section: &str,
    targets: &mut Vec<String>,
) {
    let Some(base) = results.get(&Runner::Untraced) else {
        return;
    };
    for (&runner, samples) in results {
        // A run stopped at its limit gives lower bounds.
        let at_least = if samples.iter().any(|s| s.stopped) {
            ">"
        } else {
            ""
        };
        let wall = format!("{at_least}{:.3}", median(secs(samples)));
        let ratio = format!("{at_least}{:.2}", paired_ratio(samples, base));
        let mut line = format!("  {:<24} {wall:>10} s {ratio:>8}x", runner.label());
        if w.once.contains(&runner) {
            line.push_str("  (1 run: too slow for every round; plain strace not run)");
        }
        if !at_least.is_empty() {
            line.push_str(&format!("  (stopped after {} s)", ONCE_LIMIT.as_secs()));
        }
        if matches!(
            runner,
            Runner::Mevi
                | Runner::MeviVariant(_)
                | Runner::MeviOnlyLinker
                | Runner::MeviCompared
                | Runner::MeviScan
                | Runner::MeviScanFast
                | Runner::MeviRecords
        ) {
            for reference in [
                Runner::Floor,
                Runner::FloorBusy,
                Runner::RecordsFloor,
                Runner::SeccompOnly,
                Runner::StraceSeccomp,
            ] {
                // The records floor is the floor of records alone.
                if reference == Runner::RecordsFloor && runner != Runner::MeviRecords {
                    continue;
                }
                if let Some(r) = results.get(&reference) {
                    let x = paired_ratio(samples, r);
                    let x = if x < 0.01 {
                        "<0.01".to_string()
                    } else {
                        format!("{x:.2}")
                    };
                    line.push_str(&format!("  {x}x {}", reference.label()));
                }
            }
            let lines: Vec<f64> = samples
                .iter()
                .filter_map(|s| Some(s.lines? as f64 / s.wall.as_secs_f64()))
                .collect();
            let rss = samples.iter().filter_map(|s| s.tracer_peak_rss).max();
            line.push_str(&format!(
                "  {:.0} lines/s, peak RSS {}",
                median(lines),
                rss.map_or("?".into(), mib)
            ));
        }
        println!("{line}");
        if let Runner::MeviVariant(i) = runner
            && let Some(without) = results.get(&Runner::Mevi)
        {
            let cost = variant_cost(samples, without);
            println!("    {}", cost.describe(&VARIANTS[i]));
            // `/bin/true`'s is in milliseconds over untraced, below.
            if w.name != "true" {
                targets.push(cost.target(section, &w.name, &VARIANTS[i]));
            }
        }
        if runner == Runner::MeviOnlyLinker
            && let Some(all) = results.get(&Runner::Mevi)
        {
            let lines =
                |s: &[Sample]| median(s.iter().filter_map(|s| s.lines).map(|n| n as f64).collect());
            println!(
                "    selection ratio {:.2}x mevi-actors following every program; {:.0} lines \
                 against {:.0}",
                paired_ratio(samples, all),
                lines(samples),
                lines(all)
            );
        }
    }
    scan_targets(w, results, section, targets);
    records_targets(w, results, section, targets);
    let Some(mevi) = results.get(&Runner::Mevi) else {
        return;
    };
    let vs = |r: Runner| results.get(&r).map(|s| paired_ratio(mevi, s));
    match w.name.as_str() {
        n if n.starts_with("touch") => {
            if let Some(x) = vs(Runner::Floor) {
                targets.push(target(
                    &format!("{section}{n}: within 1.15x of the polling floor"),
                    format!("{x:.2}x"),
                    x <= 1.15,
                ));
            }
        }
        "syscalls" => {
            let x = paired_ratio(mevi, base);
            targets.push(target(
                &format!("{section}syscalls: within 1.05x of untraced"),
                format!("{x:.2}x"),
                x <= 1.05,
            ));
            if let Some(x) = vs(Runner::SeccompOnly) {
                targets.push(target(
                    &format!("{section}syscalls: within 1.05x of the seccomp filter alone"),
                    format!("{x:.2}x"),
                    x <= 1.05,
                ));
            }
        }
        "churn" | "forkexec" => {
            if let Some(x) = vs(Runner::StraceSeccomp) {
                targets.push(target(
                    &format!("{section}{}: no slower than strace --seccomp-bpf", w.name),
                    format!("{x:.2}x"),
                    x <= 1.0,
                ));
                if w.name == "forkexec" {
                    targets.push(target(
                        &format!("{section}forkexec: within 1.5x of strace --seccomp-bpf"),
                        format!("{x:.2}x"),
                        x <= 1.5,
                    ));
                }
            }
        }
        "true" => {
            // Issue 27's: with the options a user gets (call stacks on), and without them.
            let over = |runner: &[Sample]| (median(secs(runner)) - median(secs(base))) * 1e3;
            let stacks = results.get(&Runner::MeviVariant(0));
            for (how, samples) in [("--no-stacks", Some(mevi)), ("the default", stacks)] {
                let Some(samples) = samples else { continue };
                let extra = over(samples);
                targets.push(target(
                    &format!("{section}run -- /bin/true ({how}): within 5 ms of untraced"),
                    format!("+{extra:.1} ms"),
                    extra <= 5.0,
                ));
            }
        }
        _ => {}
    }
}

/// A mode's limits: touching (against untraced), churn and fork+exec (against `strace
/// --seccomp-bpf`), other syscalls (against the filter alone).
struct ModeLimits {
    touch: f64,
    churn: f64,
    forkexec: f64,
    syscalls: f64,
}

/// `--faults scan`'s targets (issue 14): touching at nearly the program's own speed, layout
/// changes and processes at strace's cost or less, other syscalls at the filter's.
const SCAN_LIMITS: ModeLimits = ModeLimits {
    touch: 1.15,
    churn: 1.0,
    forkexec: 1.0,
    syscalls: 1.05,
};

/// `--faults records`' targets (issue 27): first touches at the record's own cost, layout
/// changes under strace's, processes within a fifth of it, other syscalls at the filter's.
const RECORDS_LIMITS: ModeLimits = ModeLimits {
    touch: 1.5,
    churn: 1.0,
    forkexec: 1.2,
    syscalls: 1.05,
};

fn scan_targets(
    w: &Workload,
    results: &BTreeMap<Runner, Vec<Sample>>,
    section: &str,
    targets: &mut Vec<String>,
) {
    mode_targets(
        w,
        results,
        section,
        targets,
        Runner::MeviScan,
        "scan",
        &SCAN_LIMITS,
    );
}

fn records_targets(
    w: &Workload,
    results: &BTreeMap<Runner, Vec<Sample>>,
    section: &str,
    targets: &mut Vec<String>,
) {
    let (runner, limits) = (Runner::MeviRecords, &RECORDS_LIMITS);
    mode_targets(w, results, section, targets, runner, "records", limits);
    // The kernel's records alone may cost more than the limit against untraced: on a machine
    // where they do, the limit is out of reach of any reader, and what is ours is the rest.
    if let (Some(traced), Some(floor), Some(base)) = (
        results.get(&runner),
        results.get(&Runner::RecordsFloor),
        results.get(&Runner::Untraced),
    ) {
        let x = paired_ratio(traced, floor);
        targets.push(target(
            &format!(
                "{section}{}: --faults records within {RECORDS_OVER_FLOOR}x of the records \
                 floor (itself {:.2}x untraced)",
                w.name,
                paired_ratio(floor, base)
            ),
            format!("{x:.2}x"),
            x <= RECORDS_OVER_FLOOR,
        ));
    }
}

/// What `--faults records` may add to the kernel's records on a workload of first touches.
const RECORDS_OVER_FLOOR: f64 = 1.15;

/// The targets of `--faults MODE` (run by `runner`) on workload `w`, as `limits` sets them.
fn mode_targets(
    w: &Workload,
    results: &BTreeMap<Runner, Vec<Sample>>,
    section: &str,
    targets: &mut Vec<String>,
    runner: Runner,
    mode: &str,
    limits: &ModeLimits,
) {
    let (Some(traced), Some(base)) = (results.get(&runner), results.get(&Runner::Untraced)) else {
        return;
    };
    let vs = |r: Runner| results.get(&r).map(|s| paired_ratio(traced, s));
    let name = w.name.as_str();
    let strace = "strace --seccomp-bpf";
    let (what, x, limit) = match name {
        "touch-write-1t" | "touch-write-2t" => {
            ("untraced", Some(paired_ratio(traced, base)), limits.touch)
        }
        n if mode == "records" && n.starts_with("touch-") => {
            ("untraced", Some(paired_ratio(traced, base)), limits.touch)
        }
        "churn" => (strace, vs(Runner::StraceSeccomp), limits.churn),
        "forkexec" => (strace, vs(Runner::StraceSeccomp), limits.forkexec),
        "syscalls" => (
            "the seccomp filter alone",
            vs(Runner::SeccompOnly),
            limits.syscalls,
        ),
        _ => return,
    };
    if let Some(x) = x {
        targets.push(target(
            &format!("{section}{name}: --faults {mode} within {limit}x of {what}"),
            format!("{x:.2}x"),
            x <= limit,
        ));
    }
}

/// What a `Variant` costs against mevi-actors without it, from the rounds both ran in.
struct VariantCost {
    /// Median of the per-round ratios of its time to the time without.
    ratio: f64,
    /// Median over rounds of (time with - time without) / stacks counted, in µs.
    per_stack_us: f64,
    stacks: f64,
    sites: f64,
    peak_rss: Option<u64>,
    peak_rss_without: Option<u64>,
}

fn variant_cost(with: &[Sample], without: &[Sample]) -> VariantCost {
    let per_stack = with
        .iter()
        .zip(without)
        .filter_map(|(a, b)| {
            let n = a.stacks.filter(|&n| n > 0)? as f64;
            Some((a.wall.as_secs_f64() - b.wall.as_secs_f64()) * 1e6 / n)
        })
        .collect();
    let figure = |f: fn(&Sample) -> Option<u64>| {
        median(with.iter().filter_map(f).map(|n| n as f64).collect())
    };
    VariantCost {
        ratio: paired_ratio(with, without),
        per_stack_us: median(per_stack),
        stacks: figure(|s| s.stacks),
        sites: figure(|s| s.sites),
        peak_rss: with.iter().filter_map(|s| s.tracer_peak_rss).max(),
        peak_rss_without: without.iter().filter_map(|s| s.tracer_peak_rss).max(),
    }
}

impl VariantCost {
    fn describe(&self, v: &Variant) -> String {
        let rss = |r: Option<u64>| r.map_or("?".into(), mib);
        format!(
            "{:.2}x mevi-actors without {}; {:.1} us per stack over {:.0} stacks ({}); {:.0} \
             sites; mevi-actors peak RSS {} with, {} without",
            self.ratio,
            v.args.join(" "),
            self.per_stack_us,
            self.stacks,
            v.counted,
            self.sites,
            rss(self.peak_rss),
            rss(self.peak_rss_without),
        )
    }

    fn target(&self, section: &str, workload: &str, v: &Variant) -> String {
        target(
            &format!(
                "{section}{workload}: {} <= {}x without",
                v.args.join(" "),
                v.max_ratio
            ),
            format!("{:.2}x", self.ratio),
            self.ratio <= v.max_ratio,
        )
    }
}

fn target(what: &str, measured: String, met: bool) -> String {
    format!(
        "{:<68} {:>10}  {}",
        what,
        measured,
        if met { "met" } else { "NOT MET" }
    )
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// strace from PATH; when missing, installed from Debian's packages (the bench's setup).
fn find_or_install_strace() -> Option<PathBuf> {
    let find = || {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("strace"))
                .find(|p| p.is_file())
        })
    };
    if let Some(p) = find() {
        return Some(p);
    }
    println!("strace not found: installing it (apt-get install strace)");
    let installed = Command::new("sh")
        .args([
            "-c",
            "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends strace \
             || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
             --no-install-recommends strace)",
        ])
        .status()
        .is_ok_and(|s| s.success());
    if installed { find() } else { None }
}

/// The machine, for the table's heading.
fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_default();
    let mut kernel = String::new();
    let _ = std::fs::File::open("/proc/sys/kernel/osrelease")
        .and_then(|mut f| f.read_to_string(&mut kernel));
    format!("{cpus} CPUs ({model}), Linux {}", kernel.trim())
}
