//! The userfaultfd of one address space, as mevi-actors uses it: handshake, registration, and
//! resolving first touches. The descriptor was created inside the tracee (its mm is the tracee's)
//! and fetched with `pidfd_getfd`; every ioctl here acts on the tracee's memory.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use libc::c_void;
use userfaultfd::{Error as UffdError, Event as UffdEvent, EventBuffer, ReadWrite, Uffd};
use userfaultfd_sys as sys;

/// Features asked of the kernel. `EVENT_FORK` is left out on purpose: its new descriptor cannot
/// be matched to a child when two threads fork at once, so each fork child gets a descriptor of
/// its own, injected before it runs (docs/architecture.md).
pub const FEATURES: u64 = sys::UFFD_FEATURE_THREAD_ID
    | sys::UFFD_FEATURE_EVENT_REMAP
    | sys::UFFD_FEATURE_EVENT_REMOVE
    | sys::UFFD_FEATURE_EVENT_UNMAP;

nix::ioctl_readwrite!(uffdio_api, sys::UFFDIO, sys::_UFFDIO_API, sys::uffdio_api);

/// A message read from the descriptor, with plain addresses (the crate's carry raw pointers,
/// which may not cross an `.await`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UffdMessage {
    Fault {
        addr: u64,
        write: bool,
        tid: i32,
    },
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
    /// The address space is gone (`ESRCH`).
    Gone,
}

#[derive(Debug)]
pub struct AddressSpaceUffd {
    uffd: Uffd,
    page_size: u64,
    zeros: Vec<u8>,
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
            zeros: vec![0u8; page_size as usize],
        })
    }

    /// Registers `[start, end)` for missing-page faults. Fails for memory userfaultfd cannot
    /// follow (shared file pages, hugetlb without support, `VM_DROPPABLE`, no `VM_MAYWRITE`).
    pub fn register(&self, start: u64, end: u64) -> io::Result<()> {
        self.uffd
            .register(start as *mut c_void, (end - start) as usize)
            .map(drop)
            .map_err(|e| uffd_io_error(e, "UFFDIO_REGISTER"))
    }

    /// Resolves a first touch of `page` as the kernel would: a read maps the shared zero page,
    /// a write gets a fresh zeroed page. On refusal the thread is woken so that it faults again
    /// if the page is still missing: no thread is ever left asleep.
    pub fn resolve(&self, page: u64, write: bool) -> Resolution {
        let len = self.page_size as usize;
        let dst = page as *mut c_void;
        // SAFETY: both ioctls write only into the tracee's registered range (kernel-checked);
        // `zeros` is a live page-sized buffer of ours that COPY only reads.
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

    /// Reads what is pending without blocking (the descriptor is `O_NONBLOCK`). An empty result
    /// means nothing was pending.
    pub fn read_pending(
        &self,
        buf: &mut EventBuffer,
        out: &mut Vec<UffdMessage>,
    ) -> io::Result<()> {
        let events = self
            .uffd
            .read_events(buf)
            .map_err(|e| uffd_io_error(e, "read"))?;
        for event in events {
            let event = event.map_err(|e| uffd_io_error(e, "read"))?;
            out.push(match event {
                UffdEvent::Pagefault {
                    addr,
                    rw,
                    thread_id,
                    ..
                } => UffdMessage::Fault {
                    addr: addr as u64 & !(self.page_size - 1),
                    write: rw == ReadWrite::Write,
                    tid: thread_id.as_raw(),
                },
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
        Ok(())
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

/// Whether this process may create a userfaultfd that also sees kernel-mode faults (the tracee
/// runs with our credentials, so its injected `userfaultfd()` gets the same answer).
pub fn permitted() -> io::Result<()> {
    // SAFETY: plain syscall with flags only; the result is a new fd we close at once.
    let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | libc::O_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned to us and is owned by nobody else.
    drop(unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
    Ok(())
}
