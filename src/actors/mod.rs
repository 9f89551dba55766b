//! The four actors of a trace (docs/architecture.md):
//!
//! ```text
//!  tracer (OS thread) ──LaneMessage──▶ lane (one per address space) ──Stamped──▶ sequencer ──Line──▶ state ──▶ stream
//! ```
//!
//! Every channel of the pipeline points down it and is bounded, by its capacity or by a budget
//! (the lane's credits, the writer's bytes), so there is no cycle to deadlock on; a slow reader
//! of the stream slows the traced program, and nothing is dropped. The symbolizer's two
//! channels are unbounded: one message per distinct call stack, beside the pipeline.
//!
//! What goes the other way is never a message the tracer must wait for: a check's reply (a
//! one-shot answer the tracer waits on with a deadline, its threads stopped), the threads a
//! lane woke (read from its handle: lane/woken.rs), and a lost stream or a signal's request to
//! detach or stop, set in the run's control (control.rs) and read at each wake-up.

pub mod control;
pub mod lane;
pub mod sequencer;
pub mod state;
pub mod supervisor;
pub mod symbolizer;
pub mod tracer;
