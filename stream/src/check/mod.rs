//! `mevi-actors check TRACE`: a trace against limits (`--max-peak`, `--max-final`,
//! `--max-tree-peak`) and against a saved run (`--baseline`, `--tolerance`), for a CI gate:
//! exit 0 when all is within, 1 with a table of what is over and by how much, 2 on usage
//! errors; `--junit` writes the checks as a JUnit report (docs/usage.md, "A gate in CI").

mod junit;

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use crate::diff::side::{Figures, Summary};
use crate::diff::{matched_programs, matched_sites};
use crate::event::Line;
use crate::query::format;
use crate::query::reader::Failure;

/// What the figures of a saved baseline are marked with.
const BASELINE_MARK: &str = "mevi_baseline";

#[derive(Clone, Debug, Default)]
pub struct Options {
    pub trace: PathBuf,
    pub max_peak: Option<u64>,
    pub max_final: Option<u64>,
    pub max_tree_peak: Option<u64>,
    /// Check only these processes (by program, its label or argv[0]), or only these sites (by
    /// function or the site's name).
    pub processes: Vec<glob::Pattern>,
    pub sites: Vec<glob::Pattern>,
    /// A trace or a `--save-baseline` file, and how much above it is still within: a fraction
    /// (0.05 for 5%), and at least this many bytes.
    pub baseline: Option<PathBuf>,
    pub tolerance: f64,
    pub min_change: u64,
    pub save_baseline: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    pub lenient: bool,
}

/// One figure checked: what it is, the most it may be, and what it is.
pub(crate) struct Verdict {
    /// `export_sites peak`, `the whole tree's peak`.
    pub what: String,
    pub allowed: u64,
    pub actual: u64,
    /// From a baseline: its figure.
    pub baseline: Option<u64>,
    /// Why there is no figure to check (a pattern that matches nothing): a failure.
    pub missing: Option<String>,
}

impl Verdict {
    pub fn over(&self) -> bool {
        self.missing.is_some() || self.actual > self.allowed
    }

    /// `export_sites peak ≤ 3 MiB`, a JUnit test case's name.
    pub fn title(&self) -> String {
        match self.baseline {
            Some(b) => format!("{} within the baseline's {}", self.what, format::size(b)),
            None => format!("{} ≤ {}", self.what, format::size(self.allowed)),
        }
    }

    /// Why it is over, in one line.
    pub fn failure(&self) -> String {
        if let Some(missing) = &self.missing {
            return missing.clone();
        }
        format!(
            "{} is {}, {} over the {} allowed",
            self.what,
            format::size(self.actual),
            format::size(self.actual - self.allowed),
            format::size(self.allowed)
        )
    }
}

/// Runs `check`; the exit status.
pub fn run(options: &Options) -> i32 {
    if options.max_peak.is_none()
        && options.max_final.is_none()
        && options.max_tree_peak.is_none()
        && options.baseline.is_none()
        && options.save_baseline.is_none()
    {
        crate::to_stderr!(
            "mevi-actors: check: nothing to check: give --max-peak, --max-final, \
             --max-tree-peak, --baseline or --save-baseline"
        );
        return 2;
    }
    let trace = match Summary::read(&options.trace, options.lenient) {
        Ok(trace) => trace,
        Err(Failure(status)) => return status,
    };
    let baseline = match options
        .baseline
        .as_deref()
        .map(|b| load(b, options.lenient))
    {
        None => None,
        Some(Ok(b)) => Some(b),
        Some(Err(status)) => return status,
    };
    if let Some(b) = &baseline
        && b.schema != trace.schema
    {
        crate::to_stderr!(
            "mevi-actors: check: the baseline {} is of another schema than {}",
            b.name,
            trace.name
        );
        return 2;
    }
    if let Some(path) = &options.save_baseline {
        if let Err(e) = save(path, &trace) {
            crate::to_stderr!("mevi-actors: check: {}: {e}", path.display());
            return 1;
        }
        crate::to_stderr!(
            "mevi-actors: check: the figures of {} saved to {}",
            trace.name,
            path.display()
        );
    }
    let verdicts = verdicts(options, &trace, baseline.as_ref());
    let over = verdicts.iter().filter(|v| v.over()).count();
    if let Some(path) = &options.junit
        && let Err(e) = junit::write(path, &trace.name, &verdicts)
    {
        crate::to_stderr!("mevi-actors: check: {}: {e}", path.display());
        return 1;
    }
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let written = report(&mut out, &trace, baseline.as_ref(), &verdicts).and_then(|()| out.flush());
    if let Err(e) = written
        && e.kind() != io::ErrorKind::BrokenPipe
    {
        crate::to_stderr!("mevi-actors: stdout: {e}");
        return 1;
    }
    match (over, trace.status) {
        (0, status) => status,
        _ => 1,
    }
}

/// A baseline: a trace, or what `--save-baseline` wrote.
fn load(path: &Path, lenient: bool) -> Result<Summary, i32> {
    let fail = |e: &dyn std::fmt::Display| {
        crate::to_stderr!("mevi-actors: check: {}: {e}", path.display());
    };
    let mut first = String::new();
    let opened = File::open(path).and_then(|f| BufReader::new(f).read_line(&mut first));
    if let Err(e) = opened {
        fail(&e);
        return Err(1);
    }
    if serde_json::from_str::<Line>(first.trim()).is_ok() {
        return Summary::read(path, lenient).map_err(|Failure(status)| status);
    }
    let text = std::fs::read_to_string(path).map_err(|e| {
        fail(&e);
        1
    })?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|_| {
        fail(&"neither a trace nor a baseline written by `check --save-baseline`");
        2
    })?;
    if value.get(BASELINE_MARK).is_none() {
        fail(&"neither a trace nor a baseline written by `check --save-baseline`");
        return Err(2);
    }
    let mut summary: Summary = serde_json::from_value(value).map_err(|e| {
        fail(&format!(
            "not a baseline written by `check --save-baseline`: {e}"
        ));
        2
    })?;
    summary.name = path.display().to_string();
    Ok(summary)
}

/// The trace's figures, to keep beside the code and check later runs against.
fn save(path: &Path, trace: &Summary) -> io::Result<()> {
    let mut value = serde_json::to_value(trace)?;
    if let Some(map) = value.as_object_mut() {
        map.insert(BASELINE_MARK.into(), 1.into());
    }
    let mut file = File::create(path)?;
    serde_json::to_writer_pretty(&mut file, &value)?;
    file.write_all(b"\n")?;
    file.sync_all()
}

/// Every figure the options ask about.
fn verdicts(options: &Options, trace: &Summary, baseline: Option<&Summary>) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    let limit = |what: String, allowed: u64, actual: u64| Verdict {
        what,
        allowed,
        actual,
        baseline: None,
        missing: None,
    };
    if let Some(max) = options.max_tree_peak {
        verdicts.push(limit("the whole tree's peak".into(), max, trace.tree.peak));
    }
    // What is checked: the chosen sites, else the chosen processes (all of them by default).
    let by_site = !options.sites.is_empty();
    let chosen: Vec<(String, Figures)> = if by_site {
        trace
            .sites
            .iter()
            .filter(|s| options.sites.iter().any(|g| s.matches(g)))
            .map(|s| (s.name.clone(), s.figures))
            .collect()
    } else {
        trace
            .programs
            .iter()
            .filter(|p| {
                options.processes.is_empty() || options.processes.iter().any(|g| p.matches(g))
            })
            .map(|p| (p.label(), p.figures))
            .collect()
    };
    let patterns = if by_site {
        &options.sites
    } else {
        &options.processes
    };
    if chosen.is_empty() && !patterns.is_empty() {
        let what = if by_site { "site" } else { "process" };
        let globs: Vec<&str> = patterns.iter().map(glob::Pattern::as_str).collect();
        verdicts.push(Verdict {
            what: format!("--{what} {}", globs.join(" ")),
            allowed: 0,
            actual: 0,
            baseline: None,
            missing: Some(format!(
                "no {what} of the trace matches {}",
                globs.join(" or ")
            )),
        });
    }
    for (name, f) in &chosen {
        if let Some(max) = options.max_peak {
            verdicts.push(limit(format!("{name} peak"), max, f.peak));
        }
        if let Some(max) = options.max_final {
            verdicts.push(limit(format!("{name} final"), max, f.last));
        }
    }
    if let Some(baseline) = baseline {
        let allowed = |old: u64| {
            let relative = (old as f64 * (1.0 + options.tolerance)).ceil() as u64;
            relative.max(old.saturating_add(options.min_change))
        };
        let against = |what: String, old: u64, new: u64| Verdict {
            what,
            allowed: allowed(old),
            actual: new,
            baseline: Some(old),
            missing: None,
        };
        let chosen_names: Vec<&String> = chosen.iter().map(|(n, _)| n).collect();
        if options.sites.is_empty() && options.processes.is_empty() {
            verdicts.push(against(
                "the whole tree's peak".into(),
                baseline.tree.peak,
                trace.tree.peak,
            ));
        }
        let pairs: Vec<(String, Figures, Figures)> = if by_site {
            matched_sites(baseline, trace)
        } else {
            matched_programs(baseline, trace)
        };
        for (name, old, new) in pairs {
            if !chosen_names.contains(&&name) {
                continue;
            }
            verdicts.push(against(format!("{name} peak"), old.peak, new.peak));
            verdicts.push(against(format!("{name} final"), old.last, new.last));
        }
    }
    verdicts
}

/// What was checked and what is over; when something is, the sites that grew most (against a
/// baseline) or the largest (against limits): where to look.
fn report(
    out: &mut dyn Write,
    trace: &Summary,
    baseline: Option<&Summary>,
    verdicts: &[Verdict],
) -> io::Result<()> {
    let over: Vec<&Verdict> = verdicts.iter().filter(|v| v.over()).collect();
    if verdicts.is_empty() {
        // Only --save-baseline: nothing was checked.
        return Ok(());
    }
    writeln!(
        out,
        "check of {}: {} of {} figure(s) over{}",
        trace.name,
        over.len(),
        verdicts.len(),
        baseline.map_or(String::new(), |b| format!(" (baseline: {})", b.name))
    )?;
    if over.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "{:>11} {:>11} {:>11} {:>11}  what",
        "allowed", "actual", "over by", "baseline"
    )?;
    for v in &over {
        if let Some(missing) = &v.missing {
            writeln!(
                out,
                "{:>11} {:>11} {:>11} {:>11}  {missing}",
                "-", "-", "-", "-"
            )?;
            continue;
        }
        writeln!(
            out,
            "{:>11} {:>11} {:>11} {:>11}  {}",
            format::size(v.allowed),
            format::size(v.actual),
            format::size(v.actual - v.allowed),
            v.baseline.map_or("-".into(), format::size),
            v.what
        )?;
    }
    let mut sites: Vec<(String, i128, u64)> = match baseline {
        Some(b) => matched_sites(b, trace)
            .into_iter()
            .map(|(name, old, new)| (name, i128::from(new.peak) - i128::from(old.peak), new.peak))
            .filter(|(_, grew, _)| *grew > 0)
            .collect(),
        None => trace
            .sites
            .iter()
            .map(|s| (s.name.clone(), 0, s.figures.peak))
            .collect(),
    };
    sites.sort_by_key(|s| std::cmp::Reverse((s.1, s.2)));
    let heading = match baseline {
        Some(_) => "the sites that grew most at the tree's peak",
        None => "the largest sites at the tree's peak",
    };
    writeln!(out, "\n{heading}:")?;
    for (name, grew, peak) in sites.iter().take(5) {
        let grew = if baseline.is_some() {
            format!("+{} ", format::size(*grew as u64))
        } else {
            String::new()
        };
        writeln!(out, "  {grew}{} {name}", format::size(*peak))?;
    }
    Ok(())
}
