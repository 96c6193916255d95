#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The listener and the correlator together, wired the way a dial-in bridge (Bitburner) uses them: requests
//! in flight when the game vanishes fail at once with E_DISCONNECTED, stray answers are dropped, nothing leaks.

use bridge_core::ToolError;
use bridge_core::link::{
    Correlator, LinkError, OriginPolicy, WsConfig, WsSender, bind, parse_id, serve, ws_router,
};
use futures::{SinkExt, StreamExt};
use mcp_testkit::within;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

/// A waiter released by this timeout would report Timeout; the test expects Disconnected instead.
const HOUR: Duration = Duration::from_secs(3600);
struct Link {
    sender: WsSender,
    calls: Correlator<Value>,
}

#[tokio::test]
async fn game_vanishing_mid_request_fails_the_requests_in_flight_at_once() {
    let shutdown = CancellationToken::new();
    let mut cfg = WsConfig::new(OriginPolicy::any());
    cfg.shutdown = shutdown.clone();
    let (links_tx, mut links) = mpsc::unbounded_channel();
    let router = ws_router(cfg, "/", move |mut conn| {
        let calls = Correlator::new();
        let _ = links_tx.send(Link {
            sender: conn.sender.clone(),
            calls: calls.clone(),
        });
        tokio::spawn(async move {
            while let Some(text) = conn.incoming.recv().await {
                let Ok(msg) = serde_json::from_str::<Value>(&text) else {
                    continue;
                };
                if let Some(id) = msg.get("id").and_then(parse_id) {
                    calls.resolve(id, msg);
                }
            }
            calls.close(conn.sender.disconnected());
        });
    });
    let listener = bind(
        "127.0.0.1:0".parse().unwrap(),
        "another bridge",
        "TEST_PORT",
    )
    .await
    .unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    tokio::spawn(serve(listener, router, shutdown.clone()));

    let (mut game, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let link = within("the link", links.recv()).await.unwrap();

    let mut waiting = Vec::new();
    for method in ["getFileNames", "getFile", "getSaveFile"] {
        let (id, pending) = link.calls.start();
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method});
        link.sender.send_text(req.to_string()).await.unwrap();
        waiting.push(tokio::spawn(pending.wait(HOUR)));
    }
    let mut ids = Vec::new();
    while ids.len() < 3 {
        if let Some(Ok(Message::Text(t))) = within("a request", game.next()).await {
            ids.push(serde_json::from_str::<Value>(&t).unwrap()["id"].clone());
        }
    }
    assert_eq!(ids, [json!(1), json!(2), json!(3)]);

    // A stray answer first, then a real one: frames are handled in order, so once the real one has arrived
    // the stray one has been dropped.
    for answer in [
        json!({"jsonrpc": "2.0", "id": 999, "result": "stray"}),
        json!({"jsonrpc": "2.0", "id": "str-id", "result": "stray"}),
        json!({"jsonrpc": "2.0", "id": 2, "result": ""}),
    ] {
        game.send(Message::text(answer.to_string())).await.unwrap();
    }
    let second = within("the answer", waiting.remove(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second["result"], "");
    assert_eq!(link.calls.pending(), 2);

    // The game tab is closed: no close frame, the socket just goes away.
    drop(game);
    for w in waiting {
        let err = within("the drop", w).await.unwrap().unwrap_err();
        assert!(matches!(err, LinkError::Disconnected { .. }), "{err:?}");
        let tool = ToolError::from(err);
        assert_eq!(tool.code().as_str(), "E_DISCONNECTED");
        assert!(
            tool.message().contains("without closing"),
            "{}",
            tool.message()
        );
    }
    assert_eq!(link.calls.pending(), 0);

    // A request racing the drop fails at once too, and the sender refuses.
    let (_, late) = link.calls.start();
    assert!(matches!(
        within("late request", late.wait(HOUR)).await,
        Err(LinkError::Disconnected { .. })
    ));
    assert!(link.sender.send_text("{}").await.is_err());
    shutdown.cancel();
}
