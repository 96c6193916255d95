//! A `debug_start` that ends early, cancelled by the client or past its deadline while the debugger hangs,
//! leaves nothing behind on any launch path (stdio adapters, js-debug, delve): no live session, no adapter or
//! debug server, nothing they started, no socket directory; and a deadline's error says what was waited for.
//! Real debuggers cannot be made to hang at will, so the hanging ones are test doubles: `support/hung_dap.py`
//! started where debugpy is, `support/hung_js_debug.js` as js-debug's server; delve is the real one, with its
//! build held by a `-toolexec` program that never returns.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_debug::catalog::BUILTIN_MANIFEST;
use bridge_debug::config::BackendChoice;
use mcp_testkit::start_call;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use support::procs::{
    assert_exited, children_by_argv, go_held_in_its_build, hung_js_debug, hung_python,
    js_socket_dirs, pids_in, until,
};
use support::*;

/// `debug_start`'s own deadline in the timeout tests (the catalog's is 60 s).
const START_TIMEOUT_MS: u64 = 3000;

#[derive(Clone, Copy, PartialEq)]
enum End {
    /// `notifications/cancelled` while the launch waits on the debugger.
    Cancel,
    /// `debug_start`'s deadline passes while the launch waits on the debugger.
    Timeout,
}

/// The built-in catalog with `debug_start`'s timeout at [`START_TIMEOUT_MS`], as a `--debug-manifest` file.
fn short_start_manifest(ws: &Path) -> PathBuf {
    let mut manifest: Value = serde_json::from_str(BUILTIN_MANIFEST).unwrap();
    manifest["scripts"]["debug.start"]["metadata"]["mcp"]["timeout"] = json!(START_TIMEOUT_MS);
    let file = ws.join("short-start-manifest.json");
    std::fs::write(&file, manifest.to_string()).unwrap();
    file
}

async fn bridge(
    ws: &Path,
    end: End,
    tweak: impl FnOnce(&mut bridge_debug::DebugArgs),
) -> mcp_testkit::Client {
    let mut a = args(ws, BackendChoice::Dap);
    a.max_sessions = 1;
    if end == End::Timeout {
        a.manifest = Some(short_start_manifest(ws));
    }
    tweak(&mut a);
    client(a).await
}

/// Starts `config` and ends the call early as `end` says: for a cancel, once `ready` holds (the launch is then
/// waiting on the debugger). The error a deadline gave.
async fn start_and_end_early(
    c: &mcp_testkit::Client,
    config: Value,
    end: End,
    ready: impl Fn() -> bool,
) -> Option<Value> {
    let params = json!({"config": config});
    match end {
        End::Timeout => {
            let (_, e) = code(c, "debug_start", params).await;
            Some(e)
        }
        End::Cancel => {
            let handle = start_call(c, "debug_start", params).await;
            until("the launch reached the debugger", ready).await;
            handle
                .cancel(Some("the agent moved on".into()))
                .await
                .unwrap();
            None
        }
    }
}

/// The error of a launch whose deadline passed names what it waited for, as a launch failure.
fn assert_names_the_wait(e: &Value) {
    assert_eq!(e["code"], "E_LAUNCH_FAILED", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("`initialized`"),
        "the error says what the launch waited for: {e}"
    );
}

/// The session no longer counts as live (its `--debug-max-sessions` slot is free) and is listed as terminated.
/// The guard marks it so before it ends anything, so this says nothing about the clean-up: the `assert_exited`
/// checks after it do.
async fn assert_counted_as_ended(c: &mcp_testkit::Client) {
    let begun = std::time::Instant::now();
    loop {
        let list = data(c, "debug_list_sessions", json!({})).await;
        if list["live"] == 0 {
            break;
        }
        assert!(begun.elapsed() < HANG_GUARD, "a session stays live: {list}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let list = data(c, "debug_list_sessions", json!({})).await;
    for s in list["sessions"].as_array().unwrap() {
        assert_eq!(s["state"], "terminated", "{list}");
    }
}

/// debugpy's place (`--debug-python`) taken by `hung_dap.py`, which answers `initialize` only.
async fn stdio_adapter(end: End) {
    let ws = workspace(if end == End::Cancel {
        "hung-cancel"
    } else {
        "hung-timeout"
    });
    let pid_file = ws.join("adapter.pid");
    let python = hung_python(&ws);
    let c = bridge(&ws, end, |a| a.python = Some(python)).await;
    let config = json!({"type": "debugpy", "request": "launch", "name": "py",
        "program": ws.join("target.py").display().to_string()});
    let e = start_and_end_early(&c, config, end, || !pids_in(&pid_file).is_empty()).await;
    assert_counted_as_ended(&c).await;
    assert_exited("the adapter", &pids_in(&pid_file)).await;
    assert_exited(
        "the program the adapter started",
        &pids_in(&ws.join("program.pid")),
    )
    .await;
    if let Some(e) = e {
        assert_names_the_wait(&e);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_start_ends_its_stdio_adapter() {
    stdio_adapter(End::Cancel).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_past_its_deadline_ends_its_stdio_adapter_and_names_the_wait() {
    stdio_adapter(End::Timeout).await;
}

/// js-debug's server (`--debug-js-debug`) is `hung_js_debug.js`: the launcher's connection works, the
/// program's session hangs after its `launch`.
async fn js_debug(end: End) {
    let ws = workspace(if end == End::Cancel {
        "hung-js-cancel"
    } else {
        "hung-js-timeout"
    });
    let (server, config) = hung_js_debug(&ws);
    let c = bridge(&ws, end, |a| a.js_debug = Some(server.clone())).await;
    let marker = ws.join("child-launch");
    let e = start_and_end_early(&c, config, end, || marker.exists()).await;
    assert_counted_as_ended(&c).await;
    assert_exited("js-debug's server", &pids_in(&ws.join("adapter.pid"))).await;
    assert_exited(
        "the program js-debug started",
        &pids_in(&ws.join("program.pid")),
    )
    .await;
    until("js-debug's socket directory is removed", || {
        js_socket_dirs(std::process::id()).is_empty()
    })
    .await;
    if let Some(e) = e {
        assert_names_the_wait(&e);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_start_ends_js_debug_its_launcher_and_socket_directory() {
    js_debug(End::Cancel).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_past_its_deadline_ends_js_debug_and_names_the_wait() {
    js_debug(End::Timeout).await;
}

/// Real delve, whose `go build` runs the tool through a `-toolexec` program that records its pid and sleeps:
/// the launch hangs inside the build, which must end with delve.
async fn delve(end: End) {
    let ws = workspace(if end == End::Cancel {
        "hung-go-cancel"
    } else {
        "hung-go-timeout"
    });
    let pid_file = ws.join("adapter.pid");
    let config = go_held_in_its_build(&ws, &pid_file);
    // `-toolexec` runs a program of the configuration's: the launch policy takes it only with the flag.
    let c = bridge(&ws, end, |a| a.allow_launch_anywhere = true).await;
    let e = start_and_end_early(&c, config, end, || !pids_in(&pid_file).is_empty()).await;
    assert_counted_as_ended(&c).await;
    until("delve exited", || {
        children_by_argv(|argv| argv.first().is_some_and(|a| a.ends_with("dlv"))).is_empty()
    })
    .await;
    assert_exited("the build delve started", &pids_in(&pid_file)).await;
    if let Some(e) = e {
        assert_names_the_wait(&e);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_start_ends_delve_and_its_build() {
    delve(End::Cancel).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_past_its_deadline_ends_delve_and_its_build_and_names_the_wait() {
    delve(End::Timeout).await;
}

/// `wait: true` with no stop in `timeoutMs`: the launch finished, so the session runs on and the error names it
/// (the caller can wait again or stop it) rather than leaving a live session the caller never heard of.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_whose_first_stop_does_not_come_names_the_session_it_leaves_running() {
    let ws = workspace("wait-timeout");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let (code, e) = code(
        &c,
        "debug_start",
        json!({"launch": "slow", "wait": true, "timeoutMs": 500}),
    )
    .await;
    assert_eq!(code, "E_TIMEOUT", "{e}");
    let id = e["details"]["sessionId"]
        .as_str()
        .expect("the session is named");
    let list = data(&c, "debug_list_sessions", json!({})).await;
    assert_eq!(
        (list["live"].as_u64(), list["default"].as_str()),
        (Some(1), Some(id)),
        "{list}"
    );
    data(&c, "debug_stop", json!({"sessionId": id})).await;
}
