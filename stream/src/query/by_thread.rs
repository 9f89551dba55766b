//! `replay --by-thread`: per process, the pages each of its threads first touched (the `tid` of
//! its `resident` lines), and the names the thread had. Each process is written as it exits
//! (those the stream never saw exit at the end), its threads largest first: memory follows the
//! processes alive at once.
//!
//! A thread's names, oldest first: its creator's as it starts (`thread`), each it gave itself
//! (`thread_name`), and the one it had at its exit (`thread_exit`) when that differs (another
//! thread named it through `/proc`). A main thread starts with the name of the thread that
//! forked it, or after an `exec` the program's file name (as the kernel names it, cut to 15
//! bytes): a guess, which the name a `thread` line reads (its creator's) replaces. A `thread`
//! line is written at its creator's clone stop, so its name is the creator's at that point.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

use crate::event::{Event, FoundBy, Line, ResidentFrom};

use super::format;
use super::processes::Process;
use super::{Flow, Query, State};

/// The kernel keeps a thread's name in 16 bytes, its NUL included.
const COMM_BYTES: usize = 15;

/// Pages and their first touch's kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Pages {
    pages: u64,
    /// Of those, read first: the shared zero page was mapped.
    zero: u64,
}

impl Pages {
    fn add(&mut self, pages: u64, write: bool) {
        self.pages += pages;
        if !write {
            self.zero += pages;
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Thread {
    /// Oldest first, no name twice in a row.
    names: Vec<String>,
    /// The last name is a guess (a program's file name at its exec), not read from the kernel.
    guessed: bool,
    touched: Pages,
}

impl Thread {
    /// The name the kernel gave it now.
    fn read(&mut self, name: &str) {
        if self.guessed {
            self.names.pop();
            self.guessed = false;
        }
        if self.names.last().map(String::as_str) != Some(name) {
            self.names.push(name.to_string());
        }
    }

    /// It named itself: the name it had before stays, a guess included (it was likely right).
    fn renamed(&mut self, name: &str) {
        self.guessed = false;
        self.read(name);
    }

    /// What its name is likely to be now, until the kernel's is read.
    fn guess(&mut self, name: String) {
        self.read(&name);
        self.guessed = true;
    }

    /// `last (was: older, oldest)`, or `?` when no name is known.
    fn shown_names(&self) -> String {
        let mut names = self.names.iter().rev();
        let Some(last) = names.next() else {
            return "?".into();
        };
        let before: Vec<&str> = names.map(String::as_str).collect();
        if before.is_empty() {
            last.clone()
        } else {
            format!("{last} (was: {})", before.join(", "))
        }
    }
}

/// One process's threads, and its pages no thread of its own touched.
#[derive(Debug, Default)]
struct Threads {
    threads: BTreeMap<i32, Thread>,
    /// Found by page-table scans: no thread is known.
    scanned: Pages,
    /// Written by another process (`process_vm_writev`, a ptrace poke), by writer.
    written_by: BTreeMap<i32, Pages>,
}

/// A row in `--json` (docs/schema.md, "replay --by-thread").
#[derive(Serialize)]
struct RowJson<'a> {
    pid: i32,
    program: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tid: Option<i32>,
    /// The thread's names, the last first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    names: Vec<&'a str>,
    /// `scan`: the process's pages found by scans; `writer`: written by process `writer`.
    #[serde(skip_serializing_if = "Option::is_none")]
    by: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    writer: Option<i32>,
    /// Absent for a thread when its pages are not known (found by scans, `--no-faults`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pages: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    zero_pages: Option<u64>,
}

pub(crate) struct ByThread {
    json: bool,
    /// The stream's name, for stderr.
    name: String,
    live: BTreeMap<i32, Threads>,
    header_written: bool,
}

impl ByThread {
    pub fn new(json: bool, name: String) -> Self {
        ByThread {
            json,
            name,
            live: BTreeMap::new(),
            header_written: false,
        }
    }

    fn thread(&mut self, pid: i32, tid: i32) -> &mut Thread {
        self.live
            .entry(pid)
            .or_default()
            .threads
            .entry(tid)
            .or_default()
    }

    fn learn(&mut self, state: &State, event: &Event) {
        match event {
            Event::Exec { pid, path, .. } => {
                let main = self.thread(*pid, *pid);
                main.guess(program_name(path));
            }
            Event::Fork {
                pid, tid, child, ..
            } => {
                // The child's only thread is a copy of the forking one, name included.
                let parent = self
                    .live
                    .get(pid)
                    .and_then(|p| p.threads.get(tid))
                    .map(|t| (t.names.last().cloned(), t.guessed));
                let main = self.thread(*child, *child);
                if let Some((Some(name), guessed)) = parent {
                    if guessed {
                        main.guess(name);
                    } else {
                        main.read(&name);
                    }
                }
            }
            Event::Thread {
                pid,
                tid,
                child,
                name,
                ..
            } => {
                let new = self.thread(*pid, *child);
                let Some(name) = name else {
                    return;
                };
                new.read(name);
                // Read from the new thread before it runs, at its creator's clone stop, the name
                // is its creator's then too (a guess replaced, a name another gave it seen).
                self.thread(*pid, *tid).read(name);
            }
            Event::ThreadName { pid, tid, name, .. } => self.thread(*pid, *tid).renamed(name),
            Event::ThreadExit { pid, tid, name, .. } => {
                let thread = self.thread(*pid, *tid);
                if let Some(name) = name {
                    thread.read(name);
                }
            }
            Event::Resident {
                pid,
                tid,
                start,
                end,
                write,
                writer,
                by,
                from,
                ..
            } => {
                // Pages back from swap were touched before: not a first touch.
                if from == &Some(ResidentFrom::Swap) {
                    return;
                }
                let pages = end.saturating_sub(*start) / state.page_size;
                let process = self.live.entry(*pid).or_default();
                match (by, writer, tid) {
                    (Some(FoundBy::Scan), ..) => process.scanned.add(pages, *write),
                    (_, Some(writer), _) => {
                        process
                            .written_by
                            .entry(*writer)
                            .or_default()
                            .add(pages, *write);
                    }
                    (_, None, Some(tid)) => {
                        process
                            .threads
                            .entry(*tid)
                            .or_default()
                            .touched
                            .add(pages, *write);
                    }
                    (_, None, None) => process.scanned.add(pages, *write),
                }
            }
            _ => {}
        }
    }

    /// Whether the threads' figures were measured: first touches were followed, by faults.
    fn by_faults(state: &State) -> bool {
        state.faults && !state.scanned
    }

    fn write_process(
        &mut self,
        state: &State,
        p: &Process,
        threads: Threads,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let known = Self::by_faults(state);
        let page = state.page_size;
        let mut rows: Vec<(i32, Thread)> = threads.threads.into_iter().collect();
        rows.sort_by(|(a, x), (b, y)| y.touched.pages.cmp(&x.touched.pages).then(a.cmp(b)));
        if self.json {
            for (tid, t) in &rows {
                let row = RowJson {
                    pid: p.pid,
                    program: p.name(),
                    tid: Some(*tid),
                    names: t.names.iter().rev().map(String::as_str).collect(),
                    by: None,
                    writer: None,
                    pages: known.then_some(t.touched.pages),
                    bytes: known.then_some(t.touched.pages * page),
                    zero_pages: known.then_some(t.touched.zero),
                };
                format::json_line(out, &row)?;
            }
            let others = (threads.scanned.pages > 0)
                .then_some((Some("scan"), None, threads.scanned))
                .into_iter()
                .chain(
                    threads
                        .written_by
                        .iter()
                        .map(|(w, pages)| (Some("writer"), Some(*w), *pages)),
                );
            for (by, writer, pages) in others {
                let row = RowJson {
                    pid: p.pid,
                    program: p.name(),
                    tid: None,
                    names: Vec::new(),
                    by,
                    writer,
                    pages: Some(pages.pages),
                    bytes: Some(pages.pages * page),
                    zero_pages: Some(pages.zero),
                };
                format::json_line(out, &row)?;
            }
            return out.flush();
        }
        if !self.header_written {
            self.header_written = true;
            writeln!(
                out,
                "pages first touched per thread, by process (as each exits), largest first; \
                 a thread's names: its last, then what it was called before"
            )?;
        }
        let touched: u64 = rows.iter().map(|(_, t)| t.touched.pages).sum();
        let all = touched
            + threads.scanned.pages
            + threads.written_by.values().map(|w| w.pages).sum::<u64>();
        writeln!(out)?;
        writeln!(
            out,
            "pid {}  {}: {} thread(s), {} page(s) ({})",
            p.pid,
            format::argv_short(&argv_or_name(p)),
            rows.len(),
            all,
            format::size(all * page)
        )?;
        writeln!(
            out,
            "{:>10} {:>10} {:>11} {:>10}  names",
            "tid", "pages", "size", "zero page"
        )?;
        let figures = |pages: &Pages| {
            (
                pages.pages.to_string(),
                format::size(pages.pages * page),
                pages.zero.to_string(),
            )
        };
        for (tid, t) in &rows {
            let (pages, size, zero) = if known {
                figures(&t.touched)
            } else {
                ("-".into(), "-".into(), "-".into())
            };
            writeln!(
                out,
                "{tid:>10} {pages:>10} {size:>11} {zero:>10}  {}",
                t.shown_names()
            )?;
        }
        if threads.scanned.pages > 0 {
            let (pages, size, zero) = figures(&threads.scanned);
            writeln!(
                out,
                "{:>10} {pages:>10} {size:>11} {zero:>10}  (found by page-table scans: no thread \
                 is known)",
                "-"
            )?;
        }
        for (writer, w) in &threads.written_by {
            let (pages, size, zero) = figures(w);
            writeln!(
                out,
                "{:>10} {pages:>10} {size:>11} {zero:>10}  (written by process {writer})",
                "-"
            )?;
        }
        out.flush()
    }
}

/// A process's argv, or its name alone when the stream gave none.
fn argv_or_name(p: &Process) -> Vec<String> {
    if p.argv.is_empty() {
        vec![p.name().to_string()]
    } else {
        p.argv.clone()
    }
}

impl Query for ByThread {
    fn after(&mut self, state: &State, line: &Line, out: &mut dyn Write) -> io::Result<Flow> {
        if let Event::Start { .. } = line.event
            && state.scanned
        {
            crate::to_stderr!(
                "mevi-actors: {}: traced with --faults scan: page-table scans find pages, not \
                 the thread that touched them, so no thread has a figure (-); each process's \
                 pages are on its row of pages found by scans",
                self.name
            );
        }
        self.learn(state, &line.event);
        if let Event::Exit { pid, .. } = line.event
            && let Some(p) = &state.processes.ended
        {
            let threads = self.live.remove(&pid).unwrap_or_default();
            self.write_process(state, p, threads, out)?;
        }
        Ok(Flow::Go)
    }

    fn end(&mut self, state: &State, out: &mut dyn Write) -> io::Result<()> {
        let alive = state.processes.still_alive(&state.replay);
        for p in alive {
            let threads = self.live.remove(&p.pid).unwrap_or_default();
            self.write_process(state, &p, threads, out)?;
        }
        // Lines about a process no line announced (a stream with problems, which replay says).
        let unknown = std::mem::take(&mut self.live);
        for (pid, threads) in unknown {
            let p = Process {
                pid,
                ..Default::default()
            };
            self.write_process(state, &p, threads, out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

/// The program's file name as an `exec` makes it its main thread's name (the kernel keeps 15
/// bytes of it).
pub(crate) fn program_name(path: &str) -> String {
    let base = Path::new(path)
        .file_name()
        .map_or_else(|| path.into(), |f| f.to_string_lossy());
    let mut cut = base.len().min(COMM_BYTES);
    while !base.is_char_boundary(cut) {
        cut -= 1;
    }
    base[..cut].to_string()
}
