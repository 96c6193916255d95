#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue 22 item 1 on the MCP server's side: its relay client never gives up. The relay is away for many times
//! the (test-short) backoff cap, then back on the same port; the MCP server redials by itself and every event
//! the game emitted meanwhile reaches it once.

use crate::support;

use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::Duration;
use support::*;

fn ids(server: &McpServer) -> Vec<String> {
    let mut out = Vec::new();
    for stream in server.bridge.events().streams() {
        // Loss records (events_lost) carry no id.
        for e in stream.recent(100_000) {
            if let Some(id) = e.data["id"].as_str() {
                out.push(id.to_owned());
            }
        }
    }
    out
}

#[tokio::test]
async fn the_mcp_server_redials_a_relay_away_for_many_backoff_caps_and_gets_the_outage() {
    let relay = start_relay(relay_args(&[])).await;
    let addr = relay.addr;
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    // mc_args caps the backoff at 200 ms.
    let server = McpServer::linked(&relay, MCP_TOKEN, &[]).await;
    server.ready(1).await;
    for i in 0..10 {
        game.emit("player_chat", event_data("player_chat", i));
    }
    game.wait_acked().await;
    relay.stop().await;
    for i in 10..60 {
        game.emit("player_chat", event_data("player_chat", i));
    }
    // 2 s: ten caps of 200 ms.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let s: Value = ok_of(&call(&server.client, "status", json!({})).await);
    assert_eq!(s["connected"], false);
    assert!(
        s["reconnect_attempts"].as_u64().unwrap() >= 5,
        "kept redialling: {s}"
    );
    let relay = restart_relay_on(addr, &[]).await;
    game.wait_acked().await;
    within("every event at the MCP server", async {
        while ids(&server).len() < 60 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let got = ids(&server);
    assert_eq!(got.iter().collect::<HashSet<_>>().len(), 60, "each once");
    assert_eq!(got.len(), 60, "no duplicates");
    server.stop().await;
    game.stop();
    relay.stop().await;
}
