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
use crate::event::OomKill;

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
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
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
            .ok();
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

    /// Takes the kill counts of `cgroup` and its ancestors first seen now, as they are before
    /// any death of a process in them.
    pub fn watch(&mut self, cgroup: &Cgroup) {
        for (_, dir) in cgroup.chain() {
            if self.counts.contains_key(&dir) {
                continue;
            }
            if let Some(n) = Cgroup::oom_kills(&dir, cgroup.v2) {
                self.counts.insert(dir, n);
            }
        }
    }

    /// `pid` died by `SIGKILL` in `cgroup` (as last seen): the OOM kill, if it was one.
    pub fn killed(&mut self, pid: i32, cgroup: Option<&Cgroup>) -> Option<OomKill> {
        // The deepest cgroup whose count went up is the one whose limit was hit.
        let mut domain: Option<(String, PathBuf, bool)> = None;
        for (path, dir) in cgroup.map(Cgroup::chain).unwrap_or_default() {
            let v2 = cgroup.is_some_and(|c| c.v2);
            let Some(now) = Cgroup::oom_kills(&dir, v2) else {
                continue;
            };
            let before = self.counts.insert(dir.clone(), now);
            if domain.is_none() && before.is_some_and(|b| now > b) {
                domain = Some((path, dir, v2));
            }
        }
        let machine = vmstat_oom_kills().is_some_and(|now| {
            let before = self.counts.insert(PathBuf::from(VMSTAT), now);
            before.is_some_and(|b| now > b)
        });
        let counted = domain.is_some() || machine;
        let log = if self.kmsg.is_some() {
            let deadline = Instant::now() + if counted { LOG_WAIT } else { Duration::ZERO };
            loop {
                self.read_log();
                if let Some(line) = self.claim_line(pid) {
                    break Some(line);
                }
                if Instant::now() >= deadline {
                    break None;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        } else {
            None
        };
        // With a readable log, its word decides; without, the counters'.
        let killed = match &self.kmsg {
            Some(_) => log.is_some(),
            None => counted,
        };
        let memcg = self.claim_memcg(pid);
        if !killed {
            return None;
        }
        // A cgroup first seen at the death has no count from before: the log names it then.
        if domain.is_none()
            && let (Some(memcg), Some(victim)) = (memcg, cgroup)
            && memcg != "/"
        {
            let root = victim.chain().pop().map(|(_, dir)| dir).unwrap_or_default();
            let dir = root.join(memcg.trim_start_matches('/'));
            domain = Some((memcg, dir, victim.v2));
        }
        Some(OomKill {
            cgroup: domain.as_ref().map(|(path, _, _)| path.clone()),
            limit: domain
                .as_ref()
                .and_then(|(_, dir, v2)| Cgroup::limit(dir, *v2)),
            log,
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
    /// (`oom_memcg=`), taken out with it.
    fn claim_memcg(&mut self, pid: i32) -> Option<String> {
        let needle = format!(",pid={pid},");
        let i = self
            .killed_lines
            .iter()
            .position(|l| l.starts_with("oom-kill:") && l.contains(&needle))?;
        let line = self.killed_lines.remove(i);
        let memcg = line.split(',').find_map(|f| f.strip_prefix("oom_memcg="))?;
        Some(memcg.to_string())
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
    fn our_own_memory_cgroup_has_a_kill_count() {
        let Some(cg) = memory_cgroup(std::process::id() as i32) else {
            return; // no memory controller on this machine
        };
        assert!(Cgroup::oom_kills(&cg.dir, cg.v2).is_some(), "{cg:?}");
    }
}
