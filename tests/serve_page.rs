//! `run --serve`'s live page in a real browser (docs/report.md, "Live: run --serve"): opened
//! while the program runs, it follows the run (the tree's total grows as the program's memory
//! does) and ends with the trace's summary and `replay --at`'s state; two runs serve at once on
//! ports of their own; Ctrl-C after the end exits with the program's status; a browser that
//! comes after the end gets the whole run. The server's protocol itself is tests/serve.rs's.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::browser::{Browser, Page};
use crate::page::{
    Source, assert_clean, assert_figures_are_summarys, assert_state_is_replays, body, eval_json,
    ms, n, number, open, replay_at, seek, spread_times,
};
use crate::serve::Served;
use crate::util::{exec_pid, installed, scratch, wait_for_line, workload};

/// The longest any one wait of these tests may take (a page's update, an exit).
const WAIT: Duration = Duration::from_secs(60);

/// A program that grows when told: each line on its stdin (a number of MiB) makes that many
/// more resident (bytes written, kept); at the end of its stdin it exits with its second
/// argument (the first only names the run). The test paces the growth, so the page is seen
/// to follow each step however slow the machine.
const GROWER: &str = "import sys
keep = []
while True:
    line = sys.stdin.readline()
    if not line:
        break
    keep.append(b'x' * (int(line) << 20))
sys.exit(int(sys.argv[2]))
";

/// Debian's interpreter (not a version manager's shim, which runs a shell first), or None
/// (skipped) where there is none outside CI.
fn python() -> Option<&'static str> {
    let python = if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    };
    installed(python).then_some(python)
}

/// The interpreter and a browser, or None (skipped) where either is missing.
fn python_and_browser() -> Option<(&'static str, Browser)> {
    Some((python()?, Browser::for_test()?))
}

/// The grower's script on disk, so that the page's title (the argv line) stays short.
fn grower_script() -> PathBuf {
    let path = scratch("grower").with_extension("py");
    std::fs::write(&path, GROWER).unwrap();
    path
}

/// A live run of `program` (`run --serve`), its stdin ours.
fn serve(program: &[&str]) -> Served {
    Served::start(&["--serve"], program)
}

/// Tells the grower to grow by `mib` MiB.
fn grow(served: &mut Served, mib: u64) {
    let stdin = served.stdin.as_mut().expect("the program's stdin is open");
    writeln!(stdin, "{mib}").expect("writing to the program");
    stdin.flush().unwrap();
}

/// Waits until the grower has done all it was told: it has read every line written to it and
/// waits for the next (blocked in `read` on its stdin, which is empty).
fn wait_until_grown(served: &mut Served) {
    use std::os::fd::AsRawFd;
    let pid = exec_pid(&wait_for_line(&served.stream, "exec"));
    let stdin = served.stdin.as_ref().expect("the program's stdin is open");
    let unread = || {
        let mut bytes: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int, to `bytes`, which lives across the call.
        let r = unsafe { libc::ioctl(stdin.as_raw_fd(), libc::FIONREAD, &mut bytes) };
        assert_eq!(r, 0, "FIONREAD: {}", std::io::Error::last_os_error());
        bytes
    };
    // "0 0x0 ...": read(2) of fd 0; "running" while it runs.
    let reading_stdin = || {
        std::fs::read_to_string(format!("/proc/{pid}/syscall"))
            .is_ok_and(|call| call.starts_with("0 0x0 "))
    };
    let deadline = Instant::now() + WAIT;
    while !(unread() == 0 && reading_stdin()) {
        assert!(
            Instant::now() < deadline,
            "the grower did not take its lines within {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Ends the grower's stdin: it exits.
fn finish(served: &mut Served) {
    served.stdin.take();
}

/// The whole trace, once the program ended ("still serving" said so).
fn trace_of(served: &mut Served) -> Trace {
    served.stderr_line("still serving");
    let text = std::fs::read_to_string(&served.stream).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(
        lines.last().map(|l| &l["ev"]),
        Some(&Value::from("summary")),
        "the trace ends with its summary"
    );
    Trace {
        path: served.stream.clone(),
        lines,
    }
}

/// A finished run's stream.
struct Trace {
    path: PathBuf,
    lines: Vec<Value>,
}

impl Trace {
    fn summary(&self) -> &Value {
        self.lines.last().unwrap()
    }

    fn end_ns(&self) -> u64 {
        n(self.summary(), "t_ns")
    }

    /// Three instants spread over the run, each just after a layout line.
    fn spread_times(&self) -> Vec<u64> {
        let layout: Vec<u64> = self
            .lines
            .iter()
            .filter(|l| matches!(l["ev"].as_str(), Some("map" | "unmap" | "remap" | "brk")))
            .map(|l| n(l, "t_ns"))
            .collect();
        spread_times(&layout)
    }
}

/// The tree's total the page shows at its cursor.
fn shown_total(page: &Page) -> u64 {
    let text = body(page, "tree-resident-bytes");
    text.parse()
        .unwrap_or_else(|_| panic!("data-tree-resident-bytes is {text:?}"))
}

/// The record bytes the page received (`data-records-bytes`).
fn records_bytes(page: &Page) -> u64 {
    let text = body(page, "records-bytes");
    text.parse()
        .unwrap_or_else(|_| panic!("data-records-bytes is {text:?}"))
}

/// Polls the page every 100 ms until `done` says so, failing the test after `WAIT`.
fn wait_until(page: &Page, what: &str, mut done: impl FnMut(&Page) -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done(page) {
        assert!(
            Instant::now() < deadline,
            "the page: {what}, not within {WAIT:?} (data-live {:?}, data-records-bytes {:?}, \
             total {:?}); it logged {:?}",
            body(page, "live"),
            body(page, "records-bytes"),
            body(page, "tree-resident-bytes"),
            page.problems()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits for the page to say the run ended (its event stream said `end`).
fn wait_ended(page: &Page) {
    wait_until(page, "data-live becomes \"ended\"", |p| {
        body(p, "live") == "ended"
    });
}

/// The ended page has the whole run: every record byte, the figures of the trace's summary
/// (each process's peak and final resident, the tree's peak), and a cursor that followed the
/// run to its last line, where the tree's total is replay's.
fn assert_whole_run(page: &Page, trace: &Trace) {
    assert_eq!(body(page, "live"), "ended");
    let meta = eval_json(page, "MEVI.data.meta");
    assert_eq!(meta["complete"], true, "the final meta");
    assert_eq!(
        Some(records_bytes(page)),
        meta["records"]["bytes"].as_u64(),
        "every record byte the meta counts came"
    );
    let figures = assert_figures_are_summarys(page, trace.summary());
    assert_eq!(
        number(&page.eval("mevi.cursor()").unwrap()),
        Some(trace.end_ns()),
        "a page that followed the run ends at its last line"
    );
    // No process is alive at the trace's end: the total there is replay's (nothing live, 0),
    // which is the page's own "tree at the end" figure.
    let live_at_end: u64 = replay_at(&trace.path, trace.end_ns())
        .iter()
        .map(|s| n(s, "resident_bytes"))
        .sum();
    assert_eq!(
        shown_total(page),
        live_at_end,
        "the tree's total at the end"
    );
    assert_eq!(
        number(&figures["final_tree_resident_bytes"]),
        Some(live_at_end),
        "the figure \"tree at the end\": {figures}"
    );
}

/// At three instants spread over the run (put there with `mevi.seek`) the page shows
/// `replay --at`'s state (state(), the view) and the tree's total, with something live.
fn assert_shows_replays_state(page: &Page, trace: &Trace) {
    for t_ns in trace.spread_times() {
        seek(page, t_ns);
        let replay = replay_at(&trace.path, t_ns);
        let at = format!("at {} ms", ms(t_ns));
        assert!(!replay.is_empty(), "{at}: nothing live");
        assert_state_is_replays(page, &replay, t_ns);
        let tree: u64 = replay.iter().map(|s| n(s, "resident_bytes")).sum();
        assert_eq!(shown_total(page), tree, "{at}: the tree's total");
    }
}

/// Grows the program by `mib` MiB and waits until the page, still running, shows a total
/// grown by that much (less 256 KiB: the interpreter may free a little meanwhile) from
/// `before`: the new total.
fn grow_and_see(served: &mut Served, page: &Page, mib: u64, before: u64) -> u64 {
    let asked = Instant::now();
    grow(served, mib);
    let target = before + (mib << 20) - (256 << 10);
    let mut total = before;
    wait_until(
        page,
        &format!("the total grows from {before} B to {target} B"),
        |p| {
            total = shown_total(p);
            total >= target
        },
    );
    assert_eq!(body(page, "live"), "running", "the program still runs");
    eprintln!(
        "grew by {mib} MiB: the page shows {total} B {:?} later",
        asked.elapsed()
    );
    total
}

#[test]
fn a_page_opened_mid_run_follows_the_growth_and_ends_with_the_summary_and_replays_state() {
    let Some((python, browser)) = python_and_browser() else {
        return;
    };
    let started = Instant::now();
    let script = grower_script();
    let mut served = serve(&[python, script.to_str().unwrap(), "grows", "0"]);
    grow(&mut served, 2);
    // Mid-run: the program has started and grown once.
    wait_until_grown(&mut served);
    let page = open(&browser, &served.url());
    assert_eq!(
        body(&page, "live"),
        "running",
        "opened while the program runs"
    );
    let mut totals = vec![shown_total(&page)];
    let mut records = vec![records_bytes(&page)];
    for _ in 0..4 {
        let total = grow_and_see(&mut served, &page, 8, *totals.last().unwrap());
        totals.push(total);
        records.push(records_bytes(&page));
        // One step at a time: the next is told once this one is done.
        wait_until_grown(&mut served);
    }
    assert!(
        totals.windows(2).all(|w| w[0] < w[1]) && totals.last() > Some(&(32 << 20)),
        "the shown total grows with the program, 32 MiB in all: {totals:?}"
    );
    assert!(
        records.windows(2).all(|w| w[0] < w[1]),
        "record bytes arrive as the program runs: {records:?}"
    );
    finish(&mut served);
    wait_ended(&page);
    let trace = trace_of(&mut served);
    assert_whole_run(&page, &trace);
    assert!(
        totals
            .iter()
            .all(|&t| t <= n(&trace.summary()["totals"], "tree_peak_resident_bytes")),
        "a total shown while running above the tree's peak: {totals:?}"
    );
    assert_shows_replays_state(&page, &trace);
    assert_clean(&page, Source::Live);
    served.send(nix::sys::signal::Signal::SIGINT);
    assert_eq!(served.status_within(WAIT), 0, "the program's status");
    std::fs::remove_file(&script).ok();
    eprintln!("serve page, mid-run: {:?}", started.elapsed());
}

#[test]
fn two_runs_at_once_each_page_shows_its_own_program() {
    let Some((python, browser)) = python_and_browser() else {
        return;
    };
    let started = Instant::now();
    let script = grower_script();
    let script = script.to_str().unwrap();
    let mut runs = [
        serve(&[python, script, "first", "0"]),
        serve(&[python, script, "second", "4"]),
    ];
    assert_ne!(runs[0].url(), runs[1].url(), "a port of its own each");
    let pages: Vec<Page> = runs.iter().map(|r| open(&browser, &r.url())).collect();
    // The first grows by 4 MiB a step, the second by 12.
    let mut totals = [shown_total(&pages[0]), shown_total(&pages[1])];
    for _ in 0..2 {
        for (i, (run, page)) in runs.iter_mut().zip(&pages).enumerate() {
            totals[i] = grow_and_see(run, page, [4, 12][i], totals[i]);
        }
    }
    for run in &mut runs {
        finish(run);
    }
    for ((run, page), name) in runs.iter_mut().zip(&pages).zip(["first", "second"]) {
        wait_ended(page);
        let trace = trace_of(run);
        let argv = trace.lines[0]["argv"].clone();
        assert_eq!(argv[2], name, "{argv}");
        let title = page.eval("document.title").unwrap();
        let title = title.as_str().unwrap();
        assert!(
            title.ends_with(&format!(".py {name} {}", argv[3].as_str().unwrap())),
            "the page of the {name} run is titled {title:?}"
        );
        assert_eq!(
            page.eval("document.getElementById('title').textContent")
                .unwrap(),
            title,
            "its heading"
        );
        assert_whole_run(page, &trace);
        assert_clean(page, Source::Live);
    }
    let peaks: Vec<u64> = pages
        .iter()
        .map(|p| number(&eval_json(p, "mevi.figures()")["tree_peak_resident_bytes"]).unwrap())
        .collect();
    assert!(
        peaks[1] >= peaks[0] + (15 << 20),
        "the second run grew 16 MiB more than the first (its interpreter a page or two \
         less, or more): peaks {peaks:?}"
    );
    for (run, status) in runs.iter_mut().zip([0, 4]) {
        run.send(nix::sys::signal::Signal::SIGINT);
        assert_eq!(run.status_within(WAIT), status, "the program's status");
    }
    std::fs::remove_file(script).ok();
    eprintln!("serve page, two runs: {:?}", started.elapsed());
}

#[test]
fn ctrl_c_after_the_end_exits_with_the_programs_status_and_the_page_stays_whole() {
    let Some((python, browser)) = python_and_browser() else {
        return;
    };
    let script = grower_script();
    let mut served = serve(&[python, script.to_str().unwrap(), "stops", "5"]);
    let page = open(&browser, &served.url());
    grow_and_see(&mut served, &page, 4, shown_total(&page));
    finish(&mut served);
    wait_ended(&page);
    let trace = trace_of(&mut served);
    let addr = served.addr;
    assert!(
        std::net::TcpStream::connect(addr).is_ok(),
        "still serving after the end"
    );
    // At once after "still serving": mevi-actors listens for Ctrl-C before it says so.
    let asked = Instant::now();
    served.send(nix::sys::signal::Signal::SIGINT);
    assert_eq!(
        served.status_within(Duration::from_secs(10)),
        5,
        "Ctrl-C: the program's status"
    );
    eprintln!("Ctrl-C: exited {:?} after it", asked.elapsed());
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "the server is gone with it"
    );
    // The page, its stream closed at `end`, keeps the whole run and says nothing of the server
    // gone. Nothing is to happen, so there is nothing to wait for: a page that would react
    // (an error logged, a reconnect) is given half a second to.
    std::thread::sleep(Duration::from_millis(500));
    assert_whole_run(&page, &trace);
    assert_clean(&page, Source::Live);
    std::fs::remove_file(&script).ok();
}

#[test]
fn a_page_opened_after_the_end_gets_the_whole_run() {
    let Some(browser) = Browser::for_test() else {
        return;
    };
    let started = Instant::now();
    let program = workload("fork_touch");
    let mut served = serve(&[program.to_str().unwrap()]);
    let trace = trace_of(&mut served);
    let page = open(&browser, &served.url());
    wait_ended(&page);
    assert_whole_run(&page, &trace);
    assert_eq!(
        eval_json(&page, "mevi.figures()")["processes"]
            .as_array()
            .map(Vec::len),
        Some(2),
        "fork_touch's parent and child"
    );
    assert_shows_replays_state(&page, &trace);
    assert_clean(&page, Source::Live);
    served.send(nix::sys::signal::Signal::SIGINT);
    assert_eq!(served.status_within(WAIT), 0, "the program's status");
    eprintln!("serve page, late: {:?}", started.elapsed());
}
