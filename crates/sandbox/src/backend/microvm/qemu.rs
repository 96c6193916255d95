//! The QEMU driver: `-M microvm` with no default devices, no network device at all, the host's read-only
//! directories as 9p shares, and one virtio-serial port whose host end is a Unix socket in the VM's own
//! directory. The guest's console goes to QEMU's stdout, of which only the tail is kept.

use super::{Accel, GUEST_OVERHEAD_MIB, Vm, new_vm_dir};
use crate::backend::{LaunchError, Spec, spawn};
use crate::config::Settings;
use sandbox_agent::protocol::Limits;
use sandbox_agent::vm::{Share, VM_MODE, VmConfig};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::net::UnixStream;
use tokio::process::Command;

/// The port's name, on both sides.
const PORT: &str = "agent";
/// What QEMU itself needs on top of the guest's RAM, in its memory cgroup (TCG's code cache included,
/// which `tb-size` bounds).
const VMM_OVERHEAD_MIB: u64 = 256;
const TCG_CACHE_MIB: u64 = 64;

pub async fn boot(
    settings: &Settings,
    spec: Spec,
    limits: Limits,
    qemu: &Path,
) -> Result<Vm, LaunchError> {
    let dir = new_vm_dir(settings, "agent.sock").await?;
    let socket = dir.join("agent.sock");
    let image = settings.image_root(spec.image);
    let (top_dirs, links) = top_level(image.as_deref());
    let binds: Vec<PathBuf> = settings.ro_binds.iter().cloned().chain(top_dirs).collect();
    let exports = shares(&binds, image.as_deref());
    let cfg = VmConfig {
        workspace_mib: settings.workspace_mib,
        tmp_mib: settings.tmp_mib,
        hostname: "sandbox".into(),
        shares: exports.iter().map(|(_, share)| share.clone()).collect(),
        port: PORT.into(),
        vsock_port: None,
        drive_at: None,
        links,
        limits,
        isolation: format!(
            "microvm (qemu, {})",
            super::accel_name(settings.microvm.accel)
        ),
    };
    let cmd = match command(settings, spec, &cfg, &exports, qemu, &dir) {
        Ok(c) => c,
        Err(e) => {
            let _ = tokio::fs::remove_dir_all(&dir).await;
            return Err(e);
        }
    };
    let (process, cgroups) =
        super::start_vmm(settings, spec, VMM_OVERHEAD_MIB, cmd, qemu, dir).await?;
    let booted = connect(&socket, &process, settings.microvm.boot_timeout).await;
    super::finish(booted, process, cgroups, "QEMU").await
}

/// The top-level names a root file system may have outside `/usr`: on Debian 12 and later links into it,
/// on older or other systems directories of their own.
const TOP_LEVEL: [&str; 6] = ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// Of the source root's top-level names: the directories (shared like `/usr`) and the symlinks (made in
/// the guest with the same target; a target is only text there, resolved inside the guest).
fn top_level(image: Option<&Path>) -> (Vec<PathBuf>, Vec<(PathBuf, PathBuf)>) {
    let root = image.unwrap_or(Path::new("/"));
    let mut dirs = Vec::new();
    let mut links = Vec::new();
    for top in TOP_LEVEL {
        let source = root.join(&top[1..]);
        match source.symlink_metadata() {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(&source) {
                    links.push((PathBuf::from(top), target));
                }
            }
            Ok(m) if m.is_dir() => dirs.push(PathBuf::from(top)),
            _ => {}
        }
    }
    (dirs, links)
}

/// The read-only directories, from the host's root or an image directory, as 9p shares (the host
/// directory, and the share the guest mounts at the path inside). Files such as ld.so.cache cannot be
/// shared and are left out: the guest's loader searches the default directories.
fn shares(ro_binds: &[PathBuf], image: Option<&Path>) -> Vec<(PathBuf, Share)> {
    let root = image.unwrap_or(Path::new("/"));
    ro_binds
        .iter()
        .map(|p| (root.join(p.strip_prefix("/").unwrap_or(p)), p))
        .filter(|(host, _)| host.is_dir())
        .enumerate()
        .map(|(i, (host, p))| {
            let share = Share {
                tag: format!("ro{i}"),
                path: p.clone(),
            };
            (host, share)
        })
        .collect()
}

fn command(
    settings: &Settings,
    spec: Spec,
    cfg: &VmConfig,
    exports: &[(PathBuf, Share)],
    qemu: &Path,
    dir: &Path,
) -> Result<Command, LaunchError> {
    let m = &settings.microvm;
    let arg = cfg
        .cmdline_arg()
        .map_err(|e| LaunchError::Spawn(format!("the guest's config: {e}")))?;
    // reboot=t and panic=-1 with -no-reboot: a guest that stops for any reason ends QEMU. `quiet` still
    // prints warnings, which is what a failed boot's error message shows.
    let mut append = format!("console=ttyS0 reboot=t panic=-1 quiet no_timer_check {arg}");
    if m.accel == Accel::Tcg {
        append.push(' ');
        append.push_str(&tcg_clock_args());
    }
    append.push_str(&format!(" -- {VM_MODE}"));
    let mut c = Command::new(qemu);
    c.env_clear()
        .args([
            "-M",
            "microvm",
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
        ])
        .args(["-no-reboot", "-serial", "stdio"])
        // QEMU's own seccomp filter: a guest that breaks into QEMU still cannot exec, setuid, or use
        // obsolete system calls.
        .args([
            "-sandbox",
            "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
        ]);
    match m.accel {
        Accel::Kvm => c.args(["-accel", "kvm", "-cpu", "host"]),
        Accel::Tcg => c
            .args(["-accel", &format!("tcg,tb-size={TCG_CACHE_MIB}")])
            .args(["-cpu", "max"]),
    };
    c.arg("-m")
        .arg((spec.memory_mib + GUEST_OVERHEAD_MIB).to_string())
        .arg("-smp")
        .arg(spec.vcpus.to_string())
        .arg("-kernel")
        .arg(&m.kernel)
        .arg("-initrd")
        .arg(&m.initrd)
        .arg("-append")
        .arg(append)
        .arg("-pidfile")
        .arg(dir.join("qemu.pid"))
        .args(["-device", "virtio-serial-device"])
        .arg("-chardev")
        .arg(format!(
            "socket,id={PORT},path={},server=on,wait=on",
            qemu_value(&dir.join("agent.sock"))?
        ))
        .arg("-device")
        .arg(format!("virtserialport,chardev={PORT},name={PORT}"));
    for (host, share) in exports {
        c.arg("-fsdev")
            .arg(format!(
                "local,id={0},path={1},security_model=none,readonly=on",
                share.tag,
                qemu_value(host)?
            ))
            .arg("-device")
            .arg(format!(
                "virtio-9p-device,fsdev={0},mount_tag={0}",
                share.tag
            ));
    }
    Ok(c)
}

/// Under TCG on a busy host the kernel's TSC calibration against the PIT fails and the boot hangs
/// (docs/protocols/sandbox.md §3): these kernel arguments give it the host's TSC rate, which TCG's TSC
/// follows, and turn the clocksource watchdog off.
pub fn tcg_clock_args() -> String {
    format!("tsc_early_khz={} tsc=reliable", host_tsc_khz())
}

/// The host's TSC rate from /proc/cpuinfo's first "cpu MHz" (2 GHz if it says none: the guest's clock then
/// runs off, nothing worse).
fn host_tsc_khz() -> u64 {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    tsc_khz_of(&text).unwrap_or(2_000_000)
}

fn tsc_khz_of(cpuinfo: &str) -> Option<u64> {
    let mhz: f64 = cpuinfo
        .lines()
        .find(|l| l.starts_with("cpu MHz"))?
        .split(':')
        .nth(1)?
        .trim()
        .parse()
        .ok()?;
    (mhz > 0.0).then_some((mhz * 1000.0) as u64)
}

/// A path inside QEMU's comma-separated options: a comma would be doubled, so refuse it outright.
fn qemu_value(p: &Path) -> Result<String, LaunchError> {
    let s = p
        .to_str()
        .ok_or_else(|| LaunchError::Spawn(format!("{} is not UTF-8", p.display())))?;
    if s.contains(',') {
        return Err(LaunchError::Spawn(format!(
            "{s} contains a comma, which QEMU's options cannot hold"
        )));
    }
    Ok(s.to_string())
}

/// QEMU creates the socket as it starts; connect before the guest boots, so the guest never sees the
/// port closed.
async fn connect(
    socket: &Path,
    process: &spawn::Launched,
    within: Duration,
) -> Result<UnixStream, String> {
    let started = Instant::now();
    loop {
        match UnixStream::connect(socket).await {
            Ok(s) => return Ok(s),
            Err(e) if started.elapsed() > within => {
                return Err(format!("QEMU's socket {}: {e}", socket.display()));
            }
            Err(_) => {}
        }
        if process.has_exited().await {
            return Err("QEMU exited at once".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_not_shared_and_directories_get_their_own_tag() {
        let binds = [
            PathBuf::from("/usr"),
            PathBuf::from("/etc/hostname"),
            PathBuf::from("/definitely/not/here"),
            PathBuf::from("/etc"),
        ];
        let share = |tag: &str, path: &str| Share {
            tag: tag.into(),
            path: path.into(),
        };
        assert_eq!(
            shares(&binds, None),
            vec![
                (PathBuf::from("/usr"), share("ro0", "/usr")),
                (PathBuf::from("/etc"), share("ro1", "/etc")),
            ]
        );
        let image = std::env::temp_dir().join(format!("image-{}", std::process::id()));
        std::fs::create_dir_all(image.join("usr")).expect("image dir");
        assert_eq!(
            shares(&binds, Some(&image)),
            vec![(image.join("usr"), share("ro0", "/usr"))],
            "an image's directories, mounted where the host's would be"
        );
        std::fs::remove_dir_all(&image).expect("cleanup");
    }

    #[test]
    fn top_level_links_are_copied_and_directories_shared() {
        let root = std::env::temp_dir().join(format!("top-level-{}", std::process::id()));
        std::fs::create_dir_all(root.join("usr/bin")).expect("usr");
        std::fs::create_dir_all(root.join("lib")).expect("lib");
        std::os::unix::fs::symlink("usr/bin", root.join("bin")).expect("bin link");
        std::os::unix::fs::symlink("/somewhere/else", root.join("sbin")).expect("sbin link");
        let (dirs, links) = top_level(Some(&root));
        assert_eq!(dirs, vec![PathBuf::from("/lib")]);
        assert_eq!(
            links,
            vec![
                (PathBuf::from("/bin"), PathBuf::from("usr/bin")),
                (PathBuf::from("/sbin"), PathBuf::from("/somewhere/else")),
            ],
            "a link's target is copied as text, never followed on the host"
        );
        std::fs::remove_dir_all(&root).expect("cleanup");
    }

    #[test]
    fn the_tsc_rate_comes_from_cpuinfo() {
        let text = "processor\t: 0\ncpu MHz\t\t: 2596.152\ncache size\t: 512 KB\n";
        assert_eq!(tsc_khz_of(text), Some(2_596_152));
        assert_eq!(tsc_khz_of("processor\t: 0\n"), None);
        assert_eq!(tsc_khz_of("cpu MHz\t: junk\n"), None);
    }

    #[test]
    fn a_comma_in_a_path_is_refused() {
        assert!(qemu_value(Path::new("/tmp/a,b")).is_err());
        assert_eq!(
            qemu_value(Path::new("/tmp/a b")).expect("plain path"),
            "/tmp/a b"
        );
    }
}
