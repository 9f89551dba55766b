//! `run --serve`: the live page over HTTP. `GET /` is the report's page with no records yet;
//! `GET /events` is a Server-Sent Events stream of everything so far, then of what comes, at
//! most every `--ui-interval-ms`. The server runs on a thread and runtime of its own, so no
//! browser ever takes time from the lanes or the state actor.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use futures::StreamExt;
use tokio::sync::oneshot;

use super::live::Hub;

/// Record bytes in one event, about (a late browser gets the history in pieces, each whole
/// publications): what a browser that stopped reading holds of our memory.
const MAX_EVENT_BYTES: usize = 1 << 20;
/// Event streams at once: a local user opening thousands that never read cannot make the
/// tracer's memory grow without bound.
const MAX_FOLLOWERS: usize = 32;

#[derive(Clone)]
struct App {
    hub: Arc<Hub>,
    title: Arc<str>,
    interval: Duration,
    /// `Host` headers accepted (a page of another site must not read the trace through a name
    /// it points at this address); `None` accepts any (serving on every interface).
    hosts: Option<Arc<[String]>>,
    /// Event streams open now.
    followers: Arc<std::sync::atomic::AtomicUsize>,
}

impl App {
    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(hosts) = &self.hosts else {
            return true;
        };
        headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .is_some_and(|h| hosts.iter().any(|ok| ok.eq_ignore_ascii_case(h)))
    }
}

/// The server, until dropped or stopped.
pub struct Server {
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds `addr` now (so a bad one fails before the program starts) and serves on a thread.
    pub fn start(
        addr: SocketAddr,
        hub: Arc<Hub>,
        title: String,
        interval: Duration,
    ) -> io::Result<Server> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let bound = listener.local_addr()?;
        let port = bound.port();
        let hosts = (!bound.ip().is_unspecified()).then(|| {
            let mut names = vec![bound.ip().to_string(), "localhost".into()];
            if let std::net::IpAddr::V6(ip) = bound.ip() {
                names[0] = format!("[{ip}]");
            }
            names.extend(["127.0.0.1".into(), "[::1]".into()]);
            // A browser leaves out the port it defaults to.
            let mut hosts: Vec<String> = names.iter().map(|n| format!("{n}:{port}")).collect();
            if port == 80 {
                hosts.extend(names);
            }
            hosts.into()
        });
        let app = App {
            hub,
            title: title.into(),
            interval,
            hosts,
            followers: Arc::default(),
        };
        let router = Router::new()
            .route("/", get(page))
            .route("/events", get(events))
            .with_state(app);
        // A runtime of its own, not the run's: a browser reading a long history (encoding its
        // base64, sending its events) would otherwise take one of the run's two workers from the
        // lanes and the state actor, and slow the traced program.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("mevi-actors-serve".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            crate::to_stderr!("mevi-actors: --serve: {e}");
                            return;
                        }
                    };
                    tokio::select! {
                        served = axum::serve(listener, router) => {
                            if let Err(e) = served {
                                crate::to_stderr!("mevi-actors: --serve: {e}");
                            }
                        }
                        _ = stopped => {}
                    }
                });
                // Open event streams are dropped with the runtime: they never end by themselves.
                runtime.shutdown_background();
            })?;
        let host = if bound.ip().is_unspecified() {
            format!("127.0.0.1:{port}")
        } else {
            bound.to_string()
        };
        Ok(Server {
            url: format!("http://{host}/"),
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn forbidden() -> Response {
    (
        StatusCode::FORBIDDEN,
        "mevi-actors serves this trace to its own address only\n",
    )
        .into_response()
}

async fn page(State(app): State<App>, headers: HeaderMap) -> Response {
    if !app.host_allowed(&headers) {
        return forbidden();
    }
    let (_, meta) = app.hub.meta();
    let mut body = Vec::new();
    match super::html::write(&mut body, &app.title, &meta, &[], super::html::Page::Live) {
        Ok(()) => Html(body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// One browser's place in the hub.
struct Follower {
    app: App,
    published: tokio::sync::watch::Receiver<u64>,
    offset: usize,
    meta_seen: u64,
    first: bool,
    done: bool,
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.app
            .followers
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Follower {
    /// The events of the next update: everything new since the last, once there is some.
    async fn next(&mut self) -> Option<Vec<Event>> {
        if self.done {
            return None;
        }
        if !self.first {
            // A browser gets at most one update an interval; what came meanwhile waits in the
            // hub and goes out together (a slow browser gets fewer, larger updates).
            tokio::time::sleep(self.app.interval).await;
        }
        self.first = false;
        loop {
            self.published.borrow_and_update();
            let update = self
                .app
                .hub
                .since(self.offset, self.meta_seen, MAX_EVENT_BYTES);
            let mut events = Vec::new();
            if let Some((version, meta)) = update.meta {
                self.meta_seen = version;
                events.push(Event::default().event("meta").data(&*meta));
            }
            if !update.records.is_empty() {
                self.offset = update.offset;
                events.push(
                    Event::default()
                        .event("records")
                        .id(self.offset.to_string())
                        .data(STANDARD.encode(update.records.concat())),
                );
            }
            if update.ended {
                self.done = true;
                events.push(Event::default().event("end").data("end"));
            }
            if !events.is_empty() {
                return Some(events);
            }
            if self.published.changed().await.is_err() {
                return None;
            }
        }
    }
}

async fn events(State(app): State<App>, headers: HeaderMap) -> Response {
    if !app.host_allowed(&headers) {
        return forbidden();
    }
    use std::sync::atomic::Ordering;
    if app.followers.fetch_add(1, Ordering::SeqCst) >= MAX_FOLLOWERS {
        app.followers.fetch_sub(1, Ordering::SeqCst);
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "mevi-actors: too many pages follow this run\n",
        )
            .into_response();
    }
    // A browser that reconnects says how many bytes it has.
    let offset = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let follower = Follower {
        published: app.hub.subscribe(),
        app,
        offset,
        meta_seen: 0,
        first: true,
        done: false,
    };
    let stream = futures::stream::unfold(follower, |mut f| async move {
        f.next().await.map(|events| (events, f))
    })
    .flat_map(futures::stream::iter)
    .map(Ok::<_, Infallible>);
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}
