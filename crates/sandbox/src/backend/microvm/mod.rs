//! The `microvm` backend: one VM per sandbox, whose `/init` is our agent (initramfs from
//! `scripts/build-guest`), reached over a virtio-serial port. The backend is used only after a boot
//! self-test passes within the boot timeout; otherwise `/health` and `list_sandboxes` say why.
//! Facts: docs/protocols/sandbox.md, "microvm" (KVM here is `kvm_pvm`: a stock guest kernel never reached
//! its console in 300 s; QEMU's TCG emulator boots to the agent in ~5 s; no Firecracker binary is
//! obtainable from the registries this project may use).

mod qemu;

pub use qemu::tcg_clock_args;

use super::cgroup::Cgroups;
use super::spawn::Launched;
use super::{BackendKind, LaunchError, Spec};
use crate::config::Settings;
use bridge_core::link::Connection;
use sandbox_agent::protocol::Limits;
use serde::Serialize;
use std::path::{Path, PathBuf};

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
}

impl Driver {
    fn name(&self) -> &'static str {
        match self {
            Driver::Qemu(_) => "qemu",
        }
    }
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
        initrd: m.initrd.is_file(),
    };
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
    probe.vmm = Some(driver.name());
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
    }
}

fn accel_name(a: Accel) -> &'static str {
    match a {
        Accel::Kvm => "kvm",
        Accel::Tcg => "tcg",
    }
}

/// The driver to use, or every reason none can be.
fn prerequisites(settings: &Settings, probe: &Probe) -> Result<Driver, String> {
    let m = &settings.microvm;
    let mut why = Vec::new();
    let want_firecracker = match m.vmm {
        Vmm::Firecracker => true,
        Vmm::Auto => probe.firecracker,
        Vmm::Qemu => false,
    };
    if want_firecracker {
        why.push(format!(
            "the Firecracker driver is not part of this build; use --sandbox-vmm qemu (Firecracker binary at {}: {})",
            m.firecracker.display(),
            if probe.firecracker { "present" } else { "absent" }
        ));
    } else if probe.qemu.is_none() {
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
    match (why.is_empty(), &probe.qemu) {
        (true, Some(qemu)) => Ok(Driver::Qemu(qemu.clone())),
        _ => Err(why.join("; ")),
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

/// `bin` itself when it names a file, else the first match on PATH.
fn find_in_path(bin: &Path) -> Option<PathBuf> {
    if bin.components().count() > 1 {
        return bin.is_file().then(|| bin.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(bin))
        .find(|p| p.is_file())
}
