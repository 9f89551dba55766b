//! `run --report FILE` and `run --serve`: the report's builder fed by the state actor beside its
//! own replay, from the same lines as the stream. The page is written when the run ends, and
//! a live page's hub is given what is new every `--ui-interval-ms`.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::event::Line;
use crate::model::Replay;
use crate::model::processes::Processes;
use crate::report::build::Builder;
use crate::report::live::Hub;

/// The meta, which is larger than the bytes a few lines add, goes to a live page at most this
/// often, and only when lines came.
const META_EVERY: Duration = Duration::from_millis(250);

/// The page's builder, and where its results go.
#[derive(Default)]
pub struct ReportTap {
    builder: Builder,
    /// `--report`: created before the program starts, so a bad path fails early.
    file: Option<(PathBuf, File)>,
    live: Option<Live>,
}

struct Live {
    hub: Arc<Hub>,
    interval: Duration,
    published: Instant,
    /// When the next meta may go: its making takes the state actor's time, so the larger it
    /// is, the rarer it goes (at most 1/20 of the time is spent on it).
    next_meta: Instant,
    /// Lines came since the last meta.
    news: bool,
    /// Record bytes already in the hub.
    sent: usize,
}

impl ReportTap {
    pub fn to_file(mut self, path: PathBuf, file: File) -> Self {
        self.file = Some((path, file));
        self
    }

    pub fn to_hub(mut self, hub: Arc<Hub>, interval: Duration) -> Self {
        let now = Instant::now();
        self.live = Some(Live {
            hub,
            interval,
            published: now,
            next_meta: now,
            news: true,
            sent: 0,
        });
        self
    }

    /// How often a live page wants news, when there is one.
    pub fn interval(&self) -> Option<Duration> {
        self.live.as_ref().map(|l| l.interval)
    }

    pub fn before(&mut self, model: &Replay, line: &Line) {
        self.builder.before(model, line);
    }

    pub fn after(&mut self, model: &Replay, lives: &Processes, line: &Line) {
        self.builder.after(model, lives, line);
        if let Some(live) = &mut self.live {
            live.news = true;
        }
        self.publish(model, lives);
    }

    /// Gives the hub what is new, if an interval has passed since it was last given some.
    pub fn publish(&mut self, model: &Replay, lives: &Processes) {
        let Some(live) = &mut self.live else {
            return;
        };
        let now = Instant::now();
        if now.duration_since(live.published) < live.interval {
            return;
        }
        live.published = now;
        let meta = (live.news && now >= live.next_meta).then(|| {
            live.news = false;
            let meta = self.builder.snapshot(model, lives);
            live.next_meta = now + (now.elapsed() * 20).max(META_EVERY);
            meta
        });
        let bytes = &self.builder.encoder.bytes;
        let new = &bytes[live.sent.min(bytes.len())..];
        if !new.is_empty() || meta.is_some() {
            live.hub.publish(new, meta);
        }
        live.sent = bytes.len();
    }

    /// The whole meta to the live page, and the page to its file (on a blocking thread: it is
    /// megabytes). A failure is said on stderr; the stream and the program's status stand.
    pub async fn finish(mut self, model: &Replay, lives: &Processes) {
        let (mut meta, records) = std::mem::take(&mut self.builder).finish(model, lives);
        if let Some(live) = &self.live {
            // Still a served page: one opened after the end follows its event stream too.
            meta.live = true;
            let json = serde_json::to_string(&meta).unwrap_or_default();
            meta.live = false;
            live.hub.end(&records[live.sent.min(records.len())..], json);
        }
        let Some((path, file)) = self.file.take() else {
            return;
        };
        let written = tokio::task::spawn_blocking(move || -> io::Result<()> {
            let mut out = BufWriter::new(file);
            crate::report::html::write_report(&mut out, &meta, &records)?;
            out.flush()?;
            crate::report::synced(out.into_inner().map_err(|e| e.into_error())?)
        })
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e.to_string())));
        if let Err(e) = written {
            crate::to_stderr!("mevi-actors: --report {}: {e}", path.display());
        }
    }
}

impl Drop for ReportTap {
    /// A run that failed before its end writes no page: the file made to check its path goes,
    /// rather than stay empty as if it were one.
    fn drop(&mut self) {
        if let Some((path, _)) = self.file.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}
