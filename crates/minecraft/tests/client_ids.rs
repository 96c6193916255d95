#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Two MCP servers under one token and one client id (both left at the default `mcp-bridges`) used to replace
//! each other at the relay forever (22 replacements in 40 s, most calls CONNECTION_ERROR), and one got the
//! other's results: the relay routes an answer by (token, clientId) and both numbered their commands 1, 2, 3.
//! Now a live link keeps its client id and a second is refused with a clear error, like a game name in use; a
//! link that closed or went silent is taken over; and an answer meant for another process never resolves a
//! call of this one.

use crate::support;

use serde_json::{Value, json};
use std::time::Duration;
use support::*;

const IN_USE: &str = "another MCP server is connected with client id mcp-bridges";

fn assert_in_use(refused: &Value, client_id: &str) {
    assert_eq!(refused["type"], "error", "a refusal, not: {refused}");
    assert_eq!(refused["payload"]["code"], "PERMISSION_DENIED");
    assert_eq!(refused["payload"]["details"]["reason"], "client_id_in_use");
    assert_eq!(refused["payload"]["details"]["clientId"], client_id);
    let message = refused["payload"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "another MCP server is connected with client id {client_id}"
        )) && message.contains("--minecraft-client-id")
            && message.contains("MINECRAFT_CLIENT_ID"),
        "names the id and the fix: {message}"
    );
}

#[tokio::test]
async fn a_second_mcp_server_under_a_connected_client_id_is_refused_and_the_first_keeps_working() {
    let relay = start_relay(relay_args(&[])).await;
    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;
    let a = McpServer::linked(&relay, MCP_TOKEN, &[]).await;
    a.ready(1).await;

    // A link under A's id (the default) is refused, told which id and how to fix it.
    let (_raw, refused) = mcp_hello(&relay.url(), MCP_TOKEN, "mcp-bridges").await;
    assert_in_use(&refused, "mcp-bridges");
    assert_eq!(
        relay.metric("minecraft_relay_client_id_in_use_total").await,
        1,
        "/metrics counts the refusal"
    );

    // A second MCP server left at the default shows the refusal in `status` and keeps redialling.
    let b = McpServer::linked(&relay, MCP_TOKEN, &[]).await;
    within("B to be refused, and to retry", async {
        loop {
            let s = ok_of(&call(&b.client, "status", json!({})).await);
            if s["connected"] == false
                && s["last_error"].as_str().is_some_and(|e| e.contains(IN_USE))
                && s["reconnect_attempts"].as_u64() >= Some(3)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;

    // A was never replaced, and every answer it gets is its own.
    for i in 0..10 {
        let r = ok_of(
            &call(
                &a.client,
                "execute_command",
                json!({"command": format!("say A-{i}")}),
            )
            .await,
        );
        assert_eq!(r["output"], json!([format!("[Server] A-{i}")]));
    }
    let s = ok_of(&call(&a.client, "status", json!({})).await);
    assert_eq!(s["connected"], true);
    assert_eq!(
        s["connections_total"], 1,
        "A's link was never replaced: {s}"
    );

    // Once A is gone, B's next attempt gets in.
    a.stop().await;
    b.ready(1).await;
    let r = ok_of(&call(&b.client, "execute_command", json!({"command": "say B-1"})).await);
    assert_eq!(r["output"], json!(["[Server] B-1"]));
    b.stop().await;
    game.stop();
    relay.stop().await;
}

#[tokio::test]
async fn a_client_id_whose_link_closed_or_went_silent_is_taken_over() {
    let relay = start_relay(relay_args(&[])).await;

    // Closed: the next link under the id is welcomed at once.
    let (mut old, w) = mcp_hello(&relay.url(), MCP_TOKEN, "x").await;
    assert_eq!(w["type"], "welcome", "{w}");
    use futures::{SinkExt, StreamExt};
    old.tx.close().await.unwrap();
    within("the relay to close the old link", async {
        while let Some(Ok(_)) = old.rx.next().await {}
    })
    .await;
    let (_new, w) = mcp_hello(&relay.url(), MCP_TOKEN, "x").await;
    assert_eq!(w["type"], "welcome", "a closed link is replaced: {w}");

    // Silent (half-open: it answers no ping, as after a network loss): refused while the relay still holds
    // it, taken over once the relay's watchdog (1 s heartbeat here) drops it.
    let (_silent, w) = mcp_hello(&relay.url(), MCP_TOKEN, "y").await;
    assert_eq!(w["type"], "welcome", "{w}");
    let (_refused, first) = mcp_hello(&relay.url(), MCP_TOKEN, "y").await;
    assert_in_use(&first, "y");
    within(
        "the silent link to be dropped and its id taken over",
        async {
            loop {
                let (_link, w) = mcp_hello(&relay.url(), MCP_TOKEN, "y").await;
                if w["type"] == "welcome" {
                    return;
                }
                assert_in_use(&w, "y");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        },
    )
    .await;
    relay.stop().await;
}

#[tokio::test]
async fn the_same_server_redialling_over_its_half_open_link_takes_its_id_back_at_once() {
    let relay = start_relay(relay_args(&[])).await;
    let url = relay.url();
    let hello = |instance: Option<&str>| {
        let mut payload = json!({"clientId": "z"});
        if let Some(i) = instance {
            payload["instance"] = json!(i);
        }
        mcp_hello_with(&url, MCP_TOKEN, payload)
    };
    // Its link half-open: welcomed, then never read again, as after a network loss.
    let (mut half_open, w) = hello(Some("5be1a0c3")).await;
    assert_eq!(w["type"], "welcome", "{w}");

    // Another server under the id, with no instance or another one, is still refused.
    let (_other, refused) = hello(Some("0ther")).await;
    assert_in_use(&refused, "z");
    let (_none, refused) = hello(None).await;
    assert_in_use(&refused, "z");

    // The same server gets in at once, and its old link is closed as replaced: not dropped by the watchdog,
    // which closes with 1011 and its own reason.
    let (_again, w) = hello(Some("5be1a0c3")).await;
    assert_eq!(
        w["type"], "welcome",
        "the same instance takes the id back: {w}"
    );
    let (code, reason) = half_open.close_frame().await;
    assert_eq!(
        (code, reason.as_str()),
        (
            1000,
            "replaced by a newer connection with the same clientId"
        )
    );

    // An instance that is no name is refused naming the field, and takes nothing.
    for bad in [json!(7), json!("has space"), json!("x".repeat(65))] {
        let (_bad, refused) = mcp_hello_with(
            &relay.url(),
            MCP_TOKEN,
            json!({"clientId": "z", "instance": bad}),
        )
        .await;
        assert_eq!(refused["payload"]["code"], "SCHEMA_ERROR", "{refused}");
        assert_eq!(
            refused["payload"]["details"]["field"], "payload.instance",
            "{refused}"
        );
    }
    let (_other, refused) = hello(Some("0ther")).await;
    assert_in_use(&refused, "z");
    relay.stop().await;
}

#[tokio::test]
async fn an_mcp_server_says_one_secret_instance_in_every_hello_of_its_run() {
    // A stand-in relay that reads the hellos of two runs of the server: the first run's link dropped once.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let args = |addr: std::net::SocketAddr| {
        mc_args(&[
            "--minecraft-relay-url",
            &format!("ws://{addr}"),
            "--minecraft-relay-token",
            "t",
        ])
    };
    let server = McpServer::start(args(addr)).await;
    let first = read_hello(&listener).await;
    let again = read_hello(&listener).await;
    server.stop().await;
    let other = McpServer::start(args(addr)).await;
    let other_run = read_hello(&listener).await;
    other.stop().await;

    let instance = first["payload"]["instance"].as_str().unwrap();
    assert_eq!(instance.len(), 32, "{first}");
    assert!(instance.chars().all(|c| c.is_ascii_hexdigit()), "{first}");
    assert_eq!(
        again["payload"]["instance"], instance,
        "the same run redials as itself"
    );
    assert_ne!(
        other_run["payload"]["instance"], instance,
        "another run is another server"
    );
}

/// Accepts one link on a stand-in relay, reads its `hello`, and drops it.
async fn read_hello(listener: &tokio::net::TcpListener) -> Value {
    let (socket, _) = within("the MCP server to dial", listener.accept())
        .await
        .unwrap();
    let mut ws = tokio_tungstenite::accept_async(socket).await.unwrap();
    let hello = next_json(&mut ws).await;
    assert_eq!(hello["type"], "hello", "{hello}");
    hello
}

#[tokio::test]
async fn an_answer_meant_for_another_process_never_resolves_this_ones_call() {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    fn response(id: &str, seq: u64, output: &str) -> Message {
        let v = json!({"version": "1.0", "type": "response", "id": id, "timestamp": 1, "source": "relay",
            "game": "g", "seq": seq,
            "payload": {"success": true, "data": {"success": true, "output": [output]}}});
        Message::text(v.to_string())
    }
    // A stand-in relay that, before this server's answer, delivers the answers another MCP server under the same
    // (token, clientId) was waiting for: its commands 1, 2 and 3 (a queue shared with an earlier process, or
    // with a live twin).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let fake = tokio::spawn(async move {
        let mut ws = welcome_one_mcp_server(listener).await;
        let command = loop {
            let m = next_json(&mut ws).await;
            if m["type"] == "command" {
                break m;
            }
        };
        let id = command["id"].as_str().unwrap().to_owned();
        for (seq, foreign) in ["1", "2", "3"].into_iter().enumerate() {
            ws.send(response(foreign, seq as u64 + 1, "not yours"))
                .await
                .unwrap();
        }
        ws.send(response(&id, 4, "yours")).await.unwrap();
        // Held open (and read, so pings are answered) until the test ends: a dropped link would fail the call.
        while ws.next().await.is_some() {}
    });
    let server = McpServer::start(mc_args(&[
        "--minecraft-relay-url",
        &format!("ws://{addr}"),
        "--minecraft-relay-token",
        "t",
    ]))
    .await;
    server.ready(1).await;
    let r = ok_of(
        &call(
            &server.client,
            "execute_command",
            json!({"command": "say mine"}),
        )
        .await,
    );
    assert_eq!(r["output"], json!(["yours"]), "only this call's own answer");
    fake.abort();
    server.stop().await;
}
