//! The files code runs from: each read once while some space maps it (its build-id, its load
//! segments and its unwind tables, and a copy of what naming its frames needs), and what was
//! read of the last few kept after that, so that a program run again and again (a shell's
//! loop, `make`) is not read again each time. A program may unmount, delete or overwrite the
//! files it ran, and the tracer must not keep them busy (LTP `execveat03` unmounts the overlay
//! it ran a program from): no file stays open, the symbolizer reads the copy, which is also
//! what was mapped, whatever happens to the file.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::ops::{Deref, Range};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use object::read::ReadCache;
use object::{Object, ObjectSection, ObjectSegment};

use crate::kernel::procfs::MapsEntry;

/// Bytes of a section, shared by every space that maps the file.
#[derive(Clone, Debug, Default)]
pub(crate) struct Section(Arc<[u8]>);

impl Deref for Section {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// What an unwinder needs of a file: where its sections are meant to be (SVMAs), and the bytes
/// of its call frame information.
#[derive(Clone, Debug, Default)]
pub(crate) struct UnwindTables {
    pub text_svma: Option<Range<u64>>,
    pub got_svma: Option<Range<u64>>,
    pub eh_frame_svma: Option<Range<u64>>,
    pub eh_frame: Option<Section>,
    pub eh_frame_hdr_svma: Option<Range<u64>>,
    pub eh_frame_hdr: Option<Section>,
    /// Only read when there is no `.eh_frame` (it is what some toolchains emit instead).
    pub debug_frame: Option<Section>,
}

/// A `PT_LOAD` segment.
#[derive(Clone, Copy, Debug)]
struct Load {
    offset: u64,
    size: u64,
    vaddr: u64,
    executable: bool,
}

impl Load {
    /// The file range the kernel maps for it: from the page its first byte is in.
    fn mapped_from(&self, page_size: u64) -> Option<Range<u64>> {
        Some(self.offset & !(page_size - 1)..self.offset.checked_add(self.size)?)
    }
}

/// One file that code runs from.
#[derive(Debug)]
pub struct CodeFile {
    /// Its index for the run: the same file (device, inode, size, change time) has the same
    /// index, read again or not.
    pub index: u32,
    /// As `/proc/PID/maps` names it, in the process that first mapped it.
    pub name: String,
    /// The GNU build-id note, in lowercase hex.
    pub build_id: Option<String>,
    /// What naming its frames needs (symbols and debug information, at their offsets in the
    /// file), in memory of ours: the symbolizer reads it.
    symbols: Option<Arc<File>>,
    loads: Vec<Load>,
    /// The file offset of the entry point (`_start` of a program, or of the dynamic loader).
    entry_offset: Option<u64>,
    pub(crate) unwind: Option<UnwindTables>,
}

impl CodeFile {
    /// The bytes of its unwind tables we hold (what keeping it costs).
    fn table_bytes(&self) -> usize {
        self.unwind.as_ref().map_or(0, |u| {
            [&u.eh_frame, &u.eh_frame_hdr, &u.debug_frame]
                .iter()
                .filter_map(|s| s.as_ref().map(|s| s.len()))
                .sum()
        })
    }

    /// The address the file meant for the byte at `offset` of an executable mapping. A page can
    /// hold the end of one segment and the start of the next (lld, and so rustc, packs them so),
    /// each meant for another address: the executable segment the mapping is of decides.
    pub fn svma_of_code_offset(&self, offset: u64, page_size: u64) -> Option<u64> {
        let holds = |l: &&Load| {
            l.mapped_from(page_size)
                .is_some_and(|r| r.contains(&offset))
        };
        let load = self
            .loads
            .iter()
            .filter(holds)
            .find(|l| l.executable)
            .or_else(|| self.loads.iter().find(holds))?;
        load.vaddr.checked_add(offset)?.checked_sub(load.offset)
    }

    /// Whether a return address at `offset` is in the file's entry point: a walk that stops
    /// there reached the root (the dynamic loader's `_start` has no unwind rule that says so).
    pub fn is_entry_return(&self, offset: u64) -> bool {
        /// `_start` calls into C within its first instructions.
        const ENTRY_SPAN: u64 = 0x80;
        self.entry_offset.is_some_and(|entry| {
            offset
                .checked_sub(1)
                .is_some_and(|call| call >= entry && call - entry < ENTRY_SPAN)
        })
    }

    /// Where the symbolizer reads the file: our copy of its symbols. A separate debug file is
    /// then found by build-id in the debug directories (`/usr/lib/debug`), not beside the file.
    pub fn path_for_symbols(&self) -> Option<PathBuf> {
        let copy = self.symbols.as_ref()?;
        Some(PathBuf::from(format!("/proc/self/fd/{}", copy.as_raw_fd())))
    }
}

/// Which file a mapping is of: for a file on disk, its identity as it was read; `[vdso]` by name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum FileKey {
    OnDisk {
        dev: u64,
        inode: u64,
        size: u64,
        changed_ns: i128,
    },
    Named(String),
}

/// How many of the code files met last are kept once no space maps them, and how many bytes of
/// unwind tables they may hold between them. A fork and exec of `/bin/true` read its file again
/// each time otherwise: about 40 reads and 60 µs of the tracer's, while the program waits.
const RECENT_FILES: usize = 16;
const RECENT_BYTES: usize = 8 << 20;

/// The code files mapped by live spaces (held by them, and by sites not yet named), the last
/// few met, and an index for every file met in the run.
#[derive(Default)]
pub(crate) struct CodeFiles {
    live: HashMap<FileKey, Weak<CodeFile>>,
    /// The files met last, oldest first: each held here as well, so that it stays in `live`.
    recent: VecDeque<Arc<CodeFile>>,
    indexes: HashMap<FileKey, u32>,
    /// Each file's copy of its symbols, made once for the run: the symbolizer keeps what it
    /// opened of them mapped for the run anyway, and a file read again (a program run again
    /// and again) is not copied again.
    copies: HashMap<FileKey, Arc<File>>,
}

impl CodeFiles {
    /// The file an executable mapping of thread `tid`'s space shows, read if no live space
    /// holds it. None for a file that cannot be opened as a regular file (nothing is kept of
    /// it: the next space to map it tries again).
    pub fn of(&mut self, tid: i32, m: &MapsEntry) -> Option<Arc<CodeFile>> {
        if m.path_starts_with("[vdso") {
            return Some(self.named(&m.path.to_string_lossy()));
        }
        // Known by its name's identity, it is not opened at all.
        let named = key_by_name(m);
        let known = named.as_ref().and_then(|key| self.live.get(key)?.upgrade());
        if let Some(file) = known {
            self.met(&file);
            return Some(file);
        }
        let (open, key) = open_mapped(tid, m, named.is_some())?;
        if let Some(file) = self.live.get(&key).and_then(Weak::upgrade) {
            self.met(&file);
            return Some(file);
        }
        let next = self.indexes.len() as u32;
        let index = *self.indexes.entry(key.clone()).or_insert(next);
        let copy = self.copies.get(&key).cloned();
        let file = Arc::new(read_code_file(
            index,
            display_name(&m.path.to_string_lossy()),
            open,
            copy,
        ));
        if let Some(copy) = &file.symbols {
            self.copies.insert(key.clone(), copy.clone());
        }
        self.live.insert(key, Arc::downgrade(&file));
        self.met(&file);
        // Files no space maps any more are let go of as they are met.
        if self.live.len() > 64 && self.live.len().is_power_of_two() {
            self.live.retain(|_, f| f.strong_count() > 0);
        }
        Some(file)
    }

    /// `file` was met last: kept among the recent ones, the oldest let go of past the bounds.
    fn met(&mut self, file: &Arc<CodeFile>) {
        if let Some(at) = self.recent.iter().position(|f| Arc::ptr_eq(f, file)) {
            self.recent.remove(at);
        }
        self.recent.push_back(file.clone());
        let mut bytes: usize = self.recent.iter().map(|f| f.table_bytes()).sum();
        while self.recent.len() > RECENT_FILES || (bytes > RECENT_BYTES && self.recent.len() > 1) {
            if let Some(oldest) = self.recent.pop_front() {
                bytes -= oldest.table_bytes();
            }
        }
    }

    /// A mapping with no file behind it that the kernel names (`[vdso]`): no tables to read.
    fn named(&mut self, name: &str) -> Arc<CodeFile> {
        let key = FileKey::Named(name.to_string());
        if let Some(file) = self.live.get(&key).and_then(Weak::upgrade) {
            return file;
        }
        let next = self.indexes.len() as u32;
        let index = *self.indexes.entry(key.clone()).or_insert(next);
        let file = Arc::new(CodeFile {
            index,
            name: name.to_string(),
            build_id: None,
            symbols: None,
            loads: Vec::new(),
            entry_offset: None,
            unwind: None,
        });
        self.live.insert(key, Arc::downgrade(&file));
        file
    }
}

/// The name a file is written with: without the ` (deleted)` the kernel adds to a removed one.
fn display_name(path: &str) -> String {
    path.strip_suffix(" (deleted)").unwrap_or(path).to_string()
}

/// Opens the regular file an executable mapping shows: by its name when that is still the same
/// file (`named_is_it`, by [`key_by_name`]), else through `/proc/TID/map_files` (a file since
/// deleted or replaced, or one in another mount namespace).
fn open_mapped(tid: i32, m: &MapsEntry, named_is_it: bool) -> Option<(File, FileKey)> {
    if m.inode == 0 || !m.path_starts_with("/") {
        return None;
    }
    let same = |f: &File| key_of(m, &f.metadata().ok()?);
    // Never blocking: whatever now has the name (a FIFO a program put there) is looked at
    // before it is opened, and opened without waiting for a partner.
    let open = |path: &Path| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .ok()
    };
    let by_name = named_is_it
        .then(|| open(m.path.as_ref()))
        .flatten()
        .and_then(|f| Some((same(&f)?, f)));
    let (key, file) = by_name.or_else(|| {
        let f = open(format!("/proc/{tid}/map_files/{:x}-{:x}", m.start, m.end).as_ref())?;
        Some((same(&f)?, f))
    })?;
    Some((file, key))
}

/// The identity of the file a mapping shows, if its name still is that file (by a look at the
/// name, not an open).
fn key_by_name(m: &MapsEntry) -> Option<FileKey> {
    if m.inode == 0 || !m.path_starts_with("/") {
        return None;
    }
    key_of(m, &std::fs::metadata(&m.path).ok()?)
}

/// The identity of a regular file, if it is the one mapping `m` shows.
fn key_of(m: &MapsEntry, meta: &std::fs::Metadata) -> Option<FileKey> {
    (meta.is_file() && meta.ino() == m.inode && dev_name(meta.dev()) == m.dev).then(|| {
        FileKey::OnDisk {
            dev: meta.dev(),
            inode: meta.ino(),
            size: meta.size(),
            changed_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        }
    })
}

/// A device number as `/proc/PID/maps` writes it.
fn dev_name(dev: u64) -> String {
    format!("{:02x}:{:02x}", libc::major(dev), libc::minor(dev))
}

/// `copy`: the copy of its symbols made when it was read before, if it was.
fn read_code_file(index: u32, name: String, open: File, copy: Option<Arc<File>>) -> CodeFile {
    let mut file = CodeFile {
        index,
        name,
        build_id: None,
        symbols: None,
        loads: Vec::new(),
        entry_offset: None,
        unwind: None,
    };
    let cache = ReadCache::new(open);
    let mut wanted = Vec::new();
    match object::File::parse(&cache) {
        Ok(elf) => {
            file.build_id = elf.build_id().ok().flatten().map(build_id_hex);
            file.loads = elf.segments().map(load_of).collect();
            let entry = elf.entry();
            file.entry_offset = file.loads.iter().find_map(|l| {
                let inside = entry.checked_sub(l.vaddr).filter(|&d| d < l.size)?;
                l.offset.checked_add(inside)
            });
            file.unwind = Some(unwind_tables(&elf));
            wanted = for_symbols(&elf);
        }
        Err(e) => tracing::debug!(name = file.name, "not an object file we can read: {e}"),
    }
    // The file is closed on return: only the copy is kept.
    let open = cache.into_inner();
    file.symbols = match copy {
        Some(copy) => Some(copy),
        None if wanted.is_empty() => None,
        None => copy_of(&open, &wanted)
            .inspect_err(|e| tracing::debug!(name = file.name, "copying its symbols: {e}"))
            .ok()
            .map(Arc::new),
    };
    file
}

/// Debug information past this size is not copied: its frames are then named by the ELF
/// symbols alone (functions, without files and lines).
const MAX_DEBUG_INFO: u64 = 512 << 20;

/// The byte ranges of an ELF file the symbolizer reads: the headers, the section table, and
/// every section not loaded at run time (symbols, strings, debug information, the debug link)
/// besides the dynamic symbols and notes (the build-id). Not the code or data.
fn for_symbols<'a>(elf: &object::File<'a, &'a ReadCache<File>>) -> Vec<Range<u64>> {
    use object::read::elf::FileHeader;
    let object::File::Elf64(e) = elf else {
        return Vec::new();
    };
    let (header, endian) = (e.elf_header(), e.endian());
    let table = |offset: u64, count: u16, size: u16| {
        offset..offset.saturating_add(u64::from(count) * u64::from(size))
    };
    let mut ranges = vec![
        0..table(
            header.e_phoff(endian),
            header.e_phnum(endian),
            header.e_phentsize(endian),
        )
        .end
        .max(64),
        table(
            header.e_shoff(endian),
            header.e_shnum(endian),
            header.e_shentsize(endian),
        ),
    ];
    let mut debug = Vec::new();
    for section in elf.sections() {
        let object::SectionFlags::Elf { sh_flags } = section.flags() else {
            continue;
        };
        let name = section.name().unwrap_or_default();
        let loaded = sh_flags & u64::from(object::elf::SHF_ALLOC) != 0;
        if loaded && !matches!(name, ".dynsym" | ".dynstr") && !name.starts_with(".note") {
            continue;
        }
        let Some((offset, size)) = section.file_range() else {
            continue;
        };
        let range = offset..offset.saturating_add(size);
        if name.starts_with(".debug_") || name.starts_with(".zdebug_") {
            debug.push(range);
        } else {
            ranges.push(range);
        }
    }
    if debug.iter().map(|r| r.end - r.start).sum::<u64>() <= MAX_DEBUG_INFO {
        ranges.extend(debug);
    }
    ranges
}

/// A GNU build-id as the stream and the debug directories write it: lowercase hex.
pub fn build_id_hex(id: &[u8]) -> String {
    id.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A copy of `ranges` of `file` in memory of ours (a memfd, as large as the file, holes
/// elsewhere, so that every offset is the file's).
fn copy_of(file: &File, ranges: &[Range<u64>]) -> std::io::Result<File> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata()?.len();
    let copy = File::from(nix::sys::memfd::memfd_create(
        c"mevi-actors symbols",
        nix::sys::memfd::MFdFlags::MFD_CLOEXEC,
    )?);
    copy.set_len(len)?;
    let mut buf = vec![0u8; 1 << 20];
    for range in ranges {
        let (mut at, end) = (range.start.min(len), range.end.min(len));
        while at < end {
            let n = buf.len().min((end - at) as usize);
            let got = file.read_at(&mut buf[..n], at)?;
            if got == 0 {
                break;
            }
            copy.write_all_at(&buf[..got], at)?;
            at += got as u64;
        }
    }
    Ok(copy)
}

fn load_of<'a>(s: object::read::Segment<'a, 'a, &'a ReadCache<File>>) -> Load {
    let (offset, size) = s.file_range();
    let executable = matches!(
        s.flags(),
        object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0
    );
    Load {
        offset,
        size,
        vaddr: s.address(),
        executable,
    }
}

fn unwind_tables<'a>(elf: &object::File<'a, &'a ReadCache<File>>) -> UnwindTables {
    // The values are the file's own: a crafted file must not overflow anything.
    let svma = |name: &str| {
        let s = elf.section_by_name(name)?;
        Some(s.address()..s.address().checked_add(s.size())?)
    };
    let bytes = |name: &str| {
        elf.section_by_name(name)
            .and_then(|s| s.data().ok())
            .filter(|d| !d.is_empty())
            .map(|d| Section(Arc::from(d)))
    };
    let eh_frame = bytes(".eh_frame");
    UnwindTables {
        text_svma: svma(".text"),
        got_svma: svma(".got"),
        eh_frame_svma: svma(".eh_frame"),
        debug_frame: if eh_frame.is_none() {
            bytes(".debug_frame")
        } else {
            None
        },
        eh_frame,
        eh_frame_hdr_svma: svma(".eh_frame_hdr"),
        eh_frame_hdr: bytes(".eh_frame_hdr"),
    }
}
