//! Kernel plumbing the actors call: ptrace injection, userfaultfd ioctls, /proc parsing, and
//! starting the traced program. The `unsafe` of the crate lives here, each block with the
//! invariant it relies on.

pub mod inject;
pub mod procfs;
pub mod spawn;
pub mod tick;
pub mod uffd;
