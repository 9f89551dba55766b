//! The report page (`mevi-actors report`) in a real browser, on traces of workloads that print
//! their own truth: it asks for nothing over the network and logs no error; its figures are the
//! trace's summary; at any instant its address-space view is `replay --at`, and at each
//! process's end the kernel's pagemap; its scrubber and time window move what it shows
//! (docs/report.md; the page's API: window.mevi).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

use crate::browser::{Browser, Page};
use crate::util::{PAGE, bin, run_bounded, scratch, workload};

/// The lines the events table lists (layout and lifecycle, not `resident` or `verify`).
const EVENT_KINDS: &[&str] = &[
    "map",
    "unmap",
    "remap",
    "brk",
    "protect",
    "discard",
    "exec",
    "fork",
    "thread",
    "thread_exit",
    "exit",
    "warning",
];

/// A traced run and its report, on disk while a test looks at them.
struct Report {
    trace: PathBuf,
    html: PathBuf,
    lines: Vec<Value>,
    /// The program's truth lines (tests/workloads/README.md).
    truths: Vec<Value>,
}

impl Drop for Report {
    fn drop(&mut self) {
        std::fs::remove_file(&self.trace).ok();
        std::fs::remove_file(&self.html).ok();
    }
}

impl Report {
    /// `run -o trace.jsonl -- tests/workloads/NAME`, then `report trace.jsonl -o trace.html`.
    fn of_workload(name: &str) -> Report {
        let trace = scratch(name).with_extension("jsonl");
        let (status, stdout, stderr) = run_bounded(
            Command::new(bin())
                .args(["run", "-o"])
                .arg(&trace)
                .arg("--")
                .arg(workload(name)),
        );
        assert_eq!(status, 0, "{stderr}");
        Report::build(trace, &stdout)
    }

    /// `demo -o trace.jsonl`, then its report.
    fn of_demo() -> Report {
        let trace = scratch("demo").with_extension("jsonl");
        let (status, _, stderr) = run_bounded(Command::new(bin()).args(["demo", "-o"]).arg(&trace));
        assert_eq!(status, 0, "{stderr}");
        Report::build(trace, "")
    }

    fn build(trace: PathBuf, stdout: &str) -> Report {
        let html = trace.with_extension("html");
        let started = Instant::now();
        let (status, _, stderr) = run_bounded(
            Command::new(bin())
                .arg("report")
                .arg(&trace)
                .arg("-o")
                .arg(&html),
        );
        assert_eq!(status, 0, "report: {stderr}");
        let text = std::fs::read_to_string(&trace).unwrap();
        let lines = json_lines(&text);
        eprintln!(
            "report of {} lines: {} bytes, built in {:?}",
            lines.len(),
            std::fs::metadata(&html).unwrap().len(),
            started.elapsed()
        );
        Report {
            trace,
            html,
            lines,
            truths: json_lines(stdout)
                .into_iter()
                .filter(|v| v.get("truth").is_some())
                .collect(),
        }
    }

    fn url(&self) -> String {
        format!("file://{}", self.html.display())
    }

    fn summary(&self) -> &Value {
        let last = self.lines.last().unwrap();
        assert_eq!(last["ev"], "summary", "the trace ends with its summary");
        last
    }

    /// `replay --at T --json`: one object per space live at `t_ns`.
    fn replay_at(&self, t_ns: u64) -> Vec<Value> {
        let (status, stdout, stderr) = run_bounded(
            Command::new(bin())
                .args(["replay", "--json", "--at", &ms(t_ns)])
                .arg(&self.trace),
        );
        assert_eq!(status, 0, "replay --at {}: {stderr}", ms(t_ns));
        json_lines(&stdout)
    }

    fn truths_of<'a>(&'a self, kind: &str) -> impl Iterator<Item = &'a Value> + use<'a> {
        let kind = kind.to_owned();
        self.truths
            .iter()
            .filter(move |t| t["truth"] == kind.as_str())
    }

    fn truth(&self, kind: &str, name: &str) -> &Value {
        self.truths_of(kind)
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} truth named {name}: {:?}", self.truths))
    }

    /// The lines the events table lists.
    fn events(&self) -> impl Iterator<Item = &Value> {
        self.lines
            .iter()
            .filter(|l| EVENT_KINDS.contains(&l["ev"].as_str().unwrap_or_default()))
    }

    /// Three instants spread over the trace, each just after a layout line, at whole
    /// microseconds (so that `replay --at` in milliseconds names the same instant).
    fn spread_times(&self) -> Vec<u64> {
        let layout: Vec<u64> = self
            .events()
            .filter(|l| l["ev"] != "exit")
            .map(|l| n(l, "t_ns"))
            .collect();
        let times: Vec<u64> = [1, 2, 3]
            .iter()
            .map(|q| (layout[layout.len() * q / 4] / 1000 + 1) * 1000)
            .collect();
        assert!(times[0] < times[2], "{times:?}");
        times
    }

    /// The instant just before `pid`'s exit line: every line of its space before that line, and
    /// only those, applied (the state the process printed its truth about).
    fn just_before_exit(&self, pid: u64) -> u64 {
        let exit = self
            .lines
            .iter()
            .find(|l| l["ev"] == "exit" && l["pid"] == pid)
            .unwrap_or_else(|| panic!("no exit line of {pid}"));
        let (space, t) = (&exit["space"], n(exit, "t_ns"));
        let same_instant = self
            .lines
            .iter()
            .take_while(|l| l["seq"] != exit["seq"])
            .find(|l| l["space"] == *space && n(l, "t_ns") == t);
        assert!(
            same_instant.is_none(),
            "a line of space {space} at the exit's own instant; no time shows the space just \
             before the exit: {same_instant:?}"
        );
        t - 1
    }
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn n(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no number {key} in {v}"))
}

/// `t_ns` in milliseconds, as `replay --at` reads them (exactly, to the nanosecond).
fn ms(t_ns: u64) -> String {
    format!("{}.{:06}", t_ns / 1_000_000, t_ns % 1_000_000)
}

/// Opens the report and waits for `mevi.ready`.
fn open<'b>(browser: &'b Browser, url: &str) -> Page<'b> {
    let started = Instant::now();
    let page = browser.open(url).unwrap();
    if let Err(e) = page.eval("mevi.ready.then(() => true)") {
        panic!(
            "the page did not get ready: {e:?}\nwhat it logged: {:#?}",
            page.problems()
        );
    }
    eprintln!("page ready {:?} after opening it", started.elapsed());
    assert_eq!(body(&page, "ready"), "1");
    page
}

/// `<body data-NAME>`.
fn body(page: &Page, name: &str) -> String {
    let value = page
        .eval(&format!("document.body.getAttribute('data-{name}')"))
        .unwrap();
    value.as_str().unwrap_or_default().to_string()
}

/// JS to JSON, BigInts (if the page uses them for addresses) as decimal strings.
fn eval_json(page: &Page, js: &str) -> Value {
    let text = page
        .eval(&format!(
            "(async () => JSON.stringify(await ({js}), \
               (k, v) => typeof v === 'bigint' ? v.toString() : v))()"
        ))
        .unwrap();
    serde_json::from_str(text.as_str().unwrap_or("null")).unwrap()
}

/// No console error or warning, no exception, no error in the browser's log, no request but
/// the document's own, no CSP violation, no error the page counted itself.
fn assert_clean(page: &Page) {
    let problems = page.problems();
    assert!(
        problems.is_empty(),
        "the page logged:\n{}",
        problems.join("\n")
    );
    let document = page.url.split('#').next().unwrap();
    let requests = page.requests();
    assert!(
        requests
            .iter()
            .all(|r| r.split('#').next() == Some(document)),
        "requests other than the document: {requests:?}"
    );
    assert_eq!(body(page, "csp-violations"), "0");
    assert_eq!(body(page, "errors"), "0");
}

/// The page's figures are the summary's: each process's peak and final resident, the tree's
/// peak.
fn assert_figures(page: &Page, report: &Report) {
    let figures = eval_json(page, "mevi.figures()");
    let summary = report.summary();
    let by_pid = |processes: &Value| -> BTreeMap<u64, (u64, u64)> {
        processes
            .as_array()
            .unwrap_or_else(|| panic!("no processes in {processes}"))
            .iter()
            .map(|p| {
                let size = |k| number(&p[k]).unwrap_or_else(|| panic!("no {k} in {p}"));
                (
                    n(p, "pid"),
                    (size("peak_resident_bytes"), size("resident_bytes")),
                )
            })
            .collect()
    };
    assert_eq!(
        by_pid(&figures["processes"]),
        by_pid(&summary["processes"]),
        "(peak, final) resident per pid: the page vs the summary"
    );
    assert_eq!(
        number(&figures["tree_peak_resident_bytes"]),
        Some(n(&summary["totals"], "tree_peak_resident_bytes")),
        "the tree's peak: {figures}"
    );
}

/// A number the page gave, as a JSON number or a decimal string (a BigInt).
fn number(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.parse().ok())
}

/// Whether the page's `got` is `replay`'s `want`. JS numbers are doubles: an address above
/// 2^53 comes back as the double nearest it (exact for a page-aligned address, but printed
/// with other digits), so those are compared as doubles.
fn same(want: &Value, got: &Value) -> bool {
    if want == got {
        return true;
    }
    match (want.as_u64(), got) {
        (Some(w), Value::String(s)) => s.parse::<u64>().ok() == Some(w),
        (Some(w), Value::Number(g)) => w > 1 << 53 && g.as_f64() == Some(w as f64),
        _ => false,
    }
}

/// Moves the cursor with `mevi.seek` and lets the page draw.
fn seek(page: &Page, t_ns: u64) {
    let cursor = page
        .eval(&format!(
            "(async () => {{ mevi.seek({t_ns}); {DRAWN} return mevi.cursor(); }})()"
        ))
        .unwrap();
    assert_eq!(number(&cursor), Some(t_ns), "cursor after seek({t_ns})");
    assert_eq!(body(page, "t-ns"), t_ns.to_string());
}

/// Waits for two animation frames (the page may draw in one), or 500 ms in a tab that draws
/// none: a statement for an async function.
const DRAWN: &str = "await new Promise(done => { \
     requestAnimationFrame(() => requestAnimationFrame(done)); setTimeout(done, 500); });";

/// The fields of a mapping in `replay --at --json` (absent there: null in `mevi.state()`).
const FIELDS: &[&str] = &[
    "start",
    "end",
    "kind",
    "prot",
    "path",
    "tracked",
    "resident_pages",
    "zero_pages",
    "untouched_pages",
    "made_seq",
    "made_t_ns",
    "made_tid",
];

/// At the cursor, `mevi.state()` and the `.mapping` elements of the address-space view are
/// `replay --at` of the same instant, space by space and mapping by mapping; the replay's answer.
fn assert_state_is_replays(page: &Page, report: &Report, t_ns: u64) -> Vec<Value> {
    let at = format!("at {} ms", ms(t_ns));
    let want = report.replay_at(t_ns);
    let got = eval_json(page, "mevi.state()");
    let got = got
        .as_array()
        .unwrap_or_else(|| panic!("{at}: state() is {got}"));
    let ids = |spaces: &[Value]| {
        spaces
            .iter()
            .map(|s| s["space"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(got), ids(&want), "{at}: the live spaces");
    for (w, g) in want.iter().zip(got) {
        let space = format!("{at}, space {}", w["space"]);
        for key in ["resident_bytes", "peak_resident_bytes"] {
            assert!(
                same(&w[key], &g[key]),
                "{space}: {key}: replay {} page {}",
                w[key],
                g[key]
            );
        }
        let (wm, gm) = (w["mappings"].as_array().unwrap(), g["mappings"].as_array());
        let mut gm = gm
            .unwrap_or_else(|| panic!("{space}: no mappings array in {g}"))
            .clone();
        gm.sort_by_key(|m| number(&m["start"]));
        assert_eq!(
            gm.len(),
            wm.len(),
            "{space}: mappings\nreplay {wm:?}\npage {gm:?}"
        );
        for (wm, gm) in wm.iter().zip(&gm) {
            for &key in FIELDS {
                let w = wm.get(key).unwrap_or(&Value::Null);
                assert!(
                    same(w, &gm[key]),
                    "{space}, mapping {:#x}: {key}: replay {w} page {}\nreplay {wm}\npage {gm}",
                    n(wm, "start"),
                    gm[key]
                );
            }
        }
    }
    assert_view_is_replays(page, &want, &at);
    want
}

/// The `.mapping` elements' data attributes are the replay's mappings.
fn assert_view_is_replays(page: &Page, want: &[Value], at: &str) {
    let shown = eval_json(
        page,
        "[...document.querySelectorAll('.mapping')].map(e => ({...e.dataset}))",
    );
    let mut shown: Vec<Value> = shown.as_array().cloned().unwrap_or_default();
    shown.sort_by_key(|e| (number(&e["space"]), number(&e["start"])));
    let expected: Vec<(&Value, &Value)> = want
        .iter()
        .flat_map(|s| {
            s["mappings"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |m| (&s["space"], m))
        })
        .collect();
    assert_eq!(
        shown.len(),
        expected.len(),
        "{at}: .mapping elements\nshown {shown:?}"
    );
    for ((space, m), e) in expected.iter().zip(&shown) {
        let attributes = [
            ("space", *space),
            ("start", &m["start"]),
            ("end", &m["end"]),
            ("kind", &m["kind"]),
            ("prot", &m["prot"]),
            ("path", &m["path"]),
            ("tracked", &m["tracked"]),
            ("resident", &m["resident_pages"]),
            ("zero", &m["zero_pages"]),
            ("untouched", &m["untouched_pages"]),
        ];
        for (name, want) in attributes {
            assert!(
                same_text(want, e[name].as_str()),
                "{at}: .mapping of space {space} at {:#x}: data-{name} is {:?}, replay says {want}\
                 \nelement {e}",
                n(m, "start"),
                e[name]
            );
        }
    }
}

/// Whether a data attribute (absent: None) says what the replay's `want` says.
fn same_text(want: &Value, got: Option<&str>) -> bool {
    match want {
        Value::Null => got.is_none_or(str::is_empty),
        Value::Bool(b) => {
            let truthy = matches!(got, Some("true" | "1"));
            let falsy = matches!(got, Some("false" | "0" | ""));
            if *b { truthy } else { falsy }
        }
        Value::String(s) => got == Some(s.as_str()),
        // Exact, even above 2^53 ([vsyscall]): an attribute is text, not a JS number.
        Value::Number(_) => got.and_then(|g| g.parse::<u64>().ok()) == want.as_u64(),
        _ => false,
    }
}

/// Pages of `space` (a `state()` or `--json` object) within `[start, end)`, which its mappings
/// there must cover exactly: (resident, zero, untouched).
fn pages_within(space: &Value, start: u64, end: u64) -> (u64, u64, u64) {
    let inside: Vec<&Value> = space["mappings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| number(&m["start"]) >= Some(start) && number(&m["end"]) <= Some(end))
        .collect();
    let covered: u64 = inside
        .iter()
        .map(|m| number(&m["end"]).unwrap() - number(&m["start"]).unwrap())
        .sum();
    assert_eq!(
        covered,
        end - start,
        "mappings of {start:#x}-{end:#x}: {inside:?}"
    );
    inside.iter().fold((0, 0, 0), |(r, z, u), m| {
        let pages = |k| number(&m[k]).unwrap_or_else(|| panic!("no {k} in {m}"));
        (
            r + pages("resident_pages"),
            z + pages("zero_pages"),
            u + pages("untouched_pages"),
        )
    })
}

/// The object of `state()` (or `--json`) about the space `pid` is in, by the replay's answer.
fn space_of<'a>(state: &'a [Value], replay: &[Value], pid: u64) -> &'a Value {
    let space = &replay
        .iter()
        .find(|s| {
            s["processes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["pid"] == pid)
        })
        .unwrap_or_else(|| panic!("pid {pid} in no live space: {replay:?}"))["space"];
    state
        .iter()
        .find(|s| s["space"] == *space)
        .unwrap_or_else(|| panic!("space {space} not in the page's state"))
}

/// Just before each process's exit the page shows what the process printed of its kernel's
/// pagemap: each region's present pages, and all its private anonymous memory.
fn assert_end_is_kernels(page: &Page, report: &Report) {
    let anon: Vec<&Value> = report.truths_of("anon").collect();
    assert!(!anon.is_empty(), "the workload printed no truth");
    for truth in anon {
        let pid = n(truth, "pid");
        let t = report.just_before_exit(pid);
        seek(page, t);
        let replay = assert_state_is_replays(page, report, t);
        let state = eval_json(page, "mevi.state()");
        let space = space_of(state.as_array().unwrap(), &replay, pid);
        assert_eq!(
            number(&space["resident_bytes"]),
            Some(n(truth, "present") * PAGE),
            "pid {pid} at its end: all private anonymous memory, page vs kernel pagemap"
        );
        for region in report.truths_of("region").filter(|r| r["pid"] == pid) {
            let (resident, _, _) = pages_within(space, n(region, "start"), n(region, "end"));
            assert_eq!(
                resident,
                n(region, "present"),
                "pid {pid} at its end: region {}: page vs kernel pagemap",
                region["name"]
            );
        }
    }
}

/// Saves a screenshot under the target dir and checks that something is drawn on it.
fn assert_screenshot(browser: &Browser, page: &Page, name: &str) {
    let png = page.screenshot_png().unwrap();
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.png"));
    std::fs::write(&path, &png).unwrap();
    eprintln!("screenshot: {} ({} bytes)", path.display(), png.len());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{}", path.display());
    let colours = browser.png_colours(&png).unwrap();
    eprintln!("screenshot: {colours:?}");
    let pixels = colours.width * colours.height;
    // A page with nothing shown has about 20 colours (the scroll bar's) and is nearly all one;
    // a drawn report has charts, bars and text in over a thousand, a quarter of it not white.
    assert!(colours.distinct >= 100, "{}: {colours:?}", path.display());
    assert!(
        colours.most_common < pixels * 9 / 10,
        "{}: nine tenths one colour: {colours:?}",
        path.display()
    );
}

#[test]
fn the_report_of_a_fork_shows_the_summary_and_each_processs_end_as_its_kernel_had_it() {
    let report = Report::of_workload("fork_touch");
    let started = Instant::now();
    let Some(browser) = Browser::for_test() else {
        return;
    };
    let page = open(&browser, &report.url());
    assert_figures(&page, &report);
    for t in report.spread_times() {
        seek(&page, t);
        let replay = assert_state_is_replays(&page, &report, t);
        assert!(!replay.is_empty(), "nothing live at {} ms", ms(t));
    }
    assert_end_is_kernels(&page, &report);
    assert_clean(&page);
    eprintln!("fork_touch: browser part {:?}", started.elapsed());
}

#[test]
fn the_report_of_phases_shows_the_kernels_pages_in_each_pause_and_at_the_end() {
    let report = Report::of_workload("u11_phases");
    let started = Instant::now();
    let Some(browser) = Browser::for_test() else {
        return;
    };
    let page = open(&browser, &report.url());
    assert_figures(&page, &report);
    let pid = n(
        report.truths_of("anon").next().expect("an anon truth"),
        "pid",
    );
    // In each pause (100 ms after its marker), and between the two.
    let markers = markers(&report);
    let in_pause = |m: u64| (m + 100_000_000) / 1000 * 1000;
    let times = [
        in_pause(markers[0]),
        in_pause(markers[1]),
        report.spread_times()[1],
    ];
    for (i, t) in times.into_iter().enumerate() {
        seek(&page, t);
        let replay = assert_state_is_replays(&page, &report, t);
        let Some(phase) = ["1", "2"].get(i) else {
            continue;
        };
        let state = eval_json(&page, "mevi.state()");
        let space = space_of(state.as_array().unwrap(), &replay, pid);
        assert_eq!(
            number(&space["resident_bytes"]),
            Some(n(report.truth("phase_anon", phase), "present") * PAGE),
            "pause {phase}: all private anonymous memory, page vs kernel pagemap"
        );
        for region in report.truths_of("phase_region").filter(|r| {
            r["name"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{phase}:"))
        }) {
            let (resident, zero, _) = pages_within(space, n(region, "start"), n(region, "end"));
            assert_eq!(resident, n(region, "present"), "pause {phase}: {region}");
            if region["name"].as_str().unwrap().ends_with(":z") {
                assert_eq!(zero, 16, "pause {phase}: z's read pages are the zero page");
            }
        }
    }
    assert_end_is_kernels(&page, &report);
    assert_screenshot(&browser, &page, "report-u11_phases");
    assert_clean(&page);
    eprintln!("u11_phases: browser part {:?}", started.elapsed());
}

/// `t_ns` of each marker `map` line of u11_phases (7 pages, `r--`, anonymous): a pause follows.
fn markers(report: &Report) -> Vec<u64> {
    let markers: Vec<u64> = report
        .lines
        .iter()
        .filter(|l| {
            l["ev"] == "map"
                && l["prot"] == "r--"
                && l["kind"] == "anon"
                && n(l, "end") - n(l, "start") == 7 * PAGE
        })
        .map(|l| n(l, "t_ns"))
        .collect();
    assert_eq!(markers.len(), 2, "two pauses");
    markers
}

#[test]
fn the_scrubber_the_window_and_the_address_bar_move_what_the_report_shows() {
    let report = Report::of_workload("u11_phases");
    let started = Instant::now();
    let Some(browser) = Browser::for_test() else {
        return;
    };
    let page = open(&browser, &report.url());
    let end = n(report.lines.last().unwrap(), "t_ns");

    // The page's own scrubber, over the whole trace: each position shows replay's state at
    // the cursor it sets, later positions later ones, and the pauses differ (2048 pages of a
    // in the first, 8 in the second).
    page.eval("mevi.setWindow(null)").unwrap();
    let mut cursors = Vec::new();
    for quarter in 0..=4 {
        let cursor = scrub(&page, quarter as f64 / 4.0);
        assert!(cursor <= end, "{cursor} after the end {end}");
        let replay = assert_state_is_replays(&page, &report, cursor);
        let tree: u64 = replay.iter().map(|s| n(s, "resident_bytes")).sum();
        assert_eq!(
            body(&page, "tree-resident-bytes"),
            tree.to_string(),
            "at {cursor}"
        );
        cursors.push(cursor);
    }
    assert!(cursors.windows(2).all(|w| w[0] < w[1]), "{cursors:?}");
    assert!(
        cursors[4] * 10 >= end * 9,
        "the scrubber's end is near the trace's: {cursors:?}"
    );
    let states: Vec<String> = [0.2, 0.6]
        .iter()
        .map(|&f| {
            scrub(&page, f);
            eval_json(&page, "mevi.state()").to_string()
        })
        .collect();
    assert_ne!(
        states[0], states[1],
        "the state at 20% and at 60% of the trace"
    );

    // A window around the first pause: the events table lists only its lines, and the
    // scrubber stays inside it.
    let markers = markers(&report);
    let all = eval_json(&page, "mevi.events()");
    assert_eq!(
        all.as_array().map(Vec::len),
        Some(report.events().count()),
        "the events table over the whole trace"
    );
    let (t0, t1) = (markers[0] / 1000 * 1000, (markers[1] / 1000 + 1) * 1000);
    page.eval(&format!("mevi.setWindow({t0}, {t1})")).unwrap();
    assert_eq!(body(&page, "window"), format!("{t0}-{t1}"));
    let rows = eval_json(
        &page,
        &format!("(async () => {{ {DRAWN} return mevi.events(); }})()"),
    );
    let rows = rows.as_array().unwrap();
    let inside = |inclusive: bool| {
        report
            .events()
            .filter(|l| {
                let t = n(l, "t_ns");
                if inclusive {
                    t0 <= t && t <= t1
                } else {
                    t0 < t && t < t1
                }
            })
            .count()
    };
    assert!(
        (inside(false)..=inside(true)).contains(&rows.len())
            && rows.len() < all.as_array().unwrap().len(),
        "{} rows in the window, the trace has {}..={} there",
        rows.len(),
        inside(false),
        inside(true)
    );
    for row in rows {
        let t = number(&row["t_ns"]).unwrap_or_else(|| panic!("no t_ns in {row}"));
        assert!(t0 <= t && t <= t1, "row outside the window: {row}");
    }
    let shown = eval_json(
        &page,
        "[...document.querySelectorAll('#events tr.event')].map(r => r.dataset.seq)",
    );
    let mut shown: Vec<Option<u64>> = shown.as_array().unwrap().iter().map(number).collect();
    let mut listed: Vec<Option<u64>> = rows.iter().map(|r| number(&r["seq"])).collect();
    shown.sort_unstable();
    listed.sort_unstable();
    assert_eq!(shown, listed, "the seq of each tr.event row vs events()");
    for f in [0.0, 1.0] {
        let cursor = scrub(&page, f);
        assert!(
            t0 <= cursor && cursor <= t1,
            "scrubber at {f}: {cursor} not in {t0}-{t1}"
        );
    }
    assert_state_is_replays(&page, &report, scrub(&page, 0.5));
    drop(page);

    // The address bar: #t=…&w=…-… in milliseconds, applied at load.
    let t = in_ms(markers[1]) + 100;
    let (w0, w1) = (in_ms(markers[0]), in_ms(markers[1]) + 200);
    let page = open(
        &browser,
        &format!("{}#t={t}&w={w0}-{w1}&gaps=1", report.url()),
    );
    assert_eq!(
        number(&page.eval("mevi.cursor()").unwrap()),
        Some(t * 1_000_000)
    );
    assert_eq!(
        body(&page, "window"),
        format!("{}-{}", w0 * 1_000_000, w1 * 1_000_000)
    );
    assert_state_is_replays(&page, &report, t * 1_000_000);
    assert_clean(&page);
    eprintln!("controls: browser part {:?}", started.elapsed());
}

/// Whole milliseconds at or after `t_ns`.
fn in_ms(t_ns: u64) -> u64 {
    t_ns.div_ceil(1_000_000)
}

/// Puts the page's `#scrubber` at `fraction` of its range as a person would (an `input`
/// event), and returns the cursor it set.
fn scrub(page: &Page, fraction: f64) -> u64 {
    let cursor = page
        .eval(&format!(
            "(async () => {{ \
               const s = document.querySelector('#scrubber'); \
               const [lo, hi, step] = [+s.min, +s.max, +s.step || 1]; \
               s.value = String(lo + Math.round({fraction} * (hi - lo) / step) * step); \
               s.dispatchEvent(new Event('input', {{bubbles: true}})); \
               {DRAWN} return mevi.cursor(); \
             }})()"
        ))
        .unwrap();
    let cursor = number(&cursor).unwrap_or_else(|| panic!("cursor() is {cursor}"));
    assert_eq!(body(page, "t-ns"), cursor.to_string());
    cursor
}

#[test]
fn the_report_of_the_demo_shows_its_summary_and_replays_state_and_is_drawn() {
    let report = Report::of_demo();
    let started = Instant::now();
    let Some(browser) = Browser::for_test() else {
        return;
    };
    let page = open(&browser, &report.url());
    assert_figures(&page, &report);
    let times = report.spread_times();
    for &t in &times {
        seek(&page, t);
        let replay = assert_state_is_replays(&page, &report, t);
        assert!(!replay.is_empty(), "nothing live at {} ms", ms(t));
    }
    seek(&page, times[1]);
    assert_screenshot(&browser, &page, "report-demo");
    assert_clean(&page);
    eprintln!("demo: browser part {:?}", started.elapsed());
}
