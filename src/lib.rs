//! mevi-actors: trace every change to the address spaces of a Linux process tree as one ordered
//! stream of JSON lines. See README.md for use, docs/ for the design.

#![deny(unsafe_code)]

/// A line for the user on stderr. Unlike `eprintln!` it never panics: a stderr that has gone
/// (`2>&1 | head`, `2>/dev/full`) must change neither the trace nor the exit status.
#[macro_export]
macro_rules! to_stderr {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod actors;
pub mod demo;
pub mod doctor;
pub mod event;
/// Kernel plumbing: the one place `unsafe` is allowed, each block with its invariant.
#[allow(unsafe_code)]
pub mod kernel;
pub mod model;
pub mod query;
pub mod report;
pub mod run;
pub mod selection;
pub mod stacks;
pub mod test_hooks;
pub mod verify;
