//! The bridge's flags (each with its `SANDBOX_*` variable; Bouvet's `BOUVET_*` names are read as older
//! aliases, see `Sandbox::ENV_ALIASES`) and the settings derived from them.

use crate::agent_bin;
use crate::backend::microvm::{Accel, Vmm};
use crate::backend::{BackendChoice, BackendKind, default_agent_bin};
use bridge_core::config::{self, Unit};
use bridge_core::serve::McpArgs;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Sandbox")]
pub struct SandboxArgs {
    /// Isolation backend: namespace (default); microvm (a VM per sandbox, refused at start unless its
    /// boot self-test passes in time); auto (microvm when its self-test passes, else namespace); process
    /// (NO isolation; needs --sandbox-unsafe-no-isolation).
    #[arg(
        long = "sandbox-backend",
        env = "SANDBOX_BACKEND",
        value_enum,
        default_value = "namespace"
    )]
    pub sandbox_backend: BackendChoice,
    /// Allow the `process` backend, which runs code on this host with no isolation at all.
    #[arg(
        long = "sandbox-unsafe-no-isolation",
        alias = "unsafe-no-isolation",
        env = "SANDBOX_UNSAFE_NO_ISOLATION"
    )]
    pub sandbox_unsafe_no_isolation: bool,
    /// The guest agent binary (default: the agent built into mcp-bridges, written once into the state dir;
    /// without one, `sandbox-agent` beside this executable).
    #[arg(long = "sandbox-agent-bin", env = "SANDBOX_AGENT_BIN")]
    pub sandbox_agent_bin: Option<PathBuf>,
    /// Directory for the bridge's own state: the process backend's workspaces, a VM's sockets and pid file.
    #[arg(
        long = "sandbox-state-dir",
        env = "SANDBOX_STATE_DIR",
        default_value = "/tmp/mcp-bridges-sandbox"
    )]
    pub sandbox_state_dir: PathBuf,
    /// A named image directory, NAME=DIR, whose root file system (DIR/usr, DIR/etc/alternatives, ...)
    /// replaces the host's as a sandbox's read-only root when create_sandbox asks for `image: NAME`.
    /// Repeatable; the variable takes a comma-separated list. The image `host` is always there.
    #[arg(long = "sandbox-image", env = "SANDBOX_IMAGES", value_delimiter = ',', value_parser = parse_image)]
    pub sandbox_images: Vec<(String, PathBuf)>,
    /// The image of a sandbox whose create_sandbox names none (and of the warm pool).
    #[arg(
        long = "sandbox-default-image",
        env = "SANDBOX_DEFAULT_IMAGE",
        default_value = HOST_IMAGE
    )]
    pub sandbox_default_image: String,
    /// Keep warm sandboxes ready.
    #[arg(long = "sandbox-pool-enabled", env = "SANDBOX_POOL_ENABLED", default_value = "true", action = clap::ArgAction::Set, value_parser = clap::builder::BoolishValueParser::new())]
    pub sandbox_pool_enabled: bool,
    /// Warm sandboxes kept ready for the default spec.
    #[arg(long = "sandbox-pool-min-size", env = "SANDBOX_POOL_MIN_SIZE", default_value = "3", value_parser = config::ranged(0usize, 64))]
    pub sandbox_pool_min: usize,
    /// Sandboxes booting at once for the pool.
    #[arg(long = "sandbox-pool-max-boots", env = "SANDBOX_POOL_MAX_BOOTS", default_value = "2", value_parser = config::ranged(1usize, 64))]
    pub sandbox_pool_max_boots: usize,
    /// Sandboxes alive at once (pool excluded).
    #[arg(long = "sandbox-max", env = "SANDBOX_MAX", default_value = "100", value_parser = config::ranged(1usize, 10_000))]
    pub sandbox_max_sandboxes: usize,
    /// A sandbox unused this long is destroyed (keepalive renews).
    #[arg(value_name = "DURATION", long = "sandbox-idle-timeout", alias = "sandbox-idle-timeout-secs", env = "SANDBOX_IDLE_TIMEOUT", default_value = "15m",
          value_parser = config::duration(Duration::from_secs(1), Duration::from_secs(604_800), Unit::Secs))]
    pub sandbox_idle_timeout: Duration,
    /// A sandbox is destroyed this long after creation, whatever keepalive says.
    #[arg(value_name = "DURATION", long = "sandbox-max-lifetime", alias = "sandbox-max-lifetime-secs", env = "SANDBOX_MAX_LIFETIME", default_value = "1h",
          value_parser = config::duration(Duration::from_secs(1), Duration::from_secs(604_800), Unit::Secs))]
    pub sandbox_max_lifetime: Duration,
    /// Memory of a sandbox when create_sandbox names none (MiB).
    #[arg(long = "sandbox-memory-mib", env = "SANDBOX_MEMORY_MIB", default_value = "512", value_parser = config::ranged(32u64, 65_536))]
    pub sandbox_memory_mib: u64,
    /// vCPUs of a sandbox when create_sandbox names none.
    #[arg(long = "sandbox-vcpus", env = "SANDBOX_VCPUS", default_value = "1", value_parser = config::ranged(1u32, 64))]
    pub sandbox_vcpus: u32,
    /// The most memory a create_sandbox may ask for (MiB; default: half the host's memory). Never above the
    /// host's memory.
    #[arg(long = "sandbox-max-memory-mib", env = "SANDBOX_MAX_MEMORY_MIB", value_parser = config::ranged(32u64, 1 << 30))]
    pub sandbox_max_memory_mib: Option<u64>,
    /// The most vCPUs a create_sandbox may ask for (default: the CPUs this process may run on). Never above
    /// those.
    #[arg(long = "sandbox-max-vcpus", env = "SANDBOX_MAX_VCPUS", value_parser = config::ranged(1u32, 4096))]
    pub sandbox_max_vcpus: Option<u32>,
    /// Size of the writable /workspace tmpfs (MiB).
    #[arg(long = "sandbox-workspace-mib", env = "SANDBOX_WORKSPACE_MIB", default_value = "256", value_parser = config::ranged(1u64, 65_536))]
    pub sandbox_workspace_mib: u64,
    /// Size of the /tmp tmpfs (MiB).
    #[arg(long = "sandbox-tmp-mib", env = "SANDBOX_TMP_MIB", default_value = "64", value_parser = config::ranged(1u64, 65_536))]
    pub sandbox_tmp_mib: u64,
    /// Processes per sandbox user (RLIMIT_NPROC, and pids.max where cgroups are writable).
    #[arg(long = "sandbox-max-processes", env = "SANDBOX_MAX_PROCESSES", default_value = "128", value_parser = config::ranged(4u64, 100_000))]
    pub sandbox_max_processes: u64,
    /// CPU time one process may use (RLIMIT_CPU, counted in whole seconds).
    #[arg(value_name = "DURATION", long = "sandbox-cpu", alias = "sandbox-cpu-secs", env = "SANDBOX_CPU", default_value = "10m",
          value_parser = config::duration(Duration::from_secs(1), Duration::from_secs(86_400), Unit::Secs))]
    pub sandbox_cpu: Duration,
    /// Largest file a process may write (RLIMIT_FSIZE, MiB).
    #[arg(long = "sandbox-max-file-mib", env = "SANDBOX_MAX_FILE_MIB", default_value = "256", value_parser = config::ranged(1u64, 65_536))]
    pub sandbox_max_file_mib: u64,
    /// Timeout of a command when the call names none.
    #[arg(value_name = "DURATION", long = "sandbox-default-timeout", alias = "sandbox-default-timeout-secs", env = "SANDBOX_DEFAULT_TIMEOUT", default_value = "1m",
          value_parser = config::duration(Duration::from_secs(1), Duration::from_secs(86_400), Unit::Secs))]
    pub sandbox_default_timeout: Duration,
    /// Largest timeout_secs a call may ask for.
    #[arg(value_name = "DURATION", long = "sandbox-max-timeout", alias = "sandbox-max-timeout-secs", env = "SANDBOX_MAX_TIMEOUT", default_value = "10m",
          value_parser = config::duration(Duration::from_secs(1), Duration::from_secs(86_400), Unit::Secs))]
    pub sandbox_max_timeout: Duration,
    /// Code sessions (run_code kernels) one sandbox may keep at once.
    #[arg(long = "sandbox-max-sessions", env = "SANDBOX_MAX_SESSIONS", default_value = "4", value_parser = config::ranged(1usize, 16))]
    pub sandbox_max_sessions: usize,
    /// Address the URLs of expose_port listen on. Anything but loopback lets other machines reach the
    /// sandboxes' servers: refused without --sandbox-expose-token.
    #[arg(long = "sandbox-expose-address", env = "SANDBOX_EXPOSE_ADDRESS", default_value = "127.0.0.1", value_parser = config::ip())]
    pub sandbox_expose_address: std::net::IpAddr,
    /// Bearer token every request to an exposed port must carry (`Authorization: Bearer <token>`). Empty or
    /// blank is refused.
    #[arg(long = "sandbox-expose-token", env = "SANDBOX_EXPOSE_TOKEN", hide_env_values = true, value_parser = config::secret())]
    pub sandbox_expose_token: Option<String>,
    #[command(flatten)]
    pub network: crate::network::NetworkArgs,
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
    /// microvm (QEMU): the guest kernel, a bzImage (Bouvet's BOUVET_KERNEL); `scripts/build-guest` makes one.
    #[arg(
        long = "sandbox-kernel",
        env = "SANDBOX_KERNEL",
        default_value = "/var/lib/mcp-bridges/guest/vmlinuz"
    )]
    pub sandbox_kernel: PathBuf,
    /// microvm (Firecracker): the uncompressed ELF guest kernel Firecracker boots; `scripts/build-guest`
    /// extracts it from the bzImage beside it.
    #[arg(
        long = "sandbox-vmlinux",
        env = "SANDBOX_VMLINUX",
        default_value = "/var/lib/mcp-bridges/guest/vmlinux"
    )]
    pub sandbox_vmlinux: PathBuf,
    /// microvm: the initramfs holding the static agent as /init and the guest's modules
    /// (`scripts/build-guest`).
    #[arg(
        long = "sandbox-initrd",
        env = "SANDBOX_INITRD",
        default_value = "/var/lib/mcp-bridges/guest/initrd.cpio"
    )]
    pub sandbox_initrd: PathBuf,
    /// microvm (Firecracker, which cannot share host directories; Bouvet's BOUVET_ROOTFS): an ext4 image of
    /// a /usr tree (e.g. `mkfs.ext4 -d /usr usr.ext4 2G`), attached read-only and mounted at the guest's
    /// /usr when the file exists. QEMU shares the host's /usr read-only instead and ignores it.
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
    #[arg(value_name = "DURATION", long = "sandbox-microvm-boot-timeout", alias = "sandbox-microvm-boot-timeout-secs",
          env = "SANDBOX_MICROVM_BOOT_TIMEOUT",
          value_parser = config::duration(Duration::from_secs(1), Duration::from_secs(600), Unit::Secs))]
    pub sandbox_microvm_boot_timeout: Option<Duration>,
}

/// The image that is the host's own `/usr` (and /bin, /lib*, /etc/alternatives, ...).
pub const HOST_IMAGE: &str = "host";
/// Images configurable at once (each warm spec costs a sandbox).
pub const MAX_IMAGES: usize = 16;

fn parse_image(text: &str) -> Result<(String, PathBuf), String> {
    let (name, dir) = text
        .split_once('=')
        .ok_or_else(|| format!("--sandbox-image {text:?}: expected NAME=DIR"))?;
    let valid = !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !valid {
        return Err(format!(
            "--sandbox-image {name:?}: a name is 1 to 32 of a-z, 0-9, - and _"
        ));
    }
    if name == HOST_IMAGE {
        return Err(format!(
            "--sandbox-image: {HOST_IMAGE:?} is the host's own root and cannot be redefined"
        ));
    }
    let dir = PathBuf::from(dir);
    if !dir.is_absolute() || !dir.join("usr").is_dir() {
        return Err(format!(
            "--sandbox-image {name}={}: not an absolute path to a root file system (it needs a usr/ directory)",
            dir.display()
        ));
    }
    Ok((name.to_string(), dir))
}

/// A read-only root a sandbox can get: the host's (`root: None`) or an image directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub name: String,
    pub root: Option<PathBuf>,
}

/// `mcp-bridges sandbox`.
#[derive(Debug, Clone, clap::Args)]
pub struct SandboxCommand {
    #[command(flatten)]
    pub mcp: McpArgs,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
    /// Without a command: serve MCP. `template`: build or list templates.
    #[command(subcommand)]
    pub sub: Option<crate::template::SandboxSub>,
}

/// Everything the bridge needs, resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    /// What was asked for; `backend` is what the self-test left (Manager::new resolves it).
    pub choice: BackendChoice,
    pub backend: BackendKind,
    pub agent_bin: PathBuf,
    /// The embedded agent, to be written at `agent_bin` (in the state dir) before the first sandbox.
    pub install_agent: Option<&'static [u8]>,
    pub state_dir: PathBuf,
    pub pool_enabled: bool,
    pub pool_min: usize,
    pub pool_max_boots: usize,
    pub max_sandboxes: usize,
    pub idle_timeout: Duration,
    pub max_lifetime: Duration,
    pub memory_mib: u64,
    pub vcpus: u32,
    /// What a create may ask for at most, and the host figures they were checked against.
    pub max: Maxima,
    pub workspace_mib: u64,
    pub tmp_mib: u64,
    pub max_processes: u64,
    pub cpu_secs: u64,
    pub max_file_mib: u64,
    pub default_timeout: Duration,
    pub max_timeout: Duration,
    pub max_sessions: usize,
    /// expose_port's listening address and token.
    pub expose_address: std::net::IpAddr,
    pub expose_token: Option<bridge_core::auth::Token>,
    pub cgroups: bool,
    pub id_base: u32,
    pub ro_binds: Vec<PathBuf>,
    /// Index 0 is the host's root; a `Spec` names an image by its index here.
    pub images: Vec<Image>,
    pub default_image: u16,
    pub microvm: MicrovmSettings,
    pub network: crate::network::NetworkSettings,
}

/// The largest memory and vCPU count a sandbox may have, and where each limit comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Maxima {
    pub memory_mib: u64,
    pub vcpus: u32,
    /// The memory the bridge may use: MemTotal of /proc/meminfo, or its own cgroup's limit when lower
    /// (`memory_from_cgroup`), as its sandboxes live under that cgroup.
    pub host_memory_mib: u64,
    pub memory_from_cgroup: bool,
    /// The CPUs this process may run on (affinity and cgroup quota).
    pub host_cpus: u32,
    /// True when SANDBOX_MAX_MEMORY_MIB / SANDBOX_MAX_VCPUS set them (else the defaults).
    pub memory_configured: bool,
    pub vcpus_configured: bool,
}

impl Maxima {
    /// From the configured values (if any) and the host: memory defaults to half the host's, vCPUs to all
    /// available; a configured value above the host is an error naming both.
    pub fn resolve(
        memory: Option<u64>,
        vcpus: Option<u32>,
        (host_memory_mib, memory_from_cgroup): (u64, bool),
        host_cpus: u32,
    ) -> Result<Self, ConfigError> {
        if let Some(m) = memory
            && m > host_memory_mib
        {
            let whose = if memory_from_cgroup {
                "the bridge's cgroup allows"
            } else {
                "this host has"
            };
            return Err(ConfigError::Limit(format!(
                "SANDBOX_MAX_MEMORY_MIB is {m}; {whose} {host_memory_mib} MiB of memory"
            )));
        }
        if let Some(v) = vcpus
            && v > host_cpus
        {
            return Err(ConfigError::Limit(format!(
                "SANDBOX_MAX_VCPUS is {v}; this process may run on {host_cpus} CPUs"
            )));
        }
        Ok(Self {
            memory_mib: memory.unwrap_or((host_memory_mib / 2).max(32)),
            vcpus: vcpus.unwrap_or(host_cpus).max(1),
            host_memory_mib,
            memory_from_cgroup,
            host_cpus,
            memory_configured: memory.is_some(),
            vcpus_configured: vcpus.is_some(),
        })
    }

    /// Where the memory limit comes from, for messages.
    pub fn memory_source(&self) -> String {
        if self.memory_configured {
            "SANDBOX_MAX_MEMORY_MIB".into()
        } else {
            let whose = if self.memory_from_cgroup {
                "the bridge's cgroup limit of"
            } else {
                "the host's"
            };
            format!(
                "half of {whose} {} MiB; SANDBOX_MAX_MEMORY_MIB sets it",
                self.host_memory_mib
            )
        }
    }

    pub fn vcpus_source(&self) -> String {
        if self.vcpus_configured {
            "SANDBOX_MAX_VCPUS".into()
        } else {
            format!(
                "the {} CPUs this host lets the bridge use; SANDBOX_MAX_VCPUS lowers it",
                self.host_cpus
            )
        }
    }
}

/// MemTotal in MiB (`None` when /proc/meminfo cannot be read).
pub fn host_memory_mib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024)
}

/// The memory this bridge may use (MiB), and whether its cgroup's limit is what bounds it.
fn bridge_memory_mib() -> (u64, bool) {
    let host = host_memory_mib().unwrap_or(u64::MAX >> 20);
    match crate::backend::own_memory_limit_mib() {
        Some(limit) if limit < host => (limit, true),
        _ => (host, false),
    }
}

/// The CPUs this process may run on.
pub fn host_cpus() -> u32 {
    std::thread::available_parallelism()
        .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
        .unwrap_or(1)
}

#[derive(Debug, Clone)]
pub struct MicrovmSettings {
    pub kernel: PathBuf,
    pub vmlinux: PathBuf,
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
        "SANDBOX_BACKEND=process runs code on this host with NO isolation; pass --sandbox-unsafe-no-isolation \
         (SANDBOX_UNSAFE_NO_ISOLATION=true) if that is really what you want"
    )]
    ProcessNeedsUnsafe,
    #[error(
        "the sandbox agent {0} (--sandbox-agent-bin, SANDBOX_AGENT_BIN) does not exist; build one with `{cmd}` \
         (it is then target/release/sandbox-agent), or unset it to use the agent built into mcp-bridges",
        cmd = crate::agent_bin::BUILD_COMMAND
    )]
    NoAgent(PathBuf),
    #[error(
        "no sandbox agent: this mcp-bridges carries none (built with MCP_BRIDGES_AGENT=none?) and there is no \
         {0}; build one with `{cmd}` and pass it with --sandbox-agent-bin (SANDBOX_AGENT_BIN)",
        cmd = crate::agent_bin::BUILD_COMMAND
    )]
    NoDefaultAgent(PathBuf),
    #[error("cannot write the embedded sandbox agent to {0}: {1}")]
    InstallAgent(PathBuf, String),
    #[error("--sandbox-backend microvm was asked for, but {0}")]
    Microvm(String),
    #[error("the state dir {0} (SANDBOX_STATE_DIR) cannot be used: {1}")]
    StateDir(PathBuf, String),
    #[error("--sandbox-image {0}: {1}")]
    Image(String, String),
    #[error("{0}")]
    Limit(String),
    #[error("--sandbox-network-allow ({0})")]
    Network(String),
    #[error(transparent)]
    Exposure(#[from] bridge_core::serve::ExposureError),
}

impl SandboxArgs {
    /// A sandbox created with the defaults must fit the maxima; its tmpfs mounts (the workspace, /tmp and
    /// /dev/shm, all in RAM) must fit the largest memory a sandbox may have.
    fn check_defaults(&self, max: &Maxima) -> Result<(), ConfigError> {
        if self.sandbox_memory_mib > max.memory_mib {
            return Err(ConfigError::Limit(format!(
                "SANDBOX_MEMORY_MIB is {}; a sandbox may have at most {} MiB ({})",
                self.sandbox_memory_mib,
                max.memory_mib,
                max.memory_source()
            )));
        }
        if self.sandbox_vcpus > max.vcpus {
            return Err(ConfigError::Limit(format!(
                "SANDBOX_VCPUS is {}; a sandbox may have at most {} ({})",
                self.sandbox_vcpus,
                max.vcpus,
                max.vcpus_source()
            )));
        }
        let in_ram = self.sandbox_workspace_mib + 2 * self.sandbox_tmp_mib;
        if in_ram > max.memory_mib {
            return Err(ConfigError::Limit(format!(
                "SANDBOX_WORKSPACE_MIB + 2 x SANDBOX_TMP_MIB (/tmp and /dev/shm) is {in_ram} MiB of tmpfs \
                 in RAM; a sandbox may have at most {} MiB of memory ({})",
                max.memory_mib,
                max.memory_source()
            )));
        }
        Ok(())
    }

    pub fn settings(&self) -> Result<Settings, ConfigError> {
        if self.sandbox_backend == BackendChoice::Process && !self.sandbox_unsafe_no_isolation {
            return Err(ConfigError::ProcessNeedsUnsafe);
        }
        bridge_core::serve::check_exposure(
            "expose_port's URLs",
            self.sandbox_expose_address,
            "--sandbox-expose-address (SANDBOX_EXPOSE_ADDRESS)",
            self.sandbox_expose_token.is_some(),
            "--sandbox-expose-token (SANDBOX_EXPOSE_TOKEN)",
        )?;
        let (agent_bin, install_agent) = match (&self.sandbox_agent_bin, agent_bin::embedded()) {
            (Some(bin), _) if !bin.is_file() => return Err(ConfigError::NoAgent(bin.clone())),
            (Some(bin), _) => (bin.clone(), None),
            (None, Some(agent)) => (
                agent_bin::installed_path(&self.sandbox_state_dir, agent),
                Some(agent),
            ),
            (None, None) => match default_agent_bin() {
                bin if bin.is_file() => (bin, None),
                bin => return Err(ConfigError::NoDefaultAgent(bin)),
            },
        };
        let ro_binds: Vec<PathBuf> = [
            "/usr",
            "/etc/alternatives",
            "/etc/ld.so.cache",
            "/etc/ssl/certs",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let mut images = vec![Image {
            name: HOST_IMAGE.into(),
            root: None,
        }];
        for (name, dir) in &self.sandbox_images {
            if images.iter().any(|i| &i.name == name) {
                return Err(ConfigError::Image(name.clone(), "named twice".into()));
            }
            if images.len() > MAX_IMAGES {
                return Err(ConfigError::Image(
                    name.clone(),
                    format!("at most {MAX_IMAGES} images besides {HOST_IMAGE}"),
                ));
            }
            if let Some(why) = image_escape(dir, &ro_binds) {
                return Err(ConfigError::Image(name.clone(), why));
            }
            images.push(Image {
                name: name.clone(),
                root: Some(dir.clone()),
            });
        }
        let default_image = images
            .iter()
            .position(|i| i.name == self.sandbox_default_image)
            .ok_or_else(|| {
                ConfigError::Image(
                    self.sandbox_default_image.clone(),
                    format!(
                        "--sandbox-default-image names no image (there are: {})",
                        image_names(&images)
                    ),
                )
            })?;
        let max = Maxima::resolve(
            self.sandbox_max_memory_mib,
            self.sandbox_max_vcpus,
            bridge_memory_mib(),
            host_cpus(),
        )?;
        self.check_defaults(&max)?;
        let boot_timeout =
            self.sandbox_microvm_boot_timeout
                .unwrap_or(match self.sandbox_microvm_accel {
                    Accel::Kvm => Duration::from_secs(3),
                    Accel::Tcg => Duration::from_secs(60),
                });
        Ok(Settings {
            choice: self.sandbox_backend,
            backend: self.sandbox_backend.initial(),
            agent_bin,
            install_agent,
            state_dir: self.sandbox_state_dir.clone(),
            pool_enabled: self.sandbox_pool_enabled,
            pool_min: self.sandbox_pool_min,
            pool_max_boots: self.sandbox_pool_max_boots,
            max_sandboxes: self.sandbox_max_sandboxes,
            idle_timeout: self.sandbox_idle_timeout,
            max_lifetime: self.sandbox_max_lifetime,
            memory_mib: self.sandbox_memory_mib,
            vcpus: self.sandbox_vcpus,
            max,
            workspace_mib: self.sandbox_workspace_mib,
            tmp_mib: self.sandbox_tmp_mib,
            max_processes: self.sandbox_max_processes,
            cpu_secs: self.sandbox_cpu.as_secs().max(1),
            max_file_mib: self.sandbox_max_file_mib,
            default_timeout: self.sandbox_default_timeout,
            max_timeout: self.sandbox_max_timeout,
            max_sessions: self.sandbox_max_sessions,
            expose_address: self.sandbox_expose_address,
            expose_token: self
                .sandbox_expose_token
                .as_deref()
                .map(bridge_core::auth::Token::new),
            cgroups: self.sandbox_cgroups,
            id_base: self.sandbox_id_base,
            ro_binds,
            default_image: u16::try_from(default_image).unwrap_or(0),
            images,
            microvm: MicrovmSettings {
                kernel: self.sandbox_kernel.clone(),
                vmlinux: self.sandbox_vmlinux.clone(),
                initrd: self.sandbox_initrd.clone(),
                rootfs: self.sandbox_rootfs.clone(),
                firecracker: self.sandbox_firecracker.clone(),
                qemu: self.sandbox_qemu.clone(),
                vmm: self.sandbox_vmm,
                accel: self.sandbox_microvm_accel,
                boot_timeout,
            },
            network: self.network.settings().map_err(ConfigError::Network)?,
        })
    }
}

/// Why image `root` cannot be used: one of the read-only paths resolves (through a symlink on the way)
/// outside the image, e.g. `usr -> /`, which would hand the sandbox the host's files. Checked at start and
/// again at every launch, since the directory may change meanwhile.
pub fn image_escape(root: &Path, ro_binds: &[PathBuf]) -> Option<String> {
    let inside = match std::fs::canonicalize(root) {
        Ok(p) => p,
        Err(e) => return Some(format!("{}: {e}", root.display())),
    };
    for bind in ro_binds {
        let path = root.join(bind.strip_prefix("/").unwrap_or(bind));
        if path.symlink_metadata().is_err() {
            continue;
        }
        match std::fs::canonicalize(&path) {
            Ok(real) if real.starts_with(&inside) => {}
            Ok(real) => {
                return Some(format!(
                    "{} leads out of the image, to {}",
                    path.display(),
                    real.display()
                ));
            }
            Err(e) => return Some(format!("{}: {e}", path.display())),
        }
    }
    None
}

/// "host, tiny, ...", for messages.
pub fn image_names(images: &[Image]) -> String {
    images
        .iter()
        .filter(|i| !i.name.starts_with(crate::template::PREFIX))
        .map(|i| i.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Settings {
    /// The image directory of image `index`; `None` for the host's root.
    pub fn image_root(&self, index: u16) -> Option<PathBuf> {
        self.images
            .get(usize::from(index))
            .and_then(|i| i.root.clone())
    }

    pub fn image_name(&self, index: u16) -> &str {
        self.images
            .get(usize::from(index))
            .map_or(HOST_IMAGE, |i| i.name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_flags_are_checked_with_the_reason() {
        let dir = std::env::temp_dir().join(format!("img-flag-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("usr")).expect("image dir");
        let good = format!("deb-12={}", dir.display());
        assert_eq!(
            parse_image(&good).expect("valid"),
            ("deb-12".to_string(), dir.clone())
        );
        for (flag, says) in [
            ("noequals".to_string(), "NAME=DIR"),
            (format!("={}", dir.display()), "1 to 32"),
            (format!("Caps={}", dir.display()), "1 to 32"),
            (format!("host={}", dir.display()), "cannot be redefined"),
            ("rel=relative/dir".to_string(), "absolute"),
            ("tmp=/tmp".to_string(), "usr/"),
        ] {
            let e = parse_image(&flag).expect_err(&flag);
            assert!(e.contains(says), "{flag}: {e}");
        }
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
