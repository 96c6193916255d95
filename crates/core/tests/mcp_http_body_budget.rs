#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The request bodies the MCP HTTP port holds at once are bounded in bytes, not only each one (the hostile run
//! of stop 40: 250 concurrent bodies of 4 MB, each under the 4 MiB limit and each answered 400, took the
//! server to 1.4 GB). A request whose body does not fit what the others hold is refused at once with a 503
//! that names the limit, and closes its connection; once the others are done it fits again. `/metrics`
//! shows what is held beside the limit.

use crate::support;

use bridge_core::serve::HttpOptions;
use mcp_testkit::{status_of, until_closed};
use std::net::SocketAddr;
use std::time::Duration;
use support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const BODY: usize = 60_000;

/// The head of a POST to `/mcp` announcing `BODY` bytes, and `sent` of them.
async fn post_part(addr: SocketAddr, sent: usize) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {BODY}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&vec![b' '; sent]).await.unwrap();
    stream
}

async fn metric(addr: SocketAddr, series: &str) -> f64 {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    series_value(&until_closed(stream).await, series)
}

async fn held_becomes(addr: SocketAddr, bytes: u64) {
    within("the bodies held to be counted", async {
        while metric(addr, "mcp_http_pending_request_bytes").await != bytes as f64 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn bodies_held_at_once_are_bounded_in_bytes_and_the_refusal_names_the_limit() {
    let options = HttpOptions {
        max_request_bytes: 65_536,
        // Two bodies of 60 000 bytes fit, a third does not.
        max_pending_request_bytes: 131_072,
        ..HttpOptions::default()
    };
    let server = start_http(test_bridge().bridge, options, vec![]).await;
    let addr = server.addr;
    assert_eq!(
        metric(addr, "mcp_http_max_pending_request_bytes").await,
        131_072.0
    );

    let first = post_part(addr, 10).await;
    let second = post_part(addr, 10).await;
    held_becomes(addr, 2 * BODY as u64).await;

    let third = post_part(addr, 10).await;
    let response = within("the third to be refused", until_closed(third)).await;
    assert_eq!(status_of(&response), 503, "{response}");
    assert!(
        response.contains("MCP_MAX_PENDING_REQUEST_BYTES") && response.contains("131072"),
        "names the limit: {response}"
    );
    assert!(
        response.to_ascii_lowercase().contains("connection: close"),
        "{response}"
    );

    // One sender gives up: what its body held is given back, and a new body fits again.
    drop(first);
    held_becomes(addr, BODY as u64).await;
    let fourth = post_part(addr, BODY).await;
    let response = within("the fourth to be answered", until_closed(fourth)).await;
    assert_ne!(status_of(&response), 503, "{response}");
    assert_ne!(status_of(&response), 0, "answered: {response}");
    drop(second);
    held_becomes(addr, 0).await;
}
