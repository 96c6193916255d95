//! The HTTP transport's edges: Host and Origin checks, bearer token, /health, /metrics, graceful shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_core::serve::HttpOptions;
use serde_json::json;
use std::net::SocketAddr;
use std::time::Duration;
use support::*;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

async fn post_init(addr: SocketAddr, extra: &[(&str, &str)]) -> u16 {
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    headers.extend_from_slice(extra);
    raw(addr, "POST", "/mcp", &headers, INIT).await.0
}

#[tokio::test]
async fn foreign_origin_and_host_are_refused() {
    let server = start_http(test_bridge().bridge, HttpOptions::default(), vec![]).await;
    let addr = server.addr;
    assert_eq!(
        post_init(addr, &[]).await,
        200,
        "no Origin: a non-browser client"
    );
    assert_eq!(
        post_init(addr, &[("Origin", "http://localhost:5173")]).await,
        200,
        "a local page"
    );
    assert_eq!(
        post_init(addr, &[("Origin", "http://evil.example")]).await,
        403,
        "a foreign page"
    );
    assert_eq!(
        post_init(addr, &[("Origin", "null")]).await,
        403,
        "a sandboxed or file page"
    );
    assert_eq!(
        post_init(addr, &[("Host", "evil.example")]).await,
        403,
        "DNS rebinding"
    );
    assert_eq!(
        post_init(addr, &[("Host", &format!("localhost:{}", addr.port()))]).await,
        200
    );
}

#[tokio::test]
async fn extra_origins_can_be_allowed() {
    let options = HttpOptions {
        extra_origins: vec!["https://app.example".into()],
        ..HttpOptions::default()
    };
    let server = start_http(test_bridge().bridge, options, vec![]).await;
    assert_eq!(
        post_init(server.addr, &[("Origin", "https://app.example")]).await,
        200
    );
    assert_eq!(
        post_init(server.addr, &[("Origin", "https://other.example")]).await,
        403
    );
}

#[tokio::test]
async fn token_is_required_when_set() {
    let options = HttpOptions {
        token: Some("s3cret".into()),
        ..HttpOptions::default()
    };
    let server = start_http(test_bridge().bridge, options, vec![]).await;
    let addr = server.addr;
    assert_eq!(post_init(addr, &[]).await, 401);
    assert_eq!(
        post_init(addr, &[("Authorization", "Bearer wrong")]).await,
        401
    );
    assert_eq!(
        post_init(addr, &[("Authorization", "s3cret")]).await,
        401,
        "scheme is required"
    );
    assert_eq!(
        post_init(addr, &[("Authorization", "Bearer s3cret")]).await,
        200
    );
    // Issue 8 item 12: /health reveals the bridge's state, so it takes the same token as /mcp.
    let (status, _) = raw(addr, "GET", "/health", &[], "").await;
    assert_eq!(status, 401, "health needs the token too");
    let (status, _) = raw(
        addr,
        "GET",
        "/health",
        &[("Authorization", "Bearer s3cret")],
        "",
    )
    .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn health_and_metrics() {
    let tb = test_bridge();
    let server = start_http(tb.bridge.clone(), HttpOptions::default(), vec![]).await;
    let client = http_client(server.addr, Era::Modern).await;
    call(&client, "echo", json!({"text": "x"})).await;
    call(&client, "echo", json!({"bogus": 1})).await;
    let (status, body) = raw(server.addr, "GET", "/health", &[], "").await;
    assert_eq!(status, 200);
    let health: serde_json::Value = serde_json::from_str(body.trim()).unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["bridge"], "test");
    assert_eq!(health["version"], "1.2.3");
    assert_eq!(health["game_connected"], false, "bridge state is merged in");
    let (status, metrics) = raw(server.addr, "GET", "/metrics", &[], "").await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains(r#"mcp_tool_calls_total{bridge="test",tool="echo",outcome="ok"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            r#"mcp_tool_calls_total{bridge="test",tool="echo",outcome="E_INVALID_ARGUMENT"} 1"#
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("# TYPE mcp_tool_call_seconds summary"),
        "{metrics}"
    );
}

#[tokio::test]
async fn shutdown_lets_in_flight_calls_finish_then_stops() {
    for era in ERAS {
        let options = HttpOptions {
            shutdown_grace: Duration::from_secs(5),
            ..HttpOptions::default()
        };
        let tb = test_bridge();
        let server = start_http(
            tb.bridge.clone(),
            options,
            vec![("sleep".into(), Duration::from_secs(5))],
        )
        .await;
        let Client {
            service,
            mut progress,
            ..
        } = http_client(server.addr, era).await;
        let in_flight = tokio::spawn(async move {
            let r = call(&service, "sleep", json!({"ms": 400})).await;
            r.structured_content
        });
        within("the call to be running", progress.recv())
            .await
            .unwrap();
        server.shutdown.cancel();
        let result = within("the in-flight call", in_flight).await.unwrap();
        assert_eq!(
            result,
            Some(json!({"done": true})),
            "{era:?}: the call finished despite shutdown"
        );
        within("the server to stop", server.task)
            .await
            .unwrap()
            .unwrap();
        let refused = tokio::net::TcpStream::connect(server.addr).await;
        assert!(refused.is_err(), "{era:?}: no longer accepting");
    }
}
