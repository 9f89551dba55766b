//! `mevi-actors run`: wires the actors together for one traced program and returns its status.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::actors::control::RunControl;
use crate::actors::lane::LaneConfig;
use crate::actors::sequencer::Sequencer;
use crate::actors::state::{ReportTap, RunReport, StateActor, StateOptions, WaitsForRoom};
use crate::actors::supervisor::{self, Supervisor};
use crate::actors::symbolizer::SymbolizerActor;
use crate::actors::tracer::{
    FollowBy, ProgramEnd, ProgramSignals, Target, TraceError, Tracer, TracerConfig,
};
use crate::event::{Event, SCHEMA, VerifyTotals};
use crate::kernel::thp::ThpPolicy;
use crate::kernel::{host, spawn, uffd};
use crate::model::Replay;
use crate::model::processes::Processes;
use crate::report::build::Builder;
use crate::report::live::Hub;
use crate::report::serve::Server;
use crate::selection::{Selection, ThreadNames};
use crate::stacks::{StackShared, Stacks, TouchSamplers};
use crate::test_hooks::{self, Fault};

/// Inbox sizes. Large enough to absorb bursts, small enough that a stalled reader of the stream
/// stalls the program within a few thousand events instead of buffering without bound. A bounded
/// inbox allocates and writes all its slots when it is made (352 bytes each): at 4,096 slots the
/// sequencer's and the state's cost every run 3 to 4 ms before the program started. At 256, the
/// lanes waited on a full sequencer often enough to slow a program whose faults they resolve (the
/// `race` workload under a debug build: 145 to 250 mremaps a second against 230 to 320); 1,024
/// keeps that speed. A lane's inbox is counted by credits, and holds no slots while idle.
const LANE_CAPACITY: usize = 1024;
const SEQUENCER_CAPACITY: usize = 1024;
const STATE_CAPACITY: usize = 1024;

/// Under fault records, how long each line waits to go out, so that a read's line named by a
/// record goes at its fault's time (sequencer/placing.rs): four sample periods, as a page is
/// read at the latest a sample period after its fault (a look spaced by its cost, a loaded
/// machine, later); at least 50 ms, at most a second of delay in the stream.
fn placing_window(sample: Duration) -> Duration {
    (sample * 4).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// `attach`: the running processes to follow instead of a program to start.
#[derive(Clone, Debug)]
pub struct AttachTo {
    pub pids: Vec<i32>,
    /// `-f`: the children they make from then on too.
    pub follow_forks: bool,
}

#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The program and its arguments (empty for `attach`).
    pub argv: Vec<OsString>,
    /// `attach -p`: follow these processes, already running, rather than start `argv`.
    pub attach: Option<AttachTo>,
    /// Write the stream here instead of stdout (the program then keeps its stdout).
    pub output: Option<PathBuf>,
    /// No `-o` given: if stdout is a terminal, the stream goes to a new file named after this
    /// program, `mevi-actors.NAME.PID.jsonl` in the current directory, as `perf record` or
    /// `heaptrack` write theirs (40,000 lines of JSON are no use on a screen); the program
    /// keeps its stdout. None: the stream goes to stdout whatever it is (`-o -`).
    pub terminal_stream_name: Option<String>,
    /// Follow first touches through userfaultfd (false: mappings only).
    pub faults: bool,
    /// `--faults scan`: follow every private anonymous range by page-table scans, with no
    /// userfaultfd.
    pub scan: bool,
    /// `--faults records`: as `scan`, with each first touch's thread from the kernel's records
    /// of its threads' page faults.
    pub records: bool,
    /// Print the human summary on stderr at the end.
    pub summary: bool,
    /// `--summary all`: every process in its table, not only the largest.
    pub summary_all: bool,
    /// Check the stream against the kernel's page tables at every process's last exit stop.
    pub verify: bool,
    /// With `verify`: also stop every thread this often and check every space.
    pub verify_every: Option<std::time::Duration>,
    /// Gather adjacent first touches by one thread for up to this long into one `resident`
    /// line; zero writes one line per fault.
    pub coalesce: std::time::Duration,
    /// Keep idle CPUs polling while tracing (`/dev/cpu_dma_latency` held at 0), and let the
    /// lanes spin only while a CPU is free.
    pub idle_poll: bool,
    /// Test hook: drop the first resident page from the replayed state, so a check must fail.
    pub corrupt_state: bool,
    /// `--buffer`: bytes of lines that may wait for the stream's reader.
    pub buffer_bytes: u32,
    /// `--report FILE`: write the HTML report there when the run ends.
    pub report: Option<PathBuf>,
    /// `--serve ADDR`: serve the live page there while the program runs.
    pub serve: Option<std::net::SocketAddr>,
    /// `--ui-interval-ms`: how often the live page is sent what is new.
    pub ui_interval: std::time::Duration,
    /// `--serve-linger SECS`: serve this long after the program ends (None: until Ctrl-C).
    pub serve_linger: Option<std::time::Duration>,
    /// `--stacks`: take each layout change's call stack, at most this many frames.
    pub stack_depth: Option<u32>,
    /// `--touch-stacks N`: take the stack of one page fault in N of each thread.
    pub touch_stacks: Option<u64>,
    /// `--sample-ms`: how often ranges followed by scans are read.
    pub sample: std::time::Duration,
    /// `--only`, `--threads`, `--region`, `--min-size`: what is followed.
    pub selection: Selection,
}

/// `--serve=ADDR`'s address: a port alone (`8089`, on 127.0.0.1 as with no address),
/// `IP:PORT` (`0.0.0.0:8089`, `[::1]:8089`) or `localhost:PORT`. Other host names are refused
/// rather than looked up: the page answers requests naming its address only.
pub fn serve_address(text: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::{Ipv4Addr, SocketAddr};
    let port = |p: &str| {
        (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse::<u16>().ok())
            .flatten()
    };
    if let Some(p) = port(text) {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, p)));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if let Some(p) = text.strip_prefix("localhost:").and_then(port) {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, p)));
    }
    Err("not an address: give a port (8089), IP:PORT (127.0.0.1:8089) or localhost:PORT".into())
}

/// A word that is a port (all digits) or `HOST:PORT`: given as a program that is not found, it
/// was meant for `--serve`.
fn looks_like_address(word: &str) -> bool {
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    serve_address(word).is_ok()
        || digits(word)
        || word
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && !host.contains('/') && digits(port))
}

/// Shell patterns as the start line lists them; None for none.
fn patterns(patterns: &[glob::Pattern]) -> Option<Vec<String>> {
    (!patterns.is_empty()).then(|| patterns.iter().map(|p| p.as_str().to_string()).collect())
}

/// `--stack-depth`: deep enough for a C++ or Rust call chain through an allocator to `main`.
pub const DEFAULT_STACK_DEPTH: u32 = 64;

/// How long a lane reads its empty userfaultfd again before it sleeps: the next fault of a
/// stream usually comes within it, and catching it awake saves two wake-ups across CPUs, which
/// cost tens of microseconds each on a VM (docs/performance.md).
const BUSY_READ: std::time::Duration = std::time::Duration::from_micros(50);

/// The exit status when `--verify` found the stream and the kernel disagreeing.
pub const VERIFY_FAILED: i32 = 3;
/// `run --verify` when nothing disagreed but some space could not be checked at all (it got no
/// userfaultfd, or its memory is not followed): the run cannot be said to agree.
pub const VERIFY_INCOMPLETE: i32 = 4;

/// The exit status when an actor of mevi-actors failed (`EX_SOFTWARE` of sysexits.h).
pub const ACTOR_FAILED: i32 = 70;

/// What a run ended with.
pub struct RunOutcome {
    /// The exit status to leave with: the program's, as a shell reports it.
    pub status: i32,
    pub report: Option<RunReport>,
}

/// Traces one program to the end. Errors that stop the trace from starting are printed as one
/// line on stderr and returned as the status a shell would give.
pub fn run(options: RunOptions) -> RunOutcome {
    // Before any thread is made: each inherits the mask.
    crate::kernel::signals::unblock_our_own();
    let fail = |status: i32, message: String| {
        crate::to_stderr!("{message}");
        RunOutcome {
            status,
            report: None,
        }
    };
    // A stream for a terminal goes to a file of its own instead (created below, once the
    // program is known to exist).
    let stream_to_file = options.output.is_none()
        && options.terminal_stream_name.is_some()
        && std::io::stdout().is_terminal();
    let target = match &options.attach {
        Some(AttachTo { pids, follow_forks }) => {
            // Before anything is written: a process that is not there, or not ours to trace,
            // is one line and nothing on the stream.
            for &pid in pids {
                if let Err(e) = crate::kernel::attach::preflight(pid) {
                    return fail(1, e.message(pid));
                }
            }
            Target::Attach {
                pids: pids.clone(),
                follow_forks: *follow_forks,
            }
        }
        None => {
            let Some(program) = options.argv.first() else {
                return fail(2, "mevi-actors: no program to run".into());
            };
            match spawn::resolve(program) {
                Ok(path) => Target::Spawn {
                    program: path,
                    argv: options.argv.clone(),
                    stdout_to_stderr: options.output.is_none() && !stream_to_file,
                },
                Err(e) if e.status == 127 && looks_like_address(&program.to_string_lossy()) => {
                    // `--serve 8089`: the word after `--serve` is the program, by rule.
                    return fail(
                        e.status,
                        format!(
                            "{}; did you mean --serve={}? (--serve takes its address after =)",
                            e.message,
                            program.to_string_lossy()
                        ),
                    );
                }
                Err(e) => return fail(e.status, e.message),
            }
        }
    };
    if options.verify && !options.faults {
        return fail(
            2,
            "mevi-actors: --verify checks page states, which --no-faults does not follow".into(),
        );
    }
    if options.faults
        && !options.scan
        && let Err(e) = uffd::permitted()
    {
        return fail(
            1,
            format!(
                "mevi-actors: userfaultfd is not permitted here ({e}); run as root, or set \
                 `sysctl vm.unprivileged_userfaultfd=1`, or pass --no-faults to trace mappings \
                 only; `mevi-actors doctor` says what this machine lacks"
            ),
        );
    }
    let mut named = None;
    let writer: Box<dyn Write + Send> = match &options.output {
        Some(file) => match std::fs::File::create(file) {
            Ok(f) => Box::new(WaitsForRoom(f)),
            Err(e) => return fail(1, format!("mevi-actors: {}: {e}", file.display())),
        },
        None if stream_to_file => {
            let name = options.terminal_stream_name.as_deref().unwrap_or_default();
            match NamedStream::create(name) {
                Ok((stream, f)) => {
                    crate::to_stderr!(
                        "mevi-actors: stdout is a terminal: the stream goes to {} (-o - writes \
                         it here)",
                        stream.0.display()
                    );
                    named = Some(stream);
                    Box::new(WaitsForRoom(f))
                }
                Err(e) => {
                    return fail(
                        1,
                        format!(
                            "mevi-actors: stdout is a terminal, and the stream cannot go to a \
                             file in this directory ({e}): give -o FILE, or -o - for the terminal"
                        ),
                    );
                }
            }
        }
        // Our own copy of stdout: the program's stdout goes to stderr, and the stream is ours.
        // Closed at exec: the program must not find the stream among its descriptors.
        None => match std::os::fd::AsFd::as_fd(&std::io::stdout()).try_clone_to_owned() {
            Ok(fd) => Box::new(WaitsForRoom(std::fs::File::from(fd))),
            Err(e) => return fail(1, format!("mevi-actors: stdout: {e}")),
        },
    };
    // Created now, as the stream's file is: a path that cannot be written fails before the
    // program runs, not after.
    let mut report = None;
    let stream_file = options
        .output
        .as_deref()
        .or(named.as_ref().map(|n| n.0.as_path()));
    if let (Some(path), Some(stream)) = (&options.report, stream_file)
        && crate::report::same_file(path, stream)
    {
        return fail(
            2,
            format!(
                "mevi-actors: --report {} is the stream's file (-o); give another",
                path.display()
            ),
        );
    }
    if let Some(path) = &options.report {
        match std::fs::File::create(path) {
            Ok(f) => report = Some(ReportTap::default().to_file(path.clone(), f)),
            Err(e) => return fail(1, format!("mevi-actors: --report {}: {e}", path.display())),
        }
    }
    let server = match options.serve {
        Some(addr) => {
            let hub = Hub::new(Builder::default().snapshot(&Replay::new(), &Processes::default()));
            let title = crate::model::processes::argv_line(
                &options
                    .argv
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect::<Vec<_>>(),
            );
            match Server::start(addr, hub.clone(), title, options.ui_interval) {
                Ok(server) => {
                    crate::to_stderr!("mevi-actors: serving {}", server.url);
                    if addr.ip().is_unspecified() {
                        crate::to_stderr!(
                            "mevi-actors: --serve {addr}: every interface: whoever reaches this \
                             machine can read the trace"
                        );
                    }
                    report = Some(report.unwrap_or_default().to_hub(hub, options.ui_interval));
                    Some(server)
                }
                Err(e) => return fail(1, format!("mevi-actors: --serve {addr}: {e}")),
            }
        }
        None => None,
    };
    let follow_by = match (options.faults, options.scan, options.records) {
        (false, ..) => FollowBy::Nothing,
        (true, false, _) => FollowBy::Faults,
        (true, true, false) => FollowBy::Scans,
        (true, true, true) => FollowBy::Records,
    };
    // The program starts now, on the tracer's thread, before the actors are made: its start,
    // its wait to be seized and the kernel's work of its exec overlap their making. Until the
    // tracer comes, its first stop after that waits.
    supervisor::install_panic_hook();
    let supervisor = Supervisor::new();
    let tracer_thread = match TracerThread::start(target.clone(), follow_by) {
        Ok(thread) => thread,
        Err(e) => return fail(1, format!("mevi-actors: starting the tracer thread: {e}")),
    };
    // `--stacks`, `--touch-stacks`: the symbolizer starts next, as the program does: reading
    // ahead the debug files of the program and its loader (milliseconds of DWARF) is the run's
    // longest task, and the run's end waits for the names it gives.
    let stacks_wanted = options.stack_depth.is_some() || options.touch_stacks.is_some();
    let symbolizer = if stacks_wanted {
        let (actor, new_sites, sites) = SymbolizerActor::new();
        let program = match &target {
            Target::Spawn { program, .. } => Some(program.clone()),
            Target::Attach { .. } => None,
        };
        if let Err(e) = actor.spawn(supervisor.clone(), program) {
            return fail(
                1,
                format!("mevi-actors: starting the symbolizer thread: {e}"),
            );
        }
        Some((new_sites, sites))
    } else {
        None
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("mevi-actors-io")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(1, format!("mevi-actors: starting the runtime: {e}")),
    };

    let page_size = crate::kernel::page_size();
    // Held until the trace ends.
    let _idle_polling = if options.idle_poll {
        match crate::kernel::idle::IdlePolling::hold() {
            Ok(held) => Some(held),
            Err(e) => {
                crate::to_stderr!(
                    "mevi-actors: --idle-poll: cannot hold /dev/cpu_dma_latency at 0 ({e}); \
                     idle CPUs will halt as usual"
                );
                None
            }
        }
    } else {
        None
    };
    let started = Instant::now();
    let wall = std::time::SystemTime::now();
    let state_options = StateOptions {
        human_summary: options.summary,
        summary_rows: (!options.summary_all).then_some(crate::actors::state::SUMMARY_ROWS),
        verify: options.verify,
        corrupt_first_touch: options.corrupt_state,
        page_size,
        faults: options.faults,
        scan: options.faults && options.scan,
        records: options.faults && options.records,
        only: !options.selection.only.is_empty(),
        mappings_selected: options.selection.selects_ranges(),
        buffer_bytes: options.buffer_bytes,
    };
    // `--stacks`, `--touch-stacks`: the tracer and the lanes take them, the symbolizer names
    // them, the state actor writes them.
    let (shared, sites) = match symbolizer {
        Some((new_sites, sites)) => {
            let depth = options.stack_depth.unwrap_or(DEFAULT_STACK_DEPTH);
            (
                Some(StackShared::new(depth, page_size, new_sites)),
                Some(sites),
            )
        }
        None => (None, None),
    };
    let stacks = shared
        .clone()
        .filter(|_| options.stack_depth.is_some())
        .map(Stacks::new);
    let touch_stacks = shared
        .zip(options.touch_stacks)
        .map(|(shared, period)| (shared, Arc::new(TouchSamplers::new(period))));
    // What the signal handlers and the stream's writer tell the tracer and the run's end.
    let control = RunControl::new();
    let (state, state_handle) = StateActor::new(
        STATE_CAPACITY,
        writer,
        state_options,
        report,
        sites,
        control.clone(),
    );
    // `--threads`: the lanes read the name of each thread whose fault they resolve.
    let thread_names = (!options.selection.threads.is_empty())
        .then(|| Arc::new(ThreadNames::new(options.selection.threads.clone())));
    let state = state.selecting_threads(thread_names.is_some());
    let (mut sequencer, sequencer_handle) =
        Sequencer::new(SEQUENCER_CAPACITY, state_handle, started);
    let thp = if test_hooks::fails(Fault::ThpAlways, None) {
        ThpPolicy::Always
    } else {
        ThpPolicy::of_this_machine()
    };
    if follow_by == FollowBy::Records {
        sequencer = sequencer.placing_records(placing_window(options.sample));
    }
    // A child starts in our cgroup; an attached process is in its own.
    let cgroup = host::cgroup(
        options
            .attach
            .as_ref()
            .and_then(|a| a.pids.first().copied()),
    );
    let start = Event::Start {
        schema: SCHEMA,
        version: env!("CARGO_PKG_VERSION").to_string(),
        argv: options
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        page_size,
        faults: options.faults,
        follow: options
            .faults
            .then_some(match follow_by {
                FollowBy::Faults => "uffd",
                FollowBy::Scans => "scan",
                FollowBy::Records => "records",
                FollowBy::Nothing => "nothing",
            })
            .map(str::to_string),
        thp: Some(thp.name().to_string()),
        wall_ns: wall
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .and_then(|d| u64::try_from(d.as_nanos()).ok()),
        wall: Some(humantime::format_rfc3339_nanos(wall).to_string()),
        stack_depth: options
            .stack_depth
            .or(options.touch_stacks.map(|_| DEFAULT_STACK_DEPTH)),
        touch_stacks: options.touch_stacks,
        attach: options.attach.as_ref().map(|a| a.pids.clone()),
        only: patterns(&options.selection.only),
        threads: patterns(&options.selection.threads),
        regions: (!options.selection.regions.is_empty()).then(|| {
            options
                .selection
                .regions
                .iter()
                .map(|r| [r.start, r.end])
                .collect()
        }),
        min_size: Some(options.selection.min_size).filter(|&n| n > 0),
        host: host::name(),
        cgroup: cgroup.clone(),
        container: cgroup.as_deref().and_then(host::container_id),
    };
    let watched = supervisor.clone();
    let state_task =
        runtime.spawn(async move { watched.watch("the state actor", state.run()).await });
    let watched = supervisor.clone();
    runtime.spawn(async move { watched.watch("the sequencer", sequencer.run(start)).await });
    let signals = Arc::new(ProgramSignals::default());
    let signal_handlers = on_signals(
        &runtime,
        &control,
        options.attach.is_none().then(|| signals.clone()),
    );

    let config = TracerConfig {
        target,
        follow_by,
        lane: LaneConfig {
            page_size,
            capacity: LANE_CAPACITY,
            coalesce: Some(options.coalesce).filter(|d| !d.is_zero()),
            busy_read: BUSY_READ,
            // With idle CPUs polling, a spinning lane only helps while a CPU is free.
            busy_read_needs_free_cpu: options.idle_poll,
        },
        verify: options.verify,
        verify_every: options.verify_every.filter(|_| options.verify),
        thp,
        sample: options.sample,
        selection: options.selection.clone(),
        thread_names,
        stacks,
        touch_stacks,
    };
    let tracer = Tracer::new(
        config,
        runtime.handle().clone(),
        sequencer_handle,
        supervisor.clone(),
        signals,
        control.clone(),
    );
    let traced = tracer_thread.run(tracer);
    // None: the state actor failed (the supervisor has it).
    let report = runtime.block_on(state_task).ok().and_then(Result::ok);
    // The trace is over, and so are the signal handlers of its run; `--serve` lingers on this
    // runtime, and listens for its own first, so that no signal falls between.
    let stop_lingering = server.as_ref().map(|_| StopSignals::listen(&runtime));
    drop(signal_handlers);
    let mut outcome = conclude(traced, report, &supervisor);
    // A run's status is its program's; an attach's, its own: the stream it was for is lost.
    if options.attach.is_some() && outcome.status == 0 && control.stream_lost() {
        outcome.status = 1;
    }
    if let Some(named) = &named {
        named.say_how_to_read();
    }
    if let (Some(server), Some(stop)) = (server, stop_lingering) {
        linger(
            &runtime,
            &control,
            stop,
            server,
            outcome.status,
            options.serve_linger,
        );
    }
    runtime.shutdown_background();
    outcome
}

/// The tracer's thread, started with the program before the actors are made, then given its
/// [`Tracer`]. Dropped without one (the run failed to start), it kills and reaps the program.
struct TracerThread {
    hand: Option<std::sync::mpsc::SyncSender<Tracer>>,
    thread: Option<std::thread::JoinHandle<Result<ProgramEnd, TraceError>>>,
}

impl TracerThread {
    fn start(target: Target, follow_by: FollowBy) -> std::io::Result<Self> {
        let (hand, handed) = std::sync::mpsc::sync_channel::<Tracer>(1);
        let thread = std::thread::Builder::new()
            .name("mevi-actors-tracer".into())
            .spawn(move || {
                // Every later ptrace call is this thread's: the program is seized here.
                let started = Tracer::start_program(&target, follow_by);
                match handed.recv() {
                    Ok(tracer) => tracer.run(started),
                    Err(_) => {
                        if let Ok(Some(program)) = started {
                            program.abandon();
                        }
                        Err(TraceError::Io(std::io::Error::other(
                            "the run did not start",
                        )))
                    }
                }
            })?;
        Ok(Self {
            hand: Some(hand),
            thread: Some(thread),
        })
    }

    /// Hands the thread its tracer and waits for the trace's end.
    fn run(mut self, tracer: Tracer) -> Result<Result<ProgramEnd, TraceError>, String> {
        let (Some(hand), Some(thread)) = (self.hand.take(), self.thread.take()) else {
            return Err("mevi-actors: the tracer thread is gone".into());
        };
        // Refused only if the thread has ended (a panic), which its join reports.
        let _ = hand.send(tracer);
        thread.join().map_err(|panic| {
            format!(
                "mevi-actors: the tracer failed: {}; the traced program was killed",
                supervisor::panic_message(panic.as_ref())
            )
        })
    }
}

impl Drop for TracerThread {
    fn drop(&mut self) {
        drop(self.hand.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The stream's file when stdout is a terminal: a new file, never one that was there. Removed
/// when dropped if nothing was written to it (the run failed before it began).
struct NamedStream(PathBuf);

impl NamedStream {
    /// `mevi-actors.NAME.PID.jsonl` in the current directory (PID: ours, the run's), or with
    /// `.1`, `.2`, … before `.jsonl` if a file of that name is there already.
    fn create(program: &str) -> std::io::Result<(NamedStream, std::fs::File)> {
        let name = file_name_part(program);
        let pid = std::process::id();
        let mut last = None;
        for n in 0..100 {
            let path = PathBuf::from(match n {
                0 => format!("mevi-actors.{name}.{pid}.jsonl"),
                n => format!("mevi-actors.{name}.{pid}.{n}.jsonl"),
            });
            match std::fs::File::options()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(f) => return Ok((NamedStream(path), f)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no free name")))
    }

    /// After the summary: where the stream is and what reads it.
    fn say_how_to_read(&self) {
        if self.is_empty() {
            return;
        }
        let file = self.0.display();
        crate::to_stderr!(
            "mevi-actors: the stream is in {file}: `mevi-actors report {file}` draws it as a \
             page, `mevi-actors replay {file}` answers questions about it"
        );
    }

    fn is_empty(&self) -> bool {
        std::fs::metadata(&self.0).is_ok_and(|m| m.len() == 0)
    }
}

impl Drop for NamedStream {
    fn drop(&mut self) {
        if self.is_empty() {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// A program's name as part of a file name that a shell takes as it is: its last path
/// component, characters other than letters, digits, `.`, `_`, `+` and `-` as `_`, at most 64.
fn file_name_part(program: &str) -> String {
    let base = program.rsplit('/').next().unwrap_or(program);
    let name: String = base
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name.chars().all(|c| c == '.') {
        "trace".to_string()
    } else {
        name
    }
}

/// After the program ended, the live page stays up until Ctrl-C (or `--serve-linger`).
fn linger(
    runtime: &tokio::runtime::Runtime,
    control: &RunControl,
    stop: std::io::Result<StopSignals>,
    server: Server,
    status: i32,
    linger: Option<Duration>,
) {
    if control.stop_asked() {
        // SIGTERM or SIGHUP during the run (`timeout`, a supervisor): they meant all of us.
        return;
    }
    let until = match linger {
        Some(d) => format!("for {} s", d.as_secs_f64()),
        None => "until Ctrl-C".into(),
    };
    let stop = match stop {
        Ok(stop) => stop,
        Err(e) => {
            crate::to_stderr!("mevi-actors: --serve: cannot wait for Ctrl-C ({e}); stopping now");
            return;
        }
    };
    crate::to_stderr!(
        "mevi-actors: the program ended (status {status}); still serving {} {until}",
        server.url
    );
    runtime.block_on(stop.wait(linger));
    drop(server);
}

/// Ctrl-C (SIGINT), SIGTERM and SIGHUP, heard from the moment this is made: made before the
/// user is told that Ctrl-C stops the server, so that no such signal falls between the two. A
/// signal mevi-actors was started with ignored stays ignored (`nohup`'s SIGHUP), as during the
/// run.
struct StopSignals(Vec<tokio::signal::unix::Signal>);

impl StopSignals {
    fn listen(runtime: &tokio::runtime::Runtime) -> std::io::Result<StopSignals> {
        use nix::sys::signal::Signal;
        use tokio::signal::unix::{SignalKind, signal};
        let _entered = runtime.enter();
        let mut signals = Vec::new();
        for stop in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
            if !crate::kernel::signals::is_ignored(stop) {
                signals.push(signal(SignalKind::from_raw(stop as i32))?);
            }
        }
        Ok(StopSignals(signals))
    }

    /// Until one of the signals comes, or `linger` has passed.
    async fn wait(mut self, linger: Option<Duration>) {
        let linger = async {
            match linger {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        let any_signal = async {
            if self.0.is_empty() {
                return std::future::pending().await;
            }
            let arrivals = self.0.iter_mut().map(|s| Box::pin(s.recv()));
            futures::future::select_all(arrivals).await;
        };
        tokio::select! {
            _ = any_signal => {}
            _ = linger => {}
        }
    }
}

/// The run's exit status and report, from how the tracer and the actors ended.
fn conclude(
    traced: Result<Result<ProgramEnd, TraceError>, String>,
    report: Option<RunReport>,
    supervisor: &Supervisor,
) -> RunOutcome {
    let fail = |status: i32, message: String| {
        crate::to_stderr!("{message}");
        RunOutcome {
            status,
            report: None,
        }
    };
    let status = match traced {
        Ok(Ok(end)) => end.shell_status(),
        Ok(Err(TraceError::Io(e))) => return fail(1, format!("mevi-actors: {e}")),
        Ok(Err(TraceError::Attach(line))) => return fail(1, line),
        Ok(Err(TraceError::ActorFailed(why))) => {
            return fail(
                ACTOR_FAILED,
                format!("mevi-actors: {why}; the traced program was killed"),
            );
        }
        Err(message) => return fail(ACTOR_FAILED, message),
    };
    // An actor that failed after the program ended (the stream is incomplete all the same).
    if let Some(why) = supervisor.failure() {
        return fail(ACTOR_FAILED, format!("mevi-actors: {why}"));
    }
    if let Some(r) = report.as_ref()
        && let Some(v) = r.totals.verify.as_ref()
    {
        if let Some(why) = verify_failure(v, r.model.problems.len()) {
            crate::to_stderr!(
                "mevi-actors: verify failed: {why} (the program's exit status was {status})"
            );
            return RunOutcome {
                status: VERIFY_FAILED,
                report,
            };
        }
        if v.unchecked_spaces > 0 {
            crate::to_stderr!(
                "mevi-actors: could not verify: {} address space(s) were never checked (their \
                 `checkpoint_skipped` warnings say why); what was checked agrees (the program's \
                 exit status was {status})",
                v.unchecked_spaces
            );
            return RunOutcome {
                status: VERIFY_INCOMPLETE,
                report,
            };
        }
        if v.unfollowed_spaces > 0 {
            crate::to_stderr!(
                "mevi-actors: could not verify: {} address space(s) were not followed by faults \
                 (their `warning` lines say why); what was checked agrees (the program's exit \
                 status was {status})",
                v.unfollowed_spaces
            );
            return RunOutcome {
                status: VERIFY_INCOMPLETE,
                report,
            };
        }
    }
    RunOutcome { status, report }
}

/// Why `--verify` fails, if it does: a page that differs, a check that could not run, a warning
/// after which the stream is no longer exact, or a stream that does not replay cleanly (lines out
/// of process order, which `replay` reports too). It never passes on what it could not check.
fn verify_failure(v: &VerifyTotals, stream_problems: usize) -> Option<String> {
    let mut why = Vec::new();
    if v.mismatched_pages > 0 {
        why.push(format!(
            "{} pages differ from the kernel's page tables at {} of {} checks",
            v.mismatched_pages, v.failed_points, v.points
        ));
    }
    if v.unchecked_points > 0 {
        why.push(format!("{} checks could not be run", v.unchecked_points));
    }
    if v.inexact_warnings > 0 {
        why.push(format!(
            "{} warnings say the stream is no longer exact",
            v.inexact_warnings
        ));
    }
    if stream_problems > 0 {
        why.push(format!(
            "{stream_problems} problems replaying the stream (`mevi-actors replay` lists them)"
        ));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// What SIGINT, SIGQUIT, SIGTERM and SIGHUP to mevi-actors do.
///
/// `run`: Ctrl-C and Ctrl-\ reach the program from the terminal (it is in our process group), so
/// we only survive them; SIGTERM and SIGHUP are sent to us alone, so we pass them on (to the
/// program's pid). Once the program has ended (descendants may live on), they end mevi-actors
/// itself: the kernel then kills what is still traced (`PTRACE_O_EXITKILL`). The tracer hears of
/// each but SIGQUIT, and ends a process that could not take it as the kernel would have
/// untraced (tracer/untaken.rs).
///
/// `attach` (no `ProgramSignals`): the processes are not in our process group and never see them
/// from us; all four end the trace by detaching.
///
/// A signal we were started with ignored gets no handler: it stays ignored, in us and in the
/// program, which inherits that across exec (`nohup`, `&`).
///
/// The handlers run on the run's runtime until the returned value is dropped.
fn on_signals(
    runtime: &tokio::runtime::Runtime,
    control: &RunControl,
    program: Option<Arc<ProgramSignals>>,
) -> SignalHandlers {
    use nix::sys::signal::Signal;
    let mut handlers = Vec::new();
    for (signal, forwarded) in [
        (Signal::SIGINT, false),
        (Signal::SIGQUIT, false),
        (Signal::SIGTERM, true),
        (Signal::SIGHUP, true),
    ] {
        if crate::kernel::signals::is_ignored(signal) {
            continue;
        }
        let program = program.clone();
        let control = control.clone();
        handlers.push(runtime.spawn(async move {
            let kind = tokio::signal::unix::SignalKind::from_raw(signal as i32);
            let Ok(mut arrivals) = tokio::signal::unix::signal(kind) else {
                return;
            };
            while arrivals.recv().await.is_some() {
                let Some(program) = &program else {
                    control.ask_to_stop();
                    control.ask_to_detach();
                    continue;
                };
                // A core-dumping signal takes no shortcut even untraced.
                if signal != Signal::SIGQUIT {
                    program.arrived(signal, forwarded);
                }
                if !forwarded {
                    continue;
                }
                control.ask_to_stop();
                match program.root_pid() {
                    pid if pid > 0 => {
                        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
                    }
                    _ => {
                        crate::to_stderr!(
                            "mevi-actors: {signal} after the program ended; stopping the trace"
                        );
                        std::process::exit(128 + signal as i32);
                    }
                }
            }
        }));
    }
    SignalHandlers(handlers)
}

/// The run's signal handlers, ended when dropped.
struct SignalHandlers(Vec<tokio::task::JoinHandle<()>>);

impl Drop for SignalHandlers {
    fn drop(&mut self) {
        for handler in &self.0 {
            handler.abort();
        }
    }
}
