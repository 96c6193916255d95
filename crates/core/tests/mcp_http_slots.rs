#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Connection slots of the MCP HTTP port cannot be hoarded (issue 25 item 3, issue 22 item 4): a connection
//! that sent one request and went idle held its slot for 120 s, even after a 401, and 1 030 of them kept
//! the next client out for 113 s. Now idle connections close after a short deadline, a refused request
//! closes its connection, one peer address holds a bounded number of slots, and `/metrics` counts every
//! connection closed, by reason, beside the limits.
//!
//! Real sockets on 127.0.0.1; every wait is on a condition, and the asserts name which connections closed
//! and why, never how fast. Not on a paused clock: with real sockets tokio advances a paused clock whenever
//! it waits for the kernel (a loopback `connect` in progress), so the deadlines passed during the set-up.

use crate::support;

use bridge_core::net::ListenLimits;
use bridge_core::serve::HttpOptions;
use mcp_testkit::{status_of, until_closed};
use std::net::SocketAddr;
use std::time::Duration;
use support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

const TOKEN: &str = "s3cret";

fn get(addr: SocketAddr, path: &str, token: Option<&str>, close: bool) -> String {
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n");
    if let Some(token) = token {
        request.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    if close {
        request.push_str("Connection: close\r\n");
    }
    request.push_str("\r\n");
    request
}

/// One request on a fresh connection that asks to be closed after it; the whole response.
async fn fetch(addr: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(get(addr, path, Some(TOKEN), true).as_bytes())
        .await
        .unwrap();
    until_closed(stream).await
}

/// The value of one series in `/metrics` (exact name and labels).
async fn metric(addr: SocketAddr, series: &str) -> f64 {
    series_value(&fetch(addr, "/metrics").await, series)
}

fn closed(reason: &str) -> String {
    format!("mcp_http_connections_closed_total{{reason=\"{reason}\"}}")
}

async fn start(limits: ListenLimits) -> HttpServer {
    let options = HttpOptions {
        token: Some(TOKEN.into()),
        limits,
        ..HttpOptions::default()
    };
    start_http(test_bridge().bridge, options, vec![]).await
}

/// A client without the token is answered 401 and its connection ends with the answer, under the default
/// limits (whose idle deadline alone would have kept it for seconds; 120 s before).
#[tokio::test]
async fn a_refused_request_closes_its_connection() {
    let server = start(ListenLimits::default()).await;
    let addr = server.addr;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    // Kept alive as far as the client is concerned: no `Connection: close` from it.
    stream
        .write_all(get(addr, "/mcp", None, false).as_bytes())
        .await
        .unwrap();
    let response = within("the 401 and the close", until_closed(stream)).await;
    assert_eq!(status_of(&response), 401, "{response}");
    assert!(
        response
            .to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n"),
        "{response}"
    );
    assert_eq!(metric(addr, &closed("refused")).await, 1.0);
    assert_eq!(metric(addr, &closed("idle_timeout")).await, 0.0);
}

/// An attack run's finding: the listener's deadlines end with the request head, so a body that never finished
/// (a byte every few seconds) held its connection for good, and 256 of them locked every local client out.
/// A body now has `body_timeout` to arrive (and more as it arrives): a stalled one is answered 408 and its
/// connection closed.
#[tokio::test]
async fn a_body_that_stops_arriving_is_answered_408_and_its_connection_closed() {
    let options = HttpOptions {
        token: Some(TOKEN.into()),
        body_timeout: Duration::from_millis(300),
        ..HttpOptions::default()
    };
    let server = start_http(test_bridge().bridge, options, vec![]).await;
    let addr = server.addr;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\""
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // Nothing more is sent, and the socket is kept open.
    let response = within("the 408 and the close", until_closed(stream)).await;
    assert_eq!(status_of(&response), 408, "{response}");
    assert!(response.contains("did not arrive in time"), "{response}");
}

/// The rest of that finding: while a stalled body is within its deadline its connection is busy, and 256 of
/// them, renewed every 10 s, still held the address's slots. A connection waiting a second for its body may
/// now be closed to make room, as one that sent no head may: the next client is answered.
#[tokio::test]
async fn connections_waiting_for_their_bodies_give_way_to_the_next_client() {
    let options = HttpOptions {
        token: Some(TOKEN.into()),
        limits: ListenLimits {
            max_per_ip: 4,
            ..ListenLimits::default()
        },
        ..HttpOptions::default()
    };
    let server = start_http(test_bridge().bridge, options, vec![]).await;
    let addr = server.addr;
    let mut stalled = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stalled.push(silent(stream));
    }
    // Past the second a waiting connection must have waited to be closed for room.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let answer = within("the next client's answer", fetch(addr, "/health")).await;
    assert_eq!(status_of(&answer), 200, "{answer}");
    let closed = within("a stalled connection closed", async {
        loop {
            if let Some(i) = stalled.iter().position(|t| t.is_finished()) {
                return stalled.swap_remove(i).await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        closed.is_empty() || status_of(&closed) == 400,
        "closed with nothing or a 400: {closed}"
    );
}

/// Reads what the server sends on `stream` until it closes it, in a task.
fn silent(stream: TcpStream) -> JoinHandle<String> {
    tokio::spawn(until_closed(stream))
}

/// The finding of issue 25: a thousand sockets hold the port (400 that send nothing, 300 that send one
/// request and idle, 300 refused with 401), more than the listener's slots, and a new client comes after
/// them all. It is answered, and every one of the thousand was closed by the server for its reason. The
/// idle deadline is the default one (it was 120 s: the first 256 held the port that long); the handshake
/// deadline is short so the silent ones pass quickly.
#[tokio::test]
async fn a_thousand_idle_sockets_then_a_new_client_is_answered() {
    let limits = ListenLimits {
        max_connections: 256,
        // All of them come from 127.0.0.1; the cap per address has its own test.
        max_per_ip: 4096,
        handshake_timeout: Duration::from_millis(300),
        ..ListenLimits::default()
    };
    let server = start(limits).await;
    let addr = server.addr;
    let mut answered = Vec::new();
    let mut refused = Vec::new();
    let mut quiet = Vec::new();
    // The ones that hold a slot the longest connect first, so they take the slots before the silent ones.
    for _ in 0..300 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(get(addr, "/health", Some(TOKEN), false).as_bytes())
            .await
            .unwrap();
        answered.push(silent(s));
    }
    for _ in 0..300 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(get(addr, "/health", None, false).as_bytes())
            .await
            .unwrap();
        refused.push(silent(s));
    }
    for _ in 0..400 {
        quiet.push(silent(TcpStream::connect(addr).await.unwrap()));
    }

    // Behind the first 256, which hold the slots until the idle deadline passes.
    let response = within("the new client to be answered", fetch(addr, "/health")).await;
    assert_eq!(status_of(&response), 200, "{response}");

    for task in answered {
        let response = within("an idle connection to be closed", task)
            .await
            .unwrap();
        assert_eq!(status_of(&response), 200, "{response}");
    }
    for task in refused {
        let response = within("a refused connection to be closed", task)
            .await
            .unwrap();
        assert_eq!(status_of(&response), 401, "{response}");
    }
    for task in quiet {
        let response = within("a silent connection to be closed", task)
            .await
            .unwrap();
        assert_eq!(response, "", "a silent connection gets no answer");
    }
    // Every one of the thousand is closed by now, so the counts are final. The 700 not refused were closed
    // by their deadline or, once silent or idle for a second, to make room for a newer client (the one
    // above, or a /metrics fetch here).
    let timed_out = metric(addr, &closed("handshake_timeout")).await
        + metric(addr, &closed("idle_timeout")).await;
    assert_eq!(timed_out + metric(addr, &closed("evicted")).await, 700.0);
    assert_eq!(metric(addr, &closed("refused")).await, 300.0);
    assert_eq!(metric(addr, &closed("per_ip_cap")).await, 0.0);
    assert_eq!(metric(addr, "mcp_http_connections_peak").await, 256.0);
}

/// One address holds at most `max_per_ip` connections; one more is closed at once and counted, the ones
/// it holds stay open, and a slot given back is taken again.
#[tokio::test]
async fn one_peer_address_holds_at_most_its_cap() {
    let limits = ListenLimits {
        max_per_ip: 4,
        ..ListenLimits::default()
    };
    let server = start(limits).await;
    let addr = server.addr;
    let mut held: Vec<_> = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(addr).await.unwrap());
    }
    let extra = TcpStream::connect(addr).await.unwrap();
    let response = within("the fifth connection to be closed", until_closed(extra)).await;
    assert_eq!(response, "", "closed at accept, without an answer");

    // The four are still open: a request on one of them is answered.
    let mut first = held.remove(0);
    first
        .write_all(get(addr, "/health", Some(TOKEN), true).as_bytes())
        .await
        .unwrap();
    let response = within("an answer on a held connection", until_closed(first)).await;
    assert_eq!(status_of(&response), 200, "{response}");

    // That one closed (Connection: close), so its slot is free again.
    let response = within("a new connection in the freed slot", async {
        loop {
            let response = fetch(addr, "/health").await;
            if !response.is_empty() {
                return response;
            }
            // The server may not have noticed the close yet; the slot comes back when it does.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(status_of(&response), 200, "{response}");
    drop(held);
    let per_ip = within("the metrics", async {
        loop {
            let text = fetch(addr, "/metrics").await;
            if !text.is_empty() {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let counted = per_ip
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{} ", closed("per_ip_cap"))))
        .unwrap()
        .trim()
        .parse::<u64>()
        .unwrap();
    assert!(counted >= 1, "{per_ip}");
    assert!(
        per_ip.contains("\nmcp_http_max_connections_per_ip 4\n"),
        "{per_ip}"
    );
}

/// An attack run's finding: a local program holding an address's every slot with sockets that say nothing
/// (all of loopback is one address) kept every other client of that address out, and as each timed out it
/// opened another. Past the cap, a new connection now closes the address's oldest one that has been silent for
/// a second, as at the listener's cap, and is served; a younger one is not closed (the test above).
#[tokio::test]
async fn an_addresss_silent_sockets_give_way_to_its_next_client() {
    let limits = ListenLimits {
        max_per_ip: 4,
        ..ListenLimits::default()
    };
    let server = start(limits).await;
    let addr = server.addr;
    let mut silent = Vec::new();
    for _ in 0..4 {
        silent.push(TcpStream::connect(addr).await.unwrap());
    }
    // Older than the second a connection may stay silent before it can be closed to make room; well inside
    // the 10 s handshake deadline, which would close them anyway.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let response = within("a request of a fifth client", fetch(addr, "/health")).await;
    assert_eq!(status_of(&response), 200, "served at once: {response:?}");
    let evicted = within("the metrics", async {
        loop {
            let text = fetch(addr, "/metrics").await;
            if !text.is_empty() {
                return series_value(&text, &closed("evicted"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(evicted >= 1.0, "{evicted}");
    drop(silent);
}

/// A bridge's link port (the computers' or the game's, served by `link::serve_with`) follows the same rules:
/// an upgrade refused for its token ends its connection, and the MCP server's `/metrics` of the same
/// process counts it under `link_listener_*{listener="<address>"}` beside the port's limits.
#[tokio::test]
async fn a_link_ports_refusals_close_and_show_in_the_mcp_metrics() {
    use bridge_core::link::{OriginPolicy, WsConfig, bind, serve_with, ws_router};
    let shutdown = tokio_util::sync::CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let mut cfg = WsConfig::new(OriginPolicy::any());
    cfg.token = Some("link-token".into());
    cfg.shutdown = shutdown.clone();
    let router = ws_router(cfg, "/ws", |_| {});
    let link = bind("127.0.0.1:0".parse().unwrap(), "test", "TEST_PORT")
        .await
        .unwrap();
    let link_addr = link.local_addr().unwrap();
    let limits = ListenLimits {
        max_connections: 16,
        ..ListenLimits::default()
    };
    tokio::spawn(serve_with(link, router, limits, shutdown.clone()));
    let server = start(ListenLimits::default()).await;

    let mut stream = TcpStream::connect(link_addr).await.unwrap();
    stream
        .write_all(
            format!(
                "GET /ws HTTP/1.1\r\nHost: {link_addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
                 Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
                 Authorization: Bearer wrong\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let response = within("the 401 and the close", until_closed(stream)).await;
    assert_eq!(status_of(&response), 401, "{response}");

    let listener = format!("listener=\"{link_addr}\"");
    assert_eq!(
        metric(
            server.addr,
            &format!("link_listener_connections_closed_total{{{listener},reason=\"refused\"}}")
        )
        .await,
        1.0
    );
    assert_eq!(
        metric(
            server.addr,
            &format!("link_listener_max_connections{{{listener}}}")
        )
        .await,
        16.0
    );
}

/// Limits whose deadlines never pass during a test: only making room can let a new client in.
fn no_deadlines(max_connections: usize) -> ListenLimits {
    ListenLimits {
        max_connections,
        max_per_ip: 4096,
        handshake_timeout: Duration::from_secs(3600),
        idle_timeout: Duration::from_secs(3600),
    }
}

/// The hostile run of stop 40: sockets that connect and send nothing held every slot until the handshake
/// deadline, and an attacker who reconnected as each one timed out kept every new client waiting about 8 s,
/// on every listener, before any token was checked. Now a new client at the cap closes the oldest
/// connection that has sent no request head for a second: with deadlines that never pass, the client is
/// answered and the oldest silent socket, only that one, is closed and counted as evicted.
#[tokio::test]
async fn at_the_cap_a_new_client_closes_the_oldest_silent_connection() {
    let server = start(no_deadlines(8)).await;
    let addr = server.addr;
    let mut quiet = Vec::new();
    // The kernel queues connections in order and the listener accepts them in that order: the first is the
    // oldest.
    for _ in 0..8 {
        quiet.push(silent(TcpStream::connect(addr).await.unwrap()));
    }
    let response = within("the new client to be answered", fetch(addr, "/health")).await;
    assert_eq!(status_of(&response), 200, "{response}");
    let first = quiet.remove(0);
    let response = within("the oldest silent socket to be closed", first)
        .await
        .unwrap();
    assert_eq!(response, "", "closed without an answer");
    assert!(
        quiet.iter().all(|task| !task.is_finished()),
        "only the oldest was closed"
    );
    assert!(metric(addr, &closed("evicted")).await >= 1.0);
}

/// A kept-alive connection waiting for its next request is closed to make room too, when no connection at
/// the cap is still silent; one with a request in flight never is (the next test's streams).
#[tokio::test]
async fn at_the_cap_a_new_client_closes_the_oldest_idle_kept_alive_connection() {
    let server = start(no_deadlines(4)).await;
    let addr = server.addr;
    let mut idle = Vec::new();
    for _ in 0..4 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(get(addr, "/health", Some(TOKEN), false).as_bytes())
            .await
            .unwrap();
        idle.push(silent(s));
    }
    let response = within("the new client to be answered", fetch(addr, "/health")).await;
    assert_eq!(status_of(&response), 200, "{response}");
    let first = idle.remove(0);
    let response = within("the oldest idle connection to be closed", first)
        .await
        .unwrap();
    assert_eq!(status_of(&response), 200, "it had its answer: {response}");
    assert!(metric(addr, &closed("evicted")).await >= 1.0);
}
