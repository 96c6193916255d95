//! A program's whole tree, to end it on a timeout or a kill: not only its process group, which a child
//! leaves with `setsid` (or a double fork into a new session).
//!
//! Two modes, said in `enforced.timeout_kill`:
//! - `cgroup`: the host gave the launcher a cgroup directory of this sandbox (a v1 hierarchy, the
//!   directory owned by the sandbox's root). Every program gets a group of its own inside it, which its
//!   child joins between fork and exec; a kill signals every process in the group, again until none is
//!   left (a process forked meanwhile is in the group too, and a killed one cannot fork). No escape:
//!   cgroupfs is not mounted inside, the directory is reached only through the agent's descriptor (closed
//!   on exec), and only the group's `cgroup.procs` is writable by the sandbox user, which moving a
//!   process out of it would not need but moving one in would (v1 checks the destination).
//! - `process-tree` (no such directory: the host is not root, the microVM guest, the `process` backend):
//!   the program is made a child subreaper, so an orphan of its tree is re-parented to it rather than to
//!   PID 1; a kill signals its process group and every descendant found in /proc, again until none is
//!   left. A tree whose first process has already ended can lose its orphans to PID 1.
//!
//! Why the child joins its group itself, after it took the sandbox user's uid: cgroup v1 lets a process
//! move a task only when its uid is the task's (or it is the host's root, which the agent is not), and
//! the kernel checks the credentials the file was opened with. So the agent makes `cgroup.procs` of the
//! group the sandbox user's, and the child opens and writes it.

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Rounds of "signal everything listed" before a SIGKILL gives up on a tree that keeps growing.
const KILL_ROUNDS: usize = 200;
const ROUND_PAUSE: Duration = Duration::from_millis(2);

/// The sandbox's cgroup directory, and who programs run as (the owner of each group's `cgroup.procs`).
struct Root {
    dir: PathBuf,
    _fd: OwnedFd,
    owner: Option<(u32, u32)>,
}

static ROOT: OnceLock<Option<Root>> = OnceLock::new();
static MODE: OnceLock<Value> = OnceLock::new();

/// Called once by PID 1 before it serves: `dir` is the sandbox's cgroup directory the launcher opened
/// while it still saw the host's /sys/fs/cgroup (`None`: there is none). Tries a group and reports the
/// mode for `enforced.timeout_kill`.
pub fn init(dir: Option<OwnedFd>, owner: Option<(u32, u32)>) -> Value {
    let root = dir.map(|fd| Root {
        dir: PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())),
        _fd: fd,
        owner,
    });
    let reason = match &root {
        None => Some("no cgroup was handed to the sandbox".to_string()),
        Some(r) => probe(r)
            .err()
            .map(|e| format!("the sandbox's cgroup is not usable: {e}")),
    };
    let usable = reason.is_none();
    let _ = ROOT.set(if usable { root } else { None });
    MODE.get_or_init(|| match reason {
        None => json!("cgroup"),
        Some(why) => json!({"mode": "process-tree", "reason": why}),
    })
    .clone()
}

/// The mode, for `enforced.timeout_kill` where `init` was not called.
pub fn mode() -> Value {
    MODE.get().cloned().unwrap_or_else(|| json!("process-tree"))
}

fn root() -> Option<&'static Root> {
    ROOT.get().and_then(Option::as_ref)
}

fn probe(r: &Root) -> std::io::Result<()> {
    let dir = r.dir.join("probe");
    make(r, &dir)?;
    std::fs::remove_dir(&dir)
}

fn make(r: &Root, dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir(dir)?;
    if let Some((uid, gid)) = r.owner {
        let procs = dir.join("cgroup.procs");
        if let Err(e) = std::os::unix::fs::chown(&procs, Some(uid), Some(gid)) {
            let _ = std::fs::remove_dir(dir);
            return Err(e);
        }
    }
    Ok(())
}

/// The tree of one program.
#[derive(Debug)]
pub struct Tree {
    group: Option<Group>,
    /// process-tree mode: every descendant a signal found (pid, start time), so a later SIGKILL still
    /// reaches one the death of its parent gave to PID 1 meanwhile.
    seen: Mutex<Vec<(i32, u64)>>,
}

#[derive(Debug)]
struct Group {
    path: PathBuf,
    fd: File,
}

impl Tree {
    /// Before the spawn: the program's group (cgroup mode), named by its request id.
    pub fn prepare(id: u64) -> std::io::Result<Self> {
        let Some(r) = root() else {
            return Ok(Self::by_process_tree());
        };
        let path = r.dir.join(format!("p{id}"));
        // A group left by an earlier program of the same id (its tree was still dying) is reused.
        match make(r, &path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let fd = File::open(&path)?;
        Ok(Self {
            group: Some(Group { path, fd }),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn by_process_tree() -> Self {
        Self {
            group: None,
            seen: Mutex::new(Vec::new()),
        }
    }

    /// What the child runs between fork and exec: join the group, or become a child subreaper.
    pub fn hook(&self) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
        let dir: Option<RawFd> = self.group.as_ref().map(|g| g.fd.as_raw_fd());
        move || match dir {
            Some(dir) => join(dir),
            None => nix::sys::prctl::set_child_subreaper(true).map_err(std::io::Error::from),
        }
    }

    /// Signals every process of the tree whose first process is `pid` (its group leader). SIGKILL is
    /// repeated until nothing of the tree is left.
    pub fn signal(&self, pid: i32, sig: Signal) {
        let Some(g) = &self.group else {
            return self.signal_tree(pid, sig);
        };
        // ESRCH once the group is gone is the expected end, not an error.
        let _ = killpg(Pid::from_raw(pid), sig);
        let rounds = if sig == Signal::SIGKILL {
            KILL_ROUNDS
        } else {
            1
        };
        for round in 0..rounds {
            let members = in_group(g);
            if members.is_empty() {
                return;
            }
            for p in members {
                let _ = kill(Pid::from_raw(p), sig);
            }
            if round + 1 < rounds {
                std::thread::sleep(ROUND_PAUSE);
            }
        }
    }

    /// process-tree mode. The tree is walked while its first process still holds it together; for
    /// SIGKILL it is stopped first (a stopped process cannot fork) until a walk finds nothing new.
    fn signal_tree(&self, pid: i32, sig: Signal) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let add = |found: Vec<(i32, u64)>, seen: &mut Vec<(i32, u64)>| {
            let before = seen.len();
            for f in found {
                if !seen.contains(&f) {
                    seen.push(f);
                }
            }
            seen.len() > before
        };
        add(descendants(pid), &mut seen);
        if sig == Signal::SIGKILL {
            for _ in 0..KILL_ROUNDS {
                let _ = killpg(Pid::from_raw(pid), Signal::SIGSTOP);
                for &(p, _) in seen.iter() {
                    let _ = kill(Pid::from_raw(p), Signal::SIGSTOP);
                }
                if !add(descendants(pid), &mut seen) {
                    break;
                }
            }
        }
        let _ = killpg(Pid::from_raw(pid), sig);
        // A pid seen before counts only while it is the same process (its start time unchanged).
        seen.retain(|&(p, start)| start_time(p) == Some(start));
        for &(p, _) in seen.iter() {
            let _ = kill(Pid::from_raw(p), sig);
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        // Busy while a process of the tree lives on; the host removes what is left with the sandbox.
        if let Some(g) = &self.group {
            let _ = std::fs::remove_dir(&g.path);
        }
    }
}

/// In the child, as the sandbox user: `echo 0 > <group>/cgroup.procs`. Only system calls, no allocation.
fn join(dir: RawFd) -> std::io::Result<()> {
    // SAFETY: openat, write and close on descriptors this process owns, with a NUL-terminated constant
    // name and a one-byte constant buffer; all async-signal-safe, nothing allocated or locked.
    #[allow(unsafe_code)]
    unsafe {
        let fd = libc::openat(
            dir,
            c"cgroup.procs".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let written = libc::write(fd, b"0".as_ptr().cast(), 1);
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if written != 1 {
            return Err(err);
        }
    }
    Ok(())
}

/// The live processes in group `g` (a zombie whose threads are gone is not listed).
fn in_group(g: &Group) -> Vec<i32> {
    std::fs::read_to_string(g.path.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// The start time of `pid` (clock ticks after boot), which tells it from a later process of the same pid.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    // After the comm: state is field 3, starttime field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Every live descendant of `pid` (with its start time), from the parent pids in /proc.
fn descendants(pid: i32) -> Vec<(i32, u64)> {
    let mut parent_of = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.filter_map(Result::ok) {
            let Ok(p) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ppid ...`; comm may hold spaces and parentheses, so split after the last ')'.
            let Some((_, rest)) = stat.rsplit_once(") ") else {
                continue;
            };
            let mut fields = rest.split_whitespace();
            let state = fields.next().unwrap_or("");
            let ppid = fields.next().and_then(|f| f.parse::<i32>().ok());
            let start = fields.nth(17).and_then(|f| f.parse::<u64>().ok());
            if let (Some(ppid), Some(start)) = (ppid, start)
                && state != "Z"
                && state != "X"
            {
                parent_of.push((p, ppid, start));
            }
        }
    }
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for &(p, pp, start) in &parent_of {
            if pp == parent && !found.contains(&(p, start)) {
                found.push((p, start));
                frontier.push(p);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_are_found_through_the_parent_pids() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .spawn()
            .unwrap_or_else(|e| panic!("sh: {e}"));
        let pid = child.id() as i32;
        let mut found = Vec::new();
        for _ in 0..200 {
            found = descendants(pid);
            if found.len() == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(found.len(), 2, "{found:?}");
        let tree = Tree::by_process_tree();
        tree.signal(pid, Signal::SIGKILL);
        let _ = child.wait();
        for (p, _) in found {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            assert!(
                stat.is_empty() || stat.contains(") Z "),
                "{p} lives: {stat}"
            );
        }
    }
}
