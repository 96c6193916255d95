//! `microvm` mode: the agent is `/init` of a guest kernel, started from an initramfs that holds only the
//! agent and the kernel modules it needs. It loads the modules, mounts the host's shares read-only, builds
//! the tree the namespace backend builds (tmpfs workspace and /tmp, generated /etc, only `lo`), and serves
//! the protocol on its virtio-serial port (QEMU) or on an AF_VSOCK port (Firecracker, which also may give it
//! a read-only /usr drive instead of shares). Its config comes on the kernel command line, never in a file
//! shared between guests.
//!
//! Facts this relies on (docs/protocols/sandbox.md, "microvm"): a Debian kernel has virtio, virtio-mmio,
//! virtio-console and 9p as modules that must be loaded in dependency order; a virtio-serial port can be
//! opened by one fd only and reads EOF while the host side is not connected.

use crate::agent::AgentConfig;
use crate::launch::{
    SANDBOX_UID, SCRATCH, SetupError, WORKSPACE, mkdir, mnt, rlimits_json, step, tmpfs, write_etc,
};
use crate::protocol::Limits;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use nix::mount::MsFlags;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The kernel command-line key carrying the [`VmConfig`] (base64url JSON).
pub const CMDLINE_KEY: &str = "sandbox.cfg";
/// The argument the kernel passes to `/init` (after `--` on its command line).
pub const VM_MODE: &str = "vm";
/// Where the initramfs keeps the modules, and the file listing them in load order.
pub const MODULES_DIR: &str = "/modules";
pub const MODULES_ORDER: &str = "/modules/order";
/// Firecracker's first virtio-block drive.
const DRIVE: &str = "/dev/vda";
/// How long the agent waits for its port's device to appear after the modules are loaded.
const PORT_WAIT: Duration = Duration::from_secs(20);

/// A read-only host directory exported by the VMM (9p `mount_tag`) and where it goes inside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    pub tag: String,
    pub path: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VmConfig {
    pub workspace_mib: u64,
    pub tmp_mib: u64,
    pub hostname: String,
    pub shares: Vec<Share>,
    /// The name of the virtio-serial port the host listens on (QEMU).
    pub port: String,
    /// Firecracker: serve on this AF_VSOCK port instead of the virtio-serial port (the host reaches it
    /// through Firecracker's hybrid vsock, `CONNECT <port>`).
    #[serde(default)]
    pub vsock_port: Option<u32>,
    /// Firecracker, which cannot share host directories: the read-only drive `/dev/vda` (ext4) is mounted
    /// read-only here (the image of a `/usr` tree, mounted at `/usr`).
    #[serde(default)]
    pub drive_at: Option<PathBuf>,
    /// Top-level names that are symlinks in the source root (`/bin -> usr/bin`), made the same here; the
    /// ones that are directories come as shares.
    #[serde(default)]
    pub links: Vec<(PathBuf, PathBuf)>,
    pub limits: Limits,
    /// Said in `hello` as the isolation, e.g. "microvm (qemu, tcg)".
    pub isolation: String,
}

impl VmConfig {
    /// `sandbox.cfg=<base64url JSON>`, for the kernel command line (no spaces, no quotes).
    pub fn cmdline_arg(&self) -> Result<String, serde_json::Error> {
        let json = serde_json::to_vec(self)?;
        Ok(format!("{CMDLINE_KEY}={}", URL_SAFE_NO_PAD.encode(json)))
    }

    pub fn from_cmdline(cmdline: &str) -> Result<Self, String> {
        let value = cmdline
            .split_ascii_whitespace()
            .find_map(|w| w.strip_prefix(CMDLINE_KEY)?.strip_prefix('='))
            .ok_or_else(|| format!("no {CMDLINE_KEY}= on the kernel command line"))?;
        let json = URL_SAFE_NO_PAD
            .decode(value)
            .map_err(|e| format!("{CMDLINE_KEY}: {e}"))?;
        serde_json::from_slice(&json).map_err(|e| format!("{CMDLINE_KEY}: {e}"))
    }
}

/// Builds the guest's tree and opens the agent's port. Returns the agent's config and the port.
pub fn boot() -> Result<(AgentConfig, fs::File), SetupError> {
    let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mkdir(Path::new("/proc"))?;
    mnt(Some("proc"), Path::new("/proc"), Some("proc"), flags, None)?;
    mkdir(Path::new("/sys"))?;
    mnt(Some("sysfs"), Path::new("/sys"), Some("sysfs"), flags, None)?;
    mkdir(Path::new("/dev"))?;
    mnt(
        Some("devtmpfs"),
        Path::new("/dev"),
        Some("devtmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("mode=0755"),
    )?;
    let cmdline = step("read /proc/cmdline", fs::read_to_string("/proc/cmdline"))?;
    let cfg = VmConfig::from_cmdline(&cmdline).map_err(|e| {
        SetupError::new(
            "kernel command line",
            std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        )
    })?;
    let modules = load_modules()?;
    let ro = MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    if let Some(at) = &cfg.drive_at {
        mount_drive(at)?;
    }
    for share in &cfg.shares {
        mkdir(&share.path)?;
        mnt(
            Some(&share.tag),
            &share.path,
            Some("9p"),
            ro,
            Some("trans=virtio,version=9p2000.L,cache=loose"),
        )?;
    }
    for (path, target) in &cfg.links {
        if path.symlink_metadata().is_err() {
            step(format!("symlink {}", path.display()), symlink(target, path))?;
        }
    }
    // Without links from the host (Firecracker's /usr drive): Debian's merged /usr, whose top-level names
    // are links into it.
    for (top, to) in [
        ("/bin", "usr/bin"),
        ("/sbin", "usr/sbin"),
        ("/lib", "usr/lib"),
        ("/lib64", "usr/lib64"),
    ] {
        if Path::new("/").join(to).exists() && !Path::new(top).exists() {
            step(format!("symlink {top}"), symlink(to, top))?;
        }
    }
    mkdir(Path::new("/etc"))?;
    write_etc(Path::new("/etc"), &cfg.hostname)?;
    let user = (SANDBOX_UID, SANDBOX_UID);
    for (dir, opts) in [
        (
            WORKSPACE,
            format!(
                "size={}m,mode=755,uid={},gid={}",
                cfg.workspace_mib, user.0, user.1
            ),
        ),
        ("/tmp", format!("size={}m,mode=1777", cfg.tmp_mib)),
        ("/dev/shm", format!("size={}m,mode=1777", cfg.tmp_mib)),
        ("/run", "size=80m,mode=755".to_string()),
    ] {
        mkdir(Path::new(dir))?;
        tmpfs(Path::new(dir), &opts)?;
    }
    // Code files go here; the sandbox user reads them, only the agent writes.
    mkdir(Path::new(SCRATCH))?;
    // The initramfs root is a tmpfs of mode 1777 (half the guest's RAM) unless the archive says otherwise:
    // make it root's alone, then read-only, so the sandbox user writes only to the size-limited mounts.
    step(
        "chmod /",
        fs::set_permissions("/", fs::Permissions::from_mode(0o755)),
    )?;
    let read_only_root = nix::mount::mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
        None::<&str>,
    )
    .is_ok();
    step("sethostname", nix::unistd::sethostname(&cfg.hostname))?;
    let lo = crate::netif::loopback_up().is_ok();
    let port = match cfg.vsock_port {
        Some(p) => crate::vsock::accept_one(p)?,
        None => open_port(&cfg.port)?,
    };

    let mut enforced = BTreeMap::new();
    enforced.insert("isolation".into(), json!(cfg.isolation));
    enforced.insert("kernel".into(), json!(kernel_release()));
    enforced.insert("modules_loaded".into(), json!(modules));
    enforced.insert(
        "read_only_shares".into(),
        json!(
            cfg.shares
                .iter()
                .map(|s| &s.path)
                .chain(&cfg.drive_at)
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
        ),
    );
    enforced.insert("read_only_root".into(), json!(read_only_root));
    enforced.insert("workspace_tmpfs_mib".into(), json!(cfg.workspace_mib));
    enforced.insert("tmp_tmpfs_mib".into(), json!(cfg.tmp_mib));
    enforced.insert(
        "network".into(),
        json!(if lo {
            "no network device; lo only (up)"
        } else {
            "no network device; lo down"
        }),
    );
    enforced.insert(
        "unprivileged_uid".into(),
        json!(format!("uid {} inside the guest", user.0)),
    );
    enforced.insert("rlimits".into(), rlimits_json(&cfg.limits));
    enforced.insert("seccomp".into(), json!(false));
    enforced.insert("landlock".into(), json!(false));
    let mut limits = cfg.limits.clone();
    // The guest kernel is the boundary; these are host-kernel hardening for the namespace backend.
    limits.seccomp = false;
    limits.landlock = false;
    Ok((
        AgentConfig {
            workspace: PathBuf::from(WORKSPACE),
            scratch: PathBuf::from(SCRATCH),
            user: Some(user),
            limits,
            enforced,
        },
        port,
    ))
}

/// Loads `/modules/order`'s modules in that order. One already loaded (EEXIST) counts as loaded.
fn load_modules() -> Result<Vec<String>, SetupError> {
    let Ok(order) = fs::read_to_string(MODULES_ORDER) else {
        return Ok(Vec::new());
    };
    let mut loaded = Vec::new();
    let empty = CString::default();
    for name in order.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let path = Path::new(MODULES_DIR).join(name);
        let file = step(format!("open {}", path.display()), fs::File::open(&path))?;
        match nix::kmod::finit_module(&file, &empty, nix::kmod::ModuleInitFlags::empty()) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => return step(format!("load module {name}"), Err(e)),
        }
        loaded.push(name.trim_end_matches(".ko").to_string());
        // The initramfs is RAM: give it back.
        let _ = fs::remove_file(&path);
    }
    Ok(loaded)
}

/// Mounts the read-only drive `/dev/vda` (ext4) at `at`, waiting for its device node like the port's.
fn mount_drive(at: &Path) -> Result<(), SetupError> {
    let dev = Path::new(DRIVE);
    let started = Instant::now();
    while !dev.exists() && started.elapsed() < PORT_WAIT {
        std::thread::sleep(Duration::from_millis(20));
    }
    mkdir(at)?;
    mnt(
        Some(DRIVE),
        at,
        Some("ext4"),
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("noload"),
    )
}

/// Finds the virtio-serial port named `name` and opens it read-write (a port takes one open only).
fn open_port(name: &str) -> Result<fs::File, SetupError> {
    let started = Instant::now();
    loop {
        if let Ok(entries) = fs::read_dir("/sys/class/virtio-ports") {
            for e in entries.flatten() {
                let named = fs::read_to_string(e.path().join("name")).unwrap_or_default();
                if named.trim() == name {
                    let dev = Path::new("/dev").join(e.file_name());
                    return step(
                        format!("open {}", dev.display()),
                        fs::OpenOptions::new().read(true).write(true).open(&dev),
                    );
                }
            }
        }
        if started.elapsed() > PORT_WAIT {
            return step(
                format!("find the virtio-serial port {name:?}"),
                Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such port",
                )),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kernel_release() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// PID 1 must never exit (the kernel panics): flush and power the guest off; the VMM then exits.
pub fn power_off() -> ! {
    nix::unistd::sync();
    let _ = nix::sys::reboot::reboot(nix::sys::reboot::RebootMode::RB_POWER_OFF);
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_survives_the_kernel_command_line() {
        let cfg = VmConfig {
            workspace_mib: 256,
            tmp_mib: 64,
            hostname: "sandbox".into(),
            shares: vec![Share {
                tag: "usr".into(),
                path: "/usr".into(),
            }],
            port: "agent".into(),
            vsock_port: Some(52),
            drive_at: Some("/usr".into()),
            links: Vec::new(),
            limits: Limits {
                data: Some(1 << 29),
                processes: Some(128),
                ..Limits::default()
            },
            isolation: "microvm (qemu, tcg)".into(),
        };
        let arg = cfg.cmdline_arg().expect("serialisable");
        assert!(!arg.contains(' ') && !arg.contains('"'), "{arg}");
        let line = format!("console=ttyS0 quiet {arg} panic=-1");
        assert_eq!(VmConfig::from_cmdline(&line).expect("parses"), cfg);
    }

    #[test]
    fn a_config_without_the_firecracker_fields_still_parses() {
        let json = r#"{"workspace_mib":1,"tmp_mib":1,"hostname":"h","shares":[],"port":"agent",
            "limits":{"seccomp":false,"landlock":false},"isolation":"microvm (qemu, tcg)"}"#;
        let arg = format!("{CMDLINE_KEY}={}", URL_SAFE_NO_PAD.encode(json));
        let cfg = VmConfig::from_cmdline(&arg).expect("parses");
        assert_eq!((cfg.vsock_port, cfg.drive_at), (None, None));
    }

    #[test]
    fn a_missing_or_broken_config_is_named() {
        let e = VmConfig::from_cmdline("console=ttyS0").expect_err("missing");
        assert!(e.contains(CMDLINE_KEY), "{e}");
        let e = VmConfig::from_cmdline("sandbox.cfg=!!!").expect_err("broken");
        assert!(e.contains(CMDLINE_KEY), "{e}");
    }
}
