//! The four actors of a trace (docs/architecture.md):
//!
//! ```text
//!  tracer (OS thread) ──LaneMessage──▶ lane (one per address space) ──Stamped──▶ sequencer ──Line──▶ state ──▶ stream
//! ```
//!
//! Every channel is bounded and points one way, so there is no cycle to deadlock on; a slow
//! reader of the stream slows the traced program, and nothing is dropped.
//!
//! What goes the other way (a lost stream, a signal's request to detach or stop) is not a
//! message: it is set in the run's control (control.rs), which the tracer reads at each wake-up.

pub mod control;
pub mod lane;
pub mod sequencer;
pub mod state;
pub mod supervisor;
pub mod symbolizer;
pub mod tracer;
