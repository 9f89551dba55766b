//! Fault injection for the tests, so that every failure path between the kernel and the stream
//! can be made to happen on a real kernel. Compiled in only with the `test-hooks` feature, which
//! the tests turn on (Cargo.toml) and a release build never has: without it, [`fails`] is a
//! constant `false` and the optimizer removes every hook.
//!
//! `MEVI_TEST_FAULT` lists the failures to inject, comma-separated, each `NAME` or `NAME@SPACE`
//! (only in that space; without `@`, in every space):
//! - `lane-register`: the lane cannot register its userfaultfd with the runtime;
//! - `lane-read`: the lane's first read of its userfaultfd after a first touch fails;
//! - `pagemap`: every read of the space's page tables fails;
//! - `kcmp`: `kcmp` fails (the clone flags alone decide sharing);
//! - `lane-panic`: the lane panics at its first first touch;
//! - `state-panic`: the state actor panics at the first `exit` line;
//! - `checkpoint-impatient`: a checkpoint waits 20 ms, not 2 s, for every thread to stop;
//! - `killed-first`: the program is killed by SIGKILL before its first stop;
//! - `interrupted-first`: the program's child gets a SIGINT before its exec (a Ctrl-C at the
//!   start);
//! - `thp-always`: the tracer takes the machine's transparent huge page policy to be `always`
//!   (every private anonymous range followed by scans), whatever sysfs says;
//! - `perf-kernel`: `--touch-stacks` may not sample kernel-mode faults, nor `--faults records`
//!   record them (as under
//!   `perf_event_paranoid` 2);
//! - `bpf`: `--touch-stacks` cannot load the program that draws its samples (no `CAP_BPF`);
//! - `tiny-record-ring`: `--faults records` gives each thread a ring of one page (128 records)
//!   whose lane is woken only when it is full, so that records are lost;
//! - `slow-release`: under `--faults records`, the tracer waits 20 ms at a release's entry after
//!   its read, so that other threads fault pages there that no read sees.

use crate::event::SpaceId;

/// A point where a test can make mevi-actors fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    LaneRegister,
    LaneRead,
    Pagemap,
    Kcmp,
    LanePanic,
    StatePanic,
    CheckpointImpatient,
    KilledFirst,
    InterruptedFirst,
    ThpAlways,
    PerfKernel,
    Bpf,
    /// The kernel log cannot be read: OOM kills are told by the cgroups' counts alone.
    NoKernelLog,
    TinyRecordRing,
    SlowRelease,
}

#[cfg(feature = "test-hooks")]
impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::LaneRegister => "lane-register",
            Fault::LaneRead => "lane-read",
            Fault::Pagemap => "pagemap",
            Fault::Kcmp => "kcmp",
            Fault::LanePanic => "lane-panic",
            Fault::StatePanic => "state-panic",
            Fault::CheckpointImpatient => "checkpoint-impatient",
            Fault::KilledFirst => "killed-first",
            Fault::InterruptedFirst => "interrupted-first",
            Fault::ThpAlways => "thp-always",
            Fault::PerfKernel => "perf-kernel",
            Fault::Bpf => "bpf",
            Fault::NoKernelLog => "no-kernel-log",
            Fault::TinyRecordRing => "tiny-record-ring",
            Fault::SlowRelease => "slow-release",
        }
    }
}

/// Whether the test asked for `fault` in `space` (None: a fault that belongs to no space).
#[cfg(feature = "test-hooks")]
pub fn fails(fault: Fault, space: Option<SpaceId>) -> bool {
    use std::sync::OnceLock;
    static ASKED: OnceLock<Vec<(String, Option<SpaceId>)>> = OnceLock::new();
    let asked = ASKED.get_or_init(|| {
        std::env::var("MEVI_TEST_FAULT")
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| match s.split_once('@') {
                Some((name, at)) => (name.to_string(), at.parse().ok()),
                None => (s.to_string(), None),
            })
            .collect()
    });
    asked
        .iter()
        .any(|(name, at)| name == fault.name() && (at.is_none() || *at == space))
}

#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn fails(_fault: Fault, _space: Option<SpaceId>) -> bool {
    false
}
