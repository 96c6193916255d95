#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! A tool call's answer is not an event: it used to share its MCP server's queue with the events and go with
//! them, oldest first, when the queue's bound was hit. The relay had already forgotten the command, so no
//! TIMEOUT followed either: the call just never ended. Answers are now kept apart from the events' bound.

use crate::support;

use bridge_minecraft::relay::queue::Queue;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use support::*;

fn event_body(n: u64) -> Arc<str> {
    Arc::from(format!(
        r#"{{"version":"1.0","type":"event","id":"e{n}","timestamp":1,"source":"minecraft","payload":{{}}}}"#
    ))
}

#[test]
fn the_events_bound_drops_events_and_never_an_answer() {
    let mut q = Queue::new(4, usize::MAX);
    q.push_shared(event_body(1));
    let answer =
        q.push_response(|seq| format!(r#"{{"seq":{seq},"type":"response","id":"call-1"}}"#));
    for n in 2..=20 {
        q.push_shared(event_body(n));
    }
    let kept = q.after(0, usize::MAX);
    assert!(
        kept.iter().any(|i| i.seq == answer),
        "the answer is still queued: {:?}",
        kept.iter().map(|i| i.text()).collect::<Vec<_>>()
    );
    assert_eq!(kept.len(), 5, "four events and the answer");
    assert_eq!(q.take_lost(), 16, "the sixteen oldest events were lost");
}

#[test]
fn answers_have_a_byte_bound_of_their_own() {
    let mut q = Queue::new(1000, 10_000);
    let big = "y".repeat(3000);
    for i in 0..10 {
        q.push_response(|seq| {
            format!(r#"{{"seq":{seq},"type":"response","id":"c{i}","p":"{big}"}}"#)
        });
    }
    assert!(q.bytes() <= 10_000, "{} bytes held", q.bytes());
    assert_eq!(
        q.take_lost(),
        7,
        "the oldest answers past the bound are counted lost"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_waiting_for_its_mcp_server_survives_a_flood_of_events() {
    let relay = start_relay(relay_args(&["--message-queue-size", "50"])).await;
    let (mut game, welcome) = game_hello(&relay.url(), "survival", "i1").await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");

    let hello = envelope("hello", "h", "mcp", json!({"clientId": "desk"}));
    let mut mcp = raw_connect(&relay.url(), Some(MCP_TOKEN)).await.unwrap();
    mcp.send(&hello).await;
    assert_eq!(mcp.recv().await["type"], "welcome");
    mcp.send(&envelope(
        "command",
        "call-1",
        "mcp",
        json!({"command": "get_online_players", "args": {}}),
    ))
    .await;
    let command = game.recv_kind("command").await;

    // The MCP server goes away before the answer comes (a restart, a network blip): its queue keeps what
    // arrives for it, the answer first, then a flood of events past the queue's bound of 50.
    drop(mcp);
    within("the relay to see the MCP server gone", async {
        loop {
            let gone = relay
                .relay
                .lock()
                .clients
                .values()
                .all(|c| c.live.is_none());
            if gone {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let id = command["id"].as_str().unwrap();
    game.send(&envelope(
        "response",
        id,
        "minecraft",
        json!({"success": true, "data": {"players": ["Steve"]}}),
    ))
    .await;
    const EVENTS: u64 = 200;
    for n in 1..=EVENTS {
        let mut ev = envelope(
            "event",
            &format!("e{n}"),
            "minecraft",
            json!({"eventType": "player_chat", "timestamp": now(), "data": event_data("player_chat", n)}),
        );
        ev["seq"] = json!(n);
        game.send(&ev).await;
    }
    loop {
        let ack = game.recv_kind("ack").await;
        if ack["payload"]["seq"].as_u64() >= Some(EVENTS) {
            break;
        }
    }

    // Back under the same client id: what its queue held, the answer among it.
    let mut mcp = raw_connect(&relay.url(), Some(MCP_TOKEN)).await.unwrap();
    mcp.send(&hello).await;
    assert_eq!(mcp.recv().await["type"], "welcome");
    let mut answer: Option<Value> = None;
    let mut lost = 0;
    loop {
        let m = mcp.recv().await;
        match m["type"].as_str() {
            Some("response") => answer = Some(m),
            Some("notice") if m["payload"]["kind"] == "lost" => {
                lost += m["payload"]["lost"].as_u64().unwrap()
            }
            Some("event") if m["id"] == format!("e{EVENTS}") => break,
            _ => {}
        }
    }
    let answer = answer.expect("the answer to call-1 was replayed with the events");
    assert_eq!(answer["id"], "call-1", "{answer}");
    assert_eq!(answer["payload"]["success"], true, "{answer}");
    assert_eq!(lost, EVENTS - 50, "only events were dropped");
    relay.stop().await;
}
