//! The debug bridge's acceptance criteria (the worked session in docs/debug.md) on the `dap` backend,
//! through a real MCP client, with real debuggers: debugpy (Python) and lldb-dap (C, built here with gcc -g).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_debug::config::BackendChoice;
use serde_json::json;
use std::time::Duration;
use support::scenarios;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_breakpoint_start_wait_inspect_set_continue() {
    let ws = workspace("py");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    scenarios::python_workflow(&c, &ws).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_session_errors_are_e_no_session_with_a_hint() {
    let ws = workspace("nosession");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    scenarios::errors_without_a_session(&c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_without_a_stop_is_e_timeout() {
    let ws = workspace("timeout");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    scenarios::wait_times_out(&c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_cancellation_stops_a_long_wait() {
    let ws = workspace("cancel");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    scenarios::cancel_a_long_wait(&c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_from_before_a_resume_is_stale() {
    let ws = workspace("stale");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    scenarios::stale_reference(&c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_on_lldb_dap_breakpoint_inspect_set_continue() {
    let ws = workspace("c");
    build_c(&ws);
    let c = client(args(&ws, BackendChoice::Dap)).await;
    scenarios::c_workflow(&c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_adapter_or_program_says_what_to_do() {
    let ws = workspace("missing");
    let mut a = args(&ws, BackendChoice::Dap);
    a.python = Some("/usr/bin/false".into());
    a.lldb_dap = Some(ws.join("no-such-lldb-dap"));
    let c = client(a).await;
    let (code, e) = support::code(&c, "debug_start", json!({"launch": "py"})).await;
    assert_eq!(code, "E_ADAPTER_NOT_FOUND", "{e}");
    assert!(
        e["hint"].as_str().unwrap().contains("pip install debugpy"),
        "{e}"
    );
    let (code, e) = support::code(&c, "debug_start", json!({"launch": "c"})).await;
    assert_eq!(code, "E_ADAPTER_NOT_FOUND");
    assert!(
        e["hint"]
            .as_str()
            .unwrap()
            .contains("apt-get install lldb-19"),
        "{e}"
    );
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let (code, e) = support::code(&c, "debug_start", json!({"config": {"type": "debugpy", "request": "launch", "program": "${workspaceFolder}/nope.py"}})).await;
    assert_eq!(code, "E_LAUNCH_FAILED", "{e}");
    let (code, e) = support::code(&c, "debug_start", json!({"launch": "nope"})).await;
    assert_eq!(code, "E_INVALID_PARAMS");
    assert!(
        e["hint"]
            .as_str()
            .unwrap()
            .contains("```launch-json\n\"py\"\n\"slow\"\n\"c\"\n```"),
        "{e}"
    );
    let (code, _) = support::code(
        &c,
        "breakpoint_set",
        json!({"path": "missing.py", "line": 1}),
    )
    .await;
    assert_eq!(code, "E_FILE_NOT_FOUND");
    let (code, _) = support::code(
        &c,
        "breakpoint_set",
        json!({"path": "target.py", "line": 999}),
    )
    .await;
    assert_eq!(code, "E_INVALID_LINE");
}

/// The journal tools VSC-Bridge keeps disabled: output, an uncaught exception (debugpy stops on it), search,
/// summary, steps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_tools_read_output_and_exceptions() {
    let ws = workspace("journal");
    std::fs::write(
        ws.join("boom.py"),
        "print('starting up')\nvalue = 41\nvalue += 1\nraise ValueError(f'bad value {value}')\n",
    )
    .unwrap();
    let c = client(args(&ws, BackendChoice::Dap)).await;
    data(&c, "breakpoint_set", json!({"path": "boom.py", "line": 2})).await;
    let config =
        json!({"type": "python", "request": "launch", "program": "${workspaceFolder}/boom.py"});
    data(
        &c,
        "debug_start",
        json!({"config": config, "wait": true, "timeoutMs": 20000}),
    )
    .await;
    let step = data(&c, "debug_step_over", json!({})).await;
    assert_eq!(
        (step["event"].as_str(), step["line"].as_u64()),
        (Some("stopped"), Some(3)),
        "{step}"
    );
    let stop = data(&c, "debug_continue", json!({})).await;
    assert_eq!(
        stop["reason"], "exception",
        "debugpy stops on the uncaught exception: {stop}"
    );
    let exceptions = data(&c, "dap_exceptions", json!({})).await;
    assert!(
        exceptions["exceptions"][0]["text"]
            .as_str()
            .unwrap()
            .contains("bad value 42"),
        "{exceptions}"
    );
    let found = data(&c, "dap_search", json!({"pattern": "STARTING"})).await;
    assert_eq!(found["total"], 1, "case-insensitive by default: {found}");
    let summary = data(&c, "dap_summary", json!({"compact": true})).await;
    assert!(
        summary["stops"].as_u64().unwrap() >= 3 && summary["exceptions"] == 1,
        "{summary}"
    );
    data(&c, "debug_stop", json!({})).await;
    let logs = data(&c, "dap_logs", json!({"category": "stdout"})).await;
    assert!(
        logs["text"].as_str().unwrap().contains("starting up"),
        "the journal outlives the session: {logs}"
    );
}

/// Breakpoints set while the program runs bind at once; clearing a file clears it in the debugger too; a restart
/// keeps the breakpoints and stops at them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breakpoints_during_a_session_clear_and_restart() {
    let ws = workspace("bps");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    data(
        &c,
        "breakpoint_set",
        json!({"path": "target.py", "line": PY_LINE}),
    )
    .await;
    data(
        &c,
        "debug_start",
        json!({"launch": "py", "wait": true, "timeoutMs": 20000}),
    )
    .await;
    let live = data(
        &c,
        "breakpoint_set",
        json!({"path": "target.py", "line": 9, "condition": "y > 0"}),
    )
    .await;
    let b = &live["details"]["breakpoint"];
    assert_eq!(
        (
            b["verified"].as_bool(),
            b["boundLine"].as_u64(),
            b.get("pending")
        ),
        (Some(true), Some(9), None),
        "{live}"
    );
    assert_eq!(data(&c, "breakpoint_list", json!({})).await["total"], 2);
    let restarted = data(&c, "debug_restart", json!({})).await;
    assert_eq!(restarted["details"]["previous"], "dap-1");
    let hit = data(&c, "debug_wait_for_hit", json!({"timeoutMs": 20000})).await;
    assert_eq!(
        (hit["line"].as_u64(), hit["sessionId"].as_str()),
        (Some(PY_LINE), Some("dap-2")),
        "{hit}"
    );
    let cleared = data(&c, "breakpoint_clear_file", json!({"path": "target.py"})).await;
    assert_eq!(cleared["details"]["cleared"], 2);
    let end = data(&c, "debug_continue", json!({"timeoutMs": 20000})).await;
    assert_eq!(
        end["event"], "terminated",
        "no breakpoint left in the debugger: {end}"
    );
    assert_eq!(data(&c, "breakpoint_list", json!({})).await["total"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_and_restart_are_idempotent_after_the_program_ended() {
    let ws = workspace("idem");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    data(&c, "debug_start", json!({"launch": "py"})).await;
    let t = std::time::Instant::now();
    while data(&c, "debug_status", json!({})).await["isActive"] == true {
        assert!(t.elapsed() < support::HANG_GUARD, "target.py ends");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first = data(&c, "debug_stop", json!({})).await;
    assert_eq!(first["details"]["stopped"], true, "{first}");
    let again = data(&c, "debug_stop", json!({})).await;
    assert_eq!(again["details"]["stopped"], true, "{again}");
    let restarted = data(&c, "debug_restart", json!({})).await;
    assert_eq!(restarted["details"]["previous"], "dap-1", "{restarted}");
    data(&c, "debug_stop", json!({})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_variables_pages_a_10000_element_list() {
    let ws = workspace("pages");
    std::fs::write(
        ws.join("big.py"),
        "def main():\n    xs = list(range(10000))\n    rows = [{'i': i} for i in range(200)]\n    print(len(xs), len(rows))\n\n\nmain()\n",
    )
    .unwrap();
    let c = client(args(&ws, BackendChoice::Dap)).await;
    data(&c, "breakpoint_set", json!({"path": "big.py", "line": 4})).await;
    data(
        &c,
        "debug_start",
        json!({"config": {"type": "debugpy", "request": "launch", "program": "${workspaceFolder}/big.py"},
            "wait": true, "timeoutMs": 30000}),
    )
    .await;
    let t = std::time::Instant::now();
    let listed = data(&c, "debug_list_variables", json!({"scope": "local"})).await;
    eprintln!("list_variables on 10 000 elements: {:?}", t.elapsed());
    let vars = listed["scopes"][0]["variables"].as_array().unwrap();
    let xs = vars.iter().find(|v| v["name"] == "xs").expect("xs listed");
    assert!(xs.get("children").is_none(), "one level by default: {xs}");
    assert!(xs["variablesReference"].as_i64().unwrap() > 0);
    let deep = data(
        &c,
        "debug_list_variables",
        json!({"scope": "local", "maxDepth": 2}),
    )
    .await;
    let xs = deep["scopes"][0]["variables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "xs")
        .unwrap()
        .clone();
    let children = xs["children"].as_array().unwrap();
    assert!(
        children.len() <= 50,
        "{} children on one page",
        children.len()
    );
    // debugpy itself shows a list's first 100 elements (plus its groups): that is the total it gives.
    assert!(xs["total"].as_u64().unwrap() > 50, "{xs}");
    assert_eq!(xs["more"], true, "{xs}");
    let t = std::time::Instant::now();
    // The next page of the list itself, by its reference.
    let page = data(
        &c,
        "debug_get_variable",
        json!({"variablesReference": xs["variablesReference"], "start": 50, "count": 10}),
    )
    .await;
    eprintln!("get_variable page: {:?}", t.elapsed());
    assert_eq!(page["variables"].as_array().unwrap().len(), 10, "{page}");
    // debugpy lists its two groups first, then elements named 0000, 0001, ...
    assert_eq!(page["variables"][0]["name"], "0048", "{page}");
    // A smaller page and a byte cap.
    let small = data(
        &c,
        "debug_list_variables",
        json!({"scope": "local", "count": 5, "maxDepth": 3, "maxBytes": 2048}),
    )
    .await;
    assert_eq!(small["truncated"], true, "{small}");
    assert!(
        small.to_string().len() < 4096,
        "{}",
        small.to_string().len()
    );
    data(&c, "debug_stop", json!({})).await;
}

/// Pids of this process's children whose command line mentions `needle`.
fn children_running(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let (state, ppid) = (fields[0], fields[1].parse::<u32>().unwrap_or(0));
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if ppid == me && state != "Z" && String::from_utf8_lossy(&cmd).contains(needle) {
            found.push(pid);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adapter_is_reaped_when_the_program_ends() {
    let ws = workspace("reap");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    data(&c, "debug_start", json!({"launch": "py"})).await;
    assert!(!children_running("debugpy").is_empty(), "the adapter runs");
    let t = std::time::Instant::now();
    while data(&c, "debug_status", json!({})).await["isActive"] == true {
        assert!(t.elapsed() < support::HANG_GUARD, "target.py ends");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let t = std::time::Instant::now();
    while !children_running("debugpy").is_empty() {
        assert!(
            t.elapsed() < support::HANG_GUARD,
            "debugpy's adapter is still running after the program ended: {:?}",
            children_running("debugpy")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // What the program printed stays readable after the adapter is gone.
    let logs = data(&c, "dap_logs", json!({})).await;
    assert!(logs.to_string().contains("x = 42"), "{logs}");
}
