//! Kernel plumbing the actors call: ptrace injection, userfaultfd ioctls, /proc parsing, and
//! starting the traced program. The `unsafe` of the crate lives here, each block with the
//! invariant it relies on.

pub mod idle;
pub mod inject;
pub mod procfs;
pub mod spawn;
pub mod tick;
pub mod uffd;

/// A length or address rounded up to a page as the kernel's `PAGE_ALIGN` does, wrap included
/// (`mremap` accepts an old size that wraps to 0).
pub fn page_align(n: u64, page_size: u64) -> u64 {
    n.wrapping_add(page_size - 1) & !(page_size - 1)
}
