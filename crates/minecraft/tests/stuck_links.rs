#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! A link that stops reading must not stall any other link. A game that floods the relay with frames it must
//! answer (each garbage frame earns an error frame) and never reads what it is sent used to block its own read
//! loop in a send with no deadline; the watchdog excused it (its reader was blocked, by the relay itself), and
//! the first command an MCP server sent it blocked that server's read loop too: its calls to a healthy game
//! were never answered, not even with TIMEOUT.
//!
//! Real sockets fill here (the kernel's buffers decide when), so the clock cannot be paused: the waits are
//! generous and the assertions are about what happens, not how fast.

use crate::support;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::future::Future;
use std::time::Duration;
use support::*;
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};

/// Waits at most `secs` for `fut`; a panic naming `what` otherwise.
async fn within_secs<T>(secs: u64, what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), fut)
        .await
        .unwrap_or_else(|_| panic!("not within {secs} s: {what}"))
}

type Ws = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

/// A link with a tiny receive buffer, presenting `token`, that said `hello` from `source` with `payload` and
/// read its welcome.
async fn tiny_window_link(
    addr: std::net::SocketAddr,
    token: &str,
    source: &str,
    payload: Value,
) -> Ws {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(2048).unwrap();
    let tcp = socket.connect(addr).await.unwrap();
    let mut req = format!("ws://{addr}/").into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::client_async(req, tcp).await.unwrap();
    let hello = envelope("hello", "h", source, payload);
    ws.send(Message::text(hello.to_string())).await.unwrap();
    loop {
        let Some(Ok(Message::Text(t))) = ws.next().await else {
            panic!("no welcome")
        };
        let v: Value = serde_json::from_str(&t).unwrap();
        if v["type"] == "welcome" {
            return ws;
        }
    }
}

/// Floods `tx` with frames the relay must answer (garbage), reading nothing, until the relay stops reading
/// them: then the returned receiver fires, and the task ends holding the link open.
fn flood_until_stuck(
    mut tx: futures::stream::SplitSink<Ws, Message>,
) -> (
    tokio::sync::oneshot::Receiver<()>,
    tokio::task::JoinHandle<futures::stream::SplitSink<Ws, Message>>,
) {
    let (stuck_tx, stuck) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let garbage = "x".repeat(1000);
        loop {
            let sent = tokio::time::timeout(
                Duration::from_secs(2),
                tx.send(Message::text(garbage.clone())),
            )
            .await;
            match sent {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return tx,
                Err(_) => {
                    let _ = stuck_tx.send(());
                    return tx;
                }
            }
        }
    });
    (stuck, task)
}

/// The responses an MCP link gets, by id, read as they come (so the relay never waits on this link).
fn collect_responses(
    mut rx: futures::stream::SplitStream<Ws2>,
) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
    let (tx, out) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(Ok(msg)) = rx.next().await {
            let Message::Text(t) = msg else { continue };
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["type"] == "response" && tx.send(v).is_err() {
                return;
            }
        }
    });
    out
}

type Ws2 =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The response to `id`; others that come first are kept in `seen` for their own turn.
async fn next_response(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Value>,
    seen: &mut Vec<Value>,
    id: &str,
) -> Value {
    if let Some(i) = seen.iter().position(|v| v["id"] == id) {
        return seen.remove(i);
    }
    loop {
        let v = rx.recv().await.expect("the MCP link ended");
        if v["id"] == id {
            return v;
        }
        seen.push(v);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_game_that_stops_reading_stalls_no_other_link_and_is_dropped() {
    // Heartbeats (and so the link watchdog's pings) every 5 s: the stuck game stays linked long enough after
    // it is stuck for a command to reach it.
    let relay = start_relay(relay_args(&[
        "--heartbeat-interval",
        "5s",
        "--command-timeout",
        "3s",
    ]))
    .await;
    let good = FakeGame::start(&relay.url(), "good");
    good.wait_connected(1).await;

    // The hostile game: garbage, never a read. Its sends stop completing once the relay has stopped reading it
    // (the relay blocked on the error frames it owes, the game's window shut).
    let hostile = tiny_window_link(
        relay.addr,
        GAME_TOKEN,
        "minecraft",
        json!({"name": "hostile", "instance": "stuck"}),
    )
    .await;
    let (hostile_tx, hostile_rx) = hostile.split();
    let (stuck, flood) = flood_until_stuck(hostile_tx);
    within_secs(60, "the hostile game's link to fill", stuck)
        .await
        .expect("the relay stopped reading the hostile game");
    assert!(
        relay.relay.lock().games.contains_key("hostile"),
        "the stuck game is still linked when the command is sent"
    );

    let mut mcp = raw_connect(&relay.url(), Some(MCP_TOKEN)).await.unwrap();
    mcp.send(&envelope("hello", "h", "mcp", json!({"clientId": "desk"})))
        .await;
    assert_eq!(mcp.recv().await["type"], "welcome");
    let RawLink { tx: mut mcp_tx, rx } = mcp;
    let mut responses = collect_responses(rx);
    let mut seen = Vec::new();
    let command = |id: &str, game: &str| {
        let mut c = envelope(
            "command",
            id,
            "mcp",
            json!({"command": "get_online_players", "args": {}}),
        );
        c["game"] = json!(game);
        Message::text(c.to_string())
    };
    mcp_tx.send(command("to-hostile", "hostile")).await.unwrap();
    mcp_tx.send(command("to-good", "good")).await.unwrap();

    let answered = within_secs(
        30,
        "the healthy game's answer, sent after a command to the stuck game",
        next_response(&mut responses, &mut seen, "to-good"),
    )
    .await;
    assert_eq!(answered["payload"]["success"], true, "{answered}");

    // Answered at once or at the relay's command timeout; either way the asker hears which game and why.
    let failed = within_secs(
        30,
        "an error for the command to the stuck game",
        next_response(&mut responses, &mut seen, "to-hostile"),
    )
    .await;
    assert_eq!(failed["payload"]["success"], false, "{failed}");
    let code = failed["payload"]["error"]["code"]
        .as_str()
        .unwrap_or_default();
    assert!(
        code == "TIMEOUT" || code == "CONNECTION_ERROR",
        "failed with {code}: {failed}"
    );
    assert_eq!(
        failed["payload"]["error"]["details"]["game"], "hostile",
        "{failed}"
    );

    // The stuck game is dropped (its goodbye may not fit behind what it left unread: the link just ends).
    within_secs(60, "the stuck game to be dropped", async {
        while relay.relay.lock().games.contains_key("hostile") {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let mut hostile_rx = hostile_rx;
    within_secs(60, "the stuck game's link to end", async {
        while let Some(Ok(msg)) = hostile_rx.next().await {
            if let Message::Close(_) = msg {
                return;
            }
        }
    })
    .await;
    flood.abort();

    // The healthy game still answers.
    mcp_tx.send(command("to-good-2", "good")).await.unwrap();
    let again = within_secs(30, "the healthy game's second answer", async {
        next_response(&mut responses, &mut seen, "to-good-2").await
    })
    .await;
    assert_eq!(again["payload"]["success"], true, "{again}");
    good.stop();
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_mcp_server_that_stops_reading_holds_up_no_other_servers_notices() {
    let relay = start_relay(relay_args(&["--heartbeat-interval", "5s"])).await;
    let mut honest = Vec::new();
    for k in 0..6 {
        let mut link = raw_connect(&relay.url(), Some(MCP_TOKEN)).await.unwrap();
        link.send(&envelope(
            "hello",
            "h",
            "mcp",
            json!({"clientId": format!("honest{k}")}),
        ))
        .await;
        assert_eq!(link.recv().await["type"], "welcome");
        honest.push(link);
    }
    let bad = tiny_window_link(
        relay.addr,
        READONLY_TOKEN,
        "mcp",
        json!({"clientId": "bad"}),
    )
    .await;
    let (bad_tx, _bad_rx) = bad.split();
    let (stuck, flood) = flood_until_stuck(bad_tx);
    within_secs(60, "the stuck MCP server's link to fill", stuck)
        .await
        .expect("the relay stopped reading the stuck MCP server");

    let game = FakeGame::start(&relay.url(), "late");
    game.wait_connected(1).await;
    for (k, link) in honest.iter_mut().enumerate() {
        let notice = within_secs(30, "a game_connected notice", link.recv_kind("notice")).await;
        assert_eq!(
            notice["payload"]["kind"], "game_connected",
            "honest{k}: {notice}"
        );
    }
    // Every other server heard of the game while the stuck one was still linked: the notices did not wait
    // for it to be dropped.
    let stuck_linked = relay
        .relay
        .lock()
        .clients
        .iter()
        .any(|((_, id), c)| id == "bad" && c.live.is_some());
    assert!(
        stuck_linked,
        "the stuck MCP server was dropped before the others heard"
    );
    flood.abort();
    game.stop();
    relay.stop().await;
}
