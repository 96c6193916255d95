#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The relay on its own, over raw protocol links and through MCP servers dialling it: tokens and roles,
//! permissions, routing, queues and replay, restarts of either side with every event counted, refusals on
//! every link, heartbeats, rate limits, /health and /metrics.

use crate::support;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::Duration;
use support::*;
use tokio_tungstenite::tungstenite::Message;

async fn raw_mcp(url: &str, token: &str, client_id: &str, extra: Value) -> (RawLink, Value) {
    let mut link = raw_connect(url, Some(token)).await.unwrap();
    let mut payload = json!({"clientId": client_id});
    if let Value::Object(m) = extra {
        for (k, v) in m {
            payload[k] = v;
        }
    }
    link.send(&envelope("hello", "h", "mcp", payload)).await;
    let welcome = link.recv_kind("welcome").await;
    (link, welcome)
}

/// An MCP server whose relay is the stand-in listening on `addr`.
async fn mcp_server_dialling(addr: std::net::SocketAddr) -> McpServer {
    McpServer::start(mc_args(&[
        "--minecraft-relay-url",
        &format!("ws://{addr}"),
        "--minecraft-relay-token",
        "t",
    ]))
    .await
}

async fn health(addr: std::net::SocketAddr) -> Value {
    serde_json::from_str(&mcp_testkit::http_get(&format!("http://{addr}/health")).await).unwrap()
}

async fn wait_health(addr: std::net::SocketAddr, what: &str, ok: impl Fn(&Value) -> bool) {
    within(what, async {
        loop {
            if ok(&health(addr).await) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_wrong_or_missing_token_is_refused_before_the_upgrade() {
    let relay = start_relay(relay_args(&[])).await;
    assert_eq!(raw_connect(&relay.url(), None).await.err(), Some(401));
    assert_eq!(
        raw_connect(&relay.url(), Some("nope")).await.err(),
        Some(401)
    );
    // A token in the URL is not accepted.
    let url = format!("{}?token={MCP_TOKEN}", relay.url());
    assert_eq!(raw_connect(&url, None).await.err(), Some(401));
    // The game token gives the game role, an MCP token the MCP role.
    let (_, welcome) = raw_mcp(&relay.url(), MCP_TOKEN, "a", json!({})).await;
    assert_eq!(welcome["payload"]["role"], "mcp");
    let mut game = raw_connect(&relay.url(), Some(GAME_TOKEN)).await.unwrap();
    game.send(&envelope(
        "hello",
        "h",
        "minecraft",
        json!({"name": "s1", "instance": "i1"}),
    ))
    .await;
    assert_eq!(
        game.recv_kind("welcome").await["payload"]["role"],
        "minecraft"
    );
    // And an MCP server with a wrong token sees it in status.
    let server = McpServer::linked(&relay, "wrong", &[]).await;
    within("status to report the refusal", async {
        loop {
            let s = ok_of(&call(&server.client, "status", json!({})).await);
            if s["connected"] == false
                && s["last_error"].as_str().is_some_and(|e| e.contains("401"))
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    server.stop().await;
    relay.stop().await;
}

#[tokio::test]
async fn a_token_limited_to_some_commands_is_refused_the_others_at_the_relay() {
    let relay = start_relay(relay_args(&[])).await;
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    let server = McpServer::linked(&relay, READONLY_TOKEN, &[]).await;
    server.ready(1).await;
    let ok = ok_of(&call(&server.client, "get_online_players", json!({})).await);
    assert_eq!(ok["count"], 2);
    let e = error_of(
        &call(
            &server.client,
            "execute_command",
            json!({"command": "say hi"}),
        )
        .await,
    );
    assert_eq!(e["details"].get("code"), None, "the code is at `code` only");
    assert_eq!(e["code"], "PERMISSION_DENIED");
    assert_eq!(e["category"], "E_UNSUPPORTED");
    assert!(
        game.commands()
            .iter()
            .all(|c| c["payload"]["command"] != "execute_command"),
        "a refused command never reaches the game"
    );
    server.stop().await;
    game.stop();
    relay.stop().await;
}

#[tokio::test]
async fn commands_go_to_the_named_game_and_responses_only_to_the_asker() {
    let relay = start_relay(relay_args(&[])).await;
    let a = FakeGame::start(&relay.url(), "alpha");
    let b = FakeGame::start(&relay.url(), "beta");
    a.wait_connected(1).await;
    b.wait_connected(1).await;
    let (mut asker, _) = raw_mcp(&relay.url(), MCP_TOKEN, "asker", json!({})).await;
    let (mut other, _) = raw_mcp(&relay.url(), MCP_TOKEN, "other", json!({})).await;
    // Two games and no name: refused, naming them.
    let cmd = envelope(
        "command",
        "c1",
        "mcp",
        json!({"command": "get_server_info", "args": {}}),
    );
    asker.send(&cmd).await;
    let r = asker.recv_kind("response").await;
    assert_eq!(r["payload"]["error"]["code"], "INVALID_COMMAND");
    assert_eq!(
        r["payload"]["error"]["details"]["games"],
        json!(["alpha", "beta"])
    );
    // Named: only that game runs it, only the asker hears back, under its own id.
    let named = info_command("c2", "beta");
    asker.send(&named).await;
    let r = asker.recv_kind("response").await;
    assert_eq!(r["id"], "c2");
    assert_eq!(r["game"], "beta");
    assert_eq!(r["payload"]["success"], true);
    assert_eq!(b.commands().len(), 1);
    assert!(a.commands().is_empty());
    // The other client got no response: the next thing it hears is its own.
    other
        .send(&envelope(
            "command",
            "o1",
            "mcp",
            json!({"command": "get_server_info", "args": {}}),
        ))
        .await;
    let r = other.recv_kind("response").await;
    assert_eq!(
        r["id"], "o1",
        "the other client only ever sees its own responses"
    );
    a.stop();
    b.stop();
    relay.stop().await;
}

#[tokio::test]
async fn two_mcp_servers_with_different_subscriptions_get_exactly_theirs() {
    let relay = start_relay(relay_args(&[])).await;
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    let chat = McpServer::start(mc_args(&[
        "--minecraft-relay-url",
        &relay.url(),
        "--minecraft-relay-token",
        MCP_TOKEN,
        "--minecraft-client-id",
        "chat",
        "--minecraft-events",
        "player_chat",
    ]))
    .await;
    let blocks = McpServer::start(mc_args(&[
        "--minecraft-relay-url",
        &relay.url(),
        "--minecraft-relay-token",
        MCP_TOKEN,
        "--minecraft-client-id",
        "blocks",
        "--minecraft-events",
        "block_break,player_join",
    ]))
    .await;
    chat.ready(1).await;
    blocks.ready(1).await;
    let types = ["player_chat", "block_break", "player_join", "player_death"];
    for n in 0..40u64 {
        let ty = types[(n % 4) as usize];
        game.emit(ty, event_data(ty, n));
    }
    game.wait_acked().await;
    let count = |server: &McpServer, ty: &'static str| {
        let hub = server.bridge.events().clone();
        move || hub.get(ty).map_or(0, |s| s.published_total())
    };
    within("both to receive theirs", async {
        loop {
            if count(&chat, "player_chat")() == 10
                && count(&blocks, "block_break")() == 10
                && count(&blocks, "player_join")() == 10
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    for ty in ["block_break", "player_join", "player_death", "player_quit"] {
        assert_eq!(count(&chat, ty)(), 0, "chat server got a {ty}");
    }
    for ty in ["player_chat", "player_death", "player_quit"] {
        assert_eq!(count(&blocks, ty)(), 0, "blocks server got a {ty}");
    }
    chat.stop().await;
    blocks.stop().await;
    game.stop();
    relay.stop().await;
}

/// Ids of every event on `server`'s streams.
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

/// Emits `n` chat events, one every `every`, from a task.
fn stream_events(game: &FakeGame, n: u64, every: Duration) -> tokio::task::JoinHandle<()> {
    let game = game.clone();
    tokio::spawn(async move {
        for i in 0..n {
            game.emit("player_chat", event_data("player_chat", i));
            tokio::time::sleep(every).await;
        }
    })
}

#[tokio::test]
async fn the_relay_restarted_mid_stream_loses_no_event() {
    let relay = start_relay(relay_args(&[])).await;
    let addr = relay.addr;
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
    const N: u64 = 300;
    let producer = stream_events(&game, N, Duration::from_millis(2));
    within("the server to get part of the stream", async {
        while ids(&server).len() < 50 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    relay.stop().await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let relay = restart_relay_on(addr, &[]).await;
    producer.await.unwrap();
    game.wait_acked().await;
    within("every event at the MCP server", async {
        loop {
            if ids(&server).len() as u64 >= N {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let got = ids(&server);
    let unique: HashSet<&String> = got.iter().collect();
    assert_eq!(unique.len() as u64, N, "every event exactly once by id");
    assert_eq!(got.len() as u64, N, "no duplicates published");
    assert!(
        game.welcomes() >= 2,
        "the game reconnected to the new relay"
    );
    server.stop().await;
    game.stop();
    relay.stop().await;
}

/// A stopping relay waits up to `--drain-grace` for a connected MCP server to acknowledge what it was sent (its
/// queues die with it), and stops as soon as it has.
#[tokio::test]
async fn a_stopping_relay_waits_its_drain_grace_for_an_acknowledgement() {
    let relay = start_relay(relay_args(&["--drain-grace", "60s"])).await;
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    let mut mcp = raw_connect(&relay.url(), Some(MCP_TOKEN)).await.unwrap();
    // A client of a version that acknowledges (1.0 ones are not waited for).
    let mut hello = envelope(
        "hello",
        "h1",
        "mcp",
        json!({"clientId": "drained", "subscriptions": ["*"]}),
    );
    hello["version"] = json!("1.2");
    mcp.send(&hello).await;
    assert_eq!(mcp.recv_kind("welcome").await["type"], "welcome");
    game.emit("player_chat", event_data("player_chat", 1));
    let event = mcp.recv_kind("event").await;
    let seq = event["seq"].as_u64().unwrap();
    // The server keeps reading (so it answers the relay's pings and is not dropped as dead), and acknowledges
    // nothing for a while.
    let RawLink { mut tx, mut rx } = mcp;
    let reader = tokio::spawn(async move { while let Some(Ok(_)) = rx.next().await {} });
    relay.stop.cancel();
    // Past the 2 s the grace once was, nothing acknowledged: still waiting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !relay.task.is_finished(),
        "the relay left an unacknowledged event behind"
    );
    let ack = envelope("ack", "a1", "mcp", json!({"seq": seq}));
    tx.send(Message::text(ack.to_string())).await.unwrap();
    within("the relay to stop once acknowledged", relay.task)
        .await
        .unwrap();
    reader.abort();
    game.stop();
}

#[tokio::test]
async fn the_mcp_server_restarted_mid_stream_loses_no_event() {
    let relay = start_relay(relay_args(&[])).await;
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    let args = || {
        mc_args(&[
            "--minecraft-relay-url",
            &relay.url(),
            "--minecraft-relay-token",
            MCP_TOKEN,
            "--minecraft-client-id",
            "desk",
            "--minecraft-event-buffer",
            "10000",
        ])
    };
    let first = McpServer::start(args()).await;
    first.ready(1).await;
    const N: u64 = 300;
    let producer = stream_events(&game, N, Duration::from_millis(2));
    within("the first server to get part of the stream", async {
        while ids(&first).len() < 50 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let bridge = first.bridge.clone();
    first.stop().await;
    let before: Vec<String> = {
        let mut out = Vec::new();
        for s in bridge.events().streams() {
            out.extend(
                s.recent(100_000)
                    .into_iter()
                    .map(|e| e.data["id"].as_str().unwrap().to_owned()),
            );
        }
        out
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    let second = McpServer::start(args()).await;
    producer.await.unwrap();
    game.wait_acked().await;
    within("the rest at the new MCP server", async {
        loop {
            let all: HashSet<String> = before.iter().cloned().chain(ids(&second)).collect();
            if all.len() as u64 >= N {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let all: HashSet<String> = before.iter().cloned().chain(ids(&second)).collect();
    assert_eq!(
        all.len() as u64,
        N,
        "every event reached one of the two processes"
    );
    assert!(
        !before.is_empty() && !ids(&second).is_empty(),
        "the stream really was cut in the middle"
    );
    second.stop().await;
    game.stop();
    relay.stop().await;
}

#[tokio::test]
async fn a_client_that_reconnects_gets_the_replay_from_its_last_ack() {
    let relay = start_relay(relay_args(&[])).await;
    let (mut c, welcome) = raw_mcp(&relay.url(), MCP_TOKEN, "r", json!({})).await;
    let epoch = welcome["payload"]["epoch"].clone();
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    for n in 0..3 {
        game.emit("player_chat", event_data("player_chat", n));
    }
    let mut seqs = Vec::new();
    for _ in 0..3 {
        seqs.push(c.recv_kind("event").await["seq"].as_u64().unwrap());
    }
    assert_eq!(seqs, vec![1, 2, 3]);
    drop(c);
    game.emit("player_chat", event_data("player_chat", 3));
    game.wait_acked().await;
    let (mut c, welcome) = raw_mcp(
        &relay.url(),
        MCP_TOKEN,
        "r",
        json!({"epoch": epoch, "lastSeq": 2}),
    )
    .await;
    assert_eq!(welcome["payload"]["lastSeq"], 2);
    let e = c.recv_kind("event").await;
    assert_eq!(e["seq"], 3, "replay starts after the last acknowledged");
    assert_eq!(e["payload"]["data"]["message"], "hello 2");
    assert_eq!(c.recv_kind("event").await["seq"], 4);
    game.stop();
    relay.stop().await;
}

#[tokio::test]
async fn a_full_queue_drops_the_oldest_and_says_how_many_were_lost() {
    let relay = start_relay(relay_args(&["--message-queue-size", "5"])).await;
    let (c, _) = raw_mcp(&relay.url(), MCP_TOKEN, "slow", json!({})).await;
    drop(c);
    wait_health(relay.addr, "the client to be gone", |h| {
        h["connections"]["mcp"] == 0
    })
    .await;
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    for n in 0..20 {
        game.emit("player_chat", event_data("player_chat", n));
    }
    game.wait_acked().await;
    let h = health(relay.addr).await;
    assert_eq!(h["clients"][0]["queueDepth"], 5, "{h}");
    let (mut c, _) = raw_mcp(&relay.url(), MCP_TOKEN, "slow", json!({})).await;
    let lost = c.recv_kind("notice").await;
    assert_eq!(lost["payload"]["kind"], "lost");
    assert_eq!(lost["payload"]["lost"], 15);
    let first = c.recv_kind("event").await;
    assert_eq!(
        first["payload"]["data"]["message"], "hello 15",
        "the newest five are kept"
    );
    game.stop();
    relay.stop().await;
}

#[tokio::test]
async fn the_queue_is_bounded_in_bytes_too() {
    let relay = start_relay(relay_args(&["--message-queue-bytes", "2048"])).await;
    let (c, _) = raw_mcp(&relay.url(), MCP_TOKEN, "slow", json!({})).await;
    drop(c);
    wait_health(relay.addr, "the client to be gone", |h| {
        h["connections"]["mcp"] == 0
    })
    .await;
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    for n in 0..50 {
        game.emit(
            "player_chat",
            json!({"player": "Steve", "message": format!("{n:0>200}")}),
        );
    }
    game.wait_acked().await;
    let h = health(relay.addr).await;
    let bytes = h["clients"][0]["queueBytes"].as_u64().unwrap();
    let depth = h["clients"][0]["queueDepth"].as_u64().unwrap();
    assert!(bytes <= 2048, "{h}");
    assert!(depth > 0 && depth < 50, "{h}");
    assert_eq!(h["clients"][0]["lostTotal"].as_u64().unwrap() + depth, 50);
    game.stop();
    relay.stop().await;
}

#[tokio::test]
async fn malformed_oversize_and_wrong_version_messages_get_schema_error_on_every_link() {
    let relay = start_relay(relay_args(&["--max-message-bytes", "4096"])).await;
    let (mut mcp, _) = raw_mcp(&relay.url(), MCP_TOKEN, "m", json!({})).await;
    let mut game = raw_connect(&relay.url(), Some(GAME_TOKEN)).await.unwrap();
    game.send(&envelope(
        "hello",
        "h",
        "minecraft",
        json!({"name": "s", "instance": "i"}),
    ))
    .await;
    game.recv_kind("welcome").await;
    let good_event = |seq: u64| {
        let mut e = envelope(
            "event",
            &format!("e{seq}"),
            "minecraft",
            json!({"eventType": "player_chat", "timestamp": 1, "data": {"player": "S", "message": "m"}}),
        );
        e["seq"] = json!(seq);
        e
    };
    let bad: Vec<(String, &str)> = vec![
        ("not json".to_owned(), "message"),
        ("[1,2]".to_owned(), "message"),
        (json!({"type": "event"}).to_string(), "version"),
        (
            envelope("nonsense", "x", "minecraft", json!({})).to_string(),
            "type",
        ),
        (
            {
                let mut e = good_event(1);
                e["payload"]["eventType"] = json!("explode");
                e.to_string()
            },
            "payload.eventType",
        ),
        (
            {
                let mut e = good_event(1);
                e["payload"]["data"] = json!({"player": "S"});
                e.to_string()
            },
            "payload.data.message",
        ),
        (
            {
                let mut e = good_event(1);
                e["version"] = json!("one");
                e.to_string()
            },
            "version",
        ),
        (
            {
                let mut e = good_event(1);
                e["payload"]["data"]["message"] = json!("x".repeat(5000));
                e.to_string()
            },
            "message",
        ),
    ];
    let mut seq = 0;
    for (text, field) in &bad {
        game.send_text(text.clone()).await;
        let err = game.recv_kind("error").await;
        assert_eq!(err["payload"]["code"], "SCHEMA_ERROR", "{text:.80}");
        assert_eq!(err["payload"]["details"]["field"], *field, "{text:.80}");
        // The next message goes through.
        seq += 1;
        game.send(&good_event(seq)).await;
        assert_eq!(game.recv_kind("ack").await["payload"]["seq"], seq);
        assert_eq!(mcp.recv_kind("event").await["id"], format!("e{seq}"));
    }
    // A newer major version: warned, answered, and processed when it fits 1.0 (graceful degradation).
    seq += 1;
    let mut v2 = good_event(seq);
    v2["version"] = json!("2.0");
    game.send(&v2).await;
    let warn = game.recv_kind("error").await;
    assert_eq!(warn["payload"]["code"], "SCHEMA_ERROR");
    assert_eq!(warn["payload"]["details"]["degraded"], true);
    assert_eq!(mcp.recv_kind("event").await["id"], format!("e{seq}"));
    // The MCP link: the same refusals, and the next command works.
    for text in [
        "{",
        "{\"version\":\"1.0\"}",
        &envelope("command", "c", "mcp", json!({"args": {}})).to_string(),
    ] {
        mcp.send_text(text.to_owned()).await;
        assert_eq!(
            mcp.recv_kind("error").await["payload"]["code"],
            "SCHEMA_ERROR"
        );
    }
    mcp.send(&envelope(
        "subscribe",
        "s1",
        "mcp",
        json!({"events": ["player_chat"]}),
    ))
    .await;
    assert_eq!(
        mcp.recv_kind("notice").await["payload"]["kind"],
        "subscribed"
    );
    let h = health(relay.addr).await;
    assert_eq!(h["connections"]["games"], 1, "nothing crashed: {h}");
    relay.stop().await;
}

#[tokio::test]
async fn a_silent_peer_is_dropped_by_the_heartbeat() {
    let relay = start_relay(relay_args(&[])).await;
    // Says hello, then never reads again: pings go unanswered.
    let (c, _) = raw_mcp(&relay.url(), MCP_TOKEN, "silent", json!({})).await;
    wait_health(relay.addr, "the relay to see the client", |h| {
        h["connections"]["mcp"] == 1
    })
    .await;
    wait_health(relay.addr, "the relay to drop the silent client", |h| {
        h["connections"]["mcp"] == 0
    })
    .await;
    drop(c);
    relay.stop().await;
}

#[tokio::test]
async fn a_client_over_its_rate_gets_server_error_rate_limited() {
    let relay = start_relay(relay_args(&["--mcp-rate", "1"])).await;
    let (mut c, _) = raw_mcp(&relay.url(), MCP_TOKEN, "fast", json!({})).await;
    // Heartbeats and acks are control traffic, never counted (issue 22): a few of them first change nothing.
    for i in 0..5 {
        c.send(&envelope("heartbeat", &format!("hb{i}"), "mcp", json!({})))
            .await;
    }
    for i in 0..5 {
        c.send(&envelope(
            "subscribe",
            &format!("s{i}"),
            "mcp",
            json!({"events": ["*"]}),
        ))
        .await;
    }
    let e = c.recv_kind("error").await;
    assert_eq!(
        e["id"], "s2",
        "the third subscribe (burst 2), not a heartbeat"
    );
    assert_eq!(e["payload"]["code"], "SERVER_ERROR");
    assert_eq!(e["payload"]["details"]["reason"], "rate_limited");
    relay.stop().await;
}

#[tokio::test]
async fn health_and_metrics_show_connections_and_queues() {
    let relay = start_relay(relay_args(&[])).await;
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    let (_c, _) = raw_mcp(&relay.url(), MCP_TOKEN, "watcher", json!({})).await;
    let h = health(relay.addr).await;
    assert_eq!(h["game_connected"], true);
    assert_eq!(h["connections"], json!({"games": 1, "mcp": 1}));
    assert_eq!(h["games"][0]["name"], "survival");
    assert!(h["clients"][0]["queueDepth"].is_number());
    let m = mcp_testkit::http_get(&format!("http://{}/metrics", relay.addr)).await;
    assert!(
        m.contains("minecraft_relay_connections{role=\"minecraft\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("minecraft_relay_queue_depth{client=\"0/watcher\"}"),
        "{m}"
    );
    game.stop();
    relay.stop().await;
}

#[tokio::test]
async fn the_mcp_server_answers_a_malformed_relay_message_with_schema_error_and_reads_on() {
    use futures::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    // A stand-in relay that says welcome, then sends garbage and an invalid event, then a good event.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let fake = tokio::spawn(async move {
        let mut ws = welcome_one_mcp_server(listener).await;
        let mut replies = Vec::new();
        for bad in [
            "{nope",
            r#"{"version":"1.0","type":"event","id":"x","timestamp":1,"source":"relay","payload":{"eventType":"boom"}}"#,
        ] {
            ws.send(Message::text(bad)).await.unwrap();
            replies.push(next_json(&mut ws).await);
        }
        let good = json!({"version": "1.0", "type": "event", "id": "ok1", "timestamp": 1, "source": "minecraft",
            "game": "g", "seq": 1, "payload": {"eventType": "player_chat", "timestamp": 1, "data": {"player": "S", "message": "after"}}});
        ws.send(Message::text(good.to_string())).await.unwrap();
        // Its ack proves the MCP server read on.
        let ack = next_json(&mut ws).await;
        (replies, ack)
    });
    let server = mcp_server_dialling(addr).await;
    let (replies, ack) = within("the stand-in relay's exchange", fake).await.unwrap();
    for r in &replies {
        assert_eq!(r["type"], "error");
        assert_eq!(r["payload"]["code"], "SCHEMA_ERROR");
        assert_eq!(r["source"], "mcp");
    }
    assert_eq!(ack["type"], "ack");
    assert_eq!(ack["payload"]["seq"], 1);
    let (events, _) = server.poll("player_chat", 0).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["data"]["data"]["message"], "after");
    server.stop().await;
}

/// The game list a client holds after `msg`: a list with a higher `gamesVersion` replaces it (PROTOCOL.md §4.6).
fn fold_games(held: &mut (Vec<String>, u64), msg: &Value) {
    if let (Some(games), Some(version)) = (
        msg["payload"]["games"].as_array(),
        msg["payload"]["gamesVersion"].as_u64(),
    ) && version >= held.1
    {
        held.0 = games
            .iter()
            .map(|g| g.as_str().unwrap().to_owned())
            .collect();
        held.1 = version;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_mcp_client_is_welcomed_first_and_ends_with_the_relays_game_list() {
    // Games and MCP clients connect at once, on several threads, round after round. Before welcomes were
    // ordered, about one client in ten heard a `game_connected` notice before its welcome, ignored it, and
    // kept a list without that game. 120 games and 120 clients stay linked from 127.0.0.1, past the default
    // cap per address.
    let relay = start_relay(relay_args(&["--relay-max-connections-per-ip", "1024"])).await;
    let mut games = Vec::new();
    let mut expected = Vec::new();
    for round in 0..20 {
        let mut clients = Vec::new();
        for c in 0..6 {
            let url = relay.url();
            clients.push(tokio::spawn(async move {
                let mut link = raw_connect(&url, Some(MCP_TOKEN)).await.unwrap();
                let hello = json!({"clientId": format!("c{round}-{c}")});
                link.send(&envelope("hello", "h", "mcp", hello)).await;
                let first = link.recv().await;
                (link, first)
            }));
        }
        for g in 0..6 {
            let name = format!("g{round:02}-{g}");
            games.push(FakeGame::start(&relay.url(), &name));
            expected.push(name);
        }
        expected.sort();
        for g in &games {
            g.wait_connected(1).await;
        }
        for client in clients {
            let (mut link, first) = client.await.unwrap();
            assert_eq!(
                first["type"], "welcome",
                "round {round}: the relay's first message"
            );
            let mut held = (Vec::new(), 0);
            fold_games(&mut held, &first);
            within("the client's list to match the relay's", async {
                while held.0 != expected {
                    fold_games(&mut held, &link.recv().await);
                }
            })
            .await;
        }
    }
    for g in &games {
        g.stop();
    }
    relay.stop().await;
}

#[tokio::test]
async fn the_mcp_server_keeps_the_newest_game_list_when_notices_arrive_out_of_order() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let msg = |kind: &str, id: &str, payload: Value| {
        json!({"version": "1.0", "type": kind, "id": id, "timestamp": 1, "source": "relay", "payload": payload})
            .to_string()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let script = [
        msg(
            "welcome",
            "w",
            json!({"role": "mcp", "epoch": "e1", "lastSeq": 0, "games": ["a"], "gamesVersion": 3}),
        ),
        msg(
            "notice",
            "n5",
            json!({"kind": "game_connected", "game": "b", "games": ["a", "b"], "gamesVersion": 5}),
        ),
        msg(
            "notice",
            "n6",
            json!({"kind": "game_connected", "game": "c", "games": ["c", "b", "a"], "gamesVersion": 6}),
        ),
        // Older news, delivered last: b's earlier departure must not undo what version 6 said.
        msg(
            "notice",
            "n4",
            json!({"kind": "game_disconnected", "game": "b", "games": ["a"], "gamesVersion": 4}),
        ),
    ];
    let event = json!({"version": "1.0", "type": "event", "id": "e1", "timestamp": 1, "source": "minecraft",
        "game": "a", "seq": 1, "payload": {"eventType": "player_chat", "timestamp": 1, "data": {"player": "S", "message": "x"}}});
    let (read_past, held) = tokio::sync::oneshot::channel();
    let fake = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(socket).await.unwrap();
        while let Some(Ok(m)) = ws.next().await {
            if matches!(m, Message::Text(_)) {
                break;
            }
        }
        for m in script {
            ws.send(Message::text(m)).await.unwrap();
        }
        // The event's ack proves the MCP server read every notice before it.
        ws.send(Message::text(event.to_string())).await.unwrap();
        while let Some(Ok(m)) = ws.next().await {
            if let Message::Text(t) = m
                && serde_json::from_str::<Value>(&t).unwrap()["type"] == "ack"
            {
                break;
            }
        }
        let _ = read_past.send(());
        // Held open until the test ends: a dropped link would clear the list.
        std::future::pending::<()>().await;
    });
    let server = mcp_server_dialling(addr).await;
    within("the stand-in relay's ack", held).await.unwrap();
    let status = ok_of(&call(&server.client, "status", json!({})).await);
    assert_eq!(status["games"], json!(["a", "b", "c"]));
    fake.abort();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_game_hears_its_welcome_before_any_command_routed_to_it() {
    // An MCP server keeps commanding a game that is about to connect; the game must still hear `welcome`
    // first, or an adapter waiting for it would drop the command.
    let relay = start_relay(relay_args(&["--mcp-rate", "100000"])).await;
    for round in 0..20 {
        let game = format!("early{round}");
        let (mut mcp, _) = raw_mcp(&relay.url(), MCP_TOKEN, &format!("m{round}"), json!({})).await;
        let stop = tokio_util::sync::CancellationToken::new();
        let spam = tokio::spawn({
            let (stop, game) = (stop.clone(), game.clone());
            async move {
                let mut n = 0u64;
                while !stop.is_cancelled() {
                    n += 1;
                    let cmd = info_command(&format!("c{n}"), &game);
                    mcp.send(&cmd).await;
                    tokio::task::yield_now().await;
                }
            }
        });
        let mut link = raw_connect(&relay.url(), Some(GAME_TOKEN)).await.unwrap();
        let hello = json!({"name": game, "instance": format!("i{round}")});
        link.send(&envelope("hello", "h", "minecraft", hello)).await;
        let first = link.recv().await;
        assert_eq!(
            first["type"], "welcome",
            "round {round}: the game's first message"
        );
        let second = link.recv_kind("command").await;
        assert_eq!(second["payload"]["command"], "get_server_info");
        stop.cancel();
        spam.await.unwrap();
    }
    relay.stop().await;
}

/// A raw game adapter named `name`, welcomed; the relay makes a game routable as it queues its welcome
/// (PROTOCOL.md §3), which is checked here because the tests below rely on it.
async fn raw_game(relay: &TestRelay, name: &str, instance: &str) -> RawLink {
    let mut link = raw_connect(&relay.url(), Some(GAME_TOKEN)).await.unwrap();
    let hello = json!({"name": name, "instance": instance});
    link.send(&envelope("hello", "h", "minecraft", hello)).await;
    assert_eq!(link.recv().await["type"], "welcome");
    let routable = relay
        .relay
        .lock()
        .games
        .get(name)
        .is_some_and(|g| g.instance == instance);
    assert!(routable, "{name} is routable once welcomed");
    link
}

/// An MCP server's `get_server_info` command `id`, for the game named `game`.
fn info_command(id: &str, game: &str) -> Value {
    let mut cmd = envelope(
        "command",
        id,
        "mcp",
        json!({"command": "get_server_info", "args": {}}),
    );
    cmd["game"] = json!(game);
    cmd
}

/// A game's answer to `command` (as it arrived from the relay).
fn answer(command: &Value, text: &str) -> Value {
    let id = command["id"].as_str().unwrap();
    envelope(
        "response",
        id,
        "minecraft",
        json!({"success": true, "data": {"said": text}}),
    )
}

#[tokio::test]
async fn a_game_cannot_answer_a_command_sent_to_another_game() {
    let relay = start_relay(relay_args(&[])).await;
    let mut x = raw_game(&relay, "x", "ix").await;
    let mut y = raw_game(&relay, "y", "iy").await;
    let (mut mcp, _) = raw_mcp(&relay.url(), MCP_TOKEN, "asker", json!({})).await;
    let cmd = info_command("c1", "x");
    mcp.send(&cmd).await;
    let routed = x.recv_kind("command").await;
    // y knows (or guesses) the relay's id and answers first: ignored.
    y.send(&answer(&routed, "forged by y")).await;
    x.send(&answer(&routed, "from x")).await;
    let r = mcp.recv_kind("response").await;
    assert_eq!(r["id"], "c1");
    assert_eq!(r["game"], "x");
    assert_eq!(r["payload"]["data"]["said"], "from x");
    relay.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_game_that_reconnects_keeps_the_commands_sent_to_its_new_link() {
    // The old link's teardown runs after the new link took the name; it used to fail every command pending
    // for that name, including the ones the new link was about to answer. The old link floods events first
    // so its teardown lags behind the new link's welcome.
    let relay = start_relay(relay_args(&[])).await;
    let (mut mcp, _) = raw_mcp(
        &relay.url(),
        MCP_TOKEN,
        "asker",
        json!({"subscriptions": []}),
    )
    .await;
    for round in 0..20 {
        // The same adapter process (instance) redialling: another instance would be refused the name while
        // the old link lives (issue 22).
        let mut old = raw_game(&relay, "x", &format!("g{round}")).await;
        for seq in 1..=300u64 {
            let mut ev = envelope(
                "event",
                &format!("e{seq}"),
                "minecraft",
                json!({"eventType": "player_chat", "timestamp": 1, "data": {"player": "p", "message": "m"}}),
            );
            ev["seq"] = json!(seq);
            old.send(&ev).await;
        }
        let mut new = raw_game(&relay, "x", &format!("g{round}")).await;
        let cmd = info_command(&format!("c{round}"), "x");
        mcp.send(&cmd).await;
        let routed = new.recv_kind("command").await;
        tokio::time::sleep(Duration::from_millis(30)).await;
        new.send(&answer(&routed, "new link")).await;
        let r = mcp.recv_kind("response").await;
        assert_eq!(r["id"], format!("c{round}"));
        assert_eq!(
            r["payload"]["success"], true,
            "round {round}: the new link's answer, not the old link's end: {r}"
        );
        drop(old);
    }
    relay.stop().await;
}
