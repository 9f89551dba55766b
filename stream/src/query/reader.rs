//! Reading a stream line by line into a [`State`], feeding a [`Query`] as it goes.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::event::Line;

use super::{Flow, Query, State};

/// Why reading ended early, as the exit status to give.
#[derive(Debug)]
pub(crate) struct Failure(pub i32);

/// Where the lines come from: a file, or stdin (spooled to an unnamed file when it must be read
/// twice).
pub(crate) struct Source {
    path: PathBuf,
    input: Input,
    lenient: bool,
    /// Lines skipped by `--lenient` in the first reading (a second one says nothing again).
    skipped: usize,
    readings: usize,
}

enum Input {
    Stdin,
    File(File),
}

impl Source {
    pub fn open(path: &Path, lenient: bool) -> Result<Self, Failure> {
        let input = if path.as_os_str() == "-" {
            Input::Stdin
        } else {
            Input::File(File::open(path).map_err(|e| input_failure(path, e))?)
        };
        Ok(Source {
            path: path.to_path_buf(),
            input,
            lenient,
            skipped: 0,
            readings: 0,
        })
    }

    /// The stream's name in messages.
    pub fn name(&self) -> String {
        self.path.display().to_string()
    }

    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// Makes the source readable twice: stdin, a pipe or anything else that cannot be rewound
    /// (`<(zcat t.gz)`) is copied to a file that has no name (`O_TMPFILE`: gone with us), so
    /// memory stays bounded.
    pub fn spool(&mut self) -> Result<(), Failure> {
        if let Input::File(f) = &self.input
            && f.metadata().is_ok_and(|m| m.is_file())
        {
            return Ok(());
        }
        let dir = std::env::temp_dir();
        let spooled = (|| -> io::Result<File> {
            let mut file = unnamed_file(&dir)?;
            match &mut self.input {
                Input::Stdin => io::copy(&mut io::stdin().lock(), &mut file)?,
                Input::File(f) => io::copy(f, &mut file)?,
            };
            file.rewind()?;
            Ok(file)
        })();
        match spooled {
            Ok(file) => {
                self.input = Input::File(file);
                Ok(())
            }
            Err(e) => {
                crate::to_stderr!(
                    "mevi-actors: cannot keep {} in {} to read it twice: {e}",
                    self.name(),
                    dir.display()
                );
                Err(Failure(1))
            }
        }
    }

    /// Back to the first line, for a second reading.
    pub fn rewind(&mut self) -> Result<(), Failure> {
        match &mut self.input {
            Input::File(f) => f.rewind().map_err(|e| input_failure(&self.path, e)),
            Input::Stdin => Err(Failure(1)),
        }
    }

    /// Reads every line (or up to where `query` stops) into a fresh state, then ends the query.
    /// Returns the state and whether the query stopped before the end.
    pub fn read(
        &mut self,
        query: &mut dyn Query,
        out: &mut dyn Write,
    ) -> Result<(State, bool), Failure> {
        self.readings += 1;
        let quiet = self.readings > 1;
        let input: Box<dyn Read + '_> = match &mut self.input {
            Input::Stdin => Box::new(io::stdin().lock()),
            Input::File(f) => Box::new(f),
        };
        let mut state = State::default();
        let mut stopped = false;
        let mut lines = Lines::new(input);
        let mut i = 0usize;
        loop {
            let raw = match lines.next() {
                Ok(Some(raw)) => raw,
                Ok(None) => break,
                Err(Next::Io(e)) => return Err(input_failure(&self.path, e)),
                Err(Next::TooLong) if self.lenient => {
                    i += 1;
                    if !quiet {
                        crate::to_stderr!(
                            "mevi-actors: {}: line {i} skipped: longer than {}, not a \
                             stream line",
                            self.path.display(),
                            LINE_LIMIT_TEXT
                        );
                        self.skipped += 1;
                    }
                    match lines.skip_line() {
                        Ok(()) => continue,
                        Err(e) => return Err(input_failure(&self.path, e)),
                    }
                }
                Err(Next::TooLong) => {
                    crate::to_stderr!(
                        "mevi-actors: {}: line {} is longer than {}: not a stream line (none \
                         is that long); --lenient skips such lines",
                        self.path.display(),
                        i + 1,
                        LINE_LIMIT_TEXT
                    );
                    return Err(Failure(2));
                }
            };
            i += 1;
            if raw.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let line: Line = match serde_json::from_slice(raw) {
                Ok(line) => line,
                Err(e) if self.lenient => {
                    if !quiet {
                        crate::to_stderr!(
                            "mevi-actors: {}: line {i} skipped: {e}",
                            self.path.display(),
                        );
                        self.skipped += 1;
                    }
                    continue;
                }
                Err(e) => {
                    crate::to_stderr!(
                        "mevi-actors: {}: line {i} is not a stream line ({e}); --lenient skips \
                         such lines",
                        self.path.display(),
                    );
                    return Err(Failure(2));
                }
            };
            if query.before(&state, &line, out).map_err(output_failure)? == Flow::Stop {
                stopped = true;
                break;
            }
            state.apply(&line);
            if query.after(&state, &line, out).map_err(output_failure)? == Flow::Stop {
                stopped = true;
                break;
            }
        }
        query.end(&state, out).map_err(output_failure)?;
        Ok((state, stopped))
    }
}

/// The longest line read: far above any stream line (an `exec` line's argv is at most the
/// kernel's 2 MiB of arguments, a `site` line's 1024 frames well under that), so that a file
/// with no newline (`/dev/zero`, a binary file) is refused at 64 MiB instead of held whole.
const LINE_LIMIT: usize = 64 << 20;
const LINE_LIMIT_TEXT: &str = "64 MiB";

/// Why no line came.
enum Next {
    Io(io::Error),
    /// The line has more than [`LINE_LIMIT`] bytes before its newline (it is not read further).
    TooLong,
}

/// The lines of a reader, each at most [`LINE_LIMIT`] bytes, without their newline.
struct Lines<R> {
    input: BufReader<R>,
    line: Vec<u8>,
}

impl<R: Read> Lines<R> {
    fn new(input: R) -> Self {
        Lines {
            input: BufReader::with_capacity(1 << 16, input),
            line: Vec::new(),
        }
    }

    fn next(&mut self) -> Result<Option<&[u8]>, Next> {
        // A long line leaves a large buffer behind: give it back before the next.
        if self.line.capacity() > 1 << 20 {
            self.line = Vec::new();
        }
        self.line.clear();
        let limit = LINE_LIMIT as u64 + 1;
        let n = (&mut self.input)
            .take(limit)
            .read_until(b'\n', &mut self.line)
            .map_err(Next::Io)?;
        if n == 0 {
            return Ok(None);
        }
        if self.line.last() == Some(&b'\n') {
            self.line.pop();
        } else if self.line.len() > LINE_LIMIT {
            self.line = Vec::new();
            return Err(Next::TooLong);
        }
        Ok(Some(&self.line))
    }

    /// Reads past the rest of the current line without keeping it.
    fn skip_line(&mut self) -> io::Result<()> {
        loop {
            let buf = match self.input.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                return Ok(());
            }
            match buf.iter().position(|&b| b == b'\n') {
                Some(at) => {
                    self.input.consume(at + 1);
                    return Ok(());
                }
                None => {
                    let len = buf.len();
                    self.input.consume(len);
                }
            }
        }
    }
}

fn input_failure(path: &Path, e: io::Error) -> Failure {
    crate::to_stderr!("mevi-actors: {}: {e}", path.display());
    Failure(1)
}

/// A closed stdout (`| head`) ends the replay quietly; any other write error is said.
fn output_failure(e: io::Error) -> Failure {
    if e.kind() == io::ErrorKind::BrokenPipe {
        return Failure(0);
    }
    crate::to_stderr!("mevi-actors: stdout: {e}");
    Failure(1)
}

/// A new file in `dir` that no other process can open, gone once closed: `O_TMPFILE` on Linux;
/// elsewhere a file made under a name of its own, and the name removed at once.
#[cfg(target_os = "linux")]
fn unnamed_file(dir: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    File::options()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)
}

#[cfg(not(target_os = "linux"))]
fn unnamed_file(dir: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(format!("mevi-actors.spool.{}", std::process::id()));
    let file = File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(file)
}
