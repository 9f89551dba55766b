//! The kernel's own figures beside the stream's pages (`rss` lines); memory under pressure.

use std::ffi::OsString;
use std::time::Duration;

use mevi_actors::event::Event;

use crate::util::{trace_within, workload};

const HANG: Duration = Duration::from_secs(120);

/// Every sample period, each process's memory by the kernel's count (`rss` lines), in any
/// mode: after a program has written private and shared memory and read a file, then slept,
/// its last `rss` line says what it then reads from its own `/proc/self/status`.
#[test]
fn rss_lines_say_what_the_kernel_counts() {
    let file = crate::util::scratch("rss_kinds.data");
    let program: Vec<OsString> = vec![workload("rss_kinds").into(), file.clone().into()];
    for how in ["uffd", "scan"] {
        let t = trace_within(&["--faults", how, "--sample-ms", "5"], &program, HANG);
        assert_eq!(t.status, 0, "{how}: {}", t.stderr);
        let said: Vec<i64> = t
            .stdout
            .split_whitespace()
            .skip(1)
            .map(|n| n.parse().unwrap())
            .collect();
        let last = t
            .lines
            .iter()
            .filter_map(|l| match l.event {
                Event::Rss {
                    anon,
                    file,
                    shmem,
                    swap,
                    ..
                } => Some([anon, file, shmem, swap].map(|n| n as i64)),
                _ => None,
            })
            .next_back()
            .unwrap_or_else(|| panic!("{how}: no rss line"));
        // The program reads its figures a moment after the sample: a few pages may differ.
        for (i, kind) in ["anon", "file", "shmem", "swap"].into_iter().enumerate() {
            assert!(
                (last[i] - said[i]).abs() <= 128 << 10,
                "{how}: {kind}: the last rss line says {}, the program read {}",
                last[i],
                said[i]
            );
        }
        assert!(
            said[0] >= 8 << 20 && said[2] >= 4 << 20 && said[1] >= 2 << 20,
            "{said:?}"
        );
    }
}
