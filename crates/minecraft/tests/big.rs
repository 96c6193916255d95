#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue 22 item 2: answers of any size the protocol allows. `get_world_info` at radius ≥ 6 used to time out
//! (its answer is over the relay's 64 KiB message limit); protocol 1.1 sends it in `chunk` messages both
//! ways, and a 1.0 adapter's oversize answer fails at once with the limit named.

mod support;

use serde_json::{Value, json};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn get_world_info_at_radius_16_answers_through_the_mcp_server() {
    // Default 64 KiB message limit. The stand-in game builds the 36 000-block answer on its link's task, not
    // reading pings meanwhile: under a loaded test run that can outlast the 1 s test heartbeat.
    let relay = start_relay(relay_args(&["--heartbeat-interval-ms", "15000"])).await;
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    let server = McpServer::start(mc_args(&[
        "--relay-url",
        &relay.url(),
        "--relay-token",
        MCP_TOKEN,
    ]))
    .await;
    server.ready(1).await;
    for radius in [6, 16] {
        let r = call(
            &server.client,
            "get_world_info",
            json!({"x": 0, "y": 64, "z": 0, "radius": radius}),
        )
        .await;
        let v: Value = ok_of(&r);
        let side = 2 * radius + 1;
        assert_eq!(
            v["blocks"].as_array().unwrap().len(),
            side * side * side,
            "radius {radius}: every block of the cube"
        );
    }
    server.stop().await;
    game.stop();
    relay.stop().await;
}

#[tokio::test]
async fn a_1_0_games_oversize_answer_fails_at_once_naming_the_limit() {
    // A command timeout far past the test's own deadline: only the size check can answer in time.
    let relay = start_relay(relay_args(&["--command-timeout-ms", "600000"])).await;
    let mut game = raw_connect(&relay.url(), Some(GAME_TOKEN)).await.unwrap();
    game.send(&envelope(
        "hello",
        "h",
        "minecraft",
        json!({"name": "old", "instance": "i1"}),
    ))
    .await;
    game.recv_kind("welcome").await;
    let server = McpServer::start(mc_args(&[
        "--relay-url",
        &relay.url(),
        "--relay-token",
        MCP_TOKEN,
    ]))
    .await;
    server.ready(1).await;
    let client = server.client.clone();
    let call = tokio::spawn(async move {
        call(
            &client,
            "get_world_info",
            json!({"x": 0, "y": 64, "z": 0, "radius": 8}),
        )
        .await
    });
    let cmd = game.recv_kind("command").await;
    let big = "x".repeat(100_000);
    game.send(&envelope(
        "response",
        cmd["id"].as_str().unwrap(),
        "minecraft",
        json!({"success": true, "data": {"blocks": [], "entities": [], "pad": big}}),
    ))
    .await;
    let r = within("the oversize answer's error", call).await.unwrap();
    assert_eq!(r.is_error, Some(true));
    let text = text_of(&r);
    assert!(text.contains("65536 bytes"), "the limit is named: {text}");
    server.stop().await;
    relay.stop().await;
}
