//! Go out of the box on the `dap` backend: `dlv dap` from Debian's delve (scripts/install-peers lists it, with
//! golang-go to build), found on PATH without a flag, through a real MCP client. A missing dlv or go fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_debug::config::BackendChoice;
use serde_json::{Value, json};
use support::procs::{children_by_argv, tcp_listeners};
use support::*;

const GO_MAIN: &str = "\
package main

import \"fmt\"

func add(a, b int) int {
\ttotal := a + b
\treturn total
}

func main() {
\tx := add(40, 2)
\tfmt.Println(\"x =\", x)
}
";
/// The line of `return total` in [`GO_MAIN`].
const GO_LINE: u64 = 7;

fn go_workspace(tag: &str) -> std::path::PathBuf {
    for tool in ["dlv", "go"] {
        let found = std::process::Command::new(tool)
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            found,
            "{tool} is missing: apt-get install delve golang-go (scripts/install-peers --print-apt)"
        );
    }
    let ws = workspace(tag);
    // Its own directory: go build refuses a package directory holding the workspace's t.c.
    std::fs::create_dir_all(ws.join("gomain")).unwrap();
    std::fs::write(ws.join("gomain/main.go"), GO_MAIN).unwrap();
    std::fs::write(
        ws.join("gomain/go.mod"),
        "module example.com/t\n\ngo 1.19\n",
    )
    .unwrap();
    ws
}

/// A Go workspace and a bridge client on the `dap` backend with a line breakpoint at `GO_LINE` of its main.
async fn go_client_with_line_breakpoint(tag: &str) -> (std::path::PathBuf, mcp_testkit::Client) {
    let ws = go_workspace(tag);
    let c = client(args(&ws, BackendChoice::Dap)).await;
    data(
        &c,
        "breakpoint_set",
        json!({"path": "gomain/main.go", "line": GO_LINE}),
    )
    .await;
    (ws, c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_on_delve_line_and_function_breakpoints_inspect_set_continue() {
    let (ws, c) = go_client_with_line_breakpoint("go").await;
    data(&c, "breakpoint_set_function", json!({"name": "main.main"})).await;
    let started = data(&c, "debug_start", json!({"config": go_config(&ws)})).await;
    assert_eq!(started["adapter"], "go", "{started}");
    let line_bp = started["breakpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["kind"] == "line")
        .cloned()
        .unwrap();
    assert_eq!(line_bp["verified"], true, "{started}");
    assert_eq!(line_bp["boundLine"], GO_LINE, "{started}");
    let hit = data(&c, "debug_wait_for_hit", json!({"timeoutMs": 60000})).await;
    assert_eq!(hit["event"], "stopped", "{hit}");
    assert_eq!(
        hit["functionName"], "main.main",
        "the function breakpoint first: {hit}"
    );
    let hit = data(&c, "debug_continue", json!({})).await;
    assert_eq!(hit["line"], GO_LINE, "{hit}");
    let vars = data(&c, "debug_list_variables", json!({"scope": "local"})).await;
    assert!(vars.to_string().contains("\"total\""), "{vars}");
    let v = data(&c, "debug_evaluate", json!({"expression": "total * 2"})).await;
    assert_eq!(v["result"], "84", "{v}");
    let set = data(
        &c,
        "debug_set_variable",
        json!({"name": "total", "value": "100"}),
    )
    .await;
    assert_eq!(set["value"], "100", "{set}");
    // delve has no data breakpoints: a coded refusal.
    let (code, e) = support::code(&c, "breakpoint_set_data", json!({"name": "total"})).await;
    assert_eq!(code, "E_UNSUPPORTED_BY_ADAPTER", "{e}");
    let end = data(&c, "debug_continue", json!({"timeoutMs": 30000})).await;
    assert_eq!(end["event"], "terminated", "{end}");
}

/// A program that does not build is E_LAUNCH_FAILED at once (delve answers `launch` with the failure and sends
/// no `initialized`), and dap_logs has the compiler's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_build_error_is_launch_failed_with_the_compiler_message() {
    let ws = go_workspace("go-broken");
    std::fs::write(
        ws.join("gomain/main.go"),
        "package main\n\nfunc main() {\n\tundefinedThing()\n}\n",
    )
    .unwrap();
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let dir = ws.join("gomain").display().to_string();
    let config =
        json!({"type": "go", "request": "launch", "name": "go", "program": dir, "cwd": dir});
    let (code, e) = support::code(&c, "debug_start", json!({"config": config})).await;
    assert_eq!(code, "E_LAUNCH_FAILED", "{e}");
    let logs = data(&c, "dap_logs", json!({})).await;
    assert!(logs.to_string().contains("undefinedThing"), "{logs}");
}

fn go_config(ws: &std::path::Path) -> Value {
    let dir = ws.join("gomain").display().to_string();
    json!({"type": "go", "request": "launch", "name": "go", "mode": "debug", "program": dir, "cwd": dir})
}

/// The bridge's direct children running `dlv`, with their argv.
fn dlv_servers() -> Vec<(u32, Vec<String>)> {
    children_by_argv(|argv| argv.first().is_some_and(|a| a.ends_with("dlv")))
}

/// delve 1.20 cannot listen on a Unix socket (`--listen unix:/path` is refused), so it stays on loopback TCP,
/// but binds the port itself (`127.0.0.1:0`, announced on its stdout): the bridge used to pick a free port,
/// release it and pass it to delve, which another local process could take in between. Same-user connections
/// only (`--only-same-user`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delve_binds_its_own_loopback_port_none_is_chosen_for_it() {
    let (ws, c) = go_client_with_line_breakpoint("go-listen").await;
    data(&c, "debug_start", json!({"config": go_config(&ws)})).await;
    let hit = data(&c, "debug_wait_for_hit", json!({"timeoutMs": 60000})).await;
    assert_eq!(hit["line"], GO_LINE, "{hit}");

    let servers = dlv_servers();
    assert_eq!(servers.len(), 1, "{servers:?}");
    let (pid, argv) = &servers[0];
    let listen = argv.iter().position(|a| a == "--listen").unwrap();
    assert_eq!(argv[listen + 1], "127.0.0.1:0", "{argv:?}");
    assert!(argv.iter().any(|a| a == "--only-same-user"), "{argv:?}");
    let listeners = tcp_listeners(*pid);
    assert_eq!(listeners.len(), 1, "{listeners:?}");
    assert!(
        listeners[0].starts_with("tcp 0100007F:"),
        "loopback only: {listeners:?}"
    );
    let end = data(&c, "debug_continue", json!({"timeoutMs": 30000})).await;
    assert_eq!(end["event"], "terminated", "{end}");
}

/// delve leaves the program writing to delve's own stdout, which the bridge threw away: a Go program's prints
/// were missing from `dap_logs`. They are read into the session's output now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_program_s_prints_are_in_dap_logs() {
    let ws = go_workspace("go-print");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let started = data(
        &c,
        "debug_start",
        json!({"config": go_config(&ws), "wait": true, "timeoutMs": 60000}),
    )
    .await;
    assert_eq!(started["stop"]["event"], "terminated", "{started}");
    let sid = started["sessionId"].as_str().unwrap();
    // The pipe may be read a moment after the end is reported.
    let deadline = std::time::Instant::now() + HANG_GUARD;
    loop {
        let logs = data(
            &c,
            "dap_logs",
            json!({"sessionId": sid, "category": "stdout"}),
        )
        .await;
        if logs["text"].as_str().unwrap().contains("x = 42\n") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{logs}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
