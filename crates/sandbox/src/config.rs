//! The bridge's flags (each with its `SANDBOX_*` variable; Bouvet's `BOUVET_*` names are read as older
//! aliases, see `Sandbox::ENV_ALIASES`) and the settings derived from them.

use crate::backend::microvm::{Accel, Vmm};
use crate::backend::{BackendChoice, BackendKind, default_agent_bin};
use bridge_core::config;
use bridge_core::serve::McpArgs;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Sandbox")]
pub struct SandboxArgs {
    /// Isolation backend: namespace (default); microvm (a VM per sandbox, refused at start unless its
    /// boot self-test passes in time); auto (microvm when its self-test passes, else namespace); process
    /// (NO isolation; needs --unsafe-no-isolation).
    #[arg(
        long = "sandbox-backend",
        env = "SANDBOX_BACKEND",
        value_enum,
        default_value = "namespace"
    )]
    pub sandbox_backend: BackendChoice,
    /// Allow the `process` backend, which runs code on this host with no isolation at all.
    #[arg(long = "unsafe-no-isolation", env = "SANDBOX_UNSAFE_NO_ISOLATION")]
    pub sandbox_unsafe_no_isolation: bool,
    /// The guest agent binary (default: `sandbox-agent` beside this executable).
    #[arg(long = "sandbox-agent-bin", env = "SANDBOX_AGENT_BIN")]
    pub sandbox_agent_bin: Option<PathBuf>,
    /// Directory for the bridge's own state: the process backend's workspaces, a VM's sockets and pid file.
    #[arg(
        long = "sandbox-state-dir",
        env = "SANDBOX_STATE_DIR",
        default_value = "/tmp/mcp-bridges-sandbox"
    )]
    pub sandbox_state_dir: PathBuf,
    /// Keep warm sandboxes ready.
    #[arg(long = "sandbox-pool-enabled", env = "SANDBOX_POOL_ENABLED", default_value = "true", action = clap::ArgAction::Set)]
    pub sandbox_pool_enabled: bool,
    /// Warm sandboxes kept ready for the default spec.
    #[arg(long = "sandbox-pool-min-size", env = "SANDBOX_POOL_MIN_SIZE", default_value = "3", value_parser = config::ranged("SANDBOX_POOL_MIN_SIZE", 0usize, 64))]
    pub sandbox_pool_min: usize,
    /// Sandboxes booting at once for the pool.
    #[arg(long = "sandbox-pool-max-boots", env = "SANDBOX_POOL_MAX_BOOTS", default_value = "2", value_parser = config::ranged("SANDBOX_POOL_MAX_BOOTS", 1usize, 64))]
    pub sandbox_pool_max_boots: usize,
    /// Sandboxes alive at once (pool excluded).
    #[arg(long = "sandbox-max", env = "SANDBOX_MAX_SANDBOXES", default_value = "100", value_parser = config::ranged("SANDBOX_MAX_SANDBOXES", 1usize, 10_000))]
    pub sandbox_max_sandboxes: usize,
    /// A sandbox unused this long is destroyed (keepalive renews).
    #[arg(long = "sandbox-idle-timeout-secs", env = "SANDBOX_IDLE_TIMEOUT_SECS", default_value = "900", value_parser = config::ranged("SANDBOX_IDLE_TIMEOUT_SECS", 1u64, 604_800))]
    pub sandbox_idle_timeout_secs: u64,
    /// A sandbox is destroyed this long after creation, whatever keepalive says.
    #[arg(long = "sandbox-max-lifetime-secs", env = "SANDBOX_MAX_LIFETIME_SECS", default_value = "3600", value_parser = config::ranged("SANDBOX_MAX_LIFETIME_SECS", 1u64, 604_800))]
    pub sandbox_max_lifetime_secs: u64,
    /// Memory of a sandbox when create_sandbox names none (MiB).
    #[arg(long = "sandbox-memory-mib", env = "SANDBOX_MEMORY_MIB", default_value = "512", value_parser = config::ranged("SANDBOX_MEMORY_MIB", 32u64, 65_536))]
    pub sandbox_memory_mib: u64,
    /// vCPUs of a sandbox when create_sandbox names none.
    #[arg(long = "sandbox-vcpus", env = "SANDBOX_VCPUS", default_value = "1", value_parser = config::ranged("SANDBOX_VCPUS", 1u32, 64))]
    pub sandbox_vcpus: u32,
    /// Size of the writable /workspace tmpfs (MiB).
    #[arg(long = "sandbox-workspace-mib", env = "SANDBOX_WORKSPACE_MIB", default_value = "256", value_parser = config::ranged("SANDBOX_WORKSPACE_MIB", 1u64, 65_536))]
    pub sandbox_workspace_mib: u64,
    /// Size of the /tmp tmpfs (MiB).
    #[arg(long = "sandbox-tmp-mib", env = "SANDBOX_TMP_MIB", default_value = "64", value_parser = config::ranged("SANDBOX_TMP_MIB", 1u64, 65_536))]
    pub sandbox_tmp_mib: u64,
    /// Processes per sandbox user (RLIMIT_NPROC, and pids.max where cgroups are writable).
    #[arg(long = "sandbox-max-processes", env = "SANDBOX_MAX_PROCESSES", default_value = "128", value_parser = config::ranged("SANDBOX_MAX_PROCESSES", 4u64, 100_000))]
    pub sandbox_max_processes: u64,
    /// CPU seconds one process may use (RLIMIT_CPU).
    #[arg(long = "sandbox-cpu-secs", env = "SANDBOX_CPU_SECS", default_value = "600", value_parser = config::ranged("SANDBOX_CPU_SECS", 1u64, 86_400))]
    pub sandbox_cpu_secs: u64,
    /// Largest file a process may write (RLIMIT_FSIZE, MiB).
    #[arg(long = "sandbox-max-file-mib", env = "SANDBOX_MAX_FILE_MIB", default_value = "256", value_parser = config::ranged("SANDBOX_MAX_FILE_MIB", 1u64, 65_536))]
    pub sandbox_max_file_mib: u64,
    /// Timeout of a command when the call names none.
    #[arg(long = "sandbox-default-timeout-secs", env = "SANDBOX_DEFAULT_TIMEOUT_SECS", default_value = "60", value_parser = config::ranged("SANDBOX_DEFAULT_TIMEOUT_SECS", 1u64, 86_400))]
    pub sandbox_default_timeout_secs: u64,
    /// Largest timeout_secs a call may ask for.
    #[arg(long = "sandbox-max-timeout-secs", env = "SANDBOX_MAX_TIMEOUT_SECS", default_value = "600", value_parser = config::ranged("SANDBOX_MAX_TIMEOUT_SECS", 1u64, 86_400))]
    pub sandbox_max_timeout_secs: u64,
    /// Write cgroup limits (memory, pids, cpu) where the host lets us.
    #[arg(long = "sandbox-cgroups", env = "SANDBOX_CGROUPS", default_value = "true", action = clap::ArgAction::Set)]
    pub sandbox_cgroups: bool,
    /// Host uid that uid 0 inside a sandbox maps to (65536 ids from there), when running as root.
    #[arg(
        long = "sandbox-id-base",
        env = "SANDBOX_ID_BASE",
        default_value = "1300000000"
    )]
    pub sandbox_id_base: u32,
    /// microvm: the guest kernel, a bzImage (Bouvet's BOUVET_KERNEL); `scripts/build-guest` makes one.
    #[arg(
        long = "sandbox-kernel",
        env = "SANDBOX_KERNEL",
        default_value = "/var/lib/mcp-bridges/guest/vmlinuz"
    )]
    pub sandbox_kernel: PathBuf,
    /// microvm: the initramfs holding the static agent as /init and the guest's modules
    /// (`scripts/build-guest`).
    #[arg(
        long = "sandbox-initrd",
        env = "SANDBOX_INITRD",
        default_value = "/var/lib/mcp-bridges/guest/initrd.cpio"
    )]
    pub sandbox_initrd: PathBuf,
    /// microvm: a root file system image for Firecracker, which cannot share host directories (Bouvet's
    /// BOUVET_ROOTFS). QEMU shares the host's /usr read-only instead and ignores it.
    #[arg(
        long = "sandbox-rootfs",
        env = "SANDBOX_ROOTFS",
        default_value = "/var/lib/mcp-bridges/guest/rootfs.ext4"
    )]
    pub sandbox_rootfs: PathBuf,
    /// microvm: the Firecracker binary (Bouvet's BOUVET_FIRECRACKER).
    #[arg(
        long = "sandbox-firecracker",
        env = "SANDBOX_FIRECRACKER",
        default_value = "/usr/local/bin/firecracker"
    )]
    pub sandbox_firecracker: PathBuf,
    /// microvm: the QEMU binary.
    #[arg(
        long = "sandbox-qemu",
        env = "SANDBOX_QEMU",
        default_value = "qemu-system-x86_64"
    )]
    pub sandbox_qemu: PathBuf,
    /// microvm: the VMM. auto takes Firecracker where its binary is present, else QEMU.
    #[arg(
        long = "sandbox-vmm",
        env = "SANDBOX_VMM",
        value_enum,
        default_value = "auto"
    )]
    pub sandbox_vmm: Vmm,
    /// microvm: kvm (hardware virtualisation) or tcg (QEMU's emulator: seconds per boot, for tests).
    #[arg(
        long = "sandbox-microvm-accel",
        env = "SANDBOX_MICROVM_ACCEL",
        value_enum,
        default_value = "kvm"
    )]
    pub sandbox_microvm_accel: Accel,
    /// microvm: how long a guest may take from start to its agent's hello, the self-test included
    /// (default 3 s with kvm, 60 s with tcg).
    #[arg(long = "sandbox-microvm-boot-timeout-secs", env = "SANDBOX_MICROVM_BOOT_TIMEOUT_SECS", value_parser = config::ranged("SANDBOX_MICROVM_BOOT_TIMEOUT_SECS", 1u64, 600))]
    pub sandbox_microvm_boot_timeout_secs: Option<u64>,
}

/// `mcp-bridges sandbox`.
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxCommand {
    #[command(flatten)]
    pub mcp: McpArgs,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

/// Everything the bridge needs, resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    /// What was asked for; `backend` is what the self-test left (Manager::new resolves it).
    pub choice: BackendChoice,
    pub backend: BackendKind,
    pub agent_bin: PathBuf,
    pub state_dir: PathBuf,
    pub pool_enabled: bool,
    pub pool_min: usize,
    pub pool_max_boots: usize,
    pub max_sandboxes: usize,
    pub idle_timeout: Duration,
    pub max_lifetime: Duration,
    pub memory_mib: u64,
    pub vcpus: u32,
    pub workspace_mib: u64,
    pub tmp_mib: u64,
    pub max_processes: u64,
    pub cpu_secs: u64,
    pub max_file_mib: u64,
    pub default_timeout: Duration,
    pub max_timeout: Duration,
    pub cgroups: bool,
    pub id_base: u32,
    pub ro_binds: Vec<PathBuf>,
    pub microvm: MicrovmSettings,
}

#[derive(Debug, Clone)]
pub struct MicrovmSettings {
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    pub rootfs: PathBuf,
    pub firecracker: PathBuf,
    pub qemu: PathBuf,
    pub vmm: Vmm,
    pub accel: Accel,
    pub boot_timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "SANDBOX_BACKEND=process runs code on this host with NO isolation; pass --unsafe-no-isolation \
         (SANDBOX_UNSAFE_NO_ISOLATION=true) if that is really what you want"
    )]
    ProcessNeedsUnsafe,
    #[error(
        "the sandbox agent binary {0} does not exist; build it (cargo build -p sandbox-agent) or set SANDBOX_AGENT_BIN"
    )]
    NoAgent(PathBuf),
    #[error("--sandbox-backend microvm was asked for, but {0}")]
    Microvm(String),
}

impl SandboxArgs {
    pub fn settings(&self) -> Result<Settings, ConfigError> {
        if self.sandbox_backend == BackendChoice::Process && !self.sandbox_unsafe_no_isolation {
            return Err(ConfigError::ProcessNeedsUnsafe);
        }
        let agent_bin = self
            .sandbox_agent_bin
            .clone()
            .unwrap_or_else(default_agent_bin);
        if !agent_bin.is_file() {
            return Err(ConfigError::NoAgent(agent_bin));
        }
        let boot_timeout =
            self.sandbox_microvm_boot_timeout_secs
                .unwrap_or(match self.sandbox_microvm_accel {
                    Accel::Kvm => 3,
                    Accel::Tcg => 60,
                });
        Ok(Settings {
            choice: self.sandbox_backend,
            backend: self.sandbox_backend.initial(),
            agent_bin,
            state_dir: self.sandbox_state_dir.clone(),
            pool_enabled: self.sandbox_pool_enabled,
            pool_min: self.sandbox_pool_min,
            pool_max_boots: self.sandbox_pool_max_boots,
            max_sandboxes: self.sandbox_max_sandboxes,
            idle_timeout: Duration::from_secs(self.sandbox_idle_timeout_secs),
            max_lifetime: Duration::from_secs(self.sandbox_max_lifetime_secs),
            memory_mib: self.sandbox_memory_mib,
            vcpus: self.sandbox_vcpus,
            workspace_mib: self.sandbox_workspace_mib,
            tmp_mib: self.sandbox_tmp_mib,
            max_processes: self.sandbox_max_processes,
            cpu_secs: self.sandbox_cpu_secs,
            max_file_mib: self.sandbox_max_file_mib,
            default_timeout: Duration::from_secs(self.sandbox_default_timeout_secs),
            max_timeout: Duration::from_secs(self.sandbox_max_timeout_secs),
            cgroups: self.sandbox_cgroups,
            id_base: self.sandbox_id_base,
            ro_binds: [
                "/usr",
                "/etc/alternatives",
                "/etc/ld.so.cache",
                "/etc/ssl/certs",
            ]
            .iter()
            .map(PathBuf::from)
            .collect(),
            microvm: MicrovmSettings {
                kernel: self.sandbox_kernel.clone(),
                initrd: self.sandbox_initrd.clone(),
                rootfs: self.sandbox_rootfs.clone(),
                firecracker: self.sandbox_firecracker.clone(),
                qemu: self.sandbox_qemu.clone(),
                vmm: self.sandbox_vmm,
                accel: self.sandbox_microvm_accel,
                boot_timeout: Duration::from_secs(boot_timeout),
            },
        })
    }
}
