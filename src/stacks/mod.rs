//! Call stacks (`run --stacks`): taken by the tracer while the thread that made a layout change
//! is stopped at its syscall's exit, unwound with framehop (DWARF call frame information where
//! the code has it, frame pointers where it has not), and written down at once as files and
//! offsets, so that a trace stays symbolizable once its processes and files are gone. Each
//! distinct stack becomes one site; naming its frames (function, file, line) is the
//! symbolizer's work, off the tracer's thread (`crate::actors::symbolizer`).

pub mod files;
mod space;

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use async_channel::Sender;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64};
use framehop::{FrameAddress, Unwinder};

use self::files::{CodeFile, CodeFiles};
use self::space::SpaceCode;
use crate::event::{SiteId, SpaceId, Truncated};
use crate::kernel::stack::{self, StackCopy};

/// How far up the stack a walk reads at most: deep recursion with large frames ends here.
const STACK_READ_LIMIT: usize = 1 << 20;

/// One frame as taken: where it is, not yet what it is.
#[derive(Clone, Debug)]
pub struct TakenFrame {
    /// The file and its offset, or None for an address no file backs.
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
}

/// A frame's identity, for telling stacks apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum FrameKey {
    InFile { file: u32, offset: u64 },
    Anonymous { addr: u64 },
}

/// The tracer's stack taker.
pub struct Stacks {
    depth: usize,
    files: CodeFiles,
    spaces: HashMap<SpaceId, SpaceCode>,
    cache: CacheX86_64,
    sites: HashMap<(Vec<FrameKey>, Option<Truncated>), SiteId>,
    symbolizer: Sender<NewSite>,
    /// Stacks taken, for the summary.
    pub taken: u64,
}

impl Stacks {
    pub fn new(depth: u32, symbolizer: Sender<NewSite>) -> Self {
        Self {
            depth: depth as usize,
            files: CodeFiles::default(),
            spaces: HashMap::new(),
            cache: CacheX86_64::new(),
            sites: HashMap::new(),
            symbolizer,
            taken: 0,
        }
    }

    /// The site of the stack of thread `tid` (of process `pid`, in `space`), stopped in a
    /// ptrace stop. None when its registers cannot be read (it died).
    pub fn take(&mut self, pid: i32, tid: i32, space: SpaceId) -> Option<SiteId> {
        let regs = stack::start_registers(tid).ok()?;
        let code = match self.spaces.get_mut(&space) {
            Some(code) if !code.stale => code,
            _ => {
                let code = SpaceCode::read(pid, &mut self.files).ok()?;
                self.spaces.insert(space, code);
                self.spaces.get_mut(&space)?
            }
        };
        let mut copy = StackCopy::new(pid, regs.sp, STACK_READ_LIMIT);
        let mut read_stack = |addr| copy.read_u64(addr).ok_or(());
        let mut frames = code.unwinder.iter_frames(
            regs.ip,
            UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp),
            &mut self.cache,
            &mut read_stack,
        );
        let mut addresses = Vec::new();
        let truncated = loop {
            if addresses.len() == self.depth {
                break Some(Truncated::Depth);
            }
            match frames.next() {
                Ok(Some(frame)) => addresses.push(frame),
                Ok(None) => break None,
                Err(e) => {
                    tracing::trace!(tid, "the unwinder stopped: {e}");
                    break Some(Truncated::Unwind);
                }
            }
        };
        self.taken += 1;
        let mut keys = Vec::with_capacity(addresses.len());
        let mut taken = Vec::with_capacity(addresses.len());
        for frame in addresses {
            let (addr, returns_here) = match frame {
                FrameAddress::InstructionPointer(ip) => (ip, false),
                FrameAddress::ReturnAddress(ra) => (ra.get(), true),
            };
            match code
                .mapping_of(addr)
                .and_then(|m| Some((m, m.file.as_ref()?)))
            {
                Some((m, (index, file))) => {
                    let offset = addr - m.range.start + m.offset;
                    keys.push(FrameKey::InFile {
                        file: *index,
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
        let next = self.sites.len() as SiteId + 1;
        let id = *self.sites.entry((keys, truncated)).or_insert(next);
        if id == next {
            // Unbounded: the tracer never waits for the symbolizer.
            let _ = self.symbolizer.try_send(NewSite {
                id,
                frames: taken,
                truncated,
            });
        }
        Some(id)
    }

    /// Code may have been mapped, moved or made executable in `space`: its mappings are read
    /// again at its next stack.
    pub fn code_changed(&mut self, space: SpaceId) {
        if let Some(code) = self.spaces.get_mut(&space) {
            code.stale = true;
        }
    }

    /// `range` of `space` moved or went: if it held code, the space's mappings are read again.
    pub fn moved(&mut self, space: SpaceId, range: &Range<u64>) {
        if let Some(code) = self.spaces.get_mut(&space)
            && code.has_code_in(range)
        {
            code.stale = true;
        }
    }

    /// The space ended.
    pub fn forget(&mut self, space: SpaceId) {
        self.spaces.remove(&space);
    }

    /// Distinct stacks so far.
    pub fn sites(&self) -> u64 {
        self.sites.len() as u64
    }

    /// Files read for their code so far.
    pub fn files(&self) -> usize {
        self.files.len()
    }
}
