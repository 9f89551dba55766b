//! Integration tests: the real binary, the real kernel (ptrace, userfaultfd, /proc), and
//! workloads that report their own truth from /proc/self/pagemap.

mod util;

mod bad_input;
mod failures;
mod foreign;
mod lifecycle;
mod process_order;
mod memory;
mod stream;
mod stress;
mod verify;
