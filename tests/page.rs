//! What both page tests (tests/report_page.rs offline, tests/serve_page.rs live) ask of a page:
//! open it, read it, compare it with `replay --at` and the trace's summary, find it clean.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

use crate::browser::{Browser, Page};
use crate::util::{bin, run_bounded};

/// Where the page came from, which says what it may ask for over the network.
#[derive(Clone, Copy)]
pub(crate) enum Source {
    /// `report`'s file: the document only.
    Offline,
    /// `run --serve`: the document and its event stream (`events`).
    Live,
}

pub(crate) fn n(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no number {key} in {v}"))
}

/// A number the page gave, as a JSON number or a decimal string (a BigInt).
pub(crate) fn number(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.parse().ok())
}

/// `t_ns` in milliseconds, as `replay --at` reads them (exactly, to the nanosecond).
pub(crate) fn ms(t_ns: u64) -> String {
    format!("{}.{:06}", t_ns / 1_000_000, t_ns % 1_000_000)
}

/// `replay --at T --json` of the trace at `path`: one object per space live at `t_ns`.
pub(crate) fn replay_at(path: &Path, t_ns: u64) -> Vec<Value> {
    let (status, stdout, stderr) = run_bounded(
        Command::new(bin())
            .args(["replay", "--json", "--at", &ms(t_ns)])
            .arg(path),
    );
    assert_eq!(status, 0, "replay --at {}: {stderr}", ms(t_ns));
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Three instants spread over `layout` (the times of a trace's layout lines, in order), each
/// just after one, at whole microseconds (so that `replay --at` in milliseconds names the same
/// instant).
pub(crate) fn spread_times(layout: &[u64]) -> Vec<u64> {
    let times: Vec<u64> = [1, 2, 3]
        .iter()
        .map(|q| (layout[layout.len() * q / 4] / 1000 + 1) * 1000)
        .collect();
    assert!(times[0] < times[2], "{times:?}");
    times
}

/// Opens the page and waits for `mevi.ready`.
pub(crate) fn open<'b>(browser: &'b Browser, url: &str) -> Page<'b> {
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

/// `<body data-NAME>` ("" when absent).
pub(crate) fn body(page: &Page, name: &str) -> String {
    let value = page
        .eval(&format!("document.body.getAttribute('data-{name}')"))
        .unwrap();
    value.as_str().unwrap_or_default().to_string()
}

/// JS to JSON, BigInts (if the page uses them for addresses) as decimal strings.
pub(crate) fn eval_json(page: &Page, js: &str) -> Value {
    let text = page
        .eval(&format!(
            "(async () => JSON.stringify(await ({js}), \
               (k, v) => typeof v === 'bigint' ? v.toString() : v))()"
        ))
        .unwrap();
    serde_json::from_str(text.as_str().unwrap_or("null")).unwrap()
}

/// Waits for two animation frames (the page may draw in one), or 500 ms in a tab that draws
/// none: a statement for an async function.
pub(crate) const DRAWN: &str = "await new Promise(done => { \
     requestAnimationFrame(() => requestAnimationFrame(done)); setTimeout(done, 500); });";

/// Moves the cursor with `mevi.seek` and lets the page draw.
pub(crate) fn seek(page: &Page, t_ns: u64) {
    let cursor = page
        .eval(&format!(
            "(async () => {{ mevi.seek({t_ns}); {DRAWN} return mevi.cursor(); }})()"
        ))
        .unwrap();
    assert_eq!(number(&cursor), Some(t_ns), "cursor after seek({t_ns})");
    assert_eq!(body(page, "t-ns"), t_ns.to_string());
}

/// No console error or warning, no exception, no error in the browser's log, no request but
/// the document (once) and, live, its event stream; no CSP violation, no error the page
/// counted or shows.
pub(crate) fn assert_clean(page: &Page, source: Source) {
    let problems = page.problems();
    assert!(
        problems.is_empty(),
        "the page logged:\n{}",
        problems.join("\n")
    );
    let document = page.url.split('#').next().unwrap();
    let is_document = |r: &str| r.split('#').next() == Some(document);
    let requests = page.requests();
    assert_eq!(
        requests.iter().filter(|r| is_document(r)).count(),
        1,
        "the document, once: {requests:?}"
    );
    match source {
        Source::Offline => assert!(
            requests.iter().all(|r| is_document(r)),
            "requests other than the document: {requests:?}"
        ),
        Source::Live => {
            let events = format!("{document}events");
            assert!(
                requests.iter().all(|r| is_document(r) || *r == events),
                "requests other than the document and its event stream: {requests:?}"
            );
            assert!(
                requests.contains(&events),
                "the page never asked for its event stream: {requests:?}"
            );
        }
    }
    assert_eq!(body(page, "csp-violations"), "0");
    assert_eq!(body(page, "errors"), "0");
    assert_eq!(
        page.eval("document.getElementById('error').hidden")
            .unwrap(),
        true,
        "the page shows an error: {}",
        page.eval("document.getElementById('error').textContent")
            .unwrap()
    );
}

/// The page's figures are the summary's: each process's peak and final resident, the tree's
/// peak. Returns the figures.
pub(crate) fn assert_figures_are_summarys(page: &Page, summary: &Value) -> Value {
    let figures = eval_json(page, "mevi.figures()");
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
    figures
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

/// With the cursor at `t_ns`, `mevi.state()` and the `.mapping` elements of the address-space
/// view are `replay` (`replay_at` of the same instant), space by space and mapping by mapping.
pub(crate) fn assert_state_is_replays(page: &Page, replay: &[Value], t_ns: u64) {
    let at = format!("at {} ms", ms(t_ns));
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
    assert_eq!(ids(got), ids(replay), "{at}: the live spaces");
    for (w, g) in replay.iter().zip(got) {
        let space = format!("{at}, space {}", w["space"]);
        for key in ["resident_bytes", "peak_resident_bytes"] {
            assert!(
                same(&w[key], &g[key]),
                "{space}: {key}: replay {} page {}",
                w[key],
                g[key]
            );
        }
        let wm = w["mappings"].as_array().unwrap();
        let mut gm = g["mappings"]
            .as_array()
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
    assert_view_is_replays(page, replay, &at);
}

/// The `.mapping` elements' data attributes are the replay's mappings: each space's table holds
/// the rows near its view (docs/report.md), so a run of its mappings in address order, all of
/// them up to `WHOLE_TABLE`.
fn assert_view_is_replays(page: &Page, replay: &[Value], at: &str) {
    const WHOLE_TABLE: usize = 400;
    let shown = eval_json(
        page,
        "[...document.querySelectorAll('.mapping')].map(e => ({...e.dataset}))",
    );
    let mut shown: Vec<Value> = shown.as_array().cloned().unwrap_or_default();
    shown.sort_by_key(|e| (number(&e["space"]), number(&e["start"])));
    let mut from = 0;
    for s in replay {
        let space = &s["space"];
        let mappings = s["mappings"].as_array().unwrap();
        let count = shown[from..]
            .iter()
            .take_while(|e| number(&e["space"]) == number(space))
            .count();
        let rows = &shown[from..from + count];
        from += count;
        let want = mappings.len().min(WHOLE_TABLE);
        assert!(
            count == mappings.len() || (count >= want.min(12) && mappings.len() > WHOLE_TABLE),
            "{at}: space {space}: {count} .mapping elements of {} mappings\nshown {rows:?}",
            mappings.len()
        );
        let first = rows.first().map_or(0, |e| {
            mappings
                .iter()
                .position(|m| number(&m["start"]) == number(&e["start"]))
                .unwrap_or_else(|| panic!("{at}: space {space}: no mapping at {e}"))
        });
        for (m, e) in mappings[first..].iter().zip(rows) {
            assert_row_is(e, space, m, at);
        }
    }
    assert_eq!(
        from,
        shown.len(),
        "{at}: .mapping elements of no live space: {shown:?}"
    );
}

/// A `.mapping` element's data attributes say what the replay's mapping `m` says.
fn assert_row_is(e: &Value, space: &Value, m: &Value, at: &str) {
    let attributes = [
        ("space", space),
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
