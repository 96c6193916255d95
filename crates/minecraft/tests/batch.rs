#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Protocol 1.2's `batch` (PROTOCOL.md §2.2): many messages a frame between peers that speak 1.2, single
//! frames for everyone else, each message of a batch handled as if it had come alone, and the frame's byte
//! limit named when a batch is over it.

use crate::support;

use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::Duration;
use support::*;

/// A game event numbered `seq`, in protocol `version`.
fn event(game: &str, seq: u64, version: &str) -> Value {
    let mut e = envelope(
        "event",
        &format!("{game}-i1-{seq}"),
        "minecraft",
        json!({"eventType": "player_chat", "timestamp": now(), "typeSeq": seq, "data": event_data("player_chat", seq)}),
    );
    e["seq"] = json!(seq);
    e["version"] = json!(version);
    e
}

fn batch(messages: &[Value]) -> Value {
    let mut b = envelope("batch", "b-1", "minecraft", json!({ "messages": messages }));
    b["version"] = json!("1.2");
    b
}

/// A raw game adapter under `name` speaking `version`, welcomed.
async fn game(url: &str, name: &str, version: &str) -> RawLink {
    let mut link = raw_connect(url, Some(GAME_TOKEN)).await.unwrap();
    let mut hello = envelope(
        "hello",
        "h",
        "minecraft",
        json!({"name": name, "instance": "i1"}),
    );
    hello["version"] = json!(version);
    link.send(&hello).await;
    let welcome = link.recv_kind("welcome").await;
    assert_eq!(welcome["version"], "1.2", "the relay says it speaks 1.2");
    link
}

/// A raw MCP client speaking `version`, welcomed.
async fn mcp(url: &str, client_id: &str, version: &str) -> RawLink {
    let mut link = raw_connect(url, Some(MCP_TOKEN)).await.unwrap();
    let mut hello = envelope("hello", "h", "mcp", json!({"clientId": client_id}));
    hello["version"] = json!(version);
    link.send(&hello).await;
    link.recv_kind("welcome").await;
    link
}

/// Frames until `n` events have arrived: (events in order, frames they came in, batch frames among them).
async fn events(link: &mut RawLink, n: usize) -> (Vec<Value>, usize, usize) {
    let (mut out, mut frames, mut batches) = (Vec::new(), 0, 0);
    while out.len() < n {
        let m = link.recv().await;
        match m["type"].as_str() {
            Some("event") => {
                frames += 1;
                out.push(m);
            }
            Some("batch") => {
                frames += 1;
                batches += 1;
                for inner in m["payload"]["messages"].as_array().unwrap() {
                    assert_eq!(inner["type"], "event", "{inner}");
                    out.push(inner.clone());
                }
            }
            _ => {}
        }
    }
    (out, frames, batches)
}

/// Every event of `seen` has the game's numbers 1..=n in order, and the client's own `seq` increases by one.
fn in_order(seen: &[Value], n: u64) {
    let game_seqs: Vec<u64> = seen
        .iter()
        .map(|e| e["gameSeq"].as_u64().unwrap())
        .collect();
    assert_eq!(game_seqs, (1..=n).collect::<Vec<_>>());
    let seqs: Vec<u64> = seen.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    for w in seqs.windows(2) {
        assert_eq!(w[1], w[0] + 1, "queue numbers without gaps: {seqs:?}");
    }
    let ids: HashSet<&str> = seen.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), seen.len(), "each event once");
}

#[tokio::test]
async fn a_batch_frame_is_fanned_out_event_by_event_with_its_numbers() {
    let relay = start_relay(relay_args(&[])).await;
    let mut new_client = mcp(&relay.url(), "new", "1.2").await;
    let mut old_client = mcp(&relay.url(), "old", "1.1").await;
    let mut g = game(&relay.url(), "survival", "1.2").await;
    let sent: Vec<Value> = (1..=50).map(|s| event("survival", s, "1.2")).collect();
    g.send(&batch(&sent)).await;
    // The game hears one cumulative ack for the whole batch.
    let ack = g.recv_kind("ack").await;
    assert_eq!(ack["payload"]["seq"], 50);

    let (seen, frames, batches) = events(&mut new_client, 50).await;
    in_order(&seen, 50);
    assert!(
        batches >= 1 && frames < 50,
        "a 1.2 client gets batches: {frames} frames, {batches} batches"
    );
    for (e, s) in seen.iter().zip(&sent) {
        assert_eq!(e["payload"]["data"], s["payload"]["data"]);
        assert_eq!(e["game"], "survival");
        assert_eq!(e["instance"], "i1");
    }

    // Compatibility: a client that said 1.1 gets one event a frame, never a batch.
    let (seen, frames, batches) = events(&mut old_client, 50).await;
    in_order(&seen, 50);
    assert_eq!((frames, batches), (50, 0), "single frames for a 1.1 client");
    relay.stop().await;
}

#[tokio::test]
async fn an_old_adapters_single_frames_still_work_and_reach_a_new_mcp_server() {
    let relay = start_relay(relay_args(&[])).await;
    let server = McpServer::linked(&relay, MCP_TOKEN, &[]).await;
    let mut old_client = mcp(&relay.url(), "old", "1.0").await;
    // A 1.1 adapter: one event a frame.
    let mut g = game(&relay.url(), "old-game", "1.1").await;
    server.ready(1).await;
    for s in 1..=300 {
        g.send(&event("old-game", s, "1.1")).await;
    }
    let mut acked = 0;
    while acked < 300 {
        acked = g.recv_kind("ack").await["payload"]["seq"].as_u64().unwrap();
    }
    let (seen, _, batches) = events(&mut old_client, 300).await;
    in_order(&seen, 300);
    assert_eq!(batches, 0);
    // The in-process MCP server speaks 1.2: the relay batches what it sends it, and it publishes every event
    // once, in order, none reported lost.
    let got = within("the MCP server to publish 300 events", async {
        loop {
            let (got, _) = server.poll("player_chat", 0).await;
            if got.len() >= 300 {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let messages: Vec<&str> = got
        .iter()
        .map(|e| e["data"]["data"]["message"].as_str().unwrap())
        .collect();
    let want: Vec<String> = (1..=300).map(|n| format!("hello {n}")).collect();
    assert_eq!(messages, want);
    // One page under the default result cap is whole: neither its events shortened nor its text cut.
    let page = call(
        &server.client,
        "poll_events",
        json!({"stream": "player_chat", "since": 0, "limit": 1000}),
    )
    .await;
    let truncated = page
        .meta
        .as_ref()
        .and_then(|m| m.0.get(bridge_core::tool::TRUNCATED_META_KEY));
    assert_eq!(truncated, None, "a page the core had to cut");
    let first = ok_of(&page);
    let n = first["events"].as_array().unwrap().len() as u64;
    assert!(n > 1 && n < 300, "{n} events in an 80 KB page");
    assert_eq!(first["more"], true);
    assert_eq!(
        first["next_since"], n,
        "the next page starts after the last event shown"
    );
    let status = ok_of(&call(&server.client, "status", json!({})).await);
    assert_eq!(status["lost_total"], 0, "{status}");
    assert_eq!(status["events_received"], 300, "{status}");
    server.stop().await;
    relay.stop().await;
}

#[tokio::test]
async fn a_batch_over_the_byte_limit_is_refused_naming_the_limit() {
    let relay = start_relay(relay_args(&["--max-message-bytes", "4096"])).await;
    let mut client = mcp(&relay.url(), "c", "1.2").await;
    let mut g = game(&relay.url(), "survival", "1.2").await;
    let big: Vec<Value> = (1..=40).map(|s| event("survival", s, "1.2")).collect();
    let text = batch(&big).to_string();
    assert!(text.len() > 4096);
    g.send_text(text.clone()).await;
    let e = g.recv_kind("error").await;
    assert_eq!(e["payload"]["code"], "SCHEMA_ERROR");
    let message = e["payload"]["message"].as_str().unwrap();
    assert!(
        message.contains("limit of 4096 bytes") && message.contains(&text.len().to_string()),
        "{message}"
    );
    // None of its events was taken: the next batch's events are the first the client sees.
    let small: Vec<Value> = (1..=5).map(|s| event("survival", s, "1.2")).collect();
    g.send(&batch(&small)).await;
    let (seen, _, _) = events(&mut client, 5).await;
    in_order(&seen, 5);
    relay.stop().await;
}

#[tokio::test]
async fn a_bad_message_in_a_batch_is_refused_by_its_place_and_the_rest_stand() {
    // Room for a frame of more than 1024 events, so the count is what refuses it.
    let relay = start_relay(relay_args(&["--max-message-bytes", "1048576"])).await;
    let mut client = mcp(&relay.url(), "c", "1.2").await;
    let mut g = game(&relay.url(), "survival", "1.2").await;
    let mut msgs: Vec<Value> = (1..=4).map(|s| event("survival", s, "1.2")).collect();
    msgs[1]["payload"]["eventType"] = json!("nope");
    let hello = envelope("hello", "h2", "minecraft", json!({}));
    msgs.push(hello);
    g.send(&batch(&msgs)).await;
    let e = g.recv_kind("error").await;
    assert_eq!(e["payload"]["code"], "SCHEMA_ERROR");
    assert_eq!(
        e["payload"]["details"]["field"],
        "payload.messages[1].payload.eventType"
    );
    assert_eq!(e["id"], "survival-i1-2");
    let e = g.recv_kind("error").await;
    assert_eq!(e["payload"]["details"]["field"], "payload.messages[4].type");
    let (seen, _, _) = events(&mut client, 3).await;
    let game_seqs: Vec<u64> = seen
        .iter()
        .map(|e| e["gameSeq"].as_u64().unwrap())
        .collect();
    assert_eq!(game_seqs, [1, 3, 4]);
    // More than the protocol's 1024 messages in one batch is refused whole, naming the bound.
    let many: Vec<Value> = (5..=1029).map(|s| event("survival", s, "1.2")).collect();
    g.send(&batch(&many)).await;
    let e = g.recv_kind("error").await;
    assert_eq!(e["payload"]["details"]["field"], "payload.messages");
    assert!(
        e["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("1 to 1024"),
        "{e}"
    );
    relay.stop().await;
}

#[tokio::test]
async fn each_event_of_a_batch_counts_against_the_games_rate() {
    let relay = start_relay(relay_args(&["--game-rate", "10"])).await;
    let mut client = mcp(&relay.url(), "c", "1.2").await;
    let mut g = game(&relay.url(), "survival", "1.2").await;
    // Bursts of twice the rate: about 20 pass, the rest are refused, each with its own error.
    let msgs: Vec<Value> = (1..=50).map(|s| event("survival", s, "1.2")).collect();
    g.send(&batch(&msgs)).await;
    // The client gets what passed and is told of what it missed (in one or more `lost` notices).
    let (mut got, mut told) = (0, 0);
    while got + told < 50 {
        let m = client.recv().await;
        match m["type"].as_str() {
            Some("event") => got += 1,
            Some("batch") => got += m["payload"]["messages"].as_array().unwrap().len() as u64,
            Some("notice") if m["payload"]["kind"] == "lost" => {
                assert_eq!(m["payload"]["reason"], "rate_limited", "{m}");
                told += m["payload"]["lost"].as_u64().unwrap();
            }
            _ => {}
        }
    }
    assert_eq!(got + told, 50);
    assert!((20..=22).contains(&got), "{got} passed a bucket of 20");
    for _ in 0..told {
        let e = g.recv_kind("error").await;
        assert_eq!(e["payload"]["details"]["reason"], "rate_limited", "{e}");
    }
    relay.stop().await;
}
