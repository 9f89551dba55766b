//! One address space's code, as an unwinder needs it: the files mapped where, and their unwind
//! tables placed at their load addresses. Read from `/proc/PID/maps` at the space's first stack,
//! and again after the space mapped new code.

use std::ops::Range;
use std::sync::Arc;

use framehop::x86_64::UnwinderX86_64;
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder};

use super::files::{CodeFile, CodeFiles, Section};
use crate::kernel::procfs;

/// A file-backed mapping, or anonymous code.
pub(crate) struct Mapped {
    pub range: Range<u64>,
    /// The file and its index for the run; None for memory no file backs.
    pub file: Option<(u32, Arc<CodeFile>)>,
    /// The file offset of `range.start`.
    pub offset: u64,
}

pub(crate) struct SpaceCode {
    pub unwinder: UnwinderX86_64<Section>,
    /// Sorted by start; file mappings of any protection, and executable anonymous memory.
    pub mapped: Vec<Mapped>,
    /// Code was mapped, moved or made executable since `mapped` was read.
    pub stale: bool,
}

impl SpaceCode {
    /// Reads the space's mappings through process `pid`.
    pub fn read(pid: i32, files: &mut CodeFiles) -> std::io::Result<Self> {
        let maps = procfs::read_maps(pid)?;
        let mut unwinder = UnwinderX86_64::new();
        let mut mapped = Vec::new();
        for m in &maps {
            let executable = m.prot.as_bytes().get(2) == Some(&b'x');
            let file_backed = m.inode != 0 || m.path.starts_with("[vdso");
            if !file_backed && !executable {
                continue;
            }
            let file = file_backed.then(|| files.of(pid, m));
            if executable
                && let Some((_, code)) = &file
                && let Some(module) = module_of(m.start..m.end, m.offset, code)
            {
                unwinder.add_module(module);
            }
            mapped.push(Mapped {
                range: m.start..m.end,
                file,
                offset: m.offset,
            });
        }
        Ok(Self {
            unwinder,
            mapped,
            stale: false,
        })
    }

    /// The mapping holding `addr`.
    pub fn mapping_of(&self, addr: u64) -> Option<&Mapped> {
        let i = self.mapped.partition_point(|m| m.range.start <= addr);
        let m = self.mapped.get(i.checked_sub(1)?)?;
        m.range.contains(&addr).then_some(m)
    }

    /// Whether code is mapped anywhere in `range`.
    pub fn has_code_in(&self, range: &Range<u64>) -> bool {
        self.mapped
            .iter()
            .any(|m| m.range.start < range.end && range.start < m.range.end)
    }
}

/// The unwinder's view of one executable mapping of a file: its tables, placed where the
/// mapping put the file.
fn module_of(avma: Range<u64>, offset: u64, code: &CodeFile) -> Option<Module<Section>> {
    let tables = code.unwind.as_ref()?;
    // ELF addresses are relative to a base of 0: the load bias is where the file's address 0
    // landed.
    let svma = code.svma_of_offset(offset)?;
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
