#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue 22 item 3: rate limits protect without starving. The MCP server's own acknowledgements used to count
//! against its relay rate limit, so during an event flood its tool calls were refused as rate-limited; and
//! events over a game's limit were dropped without a word.

use crate::support;

use serde_json::{Value, json};
use std::time::Duration;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_tool_calls_during_a_500_events_per_second_flood_are_all_answered() {
    let relay = start_relay(relay_args(&[])).await; // default rates: MCP servers 100/s, bursts of 200
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    let server = McpServer::linked(&relay, MCP_TOKEN, &[]).await;
    server.ready(1).await;
    // 500 events/s for 4 s, one every 2 ms (so the MCP server, idle between them, acks nearly each one).
    let flood = {
        let game = game.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(2));
            for i in 0..2000u64 {
                tick.tick().await;
                game.emit("player_chat", event_data("player_chat", i));
            }
        })
    };
    // Let the flood (and the acks it causes) run past the limiter's burst before calling.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut refused = Vec::new();
    for _ in 0..50 {
        let r = call(&server.client, "get_online_players", json!({})).await;
        if r.is_error == Some(true) {
            refused.push(text_of(&r));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    flood.await.unwrap();
    assert!(
        refused.is_empty(),
        "{} of 50 refused: {:?}",
        refused.len(),
        refused.first()
    );
    let metrics = mcp_testkit::http_get(&format!("http://{}/metrics", relay.addr)).await;
    assert!(
        metrics.contains("minecraft_relay_rate_limited_total 0"),
        "nothing was rate-limited: {metrics}"
    );
    server.stop().await;
    game.stop();
    relay.stop().await;
}

#[tokio::test]
async fn events_over_a_games_rate_are_counted_and_the_mcp_server_told_how_many_it_missed() {
    let relay = start_relay(relay_args(&["--game-rate", "50"])).await; // bursts of 100
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    let server = McpServer::start(mc_args(&[
        "--minecraft-relay-url",
        &relay.url(),
        "--minecraft-relay-token",
        MCP_TOKEN,
        "--minecraft-event-buffer",
        "10000",
    ]))
    .await;
    server.ready(1).await;
    const N: u64 = 600;
    for i in 0..N {
        game.emit("player_chat", event_data("player_chat", i));
    }
    within("the MCP server to hear of every event or its loss", async {
        loop {
            let s: Value = ok_of(&call(&server.client, "status", json!({})).await);
            let got = s["events_received"].as_u64().unwrap();
            let lost = s["lost_total"].as_u64().unwrap();
            if got + lost >= N {
                let refused = refused_events(&relay).await;
                assert!(refused > 0, "the flood went over the game's limit");
                assert_eq!(lost, refused, "told exactly how many it missed: {s}");
                assert_eq!(got + lost, N, "{s}");
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    server.stop().await;
    game.stop();
    relay.stop().await;
}

async fn refused_events(relay: &TestRelay) -> u64 {
    let metrics = mcp_testkit::http_get(&format!("http://{}/metrics", relay.addr)).await;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("minecraft_relay_events_rate_limited_total "))
        .unwrap_or_else(|| panic!("no events_rate_limited counter: {metrics}"))
        .parse()
        .unwrap()
}
