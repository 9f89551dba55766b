//! A headless Chromium driven over the DevTools protocol (CDP), for the report page's tests.
//!
//! Our own small client: the browser reads commands on its fd 3 and writes answers and events
//! on its fd 4 (`--remote-debugging-pipe`), each message one JSON object ended by a NUL byte.
//! No crate beyond serde_json; every wait gives up after `WAIT`, so a stuck page fails the test.
//! Self-contained: benches/report.rs includes this file too.

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

/// The longest any one wait may take (a command's answer, a page's load).
pub const WAIT: Duration = Duration::from_secs(30);

/// Debian's browser itself: the `/usr/bin/chromium` wrapper sources /etc/chromium.d, which
/// prints shell errors here (two /dev/shm mounts).
const DEFAULT_BINARY: &str = "/usr/lib/chromium/chromium";

pub(crate) fn binary() -> String {
    std::env::var("MEVI_CHROMIUM").unwrap_or_else(|_| DEFAULT_BINARY.into())
}

pub(crate) fn binary_exists() -> bool {
    Path::new(&binary()).exists()
}

/// What went wrong talking to the browser or in the page; `Debug` is the plain message, so
/// that `.unwrap()` prints it readably.
pub struct Error(pub String);

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// The connection's mutable half: where commands go, what came back, events not yet read.
struct Pipe {
    to_browser: File,
    from_browser: Receiver<Value>,
    next_id: u64,
    /// Every event received so far (each with its `sessionId`), in order.
    events: Vec<Value>,
}

/// One headless Chromium, killed and reaped when dropped.
pub struct Browser {
    child: Child,
    pipe: RefCell<Pipe>,
    /// Its profile and its stderr (kept to explain a browser that died).
    dir: PathBuf,
}

/// One tab, attached to with its own CDP session.
pub struct Page<'b> {
    browser: &'b Browser,
    target: String,
    session: String,
    pub url: String,
}

impl Browser {
    /// Starts `$MEVI_CHROMIUM`, or Debian's Chromium; an error if there is none.
    pub fn launch() -> Result<Browser> {
        let binary = binary();
        if !binary_exists() {
            return Err(Error(format!(
                "no browser at {binary}: the report's tests need Chromium (.ci/install-deps \
                 installs Debian's `chromium`; or set MEVI_CHROMIUM to a Chromium binary)"
            )));
        }
        let io = |what: &str, e: &dyn std::fmt::Display| Error(format!("{what}: {e}"));
        let dir = temp_path("chromium");
        std::fs::create_dir_all(dir.join("profile")).map_err(|e| io("the profile", &e))?;
        let stderr = File::create(dir.join("stderr")).map_err(|e| io("its stderr", &e))?;
        let pipe = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| io("pipe", &e));
        let (their_in, our_out) = pipe()?;
        let (our_in, their_out) = pipe()?;
        let mut cmd = Command::new(&binary);
        cmd.args([
            "--headless",
            // Chromium refuses to run as root with its sandbox, and the tests run as root.
            "--no-sandbox",
            "--remote-debugging-pipe",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-extensions",
            // Even so it would look up Google's hosts; no name resolves but the loopback's.
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            "--window-size=1280,900",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
        let (reads, writes) = (their_in.as_raw_fd(), their_out.as_raw_fd());
        // SAFETY: between fork and exec this calls only fcntl and dup2 (async-signal-safe) on
        // descriptors that stay open in the parent until `spawn` returns.
        unsafe {
            cmd.pre_exec(move || {
                // Either end may already be fd 3 or 4, and dup2 onto itself would keep
                // O_CLOEXEC: move both above 9 first (closed at exec), then onto 3 and 4.
                let high_reads = libc::fcntl(reads, libc::F_DUPFD_CLOEXEC, 10);
                let high_writes = libc::fcntl(writes, libc::F_DUPFD_CLOEXEC, 10);
                if high_reads < 0
                    || high_writes < 0
                    || libc::dup2(high_reads, 3) < 0
                    || libc::dup2(high_writes, 4) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| io(&format!("starting {binary}"), &e))?;
        // Only the browser holds its ends now: its exit closes the pipe we read.
        drop((their_in, their_out));
        let (tx, rx) = channel();
        let from_browser = File::from(our_in);
        std::thread::spawn(move || {
            let mut reader = BufReader::new(from_browser);
            let mut message = Vec::new();
            while reader.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                if message.pop() != Some(0) {
                    break; // cut off by the browser's exit
                }
                let Ok(value) = serde_json::from_slice::<Value>(&message) else {
                    break;
                };
                if tx.send(value).is_err() {
                    break;
                }
                message.clear();
            }
        });
        Ok(Browser {
            child,
            pipe: RefCell::new(Pipe {
                to_browser: File::from(our_out),
                from_browser: rx,
                next_id: 0,
                events: Vec::new(),
            }),
            dir,
        })
    }

    /// Opens `url` in a new tab and waits for its load event.
    pub fn open(&self, url: &str) -> Result<Page<'_>> {
        let target = self.call(None, "Target.createTarget", json!({"url": "about:blank"}))?;
        let target = target["targetId"].as_str().unwrap_or_default().to_string();
        let attached = self.call(
            None,
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        )?;
        let page = Page {
            browser: self,
            target,
            session: attached["sessionId"].as_str().unwrap_or_default().into(),
            url: url.into(),
        };
        for domain in ["Page", "Runtime", "Network", "Log"] {
            page.call(&format!("{domain}.enable"), json!({}))?;
        }
        // Only what the navigation brings counts (not about:blank's).
        self.pipe
            .borrow_mut()
            .events
            .retain(|e| e["sessionId"] != page.session.as_str());
        let navigated = page.call("Page.navigate", json!({"url": url}))?;
        if let Some(error) = navigated.get("errorText") {
            return Err(Error(format!("opening {url}: {error}")));
        }
        self.wait_for(&page.session, "Page.loadEventFired")
            .map_err(|e| Error(format!("opening {url}: {}", e.0)))?;
        Ok(page)
    }

    /// Sends one command (to a session's target, or to the browser) and waits for its answer.
    fn call(&self, session: Option<&str>, method: &str, params: Value) -> Result<Value> {
        let mut pipe = self.pipe.borrow_mut();
        pipe.next_id += 1;
        let id = pipe.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = session.into();
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        if let Err(e) = pipe.to_browser.write_all(&bytes) {
            return Err(self.died(&format!("sending {method}: {e}")));
        }
        let deadline = Instant::now() + WAIT;
        loop {
            let value = self.receive(&mut pipe, deadline, method)?;
            if value["id"] == id {
                return match value.get("error") {
                    Some(error) => Err(Error(format!("{method}: {error}"))),
                    None => Ok(value["result"].clone()),
                };
            }
            if value.get("method").is_some() {
                pipe.events.push(value);
            }
        }
    }

    /// Waits for an event of `session` called `method` (one already received counts).
    fn wait_for(&self, session: &str, method: &str) -> Result<Value> {
        let mut pipe = self.pipe.borrow_mut();
        let deadline = Instant::now() + WAIT;
        let mine = |e: &Value| e["sessionId"] == session && e["method"] == method;
        if let Some(event) = pipe.events.iter().find(|e| mine(e)) {
            return Ok(event.clone());
        }
        loop {
            let value = self.receive(&mut pipe, deadline, method)?;
            if value.get("method").is_some() {
                pipe.events.push(value.clone());
                if mine(&value) {
                    return Ok(value);
                }
            }
        }
    }

    fn receive(&self, pipe: &mut Pipe, deadline: Instant, what: &str) -> Result<Value> {
        match pipe
            .from_browser
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            Ok(value) => Ok(value),
            Err(RecvTimeoutError::Timeout) => {
                Err(Error(format!("{what}: no answer within {WAIT:?}")))
            }
            Err(RecvTimeoutError::Disconnected) => Err(self.died(what)),
        }
    }

    /// The browser closed its pipe: what it said last on stderr.
    fn died(&self, what: &str) -> Error {
        let stderr = std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default();
        let lines: Vec<&str> = stderr.lines().collect();
        let tail = match lines.len() {
            0 => "(nothing)".to_string(),
            n => lines[n.saturating_sub(15)..].join("\n"),
        };
        Error(format!(
            "{what}: the browser closed its pipe (exited?); its stderr ends:\n{tail}"
        ))
    }

    /// Every event received so far that belongs to `session` (reading what is waiting first).
    fn events_of(&self, session: &str) -> Vec<Value> {
        let mut pipe = self.pipe.borrow_mut();
        while let Ok(value) = pipe.from_browser.try_recv() {
            if value.get("method").is_some() {
                pipe.events.push(value);
            }
        }
        pipe.events
            .iter()
            .filter(|e| e["sessionId"] == session)
            .cloned()
            .collect()
    }

    /// Decodes a PNG in a blank tab of the browser: its size and colours.
    pub fn png_colours(&self, png: &[u8]) -> Result<Colours> {
        let page = self.open("about:blank")?;
        let js = format!(
            r#"(async () => {{
                const img = new Image();
                img.src = "data:image/png;base64,{}";
                await img.decode();
                const canvas = document.createElement("canvas");
                canvas.width = img.width;
                canvas.height = img.height;
                const g = canvas.getContext("2d");
                g.drawImage(img, 0, 0);
                const px = g.getImageData(0, 0, img.width, img.height).data;
                const count = new Map();
                for (let i = 0; i < px.length; i += 4) {{
                    const rgb = (px[i] << 16) | (px[i + 1] << 8) | px[i + 2];
                    count.set(rgb, (count.get(rgb) || 0) + 1);
                }}
                return {{width: img.width, height: img.height, distinct: count.size,
                         most_common: Math.max(...count.values())}};
            }})()"#,
            STANDARD.encode(png)
        );
        let v = page.eval(&js)?;
        let n = |k: &str| v[k].as_u64().unwrap_or(0);
        Ok(Colours {
            width: n("width"),
            height: n("height"),
            distinct: n("distinct"),
            most_common: n("most_common"),
        })
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

/// A picture's pixels, counted by colour.
#[derive(Debug)]
pub struct Colours {
    pub width: u64,
    pub height: u64,
    /// Distinct RGB values.
    pub distinct: u64,
    /// Pixels of the most common one (the background, on a page).
    pub most_common: u64,
}

impl Page<'_> {
    fn call(&self, method: &str, params: Value) -> Result<Value> {
        self.browser.call(Some(&self.session), method, params)
    }

    /// Evaluates `js` in the page (awaiting it if it is a promise) and returns its value as
    /// JSON; a thrown exception or a rejected promise is an `Err` with its text.
    pub fn eval(&self, js: &str) -> Result<Value> {
        let answer = self.call(
            "Runtime.evaluate",
            json!({"expression": js, "returnByValue": true, "awaitPromise": true}),
        )?;
        if let Some(thrown) = answer.get("exceptionDetails") {
            let text = thrown["exception"]["description"]
                .as_str()
                .or(thrown["text"].as_str())
                .unwrap_or_default();
            return Err(Error(format!("evaluating `{}`: {text}", brief(js))));
        }
        Ok(answer["result"]["value"].clone())
    }

    /// The page as it is drawn now, as PNG bytes.
    pub fn screenshot_png(&self) -> Result<Vec<u8>> {
        let shot = self.call("Page.captureScreenshot", json!({"format": "png"}))?;
        STANDARD
            .decode(shot["data"].as_str().unwrap_or_default())
            .map_err(|e| Error(format!("the screenshot's base64: {e}")))
    }

    /// What the page complained about: console errors, warnings and failed asserts, uncaught
    /// exceptions, and the browser's own error and warning log (a CSP violation, a failed load).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for event in self.browser.events_of(&self.session) {
            let p = &event["params"];
            match event["method"].as_str().unwrap_or_default() {
                "Runtime.consoleAPICalled"
                    if matches!(p["type"].as_str(), Some("error" | "warning" | "assert")) =>
                {
                    let args: Vec<String> = p["args"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|a| a.get("value").unwrap_or(&a["description"]).to_string())
                        .collect();
                    problems.push(format!("console.{}: {}", p["type"], args.join(" ")));
                }
                "Runtime.exceptionThrown" => {
                    let e = &p["exceptionDetails"];
                    let text = e["exception"]["description"].as_str().unwrap_or_default();
                    problems.push(format!("uncaught: {} {text}", e["text"]));
                }
                "Log.entryAdded"
                    if matches!(p["entry"]["level"].as_str(), Some("error" | "warning")) =>
                {
                    problems.push(format!(
                        "log {}: {}",
                        p["entry"]["level"], p["entry"]["text"]
                    ));
                }
                _ => {}
            }
        }
        problems
    }

    /// Every URL the page asked for since it was opened (its own document first).
    pub fn requests(&self) -> Vec<String> {
        self.browser
            .events_of(&self.session)
            .iter()
            .filter(|e| e["method"] == "Network.requestWillBeSent")
            .map(|e| {
                e["params"]["request"]["url"]
                    .as_str()
                    .unwrap_or_default()
                    .into()
            })
            .collect()
    }
}

impl Drop for Page<'_> {
    fn drop(&mut self) {
        let target = json!({"targetId": self.target});
        self.browser.call(None, "Target.closeTarget", target).ok();
    }
}

/// A fresh path under the build's temporary directory (tests run in parallel in one process).
fn temp_path(name: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser");
    dir.join(format!("{name}-{}-{n}", std::process::id()))
}

/// The start of a script, for a message.
fn brief(js: &str) -> String {
    let one_line = js.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(100) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

/// The client's own tests, on fixture pages written here.
#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a fixture page and returns its file:// URL.
    fn fixture(name: &str, html: &str) -> String {
        let path = temp_path(name).with_extension("html");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, html).unwrap();
        format!("file://{}", path.display())
    }

    #[test]
    fn browser_reports_what_a_page_logs_throws_and_fetches() {
        let started = Instant::now();
        let Some(browser) = Browser::for_test() else {
            return;
        };
        let quiet = fixture(
            "quiet",
            "<!doctype html><title>quiet</title><link rel=icon href='data:,'>\
             <p id=p>still</p><script>console.log('fine'); document.body.dataset.x = '7';</script>",
        );
        let page = browser.open(&quiet).unwrap();
        eprintln!(
            "browser: launched and loaded a page in {:?}",
            started.elapsed()
        );
        assert_eq!(page.eval("document.body.dataset.x").unwrap(), "7");
        assert_eq!(page.eval("Promise.resolve(6 * 7)").unwrap(), 42);
        assert!(page.problems().is_empty(), "{:?}", page.problems());
        assert_eq!(page.requests(), std::slice::from_ref(&quiet));
        // A JS exception is an Err, not a value.
        let thrown = page.eval("null.x").unwrap_err().0;
        assert!(thrown.contains("TypeError"), "{thrown}");
        let rejected = page.eval("Promise.reject(new Error('no'))").unwrap_err().0;
        assert!(rejected.contains("no"), "{rejected}");
        drop(page);

        let noisy = fixture(
            "noisy",
            "<!doctype html><title>noisy</title><link rel=icon href='data:,'>\
             <script>console.error('broken', 3); console.warn('careful');\
             fetch('http://127.0.0.1:1/data.json').catch(() => {});\
             setTimeout(() => { throw new Error('late') }, 0);</script>\
             <img src='http://127.0.0.1:1/x.png'>",
        );
        let page = browser.open(&noisy).unwrap();
        // The timer's exception comes after the load event.
        let deadline = Instant::now() + WAIT;
        while !page.problems().iter().any(|p| p.contains("late")) && Instant::now() < deadline {
            page.eval("new Promise(r => setTimeout(r, 20))").unwrap();
        }
        let problems = page.problems().join("\n");
        for expected in [
            "console.\"error\": \"broken\" 3",
            "console.\"warning\": \"careful\"",
            "Error: late",
            "log \"error\"",
        ] {
            assert!(problems.contains(expected), "{expected} in:\n{problems}");
        }
        let requests = page.requests();
        assert_eq!(requests[0], noisy);
        for asked in ["http://127.0.0.1:1/data.json", "http://127.0.0.1:1/x.png"] {
            assert!(
                requests.iter().any(|r| r == asked),
                "{asked} in {requests:?}"
            );
        }

        // A screenshot is a PNG of the window, decoded by the browser itself.
        let red = fixture(
            "red",
            "<!doctype html><link rel=icon href='data:,'>\
             <body style='margin:0;background:#fff'><div style='width:200px;height:100px;background:#f00'>",
        );
        let page = browser.open(&red).unwrap();
        let png = page.screenshot_png().unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let colours = browser.png_colours(&png).unwrap();
        assert_eq!(colours.width, 1280, "{colours:?}");
        assert!(colours.distinct >= 2, "{colours:?}");
        assert_eq!(
            colours.most_common,
            colours.width * colours.height - 200 * 100,
            "white but for the 200×100 red box: {colours:?}"
        );
        // A file that is not there is an error, not a blank page.
        let missing = format!("file://{}", temp_path("missing").display());
        let error = browser
            .open(&missing)
            .err()
            .expect("opening a missing file")
            .0;
        assert!(error.contains("ERR_FILE_NOT_FOUND"), "{error}");
        eprintln!("browser: self-test took {:?}", started.elapsed());
    }
}
