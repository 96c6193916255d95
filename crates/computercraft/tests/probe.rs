//! probe-computers end to end: real Lua clients in simulated computers, a real MCP client over HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use mcp_testkit::http_get;
use serde_json::json;
use std::time::Duration;
use support::ccsim::{self, SimConfig, SimKind};
use support::harness::{ok_of, start_bridge, test_config, text_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_computers() {
    let h = start_bridge(test_config()).await;
    let r = h.call("probe-computers", json!({})).await;
    assert_eq!(text_of(&r), "No computers connected.");
    assert_eq!(ok_of(&r)["answers"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pongs_timeouts_and_a_missing_label() {
    let mut cfg = test_config();
    // The silent computer's probe waits this long: short, as the others answer well within it.
    cfg.probe_timeout = Duration::from_secs(3);
    let h = start_bridge(cfg).await;
    let _a = h
        .link(h.computer(12, Some("base-turtle"), SimKind::Turtle))
        .await;
    let _b = h
        .link(h.computer(13, Some("miner-1"), SimKind::Computer))
        .await;
    let _c = h.link(h.computer(0, None, SimKind::Pocket)).await;
    // A computer that linked and then got stuck in a filtered pull: it never reads its link again.
    let mut silent = SimConfig::new(14, ccsim::temp_root("silent"));
    silent.label = Some("farm-turtle".into());
    silent.command = Some(format!(
        r#"local ws = assert(http.websocket("{}?id=14"))
        ws.send(textutils.serializeJSON({{type = "hello", protocol = 1, computerId = 14, computerLabel = "farm-turtle"}}))
        os.pullEvent("never")"#,
        h.link_url()
    ));
    let _d = h.link(silent).await;

    let r = h.call("probe-computers", json!({})).await;
    assert_eq!(
        text_of(&r),
        "pong from 0 (Label: nil)\npong from 12 (Label: base-turtle)\npong from 13 (Label: miner-1)\ntimeout from 14 (Label: farm-turtle)"
    );
    let out = ok_of(&r);
    assert_eq!(out["answers"][3]["status"], "timeout");
    assert_eq!(out["answers"][0]["label"], json!(null));

    let health: serde_json::Value = reqwest_get(&format!("http://{}/health", h.mcp_addr)).await;
    assert_eq!(health["ok"], true);
    assert_eq!(health["computers"], 4);
}

async fn reqwest_get(url: &str) -> serde_json::Value {
    let body = http_get(url).await;
    serde_json::from_str(&body).unwrap()
}
