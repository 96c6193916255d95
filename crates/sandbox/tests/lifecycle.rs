//! Warm pool, expiry, keepalive, shutdown, orphans from a crashed run, and a dead agent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::json;
use std::time::{Duration, Instant};
use support::{dead, descendants, error_of, eventually, start};

/// How long a test waits for what must happen before it calls it hung: generous, for loaded CI machines;
/// never a claim about speed.
const HANG_GUARD: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_serves_warm_sandboxes_per_spec_and_refills() {
    let h = start(&["--sandbox-pool-min-size", "2"]).await;
    let pool = std::sync::Arc::clone(&h.manager.pool);
    eventually("the pool to fill", || pool.idle() == 2).await;
    let warm = h.ok("create_sandbox", json!({})).await;
    assert_eq!(warm["from_pool"], true);
    eventually("the pool to refill", || pool.idle() == 2).await;
    // Another spec is a miss (a pooled sandbox never ignores the requested resources) ...
    let cold = h.ok("create_sandbox", json!({"memory_mib": 300})).await;
    assert_eq!(cold["from_pool"], false);
    // ... and is kept warm from then on.
    eventually("the new spec to be warm", || pool.idle() == 3).await;
    let warm2 = h.ok("create_sandbox", json!({"memory_mib": 300})).await;
    assert_eq!(warm2["from_pool"], true);
    let list = h.ok("list_sandboxes", json!({})).await;
    let mems: Vec<_> = list["sandboxes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["memory_mib"].clone())
        .collect();
    assert_eq!(mems, vec![json!(512), json!(300), json!(300)]);
    let stats = pool.stats();
    assert_eq!(stats["hits"], 2);
    assert_eq!(stats["misses"], 1);
    assert!(stats["boot_ms_p50"].as_u64().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sandboxes_expire_and_keepalive_renews() {
    // The kept one is created last, so its idle time does not run while another boots (on a loaded machine a
    // boot can take seconds), and the timeout is well above one keepalive round.
    let h = start(&["--sandbox-idle-timeout", "5s"]).await;
    let idle = h.create().await;
    let idle_launcher = h.launcher_pid(&idle);
    let kept = h.create().await;
    // Until the idle one is reaped, however long a loaded machine takes (a hung reaper is the hang guard's).
    let guard = Instant::now() + HANG_GUARD;
    while !dead(idle_launcher) {
        assert!(Instant::now() < guard, "the idle sandbox was never reaped");
        h.ok("keepalive", json!({"sandbox_id": kept})).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let gone = error_of(
        &h.call(
            "run_command",
            json!({"sandbox_id": idle, "command": "true"}),
        )
        .await,
    );
    assert_eq!(gone["code"], "E_NOT_FOUND");
    assert!(dead(idle_launcher));
    assert_eq!(h.sh(&kept, "echo still").await["stdout"], "still\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maximum_lifetime_holds_despite_keepalive() {
    let h = start(&["--sandbox-max-lifetime", "2s"]).await;
    let id = h.create().await;
    // A keepalive that renewed the lifetime would keep it alive for the whole hang guard, 30 lifetimes.
    let until = Instant::now() + HANG_GUARD;
    let mut expired = false;
    while Instant::now() < until {
        if h.call("keepalive", json!({"sandbox_id": id}))
            .await
            .is_error
            == Some(true)
        {
            expired = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(expired, "the sandbox outlived its maximum lifetime");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_destroys_every_sandbox_and_the_warm_ones() {
    let h = start(&["--sandbox-pool-min-size", "1"]).await;
    let pool = std::sync::Arc::clone(&h.manager.pool);
    eventually("the pool to fill", || pool.idle() == 1).await;
    let a = h.create().await;
    let b = h.create().await;
    let mut pids = Vec::new();
    for id in [&a, &b] {
        let l = h.launcher_pid(id);
        pids.push(l);
        pids.extend(descendants(l));
    }
    h.env.close(Duration::from_secs(10)).await;
    assert!(h.manager.is_empty());
    assert_eq!(pool.idle(), 0);
    eventually("every sandbox process to die", || {
        pids.iter().all(|p| dead(*p))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_agent_fails_the_call_in_flight_at_once() {
    let h = start(&[]).await;
    let id = h.create().await;
    let launcher = h.launcher_pid(&id);
    let call = h.call(
        "run_command",
        json!({"sandbox_id": id, "command": "sleep 60", "timeout_secs": 120}),
    );
    let killer = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        // PID 1 of the sandbox: the launcher's grandchild.
        let pid1 = *descendants(launcher).get(1).unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid1 as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
    };
    let (r, ()) = tokio::join!(call, killer);
    // Ended by the sandbox's death, not by `sleep 60` or the 120 s timeout: either would answer a result.
    let e = error_of(&r);
    assert_eq!(e["code"], "E_SANDBOX_ENDED", "{e}");
    assert_eq!(e["category"], "E_DISCONNECTED", "{e}");
}

/// Kills every process of the sandbox whose launcher is `launcher`, the launcher included.
fn kill_sandbox_processes(launcher: u32) {
    let mut pids = descendants(launcher);
    pids.push(launcher);
    for p in pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// A sandbox whose agent died is reaped on the next tick (its cgroups and its place under SANDBOX_MAX freed),
/// however often it is named meanwhile, and a later call naming it is told it ended and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_whose_agent_died_is_reaped_and_said_to_have_ended() {
    let h = start(&[]).await;
    let id = h.create().await;
    let other = h.create().await;
    let launcher = h.launcher_pid(&id);
    // PID 1 of the sandbox: the launcher's grandchild.
    let pid1 = *descendants(launcher).get(1).unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid1 as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let guard = Instant::now() + HANG_GUARD;
    loop {
        // Naming it renews its idle time: that must not keep a dead sandbox.
        let _ = h.call("keepalive", json!({"sandbox_id": id})).await;
        let list = h.ok("list_sandboxes", json!({})).await;
        let ids: Vec<&str> = list["sandboxes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sandbox_id"].as_str().unwrap())
            .collect();
        if !ids.contains(&id.as_str()) {
            assert_eq!(ids, vec![other.as_str()]);
            break;
        }
        assert!(Instant::now() < guard, "the dead sandbox was never reaped");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eventually("the dead sandbox's launcher to be gone", || dead(launcher)).await;
    let e = error_of(
        &h.call("run_command", json!({"sandbox_id": id, "command": "true"}))
            .await,
    );
    assert_eq!(e["code"], "E_SANDBOX_ENDED", "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("ended") && msg.contains("agent exited"), "{e}");
    assert_eq!(h.sh(&other, "echo still").await["stdout"], "still\n");
}

/// A warm sandbox whose agent died is dropped from the pool, which boots another in its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_warm_sandbox_is_dropped_and_the_pool_refills() {
    let h = start(&["--sandbox-pool-min-size", "1"]).await;
    let pool = std::sync::Arc::clone(&h.manager.pool);
    eventually("the pool to fill", || pool.idle() == 1).await;
    assert_eq!(pool.stats()["boots"], 1);
    // The warm sandbox's launcher: this test process's only child running the agent binary.
    let launchers: Vec<u32> = support::children(std::process::id())
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("sandbox-agent"))
        })
        .collect();
    assert_eq!(launchers.len(), 1, "{launchers:?}");
    kill_sandbox_processes(launchers[0]);
    eventually("the pool to boot a replacement", || {
        pool.stats()["boots"] == 2 && pool.idle() == 1
    })
    .await;
    let warm = h.ok("create_sandbox", json!({})).await;
    assert_eq!(warm["from_pool"], true);
    let id = warm["sandbox_id"].as_str().unwrap();
    assert_eq!(h.sh(id, "echo up").await["stdout"], "up\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_runs_sandboxes_are_cleaned_at_start() {
    // A crashed bridge leaves cgroups named after its (now dead) pid with live processes in them.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = gone.id();
    gone.wait().unwrap();
    let parent = std::path::Path::new("/sys/fs/cgroup/pids/mcp-bridges-sandbox");
    let dir = parent.join(format!("{dead_pid}-orphan"));
    // Orphaned like a crashed run's: its parent is gone, so it is not this test's zombie once killed.
    let out = std::process::Command::new("sh")
        .args(["-c", "sleep 300 >/dev/null 2>&1 & echo $!"])
        .output()
        .unwrap();
    let orphan: u32 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Built under our own (live) pid and renamed into place with the process in it: a bridge another test
    // starts meanwhile sweeps a dead pid's group, and an empty parent, as soon as it sees them.
    let building = parent.join(format!("{}-building-{dead_pid}", std::process::id()));
    let mut tries = 0;
    while let Err(e) = std::fs::create_dir_all(&building) {
        tries += 1;
        assert!(tries < 100, "{}: {e}", building.display());
    }
    std::fs::write(building.join("cgroup.procs"), orphan.to_string()).unwrap();
    std::fs::rename(&building, &dir).unwrap();
    let _h = start(&[]).await;
    // Whichever bridge starts first cleans it (tests run side by side); it is gone once ours has started.
    assert!(!dir.exists());
    eventually("the orphan to die", || dead(orphan)).await;
}

/// A call under way when its sandbox's agent dies, or when the sandbox is destroyed, is told the sandbox ended
/// (E_SANDBOX_ENDED, and why), as a later call naming it is: it was told to reconnect the live system, of which
/// there is nothing to reconnect (an attack run's finding).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_under_way_when_its_sandbox_ends_is_told_so() {
    let h = start(&[]).await;
    for how in ["agent killed", "destroyed"] {
        let id = h.create().await;
        let running = mcp_testkit::start_call(
            &h.client,
            "run_command",
            json!({"sandbox_id": id, "command": "sleep 60"}),
        )
        .await;
        // The command runs once the sandbox has a child of PID 1 beside the agent's own.
        let launcher = h.launcher_pid(&id);
        eventually("the command to run", || descendants(launcher).len() > 2).await;
        if how == "destroyed" {
            h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;
        } else {
            let pid1 = *descendants(launcher).get(1).unwrap();
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid1 as i32),
                nix::sys::signal::Signal::SIGKILL,
            )
            .unwrap();
        }
        let answer = mcp_testkit::within("the call's answer", running.await_response())
            .await
            .unwrap();
        let rmcp::model::ServerResult::CallToolResult(answer) = answer else {
            panic!("not a tool result: {answer:?}")
        };
        let e = error_of(&answer);
        assert_eq!(e["code"], "E_SANDBOX_ENDED", "{how}: {e}");
        let reason = if how == "destroyed" {
            "destroyed"
        } else {
            "agent exited"
        };
        assert_eq!(e["details"]["reason"], reason, "{how}: {e}");
        assert!(!e.to_string().contains("reconnect"), "{how}: {e}");
    }
}
