//! `site` lines (`--stacks`): each written once, just before the first line that names it, and
//! numbered 1, 2, 3… in the stream's order. The symbolizer names sites in the order the tracer
//! took them, which need not be the stream's (spaces interleave, and some stacks are never
//! named by a line): a site not here yet is waited for, and others that come meanwhile are kept
//! until a line names them.

use std::collections::HashMap;

use async_channel::Receiver;

use crate::event::{Event, SiteId, Truncated};

pub(super) struct SiteLines {
    named: Receiver<Event>,
    /// Named by the symbolizer, by the tracer's id; not yet written.
    waiting: HashMap<SiteId, Event>,
    /// The stream's id of each site written, by the tracer's id.
    written: HashMap<SiteId, SiteId>,
}

impl SiteLines {
    pub fn new(named: Receiver<Event>) -> Self {
        Self {
            named,
            waiting: HashMap::new(),
            written: HashMap::new(),
        }
    }

    /// Gives `event` its site's stream id, and the `site` line to write before it if it is the
    /// first to name that site.
    pub async fn name_site_of(&mut self, event: &mut Event) -> Option<Event> {
        let field = event.site_field()?;
        let taken = (*field)?;
        if let Some(&id) = self.written.get(&taken) {
            *field = Some(id);
            return None;
        }
        let id = self.written.len() as SiteId + 1;
        self.written.insert(taken, id);
        *field = Some(id);
        let mut site = self.named_site(taken).await;
        if let Event::Site { id: written, .. } = &mut site {
            *written = id;
        }
        Some(site)
    }

    /// The symbolizer's line for the tracer's site `taken`.
    async fn named_site(&mut self, taken: SiteId) -> Event {
        loop {
            if let Some(site) = self.waiting.remove(&taken) {
                return site;
            }
            match self.named.recv().await {
                Ok(site @ Event::Site { id, .. }) => {
                    self.waiting.insert(id, site);
                }
                Ok(other) => tracing::debug!(?other, "not a site from the symbolizer"),
                // The symbolizer failed (the supervisor ends the run): the line keeps its site,
                // whose frames are unknown.
                Err(_) => {
                    return Event::Site {
                        id: taken,
                        frames: Vec::new(),
                        truncated: Some(Truncated::Unwind),
                    };
                }
            }
        }
    }

    pub fn written(&self) -> u64 {
        self.written.len() as u64
    }
}
