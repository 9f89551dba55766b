//! One trace of a `diff` or a `check`, read into what is compared: the whole tree, each process
//! (in order of birth) and each call site, with its peak, final and first-touched bytes. A
//! `check --save-baseline` file is the same, written as JSON.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::event::{Event, Line};
use crate::export::collect::{Collect, StackOf, Target};
use crate::model::processes::Process;
use crate::model::sites::Stack;
use crate::query::at::PeakFinder;
use crate::query::reader::{Failure, Source};
use crate::query::{Flow, Query, State, stream_status};

use super::programs;

/// What is compared, for a process or a site, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Figures {
    /// A process's largest resident figure; a site's resident bytes at the tree's peak.
    #[serde(rename = "peak_bytes")]
    pub peak: u64,
    /// As a process exited; a site's as each space ended, added over the spaces.
    #[serde(rename = "final_bytes")]
    pub last: u64,
    /// First touched over the whole trace.
    #[serde(rename = "touched_bytes")]
    pub touched: u64,
}

impl Figures {
    fn add(&mut self, other: &Figures) {
        self.peak += other.peak;
        self.last += other.last;
        self.touched += other.touched;
    }
}

/// A process of one trace.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Program {
    /// Its program and the argument that tells it from others of the program (`programs.rs`).
    pub name: String,
    /// Its program alone.
    pub program: String,
    #[serde(default)]
    pub pid: Option<i32>,
    #[serde(default)]
    pub argv: Vec<String>,
    #[serde(flatten)]
    pub figures: Figures,
}

impl Program {
    /// Its name and pid, for a figure checked (`export_sites [pid 4242]`).
    pub fn label(&self) -> String {
        match self.pid {
            Some(pid) => format!("{} [pid {pid}]", self.name),
            None => self.name.clone(),
        }
    }

    /// Whether `pattern` matches its name, its program or its argv[0].
    pub fn matches(&self, pattern: &glob::Pattern) -> bool {
        pattern.matches(&self.name)
            || pattern.matches(&self.program)
            || self.argv.first().is_some_and(|a| pattern.matches(a))
    }
}

/// A call site of one trace.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Site {
    pub name: String,
    pub site: SiteKey,
    #[serde(flatten)]
    pub figures: Figures,
}

impl Site {
    /// Whether `pattern` matches its name or its function.
    pub fn matches(&self, pattern: &glob::Pattern) -> bool {
        pattern.matches(&self.name)
            || self
                .site
                .function
                .as_deref()
                .is_some_and(|f| pattern.matches(f))
    }
}

/// What a site is matched by across traces: its innermost user frame (as `replay --by-site`'s
/// bottom-up rows), by file names, function and line; by offset when it has no name. Pages
/// mapped by no line with a site have none of these (`{}` in JSON): "(no stack)".
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct SiteKey {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    function: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    module: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    offset: Option<u64>,
}

impl SiteKey {
    fn of(stack: Option<&Stack>) -> SiteKey {
        let Some(frame) = stack.and_then(|s| Some(&s.frames[s.user_frame()?])) else {
            return SiteKey::default();
        };
        let base = |p: &Option<String>| {
            p.as_deref()
                .map(|p| p.rsplit('/').next().unwrap_or(p).to_string())
        };
        SiteKey {
            function: frame.function.clone(),
            file: base(&frame.file),
            line: frame.line,
            module: base(&frame.module),
            offset: frame.offset.filter(|_| frame.function.is_none()),
        }
    }

    /// `map_growing (export_sites.c:34) in export_sites`, or `(no stack)`.
    pub fn name(&self) -> String {
        if *self == SiteKey::default() {
            return "(no stack)".into();
        }
        let mut name = match (&self.function, self.offset) {
            (Some(f), _) => f.clone(),
            (None, Some(o)) => format!("{o:#x}"),
            (None, None) => "?".into(),
        };
        if let Some(file) = &self.file {
            name += &format!(" ({file}:{})", self.line.unwrap_or(0));
        }
        if let Some(module) = &self.module {
            name += &format!(" in {module}");
        }
        name
    }
}

/// A trace's figures, as compared: read from the trace, or from a saved baseline.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Summary {
    /// The trace's name in messages (a baseline's: its file's).
    #[serde(skip)]
    pub name: String,
    pub schema: Option<u32>,
    /// The whole tree: its resident peak, what was resident at the trace's end, and every
    /// first touch.
    pub tree: Figures,
    /// In order of birth.
    pub programs: Vec<Program>,
    /// Largest at the peak first.
    pub sites: Vec<Site>,
    /// The exit status `replay` would give the trace (1: the stream has problems).
    #[serde(skip)]
    pub status: i32,
}

/// The processes as each exits (and those the stream never saw exit, at its end).
#[derive(Default)]
struct Processes {
    schema: Option<u32>,
    ended: Vec<Process>,
}

impl Query for Processes {
    fn after(&mut self, state: &State, line: &Line, _: &mut dyn Write) -> io::Result<Flow> {
        if let Event::Start { schema, .. } = line.event {
            self.schema = Some(schema);
        }
        if let Event::Exit { .. } = line.event
            && let Some(p) = &state.processes.ended
        {
            self.ended.push(p.clone());
        }
        Ok(Flow::Go)
    }

    fn end(&mut self, state: &State, _: &mut dyn Write) -> io::Result<()> {
        self.ended
            .extend(state.processes.still_alive(&state.replay));
        Ok(())
    }
}

/// Feeds several queries each line, in order.
struct Each<'a>(Vec<&'a mut dyn Query>);

impl Query for Each<'_> {
    fn before(&mut self, state: &State, line: &Line, out: &mut dyn Write) -> io::Result<Flow> {
        for q in &mut self.0 {
            q.before(state, line, out)?;
        }
        Ok(Flow::Go)
    }

    fn after(&mut self, state: &State, line: &Line, out: &mut dyn Write) -> io::Result<Flow> {
        for q in &mut self.0 {
            q.after(state, line, out)?;
        }
        Ok(Flow::Go)
    }

    fn end(&mut self, state: &State, out: &mut dyn Write) -> io::Result<()> {
        for q in &mut self.0 {
            q.end(state, out)?;
        }
        Ok(())
    }
}

impl Summary {
    /// Reads the trace `path` (twice: the tree's peak is known only at the end).
    pub fn read(path: &Path, lenient: bool) -> Result<Summary, Failure> {
        let mut source = Source::open(path, lenient)?;
        source.spool()?;
        let mut finder = PeakFinder::default();
        source.read(&mut finder, &mut io::sink())?;
        source.rewind()?;
        let mut at_peak = Collect::new(Target::Peak(finder.seq()));
        let mut at_end = Collect::new(Target::End);
        let mut processes = Processes::default();
        let (state, stopped) = source.read(
            &mut Each(vec![&mut at_peak, &mut at_end, &mut processes]),
            &mut io::sink(),
        )?;
        if state.last.is_none() {
            crate::to_stderr!("mevi-actors: {}: no stream line to compare", source.name());
            return Err(Failure(2));
        }
        let status = stream_status(&source, &state, stopped);
        let mut touched: HashMap<i32, u64> = HashMap::new();
        let mut sites: HashMap<SiteKey, Figures> = HashMap::new();
        let site = |stack: StackOf| match stack {
            StackOf::Mapping(Some(id)) => SiteKey::of(at_end.stacks.get(&id)),
            _ => SiteKey::default(),
        };
        for (key, v) in &at_end.samples {
            // The touch stacks of --touch-stacks are samples of first touches counted already.
            if let StackOf::Touch(_) = key.stack {
                continue;
            }
            *touched.entry(key.pid).or_default() += v.touched_bytes;
            let f = sites.entry(site(key.stack)).or_default();
            f.add(&Figures {
                peak: 0,
                last: v.resident_bytes,
                touched: v.touched_bytes,
            });
        }
        for (key, v) in &at_peak.samples {
            if let StackOf::Mapping(_) = key.stack {
                sites.entry(site(key.stack)).or_default().peak += v.resident_bytes;
            }
        }
        let mut ended = processes.ended;
        ended.sort_by_key(|p| (p.started_ns, p.pid));
        let labels = programs::labels(&ended.iter().collect::<Vec<_>>());
        let programs = ended
            .iter()
            .zip(labels)
            .map(|(p, name)| Program {
                name,
                program: p.short_name().to_string(),
                pid: Some(p.pid),
                argv: p.argv.clone(),
                figures: Figures {
                    peak: p.peak_resident_bytes,
                    last: p.resident_bytes,
                    touched: touched.get(&p.pid).copied().unwrap_or(0),
                },
            })
            .collect();
        let mut sites: Vec<Site> = sites
            .into_iter()
            .map(|(site, figures)| Site {
                name: site.name(),
                site,
                figures,
            })
            .collect();
        sites.sort_by(|x, y| (y.figures.peak, &x.site).cmp(&(x.figures.peak, &y.site)));
        Ok(Summary {
            name: source.name(),
            schema: processes.schema,
            tree: Figures {
                peak: state.replay.tree_peak_resident_bytes,
                last: state.replay.tree_resident_bytes,
                touched: touched.values().sum(),
            },
            programs,
            sites,
            status,
        })
    }
}
