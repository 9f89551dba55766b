//! The symbolizer actor: names the frames of each new site (function, source file and line,
//! inlined calls) with blazesym, from the copies of their files' symbols the tracer made, and
//! hands the `site` line to the state actor, which writes it before the first line that names it.
//!
//! Reading an object's symbols and DWARF takes milliseconds to seconds the first time: the actor
//! is a thread of its own (blazesym's symbolizer stays on the thread that made it), never the
//! tracer's, and each frame is named once per run. It begins by reading ahead the separate
//! debug files of the program and of its dynamic loader, while the tracer starts the program.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use async_channel::{Receiver, Sender};
use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{CodeInfo, Input, Symbolized, Symbolizer};
use object::read::ReadCache;
use object::read::elf::{ElfFile64, ProgramHeader};
use object::{Endianness, Object};

use crate::actors::supervisor::{self, Supervisor};
use crate::event::{Event, Frame};
use crate::stacks::files::build_id_hex;
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

    /// Runs the actor on a thread of its own; a panic there is the run's failure. `program`:
    /// the file the run executes, whose debug files are read ahead.
    pub fn spawn(
        self,
        supervisor: Supervisor,
        program: Option<PathBuf>,
    ) -> std::io::Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name("mevi-symbolizer".into())
            .spawn(move || {
                let run = || self.run(program.as_deref());
                if let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(run)) {
                    let why = supervisor::panic_message(panic.as_ref());
                    let said = supervisor.fail("the symbolizer", &why);
                    tracing::error!("{said}");
                }
            })
    }

    /// Names sites until the tracer is done with stacks (its sender dropped).
    fn run(self, program: Option<&Path>) {
        let mut names = Names::new();
        if let Some(program) = program {
            names.read_ahead(program);
        }
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

    /// Reads the separate debug files of `program` and of its dynamic loader into the
    /// symbolizer's cache before any site comes. Every layout change a dynamically linked
    /// program makes first is its loader's, and a debug file is kept by its path: the copy of
    /// the loader the tracer makes later finds it already read, its sections inflated (about 6
    /// ms of blazesym's for `ld.so` from `libc6-dbg`, which the run's end waited for).
    fn read_ahead(&self, program: &Path) {
        let Some(elf) = ElfFacts::of(program) else {
            return;
        };
        let loader = elf.loader.as_deref().and_then(ElfFacts::of);
        for build_id in [elf.build_id, loader.and_then(|l| l.build_id)]
            .into_iter()
            .flatten()
        {
            if let Some(path) = debug_file(&build_id) {
                let source = Source::Elf(Elf::new(path));
                // Making the resolver reads the file; nothing is named.
                let _ = self.symbolizer.symbolize(&source, Input::FileOffset(&[]));
            }
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

/// What the read-ahead needs of an ELF file: its build-id, and its dynamic loader (`PT_INTERP`).
struct ElfFacts {
    /// In hex, as `CodeFile::build_id`.
    build_id: Option<String>,
    loader: Option<PathBuf>,
}

impl ElfFacts {
    /// None for a file that is not a regular 64-bit ELF one (a script, say; a FIFO or a device,
    /// which an open without `O_NONBLOCK` could wait on). The file is closed after.
    fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = File::options()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .ok()?;
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let cache = ReadCache::new(file);
        let elf = ElfFile64::<Endianness, _>::parse(&cache).ok()?;
        let endian = elf.endian();
        let loader = elf.elf_program_headers().iter().find_map(|header| {
            let named = header.interpreter(endian, &cache).ok().flatten()?;
            Some(PathBuf::from(OsStr::from_bytes(named)))
        });
        Some(Self {
            build_id: elf.build_id().ok().flatten().map(build_id_hex),
            loader,
        })
    }
}

/// The separate debug file of the build-id (in hex), where blazesym looks first (and by the
/// same path, which is what its cache knows a file by): `.build-id/ab/cdef….debug` under its
/// debug directories.
fn debug_file(build_id: &str) -> Option<PathBuf> {
    // Shorter ones (under 8 bytes) blazesym does not look up.
    if build_id.len() < 16 {
        return None;
    }
    let (first, rest) = build_id.split_at(2);
    ["/usr/lib/debug", "/lib/debug/"]
        .iter()
        .map(|dir| {
            Path::new(dir)
                .join(".build-id")
                .join(first)
                .join(format!("{rest}.debug"))
        })
        .find(|path| path.exists())
}

fn frame_named(function: &str, code: Option<&CodeInfo<'_>>) -> Frame {
    Frame {
        function: Some(function.to_string()),
        file: code.map(|c| c.to_path().to_string_lossy().into_owned()),
        line: code.and_then(|c| c.line),
        ..Frame::default()
    }
}
