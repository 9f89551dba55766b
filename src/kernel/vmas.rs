//! One mapping of an address space, asked by address: `PROCMAP_QUERY` on an open
//! `/proc/PID/maps` (Linux 6.11, well under a microsecond), or a read of the whole file on older
//! kernels. Scan mode finds a stack's growth so (tracer/scans.rs), where nothing faults through us.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

use linux_raw_sys::general::procmap_query;

use super::procfs::{self, Prot};

// `PROCMAP_QUERY`, `_IOWR('f', 17, struct procmap_query)`: linux-raw-sys has the structure, not
// the request.
nix::ioctl_readwrite!(procmap_query_ioctl, b'f', 17, procmap_query);

use linux_raw_sys::general::procmap_query_flags::{
    PROCMAP_QUERY_VMA_EXECUTABLE, PROCMAP_QUERY_VMA_READABLE, PROCMAP_QUERY_VMA_SHARED,
    PROCMAP_QUERY_VMA_WRITABLE,
};

/// A mapping: where it is, its protection and sharing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vma {
    pub range: Range<u64>,
    pub prot: Prot,
}

/// An open `/proc/PID/maps`. Like `procfs::Pagemap`, it answers for the mm it was opened on.
#[derive(Debug)]
pub struct Vmas {
    file: File,
    /// Cleared once the kernel says it has no `PROCMAP_QUERY`.
    query: AtomicBool,
}

impl Vmas {
    pub fn open(pid: i32) -> io::Result<Self> {
        Ok(Self {
            file: procfs::open_maps(pid)?,
            query: AtomicBool::new(true),
        })
    }

    /// The mapping that holds `addr`, if any.
    pub fn covering(&self, addr: u64) -> io::Result<Option<Vma>> {
        if self.query.load(Ordering::Relaxed) {
            match self.query(addr) {
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTTY | libc::EINVAL)) => {
                    self.query.store(false, Ordering::Relaxed);
                }
                answer => return answer,
            }
        }
        Ok(self
            .read_all()?
            .into_iter()
            .find(|m| m.range.contains(&addr)))
    }

    /// The mapping that holds each of `addrs`: asked one by one, or found in one read of the
    /// file on a kernel without `PROCMAP_QUERY` (never a read each).
    pub fn covering_each(&self, addrs: &[u64]) -> io::Result<Vec<Option<Vma>>> {
        let mut found = Vec::with_capacity(addrs.len());
        for (i, &addr) in addrs.iter().enumerate() {
            if !self.query.load(Ordering::Relaxed) {
                let all = self.read_all()?;
                found.extend(
                    addrs[i..]
                        .iter()
                        .map(|a| all.iter().find(|m| m.range.contains(a)).cloned()),
                );
                break;
            }
            found.push(self.covering(addr)?);
        }
        Ok(found)
    }

    fn query(&self, addr: u64) -> io::Result<Option<Vma>> {
        let mut arg = procmap_query {
            size: std::mem::size_of::<procmap_query>() as u64,
            // The mapping covering the address only (not the next one), whatever it is.
            query_flags: 0,
            query_addr: addr,
            vma_start: 0,
            vma_end: 0,
            vma_flags: 0,
            vma_page_size: 0,
            vma_offset: 0,
            inode: 0,
            dev_major: 0,
            dev_minor: 0,
            // No name and no build id: the kernel writes nothing through a pointer of ours.
            vma_name_size: 0,
            build_id_size: 0,
            vma_name_addr: 0,
            build_id_addr: 0,
        };
        // SAFETY: `arg` is a live, whole `procmap_query` whose `size` says so; with both
        // buffer sizes 0 the kernel writes into `arg` only.
        match unsafe { procmap_query_ioctl(self.file.as_raw_fd(), &mut arg) } {
            Ok(_) => Ok(Some(Vma {
                range: arg.vma_start..arg.vma_end,
                prot: [
                    (PROCMAP_QUERY_VMA_READABLE, Prot::READ),
                    (PROCMAP_QUERY_VMA_WRITABLE, Prot::WRITE),
                    (PROCMAP_QUERY_VMA_EXECUTABLE, Prot::EXEC),
                    (PROCMAP_QUERY_VMA_SHARED, Prot::SHARED),
                ]
                .into_iter()
                .filter(|&(bit, _)| arg.vma_flags & bit as u64 != 0)
                .fold(Prot::NONE, |prot, (_, flag)| prot | flag),
            })),
            // Nothing there; ESRCH: the mm is gone, and holds nothing.
            Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ESRCH) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Every mapping, from the file itself (a kernel without `PROCMAP_QUERY`).
    fn read_all(&self) -> io::Result<Vec<Vma>> {
        Ok(self
            .read_maps()?
            .into_iter()
            .map(|m| Vma {
                range: m.start..m.end,
                prot: m.prot,
            })
            .collect())
    }

    /// Every mapping of this mm, as `/proc/PID/maps` writes them. Unlike a read by pid, never
    /// another program's: after an exec of the process, this mm has none.
    pub fn read_maps(&self) -> io::Result<Vec<procfs::MapsEntry>> {
        procfs::read_maps_of(&self.file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways of asking agree with the file, for a mapping of our own and a hole.
    #[test]
    fn the_query_and_the_file_agree() {
        let vmas = Vmas::open(std::process::id() as i32).unwrap();
        let here = &vmas as *const Vmas as u64;
        let stack = vmas.covering(here).unwrap().expect("our stack is mapped");
        assert!(stack.range.contains(&here));
        assert_eq!(stack.prot, Prot::READ | Prot::WRITE);
        let all = vmas.read_all().unwrap();
        assert!(all.contains(&stack), "{stack:?} not in {all:?}");
        assert_eq!(vmas.covering(0).unwrap(), None);
        assert_eq!(
            vmas.covering_each(&[here, 0]).unwrap(),
            vec![Some(stack.clone()), None]
        );
        // A kernel without the query: the file read once for all.
        vmas.query.store(false, Ordering::Relaxed);
        assert_eq!(
            vmas.covering_each(&[0, here]).unwrap(),
            vec![None, Some(stack)]
        );
    }

    /// A mapped file whose name is not UTF-8 (Latin-1 "café"): the open file and a read by pid
    /// give its name byte for byte, and the query agrees on where it is and its protection.
    #[test]
    fn a_file_named_in_latin_1_is_read_by_its_bytes() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;

        let mut name = std::env::temp_dir().into_os_string();
        name.push(OsStr::from_bytes(b"/mevi-caf\xe9-"));
        name.push(std::process::id().to_string());
        let path = std::path::PathBuf::from(name);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        file.set_len(4096).unwrap();
        // SAFETY: a fresh shared mapping, read-only, at an address the kernel picks; nothing of
        // ours is there, and it is unmapped below before the file goes.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(at, libc::MAP_FAILED);
        let at = at as u64;
        let me = std::process::id() as i32;
        let vmas = Vmas::open(me).unwrap();
        let by_file = vmas.read_maps().unwrap();
        let by_pid = procfs::read_maps(me).unwrap();
        let answer = vmas.covering(at).unwrap();
        // SAFETY: the mapping made above, which nothing uses any more.
        unsafe { libc::munmap(at as *mut libc::c_void, 4096) };
        std::fs::remove_file(&path).unwrap();
        for maps in [&by_file, &by_pid] {
            let entry = maps
                .iter()
                .find(|m| m.start == at)
                .expect("the file's mapping");
            assert_eq!(entry.path, path.as_os_str());
            assert_eq!(entry.prot, Prot::READ | Prot::SHARED);
        }
        let answer = answer.expect("the file's mapping");
        assert_eq!(
            (answer.range, answer.prot),
            (at..at + 4096, Prot::READ | Prot::SHARED)
        );
    }
}
