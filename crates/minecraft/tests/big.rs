#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue 22 item 2: answers of any size the protocol allows. `get_world_info` at radius ≥ 6 used to time out
//! (its answer is over the relay's 64 KiB message limit); protocol 1.1 sends it in `chunk` messages both
//! ways, and a 1.0 adapter's oversize answer fails at once with the limit named.

use crate::support;

use serde_json::{Value, json};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn get_world_info_at_radius_16_answers_through_the_mcp_server() {
    // Default 64 KiB message limit. The stand-in game builds the 36 000-block answer on its link's task, not
    // reading pings meanwhile: under a loaded test run that can outlast the 1 s test heartbeat.
    let relay = start_relay(relay_args(&["--heartbeat-interval", "15s"])).await;
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    // The first page waits for the whole scan, megabytes in chunks through the relay in a debug build: on a
    // loaded machine that outlasted the default 5 s command timeout once. The test is about size, not speed.
    let server = McpServer::linked(&relay, MCP_TOKEN, &["--minecraft-timeout", "60s"]).await;
    server.ready(1).await;
    for radius in [6u64, 16] {
        // Answers come in pages that fit an MCP client's limits (the Python SDK refuses SSE events over 1 MiB,
        // and a result carries its JSON twice: text and structuredContent): follow next_offset.
        let mut blocks = 0;
        let mut offset = 0u64;
        let mut pages = 0;
        loop {
            let r = call(
                &server.client,
                "get_world_info",
                json!({"x": 0, "y": 64, "z": 0, "radius": radius, "offset": offset}),
            )
            .await;
            let size = serde_json::to_string(&r).unwrap().len();
            assert!(
                size < 900 * 1024,
                "radius {radius} page {pages}: {size} bytes"
            );
            let v: Value = ok_of(&r);
            pages += 1;
            let side = 2 * radius + 1;
            assert_eq!(v["total_blocks"], side * side * side);
            blocks += v["blocks"].as_array().unwrap().len() as u64;
            match v["next_offset"].as_u64() {
                Some(next) => {
                    assert_eq!(next, blocks, "pages are contiguous");
                    offset = next;
                }
                None => break,
            }
        }
        let side = 2 * radius + 1;
        assert_eq!(
            blocks,
            side * side * side,
            "radius {radius}: every block of the cube"
        );
        if radius == 16 {
            assert!(pages > 1, "36 000 blocks need several pages");
        }
        // The pages after the first come from the first page's answer: the game scanned the cube once, not
        // once a page (each scan is megabytes through the relay; the test took minutes when it was asked
        // again for each of radius 16's pages, and timed out on a loaded machine).
        let scans = game
            .commands()
            .iter()
            .filter(|c| {
                c["payload"]["command"] == "get_world_info"
                    && c["payload"]["args"]["radius"] == radius
            })
            .count();
        assert_eq!(
            scans, 1,
            "radius {radius}: the game was asked for the cube once"
        );
    }
    server.stop().await;
    game.stop();
    relay.stop().await;
}

#[tokio::test]
async fn a_1_0_games_oversize_answer_fails_at_once_naming_the_limit() {
    // A command timeout far past the test's own deadline: only the size check can answer in time.
    let relay = start_relay(relay_args(&["--command-timeout", "10m"])).await;
    let mut game = raw_connect(&relay.url(), Some(GAME_TOKEN)).await.unwrap();
    game.send(&envelope(
        "hello",
        "h",
        "minecraft",
        json!({"name": "old", "instance": "i1"}),
    ))
    .await;
    game.recv_kind("welcome").await;
    let server = McpServer::linked(&relay, MCP_TOKEN, &[]).await;
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
