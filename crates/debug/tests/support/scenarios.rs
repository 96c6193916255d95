//! The debug bridge's acceptance criteria (the worked session in docs/debug.md) as scenarios over any
//! backend: the same calls on `dap` and on `vscode` (through `mcp-bridges debug host`).
#![allow(dead_code)]

use super::*;
use mcp_testkit::start_call;

/// Criteria 2 and 4: breakpoint → start → wait → stack → evaluate with the frame id → variables → set →
/// continue (the changed value is printed) → terminated, on Python.
pub async fn python_workflow(c: &Client, ws: &Path) {
    let bp = data(
        c,
        "breakpoint_set",
        json!({"path": "target.py", "line": PY_LINE}),
    )
    .await;
    let b = &bp["details"]["breakpoint"];
    assert_eq!(b["line"], PY_LINE);
    assert_eq!(b["pending"], true, "no session yet: queued, {bp}");
    assert_eq!(b["path"], ws.join("target.py").display().to_string());

    let started = data(c, "debug_start", json!({"launch": "py"})).await;
    assert_eq!(started["adapter"], "debugpy");
    let bound = &started["breakpoints"][0];
    assert_eq!(bound["verified"], true, "{started}");
    assert_eq!(bound["boundLine"], PY_LINE);

    let hit = data(c, "debug_wait_for_hit", json!({"timeoutMs": 20000})).await;
    assert_eq!(hit["event"], "stopped", "{hit}");
    assert_eq!(hit["line"], PY_LINE);
    assert_eq!(hit["reason"], "breakpoint");
    assert_eq!(hit["functionName"], "add");
    // Already paused: answers at once with the same stop.
    let again = data(c, "debug_wait_for_hit", json!({"timeoutMs": 1000})).await;
    assert_eq!(again["line"], PY_LINE);

    let stack = data(c, "debug_stack", json!({})).await;
    let frame_id = stack["frames"][0]["id"].as_i64().unwrap();
    assert_eq!(stack["frames"][0]["name"], "add");
    let eval = data(
        c,
        "debug_evaluate",
        json!({"expression": "total * 2", "frameId": frame_id}),
    )
    .await;
    assert_eq!(eval["result"], "84");

    let vars = data(c, "debug_list_variables", json!({"scope": "local"})).await;
    let locals = vars["scopes"][0]["variables"].as_array().unwrap();
    let value = |n: &str| {
        locals
            .iter()
            .find(|v| v["name"] == n)
            .map(|v| v["value"].clone())
    };
    assert_eq!(value("a"), Some(json!("40")), "{vars}");
    assert_eq!(value("b"), Some(json!("2")));
    assert_eq!(value("total"), Some(json!("42")));

    let set = data(
        c,
        "debug_set_variable",
        json!({"name": "total", "value": "100"}),
    )
    .await;
    assert_eq!(set["value"], "100");

    let next = data(c, "debug_continue", json!({})).await;
    assert_eq!(
        next["event"], "stopped",
        "the second add() call stops again: {next}"
    );
    let total = data(c, "debug_evaluate", json!({"expression": "total"})).await;
    assert_eq!(total["result"], "100", "x was 100 after the change");
    let end = data(c, "debug_continue", json!({"timeoutMs": 20000})).await;
    assert_eq!(end["event"], "terminated", "{end}");
    if tool_names(c).await.contains(&"dap_logs".to_owned()) {
        let logs = data(c, "dap_logs", json!({"count": 100})).await;
        assert!(logs["text"].as_str().unwrap().contains("y = 100"), "{logs}");
    }
    let status = data(c, "debug_status", json!({})).await;
    assert_eq!(status["isActive"], false, "{status}");
}

/// Criteria 5 and 8: without a session, E_NO_SESSION with a hint naming debug_start.
pub async fn errors_without_a_session(c: &Client) {
    for (tool, args) in [
        ("debug_evaluate", json!({"expression": "1"})),
        ("debug_continue", json!({})),
        ("debug_stack", json!({})),
    ] {
        let (code, e) = super::code(c, tool, args).await;
        assert_eq!(code, "E_NO_SESSION", "{tool}: {e}");
        assert!(e["hint"].as_str().unwrap().contains("debug_start"), "{e}");
    }
}

/// Criterion 9: a wait that sees no stop is E_TIMEOUT with a hint, not a success; the session is still there.
pub async fn wait_times_out(c: &Client) {
    data(c, "debug_start", json!({"launch": "slow"})).await;
    // The program never stops, so only the 500 ms deadline can end this wait (else the hang guard does).
    let (code, e) = super::code(c, "debug_wait_for_hit", json!({"timeoutMs": 500})).await;
    assert_eq!(code, "E_TIMEOUT", "{e}");
    assert!(e["hint"].as_str().unwrap().contains("timeoutMs"), "{e}");
    let (code, _) = super::code(c, "debug_step_over", json!({})).await;
    assert_eq!(code, "E_NOT_PAUSED");
    let status = data(c, "debug_status", json!({})).await;
    assert_eq!(status["state"], "running");
    data(c, "debug_stop", json!({})).await;
}

/// Criterion 10: an MCP cancellation stops the wait; the server answers the next call at once.
pub async fn cancel_a_long_wait(c: &Client) {
    data(c, "debug_start", json!({"launch": "slow"})).await;
    let handle = start_call(c, "debug_wait_for_hit", json!({"timeoutMs": 120_000})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    handle
        .cancel(Some("the agent moved on".into()))
        .await
        .unwrap();
    // Answered long before the wait's own 120 s deadline, which an ignored cancel would leave in the way.
    let status = tokio::time::timeout(super::HANG_GUARD, data(c, "debug_status", json!({})))
        .await
        .expect("the next call is answered while the cancelled wait would still run");
    assert_eq!(status["state"], "running");
    data(c, "debug_stop", json!({})).await;
}

/// A reference from before a resume is E_STALE_REFERENCE.
pub async fn stale_reference(c: &Client) {
    data(
        c,
        "breakpoint_set",
        json!({"path": "target.py", "line": PY_LINE}),
    )
    .await;
    data(
        c,
        "debug_start",
        json!({"launch": "py", "wait": true, "timeoutMs": 20000}),
    )
    .await;
    let scopes = data(c, "debug_list_variables", json!({"scope": "local"})).await;
    let reference = scopes["scopes"][0]["variablesReference"].as_i64().unwrap();
    data(
        c,
        "debug_get_variable",
        json!({"variablesReference": reference}),
    )
    .await;
    data(c, "debug_continue", json!({})).await;
    let (code, e) = super::code(
        c,
        "debug_get_variable",
        json!({"variablesReference": reference}),
    )
    .await;
    assert_eq!(code, "E_STALE_REFERENCE", "{e}");
    data(c, "debug_stop", json!({})).await;
    data(c, "breakpoint_clear_project", json!({})).await;
}

/// The C target on lldb-dap: the same steps, with lldb-dap's own answers.
pub async fn c_workflow(c: &Client) {
    data(c, "breakpoint_set", json!({"path": "t.c", "line": C_LINE})).await;
    let started = data(c, "debug_start", json!({"launch": "c"})).await;
    assert_eq!(started["adapter"], "lldb-dap");
    let hit = data(c, "debug_wait_for_hit", json!({"timeoutMs": 30000})).await;
    assert_eq!(hit["event"], "stopped", "{hit}");
    assert_eq!(hit["line"], C_LINE);
    let vars = data(c, "debug_list_variables", json!({"scope": "local"})).await;
    let locals = vars["scopes"][0]["variables"].as_array().unwrap();
    let value = |n: &str| {
        locals
            .iter()
            .find(|v| v["name"] == n)
            .map(|v| v["value"].clone())
    };
    assert_eq!(value("total"), Some(json!("42")), "{vars}");
    let eval = data(c, "debug_evaluate", json!({"expression": "total * 2"})).await;
    assert_eq!(eval["result"], "84", "{eval}");
    let set = data(
        c,
        "debug_set_variable",
        json!({"name": "total", "value": "100"}),
    )
    .await;
    assert_eq!(
        set["value"], "100",
        "lldb-dap 19's `result` is read as the value: {set}"
    );
    let end = data(c, "debug_continue", json!({"timeoutMs": 30000})).await;
    assert_eq!(end["event"], "terminated", "{end}");
    assert_eq!(end["exitCode"], 0);
    let logs = data(c, "dap_logs", json!({"count": 100})).await;
    assert!(logs["text"].as_str().unwrap().contains("y = 100"), "{logs}");
}
