//! The kernel's own figures beside the stream's pages (`rss` lines); memory under pressure.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mevi_actors::event::{Event, EvictedHow, ResidentFrom};
use mevi_actors::model::Replay;

use crate::util::{MachineHold, skip, trace_within, workload};

const HANG: Duration = Duration::from_secs(120);
const PAGE: u64 = 4096;

/// A swap file, on for as long as it lives (`fallocate`, `mkswap`, `swapon`; `swapoff` and
/// removed when dropped, whatever happened), the machine held alone: swap on changes what the
/// other tests' pages do.
struct SwapFile(PathBuf, MachineHold);

impl SwapFile {
    /// None, the test skipped (`util::skip`), where swap cannot be turned on (not root, a file
    /// system without swap files).
    fn on(mib: u64) -> Option<Self> {
        let path = crate::util::scratch("swapfile");
        let swap = SwapFile(path.clone(), MachineHold::alone());
        let ok = |cmd: &mut Command| cmd.output().is_ok_and(|o| o.status.success());
        let made = ok(Command::new("fallocate")
            .arg("-l")
            .arg(format!("{mib}M"))
            .arg(&path))
            && std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .is_ok()
            && ok(Command::new("mkswap").arg(&path))
            && ok(Command::new("swapon").arg(&path));
        if !made {
            skip("swap cannot be turned on");
            return None;
        }
        Some(swap)
    }
}

impl Drop for SwapFile {
    fn drop(&mut self) {
        let _ = Command::new("swapoff").arg(&self.0).output();
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A memory cgroup of our own (v1's `memory` hierarchy, or v2's), removed when dropped, the
/// machine held alone meanwhile: a cgroup is the machine's, and the reclaim and OOM kills its
/// limit brings are the kernel's, in its log for every run to read.
struct MemoryCgroup {
    dir: PathBuf,
    /// Its path in the hierarchy, as `/proc/PID/cgroup` names it.
    path: String,
    v2: bool,
    /// v2's root given the memory controller for its children by us, taken away again after.
    controller_added: Option<PathBuf>,
    _alone: Option<MachineHold>,
}

impl MemoryCgroup {
    /// None, the test skipped (`util::skip`), where there is no memory cgroup to be had.
    fn new(name: &str) -> Option<Self> {
        let alone = MachineHold::alone();
        let name = format!("{name}-{}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let mut controller_added = None;
        let (root, v2) = if v1.join("memory.limit_in_bytes").exists() {
            (v1.to_path_buf(), false)
        } else {
            let root = Path::new("/sys/fs/cgroup");
            let controllers =
                std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
            if !controllers.split_whitespace().any(|c| c == "memory") {
                skip("no memory cgroup controller");
                return None;
            }
            let subtree = root.join("cgroup.subtree_control");
            let enabled = std::fs::read_to_string(&subtree).unwrap_or_default();
            if !enabled.split_whitespace().any(|c| c == "memory")
                && std::fs::write(&subtree, "+memory").is_ok()
            {
                controller_added = Some(subtree);
            }
            (root.to_path_buf(), true)
        };
        let dir = root.join(&name);
        let _ = std::fs::remove_dir(&dir);
        let cgroup = Self {
            dir,
            path: format!("/{name}"),
            v2,
            controller_added,
            _alone: Some(alone),
        };
        if let Err(e) = std::fs::create_dir(&cgroup.dir) {
            eprintln!("{}: {e}", cgroup.dir.display());
            skip("cannot make a memory cgroup");
            return None;
        }
        Some(cgroup)
    }

    /// At most `bytes` of memory, and no swap beyond it.
    fn limit(&self, bytes: u64) {
        let files: &[&str] = if self.v2 {
            &["memory.max", "memory.swap.max"]
        } else {
            &["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
        };
        for (i, file) in files.iter().enumerate() {
            let value = if self.v2 && i == 1 { 0 } else { bytes };
            let path = self.dir.join(file);
            if path.exists() {
                std::fs::write(&path, value.to_string())
                    .unwrap_or_else(|e| panic!("{path:?}: {e}"));
            }
        }
    }

    /// A cgroup of its own inside this one.
    fn nested(&self, name: &str) -> Self {
        let dir = self.dir.join(name);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{dir:?}: {e}"));
        Self {
            dir,
            path: format!("{}/{name}", self.path),
            v2: self.v2,
            controller_added: None,
            _alone: None,
        }
    }

    fn version(&self) -> &'static str {
        if self.v2 { "v2" } else { "v1" }
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // Its last process may take a moment to leave (a bounded poll: nothing says when).
        for _ in 0..100 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(subtree) = &self.controller_added {
            let _ = std::fs::write(subtree, "-memory");
        }
    }
}

/// Pages of `range` as the stream has them in `replay`: present, in swap, neither.
fn stream_pages(replay: &Replay, space: u64, range: std::ops::Range<u64>) -> [u64; 3] {
    let s = &replay.spaces[&space];
    let total = (range.end - range.start) / PAGE;
    let resident = s.resident_in(range.clone()) / PAGE;
    let swapped = s.swapped_bytes_in(range) / PAGE;
    [resident, swapped, total - resident - swapped]
}

/// Memory under pressure, made for real: 8 MiB written to swap (`MADV_PAGEOUT`), 2 MiB of it
/// read back, and lazily freed pages reclaimed by the kernel when the workload's cgroup limit
/// drops below what it uses. After each step the stream's pages (resident, in swap, neither)
/// are exactly those the workload's own pagemap gave, in both modes, and `--verify` agrees.
#[test]
fn pages_swapped_out_come_back_and_freed_ones_are_reclaimed() {
    let Some(_swap) = SwapFile::on(256) else {
        return;
    };
    let program = workload("pressure_pages");
    for how in ["uffd", "scan", "records"] {
        let Some(cgroup) = MemoryCgroup::new("mevi-pressure") else {
            return;
        };
        let argv: Vec<OsString> = vec![
            program.clone().into(),
            cgroup.dir.clone().into(),
            cgroup.version().into(),
        ];
        let t = trace_within(
            &["--faults", how, "--sample-ms", "5", "--verify"],
            &argv,
            HANG,
        );
        assert_eq!(t.status, 0, "{how}: {}\n{}", t.stderr, t.evidence());
        let (_, totals) = t.summary();
        let v = totals.verify.as_ref().unwrap();
        assert!(
            v.points >= 1 && v.mismatched_pages == 0,
            "{how}: {v:?}\n{}",
            t.evidence()
        );
        let mut words = t.stdout.lines();
        let regions: Vec<u64> = words
            .next()
            .and_then(|l| l.strip_prefix("regions "))
            .unwrap_or_else(|| panic!("{how}: {}", t.stdout))
            .split(' ')
            .map(|a| u64::from_str_radix(a, 16).unwrap())
            .collect();
        let a = regions[0]..regions[0] + 4096 * PAGE;
        let b = regions[1]..regions[1] + 2048 * PAGE;
        let space = t.space_of(crate::util::exec_pid(&t.lines));
        for (n, step) in words.enumerate() {
            let n = n as u64 + 1;
            let truth: Vec<u64> = step
                .split(' ')
                .filter_map(|w| w.parse().ok())
                .skip(1)
                .collect();
            // The state just before the step's marker (a PROT_NONE mapping of n + 1 pages).
            let mut replay = Replay::new();
            for line in &t.lines {
                if let Event::Map {
                    start, end, prot, ..
                } = &line.event
                    && prot == "---"
                    && end - start == (n + 1) * PAGE
                {
                    break;
                }
                replay.apply_line(line);
            }
            let stream = [
                stream_pages(&replay, space, a.clone()),
                stream_pages(&replay, space, b.clone()),
            ];
            assert_eq!(
                stream.concat(),
                truth,
                "{how}: step {n}: the stream's pages of A and B (present, swapped, neither) are \
                 not the workload's ({step})"
            );
        }
        let count = |f: &dyn Fn(&Event) -> bool| t.lines.iter().filter(|l| f(&l.event)).count();
        let swapped = count(&|e| {
            matches!(
                e,
                Event::Evicted {
                    how: EvictedHow::Swap,
                    ..
                }
            )
        });
        let back = count(&|e| {
            matches!(
                e,
                Event::Resident {
                    from: Some(ResidentFrom::Swap),
                    ..
                }
            )
        });
        let reclaimed = count(&|e| {
            matches!(
                e,
                Event::Evicted {
                    how: EvictedHow::Reclaim,
                    ..
                }
            )
        });
        // Each step's truth: [A present, swapped, absent, B present, swapped, absent]. The
        // kernel chooses (a page not yet on an LRU list is not paged out; reclaim takes what it
        // finds): the summary's figures follow from what it did.
        let steps: Vec<Vec<u64>> = t
            .stdout
            .lines()
            .skip(1)
            .map(|l| {
                l.split(' ')
                    .filter_map(|w| w.parse().ok())
                    .skip(1)
                    .collect()
            })
            .collect();
        let (s1, s2, s3) = (&steps[0], &steps[1], &steps[2]);
        assert!(s1[1] > 1024 && s2[1] < s1[1], "{how}: {}", t.stdout);
        let (processes, _) = t.summary();
        let p = &processes[0];
        let out = s1[1] + s3[1].saturating_sub(s2[1]) + s3[4];
        assert_eq!(
            p.swapped_out_bytes,
            out * PAGE,
            "{how}: {p:?}\n{}",
            t.stdout
        );
        assert_eq!(
            p.swapped_in_bytes,
            (s1[1] - s2[1]) * PAGE,
            "{how}: {p:?}\n{}",
            t.stdout
        );
        assert_eq!(
            p.reclaimed_bytes,
            s3[5] * PAGE,
            "{how}: {p:?}\n{}",
            t.stdout
        );
        assert!(swapped >= 1 && back >= 1, "{how}: {swapped} {back}");
        // `replay` says the same, under its table and in --json.
        let file = crate::util::scratch("pressure.jsonl");
        let text: String = t
            .lines
            .iter()
            .map(|l| serde_json::to_string(l).unwrap() + "\n")
            .collect();
        std::fs::write(&file, text).unwrap();
        let (status, table, _) =
            crate::util::run_bounded(Command::new(crate::util::bin()).arg("replay").arg(&file));
        assert_eq!(status, 0, "{how}");
        assert!(
            table.contains(&format!("{:>8} pressure: ", p.pid)),
            "{how}: {table}"
        );
        let (_, json, _) = crate::util::run_bounded(
            Command::new(crate::util::bin())
                .args(["replay", "--json"])
                .arg(&file),
        );
        let row: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
        assert_eq!(row["swapped_in_bytes"], p.swapped_in_bytes, "{how}: {row}");
        std::fs::remove_file(&file).ok();
        assert_eq!(reclaimed >= 1, s3[5] > 0, "{how}");
        assert!(t.stderr.contains("pressure: "), "{how}: {}", t.stderr);
    }
}

/// Pages swapped out where the stream has them by other ways: a main stack grown by faults (which
/// the lane, not the tracer, follows under `--faults uffd`), and a mapping `MADV_FREE`d after its
/// pages went to swap (which drops them: a `discard`, `advice` `free`). Both modes, `--verify`.
#[test]
fn a_grown_stack_paged_out_and_swapped_pages_freed_agree_with_the_kernel() {
    let Some(_swap) = SwapFile::on(64) else {
        return;
    };
    let program = workload("pressure_edges");
    for how in ["uffd", "scan", "records"] {
        let t = trace_within(
            &["--faults", how, "--sample-ms", "5", "--verify"],
            &[&program],
            HANG,
        );
        assert_eq!(
            (t.status, t.stdout.as_str()),
            (0, "done\n"),
            "{how}: {}",
            t.evidence()
        );
        let v = t.verify_totals();
        assert_eq!(v.mismatched_pages, 0, "{how}: {}", t.evidence());
        // The stack's pages paged out: an evicted line inside a stack mapping.
        let stacks: Vec<(u64, u64)> = t
            .lines
            .iter()
            .filter_map(|l| match &l.event {
                Event::Map {
                    start,
                    end,
                    kind: mevi_actors::event::MapKind::Stack,
                    ..
                } => Some((*start, *end)),
                _ => None,
            })
            .collect();
        let in_stack = |a: u64| stacks.iter().any(|&(s, e)| s <= a && a < e);
        let stack_evicted: u64 = t
            .lines
            .iter()
            .filter_map(|l| match &l.event {
                Event::Evicted {
                    start,
                    end,
                    how: EvictedHow::Swap,
                    ..
                } if in_stack(*start) => Some((end - start) / PAGE),
                _ => None,
            })
            .sum();
        assert!(
            stack_evicted >= 256,
            "{how}: {stack_evicted} stack pages evicted"
        );
        let freed = t
            .lines
            .iter()
            .any(|l| matches!(&l.event, Event::Discard { advice, .. } if advice == "free"));
        assert!(
            freed,
            "{how}: no discard of the swapped pages MADV_FREE dropped: {}",
            t.lines
                .iter()
                .filter(|l| matches!(l.event, Event::Evicted { .. } | Event::Discard { .. }))
                .map(|l| serde_json::to_string(l).unwrap())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// A process the OOM killer kills in a memory cgroup inside one limited to 32 MiB: its `exit`
/// line says so, with the cgroup whose limit was hit, the limit and the kernel log's line; a
/// `SIGKILL` sent by a program is not one.
#[test]
fn an_oom_kill_is_said_on_the_exit_line() {
    let Some(cgroup) = MemoryCgroup::new("mevi-oom") else {
        return;
    };
    cgroup.limit(32 << 20);
    let inner = cgroup.nested("inner");
    let argv: Vec<OsString> = vec![workload("oom_eater").into(), inner.dir.clone().into()];
    let t = trace_within(&[], &argv, HANG);
    assert_eq!(t.status, 128 + 9, "{}", t.stderr);
    let exit = t
        .lines
        .iter()
        .find_map(|l| match &l.event {
            Event::Exit { signal, oom, .. } => Some((signal.clone(), oom.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(exit.0.as_deref(), Some("SIGKILL"));
    let oom = exit
        .1
        .unwrap_or_else(|| panic!("no oom on the exit line\n{}", t.stderr));
    eprintln!("the OOM kill: {oom:?}");
    assert_eq!(oom.cgroup.as_deref(), Some(cgroup.path.as_str()), "{oom:?}");
    assert_eq!(oom.limit, Some(32 << 20), "{oom:?}");
    if let Some(log) = &oom.log {
        assert!(log.contains("Killed process"), "{log}");
    }
    assert!(
        t.stderr
            .contains("killed by the kernel's OOM killer in memory cgroup"),
        "{}",
        t.stderr
    );
    // With no kernel log to read (not root, `dmesg_restrict`), the counts tell it: the cgroup
    // is then the nearest with a limit, and there is no log line.
    let t = crate::util::trace_with_env(&[("MEVI_TEST_FAULT", "no-kernel-log")], &[], &argv, HANG);
    assert_eq!(t.status, 128 + 9, "{}", t.stderr);
    let oom = t.lines.iter().find_map(|l| match &l.event {
        Event::Exit { oom, .. } => oom.clone(),
        _ => None,
    });
    let oom = oom.unwrap_or_else(|| panic!("no oom without the log\n{}", t.stderr));
    assert_eq!(oom.cgroup.as_deref(), Some(cgroup.path.as_str()), "{oom:?}");
    assert_eq!((oom.limit, oom.log), (Some(32 << 20), None));
    // A SIGKILL of the program's own, with or without the log: no OOM kill.
    let t = crate::util::trace_with_env(
        &[("MEVI_TEST_FAULT", "no-kernel-log")],
        &[],
        &[workload("u10_selfkill")],
        HANG,
    );
    assert!(
        t.lines
            .iter()
            .all(|l| !matches!(&l.event, Event::Exit { oom: Some(_), .. })),
        "{}",
        t.stderr
    );
    let t = trace_within(&[], &[workload("u10_selfkill")], HANG);
    assert_eq!(t.status, 128 + 9);
    assert!(
        t.lines
            .iter()
            .all(|l| !matches!(&l.event, Event::Exit { oom: Some(_), .. })),
        "{}",
        t.stderr
    );
}

/// Every sample period, each process's memory by the kernel's count (`rss` lines), in any
/// mode: after a program has written private and shared memory and read a file, then slept,
/// its last `rss` line says what it then reads from its own `/proc/self/status`.
#[test]
fn rss_lines_say_what_the_kernel_counts() {
    let file = crate::util::scratch("rss_kinds.data");
    let program: Vec<OsString> = vec![workload("rss_kinds").into(), file.clone().into()];
    for how in ["uffd", "scan", "records"] {
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
