//! The userfaultfd of one address space, as mevi-actors uses it: handshake, registration,
//! resolving first touches, and releasing it when its lane can no longer read it. The descriptor
//! was created inside the tracee (its mm is the tracee's) and fetched with `pidfd_getfd`; every
//! ioctl here acts on the tracee's memory.
//!
//! **Release.** The kernel drops a userfaultfd context when the last reference to its *file*
//! goes (`userfaultfd_release()` in fs/userfaultfd.c): it marks the context released,
//! unregisters every range registered with it (under the mm's write lock), wakes every thread
//! waiting on a fault or on an event, and a thread that faults there again faults natively. So
//! [`AddressSpaceUffd::release`] puts `/dev/null` (or an eventfd) over the descriptor's number
//! (`dup3`, atomic: the number is never free for another file to take), which drops our one
//! reference to the file at once, even though other `Arc`s still hold this object. The lane's
//! [`UffdPoller`] must be gone first: tokio requires a registered number to keep its file. An
//! ioctl already running on the old file holds a reference of its own (`fdget` takes one in a
//! multithreaded process), so it finishes on the userfaultfd and the release follows it; any
//! ioctl that starts after lands on the placeholder and fails (`ENOTTY`), and `register` and
//! `resolve` check the flag first anyway.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use libc::c_void;
use tokio::io::Interest;
use tokio::io::unix::{AsyncFd, AsyncFdReadyGuard};
use userfaultfd::{Error as UffdError, Event as UffdEvent, EventBuffer, ReadWrite, Uffd};
use userfaultfd_sys as sys;

use super::abi::USERFAULTFD_IOC_NEW;

/// Features asked of the kernel. `EVENT_FORK` is left out on purpose: its new descriptor cannot
/// be matched to a child when two threads fork at once, so each fork child gets a descriptor of
/// its own, injected before it runs (docs/architecture.md).
pub const FEATURES: u64 = sys::UFFD_FEATURE_THREAD_ID
    | sys::UFFD_FEATURE_EVENT_REMAP
    | sys::UFFD_FEATURE_EVENT_REMOVE
    | sys::UFFD_FEATURE_EVENT_UNMAP;

nix::ioctl_readwrite!(uffdio_api, sys::UFFDIO, sys::_UFFDIO_API, sys::uffdio_api);

/// A first touch of a registered page, waiting to be resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageFault {
    /// The page (aligned down).
    pub addr: u64,
    pub write: bool,
    pub tid: i32,
}

/// A message read from the descriptor, with plain addresses (the crate's carry raw pointers,
/// which may not cross an `.await`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UffdMessage {
    Fault(PageFault),
    Remap {
        from: u64,
        to: u64,
        len: u64,
    },
    Remove {
        start: u64,
        end: u64,
    },
    Unmap {
        start: u64,
        end: u64,
    },
    /// `EVENT_FORK` is never asked for; kept so that nothing read is dropped unseen.
    Fork,
}

/// What became of one first touch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The kernel mapped our page: the page is now present.
    Resolved,
    /// The kernel refused (`EAGAIN`: a layout change in flight; `ENOENT`: no longer registered;
    /// `EEXIST`: already present). The thread was woken to fault again if it still needs to.
    Refused(i32),
    /// The address space is gone (`ESRCH`), or the descriptor was released.
    Gone,
}

#[derive(Debug)]
pub struct AddressSpaceUffd {
    uffd: Uffd,
    page_size: u64,
    /// A page of zeros, shared by every space (COPY only reads it).
    zeros: &'static [u8],
    /// Set by [`Self::release`]: the descriptor's number is `/dev/null` now.
    released: AtomicBool,
    /// A [`UffdPoller`] has it registered with the runtime: it may not be released meanwhile.
    polled: AtomicBool,
}

/// The page of zeros every space's writes are filled from (one page size per machine).
fn shared_zeros(page_size: u64) -> &'static [u8] {
    static ZEROS: std::sync::OnceLock<Box<[u8]>> = std::sync::OnceLock::new();
    ZEROS.get_or_init(|| vec![0u8; page_size as usize].into_boxed_slice())
}

impl AsRawFd for AddressSpaceUffd {
    fn as_raw_fd(&self) -> RawFd {
        self.uffd.as_raw_fd()
    }
}

impl AddressSpaceUffd {
    /// Takes ownership of a fresh descriptor and does the `UFFDIO_API` handshake.
    pub fn handshake(fd: OwnedFd, page_size: u64) -> io::Result<Self> {
        let mut api = sys::uffdio_api {
            api: sys::UFFD_API,
            features: FEATURES,
            ioctls: 0,
        };
        // SAFETY: `api` is a valid uffdio_api the kernel reads and writes back; `fd` is open.
        unsafe { uffdio_api(fd.as_raw_fd(), &mut api) }.map_err(|e| {
            io::Error::new(
                io::Error::from(e).kind(),
                format!("UFFDIO_API with features {FEATURES:#x}: {e}"),
            )
        })?;
        use std::os::fd::IntoRawFd;
        // SAFETY: we own `fd` and hand that ownership to `Uffd`, which closes it on drop.
        let uffd = unsafe { Uffd::from_raw_fd(fd.into_raw_fd()) };
        Ok(Self {
            uffd,
            page_size,
            zeros: shared_zeros(page_size),
            released: AtomicBool::new(false),
            polled: AtomicBool::new(false),
        })
    }

    /// Registers `[start, end)` for missing-page faults. Fails for memory userfaultfd cannot
    /// follow (shared file pages, hugetlb without support, `VM_DROPPABLE`, no `VM_MAYWRITE`),
    /// and once the descriptor is released.
    pub fn register(&self, start: u64, end: u64) -> io::Result<()> {
        if self.is_released() {
            return Err(io::Error::other(
                "UFFDIO_REGISTER: the userfaultfd was released (its lane could not read it)",
            ));
        }
        self.uffd
            .register(start as *mut c_void, (end - start) as usize)
            .map(drop)
            .map_err(|e| uffd_io_error(e, "UFFDIO_REGISTER"))
    }

    /// Stops following `[start, end)`: its faults are the kernel's own again. The kernel wakes any
    /// thread waiting on a fault there; a later resolution of such a fault by the lane is refused
    /// (`ENOENT`), so no line claims it.
    pub fn unregister(&self, start: u64, end: u64) -> io::Result<()> {
        if self.is_released() {
            return Ok(());
        }
        self.uffd
            .unregister(start as *mut c_void, (end - start) as usize)
            .map_err(|e| uffd_io_error(e, "UFFDIO_UNREGISTER"))
    }

    /// Resolves a first touch of `page` as the kernel would: a read maps the shared zero page,
    /// a write gets a fresh zeroed page. On refusal the thread is woken so that it faults again
    /// if the page is still missing: no thread is ever left asleep.
    pub fn resolve(&self, page: u64, write: bool) -> Resolution {
        if self.is_released() {
            return Resolution::Gone;
        }
        let len = self.page_size as usize;
        let dst = page as *mut c_void;
        // SAFETY: both ioctls write only into the tracee's registered range (kernel-checked);
        // `zeros` is a static page-sized buffer of ours that COPY only reads.
        let result = unsafe {
            if write {
                self.uffd
                    .copy(self.zeros.as_ptr() as *const c_void, dst, len, true)
            } else {
                self.uffd.zeropage(dst, len, true)
            }
        };
        let errno = match result {
            Ok(n) if n == len => return Resolution::Resolved,
            Ok(_) | Err(UffdError::PartiallyCopied(_)) => libc::EAGAIN,
            Err(UffdError::CopyFailed(e)) | Err(UffdError::ZeropageFailed(e)) => e as i32,
            Err(UffdError::SystemError(e)) => e as i32,
            Err(_) => libc::EINVAL,
        };
        if errno == libc::ESRCH {
            return Resolution::Gone;
        }
        // UFFDIO_WAKE has no mmap_changing check and needs no VMA: it cannot fail for a reason
        // that would leave the thread asleep while the mm lives.
        let _ = self.uffd.wake(dst, len);
        Resolution::Refused(errno)
    }

    /// Leaves `page` as it is and wakes the thread waiting on it, as a refused fill would
    /// (`EEXIST`): it faults again on what is there (a guard marker: SIGSEGV).
    pub fn wake_unfilled(&self, page: u64) -> Resolution {
        if self.is_released() {
            return Resolution::Gone;
        }
        // As in `resolve`: UFFDIO_WAKE cannot fail for a reason that leaves the thread asleep.
        let _ = self.uffd.wake(page as *mut c_void, self.page_size as usize);
        Resolution::Refused(libc::EEXIST)
    }

    /// Reads what is pending without blocking (the descriptor is `O_NONBLOCK`). An empty result
    /// means nothing was pending. On an error, what was read is in `out` all the same: it is off
    /// the kernel's queue, and its threads wait until it is handled (or the descriptor released).
    pub fn read_pending(
        &self,
        buf: &mut EventBuffer,
        out: &mut Vec<UffdMessage>,
    ) -> io::Result<()> {
        let events = self
            .uffd
            .read_events(buf)
            .map_err(|e| uffd_io_error(e, "read"))?;
        let mut failed = None;
        for event in events {
            let event = match event {
                Ok(event) => event,
                Err(e) => {
                    // A message we cannot decode: keep the others, and say so once done.
                    failed.get_or_insert(uffd_io_error(e, "decoding a message read"));
                    continue;
                }
            };
            out.push(match event {
                UffdEvent::Pagefault {
                    addr,
                    rw,
                    thread_id,
                    ..
                } => UffdMessage::Fault(PageFault {
                    addr: addr as u64 & !(self.page_size - 1),
                    write: rw == ReadWrite::Write,
                    tid: thread_id.as_raw(),
                }),
                UffdEvent::Remap { from, to, len } => UffdMessage::Remap {
                    from: from as u64,
                    to: to as u64,
                    len: len as u64,
                },
                UffdEvent::Remove { start, end } => UffdMessage::Remove {
                    start: start as u64,
                    end: end as u64,
                },
                UffdEvent::Unmap { start, end } => UffdMessage::Unmap {
                    start: start as u64,
                    end: end as u64,
                },
                UffdEvent::Fork { .. } => UffdMessage::Fork,
            });
        }
        failed.map_or(Ok(()), Err)
    }

    /// Lets go of the userfaultfd for good, now, though other `Arc`s still hold this object: the
    /// kernel unregisters every range and wakes every waiting thread, and the program's threads
    /// fault natively from then on (see the module doc). Afterwards `register` fails and
    /// `resolve` says `Gone`. Refused while a [`UffdPoller`] lives: the runtime's registration
    /// must end before the number means another file. Idempotent.
    pub fn release(&self) -> io::Result<()> {
        if self.polled.load(Ordering::SeqCst) {
            return Err(io::Error::other(
                "releasing the userfaultfd: still polled (drop its poller first)",
            ));
        }
        if self.released.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let null = placeholder()?;
        // SAFETY: both descriptors are open and ours: `null` just opened, and the userfaultfd's
        // number is owned by `self.uffd`, which lives as long as `self` and closes that number
        // (now `/dev/null`) on drop. dup3 replaces the number atomically, so no other file can
        // take it meanwhile, and it drops our reference to the userfaultfd's file; an ioctl in
        // flight on it holds its own reference and finishes first (module doc).
        let rc = unsafe { libc::dup3(null.as_raw_fd(), self.uffd.as_raw_fd(), libc::O_CLOEXEC) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("releasing the userfaultfd: dup3 over it: {e}"),
            ));
        }
        Ok(())
    }

    /// Whether a message waits to be read: a fault raised (or an event) that the lane has not
    /// read yet. Never for a released descriptor (its number is a placeholder, always readable).
    pub fn has_pending(&self) -> bool {
        if self.is_released() {
            return false;
        }
        let mut pollfd = libc::pollfd {
            fd: self.uffd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd of ours, on a descriptor `self.uffd` owns; a timeout of 0 only asks.
        let n = unsafe { libc::poll(&mut pollfd, 1, 0) };
        n > 0 && pollfd.revents & libc::POLLIN != 0
    }

    /// Whether [`Self::release`] was called.
    pub fn is_released(&self) -> bool {
        self.released.load(Ordering::SeqCst)
    }
}

/// The read side of a space's userfaultfd, registered with the tokio runtime so that its lane
/// can wait until it is readable. One at a time per descriptor; dropping it deregisters the
/// descriptor, after which it may be released.
#[derive(Debug)]
pub struct UffdPoller {
    fd: Option<AsyncFd<SharedUffd>>,
    uffd: Arc<AddressSpaceUffd>,
}

/// The descriptor as the runtime sees it: the `Arc` keeps it open.
#[derive(Debug)]
pub struct SharedUffd(Arc<AddressSpaceUffd>);

impl AsRawFd for SharedUffd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// The descriptor is readable (until `clear_ready`).
pub type Readable<'a> = AsyncFdReadyGuard<'a, SharedUffd>;

impl UffdPoller {
    /// Registers `uffd` with the current tokio runtime for reading. Fails if it is released or
    /// already polled, or if the runtime refuses it.
    pub fn new(uffd: Arc<AddressSpaceUffd>) -> io::Result<Self> {
        if uffd.is_released() {
            return Err(io::Error::other("the userfaultfd was released"));
        }
        if uffd.polled.swap(true, Ordering::SeqCst) {
            return Err(io::Error::other("the userfaultfd is polled already"));
        }
        // SAFETY: tokio requires the number to stay open, on the same file, while the AsyncFd
        // lives. The Arc inside keeps it open (`Uffd` closes it only on drop), and the one thing
        // that puts another file on the number, `release`, is refused while `polled` is set,
        // which `Drop` clears only after the AsyncFd is gone.
        let registered = unsafe {
            AsyncFd::register_with_interest(SharedUffd(uffd.clone()), Interest::READABLE)
        };
        match registered {
            Ok(fd) => Ok(Self { fd: Some(fd), uffd }),
            Err(e) => {
                uffd.polled.store(false, Ordering::SeqCst);
                let e = io::Error::from(e);
                Err(io::Error::new(
                    e.kind(),
                    format!("registering the userfaultfd with the runtime: {e}"),
                ))
            }
        }
    }

    /// Waits until the descriptor may be readable.
    pub async fn readable(&self) -> io::Result<Readable<'_>> {
        match &self.fd {
            Some(fd) => fd.readable().await,
            None => std::future::pending().await,
        }
    }
}

impl Drop for UffdPoller {
    fn drop(&mut self) {
        drop(self.fd.take());
        self.uffd.polled.store(false, Ordering::SeqCst);
    }
}

fn uffd_io_error(e: UffdError, what: &str) -> io::Error {
    let errno = match &e {
        UffdError::SystemError(n) => *n as i32,
        UffdError::CopyFailed(n) | UffdError::ZeropageFailed(n) => *n as i32,
        _ => libc::EIO,
    };
    io::Error::new(
        io::Error::from_raw_os_error(errno).kind(),
        format!("{what}: {e} ({})", io::Error::from_raw_os_error(errno)),
    )
}

/// A descriptor to put over a released userfaultfd's number: `/dev/null`, or an eventfd where
/// there is no `/dev/null` (a bare container). Any file will do: what matters is that the number
/// stays taken, by a file on which the userfaultfd's ioctls fail.
fn placeholder() -> io::Result<OwnedFd> {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open("/dev/null");
    match null {
        Ok(file) => Ok(file.into()),
        Err(open_error) => {
            // SAFETY: plain syscall with flags only; the result is a new fd owned by nobody else.
            let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
            if fd < 0 {
                let e = io::Error::last_os_error();
                return Err(io::Error::new(
                    e.kind(),
                    format!("releasing the userfaultfd: /dev/null: {open_error}; eventfd: {e}"),
                ));
            }
            // SAFETY: fd was just returned to us and is owned by nobody else.
            Ok(unsafe { OwnedFd::from_raw_fd(fd) })
        }
    }
}

/// `UFFD_USER_MODE_ONLY` (Linux 5.11): a descriptor that sees only faults taken in user mode,
/// which `userfaultfd(2)` gives without privilege.
pub const UFFD_USER_MODE_ONLY: i32 = sys::UFFD_USER_MODE_ONLY as i32;

/// Whether `userfaultfd(2)` gives this process a descriptor with `flags` (besides close-on-exec
/// and non-blocking). Without `UFFD_USER_MODE_ONLY` it takes `CAP_SYS_PTRACE` or
/// `vm.unprivileged_userfaultfd=1`.
pub fn syscall_permitted(flags: i32) -> io::Result<()> {
    let flags = flags | libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: plain syscall with flags only; the result is a new fd we close at once.
    let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned to us and is owned by nobody else.
    drop(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
    Ok(())
}

/// Whether `/dev/userfaultfd` (Linux 6.1) gives this process a descriptor that also sees
/// kernel-mode faults: the device file's mode decides, and no capability is checked.
pub fn device_permitted() -> io::Result<()> {
    let device = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open("/dev/userfaultfd")?;
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: USERFAULTFD_IOC_NEW takes its flags by value and returns a new fd, which we close
    // at once.
    let fd = unsafe { libc::ioctl(device.as_raw_fd(), USERFAULTFD_IOC_NEW as _, flags) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("USERFAULTFD_IOC_NEW: {e}"),
        ));
    }
    // SAFETY: fd was just returned to us and is owned by nobody else.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    Ok(())
}

/// Whether this process may create a userfaultfd that also sees kernel-mode faults, the two ways
/// the tracer's injection tries (`userfaultfd(2)`, then `/dev/userfaultfd` on `EPERM`): the
/// program runs with our credentials, so its injected calls get the same answers, unless our
/// `CAP_SYS_PTRACE` came from file capabilities, which its exec drops (`mevi-actors doctor`
/// rehearses a trace, and sees that too).
pub fn permitted() -> io::Result<()> {
    match syscall_permitted(0) {
        Err(refused) if refused.raw_os_error() == Some(libc::EPERM) => {
            device_permitted().map_err(|why| {
                io::Error::new(
                    refused.kind(),
                    format!("userfaultfd(): {refused}; /dev/userfaultfd: {why}"),
                )
            })
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::kernel::abi::{UFFDIO_MOVE, UFFDIO_REGISTER};
    use crate::kernel::page_size;

    /// A userfaultfd of this test process itself (the tests run as root).
    fn own_uffd() -> AddressSpaceUffd {
        // SAFETY: plain syscall with flags only; the result is a new fd owned by nobody else.
        let fd =
            unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | libc::O_NONBLOCK) };
        assert!(fd >= 0, "userfaultfd: {}", io::Error::last_os_error());
        // SAFETY: fd was just returned to us.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        AddressSpaceUffd::handshake(fd, page_size()).expect("UFFDIO_API")
    }

    /// Touches (reads) one byte at `addr` on a thread of its own; says when done.
    fn touch_on_a_thread(addr: u64) -> mpsc::Receiver<u8> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // SAFETY: `addr` is a page of a private anonymous mapping the test keeps mapped until
            // this thread has reported back (or the test process ends).
            let byte = unsafe { std::ptr::read_volatile(addr as *const u8) };
            let _ = tx.send(byte);
        });
        rx
    }

    /// Whether the descriptor becomes readable within `timeout`.
    fn readable_within(uffd: &AddressSpaceUffd, timeout: Duration) -> bool {
        let mut pfd = libc::pollfd {
            fd: uffd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as i32) };
        n == 1 && pfd.revents & libc::POLLIN != 0
    }

    /// Release wakes a thread whose fault was read but not resolved, and one whose fault was
    /// never read; both then fault natively. Afterwards nothing can be registered or resolved.
    #[test]
    fn release_lets_every_waiting_thread_go_on() {
        let page = page_size();
        // SAFETY: a fresh private anonymous mapping of two pages, unmapped at the end.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * page as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let base = base as u64;
        let uffd = own_uffd();
        uffd.register(base, base + 2 * page).expect("register");

        // The first thread's fault is read (off the kernel's queue), and left unresolved.
        let first = touch_on_a_thread(base);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut read = Vec::new();
        let mut buf = EventBuffer::new(8);
        while read.is_empty() {
            assert!(Instant::now() < deadline, "the first touch never faulted");
            uffd.read_pending(&mut buf, &mut read).expect("read");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            matches!(read[..], [UffdMessage::Fault(PageFault { addr, write: false, .. })] if addr == base),
            "{read:?}"
        );
        // The second thread's fault stays queued.
        let second = touch_on_a_thread(base + page);
        assert!(
            readable_within(&uffd, Duration::from_secs(5)),
            "the second touch never faulted"
        );
        assert!(
            first.try_recv().is_err() && second.try_recv().is_err(),
            "a touch went on unresolved"
        );

        uffd.release().expect("release");
        assert!(uffd.is_released());
        for (which, done) in [("read", first), ("queued", second)] {
            let byte = done.recv_timeout(Duration::from_secs(5));
            assert_eq!(
                byte,
                Ok(0),
                "the thread whose fault was {which} is still asleep"
            );
        }
        assert!(uffd.register(base, base + page).is_err());
        assert_eq!(uffd.resolve(base, true), Resolution::Gone);
        uffd.release().expect("a second release is a no-op");
        // SAFETY: the mapping made above; both threads are done with it.
        unsafe { libc::munmap(base as *mut c_void, 2 * page as usize) };
    }

    // --- issue 11: userfaultfd-sys stood in for from linux-raw-sys ---

    /// The requests the `userfaultfd` crate issues, computed as it computes them (nix's macros
    /// over `UFFDIO`, `_UFFDIO_*` and the structure's size, from our stand-in for
    /// `userfaultfd-sys`), and ours, are the numbers they were with crates.io's bindgen-made
    /// `userfaultfd-sys` 0.6 (the literals, printed from it before the change).
    #[test]
    fn requests_are_the_numbers_of_the_bindgen_binding() {
        use std::mem::size_of;
        let rw = |nr: u64, size: usize| nix::request_code_readwrite!(sys::UFFDIO, nr, size) as u32;
        let r = |nr: u64, size: usize| nix::request_code_read!(sys::UFFDIO, nr, size) as u32;
        let requests = [
            (
                "UFFDIO_API",
                rw(sys::_UFFDIO_API, size_of::<sys::uffdio_api>()),
                0xc018_aa3f,
            ),
            (
                "UFFDIO_REGISTER",
                rw(sys::_UFFDIO_REGISTER, size_of::<sys::uffdio_register>()),
                0xc020_aa00,
            ),
            ("UFFDIO_REGISTER (ours)", UFFDIO_REGISTER, 0xc020_aa00),
            (
                "UFFDIO_UNREGISTER",
                r(sys::_UFFDIO_UNREGISTER, size_of::<sys::uffdio_range>()),
                0x8010_aa01,
            ),
            (
                "UFFDIO_WAKE",
                r(sys::_UFFDIO_WAKE, size_of::<sys::uffdio_range>()),
                0x8010_aa02,
            ),
            (
                "UFFDIO_COPY",
                rw(sys::_UFFDIO_COPY, size_of::<sys::uffdio_copy>()),
                0xc028_aa03,
            ),
            (
                "UFFDIO_ZEROPAGE",
                rw(sys::_UFFDIO_ZEROPAGE, size_of::<sys::uffdio_zeropage>()),
                0xc020_aa04,
            ),
            (
                "UFFDIO_WRITEPROTECT",
                rw(
                    sys::_UFFDIO_WRITEPROTECT,
                    size_of::<sys::uffdio_writeprotect>(),
                ),
                0xc018_aa06,
            ),
            (
                "UFFDIO_CONTINUE",
                rw(sys::_UFFDIO_CONTINUE, size_of::<sys::uffdio_continue>()),
                0xc020_aa07,
            ),
            ("UFFDIO_MOVE (ours)", UFFDIO_MOVE, 0xc028_aa05),
            (
                "USERFAULTFD_IOC_NEW",
                nix::request_code_none!(sys::USERFAULTFD_IOC, 0) as u32,
                0xaa00,
            ),
        ];
        for (name, now, before) in requests {
            assert_eq!(now, before, "{name}: {now:#x}, was {before:#x}");
        }
        // What the crate reads from a message: its size and where the fields are.
        assert_eq!(size_of::<sys::uffd_msg>(), 32);
        assert_eq!(std::mem::offset_of!(sys::uffd_msg, arg), 8);
        assert_eq!(
            (sys::UFFD_API, sys::UFFD_EVENT_PAGEFAULT, FEATURES),
            (0xaa, 0x12, 0x14c)
        );
    }
}
