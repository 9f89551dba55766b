//! mevi-stream: the stream mevi-actors writes and what reads it. `event` is its lines (the
//! schema, docs/schema.md), `model` the replay every reader applies them to, `query` the modes
//! of `mevi-actors replay`, `report` the HTML page (`report`, `run --report`) and the live one
//! (`run --serve`). No kernel code: a stream is read and drawn on any Unix, not only where it
//! was traced.

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

pub mod check;
pub mod diff;
pub mod event;
pub mod export;
pub mod model;
pub mod query;
pub mod report;
