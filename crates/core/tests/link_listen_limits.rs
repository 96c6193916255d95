#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The listener's connection cap and deadlines (issue 8 item 4): idle and slow-loris connections are closed,
//! a full listener makes new clients wait instead of failing, and real requests and links still get through.
//! Real sockets on 127.0.0.1:0 with small configured deadlines; every wait is on a condition.

use bridge_core::link::{ListenLimits, OriginPolicy, WsConfig, bind, serve_with, ws_router};
use bridge_core::net::{CloseReason, GuardedListener, ListenStats};
use futures::{SinkExt, StreamExt};
use mcp_testkit::{http_get, idle_connections, slow_loris, within};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

const LIMITS: ListenLimits = ListenLimits {
    max_connections: 8,
    // Every test client is on 127.0.0.1: the cap per address must not be the one tested here.
    max_per_ip: 1024,
    handshake_timeout: Duration::from_millis(300),
    idle_timeout: Duration::from_millis(300),
};

struct Server {
    addr: SocketAddr,
    stats: Arc<ListenStats>,
    links: mpsc::UnboundedReceiver<bridge_core::link::WsConnection>,
    _shutdown: tokio_util::sync::DropGuard,
}

async fn start(limits: ListenLimits) -> Server {
    let shutdown = CancellationToken::new();
    let (tx, links) = mpsc::unbounded_channel();
    let mut cfg = WsConfig::new(OriginPolicy::any());
    cfg.shutdown = shutdown.clone();
    cfg.ping_interval = Duration::ZERO;
    let router = ws_router(cfg, "/ws", move |c| {
        let _ = tx.send(c);
    })
    .route("/", axum::routing::get(|| async { "ok" }));
    let listener = bind("127.0.0.1:0".parse().unwrap(), "test", "TEST_PORT")
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let guarded = GuardedListener::new(listener, limits);
    let stats = guarded.stats();
    let token = shutdown.clone();
    tokio::spawn(bridge_core::net::serve_until(guarded, router, token));
    Server {
        addr,
        stats,
        links,
        _shutdown: shutdown.drop_guard(),
    }
}

/// Waits until the server closes `stream` (EOF or reset), however long the server's deadline is.
async fn closed_by_server(mut stream: TcpStream) {
    let mut buf = [0u8; 256];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// The attack of issue 8 item 4: 1 000 idle connections and 100 slow-loris clients.
#[tokio::test]
async fn idle_and_slow_loris_connections_cannot_pin_the_listener() {
    let limits = ListenLimits {
        max_connections: 64,
        handshake_timeout: Duration::from_millis(200),
        ..LIMITS
    };
    let srv = start(limits).await;
    let idle = idle_connections(srv.addr, 1000).await;
    let loris: Vec<_> = (0..100)
        .map(|_| slow_loris(srv.addr, b"GET / HTTP/1.1\r\nHost: localhost\r\nX-Slow: "))
        .collect();

    // A real request queues behind them all and is still served once the deadlines free the slots.
    let body = within("a real request", http_get(&format!("http://{}/", srv.addr))).await;
    assert!(body.ends_with("ok"), "{body}");

    for stream in idle {
        within("an idle connection to be closed", closed_by_server(stream)).await;
    }
    for task in loris {
        within("a slow-loris connection to be closed", task)
            .await
            .unwrap();
    }
    assert_eq!(
        srv.stats.peak(),
        limits.max_connections,
        "the cap was reached and held"
    );
    // Each of the 1 100 was closed by the server: its deadline passed, or it was the oldest silent one when a
    // newer client came at the cap.
    let evicted = srv.stats.closed(CloseReason::Evicted);
    assert!(
        srv.stats.timed_out() + evicted >= 1100,
        "timed out: {}, evicted: {evicted}",
        srv.stats.timed_out()
    );
}

#[tokio::test]
async fn a_kept_alive_connection_is_closed_when_idle_after_its_response() {
    let srv = start(LIMITS).await;
    let mut stream = TcpStream::connect(srv.addr).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    while !String::from_utf8_lossy(&got).ends_with("ok") {
        let n = within("the response", stream.read(&mut buf)).await.unwrap();
        assert!(n > 0, "closed before the response");
        got.extend_from_slice(&buf[..n]);
    }
    within("the idle deadline", closed_by_server(stream)).await;
    assert_eq!(srv.stats.timed_out(), 1);
}

#[tokio::test]
async fn a_websocket_link_outlives_the_deadlines_and_holds_its_slot() {
    let mut srv = start(ListenLimits {
        max_connections: 2,
        ..LIMITS
    })
    .await;
    let (mut client, _) = tokio_tungstenite::connect_async(format!("ws://{}/ws", srv.addr))
        .await
        .unwrap();
    let mut link = within("the link", srv.links.recv()).await.unwrap();

    // Two handshake deadlines pass while an idle HTTP connection is opened and closed by the server.
    let idle = TcpStream::connect(srv.addr).await.unwrap();
    within("the idle connection to be closed", closed_by_server(idle)).await;
    let idle = TcpStream::connect(srv.addr).await.unwrap();
    within("the idle connection to be closed", closed_by_server(idle)).await;

    client.send(Message::text("still here")).await.unwrap();
    assert_eq!(
        within("a frame", link.incoming.recv()).await.as_deref(),
        Some("still here")
    );
    assert_eq!(
        srv.stats.timed_out(),
        2,
        "only the idle connections timed out"
    );
    assert_eq!(srv.stats.open(), 1, "the link holds one slot");
    drop(client.close(None).await);
    let _ = client.next().await;
}

#[tokio::test]
async fn serve_with_applies_the_limits_to_link_listeners() {
    let listener = bind("127.0.0.1:0".parse().unwrap(), "test", "TEST_PORT")
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let router = axum::Router::new().route("/", axum::routing::get(|| async { "ok" }));
    tokio::spawn(serve_with(listener, router, LIMITS, shutdown.clone()));
    let idle = TcpStream::connect(addr).await.unwrap();
    within("the handshake deadline", closed_by_server(idle)).await;
    let body = within("a real request", http_get(&format!("http://{addr}/"))).await;
    assert!(body.ends_with("ok"), "{body}");
    shutdown.cancel();
}
