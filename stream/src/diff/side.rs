//! One trace of a `diff`, read into what is compared: each process (in order of birth) and each
//! call site, with its peak, final and first-touched bytes.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;

use crate::event::{Event, Line};
use crate::export::collect::{Collect, StackOf, Target};
use crate::model::processes::Process;
use crate::model::sites::Stack;
use crate::query::at::PeakFinder;
use crate::query::reader::{Failure, Source};
use crate::query::{Flow, Query, State, stream_status};

/// What is compared, for a process or a site, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Figures {
    /// A process's largest resident figure; a site's resident bytes at the tree's peak.
    pub peak: u64,
    /// As a process exited; a site's as each space ended, added over the spaces.
    pub last: u64,
    /// First touched over the whole trace.
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
#[derive(Clone, Debug)]
pub(crate) struct Proc {
    pub process: Process,
    pub figures: Figures,
}

/// What a site is matched by across traces: its innermost user frame (as `replay --by-site`'s
/// bottom-up rows), by file names, function and line; by offset when it has no name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(untagged)]
pub(crate) enum SiteKey {
    NoStack,
    Frame {
        #[serde(skip_serializing_if = "Option::is_none")]
        function: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        file: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        line: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        module: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        offset: Option<u64>,
    },
}

impl SiteKey {
    fn of(stack: Option<&Stack>) -> SiteKey {
        let Some(frame) = stack.and_then(|s| Some(&s.frames[s.user_frame()?])) else {
            return SiteKey::NoStack;
        };
        let base = |p: &Option<String>| {
            p.as_deref()
                .map(|p| p.rsplit('/').next().unwrap_or(p).to_string())
        };
        SiteKey::Frame {
            function: frame.function.clone(),
            file: base(&frame.file),
            line: frame.line,
            module: base(&frame.module),
            offset: frame.offset.filter(|_| frame.function.is_none()),
        }
    }

    /// `map_growing (export_sites.c:34) in export_sites`.
    pub fn name(&self) -> String {
        match self {
            SiteKey::NoStack => "(no stack)".into(),
            SiteKey::Frame {
                function,
                file,
                line,
                module,
                offset,
            } => {
                let mut name = match (function, offset) {
                    (Some(f), _) => f.clone(),
                    (None, Some(o)) => format!("{o:#x}"),
                    (None, None) => "?".into(),
                };
                if let Some(file) = file {
                    name += &format!(" ({file}:{})", line.unwrap_or(0));
                }
                if let Some(module) = module {
                    name += &format!(" in {module}");
                }
                name
            }
        }
    }
}

/// One trace, read.
pub(crate) struct Side {
    pub name: String,
    pub schema: Option<u32>,
    /// In order of birth.
    pub processes: Vec<Proc>,
    pub sites: HashMap<SiteKey, Figures>,
    /// The whole tree: its resident peak, what was resident at the trace's end, and every
    /// first touch.
    pub tree: Figures,
    /// The exit status `replay` would give it (1: the stream has problems).
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

impl Side {
    /// Reads `path` (twice: the tree's peak is known only at the end).
    pub fn read(path: &Path, lenient: bool) -> Result<Side, Failure> {
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
        let status = stream_status(&source, &state, stopped);
        let mut touched: HashMap<i32, u64> = HashMap::new();
        let mut sites: HashMap<SiteKey, Figures> = HashMap::new();
        let site = |stack: StackOf| match stack {
            StackOf::Mapping(Some(id)) => SiteKey::of(at_end.stacks.get(&id)),
            _ => SiteKey::NoStack,
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
        let schema = processes.schema;
        let touched_by_all: u64 = touched.values().sum();
        let mut ended = processes.ended;
        ended.sort_by_key(|p| (p.started_ns, p.pid));
        let processes = ended
            .into_iter()
            .map(|p| Proc {
                figures: Figures {
                    peak: p.peak_resident_bytes,
                    last: p.resident_bytes,
                    touched: touched.get(&p.pid).copied().unwrap_or(0),
                },
                process: p,
            })
            .collect();
        Ok(Side {
            name: source.name(),
            schema,
            processes,
            sites,
            tree: Figures {
                peak: state.replay.tree_peak_resident_bytes,
                last: state.replay.tree_resident_bytes,
                touched: touched_by_all,
            },
            status,
        })
    }
}
