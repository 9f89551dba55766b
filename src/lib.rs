//! mevi-actors: trace every change to the address spaces of a Linux process tree as one ordered
//! stream of JSON lines. See README.md for use, docs/ for the design.

#![deny(unsafe_code)]

pub mod actors;
pub mod demo;
pub mod event;
/// Kernel plumbing: the one place `unsafe` is allowed, each block with its invariant.
#[allow(unsafe_code)]
pub mod kernel;
pub mod model;
pub mod query;
pub mod run;
pub mod test_hooks;
pub mod verify;
