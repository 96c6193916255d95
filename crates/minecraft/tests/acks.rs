//! Acknowledgements on a steady stream (PROTOCOL.md §4.4, src/acks.rs; issue 22 item 9): one per ACK_EVERY
//! messages or per ACK_DELAY (5 ms), not one per frame. Each ack wakes the peer; at 10 000 events/s a game's
//! ~1 000 frames a second were each acknowledged.
//!
//! On tokio's paused clock, moved by hand: after each frame the test yields until the peer has handled it (the
//! clock cannot move meanwhile: a task is always ready), then advances 1 ms. Frames are thus 1 ms apart
//! whatever the machine's load.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use futures::{FutureExt, SinkExt, StreamExt};
use serde_json::{Value, json};
use std::sync::atomic::Ordering;
use std::time::Duration;
use support::*;
use tokio_tungstenite::tungstenite::Message;

const FRAMES: u64 = 10;

fn event(seq: u64) -> Value {
    let mut e = envelope(
        "event",
        &format!("e{seq}"),
        "minecraft",
        json!({"eventType": "player_chat", "timestamp": 1, "data": {"player": "S", "message": "m"}}),
    );
    e["seq"] = json!(seq);
    e["game"] = json!("g");
    e
}

/// Yields, the clock standing still, until `done`.
async fn until(done: impl Fn() -> bool) {
    while !done() {
        tokio::task::yield_now().await;
    }
}

/// Reads what `rx` has (yielding, the clock standing still) until an ack of `last`; returns every ack's seq.
async fn acks_until<S>(rx: &mut S, last: u64) -> Vec<u64>
where
    S: futures::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let mut acks = Vec::new();
    while acks.last() != Some(&last) {
        match rx.next().now_or_never() {
            Some(Some(Ok(Message::Text(t)))) => {
                let v: Value = serde_json::from_str(&t).unwrap();
                if v["type"] == "ack" {
                    acks.push(v["payload"]["seq"].as_u64().unwrap());
                }
            }
            Some(Some(Ok(_))) => {}
            Some(other) => panic!("link ended: {other:?}"),
            None => tokio::task::yield_now().await,
        }
    }
    acks
}

fn assert_coalesced(acks: &[u64]) {
    // One per frame before (1, 2, …, 10); now one per 5 ms of frames 1 ms apart.
    assert!(acks.len() <= 3, "acks {acks:?}");
    assert!(
        acks[0] >= 4,
        "the first ack covers the frames of its 5 ms: {acks:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_relay_acknowledges_a_games_steady_stream_in_few_acks_not_one_per_frame() {
    let relay = start_relay(relay_args(&[])).await;
    let (mut game, welcome) = game_hello(&relay.url(), "g", "i").await;
    assert_eq!(welcome["type"], "welcome");
    let stats = relay.relay.stats();
    for seq in 1..=FRAMES {
        game.send(&event(seq)).await;
        until(|| stats.events_in.load(Ordering::Relaxed) == seq).await;
        tokio::time::advance(Duration::from_millis(1)).await;
    }
    tokio::time::advance(Duration::from_millis(10)).await;
    assert_coalesced(&acks_until(&mut game.rx, FRAMES).await);
    relay.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_relay_acknowledges_at_once_when_ack_every_events_wait() {
    let relay = start_relay(relay_args(&[])).await;
    let (mut game, _) = game_hello(&relay.url(), "g", "i").await;
    let stats = relay.relay.stats();
    // 64 events, the clock standing still: acknowledged without the timer.
    for seq in 1..=64 {
        game.send(&event(seq)).await;
    }
    until(|| stats.events_in.load(Ordering::Relaxed) == 64).await;
    assert_eq!(acks_until(&mut game.rx, 64).await.last(), Some(&64));
    relay.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_mcp_server_acknowledges_the_relays_steady_stream_in_few_acks_not_one_per_frame() {
    // A stand-in relay: welcome, then events 1 ms apart.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(socket).await.unwrap();
        let hello = loop {
            if let Some(Ok(Message::Text(t))) = ws.next().await {
                break serde_json::from_str::<Value>(&t).unwrap();
            }
        };
        assert_eq!(hello["type"], "hello");
        let welcome = json!({"version": "1.2", "type": "welcome", "id": "w", "timestamp": 1, "source": "relay",
            "payload": {"role": "mcp", "epoch": "e1", "lastSeq": 0, "games": ["g"]}});
        ws.send(Message::text(welcome.to_string())).await.unwrap();
        ws
    });
    let server = McpServer::start(mc_args(&[
        "--minecraft-relay-url",
        &format!("ws://{addr}"),
        "--minecraft-relay-token",
        "t",
    ]))
    .await;
    let mut ws = accepted.await.unwrap();
    let stream = server.bridge.events().get("player_chat").unwrap();
    for seq in 1..=FRAMES {
        ws.send(Message::text(event(seq).to_string()))
            .await
            .unwrap();
        until(|| stream.published_total() == seq).await;
        tokio::time::advance(Duration::from_millis(1)).await;
    }
    tokio::time::advance(Duration::from_millis(10)).await;
    assert_coalesced(&acks_until(&mut ws, FRAMES).await);
    server.stop().await;
}
