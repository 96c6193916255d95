//! Escape and abuse, each asserting containment on the host (namespace backend, as CI runs it: root).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::json;
use std::time::Duration;
use support::{dead, descendants, eventually, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_canary_file_stays_unread_and_unwritten() {
    let dir = std::env::temp_dir().join(format!("canary-dir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let canary = dir.join("canary.txt");
    std::fs::write(&canary, "host secret").unwrap();
    let home_canary = std::path::PathBuf::from(format!("/var/tmp/canary-{}", std::process::id()));
    std::fs::write(&home_canary, "host secret").unwrap();
    let h = start(&[]).await;
    let id = h.create().await;
    for path in [
        canary.to_str().unwrap(),
        home_canary.to_str().unwrap(),
        "/etc/shadow",
        "/root/.bashrc",
    ] {
        let out = h
            .sh(&id, &format!("cat {path}; echo pwned > {path}; cat /proc/1/root{path}; ls /proc/1/cwd/.. 2>&1 | head -1"))
            .await;
        assert!(
            !out["stdout"].as_str().unwrap().contains("host secret"),
            "{path}: {out}"
        );
        let r = h
            .call("read_file", json!({"sandbox_id": id, "path": path}))
            .await;
        assert!(
            !mcp_testkit::text_of(&r).contains("host secret"),
            "{path} readable through read_file"
        );
        // A write lands in the sandbox's own tmpfs (its /tmp) or fails on the read-only root.
        h.call(
            "write_file",
            json!({"sandbox_id": id, "path": path, "content": "pwned"}),
        )
        .await;
    }
    assert_eq!(std::fs::read_to_string(&canary).unwrap(), "host secret");
    assert_eq!(
        std::fs::read_to_string(&home_canary).unwrap(),
        "host secret"
    );
    // The root is read-only and holds nothing of the host but /usr (and its /bin, /lib links).
    let out = h
        .sh(
            &id,
            "ls /; touch /usr/x /etc/x 2>&1; id -u; grep -E 'NoNewPrivs|Seccomp:' /proc/self/status; unshare -U true 2>&1",
        )
        .await;
    let text = out["stdout"].as_str().unwrap();
    assert!(
        !text.contains("root\n") && !text.contains("var\n") && !text.contains("boot\n"),
        "{text}"
    );
    assert!(
        text.contains("1000\n"),
        "runs as an unprivileged uid: {text}"
    );
    assert!(text.contains("NoNewPrivs:\t1"), "{text}");
    assert!(
        text.contains("Seccomp:\t2"),
        "a seccomp filter is installed: {text}"
    );
    assert!(
        text.contains("Operation not permitted"),
        "no new namespaces inside: {text}"
    );
    assert_eq!(text.matches("Read-only file system").count(), 2, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&home_canary);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_loopback_is_unreachable_and_only_lo_exists() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = tokio::spawn(async move { listener.accept().await.is_ok() });
    let h = start(&[]).await;
    let id = h.create().await;
    let code = format!(
        "import socket\ns = socket.socket()\ns.settimeout(2)\ntry:\n    s.connect(('127.0.0.1', {port}))\n    print('CONNECTED')\nexcept OSError as e:\n    print('refused', e)\n"
    );
    let out = h
        .ok(
            "execute_code",
            json!({"sandbox_id": id, "language": "python", "code": code}),
        )
        .await;
    assert!(
        out["stdout"].as_str().unwrap().starts_with("refused"),
        "{out}"
    );
    let out = h
        .sh(&id, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
        .await;
    assert_eq!(out["stdout"], "lo\n");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !accepted.is_finished(),
        "the host listener never accepted a connection"
    );
    accepted.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_is_stopped_and_other_sandboxes_keep_working() {
    let h = start(&["--sandbox-max-processes", "64"]).await;
    let a = h.create().await;
    let b = h.create().await;
    let out = h
        .ok(
            "run_command",
            json!({"sandbox_id": a, "command": "bomb() { bomb | bomb & }; bomb; sleep 3; echo survived", "timeout_secs": 3}),
        )
        .await;
    let reported = out["timed_out"] == true
        || out["stderr"].as_str().unwrap().contains("fork")
        || out["exit_code"] != 0;
    assert!(reported, "the bomb's end is reported: {out}");
    let ok = h.sh(&b, "echo fine").await;
    assert_eq!(ok["stdout"], "fine\n");
    // The bomb's leftovers are bounded by RLIMIT_NPROC (and pids.max) and die with the sandbox. They are counted
    // from the host: inside, the leftovers can hold every slot, so a shell there cannot fork `ls` to count them.
    let launcher = h.launcher_pid(&a);
    let procs = descendants(launcher);
    assert!(
        procs.len() <= 70,
        "{} processes under sandbox {a}'s launcher",
        procs.len()
    );
    h.ok("destroy_sandbox", json!({"sandbox_id": a})).await;
    eventually("the bomb's processes to die", || {
        procs.iter().all(|p| dead(*p))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_fails_inside_and_is_reported() {
    let h = start(&[]).await;
    let created = h.ok("create_sandbox", json!({"memory_mib": 128})).await;
    let id = created["sandbox_id"].as_str().unwrap();
    let out = h
        .ok(
            "execute_code",
            json!({"sandbox_id": id, "language": "python", "code": "x = []\nwhile True:\n    x.append(bytearray(16 << 20))\n"}),
        )
        .await;
    assert_ne!(out["exit_code"], 0, "{out}");
    let text = format!("{}{}", out["stderr"], out["signal"]);
    assert!(text.contains("MemoryError") || out["signal"] == 9, "{out}");
    let after = h
        .ok(
            "execute_code",
            json!({"sandbox_id": id, "language": "python", "code": "print('ok')"}),
        )
        .await;
    assert_eq!(
        after["stdout"], "ok\n",
        "the sandbox survives its memory bomb"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_filler_hits_the_workspace_quota_not_the_host() {
    let h = start(&["--sandbox-workspace-mib", "16", "--sandbox-tmp-mib", "8"]).await;
    let id = h.create().await;
    let before = nix::sys::statvfs::statvfs("/").unwrap().blocks_available();
    let out = h.sh(&id, "dd if=/dev/zero of=/workspace/fill bs=1M count=100; dd if=/dev/zero of=/tmp/fill bs=1M count=100; df -m /workspace /tmp | tail -2").await;
    let err = out["stderr"].as_str().unwrap();
    assert_eq!(err.matches("No space left").count(), 2, "{out}");
    let after = nix::sys::statvfs::statvfs("/").unwrap().blocks_available();
    let used_mib = before.saturating_sub(after)
        * nix::sys::statvfs::statvfs("/").unwrap().fragment_size()
        / (1 << 20);
    assert!(used_mib < 50, "the host disk lost {used_mib} MiB");
    let ok = h
        .ok(
            "write_file",
            json!({"sandbox_id": id, "path": "/workspace/fill", "content": "reset"}),
        )
        .await;
    assert_eq!(ok["success"], true, "the sandbox stays usable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandboxes_cannot_see_signal_or_read_each_other() {
    let h = start(&[]).await;
    let a = h.create().await;
    let b = h.create().await;
    h.ok(
        "write_file",
        json!({"sandbox_id": a, "path": "secret.txt", "content": "A's secret"}),
    )
    .await;
    h.ok(
        "start_process",
        json!({"sandbox_id": a, "command": "exec sleep 300"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let out = h
        .sh(
            &b,
            "cat /workspace/secret.txt; ps -eo pid,comm; kill -9 -1; pgrep sleep || echo no-sleep",
        )
        .await;
    let text = out["stdout"].as_str().unwrap();
    assert!(!text.contains("A's secret"));
    assert!(text.contains("no-sleep"), "{text}");
    assert!(!text.contains(" sleep"), "B sees A's processes: {text}");
    // A's process lives on despite B's kill -1.
    let a_ps = h.sh(&a, "pgrep -x sleep | wc -l").await;
    assert_eq!(a_ps["stdout"], "1\n");
    // B's agent survives its own kill -1 (it runs as another uid).
    assert_eq!(h.sh(&b, "echo alive").await["stdout"], "alive\n");
    // A host pid from A is meaningless in B.
    let launcher = h.launcher_pid(&a);
    let host_pids = descendants(launcher);
    let target = host_pids.last().unwrap();
    h.sh(&b, &format!("kill -9 {target} 2>/dev/null; true"))
        .await;
    assert!(!dead(*target), "B killed A's process by host pid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_kills_a_sigterm_ignoring_tree_within_the_deadline() {
    let h = start(&[]).await;
    let id = h.create().await;
    let out = h
        .ok(
            "run_command",
            json!({"sandbox_id": id, "command": "trap '' TERM; (trap '' TERM; sleep 100) & (trap '' TERM; sleep 100) & sleep 100", "timeout_secs": 1}),
        )
        .await;
    // Killed by the deadline (SIGKILL after SIGTERM was ignored), not ended by the sleeps: those would
    // report no timeout and no signal.
    assert_eq!(out["timed_out"], true, "{out}");
    assert_eq!(out["signal"], 9, "{out}");
    let left = h.sh(&id, "pgrep -x sleep | wc -l").await;
    assert_eq!(left["stdout"], "0\n", "the whole tree is gone");
}

fn mount_count() -> usize {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destroyed_sandbox_leaves_no_process_mount_or_directory() {
    let h = start(&[]).await;
    let mounts = mount_count();
    let id = h.create().await;
    h.ok(
        "start_process",
        json!({"sandbox_id": id, "command": "sleep 300"}),
    )
    .await;
    h.sh(&id, "echo x > /workspace/f").await;
    let launcher = h.launcher_pid(&id);
    let mut pids = descendants(launcher);
    pids.push(launcher);
    assert!(
        pids.len() >= 4,
        "launcher, its child, pid 1 and the sleep: {pids:?}"
    );
    let cgroups: Vec<_> = h.manager.get(&id).unwrap().instance.hello.enforced["cgroups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| std::path::PathBuf::from(v.as_str().unwrap()))
        .collect();
    for c in &cgroups {
        assert!(c.exists());
    }
    h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;
    eventually("every process of the sandbox to die", || {
        pids.iter().all(|p| dead(*p))
    })
    .await;
    for c in &cgroups {
        assert!(!c.exists(), "{} left behind", c.display());
    }
    assert_eq!(
        mount_count(),
        mounts,
        "no mount left in the host's namespace"
    );
    let state = h.manager.settings.state_dir.clone();
    let leftovers: Vec<_> = std::fs::read_dir(&state)
        .map(|rd| rd.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    let ours = format!("{}-", std::process::id());
    assert!(
        !leftovers
            .iter()
            .any(|n| n.to_string_lossy().contains(&ours)),
        "{leftovers:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn landlock_is_enforced_and_reported_by_list_sandboxes_and_health() {
    let h = start(&[]).await;
    let id = h.create().await;
    let list = h.ok("list_sandboxes", json!({})).await;
    let landlock = &list["sandboxes"][0]["isolation"]["landlock"];
    assert_eq!(landlock["status"], "fully enforced", "{list}");
    assert!(landlock["abi"].as_i64().unwrap() >= 5, "{list}");
    // /health serves the same map, from the newest sandbox's agent.
    assert_eq!(&h.manager.isolation()["landlock"], landlock);
    // Procfs is mounted writable and a process may rename itself; Landlock's rules do not allow it.
    let out = h
        .sh(
            &id,
            "echo renamed > /proc/self/comm && echo comm-written; echo ok > /workspace/x && cat /workspace/x",
        )
        .await;
    let (stdout, stderr) = (
        out["stdout"].as_str().unwrap(),
        out["stderr"].as_str().unwrap(),
    );
    assert!(!stdout.contains("comm-written"), "{out}");
    assert!(stderr.contains("Permission denied"), "{out}");
    assert!(stdout.contains("ok\n"), "{out}");
}
