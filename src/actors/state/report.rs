//! `run --report FILE`: the report's builder fed by the state actor beside its own replay, so
//! the page is written when the run ends, from the same lines as the stream, without reading
//! the stream back.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use crate::event::Line;
use crate::model::Replay;
use crate::model::processes::Processes;
use crate::report::build::Builder;

/// The page's file (created before the program starts, so a bad path fails early) and its
/// builder.
pub struct ReportTap {
    path: PathBuf,
    file: File,
    builder: Builder,
}

impl ReportTap {
    pub fn new(path: PathBuf, file: File) -> Self {
        ReportTap {
            path,
            file,
            builder: Builder::default(),
        }
    }

    pub fn before(&mut self, model: &Replay, line: &Line) {
        self.builder.before(model, line);
    }

    pub fn after(&mut self, model: &Replay, lives: &Processes, line: &Line) {
        self.builder.after(model, lives, line);
    }

    /// Writes the page (on a blocking thread: it is megabytes). A failure is said on stderr;
    /// the stream and the program's status stand.
    pub async fn finish(self, model: &Replay, lives: &Processes) {
        let (meta, records) = self.builder.finish(model, lives);
        let (path, file) = (self.path, self.file);
        let written = tokio::task::spawn_blocking(move || -> io::Result<()> {
            let mut out = BufWriter::new(file);
            crate::report::html::write(&mut out, &meta, &records)?;
            out.flush()?;
            out.into_inner().map_err(|e| e.into_error())?.sync_all()
        })
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e.to_string())));
        if let Err(e) = written {
            crate::to_stderr!("mevi-actors: --report {}: {e}", path.display());
        }
    }
}
