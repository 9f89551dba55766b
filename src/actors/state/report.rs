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
/// often.
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
    meta_published: Instant,
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
            meta_published: now - META_EVERY,
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
        let meta = (now.duration_since(live.meta_published) >= META_EVERY).then(|| {
            live.meta_published = now;
            self.builder.snapshot(model, lives)
        });
        let bytes = &self.builder.encoder.bytes;
        live.hub.publish(&bytes[live.sent.min(bytes.len())..], meta);
        live.sent = bytes.len();
    }

    /// The whole meta to the live page, and the page to its file (on a blocking thread: it is
    /// megabytes). A failure is said on stderr; the stream and the program's status stand.
    pub async fn finish(self, model: &Replay, lives: &Processes) {
        let (mut meta, records) = self.builder.finish(model, lives);
        if let Some(live) = &self.live {
            // Still a served page: one opened after the end follows its event stream too.
            meta.live = true;
            let json = serde_json::to_string(&meta).unwrap_or_default();
            meta.live = false;
            live.hub.end(&records[live.sent.min(records.len())..], json);
        }
        let Some((path, file)) = self.file else {
            return;
        };
        let written = tokio::task::spawn_blocking(move || -> io::Result<()> {
            let mut out = BufWriter::new(file);
            crate::report::html::write_report(&mut out, &meta, &records)?;
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
