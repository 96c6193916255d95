//! Ending everything a process the bridge started has started in turn. Adapters and debug servers run in
//! process groups of their own, but what they start need not stay in them: debugpy's launcher puts the program
//! in a group of its own (`os.setpgrp`), lldb starts the program in its own group, and a program may `setsid` or
//! fork children that outlive it (an attack run left fork children of a C program and of a Python program
//! running after `debug_stop`, a cancelled launch and the bridge's exit). So each process the bridge starts
//! carries a tag in its environment, which everything it starts inherits, and a group is ended with every
//! process of that tag and every descendant of its leader (by parent pid, whatever group or session it moved
//! to). A process that both left the tree (its parent exited first) and cleared its environment escapes.

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

/// The environment variable carrying the tag.
pub const TAG_VAR: &str = "MCP_BRIDGES_DEBUG_TAG";

static NEXT: AtomicU64 = AtomicU64::new(1);
/// The tag of each group leader the bridge started, by its pid.
static TAGS: LazyLock<Mutex<HashMap<i32, String>>> = LazyLock::new(Mutex::default);

fn tags() -> MutexGuard<'static, HashMap<i32, String>> {
    TAGS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Tags what `command` will start; call [`remember`] with its pid once it started. The environment is set
/// last: an adapter's is cleared first (`LaunchPolicy::apply_env`).
pub fn tag(command: &mut tokio::process::Command) -> String {
    // A random part too: another bridge with the same pid (in another pid namespace, or after a reuse) would
    // otherwise count the survivors of this one's tags as its own.
    let tag = format!(
        "{}-{}-{:016x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        rand::random::<u64>()
    );
    command.env(TAG_VAR, &tag);
    tag
}

/// The process `pid` (a group leader) started with `tag`.
pub fn remember(pid: Option<u32>, tag: String) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        tags().insert(pid, tag);
    }
}

/// Whether a tag is held for the leader `pid`.
#[cfg(test)]
pub fn remembered(pid: u32) -> bool {
    i32::try_from(pid).is_ok_and(|pid| tags().contains_key(&pid))
}

/// SIGKILL to the group `pgid` leads, every process of its leader's tag, and every descendant of its leader
/// while the leader is still the one tagged (a pid reused by another program is not ours to walk). Twice: a
/// process forking meanwhile leaves a child that the second pass finds. `forget` drops the tag afterwards (the
/// leader was reaped: nothing more can be started under it).
pub fn end_group(pgid: Option<u32>, forget: bool) {
    let Some(leader) = pgid.and_then(|p| i32::try_from(p).ok()) else {
        return;
    };
    let tag = tags().get(&leader).cloned();
    for _ in 0..2 {
        let doomed = tag
            .as_deref()
            .map(|tag| processes_of(leader, tag))
            .unwrap_or_default();
        let _ = killpg(Pid::from_raw(leader), Signal::SIGKILL);
        let me = i32::try_from(std::process::id()).unwrap_or(0);
        for pid in doomed.into_iter().filter(|p| *p > 1 && *p != me) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
    if forget {
        tags().remove(&leader);
    }
}

/// The processes of `tag`, and the descendants of `leader` when it carries the tag.
fn processes_of(leader: i32, tag: &str) -> Vec<i32> {
    let table = process_table();
    let wanted = format!("{TAG_VAR}={tag}");
    let mut found: HashSet<i32> = table
        .iter()
        .map(|(pid, _)| *pid)
        .filter(|pid| carries(*pid, &wanted))
        .collect();
    if carries(leader, &wanted) {
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        for (pid, ppid) in &table {
            children.entry(*ppid).or_default().push(*pid);
        }
        let mut next = vec![leader];
        while let Some(parent) = next.pop() {
            for child in children.get(&parent).into_iter().flatten() {
                found.insert(*child);
                next.push(*child);
            }
        }
    }
    found.into_iter().collect()
}

/// Every process and its parent, from `/proc`.
fn process_table() -> Vec<(i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, parent_of(pid)?)))
        .collect()
}

/// The parent pid in `/proc/PID/stat`: the field after the state, after the command's closing parenthesis
/// (the command may hold spaces and parentheses of its own).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `pid`'s environment holds `wanted` (`TAG=value`; readable for the bridge's own user's processes).
fn carries(pid: i32, wanted: &str) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    environ.split(|b| *b == 0).any(|v| v == wanted.as_bytes())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn alive(pid: i32) -> bool {
        // A zombie is dead for this purpose: it runs nothing.
        parent_of(pid).is_some()
            && std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| !s[s.rfind(')').unwrap() + 1..].trim_start().starts_with('Z'))
    }

    #[tokio::test]
    async fn a_group_ends_with_what_left_it_by_setsid_or_by_its_parent_exiting() {
        let dir = std::env::temp_dir().join(format!("reap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // The leader starts one child that moves to a session of its own and one that is orphaned (its parent
        // exits at once), each writing its pid; then sleeps.
        let script = format!(
            "setsid sh -c 'echo $$ > {d}/setsid; exec sleep 300' & \
             sh -c 'sh -c \"echo \\$\\$ > {d}/orphan; exec sleep 300\" & exit 0'; sleep 300",
            d = dir.display()
        );
        let mut command = tokio::process::Command::new("sh");
        command.args(["-c", &script]).process_group(0);
        let tag = tag(&mut command);
        let mut leader = command.spawn().unwrap();
        let pid = leader.id();
        remember(pid, tag);
        let read = |name: &str| {
            let t = Instant::now();
            loop {
                if let Some(pid) = std::fs::read_to_string(dir.join(name))
                    .ok()
                    .and_then(|s| s.trim().parse::<i32>().ok())
                {
                    return pid;
                }
                assert!(
                    t.elapsed() < Duration::from_secs(60),
                    "{name} never started"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        let (setsid, orphan) = (read("setsid"), read("orphan"));
        assert!(alive(setsid) && alive(orphan));
        end_group(pid, false);
        let _ = leader.wait().await;
        end_group(pid, true);
        let t = Instant::now();
        while alive(setsid) || alive(orphan) {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "left running: {setsid} {orphan}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
