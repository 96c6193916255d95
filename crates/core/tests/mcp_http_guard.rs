#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The MCP HTTP port's guard: `/health` and `/metrics` pass the same Host, Origin and token checks as `/mcp`
//! (issue 8 item 12), and idle or slow-loris connections cannot keep real calls out (issue 8 item 4).

use crate::support;

use bridge_core::net::ListenLimits;
use bridge_core::serve::HttpOptions;
use mcp_testkit::ok_of;
use serde_json::json;
use std::net::SocketAddr;
use std::time::Duration;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Status of one GET with exactly these headers.
async fn status(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> u16 {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut request = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    within("a response", stream.read_to_string(&mut response))
        .await
        .unwrap();
    response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn health_and_metrics_pass_the_same_checks_as_mcp() {
    let options = HttpOptions {
        token: Some("s3cret".into()),
        ..HttpOptions::default()
    };
    let server = start_http(test_bridge().bridge, options, vec![]).await;
    let addr = server.addr;
    let auth = ("Authorization", "Bearer s3cret");
    for path in ["/health", "/metrics"] {
        assert_eq!(status(addr, path, &[auth]).await, 200, "{path}");
        assert_eq!(status(addr, path, &[]).await, 401, "{path} without token");
        assert_eq!(
            status(addr, path, &[auth, ("Host", "evil.example")]).await,
            403,
            "{path} with a rebound Host"
        );
        assert_eq!(
            status(addr, path, &[auth, ("Origin", "http://evil.example")]).await,
            403,
            "{path} from a foreign page"
        );
    }
}

#[tokio::test]
async fn idle_and_slow_connections_do_not_keep_real_calls_out() {
    let options = HttpOptions {
        limits: ListenLimits {
            max_connections: 4,
            max_per_ip: 1024,
            handshake_timeout: Duration::from_millis(300),
            idle_timeout: Duration::from_millis(300),
        },
        ..HttpOptions::default()
    };
    let server = start_http(test_bridge().bridge, options, vec![]).await;
    let addr = server.addr;
    let idle = mcp_testkit::idle_connections(addr, 50).await;
    let slow: Vec<_> = (0..10)
        .map(|_| mcp_testkit::slow_loris(addr, b"POST /mcp HTTP/1.1\r\nX-Slow: "))
        .collect();

    let client = within("a client to connect", http_client(addr, Era::Modern)).await;
    let result = call(&client, "echo", json!({"text": "through"})).await;
    assert_eq!(ok_of(&result)["text"], "through");

    for mut stream in idle {
        let mut buf = [0u8; 64];
        let n = within("an idle connection to close", stream.read(&mut buf)).await;
        assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
    }
    for task in slow {
        within("a slow connection to close", task).await.unwrap();
    }
}
