//! OOM kills: whether a process that died by `SIGKILL` was killed by the kernel's OOM killer.
//! The evidence is the kernel's own: the OOM kill count of its memory cgroup (or of an ancestor,
//! the one whose limit was hit) went up as it died (`memory.oom_control` on cgroup v1,
//! `memory.events` on v2), or the machine's (`/proc/vmstat`); and when the kernel log can be read
//! (`/dev/kmsg`, as root), its "Killed process PID" line must name it, so that a `kill -9` that
//! happens beside someone else's OOM kill is not taken for one.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::procfs::{self, keyed_number};
use crate::test_hooks::{self, Fault};

/// How long a death the counters call an OOM kill waits for the kernel log's line about it:
/// the killer logs right after it sends the signal, which the victim may act on first.
const LOG_WAIT: Duration = Duration::from_millis(200);
/// Log lines about kills kept for a death not handled yet (a kill logged before its victim's
/// death was seen).
const KEPT_LINES: usize = 64;

/// A process's memory cgroup: its path in the hierarchy (as `/proc/PID/cgroup` gives it) and
/// the directory of its files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cgroup {
    pub path: String,
    dir: PathBuf,
    v2: bool,
}

impl Cgroup {
    /// The cgroup and its ancestors, deepest first, up to the hierarchy's root.
    fn chain(&self) -> Vec<(String, PathBuf)> {
        let mut chain = Vec::new();
        let (mut path, mut dir) = (self.path.clone(), self.dir.clone());
        loop {
            chain.push((path.clone(), dir.clone()));
            if path == "/" || path.is_empty() {
                return chain;
            }
            path = match path.rfind('/') {
                Some(0) | None => "/".to_string(),
                Some(i) => path[..i].to_string(),
            };
            if !dir.pop() {
                return chain;
            }
        }
    }

    /// Its count of OOM kills.
    fn oom_kills(dir: &Path, v2: bool) -> Option<u64> {
        let file = if v2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        keyed_number(&std::fs::read_to_string(dir.join(file)).ok()?, "oom_kill")
    }

    /// Its memory limit in bytes; None without one.
    fn limit(dir: &Path, v2: bool) -> Option<u64> {
        let file = if v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        let text = std::fs::read_to_string(dir.join(file)).ok()?;
        // v1 says "no limit" as the largest page-aligned counter value.
        let limit: u64 = text.trim().parse().ok()?;
        (limit < 1 << 62).then_some(limit)
    }
}

/// The memory cgroup of a process: the v1 `memory` hierarchy's if mounted, else the v2 one's if
/// it has the memory controller. None if neither (or the process is gone).
pub fn memory_cgroup(pid: i32) -> Option<Cgroup> {
    let text = super::procfs::text(format!("/proc/{pid}/cgroup")).ok()?;
    let root = Path::new("/sys/fs/cgroup");
    for line in text.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        if controllers.split(',').any(|c| c == "memory") {
            let dir = root.join("memory").join(path.trim_start_matches('/'));
            return Some(Cgroup {
                path: path.to_string(),
                dir,
                v2: false,
            });
        }
    }
    let path = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    let unified = if root.join("cgroup.controllers").exists() {
        root.to_path_buf()
    } else {
        root.join("unified")
    };
    let controllers = std::fs::read_to_string(unified.join("cgroup.controllers")).ok()?;
    controllers
        .split_whitespace()
        .any(|c| c == "memory")
        .then(|| Cgroup {
            path: path.to_string(),
            dir: unified.join(path.trim_start_matches('/')),
            v2: true,
        })
}

/// An OOM kill, as the kernel's evidence tells it (the tracer writes it on the victim's `exit`
/// line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kill {
    /// The memory cgroup of the kill (its path under the hierarchy's root): the one whose limit
    /// was hit, else the victim's; None when only the machine's count could be read.
    pub cgroup: Option<String>,
    /// That cgroup's memory limit in bytes; None when it has none.
    pub limit: Option<u64>,
    /// The kernel log's line about the kill, when the log could be read.
    pub log: Option<String>,
}

/// What the OOM killer has done, as far as the trace has looked.
#[derive(Debug)]
pub struct OomWatch {
    /// The kernel log from the trace's start on, if it can be read.
    kmsg: Option<File>,
    /// Its lines about kills not yet claimed by a death.
    killed_lines: Vec<String>,
    /// Each counter's last reading: a cgroup directory's, and `/proc/vmstat`'s (at its path).
    counts: HashMap<PathBuf, u64>,
}

impl OomWatch {
    pub fn start() -> Self {
        let kmsg = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/kmsg")
            .and_then(|mut f| f.seek(SeekFrom::End(0)).map(|_| f))
            .ok()
            .filter(|_| !test_hooks::fails(Fault::NoKernelLog, None));
        let mut watch = Self {
            kmsg,
            killed_lines: Vec::new(),
            counts: HashMap::new(),
        };
        if let Some(n) = vmstat_oom_kills() {
            watch.counts.insert(PathBuf::from(VMSTAT), n);
        }
        watch
    }

    /// Takes the kill count of `cgroup` if first seen now, as it is before any death of a
    /// process in it.
    pub fn watch(&mut self, cgroup: &Cgroup) {
        if !self.counts.contains_key(&cgroup.dir)
            && let Some(n) = Cgroup::oom_kills(&cgroup.dir, cgroup.v2)
        {
            self.counts.insert(cgroup.dir.clone(), n);
        }
    }

    /// `pid` died by `SIGKILL` in `cgroup` (as last seen): the OOM kill, if it was one.
    ///
    /// With a readable kernel log, its word decides: its "Killed process PID" line, and its
    /// `oom-kill:` line's constraint and `oom_memcg` say which cgroup's limit was hit (none for a
    /// kill of the whole machine's). Without, the counts decide: the kernel counts a kill in the
    /// victim's cgroup (and, on v2, its ancestors), so the victim's count going up says it, and
    /// the machine's (`/proc/vmstat`) only where no cgroup count can be read; the cgroup is then
    /// the nearest of the victim's and its ancestors that has a limit.
    pub fn killed(&mut self, pid: i32, cgroup: Option<&Cgroup>) -> Option<Kill> {
        let victim_counted = cgroup.and_then(|c| {
            let now = Cgroup::oom_kills(&c.dir, c.v2)?;
            let before = self.counts.insert(c.dir.clone(), now);
            Some(before.is_some_and(|b| now > b))
        });
        let machine = vmstat_oom_kills().is_some_and(|now| {
            let before = self.counts.insert(PathBuf::from(VMSTAT), now);
            before.is_some_and(|b| now > b)
        });
        let counted = victim_counted.unwrap_or(machine);
        if self.kmsg.is_none() {
            if !counted {
                return None;
            }
            let limited = cgroup.and_then(|c| {
                c.chain()
                    .into_iter()
                    .find_map(|(path, dir)| Some((path, Cgroup::limit(&dir, c.v2)?)))
            });
            return Some(Kill {
                cgroup: limited
                    .as_ref()
                    .map(|(path, _)| path.clone())
                    .or_else(|| cgroup.map(|c| c.path.clone())),
                limit: limited.map(|(_, limit)| limit),
                log: None,
            });
        }
        // The killer logs right after it sends the signal: wait for it a moment if the counts
        // say there was a kill.
        let deadline = Instant::now()
            + if counted || machine {
                LOG_WAIT
            } else {
                Duration::ZERO
            };
        let log = loop {
            self.read_log();
            if let Some(line) = self.claim_line(pid) {
                break Some(line);
            }
            if Instant::now() >= deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let memcg = self.claim_memcg(pid);
        let log = log?;
        let (path, v2) = match (memcg, cgroup) {
            (Some(path), Some(c)) => (Some(path), c.v2),
            (Some(path), None) => (Some(path), !Path::new(V1_ROOT).exists()),
            (None, _) => (None, false),
        };
        let dir = path.as_ref().map(|p| {
            let root = cgroup
                .and_then(|c| c.chain().pop())
                .map(|(_, dir)| dir)
                .unwrap_or_else(|| default_root(v2));
            root.join(p.trim_start_matches('/'))
        });
        Some(Kill {
            limit: dir.and_then(|d| Cgroup::limit(&d, v2)),
            cgroup: path,
            log: Some(log),
        })
    }

    /// Reads what the kernel log has now, keeping its lines about kills.
    fn read_log(&mut self) {
        let Some(kmsg) = self.kmsg.as_mut() else {
            return;
        };
        // One record per read; at most this many per look.
        let mut record = vec![0u8; 8192];
        for _ in 0..4096 {
            match kmsg.read(&mut record) {
                Ok(0) => return,
                Ok(n) => {
                    let text = String::from_utf8_lossy(&record[..n]);
                    // "PRIORITY,SEQ,TIME,FLAGS;MESSAGE": the message after the first ';'.
                    let message = text.split_once(';').map_or(&*text, |(_, m)| m).trim_end();
                    if message.contains("Killed process ") || message.starts_with("oom-kill:") {
                        if self.killed_lines.len() == KEPT_LINES {
                            self.killed_lines.remove(0);
                        }
                        self.killed_lines.push(message.to_string());
                    }
                }
                // Records overwritten before they were read: the next read gives the oldest
                // one left.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // EAGAIN: nothing more for now. Anything else: the log cannot be read.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.kmsg = None;
                    return;
                }
            }
        }
    }

    /// The kept log line that names `pid`'s kill, taken out.
    fn claim_line(&mut self, pid: i32) -> Option<String> {
        let needle = format!("Killed process {pid} (");
        let i = self.killed_lines.iter().position(|l| l.contains(&needle))?;
        Some(self.killed_lines.remove(i))
    }

    /// The cgroup whose limit the kill of `pid` was for, as the kernel's `oom-kill:` line says
    /// (`constraint=CONSTRAINT_MEMCG` and `oom_memcg=`; None for another constraint, the whole
    /// machine's), taken out with it.
    fn claim_memcg(&mut self, pid: i32) -> Option<String> {
        let needle = format!(",pid={pid},");
        let i = self
            .killed_lines
            .iter()
            .position(|l| l.starts_with("oom-kill:") && l.contains(&needle))?;
        memcg_of(&self.killed_lines.remove(i))
    }
}

/// The `oom_memcg` of an `oom-kill:` line, when the kill was for a cgroup's limit.
fn memcg_of(line: &str) -> Option<String> {
    let line = line.strip_prefix("oom-kill:")?;
    let field = |key: &str| line.split(',').find_map(|f| f.strip_prefix(key));
    (field("constraint=")? == "CONSTRAINT_MEMCG").then_some(())?;
    field("oom_memcg=").map(str::to_string)
}

/// Where cgroup v1's memory hierarchy is mounted.
const V1_ROOT: &str = "/sys/fs/cgroup/memory";

/// The memory hierarchy's root, for a cgroup known only by its path.
fn default_root(v2: bool) -> PathBuf {
    let root = Path::new("/sys/fs/cgroup");
    match v2 {
        false => PathBuf::from(V1_ROOT),
        true if root.join("cgroup.controllers").exists() => root.to_path_buf(),
        true => root.join("unified"),
    }
}

/// The key of the machine's count among the cgroups' (the file it is read from).
const VMSTAT: &str = "/proc/vmstat";

/// The machine's count of OOM kills.
fn vmstat_oom_kills() -> Option<u64> {
    procfs::vmstat("oom_kill")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_chain_goes_up_to_the_root() {
        let cg = Cgroup {
            path: "/a/b".into(),
            dir: PathBuf::from("/sys/fs/cgroup/memory/a/b"),
            v2: false,
        };
        let chain: Vec<(String, String)> = cg
            .chain()
            .into_iter()
            .map(|(p, d)| (p, d.display().to_string()))
            .collect();
        assert_eq!(
            chain,
            [
                ("/a/b".into(), "/sys/fs/cgroup/memory/a/b".into()),
                ("/a".into(), "/sys/fs/cgroup/memory/a".into()),
                ("/".into(), "/sys/fs/cgroup/memory".into()),
            ]
        );
    }

    #[test]
    fn the_oom_kill_line_names_the_cgroup_whose_limit_was_hit() {
        let memcg = "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,\
                     oom_memcg=/box,task_memcg=/box/inner,task=eater,pid=42,uid=0";
        assert_eq!(memcg_of(memcg).as_deref(), Some("/box"));
        let machine = "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,\
                       mems_allowed=0,global_oom,task_memcg=/,task=eater,pid=42,uid=0";
        assert_eq!(memcg_of(machine), None);
    }

    #[test]
    fn our_own_memory_cgroup_has_a_kill_count() {
        let Some(cg) = memory_cgroup(std::process::id() as i32) else {
            return; // no memory controller on this machine
        };
        assert!(Cgroup::oom_kills(&cg.dir, cg.v2).is_some(), "{cg:?}");
    }
}
