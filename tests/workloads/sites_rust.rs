//! sites_rust.rs - a Rust program (debug info on) whose named function allocates an 8 MiB
//! `Vec`, for `run --stacks` (issue 13). Built with `rustc --edition 2021 -g -C opt-level=1`, no
//! crates.
//!
//! `make_buffers` allocates `vec![1u8; 8 MiB]`: std's allocator calls glibc's malloc, which
//! mmaps a chunk of its own (the block is past glibc's mmap threshold), and the fill writes
//! every page (so transparent huge pages could not make more of it present). The buffer is
//! kept to the end.
//!
//! Truth, one line on stdout once the buffer is written:
//!   {"truth":"site","pid":P,"name":"make_buffers","call":"vec","file":"sites_rust.rs",
//!    "line":L,"first_line":F,"last_line":Z,"start":S,"end":E,"present":N,"kept":1}
//! L: the line of the `vec!`; [F,Z]: the function's lines; [S,E): the chunk glibc mapped (its
//! 16-byte header, then `malloc_usable_size` bytes); N: its pages present in
//! /proc/self/pagemap.

use std::ffi::c_void;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;

const PAGE: usize = 4096;
const BYTES: usize = 8 << 20;

unsafe extern "C" {
    fn malloc_usable_size(p: *mut c_void) -> usize;
}

const FIRST_LINE: u32 = line!() + 2;
#[inline(never)]
fn make_buffers() -> (Vec<u8>, u32) {
    let buffer = vec![1u8; BYTES];
    let line = line!() - 1;
    (buffer, line)
}
const LAST_LINE: u32 = line!() - 1;

/// The chunk glibc mapped for `buffer`.
fn chunk(buffer: &mut [u8]) -> (usize, usize) {
    let p = buffer.as_mut_ptr();
    // SAFETY: `p` is what glibc's malloc returned for this Vec (std's System allocator with an
    // alignment malloc gives), and the Vec is alive.
    let usable = unsafe { malloc_usable_size(p.cast()) };
    let start = p as usize - 16;
    let end = p as usize + usable;
    assert!(
        start.is_multiple_of(PAGE) && end.is_multiple_of(PAGE),
        "not a chunk of its own"
    );
    (start, end)
}

/// Pages of [start, end) whose /proc/self/pagemap entry has bit 63 set.
fn present(start: usize, end: usize) -> usize {
    let pagemap = File::open("/proc/self/pagemap").expect("open /proc/self/pagemap");
    let mut entries = vec![0u8; (end - start) / PAGE * 8];
    pagemap
        .read_exact_at(&mut entries, (start / PAGE * 8) as u64)
        .expect("read /proc/self/pagemap");
    entries
        .chunks_exact(8)
        .filter(|e| u64::from_le_bytes((*e).try_into().unwrap()) >> 63 == 1)
        .count()
}

fn main() {
    let (mut buffer, line) = make_buffers();
    let (start, end) = chunk(&mut buffer);
    let present = present(start, end);
    let pid = std::process::id();
    let out = format!(
        "{{\"truth\":\"site\",\"pid\":{pid},\"name\":\"make_buffers\",\"call\":\"vec\",\
         \"file\":\"sites_rust.rs\",\"line\":{line},\"first_line\":{FIRST_LINE},\
         \"last_line\":{LAST_LINE},\"start\":{start},\"end\":{end},\"present\":{present},\
         \"kept\":1}}\n"
    );
    std::io::stdout().write_all(out.as_bytes()).unwrap();
    std::io::stdout().flush().unwrap();
    // Kept to the end: not dropped (which would munmap it before the exit).
    std::mem::forget(buffer);
}
