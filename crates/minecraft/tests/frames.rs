#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue 22: the MCP server publishes the events of one relay frame together (one lock and one wake-up of a
//! stream's pollers a frame, not one an event). What a reader sees stays as if each had come alone: every
//! event in its order, and a loss record found inside a frame between the events around the gap.

use crate::support;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use support::*;
use tokio_tungstenite::tungstenite::Message;

type Ws = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

async fn next_json(ws: &mut Ws) -> Value {
    loop {
        if let Some(Ok(Message::Text(t))) = ws.next().await {
            return serde_json::from_str::<Value>(&t).unwrap();
        }
    }
}

/// The relay's message `seq`: the game's event `game_seq` of type `ty`.
fn event(seq: u64, game_seq: u64, ty: &str) -> Value {
    let data = match ty {
        "player_chat" => json!({"player": "S", "message": format!("m{game_seq}")}),
        _ => json!({"player": format!("p{game_seq}"), "uuid": "u"}),
    };
    json!({"version": "1.2", "type": "event", "id": format!("g-i1-{game_seq}"), "timestamp": 1,
        "source": "minecraft", "game": "g", "seq": seq, "gameSeq": game_seq, "instance": "i1",
        "payload": {"eventType": ty, "timestamp": 1, "data": data}})
}

/// A stand-in relay on a free port: welcomes one MCP server, waits for `go`, sends `frame` as one batch, then
/// holds the link until the MCP server acknowledges its last message.
async fn relay_sending(
    frame: Vec<Value>,
    go: tokio::sync::oneshot::Receiver<()>,
) -> (String, tokio::task::JoinHandle<Ws>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let last = frame.last().and_then(|e| e["seq"].as_u64()).unwrap();
    let task = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let mut ws = tokio_tungstenite::accept_async(socket).await.unwrap();
        assert_eq!(next_json(&mut ws).await["type"], "hello");
        let welcome = json!({"version": "1.2", "type": "welcome", "id": "w", "timestamp": 1, "source": "relay",
            "payload": {"role": "mcp", "epoch": "e1", "lastSeq": 0, "games": ["g"], "gamesVersion": 1}});
        ws.send(Message::text(welcome.to_string())).await.unwrap();
        go.await.unwrap();
        let batch = json!({"version": "1.2", "type": "batch", "id": "b-1", "timestamp": 1, "source": "relay",
            "payload": {"messages": frame}});
        ws.send(Message::text(batch.to_string())).await.unwrap();
        loop {
            let m = next_json(&mut ws).await;
            if m["type"] == "ack" && m["payload"]["seq"] == last {
                return ws;
            }
        }
    });
    (url, task)
}

/// Several workers, so a poller woken by the frame's first event could read before its last was published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_of_events_reaches_a_waiting_poller_whole_and_in_order() {
    // Within one page's default byte cap (about 128 of these events).
    const N: u64 = 60;
    let frame: Vec<Value> = (1..=N).map(|n| event(n, n, "player_chat")).collect();
    let (go, ready) = tokio::sync::oneshot::channel();
    let (url, relay) = relay_sending(frame, ready).await;
    let server = McpServer::start(mc_args(&[
        "--minecraft-relay-url",
        &url,
        "--minecraft-relay-token",
        "t",
    ]))
    .await;
    server.ready(1).await;
    let waiting = {
        let client = server.client.peer().clone();
        tokio::spawn(async move {
            call(
                &client,
                "poll_events",
                json!({"stream": "player_chat", "since": 0, "limit": 10000, "wait_ms": 30000}),
            )
            .await
        })
    };
    go.send(()).unwrap();
    let page = ok_of(&within("the waiting poll", waiting).await.unwrap());
    let messages: Vec<&str> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["data"]["data"]["message"].as_str().unwrap())
        .collect();
    let want: Vec<String> = (1..=N).map(|n| format!("m{n}")).collect();
    assert_eq!(messages, want, "the whole frame in one page, in order");
    assert_eq!(page["more"], false, "{page}");
    let seqs: Vec<u64> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=N).collect::<Vec<_>>());
    let _ws = within("the relay's ack", relay).await.unwrap();
    server.stop().await;
}

/// A gap in the game's numbering inside one frame: each stream gets the events before it, the loss record,
/// then the events after it, as when each event came in a frame of its own.
#[tokio::test]
async fn a_gap_inside_a_frame_puts_its_loss_record_between_the_events_around_it() {
    // Game events 4..6 never came.
    let frame = vec![
        event(1, 1, "player_chat"),
        event(2, 2, "player_join"),
        event(3, 3, "player_chat"),
        event(4, 7, "player_join"),
        event(5, 8, "player_chat"),
    ];
    let (go, ready) = tokio::sync::oneshot::channel();
    let (url, relay) = relay_sending(frame, ready).await;
    let server = McpServer::start(mc_args(&[
        "--minecraft-relay-url",
        &url,
        "--minecraft-relay-token",
        "t",
    ]))
    .await;
    go.send(()).unwrap();
    let _ws = within("the relay's ack", relay).await.unwrap();
    let label = |e: &Value| -> String {
        let d = &e["data"];
        match d["eventType"].as_str().unwrap() {
            "events_lost" => format!(
                "lost {} ({}..{})",
                d["data"]["lost"], d["data"]["fromGameSeq"], d["data"]["toGameSeq"]
            ),
            "player_chat" => d["data"]["message"].as_str().unwrap().to_owned(),
            _ => d["data"]["player"].as_str().unwrap().to_owned(),
        }
    };
    let (chat, _) = server.poll("player_chat", 0).await;
    assert_eq!(
        chat.iter().map(label).collect::<Vec<_>>(),
        ["m1", "m3", "lost 3 (4..6)", "m8"]
    );
    let (joins, _) = server.poll("player_join", 0).await;
    assert_eq!(
        joins.iter().map(label).collect::<Vec<_>>(),
        ["p2", "lost 3 (4..6)", "p7"]
    );
    let status = ok_of(&call(&server.client, "status", json!({})).await);
    assert_eq!(status["lost_in_gaps"], 3, "{status}");
    assert_eq!(status["events_received"], 5, "{status}");
    server.stop().await;
}
