//! The live page's hub (`run --serve`): every record byte so far and the latest meta, shared
//! by the state actor, which publishes, and each browser's event stream, which takes what is
//! new when it is ready for more. Publishing never waits for a browser: a slow one skips
//! intermediate metas (frames), never record bytes (events).

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

/// What a browser's stream sends next.
pub struct Update {
    /// Whole publications of record bytes from the asked offset: a record is never cut, so
    /// the page can decode what it has.
    pub records: Vec<Arc<[u8]>>,
    /// The offset after them.
    pub offset: usize,
    /// The latest meta, if newer than the one the browser has: (version, JSON).
    pub meta: Option<(u64, Arc<str>)>,
    /// The run ended and this update carries everything: the stream can say `end`.
    pub ended: bool,
}

struct Shared {
    /// Each publication's bytes, with the offset where it ends.
    chunks: Vec<(usize, Arc<[u8]>)>,
    meta: Arc<str>,
    meta_version: u64,
    ended: bool,
}

impl Shared {
    fn len(&self) -> usize {
        self.chunks.last().map_or(0, |(end, _)| *end)
    }
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
                chunks: Vec::new(),
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

    /// New record bytes (whole records), and a newer meta if there is one.
    pub fn publish(&self, records: &[u8], meta: Option<String>) {
        self.add(records, meta, false);
    }

    /// The last bytes and the whole meta: nothing more will come.
    pub fn end(&self, records: &[u8], meta: String) {
        self.add(records, Some(meta), true);
    }

    /// `ended` is set with the last bytes and meta, under one lock: a browser that read it set
    /// before them would end with the meta before the last (not `complete`).
    fn add(&self, records: &[u8], meta: Option<String>, ended: bool) {
        // Copied before the lock is taken: browsers' streams take it too.
        let chunk: Option<Arc<[u8]>> = (!records.is_empty()).then(|| records.into());
        let meta: Option<Arc<str>> = meta.map(Into::into);
        {
            let mut shared = self.shared();
            if let Some(chunk) = chunk {
                let end = shared.len() + chunk.len();
                shared.chunks.push((end, chunk));
            }
            if let Some(meta) = meta {
                shared.meta = meta;
                shared.meta_version += 1;
            }
            shared.ended |= ended;
        }
        self.published.send_modify(|v| *v += 1);
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.published.subscribe()
    }

    /// The meta a page is served with.
    pub fn meta(&self) -> (u64, Arc<str>) {
        let shared = self.shared();
        (shared.meta_version, shared.meta.clone())
    }

    /// What a browser that has `offset` bytes and meta `meta_seen` gets next: whole
    /// publications from `offset` (or from the start of the one it falls in), up to about
    /// `max_bytes` (at least one).
    pub fn since(&self, offset: usize, meta_seen: u64, max_bytes: usize) -> Update {
        let shared = self.shared();
        let first = shared.chunks.partition_point(|(end, _)| *end <= offset);
        let mut records = Vec::new();
        let mut taken = 0;
        let mut at = first
            .checked_sub(1)
            .map_or(0, |before| shared.chunks[before].0);
        for (end, chunk) in &shared.chunks[first..] {
            if !records.is_empty() && taken + chunk.len() > max_bytes {
                break;
            }
            taken += chunk.len();
            records.push(chunk.clone());
            at = *end;
        }
        let meta =
            (shared.meta_version > meta_seen).then(|| (shared.meta_version, shared.meta.clone()));
        Update {
            records,
            offset: at,
            meta,
            ended: shared.ended && at == shared.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_browser_gets_whole_publications_in_order_and_never_a_cut_one() {
        let hub = Hub::new("{}".into());
        hub.publish(&[1; 10], None);
        hub.publish(&[2; 10], Some("{\"a\":1}".into()));
        hub.publish(&[3; 10], None);
        // At most 15 bytes: one publication, never a part of the next.
        let u = hub.since(0, 0, 15);
        assert_eq!(u.records.concat(), [1; 10]);
        assert_eq!(u.offset, 10);
        assert_eq!(u.meta.as_ref().map(|m| m.0), Some(2));
        let u = hub.since(u.offset, 2, 25);
        assert_eq!(u.records.concat(), [[2; 10], [3; 10]].concat());
        assert_eq!((u.offset, u.meta.is_none(), u.ended), (30, true, false));
        // A publication larger than the limit still goes, whole.
        hub.publish(&[4; 40], None);
        let u = hub.since(30, 2, 15);
        assert_eq!(u.records.concat(), [4; 40]);
        // An offset inside a publication (a forged resume) starts at that publication.
        let u = hub.since(15, 2, 100);
        assert_eq!(u.records[0][0], 2);
        assert_eq!(u.offset, 70);
        hub.end(&[], "{}".into());
        let u = hub.since(70, 2, 100);
        assert!(u.records.is_empty() && u.ended && u.meta.is_some());
        // Past the end: nothing, and the end.
        assert!(hub.since(1 << 40, 9, 1).ended);
    }

    /// A browser polling while the run ends never sees the end before the last meta: the
    /// page would end without the summary (`complete` false).
    #[test]
    fn the_end_comes_with_the_last_meta_to_a_browser_polling_then() {
        for _ in 0..1_000 {
            let hub = Hub::new("{}".into());
            hub.publish(&[1; 10], Some("{\"a\":1}".into()));
            let started = Arc::new(std::sync::Barrier::new(2));
            let polling = {
                let (hub, started) = (hub.clone(), started.clone());
                std::thread::spawn(move || {
                    let (mut offset, mut seen) = (0, 0);
                    started.wait();
                    loop {
                        let u = hub.since(offset, seen, 1 << 20);
                        offset = u.offset;
                        if let Some((version, _)) = u.meta {
                            seen = version;
                        }
                        if u.ended {
                            return seen;
                        }
                    }
                })
            };
            // While the browser's thread polls.
            started.wait();
            std::thread::sleep(std::time::Duration::from_micros(20));
            hub.end(&[2; 10], "{\"complete\":true}".into());
            let seen = polling.join().expect("the browser's thread ran");
            assert_eq!(seen, hub.meta().0, "the last meta, with the end");
        }
    }
}
