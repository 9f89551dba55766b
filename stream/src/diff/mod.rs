//! `mevi-actors diff A B`: two traces compared, per program and per call site: peak, final and
//! first-touched bytes in each and the change, largest change first (docs/schema.md, "diff").

mod programs;
pub(crate) mod side;

use std::cmp::Reverse;
use std::collections::HashMap;
use std::io::{self, Write};
use std::path::PathBuf;

use serde::Serialize;

use crate::query::format;
use crate::query::reader::Failure;

use side::{Figures, Program, SiteKey, Summary};

#[derive(Clone, Debug)]
pub struct Options {
    /// The base trace and the one compared with it (`-` is stdin, for one of them).
    pub a: PathBuf,
    pub b: PathBuf,
    pub json: bool,
    pub lenient: bool,
}

/// One row: what it is, and its figures in each trace (none: not in that one).
struct Row<'a> {
    table: &'static str,
    name: String,
    /// A site's frame.
    site: Option<&'a SiteKey>,
    /// A program's process in each trace.
    processes: (Option<&'a Program>, Option<&'a Program>),
    a: Option<Figures>,
    b: Option<Figures>,
}

impl Row<'_> {
    fn change(&self) -> Change {
        let (a, b) = (self.a.unwrap_or_default(), self.b.unwrap_or_default());
        let d = |x: u64, y: u64| i128::from(y) - i128::from(x);
        Change {
            peak_bytes: d(a.peak, b.peak) as i64,
            final_bytes: d(a.last, b.last) as i64,
            touched_bytes: d(a.touched, b.touched) as i64,
        }
    }

    /// Largest change first: of the peak, then the final, then the touched bytes; then the
    /// largest.
    fn order(&self) -> [Reverse<u64>; 4] {
        let c = self.change();
        let largest = |f: Option<Figures>| f.map_or(0, |f| f.peak.max(f.last).max(f.touched));
        [
            c.peak_bytes.unsigned_abs(),
            c.final_bytes.unsigned_abs(),
            c.touched_bytes.unsigned_abs(),
            largest(self.a).max(largest(self.b)),
        ]
        .map(Reverse)
    }
}

#[derive(Serialize)]
struct Change {
    peak_bytes: i64,
    final_bytes: i64,
    touched_bytes: i64,
}

#[derive(Serialize)]
struct FiguresJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    argv: Option<&'a [String]>,
    peak_bytes: u64,
    final_bytes: u64,
    touched_bytes: u64,
}

/// A row in `--json`.
#[derive(Serialize)]
struct RowJson<'a> {
    table: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    site: Option<&'a SiteKey>,
    #[serde(skip_serializing_if = "Option::is_none")]
    a: Option<FiguresJson<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    b: Option<FiguresJson<'a>>,
    change: Change,
}

/// Runs `diff`; the exit status: 0, 1 (unreadable input, a stream with problems), 2 (usage: the
/// same stdin twice, traces of different schemas, a line that is not a stream line).
pub fn run(options: &Options) -> i32 {
    if options.a.as_os_str() == "-" && options.b.as_os_str() == "-" {
        crate::to_stderr!("mevi-actors: diff: stdin can be one of the two traces, not both");
        return 2;
    }
    let read = |path| Summary::read(path, options.lenient);
    let (a, b) = match (read(&options.a), read(&options.b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(Failure(status)), _) | (_, Err(Failure(status))) => return status,
    };
    if a.schema != b.schema {
        let schema = |s: Option<u32>| s.map_or("none (no start line)".into(), |s| s.to_string());
        crate::to_stderr!(
            "mevi-actors: diff: {} is of schema {} and {} of schema {}: they cannot be compared",
            a.name,
            schema(a.schema),
            b.name,
            schema(b.schema)
        );
        return 2;
    }
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let written = write(&a, &b, options.json, &mut out).and_then(|()| out.flush());
    match written {
        // A reader that has seen enough (`| head`).
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            crate::to_stderr!("mevi-actors: stdout: {e}");
            1
        }
        Ok(()) => a.status.max(b.status),
    }
}

/// The programs of `b` with their figures in `a`: each paired one's (as `diff` pairs them), and
/// none (0) for one that `a` does not have; by `b`'s label.
pub(crate) fn matched_programs(a: &Summary, b: &Summary) -> Vec<(String, Figures, Figures)> {
    let (pairs, _, only_b) = programs::pair(&a.programs, &b.programs);
    let paired = pairs.into_iter().map(|(i, j)| (Some(i), j));
    let new = only_b.into_iter().map(|j| (None, j));
    paired
        .chain(new)
        .map(|(i, j)| {
            let old = i.map_or_else(Figures::default, |i| a.programs[i].figures);
            (b.programs[j].label(), old, b.programs[j].figures)
        })
        .collect()
}

/// The sites of `b` with their figures in `a` (0 for a site `a` does not have), by name.
pub(crate) fn matched_sites(a: &Summary, b: &Summary) -> Vec<(String, Figures, Figures)> {
    let in_a: HashMap<&SiteKey, Figures> = a.sites.iter().map(|s| (&s.site, s.figures)).collect();
    b.sites
        .iter()
        .map(|s| {
            let old = in_a.get(&s.site);
            (s.name.clone(), old.copied().unwrap_or_default(), s.figures)
        })
        .collect()
}

/// The rows of the programs: matched pairs, then what only one trace has.
fn program_rows<'a>(a: &'a Summary, b: &'a Summary) -> Vec<Row<'a>> {
    let (pairs, only_a, only_b) = programs::pair(&a.programs, &b.programs);
    let row = |x: Option<&'a Program>, y: Option<&'a Program>| Row {
        table: "program",
        name: x.or(y).map_or(String::new(), |p| p.name.clone()),
        site: None,
        processes: (x, y),
        a: x.map(|p| p.figures),
        b: y.map(|p| p.figures),
    };
    let mut rows: Vec<Row> = pairs
        .into_iter()
        .map(|(i, j)| row(Some(&a.programs[i]), Some(&b.programs[j])))
        .collect();
    rows.sort_by_key(Row::order);
    rows.extend(only_a.into_iter().map(|i| row(Some(&a.programs[i]), None)));
    rows.extend(only_b.into_iter().map(|j| row(None, Some(&b.programs[j]))));
    rows
}

/// The rows of the sites, in either trace.
fn site_rows<'a>(a: &'a Summary, b: &'a Summary) -> Vec<Row<'a>> {
    let by_key = |s: &'a Summary| -> HashMap<&'a SiteKey, Figures> {
        s.sites.iter().map(|x| (&x.site, x.figures)).collect()
    };
    let (in_a, in_b) = (by_key(a), by_key(b));
    let mut keys: Vec<&SiteKey> = a.sites.iter().chain(&b.sites).map(|s| &s.site).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut rows: Vec<Row> = keys
        .into_iter()
        .map(|k| Row {
            table: "site",
            name: k.name(),
            site: Some(k),
            processes: (None, None),
            a: in_a.get(k).copied(),
            b: in_b.get(k).copied(),
        })
        .collect();
    rows.sort_by(|x, y| (x.order(), &x.name).cmp(&(y.order(), &y.name)));
    rows
}

fn write<'a>(a: &'a Summary, b: &'a Summary, json: bool, out: &mut dyn Write) -> io::Result<()> {
    let tree = Row {
        table: "tree",
        name: "the whole tree".into(),
        site: None,
        processes: (None, None),
        a: Some(a.tree),
        b: Some(b.tree),
    };
    let programs = program_rows(a, b);
    let sites = site_rows(a, b);
    if json {
        for row in std::iter::once(&tree).chain(&programs).chain(&sites) {
            let figures = |f: Option<Figures>, p: Option<&'a Program>| {
                f.map(|f| FiguresJson {
                    pid: p.and_then(|p| p.pid),
                    argv: p.map(|p| p.argv.as_slice()),
                    peak_bytes: f.peak,
                    final_bytes: f.last,
                    touched_bytes: f.touched,
                })
            };
            let v = RowJson {
                table: row.table,
                name: &row.name,
                site: row.site,
                a: figures(row.a, row.processes.0),
                b: figures(row.b, row.processes.1),
                change: row.change(),
            };
            format::json_line(out, &v)?;
        }
        return Ok(());
    }
    writeln!(
        out,
        "a: {}\nb: {}\nthe whole tree's resident peak: {} → {} ({})",
        a.name,
        b.name,
        format::size(a.tree.peak),
        format::size(b.tree.peak),
        signed(tree.change().peak_bytes)
    )?;
    writeln!(
        out,
        "\nby program (processes matched by program, then order of birth), largest change first"
    )?;
    table(out, &programs, "program")?;
    writeln!(
        out,
        "\nby call site (the innermost user frame of the stack that mapped the pages), largest \
         change first"
    )?;
    table(out, &sites, "site")
}

fn table(out: &mut dyn Write, rows: &[Row], what: &str) -> io::Result<()> {
    writeln!(
        out,
        "{:>11} {:>11} {:>11}  {:>10} {:>10}  {:>10} {:>10}  {:>10} {:>10}  {what}",
        "Δ peak",
        "Δ final",
        "Δ touched",
        "peak a",
        "peak b",
        "final a",
        "final b",
        "touched a",
        "touched b"
    )?;
    for row in rows {
        let c = row.change();
        let size = |f: Option<Figures>, get: fn(&Figures) -> u64| {
            f.map_or("-".into(), |f| format::size(get(&f)))
        };
        let side = match (row.a, row.b) {
            (Some(_), None) => "  (only in a)",
            (None, Some(_)) => "  (only in b)",
            _ => "",
        };
        let pid = |p: &Program| p.pid.map_or("-".into(), |pid| pid.to_string());
        let pids = match row.processes {
            (Some(x), Some(y)) => format!("  [pid {} → {}]", pid(x), pid(y)),
            (Some(x), None) | (None, Some(x)) => format!("  [pid {}]", pid(x)),
            (None, None) => String::new(),
        };
        writeln!(
            out,
            "{:>11} {:>11} {:>11}  {:>10} {:>10}  {:>10} {:>10}  {:>10} {:>10}  {}{side}{pids}",
            signed(c.peak_bytes),
            signed(c.final_bytes),
            signed(c.touched_bytes),
            size(row.a, |f| f.peak),
            size(row.b, |f| f.peak),
            size(row.a, |f| f.last),
            size(row.b, |f| f.last),
            size(row.a, |f| f.touched),
            size(row.b, |f| f.touched),
            row.name
        )?;
    }
    Ok(())
}

/// `+2 MiB`, `-512 KiB`, `0`.
fn signed(bytes: i64) -> String {
    match bytes {
        0 => "0".into(),
        b if b > 0 => format!("+{}", format::size(b.unsigned_abs())),
        b => format!("-{}", format::size(b.unsigned_abs())),
    }
}
