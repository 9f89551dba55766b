//! What a tracee's seccomp filters would answer to a syscall we are about to inject into it.
//!
//! An injected call is judged by every filter of the thread that runs it: the program's own as
//! much as ours. A program that forbids `userfaultfd(2)` with `SECCOMP_RET_KILL_*` would be
//! killed by it, one that answers `SECCOMP_RET_TRAP` would get a SIGSYS (and its handler reset:
//! the kernel forces a blocked signal to its default action), and `SECCOMP_RET_USER_NOTIF`
//! would block the call on the program's supervisor, which may be held in a ptrace stop of
//! ours. So the filters are read (`PTRACE_SECCOMP_GET_FILTER`, which needs `CAP_SYS_ADMIN`)
//! and run here on the call's `seccomp_data` first, as the kernel would run them.
//!
//! The filters are classic BPF as `seccomp_check_filter` admits it: loads from the
//! `seccomp_data`, the scratch memory, the accumulator and index registers, ALU, jumps and
//! returns. No crate runs classic BPF (seccompiler only builds it), and the machine is small.

use std::io;

use nix::errno::Errno;

use super::abi::AUDIT_ARCH_X86_64;

/// `PTRACE_SECCOMP_GET_FILTER` (Linux 4.4).
const PTRACE_SECCOMP_GET_FILTER: libc::c_uint = 0x420c;
/// `sizeof(struct seccomp_data)`: nr, arch, instruction_pointer, args[6].
const SECCOMP_DATA_LEN: u32 = 64;
/// A filter has at most this many instructions (`BPF_MAXINSNS`).
const MAX_INSTRUCTIONS: usize = 4096;

/// One `struct sock_filter`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Instruction {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// A thread's filters, oldest first (the order `PTRACE_SECCOMP_GET_FILTER` numbers them in).
#[derive(Debug, Default)]
pub struct Filters(Vec<Vec<Instruction>>);

/// What the filters make of a syscall, by the kernel's precedence (the most severe wins).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Runs (`ALLOW`, `LOG`, or `TRACE`: the tracer is us).
    Runs,
    /// Fails at once with this errno, without running (`SECCOMP_RET_ERRNO`).
    Fails(i32),
    /// Must not be injected: it would kill, signal or block the program (the action's name).
    Forbidden(&'static str),
}

/// What reading a thread's filters found.
pub enum Read {
    Filters(Filters),
    /// The filters cannot be read (no `CAP_SYS_ADMIN`): how many the thread has, by
    /// `/proc/PID/status` (`Seccomp_filters`, Linux 5.9), if it says.
    Unreadable {
        count: Option<u64>,
        why: io::Error,
    },
}

impl Filters {
    /// Reads every filter of `tid`, which must be in a ptrace stop of ours.
    pub fn read(tid: i32) -> Read {
        let mut filters = Vec::new();
        for index in 0.. {
            match read_filter(tid, index) {
                Ok(Some(filter)) => filters.push(filter),
                Ok(None) => break,
                Err(why) => {
                    return Read::Unreadable {
                        count: super::procfs::seccomp_filters(tid),
                        why,
                    };
                }
            }
        }
        Read::Filters(Filters(filters))
    }

    /// What the filters answer to syscall `nr` with `args`, made from a `syscall` instruction at
    /// `site` (the kernel's `instruction_pointer` is the address after it).
    pub fn verdict(&self, nr: i64, args: &[u64], site: u64) -> Verdict {
        let mut data = [0u8; SECCOMP_DATA_LEN as usize];
        data[0..4].copy_from_slice(&(nr as i32).to_ne_bytes());
        data[4..8].copy_from_slice(&AUDIT_ARCH_X86_64.to_ne_bytes());
        data[8..16].copy_from_slice(&(site + 2).to_ne_bytes());
        for (i, arg) in args.iter().take(6).enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&arg.to_ne_bytes());
        }
        // The kernel runs them newest first and keeps the first answer whose action, as a
        // signed number, is the least (so the newest filter's data among equals).
        let answer = self
            .0
            .iter()
            .rev()
            .map(|f| run(f, &data))
            .min_by_key(|&ret| action(ret) as i32)
            .unwrap_or(libc::SECCOMP_RET_ALLOW);
        match action(answer) {
            libc::SECCOMP_RET_ALLOW | libc::SECCOMP_RET_LOG | libc::SECCOMP_RET_TRACE => {
                Verdict::Runs
            }
            // The kernel caps the errno it returns at MAX_ERRNO.
            libc::SECCOMP_RET_ERRNO => Verdict::Fails((answer & 0xffff).min(4095) as i32),
            libc::SECCOMP_RET_TRAP => Verdict::Forbidden("SECCOMP_RET_TRAP"),
            libc::SECCOMP_RET_USER_NOTIF => Verdict::Forbidden("SECCOMP_RET_USER_NOTIF"),
            libc::SECCOMP_RET_KILL_THREAD => Verdict::Forbidden("SECCOMP_RET_KILL_THREAD"),
            libc::SECCOMP_RET_KILL_PROCESS => Verdict::Forbidden("SECCOMP_RET_KILL_PROCESS"),
            // An action this kernel does not know kills the process (seccomp's default).
            _ => Verdict::Forbidden("an unknown seccomp action"),
        }
    }
}

/// The action part of a filter's return value.
fn action(ret: u32) -> u32 {
    ret & libc::SECCOMP_RET_ACTION_FULL
}

/// Filter `index` of `tid` (0 is the oldest), or None past the last.
fn read_filter(tid: i32, index: u64) -> io::Result<Option<Vec<Instruction>>> {
    // SAFETY: with a null buffer the kernel only returns the filter's length.
    let len = unsafe {
        libc::ptrace(
            PTRACE_SECCOMP_GET_FILTER,
            tid,
            index as usize,
            std::ptr::null_mut::<Instruction>(),
        )
    };
    if len < 0 {
        return match Errno::last() {
            Errno::ENOENT => Ok(None),
            // Not in filter mode at all: no filters.
            Errno::EINVAL if index == 0 => Ok(None),
            e => Err(io::Error::from(e)),
        };
    }
    let len = (len as usize).min(MAX_INSTRUCTIONS);
    let mut filter = vec![
        Instruction {
            code: 0,
            jt: 0,
            jf: 0,
            k: 0
        };
        len
    ];
    // SAFETY: `filter` has room for `len` instructions, the count the kernel just gave for this
    // filter (a filter never changes once installed).
    let got = unsafe {
        libc::ptrace(
            PTRACE_SECCOMP_GET_FILTER,
            tid,
            index as usize,
            filter.as_mut_ptr(),
        )
    };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    filter.truncate(got as usize);
    Ok(Some(filter))
}

// Classic BPF opcodes (<linux/bpf_common.h>).
const BPF_LD: u16 = 0x00;
const BPF_LDX: u16 = 0x01;
const BPF_ST: u16 = 0x02;
const BPF_STX: u16 = 0x03;
const BPF_ALU: u16 = 0x04;
const BPF_JMP: u16 = 0x05;
const BPF_RET: u16 = 0x06;
const BPF_MISC: u16 = 0x07;
const BPF_ABS: u16 = 0x20;
const BPF_IMM: u16 = 0x00;
const BPF_MEM: u16 = 0x60;
const BPF_LEN: u16 = 0x80;
const BPF_X: u16 = 0x08;
const BPF_A: u16 = 0x10;

/// Runs one filter over `data` as the kernel does. An instruction `seccomp_check_filter` would
/// have refused, or running off the end, cannot happen in an installed filter; it answers
/// "kill" here, the most careful reading.
fn run(filter: &[Instruction], data: &[u8; SECCOMP_DATA_LEN as usize]) -> u32 {
    let kill = libc::SECCOMP_RET_KILL_PROCESS;
    let (mut a, mut x) = (0u32, 0u32);
    let mut mem = [0u32; 16];
    let mut pc = 0usize;
    while let Some(&Instruction { code, jt, jf, k }) = filter.get(pc) {
        pc += 1;
        let src = if code & BPF_X != 0 { x } else { k };
        match code & 0x07 {
            BPF_LD | BPF_LDX => {
                let value = match code & 0xe0 {
                    BPF_ABS if k % 4 == 0 && k < SECCOMP_DATA_LEN => {
                        let at = k as usize;
                        u32::from_ne_bytes(data[at..at + 4].try_into().expect("4 bytes"))
                    }
                    BPF_IMM => k,
                    BPF_MEM if k < 16 => mem[k as usize],
                    BPF_LEN => SECCOMP_DATA_LEN,
                    _ => return kill,
                };
                if code & 0x07 == BPF_LD {
                    a = value;
                } else {
                    x = value;
                }
            }
            BPF_ST | BPF_STX if k < 16 => {
                mem[k as usize] = if code & 0x07 == BPF_ST { a } else { x };
            }
            BPF_ALU => {
                a = match code & 0xf0 {
                    0x00 => a.wrapping_add(src),
                    0x10 => a.wrapping_sub(src),
                    0x20 => a.wrapping_mul(src),
                    0x30 if src != 0 => a / src,
                    0x40 => a | src,
                    0x50 => a & src,
                    // x86 shifts by the count's low five bits (K shifts of 32 and more are
                    // refused when a filter is installed).
                    0x60 => a.wrapping_shl(src),
                    0x70 => a.wrapping_shr(src),
                    0x80 => a.wrapping_neg(),
                    0x90 if src != 0 => a % src,
                    0xa0 => a ^ src,
                    _ => return kill,
                }
            }
            BPF_JMP => {
                let taken = match code & 0xf0 {
                    // JA: an unconditional jump by k.
                    0x00 => {
                        pc += k as usize;
                        continue;
                    }
                    0x10 => a == src,
                    0x20 => a > src,
                    0x30 => a >= src,
                    0x40 => a & src != 0,
                    _ => return kill,
                };
                pc += usize::from(if taken { jt } else { jf });
            }
            BPF_RET => {
                return match code & 0x18 {
                    0x00 => k,
                    BPF_A => a,
                    _ => kill,
                };
            }
            // TAX (0x00) and TXA (0x80).
            BPF_MISC => match code & 0xf8 {
                0x00 => x = a,
                0x80 => a = x,
                _ => return kill,
            },
            _ => return kill,
        }
    }
    kill
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule,
    };

    use super::*;

    /// A filter as seccompiler builds it: `rules` get `matched`, everything else `otherwise`.
    fn filter(
        rules: Vec<(i64, Vec<SeccompRule>)>,
        otherwise: SeccompAction,
        matched: SeccompAction,
    ) -> Vec<Instruction> {
        let built: BpfProgram = SeccompFilter::new(
            rules.into_iter().collect::<BTreeMap<_, _>>(),
            otherwise,
            matched,
            seccompiler::TargetArch::x86_64,
        )
        .unwrap()
        .try_into()
        .unwrap();
        built
            .iter()
            .map(|i| Instruction {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect()
    }

    fn forbidding_userfaultfd(with: SeccompAction) -> Vec<Instruction> {
        filter(
            vec![(libc::SYS_userfaultfd, vec![])],
            SeccompAction::Allow,
            with,
        )
    }

    #[test]
    fn each_action_on_userfaultfd_is_told_and_other_calls_run() {
        for (action, verdict) in [
            (
                SeccompAction::KillProcess,
                Verdict::Forbidden("SECCOMP_RET_KILL_PROCESS"),
            ),
            (
                SeccompAction::KillThread,
                Verdict::Forbidden("SECCOMP_RET_KILL_THREAD"),
            ),
            (SeccompAction::Trap, Verdict::Forbidden("SECCOMP_RET_TRAP")),
            (SeccompAction::Errno(1), Verdict::Fails(1)),
            (SeccompAction::Trace(0), Verdict::Runs),
            (SeccompAction::Log, Verdict::Runs),
        ] {
            let filters = Filters(vec![forbidding_userfaultfd(action.clone())]);
            assert_eq!(
                filters.verdict(libc::SYS_userfaultfd, &[0o2004000], 0x7000),
                verdict,
                "{action:?}"
            );
            assert_eq!(
                filters.verdict(libc::SYS_close, &[3], 0x7000),
                Verdict::Runs
            );
        }
    }

    #[test]
    fn the_most_severe_answer_of_several_filters_wins() {
        let errno = forbidding_userfaultfd(SeccompAction::Errno(38));
        let trap = forbidding_userfaultfd(SeccompAction::Trap);
        let filters = Filters(vec![errno.clone(), trap, errno]);
        assert_eq!(
            filters.verdict(libc::SYS_userfaultfd, &[0], 0),
            Verdict::Forbidden("SECCOMP_RET_TRAP")
        );
        assert_eq!(Filters::default().verdict(1, &[], 0), Verdict::Runs);
        // Among equal actions, the newest filter's (the last installed) data.
        let (older, newer) = (
            forbidding_userfaultfd(SeccompAction::Errno(1)),
            forbidding_userfaultfd(SeccompAction::Errno(2)),
        );
        let filters = Filters(vec![older, newer]);
        assert_eq!(
            filters.verdict(libc::SYS_userfaultfd, &[0], 0),
            Verdict::Fails(2)
        );
    }

    #[test]
    fn arguments_are_compared_as_the_kernel_gives_them() {
        // Only an ioctl whose request is USERFAULTFD_IOC_NEW is refused.
        let rule = SeccompRule::new(vec![
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, 0xaa00).unwrap(),
        ])
        .unwrap();
        let f = Filters(vec![filter(
            vec![(libc::SYS_ioctl, vec![rule])],
            SeccompAction::Allow,
            SeccompAction::KillProcess,
        )]);
        assert_eq!(
            f.verdict(libc::SYS_ioctl, &[3, 0xaa00, 0], 0),
            Verdict::Forbidden("SECCOMP_RET_KILL_PROCESS")
        );
        assert_eq!(
            f.verdict(libc::SYS_ioctl, &[3, 0x5401, 0], 0),
            Verdict::Runs
        );
    }

    #[test]
    fn a_hand_written_filter_with_scratch_memory_and_the_index_register() {
        // ld nr; st M[3]; ldx M[3]; txa; jeq userfaultfd -> ret ERRNO|5, else ret ALLOW.
        let f = Filters(vec![vec![
            Instruction {
                code: BPF_LD | BPF_ABS,
                jt: 0,
                jf: 0,
                k: 0,
            },
            Instruction {
                code: BPF_ST,
                jt: 0,
                jf: 0,
                k: 3,
            },
            Instruction {
                code: BPF_LDX | BPF_MEM,
                jt: 0,
                jf: 0,
                k: 3,
            },
            Instruction {
                code: BPF_MISC | 0x80,
                jt: 0,
                jf: 0,
                k: 0,
            },
            Instruction {
                code: BPF_JMP | 0x10,
                jt: 0,
                jf: 1,
                k: libc::SYS_userfaultfd as u32,
            },
            Instruction {
                code: BPF_RET,
                jt: 0,
                jf: 0,
                k: libc::SECCOMP_RET_ERRNO | 5,
            },
            Instruction {
                code: BPF_RET,
                jt: 0,
                jf: 0,
                k: libc::SECCOMP_RET_ALLOW,
            },
        ]]);
        assert_eq!(f.verdict(libc::SYS_userfaultfd, &[], 0), Verdict::Fails(5));
        assert_eq!(f.verdict(libc::SYS_openat, &[], 0), Verdict::Runs);
        // Running off the end, or a load past the data, is taken as the worst.
        let broken = Filters(vec![vec![Instruction {
            code: BPF_LD | BPF_ABS,
            jt: 0,
            jf: 0,
            k: 64,
        }]]);
        assert!(matches!(broken.verdict(0, &[], 0), Verdict::Forbidden(_)));
    }

    /// mevi-actors' own filter, run as the kernel runs it: it stops exactly what
    /// `spawn::filter_stops` says (the tracer's reading of a stop), and `prctl` only for
    /// `PR_SET_NAME`, whatever the option's upper 32 bits (the kernel reads an `int`).
    #[test]
    fn our_filter_stops_what_the_tracer_expects_and_prctl_only_to_set_a_name() {
        use crate::kernel::spawn;
        let ours: Vec<Instruction> = spawn::seccomp_filter(true)
            .unwrap()
            .iter()
            .map(|i| Instruction {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect();
        let answer = |nr: i64, args: [u64; 6]| {
            let mut data = [0u8; SECCOMP_DATA_LEN as usize];
            data[0..4].copy_from_slice(&(nr as i32).to_ne_bytes());
            data[4..8].copy_from_slice(&AUDIT_ARCH_X86_64.to_ne_bytes());
            for (i, arg) in args.iter().enumerate() {
                data[16 + 8 * i..24 + 8 * i].copy_from_slice(&arg.to_ne_bytes());
            }
            run(&ours, &data)
        };
        let stop = libc::SECCOMP_RET_TRACE | u32::from(spawn::OUR_TRACE_DATA);
        let prctl = |option: u64| [option, 0x7000, 0, 0, 0, 0];
        let set_name = libc::PR_SET_NAME as u64;
        assert_eq!(answer(libc::SYS_prctl, prctl(set_name)), stop);
        assert_eq!(answer(libc::SYS_prctl, prctl(set_name | 1 << 32)), stop);
        for other in [
            libc::PR_GET_NAME,
            libc::PR_SET_DUMPABLE,
            libc::PR_SET_VMA,
            libc::PR_SET_NO_NEW_PRIVS,
        ] {
            assert_eq!(
                answer(libc::SYS_prctl, prctl(other as u64)),
                libc::SECCOMP_RET_ALLOW,
                "prctl option {other}"
            );
        }
        // Every syscall, with arguments that meet and miss each condition: the filter and the
        // tracer's reading of it agree.
        let patterns = [
            [0; 6],
            [u64::MAX; 6],
            prctl(set_name),
            [
                3,
                u64::from(crate::kernel::abi::UFFDIO_REGISTER),
                0,
                0,
                0,
                0,
            ],
            [libc::CLONE_UNTRACED as u64, 0, 0, 0, 0, 0],
        ];
        for nr in 0..460 {
            for args in patterns {
                let stops = answer(nr, args) == stop;
                assert_eq!(
                    stops,
                    spawn::filter_stops(nr, args),
                    "syscall {nr} {args:x?}"
                );
            }
        }
    }
}
