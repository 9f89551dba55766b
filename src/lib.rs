//! mevi-actors: trace every change to the address spaces of a Linux process tree as one ordered
//! stream of JSON lines. See README.md for use, docs/ for the design.

pub mod actors;
pub mod demo;
pub mod event;
pub mod kernel;
pub mod model;
pub mod run;
pub mod test_hooks;
pub mod verify;
