//! `mevi-actors export`: a written stream as a profile other tools read. `pprof` is a gzipped
//! `profile.proto` (docs/schema.md, "export --format pprof"): the bytes resident at one instant
//! and those first touched over the whole trace, by call site, with the process, thread and
//! mapping kind as labels.

pub(crate) mod collect;
mod profile;
mod proto;
#[cfg(test)]
mod tests;

use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use prost::Message;

use crate::query::at::PeakFinder;
use crate::query::reader::{Failure, Source};
use crate::query::{At, stream_status};
use crate::report::{same_file, synced};

use collect::{Collect, Target};

/// The instant of `--at`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Instant {
    /// The line at which the whole tree's resident total was largest (its first).
    Peak,
    /// Each address space as it ended, added over the spaces.
    End,
    /// After every line up to this many nanoseconds since the trace started.
    Ns(u64),
}

impl FromStr for Instant {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "end" {
            return Ok(Instant::End);
        }
        match s.parse::<At>() {
            Ok(At::Peak) => Ok(Instant::Peak),
            // 584 years of nanoseconds: a larger time was cut to this.
            Ok(At::Ns(u64::MAX)) => Err(format!("`{s}` ms is later than any trace can last")),
            Ok(At::Ns(ns)) => Ok(Instant::Ns(ns)),
            Err(_) => Err(format!(
                "`{s}` is neither a time in milliseconds since the trace started (such as 150 \
                 or 12.5), `peak` nor `end`"
            )),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    /// The stream (`-` is stdin).
    pub file: PathBuf,
    /// Where the profile goes: `None` = the trace's name with `.pb.gz`; `-` = stdout.
    pub output: Option<PathBuf>,
    pub at: Instant,
    pub lenient: bool,
}

/// Runs `export`; the exit status: 0, 1 (unreadable input, unwritable output, a stream with
/// problems), 2 (usage, an instant outside the trace, a line that is not a stream line).
pub fn run(options: &Options) -> i32 {
    let output = match output(options) {
        Ok(output) => output,
        Err(message) => {
            crate::to_stderr!("mevi-actors: export: {message}");
            return 2;
        }
    };
    match export(options, &output) {
        Ok(status) | Err(Failure(status)) => status,
    }
}

/// Where the profile goes, or why it cannot.
fn output(options: &Options) -> Result<PathBuf, String> {
    let output = match &options.output {
        Some(output) => output.clone(),
        None if options.file.as_os_str() == "-" => {
            return Err("reading stdin, say where the profile goes: -o FILE (- for stdout)".into());
        }
        // Beside a pipe or a device (`/dev/stdin`, `<(zcat t.gz)`) is no place for a file.
        None if !std::fs::metadata(&options.file).is_ok_and(|m| m.is_file())
            || options.file.starts_with("/dev")
            || options.file.starts_with("/proc") =>
        {
            return Err(format!(
                "{} is a pipe or a device: no place beside it for the profile; give -o FILE",
                options.file.display()
            ));
        }
        None => default_output(&options.file),
    };
    // The trace on stdin is the file stdin reads.
    let trace = match options.file.as_os_str() == "-" {
        true => Path::new("/dev/stdin"),
        false => options.file.as_path(),
    };
    if same_file(&output, trace) {
        return Err(format!(
            "{} is the trace itself; give another -o",
            output.display()
        ));
    }
    if output.as_os_str() == "-" && io::stdout().is_terminal() {
        return Err("a profile is binary: not written to a terminal; give -o FILE".into());
    }
    Ok(output)
}

/// Beside the trace: `t.jsonl` → `t.pb.gz`.
fn default_output(trace: &Path) -> PathBuf {
    trace.with_extension("pb.gz")
}

fn export(options: &Options, output: &Path) -> Result<i32, Failure> {
    let mut source = Source::open(&options.file, options.lenient)?;
    let target = match options.at {
        Instant::End => Target::End,
        Instant::Ns(ns) => Target::Ns(ns),
        Instant::Peak => {
            // The peak is known only at the end: find it, then read again.
            source.spool()?;
            let mut finder = PeakFinder::default();
            source.read(&mut finder, &mut io::sink())?;
            source.rewind()?;
            Target::Peak(finder.seq())
        }
    };
    let mut collect = Collect::new(target);
    let (state, stopped) = source.read(&mut collect, &mut io::sink())?;
    if state.last.is_none() {
        crate::to_stderr!(
            "mevi-actors: export: {}: no stream line to export",
            source.name()
        );
        return Err(Failure(2));
    }
    let status = stream_status(&source, &state, stopped);
    let Some(taken) = collect.taken else {
        let Target::Ns(t) = target else {
            return Ok(1);
        };
        crate::to_stderr!(
            "mevi-actors: export: --at {} is after the trace's end (its last line is at {} ms)",
            ms(t),
            ms(state.t_ns())
        );
        return Err(Failure(2));
    };
    let what = match target {
        Target::Peak(Some(_)) => {
            format!("the whole tree's resident peak, at line seq {}", taken.seq)
        }
        Target::Peak(None) => "the end: nothing was ever resident".to_string(),
        Target::End => "each address space as it ended (added over the spaces)".to_string(),
        Target::Ns(t) => format!("{} ms (after line seq {})", ms(t), taken.seq),
    };
    let comments = [
        format!("mevi-actors export of {}", source.name()),
        format!("resident_*: the pages resident at {what}"),
        "touched_*: the pages first touched over the whole trace".to_string(),
    ];
    let page_size = state.page_size;
    let profile = profile::build(collect, page_size, &comments);
    let resident = profile
        .sample
        .iter()
        .fold(0i64, |sum, s| sum.saturating_add(s.value[0]));
    let samples = profile.sample.len();
    if let Err(e) = write_to(output, &profile) {
        crate::to_stderr!("mevi-actors: export: {}: {e}", output.display());
        return Ok(1);
    }
    if output.as_os_str() != "-" {
        let size = |b: u64| humansize::format_size(b, humansize::BINARY);
        let resident = resident.max(0) as u64;
        // A page a fork's child shares with its parent is in each process's samples, as in
        // each one's RssAnon; the tree's figure counts it once.
        let shared = match target {
            Target::Peak(_) | Target::Ns(_) if resident > taken.tree_resident_bytes => format!(
                " (the tree: {}; pages shared since a fork count in each process)",
                size(taken.tree_resident_bytes)
            ),
            _ => String::new(),
        };
        crate::to_stderr!(
            "mevi-actors: export: wrote {} ({samples} samples; {} resident at {what}{shared})",
            output.display(),
            size(resident)
        );
    }
    Ok(status)
}

/// Milliseconds, as `--at` takes them.
fn ms(ns: u64) -> String {
    format!("{}", ns as f64 / 1e6)
}

/// The profile, gzipped, to `output` (`-`: stdout).
fn write_to(output: &Path, profile: &proto::Profile) -> io::Result<()> {
    let bytes = profile.encode_to_vec();
    let gzip = |w: &mut dyn Write| -> io::Result<()> {
        let mut encoder = flate2::write::GzEncoder::new(w, flate2::Compression::default());
        encoder.write_all(&bytes)?;
        encoder.finish()?.flush()
    };
    if output.as_os_str() == "-" {
        return gzip(&mut io::stdout().lock());
    }
    // A regular file is written whole or not at all: beside it, then renamed over it.
    let regular = std::fs::metadata(output).map_or(true, |m| m.is_file());
    if !regular {
        let mut file = File::create(output)?;
        gzip(&mut file)?;
        return synced(file);
    }
    let mut partial = output.as_os_str().to_owned();
    partial.push(format!(".partial-{}", std::process::id()));
    let partial = PathBuf::from(partial);
    let written = File::create(&partial).and_then(|mut file| {
        gzip(&mut file)?;
        synced(file)?;
        std::fs::rename(&partial, output)
    });
    if written.is_err() {
        std::fs::remove_file(&partial).ok();
    }
    written
}
