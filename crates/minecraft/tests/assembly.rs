#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The chunked messages a relay is putting together are bounded in bytes across all its links, not only each
//! (16 MiB): the hostile run of stop 40 held an unfinished 16 MiB message on each of 8 game links and the
//! relay grew from 28 to 258 MB; 256 links would have held gigabytes. A chunk that does not fit beside what
//! the other links hold is refused with SCHEMA_ERROR naming the limit, its message is dropped, and the link
//! stays up; what a link held is given back when its message is done, refused, or the link goes.

use crate::support;

use serde_json::{Value, json};
use support::*;

fn chunk(id: &str, index: usize, count: usize, data: &str) -> Value {
    json!({"version": "1.1", "type": "chunk", "id": id, "timestamp": 1, "source": "minecraft",
        "payload": {"index": index, "count": count, "data": data}})
}

async fn assembling(relay: &TestRelay) -> u64 {
    let text = reqwest::get(format!("http://{}/metrics", relay.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("minecraft_relay_assembling_bytes "))
        .unwrap_or_else(|| panic!("no minecraft_relay_assembling_bytes in\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

async fn assembling_becomes(relay: &TestRelay, bytes: u64) {
    within("the bytes being assembled", async {
        while assembling(relay).await != bytes {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn chunked_messages_being_assembled_are_bounded_in_bytes_across_links() {
    let relay = start_relay(relay_args(&["--max-assembling-bytes", "1048576"])).await;
    let url = relay.url();
    let (mut alpha, welcome) = game_hello(&url, "alpha", "i-alpha").await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let (mut beta, welcome) = game_hello(&url, "beta", "i-beta").await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let piece = "x".repeat(50_000);

    // Twenty of forty pieces of one message: 1 000 000 bytes held, under the 1 048 576 allowed.
    for index in 0..20 {
        alpha.send(&chunk("big-alpha", index, 40, &piece)).await;
    }
    assembling_becomes(&relay, 1_000_000).await;

    beta.send(&chunk("big-beta", 0, 2, &piece)).await;
    let refused = beta.recv_kind("error").await;
    let text = refused.to_string();
    assert!(
        text.contains("SCHEMA_ERROR")
            && text.contains("1048576")
            && text.contains("--max-assembling-bytes"),
        "{refused}"
    );
    assert_eq!(
        assembling(&relay).await,
        1_000_000,
        "the refused chunk holds nothing"
    );

    // The game that held the bytes goes: they are given back, and the other's message fits now.
    drop(alpha);
    assembling_becomes(&relay, 0).await;
    beta.send(&chunk("big-gamma", 0, 2, &piece)).await;
    assembling_becomes(&relay, 50_000).await;
    relay.stop().await;
}

/// A chunked answer dropped for want of room fails its command at once (SERVER_ERROR naming the limit): its MCP
/// server used to wait the whole command timeout and hear TIMEOUT, "the game did not answer" (an attack run's
/// finding).
#[tokio::test]
async fn a_chunked_answer_dropped_for_want_of_room_fails_its_command_at_once() {
    let relay = start_relay(relay_args(&[
        "--max-assembling-bytes",
        "1048576",
        "--command-timeout",
        "300s",
    ]))
    .await;
    let url = relay.url();
    let (mut alpha, _) = game_hello(&url, "alpha", "i-alpha").await;
    let (mut beta, welcome) = game_hello(&url, "beta", "i-beta").await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let piece = "x".repeat(50_000);
    for index in 0..20 {
        alpha.send(&chunk("big-alpha", index, 40, &piece)).await;
    }
    assembling_becomes(&relay, 1_000_000).await;

    let (mut mcp, welcome) = mcp_hello(&url, MCP_TOKEN, "desk").await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let command = json!({"version": "1.1", "type": "command", "id": "c-1", "timestamp": 1, "source": "mcp",
        "game": "beta", "payload": {"command": "get_world_info", "args": {}}});
    mcp.send(&command).await;
    let got = beta.recv_kind("command").await;
    let id = got["id"].as_str().unwrap().to_owned();
    beta.send(&chunk(&id, 0, 2, &piece)).await;
    let answer = mcp.recv_kind("response").await;
    assert_eq!(answer["payload"]["success"], false, "{answer}");
    assert_eq!(
        answer["payload"]["error"]["code"], "SERVER_ERROR",
        "{answer}"
    );
    let message = answer["payload"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("--max-assembling-bytes"), "{message}");
    relay.stop().await;
}
