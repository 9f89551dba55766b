//! The report's record stream on real traces: the state the decoder rebuilds from the bytes
//! alone, at many times, is the replay's after every line up to that time (`replay --at T`).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use mevi_actors::event::{Event, Line, SpaceId};
use mevi_actors::model::sites::Sites;
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

/// The sites of every space, as `Sites` (replay --by-site's attribution) has them and as
/// decoded; how many ranges have one.
fn assert_same_sites(
    t_ns: u64,
    replay: &Replay,
    sites: &Sites,
    decoded: &BTreeMap<SpaceId, DecodedSpace>,
) -> usize {
    let mut ranges = 0;
    for id in replay.spaces.keys().chain(decoded.keys()) {
        let want: Vec<_> = sites
            .of(*id)
            .into_iter()
            .flat_map(|m| m.iter())
            .map(|(r, s)| (r.clone(), *s))
            .collect();
        let got: Vec<_> = decoded
            .get(id)
            .into_iter()
            .flat_map(|d| d.sites.iter())
            .map(|(r, s)| (r.clone(), *s))
            .collect();
        assert_eq!(got, want, "space {id} at t_ns {t_ns}: sites");
        ranges += want.len();
    }
    ranges
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
/// from the nearest keyframe and by one decoder reading on from the start; the times looked
/// at, and how many ranges with a site were seen.
fn check(lines: &[Line], every: u64) -> (usize, usize) {
    let encoder = encode(lines, every);
    let bytes = &encoder.bytes;
    let mut replay = Replay::new();
    let mut sites = Sites::default();
    let mut next = 0;
    let mut reading_on = Decoder::new(bytes);
    let mut with_sites = 0;
    let ts = times(lines);
    for &t in &ts {
        while next < lines.len() && lines[next].t_ns <= t {
            sites.before(&replay, &lines[next]);
            replay.apply_line(&lines[next]);
            sites.after(&replay, &lines[next]);
            next += 1;
        }
        let seeked = Decoder::at(bytes, &encoder.keyframes, t).unwrap();
        assert_same(t, &replay, &seeked.spaces);
        with_sites += assert_same_sites(t, &replay, &sites, &seeked.spaces);
        reading_on.advance_to(t).unwrap();
        assert_same(t, &replay, &reading_on.spaces);
        assert_same_sites(t, &replay, &sites, &reading_on.spaces);
    }
    assert!(replay.problems.is_empty(), "{:?}", replay.problems);
    (ts.len(), with_sites)
}

/// Checks with keyframes as far apart as a report has them, and 16 records apart; how many
/// ranges with a site were seen.
fn check_all(lines: &[Line]) -> usize {
    let encoder = encode(lines, KEYFRAME_EVERY);
    assert!(!encoder.keyframes.is_empty(), "a keyframe at the end");
    check(lines, KEYFRAME_EVERY);
    // Keyframes everywhere: every seek starts from one.
    let (n, with_sites) = check(lines, 16);
    assert!(n > 10, "only {n} times looked at");
    with_sites
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

// --- issue 13: the sites of a trace made with --stacks ---

#[test]
fn records_rebuild_the_sites_of_a_fork_at_any_time() {
    let t = trace(&["--stacks"], &[workload("fork_touch")]);
    assert_eq!(t.status, 0, "{}", t.stderr);
    let with_sites = check_all(&t.lines);
    assert!(with_sites > 0, "no range had a site");
}

#[test]
fn records_rebuild_the_sites_of_a_remap_at_any_time() {
    let t = trace(&["--stacks"], &[workload("u10_multi_vma_mremap")]);
    assert_eq!(t.status, 0, "{}", t.stderr);
    let remapped = t
        .lines
        .iter()
        .any(|l| matches!(l.event, Event::Remap { .. }) && l.event.site().is_some());
    assert!(remapped, "no remap line with a site");
    let with_sites = check_all(&t.lines);
    assert!(with_sites > 0, "no range had a site");
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

// --- issue 12: the report file ---

/// The meta block and the record bytes (still base64) of a report file.
fn report_parts(html: &str) -> (serde_json::Value, String) {
    let block = |id: &str| {
        let open = format!("id=\"{id}\">");
        let start = html
            .find(&open)
            .unwrap_or_else(|| panic!("no {id} block in the report"))
            + open.len();
        let len = html[start..].find("</script>").expect("the block ends");
        html[start..start + len].to_string()
    };
    let meta = serde_json::from_str(&block("mevi-meta")).expect("the meta is JSON");
    (meta, block("mevi-records"))
}

#[test]
fn run_report_writes_the_page_report_makes_from_the_stream() {
    let page_of_run = scratch("run-report.html");
    // Sampled often: a short run has rss lines of both spaces.
    let t = trace(
        &[
            "--report",
            page_of_run.to_str().unwrap(),
            "--sample-ms",
            "2",
        ],
        &[workload("fork_touch")],
    );
    assert_eq!(t.status, 0, "{}", t.stderr);
    let stream = scratch("run-report.jsonl");
    let text: String = t
        .lines
        .iter()
        .map(|l| serde_json::to_string(l).unwrap() + "\n")
        .collect();
    std::fs::write(&stream, text).unwrap();
    let page_of_report = scratch("report.html");
    let (status, _, stderr) = run_bounded(
        Command::new(bin())
            .arg("report")
            .arg(&stream)
            .arg("-o")
            .arg(&page_of_report),
    );
    assert_eq!(status, 0, "{stderr}");
    let a = std::fs::read_to_string(&page_of_run).unwrap();
    let b = std::fs::read_to_string(&page_of_report).unwrap();
    for f in [&page_of_run, &page_of_report, &stream] {
        std::fs::remove_file(f).ok();
    }
    let (meta_a, records_a) = report_parts(&a);
    let (meta_b, records_b) = report_parts(&b);
    assert_eq!(
        meta_a, meta_b,
        "the same meta from the run and from its stream"
    );
    assert_eq!(records_a, records_b, "the same records");
    assert_eq!(a, b, "the same file");

    // The figures the page shows are the summary's.
    let (processes, totals) = t.summary();
    let shown = meta_a["processes"].as_array().unwrap();
    assert_eq!(shown.len(), processes.len());
    for p in processes {
        let row = shown
            .iter()
            .find(|r| r["pid"] == p.pid)
            .unwrap_or_else(|| panic!("pid {} not in the report", p.pid));
        assert_eq!(
            row["peak_resident_bytes"], p.peak_resident_bytes,
            "pid {}",
            p.pid
        );
        assert_eq!(row["resident_bytes"], p.resident_bytes, "pid {}", p.pid);
        assert_eq!(row["first_touches"], p.faults, "pid {}", p.pid);
    }
    let tree_max = meta_a["buckets"]["tree"]["max"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_u64())
        .max();
    assert_eq!(tree_max, Some(totals.tree_peak_resident_bytes));
    assert_eq!(meta_a["complete"], true);
    // Every layout and lifecycle line is a row (well under the cap).
    let layout = t
        .lines
        .iter()
        .filter(|l| {
            !matches!(
                l.event,
                Event::Start { .. }
                    | Event::Site { .. }
                    | Event::Resident { .. }
                    | Event::Rss { .. }
                    | Event::Verify { .. }
                    | Event::Summary { .. }
            )
        })
        .count();
    assert_eq!(meta_a["events"]["rows"].as_array().unwrap().len(), layout);
    assert_rss_is_the_streams(&meta_a, &t.lines);
    // The records decode to the end state.
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(records_a)
        .unwrap();
    assert_eq!(meta_a["records"]["bytes"], bytes.len());
    let mut decoder = Decoder::new(&bytes);
    decoder.advance_to(u64::MAX).unwrap();
    let (replay, _) = crate::util::replay_keeping_ends(&t.lines);
    assert_same(u64::MAX, &replay, &decoder.spaces);
}

/// Each space's kernel count in the meta is its last `rss` line: as `spaces[].rss`, and where
/// its curve (`buckets.rss`, running sums of anon, file, shmem, swap) ends.
fn assert_rss_is_the_streams(meta: &serde_json::Value, lines: &[Line]) {
    let mut last: BTreeMap<u64, [u64; 4]> = BTreeMap::new();
    for l in lines {
        if let Event::Rss {
            space,
            anon,
            file,
            shmem,
            swap,
            ..
        } = l.event
        {
            last.insert(space, [anon, file, shmem, swap]);
        }
    }
    assert!(!last.is_empty(), "no rss line in the stream");
    let curves = meta["buckets"]["rss"].as_object().unwrap();
    let mut shown = 0;
    for space in meta["spaces"].as_array().unwrap() {
        let id = space["id"].as_u64().unwrap();
        let Some(want) = last.get(&id) else {
            assert!(
                space["rss"].is_null(),
                "space {id} has no rss line: {space}"
            );
            continue;
        };
        shown += 1;
        let said = ["anon", "file", "shmem", "swap"].map(|k| space["rss"][k].as_u64().unwrap());
        assert_eq!(&said, want, "space {id}: its last rss line");
        // A level left out (null) is the one below it again.
        let mut sum = 0;
        let mut level = &serde_json::Value::Null;
        for (k, bytes) in want.iter().enumerate() {
            sum += bytes;
            if !curves[&id.to_string()][k].is_null() {
                level = &curves[&id.to_string()][k];
            }
            let end = level["last"].as_array().unwrap().last().unwrap();
            assert_eq!(
                end.as_u64(),
                Some(sum),
                "space {id}: level {k} ends at {end}"
            );
        }
    }
    assert_eq!(shown, curves.len(), "a curve per space with rss lines");
}

#[test]
fn report_says_what_it_cannot_write() {
    let stream = scratch("report-bad.jsonl");
    let (status, _, stderr) = run_bounded(Command::new(bin()).arg("demo").arg("-o").arg(&stream));
    assert_eq!(status, 0, "{stderr}");
    // From stdin, the page needs a place.
    let (status, _, stderr) = run_bounded(
        Command::new(bin())
            .arg("report")
            .arg("-")
            .stdin(std::fs::File::open(&stream).unwrap()),
    );
    assert_eq!(status, 2, "{stderr}");
    assert!(stderr.contains("-o FILE"), "{stderr}");
    // Never over the trace itself.
    let (status, _, stderr) = run_bounded(
        Command::new(bin())
            .arg("report")
            .arg(&stream)
            .arg("-o")
            .arg(&stream),
    );
    assert_eq!(status, 2, "{stderr}");
    // Nor under another name: a link to it.
    let link = stream.with_extension("link.html");
    std::os::unix::fs::symlink(&stream, &link).unwrap();
    let (status, _, stderr) = run_bounded(
        Command::new(bin())
            .arg("report")
            .arg(&stream)
            .arg("-o")
            .arg(&link),
    );
    std::fs::remove_file(&link).ok();
    assert_eq!(status, 2, "{stderr}");
    assert!(std::fs::metadata(&stream).unwrap().len() > 0);
    // stdin to stdout is two ends, not one file.
    let (status, stdout, stderr) = run_bounded(
        Command::new(bin())
            .args(["report", "-", "-o", "-"])
            .stdin(std::fs::File::open(&stream).unwrap()),
    );
    assert_eq!(status, 0, "{stderr}");
    assert!(stdout.starts_with("<!doctype html>"));
    // A folder that does not exist: one line, status 1.
    let (status, _, stderr) = run_bounded(
        Command::new(bin())
            .arg("report")
            .arg(&stream)
            .arg("-o")
            .arg("/nonexistent/r.html"),
    );
    assert_eq!(status, 1, "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("/nonexistent/r.html"), "{stderr}");
    // The default place is beside the trace; `-o -` is stdout.
    let (status, stdout, stderr) = run_bounded(Command::new(bin()).arg("report").arg(&stream));
    assert_eq!(status, 0, "{stderr}");
    assert!(stdout.is_empty());
    let beside = stream.with_extension("html");
    let page = std::fs::read_to_string(&beside).unwrap();
    assert!(page.starts_with("<!doctype html>"), "{}", &page[..100]);
    let (status, stdout, stderr) = run_bounded(
        Command::new(bin())
            .arg("report")
            .arg(&stream)
            .arg("-o")
            .arg("-"),
    );
    assert_eq!(status, 0, "{stderr}");
    assert_eq!(stdout, page);
    std::fs::remove_file(&beside).ok();
    std::fs::remove_file(&stream).ok();
}

#[test]
fn run_report_to_a_bad_path_fails_before_the_program_runs() {
    let marker = scratch("report-ran");
    let (status, _, stderr) = run_bounded(
        Command::new(bin())
            .args([
                "run",
                "--report",
                "/nonexistent/r.html",
                "-o",
                "/dev/null",
                "--",
            ])
            .args(["/bin/touch", marker.to_str().unwrap()]),
    );
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains("/nonexistent/r.html"), "{stderr}");
    assert!(!marker.exists(), "the program ran");
}

#[test]
fn a_stream_whose_time_goes_back_is_reported_not_a_crash() {
    let stream = scratch("report-back.jsonl");
    let (status, _, stderr) = run_bounded(Command::new(bin()).arg("demo").arg("-o").arg(&stream));
    assert_eq!(status, 0, "{stderr}");
    // A late first touch said to be at time 0: damaged, as a hand-edited stream could be.
    let text = std::fs::read_to_string(&stream).unwrap();
    let mut lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let late = lines
        .iter()
        .rposition(|l| l["ev"] == "resident")
        .expect("a resident line");
    lines[late]["t_ns"] = 0.into();
    let damaged: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&stream, damaged).unwrap();
    let page = stream.with_extension("html");
    let (status, _, stderr) = run_bounded(
        Command::new(bin())
            .arg("report")
            .arg(&stream)
            .arg("-o")
            .arg(&page),
    );
    let html = std::fs::read_to_string(&page).unwrap_or_default();
    std::fs::remove_file(&stream).ok();
    std::fs::remove_file(&page).ok();
    assert_eq!(status, 1, "a stream problem, said: {stderr}");
    assert!(stderr.contains("goes back"), "{stderr}");
    let (meta, _) = report_parts(&html);
    assert!(
        meta["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p.as_str().unwrap().contains("goes back")),
        "the page shows the problem"
    );
}
