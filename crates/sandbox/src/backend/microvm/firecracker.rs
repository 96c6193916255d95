//! The Firecracker driver: `firecracker --api-sock <vm dir>/api.sock`, configured over its API (boot
//! source, machine, an optional read-only drive, vsock), started, and reached through its hybrid vsock:
//! connect to `<vm dir>/vsock.sock`, say `CONNECT <port>\n`, read `OK <host port>\n`; the agent listens on
//! that AF_VSOCK port. Firecracker shares no host directories: the guest gets /usr from the read-only
//! drive when `--sandbox-rootfs` names an image, else only what the initramfs holds.
//! Facts: docs/protocols/sandbox.md §4.

use super::{GUEST_OVERHEAD_MIB, Vm, fc_api, new_vm_dir};
use crate::backend::cgroup::VMM_PID_FILE;
use crate::backend::{LaunchError, Spec, spawn};
use crate::config::Settings;
use sandbox_agent::protocol::Limits;
use sandbox_agent::vm::{VM_MODE, VmConfig};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::process::Command;

/// The guest's AF_VSOCK port the agent listens on (Bouvet's too).
pub const AGENT_PORT: u32 = 52;
/// The guest's CID: each Firecracker has its own vsock device, so every guest can be 3.
const GUEST_CID: u32 = 3;
/// Firecracker's own memory beside the guest's, in its memory cgroup.
const VMM_OVERHEAD_MIB: u64 = 64;
/// The longest `OK <port>\n` line read from the vsock socket.
const MAX_ACK_BYTES: usize = 32;
/// Where the drive goes in the guest: the image is a `/usr` tree.
const DRIVE_AT: &str = "/usr";

pub async fn boot(
    settings: &Settings,
    spec: Spec,
    limits: Limits,
    firecracker: &Path,
) -> Result<Vm, LaunchError> {
    let started = Instant::now();
    let within = settings.microvm.boot_timeout;
    if settings.image_root(spec.image).is_some() {
        return Err(LaunchError::Spawn(format!(
            "image {:?} is a host directory, which Firecracker cannot share with a guest; use \
             --sandbox-vmm qemu for images",
            settings.image_name(spec.image)
        )));
    }
    let dir = new_vm_dir(settings, "vsock.sock").await?;
    let rootfs = settings
        .microvm
        .rootfs
        .is_file()
        .then(|| settings.microvm.rootfs.clone());
    let cfg = VmConfig {
        workspace_mib: settings.workspace_mib,
        tmp_mib: settings.tmp_mib,
        hostname: "sandbox".into(),
        shares: Vec::new(),
        port: String::new(),
        vsock_port: Some(AGENT_PORT),
        drive_at: rootfs.as_ref().map(|_| PathBuf::from(DRIVE_AT)),
        links: Vec::new(),
        limits,
        isolation: "microvm (firecracker, kvm)".into(),
    };
    let arg = match cfg.cmdline_arg() {
        Ok(a) => a,
        Err(e) => {
            let _ = tokio::fs::remove_dir_all(&dir).await;
            return Err(LaunchError::Spawn(format!("the guest's config: {e}")));
        }
    };
    let api = dir.join("api.sock");
    let mut cmd = Command::new(firecracker);
    cmd.env_clear()
        .arg("--api-sock")
        .arg(&api)
        .current_dir(&dir);
    let (process, cgroups) = super::start_vmm(
        settings,
        spec,
        VMM_OVERHEAD_MIB,
        cmd,
        firecracker,
        dir.clone(),
    )
    .await?;
    if let Some(pid) = process.pid() {
        // Firecracker writes no pid file: this one lets a later run kill a crashed run's VMM.
        let _ = tokio::fs::write(dir.join(VMM_PID_FILE), pid.to_string()).await;
    }
    let boot_args = format!("console=ttyS0 reboot=k panic=1 pci=off quiet {arg} -- {VM_MODE}");
    let booted = async {
        wait_for_socket(&api, &process, within).await?;
        let deadline = started + within;
        configure(
            settings,
            spec,
            &api,
            &dir,
            &boot_args,
            rootfs.as_deref(),
            deadline,
        )
        .await?;
        let left = within.saturating_sub(started.elapsed());
        handshake(&dir.join("vsock.sock"), &process, left).await
    };
    super::finish(booted.await, process, cgroups, "Firecracker").await
}

/// The API calls, in the order Firecracker's getting-started guide makes them, then `InstanceStart`.
async fn configure(
    settings: &Settings,
    spec: Spec,
    api: &Path,
    dir: &Path,
    boot_args: &str,
    rootfs: Option<&Path>,
    deadline: Instant,
) -> Result<(), String> {
    let m = &settings.microvm;
    let mut calls = vec![
        (
            "/boot-source".to_string(),
            json!({
                "kernel_image_path": m.vmlinux,
                "initrd_path": m.initrd,
                "boot_args": boot_args,
            }),
        ),
        (
            "/machine-config".to_string(),
            json!({
                "vcpu_count": spec.vcpus,
                "mem_size_mib": spec.memory_mib + GUEST_OVERHEAD_MIB,
            }),
        ),
    ];
    if let Some(image) = rootfs {
        calls.push((
            "/drives/usr".to_string(),
            json!({
                "drive_id": "usr",
                "path_on_host": image,
                "is_root_device": false,
                "is_read_only": true,
            }),
        ));
    }
    calls.push((
        "/vsock".to_string(),
        json!({"guest_cid": GUEST_CID, "uds_path": dir.join("vsock.sock")}),
    ));
    calls.push((
        "/actions".to_string(),
        json!({"action_type": "InstanceStart"}),
    ));
    for (endpoint, body) in calls {
        let left = deadline.saturating_duration_since(Instant::now());
        fc_api::put(api, &endpoint, &body, left).await?;
    }
    Ok(())
}

/// Firecracker creates its API socket as it starts.
async fn wait_for_socket(
    api: &Path,
    process: &spawn::Launched,
    within: Duration,
) -> Result<(), String> {
    let started = Instant::now();
    // The socket file appears at bind(2), before listen(2): until then a connect is refused, so the API
    // counts as up only once a connection is accepted.
    while tokio::net::UnixStream::connect(api).await.is_err() {
        if process.has_exited().await {
            return Err("Firecracker exited before its API socket accepted a connection".into());
        }
        if started.elapsed() > within {
            return Err(format!(
                "Firecracker's API socket {} accepted no connection within {} ms",
                api.display(),
                within.as_millis()
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

const NEVER_TRIED: &str = "never tried";

/// Connects through the hybrid vsock until the agent listens: before that Firecracker closes the
/// connection instead of answering `OK`.
async fn handshake(
    socket: &Path,
    process: &spawn::Launched,
    within: Duration,
) -> Result<UnixStream, String> {
    let started = Instant::now();
    let mut last = String::from(NEVER_TRIED);
    loop {
        if process.has_exited().await {
            return Err(format!(
                "Firecracker exited during the guest's boot (vsock handshake: {last})"
            ));
        }
        let left = within.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(format!(
                "the vsock handshake (CONNECT {AGENT_PORT} on {}) did not succeed within the boot \
                 timeout; last attempt: {last}",
                socket.display()
            ));
        }
        match tokio::time::timeout(left, attempt(socket)).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(why)) => last = why,
            // The deadline cut this attempt short; a completed one before it says more.
            Err(_) if last == NEVER_TRIED => last = "no answer to CONNECT".into(),
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn attempt(socket: &Path) -> Result<UnixStream, String> {
    let mut s = UnixStream::connect(socket)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    s.write_all(format!("CONNECT {AGENT_PORT}\n").as_bytes())
        .await
        .map_err(|e| format!("write CONNECT: {e}"))?;
    // Byte by byte: what follows the line is the agent's stream, which must not be read here.
    let mut line = Vec::new();
    loop {
        let mut b = [0u8; 1];
        let n = s.read(&mut b).await.map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("closed without an answer (nothing listens on the port yet)".into());
        }
        if b[0] == b'\n' {
            break;
        }
        line.push(b[0]);
        if line.len() > MAX_ACK_BYTES {
            return Err(format!("an answer longer than {MAX_ACK_BYTES} bytes"));
        }
    }
    let text = String::from_utf8_lossy(&line);
    match text.strip_prefix("OK ").map(str::parse::<u32>) {
        Some(Ok(_)) => Ok(s),
        _ => Err(format!("answered {text:?}, not \"OK <port>\"")),
    }
}
