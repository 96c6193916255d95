//! pause_sandbox / resume_sandbox: the cgroup freezer stops a busy loop's CPU use (its cgroup CPU time does
//! not move over a second) and resume lets it go on; a paused sandbox refuses work by name, shows its state,
//! and can be destroyed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;
use support::{dead, descendants, error_of, eventually, start};

/// The sandbox's CPU time in nanoseconds, from its cgroup (v1 `cpuacct.usage`, v2 `cpu.stat` usage_usec).
fn cpu_ns(dirs: &[PathBuf]) -> u64 {
    for d in dirs {
        if let Ok(t) = std::fs::read_to_string(d.join("cpuacct.usage")) {
            return t.trim().parse().unwrap();
        }
        if let Ok(t) = std::fs::read_to_string(d.join("cpu.stat"))
            && let Some(v) = t.lines().find_map(|l| l.strip_prefix("usage_usec "))
        {
            return v.trim().parse::<u64>().unwrap() * 1000;
        }
    }
    panic!("no CPU accounting in {dirs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_stops_a_busy_loop_and_resume_continues_it() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "these tests run as root, as CI does"
    );
    let h = start(&[]).await;
    let id = h.create().await;
    h.ok(
        "start_process",
        json!({"sandbox_id": id, "command": "while :; do :; done"}),
    )
    .await;
    let dirs = h.manager.get(&id).unwrap().instance.cgroup_dirs();
    let before = cpu_ns(&dirs);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(cpu_ns(&dirs) > before, "the loop runs");

    let p = h.ok("pause_sandbox", json!({"sandbox_id": id})).await;
    assert_eq!(p["state"], "paused");
    let paused_at = cpu_ns(&dirs);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after_second = cpu_ns(&dirs);
    assert_eq!(after_second, paused_at, "no CPU time while paused");

    let listed = h.ok("list_sandboxes", json!({"sandbox_id": id})).await;
    assert_eq!(listed["sandboxes"][0]["state"], "paused");
    let refused = error_of(
        &h.call(
            "run_command",
            json!({"sandbox_id": id, "command": "echo hi"}),
        )
        .await,
    );
    assert_eq!(refused["code"], "E_SANDBOX_PAUSED", "{refused}");
    assert!(refused.to_string().contains("resume_sandbox"), "{refused}");
    let again = h.ok("pause_sandbox", json!({"sandbox_id": id})).await;
    assert_eq!(again["state"], "paused", "pausing twice is harmless");

    let r = h.ok("resume_sandbox", json!({"sandbox_id": id})).await;
    assert_eq!(r["state"], "running");
    let resumed_at = cpu_ns(&dirs);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(cpu_ns(&dirs) > resumed_at, "the loop goes on after resume");
    let out = h.sh(&id, "echo back").await;
    assert_eq!(out["stdout"], "back\n");
    println!(
        "pause latency {:.3} ms, resume latency {:.3} ms (the kernel's freeze/thaw as the tool reports it)",
        p["latency_ms"].as_f64().unwrap(),
        r["latency_ms"].as_f64().unwrap()
    );
    h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_sandbox_is_destroyed_whole() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "these tests run as root, as CI does"
    );
    let h = start(&[]).await;
    let id = h.create().await;
    h.ok(
        "start_process",
        json!({"sandbox_id": id, "command": "while :; do :; done"}),
    )
    .await;
    let launcher = h.launcher_pid(&id);
    let mut pids = descendants(launcher);
    pids.push(launcher);
    let dirs = h.manager.get(&id).unwrap().instance.cgroup_dirs();
    h.ok("pause_sandbox", json!({"sandbox_id": id})).await;
    h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;
    eventually("every process of the paused sandbox to die", || {
        pids.iter().all(|p| dead(*p))
    })
    .await;
    for d in &dirs {
        assert!(!d.exists(), "{} left behind", d.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_latency() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "these tests run as root, as CI does"
    );
    let h = start(&[]).await;
    let id = h.create().await;
    let (mut pause, mut resume) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        let p = h.ok("pause_sandbox", json!({"sandbox_id": id})).await;
        pause.push(p["latency_ms"].as_f64().unwrap());
        let r = h.ok("resume_sandbox", json!({"sandbox_id": id})).await;
        resume.push(r["latency_ms"].as_f64().unwrap());
    }
    pause.sort_by(f64::total_cmp);
    resume.sort_by(f64::total_cmp);
    println!(
        "20 rounds, idle sandbox: pause p50 {:.3} ms max {:.3} ms; resume p50 {:.3} ms max {:.3} ms",
        pause[10], pause[19], resume[10], resume[19]
    );
    h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;
}
