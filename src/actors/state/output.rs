//! Writing the stream, on a thread of its own: a slow reader of the stream (a full pipe, a slow
//! disk) blocks that thread, never a tokio worker. Lines reach it in batches through a bounded
//! channel, so the state actor waits for room there with an `.await`: the backpressure that
//! slows the traced program (docs/architecture.md).

use std::io::{self, BufWriter, Write};
use std::thread::JoinHandle;

use async_channel::{Receiver, Sender};

use crate::event::Line;

/// Lines handed to the writer at once.
const BATCH_LINES: usize = 256;
/// Batches the writer may be behind before the state actor waits.
const BATCHES_IN_FLIGHT: usize = 8;

enum ToWriter {
    Lines(Vec<Line>),
    Flush,
}

/// The stream's end, on whichever side it is written.
struct Writer {
    /// `None` once a write failed: the stream ends there, the trace goes on.
    out: Option<BufWriter<Box<dyn Write + Send>>>,
}

impl Writer {
    fn write(&mut self, lines: &[Line]) {
        let Some(w) = self.out.as_mut() else { return };
        let result = lines.iter().try_for_each(|line| {
            serde_json::to_writer(&mut *w, line).map_err(io::Error::from)?;
            w.write_all(b"\n")
        });
        if let Err(e) = result {
            self.fail(e);
        }
    }

    fn flush(&mut self) {
        if let Some(w) = self.out.as_mut()
            && let Err(e) = w.flush()
        {
            self.fail(e);
        }
    }

    /// Said once (EPIPE when `| head` has read enough, a full disk...); the lines after are
    /// dropped, the trace and its summary go on.
    fn fail(&mut self, e: io::Error) {
        eprintln!("mevi-actors: the event stream can no longer be written ({e}); tracing goes on");
        // Not dropped: a BufWriter's drop would try to write what it holds once more.
        if let Some(w) = self.out.take() {
            drop(w.into_parts());
        }
    }

    fn serve(mut self, inbox: Receiver<ToWriter>) {
        while let Ok(message) = inbox.recv_blocking() {
            match message {
                ToWriter::Lines(lines) => self.write(&lines),
                ToWriter::Flush => self.flush(),
            }
        }
        self.flush();
    }
}

enum Sink {
    Thread {
        tx: Sender<ToWriter>,
        thread: JoinHandle<()>,
    },
    /// No thread could be started: written here, on the worker, rather than not at all.
    Inline(Writer),
}

/// The state actor's side of the stream.
pub(super) struct Output {
    sink: Sink,
    batch: Vec<Line>,
    /// Lines handed over since the last flush.
    dirty: bool,
}

impl Output {
    pub(super) fn start(out: Box<dyn Write + Send>) -> Self {
        let writer = Writer {
            out: Some(BufWriter::with_capacity(1 << 16, out)),
        };
        let (tx, inbox) = async_channel::bounded(BATCHES_IN_FLIGHT);
        // The writer goes to the thread once it runs, so that it is still ours if it cannot.
        let (hand, handed) = std::sync::mpsc::sync_channel::<Writer>(1);
        let spawned = std::thread::Builder::new()
            .name("mevi-actors-writer".into())
            .spawn(move || {
                if let Ok(writer) = handed.recv() {
                    writer.serve(inbox);
                }
            });
        let sink = match spawned {
            Ok(thread) => {
                // Fails only if the thread is already gone, which `finish` reports.
                let _ = hand.send(writer);
                Sink::Thread { tx, thread }
            }
            Err(e) => {
                eprintln!(
                    "mevi-actors: cannot start the stream's writer thread ({e}); the stream is \
                     written by the runtime's workers"
                );
                Sink::Inline(writer)
            }
        };
        Self {
            sink,
            batch: Vec::with_capacity(BATCH_LINES),
            dirty: false,
        }
    }

    /// Queues a line; waits when the writer is behind.
    pub(super) async fn push(&mut self, line: Line) {
        self.batch.push(line);
        if self.batch.len() >= BATCH_LINES {
            self.hand_over().await;
        }
    }

    /// Everything queued goes to the stream's reader now.
    pub(super) async fn flush(&mut self) {
        self.hand_over().await;
        if !self.dirty {
            return;
        }
        self.dirty = false;
        match &mut self.sink {
            Sink::Thread { tx, .. } => {
                let _ = tx.send(ToWriter::Flush).await;
            }
            Sink::Inline(writer) => writer.flush(),
        }
    }

    /// Flushes, and waits until the writer has written everything and stopped.
    pub(super) async fn finish(mut self) {
        self.dirty = true;
        self.flush().await;
        let Sink::Thread { tx, thread } = self.sink else {
            return;
        };
        drop(tx);
        let joined = tokio::task::spawn_blocking(move || thread.join()).await;
        if !matches!(joined, Ok(Ok(()))) {
            eprintln!(
                "mevi-actors: the stream's writer thread failed; the stream may be cut short"
            );
        }
    }

    async fn hand_over(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let lines = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH_LINES));
        self.dirty = true;
        match &mut self.sink {
            // Closed only if the writer thread died, which `finish` reports.
            Sink::Thread { tx, .. } => {
                let _ = tx.send(ToWriter::Lines(lines)).await;
            }
            Sink::Inline(writer) => writer.write(&lines),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;
    use std::sync::{Arc, Mutex};

    /// A `Write` whose bytes the test can read after the writer is done.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn warning(seq: u64) -> Line {
        Line {
            seq,
            t_ns: seq,
            event: Event::Warning {
                pid: None,
                space: None,
                what: crate::event::WarningKind::PagesUnknown,
                message: "é".repeat(3),
            },
        }
    }

    #[tokio::test]
    async fn every_line_is_written_in_order_by_the_end() {
        let shared = Shared::default();
        let mut output = Output::start(Box::new(shared.clone()));
        let n = BATCH_LINES as u64 * 3 + 7;
        for seq in 0..n {
            output.push(warning(seq)).await;
        }
        output.finish().await;
        let text = String::from_utf8(shared.0.lock().unwrap().clone()).unwrap();
        let seqs: Vec<u64> = text
            .lines()
            .map(|l| serde_json::from_str::<Line>(l).unwrap().seq)
            .collect();
        assert_eq!(seqs, (0..n).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_flush_reaches_the_reader_before_the_end() {
        let shared = Shared::default();
        let mut output = Output::start(Box::new(shared.clone()));
        output.push(warning(0)).await;
        output.flush().await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while shared.0.lock().unwrap().is_empty() {
            assert!(std::time::Instant::now() < deadline, "the flush never came");
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        output.finish().await;
    }
}
