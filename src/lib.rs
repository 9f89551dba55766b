//! mevi-actors: trace every change to the address spaces of a Linux process tree as one ordered
//! stream of JSON lines. See README.md for use, docs/ for the design.

#![deny(unsafe_code)]

// The stream and its readers are a crate of their own (stream/), kernel-free; they keep their
// paths here (`crate::event`, `mevi_actors::report`), as does the stderr macro they share.
pub use mevi_stream::{check, diff, event, export, model, query, report, to_stderr};

pub mod actors;
pub mod demo;
pub mod doctor;
/// Kernel plumbing: the one place `unsafe` is allowed, each block with its invariant.
#[allow(unsafe_code)]
pub mod kernel;
pub mod run;
pub mod selection;
pub mod stacks;
pub mod test_hooks;
pub mod verify;

/// The stream's readers name Linux's bits and signals without the kernel's headers; here, where
/// those headers are, they are checked to be the same.
#[cfg(test)]
mod stream_abi {
    #[test]
    fn prot_bits_are_the_kernels() {
        let prot = |bits: libc::c_int| crate::event::prot_string(bits as u64);
        assert_eq!(prot(libc::PROT_READ), "r--");
        assert_eq!(prot(libc::PROT_WRITE), "-w-");
        assert_eq!(prot(libc::PROT_EXEC), "--x");
        assert_eq!(prot(libc::PROT_NONE), "---");
    }

    #[test]
    fn signal_names_are_the_kernels() {
        for sig in -1..=70 {
            let kernel = nix::sys::signal::Signal::try_from(sig)
                .map(|s| s.as_str().to_string())
                .unwrap_or_else(|_| format!("SIG{sig}"));
            assert_eq!(crate::event::signal_name(sig), kernel);
        }
    }
}
