//! Keeping idle CPUs polling instead of halting, through the PM QoS CPU latency request
//! (`/dev/cpu_dma_latency`): while the file is open with 0 written to it, cpuidle only picks
//! states with no exit latency, which is the polling loop. A task woken on such a CPU needs no
//! interrupt to be run, and on a virtual machine no exit to the host: a fault handed between the
//! program and a lane on another CPU costs a fraction of what it does when that CPU halted
//! (docs/performance.md).

use std::fs::File;
use std::io::{self, Write};

/// Held for as long as idle CPUs must poll; dropping it (closing the file) lifts the request.
#[derive(Debug)]
pub struct IdlePolling {
    _request: File,
}

impl IdlePolling {
    pub fn hold() -> io::Result<Self> {
        let mut request = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/cpu_dma_latency")?;
        // The request is a binary s32 in microseconds (Documentation/power/pm_qos_interface.rst).
        request.write_all(&0i32.to_ne_bytes())?;
        Ok(Self { _request: request })
    }
}
