//! The `namespace` launcher: turns the freshly started `sandbox-agent namespace` process into PID 1 of a
//! new sandbox. Runs before any thread exists (user namespaces refuse multi-threaded callers).
//!
//! Three processes: the launcher L (in the host's namespaces; it writes the id maps, which needs a process
//! outside the new user namespace), C (unshares every namespace, then forks), and P (PID 1 of the new pid
//! namespace; builds the root file system, pivots into it and becomes the agent). L and C only wait and
//! pass the exit status on; they hand the stream (stdin/stdout) to P alone. Killing L kills C and P through
//! the parent-death signal, and when P dies the kernel kills everything else in its pid namespace.

use crate::agent::AgentConfig;
use crate::protocol::Limits;
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::Signal;
use nix::sys::statvfs::{FsFlags, statvfs};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{
    ForkResult, Pid, fork, getegid, geteuid, getppid, pivot_root, setresgid, setresuid,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// The variable carrying the launch config (JSON); never argv.
pub const LAUNCH_ENV: &str = "SANDBOX_AGENT_LAUNCH";
/// Inside a sandbox: where the workspace and the agent's scratch files are.
pub const WORKSPACE: &str = "/workspace";
pub const SCRATCH: &str = "/run/agent";
/// The unprivileged user programs run as inside, when the launcher can map one.
pub const SANDBOX_UID: u32 = 1000;

/// Kernel counts a sandbox's user namespace charges to the uid that created it (the bridge's, often root),
/// bounded per sandbox well below the host's own limits for that uid (inotify: 128 instances and at least
/// 8192 watches; signals and message queues: the host's RLIMIT_SIGPENDING, RLIMIT_MSGQUEUE), so that one
/// sandbox, or several, cannot leave the host's uid without any (docs/sandbox.md, "Limits").
///
/// inotify instances per uid inside: one per event loop or watcher object is what programs take (libuv,
/// Python's watchdog); the kernel's default for a whole uid is 128.
pub const INOTIFY_INSTANCES: u64 = 8;
/// inotify watches per uid inside: the kernel's smallest default for a whole uid, which watching tools are
/// written to live within (its default grows with memory up to 1 048 576).
pub const INOTIFY_WATCHES: u64 = 8192;
/// inotify counts add up over sandboxes (they are bounded per uid in each namespace), so a sandbox gets at
/// most this fraction of the bridge's uid's own limit, lower than the two above on a host that set them low.
const INOTIFY_SHARE: u64 = 16;
/// Queued signals, all of the sandbox together: a program queues real-time signals one at a time (glibc's
/// own use is a few at once); about 1% of the host's usual RLIMIT_SIGPENDING (its threads-max / 2).
pub const SIGPENDING: u64 = 1024;
/// Bytes of POSIX message queues, all of the sandbox together: three queues of the default size (10
/// messages of 8 KiB with their overhead); the host's default is 800 KiB.
pub const MSGQUEUE_BYTES: u64 = 256 << 10;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LaunchConfig {
    /// Host uid/gid that uid 0 inside maps to (65536 ids from there). Only honoured when the launcher runs
    /// as root; otherwise the caller's own uid is mapped to 0 and nothing else exists.
    pub id_base: u32,
    /// Paths bound read-only at the same place (`/usr`, ...). `/bin`, `/lib*`, `/sbin` follow the source:
    /// symlinks copied, directories bound.
    pub ro_binds: Vec<PathBuf>,
    /// Where those paths are taken from: the host's `/` when unset, else an image directory (a root file
    /// system such as debootstrap makes), whose `usr/...` then appears as `/usr/...`.
    #[serde(default)]
    pub image: Option<PathBuf>,
    pub workspace_mib: u64,
    pub tmp_mib: u64,
    pub hostname: String,
    /// cgroup (v1 controller or v2) directories the launcher joins before forking, limits already written.
    #[serde(default)]
    pub cgroups: Vec<PathBuf>,
    /// The sandbox's cgroup directory the agent divides, one group per program, so a timeout or a kill
    /// reaches a program's whole tree (`tree`). The host made it the sandbox root's (`id_base`).
    #[serde(default)]
    pub exec_cgroup: Option<PathBuf>,
    #[serde(default)]
    pub limits: Limits,
    /// The sandbox's network: only `lo` (the default), or outbound through a user-mode stack and a filter.
    #[serde(default)]
    pub network: Network,
}

/// What the host decided about a sandbox's network (`crates/sandbox/src/network.rs` builds it): with no
/// `stack`, only `lo` exists. With one, the launcher starts it attached to the sandbox's namespaces and PID 1
/// loads `ruleset` with `nft` before anything else runs; `/etc/resolv.conf` names `resolver`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Network {
    /// The user-mode network stack (pasta's path); `None`: no network.
    #[serde(default)]
    pub stack: Option<PathBuf>,
    #[serde(default)]
    pub nft: Option<PathBuf>,
    /// The address the stack answers DNS on (forwarded to the host's resolver).
    #[serde(default)]
    pub resolver: Option<String>,
    /// An nft script for the sandbox's namespace.
    #[serde(default)]
    pub ruleset: String,
    /// What the isolation report says about the network (the policy, the allow-list as resolved).
    #[serde(default)]
    pub report: Value,
}

#[derive(Debug, thiserror::Error)]
#[error("{step}: {source}")]
pub struct SetupError {
    step: String,
    source: std::io::Error,
}

impl SetupError {
    pub(crate) fn new(step: impl Into<String>, source: std::io::Error) -> Self {
        Self {
            step: step.into(),
            source,
        }
    }
}

pub(crate) fn step<T, E: Into<std::io::Error>>(
    what: impl Into<String>,
    r: Result<T, E>,
) -> Result<T, SetupError> {
    r.map_err(|e| SetupError {
        step: what.into(),
        source: e.into(),
    })
}

/// What `run` leaves to the caller: in P, the agent's config (serve now); in L, the exit code.
pub enum Launched {
    Agent(Box<AgentConfig>),
    Exit(i32),
}

pub fn run(cfg: &LaunchConfig) -> Result<Launched, SetupError> {
    let mut joined = Vec::new();
    for dir in &cfg.cgroups {
        let procs = dir.join("cgroup.procs");
        if fs::write(&procs, std::process::id().to_string()).is_ok() {
            joined.push(dir.to_string_lossy().into_owned());
        }
    }
    let (up_r, up_w) = step("pipe", nix::unistd::pipe())?;
    let (go_r, go_w) = step("pipe", nix::unistd::pipe())?;
    let launcher = nix::unistd::getpid();
    // Opened here, where the host's /sys/fs/cgroup is still in sight; the agent keeps it (closed on exec).
    let exec_cgroup = cfg
        .exec_cgroup
        .as_ref()
        .and_then(|d| fs::File::open(d).ok())
        .map(std::os::fd::OwnedFd::from);
    let root = geteuid().is_root();
    // SAFETY: no thread exists yet (this runs before the runtime starts), so the child may do anything.
    #[allow(unsafe_code)]
    let forked = unsafe { fork() };
    match step("fork", forked)? {
        ForkResult::Parent { child } => {
            drop(up_w);
            drop(go_r);
            let mut byte = [0u8; 1];
            if fs::File::from(up_r).read_exact(&mut byte).is_err() {
                return Ok(Launched::Exit(wait_exit(child)));
            }
            write_id_maps(child, root, cfg.id_base)?;
            // The stack joins the child's namespaces now that its ids are mapped, and is ready (the
            // interface configured) before the child goes on: nothing in the sandbox runs before it.
            let mut stack = match cfg.network.stack {
                Some(_) => Some(step(
                    "start the network stack",
                    crate::netif::start_stack(&cfg.network, child.as_raw() as u32),
                )?),
                None => None,
            };
            step("signal the child", fs::File::from(go_w).write_all(b"1"))?;
            detach_stream();
            let code = wait_exit(child);
            if let Some(stack) = stack.as_mut() {
                let _ = stack.kill();
                let _ = stack.wait();
            }
            Ok(Launched::Exit(code))
        }
        ForkResult::Child => {
            drop(up_r);
            drop(go_w);
            die_with_parent(launcher)?;
            let capped = cap_queues();
            // Read here, in the bridge's user namespace, whose limits the sandbox's counts are charged to.
            let inotify = inotify_bounds();
            step(
                "unshare",
                unshare(
                    CloneFlags::CLONE_NEWUSER
                        | CloneFlags::CLONE_NEWNS
                        | CloneFlags::CLONE_NEWPID
                        | CloneFlags::CLONE_NEWNET
                        | CloneFlags::CLONE_NEWIPC
                        | CloneFlags::CLONE_NEWUTS,
                ),
            )?;
            step("tell the launcher", fs::File::from(up_w).write_all(b"1"))?;
            let mut byte = [0u8; 1];
            step(
                "wait for the id maps",
                fs::File::from(go_r).read_exact(&mut byte),
            )?;
            step("setresgid", setresgid(0.into(), 0.into(), 0.into()))?;
            step("setresuid", setresuid(0.into(), 0.into(), 0.into()))?;
            let c = nix::unistd::getpid();
            die_with_parent(launcher)?;
            // SAFETY: still single-threaded.
            #[allow(unsafe_code)]
            let forked = unsafe { fork() };
            match step("fork pid 1", forked)? {
                ForkResult::Parent { child } => {
                    detach_stream();
                    Ok(Launched::Exit(wait_exit(child)))
                }
                ForkResult::Child => {
                    step(
                        "parent-death signal",
                        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL),
                    )?;
                    let _ = c;
                    let mut agent = build_root(cfg, root, joined, (capped, inotify))?;
                    let kill = crate::tree::init(exec_cgroup, agent.user);
                    agent.enforced.insert("timeout_kill".into(), kill);
                    Ok(Launched::Agent(Box::new(agent)))
                }
            }
        }
    }
}

/// Lowers RLIMIT_SIGPENDING and RLIMIT_MSGQUEUE of this process, just before it creates the sandbox's user
/// namespace, and says what holds (`kernel_counts` of the isolation report).
///
/// Why this bounds the whole sandbox: since Linux 5.14 these two limits are counted per user in every user
/// namespace (`ucounts`), and a new namespace records its creator's current value of each as its cap
/// (`create_user_ns` calls `set_userns_rlimit_max` with `rlimit(RLIMIT_SIGPENDING)` and
/// `rlimit(RLIMIT_MSGQUEUE)`). A signal queued or a queue made inside is charged to the user inside and to
/// every creator up the chain, and `inc_rlimit_get_ucounts`/`inc_rlimit_ucounts` refuse it once the
/// creator's count in the parent namespace would pass the child namespace's recorded cap: what the sandbox
/// may charge to the bridge's uid is at most these values, whatever a program does with its own rlimits
/// later (raising them takes CAP_SYS_RESOURCE in the host's namespace). Programs and the agent inherit the
/// lower limits too; signals below SIGRTMIN sent by kill() or the kernel are delivered past the limit (the
/// kernel then drops only their extra information), so the agent's child and signal handling is unchanged.
fn cap_queues() -> Value {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let mut report = serde_json::Map::new();
    for (name, resource, bound) in [
        ("sigpending", Resource::RLIMIT_SIGPENDING, SIGPENDING),
        ("msgqueue_bytes", Resource::RLIMIT_MSGQUEUE, MSGQUEUE_BYTES),
    ] {
        // Never raised: a lower limit the bridge was started with stays, and is what the report says.
        let set = getrlimit(resource).and_then(|(soft, hard)| {
            setrlimit(resource, soft.min(bound), hard.min(bound))?;
            getrlimit(resource)
        });
        let value = match set {
            Ok((_, hard)) if hard <= bound => json!(hard),
            Ok((_, hard)) => not_enforced(&format!("the limit is still {hard}")),
            Err(e) => not_enforced(&format!("setrlimit: {e}")),
        };
        report.insert(name.into(), value);
    }
    Value::Object(report)
}

/// The sysctl files of the inotify bounds, with the bound each gets in a sandbox: the constant, or the
/// bridge's uid's own limit (this namespace's file) divided by [`INOTIFY_SHARE`] when that is lower.
type InotifyBounds = [(&'static str, &'static str, u64); 2];

fn inotify_bounds() -> InotifyBounds {
    [
        (
            "inotify_instances",
            "max_inotify_instances",
            INOTIFY_INSTANCES,
        ),
        ("inotify_watches", "max_inotify_watches", INOTIFY_WATCHES),
    ]
    .map(|(name, file, bound)| {
        let own = fs::read_to_string(Path::new("/proc/sys/user").join(file))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok());
        let bound = own.map_or(bound, |n| bound.min(n / INOTIFY_SHARE).max(1));
        (name, file, bound)
    })
}

/// Bounds the inotify instances and watches each user of this process's user namespace may hold (the
/// sandbox's: the namespace's root writes them, before any program runs; a program, never root inside and
/// unable to make a namespace of its own, cannot raise them). `proc` is a procfs of the sandbox; the files are
/// per user namespace whichever procfs they are reached through (`/proc/sys/user` is looked up in the
/// writer's namespace). Both counts are also charged to the bridge's uid on the host, which the bounds keep
/// from being exhausted.
fn cap_inotify(proc: &Path, bounds: &InotifyBounds, report: &mut Value) {
    for &(name, file, bound) in bounds {
        let path = proc.join("sys/user").join(file);
        let value = match fs::write(&path, bound.to_string()) {
            Ok(()) => json!(bound),
            Err(e) => not_enforced(&format!("writing /proc/sys/user/{file}: {e}")),
        };
        if let Value::Object(o) = report {
            o.insert(name.into(), value);
        }
    }
}

fn not_enforced(reason: &str) -> Value {
    json!({"status": "not enforced", "reason": reason})
}

fn die_with_parent(parent: Pid) -> Result<(), SetupError> {
    step(
        "parent-death signal",
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL),
    )?;
    if getppid() != parent {
        std::process::exit(1);
    }
    Ok(())
}

fn write_id_maps(child: Pid, root: bool, base: u32) -> Result<(), SetupError> {
    let proc = PathBuf::from(format!("/proc/{child}"));
    if root {
        let map = format!("0 {base} 65536\n");
        step("uid_map", fs::write(proc.join("uid_map"), &map))?;
        step("gid_map", fs::write(proc.join("gid_map"), &map))?;
    } else {
        step("setgroups", fs::write(proc.join("setgroups"), "deny"))?;
        step(
            "uid_map",
            fs::write(proc.join("uid_map"), format!("0 {} 1\n", geteuid())),
        )?;
        step(
            "gid_map",
            fs::write(proc.join("gid_map"), format!("0 {} 1\n", getegid())),
        )?;
    }
    Ok(())
}

/// Only P keeps the host's stream: the host sees it end exactly when the agent ends.
fn detach_stream() {
    if let Ok(null) = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let _ = nix::unistd::dup2_stdin(&null);
        let _ = nix::unistd::dup2_stdout(&null);
    }
}

fn wait_exit(child: Pid) -> i32 {
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => return code,
            Ok(WaitStatus::Signaled(_, sig, _)) => return 128 + sig as i32,
            Ok(_) => continue,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return 1,
        }
    }
}

pub(crate) fn mnt(
    src: Option<&str>,
    target: &Path,
    fstype: Option<&str>,
    flags: MsFlags,
    data: Option<&str>,
) -> Result<(), SetupError> {
    step(
        format!("mount {}", target.display()),
        mount(src, target, fstype, flags, data),
    )
}

fn bind_ro(src: &Path, target: &Path) -> Result<(), SetupError> {
    mnt(
        Some(&src.to_string_lossy()),
        target,
        None,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None,
    )?;
    // A bind remount must keep the flags the host mount has locked (nodev, nosuid, noexec).
    let mut flags =
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID;
    if let Ok(st) = statvfs(src) {
        if st.flags().contains(FsFlags::ST_NODEV) {
            flags |= MsFlags::MS_NODEV;
        }
        if st.flags().contains(FsFlags::ST_NOEXEC) {
            flags |= MsFlags::MS_NOEXEC;
        }
    }
    mnt(None, target, None, flags, None)
}

pub(crate) fn tmpfs(target: &Path, opts: &str) -> Result<(), SetupError> {
    mnt(
        Some("tmpfs"),
        target,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(opts),
    )
}

pub(crate) fn mkdir(p: &Path) -> Result<(), SetupError> {
    step(format!("mkdir {}", p.display()), fs::create_dir_all(p))
}

/// Places `path` of the source root (the host's `/` or an image directory) at the same path under `new`: a
/// symlink is copied, a directory or file bound read-only. Missing paths are skipped.
fn mirror(new: &Path, source_root: &Path, path: &Path) -> Result<bool, SetupError> {
    let rel = path.strip_prefix("/").unwrap_or(path);
    let host = &source_root.join(rel);
    let Ok(meta) = host.symlink_metadata() else {
        return Ok(false);
    };
    let target = new.join(rel);
    if let Some(parent) = target.parent() {
        mkdir(parent)?;
    }
    if meta.file_type().is_symlink() {
        let link = step("readlink", fs::read_link(host))?;
        step(
            format!("symlink {}", target.display()),
            symlink(link, &target),
        )?;
        return Ok(true);
    }
    if meta.is_dir() {
        mkdir(&target)?;
    } else {
        step(
            format!("create {}", target.display()),
            fs::write(&target, b""),
        )?;
    }
    bind_ro(host, &target)?;
    Ok(true)
}

fn build_root(
    cfg: &LaunchConfig,
    root: bool,
    cgroups: Vec<String>,
    (mut kernel_counts, inotify): (Value, InotifyBounds),
) -> Result<AgentConfig, SetupError> {
    mnt(
        None,
        Path::new("/"),
        None,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None,
    )?;
    // An image under /tmp would vanish under the tmpfs below: hold it open and reach it through its fd.
    let image = match &cfg.image {
        Some(dir) => Some(step(
            format!("open the image {}", dir.display()),
            fs::File::open(dir),
        )?),
        None => None,
    };
    let source_root = match &image {
        Some(f) => PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd())),
        None => PathBuf::from("/"),
    };
    let source_root = source_root.as_path();
    // Before anything of the sandbox runs, and while the host's nft is in sight.
    if cfg.network.stack.is_some() {
        step(
            "load the network filter",
            crate::netif::load_rules(&cfg.network),
        )?;
    }
    // The new root is a tmpfs mounted over /tmp of this (private) mount namespace: no host directory is
    // created, and everything vanishes with the namespace.
    let new = Path::new("/tmp");
    tmpfs(new, "size=1m,mode=755")?;
    for d in ["etc", "proc", "dev", "workspace", "tmp", "run", "home"] {
        mkdir(&new.join(d))?;
    }
    for top in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
        mirror(new, source_root, Path::new(top))?;
    }
    for path in &cfg.ro_binds {
        mirror(new, source_root, path)?;
    }
    write_etc_from(&new.join("etc"), source_root, &cfg.hostname)?;
    if let Some(resolver) = &cfg.network.resolver {
        write_resolver(&new.join("etc"), resolver)?;
    }
    // Nothing inside may inherit a handle on a host directory.
    drop(image);
    let user = root.then_some((SANDBOX_UID, SANDBOX_UID));
    mnt(
        Some("proc"),
        &new.join("proc"),
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None,
    )?;
    cap_inotify(&new.join("proc"), &inotify, &mut kernel_counts);
    let dev = new.join("dev");
    tmpfs(&dev, "size=64k,mode=755")?;
    // No `tty`: a sandboxed program has no controlling terminal, and /dev/tty would name the bridge's when
    // one leaked in. A program that wants a terminal opens its own pty from the private devpts below.
    for node in ["null", "zero", "full", "random", "urandom"] {
        let target = dev.join(node);
        step("create a device file", fs::write(&target, b""))?;
        mnt(
            Some(&format!("/dev/{node}")),
            &target,
            None,
            MsFlags::MS_BIND,
            None,
        )?;
    }
    for (name, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        step("symlink in /dev", symlink(to, dev.join(name)))?;
    }
    // A devpts instance of this sandbox alone (`newinstance`): its ptys are numbered from 0 and no host
    // terminal is reachable through it. ptmxmode lets uid 1000 open the multiplexer; mode is the usual
    // owner read/write, group write of a terminal.
    let pts = dev.join("pts");
    mkdir(&pts)?;
    mnt(
        Some("devpts"),
        &pts,
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )?;
    step("symlink /dev/ptmx", symlink("pts/ptmx", dev.join("ptmx")))?;
    mkdir(&dev.join("shm"))?;
    tmpfs(
        &dev.join("shm"),
        &format!("size={}m,mode=1777", cfg.tmp_mib),
    )?;
    let owner = user.map_or(String::new(), |(u, g)| format!(",uid={u},gid={g}"));
    tmpfs(
        &new.join("workspace"),
        &format!("size={}m,mode=755{owner}", cfg.workspace_mib),
    )?;
    tmpfs(
        &new.join("tmp"),
        &format!("size={}m,mode=1777", cfg.tmp_mib),
    )?;
    tmpfs(&new.join("run"), "size=80m,mode=755")?;
    mkdir(&new.join("run/agent"))?;

    step("chdir", std::env::set_current_dir(new))?;
    mkdir(Path::new(".oldroot"))?;
    step("pivot_root", pivot_root(".", ".oldroot"))?;
    step("chdir /", std::env::set_current_dir("/"))?;
    step(
        "unmount the old root",
        umount2("/.oldroot", MntFlags::MNT_DETACH),
    )?;
    step("rmdir /.oldroot", fs::remove_dir("/.oldroot"))?;
    mnt(
        None,
        Path::new("/"),
        None,
        MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        None,
    )?;
    step("sethostname", nix::unistd::sethostname(&cfg.hostname))?;
    step("no_new_privs", nix::sys::prctl::set_no_new_privs())?;
    let lo = crate::netif::loopback_up().is_ok();

    let mut enforced = BTreeMap::new();
    enforced.insert(
        "namespaces".into(),
        json!(["user", "mount", "pid", "net", "ipc", "uts"]),
    );
    enforced.insert("read_only_root".into(), json!(true));
    enforced.insert("workspace_tmpfs_mib".into(), json!(cfg.workspace_mib));
    enforced.insert("tmp_tmpfs_mib".into(), json!(cfg.tmp_mib));
    let mut network = match &cfg.network.report {
        Value::Object(o) => o.clone(),
        _ => serde_json::Map::new(),
    };
    if cfg.network.stack.is_none() {
        network.insert("policy".into(), json!("none"));
        network.insert(
            "interfaces".into(),
            json!(if lo { "lo only (up)" } else { "lo only (down)" }),
        );
    }
    enforced.insert("network".into(), Value::Object(network));
    enforced.insert("no_new_privs".into(), json!(true));
    enforced.insert(
        "unprivileged_uid".into(),
        match user {
            Some((u, _)) => json!(format!("uid {u} inside, host uid {}", cfg.id_base + u)),
            None => json!(false),
        },
    );
    enforced.insert("rlimits".into(), rlimits_json(&cfg.limits));
    enforced.insert("kernel_counts".into(), kernel_counts);
    enforced.insert("cgroups".into(), json!(cgroups));
    enforced.insert(
        "seccomp".into(),
        if cfg.limits.seccomp {
            crate::seccomp::describe()
        } else {
            json!(false)
        },
    );
    enforced.insert(
        "landlock".into(),
        if cfg.limits.landlock {
            crate::confine::probe()
        } else {
            json!(false)
        },
    );
    Ok(AgentConfig {
        workspace: PathBuf::from(WORKSPACE),
        scratch: PathBuf::from(SCRATCH),
        user,
        limits: cfg.limits.clone(),
        enforced,
    })
}

pub fn rlimits_json(l: &Limits) -> Value {
    json!({
        "data_bytes": l.data,
        "processes": l.processes,
        "cpu_secs": l.cpu_secs,
        "file_size_bytes": l.file_size,
        "open_files": l.open_files,
    })
}

/// The name-service switch: every database from the files written here (no DNS, no LDAP, nothing that
/// would need a daemon or a network the sandbox does not have).
const NSSWITCH: &str = "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\n\
protocols: files\nservices: files\nethers: files\nrpc: files\n";

/// Copied from the image's `/etc`, else the host's, when present: `services` and `protocols` (what
/// `getservbyname`, Java's networking and many clients read), and Debian matplotlib's `matplotlibrc` (without
/// it `import matplotlib` fails). The CA certificates are bound read-only instead (the host's configuration).
const COPIED_ETC: [&str; 3] = ["services", "protocols", "matplotlibrc"];

/// The minimal `/etc` real programs need: users (root, the sandbox user with its home at the workspace,
/// nobody), groups, hosts (localhost and the sandbox's name on both loopbacks), the name-service switch,
/// the hostname; and the files of [`COPIED_ETC`].
pub(crate) fn write_etc_from(
    etc: &Path,
    source_root: &Path,
    hostname: &str,
) -> Result<(), SetupError> {
    let files = [
        (
            "passwd",
            format!(
                "root:x:0:0:root:/root:/bin/sh\nsandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:{WORKSPACE}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
            ),
        ),
        (
            "group",
            format!("root:x:0:\nsandbox:x:{SANDBOX_UID}:\nnogroup:x:65534:\n"),
        ),
        ("hostname", format!("{hostname}\n")),
        (
            "hosts",
            format!("127.0.0.1 localhost {hostname}\n::1 localhost {hostname}\n"),
        ),
        ("nsswitch.conf", NSSWITCH.to_string()),
    ];
    for (name, text) in files {
        step(
            format!("write /etc/{name}"),
            fs::write(etc.join(name), text),
        )?;
    }
    for name in COPIED_ETC {
        let from = [
            source_root.join("etc").join(name),
            Path::new("/etc").join(name),
        ];
        if let Some(text) = from.iter().find_map(|p| fs::read(p).ok()) {
            step(
                format!("write /etc/{name}"),
                fs::write(etc.join(name), text),
            )?;
        }
    }
    Ok(())
}

/// With a network: names come from the files, then DNS through the stack's resolver (the only DNS server
/// the filter lets a program reach).
fn write_resolver(etc: &Path, resolver: &str) -> Result<(), SetupError> {
    step(
        "write /etc/resolv.conf",
        fs::write(
            etc.join("resolv.conf"),
            format!("nameserver {resolver}\noptions timeout:2 attempts:2\n"),
        ),
    )?;
    step(
        "write /etc/nsswitch.conf",
        fs::write(
            etc.join("nsswitch.conf"),
            NSSWITCH.replace("hosts: files\n", "hosts: files dns\n"),
        ),
    )
}

/// [`write_etc_from`] the root this process sees (a microVM guest's).
pub(crate) fn write_etc(etc: &Path, hostname: &str) -> Result<(), SetupError> {
    write_etc_from(etc, Path::new("/"), hostname)
}

/// The raw fd of stdin, for the agent's stream.
pub fn stdin_fd() -> i32 {
    std::io::stdin().as_raw_fd()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_inotify_bound_that_cannot_be_written_is_reported_as_not_enforced() {
        let mut report = json!({"sigpending": SIGPENDING});
        let bounds = [
            ("inotify_instances", "max_inotify_instances", 8),
            ("inotify_watches", "max_inotify_watches", 8192),
        ];
        cap_inotify(Path::new("/nonexistent-proc"), &bounds, &mut report);
        assert_eq!(report["sigpending"], SIGPENDING);
        for (name, file) in [
            ("inotify_instances", "max_inotify_instances"),
            ("inotify_watches", "max_inotify_watches"),
        ] {
            assert_eq!(report[name]["status"], "not enforced", "{report}");
            let reason = report[name]["reason"].as_str().unwrap();
            assert!(reason.contains(file), "{reason}");
        }
    }

    #[test]
    fn inotify_bounds_never_pass_a_sixteenth_of_the_callers_own() {
        for (_, file, bound) in inotify_bounds() {
            assert!(bound >= 1);
            let own: u64 = fs::read_to_string(Path::new("/proc/sys/user").join(file))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            assert!(
                bound <= (own / INOTIFY_SHARE).max(1),
                "{file}: {bound} of {own}"
            );
        }
    }
}
