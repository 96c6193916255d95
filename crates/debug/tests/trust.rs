//! The trust boundary of the file protocol: only the workspace's own `.vsc-bridge/` (never a parent's), owned by
//! this user, writable by no one else, not a symlink; nothing inside is followed through a link. Both the client
//! (the MCP side) and the host refuse a directory that fails, with E_BRIDGE_UNTRUSTED naming it and why.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_debug::config::BackendChoice;
use bridge_debug::dap::DapConfig;
use bridge_debug::fsbridge::host::{HostError, HostOptions, serve};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;
use support::*;
use tokio_util::sync::CancellationToken;

fn cfg(ws: &Path) -> DapConfig {
    DapConfig {
        workspace: ws.to_path_buf(),
        python: Some(python()),
        lldb_dap: None,
        js_debug: None,
        policy: Default::default(),
    }
}

/// A `.vsc-bridge/` with `execute/` and a fresh `host.json` naming a live pid (this test's), as a forger
/// would leave it.
fn forged_bridge(dir: &Path) -> std::path::PathBuf {
    let root = dir.join(".vsc-bridge");
    std::fs::create_dir_all(root.join("execute")).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(root.join("execute"), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(
        root.join("host.json"),
        format!(
            r#"{{"bridgeId":"extHost-f0f0f0f0","version":1,"pid":{}}}"#,
            std::process::id()
        ),
    )
    .unwrap();
    root
}

async fn serve_err(ws: &Path) -> HostError {
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        serve(
            ws,
            HostOptions::default(),
            cfg(ws),
            CancellationToken::new(),
        ),
    )
    .await
    .expect("the host refuses at once instead of serving");
    out.expect_err("the host refuses the directory")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_dir_planted_in_a_parent_is_never_used() {
    let parent = workspace("trust-parent");
    let forged = forged_bridge(&parent);
    let ws = parent.join("project");
    std::fs::create_dir(&ws).unwrap();
    let auto = client(args(&ws, BackendChoice::Auto)).await;
    let status = data(&auto, "bridge_status", json!({})).await;
    assert_eq!(status["backend"], "dap", "{status}");
    assert_eq!(
        status["bridgeRoot"],
        ws.join(".vsc-bridge").display().to_string()
    );
    let vscode = client(args(&ws, BackendChoice::Vscode)).await;
    let (code, e) = support::code(&vscode, "debug_status", json!({})).await;
    assert_eq!(code, "E_BRIDGE_UNAVAILABLE", "{e}");
    assert_eq!(
        std::fs::read_dir(forged.join("execute")).unwrap().count(),
        0,
        "nothing was written into the parent's directory"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_writable_bridge_dir_is_refused_by_client_and_host() {
    let ws = workspace("trust-gw");
    let root = forged_bridge(&ws);
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o770)).unwrap();
    let vscode = client(args(&ws, BackendChoice::Vscode)).await;
    let (code, e) = support::code(&vscode, "debug_status", json!({})).await;
    assert_eq!(code, "E_BRIDGE_UNTRUSTED", "{e}");
    assert_eq!(e["details"]["path"], root.display().to_string(), "{e}");
    assert!(
        e["details"]["reason"].as_str().unwrap().contains("0770"),
        "{e}"
    );
    assert_eq!(std::fs::read_dir(root.join("execute")).unwrap().count(), 0);
    let auto = client(args(&ws, BackendChoice::Auto)).await;
    let status = data(&auto, "bridge_status", json!({})).await;
    assert_eq!(status["backend"], "dap", "{status}");
    assert!(
        status["reason"]
            .as_str()
            .unwrap()
            .contains("E_BRIDGE_UNTRUSTED"),
        "{status}"
    );
    assert_eq!(status["vscodeHealthy"], false);
    let err = serve_err(&ws).await;
    assert!(
        matches!(&err, HostError::Untrusted(u) if u.path == root),
        "{err}"
    );
    assert!(err.to_string().contains("0770"), "{err}");
    // An `execute/` others can write is refused the same way.
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(root.join("execute"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = serve_err(&ws).await;
    assert!(
        matches!(&err, HostError::Untrusted(u) if u.path == root.join("execute")),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlinked_bridge_dir_is_refused() {
    let ws = workspace("trust-link");
    let elsewhere = workspace("trust-link-target");
    let real = forged_bridge(&elsewhere);
    std::os::unix::fs::symlink(&real, ws.join(".vsc-bridge")).unwrap();
    let vscode = client(args(&ws, BackendChoice::Vscode)).await;
    let (code, e) = support::code(&vscode, "debug_status", json!({})).await;
    assert_eq!(code, "E_BRIDGE_UNTRUSTED", "{e}");
    assert_eq!(e["details"]["reason"], "it is a symlink");
    let err = serve_err(&ws).await;
    assert!(err.to_string().contains("symlink"), "{err}");
    assert_eq!(std::fs::read_dir(real.join("execute")).unwrap().count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_dir_owned_by_another_user_is_refused() {
    let ws = workspace("trust-owner");
    let root = forged_bridge(&ws);
    std::os::unix::fs::chown(&root, Some(4242), Some(4242)).unwrap();
    let vscode = client(args(&ws, BackendChoice::Vscode)).await;
    let (code, e) = support::code(&vscode, "debug_status", json!({})).await;
    assert_eq!(code, "E_BRIDGE_UNTRUSTED", "{e}");
    assert!(
        e["details"]["reason"]
            .as_str()
            .unwrap()
            .contains("owned by uid 4242"),
        "{e}"
    );
    let err = serve_err(&ws).await;
    assert!(err.to_string().contains("owned by uid 4242"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_creates_0700_and_follows_no_link_and_takes_no_foreign_job() {
    let ws = workspace("trust-jobs");
    let stop = CancellationToken::new();
    let task = {
        let (ws, stop) = (ws.clone(), stop.clone());
        tokio::spawn(async move { serve(&ws, HostOptions::default(), cfg(&ws), stop).await })
    };
    let root = ws.join(".vsc-bridge");
    while !root.join("host.json").exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for d in [&root, &root.join("execute")] {
        let mode = std::fs::metadata(d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", d.display());
    }
    let command = |id: &str| {
        json!({"version": 1, "clientId": "mcp-server", "id": id, "createdAt": "2026-01-01T00:00:00.000Z",
            "scriptName": "debug.status", "params": {}, "timeout": 5000})
        .to_string()
    };
    // 1. A job directory that is a symlink to a directory elsewhere.
    let outside = workspace("trust-jobs-outside");
    let linked_id = "20260101T000000000Z-0001-aaaa";
    std::fs::write(outside.join("command.json"), command(linked_id)).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("execute").join(linked_id)).unwrap();
    // 2. A real job directory whose command.json is a symlink to a file elsewhere.
    let inner_id = "20260101T000000000Z-0002-bbbb";
    let inner = root.join("execute").join(inner_id);
    std::fs::create_dir(&inner).unwrap();
    std::fs::write(outside.join("secret.json"), command(inner_id)).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.json"), inner.join("command.json")).unwrap();
    // 3. A job directory owned by another user.
    let foreign_id = "20260101T000000000Z-0003-cccc";
    // Made whole beside execute/ and renamed in: a host watching execute/ must never see it as ours before
    // the chown (it once claimed it in that window).
    let foreign = root.join("execute").join(foreign_id);
    let staging = root.join(format!("staging-{foreign_id}"));
    std::fs::create_dir(&staging).unwrap();
    std::fs::write(staging.join("command.json"), command(foreign_id)).unwrap();
    std::os::unix::fs::chown(&staging, Some(4242), Some(4242)).unwrap();
    std::fs::rename(&staging, &foreign).unwrap();
    // A genuine job after them: once it is answered, the host has seen the others.
    let c = client(args(&ws, BackendChoice::Vscode)).await;
    data(&c, "debug_status", json!({})).await;
    let t = std::time::Instant::now();
    while !inner.join("done").exists() {
        assert!(
            t.elapsed() < support::HANG_GUARD,
            "the linked command is answered"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !outside.join("claimed.json").exists() && !outside.join("done").exists(),
        "nothing written through the linked job directory"
    );
    let err: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(inner.join("error.json")).unwrap()).unwrap();
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("symbolic links"),
        "the link in the job is refused (ELOOP), not read: {err}"
    );
    assert!(!inner.join("response.json").exists());
    assert!(
        !foreign.join("claimed.json").exists(),
        "another user's job is not taken"
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}

fn set_age(path: &Path, age: Duration) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - age)
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_lock_with_a_fresh_heartbeat_is_a_live_vscode_and_is_left_alone() {
    let ws = workspace("lock-vscode");
    let root = forged_bridge(&ws);
    // VS Code's extension host: an empty lock, a host.json whose pid is not in our pid namespace.
    std::fs::write(root.join("host.lock"), "").unwrap();
    std::fs::write(
        root.join("host.json"),
        r#"{"bridgeId":"extHost-1234abcd","version":1,"pid":999999}"#,
    )
    .unwrap();
    let err = serve_err(&ws).await;
    assert!(matches!(err, HostError::Locked { .. }), "{err}");
    assert!(err.to_string().contains("heartbeat"), "{err}");
    assert_eq!(
        std::fs::read_to_string(root.join("host.json")).unwrap(),
        r#"{"bridgeId":"extHost-1234abcd","version":1,"pid":999999}"#,
        "VS Code's host.json is untouched"
    );
    // Once its heartbeat is stale (VS Code gone), the directory is taken over.
    set_age(&root.join("host.json"), Duration::from_secs(120));
    let stop = CancellationToken::new();
    let task = {
        let (ws, stop) = (ws.clone(), stop.clone());
        tokio::spawn(async move { serve(&ws, HostOptions::default(), cfg(&ws), stop).await })
    };
    let t = std::time::Instant::now();
    while !std::fs::read_to_string(root.join("host.json"))
        .unwrap_or_default()
        .contains(&format!("\"pid\": {}", std::process::id()))
    {
        assert!(
            t.elapsed() < support::HANG_GUARD,
            "the stale directory is taken over"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_in_another_pid_namespace_is_alive_while_its_heartbeat_is_fresh() {
    use bridge_debug::fsbridge::client::{FsClient, RunCtx};
    let ws = workspace("pidns");
    let root = forged_bridge(&ws);
    std::fs::write(
        root.join("host.json"),
        r#"{"bridgeId":"extHost-00000002","version":1,"pid":999999,"pidNs":"pid:[1]"}"#,
    )
    .unwrap();
    // It claims the job and works on it without answering within the call's deadline.
    let execute = root.join("execute");
    let claimer = std::thread::spawn(move || {
        let t = std::time::Instant::now();
        while t.elapsed() < support::HANG_GUARD {
            for e in std::fs::read_dir(&execute).unwrap().flatten() {
                if e.path().join("command.json").exists() {
                    std::fs::write(e.path().join("claimed.json"), "{}").unwrap();
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let client = FsClient::new(root);
    let ctx = RunCtx {
        cancel: CancellationToken::new(),
        tool: None,
    };
    // The claimer must take the job within this too (else the answer is E_PICKUP_TIMEOUT): not a moment.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let err = client
        .run("debug.status", json!({}), deadline, ctx)
        .await
        .unwrap_err();
    claimer.join().unwrap();
    assert_eq!(
        err.code, "E_TIMEOUT",
        "a pid absent from our /proc is no proof of death in another namespace: {err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_status_reports_a_failing_vscode_backend_as_failing() {
    let ws = workspace("status-failing");
    let root = forged_bridge(&ws);
    set_age(&root.join("host.json"), Duration::from_secs(120));
    let c = client(args(&ws, BackendChoice::Vscode)).await;
    let status = data(&c, "bridge_status", json!({})).await;
    assert_eq!(status["backend"], "vscode");
    assert_eq!(status["healthy"], false, "{status}");
    assert!(
        status["problem"].as_str().unwrap().contains("heartbeat"),
        "{status}"
    );
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
    let status = data(&c, "bridge_status", json!({})).await;
    assert_eq!(status["healthy"], false);
    assert!(
        status["problem"]
            .as_str()
            .unwrap()
            .contains("E_BRIDGE_UNTRUSTED"),
        "{status}"
    );
    let dap = client(args(&ws, BackendChoice::Dap)).await;
    assert_eq!(
        data(&dap, "bridge_status", json!({})).await["healthy"],
        true
    );
}
