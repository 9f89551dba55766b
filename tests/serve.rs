//! `run --serve`: the live page's server, spoken to as a browser would (plain HTTP/1.1 and
//! Server-Sent Events over a socket), with the real tracer behind it. The page itself in a real
//! browser is tests/report_page.rs's and tests/serve_page.rs's.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;

use crate::util::{MachineHold, bin, parse_stream, run_bounded, scratch};

const WAIT: Duration = Duration::from_secs(60);

/// A `run --serve [FLAGS] -o STREAM -- PROGRAM` in the background (its stdin ours): killed if
/// the test fails. tests/serve_page.rs runs its live pages with it too.
pub(crate) struct Served {
    pub child: Child,
    /// The program's stdin (closing it ends a program that reads it).
    pub stdin: Option<ChildStdin>,
    stderr: mpsc::Receiver<String>,
    /// Every stderr line read so far (for a failure's message).
    said: Vec<String>,
    pub addr: SocketAddr,
    pub stream: std::path::PathBuf,
    _run: MachineHold,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::fs::remove_file(&self.stream).ok();
    }
}

impl Served {
    pub fn start(flags: &[&str], program: &[&str]) -> Served {
        Self::start_ignoring(flags, program, None)
    }

    /// `start`, with mevi-actors started with `ignored` ignored (as `nohup` does SIGHUP).
    pub fn start_ignoring(flags: &[&str], program: &[&str], ignored: Option<i32>) -> Served {
        use std::os::unix::process::CommandExt;
        let stream = scratch("served.jsonl");
        let mut cmd = Command::new(bin());
        cmd.arg("run")
            .args(flags)
            .arg("-o")
            .arg(&stream)
            .arg("--")
            .args(program)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(signal) = ignored {
            // SAFETY: signal(2) is async-signal-safe, and nothing else runs between fork and
            // exec.
            unsafe {
                cmd.pre_exec(move || {
                    libc::signal(signal, libc::SIG_IGN);
                    Ok(())
                });
            }
        }
        let run = MachineHold::shared();
        let mut child = cmd.spawn().expect("starting mevi-actors");
        let (tx, stderr) = mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut served = Served {
            stdin: child.stdin.take(),
            child,
            stderr,
            said: Vec::new(),
            addr: "127.0.0.1:1".parse().unwrap(),
            stream,
            _run: run,
        };
        let line = served.stderr_line("serving http://");
        let url = line.split("serving http://").nth(1).unwrap();
        served.addr = url.trim_end_matches('/').parse().expect("an address");
        served
    }

    /// The page's address.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Waits for a stderr line containing `text`.
    pub fn stderr_line(&mut self, text: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) => {
                    self.said.push(line.clone());
                    if line.contains(text) {
                        return line;
                    }
                }
                Err(e) => panic!(
                    "no stderr line with {text:?} within {WAIT:?} ({e}); it said:\n{}",
                    self.said.join("\n")
                ),
            }
        }
    }

    /// The exit status (128+N for signal N), within the test's patience.
    pub fn status(&mut self) -> i32 {
        self.status_within(WAIT)
    }

    /// The exit status, failing the test if it takes over `patience`.
    pub fn status_within(&mut self, patience: Duration) -> i32 {
        crate::util::exit_status_within(&mut self.child, patience, "mevi-actors")
    }

    pub fn send(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), signal).unwrap();
    }
}

fn connect(addr: SocketAddr, path: &str, host: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connecting");
    s.set_read_timeout(Some(WAIT)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    s
}

/// A whole response: status code and body.
fn get(addr: SocketAddr, path: &str, host: &str) -> (u16, String) {
    let mut text = String::new();
    connect(addr, path, host)
        .read_to_string(&mut text)
        .expect("reading the response");
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (code, body)
}

/// Server-Sent Events up to `end`: (event, id, data) each.
fn events_to_the_end(addr: SocketAddr) -> Vec<(String, String, String)> {
    let mut reader = BufReader::new(connect(addr, "/events", &addr.to_string()));
    let mut events = Vec::new();
    let (mut event, mut id, mut data) = (String::new(), String::new(), String::new());
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader.read_line(&mut line).expect("reading events");
        assert!(n > 0, "the stream closed before `end`");
        let line = line.trim_end_matches(['\r', '\n']);
        if let Some(v) = line.strip_prefix("event: ") {
            event = v.into();
        } else if let Some(v) = line.strip_prefix("id: ") {
            id = v.into();
        } else if let Some(v) = line.strip_prefix("data: ") {
            data += v;
        } else if line.is_empty() && !event.is_empty() {
            let done = event == "end";
            events.push((
                std::mem::take(&mut event),
                std::mem::take(&mut id),
                std::mem::take(&mut data),
            ));
            if done {
                return events;
            }
        }
    }
}

fn sigint(served: &Served) {
    served.send(nix::sys::signal::Signal::SIGINT);
}

// --- issue 12: run --serve ---

#[test]
fn serve_sends_the_whole_run_then_serves_until_ctrl_c_with_the_programs_status() {
    let script = "head -c 30000000 /dev/zero | tr '\\0' x > /dev/null; sleep 0.5; exit 7";
    let mut served = Served::start(&["--serve"], &["sh", "-c", script]);
    let addr = served.addr;
    // The page is the report's, marked live.
    let (code, page) = get(addr, "/", &addr.to_string());
    assert_eq!(code, 200);
    assert!(
        page.contains("id=\"mevi-meta\">{\"format\":2,\"live\":true"),
        "{}",
        &page[..page.len().min(400)]
    );
    let events = events_to_the_end(addr);
    served.stderr_line("still serving");
    // Still serving after the end: a late browser gets everything.
    let late = events_to_the_end(addr);
    sigint(&served);
    assert_eq!(served.status(), 7, "the program's status");

    for events in [&events, &late] {
        let mut bytes = Vec::new();
        for (event, id, data) in events.iter().filter(|e| e.0 == "records") {
            bytes.extend(
                base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap(),
            );
            assert_eq!(
                id.parse::<usize>().unwrap(),
                bytes.len(),
                "{event}: its id is the bytes so far"
            );
        }
        let metas: Vec<Value> = events
            .iter()
            .filter(|e| e.0 == "meta")
            .map(|e| serde_json::from_str(&e.2).unwrap())
            .collect();
        let last = metas.last().expect("a meta");
        assert_eq!(last["live"], true, "a served page stays live");
        assert!(
            last["events"]["rows"].as_array().unwrap().len() > 2,
            "the whole report's meta"
        );
        assert_eq!(last["complete"], true);
        assert_eq!(
            last["records"]["bytes"],
            bytes.len(),
            "every record byte came"
        );
        // The figures are the stream's summary.
        let lines = parse_stream(&std::fs::read_to_string(&served.stream).unwrap());
        let summary = serde_json::to_value(&lines.last().unwrap().event).unwrap();
        assert_eq!(summary["ev"], "summary");
        assert_eq!(last["summary"]["totals"], summary["totals"]);
        for p in summary["processes"].as_array().unwrap() {
            let shown = last["processes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|q| q["pid"] == p["pid"])
                .expect("every process");
            assert_eq!(shown["peak_resident_bytes"], p["peak_resident_bytes"]);
            assert_eq!(shown["resident_bytes"], p["resident_bytes"]);
        }
    }
    assert!(
        events.iter().filter(|e| e.0 == "records").count() > 1,
        "updates came while the program ran"
    );
}

#[test]
fn serve_answers_its_own_address_only() {
    // The server ends with the program (no linger): the program outlives the asking by far.
    let mut served = Served::start(&["--serve", "--serve-linger", "0"], &["sleep", "5"]);
    let addr = served.addr;
    assert!(addr.ip().is_loopback(), "loopback by default: {addr}");
    let (code, _) = get(addr, "/", "attacker.example");
    assert_eq!(code, 403, "a page of another name must not read the trace");
    let (code, _) = get(addr, "/events", "attacker.example:80");
    assert_eq!(code, 403);
    let (code, _) = get(addr, "/", &format!("localhost:{}", addr.port()));
    assert_eq!(code, 200);
    let (code, _) = get(addr, "/nothing", &addr.to_string());
    assert_eq!(code, 404);
    assert_eq!(served.status(), 0);
}

#[test]
fn two_runs_serve_at_once_on_ports_of_their_own() {
    // As above: `a` must still be serving once `b` has started beside it.
    let mut a = Served::start(&["--serve", "--serve-linger", "0"], &["sleep", "5"]);
    let mut b = Served::start(&["--serve", "--serve-linger", "0"], &["sleep", "5"]);
    assert_ne!(a.addr, b.addr);
    for s in [&a, &b] {
        let (code, page) = get(s.addr, "/", &s.addr.to_string());
        assert_eq!(code, 200);
        assert!(page.contains("<title>sleep 5</title>"));
    }
    assert_eq!(a.status(), 0);
    assert_eq!(b.status(), 0);
}

#[test]
fn a_browser_that_never_reads_does_not_hold_the_program_back() {
    let script = "head -c 50000000 /dev/zero | tr '\\0' x > /dev/null; exit 3";
    let mut served = Served::start(
        &["--serve", "--serve-linger", "0", "--coalesce-ms", "0"],
        &["sh", "-c", script],
    );
    // Connected, asked, and never read.
    let _stuck: Vec<TcpStream> = (0..4)
        .map(|_| connect(served.addr, "/events", &served.addr.to_string()))
        .collect();
    assert_eq!(served.status(), 3);
    let lines = parse_stream(&std::fs::read_to_string(&served.stream).unwrap());
    assert!(
        matches!(
            lines.last().unwrap().event,
            mevi_actors::event::Event::Summary { .. }
        ),
        "the stream is whole"
    );
}

#[test]
fn serve_refuses_an_address_it_cannot_have_before_the_program_runs() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let marker = scratch("served-ran");
    let (status, _, stderr) = run_bounded(
        Command::new(bin())
            .args([
                "run",
                &format!("--serve={addr}"),
                "-o",
                "/dev/null",
                "--",
                "touch",
            ])
            .arg(&marker),
    );
    assert_eq!(status, 1, "{stderr}");
    assert!(stderr.contains(&addr.to_string()), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(!marker.exists(), "the program ran");
    // A page asked for too is not left behind, empty, as if it were one.
    let page = scratch("served-report.html");
    let (status, _, stderr) = run_bounded(
        Command::new(bin())
            .args(["run", &format!("--serve={addr}"), "--report"])
            .arg(&page)
            .args(["-o", "/dev/null", "--", "true"]),
    );
    assert_eq!(status, 1, "{stderr}");
    assert!(!page.exists(), "an empty report was left");
    // Not an address at all: a usage error.
    let (status, _, _) =
        run_bounded(Command::new(bin()).args(["run", "--serve=nowhere", "--", "true"]));
    assert_eq!(status, 2);
    // `--serve PROGRAM` is the program, never the address.
    let (status, _, stderr) = run_bounded(Command::new(bin()).args([
        "run",
        "--serve",
        "--serve-linger",
        "0",
        "-o",
        "/dev/null",
        "true",
    ]));
    assert_eq!(status, 0, "{stderr}");
}

#[test]
fn a_hangup_ignored_at_start_stays_ignored_while_the_page_is_served() {
    use nix::sys::signal::Signal;
    let mut served = Served::start_ignoring(&["--serve"], &["true"], Some(libc::SIGHUP));
    served.stderr_line("still serving");
    served.send(Signal::SIGHUP);
    // Nothing is to happen, so there is nothing to wait for: a server that would stop on it is
    // given 300 ms to.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        served.child.try_wait().unwrap().is_none(),
        "a SIGHUP ignored at start stopped the server"
    );
    let (code, _) = get(served.addr, "/", &served.addr.to_string());
    assert_eq!(code, 200);
    sigint(&served);
    assert_eq!(served.status(), 0);
}

#[test]
fn a_sigterm_during_the_run_ends_the_program_and_the_serving_both() {
    use nix::sys::signal::Signal;
    let mut served = Served::start(&["--serve"], &["sleep", "30"]);
    // The program runs (its exec is in the stream) before the signal comes.
    crate::util::wait_for_line(&served.stream, "exec");
    served.send(Signal::SIGTERM);
    assert_eq!(
        served.status(),
        128 + 15,
        "the program's status, with no lingering"
    );
}

#[test]
fn the_report_is_never_the_streams_file() {
    let stream = scratch("same.jsonl");
    let link = stream.with_extension("link");
    std::fs::write(&stream, "").unwrap();
    std::os::unix::fs::symlink(&stream, &link).unwrap();
    let (status, _, stderr) = run_bounded(
        Command::new(bin())
            .args(["run", "-o"])
            .arg(&stream)
            .arg("--report")
            .arg(&link)
            .args(["--", "true"]),
    );
    std::fs::remove_file(&link).ok();
    std::fs::remove_file(&stream).ok();
    assert_eq!(status, 2, "{stderr}");
    assert!(stderr.contains("is the stream's file"), "{stderr}");
}

/// `--serve 8089` runs a program named `8089` (the word after `--serve` is the program): when
/// no such program is found and the word is a port or `HOST:PORT`, the 127 line says what was
/// meant. And `--serve=PORT` is an address (127.0.0.1), as `--serve=localhost:PORT` is.
#[test]
fn serve_followed_by_a_port_not_found_as_a_program_says_what_was_meant() {
    for word in [
        "8089",
        "localhost:8089",
        "0.0.0.0:8089",
        "myhost:80",
        "99999",
    ] {
        let (status, stdout, stderr) =
            run_bounded(Command::new(bin()).args(["run", "--serve", word]));
        assert_eq!(status, 127, "{word}: {stderr}");
        assert!(stdout.is_empty(), "{word}: {stdout}");
        assert_eq!(
            stderr.trim_end(),
            format!(
                "mevi-actors: {word}: command not found; did you mean --serve={word}? (--serve \
                 takes its address after =)"
            ),
            "{word}"
        );
    }
    // A program that is not found and is no address gets the shell's line alone.
    let (status, _, stderr) =
        run_bounded(Command::new(bin()).args(["run", "--serve", "no-such-program-xyz"]));
    assert_eq!(status, 127);
    assert_eq!(
        stderr.trim_end(),
        "mevi-actors: no-such-program-xyz: command not found"
    );
    // What the hint says works: a port alone is 127.0.0.1's.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    for addr in [port.to_string(), format!("localhost:{port}")] {
        let (status, _, stderr) = run_bounded(Command::new(bin()).args([
            "run",
            &format!("--serve={addr}"),
            "--serve-linger",
            "0",
            "-o",
            "/dev/null",
            "--",
            "true",
        ]));
        assert_eq!(status, 0, "--serve={addr}: {stderr}");
        assert!(
            stderr.contains(&format!("serving http://127.0.0.1:{port}/")),
            "--serve={addr}: {stderr}"
        );
    }
}
