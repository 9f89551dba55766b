//! One address space's code, as an unwinder needs it: the executable mappings and the files
//! they show, their unwind tables placed at their load addresses. Made at the space's first
//! stack of the maps the tracer read at its creation (or read from `/proc/TID/maps` then, if
//! code was mapped since), and read again after the space mapped new code.

use std::ops::Range;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder};

use super::files::{CodeFile, CodeFiles, Section};
use crate::event::Truncated;
use crate::kernel::procfs::{self, Pagemap};

/// An executable mapping: of a file, or of anonymous memory (JIT code).
pub(crate) struct Mapped {
    pub range: Range<u64>,
    /// The file; None for memory no file backs (or one that could not be opened).
    pub file: Option<Arc<CodeFile>>,
    /// The file offset of `range.start`.
    pub offset: u64,
}

pub(crate) struct SpaceCode {
    pub unwinder: UnwinderX86_64<Section>,
    /// The unwinder's rule cache. One per space: framehop tells modules apart by a 16-bit
    /// generation, which a long run of spaces would wrap in a shared cache.
    pub cache: CacheX86_64,
    /// Sorted by start.
    pub mapped: Vec<Mapped>,
    /// Code was mapped, moved or made executable since `mapped` was read.
    pub stale: bool,
    /// The space's page tables: which stack pages may be read (kernel::stack::Readable).
    pub pagemap: Option<Arc<Pagemap>>,
    /// The map its JIT writes of the code it made, once a stack has met code in no file.
    pub jit_map: Option<Arc<std::fs::File>>,
}

impl SpaceCode {
    /// Reads the space's code through its thread `tid` (the process's main thread may be gone).
    pub fn read(tid: i32, files: &mut CodeFiles, page_size: u64) -> std::io::Result<Self> {
        let maps = procfs::read_maps(tid)?;
        let pagemap = Pagemap::open(tid, page_size).ok().map(Arc::new);
        Ok(Self::of_maps(tid, maps, pagemap, files, page_size))
    }

    /// The space's code in `maps`, read through its thread `tid` while it was stopped.
    pub fn of_maps(
        tid: i32,
        maps: Vec<procfs::MapsEntry>,
        pagemap: Option<Arc<Pagemap>>,
        files: &mut CodeFiles,
        page_size: u64,
    ) -> Self {
        let mut unwinder = UnwinderX86_64::new();
        let mut mapped = Vec::new();
        for m in maps {
            if !m.prot.contains(procfs::Prot::EXEC) {
                continue;
            }
            let file = if m.inode != 0 || m.path_starts_with("[vdso") {
                files.of(tid, &m)
            } else {
                None
            };
            if let Some(code) = &file
                && let Some(module) = module_of(m.start..m.end, m.offset, code, page_size)
            {
                unwinder.add_module(module);
            }
            mapped.push(Mapped {
                range: m.start..m.end,
                file,
                offset: m.offset,
            });
        }
        Self {
            unwinder,
            cache: CacheX86_64::new(),
            mapped,
            stale: false,
            pagemap,
            jit_map: None,
        }
    }

    /// The JIT's map of its code, through thread `tid`: opened at the first stack that needs
    /// it, and looked for again at each until the process has one.
    pub fn jit_map(&mut self, tid: i32) -> Option<Arc<std::fs::File>> {
        if self.jit_map.is_none() {
            self.jit_map = procfs::open_jit_map(tid).map(Arc::new);
        }
        self.jit_map.clone()
    }

    /// The executable mapping holding `addr`.
    pub fn mapping_of(&self, addr: u64) -> Option<&Mapped> {
        let i = self.mapped.partition_point(|m| m.range.start <= addr);
        let m = self.mapped.get(i.checked_sub(1)?)?;
        m.range.contains(&addr).then_some(m)
    }

    /// Whether every frame of a walk is in code this view knows: then code mapped since did
    /// not change it (but for new code mapped over the very range of known code, which reads
    /// the maps again only at the next stack that leaves the known code).
    pub fn knows(&self, (frames, _): &(Vec<(u64, bool)>, Option<Truncated>)) -> bool {
        frames
            .iter()
            .all(|&(addr, _)| self.mapping_of(addr).is_some())
    }

    /// Whether code is mapped anywhere in `range`.
    fn has_code_in(&self, range: &Range<u64>) -> bool {
        self.mapped
            .iter()
            .any(|m| m.range.start < range.end && range.start < m.range.end)
    }

    /// `range` moved or went: if it held code, the mappings are read again at the next stack.
    pub fn moved(&mut self, range: &Range<u64>) {
        if self.has_code_in(range) {
            self.stale = true;
        }
    }
}

/// The unwinder's view of one executable mapping of a file: its tables, placed where the
/// mapping put the file.
fn module_of(
    avma: Range<u64>,
    offset: u64,
    code: &CodeFile,
    page_size: u64,
) -> Option<Module<Section>> {
    let tables = code.unwind.as_ref()?;
    // ELF addresses are relative to a base of 0: the load bias is where the file's address 0
    // landed.
    let svma = code.svma_of_code_offset(offset, page_size)?;
    let bias = avma.start.checked_sub(svma)?;
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: tables.text_svma.clone(),
        got_svma: tables.got_svma.clone(),
        eh_frame_svma: tables.eh_frame_svma.clone(),
        eh_frame: tables.eh_frame.clone(),
        eh_frame_hdr_svma: tables.eh_frame_hdr_svma.clone(),
        eh_frame_hdr: tables.eh_frame_hdr.clone(),
        debug_frame: tables.debug_frame.clone(),
        ..Default::default()
    };
    Some(Module::new(code.name.clone(), avma, bias, info))
}
