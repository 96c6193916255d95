//! What the relay's links decode at once is bounded in bytes (`--max-decoding-bytes`), not only what they send:
//! a chunked message is at most 16 MiB of text, but 16 MB of one-member objects (`{"a":0},`) took the relay to
//! 1.36 GB (bench/decode-flood.py), and any holder of the game token can send one. A message that could never
//! fit is refused unread with SCHEMA_ERROR naming the flag, and an answer among them fails its command at once;
//! an answer as large whose data is one string decodes to about its size and goes through.

use crate::support;

use serde_json::{Value, json};
use support::*;

/// Frames of at most 4 KiB (`--max-message-bytes 4096`), so that a budget of 2 MiB is above what one frame may
/// take (the relay never sets it lower) and a few-hundred-KB message is over it.
const RELAY_ARGS: [&str; 6] = [
    "--command-timeout",
    "10m",
    "--max-message-bytes",
    "4096",
    "--max-decoding-bytes",
    "2097152",
];

/// `message` as `chunk`s whose frames stay under 4 KiB (PROTOCOL.md §2.1; quotes double when escaped).
fn chunks_of(message: &Value) -> Vec<Value> {
    let text = message.to_string();
    let chars: Vec<char> = text.chars().collect();
    let pieces: Vec<String> = chars.chunks(1_500).map(|c| c.iter().collect()).collect();
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

/// A relay with [`RELAY_ARGS`], one game and one MCP server linked to it.
async fn linked() -> (TestRelay, RawLink, McpServer) {
    let relay = start_relay(relay_args(&RELAY_ARGS)).await;
    let (game, welcome) = game_hello(&relay.url(), "survival", "i1").await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let server = McpServer::linked(&relay, MCP_TOKEN, &[]).await;
    server.ready(1).await;
    (relay, game, server)
}

/// `execute_command` called through `server`, and the command the game received for it.
async fn command(
    server: &McpServer,
    game: &mut RawLink,
    text: &str,
) -> (tokio::task::JoinHandle<rmcp::model::CallToolResult>, Value) {
    let client = server.client.clone();
    let args = json!({"command": text, "game": "survival"});
    let call = tokio::spawn(async move { call(&client, "execute_command", args).await });
    (call, game.recv_kind("command").await)
}

#[tokio::test]
async fn an_answer_too_costly_to_decode_fails_its_command_at_once_and_one_as_large_as_a_string_goes_through()
 {
    // A command timeout far past the test's own deadline (RELAY_ARGS): only the bound can answer in time.
    let (relay, mut game, server) = linked().await;
    // 12 000 one-member objects: 96 KB of text, some 9 MB by the bound's count.
    let (costly, cmd) = command(&server, &mut game, "say hi").await;
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
        said.contains("--max-decoding-bytes") && said.contains("2097152"),
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
    let (cheap, cmd) = command(&server, &mut game, "say hi").await;
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
        2_097_152
    );
    server.stop().await;
    relay.stop().await;
}

/// A chunked message that takes nearly the whole budget is decoded, and the relay goes on: its last chunk's own
/// room is given back before the whole asks for its own. Held, the whole waited for it for good, and every link
/// behind it (a new hello, every command) with it, even after its game left (the hostile review of stop 48).
#[tokio::test]
async fn a_message_that_takes_nearly_the_whole_budget_is_decoded_and_the_relay_goes_on() {
    const BUDGET: usize = 2_097_152;
    let (relay, mut game, server) = linked().await;
    let (big, cmd) = command(&server, &mut game, "say hi").await;
    let answer = |objects: usize, pad: usize| {
        envelope(
            "response",
            cmd["id"].as_str().unwrap(),
            "minecraft",
            json!({"success": true, "data": {"success": true, "output": vec![json!({"a": 0}); objects], "pad": "p".repeat(pad)}}),
        )
    };
    let cost = |v: &Value| bridge_core::link::json_cost::decoded_bytes(v.to_string().as_bytes());
    // As many objects as fit, then padding up to 1 000 bytes under the budget: far less than a chunk frame's cost.
    let mut objects = 0;
    while cost(&answer(objects + 100, 0)) < BUDGET - 2_000 {
        objects += 100;
    }
    let pad = BUDGET - 1_000 - cost(&answer(objects, 0));
    let whole = answer(objects, pad);
    assert_eq!(cost(&whole), BUDGET - 1_000);
    for chunk in chunks_of(&whole) {
        game.send(&chunk).await;
    }
    // Decoded and handled: the call ends (the objects are no command output), and nothing stays reserved.
    let r = within("the big answer to be handled", big).await.unwrap();
    assert_eq!(r.is_error, Some(true));
    // Decoded: the MCP server read it and found objects where command output lines go (not a timeout).
    let said = text_of(&r);
    assert!(
        said.contains("does not fit the protocol") && !said.contains("--max-decoding-bytes"),
        "{said}"
    );
    within("the budget to be given back", async {
        while relay.metric("minecraft_relay_decoding_bytes").await != 0 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    // The relay goes on: another game says hello, and a command reaches the first.
    let (_other, welcome) = game_hello(&relay.url(), "creative", "i2").await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let (next, cmd) = command(&server, &mut game, "say again").await;
    game.send(&envelope(
        "response",
        cmd["id"].as_str().unwrap(),
        "minecraft",
        json!({"success": true, "data": {"success": true, "output": ["[Server] again"]}}),
    ))
    .await;
    let r = within("the next call", next).await.unwrap();
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    server.stop().await;
    relay.stop().await;
}
