//! The tables of a pprof profile (strings, functions, files, locations), each entry once, and
//! the profile made of what [`Collect`] counted.

use std::collections::HashMap;

use crate::event::{Frame, MapKind, Truncated};
use crate::model::sites::Stack;

use super::collect::{Collect, SampleKey, StackOf, Values};
use super::proto;

/// Each file's code gets addresses of its own, 1 TiB apart: a frame's address is its file's
/// base plus its offset in the file. A site is a stack of file offsets, the same in every
/// process that ran the file, so no process's own addresses would do. The file's mapping
/// starts at the page of its lowest frame (`file_offset` that page, `memory_start` the base
/// plus it): a symbolizer gets each offset back, and finds the code segment that holds it.
const FILE_SPAN: u64 = 1 << 40;

/// What is known of one file's frames, for its `Mapping`.
struct File {
    filename: i64,
    build_id: i64,
    /// The smallest offset of a frame in it, and one past the largest.
    lowest: u64,
    extent: u64,
    every_function: bool,
    every_file: bool,
    every_line: bool,
    inlined: bool,
}

type LocationKey = (u64, u64, Vec<(u64, i64)>);

pub(crate) struct Tables {
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    functions: Vec<proto::Function>,
    function_ids: HashMap<(i64, i64), u64>,
    files: Vec<File>,
    file_ids: HashMap<(i64, i64), u64>,
    locations: Vec<proto::Location>,
    location_ids: HashMap<LocationKey, u64>,
}

impl Default for Tables {
    fn default() -> Self {
        Tables {
            // The format's string 0 is the empty string.
            strings: vec![String::new()],
            string_ids: HashMap::from([(String::new(), 0)]),
            functions: Vec::new(),
            function_ids: HashMap::new(),
            files: Vec::new(),
            file_ids: HashMap::new(),
            locations: Vec::new(),
            location_ids: HashMap::new(),
        }
    }
}

impl Tables {
    pub fn string(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), id);
        id
    }

    fn function(&mut self, name: &str, file: Option<&str>) -> u64 {
        let name = self.string(name);
        let file = file.map_or(0, |f| self.string(f));
        if let Some(&id) = self.function_ids.get(&(name, file)) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        self.functions.push(proto::Function {
            id,
            name,
            system_name: name,
            filename: file,
        });
        self.function_ids.insert((name, file), id);
        id
    }

    /// The mapping id of a code file.
    fn file(&mut self, module: &str, build_id: Option<&str>) -> u64 {
        let filename = self.string(module);
        let build_id = build_id.map_or(0, |b| self.string(b));
        if let Some(&id) = self.file_ids.get(&(filename, build_id)) {
            return id;
        }
        self.files.push(File {
            filename,
            build_id,
            lowest: u64::MAX,
            extent: 0,
            every_function: true,
            every_file: true,
            every_line: true,
            inlined: false,
        });
        let id = self.files.len() as u64;
        self.file_ids.insert((filename, build_id), id);
        id
    }

    /// The location of one address: `group` is the frames there, the inlined ones first and the
    /// one they were inlined into last.
    fn location(&mut self, group: &[&Frame]) -> u64 {
        let Some(outer) = group.last() else {
            return 0;
        };
        let lines: Vec<(u64, i64)> = group
            .iter()
            .filter_map(|f| {
                let name = f.function.as_deref()?;
                Some((
                    self.function(name, f.file.as_deref()),
                    f.line.map_or(0, i64::from),
                ))
            })
            .collect();
        let (mapping_id, address) = match &outer.module {
            Some(module) => {
                let id = self.file(module, outer.build_id.as_deref());
                let offset = outer.offset.unwrap_or(0).min(FILE_SPAN - 1);
                let file = &mut self.files[id as usize - 1];
                file.lowest = file.lowest.min(offset);
                file.extent = file.extent.max(offset + 1);
                file.every_function &= lines.len() == group.len();
                file.every_file &= group.iter().all(|f| f.file.is_some());
                file.every_line &= group.iter().all(|f| f.line.is_some());
                file.inlined |= group.len() > 1;
                (id, id * FILE_SPAN + offset)
            }
            None => (0, outer.addr.unwrap_or(0)),
        };
        self.location_at(mapping_id, address, lines)
    }

    fn location_at(&mut self, mapping_id: u64, address: u64, lines: Vec<(u64, i64)>) -> u64 {
        let key = (mapping_id, address, lines);
        if let Some(&id) = self.location_ids.get(&key) {
            return id;
        }
        let id = self.locations.len() as u64 + 1;
        self.locations.push(proto::Location {
            id,
            mapping_id,
            address,
            line: key
                .2
                .iter()
                .map(|&(function_id, line)| proto::Line { function_id, line })
                .collect(),
        });
        self.location_ids.insert(key, id);
        id
    }

    /// A stack's locations, innermost first.
    pub fn stack(&mut self, stack: &Stack) -> Vec<u64> {
        let mut ids = Vec::new();
        let mut group: Vec<&Frame> = Vec::new();
        for frame in &stack.frames {
            group.push(frame);
            if !frame.inlined {
                ids.push(self.location(&group));
                group.clear();
            }
        }
        if !group.is_empty() {
            ids.push(self.location(&group));
        }
        ids
    }

    /// A location of no code that stands for what has no stack.
    fn placeholder(&mut self, name: &str) -> u64 {
        let function = self.function(name, None);
        self.location_at(0, 0, vec![(function, 0)])
    }

    /// The files as mappings, and the locations (taken), with the file `main` first (pprof
    /// takes the first mapping for the program: the one its title names).
    pub fn take_mappings_and_locations(
        &mut self,
        main: Option<&str>,
    ) -> (Vec<proto::Mapping>, Vec<proto::Location>) {
        let round_up = |n: u64| n.div_ceil(4096).max(1) * 4096;
        // The program's file is a mapping even when no frame is in it (a trace without stacks):
        // pprof names the profile after it.
        if let Some(program) = main
            && !self
                .files
                .iter()
                .any(|f| self.strings[f.filename as usize] == program)
        {
            self.file(program, None);
        }
        let main = main.and_then(|m| self.string_ids.get(m).copied());
        let mut order: Vec<usize> = (0..self.files.len()).collect();
        order.sort_by_key(|&i| Some(self.files[i].filename) != main);
        let mut new_id = vec![0; self.files.len()];
        for (position, &i) in order.iter().enumerate() {
            new_id[i] = position as u64 + 1;
        }
        for l in &mut self.locations {
            if l.mapping_id != 0 {
                let old = l.mapping_id;
                let new = new_id[old as usize - 1];
                l.address = l.address - old * FILE_SPAN + new * FILE_SPAN;
                l.mapping_id = new;
            }
        }
        let mappings = order
            .iter()
            .map(|&i| {
                let f = &self.files[i];
                let id = new_id[i];
                let first_page = if f.lowest == u64::MAX {
                    0
                } else {
                    f.lowest & !4095
                };
                proto::Mapping {
                    id,
                    memory_start: id * FILE_SPAN + first_page,
                    memory_limit: id * FILE_SPAN + round_up(f.extent),
                    file_offset: first_page,
                    filename: f.filename,
                    build_id: f.build_id,
                    has_functions: f.every_function,
                    has_filenames: f.every_function && f.every_file,
                    has_line_numbers: f.every_function && f.every_line,
                    has_inline_frames: f.every_function && f.inlined,
                }
            })
            .collect();
        (mappings, std::mem::take(&mut self.locations))
    }
}

/// The sample types, in the order of each sample's values.
pub(crate) const SAMPLE_TYPES: [(&str, &str); 5] = [
    ("resident_space", "bytes"),
    ("resident_pages", "pages"),
    ("touched_space", "bytes"),
    ("touched_pages", "pages"),
    ("sampled_touches", "pages"),
];

/// The profile of what `collect` counted; `comments` go in as they are.
pub(crate) fn build(mut collect: Collect, page_size: u64, comments: &[String]) -> proto::Profile {
    let page_size = page_size.max(1);
    // A trace without --touch-stacks has no sampled touches: no column of zeros.
    let types = if collect.touch_period.is_some() { 5 } else { 4 };
    let t = &mut collect.tables;
    let sample_type = SAMPLE_TYPES[..types]
        .iter()
        .map(|(name, unit)| proto::ValueType {
            r#type: t.string(name),
            unit: t.string(unit),
        })
        .collect();
    let default_sample_type = t.string(SAMPLE_TYPES[0].0);
    let comment = comments.iter().map(|c| t.string(c)).collect();
    let mut keyed: Vec<(SampleKey, Values)> = collect.samples.drain().collect();
    // The same trace, the same file.
    keyed.sort_by_key(|(k, _)| {
        (
            k.pid,
            k.tid,
            k.program,
            k.thread,
            k.kind.map(kind_name),
            format!("{:?}", k.stack),
        )
    });
    let mut sample = Vec::with_capacity(keyed.len());
    let mut stack_ids: HashMap<StackOf, (Vec<u64>, Option<Truncated>)> = HashMap::new();
    for (key, values) in keyed {
        let (location_id, truncated) = stack_ids
            .entry(key.stack)
            .or_insert_with(|| {
                let site = match key.stack {
                    StackOf::Mapping(site) => site,
                    StackOf::Touch(site) => Some(site),
                };
                match site.and_then(|s| collect.stacks.get(&s)) {
                    Some(stack) if !stack.frames.is_empty() => {
                        (collect.tables.stack(stack), stack.truncated)
                    }
                    _ => (vec![collect.tables.placeholder("(no stack)")], None),
                }
            })
            .clone();
        let t = &mut collect.tables;
        let mut label = vec![num_label(t, "pid", key.pid)];
        if let Some(tid) = key.tid {
            label.push(num_label(t, "tid", tid));
        }
        if let Some(writer) = key.writer {
            label.push(num_label(t, "writer", writer));
        }
        for (k, v) in [("program", key.program), ("thread", key.thread)] {
            if v != 0 {
                label.push(proto::Label {
                    key: t.string(k),
                    str: v,
                    num: 0,
                });
            }
        }
        if let Some(kind) = key.kind {
            label.push(str_label(t, "kind", kind_name(kind)));
        }
        for (k, v) in &collect.whereabouts {
            // String 0 is the empty string, which pprof reads as no value.
            if !v.is_empty() {
                label.push(str_label(t, k, v));
            }
        }
        let stack = match key.stack {
            StackOf::Mapping(_) => "mapping",
            StackOf::Touch(_) => "touch",
        };
        label.push(str_label(t, "stack", stack));
        if let Some(truncated) = truncated {
            let why = match truncated {
                Truncated::Depth => "depth",
                Truncated::Unwind => "unwind",
            };
            label.push(str_label(t, "truncated", why));
        }
        let value = [
            values.resident_bytes,
            values.resident_bytes / page_size,
            values.touched_bytes,
            values.touched_bytes / page_size,
            values.sampled_pages,
        ][..types]
            .iter()
            .map(|&v| i64::try_from(v).unwrap_or(i64::MAX))
            .collect();
        sample.push(proto::Sample {
            location_id,
            value,
            label,
        });
    }
    let taken = collect.taken.unwrap_or_default();
    let (mapping, location) = collect
        .tables
        .take_mappings_and_locations(collect.program.as_deref());
    // No wall clock on the `start` line: no time (0), rather than 1970.
    let wall = collect.wall_ns.map_or(0, |w| w.saturating_add(taken.t_ns));
    proto::Profile {
        sample_type,
        sample,
        mapping,
        location,
        function: std::mem::take(&mut collect.tables.functions),
        string_table: std::mem::take(&mut collect.tables.strings),
        time_nanos: i64::try_from(wall).unwrap_or(i64::MAX),
        duration_nanos: i64::try_from(collect.last_t_ns).unwrap_or(i64::MAX),
        comment,
        default_sample_type,
    }
}

fn num_label(t: &mut Tables, key: &str, num: i32) -> proto::Label {
    proto::Label {
        key: t.string(key),
        str: 0,
        num: i64::from(num),
    }
}

fn str_label(t: &mut Tables, key: &str, value: &str) -> proto::Label {
    proto::Label {
        key: t.string(key),
        str: t.string(value),
        num: 0,
    }
}

/// A mapping kind as the stream names it.
pub(crate) fn kind_name(kind: MapKind) -> &'static str {
    match kind {
        MapKind::Anon => "anon",
        MapKind::Heap => "heap",
        MapKind::Stack => "stack",
        MapKind::Shmem => "shmem",
        MapKind::File => "file",
        MapKind::Hugetlb => "hugetlb",
    }
}
