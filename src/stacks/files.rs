//! The files code runs from: each read once for the run (its build-id, its load segments and
//! its unwind tables) and kept open, so that it can still be symbolized after the process that
//! mapped it is gone, or the file itself was replaced.

use std::collections::HashMap;
use std::fs::File;
use std::ops::{Deref, Range};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

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

/// One file that frames are found in.
#[derive(Debug)]
pub struct CodeFile {
    /// As `/proc/PID/maps` names it, in the process that first mapped it.
    pub name: String,
    /// The GNU build-id note, in lowercase hex.
    pub build_id: Option<String>,
    /// The file itself, held open: the symbolizer reads it through `/proc/self/fd`.
    open: Option<File>,
    /// Whether `name` is the held file (same device and inode): then the symbolizer reads it by
    /// its name, which lets it find separate debug files beside it.
    name_is_it: bool,
    /// `PT_LOAD` segments: file offset, size in the file, address meant.
    loads: Vec<(u64, u64, u64)>,
    pub(crate) unwind: Option<UnwindTables>,
}

impl CodeFile {
    /// The address the file meant for the byte at `offset`, if a load segment holds it.
    pub fn svma_of_offset(&self, offset: u64) -> Option<u64> {
        self.loads
            .iter()
            .find(|(off, size, _)| (*off..off + size).contains(&offset))
            .map(|(off, _, vaddr)| vaddr + (offset - off))
    }

    /// Where the symbolizer reads the file.
    pub fn path_for_symbols(&self) -> Option<PathBuf> {
        let open = self.open.as_ref()?;
        Some(if self.name_is_it {
            PathBuf::from(&self.name)
        } else {
            PathBuf::from(format!("/proc/self/fd/{}", open.as_raw_fd()))
        })
    }
}

/// Which file a mapping is of.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct FileKey {
    dev: String,
    inode: u64,
    /// Files without an inode (`[vdso]`) are told apart by name.
    name: String,
}

/// Every file met so far, by identity.
#[derive(Default)]
pub(crate) struct CodeFiles {
    files: Vec<Arc<CodeFile>>,
    by_key: HashMap<FileKey, u32>,
}

impl CodeFiles {
    /// The file a mapping shows (read the first time), with its index for the run.
    pub fn of(&mut self, pid: i32, m: &MapsEntry) -> (u32, Arc<CodeFile>) {
        let key = FileKey {
            dev: m.dev.clone(),
            inode: m.inode,
            name: if m.inode == 0 {
                m.path.clone()
            } else {
                String::new()
            },
        };
        if let Some(&i) = self.by_key.get(&key) {
            return (i, self.files[i as usize].clone());
        }
        let file = Arc::new(read_code_file(pid, m));
        let i = self.files.len() as u32;
        self.files.push(file.clone());
        self.by_key.insert(key, i);
        (i, file)
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }
}

/// Opens the file a mapping shows: by its name when that is still the same file, else through
/// `/proc/PID/map_files` (a file since deleted or replaced, or one in another mount namespace).
fn open_mapped(pid: i32, m: &MapsEntry) -> Option<(File, bool)> {
    if m.inode == 0 || !m.path.starts_with('/') {
        return None;
    }
    if let Ok(f) = File::open(&m.path)
        && let Ok(meta) = f.metadata()
        && meta.ino() == m.inode
        && dev_name(meta.dev()) == m.dev
    {
        return Some((f, true));
    }
    File::open(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end))
        .ok()
        .map(|f| (f, false))
}

/// A device number as `/proc/PID/maps` writes it.
fn dev_name(dev: u64) -> String {
    format!("{:02x}:{:02x}", libc::major(dev), libc::minor(dev))
}

fn read_code_file(pid: i32, m: &MapsEntry) -> CodeFile {
    let mut file = CodeFile {
        name: m.path.clone(),
        build_id: None,
        open: None,
        name_is_it: false,
        loads: Vec::new(),
        unwind: None,
    };
    let Some((open, name_is_it)) = open_mapped(pid, m) else {
        return file;
    };
    let cache = ReadCache::new(open);
    if let Ok(elf) = object::File::parse(&cache) {
        file.build_id = elf
            .build_id()
            .ok()
            .flatten()
            .map(|id| id.iter().map(|b| format!("{b:02x}")).collect());
        file.loads = elf
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        file.unwind = Some(unwind_tables(&elf));
    }
    file.open = Some(cache.into_inner());
    file.name_is_it = name_is_it;
    file
}

fn unwind_tables<'a>(elf: &object::File<'a, &'a ReadCache<File>>) -> UnwindTables {
    let svma = |name: &str| {
        elf.section_by_name(name)
            .map(|s| s.address()..s.address() + s.size())
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
