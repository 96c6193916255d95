//! cgroup limits where the host lets us write them (v1 controllers as root here; a v2 controller when
//! delegated), and the per-sandbox host directories to remove. What was really applied is reported by the
//! agent (`enforced.cgroups`).

use super::Spec;
use crate::config::Settings;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The pid file a VMM's directory holds (Firecracker's, written by its driver; QEMU writes `qemu.pid`).
pub const VMM_PID_FILE: &str = "vmm.pid";
const PID_FILES: [&str; 2] = ["qemu.pid", VMM_PID_FILE];

/// Our parent group, under the bridge's own cgroup in every hierarchy.
const GROUP: &str = "mcp-bridges-sandbox";
/// Where older versions put `GROUP` (at the root of each v1 hierarchy): swept for a crashed run's groups.
const LEGACY_ROOT: &str = "/sys/fs/cgroup";
/// The controllers a sandbox's limits use; `freezer` (v1) pauses it, `cpuacct` (v1) counts its CPU time.
/// On v2 the freezer is `cgroup.freeze` in every group and CPU time `cpu.stat`, so the last two are v1 only.
const CONTROLLERS: [&str; 5] = ["memory", "pids", "cpu", "freezer", "cpuacct"];
/// cgroup v2: the leaf the bridge moves itself into, so its own cgroup may hand controllers down (v2 lets
/// processes live only in leaves of a controller-enabled subtree).
const V2_LEAF: &str = "bridge";

/// One hierarchy our groups go into: a v1 controller's, or the v2 unified one (holding every controller
/// in `controllers`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// `<mount point>/<the bridge's own cgroup>/mcp-bridges-sandbox`.
    pub parent: PathBuf,
    pub controllers: Vec<&'static str>,
    pub v2: bool,
}

/// A hierarchy found in /proc/self/cgroup and /proc/self/mountinfo, before anything is created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The bridge's own cgroup directory in that hierarchy.
    pub own: PathBuf,
    /// The path of the own cgroup inside the hierarchy (`/` at its root).
    pub path: String,
    pub controllers: Vec<&'static str>,
    pub v2: bool,
}

/// The hierarchies holding our controllers and the bridge's own cgroup in each, from the texts of
/// `/proc/self/cgroup` and `/proc/self/mountinfo`. A v1 controller wins over v2 (a controller is in one
/// hierarchy only; v2 lists it in `cgroup.controllers` only when no v1 hierarchy took it, which the
/// caller checks). A cgroup path outside its mount's root (a cgroup namespace's view) is skipped.
pub fn find(cgroup: &str, mountinfo: &str) -> Vec<Found> {
    struct Mount<'a> {
        root: &'a str,
        point: &'a str,
        v2: bool,
        opts: &'a str,
    }
    let mounts: Vec<Mount> = mountinfo
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let left: Vec<&str> = left.split_whitespace().collect();
            let mut right = right.split_whitespace();
            let fstype = right.next()?;
            let _source = right.next()?;
            let opts = right.next().unwrap_or("");
            let v2 = match fstype {
                "cgroup" => false,
                "cgroup2" => true,
                _ => return None,
            };
            Some(Mount {
                root: left.get(3)?,
                point: left.get(4)?,
                v2,
                opts,
            })
        })
        .collect();
    let dir = |m: &Mount, path: &str| -> Option<PathBuf> {
        let rel = if m.root == "/" {
            path
        } else {
            path.strip_prefix(m.root)?
        };
        let rel = rel.trim_start_matches('/');
        Some(if rel.is_empty() {
            PathBuf::from(m.point)
        } else {
            Path::new(m.point).join(rel)
        })
    };
    let mut out: Vec<Found> = Vec::new();
    let mut v1_taken = Vec::new();
    for line in cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(list), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if list.is_empty() {
            continue;
        }
        // One hierarchy may hold several of ours (`cpu,cpuacct` mounted together): one group there, not two.
        let ours: Vec<&'static str> = CONTROLLERS
            .into_iter()
            .filter(|controller| list.split(',').any(|c| c == *controller))
            .collect();
        let Some(&first) = ours.first() else {
            continue;
        };
        let Some(m) = mounts
            .iter()
            .find(|m| !m.v2 && m.opts.split(',').any(|o| o == first))
        else {
            continue;
        };
        if let Some(own) = dir(m, path) {
            v1_taken.extend(&ours);
            out.push(Found {
                own,
                path: path.to_string(),
                controllers: ours,
                v2: false,
            });
        }
    }
    let v2_path = cgroup.lines().find_map(|l| l.strip_prefix("0::"));
    v1_taken.extend(["freezer", "cpuacct"]);
    if let (Some(path), Some(m)) = (v2_path, mounts.iter().find(|m| m.v2))
        && let Some(own) = dir(m, path)
    {
        let rest: Vec<&'static str> = CONTROLLERS
            .into_iter()
            .filter(|c| !v1_taken.contains(c))
            .collect();
        if !rest.is_empty() {
            out.push(Found {
                own,
                path: path.to_string(),
                controllers: rest,
                v2: true,
            });
        }
    }
    out
}

/// The lowest memory limit on the bridge's own cgroup and its ancestors (v1 `memory.limit_in_bytes`, v2
/// `memory.max`), in MiB; `None` when there is none or it cannot be read. Sandboxes live under that cgroup,
/// so none can have more.
pub fn own_memory_limit_mib() -> Option<u64> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let f = find(&cgroup, &mountinfo)
        .into_iter()
        .find(|f| f.controllers.contains(&"memory"))?;
    let file = if f.v2 {
        "memory.max"
    } else {
        "memory.limit_in_bytes"
    };
    let depth = f.path.split('/').filter(|c| !c.is_empty()).count();
    let mut dir = f.own.as_path();
    let mut lowest: Option<u64> = None;
    for _ in 0..=depth {
        // v2's "max" (no limit) does not parse, and v1's "no limit" is near u64::MAX: both leave it.
        if let Some(bytes) = std::fs::read_to_string(dir.join(file))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
        {
            lowest = Some(lowest.map_or(bytes, |l| l.min(bytes)));
        }
        match dir.parent() {
            Some(p) => dir = p,
            None => break,
        }
    }
    lowest.map(|b| b >> 20)
}

/// Where this process puts its sandboxes' groups: found once, then prepared (v2: the bridge moved into a
/// leaf and the controllers delegated down). Hierarchies we cannot write are left out.
pub fn places() -> &'static [Place] {
    static PLACES: OnceLock<Vec<Place>> = OnceLock::new();
    PLACES.get_or_init(|| {
        let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        find(&cgroup, &mountinfo)
            .into_iter()
            .filter_map(|f| match prepare(&f) {
                Ok(p) => Some(p),
                Err(e) => {
                    tracing::debug!(own = %f.own.display(), controllers = ?f.controllers, error = %e,
                        "no sandbox cgroups in this hierarchy");
                    None
                }
            })
            .collect()
    })
}

fn prepare(f: &Found) -> std::io::Result<Place> {
    let parent = f.own.join(GROUP);
    if !f.v2 {
        // Made (to learn that we may) and left for the first sandbox to make again: an empty parent is not
        // left in the bridge's cgroup while no sandbox runs.
        std::fs::create_dir_all(&parent)?;
        let _ = std::fs::remove_dir(&parent);
        return Ok(Place {
            parent,
            controllers: f.controllers.clone(),
            v2: false,
        });
    }
    // v2: only the controllers our own cgroup was given can go further down.
    let available = std::fs::read_to_string(f.own.join("cgroup.controllers"))?;
    let controllers: Vec<&'static str> = f
        .controllers
        .iter()
        .copied()
        .filter(|c| available.split_whitespace().any(|a| a == *c))
        .collect();
    if controllers.is_empty() {
        return Err(std::io::Error::other(
            "no controller delegated to our cgroup",
        ));
    }
    enable(&f.own, &controllers, f.path == "/")?;
    std::fs::create_dir_all(&parent)?;
    enable(&parent, &controllers, true)?;
    Ok(Place {
        parent,
        controllers,
        v2: true,
    })
}

/// Hands `controllers` down from v2 group `dir`. Unless `dir` is the root (exempt) or holds no process,
/// this process first moves into the leaf `dir/bridge`: v2 refuses controllers below a group that holds
/// processes. Another process still in `dir` (a service's helper) makes the kernel refuse (EBUSY).
fn enable(dir: &Path, controllers: &[&str], exempt: bool) -> std::io::Result<()> {
    let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control"))?;
    let missing: Vec<&&str> = controllers
        .iter()
        .filter(|c| !enabled.split_whitespace().any(|e| e == **c))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !exempt
        && !std::fs::read_to_string(dir.join("cgroup.procs"))?
            .trim()
            .is_empty()
    {
        let leaf = dir.join(V2_LEAF);
        std::fs::create_dir_all(&leaf)?;
        std::fs::write(leaf.join("cgroup.procs"), std::process::id().to_string())?;
        tracing::info!(leaf = %leaf.display(), "moved the bridge into a leaf cgroup to delegate controllers to its sandboxes");
    }
    for c in missing {
        std::fs::write(dir.join("cgroup.subtree_control"), format!("+{c}"))?;
    }
    Ok(())
}

/// A sandbox's host-side leftovers: its cgroups and the directory it owns. Removed by `remove`, or, when a
/// launch is abandoned half-way (a cancelled or timed-out create drops its future), by `Drop`.
#[derive(Debug, Default)]
pub struct Cgroups {
    dirs: Vec<PathBuf>,
    /// The v1 group (pids where there is one) a namespace sandbox's agent may divide: `delegate`.
    divisible: Option<PathBuf>,
    /// A host directory owned by this sandbox (the `process` backend's workspace, a VM's directory).
    owned: Option<PathBuf>,
    removed: AtomicBool,
    /// Frozen by `freeze` and not thawed since.
    frozen: AtomicBool,
}

/// How long a freeze or thaw may take to settle before it is reported as failed.
const FREEZE_TIMEOUT: Duration = Duration::from_secs(5);

impl Cgroups {
    /// The group that can freeze the whole sandbox: v1 `freezer.state`, else v2 `cgroup.freeze`.
    fn freezer(&self) -> Option<(PathBuf, bool)> {
        let v1 = self.dirs.iter().find(|d| d.join("freezer.state").exists());
        if let Some(d) = v1 {
            return Some((d.clone(), false));
        }
        self.dirs
            .iter()
            .find(|d| d.join("cgroup.freeze").exists())
            .map(|d| (d.clone(), true))
    }

    /// Whether the sandbox has a freezer (v1 `freezer`, or v2's `cgroup.freeze`).
    pub fn can_freeze(&self) -> bool {
        self.freezer().is_some()
    }

    pub fn is_frozen(&self) -> bool {
        self.frozen.load(Ordering::SeqCst)
    }

    /// Freezes (`true`) or thaws every process of the sandbox and waits until the kernel says it is done (v1
    /// passes through `FREEZING` while tasks are stopped one by one).
    pub async fn freeze(&self, frozen: bool) -> Result<(), String> {
        let Some((dir, v2)) = self.freezer() else {
            return Err("this sandbox has no freezer cgroup (needs root and cgroup v1 `freezer` or a delegated v2 group)".into());
        };
        let (file, value) = match (v2, frozen) {
            (false, true) => ("freezer.state", "FROZEN"),
            (false, false) => ("freezer.state", "THAWED"),
            (true, true) => ("cgroup.freeze", "1"),
            (true, false) => ("cgroup.freeze", "0"),
        };
        tokio::fs::write(dir.join(file), value)
            .await
            .map_err(|e| format!("{}: {e}", dir.join(file).display()))?;
        let (probe, want) = if v2 {
            (
                "cgroup.events",
                if frozen { "frozen 1" } else { "frozen 0" },
            )
        } else {
            ("freezer.state", value)
        };
        let started = std::time::Instant::now();
        loop {
            let now = tokio::fs::read_to_string(dir.join(probe))
                .await
                .unwrap_or_default();
            if now.lines().any(|l| l.trim() == want) {
                self.frozen.store(frozen, Ordering::SeqCst);
                return Ok(());
            }
            if started.elapsed() > FREEZE_TIMEOUT {
                return Err(format!(
                    "{} still says {:?} after {FREEZE_TIMEOUT:?}",
                    dir.join(probe).display(),
                    now.trim()
                ));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// For a destroy of a frozen sandbox: every process is sent SIGKILL while frozen (nothing runs again),
    /// then thawed so the kills are delivered.
    pub async fn kill_frozen(&self) {
        if !self.is_frozen() {
            return;
        }
        if let Some((dir, _)) = self.freezer() {
            kill_tree(&dir).await;
        }
        let _ = self.freeze(false).await;
    }

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
    /// processes or a VMM's threads), each under the bridge's own cgroup of its hierarchy; a hierarchy we
    /// cannot write is skipped.
    pub async fn create(spec: Spec, pids: u64, settings: &Settings) -> Self {
        if !settings.cgroups {
            return Self::default();
        }
        let name = owned_name(&uuid::Uuid::new_v4().to_string());
        let places = tokio::task::spawn_blocking(places).await.unwrap_or(&[]);
        let mut dirs = Vec::new();
        let mut divisible = None;
        for place in places {
            let dir = place.parent.join(&name);
            if !make_group(&dir, place.v2).await {
                continue;
            }
            let mut ok = true;
            for controller in &place.controllers {
                for (file, value) in limit_files(controller, place.v2, spec, pids) {
                    ok &= tokio::fs::write(dir.join(file), value).await.is_ok();
                }
            }
            if ok {
                if !place.v2 && (divisible.is_none() || place.controllers.contains(&"pids")) {
                    divisible = Some(dir.clone());
                }
                dirs.push(dir);
            } else {
                let _ = tokio::fs::remove_dir(&dir).await;
            }
        }
        let mut c = Self::default();
        c.dirs = dirs;
        c.divisible = divisible;
        c
    }

    /// Hands the sandbox's root (host uid and gid `id`) one of its groups, so the agent can make a group
    /// per program inside it and kill a program's whole tree (children that left its session too). Only
    /// the directory becomes theirs: the limit files stay root's, and a group made inside is bounded by
    /// this one's limits (v1 is hierarchical). Nothing inside the sandbox reaches cgroupfs but the agent,
    /// through the descriptor its launcher opened. v1 only: in v2 a move needs write access to the common
    /// ancestor's `cgroup.procs` as well, which would let the sandbox's programs move themselves.
    pub async fn delegate(&self, id: u32) -> Option<PathBuf> {
        let dir = self.divisible.clone()?;
        let chowned = tokio::task::spawn_blocking({
            let dir = dir.clone();
            move || std::os::unix::fs::chown(&dir, Some(id), Some(id))
        })
        .await;
        match chowned {
            Ok(Ok(())) => Some(dir),
            Ok(Err(e)) => {
                tracing::warn!(group = %dir.display(), error = %e, "a sandbox's cgroup could not be handed to it; timeouts kill by process tree");
                None
            }
            Err(_) => None,
        }
    }

    /// Removes the groups (emptied by the sandbox's death; retried while the kernel finishes it), with
    /// any group the sandbox's agent made inside them.
    pub async fn remove(&self) {
        remove_all(&self.dirs, self.owned.as_deref()).await;
        // Only once done: a removal cut short (its task dropped as the runtime shuts down, the bridge exiting)
        // leaves the rest to Drop, which would otherwise take the flag as done and leave the groups behind.
        self.removed.store(true, Ordering::SeqCst);
    }
}

/// The files and values of `controller`'s limits.
fn limit_files(controller: &str, v2: bool, spec: Spec, pids: u64) -> Vec<(&'static str, String)> {
    let memory = (spec.memory_mib << 20).to_string();
    let quota = u64::from(spec.vcpus) * 100_000;
    match (controller, v2) {
        ("memory", false) => vec![("memory.limit_in_bytes", memory)],
        ("memory", true) => vec![("memory.max", memory)],
        ("pids", _) => vec![("pids.max", pids.to_string())],
        ("cpu", false) => vec![
            ("cpu.cfs_period_us", "100000".into()),
            ("cpu.cfs_quota_us", quota.to_string()),
        ],
        ("cpu", true) => vec![("cpu.max", format!("{quota} 100000"))],
        _ => Vec::new(),
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        if self.removed.load(Ordering::SeqCst) || (self.dirs.is_empty() && self.owned.is_none()) {
            return;
        }
        // At once, as a runtime shutting down (the bridge exiting) runs no task: every process left in the
        // groups is killed and the groups removed if they empty within a moment. What is still dying is
        // left to a task, or to the next start's sweep, so the bridge's own cgroup is not left holding them.
        let mut dirs = std::mem::take(&mut self.dirs);
        for dir in &dirs {
            for d in groups_in(dir) {
                kill_members(&d);
            }
        }
        // Up to 2 s: killed processes of a loaded machine can take that long to leave every hierarchy's groups
        // (0.5 s left a pids group behind in 2 of 5 parallel runs of limits.rs).
        for _ in 0..400 {
            dirs.retain(|dir| {
                groups_in(dir).iter().rev().for_each(|d| {
                    let _ = std::fs::remove_dir(d);
                });
                dir.exists()
            });
            if dirs.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let owned = self.owned.take();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { remove_all(&dirs, owned.as_deref()).await });
        }
    }
}

/// Makes group `dir`. A v1 parent is made again if the last sandbox's removal took it meanwhile; a v2
/// parent is only made by `prepare`, which also hands it the controllers.
async fn make_group(dir: &Path, v2: bool) -> bool {
    for _ in 0..3 {
        let made = if v2 {
            tokio::fs::create_dir(dir).await
        } else {
            tokio::fs::create_dir_all(dir).await
        };
        match made {
            Ok(()) => return true,
            Err(e) if v2 || e.kind() != std::io::ErrorKind::NotFound => return false,
            Err(_) => {}
        }
    }
    false
}

async fn remove_all(dirs: &[PathBuf], owned: Option<&Path>) {
    for dir in dirs {
        remove_tree(dir).await;
        // An empty v1 parent goes too, so the bridge's own cgroup is left as it was found (its manager
        // may want to remove it). A v2 parent keeps its delegated controllers for the next sandbox.
        if let Some(parent) = dir.parent()
            && !parent.join("cgroup.subtree_control").exists()
        {
            let _ = tokio::fs::remove_dir(parent).await;
        }
    }
    if let Some(dir) = owned {
        let _ = tokio::fs::remove_dir_all(dir).await;
    }
}

/// Removes group `dir` and the groups inside it, deepest first, each retried while its last processes
/// finish dying. True when `dir` is gone.
async fn remove_tree(dir: &Path) -> bool {
    let mut stack = vec![dir.to_path_buf()];
    let mut order = Vec::new();
    while let Some(d) = stack.pop() {
        if let Ok(mut rd) = tokio::fs::read_dir(&d).await {
            while let Ok(Some(e)) = rd.next_entry().await {
                if e.file_type().await.is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
        }
        order.push(d);
    }
    for d in order.iter().rev() {
        for _ in 0..50 {
            if tokio::fs::remove_dir(d).await.is_ok() || !d.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    !dir.exists()
}

/// Group `dir` and every group inside it, parents before children.
fn groups_in(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        if let Ok(rd) = std::fs::read_dir(&out[i]) {
            out.extend(
                rd.filter_map(Result::ok)
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
        i += 1;
    }
    out
}

/// SIGKILLs every process directly in group `dir`.
fn kill_members(dir: &Path) {
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// SIGKILLs every process in group `dir` and the groups inside it.
async fn kill_tree(dir: &Path) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(procs) = tokio::fs::read_to_string(d.join("cgroup.procs")).await {
            for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        if let Ok(mut rd) = tokio::fs::read_dir(&d).await {
            while let Ok(Some(e)) = rd.next_entry().await {
                if e.file_type().await.is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
        }
    }
}

/// At start: a crashed run's sandboxes are found by their cgroups (every process in them is killed, the
/// groups removed) under this bridge's own cgroup, and at the root of each hierarchy where older versions
/// put them; its `process` and `vm` directories under the state dir are removed, a VM's VMM killed first.
/// `own_pid_gone` (the first start in this process): what is named with our own pid is a crashed run's too,
/// under our own cgroup and in the state dir; not at a hierarchy's root outside our cgroup, which bridges in
/// other pid namespaces share, where our pid (1, in a container) is another live bridge's just as well.
/// Returns how many groups were cleaned.
pub async fn cleanup_orphans(settings: &Settings, own_pid_gone: bool) -> usize {
    let mut cleaned = 0;
    let mut parents: Vec<(PathBuf, bool)> = if settings.cgroups {
        tokio::task::spawn_blocking(places)
            .await
            .unwrap_or(&[])
            .iter()
            .map(|p| (p.parent.clone(), own_pid_gone))
            .collect()
    } else {
        Vec::new()
    };
    for controller in CONTROLLERS {
        let legacy = Path::new(LEGACY_ROOT).join(controller).join(GROUP);
        if !parents.iter().any(|(p, _)| *p == legacy) {
            parents.push((legacy, false));
        }
    }
    for (parent, own_pid_gone) in parents {
        let Ok(mut rd) = tokio::fs::read_dir(&parent).await else {
            continue;
        };
        while let Ok(Some(e)) = rd.next_entry().await {
            let dir = e.path();
            if !e.file_type().await.is_ok_and(|t| t.is_dir())
                || !orphaned(&e.file_name().to_string_lossy(), own_pid_gone)
            {
                continue;
            }
            kill_tree(&dir).await;
            // A crashed run's paused sandbox: its kills are delivered once thawed.
            let _ = tokio::fs::write(dir.join("freezer.state"), "THAWED").await;
            let _ = tokio::fs::write(dir.join("cgroup.freeze"), "0").await;
            if remove_tree(&dir).await {
                cleaned += 1;
            }
        }
        if !parent.join("cgroup.subtree_control").exists() {
            let _ = tokio::fs::remove_dir(&parent).await;
        }
    }
    if let Ok(mut rd) = tokio::fs::read_dir(&settings.state_dir).await {
        while let Ok(Some(e)) = rd.next_entry().await {
            let name = e.file_name().to_string_lossy().into_owned();
            let rest = name
                .strip_prefix("process-")
                .or_else(|| name.strip_prefix("vm-"));
            if let Some(rest) = rest
                && orphaned(rest, own_pid_gone)
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

/// True when the owner pid in `name` is no longer alive. Our own pid is alive, but `own_pid_gone` says whether
/// what carries it is this run's: not at the first start in this process, when nothing of this run exists
/// yet and it is an earlier process's that had the same pid (pid 1 of a container, on every restart).
pub(crate) fn orphaned(name: &str, own_pid_gone: bool) -> bool {
    let Some(pid) = name.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
        return false;
    };
    if pid == std::process::id() as i32 {
        return own_pid_gone;
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) == Err(nix::errno::Errno::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn v1_controllers_are_found_under_the_bridge_s_own_group_each() {
        let cgroup = "9:pids:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/svc\n0::/\n";
        let found = find(cgroup, HYBRID_MOUNTS);
        let dirs: Vec<(&str, PathBuf)> = found
            .iter()
            .map(|f| (f.controllers[0], f.own.clone()))
            .collect();
        assert_eq!(
            dirs,
            vec![
                ("pids", PathBuf::from("/sys/fs/cgroup/pids")),
                (
                    "memory",
                    PathBuf::from("/sys/fs/cgroup/memory/process_api/abc")
                ),
                ("cpu", PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/svc")),
            ]
        );
        assert!(found.iter().all(|f| !f.v2), "v1 took every controller");
    }

    #[test]
    fn pure_v2_puts_every_controller_in_the_own_unified_group() {
        let mounts = "25 20 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let found = find("0::/system.slice/bridge.service\n", mounts);
        assert_eq!(
            found,
            vec![Found {
                own: PathBuf::from("/sys/fs/cgroup/system.slice/bridge.service"),
                path: "/system.slice/bridge.service".into(),
                controllers: vec!["memory", "pids", "cpu"],
                v2: true,
            }]
        );
    }

    #[test]
    fn a_mount_of_a_subtree_is_followed_and_a_path_outside_it_skipped() {
        // A container sees its own cgroup mounted as the hierarchy's root.
        let mounts = "35 31 0:32 /docker/x /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                      39 31 0:36 /docker/x /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n";
        let found = find("4:memory:/docker/x/app\n8:pids:/elsewhere\n", mounts);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].own, PathBuf::from("/sys/fs/cgroup/memory/app"));
    }

    #[test]
    fn limits_are_written_in_each_version_s_words() {
        let spec = Spec {
            backend: crate::backend::BackendKind::Namespace,
            image: 0,
            memory_mib: 256,
            vcpus: 2,
        };
        assert_eq!(
            limit_files("memory", true, spec, 9),
            vec![("memory.max", (256u64 << 20).to_string())]
        );
        assert_eq!(
            limit_files("cpu", true, spec, 9),
            vec![("cpu.max", "200000 100000".to_string())]
        );
        assert_eq!(
            limit_files("cpu", false, spec, 9)[1],
            ("cpu.cfs_quota_us", "200000".to_string())
        );
    }
}
