//! What the relay's links decode at once is bounded in bytes (`--max-decoding-bytes`), not only what they send:
//! a chunked message is at most 16 MiB of text, but 16 MB of one-member objects (`{"a":0},`) took the relay to
//! 1.36 GB (bench/decode-flood.py), and any holder of the game token can send one. A message that could never
//! fit is refused unread with SCHEMA_ERROR naming the flag, and an answer among them fails its command at once;
//! an answer as large whose data is one string decodes to about its size and goes through.

use crate::support;

use serde_json::{Value, json};
use support::*;

/// `message` as `chunk`s of at most 30 000 characters (PROTOCOL.md §2.1).
fn chunks_of(message: &Value) -> Vec<Value> {
    let text = message.to_string();
    let chars: Vec<char> = text.chars().collect();
    let pieces: Vec<String> = chars.chunks(30_000).map(|c| c.iter().collect()).collect();
    let id = message["id"].as_str().unwrap();
    pieces
        .iter()
        .enumerate()
        .map(|(index, data)| {
            json!({"version": "1.1", "type": "chunk", "id": id, "timestamp": 1, "source": "minecraft",
                "payload": {"index": index, "count": pieces.len(), "data": data}})
        })
        .collect()
}

#[tokio::test]
async fn an_answer_too_costly_to_decode_fails_its_command_at_once_and_one_as_large_as_a_string_goes_through()
 {
    // A command timeout far past the test's own deadline: only the bound can answer in time.
    let relay = start_relay(relay_args(&[
        "--command-timeout",
        "10m",
        "--max-decoding-bytes",
        "1048576",
    ]))
    .await;
    let (mut game, welcome) = game_hello(&relay.url(), "survival", "i1").await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let server = McpServer::linked(&relay, MCP_TOKEN, &[]).await;
    server.ready(1).await;

    // 12 000 one-member objects: 96 KB of text, some 9 MB by the bound's count.
    let client = server.client.clone();
    let costly = tokio::spawn(async move {
        call(&client, "execute_command", json!({"command": "say hi"})).await
    });
    let cmd = game.recv_kind("command").await;
    let objects = vec![json!({"a": 0}); 12_000];
    let answer = envelope(
        "response",
        cmd["id"].as_str().unwrap(),
        "minecraft",
        json!({"success": true, "data": {"success": true, "output": objects}}),
    );
    for chunk in chunks_of(&answer) {
        game.send(&chunk).await;
    }
    let refused = game.recv_kind("error").await;
    assert_eq!(refused["payload"]["code"], "SCHEMA_ERROR", "{refused}");
    assert_eq!(refused["id"], cmd["id"], "names the message: {refused}");
    let said = refused["payload"]["message"].as_str().unwrap();
    assert!(
        said.contains("--max-decoding-bytes") && said.contains("1048576"),
        "names the bound: {said}"
    );
    let r = within("the refused answer's error", costly).await.unwrap();
    assert_eq!(r.is_error, Some(true));
    let text = text_of(&r);
    assert!(text.contains("--max-decoding-bytes"), "{text}");
    assert_eq!(
        relay.metric("minecraft_relay_decoding_bytes").await,
        0,
        "nothing is held once it is refused"
    );

    // As many bytes as one string: about its size decoded, so it fits and is answered.
    let client = server.client.clone();
    let cheap = tokio::spawn(async move {
        call(&client, "execute_command", json!({"command": "say hi"})).await
    });
    let cmd = game.recv_kind("command").await;
    let line = "x".repeat(96_000);
    let answer = envelope(
        "response",
        cmd["id"].as_str().unwrap(),
        "minecraft",
        json!({"success": true, "data": {"success": true, "output": [line]}}),
    );
    for chunk in chunks_of(&answer) {
        game.send(&chunk).await;
    }
    let r = within("the cheap answer", cheap).await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert!(text_of(&r).contains("xxxxxxxx"), "the output came through");
    assert_eq!(
        relay
            .metric("minecraft_relay_limit{bound=\"max_decoding_bytes\"}")
            .await,
        1_048_576
    );
    server.stop().await;
    relay.stop().await;
}
