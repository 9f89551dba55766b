//! Call stacks. `run --stacks`: taken by the tracer while the thread that made a layout change
//! is stopped at its syscall's exit. `run --touch-stacks N`: taken by a space's lane from the
//! kernel's sample of every Nth page fault of a thread (touches.rs). Either way unwound with
//! framehop (DWARF call frame information where the code has it, frame pointers where it has
//! not) and written down at once as files and offsets, so that a trace stays symbolizable once
//! its processes and files are gone. Each distinct stack becomes one site; naming its frames
//! (function, file, line) is the symbolizer's work, off these threads
//! (`crate::actors::symbolizer`); code in no file is named from the map its JIT writes
//! (jit_map.rs).

pub mod files;
pub mod jit_map;
mod space;
mod touches;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_channel::Sender;
use framehop::x86_64::UnwindRegsX86_64;
use framehop::{FrameAddress, Unwinder};

use self::files::{CodeFile, CodeFiles};
use self::space::SpaceCode;
pub use self::touches::{TouchSamplers, TouchStacks};
use crate::event::{SiteId, SpaceId, Truncated};
use crate::kernel::procfs::{MapsEntry, Pagemap, Prot};
use crate::kernel::stack::{self, Readable, StackCopy, StartRegisters};

/// How far up the stack a walk reads at most: deep recursion with large frames ends here.
const STACK_READ_LIMIT: usize = 1 << 20;

/// One frame as taken: where it is, not yet what it is.
#[derive(Clone, Debug)]
pub struct TakenFrame {
    /// The file the address is in; None for an address no file backs.
    pub file: Option<Arc<CodeFile>>,
    /// The file offset, or the absolute address when there is no file.
    pub at: u64,
    /// A return address (every frame but the first): its call is the instruction before it.
    pub returns_here: bool,
}

/// A new site, for the symbolizer to name.
#[derive(Debug)]
pub struct NewSite {
    pub id: SiteId,
    pub frames: Vec<TakenFrame>,
    pub truncated: Option<Truncated>,
    /// With frames in no file: the map the process's JIT writes of its code, if it writes one.
    pub jit_map: Option<Arc<std::fs::File>>,
}

/// A frame's identity, for telling stacks apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum FrameKey {
    InFile { file: u32, offset: u64 },
    Anonymous { addr: u64 },
}

/// What every taker of stacks shares: the code files, and one id per distinct stack. Each
/// lock is held for a lookup or a file's read, never while a tracee's memory is read (a read of
/// a page a lane must first resolve would wait on a lane that waits on the lock).
#[derive(Clone)]
pub struct StackShared {
    depth: usize,
    page_size: u64,
    files: Arc<Mutex<CodeFiles>>,
    sites: Arc<Mutex<SiteTable>>,
}

/// One id per distinct stack; a new one goes to the symbolizer to be named.
struct SiteTable {
    ids: HashMap<(Vec<FrameKey>, Option<Truncated>), SiteId>,
    symbolizer: Sender<NewSite>,
}

impl StackShared {
    pub fn new(depth: u32, page_size: u64, symbolizer: Sender<NewSite>) -> Self {
        Self {
            depth: depth as usize,
            page_size,
            files: Arc::default(),
            sites: Arc::new(Mutex::new(SiteTable {
                ids: HashMap::new(),
                symbolizer,
            })),
        }
    }

    /// A space's code, read through its thread `tid`, or made of what the tracer read of it.
    fn read_code(&self, tid: i32, known: Option<KnownCode>) -> Option<SpaceCode> {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let code = match known {
            Some(KnownCode { maps, pagemap }) => Ok(SpaceCode::of_maps(
                tid,
                maps,
                pagemap,
                &mut files,
                self.page_size,
            )),
            None => SpaceCode::read(tid, &mut files, self.page_size),
        };
        match code {
            Ok(code) => Some(code),
            Err(e) => {
                tracing::debug!(tid, "no stack: the maps cannot be read: {e}");
                None
            }
        }
    }

    /// The site of a stack of thread `tid` walked through `code`.
    fn site_of(&self, code: &mut SpaceCode, tid: i32, (addresses, truncated): Walked) -> SiteId {
        let mut keys = Vec::with_capacity(addresses.len());
        let mut taken = Vec::with_capacity(addresses.len());
        for (addr, returns_here) in addresses {
            let in_file = code
                .mapping_of(addr)
                .and_then(|m| Some((m.file.as_ref()?, addr - m.range.start + m.offset)));
            match in_file {
                Some((file, offset)) => {
                    keys.push(FrameKey::InFile {
                        file: file.index,
                        offset,
                    });
                    taken.push(TakenFrame {
                        file: Some(file.clone()),
                        at: offset,
                        returns_here,
                    });
                }
                None => {
                    keys.push(FrameKey::Anonymous { addr });
                    taken.push(TakenFrame {
                        file: None,
                        at: addr,
                        returns_here,
                    });
                }
            }
        }
        let mut sites = self.sites.lock().unwrap_or_else(|e| e.into_inner());
        let next = sites.ids.len() as SiteId + 1;
        let id = *sites.ids.entry((keys, truncated)).or_insert(next);
        if id == next {
            // Code in no file is a JIT's, if anything's: its map names it.
            let jit_map = taken
                .iter()
                .any(|t| t.file.is_none())
                .then(|| code.jit_map(tid))
                .flatten();
            // Unbounded: no taker waits for the symbolizer. It fails only if the symbolizer
            // is gone, which the supervisor has seen.
            let _ = sites.symbolizer.try_send(NewSite {
                id,
                frames: taken,
                truncated,
                jit_map,
            });
        }
        id
    }
}

/// A walk's frames (address, and whether it is a return address), innermost first, and why it
/// ended before the root, if it did.
type Walked = (Vec<(u64, bool)>, Option<Truncated>);

impl StackShared {
    /// The stack of thread `tid`, stopped in a ptrace stop, walked through `code`: read from
    /// the thread's memory where the page tables hold it. None without the page tables.
    fn walk_stopped(&self, code: &mut SpaceCode, tid: i32, regs: StartRegisters) -> Option<Walked> {
        let Some(pagemap) = code.pagemap.clone() else {
            tracing::debug!(tid, "no stack: the page tables cannot be read");
            return None;
        };
        let readable = Readable {
            pagemap,
            page_size: self.page_size,
        };
        let mut copy = StackCopy::new(tid, regs.sp, STACK_READ_LIMIT, readable);
        let mut read_stack = |addr| copy.read_u64(addr).ok_or(());
        Some(walk(code, tid, regs, self.depth, &mut read_stack))
    }
}

/// What the tracer read of a new space that no stack has been taken in yet: its executable
/// mappings, and its page tables. Its first stack is walked through them rather than through
/// the maps read again (an exec'd program's first stack comes at its first layout syscall,
/// before which no code can have been mapped: every mapping is a stop).
struct KnownCode {
    maps: Vec<MapsEntry>,
    pagemap: Option<Arc<Pagemap>>,
}

/// The tracer's taker of layout changes' stacks, with its view of each space's code.
pub struct Stacks {
    shared: StackShared,
    spaces: HashMap<SpaceId, SpaceCode>,
    known: HashMap<SpaceId, KnownCode>,
}

impl Stacks {
    pub fn new(shared: StackShared) -> Self {
        Self {
            shared,
            spaces: HashMap::new(),
            known: HashMap::new(),
        }
    }

    /// A space was made, with these mappings and page tables, read while its threads are
    /// stopped: kept for its first stack (only the executable mappings).
    pub fn space_made(
        &mut self,
        space: SpaceId,
        maps: &[MapsEntry],
        pagemap: Option<Arc<Pagemap>>,
    ) {
        let maps = maps
            .iter()
            .filter(|m| m.prot.contains(Prot::EXEC))
            .cloned()
            .collect();
        self.known.insert(space, KnownCode { maps, pagemap });
    }

    /// The site of the stack of thread `tid`, stopped in a ptrace stop, in `space`. None when
    /// the thread's registers or its space's mappings cannot be read (it died).
    pub fn take(&mut self, tid: i32, space: SpaceId) -> Option<SiteId> {
        let regs = match stack::start_registers(tid) {
            Ok(regs) => regs,
            Err(e) => {
                tracing::debug!(tid, "no stack: the registers cannot be read: {e}");
                return None;
            }
        };
        // Code mapped since the space's code was read matters only if the stack is in it: the
        // walk through what is known comes first (a JIT maps code at every step, and reading
        // the maps again each time would cost it dearly), and only a stack that leaves the known
        // code reads them again.
        if let Some(code) = self.spaces.get_mut(&space) {
            let walked = self.shared.walk_stopped(code, tid, regs)?;
            if !code.stale || code.knows(&walked) {
                return Some(self.shared.site_of(code, tid, walked));
            }
        }
        let known = self.known.remove(&space);
        let code = self.shared.read_code(tid, known)?;
        let code = self.spaces.entry(space).insert_entry(code).into_mut();
        let walked = self.shared.walk_stopped(code, tid, regs)?;
        Some(self.shared.site_of(code, tid, walked))
    }

    /// Code may have been mapped, moved or made executable in `space`: its mappings are read
    /// again at its next stack.
    pub fn code_changed(&mut self, space: SpaceId) {
        self.known.remove(&space);
        if let Some(code) = self.spaces.get_mut(&space) {
            code.stale = true;
        }
    }

    /// `range` of `space` moved or went: if it held code, the space's mappings are read again.
    pub fn moved(&mut self, space: SpaceId, range: &Range<u64>) {
        self.known.remove(&space);
        if let Some(code) = self.spaces.get_mut(&space) {
            code.moved(range);
        }
    }

    /// The space ended: its files are let go of once no other space maps them.
    pub fn forget(&mut self, space: SpaceId) {
        self.spaces.remove(&space);
        self.known.remove(&space);
    }
}

/// The frames of a stopped thread, innermost first (address, and whether it is a return
/// address), and why the walk ended before the stack's root, if it did.
fn walk(
    code: &mut SpaceCode,
    tid: i32,
    regs: StartRegisters,
    depth: usize,
    mut read_stack: &mut dyn FnMut(u64) -> Result<u64, ()>,
) -> Walked {
    let mut frames = code.unwinder.iter_frames(
        regs.ip,
        UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp),
        &mut code.cache,
        &mut read_stack,
    );
    let mut addresses = Vec::new();
    let end = loop {
        let next = frames.next();
        if addresses.len() == depth {
            // One more step tells a stack of exactly `depth` frames from a longer one.
            break match next {
                Ok(None) => None,
                _ => Some(Truncated::Depth),
            };
        }
        match next {
            Ok(Some(FrameAddress::InstructionPointer(ip))) => addresses.push((ip, false)),
            Ok(Some(FrameAddress::ReturnAddress(ra))) => addresses.push((ra.get(), true)),
            Ok(None) => break None,
            Err(e) => {
                tracing::trace!(tid, "the unwinder stopped: {e}");
                break Some(Truncated::Unwind);
            }
        }
    };
    // A walk that stopped in a program's or the loader's entry point reached the root: some
    // `_start`s (the dynamic loader's) have no unwind rule saying they are the last.
    let at_entry = |&(addr, returns_here): &(u64, bool)| {
        returns_here
            && code.mapping_of(addr).is_some_and(|m| {
                m.file
                    .as_ref()
                    .is_some_and(|f| f.is_entry_return(addr - m.range.start + m.offset))
            })
    };
    let end = match end {
        Some(Truncated::Unwind) if addresses.last().is_some_and(at_entry) => None,
        end => end,
    };
    (addresses, end)
}
