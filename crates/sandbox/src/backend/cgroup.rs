//! cgroup limits where the host lets us write them (v1 controllers as root here; a v2 controller when
//! delegated), and the per-sandbox host directories to remove. What was really applied is reported by the
//! agent (`enforced.cgroups`).

use super::Spec;
use crate::config::Settings;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The pid file a VMM's directory holds (Firecracker's, written by its driver; QEMU writes `qemu.pid`).
pub const VMM_PID_FILE: &str = "vmm.pid";
const PID_FILES: [&str; 2] = ["qemu.pid", VMM_PID_FILE];

/// Our parent group under every controller.
const GROUP: &str = "mcp-bridges-sandbox";
const ROOT: &str = "/sys/fs/cgroup";

/// A sandbox's host-side leftovers: its cgroups and the directory it owns. Removed by `remove`, or, when a
/// launch is abandoned half-way (a cancelled or timed-out create drops its future), by `Drop`.
#[derive(Debug, Default)]
pub struct Cgroups {
    dirs: Vec<PathBuf>,
    /// A host directory owned by this sandbox (the `process` backend's workspace, a VM's directory).
    owned: Option<PathBuf>,
    removed: AtomicBool,
}

impl Cgroups {
    pub fn owned_dir(dir: PathBuf) -> Self {
        let mut c = Self::default();
        c.owned = Some(dir);
        c
    }

    /// These groups, and `dir` removed with them.
    pub fn owning(mut self, dir: PathBuf) -> Self {
        self.owned = Some(dir);
        self
    }

    /// Moves process `pid` (every thread of it) into these groups.
    pub async fn adopt(&self, pid: u32) {
        for dir in &self.dirs {
            if let Err(e) = tokio::fs::write(dir.join("cgroup.procs"), pid.to_string()).await {
                tracing::warn!(group = %dir.display(), error = %e, "a VMM could not join its cgroup");
            }
        }
    }

    pub fn dirs(&self) -> Vec<PathBuf> {
        self.dirs.clone()
    }

    /// Creates this sandbox's groups with its limits (`pids`: tasks in the group, a namespace sandbox's
    /// processes or a VMM's threads); a controller we cannot write is skipped.
    pub async fn create(spec: Spec, pids: u64, settings: &Settings) -> Self {
        if !settings.cgroups {
            return Self::default();
        }
        let name = owned_name(&uuid::Uuid::new_v4().to_string());
        let limits: [(&str, Vec<(&str, String)>); 3] = [
            (
                "memory",
                vec![("memory.limit_in_bytes", (spec.memory_mib << 20).to_string())],
            ),
            ("pids", vec![("pids.max", pids.to_string())]),
            (
                "cpu",
                vec![
                    ("cpu.cfs_period_us", "100000".into()),
                    (
                        "cpu.cfs_quota_us",
                        (u64::from(spec.vcpus) * 100_000).to_string(),
                    ),
                ],
            ),
        ];
        let mut dirs = Vec::new();
        for (controller, files) in limits {
            let dir = Path::new(ROOT).join(controller).join(GROUP).join(&name);
            if tokio::fs::create_dir_all(&dir).await.is_err() {
                continue;
            }
            let mut ok = true;
            for (file, value) in files {
                ok &= tokio::fs::write(dir.join(file), value).await.is_ok();
            }
            if ok {
                dirs.push(dir);
            } else {
                let _ = tokio::fs::remove_dir(&dir).await;
            }
        }
        let mut c = Self::default();
        c.dirs = dirs;
        c
    }

    /// Removes the groups (emptied by the sandbox's death; retried while the kernel finishes it).
    pub async fn remove(&self) {
        self.removed.store(true, Ordering::SeqCst);
        remove_all(&self.dirs, self.owned.as_deref()).await;
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        if self.removed.load(Ordering::SeqCst) || (self.dirs.is_empty() && self.owned.is_none()) {
            return;
        }
        // The sandbox's processes were killed as their handles dropped; the groups empty shortly.
        let dirs = std::mem::take(&mut self.dirs);
        let owned = self.owned.take();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { remove_all(&dirs, owned.as_deref()).await });
        }
    }
}

async fn remove_all(dirs: &[PathBuf], owned: Option<&Path>) {
    for dir in dirs {
        for _ in 0..50 {
            if tokio::fs::remove_dir(dir).await.is_ok() || !dir.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    if let Some(dir) = owned {
        let _ = tokio::fs::remove_dir_all(dir).await;
    }
}

/// At start: a crashed run's sandboxes are found by their cgroups (every process in them is killed, the
/// groups removed) and its `process` and `vm` directories under the state dir are removed, a VM's VMM
/// killed first. Returns how many groups were cleaned.
pub async fn cleanup_orphans(settings: &Settings) -> usize {
    let mut cleaned = 0;
    for controller in ["memory", "pids", "cpu"] {
        let parent = Path::new(ROOT).join(controller).join(GROUP);
        let Ok(mut rd) = tokio::fs::read_dir(&parent).await else {
            continue;
        };
        while let Ok(Some(e)) = rd.next_entry().await {
            let dir = e.path();
            if !orphaned(&e.file_name().to_string_lossy()) {
                continue;
            }
            if let Ok(procs) = tokio::fs::read_to_string(dir.join("cgroup.procs")).await {
                for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
            for _ in 0..50 {
                if tokio::fs::remove_dir(&dir).await.is_ok() {
                    cleaned += 1;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    if let Ok(mut rd) = tokio::fs::read_dir(&settings.state_dir).await {
        while let Ok(Some(e)) = rd.next_entry().await {
            let name = e.file_name().to_string_lossy().into_owned();
            let rest = name
                .strip_prefix("process-")
                .or_else(|| name.strip_prefix("vm-"));
            if let Some(rest) = rest
                && orphaned(rest)
            {
                kill_vmm(&e.path()).await;
                let _ = tokio::fs::remove_dir_all(e.path()).await;
            }
        }
    }
    cleaned
}

/// A crashed run's VMM (QEMU or Firecracker), named by the pid file in its VM directory. The pid counts
/// only while that process's command line still names the directory: a pid reused since is left alone.
async fn kill_vmm(dir: &Path) {
    for name in PID_FILES {
        kill_named_in(dir, name).await;
    }
}

async fn kill_named_in(dir: &Path, pid_file: &str) {
    let Ok(text) = tokio::fs::read_to_string(dir.join(pid_file)).await else {
        return;
    };
    let Ok(pid) = text.trim().parse::<i32>() else {
        return;
    };
    let cmdline = tokio::fs::read(format!("/proc/{pid}/cmdline"))
        .await
        .unwrap_or_default();
    let needle = dir.as_os_str().as_encoded_bytes();
    if cmdline.windows(needle.len()).any(|w| w == needle) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// `<our pid>-<rest>`: the name of something this process owns, so a later run can tell a crashed owner's
/// leftovers from a live neighbour's.
pub fn owned_name(rest: &str) -> String {
    format!("{}-{rest}", std::process::id())
}

/// True when the owner pid in `name` is no longer alive.
fn orphaned(name: &str) -> bool {
    let Some(pid) = name.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
        return false;
    };
    pid != std::process::id() as i32
        && nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
            == Err(nix::errno::Errno::ESRCH)
}
