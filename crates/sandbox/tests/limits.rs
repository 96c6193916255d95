//! Where a sandbox's cgroups live (under the bridge's own cgroup, gone with the sandbox, a crashed run's
//! found at start), what a create may ask for (checked against the host and the configured maxima), and
//! how a timeout or kill_process ends a program's whole tree (its own cgroup, setsid or not).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use support::{descendants, start};

/// controller -> this process's cgroup path in that hierarchy (v1 lines; `""` is the v2 hierarchy).
fn own_cgroups(pid: &str) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        for c in controllers.split(',') {
            out.insert(c.to_string(), path.to_string());
        }
    }
    out
}

/// The mount point of the v1 hierarchy holding `controller`.
fn mount_of(controller: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    text.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut r = right.split_whitespace();
        let (fstype, _, opts) = (r.next()?, r.next()?, r.next()?);
        (fstype == "cgroup" && opts.split(',').any(|o| o == controller))
            .then(|| PathBuf::from(left.split_whitespace().nth(4).unwrap()))
    })
}

fn root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn under(path: &str, own: &str) -> bool {
    let own = own.trim_end_matches('/');
    path.starts_with(&format!("{own}/")) && path.len() > own.len() + 1
}

fn enforced_cgroups(h: &support::Harness, id: &str) -> Vec<PathBuf> {
    h.manager.get(id).unwrap().instance.hello.enforced["cgroups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| PathBuf::from(v.as_str().unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_s_cgroups_are_under_the_bridge_s_own_and_go_with_it() {
    assert!(root(), "these tests run as root, as CI does");
    let own = own_cgroups("self");
    let h = start(&[]).await;
    let id = h.create().await;
    let launcher = h.launcher_pid(&id);
    let mut pids = descendants(launcher);
    pids.push(launcher);
    let dirs = enforced_cgroups(&h, &id);
    for controller in ["memory", "pids", "cpu"] {
        let Some(mount) = mount_of(controller) else {
            continue;
        };
        let own_dir = mount.join(own[controller].trim_start_matches('/'));
        let dir = dirs
            .iter()
            .find(|d| d.starts_with(&mount))
            .unwrap_or_else(|| panic!("no {controller} group among {dirs:?}"));
        assert!(
            dir.starts_with(own_dir.join("mcp-bridges-sandbox")),
            "{controller}: {} is not under the bridge's own {}",
            dir.display(),
            own_dir.display()
        );
        for pid in &pids {
            let theirs = own_cgroups(&pid.to_string());
            assert!(
                under(&theirs[controller], &own[controller]),
                "{controller}: sandbox process {pid} is in {}, not under the bridge's {}",
                theirs[controller],
                own[controller]
            );
        }
    }
    h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;
    for d in &dirs {
        assert!(!d.exists(), "{} left behind", d.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_run_s_groups_under_the_bridge_s_cgroup_are_removed_at_start() {
    assert!(root(), "these tests run as root, as CI does");
    let own = own_cgroups("self");
    let mount = mount_of("memory").expect("a memory hierarchy");
    // A pid that is surely dead: a child we reaped.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let gone = child.id();
    child.wait().unwrap();
    let parent = mount
        .join(own["memory"].trim_start_matches('/'))
        .join("mcp-bridges-sandbox");
    let orphan = parent.join(format!("{gone}-crashed"));
    let nested = orphan.join("p7");
    std::fs::create_dir_all(&nested).unwrap();
    let h = start(&[]).await;
    assert!(!orphan.exists(), "{} left behind", orphan.display());
    assert!(h.manager.orphans_cleaned >= 1);
}
