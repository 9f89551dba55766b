//! Kernel plumbing the actors call: ptrace injection, userfaultfd ioctls, /proc parsing, and
//! starting the traced program. The `unsafe` of the crate lives here, each block with the
//! invariant it relies on (none outside it: the demo forks through `anon_memory`'s safe
//! `in_fork_child_alone`, which checks the contract of the unsafe `in_fork_child` itself). It
//! names nothing above it (what it finds, e.g. an OOM kill, is a
//! type of its own that the actors turn into the stream's), and the numbers of the kernel's
//! ABI that several of its files share live in `abi`, which names none of them.

// Every `unsafe` block says, in a `// SAFETY:` comment, why what it relies on holds.
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod abi;
pub mod anon_memory;
pub mod attach;
pub mod bpf;
pub mod fault_records;
pub mod host;
pub mod idle;
pub mod inject;
pub mod oom;
pub mod perf;
pub mod procfs;
pub mod ptrace;
pub mod rehearsal;
pub mod seccomp_filters;
pub mod signals;
pub mod spawn;
pub mod stack;
pub mod syscall;
pub mod thp;
pub mod tick;
pub mod uffd;
pub mod vmas;

/// A length or address rounded up to a page as the kernel's `PAGE_ALIGN` does, wrap included
/// (`mremap` accepts an old size that wraps to 0).
pub fn page_align(n: u64, page_size: u64) -> u64 {
    n.wrapping_add(page_size - 1) & !(page_size - 1)
}

/// The whole pages a byte range touches (the kernel acts on whole pages; an argument may be
/// unaligned).
pub fn whole_pages(range: std::ops::Range<u64>, page_size: u64) -> std::ops::Range<u64> {
    range.start & !(page_size - 1)..page_align(range.end, page_size)
}

/// Descriptors are handed out lowest first: a descriptor held per thread (a perf event's)
/// landing at or above the first figure means that fewer than a quarter of the limit (and at
/// least 64) are left for the trace itself (a userfaultfd and `/proc` files per space, code
/// files). With the limit itself.
pub fn fd_ceiling() -> (i32, i32) {
    use nix::sys::resource::{Resource, getrlimit};
    let limit = getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(soft, _)| soft);
    let limit = i32::try_from(limit).unwrap_or(i32::MAX);
    (limit - (limit / 4).max(64), limit)
}

/// The size of a page.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as u64,
        _ => 4096,
    }
}
