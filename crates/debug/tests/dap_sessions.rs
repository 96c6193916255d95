//! Several debug sessions at once on the `dap` backend (issue 21 item 1), through a real MCP client with real
//! debuggers: each `debug_start` is a session of its own with an id, tools pick one by `sessionId` (else the
//! most recent live one, and say which), and a configured maximum is refused with a coded error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_debug::config::BackendChoice;
use serde_json::{Value, json};
use support::*;

fn slow() -> Value {
    json!({"launch": "slow"})
}

/// A second `debug_start` used to end the first silently: both must stay alive and addressable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_start_keeps_the_first_session() {
    let ws = workspace("two");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let a = data(&c, "debug_start", slow()).await;
    let b = data(&c, "debug_start", slow()).await;
    let (a, b) = (
        a["sessionId"].as_str().unwrap(),
        b["sessionId"].as_str().unwrap(),
    );
    assert_ne!(a, b);
    let threads = data(&c, "debug_threads", json!({"sessionId": a})).await;
    assert_eq!(threads["sessionId"], a, "{threads}");
    assert!(
        !threads["threads"].as_array().unwrap().is_empty(),
        "{threads}"
    );
    let threads = data(&c, "debug_threads", json!({})).await;
    assert_eq!(
        threads["sessionId"], b,
        "the most recent is the default: {threads}"
    );
}

/// Two sessions of one program, paused at the same breakpoint: each is resumed, inspected and read on its
/// own; the list says which is the default, and stopping one leaves the other the default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_pause_resume_and_print_independently() {
    let ws = workspace("indep");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    data(
        &c,
        "breakpoint_set",
        json!({"path": "target.py", "line": PY_LINE}),
    )
    .await;
    let a = data(&c, "debug_start", json!({"launch": "py", "wait": true})).await;
    let b = data(&c, "debug_start", json!({"launch": "py", "wait": true})).await;
    let (a, b) = (
        a["sessionId"].as_str().unwrap(),
        b["sessionId"].as_str().unwrap(),
    );
    for id in [a, b] {
        let v = data(
            &c,
            "debug_evaluate",
            json!({"expression": "a", "sessionId": id}),
        )
        .await;
        assert_eq!(
            (v["result"].as_str(), v["sessionId"].as_str()),
            (Some("40"), Some(id)),
            "{v}"
        );
    }
    let next = data(&c, "debug_continue", json!({"sessionId": a})).await;
    assert_eq!(
        (next["event"].as_str(), next["sessionId"].as_str()),
        (Some("stopped"), Some(a)),
        "{next}"
    );
    let v = data(
        &c,
        "debug_evaluate",
        json!({"expression": "a", "sessionId": a}),
    )
    .await;
    assert_eq!(v["result"], "42", "a's second call: {v}");
    let v = data(
        &c,
        "debug_evaluate",
        json!({"expression": "a", "sessionId": b}),
    )
    .await;
    assert_eq!(v["result"], "40", "b stays where it was: {v}");
    let logs_a = data(&c, "dap_logs", json!({"sessionId": a})).await;
    let logs_b = data(&c, "dap_logs", json!({"sessionId": b})).await;
    assert!(
        logs_a["text"].as_str().unwrap().contains("x = 42"),
        "{logs_a}"
    );
    assert!(
        !logs_b["text"].as_str().unwrap().contains("x = 42"),
        "{logs_b}"
    );

    let list = data(&c, "debug_list_sessions", json!({})).await;
    assert_eq!(list["live"], 2, "{list}");
    assert_eq!(list["default"], b, "{list}");
    let ids: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [a, b], "{list}");
    let stopped = data(&c, "debug_stop", json!({"sessionId": b})).await;
    assert_eq!(stopped["sessionId"], b, "{stopped}");
    let v = data(&c, "debug_evaluate", json!({"expression": "a"})).await;
    assert_eq!(
        (v["result"].as_str(), v["sessionId"].as_str()),
        (Some("42"), Some(a)),
        "the default is a again: {v}"
    );
    let (code, e) = support::code(&c, "debug_threads", json!({"sessionId": b})).await;
    assert_eq!(code, "E_NO_SESSION", "{e}");
    assert!(e["message"].as_str().unwrap().contains("ended"), "{e}");
    let (code, e) = support::code(&c, "debug_threads", json!({"sessionId": "dap-99"})).await;
    assert_eq!(code, "E_NO_SESSION", "{e}");
    assert_eq!(e["details"]["live"], json!([a]), "{e}");
    let logs_b = data(&c, "dap_logs", json!({"sessionId": b})).await;
    assert_eq!(
        logs_b["sessionId"], b,
        "an ended session's output stays readable: {logs_b}"
    );
}

/// Above `--debug-max-sessions`, `debug_start` is refused with a coded error naming the maximum; ending one makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_beyond_the_maximum_are_refused() {
    let ws = workspace("max");
    let mut a = args(&ws, BackendChoice::Dap);
    a.max_sessions = 2;
    let c = client(a).await;
    let first = data(&c, "debug_start", slow()).await;
    data(&c, "debug_start", slow()).await;
    let (code, e) = support::code(&c, "debug_start", slow()).await;
    assert_eq!(code, "E_TOO_MANY_SESSIONS", "{e}");
    assert_eq!(e["details"]["maxSessions"], 2, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("--debug-max-sessions"),
        "{e}"
    );
    let list = data(&c, "debug_list_sessions", json!({})).await;
    assert_eq!(
        (list["live"].as_u64(), list["maxSessions"].as_u64()),
        (Some(2), Some(2)),
        "{list}"
    );
    data(&c, "debug_stop", json!({"sessionId": first["sessionId"]})).await;
    data(&c, "debug_start", slow()).await;
}

/// Attach to a program under `python -m debugpy --listen`, stop at a breakpoint in it, inspect, then detach:
/// the program runs on to its end (exit 0, its last line printed), the session is over. Without
/// --debug-allow-launch-anywhere the attach is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_to_a_debugpy_listener_and_detach_leaving_it_running() {
    let ws = workspace("attach");
    std::fs::write(
        ws.join("server.py"),
        "import time\nfor i in range(30):\n    time.sleep(0.05)\n    beat = i\nprint('finished', beat, flush=True)\n",
    )
    .unwrap();
    let port = free_port();
    let mut program = tokio::process::Command::new(python())
        .args([
            "-m",
            "debugpy",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--wait-for-client",
        ])
        .arg(ws.join("server.py"))
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let address = format!("127.0.0.1:{port}");

    let refused = client(args(&ws, BackendChoice::Dap)).await;
    let (code, e) = support::code(&refused, "debug_attach", json!({"address": address})).await;
    assert_eq!(code, "E_LAUNCH_REFUSED", "attach needs the opt-in: {e}");
    assert_eq!(
        e["details"]["field"], "address",
        "names what the caller gave: {e}"
    );
    assert!(
        !e.to_string().contains("--debug-launch-allow"),
        "the allow-list does not open attaching, so the hint does not offer it: {e}"
    );
    let (code, e) = support::code(&refused, "debug_attach", json!({"address": "nowhere"})).await;
    assert_eq!(code, "E_INVALID_PARAMS", "{e}");
    assert_eq!(e["details"]["field"], "address", "{e}");

    let mut a = args(&ws, BackendChoice::Dap);
    a.allow_launch_anywhere = true;
    let c = client(a).await;
    data(
        &c,
        "breakpoint_set",
        json!({"path": "server.py", "line": 4}),
    )
    .await;
    // The listener may not be up yet: an attach that finds nobody fails and is tried again.
    let attached = attach_when_listening(&c, json!({"address": address, "wait": true})).await;
    assert_eq!(attached["stop"]["line"], 4, "{attached}");
    let id = attached["sessionId"].as_str().unwrap().to_owned();
    let v = data(&c, "debug_evaluate", json!({"expression": "i"})).await;
    assert_eq!(v["result"], "0", "{v}");
    let detached = data(&c, "debug_detach", json!({})).await;
    assert_eq!(
        (
            detached["detached"].as_bool(),
            detached["sessionId"].as_str()
        ),
        (Some(true), Some(id.as_str())),
        "{detached}"
    );
    let (code, _) = support::code(&c, "debug_threads", json!({"sessionId": id})).await;
    assert_eq!(code, "E_NO_SESSION");
    let out = tokio::time::timeout(HANG_GUARD, program.wait())
        .await
        .expect("the program runs to its end")
        .unwrap();
    assert!(out.success(), "{out}");
    let mut stdout = String::new();
    tokio::io::AsyncReadExt::read_to_string(program.stdout.as_mut().unwrap(), &mut stdout)
        .await
        .unwrap();
    assert!(
        stdout.contains("finished 29"),
        "not stopped again after the detach: {stdout}"
    );
}
