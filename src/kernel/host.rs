//! Where a trace was made: the machine's name and the cgroup (and container) the traced
//! process runs in, for the `start` line. Traces from many machines and containers can then be
//! told apart, and grouped, when they are gathered in one place (docs/fleet.md).

/// The machine's host name (the UTS namespace's: a container's own, if it has one).
pub fn name() -> Option<String> {
    let name = nix::unistd::gethostname().ok()?;
    name.into_string().ok().filter(|n| !n.is_empty())
}

/// The cgroup v2 path of process `pid` (ours for None), as `/proc/PID/cgroup` gives it
/// (`0::/user.slice/...`). On a host with only cgroup v1 hierarchies, the memory
/// controller's path. None when it cannot be read (the process is gone).
pub fn cgroup(pid: Option<i32>) -> Option<String> {
    let file = match pid {
        Some(pid) => format!("/proc/{pid}/cgroup"),
        None => "/proc/self/cgroup".to_string(),
    };
    let text = std::fs::read_to_string(file).ok()?;
    cgroup_path(&text)
}

fn cgroup_path(text: &str) -> Option<String> {
    let line = |want: &dyn Fn(&str) -> bool| {
        text.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            want(controllers).then(|| path.to_string())
        })
    };
    line(&|c| c.is_empty()).or_else(|| line(&|c| c.split(',').any(|c| c == "memory")))
}

/// The container a cgroup path belongs to, as runtimes name theirs: a 64-digit hex id, alone
/// (`/docker/ID`) or in a scope (`docker-ID.scope`, `cri-containerd-ID.scope`, `crio-ID.scope`,
/// `libpod-ID.scope`), the innermost one.
pub fn container_id(cgroup: &str) -> Option<String> {
    cgroup.rsplit('/').find_map(|part| {
        let part = part.strip_suffix(".scope").unwrap_or(part);
        let id = part.rsplit(['-', ':']).next()?;
        (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unified_hierarchy_first_else_the_memory_controllers() {
        assert_eq!(
            cgroup_path("0::/user.slice/session-3.scope\n").as_deref(),
            Some("/user.slice/session-3.scope")
        );
        let v1 = "12:cpu,cpuacct:/a\n4:memory:/docker/b\n1:name=systemd:/c\n";
        assert_eq!(cgroup_path(v1).as_deref(), Some("/docker/b"));
        assert_eq!(cgroup_path("").as_deref(), None);
    }

    #[test]
    fn a_containers_id_is_found_in_the_runtimes_forms() {
        let id = "4f1e0b7c9a2d3e5f60718293a4b5c6d7e8f90123456789abcdef0123456789ab";
        for path in [
            format!("/docker/{id}"),
            format!("/system.slice/docker-{id}.scope"),
            format!("/kubepods.slice/kubepods-burstable.slice/cri-containerd-{id}.scope"),
            format!("/kubepods/besteffort/pod1234/crio-{id}.scope"),
            format!("/machine.slice/libpod-{id}.scope/container"),
        ] {
            assert_eq!(container_id(&path).as_deref(), Some(id), "{path}");
        }
        assert_eq!(
            container_id("/user.slice/user-0.slice/session-1.scope"),
            None
        );
    }
}
