//! Writing the stream, on a thread of its own: a slow reader of the stream (a full pipe, a slow
//! disk) blocks that thread, never a tokio worker. Lines are turned into bytes here, on the state
//! actor, and reach the thread in batches through a queue of at most `--buffer` bytes: a reader
//! that falls behind for a while costs the program nothing until the queue is full; then the
//! state actor waits for room with an `.await`, the backpressure that slows the traced program
//! (docs/architecture.md). When the stream can no longer be written (EPIPE: `| head` has read
//! enough; a full disk), it says so once on stderr and to the run's control (an `attach` then
//! detaches), and the trace goes on, its lines dropped.

use std::io::{self, BufWriter, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};

use tokio::sync::Semaphore;

use crate::actors::control::RunControl;
use crate::event::Line;

/// Lines turned into one batch of bytes at most.
const BATCH_LINES: usize = 256;
/// A batch goes to the writer once it holds this many bytes, even short of `BATCH_LINES`.
const BATCH_BYTES: usize = 64 << 10;

/// The default of `--buffer`: a few seconds of a busy program's lines, small beside the memory
/// of the program being traced.
pub const DEFAULT_BUFFER_BYTES: u32 = 4 << 20;
/// The same, as `--buffer` shows and takes it.
pub const DEFAULT_BUFFER: &str = "4MiB";

/// The stream's file or pipe, written as if it blocked: a descriptor left non-blocking by
/// whoever gave it to us (a shell, a parent's `O_NONBLOCK` pipe) answers EAGAIN when full, which
/// means "wait for the reader", never "the reader has gone".
pub struct WaitsForRoom(pub std::fs::File);

impl Write for WaitsForRoom {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.0.write(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.wait_for_room()?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                written => return written,
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl WaitsForRoom {
    fn wait_for_room(&self) -> io::Result<()> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd;
        let mut fds = [PollFd::new(self.0.as_fd(), PollFlags::POLLOUT)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

enum ToWriter {
    Bytes(Vec<u8>),
    Flush,
}

/// The stream's end, on whichever side it is written.
struct Writer {
    /// `None` once a write failed: the stream ends there, the trace goes on.
    out: Option<BufWriter<Box<dyn Write + Send>>>,
    /// Set when a write failed, so that the lines after it are not even turned into bytes.
    closed: Arc<AtomicBool>,
    /// Told when a write failed: the run's exit status and an `attach`'s end depend on it.
    control: RunControl,
}

impl Writer {
    fn write(&mut self, bytes: &[u8]) {
        let Some(w) = self.out.as_mut() else { return };
        if let Err(e) = w.write_all(bytes) {
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

    /// Said once; the lines after are dropped, the trace and its summary on stderr go on, and
    /// the exit status stays the program's (README, "The stream's reader").
    fn fail(&mut self, e: io::Error) {
        let why = if e.kind() == io::ErrorKind::BrokenPipe {
            "its reader has gone".to_string()
        } else {
            e.to_string()
        };
        crate::to_stderr!(
            "mevi-actors: the event stream can no longer be written ({why}); the rest of the \
             stream is dropped (a program run runs on, traced; processes attached to are let go)"
        );
        self.closed.store(true, Ordering::Relaxed);
        self.control.lose_stream();
        // Not dropped: a BufWriter's drop would try to write what it holds once more.
        if let Some(w) = self.out.take() {
            drop(w.into_parts());
        }
    }

    /// Writes what arrives, giving each batch's bytes back to the queue's budget once written.
    fn serve(mut self, inbox: Receiver<ToWriter>, room: Arc<Semaphore>, budget: usize) {
        while let Ok(message) = inbox.recv() {
            match message {
                ToWriter::Bytes(bytes) => {
                    self.write(&bytes);
                    room.add_permits(bytes.len().min(budget));
                }
                ToWriter::Flush => self.flush(),
            }
        }
        self.flush();
    }
}

enum Sink {
    Thread {
        tx: Sender<ToWriter>,
        /// Sent once the thread has written everything and closed the stream; dropped unsent
        /// if it failed. Awaited rather than joined: a join would take a thread of tokio's
        /// blocking pool, made for it at every run's end.
        done: tokio::sync::oneshot::Receiver<()>,
    },
    /// No thread could be started: written here, on the worker, rather than not at all.
    Inline(Writer),
}

/// The state actor's side of the stream.
pub(super) struct Output {
    sink: Sink,
    /// The queue's free bytes: a batch takes its size (at most the whole budget) before it is
    /// queued, and the writer gives it back once the batch is written.
    room: Arc<Semaphore>,
    budget: u32,
    batch: Vec<u8>,
    batch_lines: usize,
    closed: Arc<AtomicBool>,
    /// Lines handed over since the last flush.
    dirty: bool,
}

impl Output {
    /// A writer of `out` with a queue of `budget` bytes (at least one batch's worth is used).
    pub(super) fn start(out: Box<dyn Write + Send>, budget: u32, control: RunControl) -> Self {
        let budget = budget.max(1);
        let closed = Arc::new(AtomicBool::new(false));
        let writer = Writer {
            out: Some(BufWriter::with_capacity(1 << 16, out)),
            closed: closed.clone(),
            control,
        };
        let room = Arc::new(Semaphore::new(budget as usize));
        // Unbounded: the byte budget bounds it. std's channel wakes the writer once a message:
        // its receiver takes no lock the sender holds as it wakes it (async-channel's listener
        // list made the two threads pass the CPU back and forth a few times a message when the
        // writer was woken on the sender's CPU).
        let (tx, inbox) = std::sync::mpsc::channel();
        // The writer goes to the thread once it runs, so that it is still ours if it cannot.
        let (hand, handed) = std::sync::mpsc::sync_channel::<Writer>(1);
        let given_back = room.clone();
        let (finished, done) = tokio::sync::oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name("mevi-actors-writer".into())
            .spawn(move || {
                // However the thread ends, a state actor waiting for room must not wait forever:
                // it finds the queue closed, and `finish` says the thread failed.
                struct CloseOnExit(Arc<Semaphore>);
                impl Drop for CloseOnExit {
                    fn drop(&mut self) {
                        self.0.close();
                    }
                }
                let _close = CloseOnExit(given_back.clone());
                if let Ok(writer) = handed.recv() {
                    writer.serve(inbox, given_back, budget as usize);
                    // The stream is closed (the writer dropped): the run may end.
                    let _ = finished.send(());
                }
            });
        let sink = match spawned {
            Ok(_detached) => {
                // Fails only if the thread is already gone, which `finish` reports.
                let _ = hand.send(writer);
                Sink::Thread { tx, done }
            }
            Err(e) => {
                crate::to_stderr!(
                    "mevi-actors: cannot start the stream's writer thread ({e}); the stream is \
                     written by the runtime's workers"
                );
                Sink::Inline(writer)
            }
        };
        Self {
            sink,
            room,
            budget,
            batch: Vec::with_capacity(BATCH_BYTES),
            batch_lines: 0,
            closed,
            dirty: false,
        }
    }

    /// Queues a line; waits when the queue is full.
    pub(super) async fn push(&mut self, line: Line) {
        if self.closed.load(Ordering::Relaxed) {
            return;
        }
        if let Err(e) = serde_json::to_writer(&mut self.batch, &line) {
            // A line is plain data; this would be a bug, and the stream says nothing wrong.
            tracing::error!(seq = line.seq, "a line could not be serialized: {e}");
        }
        self.batch.push(b'\n');
        self.batch_lines += 1;
        if self.batch_lines >= BATCH_LINES || self.batch.len() >= BATCH_BYTES {
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
            // Refused only if the writer thread died, which `finish` reports.
            Sink::Thread { tx, .. } => {
                let _ = tx.send(ToWriter::Flush);
            }
            Sink::Inline(writer) => writer.flush(),
        }
    }

    /// Writes everything queued, and waits until the writer has stopped. The last bytes and
    /// the queue's end go together: the writer flushes as the queue ends, so the stream's end is
    /// one wake-up of its thread, not one a message.
    pub(super) async fn finish(mut self) {
        self.hand_over().await;
        match self.sink {
            Sink::Thread { tx, done } => {
                drop(tx);
                if done.await.is_err() {
                    crate::to_stderr!(
                        "mevi-actors: the stream's writer thread failed; the stream may be cut \
                         short"
                    );
                }
            }
            Sink::Inline(mut writer) => writer.flush(),
        }
    }

    async fn hand_over(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let bytes = std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH_BYTES));
        self.batch_lines = 0;
        self.dirty = true;
        match &mut self.sink {
            Sink::Thread { tx, .. } => {
                // A batch larger than the whole budget waits for an empty queue.
                let size = bytes.len().min(self.budget as usize) as u32;
                match self.room.acquire_many(size).await {
                    // Given back by the writer, once written.
                    Ok(permit) => permit.forget(),
                    // The writer thread is gone: nothing can be written any more.
                    Err(_) => return,
                }
                // Closed only if the writer thread died, which `finish` reports.
                let _ = tx.send(ToWriter::Bytes(bytes));
            }
            Sink::Inline(writer) => writer.write(&bytes),
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

    #[test]
    fn the_default_buffer_reads_as_its_bytes() {
        assert_eq!(
            parse_size::parse_size(DEFAULT_BUFFER).unwrap(),
            u64::from(DEFAULT_BUFFER_BYTES)
        );
    }

    #[tokio::test]
    async fn every_line_is_written_in_order_by_the_end() {
        let shared = Shared::default();
        let mut output = Output::start(
            Box::new(shared.clone()),
            DEFAULT_BUFFER_BYTES,
            RunControl::new(),
        );
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

    /// A reader that has gone.
    struct Gone;

    impl Write for Gone {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_stream_that_cannot_be_written_is_lost_to_the_run() {
        let control = RunControl::new();
        let mut output = Output::start(Box::new(Gone), DEFAULT_BUFFER_BYTES, control.clone());
        output.push(warning(0)).await;
        assert!(!control.stream_lost(), "nothing was written yet");
        output.finish().await;
        assert!(control.stream_lost());
        assert!(
            !control.detach_asked(),
            "the writer only says what happened"
        );
    }

    #[tokio::test]
    async fn a_flush_reaches_the_reader_before_the_end() {
        let shared = Shared::default();
        let mut output = Output::start(
            Box::new(shared.clone()),
            DEFAULT_BUFFER_BYTES,
            RunControl::new(),
        );
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
