use std::collections::HashMap;

use serde_json::Value;

use super::*;
use crate::event::samples::{exit, fork};
use crate::event::{Follow, Frame, MapCause, MapKind, PageState, Truncated};
use crate::model::sites::is_system_frame;

const K: u64 = 1024;

fn start() -> Event {
    Event::Start {
        schema: 1,
        version: "test".into(),
        argv: vec!["w".into()],
        page_size: 4096,
        faults: true,
        follow: None,
        thp: None,
        wall_ns: None,
        wall: None,
        stack_depth: Some(64),
        touch_stacks: None,
        attach: None,
        only: None,
        threads: None,
        regions: None,
        min_size: None,
        host: None,
        cgroup: None,
        container: None,
    }
}

fn exec(pid: i32, space: SpaceId) -> Event {
    Event::Exec {
        pid,
        tid: pid,
        space,
        path: "/w".into(),
        argv: vec!["w".into()],
        attached: false,
        followed: true,
    }
}

fn frame(module: &str, function: &str, file: Option<(&str, u32)>) -> Frame {
    Frame {
        module: Some(module.into()),
        offset: Some(0x1000),
        function: Some(function.into()),
        file: file.map(|(f, _)| f.into()),
        line: file.map(|(_, l)| l),
        ..Frame::default()
    }
}

fn libc(function: &str) -> Frame {
    frame("/usr/lib/x86_64-linux-gnu/libc.so.6", function, None)
}

fn user(function: &str, line: u32) -> Frame {
    frame("/work/w", function, Some(("/src/w.c", line)))
}

fn site(id: SiteId, frames: Vec<Frame>) -> Event {
    Event::Site {
        id,
        frames,
        truncated: None,
    }
}

/// `mmap` from `function` called by `main`.
fn site_in(id: SiteId, function: &str) -> Event {
    site(
        id,
        vec![
            libc("__mmap"),
            user(function, 10 + id as u32),
            user("main", 40),
            libc("__libc_start_call_main"),
        ],
    )
}

struct MapLine {
    space: SpaceId,
    range: Range<u64>,
    state: PageState,
    cause: Option<MapCause>,
    site: Option<SiteId>,
    kind: MapKind,
}

impl MapLine {
    fn new(space: SpaceId, range: Range<u64>, site: Option<SiteId>) -> Self {
        MapLine {
            space,
            range,
            state: PageState::NotResident,
            cause: None,
            site,
            kind: MapKind::Anon,
        }
    }

    fn resident(mut self) -> Self {
        self.state = PageState::Resident;
        self
    }

    fn cause(mut self, cause: MapCause) -> Self {
        self.cause = Some(cause);
        self
    }

    fn line(self, pid: i32) -> Event {
        Event::Map {
            pid,
            tid: pid,
            space: self.space,
            start: self.range.start,
            end: self.range.end,
            prot: "rw-".into(),
            kind: self.kind,
            path: None,
            tracked: true,
            state: Some(self.state),
            follow: Follow::Faults,
            cause: self.cause,
            site: self.site,
        }
    }
}

fn map(pid: i32, space: SpaceId, range: Range<u64>, site: Option<SiteId>) -> Event {
    MapLine::new(space, range, site).line(pid)
}

fn unmap(pid: i32, space: SpaceId, range: Range<u64>, cause: Option<MapCause>) -> Event {
    Event::Unmap {
        pid,
        tid: pid,
        space,
        start: range.start,
        end: range.end,
        cause,
        site: None,
    }
}

fn touch(pid: i32, space: SpaceId, range: Range<u64>) -> Event {
    Event::Resident {
        pid,
        tid: Some(pid),
        space,
        start: range.start,
        end: range.end,
        write: true,
        faults: (range.end - range.start) / 4096,
        writer: None,
        by: None,
        huge: false,
        site: None,
        sampled: 0,
        from: None,
        withheld: false,
    }
}

fn discard(pid: i32, space: SpaceId, range: Range<u64>) -> Event {
    Event::Discard {
        pid,
        tid: pid,
        space,
        start: range.start,
        end: range.end,
        advice: "dontneed".into(),
        site: None,
    }
}

fn remap(space: SpaceId, old: Range<u64>, new: Range<u64>, dontunmap: bool, site: Key) -> Event {
    Event::Remap {
        pid: 1,
        tid: 1,
        space,
        old_start: old.start,
        old_end: old.end,
        new_start: new.start,
        new_end: new.end,
        dontunmap,
        site,
    }
}

fn brk(space: SpaceId, old: u64, new: u64, site: Key) -> Event {
    Event::Brk {
        pid: 1,
        tid: 1,
        space,
        old,
        new,
        tracked: true,
        follow: Follow::Faults,
        site,
    }
}

/// Feeds `events` to `query` as `replay` does, checking after each line that the resident
/// bytes by site add up to every space's (a page shared since a fork counted in each, as the
/// sites count it); the state at the end.
fn feed(query: &mut BySite, events: Vec<Event>, out: &mut Vec<u8>) -> State {
    let mut state = State::default();
    for (seq, event) in events.into_iter().enumerate() {
        let line = Line {
            seq: seq as u64,
            t_ns: seq as u64 * 1000,
            event,
        };
        query.before(&state, &line, out).unwrap();
        state.apply(&line);
        query.after(&state, &line, out).unwrap();
        assert_eq!(
            query.resident.values().sum::<u64>(),
            state
                .replay
                .spaces
                .values()
                .map(|s| s.resident_bytes)
                .sum::<u64>(),
            "resident by site after seq {}: {:?}",
            line.seq,
            query.resident
        );
    }
    assert!(
        state.replay.problems.is_empty(),
        "{:?}",
        state.replay.problems
    );
    query.end(&state, out).unwrap();
    state
}

/// Every key's figures, after the whole trace.
fn figures(events: Vec<Event>) -> HashMap<Key, Figures> {
    let mut query = BySite::new(true, "test".into());
    feed(&mut query, events, &mut Vec::new());
    query.all_figures()
}

fn output(events: Vec<Event>, json: bool) -> String {
    let mut query = BySite::new(json, "test".into());
    let mut out = Vec::new();
    feed(&mut query, events, &mut out);
    String::from_utf8(out).unwrap()
}

fn json_lines(events: Vec<Event>) -> Vec<Value> {
    output(events, true)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The figures of anonymous memory only.
fn fig(mapped: u64, at_peak: u64, at_exit: u64, left: u64) -> Figures {
    Figures {
        anon_mapped: mapped,
        resident_at_peak: at_peak,
        resident_at_exit: at_exit,
        anon_left: left,
        ..Figures::default()
    }
}

#[test]
fn system_frames_are_libc_the_loader_allocators_and_runtimes() {
    let system = [
        libc("main_like_but_in_libc"),
        frame("/lib64/ld-linux-x86-64.so.2", "_dl_map_object", None),
        frame("/usr/lib/libjemalloc.so.2", "je_malloc", None),
        frame(
            "/usr/lib/libstdc++.so.6",
            "operator new(unsigned long)",
            None,
        ),
        user("malloc", 1),
        user("_int_malloc", 1),
        user("operator new(unsigned long)", 1),
        user("alloc::raw_vec::finish_grow", 1),
        user("<alloc::vec::Vec<T> as core::clone::Clone>::clone", 1),
        user("std::vector<int>::_M_realloc_insert", 1),
        user("__rust_alloc", 1),
        Frame {
            module: Some("/usr/lib/libc-2.31.so".into()),
            ..Frame::default()
        },
        frame(
            "/work/w",
            "<u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem",
            Some(("/rustc/5980761/library/alloc/src/vec/spec_from_elem.rs", 53)),
        ),
    ];
    for f in &system {
        assert!(is_system_frame(f), "{f:?}");
    }
    let mine = [
        user("alloc_arena_a", 1),
        user("main", 1),
        user("w::grow", 1),
        frame("/usr/lib/libcrypto.so.3", "CRYPTO_zalloc", None),
        frame("/usr/bin/python3.11", "PyMem_RawMalloc", None),
        frame(
            "/work/w",
            "<w::Arena as core::ops::drop::Drop>::drop",
            Some(("/work/src/arena.rs", 9)),
        ),
        // JIT code: neither module nor function.
        Frame {
            addr: Some(0x7f00_0000_1000),
            ..Frame::default()
        },
    ];
    for f in &mine {
        assert!(!is_system_frame(f), "{f:?}");
    }
}

#[test]
fn the_user_frame_is_the_innermost_one_not_of_the_system_else_the_outermost() {
    let stack = |frames| Stack {
        frames,
        truncated: None,
    };
    let s = stack(vec![
        libc("__mmap"),
        libc("sysmalloc"),
        user("f", 1),
        user("main", 2),
    ]);
    assert_eq!(s.user_frame(), Some(2));
    let all_system = stack(vec![libc("__mmap"), libc("_dl_start_user")]);
    assert_eq!(all_system.user_frame(), Some(1));
    assert_eq!(stack(vec![]).user_frame(), None);
}

#[test]
fn mapped_resident_at_peak_and_at_exit_by_site() {
    let f = figures(vec![
        start(),
        exec(1, 0),
        map(1, 0, 0x400000..0x401000, None),
        site_in(1, "alloc_a"),
        map(1, 0, 0x100000..0x110000, Some(1)),
        site_in(2, "alloc_b"),
        map(1, 0, 0x200000..0x204000, Some(2)),
        touch(1, 0, 0x100000..0x108000),
        touch(1, 0, 0x200000..0x204000),
        // The peak: 48 KiB. Then both shrink.
        discard(1, 0, 0x100000..0x108000),
        unmap(1, 0, 0x200000..0x204000, None),
        touch(1, 0, 0x10f000..0x110000),
        exit(1, 0),
    ]);
    assert_eq!(f[&Some(1)], fig(64 * K, 32 * K, 4 * K, 64 * K));
    assert_eq!(f[&Some(2)], fig(16 * K, 16 * K, 0, 0));
    assert_eq!(f[&None], fig(4 * K, 0, 0, 4 * K));
}

/// A file mapping (untracked: no pages followed) by `site`.
fn map_file(pid: i32, space: SpaceId, range: Range<u64>, site: Option<SiteId>) -> Event {
    Event::Map {
        pid,
        tid: pid,
        space,
        start: range.start,
        end: range.end,
        prot: "r--".into(),
        kind: MapKind::File,
        path: Some("/usr/lib/libw.so".into()),
        tracked: false,
        state: None,
        follow: Follow::Faults,
        cause: None,
        site,
    }
}

/// Anonymous and file bytes stay apart; resident at the ends of two spaces that lived one after
/// the other adds up to more than the tree ever held at once, and the peak stays the peak.
#[test]
fn anonymous_and_file_bytes_apart_and_exits_added_over_spaces() {
    let events = vec![
        start(),
        exec(1, 0),
        fork(1, 2, 0, 1),
        exec(2, 2),
        site_in(1, "alloc_a"),
        map(2, 2, 0x100000..0x104000, Some(1)),
        map_file(2, 2, 0x700000..0x702000, Some(1)),
        touch(2, 2, 0x100000..0x104000),
        exit(2, 2),
        map(1, 0, 0x100000..0x104000, Some(1)),
        touch(1, 0, 0x100000..0x104000),
        exit(1, 0),
    ];
    let f = figures(events.clone());
    let a = Figures {
        anon_mapped: 32 * K,
        file_mapped: 8 * K,
        resident_at_peak: 16 * K,
        resident_at_exit: 32 * K,
        anon_left: 32 * K,
        file_left: 8 * K,
        sampled_touches: 0,
    };
    assert_eq!(f[&Some(1)], a);
    let rows = json_lines(events.clone());
    let row = rows
        .iter()
        .find(|v| v["view"] == "bottom_up" && v["function"] == "alloc_a")
        .unwrap();
    for (key, bytes) in [
        ("anon_mapped_bytes", 32 * K),
        ("file_mapped_bytes", 8 * K),
        ("mapped_bytes", 40 * K),
        ("resident_at_peak_bytes", 16 * K),
        ("resident_at_exit_bytes", 32 * K),
        ("anon_left_at_exit_bytes", 32 * K),
        ("file_left_at_exit_bytes", 8 * K),
        ("alive_at_exit_bytes", 40 * K),
    ] {
        assert_eq!(row[key], bytes, "{key}: {row}");
    }
    let text = output(events, false);
    assert!(
        text.contains(
            "anon mapped file mapped     at peak  Σ at exits   anon left   file left  where\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "     32 KiB       8 KiB      16 KiB      32 KiB      32 KiB       8 KiB  alloc_a"
        ),
        "{text}"
    );
    assert!(text.contains("  Σ at exits: "), "{text}");
}

#[test]
fn resident_at_peak_is_taken_where_the_whole_tree_first_reached_its_peak() {
    let f = figures(vec![
        start(),
        exec(1, 0),
        site_in(1, "alloc_a"),
        map(1, 0, 0x100000..0x110000, Some(1)),
        site_in(2, "alloc_b"),
        map(1, 0, 0x200000..0x210000, Some(2)),
        touch(1, 0, 0x100000..0x108000),
        discard(1, 0, 0x100000..0x108000),
        // 32 KiB again, not more: not the peak.
        touch(1, 0, 0x200000..0x208000),
        // 36 KiB: the peak, alloc_b's 32 KiB the most of it.
        touch(1, 0, 0x100000..0x101000),
        discard(1, 0, 0x200000..0x208000),
        touch(1, 0, 0x200000..0x201000),
    ]);
    assert_eq!(f[&Some(1)].resident_at_peak, 4 * K);
    assert_eq!(f[&Some(2)].resident_at_peak, 32 * K);
    // Still running at the end: its space ends there.
    assert_eq!(f[&Some(1)].resident_at_exit, 4 * K);
    assert_eq!(f[&Some(2)].resident_at_exit, 4 * K);
}

#[test]
fn a_fork_child_inherits_the_sites_and_a_description_again_keeps_them() {
    let f = figures(vec![
        start(),
        exec(1, 0),
        site_in(1, "alloc_a"),
        MapLine::new(0, 0x100000..0x104000, Some(1))
            .resident()
            .line(1),
        fork(1, 2, 0, 1),
        // The child described from its own page tables.
        unmap(2, 1, 0..0x7ffffffff000, Some(MapCause::Redescribe)),
        MapLine::new(1, 0x100000..0x102000, None)
            .resident()
            .cause(MapCause::Redescribe)
            .line(2),
        MapLine::new(1, 0x102000..0x104000, None)
            .cause(MapCause::Split)
            .line(2),
        exit(2, 1),
        exit(1, 0),
    ]);
    // Mapped once, by the parent; alive in both spaces. The tree's peak is the parent's 16 KiB:
    // the fork adds no frame (the child's copies are its parent's until written).
    assert_eq!(f[&Some(1)], fig(16 * K, 16 * K, 24 * K, 32 * K));
    assert!(!f.contains_key(&None));
}

#[test]
fn exec_starts_without_sites_and_a_map_without_one_takes_its_range() {
    let f = figures(vec![
        start(),
        exec(1, 0),
        site_in(1, "alloc_a"),
        map(1, 0, 0x100000..0x104000, Some(1)),
        fork(1, 2, 0, 1),
        exec(2, 2),
        map(2, 2, 0x100000..0x102000, None),
        // The parent's range mapped again by a line without a site.
        map(1, 0, 0x103000..0x104000, None),
        exit(2, 2),
        exit(1, 0),
    ]);
    // The fork child's copy ends at its exec, all still mapped; the parent keeps 12 KiB.
    assert_eq!(f[&Some(1)], fig(16 * K, 0, 0, 16 * K + 12 * K));
    assert_eq!(f[&None], fig(12 * K, 0, 0, 12 * K));
}

#[test]
fn a_description_again_without_an_unmap_keeps_the_sites_of_the_same_memory() {
    let f = figures(vec![
        start(),
        exec(1, 0),
        site_in(1, "alloc_a"),
        map(1, 0, 0x100000..0x104000, Some(1)),
        touch(1, 0, 0x100000..0x101000),
        MapLine::new(0, 0x100000..0x103000, None)
            .resident()
            .cause(MapCause::Redescribe)
            .line(1),
        // Of another kind: other memory, which no line with a site made.
        MapLine {
            kind: MapKind::Stack,
            ..MapLine::new(0, 0x103000..0x104000, None).cause(MapCause::Redescribe)
        }
        .line(1),
    ]);
    assert_eq!(f[&Some(1)], fig(16 * K, 12 * K, 12 * K, 12 * K));
    assert_eq!(f[&None], fig(0, 0, 0, 4 * K));
}

#[test]
fn a_remap_moves_the_sites_and_its_growth_is_its_own() {
    let f = figures(vec![
        start(),
        exec(1, 0),
        site_in(1, "alloc_a"),
        map(1, 0, 0x100000..0x104000, Some(1)),
        touch(1, 0, 0x100000..0x102000),
        site_in(3, "grow"),
        remap(0, 0x100000..0x104000, 0x200000..0x208000, false, Some(3)),
        touch(1, 0, 0x207000..0x208000),
        exit(1, 0),
    ]);
    assert_eq!(f[&Some(1)], fig(16 * K, 8 * K, 8 * K, 16 * K));
    assert_eq!(f[&Some(3)], fig(16 * K, 4 * K, 4 * K, 16 * K));
}

#[test]
fn a_dontunmap_remap_leaves_the_source_its_site_emptied() {
    let f = figures(vec![
        start(),
        exec(1, 0),
        site_in(1, "alloc_a"),
        map(1, 0, 0x100000..0x104000, Some(1)),
        touch(1, 0, 0x100000..0x104000),
        remap(0, 0x100000..0x104000, 0x200000..0x204000, true, None),
        // A shrink: the rest of the old mapping goes.
        remap(0, 0x200000..0x204000, 0x300000..0x302000, false, None),
        exit(1, 0),
    ]);
    assert_eq!(f[&Some(1)], fig(16 * K, 16 * K, 8 * K, 24 * K));
}

#[test]
fn brk_growth_and_split_lines_are_mapped_once() {
    let f = figures(vec![
        start(),
        exec(1, 0),
        site_in(4, "grow_heap"),
        brk(0, 0x500000, 0x510000, Some(4)),
        // The heap pages present when the break moved.
        MapLine {
            kind: MapKind::Heap,
            ..MapLine::new(0, 0x500000..0x502000, Some(4))
                .resident()
                .cause(MapCause::Split)
        }
        .line(1),
        site_in(5, "populate"),
        map(1, 0, 0x600000..0x602000, Some(5)),
        MapLine::new(0, 0x602000..0x604000, Some(5))
            .resident()
            .cause(MapCause::Split)
            .line(1),
        brk(0, 0x510000, 0x508000, None),
        exit(1, 0),
    ]);
    assert_eq!(f[&Some(4)], fig(64 * K, 8 * K, 8 * K, 32 * K));
    assert_eq!(f[&Some(5)], fig(16 * K, 8 * K, 8 * K, 16 * K));
}

#[test]
fn sampled_first_touches_are_counted_by_their_site_whatever_the_run_length() {
    let sampled = |range: Range<u64>, id: SiteId, n: u64| {
        let mut line = touch(1, 0, range);
        if let Event::Resident { site, sampled, .. } = &mut line {
            (*site, *sampled) = (Some(id), n);
        }
        line
    };
    let f = figures(vec![
        start(),
        exec(1, 0),
        site_in(1, "alloc_a"),
        map(1, 0, 0x100000..0x110000, Some(1)),
        // Unsampled first touches count for nothing; a run of 8 pages with 2 samples counts 2.
        touch(1, 0, 0x100000..0x104000),
        sampled(0x104000..0x10c000, 1, 2),
        sampled(0x10c000..0x10d000, 1, 1),
    ]);
    assert_eq!(f[&Some(1)].sampled_touches, 3);
}

/// Two stacks whose innermost user frame is `alloc_a` at w.c:11 (one through malloc, one
/// called from `other`), and one in `alloc_b`.
fn two_paths_to_alloc_a() -> Vec<Event> {
    vec![
        start(),
        exec(1, 0),
        map(1, 0, 0x400000..0x401000, None),
        site_in(1, "alloc_a"),
        map(1, 0, 0x100000..0x110000, Some(1)),
        site(
            2,
            vec![
                libc("sysmalloc"),
                libc("malloc"),
                user("alloc_a", 11),
                user("other", 50),
                user("main", 41),
                libc("__libc_start_call_main"),
            ],
        ),
        map(1, 0, 0x200000..0x208000, Some(2)),
        site_in(3, "alloc_b"),
        map(1, 0, 0x300000..0x340000, Some(3)),
        touch(1, 0, 0x100000..0x110000),
        touch(1, 0, 0x200000..0x208000),
        touch(1, 0, 0x300000..0x301000),
        exit(1, 0),
    ]
}

#[test]
fn bottom_up_rows_merge_the_stacks_of_one_user_frame() {
    let lines = json_lines(two_paths_to_alloc_a());
    let rows: Vec<&Value> = lines.iter().filter(|v| v["view"] == "bottom_up").collect();
    assert_eq!(rows.len(), 3, "{rows:?}");
    let a = rows[0];
    assert_eq!(a["function"], "alloc_a");
    assert_eq!(a["file"], "/src/w.c");
    assert_eq!(a["line"], 11);
    assert_eq!(a["module"], "/work/w");
    assert_eq!(a["sites"], serde_json::json!([1, 2]));
    assert_eq!(a["mapped_bytes"], 96 * K);
    assert_eq!(a["resident_at_peak_bytes"], 96 * K);
    assert_eq!(a["resident_at_exit_bytes"], 96 * K);
    assert_eq!(a["alive_at_exit_bytes"], 96 * K);
    assert_eq!(a["sampled_touches"], 0);
    // The callers of its largest stack.
    assert_eq!(a["callers"][0]["function"], "main");
    assert_eq!(a["callers"][0]["line"], 40);
    assert_eq!(a["callers"].as_array().unwrap().len(), 2);
    assert_eq!(rows[1]["function"], "alloc_b");
    assert_eq!(rows[1]["mapped_bytes"], 256 * K);
    assert_eq!(rows[2]["function"], "(no stack)");
    assert_eq!(rows[2]["sites"], serde_json::json!([]));
}

#[test]
fn the_top_down_tree_goes_from_the_outermost_user_frame_in() {
    let lines = json_lines(two_paths_to_alloc_a());
    let nodes: Vec<(String, u64, u64)> = lines
        .iter()
        .filter(|v| v["view"] == "top_down")
        .map(|v| {
            let path: Vec<&str> = v["path"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap())
                .collect();
            assert_eq!(v["depth"].as_u64().unwrap() as usize, path.len() - 1);
            (
                path.join("/"),
                v["resident_at_peak_bytes"].as_u64().unwrap(),
                v["mapped_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected = [
        ("main", 100 * K, 352 * K),
        ("main/alloc_a", 64 * K, 64 * K),
        ("main/other", 32 * K, 32 * K),
        ("main/other/alloc_a", 32 * K, 32 * K),
        ("main/alloc_b", 4 * K, 256 * K),
        ("(no stack)", 0, 4 * K),
    ];
    let expected: Vec<(String, u64, u64)> = expected
        .iter()
        .map(|(p, r, m)| (p.to_string(), *r, *m))
        .collect();
    assert_eq!(nodes, expected);
}

#[test]
fn the_tables_name_each_row_with_its_callers_and_leave_out_small_nodes() {
    let mut events = two_paths_to_alloc_a();
    let exit = events.pop().unwrap();
    events.extend([
        map(1, 0, 0x1000000..0x1100000, None),
        site_in(9, "tiny"),
        map(1, 0, 0x900000..0x901000, Some(9)),
        exit,
    ]);
    let text = output(events, false);
    assert!(
        text.contains("bytes by call site, from 4 stack(s)"),
        "{text}"
    );
    assert!(
        text.contains("  alloc_a (w.c:11) in w  [2 stacks]\n"),
        "{text}"
    );
    assert!(
        text.contains("← main (w.c:40) ← __libc_start_call_main  (and 1 other call path(s))\n"),
        "{text}"
    );
    assert!(text.contains("  alloc_b (w.c:13) in w\n"), "{text}");
    assert!(text.contains("  (no stack)\n"), "{text}");
    assert!(text.contains("  main\n"), "{text}");
    assert!(text.contains("    other\n"), "{text}");
    assert!(text.contains("    → alloc_a\n"), "{text}");
    // `tiny`: 4 KiB of 1.35 MiB mapped and nothing resident: a row, but not in the tree.
    assert!(text.contains("  tiny (w.c:19) in w\n"), "{text}");
    assert!(!text.contains("    tiny\n"), "{text}");
    assert!(text.contains("(1 node(s) holding under 1%"), "{text}");
    assert!(!text.contains("touches"), "{text}");
}

#[test]
fn a_trace_without_stacks_has_its_bytes_under_no_stack() {
    let lines = json_lines(vec![
        start(),
        exec(1, 0),
        map(1, 0, 0x100000..0x104000, None),
        touch(1, 0, 0x100000..0x101000),
        exit(1, 0),
    ]);
    let expected = [
        serde_json::json!({"view": "bottom_up", "function": "(no stack)", "callers": [],
            "sites": [], "anon_mapped_bytes": 16 * K, "file_mapped_bytes": 0,
            "mapped_bytes": 16 * K, "resident_at_peak_bytes": 4 * K,
            "resident_at_exit_bytes": 4 * K, "anon_left_at_exit_bytes": 16 * K,
            "file_left_at_exit_bytes": 0, "alive_at_exit_bytes": 16 * K,
            "sampled_touches": 0}),
        serde_json::json!({"view": "top_down", "path": ["(no stack)"], "depth": 0,
            "anon_mapped_bytes": 16 * K, "file_mapped_bytes": 0,
            "mapped_bytes": 16 * K, "resident_at_peak_bytes": 4 * K,
            "resident_at_exit_bytes": 4 * K, "anon_left_at_exit_bytes": 16 * K,
            "file_left_at_exit_bytes": 0, "alive_at_exit_bytes": 16 * K,
            "sampled_touches": 0}),
    ];
    assert_eq!(lines, expected);
}

#[test]
fn cut_stacks_and_unknown_sites_say_so() {
    let lines = json_lines(vec![
        start(),
        exec(1, 0),
        Event::Site {
            id: 1,
            frames: vec![libc("__mmap"), user("deep", 7)],
            truncated: Some(Truncated::Depth),
        },
        map(1, 0, 0x100000..0x104000, Some(1)),
        // A site no `site` line described (a damaged stream).
        map(1, 0, 0x200000..0x201000, Some(7)),
        exit(1, 0),
    ]);
    let paths: Vec<&Value> = lines
        .iter()
        .filter(|v| v["view"] == "top_down")
        .map(|v| &v["path"])
        .collect();
    assert_eq!(
        paths,
        [
            &serde_json::json!(["(stack cut at --stack-depth)"]),
            &serde_json::json!(["(stack cut at --stack-depth)", "deep"]),
            &serde_json::json!(["(site 7: no site line)"]),
        ]
    );
    let bare = lines
        .iter()
        .find(|v| v["view"] == "bottom_up" && v["sites"] == serde_json::json!([7]))
        .unwrap();
    assert!(bare.get("function").is_none(), "{bare}");
}
