//! A stopped thread's user stack: the registers an unwinder starts from, and the stack's bytes,
//! read from the tracer in as few `process_vm_readv` calls as the walk needs.

use std::io::{self, IoSliceMut};
use std::sync::Arc;

use nix::sys::ptrace;
use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::unistd::Pid;

use super::procfs::Pagemap;

/// Where a walk starts: the instruction pointer, the stack pointer and the frame pointer.
#[derive(Clone, Copy, Debug)]
pub struct StartRegisters {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
}

/// The registers of a thread in a ptrace stop.
pub fn start_registers(tid: i32) -> io::Result<StartRegisters> {
    let regs = ptrace::getregs(Pid::from_raw(tid)).map_err(io::Error::from)?;
    Ok(StartRegisters {
        ip: regs.rip,
        sp: regs.rsp,
        bp: regs.rbp,
    })
}

/// The bytes of a thread's stack from its stack pointer up, read in growing pieces: most walks
/// need a few KiB, a deep one more, and the stack's top ends the reads.
pub struct StackCopy {
    pid: Pid,
    base: u64,
    bytes: Vec<u8>,
    /// The read stopped short (the end of the stack's mapping): there is no more to read.
    ended: bool,
    /// The most this copy reads.
    limit: usize,
    readable: Readable,
}

/// Which pages may be read: those the page tables hold (present, or swapped out). Reading any
/// other page would fault it in: through a lane's userfaultfd, which may hold the fault until
/// the very syscall the tracer is reporting is reported (a deadlock), or as a new page the
/// program never touched.
pub struct Readable {
    pub pagemap: Arc<Pagemap>,
    pub page_size: u64,
}

impl Readable {
    /// How many bytes from `from` (at most `len`) are on populated pages; 0 if none.
    fn bytes_from(&self, from: u64, len: usize) -> usize {
        let page = self.page_size;
        let Some(end) = from.checked_add(len as u64) else {
            return 0;
        };
        let pages = from & !(page - 1)..end.div_ceil(page).saturating_mul(page);
        match self.pagemap.populated_runs(pages) {
            Ok(runs) => match runs.first() {
                Some(run) if run.start <= from => (run.end.min(end) - from) as usize,
                _ => 0,
            },
            Err(_) => 0,
        }
    }
}

/// The first read: most stacks at a syscall are this deep or less.
const FIRST_READ: usize = 4 << 10;

impl StackCopy {
    /// The stack of thread `tid` (any thread of the process reads the same memory, but the
    /// main one may be gone), from `sp`.
    pub fn new(tid: i32, sp: u64, limit: usize, readable: Readable) -> Self {
        Self {
            pid: Pid::from_raw(tid),
            base: sp,
            bytes: Vec::new(),
            ended: false,
            limit,
            readable,
        }
    }

    /// The 8 bytes at `addr`, reading more of the stack when the walk reaches past what was read.
    pub fn read_u64(&mut self, addr: u64) -> Option<u64> {
        let offset = usize::try_from(addr.checked_sub(self.base)?).ok()?;
        let end = offset.checked_add(8)?;
        while end > self.bytes.len() {
            if self.ended || self.bytes.len() >= self.limit {
                return None;
            }
            self.read_more(end);
        }
        let word = self.bytes.get(offset..end)?;
        Some(u64::from_ne_bytes(word.try_into().ok()?))
    }

    /// Doubles what was read (at least to `need`), up to the limit.
    fn read_more(&mut self, need: usize) {
        let have = self.bytes.len();
        let want = need.max(have * 2).max(FIRST_READ).min(self.limit);
        if want <= have {
            self.ended = true;
            return;
        }
        let Some(from) = self.base.checked_add(have as u64) else {
            self.ended = true;
            return;
        };
        // Only populated pages: the read stops at the first other one.
        let len = self.readable.bytes_from(from, want - have);
        if len < want - have {
            self.ended = true;
        }
        if len == 0 {
            return;
        }
        self.bytes.resize(have + len, 0);
        let remote = [RemoteIoVec {
            base: from as usize,
            len,
        }];
        let mut local = [IoSliceMut::new(&mut self.bytes[have..])];
        // A partial read ends at the first page that is not mapped: the stack's top.
        match process_vm_readv(self.pid, &mut local, &remote) {
            Ok(n) if n == len => {}
            Ok(n) => {
                self.bytes.truncate(have + n);
                self.ended = true;
            }
            Err(_) => {
                self.bytes.truncate(have);
                self.ended = true;
            }
        }
    }
}
