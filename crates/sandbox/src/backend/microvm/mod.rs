//! The `microvm` backend: one VM per sandbox, whose `/init` is our agent (initramfs from
//! `scripts/build-guest`), reached over a virtio-serial port (QEMU) or a hybrid vsock (Firecracker). The backend is used only after a boot
//! self-test passes within the boot timeout; otherwise `/health` and `list_sandboxes` say why.
//! Facts: docs/protocols/sandbox.md, "microvm" (KVM here is `kvm_pvm`: a stock guest kernel never reached
//! its console in 300 s; QEMU's TCG emulator boots to the agent in ~5 s; no Firecracker binary is
//! obtainable from the registries this project may use, so its driver is tested against a fake API).

mod fc_api;
mod firecracker;
mod qemu;

pub use qemu::tcg_clock_args;

use super::cgroup::Cgroups;
use super::spawn::Launched;
use super::{BackendKind, LaunchError, Spec};
use crate::config::Settings;
use bridge_core::link::{Connection, Framing, StreamConfig, stream};
use sandbox_agent::protocol::{Limits, MAX_FRAME_BYTES};
use serde::Serialize;
use std::path::{Path, PathBuf};
use tokio::net::UnixStream;
use tokio_util::sync::CancellationToken;

/// Guest RAM on top of what the sandbox asked for: the guest kernel and its page cache of the shares.
pub const GUEST_OVERHEAD_MIB: u64 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// Hardware virtualisation through /dev/kvm.
    Kvm,
    /// QEMU's instruction emulator: no /dev/kvm needed, seconds per boot. For tests.
    Tcg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Vmm {
    /// Firecracker where its binary is present, else QEMU.
    Auto,
    /// QEMU's `microvm` machine.
    Qemu,
    /// Firecracker (only where its binary is installed; no registry this project uses ships it).
    Firecracker,
}

/// What the self-test found, for `/health` and `list_sandboxes`.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    pub available: bool,
    /// False when no boot was tried (the backend is not microvm or auto).
    pub self_tested: bool,
    pub reason: String,
    pub vmm: Option<&'static str>,
    pub accel: Accel,
    /// Start to the agent's hello, when the self-test passed.
    pub boot_ms: Option<u64>,
    pub boot_timeout_secs: u64,
    pub kvm: String,
    pub qemu: Option<PathBuf>,
    pub firecracker: bool,
    pub kernel: bool,
    pub vmlinux: bool,
    pub initrd: bool,
}

/// A booted VM: its VMM process, the stream to its agent and the host-side things to remove.
pub struct Vm {
    pub process: Launched,
    pub conn: Connection,
    pub cgroups: Cgroups,
}

enum Driver {
    Qemu(PathBuf),
    Firecracker(PathBuf),
}

impl Driver {
    fn name(&self) -> &'static str {
        match self {
            Driver::Qemu(_) => "qemu",
            Driver::Firecracker(_) => "firecracker",
        }
    }
}

/// `sun_path` holds 108 bytes with its NUL.
const MAX_SOCKET_PATH: usize = 107;

/// A new private directory for one VM, `vm-<our pid>-<uuid>` under the state dir (so a later run can
/// clean up after a crash), refused when `socket` inside it would not fit a Unix socket address.
async fn new_vm_dir(settings: &Settings, socket: &str) -> Result<PathBuf, LaunchError> {
    let dir = settings.state_dir.join(format!(
        "vm-{}",
        super::cgroup::owned_name(&uuid::Uuid::new_v4().to_string())
    ));
    let path = dir.join(socket);
    if path.as_os_str().len() > MAX_SOCKET_PATH {
        return Err(LaunchError::Spawn(format!(
            "the VM's socket path {} is longer than {MAX_SOCKET_PATH} bytes; use a shorter SANDBOX_STATE_DIR",
            path.display()
        )));
    }
    let made = tokio::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .await;
    made.map_err(|e| LaunchError::Spawn(format!("{}: {e}", dir.display())))?;
    Ok(dir)
}

/// Host tasks a VMM may have in its pids cgroup: its vCPU threads, I/O threads and a 9p worker pool of up
/// to 64 (the guest's own processes do not count on the host).
const VMM_TASKS: u64 = 128;

/// Starts a VMM process inside its own cgroups (memory: the guest's RAM + `vmm_mib` for the VMM itself)
/// that also own `dir`. On failure nothing is left behind.
async fn start_vmm(
    settings: &Settings,
    spec: Spec,
    vmm_mib: u64,
    cmd: tokio::process::Command,
    bin: &Path,
    dir: PathBuf,
) -> Result<(Launched, Cgroups), LaunchError> {
    let vmm_spec = Spec {
        memory_mib: spec.memory_mib + GUEST_OVERHEAD_MIB + vmm_mib,
        ..spec
    };
    let tasks = VMM_TASKS + u64::from(spec.vcpus);
    let cgroups = Cgroups::create(vmm_spec, tasks, settings).await.owning(dir);
    let process = match super::spawn::start_vmm(cmd, bin) {
        Ok(p) => p,
        Err(e) => {
            cgroups.remove().await;
            return Err(e);
        }
    };
    if let Some(pid) = process.pid() {
        cgroups.adopt(pid).await;
    }
    Ok((process, cgroups))
}

/// A VMM's boot ends here: a connected socket becomes the VM; an error kills the VMM, removes its
/// cgroups and directory, and says why with what the VMM (and the guest's console) last wrote.
async fn finish(
    booted: Result<UnixStream, String>,
    process: Launched,
    cgroups: Cgroups,
    vmm: &str,
) -> Result<Vm, LaunchError> {
    match booted {
        Ok(sock) => Ok(Vm {
            process,
            conn: agent_link(sock),
            cgroups,
        }),
        Err(why) => {
            let output = process.output_text().await;
            process.kill().await;
            cgroups.remove().await;
            Err(LaunchError::Spawn(format!("{why}; {vmm} said: {output}")))
        }
    }
}

/// The agent's stream over a connected socket: the protocol's u32 length-prefixed frames.
fn agent_link(sock: UnixStream) -> Connection {
    let (read, write) = sock.into_split();
    let cfg = StreamConfig {
        framing: Framing::LengthPrefixed,
        max_frame_bytes: MAX_FRAME_BYTES,
    };
    stream::spawn(read, write, cfg, &CancellationToken::new())
}

/// What the host has, without booting anything.
pub fn facts(settings: &Settings) -> Probe {
    let m = &settings.microvm;
    let probe = Probe {
        available: false,
        self_tested: false,
        reason: String::new(),
        vmm: None,
        accel: m.accel,
        boot_ms: None,
        boot_timeout_secs: m.boot_timeout.as_secs(),
        kvm: kvm_state(),
        qemu: find_in_path(&m.qemu),
        firecracker: m.firecracker.is_file(),
        kernel: m.kernel.is_file(),
        vmlinux: m.vmlinux.is_file(),
        initrd: m.initrd.is_file(),
    };
    let vmm = Some(if wants_firecracker(settings, &probe) {
        "firecracker"
    } else {
        "qemu"
    });
    let probe = Probe { vmm, ..probe };
    let reason = match prerequisites(settings, &probe) {
        Err(why) => why,
        Ok(_) => format!(
            "not self-tested: the backend is {:?}; --sandbox-backend auto or microvm boots a test VM at start",
            settings.backend
        )
        .to_lowercase(),
    };
    Probe { reason, ..probe }
}

/// Boots one VM of the default size and waits for its agent, within the boot timeout.
pub async fn self_test(settings: &Settings) -> Probe {
    let mut probe = facts(settings);
    probe.self_tested = true;
    let driver = match prerequisites(settings, &probe) {
        Ok(d) => d,
        Err(why) => {
            probe.reason = why;
            return probe;
        }
    };
    let spec = Spec {
        backend: BackendKind::Microvm,
        image: settings.default_image,
        memory_mib: settings.memory_mib,
        vcpus: settings.vcpus,
    };
    match super::launch(settings, spec).await {
        Ok(instance) => {
            let ms = instance.boot.as_millis() as u64;
            instance.destroy().await;
            probe.available = true;
            probe.boot_ms = Some(ms);
            probe.reason = format!(
                "boot self-test passed: {} with {} reached the agent in {ms} ms",
                driver.name(),
                accel_name(settings.microvm.accel)
            );
        }
        Err(e) => {
            probe.reason = format!(
                "boot self-test failed ({} with {}, limit {} s): {e}; /dev/kvm: {}",
                driver.name(),
                accel_name(settings.microvm.accel),
                settings.microvm.boot_timeout.as_secs(),
                probe.kvm
            );
        }
    }
    probe
}

/// Boots a VM for `spec`; the caller waits for the agent's hello.
pub async fn boot(settings: &Settings, spec: Spec, limits: Limits) -> Result<Vm, LaunchError> {
    let driver = prerequisites(settings, &facts(settings))
        .map_err(|why| LaunchError::Unavailable(BackendKind::Microvm, why))?;
    match driver {
        Driver::Qemu(bin) => qemu::boot(settings, spec, limits, &bin).await,
        Driver::Firecracker(bin) => firecracker::boot(settings, spec, limits, &bin).await,
    }
}

pub(super) fn accel_name(a: Accel) -> &'static str {
    match a {
        Accel::Kvm => "kvm",
        Accel::Tcg => "tcg",
    }
}

fn wants_firecracker(settings: &Settings, probe: &Probe) -> bool {
    match settings.microvm.vmm {
        Vmm::Firecracker => true,
        Vmm::Auto => probe.firecracker,
        Vmm::Qemu => false,
    }
}

/// The driver to use, or every reason none can be.
fn prerequisites(settings: &Settings, probe: &Probe) -> Result<Driver, String> {
    let m = &settings.microvm;
    let mut why = Vec::new();
    let firecracker = wants_firecracker(settings, probe);
    if firecracker {
        if !probe.firecracker {
            why.push(format!(
                "no Firecracker binary at {} (set SANDBOX_FIRECRACKER, or --sandbox-vmm qemu)",
                m.firecracker.display()
            ));
        }
        if m.accel == Accel::Tcg {
            why.push(
                "Firecracker has no emulator: it needs --sandbox-microvm-accel kvm (tcg is QEMU's; \
                 use --sandbox-vmm qemu for it)"
                    .to_string(),
            );
        }
        if !probe.vmlinux {
            why.push(format!(
                "no uncompressed guest kernel at {} (Firecracker boots an ELF vmlinux; scripts/build-guest \
                 makes one; or set SANDBOX_VMLINUX)",
                m.vmlinux.display()
            ));
        }
    } else {
        if probe.qemu.is_none() {
            why.push(format!(
                "no QEMU binary {:?} (install qemu-system-x86, or set SANDBOX_QEMU)",
                m.qemu
            ));
        }
        if !probe.kernel {
            why.push(format!(
                "no guest kernel at {} (scripts/build-guest makes one; or set SANDBOX_KERNEL)",
                m.kernel.display()
            ));
        }
    }
    if !probe.initrd {
        why.push(format!(
            "no guest initramfs at {} (scripts/build-guest makes one; or set SANDBOX_INITRD)",
            m.initrd.display()
        ));
    }
    if m.accel == Accel::Kvm
        && std::fs::File::options()
            .read(true)
            .write(true)
            .open("/dev/kvm")
            .is_err()
    {
        why.push(format!("/dev/kvm cannot be opened ({})", probe.kvm));
    }
    if !why.is_empty() {
        return Err(why.join("; "));
    }
    match (firecracker, &probe.qemu) {
        (true, _) => Ok(Driver::Firecracker(m.firecracker.clone())),
        (false, Some(qemu)) => Ok(Driver::Qemu(qemu.clone())),
        (false, None) => Err("no QEMU binary".into()),
    }
}

fn kvm_state() -> String {
    if !Path::new("/dev/kvm").exists() {
        "absent".to_string()
    } else if Path::new("/sys/module/kvm_pvm").exists() {
        "kvm_pvm (software nested virtualisation: guest boots do not finish in time)".to_string()
    } else {
        "present".to_string()
    }
}

/// `bin` itself when it names a file, else the first match on PATH; executable files only, as a shell's
/// lookup.
fn find_in_path(bin: &Path) -> Option<PathBuf> {
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if bin.components().count() > 1 {
        return executable(bin).then(|| bin.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(bin))
        .find(|p| executable(p))
}
