//! The layout syscalls the seccomp filter stops, decoded once from `PTRACE_GET_SYSCALL_INFO`
//! into [`LayoutSyscall`], and what the tracer reads of a syscall's exit and of a clone.

use std::io;
use std::ops::Range;

use nix::sys::ptrace;
use nix::unistd::Pid;

use super::abi::{AUDIT_ARCH_X86_64, UFFDIO_MOVE, UFFDIO_REGISTER};
use super::page_align;

/// `MADV_COLLAPSE` (Linux 6.1), which the libc crate does not name.
const MADV_COLLAPSE: i32 = 25;

/// A `madvise` advice asking for transparent huge pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HugeAdvice {
    /// `MADV_HUGEPAGE`: faults may make huge pages there (under the `madvise` policy), and so
    /// may khugepaged. It sets a flag of the mappings, splitting them at the range's ends.
    Advise,
    /// `MADV_COLLAPSE`: huge pages made now, whatever the policy, with no change of flags.
    Collapse,
}

impl HugeAdvice {
    fn of(advice: i32) -> Option<Self> {
        match advice {
            libc::MADV_HUGEPAGE => Some(HugeAdvice::Advise),
            MADV_COLLAPSE => Some(HugeAdvice::Collapse),
            _ => None,
        }
    }
}

/// A `madvise` advice that drops pages at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiscardAdvice {
    DontNeed,
    Remove,
    DontNeedLocked,
    /// Reclaims what it can at once: pages freed with MADV_FREE are dropped (and, with swap,
    /// others swapped out, which the lane counts as still there).
    PageOut,
    /// `MADV_GUARD_INSTALL` (Linux 6.13): the range becomes a guard region, its pages dropped.
    GuardInstall,
}

impl DiscardAdvice {
    fn of(advice: i32) -> Option<Self> {
        match advice {
            libc::MADV_DONTNEED => Some(DiscardAdvice::DontNeed),
            libc::MADV_REMOVE => Some(DiscardAdvice::Remove),
            24 /* MADV_DONTNEED_LOCKED */ => Some(DiscardAdvice::DontNeedLocked),
            21 /* MADV_PAGEOUT */ => Some(DiscardAdvice::PageOut),
            102 /* MADV_GUARD_INSTALL */ => Some(DiscardAdvice::GuardInstall),
            // MADV_FREE and the rest leave pages present until reclaim (or never drop them).
            _ => None,
        }
    }
}

/// A syscall stopped by our seccomp filter, with its arguments decoded. Lengths are page-aligned
/// as the kernel aligns them (`PAGE_ALIGN`, wrap included); addresses are as passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutSyscall {
    Mmap {
        addr: u64,
        len: u64,
        prot: u64,
        flags: i32,
        fd: i32,
    },
    Munmap {
        addr: u64,
        len: u64,
    },
    Mremap {
        old_addr: u64,
        old_len: u64,
        new_len: u64,
        flags: i32,
        /// Only meaningful with `MREMAP_FIXED`.
        new_addr: u64,
    },
    Madvise {
        addr: u64,
        len: u64,
        /// None for advice that drops nothing at once.
        discard: Option<DiscardAdvice>,
        /// `MADV_HUGEPAGE` or `MADV_COLLAPSE`: the range is to have huge pages.
        huge: Option<HugeAdvice>,
        /// `MADV_FREE`: its pages may be reclaimed from its return on, unless written again.
        lazy_free: bool,
        /// `MADV_GUARD_REMOVE` (Linux 6.13): the range's guard markers are taken away.
        unguard: bool,
    },
    /// `mprotect` or `pkey_mprotect`: no page or mapping comes or goes, only `prot` changes.
    Mprotect {
        addr: u64,
        len: u64,
        prot: u64,
        /// A protection key other than the default: accesses may fail whatever `prot` says.
        keyed: bool,
    },
    /// `brk(addr)`; `addr` 0 is a query. Not aligned: the kernel keeps the value as asked.
    Brk {
        addr: u64,
    },
    /// A program registering `[start, start + len)` with its own userfaultfd (read from its
    /// memory by [`uffd_register_range`], not decoded from the registers).
    UffdRegister {
        start: u64,
        len: u64,
    },
    /// A program moving pages with its own userfaultfd (`UFFDIO_MOVE`) from `[src, src + len)`
    /// to `[dst, dst + len)` (read from its memory by [`uffd_ioctl`]).
    UffdMove {
        src: u64,
        dst: u64,
        len: u64,
    },
    /// Any other syscall (a program's own seccomp filter can make one stop here).
    Other {
        nr: i64,
    },
}

impl LayoutSyscall {
    pub fn decode(nr: i64, a: [u64; 6], page_size: u64) -> Self {
        let align = |n: u64| page_align(n, page_size);
        match nr {
            libc::SYS_mmap => LayoutSyscall::Mmap {
                addr: a[0],
                len: align(a[1]),
                prot: a[2],
                flags: a[3] as i32,
                fd: a[4] as i32,
            },
            libc::SYS_munmap => LayoutSyscall::Munmap {
                addr: a[0],
                len: align(a[1]),
            },
            libc::SYS_mremap => LayoutSyscall::Mremap {
                old_addr: a[0],
                old_len: align(a[1]),
                new_len: align(a[2]),
                flags: a[3] as i32,
                new_addr: a[4],
            },
            libc::SYS_madvise => LayoutSyscall::Madvise {
                addr: a[0],
                len: align(a[1]),
                discard: DiscardAdvice::of(a[2] as i32),
                huge: HugeAdvice::of(a[2] as i32),
                lazy_free: a[2] as i32 == libc::MADV_FREE,
                unguard: a[2] == 103, // MADV_GUARD_REMOVE
            },
            libc::SYS_brk => LayoutSyscall::Brk { addr: a[0] },
            libc::SYS_mprotect | libc::SYS_pkey_mprotect => LayoutSyscall::Mprotect {
                addr: a[0],
                len: align(a[1]),
                prot: a[2],
                keyed: nr == libc::SYS_pkey_mprotect && a[3] as i32 != 0,
            },
            nr => LayoutSyscall::Other { nr },
        }
    }

    /// Where it may change the layout, from its arguments alone: nothing for a placement in free
    /// space (those are ordered exactly, see the tracer's races) or for advice that drops nothing.
    pub fn reach(&self) -> Vec<Range<u64>> {
        let span = |start: u64, len: u64| start..start.saturating_add(len);
        let mut reach = match *self {
            LayoutSyscall::Munmap { addr, len } => vec![span(addr, len)],
            LayoutSyscall::Madvise {
                addr,
                len,
                discard: Some(_),
                ..
            } => vec![span(addr, len)],
            LayoutSyscall::Mmap {
                addr, len, flags, ..
            } if flags & libc::MAP_FIXED != 0 => vec![span(addr, len)],
            LayoutSyscall::UffdRegister { start, len }
            | LayoutSyscall::Mprotect {
                addr: start, len, ..
            } => {
                vec![span(start, len)]
            }
            LayoutSyscall::UffdMove { src, dst, len } => vec![span(src, len), span(dst, len)],
            LayoutSyscall::Mremap {
                old_addr,
                old_len,
                new_len,
                flags,
                new_addr,
            } => {
                let mut r = vec![span(old_addr, old_len.max(new_len))];
                if flags & libc::MREMAP_FIXED != 0 {
                    r.push(span(new_addr, new_len));
                }
                r
            }
            _ => Vec::new(),
        };
        reach.retain(|r| !r.is_empty());
        reach
    }

    /// The range an `MADV_FREE` frees lazily: its pages in swap are dropped at once, those
    /// present may be reclaimed from its return on.
    pub fn frees_lazily(&self) -> Option<Range<u64>> {
        match *self {
            LayoutSyscall::Madvise {
                addr,
                len,
                lazy_free: true,
                ..
            } => Some(addr..addr.saturating_add(len)).filter(|r| !r.is_empty()),
            _ => None,
        }
    }

    /// The range whose pages this call can take away (unmap, discard, replace, move out), if
    /// any; a `brk` that shrinks is the caller's to see, from the break before.
    pub fn releases(&self) -> Option<Range<u64>> {
        let span = |start: u64, len: u64| start..start.saturating_add(len);
        match *self {
            LayoutSyscall::Munmap { addr, len } => Some(span(addr, len)),
            LayoutSyscall::Madvise {
                addr,
                len,
                discard: Some(_),
                ..
            } => Some(span(addr, len)),
            LayoutSyscall::Mremap {
                old_addr, old_len, ..
            } => Some(span(old_addr, old_len)),
            LayoutSyscall::Mmap {
                addr, len, flags, ..
            } if flags & libc::MAP_FIXED != 0 => Some(span(addr, len)),
            LayoutSyscall::UffdMove { src, len, .. } => Some(span(src, len)),
            _ => None,
        }
    }

    /// Whether it may have changed the layout although it returned `-errno`. The kernel checks
    /// arguments before it acts, so most errors mean nothing was done; but a `MAP_FIXED` mmap
    /// may have unmapped what was there before failing, an `mremap` can run out of memory half
    /// way, and an `mprotect` over a hole changes what comes before it. A program's
    /// `UFFDIO_REGISTER` had ours unregistered first, whatever its result.
    ///
    /// A syscall interrupted by a signal can stop half way too, whatever it is: an `mremap`
    /// that moves a `MADV_MERGEABLE` mapping unmerges its KSM pages only after it unmapped the
    /// `MREMAP_FIXED` target and the tail a shrink drops (mm/mremap.c, `prep_move_vma`), and
    /// returns `-ERESTARTSYS` there if a signal is pending (mm/ksm.c, `unmerge_ksm_pages`).
    /// Our own `PTRACE_INTERRUPT` (a checkpoint's) is one, pending until the thread's next trap:
    /// sent while the thread waits at a seccomp stop, it is still pending in the syscall. The
    /// kernel then runs the syscall again from the start (its exit stop shows the restart
    /// code), or returns `EINTR` to a signal handler.
    pub fn may_have_acted_on_error(&self, errno: i64) -> bool {
        if is_interrupted(errno) {
            return !self.reach().is_empty();
        }
        match *self {
            LayoutSyscall::Mmap { flags, .. } => flags & libc::MAP_FIXED != 0,
            // mprotect over a hole changes the mappings before it, then returns ENOMEM.
            LayoutSyscall::Mremap { .. } | LayoutSyscall::Mprotect { .. } => {
                errno == libc::ENOMEM as i64
            }
            // A move that fails half way (EAGAIN, ENOENT) has moved some pages already.
            LayoutSyscall::UffdRegister { .. } | LayoutSyscall::UffdMove { .. } => true,
            LayoutSyscall::Munmap { .. }
            | LayoutSyscall::Madvise { .. }
            | LayoutSyscall::Brk { .. }
            | LayoutSyscall::Other { .. } => false,
        }
    }

    /// An `mremap` that only moves (`MREMAP_FIXED`, no resize): the one kind the kernel applies
    /// to a range over several mappings (Linux 6.17).
    pub fn moves_only(&self) -> bool {
        matches!(*self, LayoutSyscall::Mremap { old_len, new_len, flags, .. }
            if old_len != 0 && old_len == new_len && flags & libc::MREMAP_FIXED != 0)
    }

    /// The tail an `mremap` grows into in place, registered the moment it exists.
    pub fn grown_tail(&self) -> Option<Range<u64>> {
        match *self {
            LayoutSyscall::Mremap {
                old_addr,
                old_len,
                new_len,
                ..
            } if old_len != 0 && new_len > old_len => {
                Some(old_addr.saturating_add(old_len)..old_addr.saturating_add(new_len))
            }
            _ => None,
        }
    }

    /// The range whose pages it drops with no userfaultfd event (`MADV_GUARD_INSTALL` zaps
    /// under the mmap read lock and raises no REMOVE): nothing makes it wait for the lane, so a
    /// fill there races the zap in an order neither observer sees.
    pub fn drops_unannounced(&self) -> Option<Range<u64>> {
        match *self {
            LayoutSyscall::Madvise {
                addr,
                len,
                discard: Some(DiscardAdvice::GuardInstall),
                ..
            } if len > 0 => Some(addr..addr.saturating_add(len)),
            _ => None,
        }
    }

    /// The range whose guard markers it takes away (`MADV_GUARD_REMOVE`).
    pub fn unguards(&self) -> Option<Range<u64>> {
        match *self {
            LayoutSyscall::Madvise {
                addr,
                len,
                unguard: true,
                ..
            } if len > 0 => Some(addr..addr.saturating_add(len)),
            _ => None,
        }
    }

    /// The range it may hand back to the kernel for others to reuse: a `munmap`, the source of
    /// an `mremap` that may move, the tail of one that shrinks, or a shrinking brk (given the
    /// break before it, unaligned).
    pub fn released(&self, brk_before: u64, page_size: u64) -> Option<Range<u64>> {
        let range = match *self {
            LayoutSyscall::Munmap { addr, len } => addr..addr.saturating_add(len),
            LayoutSyscall::Mremap {
                old_addr,
                old_len,
                new_len,
                flags,
                ..
            } => {
                if old_len == 0 {
                    return None;
                } else if flags & libc::MREMAP_MAYMOVE != 0 && flags & libc::MREMAP_DONTUNMAP == 0 {
                    old_addr..old_addr.saturating_add(old_len)
                } else {
                    old_addr.saturating_add(new_len)..old_addr.saturating_add(old_len)
                }
            }
            // brk(0) is a query.
            LayoutSyscall::Brk { addr } if addr != 0 => {
                page_align(addr, page_size)..page_align(brk_before, page_size)
            }
            _ => return None,
        };
        (!range.is_empty()).then_some(range)
    }

    /// The free address space it was given, from its return value: `mmap` without `MAP_FIXED`,
    /// `mremap` without `MREMAP_FIXED`, and brk growth (given the break before it).
    pub fn placed(&self, rval: u64, brk_before: u64, page_size: u64) -> Option<Range<u64>> {
        let range = match *self {
            LayoutSyscall::Mmap { len, flags, .. } if flags & libc::MAP_FIXED == 0 => {
                rval..rval.saturating_add(len)
            }
            LayoutSyscall::Mremap { new_len, flags, .. } if flags & libc::MREMAP_FIXED == 0 => {
                rval..rval.saturating_add(new_len)
            }
            LayoutSyscall::Brk { .. } => {
                page_align(brk_before, page_size)..page_align(rval, page_size)
            }
            _ => return None,
        };
        (!range.is_empty()).then_some(range)
    }
}

/// What a syscall returned, read at its exit stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallReturn {
    pub value: i64,
    pub is_error: bool,
}

/// A thread at a seccomp stop: the syscall and which filter stopped it.
#[derive(Clone, Copy, Debug)]
pub struct SeccompEntry {
    pub nr: i64,
    pub args: [u64; 6],
    /// The `SECCOMP_RET_DATA` of the filter that asked for the stop (ours, or the program's).
    pub ret_data: u32,
}

/// The syscall number and arguments of a thread at a seccomp stop; None if it is not at one.
pub fn seccomp_entry(tid: i32) -> io::Result<Option<SeccompEntry>> {
    let info = ptrace::syscall_info(Pid::from_raw(tid))?;
    if info.op != libc::PTRACE_SYSCALL_INFO_SECCOMP {
        return Ok(None);
    }
    // SAFETY: op == SECCOMP says the seccomp member of the union is the one the kernel filled.
    let s = unsafe { info.u.seccomp };
    Ok(Some(SeccompEntry {
        nr: s.nr as i64,
        args: s.args,
        ret_data: s.ret_data,
    }))
}

/// A syscall-entry stop (`PTRACE_SYSCALL`): the syscall about to run, before seccomp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryStop {
    pub nr: i64,
    pub args: [u64; 6],
    /// An x86_64 syscall (not `int $0x80`, whose numbers are another ABI's).
    pub native: bool,
}

/// The syscall a thread at a `PTRACE_SYSCALL` stop is entering; None at an exit stop.
pub fn entry_stop(tid: i32) -> io::Result<Option<EntryStop>> {
    let info = ptrace::syscall_info(Pid::from_raw(tid))?;
    if info.op != libc::PTRACE_SYSCALL_INFO_ENTRY {
        return Ok(None);
    }
    // SAFETY: op == ENTRY says the entry member of the union is the one the kernel filled.
    let e = unsafe { info.u.entry };
    Ok(Some(EntryStop {
        nr: e.nr as i64,
        args: e.args,
        native: info.arch == AUDIT_ARCH_X86_64,
    }))
}

/// A program's `ioctl` on its own userfaultfd, from the struct it passes: the range of a
/// `struct uffdio_register` (start, length) or of a `struct uffdio_move` (dst, src, length).
/// None for another request.
pub fn uffd_ioctl(tid: i32, args: [u64; 6], page_size: u64) -> io::Result<Option<LayoutSyscall>> {
    let field = |i: u64| read_word(tid, args[2].wrapping_add(8 * i));
    Ok(match args[1] as u32 {
        UFFDIO_REGISTER => Some(LayoutSyscall::UffdRegister {
            start: field(0)?,
            len: page_align(field(1)?, page_size),
        }),
        UFFDIO_MOVE => Some(LayoutSyscall::UffdMove {
            dst: field(0)?,
            src: field(1)?,
            len: page_align(field(2)?, page_size),
        }),
        _ => None,
    })
}

/// A 64-bit word of a stopped thread's memory (a syscall's argument struct).
/// Read with `process_vm_readv`, which needs no file descriptor: a tracer short of them (a
/// program with many threads under a low `ulimit -n`) still reads a clone's flags.
fn read_word(tid: i32, addr: u64) -> io::Result<u64> {
    use nix::sys::uio::{RemoteIoVec, process_vm_readv};
    let mut word = [0u8; 8];
    let remote = [RemoteIoVec {
        base: addr as usize,
        len: word.len(),
    }];
    let read = process_vm_readv(
        Pid::from_raw(tid),
        &mut [io::IoSliceMut::new(&mut word)],
        &remote,
    )?;
    if read != word.len() {
        return Err(io::Error::other(format!(
            "{read} of 8 bytes read at {addr:#x} of thread {tid}"
        )));
    }
    Ok(u64::from_ne_bytes(word))
}

/// Writes a 64-bit word of a stopped thread's memory (`/proc/PID/mem` writes through page
/// protections, as ptrace pokes do).
fn write_word(tid: i32, addr: u64, value: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/{tid}/mem"))?
        .write_all_at(&value.to_ne_bytes(), addr)
}

/// Makes a thread at a seccomp stop skip its syscall, which then returns `ENOSYS` (the kernel
/// set the return register to `-ENOSYS` at entry): what a filter's `SECCOMP_RET_TRACE` gives
/// when no tracer is there.
pub fn skip_syscall(tid: i32) -> io::Result<()> {
    let pid = Pid::from_raw(tid);
    let mut regs = ptrace::getregs(pid)?;
    regs.orig_rax = u64::MAX;
    ptrace::setregs(pid, regs)?;
    Ok(())
}

/// What clearing `CLONE_UNTRACED` changed in a thread's memory: a `clone3`'s flags, to be put
/// back at the syscall's exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CloneArgsFlags {
    pub addr: u64,
    pub flags: u64,
}

/// Clears `CLONE_UNTRACED` from the `clone` or `clone3` a thread is stopped at (its seccomp
/// stop), as `strace -f` does, so that its child is traced like any other. A `clone3`'s flags
/// are the first field of its `struct clone_args`, in the thread's memory: what was there is
/// returned, for [`restore_clone_args_flags`] at the exit.
pub fn clear_clone_untraced(tid: i32, call: SeccompEntry) -> io::Result<Option<CloneArgsFlags>> {
    let untraced = libc::CLONE_UNTRACED as u64;
    match call.nr {
        libc::SYS_clone if call.args[0] & untraced != 0 => {
            let pid = Pid::from_raw(tid);
            let mut regs = ptrace::getregs(pid)?;
            regs.rdi &= !untraced;
            ptrace::setregs(pid, regs)?;
            Ok(None)
        }
        libc::SYS_clone3 => {
            let addr = call.args[0];
            let flags = read_word(tid, addr)?;
            if flags & untraced == 0 {
                return Ok(None);
            }
            write_word(tid, addr, flags & !untraced)?;
            Ok(Some(CloneArgsFlags { addr, flags }))
        }
        _ => Ok(None),
    }
}

/// Puts a `clone3`'s flags back as the program wrote them, at the syscall's exit.
pub fn restore_clone_args_flags(tid: i32, saved: CloneArgsFlags) -> io::Result<()> {
    write_word(tid, saved.addr, saved.flags)
}

/// The errors of a syscall interrupted by a signal: `EINTR`, and the restart codes that only a
/// tracer sees at the exit stop (include/linux/errno.h: `ERESTARTSYS`, `ERESTARTNOINTR`,
/// `ERESTARTNOHAND`, `ERESTART_RESTARTBLOCK`).
fn is_interrupted(errno: i64) -> bool {
    const ERESTARTSYS: i64 = 512;
    const ERESTARTNOINTR: i64 = 513;
    const ERESTARTNOHAND: i64 = 514;
    const ERESTART_RESTARTBLOCK: i64 = 516;
    matches!(
        errno,
        ERESTARTSYS | ERESTARTNOINTR | ERESTARTNOHAND | ERESTART_RESTARTBLOCK
    ) || errno == libc::EINTR as i64
}

/// What the syscall returned, for a thread at a syscall-exit stop; None if it is not at one.
pub fn exit_value(tid: i32) -> io::Result<Option<SyscallReturn>> {
    let info = ptrace::syscall_info(Pid::from_raw(tid))?;
    if info.op != libc::PTRACE_SYSCALL_INFO_EXIT {
        return Ok(None);
    }
    // SAFETY: op == EXIT says the exit member of the union is the one the kernel filled.
    let exit = unsafe { info.u.exit };
    Ok(Some(SyscallReturn {
        value: exit.sval,
        is_error: exit.is_error != 0,
    }))
}

/// The clone flags of the fork, vfork, clone or clone3 a thread is inside, read at its
/// fork/vfork/clone event stop (the arguments are still in its registers; clone3's are in its
/// memory).
pub fn clone_flags(tid: i32) -> io::Result<u64> {
    let regs = ptrace::getregs(Pid::from_raw(tid))?;
    match regs.orig_rax as i64 {
        libc::SYS_clone => Ok(regs.rdi),
        libc::SYS_fork => Ok(0),
        libc::SYS_vfork => Ok((libc::CLONE_VM | libc::CLONE_VFORK) as u64),
        // `struct clone_args` begins with the flags, a u64.
        libc::SYS_clone3 => read_word(tid, regs.rdi),
        nr => Err(io::Error::other(format!(
            "a new child reported from syscall {nr}, which is no fork, vfork or clone"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;

    #[test]
    fn arguments_are_decoded_once_with_lengths_page_aligned() {
        let mmap = LayoutSyscall::decode(
            libc::SYS_mmap,
            [
                0,
                5000,
                3,
                (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64,
                u64::MAX,
                0,
            ],
            P,
        );
        assert_eq!(
            mmap,
            LayoutSyscall::Mmap {
                addr: 0,
                len: 2 * P,
                prot: 3,
                flags: libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                fd: -1,
            }
        );
        let dontneed = LayoutSyscall::decode(
            libc::SYS_madvise,
            [P, 1, libc::MADV_DONTNEED as u64, 0, 0, 0],
            P,
        );
        assert_eq!(
            dontneed,
            LayoutSyscall::Madvise {
                addr: P,
                len: P,
                discard: Some(DiscardAdvice::DontNeed),
                huge: None,
                lazy_free: false,
                unguard: false,
            }
        );
        // A discard with a REMOVE event is ordered by the lane; a guard region's is not.
        assert_eq!(dontneed.drops_unannounced(), None);
        let guard = LayoutSyscall::decode(libc::SYS_madvise, [P, 2 * P, 102, 0, 0, 0], P);
        assert_eq!(guard.drops_unannounced(), Some(P..3 * P));
        assert_eq!(guard.unguards(), None);
        let unguard = LayoutSyscall::decode(libc::SYS_madvise, [P, 2 * P, 103, 0, 0, 0], P);
        assert_eq!(unguard.unguards(), Some(P..3 * P));
        assert_eq!(unguard.drops_unannounced(), None);
        assert_eq!(dontneed.unguards(), None);
        let free = LayoutSyscall::decode(
            libc::SYS_madvise,
            [P, P, libc::MADV_FREE as u64, 0, 0, 0],
            P,
        );
        assert!(free.reach().is_empty());
        assert_eq!(free.frees_lazily(), Some(P..2 * P));
        assert_eq!(dontneed.frees_lazily(), None);
        assert_eq!(free.drops_unannounced(), None);
        for (advice, huge) in [
            (libc::MADV_HUGEPAGE, Some(HugeAdvice::Advise)),
            (25, Some(HugeAdvice::Collapse)),
            (libc::MADV_NOHUGEPAGE, None),
        ] {
            let decoded =
                LayoutSyscall::decode(libc::SYS_madvise, [P, P, advice as u64, 0, 0, 0], P);
            assert!(
                matches!(decoded, LayoutSyscall::Madvise { huge: h, discard: None, .. } if h == huge)
            );
            assert!(decoded.reach().is_empty());
        }
        assert_eq!(
            LayoutSyscall::decode(libc::SYS_openat, [0; 6], P),
            LayoutSyscall::Other {
                nr: libc::SYS_openat
            }
        );
    }

    #[test]
    fn an_mremap_old_size_that_wraps_aligns_to_zero_as_in_the_kernel() {
        let m = LayoutSyscall::decode(libc::SYS_mremap, [P, u64::MAX, P, 1, 0, 0], P);
        let LayoutSyscall::Mremap { old_len, .. } = m else {
            panic!("{m:?}")
        };
        assert_eq!(old_len, 0);
        assert_eq!(m.released(0, P), None);
        assert_eq!(m.grown_tail(), None);
    }

    #[test]
    fn reach_released_and_placed_follow_the_flags() {
        let may_move = LayoutSyscall::Mremap {
            old_addr: 10 * P,
            old_len: 2 * P,
            new_len: 4 * P,
            flags: libc::MREMAP_MAYMOVE,
            new_addr: 0,
        };
        assert_eq!(may_move.reach(), vec![10 * P..14 * P]);
        assert_eq!(may_move.released(0, P), Some(10 * P..12 * P));
        assert_eq!(may_move.grown_tail(), Some(12 * P..14 * P));
        assert_eq!(may_move.placed(20 * P, 0, P), Some(20 * P..24 * P));
        let shrink = LayoutSyscall::Mremap {
            old_addr: 10 * P,
            old_len: 4 * P,
            new_len: P,
            flags: 0,
            new_addr: 0,
        };
        assert_eq!(shrink.released(0, P), Some(11 * P..14 * P));
        let fixed = LayoutSyscall::Mremap {
            old_addr: 10 * P,
            old_len: 2 * P,
            new_len: 4 * P,
            flags: libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            new_addr: 30 * P,
        };
        assert_eq!(fixed.reach(), vec![10 * P..14 * P, 30 * P..34 * P]);
        assert_eq!(fixed.placed(30 * P, 0, P), None);
        let brk = LayoutSyscall::Brk { addr: 3 * P + 1 };
        assert_eq!(brk.released(8 * P, P), Some(4 * P..8 * P));
        assert_eq!(brk.placed(9 * P + 5, 4 * P, P), Some(4 * P..10 * P));
        assert_eq!(LayoutSyscall::Brk { addr: 0 }.released(8 * P, P), None);
        let fixed_map = LayoutSyscall::Mmap {
            addr: 5 * P,
            len: P,
            prot: 0,
            flags: libc::MAP_FIXED | libc::MAP_PRIVATE,
            fd: -1,
        };
        assert_eq!(fixed_map.reach(), vec![5 * P..6 * P]);
        assert_eq!(fixed_map.placed(5 * P, 0, P), None);
    }

    #[test]
    fn an_interrupted_syscall_may_have_acted_half_way() {
        let shrink_to = LayoutSyscall::Mremap {
            old_addr: 10 * P,
            old_len: 4 * P,
            new_len: 2 * P,
            flags: libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            new_addr: 30 * P,
        };
        // Refused arguments changed nothing; ENOMEM, a signal, or a restart may have.
        assert!(!shrink_to.may_have_acted_on_error(libc::EINVAL as i64));
        for errno in [libc::ENOMEM as i64, libc::EINTR as i64, 512, 513, 514, 516] {
            assert!(shrink_to.may_have_acted_on_error(errno), "errno {errno}");
        }
        let dontneed = LayoutSyscall::Madvise {
            addr: P,
            len: P,
            discard: Some(DiscardAdvice::DontNeed),
            huge: None,
            lazy_free: false,
            unguard: false,
        };
        assert!(dontneed.may_have_acted_on_error(512));
        assert!(!dontneed.may_have_acted_on_error(libc::EINVAL as i64));
        // Nothing it could have changed: no range to describe again.
        let free_placed = LayoutSyscall::Mmap {
            addr: 0,
            len: P,
            prot: 3,
            flags: libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            fd: -1,
        };
        assert!(!free_placed.may_have_acted_on_error(512));
    }
}
