//! A backend is "something that runs our one agent as PID 1 and hands us a byte stream to it". Every tool
//! works the same on every backend because they all talk to the same agent.

mod cgroup;
pub(crate) use cgroup::orphaned;
pub mod microvm;
mod spawn;

use crate::client::AgentClient;
use crate::config::Settings;
use sandbox_agent::launch::{LAUNCH_ENV, LaunchConfig, Network};
use sandbox_agent::protocol::{Body, Hello, Limits, Op};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::process::Command;

pub use cgroup::{Cgroups, cleanup_orphans, own_memory_limit_mib};

/// How long a namespace or process sandbox may take from spawn to the agent's `hello`.
const BOOT_TIMEOUT: Duration = Duration::from_secs(10);

/// What `--sandbox-backend` asks for; `auto` is resolved by the microVM self-test at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    /// Linux namespaces (user, mount, pid, net, ipc, uts), read-only root, tmpfs workspace: the default.
    Namespace,
    /// A microVM per sandbox; the bridge refuses to start unless the boot self-test passes in time.
    Microvm,
    /// microvm when its boot self-test passes in time, else namespace.
    Auto,
    /// No isolation at all: the agent runs as a plain child. Needs --sandbox-unsafe-no-isolation.
    Process,
}

impl BackendChoice {
    /// The backend before any self-test: `auto` starts from namespace.
    pub fn initial(self) -> BackendKind {
        match self {
            Self::Namespace | Self::Auto => BackendKind::Namespace,
            Self::Microvm => BackendKind::Microvm,
            Self::Process => BackendKind::Process,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Linux namespaces (user, mount, pid, net, ipc, uts), read-only root, tmpfs workspace: the default.
    Namespace,
    /// A microVM (QEMU microvm / Firecracker), only when its boot self-test passes.
    Microvm,
    /// No isolation at all: the agent runs as a plain child.
    Process,
}

/// What a sandbox is asked to be: the pool's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Spec {
    pub backend: BackendKind,
    /// Index into `Settings::images` (0: the host's root).
    pub image: u16,
    pub memory_mib: u64,
    pub vcpus: u32,
}

/// One running sandbox: the agent's stream and the means to end it.
#[derive(Debug)]
pub struct Instance {
    pub client: AgentClient,
    pub hello: Hello,
    pub spec: Spec,
    pub boot: Duration,
    process: spawn::Launched,
    cgroups: Cgroups,
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("the sandbox could not be started: {0}")]
    Spawn(String),
    #[error("the sandbox agent did not come up: {0}")]
    Hello(String),
    #[error("backend {0:?} is not available: {1}")]
    Unavailable(BackendKind, String),
}

/// Why a destroyed sandbox's link closed.
pub const DESTROYED: &str = "sandbox destroyed";

impl Instance {
    /// Hard stop: the launcher is killed, the parent-death signals kill the agent, and the kernel kills the
    /// rest of the pid namespace. Waits until the launcher is reaped, then removes the cgroups.
    pub async fn destroy(&self) {
        self.client.close(DESTROYED);
        // A frozen launcher would never be reaped: killed while frozen, then thawed.
        self.cgroups.kill_frozen().await;
        self.process.kill().await;
        self.cgroups.remove().await;
    }

    /// Freezes (`true`) or thaws every process of the sandbox, its agent included, with its freezer cgroup.
    /// On the microvm backend the group holds the VMM, so freezing it stops the guest's vCPUs and devices
    /// whole, as the VMM's own pause would, without a control socket per VMM. Returns how long the kernel took.
    pub async fn freeze(&self, frozen: bool) -> Result<Duration, String> {
        if self.spec.backend == BackendKind::Process {
            return Err(
                "pause needs a freezer cgroup around the sandbox; the process backend has none"
                    .into(),
            );
        }
        let started = Instant::now();
        self.cgroups.freeze(frozen).await?;
        Ok(started.elapsed())
    }

    pub fn is_paused(&self) -> bool {
        self.cgroups.is_frozen()
    }

    /// The sandbox's cgroup directories (tests read CPU time from them).
    pub fn cgroup_dirs(&self) -> Vec<PathBuf> {
        self.cgroups.dirs()
    }

    /// The host pid of the launcher (tests check it is gone).
    pub fn launcher_pid(&self) -> Option<u32> {
        self.process.pid()
    }
}

/// Starts one sandbox of `spec` (no network: the pool's) and waits for its agent's `hello`.
pub async fn launch(settings: &Settings, spec: Spec) -> Result<Instance, LaunchError> {
    launch_with(settings, spec, Network::default()).await
}

/// Starts one sandbox of `spec` with `network` (namespace backend only) and waits for its agent's `hello`.
pub async fn launch_with(
    settings: &Settings,
    spec: Spec,
    network: Network,
) -> Result<Instance, LaunchError> {
    let started = Instant::now();
    if let Some(root) = settings.image_root(spec.image)
        && let Some(why) = crate::config::image_escape(&root, &settings.ro_binds)
    {
        return Err(LaunchError::Spawn(format!(
            "image {}: {why}",
            settings.image_name(spec.image)
        )));
    }
    let limits = Limits {
        data: Some(spec.memory_mib << 20),
        processes: Some(settings.max_processes),
        cpu_secs: Some(settings.cpu_secs),
        file_size: Some(settings.max_file_mib << 20),
        open_files: Some(1024),
        seccomp: spec.backend == BackendKind::Namespace,
        landlock: spec.backend == BackendKind::Namespace,
    };
    let (process, conn, cgroups, boot_timeout) = match spec.backend {
        BackendKind::Namespace => {
            let cgroups = Cgroups::create(
                spec,
                settings.max_processes + sandbox_agent::AGENT_TASKS,
                settings,
            )
            .await;
            let cfg = LaunchConfig {
                id_base: settings.id_base,
                ro_binds: settings.ro_binds.clone(),
                image: settings.image_root(spec.image),
                workspace_mib: settings.workspace_mib,
                tmp_mib: settings.tmp_mib,
                hostname: "sandbox".into(),
                cgroups: cgroups.dirs(),
                exec_cgroup: if nix::unistd::geteuid().is_root() {
                    cgroups.delegate(settings.id_base).await
                } else {
                    None
                },
                limits,
                network,
            };
            let json =
                serde_json::to_string(&cfg).map_err(|e| LaunchError::Spawn(e.to_string()))?;
            let mut cmd = Command::new(&settings.agent_bin);
            cmd.arg("namespace").env_clear().env(LAUNCH_ENV, json);
            let (process, conn) = start_or_clean(cmd, &settings.agent_bin, &cgroups).await?;
            (process, conn, cgroups, BOOT_TIMEOUT)
        }
        BackendKind::Process => {
            let dir = settings.state_dir.join(format!(
                "process-{}",
                cgroup::owned_name(&uuid::Uuid::new_v4().to_string())
            ));
            let workspace = dir.join("workspace");
            let scratch = dir.join("scratch");
            for d in [&workspace, &scratch] {
                tokio::fs::create_dir_all(d)
                    .await
                    .map_err(|e| LaunchError::Spawn(format!("{}: {e}", d.display())))?;
            }
            let cfg = sandbox_agent::AgentConfig {
                workspace,
                scratch,
                user: None,
                limits,
                enforced: [
                    ("isolation".to_string(), serde_json::json!("none")),
                    (
                        "timeout_kill".to_string(),
                        serde_json::json!("process-tree"),
                    ),
                ]
                .into(),
            };
            let json =
                serde_json::to_string(&cfg).map_err(|e| LaunchError::Spawn(e.to_string()))?;
            let mut cmd = Command::new(&settings.agent_bin);
            cmd.env_clear()
                .env("PATH", "/usr/local/bin:/usr/bin:/bin")
                .env("SANDBOX_AGENT_CONFIG", json)
                .current_dir(&dir);
            let cgroups = Cgroups::owned_dir(dir);
            let (process, conn) = start_or_clean(cmd, &settings.agent_bin, &cgroups).await?;
            (process, conn, cgroups, BOOT_TIMEOUT)
        }
        BackendKind::Microvm => {
            let vm = microvm::boot(settings, spec, limits).await?;
            (
                vm.process,
                vm.conn,
                vm.cgroups,
                settings.microvm.boot_timeout,
            )
        }
    };
    let client = AgentClient::new(conn);
    let hello = match client
        .call(Op::Hello, boot_timeout.saturating_sub(started.elapsed()))
        .await
    {
        Ok(Body::Hello(h)) => h,
        other => {
            let why = match other {
                Ok(body) => format!("unexpected answer {body:?}"),
                Err(e) => e.to_string(),
            };
            let output = process.output_text().await;
            process.kill().await;
            cgroups.remove().await;
            let after = started.elapsed().as_secs_f64();
            return Err(LaunchError::Hello(format!(
                "{why} (after {after:.1} s); its last output: {output}"
            )));
        }
    };
    Ok(Instance {
        client,
        hello,
        spec,
        boot: started.elapsed(),
        process,
        cgroups,
    })
}

async fn start_or_clean(
    cmd: Command,
    bin: &std::path::Path,
    cgroups: &Cgroups,
) -> Result<(spawn::Launched, bridge_core::link::Connection), LaunchError> {
    match spawn::start(cmd, bin) {
        Ok(p) => Ok(p),
        Err(e) => {
            cgroups.remove().await;
            Err(e)
        }
    }
}

/// Creates the state dir (mode 0700) or checks the one there: it must be ours and writable by nobody else,
/// or another local user could swap a VM's directory and be first on its agent's socket.
pub fn prepare_state_dir(dir: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| e.to_string())?;
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    if !meta.is_dir() {
        return Err("not a directory (a symlink is refused too)".into());
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(format!(
            "owned by uid {}, not by this process's uid {me}",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "mode {:o} lets others write into it; chmod go-w it",
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// Where the agent binary is when not configured: beside this executable (or one level up, as cargo lays
/// out test binaries in `target/<profile>/deps`).
pub fn default_agent_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    let here = dir.join("sandbox-agent");
    if here.exists() {
        return here;
    }
    dir.parent()
        .map(|p| p.join("sandbox-agent"))
        .filter(|p| p.exists())
        .unwrap_or(here)
}

#[cfg(test)]
mod tests {
    use super::prepare_state_dir;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_state_dir_others_could_write_into_is_refused() {
        let base = std::env::temp_dir().join(format!("state-dir-{}", std::process::id()));
        let fresh = base.join("fresh");
        prepare_state_dir(&fresh).expect("created");
        let mode = std::fs::metadata(&fresh)
            .expect("exists")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);

        let open = base.join("open");
        std::fs::create_dir_all(&open).expect("dir");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let e = prepare_state_dir(&open).expect_err("world-writable");
        assert!(e.contains("777") && e.contains("chmod go-w"), "{e}");

        let link = base.join("link");
        std::os::unix::fs::symlink(&fresh, &link).expect("symlink");
        let e = prepare_state_dir(&link).expect_err("a symlink");
        assert!(e.contains("symlink"), "{e}");

        if nix::unistd::geteuid().is_root() {
            let foreign = base.join("foreign");
            std::fs::create_dir_all(&foreign).expect("dir");
            nix::unistd::chown(&foreign, Some(1234.into()), None).expect("chown");
            let e = prepare_state_dir(&foreign).expect_err("someone else's");
            assert!(e.contains("uid 1234"), "{e}");
        }
        std::fs::remove_dir_all(&base).expect("cleanup");
    }
}
