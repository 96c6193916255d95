//! A resume request the adapter refuses or never answers, on the `dap` backend through a real MCP client. Real
//! adapters rarely refuse a step, so the adapter here is a test double (`support/fake_dap.py`), started where
//! the bridge starts debugpy: `--debug-python` names a script that passes the `import debugpy` check and runs the
//! fake instead of `-m debugpy.adapter`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::{Value, json};
use support::*;

/// What `fake_dap.py` answers `next` and `stepIn` with (its `body.error.format`).
const REFUSAL: &str = "the fake adapter refuses to step here";

/// The variables reference of `point` (a structured local) in the current stop.
async fn point_reference(c: &mcp_testkit::Client) -> i64 {
    let vars = data(
        c,
        "debug_list_variables",
        json!({"scope": "local", "maxDepth": 1}),
    )
    .await;
    let locals = vars["scopes"][0]["variables"].as_array().unwrap();
    let point: &Value = locals.iter().find(|v| v["name"] == "point").unwrap();
    point["variablesReference"].as_i64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_step_leaves_the_session_paused_with_its_references() {
    let c = on_the_fake("refused", "").await;
    let reference = point_reference(&c).await;

    let (code, e) = support::code(&c, "debug_step_over", json!({"timeoutMs": 3000})).await;
    assert_eq!(code, "E_DAP_REQUEST_FAILED", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains(REFUSAL),
        "the adapter's own words: {e}"
    );

    let status = data(&c, "debug_status", json!({})).await;
    assert_eq!(
        (
            status["state"].as_str(),
            status["isPaused"].as_bool(),
            status["threadId"].as_i64(),
            status["reason"].as_str()
        ),
        (Some("paused"), Some(true), Some(1), Some("breakpoint")),
        "the stop from before the refused step: {status}"
    );
    assert_eq!(
        e["details"]["state"], "paused",
        "the error says so too: {e}"
    );
    assert!(e["hint"].as_str().unwrap().contains("still paused"), "{e}");
    let stack = data(&c, "debug_stack", json!({})).await;
    assert_eq!(stack["frames"][0]["name"], "add", "{stack}");
    let point = data(
        &c,
        "debug_get_variable",
        json!({"variablesReference": reference}),
    )
    .await;
    assert_eq!(
        point["variables"][0]["value"], "1",
        "a reference from before the refused step is still valid: {point}"
    );
    let hit = data(&c, "debug_wait_for_hit", json!({"timeoutMs": 1000})).await;
    assert_eq!(hit["line"], 3, "still paused: answered at once, {hit}");

    // A stop that came before the refusal is not undone: the references from the older stop are stale.
    let (code, e) = support::code(&c, "debug_step_into", json!({"timeoutMs": 3000})).await;
    assert_eq!(code, "E_DAP_REQUEST_FAILED", "{e}");
    let status = data(&c, "debug_status", json!({})).await;
    assert_eq!(
        (status["state"].as_str(), status["reason"].as_str()),
        (Some("paused"), Some("step")),
        "the newer stop stands: {status}"
    );
    let (code, e) = support::code(
        &c,
        "debug_get_variable",
        json!({"variablesReference": reference}),
    )
    .await;
    assert_eq!(code, "E_STALE_REFERENCE", "{e}");

    // The session still runs to its end.
    let end = data(&c, "debug_continue", json!({"timeoutMs": 5000})).await;
    assert_eq!(end["event"], "terminated", "{end}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_step_is_e_timeout_telling_to_check_debug_status() {
    let c = on_the_fake("unanswered", "").await;
    let (code, e) = support::code(&c, "debug_step_out", json!({"timeoutMs": 500})).await;
    assert_eq!(code, "E_TIMEOUT", "{e}");
    assert!(
        e["hint"].as_str().unwrap().contains("check debug_status"),
        "{e}"
    );
    let status = data(&c, "debug_status", json!({})).await;
    assert_eq!(
        status["state"], "running",
        "no answer: whether it resumed is unknown, so it is not claimed paused: {status}"
    );
}
