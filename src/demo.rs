//! The workload behind `mevi-actors demo`: a small multithreaded program shipped inside the
//! binary (it runs as `mevi-actors __demo-workload` under the tracer), so that a new user sees a
//! real trace with nothing else installed.

use std::hint::black_box;

const PAGE: usize = 4096;

fn map(len: usize) -> *mut u8 {
    // SAFETY: a fresh private anonymous mapping; the pointer is only used within `len`.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED, "mmap failed");
    p.cast()
}

fn touch(p: *mut u8, pages: usize, write: bool) {
    for i in 0..pages {
        // SAFETY: page i lies inside a mapping of at least `pages` pages.
        unsafe {
            let at = p.add(i * PAGE);
            if write {
                std::ptr::write_volatile(at, i as u8);
            } else {
                black_box(std::ptr::read_volatile(at));
            }
        }
    }
}

/// Four threads each map 4 MiB, write half of it, read a quarter, drop a quarter with
/// MADV_DONTNEED and unmap the rest; the main thread grows a Vec and forks a child that touches
/// memory of its own. Returns the exit status.
pub fn workload() -> i32 {
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                let pages = 1024;
                let p = map(pages * PAGE);
                touch(p, pages / 2, true);
                // SAFETY: offsets stay inside the mapping of `pages` pages.
                unsafe {
                    touch(p.add(pages / 2 * PAGE), pages / 4, false);
                    libc::madvise(p.cast(), pages / 4 * PAGE, libc::MADV_DONTNEED);
                    libc::munmap(p.add(pages * 3 / 4 * PAGE).cast(), pages / 4 * PAGE);
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
    let v: Vec<u8> = vec![1; 8 << 20];
    black_box(&v);
    // SAFETY: the child only touches memory and calls _exit.
    match unsafe { libc::fork() } {
        0 => {
            let p = map(256 * PAGE);
            touch(p, 256, true);
            unsafe { libc::_exit(0) }
        }
        child if child > 0 => {
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(child, &mut status, 0) };
            println!("demo workload: 4 threads and a fork child done");
            0
        }
        _ => 1,
    }
}
