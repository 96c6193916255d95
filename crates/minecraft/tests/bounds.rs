#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue 22 item 4: every queue of the relay is bounded. 100 client ids from one token (the read-only one
//! too) used to cost 812 MiB, and each queue held its own copy of every event.

use crate::support;

use serde_json::Value;
use std::time::Duration;
use support::*;

async fn wait_queued(relay: &TestRelay, client: &str, n: usize) {
    within("events queued", async {
        loop {
            let held = relay
                .relay
                .lock()
                .clients
                .iter()
                .find(|((_, id), _)| id == client)
                .map_or(0, |(_, c)| c.queue.len());
            if held >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_flood_of_client_ids_holds_at_most_the_cap_and_an_evicted_client_is_told_what_it_lost() {
    let relay = start_relay(relay_args(&["--clients-per-token", "4"])).await;
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    // c0 subscribes, leaves, and 3 events are queued for it while it is away.
    let (c0, w) = mcp_hello(&relay.url(), READONLY_TOKEN, "c0").await;
    assert_eq!(w["type"], "welcome");
    drop(c0);
    tokio::time::sleep(Duration::from_millis(100)).await;
    for i in 0..3 {
        game.emit("player_chat", event_data("player_chat", i));
    }
    wait_queued(&relay, "c0", 3).await;
    // 99 more ids from the same (read-only) token, each gone after its welcome.
    for i in 1..100 {
        let (link, w) = mcp_hello(&relay.url(), READONLY_TOKEN, &format!("c{i}")).await;
        assert_eq!(w["type"], "welcome", "c{i}: {w}");
        drop(link);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let held = relay
        .relay
        .lock()
        .clients
        .keys()
        .filter(|(t, _)| *t == 1)
        .count();
    assert_eq!(held, 4, "at most --clients-per-token queues");
    assert_eq!(
        relay.metric("minecraft_relay_queues_evicted_total").await,
        96
    );
    assert_eq!(
        relay
            .metric("minecraft_relay_queue_evicted_messages_total")
            .await,
        3
    );
    // c0 (the least recently used, dropped first) comes back: it hears it lost 3.
    let (mut c0, w) = mcp_hello(&relay.url(), READONLY_TOKEN, "c0").await;
    assert_eq!(w["type"], "welcome");
    let lost = c0.recv_kind("notice").await;
    assert_eq!(lost["payload"]["kind"], "lost");
    assert_eq!(lost["payload"]["reason"], "evicted");
    assert_eq!(lost["payload"]["lost"], 3);
    // With all 4 ids connected a fifth is refused, naming the limit.
    let mut live = vec![c0];
    for i in 1..4 {
        live.push(
            mcp_hello(&relay.url(), READONLY_TOKEN, &format!("live{i}"))
                .await
                .0,
        );
    }
    let (_, refused) = mcp_hello(&relay.url(), READONLY_TOKEN, "one-too-many").await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["payload"]["details"]["reason"], "too_many_clients");
    assert_eq!(refused["payload"]["details"]["limit"], 4);
    assert!(
        refused["payload"]["message"]
            .as_str()
            .unwrap()
            .contains("--clients-per-token 4")
    );
    let metrics = mcp_testkit::http_get(&format!("http://{}/metrics", relay.addr)).await;
    for bound in [
        "queue_messages",
        "queue_bytes",
        "clients_per_token",
        "token_queue_bytes",
        "max_message_bytes",
        "mcp_rate",
        "game_rate",
        "link_outgoing_bytes",
        "link_incoming_bytes",
    ] {
        assert!(
            metrics.contains(&format!("minecraft_relay_limit{{bound=\"{bound}\"}}")),
            "{bound} in /metrics"
        );
    }
    assert!(metrics.contains("minecraft_relay_limit{bound=\"clients_per_token\"} 4"));
    game.stop();
    relay.stop().await;
}

#[tokio::test]
async fn each_event_is_held_once_whatever_the_number_of_queues() {
    let relay = start_relay(relay_args(&["--clients-per-token", "64"])).await;
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    let mut silent = Vec::new();
    for i in 0..50 {
        silent.push(mcp_hello(&relay.url(), MCP_TOKEN, &format!("s{i}")).await.0);
    }
    game.emit("player_chat", event_data("player_chat", 1));
    for i in 0..50 {
        wait_queued(&relay, &format!("s{i}"), 1).await;
    }
    let items: Vec<_> = relay
        .relay
        .lock()
        .clients
        .values()
        .map(|c| c.queue.after(0, usize::MAX).remove(0))
        .collect();
    assert_eq!(items.len(), 50);
    assert!(
        items.iter().all(|i| i.shares_body_with(&items[0])),
        "one shared body"
    );
    // Each still reads as its own message with its own seq.
    let v: Value = serde_json::from_str(&items[0].text()).unwrap();
    assert_eq!(v["seq"], 1);
    assert_eq!(v["game"], "survival");
    assert_eq!(v["payload"]["eventType"], "player_chat");
    game.stop();
    relay.stop().await;
}

#[tokio::test]
async fn a_tokens_queues_together_stay_within_its_byte_bound_lru_first() {
    let relay = start_relay(relay_args(&["--token-queue-bytes", "30000"])).await;
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    for i in 0..3 {
        let (link, _) = mcp_hello(&relay.url(), MCP_TOKEN, &format!("g{i}")).await;
        drop(link);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_live, _) = mcp_hello(&relay.url(), MCP_TOKEN, "live").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    for i in 0..300 {
        game.emit("player_chat", event_data("player_chat", i));
    }
    game.wait_acked().await;
    let bytes: usize = relay
        .relay
        .lock()
        .clients
        .iter()
        .filter(|((t, _), _)| *t == 0)
        .map(|(_, c)| c.queue.bytes())
        .sum();
    assert!(bytes <= 30000, "{bytes} bytes held for the token");
    // The three disconnected queues went first (oldest gone first), the live one was kept.
    assert_eq!(
        relay.metric("minecraft_relay_queues_evicted_total").await,
        3
    );
    let ids: Vec<String> = relay
        .relay
        .lock()
        .clients
        .keys()
        .map(|k| k.1.clone())
        .collect();
    assert_eq!(ids, vec!["live".to_owned()]);
    game.stop();
    relay.stop().await;
}
