#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every transport the bridge dials carries requests end to end: TCP, a Unix socket, a child process's stdio
//! and a WebSocket; `redial` reconnects a dropped link with backoff. The far ends are real: a TCP or Unix
//! listener in the test, `cat` as the child (it echoes each request back, which our peer reads as the answer
//! with the same id), and the core's own WebSocket listener.

// The link tests' peer helpers live with bridge-link's own tests.
#[path = "../../link/tests/support/mod.rs"]
mod link_support;

use bridge_core::link::dial::{self, WsDial};
use bridge_core::link::stream::StreamConfig;
use bridge_core::link::{
    Backoff, FrameCodec, Framing, LinkError, OriginPolicy, WsConfig, bind, redial, serve, ws_router,
};
use futures::StreamExt;
use link_support::*;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;

/// Answers every request on `io` with its method, in `framing`.
async fn answer_all<T>(io: T, framing: Framing)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut far = Framed::new(io, FrameCodec::new(framing, 1 << 20));
    while let Some(Ok(text)) = far.next().await {
        let r: Value = serde_json::from_str(&text).unwrap();
        answer(&mut far, &r).await;
    }
}

async fn ask(conn: bridge_core::link::Connection, method: &str) -> Value {
    let (peer, _served) = serve_peer(conn);
    peer.request(|id| request(id, method), Duration::from_secs(20))
        .await
        .unwrap()
}

#[tokio::test]
async fn tcp_in_every_framing() {
    for framing in FRAMINGS {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            answer_all(tcp, framing).await;
        });
        let conn = dial::tcp(
            &addr.to_string(),
            StreamConfig::new(framing),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        assert_eq!(within("an answer", ask(conn, "tcp")).await["result"], "tcp");
    }
}

#[tokio::test]
async fn tcp_refused_names_the_target() {
    // Bind and drop: the port is then (almost certainly) closed.
    let addr = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let err = dial::tcp(
        &addr.to_string(),
        StreamConfig::new(Framing::Lines),
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, LinkError::Connect { target, .. } if *target == addr.to_string()),
        "{err:?}"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn unix_socket() {
    let dir = std::env::temp_dir().join(format!("link-unix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("peer.sock");
    let _ = std::fs::remove_file(&path);
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        answer_all(socket, Framing::LengthPrefixed).await;
    });
    let conn = dial::unix(
        &path,
        StreamConfig::new(Framing::LengthPrefixed),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        within("an answer", ask(conn, "unix")).await["result"],
        "unix"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(unix)]
#[tokio::test]
async fn child_process_stdio_and_its_exit() {
    for framing in FRAMINGS {
        let conn = dial::child(
            tokio::process::Command::new("cat"),
            StreamConfig::new(framing),
            &CancellationToken::new(),
        )
        .unwrap();
        let (peer, served) = serve_peer(conn);
        let echoed = within(
            "the echo",
            peer.request(|id| request(id, "child"), Duration::from_secs(20)),
        )
        .await
        .unwrap();
        assert_eq!(echoed["method"], "child", "{framing:?}");
        // Closing the link closes cat's stdin; it exits and the link's end is recorded.
        peer.close("done");
        let reason = within("the link's end", served).await.unwrap();
        assert!(reason.to_string().contains("done"), "{reason}");
    }
    let err = dial::child(
        tokio::process::Command::new("/nonexistent/program"),
        StreamConfig::new(Framing::Lines),
        &CancellationToken::new(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("/nonexistent/program"), "{err}");
}

/// The core's WebSocket listener answering every text frame with its method; counts links. With
/// `one_answer_per_link` it closes each link after its first answer.
async fn ws_server(
    shutdown: &CancellationToken,
    one_answer_per_link: bool,
) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let links = Arc::new(AtomicUsize::new(0));
    let mut cfg = WsConfig::new(OriginPolicy::any());
    cfg.shutdown = shutdown.clone();
    let counter = Arc::clone(&links);
    let router = ws_router(cfg, "/", move |conn| {
        counter.fetch_add(1, Ordering::SeqCst);
        let mut incoming = conn.incoming;
        let sender = conn.sender;
        tokio::spawn(async move {
            while let Some(text) = incoming.recv().await {
                let r: Value = serde_json::from_str(&text).unwrap();
                let reply = serde_json::json!({"id": r["id"], "result": r["method"]});
                if sender.send_text(reply.to_string()).await.is_err() {
                    return;
                }
                if one_answer_per_link {
                    sender.close("one answer per link");
                }
            }
        });
    });
    let listener = bind("127.0.0.1:0".parse().unwrap(), "test", "TEST_PORT")
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, router, shutdown.clone()));
    (addr, links)
}

#[tokio::test]
async fn websocket_dial() {
    let shutdown = CancellationToken::new();
    let (addr, _) = ws_server(&shutdown, false).await;
    let conn = dial::websocket(
        &WsDial::new(format!("ws://{addr}/")),
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        within("an answer", ask(conn.into_connection(), "ws")).await["result"],
        "ws"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn redial_reconnects_after_the_link_drops() {
    let server = CancellationToken::new();
    let (addr, links) = ws_server(&server, true).await;
    let stop = CancellationToken::new();
    let (answers_tx, mut answers) = mpsc::unbounded_channel();
    let cfg = WsDial::new(format!("ws://{addr}/"));
    let dial_stop = stop.clone();
    let redialled = tokio::spawn(redial(
        move || {
            let cfg = cfg.clone();
            let stop = dial_stop.clone();
            async move {
                dial::websocket(&cfg, &stop)
                    .await
                    .map(|c| c.into_connection())
            }
        },
        move |conn| {
            let answers_tx = answers_tx.clone();
            async move {
                let (peer, served) = serve_peer(conn);
                let answer = peer
                    .request(|id| request(id, "hi"), Duration::from_secs(20))
                    .await;
                let _ = answers_tx.send(answer.map(|a| a["result"].clone()));
                // The server closes the link after its answer; redial then connects again.
                let _ = served.await;
            }
        },
        Backoff::new(Duration::from_millis(10), Duration::from_millis(100)),
        Duration::from_secs(3600),
        stop.clone(),
    ));
    for round in 0..3 {
        let answer = within("an answer", answers.recv()).await.unwrap();
        assert_eq!(answer.unwrap(), "hi", "round {round}");
    }
    assert!(links.load(Ordering::SeqCst) >= 3);
    stop.cancel();
    within("redial to stop", redialled).await.unwrap();
    server.cancel();
}

#[tokio::test]
async fn websocket_dial_sends_its_bearer_token_in_the_upgrade_header() {
    let shutdown = CancellationToken::new();
    let mut cfg = WsConfig::new(OriginPolicy::any());
    cfg.token = Some("s3cret".to_owned());
    cfg.shutdown = shutdown.clone();
    let router = ws_router(cfg, "/", |conn| {
        tokio::spawn(async move {
            let mut incoming = conn.incoming;
            while let Some(text) = incoming.recv().await {
                let r: Value = serde_json::from_str(&text).unwrap();
                let reply = serde_json::json!({"id": r["id"], "result": r["method"]});
                let _ = conn.sender.send_text(reply.to_string()).await;
            }
        });
    });
    let listener = bind("127.0.0.1:0".parse().unwrap(), "test", "TEST_PORT")
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, router, shutdown.clone()));
    let mut dial_cfg = WsDial::new(format!("ws://{addr}/"));
    let refused = dial::websocket(&dial_cfg, &CancellationToken::new()).await;
    assert!(refused.is_err(), "no token must be refused");
    dial_cfg.bearer = Some("s3cret".to_owned());
    let conn = dial::websocket(&dial_cfg, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        within("an answer", ask(conn.into_connection(), "ws")).await["result"],
        "ws"
    );
    shutdown.cancel();
}
