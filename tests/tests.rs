//! Integration tests: the real binary, the real kernel (ptrace, userfaultfd, /proc), and
//! workloads that report their own truth from /proc/self/pagemap.

mod util;

mod as_untraced;
mod attach;
mod bad_input;
mod browser;
mod check;
mod diff;
mod docs;
mod doctor;
mod export;
mod failures;
mod fleet;
mod foreign;
mod hostile;
mod jit;
mod lifecycle;
mod memory;
mod page;
mod paths;
mod pressure;
mod process_order;
mod raw_thread;
mod records;
mod replay;
mod report;
mod report_page;
mod scan;
mod select;
mod serve;
mod serve_page;
mod sites;
mod stream;
mod stress;
mod thread_names;
mod verify;
