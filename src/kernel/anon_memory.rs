//! Private anonymous memory touched page by page, and a fork: what the built-in demo workload
//! does to its own address space, behind a safe interface.

use std::io;
use std::time::{Duration, Instant};

/// A private anonymous mapping of our own, unmapped when dropped (what is left of it).
pub struct AnonMapping {
    start: *mut u8,
    pages: usize,
    page_size: usize,
}

// SAFETY: the mapping is plain memory owned by this value alone; moving it to another thread
// moves that ownership.
unsafe impl Send for AnonMapping {}

impl AnonMapping {
    pub fn new(pages: usize) -> io::Result<Self> {
        let page_size = super::page_size() as usize;
        // SAFETY: a fresh mapping at an address the kernel picks; nothing of ours is there.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                pages * page_size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            start: p.cast(),
            pages,
            page_size,
        })
    }

    fn page(&self, i: usize) -> *mut u8 {
        assert!(i < self.pages, "page {i} of a mapping of {}", self.pages);
        // SAFETY: i < pages, so the offset stays inside the mapping.
        unsafe { self.start.add(i * self.page_size) }
    }

    /// Where it begins.
    pub fn start(&self) -> u64 {
        self.start as u64
    }

    /// Writes the first byte of page `i`.
    pub fn write(&mut self, i: usize, value: u8) {
        // SAFETY: `page` checks that the page is inside the mapping, which is readable and
        // writable and ours alone.
        unsafe { std::ptr::write_volatile(self.page(i), value) }
    }

    /// Reads the first byte of page `i`.
    pub fn read(&self, i: usize) -> u8 {
        // SAFETY: as in `write`.
        unsafe { std::ptr::read_volatile(self.page(i)) }
    }

    /// Drops pages `0..n` (`MADV_DONTNEED`): they read as zero again.
    pub fn discard_first(&mut self, n: usize) -> io::Result<()> {
        let _ = self.page(n.max(1) - 1);
        // SAFETY: the range is inside our own mapping; nothing holds references into it.
        let r =
            unsafe { libc::madvise(self.start.cast(), n * self.page_size, libc::MADV_DONTNEED) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Unmaps every page from `from` on; the mapping keeps `from` pages.
    pub fn unmap_from(&mut self, from: usize) -> io::Result<()> {
        if from >= self.pages {
            return Ok(());
        }
        // SAFETY: the tail is inside our own mapping, and `pages` shrinks so it is never used
        // (or unmapped) again.
        let r =
            unsafe { libc::munmap(self.page(from).cast(), (self.pages - from) * self.page_size) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        self.pages = from;
        Ok(())
    }
}

impl Drop for AnonMapping {
    fn drop(&mut self) {
        if self.pages > 0 {
            // SAFETY: what is left of our own mapping; nothing uses it after this.
            unsafe { libc::munmap(self.start.cast(), self.pages * self.page_size) };
        }
    }
}

/// How long `in_fork_child_alone` waits for threads that were joined to be gone from the
/// process: a traced thread that exited stays a task until its tracer reaps it.
const THREADS_GONE: Duration = Duration::from_secs(5);

/// `in_fork_child` once this process is down to one thread: threads joined may take a moment to
/// be gone (see `THREADS_GONE`); an error, and no fork, if others still run then.
pub fn in_fork_child_alone(child: fn()) -> io::Result<bool> {
    let deadline = Instant::now() + THREADS_GONE;
    while std::fs::read_dir("/proc/self/task")?.count() > 1 {
        if Instant::now() >= deadline {
            return Err(io::Error::other("other threads still run: no fork"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // SAFETY: this process has one task, the calling thread (read above; only it could have
    // made another since, and it did not).
    unsafe { in_fork_child(child) }
}

/// Runs `child` in a forked child process, which then `_exit`s with 0, and waits for it; true if
/// it exited with 0.
///
/// # Safety
///
/// This process must have a single thread running: the child is a copy of one thread only,
/// and `child` may do more than async-signal-safe work (allocate, take locks), which in a copy
/// of a threaded process can find a lock held forever or a heap half-updated by a thread that
/// is not there.
pub unsafe fn in_fork_child(child: fn()) -> io::Result<bool> {
    // SAFETY: the caller runs no other thread (this function's contract); the child runs
    // `child` and leaves with `_exit`, never returning into the parent's code.
    match unsafe { libc::fork() } {
        0 => {
            child();
            // SAFETY: _exit is always safe to call.
            unsafe { libc::_exit(0) }
        }
        pid if pid > 0 => {
            let status = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None)
                .map_err(io::Error::from)?;
            Ok(matches!(status, nix::sys::wait::WaitStatus::Exited(_, 0)))
        }
        _ => Err(io::Error::last_os_error()),
    }
}
