//! The live page's hub (`run --serve`): every record byte so far and the latest meta, shared
//! by the state actor, which publishes, and each browser's event stream, which takes what is
//! new when it is ready for more. Publishing never waits for a browser: a slow one skips
//! intermediate metas (frames), never record bytes (events).

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

/// What a browser's stream sends next.
pub struct Update {
    /// Record bytes from the asked offset (at most the asked number).
    pub records: Vec<u8>,
    /// The offset after them.
    pub offset: usize,
    /// The latest meta, if newer than the one the browser has: (version, JSON).
    pub meta: Option<(u64, Arc<str>)>,
    /// The run ended and this update carries everything: the stream can say `end`.
    pub ended: bool,
}

struct Shared {
    records: Vec<u8>,
    meta: Arc<str>,
    meta_version: u64,
    ended: bool,
}

pub struct Hub {
    shared: Mutex<Shared>,
    /// Bumped at each publication: browsers wait on it.
    published: watch::Sender<u64>,
}

impl Hub {
    /// A hub whose page starts from `meta` (the builder's empty one).
    pub fn new(meta: String) -> Arc<Self> {
        Arc::new(Hub {
            shared: Mutex::new(Shared {
                records: Vec::new(),
                meta: meta.into(),
                meta_version: 1,
                ended: false,
            }),
            published: watch::Sender::new(0),
        })
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        // The lock guards plain data that every writer leaves whole.
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// New record bytes, and a newer meta if there is one.
    pub fn publish(&self, records: &[u8], meta: Option<String>) {
        {
            let mut shared = self.shared();
            shared.records.extend_from_slice(records);
            if let Some(meta) = meta {
                shared.meta = meta.into();
                shared.meta_version += 1;
            }
        }
        self.published.send_modify(|v| *v += 1);
    }

    /// The last bytes and the whole meta: nothing more will come.
    pub fn end(&self, records: &[u8], meta: String) {
        self.shared().ended = true;
        self.publish(records, Some(meta));
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.published.subscribe()
    }

    /// The meta a page is served with.
    pub fn meta(&self) -> (u64, Arc<str>) {
        let shared = self.shared();
        (shared.meta_version, shared.meta.clone())
    }

    /// What a browser that has `offset` bytes and meta `meta_seen` gets next.
    pub fn since(&self, offset: usize, meta_seen: u64, max_bytes: usize) -> Update {
        let shared = self.shared();
        let from = offset.min(shared.records.len());
        let to = shared.records.len().min(from.saturating_add(max_bytes));
        let meta =
            (shared.meta_version > meta_seen).then(|| (shared.meta_version, shared.meta.clone()));
        Update {
            records: shared.records[from..to].to_vec(),
            offset: to,
            meta,
            ended: shared.ended && to == shared.records.len(),
        }
    }
}
