#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue 22 item 3: rate limits per token and per game as well as per connection. More client ids of one
//! token do not buy more rate; every MCP server together cannot flood one game with commands; every game
//! together cannot flood the relay with events. Acks and heartbeats are never counted; every refusal names
//! its limit, and events over a limit are counted and reported to the clients that missed them.

use crate::support;

use serde_json::{Value, json};
use std::time::Duration;
use support::*;

async fn raw_mcp(url: &str, token: &str, client_id: &str) -> RawLink {
    let mut link = raw_connect(url, Some(token)).await.unwrap();
    link.send(&envelope(
        "hello",
        "h",
        "mcp",
        json!({"clientId": client_id}),
    ))
    .await;
    link.recv_kind("welcome").await;
    link
}

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

/// `n` responses from `link`, keyed by id.
async fn responses(link: &mut RawLink, n: usize) -> Vec<Value> {
    let mut out = Vec::new();
    while out.len() < n {
        out.push(link.recv_kind("response").await);
    }
    out
}

/// (answered, refused) among `rs`; every refusal must be a rate limit of `scope`.
fn split(rs: &[Value], scope: &str, limit: u64, flag: &str) -> (usize, usize) {
    let mut ok = 0;
    let mut refused = 0;
    for r in rs {
        if r["payload"]["success"] == true {
            ok += 1;
            continue;
        }
        let e = &r["payload"]["error"];
        assert_eq!(e["code"], "SERVER_ERROR", "{r}");
        assert_eq!(e["details"]["reason"], "rate_limited", "{r}");
        assert_eq!(e["details"]["scope"], scope, "{r}");
        assert_eq!(e["details"]["limit"], limit, "{r}");
        assert!(e["details"]["retryAfterMs"].as_u64().unwrap() >= 1, "{r}");
        assert!(
            e["message"].as_str().unwrap().contains(flag),
            "the refusal names {flag}: {r}"
        );
        refused += 1;
    }
    (ok, refused)
}

#[tokio::test]
async fn every_link_of_a_token_together_stays_within_the_token_rate() {
    // Each link may send 1000/s; the token together 5/s (bursts of 10).
    let relay = start_relay(relay_args(&["--mcp-rate", "1000", "--mcp-token-rate", "5"])).await;
    let game = FakeGame::start(&relay.url(), "alpha");
    game.wait_connected(1).await;
    let mut a = raw_mcp(&relay.url(), MCP_TOKEN, "a").await;
    let mut b = raw_mcp(&relay.url(), MCP_TOKEN, "b").await;
    let mut other = raw_mcp(&relay.url(), READONLY_TOKEN, "r").await;
    // Control traffic first: 200 acks and heartbeats, none counted, so the token's burst is still whole.
    for i in 0..100 {
        a.send(&envelope("ack", &format!("k{i}"), "mcp", json!({"seq": 0})))
            .await;
        b.send(&envelope("heartbeat", &format!("hb{i}"), "mcp", json!({})))
            .await;
    }
    for i in 0..15 {
        a.send(&info_command(&format!("a{i}"), "alpha")).await;
        b.send(&info_command(&format!("b{i}"), "alpha")).await;
    }
    let mut rs = responses(&mut a, 15).await;
    rs.extend(responses(&mut b, 15).await);
    let (ok, refused) = split(&rs, "token", 5, "--mcp-token-rate");
    assert_eq!(ok + refused, 30, "every command answered");
    assert!(ok >= 10, "the token's burst of 10 went through: {ok}");
    assert!(refused > 0, "two links of one token share its 5/s");
    assert_eq!(
        game.commands().len(),
        ok,
        "only the admitted reached the game"
    );
    // Another token has its own budget.
    for i in 0..5 {
        other.send(&info_command(&format!("r{i}"), "alpha")).await;
    }
    let rs = responses(&mut other, 5).await;
    assert_eq!(split(&rs, "token", 5, "--mcp-token-rate"), (5, 0));
    assert_eq!(
        relay
            .metric("minecraft_relay_rate_limited_by_scope_total{scope=\"token\"} ")
            .await,
        refused as u64
    );
    assert_eq!(
        relay
            .metric("minecraft_relay_rate_limited_by_scope_total{scope=\"connection\"} ")
            .await,
        0
    );
    assert_eq!(
        relay
            .metric("minecraft_relay_limit{bound=\"mcp_token_rate\"} ")
            .await,
        5
    );
    game.stop();
    relay.stop().await;
}

#[tokio::test]
async fn every_mcp_server_together_stays_within_one_games_command_rate() {
    let relay = start_relay(relay_args(&[
        "--mcp-rate",
        "1000",
        "--mcp-token-rate",
        "1000",
        "--game-command-rate",
        "5",
    ]))
    .await;
    let alpha = FakeGame::start(&relay.url(), "alpha");
    let beta = FakeGame::start(&relay.url(), "beta");
    alpha.wait_connected(1).await;
    beta.wait_connected(1).await;
    // Two tokens, so neither the link nor the token limit is what refuses.
    let mut a = raw_mcp(&relay.url(), MCP_TOKEN, "a").await;
    let mut r = raw_mcp(&relay.url(), READONLY_TOKEN, "r").await;
    for i in 0..15 {
        a.send(&info_command(&format!("a{i}"), "alpha")).await;
        r.send(&info_command(&format!("r{i}"), "alpha")).await;
    }
    let mut rs = responses(&mut a, 15).await;
    rs.extend(responses(&mut r, 15).await);
    let (ok, refused) = split(&rs, "game", 5, "--game-command-rate");
    assert_eq!(ok + refused, 30, "every command answered");
    assert!(ok >= 10, "the game's burst of 10 went through: {ok}");
    assert!(refused > 0, "two MCP servers share one game's 5/s");
    assert!(
        rs.iter()
            .filter(|r| r["payload"]["success"] == false)
            .all(|r| r["payload"]["error"]["details"]["game"] == "alpha"),
        "each refusal names the game"
    );
    assert_eq!(
        alpha.commands().len(),
        ok,
        "only the admitted reached alpha"
    );
    // Another game has its own budget.
    for i in 0..5 {
        a.send(&info_command(&format!("b{i}"), "beta")).await;
    }
    let rs = responses(&mut a, 5).await;
    assert_eq!(split(&rs, "game", 5, "--game-command-rate"), (5, 0));
    assert_eq!(beta.commands().len(), 5);
    assert_eq!(
        relay
            .metric("minecraft_relay_rate_limited_by_scope_total{scope=\"game\"} ")
            .await,
        refused as u64
    );
    alpha.stop();
    beta.stop();
    relay.stop().await;
}

#[tokio::test]
async fn every_game_together_stays_within_the_games_event_rate_and_the_loss_is_reported() {
    // Each game's link may send 100 000/s; every game together 50/s (bursts of 100).
    let relay = start_relay(relay_args(&[
        "--game-rate",
        "100000",
        "--games-event-rate",
        "50",
    ]))
    .await;
    let alpha = FakeGame::start(&relay.url(), "alpha");
    let beta = FakeGame::start(&relay.url(), "beta");
    alpha.wait_connected(1).await;
    beta.wait_connected(1).await;
    let server = McpServer::linked(&relay, MCP_TOKEN, &["--minecraft-event-buffer", "10000"]).await;
    server.ready(2).await;
    const EACH: u64 = 300;
    for i in 0..EACH {
        alpha.emit("player_chat", event_data("player_chat", i));
        beta.emit("player_chat", event_data("player_chat", i));
    }
    let n = 2 * EACH;
    within("the MCP server to hear of every event or its loss", async {
        loop {
            let s: Value = ok_of(&call(&server.client, "status", json!({})).await);
            let got = s["events_received"].as_u64().unwrap();
            let lost = s["lost_total"].as_u64().unwrap();
            if got + lost >= n {
                let refused = relay
                    .metric("minecraft_relay_events_rate_limited_total ")
                    .await;
                let by_games = relay
                    .metric("minecraft_relay_rate_limited_by_scope_total{scope=\"games\"} ")
                    .await;
                assert!(refused > 0, "two games together went over 50/s");
                assert_eq!(by_games, refused, "all refused at the games' limit");
                assert_eq!(lost, refused, "told exactly how many it missed: {s}");
                assert_eq!(got + lost, n, "{s}");
                assert!(got >= 100, "the burst of 100 went through: {s}");
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    server.stop().await;
    alpha.stop();
    beta.stop();
    relay.stop().await;
}

#[tokio::test]
async fn a_games_answers_are_never_refused_at_its_rate_limit() {
    // A game over its limit with its own events used to have its answers refused too: the tool call then
    // timed out although the game had answered.
    let relay = start_relay(relay_args(&["--game-rate", "5", "--command-timeout", "3s"])).await;
    let game = FakeGame::start(&relay.url(), "alpha");
    game.wait_connected(1).await;
    let mut a = raw_mcp(&relay.url(), MCP_TOKEN, "a").await;
    for round in 0..5 {
        for i in 0..50 {
            game.emit("player_chat", event_data("player_chat", i));
        }
        a.send(&info_command(&format!("c{round}"), "alpha")).await;
        let r = a.recv_kind("response").await;
        assert_eq!(r["payload"]["success"], true, "round {round}: {r}");
    }
    assert!(
        relay
            .metric("minecraft_relay_events_rate_limited_total ")
            .await
            > 0,
        "the events did go over the limit"
    );
    game.stop();
    relay.stop().await;
}
