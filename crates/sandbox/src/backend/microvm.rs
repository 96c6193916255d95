//! The `microvm` backend's boot self-test. This build has no VM driver; the probe says what this host has
//! and why a microVM is not used, so `/health` and `list_sandboxes` can say it instead of failing later.
//! Facts: /work/shared/reference/sandbox.md §3 (KVM here is `kvm_pvm`: a stock guest kernel never reached
//! its console in 300 s; QEMU TCG needs ~5 s to an agent; no Firecracker binary is obtainable).

use crate::config::Settings;
use serde::Serialize;
use std::path::Path;

#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    pub available: bool,
    pub reason: String,
    pub kvm: String,
    pub firecracker: bool,
    pub qemu: bool,
    pub kernel: bool,
}

pub fn probe(settings: &Settings) -> Probe {
    let kvm = if !Path::new("/dev/kvm").exists() {
        "absent".to_string()
    } else if Path::new("/sys/module/kvm_pvm").exists() {
        "kvm_pvm (software nested virtualisation: guest boots do not finish in time)".to_string()
    } else {
        "present".to_string()
    };
    let firecracker = settings.firecracker.is_file();
    let qemu = [
        "/usr/bin/qemu-system-x86_64",
        "/usr/local/bin/qemu-system-x86_64",
    ]
    .iter()
    .any(|p| Path::new(p).is_file());
    let kernel = settings.kernel.is_file();
    let mut why =
        vec!["this build has no microVM driver (namespace is the isolation backend)".to_string()];
    if !firecracker {
        why.push(format!(
            "no Firecracker binary at {}",
            settings.firecracker.display()
        ));
    }
    if !kernel {
        why.push(format!("no guest kernel at {}", settings.kernel.display()));
    }
    why.push(format!("/dev/kvm: {kvm}"));
    Probe {
        available: false,
        reason: why.join("; "),
        kvm,
        firecracker,
        qemu,
        kernel,
    }
}
