//! The kernel's numbers that several files of this module share: ioctl requests, ptrace
//! options, audit architectures. A leaf: it names no other file here, so that a file needing a
//! number never depends on the file that happens to use it most (that once made
//! inject → ptrace → spawn → uffd → inject a cycle).

use nix::sys::ptrace::Options;

/// The `ioctl` request by which a program registers a range with its own userfaultfd.
pub const UFFDIO_REGISTER: u32 = userfaultfd_sys::UFFDIO_REGISTER;

/// The `ioctl` request by which a program's own userfaultfd moves pages from one range of its
/// memory to another (Linux 6.8): `_IOWR(UFFDIO, _UFFDIO_MOVE, struct uffdio_move)`; the
/// `userfaultfd` crate predates it, and `linux-raw-sys` has its parts but not the request.
pub const UFFDIO_MOVE: u32 = nix::request_code_readwrite!(
    linux_raw_sys::general::UFFDIO,
    linux_raw_sys::general::_UFFDIO_MOVE,
    std::mem::size_of::<linux_raw_sys::general::uffdio_move>()
) as u32;

/// `USERFAULTFD_IOC_NEW`, `_IO(0xAA, 0x00)` of `<linux/userfaultfd.h>` (Linux 6.1): a new
/// userfaultfd from `/dev/userfaultfd`.
pub const USERFAULTFD_IOC_NEW: u64 = 0xaa00;

/// `AUDIT_ARCH_X86_64`: what `seccomp_data.arch` and `PTRACE_GET_SYSCALL_INFO` say of a 64-bit
/// syscall (not `int $0x80`, whose numbers are another ABI's).
pub const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

/// The ptrace options of every traced thread, whether started by us or seized later.
pub const TRACE_OPTIONS: Options = Options::PTRACE_O_TRACESYSGOOD
    .union(Options::PTRACE_O_TRACEFORK)
    .union(Options::PTRACE_O_TRACEVFORK)
    .union(Options::PTRACE_O_TRACECLONE)
    .union(Options::PTRACE_O_TRACEEXEC)
    .union(Options::PTRACE_O_TRACEEXIT)
    .union(Options::PTRACE_O_TRACEVFORKDONE)
    .union(Options::PTRACE_O_TRACESECCOMP)
    .union(Options::PTRACE_O_EXITKILL);
