//! `mevi-actors replay`: questions asked of a written stream. Each mode is a [`Query`] fed the
//! lines one by one, before and after the replay applies each: memory follows the spaces and
//! processes alive at once, never the file.

pub(crate) mod at;
mod by_site;
pub(crate) mod by_thread;
pub(crate) mod format;
mod maps_at_exit;
mod processes;
pub(crate) mod reader;
mod timeline;

use std::io::{self, Write};
use std::path::PathBuf;
use std::str::FromStr;

use crate::event::{Event, Line};
use crate::model::Replay;

use format::Clock;
use processes::Processes;
use reader::{Failure, Source};

/// What `replay` is asked.
#[derive(Clone, Debug)]
pub enum Mode {
    /// One row per process: its program, peak and final resident memory, first touches, life.
    Processes,
    /// Every mapping of every live space at one instant.
    At(At),
    /// The mappings still there when each space's last process exited.
    MapsAtExit,
    /// Resident bytes per process every so many nanoseconds.
    Timeline { every_ns: u64 },
    /// Bytes by call site (`run --stacks`): mapped, resident at the tree's peak, resident and
    /// still mapped as each space ended; bottom-up and top-down.
    BySite,
    /// Pages first touched per thread, with the thread's names, per process.
    ByThread,
}

/// The instant of `--at`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum At {
    /// After every line with `t_ns` up to this.
    Ns(u64),
    /// After the line at which the whole tree's resident total was largest (its first time).
    Peak,
}

impl FromStr for At {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "peak" {
            return Ok(At::Peak);
        }
        match s.parse::<f64>() {
            Ok(ms) if ms.is_finite() && ms >= 0.0 => Ok(At::Ns((ms * 1e6).round() as u64)),
            _ => Err(format!(
                "`{s}` is neither a time in milliseconds since the trace started (such as 150 \
                 or 12.5) nor `peak`"
            )),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    /// The stream (`-` is stdin).
    pub file: PathBuf,
    /// Skip lines that are not stream lines, with a warning each, instead of stopping (exit 2).
    pub lenient: bool,
    /// One JSON object per line instead of tables.
    pub json: bool,
    pub mode: Mode,
}

/// Whether to read on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Go,
    Stop,
}

/// The replayed state a query looks at, kept line by line.
pub(crate) struct State {
    pub replay: Replay,
    pub processes: Processes,
    pub clock: Clock,
    /// Bytes per page, from the `start` line.
    pub page_size: u64,
    /// The last line applied.
    pub last: Option<(u64, u64)>,
    /// First touches were followed (the `start` line's `faults`): without them (`--no-faults`)
    /// no resident figure was measured.
    pub faults: bool,
    /// Pages were found by scans alone (`"follow":"scan"`: `--faults scan`, `attach --faults
    /// scan`): first touches were not counted one by one. Under `records` they were, those the
    /// kernel recorded (a line's `faults`).
    pub scanned: bool,
}

impl Default for State {
    fn default() -> Self {
        State {
            replay: Replay::new(),
            processes: Processes::default(),
            clock: Clock::default(),
            page_size: 4096,
            last: None,
            faults: true,
            scanned: false,
        }
    }
}

impl State {
    fn apply(&mut self, line: &Line) {
        if let Event::Start {
            wall_ns,
            page_size,
            faults,
            follow,
            ..
        } = &line.event
        {
            self.clock.wall_ns = *wall_ns;
            self.page_size = (*page_size).max(1);
            self.faults = *faults;
            // Pages found by reads alone; `records` names each one's first touch.
            self.scanned = follow.as_deref() == Some("scan");
        }
        self.processes.apply(&mut self.replay, line);
        self.last = Some((line.seq, line.t_ns));
    }

    /// The `t_ns` of the last line applied.
    pub fn t_ns(&self) -> u64 {
        self.last.map_or(0, |(_, t)| t)
    }
}

/// One mode of `replay`: it sees every line before and after the replay applies it, and writes
/// what it finds as it goes.
pub(crate) trait Query {
    /// Before `line` is applied: `state` is as the lines before left it. `Stop` leaves `line`
    /// and the rest unread.
    fn before(&mut self, _state: &State, _line: &Line, _out: &mut dyn Write) -> io::Result<Flow> {
        Ok(Flow::Go)
    }

    /// After `line` is applied.
    fn after(&mut self, _state: &State, _line: &Line, _out: &mut dyn Write) -> io::Result<Flow> {
        Ok(Flow::Go)
    }

    /// At the end of the stream, or where `before` or `after` stopped.
    fn end(&mut self, state: &State, out: &mut dyn Write) -> io::Result<()>;
}

/// Runs `replay` as `options` say; the exit status: 0, 1 (unreadable input, or a stream with
/// problems), 2 (a line that is not a stream line, without `--lenient`).
pub fn run(options: &Options) -> i32 {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let status = match run_to(options, &mut out) {
        Ok(status) => status,
        Err(Failure(status)) => status,
    };
    match out.flush() {
        // A reader that has seen enough (`| head`): nothing more to say.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            crate::to_stderr!("mevi-actors: stdout: {e}");
            1
        }
        Ok(()) => status,
    }
}

fn run_to(options: &Options, out: &mut dyn Write) -> Result<i32, Failure> {
    let mut source = Source::open(&options.file, options.lenient)?;
    let json = options.json;
    let (state, stopped) = match &options.mode {
        Mode::Processes => source.read(&mut processes::Table::new(json), out)?,
        Mode::MapsAtExit => source.read(&mut maps_at_exit::MapsAtExit::new(json), out)?,
        Mode::Timeline { every_ns } => {
            source.read(&mut timeline::Timeline::new(*every_ns, json), out)?
        }
        Mode::BySite => {
            let mut by_site = by_site::BySite::new(json, source.name());
            source.read(&mut by_site, out)?
        }
        Mode::ByThread => {
            let mut by_thread = by_thread::ByThread::new(json, source.name());
            source.read(&mut by_thread, out)?
        }
        Mode::At(At::Ns(t_ns)) => source.read(&mut at::StateAt::at_time(*t_ns, json), out)?,
        Mode::At(At::Peak) => {
            // The peak is known only at the end: find it, then read again up to it.
            source.spool()?;
            let mut finder = at::PeakFinder::default();
            let (whole, _) = source.read(&mut finder, out)?;
            source.rewind()?;
            source.read(&mut at::StateAt::at_peak(finder, json), out)?;
            // What the whole stream says, not only the part read up to the peak.
            return Ok(stream_status(&source, &whole, false));
        }
    };
    Ok(stream_status(&source, &state, stopped))
}

/// Says on stderr what the stream itself says went wrong; the exit status that follows.
pub(crate) fn stream_status(source: &Source, state: &State, stopped: bool) -> i32 {
    let replay = &state.replay;
    for warning in &replay.warnings {
        crate::to_stderr!("mevi-actors: stream warning: {warning}");
    }
    for problem in &replay.problems {
        crate::to_stderr!("mevi-actors: stream problem: {problem}");
    }
    if !stopped && !replay.complete() {
        crate::to_stderr!(
            "mevi-actors: {}: no summary line: the trace is incomplete (cut short), and so are \
             these figures",
            source.name()
        );
    }
    if !state.faults {
        crate::to_stderr!(
            "mevi-actors: {}: traced with --no-faults: first touches and resident memory were \
             not measured (every resident figure here is 0)",
            source.name()
        );
    }
    if source.skipped() > 0 {
        crate::to_stderr!("mevi-actors: {} line(s) skipped", source.skipped());
    }
    if replay.problems.is_empty() { 0 } else { 1 }
}
