//! `mevi-actors report`: one self-contained HTML file of a trace, with time travel
//! (docs/report.md). The Rust side builds the page's data line by line beside the replay
//! ([`build::Builder`]): the records of every space's state over time, and the meta; the page
//! itself (`page/`: template, style, scripts) is included at build time.

pub mod buckets;
pub mod build;
pub mod decode;
mod events;
pub mod format;
pub mod html;
pub mod live;
pub mod meta;
pub mod page;
pub mod records;
pub mod serve;
pub mod stacks;
pub mod wire;

#[cfg(test)]
mod tests;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::event::Line;
use crate::query::reader::{Failure, Source};
use crate::query::{Flow, Query, State, stream_status};

use build::Builder;
use meta::Meta;

#[derive(Clone, Debug)]
pub struct Options {
    /// The stream (`-` is stdin).
    pub file: PathBuf,
    /// Where to write the page: `None` = the trace's name with `.html`; `-` = stdout.
    pub output: Option<PathBuf>,
    pub lenient: bool,
}

/// Feeds the builder as the reader replays the stream.
struct Report {
    builder: Option<Builder>,
    done: Option<(Meta, Vec<u8>)>,
}

impl Query for Report {
    fn before(&mut self, state: &State, line: &Line, _: &mut dyn Write) -> io::Result<Flow> {
        if let Some(b) = &mut self.builder {
            b.before(&state.replay, line);
        }
        Ok(Flow::Go)
    }

    fn after(&mut self, state: &State, line: &Line, _: &mut dyn Write) -> io::Result<Flow> {
        if let Some(b) = &mut self.builder {
            b.after(&state.replay, &state.processes, line);
        }
        Ok(Flow::Go)
    }

    fn end(&mut self, state: &State, _: &mut dyn Write) -> io::Result<()> {
        if let Some(b) = self.builder.take() {
            self.done = Some(b.finish(&state.replay, &state.processes));
        }
        Ok(())
    }
}

/// Where the page goes when `-o` is not given: beside the trace, `.html` for its extension.
fn default_output(trace: &Path) -> Option<PathBuf> {
    (trace.as_os_str() != "-").then(|| trace.with_extension("html"))
}

/// Whether writing `output` would overwrite `trace` (the same regular file under any name; `-`
/// is stdin on one side and stdout on the other, never the same, and a device such as
/// `/dev/null` keeps nothing to overwrite).
pub fn same_file(output: &Path, trace: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if output.as_os_str() == "-" || trace.as_os_str() == "-" {
        return false;
    }
    match (std::fs::metadata(output), std::fs::metadata(trace)) {
        (Ok(a), Ok(b)) => a.is_file() && (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// Runs `report`; the exit status: 0, 1 (unreadable input or unwritable output, or a stream
/// with problems), 2 (usage, or a line that is not a stream line without `--lenient`).
pub fn run(options: &Options) -> i32 {
    let Some(output) = options
        .output
        .clone()
        .or_else(|| default_output(&options.file))
    else {
        crate::to_stderr!(
            "mevi-actors: report: reading stdin, say where the page goes: -o FILE (- for stdout)"
        );
        return 2;
    };
    if same_file(&output, &options.file) {
        crate::to_stderr!(
            "mevi-actors: report: {} is the trace itself; give another -o",
            output.display()
        );
        return 2;
    }
    let mut source = match Source::open(&options.file, options.lenient) {
        Ok(source) => source,
        Err(Failure(status)) => return status,
    };
    let mut query = Report {
        builder: Some(Builder::default()),
        done: None,
    };
    let (state, stopped) = match source.read(&mut query, &mut io::sink()) {
        Ok(read) => read,
        Err(Failure(status)) => return status,
    };
    let status = stream_status(&source, &state, stopped);
    let Some((meta, records)) = query.done else {
        return 1;
    };
    match write_to(&output, &meta, &records) {
        Ok(()) => status,
        Err(e) => {
            crate::to_stderr!("mevi-actors: report: {}: {e}", output.display());
            1
        }
    }
}

/// Writes the page to `output` (`-`: stdout).
pub fn write_to(output: &Path, meta: &Meta, records: &[u8]) -> io::Result<()> {
    if output.as_os_str() == "-" {
        let mut out = BufWriter::new(io::stdout().lock());
        html::write_report(&mut out, meta, records)?;
        return out.flush();
    }
    let mut out = BufWriter::new(File::create(output)?);
    html::write_report(&mut out, meta, records)?;
    out.flush()?;
    synced(out.into_inner().map_err(|e| e.into_error())?)
}

/// A written page on disk before we say so; a device (`/dev/null`) has nothing to sync.
pub fn synced(file: File) -> std::io::Result<()> {
    match file.metadata() {
        Ok(m) if !m.is_file() => Ok(()),
        _ => file.sync_all(),
    }
}
