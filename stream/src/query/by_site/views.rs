//! The views of `replay --by-site`: bottom-up rows (one per innermost user frame) and the
//! top-down tree (from the outermost user frame in), as tables or `--json` lines.

use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

use crate::event::{Frame, SiteId, Truncated};

use super::super::State;
use super::super::format;
use super::Figures;
use crate::model::sites::{Key, Stack, is_system_frame};

/// Callers shown under a bottom-up row.
const CALLERS: usize = 3;
/// The text's top-down tree leaves out nodes under this share (in percent) of the total.
const PRUNE_PERCENT: u64 = 1;

/// What a bottom-up row stands for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum RowKey {
    /// Ranges mapped by lines without a site.
    NoStack,
    /// A site whose stack has no frame, or that no `site` line described.
    Bare(SiteId),
    /// An innermost user frame: by function and source line, or by address when not symbolized.
    Frame {
        module: Option<String>,
        function: Option<String>,
        file: Option<String>,
        line: Option<u32>,
        offset: Option<u64>,
        addr: Option<u64>,
    },
}

impl RowKey {
    fn of(frame: &Frame) -> Self {
        let symbolized = frame.function.is_some();
        RowKey::Frame {
            module: frame.module.clone(),
            function: frame.function.clone(),
            file: frame.file.clone(),
            line: frame.line,
            offset: frame.offset.filter(|_| !symbolized),
            addr: frame.addr.filter(|_| !symbolized),
        }
    }
}

/// One bottom-up row: the sites whose innermost user frame is the same.
struct Row<'a> {
    key: RowKey,
    sites: Vec<SiteId>,
    figures: Figures,
    /// Its largest site's stack and the index of its user frame (callers are shown from it),
    /// with that site's figures.
    lead: Option<(&'a Stack, usize, Figures)>,
    /// The distinct chains of callers of its sites.
    paths: HashSet<&'a [Frame]>,
}

impl Row<'_> {
    fn frame(&self) -> Option<&Frame> {
        self.lead.map(|(stack, at, _)| &stack.frames[at])
    }
}

/// One node of the top-down tree: a function called along the path from the root.
#[derive(Default)]
struct Node {
    label: String,
    figures: Figures,
    children: HashMap<String, usize>,
}

pub(super) struct Views<'a> {
    rows: Vec<Row<'a>>,
    /// `nodes[0]` is the root, which holds every figure.
    nodes: Vec<Node>,
    stacks: usize,
    /// `--touch-stacks N`: one first touch in about N was sampled.
    touch_period: Option<u64>,
}

/// Largest first: resident at peak, then mapped, then still mapped at exit (anonymous and
/// file together).
fn order(f: &Figures) -> (Reverse<u64>, Reverse<u64>, Reverse<u64>) {
    (
        Reverse(f.resident_at_peak),
        Reverse(f.mapped()),
        Reverse(f.left()),
    )
}

impl<'a> Views<'a> {
    pub fn new(
        figures: &HashMap<Key, Figures>,
        stacks: &'a HashMap<SiteId, Stack>,
        touch_period: Option<u64>,
    ) -> Self {
        let mut rows: HashMap<RowKey, Row<'a>> = HashMap::new();
        let mut nodes = vec![Node::default()];
        for (key, f) in figures {
            if f.is_zero() {
                continue;
            }
            let stack = key.and_then(|id| stacks.get(&id));
            let user = stack.and_then(|s| Some((s, s.user_frame()?)));
            let row_key = match (key, user) {
                (None, _) => RowKey::NoStack,
                (Some(id), None) => RowKey::Bare(*id),
                (Some(_), Some((stack, at))) => RowKey::of(&stack.frames[at]),
            };
            let row = rows.entry(row_key.clone()).or_insert_with(|| Row {
                key: row_key,
                sites: Vec::new(),
                figures: Figures::default(),
                lead: None,
                paths: HashSet::new(),
            });
            row.sites.extend(*key);
            row.figures.add(f);
            if let Some((stack, at)) = user {
                row.paths.insert(&stack.frames[at + 1..]);
                if row.lead.is_none_or(|(_, _, lead)| order(f) < order(&lead)) {
                    row.lead = Some((stack, at, *f));
                }
            }
            let mut node = 0;
            nodes[0].figures.add(f);
            for label in path(*key, stack) {
                let next = nodes.len();
                let child = *nodes[node].children.entry(label.clone()).or_insert(next);
                if child == next {
                    nodes.push(Node {
                        label,
                        ..Node::default()
                    });
                }
                nodes[child].figures.add(f);
                node = child;
            }
        }
        let mut rows: Vec<Row<'a>> = rows.into_values().collect();
        for row in &mut rows {
            row.sites.sort_unstable();
        }
        rows.sort_by_cached_key(|r| (order(&r.figures), row_name(r), r.sites.clone()));
        Views {
            rows,
            nodes,
            stacks: stacks.len(),
            touch_period,
        }
    }

    /// The children of `node`, largest first.
    fn children(&self, node: usize) -> Vec<usize> {
        let mut children: Vec<usize> = self.nodes[node].children.values().copied().collect();
        children.sort_by_key(|&c| (order(&self.nodes[c].figures), &self.nodes[c].label));
        children
    }

    pub fn write_json(&self, out: &mut dyn Write) -> io::Result<()> {
        for row in &self.rows {
            let (frame, callers) = match (&row.key, row.lead) {
                (RowKey::NoStack, _) => (
                    FrameJson {
                        function: Some("(no stack)"),
                        ..FrameJson::default()
                    },
                    Vec::new(),
                ),
                (_, Some((stack, at, _))) => (
                    FrameJson::new(&stack.frames[at]),
                    stack.frames[at + 1..]
                        .iter()
                        .take(CALLERS)
                        .map(FrameJson::new)
                        .collect(),
                ),
                (_, None) => (FrameJson::default(), Vec::new()),
            };
            let v = RowJson {
                view: "bottom_up",
                frame,
                callers,
                sites: &row.sites,
                figures: row.figures,
            };
            format::json_line(out, &v)?;
        }
        let mut stack: Vec<(usize, Vec<&str>)> = self
            .children(0)
            .into_iter()
            .rev()
            .map(|c| (c, vec![self.nodes[c].label.as_str()]))
            .collect();
        while let Some((node, path)) = stack.pop() {
            let n = &self.nodes[node];
            format::json_line(
                out,
                &NodeJson {
                    view: "top_down",
                    depth: path.len() - 1,
                    path: &path,
                    figures: n.figures,
                },
            )?;
            for c in self.children(node).into_iter().rev() {
                let mut deeper = path.clone();
                deeper.push(self.nodes[c].label.as_str());
                stack.push((c, deeper));
            }
        }
        out.flush()
    }

    pub fn write_text(&self, state: &State, out: &mut dyn Write) -> io::Result<()> {
        let replay = &state.replay;
        let total = self.nodes[0].figures;
        let touches = self.touch_period.is_some();
        let peak = if replay.tree_peak_resident_bytes == 0 {
            "nothing was ever resident".to_string()
        } else {
            format!(
                "the whole tree's resident peak, {} at {}",
                format::size(replay.tree_peak_resident_bytes),
                state.clock.when(replay.tree_peak_t_ns)
            )
        };
        writeln!(
            out,
            "bytes by call site, from {} stack(s); at peak: {peak}",
            self.stacks
        )?;
        // What each column counts, as a heaptrack or memray user would not guess it.
        writeln!(
            out,
            "  anon mapped, file mapped: the bytes its map, brk and remap lines mapped, of \
             private anonymous memory (heap, stacks, anonymous mappings) and of files and \
             shared memory"
        )?;
        writeln!(
            out,
            "  at peak: its resident (private anonymous) bytes at the whole tree's resident \
             peak, in each address space that has them; the rows add up to it, or to more \
             where a fork's copies share frames (the tree counts those once)"
        )?;
        writeln!(
            out,
            "  Σ at exits: its resident bytes as each address space ended, added over the \
             spaces: no one instant, so it can exceed the peak"
        )?;
        writeln!(
            out,
            "  anon left, file left: its bytes still mapped as each address space ended, added \
             over the spaces"
        )?;
        if let Some(n) = self.touch_period {
            writeln!(
                out,
                "  sampled: first touches that got a stack (pages; about 1 in {n} did)"
            )?;
        }
        writeln!(
            out,
            "\nbottom-up: the innermost user frame of each stack (frames of libc, the loader, \
             allocators and runtimes are passed over), largest resident at peak first"
        )?;
        header(out, touches, "where")?;
        writeln!(out, "{}  (all)", columns(&total, touches))?;
        for row in &self.rows {
            let mut name = row_name(row);
            if row.sites.len() > 1 {
                name.push_str(&format!("  [{} stacks]", row.sites.len()));
            }
            writeln!(out, "{}  {name}", columns(&row.figures, touches))?;
            if let Some(callers) = callers_line(row) {
                let indent = columns(&Figures::default(), touches).len() + 4;
                writeln!(out, "{:indent$}{callers}", "")?;
            }
        }
        writeln!(
            out,
            "\ntop-down: from the outermost user frame in, each function with what its callees \
             hold; `→ f`: f is the only callee shown of the line above"
        )?;
        header(out, touches, "function")?;
        let share = |part: u64, all: u64| all > 0 && part * 100 >= all * PRUNE_PERCENT;
        let big = |f: &Figures| {
            share(f.resident_at_peak, total.resident_at_peak)
                || share(f.anon_mapped, total.anon_mapped)
                || share(f.file_mapped, total.file_mapped)
        };
        let mut left_out = 0usize;
        // Depth first, each node with its indent and whether it continues the line above. Like
        // perf's call graphs, the indent grows only where the tree branches: long chains of
        // calls (an interpreter's, a compiler's passes) stay readable.
        let shown = |node: usize, left_out: &mut usize| -> Vec<usize> {
            let (big, small): (Vec<usize>, Vec<usize>) = self
                .children(node)
                .into_iter()
                .partition(|&c| big(&self.nodes[c].figures));
            *left_out += small.iter().map(|&c| self.size(c)).sum::<usize>();
            big
        };
        let mut stack: Vec<(usize, usize, bool)> = shown(0, &mut left_out)
            .into_iter()
            .rev()
            .map(|c| (c, 0, false))
            .collect();
        while let Some((node, indent, continued)) = stack.pop() {
            let n = &self.nodes[node];
            writeln!(
                out,
                "{}  {:indent$}{}{}",
                columns(&n.figures, touches),
                "",
                if continued { "→ " } else { "" },
                n.label,
                indent = indent * 2
            )?;
            let children = shown(node, &mut left_out);
            if let [only] = children[..] {
                stack.push((only, indent, true));
            } else {
                stack.extend(children.into_iter().rev().map(|c| (c, indent + 1, false)));
            }
        }
        if left_out > 0 {
            writeln!(
                out,
                "({left_out} node(s) holding under {PRUNE_PERCENT}% of all resident at peak, of \
                 all anonymous and of all file mapped bytes left out; --json has every one)"
            )?;
        }
        out.flush()
    }

    /// The nodes of the subtree at `node`.
    fn size(&self, node: usize) -> usize {
        1 + self.nodes[node]
            .children
            .values()
            .map(|&c| self.size(c))
            .sum::<usize>()
    }
}

/// The top-down path of a key's bytes: its user frames, outermost first (the outermost frame
/// when all are system frames), under a node saying why when the stack stops short of its root.
fn path(key: Key, stack: Option<&Stack>) -> Vec<String> {
    let Some(id) = key else {
        return vec!["(no stack)".into()];
    };
    let Some(stack) = stack.filter(|s| !s.frames.is_empty()) else {
        return vec![bare_name(id, stack)];
    };
    let mut path = Vec::new();
    match stack.truncated {
        Some(Truncated::Depth) => path.push("(stack cut at --stack-depth)".to_string()),
        Some(Truncated::Unwind) => path.push("(stack cut: could not unwind further)".to_string()),
        None => {}
    }
    let user: Vec<String> = stack
        .frames
        .iter()
        .rev()
        .filter(|f| !is_system_frame(f))
        .map(name)
        .collect();
    if user.is_empty() {
        path.extend(stack.frames.last().map(name));
    } else {
        path.extend(user);
    }
    path
}

fn bare_name(id: SiteId, stack: Option<&Stack>) -> String {
    match stack {
        Some(_) => format!("(site {id}: no frames)"),
        None => format!("(site {id}: no site line)"),
    }
}

/// A frame's function, or where it is when not symbolized: `libfoo.so+0x1a2b`, `0x7f3a5c000000`.
fn name(frame: &Frame) -> String {
    if let Some(function) = &frame.function {
        return function.clone();
    }
    match (&frame.module, frame.offset, frame.addr) {
        (Some(module), Some(offset), _) => format!("{}+{offset:#x}", file_name(module)),
        (Some(module), None, _) => file_name(module).to_string(),
        (None, _, Some(addr)) => format!("{addr:#x}"),
        (None, _, None) => "?".into(),
    }
}

/// `function (file.c:40)`.
fn describe(frame: &Frame) -> String {
    let name = name(frame);
    match (&frame.file, frame.line) {
        (Some(file), Some(line)) => format!("{name} ({}:{line})", file_name(file)),
        (Some(file), None) => format!("{name} ({})", file_name(file)),
        _ => name,
    }
}

fn file_name(path: &str) -> &str {
    Path::new(path)
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or(path)
}

/// What a row is, for a person: `alloc_arena_a (arena.c:12) in arena`.
fn row_name(row: &Row) -> String {
    match (&row.key, row.frame()) {
        (RowKey::NoStack, _) => "(no stack)".into(),
        (RowKey::Bare(id), _) => bare_name(*id, None),
        (_, Some(frame)) => match (&frame.function, &frame.module) {
            (Some(_), Some(module)) => format!("{} in {}", describe(frame), file_name(module)),
            _ => describe(frame),
        },
        (_, None) => "?".into(),
    }
}

/// `← main (x.c:40) ← __libc_start_call_main ← …` for a row's largest site.
fn callers_line(row: &Row) -> Option<String> {
    let (stack, at, _) = row.lead?;
    let callers = &stack.frames[at + 1..];
    let mut line: Vec<String> = callers.iter().take(CALLERS).map(describe).collect();
    if callers.len() > CALLERS {
        line.push("…".into());
    } else {
        match stack.truncated {
            Some(Truncated::Depth) => line.push("(cut at --stack-depth)".into()),
            Some(Truncated::Unwind) => line.push("(could not unwind further)".into()),
            None => {}
        }
    }
    if line.is_empty() {
        return None;
    }
    let mut text = format!("← {}", line.join(" ← "));
    if row.paths.len() > 1 {
        text.push_str(&format!(
            "  (and {} other call path(s))",
            row.paths.len() - 1
        ));
    }
    Some(text)
}

fn header(out: &mut dyn Write, touches: bool, last: &str) -> io::Result<()> {
    write!(
        out,
        "{:>11} {:>11} {:>11} {:>11} {:>11} {:>11}",
        "anon mapped", "file mapped", "at peak", "Σ at exits", "anon left", "file left"
    )?;
    if touches {
        write!(out, " {:>8}", "sampled")?;
    }
    writeln!(out, "  {last}")
}

fn columns(f: &Figures, touches: bool) -> String {
    let mut text = format!(
        "{:>11} {:>11} {:>11} {:>11} {:>11} {:>11}",
        format::size(f.anon_mapped),
        format::size(f.file_mapped),
        format::size(f.resident_at_peak),
        format::size(f.resident_at_exit),
        format::size(f.anon_left),
        format::size(f.file_left)
    );
    if touches {
        text.push_str(&format!(" {:>8}", f.sampled_touches));
    }
    text
}

/// A frame in `--json`: what is known of it.
#[derive(Default, Serialize)]
struct FrameJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    function: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    module: Option<&'a str>,
    /// Only for a frame not symbolized.
    #[serde(skip_serializing_if = "Option::is_none")]
    offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    addr: Option<u64>,
}

impl<'a> FrameJson<'a> {
    fn new(frame: &'a Frame) -> Self {
        let symbolized = frame.function.is_some();
        FrameJson {
            function: frame.function.as_deref(),
            file: frame.file.as_deref(),
            line: frame.line,
            module: frame.module.as_deref(),
            offset: frame.offset.filter(|_| !symbolized),
            addr: frame.addr.filter(|_| !symbolized),
        }
    }
}

/// A bottom-up row in `--json` (docs/schema.md, "replay --by-site").
#[derive(Serialize)]
struct RowJson<'a> {
    view: &'static str,
    #[serde(flatten)]
    frame: FrameJson<'a>,
    callers: Vec<FrameJson<'a>>,
    sites: &'a [SiteId],
    #[serde(flatten)]
    figures: Figures,
}

/// A top-down node in `--json`.
#[derive(Serialize)]
struct NodeJson<'a> {
    view: &'static str,
    path: &'a [&'a str],
    depth: usize,
    #[serde(flatten)]
    figures: Figures,
}
