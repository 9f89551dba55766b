//! The command line: `run`, `demo`, `replay`, `report`, `doctor`.

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use mevi_actors::query::{self, At, Mode};
use mevi_actors::run::{AttachTo, RunOptions, run};

/// How long a run of first touches may grow before its line goes out: well under the 100 ms in
/// which the stream is flushed, so a reader following it live sees touches as promptly.
const DEFAULT_COALESCE_MS: u64 = 10;
const DEFAULT_SAMPLE_MS: u64 = 10;
use mevi_actors::run::DEFAULT_STACK_DEPTH;

#[derive(Parser)]
#[command(
    name = "mevi-actors",
    version,
    propagate_version = true,
    about = "Trace every change to the address spaces of a Linux process tree as JSON lines",
    long_about = "Trace every change to the address spaces of a program and of every process and \
                  thread it creates: mappings made, moved, dropped or discarded, heap growth, and \
                  every first touch of an anonymous page. One JSON object per line (schema 1, see \
                  docs/schema.md); a human summary goes to stderr at the end; the exit status is \
                  the program's (128+N if it was killed by signal N)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `run --faults`: how first touches are followed.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FaultsBy {
    Uffd,
    Scan,
    Records,
}

/// `export --format`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ExportFormat {
    /// A gzipped pprof profile.proto.
    Pprof,
}

/// `--summary`: the rows of the summary's table.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SummaryRows {
    Top,
    All,
}

#[derive(Subcommand)]
enum Command {
    /// Run PROGRAM under the tracer.
    ///
    /// The event stream goes to stdout, and the program's own stdout is sent to stderr so that
    /// nothing it prints can mix into the stream. With -o FILE the stream goes to FILE and the
    /// program keeps its stdout. On a terminal, without -o, the stream goes to a new file
    /// named after the program, mevi-actors.PROG.PID.jsonl, and the program keeps its stdout.
    Run {
        /// Write the event stream to FILE instead of stdout (the program keeps its stdout);
        /// `-` is stdout, even a terminal (without -o a terminal gets no stream: it goes to
        /// mevi-actors.PROG.PID.jsonl in the current directory).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Trace mappings only; do not follow first touches (no userfaultfd needed).
        #[arg(long)]
        no_faults: bool,
        /// How first touches are followed: `uffd` (the default), each as it happens, with the
        /// thread that made it, through a userfaultfd; `scan`, by reading the page tables at
        /// every layout change, on a timer and at each exit, at nearly the program's own speed
        /// and with the kernel behaving as untraced (nothing is registered: huge pages stay,
        /// and no userfaultfd is needed); pages carry no thread, and a page made resident and
        /// dropped between two scans is not seen; `records`, as `scan`, with the thread whose
        /// fault made each page resident from the kernel's records of its page faults (one
        /// ring of records per thread: needs root, CAP_PERFMON or perf_event_paranoid <= 1).
        #[arg(long, value_enum, value_name = "HOW", default_value_t = FaultsBy::Uffd)]
        faults: FaultsBy,
        /// Read the page tables of ranges followed by scans every MS milliseconds while the
        /// program runs (every private anonymous range under --faults scan; those that may get
        /// huge pages otherwise): a page is found at most this late, and one made resident and
        /// dropped within it is not seen. 10 by default.
        #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=60_000))]
        sample_ms: Option<u64>,
        /// Follow the pages of these programs only (repeatable): a process whose argv[0], its
        /// file name, or its name (comm) matches the shell pattern GLOB (`cc1*`, `ld`,
        /// `/usr/bin/python3*`), and the children it forks. The others' forks, execs, exits and
        /// mappings are written, marked `"followed":false` on their exec line, at the cost of
        /// their layout stops only; a process that execs into a match is followed from then on.
        #[arg(long, value_name = "GLOB", value_parser = glob_pattern)]
        only: Vec<glob::Pattern>,
        /// Write the first touches of these threads only (repeatable): a thread whose name
        /// (comm, as `pthread_setname_np` or `prctl` set it) matches the shell pattern GLOB
        /// (`worker-*`). The others' first touches are still followed and counted (the summary
        /// says how many), and --verify still checks them; their `resident` lines are not
        /// written. Needs --faults uffd or records (a scan does not know the thread).
        #[arg(long, value_name = "GLOB", value_parser = glob_pattern)]
        threads: Vec<glob::Pattern>,
        /// Follow only the private anonymous mappings that overlap START-END (repeatable;
        /// addresses in hex with 0x, or decimal), as they are made; the others are written
        /// `tracked: false`, and cost nothing more than their layout stop.
        #[arg(long, value_name = "START-END", value_parser = mevi_actors::selection::parse_region)]
        region: Vec<std::ops::Range<u64>>,
        /// Follow only the private anonymous mappings at least SIZE long (`1MiB`, `64k`) as
        /// made: by one `mmap`, one `brk`'s growth, or as a new program's mappings are. The
        /// others are written `tracked: false`.
        #[arg(long, value_name = "SIZE", value_parser = min_size)]
        min_size: Option<u64>,
        /// Do not print the human summary on stderr.
        #[arg(long)]
        no_summary: bool,
        /// Which processes the summary's table lists: `top`, the 10 largest by peak resident
        /// memory and one line for the rest (the default), or `all`.
        #[arg(long, value_enum, value_name = "WHICH", default_value_t = SummaryRows::Top, conflicts_with = "no_summary")]
        summary: SummaryRows,
        /// Check the stream against the kernel's page tables (/proc/PID/pagemap) whenever a
        /// process's last thread reaches its exit, and write a `verify` line each time. Exits 3
        /// if any page differs.
        #[arg(long)]
        verify: bool,
        /// Also stop every traced thread every MS milliseconds and check every address space
        /// (implies --verify; slows the program down; meant for testing).
        #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
        verify_every: Option<u64>,
        /// Gather first touches of adjacent pages by one thread for up to MS milliseconds into
        /// one `resident` line (its `faults` counts them); 0 writes one line per fault.
        #[arg(long, value_name = "MS", default_value_t = DEFAULT_COALESCE_MS)]
        coalesce_ms: u64,
        /// Let up to SIZE bytes of lines (`4MiB`, `500k`, `1G`) wait for a slow reader of the
        /// stream before the program is slowed down to the reader's pace. If the reader goes away
        /// (EPIPE), the program runs on to its end, traced, and the rest of the stream is dropped
        /// (one line on stderr).
        #[arg(long, value_name = "SIZE", default_value = mevi_actors::actors::state::DEFAULT_BUFFER, value_parser = buffer_size)]
        buffer: u32,
        /// Keep idle CPUs polling instead of halting while tracing (holds /dev/cpu_dma_latency
        /// at 0). Hand-offs between the program, the tracer and the lanes then cost far less,
        /// notably on virtual machines, at the price of busy idle CPUs. Needs root.
        #[arg(long)]
        idle_poll: bool,
        /// When the run ends, also write the HTML report of the stream to FILE (as `report`
        /// would from the stream).
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
        /// Serve the report's page live while the program runs, at ADDR (by default
        /// 127.0.0.1 on a free port; the URL is printed on stderr): a port (127.0.0.1),
        /// IP:PORT or localhost:PORT, after `=` only (`--serve 8089` runs a program `8089`). After the program ends the
        /// page stays up until Ctrl-C (or --serve-linger); the exit status is the program's.
        #[arg(long, value_name = "ADDR", num_args = 0..=1, require_equals = true, default_missing_value = "127.0.0.1:0", value_parser = mevi_actors::run::serve_address)]
        serve: Option<SocketAddr>,
        /// How often the live page is sent what is new, in milliseconds.
        #[arg(long, value_name = "MS", default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
        ui_interval_ms: u64,
        /// With --serve: stop serving SECS seconds after the program ends, instead of at Ctrl-C.
        #[arg(long, value_name = "SECS", requires = "serve")]
        serve_linger: Option<u64>,
        /// Take the call stack of every layout change (mmap, munmap, mremap, madvise, brk), the
        /// default: each distinct stack is a `site` line, unwound by DWARF unwind tables or
        /// frame pointers and symbolized (function, file, line); `replay --by-site` adds bytes
        /// up by it.
        #[arg(long, overrides_with = "no_stacks")]
        stacks: bool,
        /// Take no call stacks of layout changes.
        #[arg(long, overrides_with = "stacks")]
        no_stacks: bool,
        /// With --stacks or --touch-stacks: at most N frames a stack.
        #[arg(long, value_name = "N", default_value_t = DEFAULT_STACK_DEPTH, value_parser = clap::value_parser!(u32).range(1..=1024))]
        stack_depth: u32,
        /// Take the call stack of page faults, each with a chance of 1 in N (a perf event's
        /// sample, no stop): the first touches it lands on name their site; 0 (the default)
        /// is off.
        #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=(1 << 31) - 1))]
        touch_stacks: u64,
        /// Test hook (test builds only): forget the first resident page in the replayed state,
        /// so that --verify must find a mismatch.
        #[cfg(feature = "test-hooks")]
        #[arg(long, hide = true)]
        test_corrupt_state: bool,
        /// The program and its arguments: the first word that is not an option, or whatever
        /// follows `--` (options of mevi-actors come before it; an unknown one is an error).
        #[arg(required = true, trailing_var_arg = true)]
        program: Vec<OsString>,
    },
    /// Follow processes that are already running, without restarting them, until Ctrl-C (or
    /// until they have all exited); then let them go, exactly as they were.
    ///
    /// Their memory is followed by page-table scans every --sample-ms, each page found with the
    /// thread whose page fault made it resident (from the kernel's records of each thread's
    /// faults, where it allows them: `doctor` says), their forks, execs and exits exactly,
    /// through ptrace event stops only: no filter, no userfaultfd, nothing is written into
    /// them. A mapping made and dropped within one sample is not seen. Needs root
    /// or CAP_SYS_PTRACE for another user's process (and kernel.yama.ptrace_scope allowing it:
    /// `mevi-actors doctor` says). The stream goes to stdout (or -o FILE), as for `run`.
    Attach {
        /// The processes to follow: PID or PID,PID,…
        #[arg(short, long = "pid", value_name = "PID", required = true, value_delimiter = ',', value_parser = clap::value_parser!(i32).range(1..))]
        pids: Vec<i32>,
        /// Also follow the children they make from now on.
        #[arg(short = 'f', long)]
        follow_forks: bool,
        /// Write the event stream to FILE instead of stdout; `-` is stdout (without -o, a
        /// terminal gets no stream: it goes to mevi-actors.NAME.PID.jsonl here).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Read their mappings and page tables every MS milliseconds (10 by default).
        #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=60_000))]
        sample_ms: Option<u64>,
        /// How pages are followed: `records`, by the scans, each page with the thread whose
        /// fault the kernel recorded first there (a ring of records per thread; the default
        /// where the kernel allows it); `scan`, by the scans alone (pages carry no thread).
        #[arg(long, value_enum, value_name = "HOW")]
        faults: Option<FaultsBy>,
        /// Do not print the human summary on stderr.
        #[arg(long)]
        no_summary: bool,
        /// Which processes the summary's table lists: `top`, the 10 largest by peak resident
        /// memory and one line for the rest (the default), or `all`.
        #[arg(long, value_enum, value_name = "WHICH", default_value_t = SummaryRows::Top, conflicts_with = "no_summary")]
        summary: SummaryRows,
        /// Check the stream against the kernel's page tables at every exit, at detach, and
        /// with --verify-every at checkpoints (which stop every thread: a thread blocked in a
        /// syscall then sees EINTR, as under a debugger).
        #[arg(long)]
        verify: bool,
        /// Also stop every thread every MS milliseconds and check every address space
        /// (implies --verify).
        #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
        verify_every: Option<u64>,
        /// As for `run`.
        #[arg(long, value_name = "SIZE", default_value = mevi_actors::actors::state::DEFAULT_BUFFER, value_parser = buffer_size)]
        buffer: u32,
        /// When the trace ends, also write the HTML report of the stream to FILE.
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
    },
    /// Trace a small built-in multithreaded workload: the first thing to try.
    Demo {
        /// Write the event stream to FILE instead of stdout; `-` is stdout (without -o, a
        /// terminal gets no stream: it goes to mevi-actors.NAME.PID.jsonl here).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Trace mappings only; do not follow first touches (no userfaultfd needed).
        #[arg(long)]
        no_faults: bool,
        /// Check the stream against the kernel's page tables, as `run --verify` does.
        #[arg(long)]
        verify: bool,
        /// As for `run`.
        #[arg(long, value_name = "MS", default_value_t = DEFAULT_COALESCE_MS)]
        coalesce_ms: u64,
        /// Also write the HTML report to FILE, as for `run`.
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
    },
    /// Answer questions from a written stream: its processes, the state at an instant, what
    /// was still mapped at each exit, resident memory over time, bytes by call site, pages
    /// by thread.
    ///
    /// Without a mode option: one row per process (pid, peak and final resident memory, first
    /// touches, start and end, how it ended, argv), written as each process exits. The stream is
    /// read line by line: memory follows the processes and spaces alive at once, not the file.
    /// A line that is not a stream line (cut short, garbage) is an error naming it (exit 2);
    /// problems of the stream itself (gaps in seq, lines out of process order) exit 1.
    Replay {
        /// Skip lines that are not stream lines, with a warning for each, instead of stopping at
        /// the first (a trace cut by a kill of mevi-actors ends mid-line).
        #[arg(long)]
        lenient: bool,
        /// One JSON object per line instead of tables (docs/schema.md, "replay --json").
        #[arg(long)]
        json: bool,
        /// Every mapping of every live address space at T: milliseconds since the trace started
        /// (every line up to T applied), or `peak`, the instant the whole tree's resident total
        /// was largest.
        #[arg(long, value_name = "T", group = "mode")]
        at: Option<At>,
        /// The mappings still there when each address space's last process exited, largest
        /// first, with where each was made.
        #[arg(long, group = "mode")]
        maps_at_exit: bool,
        /// Resident bytes per process every MS milliseconds.
        #[arg(long, value_name = "MS", group = "mode", value_parser = clap::value_parser!(u64).range(1..))]
        timeline: Option<u64>,
        /// Bytes by call site (a trace made with `run --stacks`): anonymous and file bytes
        /// mapped, resident at the whole tree's resident peak, resident as each address space
        /// ended (added over the spaces: it can exceed the peak), anonymous and file bytes
        /// still mapped then; bottom-up (by innermost user frame) and top-down.
        #[arg(long, group = "mode")]
        by_site: bool,
        /// Pages first touched per thread (the thread that faulted them in), with each
        /// thread's names (the last first), per process, largest first.
        #[arg(long, group = "mode")]
        by_thread: bool,
        /// A stream written by `run` (`-` for stdin).
        file: PathBuf,
    },
    /// Draw a written stream as one HTML page: processes, resident memory over time, every
    /// address space at any instant (time travel), threads, layout events and checks.
    ///
    /// The page is one file with everything inline: it opens from disk in a browser and
    /// makes no network request (docs/report.md). Exit status as for `replay`.
    Report {
        /// Where to write the page; by default the trace's name with `.html` (`-` is stdout).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Skip lines that are not stream lines, with a warning for each, instead of stopping.
        #[arg(long)]
        lenient: bool,
        /// A stream written by `run` (`-` for stdin, then -o is needed).
        file: PathBuf,
    },
    /// Write a written stream as a profile other tools read: `pprof`, a gzipped profile.proto
    /// for `go tool pprof` (`-diff_base` of two runs), Pyroscope, Parca or Perfetto.
    ///
    /// Its sample types: `resident_space` and `resident_pages`, what was resident at one
    /// instant (--at); `touched_space` and `touched_pages`, what was first touched over the
    /// whole trace; with `run --touch-stacks`, `sampled_touches`. Each sample stands at the call
    /// site that mapped its pages (a trace made with stacks, the default), labelled with the
    /// pid, program (argv[0]), the thread that first touched them (tid and name then) and the
    /// mapping's kind (docs/schema.md, "export"). Exit status as for `replay`.
    Export {
        /// The format to write.
        #[arg(long, value_enum, value_name = "FORMAT", default_value_t = ExportFormat::Pprof)]
        format: ExportFormat,
        /// Where to write it; by default the trace's name with `.pb.gz` (`-` is stdout, not a
        /// terminal).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// The instant of the resident figures: `peak` (the default), the instant the whole
        /// tree's resident total was largest; `end`, each address space as it ended (added over
        /// the spaces); or T, milliseconds since the trace started.
        #[arg(long, value_name = "T", default_value = "peak")]
        at: mevi_actors::export::Instant,
        /// Skip lines that are not stream lines, with a warning for each, instead of stopping.
        #[arg(long)]
        lenient: bool,
        /// A stream written by `run` (`-` for stdin, then -o is needed).
        file: PathBuf,
    },
    /// Compare two written streams: per program and per call site, the peak, final and
    /// first-touched bytes in each and the change, largest change first.
    ///
    /// Processes are matched by program (its file name, and the argument that tells it from
    /// others of the same program, as `cc1 first_unit.c`) and order of birth; those only one
    /// trace has are listed after. Sites are matched by their innermost user frame (function,
    /// file and line, as `replay --by-site`'s bottom-up rows). Exit status as for `replay`; 2
    /// for traces of different schemas.
    Diff {
        /// One JSON object per row instead of tables (docs/schema.md, "diff --json").
        #[arg(long)]
        json: bool,
        /// Skip lines that are not stream lines, with a warning for each, instead of stopping.
        #[arg(long)]
        lenient: bool,
        /// The base trace (`-` for stdin).
        a: PathBuf,
        /// The trace compared with it (`-` for stdin).
        b: PathBuf,
    },
    /// Check a written stream against limits or a saved run, as a gate in CI: exit 0 when
    /// within, 1 with a table of what is over and by how much, 2 on a usage error.
    ///
    /// Limits apply to each process (those --process chooses), or to each site --site
    /// chooses; --max-tree-peak to the whole tree. Against --baseline (a trace, or what
    /// --save-baseline wrote), the tree's peak and each process's (or chosen site's) peak and
    /// final bytes may grow by --tolerance and --min-change at most; processes and sites are
    /// matched as `diff` matches them (docs/usage.md, "A gate in CI").
    Check {
        /// The most each chosen process (or site) may have resident at its peak (`512MiB`).
        #[arg(long, value_name = "SIZE", value_parser = size)]
        max_peak: Option<u64>,
        /// The most each chosen process may have resident as it exited (a site: as each space
        /// ended, added over the spaces).
        #[arg(long, value_name = "SIZE", value_parser = size)]
        max_final: Option<u64>,
        /// The most the whole tree may have resident at once.
        #[arg(long, value_name = "SIZE", value_parser = size)]
        max_tree_peak: Option<u64>,
        /// Check only the processes whose program, label (`cc1 first_unit.c`) or argv[0]
        /// matches the shell pattern GLOB (repeatable).
        #[arg(long, value_name = "GLOB", value_parser = glob_pattern, conflicts_with = "site")]
        process: Vec<glob::Pattern>,
        /// Check the call sites whose function or name matches GLOB (repeatable), instead of
        /// processes.
        #[arg(long, value_name = "GLOB", value_parser = glob_pattern)]
        site: Vec<glob::Pattern>,
        /// Compare with a saved run: a trace, or a file --save-baseline wrote.
        #[arg(long, value_name = "FILE")]
        baseline: Option<PathBuf>,
        /// How much above the baseline is still within (`5%`, the default).
        #[arg(long, value_name = "PERCENT", value_parser = percent, default_value = "5%", requires = "baseline")]
        tolerance: f64,
        /// And at least this much (`256KiB`, the default): a page or two of noise in a small
        /// process is not a regression.
        #[arg(long, value_name = "SIZE", value_parser = size, default_value = "256KiB", requires = "baseline")]
        min_change: u64,
        /// Write the trace's figures to FILE, to keep and check later runs against.
        #[arg(long, value_name = "FILE")]
        save_baseline: Option<PathBuf>,
        /// Write the checks as a JUnit XML report to FILE (one test case per figure).
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// Skip lines that are not stream lines, with a warning for each, instead of stopping.
        #[arg(long)]
        lenient: bool,
        /// A stream written by `run` (`-` for stdin).
        trace: PathBuf,
    },
    /// Check that `run` can follow first touches here, and say what to change if not.
    ///
    /// One line per thing `run` needs: ✓ or ✗, and for each ✗ the command that fixes it and
    /// what works without it. Exits 0 when `run` will follow first touches here, 1 otherwise.
    Doctor,
    /// The workload `demo` traces (runs inside the tracer).
    #[command(name = "__demo-workload", hide = true)]
    DemoWorkload,
}

/// `--min-size`'s size, in bytes (at least 1).
fn min_size(text: &str) -> Result<u64, String> {
    match parse_size::parse_size(text).map_err(|e| format!("{e} (try 1MiB or 64k)"))? {
        0 => Err("must be at least 1 byte".into()),
        n => Ok(n),
    }
}

/// A size with an optional unit (`512MiB`, `64k`, `0`).
fn size(text: &str) -> Result<u64, String> {
    parse_size::parse_size(text).map_err(|e| format!("{e} (try 512MiB or 64k)"))
}

/// `5%` (or `5`): a fraction, 0.05.
fn percent(text: &str) -> Result<f64, String> {
    let number = text.strip_suffix('%').unwrap_or(text);
    match number.parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 0.0 => Ok(p / 100.0),
        _ => Err(format!("`{text}` is not a percentage (try 5%)")),
    }
}

/// `--buffer`: a size with an optional unit, under 4 GiB (a queue's budget is a `u32`).
fn buffer_size(text: &str) -> Result<u32, String> {
    let bytes = parse_size::parse_size(text).map_err(|e| format!("{e} (try 4MiB or 500k)"))?;
    match u32::try_from(bytes) {
        Ok(0) => Err("must be at least 1 byte".into()),
        Ok(b) => Ok(b),
        Err(_) => Err("must be less than 4GiB".into()),
    }
}

/// `-o -` is stdout, as for strace.
fn output_file(output: Option<PathBuf>) -> Option<PathBuf> {
    output.filter(|path| path.as_os_str() != "-")
}

fn main() -> ExitCode {
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MEVI_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        // Colour codes only for a person at a terminal, never into a file.
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
    let status = match Cli::parse().command {
        Command::Run {
            output,
            no_faults,
            faults,
            no_summary,
            summary,
            verify,
            verify_every,
            coalesce_ms,
            idle_poll,
            buffer,
            report,
            serve,
            ui_interval_ms,
            serve_linger,
            stacks: _,
            no_stacks,
            stack_depth,
            touch_stacks,
            sample_ms,
            only,
            threads,
            region,
            min_size,
            #[cfg(feature = "test-hooks")]
            test_corrupt_state,
            program,
        } => {
            #[cfg(not(feature = "test-hooks"))]
            let test_corrupt_state = false;
            let faults_name = match faults {
                FaultsBy::Uffd => "uffd",
                FaultsBy::Scan => "scan",
                FaultsBy::Records => "records",
            };
            if no_faults && faults != FaultsBy::Uffd {
                usage_error(
                    "run",
                    &format!(
                        "--faults {faults_name} follows first touches, which --no-faults does not"
                    ),
                );
            }
            if faults != FaultsBy::Uffd && touch_stacks > 0 {
                usage_error(
                    "run",
                    &format!(
                        "--touch-stacks samples the faults a userfaultfd resolves, which --faults \
                     {faults_name} does not make"
                    ),
                );
            }
            if no_faults && sample_ms.is_some() {
                usage_error(
                    "run",
                    "--sample-ms times scans of pages, which --no-faults does not follow",
                );
            }
            if no_faults && (!threads.is_empty() || !region.is_empty() || min_size.is_some()) {
                usage_error(
                    "run",
                    "--threads, --region and --min-size select pages to follow, which \
                     --no-faults does not follow",
                );
            }
            if faults == FaultsBy::Scan && !threads.is_empty() {
                usage_error(
                    "run",
                    &format!(
                        "--threads selects threads by the first touches they make, which --faults \
                     {faults_name} does not select by (use --faults uffd or --faults records)"
                    ),
                );
            }
            if no_faults && touch_stacks > 0 {
                usage_error(
                    "run",
                    "--touch-stacks samples first touches, which --no-faults does not follow",
                );
            }
            let terminal_stream_name = output
                .is_none()
                .then(|| program[0].to_string_lossy().into_owned());
            run(RunOptions {
                argv: program,
                attach: None,
                output: output_file(output),
                terminal_stream_name,
                faults: !no_faults,
                scan: faults != FaultsBy::Uffd,
                records: faults == FaultsBy::Records,
                summary: !no_summary,
                summary_all: summary == SummaryRows::All,
                verify: verify || verify_every.is_some(),
                verify_every: verify_every.map(std::time::Duration::from_millis),
                coalesce: std::time::Duration::from_millis(coalesce_ms),
                idle_poll,
                corrupt_state: test_corrupt_state,
                buffer_bytes: buffer,
                report,
                serve,
                ui_interval: Duration::from_millis(ui_interval_ms),
                serve_linger: serve_linger.map(Duration::from_secs),
                stack_depth: (!no_stacks).then_some(stack_depth),
                touch_stacks: (touch_stacks > 0).then_some(touch_stacks),
                sample: Duration::from_millis(sample_ms.unwrap_or(DEFAULT_SAMPLE_MS)),
                selection: mevi_actors::selection::Selection {
                    only,
                    threads,
                    regions: region,
                    min_size: min_size.unwrap_or(0),
                },
            })
            .status
        }
        Command::Attach {
            pids,
            follow_forks,
            output,
            sample_ms,
            faults,
            no_summary,
            summary,
            verify,
            verify_every,
            buffer,
            report,
        } => {
            // Records where the kernel allows them (doctor says): they cost the program no stop.
            let records = match faults {
                Some(FaultsBy::Uffd) => usage_error(
                    "attach",
                    "attach cannot follow pages by userfaultfd: it would have to be made inside \
                     the running program (use --faults records or --faults scan)",
                ),
                Some(FaultsBy::Records) => true,
                Some(FaultsBy::Scan) => false,
                None => mevi_actors::kernel::fault_records::recordable().is_ok(),
            };
            // A pid given twice is followed once.
            let mut given = std::collections::HashSet::new();
            let pids: Vec<i32> = pids.into_iter().filter(|&p| given.insert(p)).collect();
            // The first process's command line names the trace (its start line, the report).
            let argv = pids
                .first()
                .map(|&pid| mevi_actors::kernel::procfs::cmdline(pid))
                .unwrap_or_default()
                .into_iter()
                .map(OsString::from)
                .collect();
            let terminal_stream_name = output.is_none().then(|| {
                pids.first()
                    .and_then(|&pid| mevi_actors::kernel::procfs::comm(pid, pid))
                    .unwrap_or_else(|| "attach".into())
            });
            run(RunOptions {
                argv,
                attach: Some(AttachTo { pids, follow_forks }),
                output: output_file(output),
                terminal_stream_name,
                faults: true,
                scan: true,
                records,
                summary: !no_summary,
                summary_all: summary == SummaryRows::All,
                verify: verify || verify_every.is_some(),
                verify_every: verify_every.map(std::time::Duration::from_millis),
                coalesce: Duration::ZERO,
                idle_poll: false,
                corrupt_state: false,
                buffer_bytes: buffer,
                report,
                serve: None,
                ui_interval: Duration::from_millis(32),
                serve_linger: None,
                stack_depth: None,
                touch_stacks: None,
                sample: Duration::from_millis(sample_ms.unwrap_or(DEFAULT_SAMPLE_MS)),
                selection: Default::default(),
            })
            .status
        }
        Command::Demo {
            output,
            no_faults,
            verify,
            coalesce_ms,
            report,
        } => {
            let exe = match std::env::current_exe() {
                Ok(exe) => exe,
                Err(e) => {
                    mevi_actors::to_stderr!("mevi-actors: cannot find my own executable: {e}");
                    return ExitCode::from(1);
                }
            };
            run(RunOptions {
                argv: vec![exe.into(), "__demo-workload".into()],
                attach: None,
                terminal_stream_name: output.is_none().then(|| "demo".into()),
                output: output_file(output),
                faults: !no_faults,
                scan: false,
                records: false,
                summary: true,
                summary_all: false,
                verify,
                verify_every: None,
                coalesce: std::time::Duration::from_millis(coalesce_ms),
                idle_poll: false,
                corrupt_state: false,
                buffer_bytes: mevi_actors::actors::state::DEFAULT_BUFFER_BYTES,
                report,
                serve: None,
                ui_interval: Duration::from_millis(32),
                serve_linger: None,
                stack_depth: None,
                touch_stacks: None,
                sample: Duration::from_millis(DEFAULT_SAMPLE_MS),
                selection: Default::default(),
            })
            .status
        }
        Command::Replay {
            lenient,
            json,
            at,
            maps_at_exit,
            timeline,
            by_site,
            by_thread,
            file,
        } => {
            let mode = match (at, maps_at_exit, timeline, by_site, by_thread) {
                (Some(at), ..) => Mode::At(at),
                (_, true, ..) => Mode::MapsAtExit,
                (_, _, Some(ms), ..) => Mode::Timeline {
                    every_ns: ms.saturating_mul(1_000_000),
                },
                (_, _, _, true, _) => Mode::BySite,
                (.., true) => Mode::ByThread,
                _ => Mode::Processes,
            };
            query::run(&query::Options {
                file,
                lenient,
                json,
                mode,
            })
        }
        Command::Report {
            output,
            lenient,
            file,
        } => mevi_actors::report::run(&mevi_actors::report::Options {
            file,
            output,
            lenient,
        }),
        Command::Export {
            format: ExportFormat::Pprof,
            output,
            at,
            lenient,
            file,
        } => mevi_actors::export::run(&mevi_actors::export::Options {
            file,
            output,
            at,
            lenient,
        }),
        Command::Diff {
            json,
            lenient,
            a,
            b,
        } => mevi_actors::diff::run(&mevi_actors::diff::Options {
            a,
            b,
            json,
            lenient,
        }),
        Command::Check {
            max_peak,
            max_final,
            max_tree_peak,
            process,
            site,
            baseline,
            tolerance,
            min_change,
            save_baseline,
            junit,
            lenient,
            trace,
        } => mevi_actors::check::run(&mevi_actors::check::Options {
            trace,
            max_peak,
            max_final,
            max_tree_peak,
            processes: process,
            sites: site,
            baseline,
            tolerance,
            min_change,
            save_baseline,
            junit,
            lenient,
        }),
        Command::Doctor => {
            use std::io::Write;
            let report = mevi_actors::doctor::examine();
            // A reader that has seen enough (`| head`) changes nothing of the verdict.
            let _ = write!(std::io::stdout().lock(), "{report}");
            report.exit_status()
        }
        Command::DemoWorkload => mevi_actors::demo::workload(),
    };
    ExitCode::from(status.clamp(0, 255) as u8)
}

/// `--only`'s shell pattern, or what is wrong with it.
fn glob_pattern(text: &str) -> Result<glob::Pattern, String> {
    glob::Pattern::new(text).map_err(|e| format!("not a shell pattern: {e}"))
}

/// Options of `subcommand` that cannot go together: one line and its usage, exit 2.
fn usage_error(subcommand: &str, message: &str) -> ! {
    use clap::CommandFactory;
    // The subcommand, once built, knows its full name for the usage line.
    let mut cli = Cli::command();
    cli.build();
    let mut sub = cli.find_subcommand(subcommand).cloned().unwrap_or(cli);
    sub.error(clap::error::ErrorKind::ArgumentConflict, message)
        .exit()
}
