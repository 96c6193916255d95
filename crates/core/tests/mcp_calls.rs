//! The life of one call: timeout, cancellation, progress.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_core::serve::HttpOptions;
use mcp_testkit::start_call;
use serde_json::json;
use std::time::Duration;
use support::*;

#[tokio::test]
async fn a_call_past_its_timeout_is_e_timeout_and_its_handler_is_cancelled() {
    for era in ERAS {
        let mut tb = test_bridge();
        let client = stdio_client(tb.bridge.clone(), era, vec![]).await;
        // `sleep` declares a 400 ms timeout.
        let r = call(&client, "sleep", json!({"ms": 5000})).await;
        let e = error_of(&r);
        assert_eq!(e["code"], "E_TIMEOUT", "{era:?}");
        assert_eq!(e["details"]["timeout_ms"], 400, "{era:?}");
        assert!(
            e["hint"]
                .as_str()
                .unwrap()
                .contains("--tool-timeout sleep="),
            "{era:?}"
        );
        within("the handler to be stopped", tb.cancelled.recv())
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn user_timeout_overrides_the_tool_default() {
    let tb = test_bridge();
    let client = stdio_client(
        tb.bridge.clone(),
        Era::Legacy,
        vec![("sleep".into(), Duration::from_secs(5))],
    )
    .await;
    let r = call(&client, "sleep", json!({"ms": 600})).await;
    assert_eq!(
        r.is_error,
        Some(false),
        "600 ms fits in the overridden 5 s: {r:?}"
    );
    let server = start_http(
        test_bridge().bridge,
        HttpOptions::default(),
        vec![("sleep".into(), Duration::from_millis(100))],
    )
    .await;
    let client = http_client(server.addr, Era::Modern).await;
    let r = call(&client, "sleep", json!({"ms": 300})).await;
    assert_eq!(error_of(&r)["details"]["timeout_ms"], 100);
}

/// The tool's limit is far beyond what the test waits for, so only cancellation can stop the handler in time:
/// if cancellation breaks, this fails instead of passing through the timeout.
#[tokio::test]
async fn client_cancellation_reaches_the_handler() {
    let long = vec![("sleep".to_owned(), Duration::from_secs(3_000))];
    for era in ERAS {
        for transport in ["stdio", "http"] {
            let mut tb = test_bridge();
            let server = start_http(tb.bridge.clone(), HttpOptions::default(), long.clone()).await;
            let mut client = if transport == "http" {
                http_client(server.addr, era).await
            } else {
                stdio_client(tb.bridge.clone(), era, long.clone()).await
            };
            let handle = start_call(&client, "sleep", json!({"ms": 3_000_000})).await;
            within("the call to be running", client.progress.recv())
                .await
                .unwrap();
            handle
                .cancel(Some("user changed their mind".into()))
                .await
                .unwrap();
            within("the handler to be stopped", tb.cancelled.recv())
                .await
                .unwrap();
            if transport == "http" {
                let cancelled =
                    r#"mcp_tool_calls_total{bridge="test",tool="sleep",outcome="E_CANCELLED"} 1"#;
                within("the call to be counted as cancelled", async {
                    while !raw(server.addr, "GET", "/metrics", &[], "")
                        .await
                        .1
                        .contains(cancelled)
                    {
                        tokio::task::yield_now().await;
                    }
                })
                .await;
            }
        }
    }
}

#[tokio::test]
async fn progress_is_reported_in_order() {
    for era in ERAS {
        let tb = test_bridge();
        let mut client = stdio_client(tb.bridge.clone(), era, vec![]).await;
        let r = call(&client, "sleep", json!({"ms": 200})).await;
        assert_eq!(r.is_error, Some(false), "{era:?}");
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(within("progress", client.progress.recv()).await.unwrap());
        }
        assert_eq!(seen, vec![1.0, 2.0, 3.0, 4.0], "{era:?}");
        assert!(
            client.progress.try_recv().is_err(),
            "{era:?}: no more than four"
        );
    }
}
