//! SIGTERM lets calls in flight finish: the MCP side stops taking calls, the call the game is still working
//! on gets its answer within `MCP_SHUTDOWN_GRACE_MS`, and only then does the game's link close.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bitburner_fake::{Closed, FakeGame, GameConnection, GameVersion, WEB_ORIGIN};
use mcp_testkit::{ERAS, Era, call, ok_of, within};
use serde_json::{Value, json};
use support::Server;

/// The first request for `method` the game has received, waiting for it.
async fn request_for(conn: &GameConnection, method: &str) -> Value {
    let mut n = 1;
    loop {
        let frames = within(method, conn.wait_for_frames(n)).await;
        if let Some(frame) = frames
            .iter()
            .map(|f| serde_json::from_str::<Value>(f).unwrap())
            .find(|f| f["method"] == method)
        {
            return frame;
        }
        n = frames.len() + 1;
    }
}

async fn a_call_in_flight_survives_sigterm(transport: &str, era: Era) {
    let mut server = Server::spawn(&[
        "bitburner",
        transport,
        "--mcp-port",
        "0",
        "--bitburner-game-port",
        "0",
        "--shutdown-grace",
        "30s",
    ]);
    let game_url = format!(
        "ws://{}",
        server.after("waiting for Bitburner on ws://", &[' ']).await
    );
    let game = FakeGame::new(GameVersion::V3_0);
    let conn = game.connect(&game_url, Some(WEB_ORIGIN)).await.unwrap();
    conn.set_answering(false);

    // The client lives until the end: on stdio its going away would end the server by itself.
    let (peer, client): (_, Box<dyn std::any::Any + Send>) = if transport == "--http" {
        let mcp = server.after("serving MCP at http://", &['/']).await;
        let client = mcp_testkit::http_client(mcp.parse().unwrap(), era).await;
        (client.peer().clone(), Box::new(client))
    } else {
        let client = support::stdio_client(&mut server, era).await;
        (client.peer().clone(), Box::new(client))
    };
    let connected = call(
        &peer,
        "poll_events",
        json!({"stream": "connection", "wait_ms": 30000}),
    )
    .await;
    assert_eq!(ok_of(&connected)["events"][0]["data"]["event"], "connected");
    let in_flight =
        tokio::spawn(
            async move { call(&peer, "read_file", json!({"filename": "notes.txt"})).await },
        );
    let request = request_for(&conn, "getFile").await;

    server.sigterm();
    server.line("shutting down").await;
    assert!(
        !conn.is_closed(),
        "{transport} {era:?}: the game's link stays up while a call is in flight"
    );
    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": "written before SIGTERM"});
    conn.send_text(answer.to_string());

    let result = within("the call in flight", in_flight).await.unwrap();
    assert!(
        mcp_testkit::text_of(&result).contains("written before SIGTERM"),
        "{transport} {era:?}: the call finished despite shutdown: {result:?}"
    );
    let closed = within("the link to close", conn.wait_closed()).await;
    assert!(
        matches!(closed, Closed::ByPeer { .. }),
        "{transport} {era:?}: the bridge closed the game's link after the call: {closed:?}"
    );
    drop(client);
    assert_eq!(server.exit_code().await, Some(0), "{transport} {era:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_over_http_survives_sigterm() {
    for era in ERAS {
        a_call_in_flight_survives_sigterm("--http", era).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_over_stdio_survives_sigterm() {
    for era in ERAS {
        a_call_in_flight_survives_sigterm("--stdio", era).await;
    }
}
