//! The symbolizer actor: names the frames of each new site (function, source file and line,
//! inlined calls) with blazesym, from the copies of their files' symbols the tracer made, and
//! hands the `site` line to the state actor, which writes it before the first line that names it.
//!
//! Reading an object's symbols and DWARF takes milliseconds to seconds the first time: the actor
//! is a thread of its own (blazesym's symbolizer stays on the thread that made it), never the
//! tracer's, and each frame is named once per run.

use std::collections::HashMap;
use std::fs::File;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use async_channel::{Receiver, Sender};
use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{CodeInfo, Input, Symbolized, Symbolizer};

use crate::actors::supervisor::{self, Supervisor};
use crate::event::{Event, Frame};
use crate::stacks::jit_map::JitMaps;
use crate::stacks::{NewSite, TakenFrame};

pub struct SymbolizerActor {
    inbox: Receiver<NewSite>,
    sites: Sender<Event>,
}

impl SymbolizerActor {
    /// The actor, the tracer's sender of new sites, and the state actor's receiver of `site`
    /// lines.
    pub fn new() -> (Self, Sender<NewSite>, Receiver<Event>) {
        let (tx, inbox) = async_channel::unbounded();
        let (sites, rx) = async_channel::unbounded();
        (Self { inbox, sites }, tx, rx)
    }

    /// Runs the actor on a thread of its own; a panic there is the run's failure.
    pub fn spawn(self, supervisor: Supervisor) -> std::io::Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name("mevi-symbolizer".into())
            .spawn(move || {
                if let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(|| self.run())) {
                    let why = supervisor::panic_message(panic.as_ref());
                    let said = supervisor.fail("the symbolizer", &why);
                    tracing::error!("{said}");
                }
            })
    }

    /// Names sites until the tracer is done with stacks (its sender dropped).
    fn run(self) {
        let mut names = Names::new();
        while let Ok(site) = self.inbox.recv_blocking() {
            let line = names.site_line(site);
            if self.sites.send_blocking(line).is_err() {
                // The state actor is gone: the run is over.
                return;
            }
        }
    }
}

/// Frame names, once per (file, offset looked up) for the run; JIT code's from its maps.
struct Names {
    symbolizer: Symbolizer,
    known: HashMap<(u32, u64), Vec<Frame>>,
    jit: JitMaps,
}

impl Names {
    fn new() -> Self {
        Self {
            symbolizer: Symbolizer::builder()
                .enable_code_info(true)
                .enable_inlined_fns(true)
                .enable_demangling(true)
                .build(),
            known: HashMap::new(),
            jit: JitMaps::default(),
        }
    }

    fn site_line(&mut self, site: NewSite) -> Event {
        let mut frames = Vec::with_capacity(site.frames.len());
        for taken in &site.frames {
            frames.extend(self.frames_of(taken, site.jit_map.as_ref()));
        }
        Event::Site {
            id: site.id,
            frames,
            truncated: site.truncated,
        }
    }

    /// A taken frame as the stream writes it: its inlined calls first, then itself. Code in
    /// no file is named by `jit_map`, its process's JIT's, if it has one.
    fn frames_of(&mut self, taken: &TakenFrame, jit_map: Option<&Arc<File>>) -> Vec<Frame> {
        let Some(file) = &taken.file else {
            let call = taken.at.saturating_sub(taken.returns_here as u64);
            return vec![Frame {
                addr: Some(taken.at),
                function: jit_map.and_then(|map| self.jit.name(map, call)),
                ..Frame::default()
            }];
        };
        let here = Frame {
            module: Some(file.name.clone()),
            build_id: file.build_id.clone(),
            offset: Some(taken.at),
            ..Frame::default()
        };
        // A return address is just after its call, which may be the last instruction of an
        // inlined call or of the function: the call itself is named.
        let lookup = taken.at.saturating_sub(taken.returns_here as u64);
        let key = (file.index, lookup);
        let named = match self.known.get(&key) {
            Some(named) => named.clone(),
            None => {
                let named = file
                    .path_for_symbols()
                    .map(|path| self.name(path, lookup))
                    .unwrap_or_default();
                self.known.insert(key, named.clone());
                named
            }
        };
        if named.is_empty() {
            return vec![here];
        }
        let last = named.len() - 1;
        named
            .into_iter()
            .enumerate()
            .map(|(i, name)| Frame {
                function: name.function,
                file: name.file,
                line: name.line,
                inlined: i < last,
                ..here.clone()
            })
            .collect()
    }

    /// The function at `offset` of the file at `path`, innermost inlined call first; empty
    /// when the file has no symbol there.
    fn name(&self, path: PathBuf, offset: u64) -> Vec<Frame> {
        let mut elf = Elf::new(path);
        let sym = match self
            .symbolizer
            .symbolize_single(&Source::Elf(elf.clone()), Input::FileOffset(offset))
        {
            Ok(Symbolized::Sym(sym)) => sym,
            Ok(Symbolized::Unknown(_)) => return Vec::new(),
            Err(e) => {
                // Debug information it cannot read: the ELF symbols still name the function.
                tracing::debug!(path = ?elf.path, offset, "symbolizing with DWARF: {e}");
                elf.debug_syms = false;
                match self
                    .symbolizer
                    .symbolize_single(&Source::Elf(elf), Input::FileOffset(offset))
                {
                    Ok(Symbolized::Sym(sym)) => sym,
                    Ok(Symbolized::Unknown(_)) | Err(_) => return Vec::new(),
                }
            }
        };
        let mut named = Vec::with_capacity(1 + sym.inlined.len());
        // Each code_info is the place within that function: of the next call in, or of the
        // address itself for the innermost.
        for inlined in sym.inlined.iter().rev() {
            named.push(frame_named(&inlined.name, inlined.code_info.as_ref()));
        }
        named.push(frame_named(&sym.name, sym.code_info.as_deref()));
        named
    }
}

fn frame_named(function: &str, code: Option<&CodeInfo<'_>>) -> Frame {
    Frame {
        function: Some(function.to_string()),
        file: code.map(|c| c.to_path().to_string_lossy().into_owned()),
        line: code.and_then(|c| c.line),
        ..Frame::default()
    }
}
