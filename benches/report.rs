//! `cargo bench --bench report`: what the HTML report costs on a trace of a million lines (a
//! 4-thread `--coalesce-ms 0` workload, benches/workloads/touch4.c): the time and peak memory
//! of `report`, the file's size, and how long the page takes from navigation to interactive in
//! headless Chromium. Then the report's size for the demo, a gcc compile and stress-ng.
//! Nothing here asserts: the figures are printed beside their targets (issue 12).

#[path = "../tests/browser.rs"]
#[allow(dead_code)]
mod browser;

#[path = "workloads/compile.rs"]
mod compile;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use compile::compile;

const MIB: f64 = (1 << 20) as f64;

fn main() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-report");
    std::fs::create_dir_all(&dir).expect("creating the bench's directory");
    let mevi = PathBuf::from(env!("CARGO_BIN_EXE_mevi-actors"));
    let touch4 = compile(&dir, "touch4");

    // The one-million-line trace: 30 rounds of 4 × 16384 pages plus discards, one line a fault.
    let trace = dir.join("touch4.jsonl");
    let started = Instant::now();
    let status = Command::new(&mevi)
        .args(["run", "--no-summary", "--coalesce-ms", "0", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&touch4)
        .arg("30")
        .stdout(Stdio::null())
        .status()
        .expect("running mevi-actors");
    assert!(status.success(), "tracing touch4 failed: {status}");
    let lines = count_lines(&trace);
    println!(
        "trace: {lines} lines, {:.1} MiB, traced in {:.1} s",
        file_mib(&trace),
        started.elapsed().as_secs_f64()
    );

    let page = dir.join("touch4.html");
    let mut runs = Vec::new();
    for _ in 0..3 {
        runs.push(measure(
            Command::new(&mevi)
                .arg("report")
                .arg(&trace)
                .arg("-o")
                .arg(&page),
        ));
    }
    let best = runs
        .iter()
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .copied()
        .expect("three runs");
    let (build_s, peak_kib) = best;
    let size = file_mib(&page);
    let ready = page_ready(&page);
    println!("\nreport of {lines} lines (best of 3)");
    println!(
        "  {}",
        target("built in", format!("{build_s:.2} s"), build_s <= 3.0, "3 s")
    );
    let peak = peak_kib as f64 / 1024.0;
    println!(
        "  {} (an upper bound: it counts the bench's own {:.1} MiB at the fork)",
        target(
            "peak RSS",
            format!("{peak:.1} MiB"),
            peak <= 200.0,
            "200 MiB"
        ),
        own_rss_kib() as f64 / 1024.0
    );
    println!(
        "  {}",
        target("file", format!("{size:.1} MiB"), size <= 20.0, "20 MiB")
    );
    match ready {
        Ok(ms) => println!(
            "  {}",
            target(
                "interactive after",
                format!("{ms:.0} ms"),
                ms <= 2000.0,
                "2000 ms"
            )
        ),
        Err(e) => println!("  interactive: not measured ({e})"),
    }

    serve_cost(&mevi, &touch4);
    seek_cost(&mevi, &dir);

    println!("\nreport sizes");
    size_of(
        &mevi,
        &dir,
        "demo",
        &[mevi.as_os_str(), "__demo-workload".as_ref()],
    );
    let hello = dir.join("hello.c");
    std::fs::write(
        &hello,
        "#include <stdio.h>\nint main(void) { puts(\"hello\"); return 0; }\n",
    )
    .expect("writing hello.c");
    let object = dir.join("hello");
    size_of(
        &mevi,
        &dir,
        "gcc -O2 hello.c",
        &[
            "gcc".as_ref(),
            "-O2".as_ref(),
            "-o".as_ref(),
            object.as_os_str(),
            hello.as_os_str(),
        ],
    );
    if Command::new("stress-ng").arg("--version").output().is_ok() {
        size_of(
            &mevi,
            &dir,
            "stress-ng --vm 2 --vm-bytes 64M -t 2s",
            &[
                "stress-ng",
                "--vm",
                "2",
                "--vm-bytes",
                "64M",
                "-t",
                "2s",
                "--quiet",
            ]
            .map(AsRef::as_ref),
        );
    } else {
        println!("  stress-ng: not installed (.ci/install-deps installs it); skipped");
    }
}

/// What `--report` and `--serve` (with a browser following the page) cost a run: touch4 for
/// 10 rounds, the three ways alternating, medians of per-round ratios to the plain run.
fn serve_cost(mevi: &Path, touch4: &Path) {
    const ROUNDS: usize = 5;
    let browser = browser::Browser::launch().ok();
    let run = |extra: &[&str], follow: bool| -> f64 {
        let started = Instant::now();
        let mut child = Command::new(mevi)
            .args([
                "run",
                "--no-summary",
                "--coalesce-ms",
                "0",
                "-o",
                "/dev/null",
            ])
            .args(extra)
            .arg("--")
            .arg(touch4)
            .arg("10")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running mevi-actors");
        let mut tab = None;
        if follow {
            use std::io::BufRead;
            let stderr = child.stderr.take().expect("piped");
            let mut lines = std::io::BufReader::new(stderr).lines();
            let url = lines
                .find_map(|l| l.ok()?.split("serving ").nth(1).map(str::to_string))
                .expect("the URL on stderr");
            tab = browser.as_ref().and_then(|b| b.open(&url).ok());
            // Keep reading stderr, so that mevi-actors never waits on it.
            std::thread::spawn(move || lines.for_each(drop));
        }
        let status = child.wait().expect("waiting");
        assert!(status.success(), "touch4 failed: {status}");
        drop(tab);
        started.elapsed().as_secs_f64()
    };
    let mut report = Vec::new();
    let mut serve = Vec::new();
    let mut watched = Vec::new();
    let served = ["--serve", "--serve-linger", "0"];
    for _ in 0..ROUNDS {
        let plain = run(&[], false);
        report.push(run(&["--report", "/dev/null"], false) / plain);
        serve.push(run(&served, false) / plain);
        watched.push(run(&served, browser.is_some()) / plain);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!("\nwhat the page costs a run (touch4 10 rounds, --coalesce-ms 0, {ROUNDS} rounds)");
    println!("  --report FILE: {:.2}x the run without", median(report));
    println!(
        "  --serve, no browser: {:.2}x the run without",
        median(serve)
    );
    println!(
        "  --serve{}: {:.2}x the run without (the browser's own drawing shares the CPUs)",
        if browser.is_some() {
            " with a browser following"
        } else {
            " (no browser here)"
        },
        median(watched)
    );
}

/// How long a seek takes in the address-space view of one space of 20,000 mappings
/// (tests/workloads/many_maps.c): from `mevi.seek` to the frame it drew, laid out, between half
/// of them mapped and all of them; the median of 10 and the slowest.
fn seek_cost(mevi: &Path, dir: &Path) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads/many_maps.c");
    let program = dir.join("many_maps");
    let built = Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&program)
        .arg(&src)
        .status()
        .expect("running cc");
    assert!(built.success(), "cc failed for {}", src.display());
    let trace = dir.join("many_maps.jsonl");
    let page = dir.join("many_maps.html");
    let status = Command::new(mevi)
        .args(["run", "--no-stacks", "--no-summary", "-o"])
        .arg(&trace)
        .arg("--report")
        .arg(&page)
        .arg("--")
        .arg(&program)
        .arg("20000")
        .stdout(Stdio::null())
        .status()
        .expect("running mevi-actors");
    assert!(status.success(), "tracing many_maps failed: {status}");
    // The times of the map lines of its 8-page mappings: the 10,000th and the last.
    let text = std::fs::read_to_string(&trace).expect("reading the trace");
    let maps: Vec<u64> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| {
            l["ev"] == "map"
                && l["end"]
                    .as_u64()
                    .zip(l["start"].as_u64())
                    .map(|(e, s)| e - s)
                    == Some(8 << 12)
        })
        .filter_map(|l| l["t_ns"].as_u64())
        .collect();
    drop(text);
    if maps.len() < 20000 {
        println!(
            "\nseek: not measured ({} mappings in the trace)",
            maps.len()
        );
        return;
    }
    let seeks: Vec<String> = (0..10)
        .map(|k| maps[if k % 2 == 0 { 10000 } else { 19999 }].to_string())
        .collect();
    let measured = browser::Browser::launch()
        .map_err(|e| e.to_string())
        .and_then(|b| {
            let tab = b
                .open(&format!("file://{}", page.display()))
                .map_err(|e| e.to_string())?;
            tab.eval(&format!(
                "mevi.ready.then(async () => {{ const out = []; \
               for (const t of [{}]) {{ \
                 const t0 = performance.now(); mevi.seek(t); \
                 await new Promise(done => requestAnimationFrame(() => {{ \
                   void document.body.offsetHeight; done(); }})); \
                 out.push(performance.now() - t0); \
               }} return out; }})",
                seeks.join(", ")
            ))
            .map_err(|e| e.to_string())
        });
    match measured {
        Ok(v) => {
            let mut ms: Vec<f64> = v
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(serde_json::Value::as_f64)
                .collect();
            ms.sort_by(f64::total_cmp);
            let median = ms.get(ms.len() / 2).copied().unwrap_or(f64::NAN);
            let slowest = ms.last().copied().unwrap_or(f64::NAN);
            println!("\nthe address-space view, one space of 20,000 mappings");
            println!(
                "  {} (slowest {slowest:.0} ms; to the frame drawn, at most ~16 ms of it the wait for the frame)",
                target(
                    "seek",
                    format!("{median:.0} ms median"),
                    median <= 500.0,
                    "500 ms"
                )
            );
        }
        Err(e) => println!("\nseek: not measured ({e})"),
    }
}

/// The stream and report sizes of one traced program.
fn size_of(mevi: &Path, dir: &Path, name: &str, program: &[&std::ffi::OsStr]) {
    let trace = dir.join("sized.jsonl");
    let page = dir.join("sized.html");
    let status = Command::new(mevi)
        .args(["run", "--no-summary", "-o"])
        .arg(&trace)
        .arg("--report")
        .arg(&page)
        .arg("--")
        .args(program)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("running mevi-actors");
    println!(
        "  {name}: stream {} lines, {:.2} MiB; report {:.2} MiB{}",
        count_lines(&trace),
        file_mib(&trace),
        file_mib(&page),
        if status.success() {
            String::new()
        } else {
            format!(" (exit {status})")
        }
    );
}

/// Wall time and peak RSS (KiB) of one run of `cmd`. The child is reaped by `wait4`, which
/// gives its rusage (std's `wait` does not), so clippy cannot see the wait.
#[allow(clippy::zombie_processes)]
fn measure(cmd: &mut Command) -> (f64, i64) {
    let started = Instant::now();
    let child = cmd.stdout(Stdio::null()).spawn().expect("spawning");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pid is our own unreaped child; both pointers are valid for the call.
    let reaped = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(reaped, child.id() as i32, "wait4 failed");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "report failed"
    );
    (elapsed, usage.ru_maxrss)
}

/// Milliseconds from navigation start until the page's `mevi.ready` resolves.
fn page_ready(page: &Path) -> Result<f64, String> {
    let browser = browser::Browser::launch().map_err(|e| e.to_string())?;
    let url = format!("file://{}", page.display());
    let tab = browser.open(&url).map_err(|e| e.to_string())?;
    // The page notes the instant itself (`data-ready-ms`): asked later, the answer would
    // include the time the question took to arrive.
    let ms = tab
        .eval("mevi.ready.then(() => Number(document.body.dataset.readyMs))")
        .map_err(|e| e.to_string())?;
    ms.as_f64().ok_or_else(|| format!("not a number: {ms}"))
}

/// This process's resident set now (`VmRSS`), in KiB.
fn own_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn target(what: &str, measured: String, met: bool, limit: &str) -> String {
    format!(
        "{what}: {measured} (target <= {limit}: {})",
        if met { "met" } else { "NOT met" }
    )
}

fn file_mib(path: &Path) -> f64 {
    std::fs::metadata(path).map_or(0.0, |m| m.len() as f64 / MIB)
}

/// Read in pieces: a bench holding the whole trace would lend its memory to the peak of every
/// child it spawns (a child's `ru_maxrss` counts from its fork, docs/kernel-facts.md).
fn count_lines(path: &Path) -> usize {
    use std::io::BufRead;
    let Ok(file) = std::fs::File::open(path) else {
        return 0;
    };
    std::io::BufReader::new(file).split(b'\n').count()
}
