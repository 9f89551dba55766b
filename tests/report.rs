//! The report's record stream on real traces: the state the decoder rebuilds from the bytes
//! alone, at many times, is the replay's after every line up to that time (`replay --at T`).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use mevi_actors::event::{Event, Line, SpaceId};
use mevi_actors::model::{AddressSpace, Replay};
use mevi_actors::report::decode::{DecodedSpace, Decoder};
use mevi_actors::report::records::{KEYFRAME_EVERY, encode};

use crate::util::{bin, parse_stream, run_bounded, scratch, trace, workload};

/// Fails with what differs between the replay and the decoded state of `space` at `t_ns`.
fn assert_same_space(
    t_ns: u64,
    space: SpaceId,
    want: &AddressSpace,
    got: &AddressSpace,
    live: bool,
) {
    let at = format!("space {space} at t_ns {t_ns}");
    let maps = |s: &AddressSpace| {
        s.mappings
            .iter()
            .map(|(r, m)| (r.clone(), m.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(maps(got), maps(want), "{at}: mappings");
    let set = |s: &rangemap::RangeSet<u64>| s.iter().cloned().collect::<Vec<_>>();
    assert_eq!(
        set(&got.resident),
        set(&want.resident),
        "{at}: resident pages"
    );
    assert_eq!(set(&got.zero), set(&want.zero), "{at}: zero pages");
    assert_eq!(
        got.resident_bytes, want.resident_bytes,
        "{at}: resident bytes"
    );
    if live {
        assert_eq!(
            got.peak_resident_bytes, want.peak_resident_bytes,
            "{at}: peak"
        );
    }
}

fn assert_same(t_ns: u64, replay: &Replay, decoded: &BTreeMap<SpaceId, DecodedSpace>) {
    let live: BTreeSet<SpaceId> = replay.process_space.values().copied().collect();
    let decoded_live: BTreeSet<SpaceId> = decoded
        .iter()
        .filter(|(_, s)| s.live)
        .map(|(&id, _)| id)
        .collect();
    assert_eq!(decoded_live, live, "live spaces at t_ns {t_ns}");
    let empty = AddressSpace::default();
    let ids: BTreeSet<SpaceId> = replay
        .spaces
        .keys()
        .chain(decoded.keys())
        .copied()
        .collect();
    for id in ids {
        let want = replay.spaces.get(&id).unwrap_or(&empty);
        let got = decoded.get(&id).map_or(&empty, |s| &s.state);
        assert_same_space(t_ns, id, want, got, live.contains(&id));
    }
}

/// The times to look at: the start, each layout line's, every 97th line's, and the end (and
/// just before each layout line, where its change must not show yet).
fn times(lines: &[Line]) -> Vec<u64> {
    let mut ts = vec![0, u64::MAX];
    for (i, l) in lines.iter().enumerate() {
        let layout = !matches!(l.event, Event::Resident { .. } | Event::Verify { .. });
        if layout || i % 97 == 0 {
            ts.push(l.t_ns);
            ts.push(l.t_ns.saturating_sub(1));
        }
    }
    ts.sort_unstable();
    ts.dedup();
    ts
}

/// Encodes `lines` with keyframes every `every` records and checks every time of `times`, both
/// from the nearest keyframe and by one decoder reading on from the start.
fn check(lines: &[Line], every: u64) -> usize {
    let encoder = encode(lines, every);
    let bytes = &encoder.bytes;
    let mut replay = Replay::new();
    let mut next = 0;
    let mut reading_on = Decoder::new(bytes);
    let ts = times(lines);
    for &t in &ts {
        while next < lines.len() && lines[next].t_ns <= t {
            replay.apply_line(&lines[next]);
            next += 1;
        }
        let seeked = Decoder::at(bytes, &encoder.keyframes, t).unwrap();
        assert_same(t, &replay, &seeked.spaces);
        reading_on.advance_to(t).unwrap();
        assert_same(t, &replay, &reading_on.spaces);
    }
    assert!(replay.problems.is_empty(), "{:?}", replay.problems);
    ts.len()
}

fn check_all(lines: &[Line]) {
    let encoder = encode(lines, KEYFRAME_EVERY);
    assert!(!encoder.keyframes.is_empty(), "a keyframe at the end");
    check(lines, KEYFRAME_EVERY);
    // Keyframes everywhere: every seek starts from one.
    let n = check(lines, 16);
    assert!(n > 10, "only {n} times looked at");
}

// --- issue 12: report records ---

#[test]
fn records_rebuild_fork_touch_at_any_time() {
    let t = trace(&[], &[workload("fork_touch")]);
    assert_eq!(t.status, 0, "{}", t.stderr);
    check_all(&t.lines);
}

#[test]
fn records_rebuild_u11_phases_at_any_time() {
    let t = trace(&[], &[workload("u11_phases")]);
    assert_eq!(t.status, 0, "{}", t.stderr);
    check_all(&t.lines);
}

#[test]
fn records_rebuild_a_remap_at_any_time() {
    let t = trace(&[], &[workload("u10_multi_vma_mremap")]);
    assert!(
        t.lines
            .iter()
            .any(|l| matches!(l.event, Event::Remap { .. })),
        "no remap line: {}",
        t.stderr
    );
    check_all(&t.lines);
}

#[test]
fn records_rebuild_the_demo_at_any_time() {
    let file = scratch("report-demo");
    let (status, _, stderr) = run_bounded(Command::new(bin()).arg("demo").arg("-o").arg(&file));
    assert_eq!(status, 0, "{stderr}");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::remove_file(&file).ok();
    let lines = parse_stream(&text);
    check_all(&lines);
    let encoder = encode(&lines, KEYFRAME_EVERY);
    eprintln!(
        "demo: trace {} bytes, {} lines; records {} bytes, {} records, {} keyframe(s)",
        text.len(),
        lines.len(),
        encoder.bytes.len(),
        encoder.records,
        encoder.keyframes.len()
    );
}
