//! The workload behind `mevi-actors demo`: a small multithreaded program shipped inside the
//! binary (it runs as `mevi-actors __demo-workload` under the tracer), so that a new user sees a
//! real trace with nothing else installed.

use std::hint::black_box;
use std::io;

use crate::kernel::anon_memory::{AnonMapping, in_fork_child_alone};

/// One thread's share: map 4 MiB, write half of it, read a quarter, drop a quarter with
/// MADV_DONTNEED and unmap the rest.
fn thread_work() -> io::Result<()> {
    let pages = 1024;
    let mut m = AnonMapping::new(pages)?;
    for i in 0..pages / 2 {
        m.write(i, i as u8);
    }
    for i in pages / 2..pages * 3 / 4 {
        black_box(m.read(i));
    }
    m.discard_first(pages / 4)?;
    m.unmap_from(pages * 3 / 4)?;
    // The rest stays mapped until the process ends, as a leak would.
    std::mem::forget(m);
    Ok(())
}

/// The fork child's share: 256 pages of its own, all written.
fn child_work() {
    if let Ok(mut m) = AnonMapping::new(256) {
        for i in 0..256 {
            m.write(i, 1);
        }
        std::mem::forget(m);
    }
}

/// Four threads each map 4 MiB, write half of it, read a quarter, drop a quarter with
/// MADV_DONTNEED and unmap the rest; the main thread grows a Vec and forks a child that touches
/// memory of its own. Returns the exit status.
pub fn workload() -> i32 {
    // Named, as a program's workers often are: each names itself (a `thread_name` line).
    let threads: Vec<_> = (0..4)
        .map(|i| {
            std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(thread_work)
        })
        .collect();
    for t in threads {
        let done = match t {
            Ok(t) => t.join().unwrap_or(Ok(())),
            Err(e) => Err(e),
        };
        if let Err(e) = done {
            crate::to_stderr!("demo workload: {e}");
            return 1;
        }
    }
    let v: Vec<u8> = vec![1; 8 << 20];
    black_box(&v);
    // Every thread has been joined: the fork copies a process with one thread.
    let forked = in_fork_child_alone(child_work);
    match forked {
        Ok(true) => {
            // Not println!: a reader gone (`demo 2>&1 | head`) is no reason to panic.
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stdout(),
                "demo workload: 4 threads and a fork child done"
            );
            0
        }
        Ok(false) => 1,
        Err(e) => {
            crate::to_stderr!("demo workload: fork: {e}");
            1
        }
    }
}
