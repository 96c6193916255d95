//! The game link as the real game exercises it: late connects, drops with calls in flight, replacement by a
//! newer connection, reconnects, junk frames, forged ids, foreign origins, a frozen game, a taken port.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bitburner_fake::{Closed, FakeGame, GameVersion};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use support::*;

/// A harness whose timeout is far longer than any test: a call that fails fast did not time out.
async fn slow_timeout_harness() -> Harness {
    let mut args = game_args();
    args.rpc_timeout = Duration::from_secs(60);
    start(args).await
}

#[tokio::test]
async fn no_game_yet_says_where_to_connect_then_the_late_game_works() {
    let h = start(game_args()).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let err = error_of(&call(&client, "list_files", json!({})).await);
    assert_eq!(err["code"], "E_DISCONNECTED");
    let hint = err["hint"].as_str().unwrap();
    assert!(hint.contains("Options → Remote API"), "{hint}");
    assert!(hint.contains(&h.game_addr.port().to_string()), "{hint}");
    assert!(hint.contains("127.0.0.1"), "{hint}");
    let status = ok_of(&call(&client, "status", json!({})).await);
    assert_eq!(status["connected"], false);
    assert_eq!(status["methods"]["getFile"], "unknown");

    let game = v3();
    let _conn = h.connect(&game).await;
    let listed = ok_of(&call(&client, "list_files", json!({})).await);
    assert_eq!(listed["files"], json!([]));
}

#[tokio::test]
async fn a_call_may_wait_for_the_game_when_configured() {
    let mut args = game_args();
    args.connect_wait = Duration::from_secs(30);
    let h = start(args).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let pending = tokio::spawn(async move { call(&client, "list_files", json!({})).await });
    within(
        "the call to park",
        h.link.wait_until(|s| s.calls_waiting_for_game == 1),
    )
    .await;
    let game = v3();
    let _conn = h.connect(&game).await;
    let result = within("the parked call", pending).await.unwrap();
    assert_eq!(ok_of(&result)["files"], json!([]));
}

#[tokio::test]
async fn a_drop_fails_calls_in_flight_at_once() {
    let h = slow_timeout_harness().await;
    let game = v3();
    let conn = h.connect(&game).await;
    conn.set_answering(false);
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let pending =
        tokio::spawn(async move { call(&client, "read_file", json!({"filename": "a.js"})).await });
    conn.wait_for_frames(1).await;
    conn.close();
    let err = error_of(&within("the failed call", pending).await.unwrap());
    assert_eq!(err["code"], "E_DISCONNECTED", "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("in flight"),
        "{err}"
    );
    // The drop ended the call, not the 60 s RPC timeout: that one would answer E_TIMEOUT.
}

#[tokio::test]
async fn the_newest_game_connection_wins() {
    let h = slow_timeout_harness().await;
    let game = v3();
    let first = h.connect(&game).await;
    first.set_answering(false);
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let pending = tokio::spawn(async move {
        let r = call(&client, "list_files", json!({})).await;
        (client, r)
    });
    first.wait_for_frames(1).await;

    let second = h.connect(&game).await;
    let (client, result) = within("the replaced call", pending).await.unwrap();
    let err = error_of(&result);
    assert_eq!(err["code"], "E_DISCONNECTED");
    assert!(
        err["message"].as_str().unwrap().contains("replaced"),
        "{err}"
    );
    match within("the old connection to close", first.wait_closed()).await {
        Closed::ByPeer { reason, .. } => assert!(reason.contains("replaced"), "{reason}"),
        other => panic!("the bridge should have closed the older connection, got {other:?}"),
    }
    // Requests now go to the newer connection only.
    ok_of(
        &call(
            &client,
            "write_file",
            json!({"filename": "x.js", "content": "1"}),
        )
        .await,
    );
    assert_eq!(second.methods(), ["pushFile"]);
    assert_eq!(first.methods(), ["getFileNames"]);
    let status = ok_of(&call(&client, "status", json!({})).await);
    assert_eq!(status["connections_total"], 2);
    assert!(
        status["last_disconnect"]
            .as_str()
            .is_some_and(|r| r.contains("replaced")),
        "the replaced connection is the last one that ended: {status}"
    );
}

#[tokio::test]
async fn reconnect_and_continue() {
    let h = start(game_args()).await;
    let game = v3();
    let client = http_client(h.mcp_addr, Era::Legacy).await;
    let conn = h.connect(&game).await;
    ok_of(
        &call(
            &client,
            "write_file",
            json!({"filename": "keep.txt", "content": "kept"}),
        )
        .await,
    );
    conn.close();
    within("the bridge to notice", h.link.wait_until(|s| !s.connected)).await;
    let err = error_of(&call(&client, "read_file", json!({"filename": "keep.txt"})).await);
    assert_eq!(err["code"], "E_DISCONNECTED");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("last game connection ended"),
        "{err}"
    );

    let _again = h.connect(&game).await;
    let read = call(&client, "read_file", json!({"filename": "keep.txt"})).await;
    assert_eq!(text_of(&read), "kept");
}

#[tokio::test]
async fn junk_and_forged_replies_are_ignored() {
    let h = slow_timeout_harness().await;
    let game = v3();
    let conn = h.connect(&game).await;
    game.world()
        .server_mut("home")
        .unwrap()
        .write("real.txt", "real", false);
    conn.set_answering(false);
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let pending = tokio::spawn(async move {
        let r = call(&client, "read_file", json!({"filename": "real.txt"})).await;
        (client, r)
    });
    let frames = conn.wait_for_frames(1).await;
    let request: Value = serde_json::from_str(&frames[0]).unwrap();
    let id = request["id"].as_u64().unwrap();
    assert_eq!(
        request["params"],
        json!({"filename": "real.txt", "server": "home"})
    );

    // A malformed frame, a reply with an id never issued, one with a string id, an unreadable one with an id
    // never issued.
    conn.send_text("this is not json {");
    conn.send_text(json!({"jsonrpc": "2.0", "result": "forged", "id": id + 1000}).to_string());
    conn.send_text(json!({"jsonrpc": "2.0", "result": "forged", "id": "x"}).to_string());
    conn.send_text(json!({"jsonrpc": "2.0", "id": id + 1000}).to_string());
    // Then the real answer, in the dev key order.
    conn.send_text(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"real"}}"#));
    let (client, result) = within("the real answer", pending).await.unwrap();
    assert_eq!(text_of(&result), "real");
    assert!(h.link.is_connected(), "junk does not cost the connection");
    conn.set_answering(true);
    ok_of(&call(&client, "list_files", json!({})).await);
}

/// Before, each of these waited out the whole deadline (here 60 s) as if the game had said nothing.
#[tokio::test]
async fn an_unreadable_answer_with_our_id_fails_its_call_at_once() {
    let h = slow_timeout_harness().await;
    let game = v3();
    let conn = h.connect(&game).await;
    conn.set_answering(false);
    let client = Arc::new(http_client(h.mcp_addr, Era::Modern).await);
    let deep = |id: u64| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{}{}}}"#,
            "[".repeat(200_000),
            "]".repeat(200_000)
        )
    };
    // Within the frame limit, but some 77 MB decoded: refused unread (a 30 MB one took the bridge to 873 MB).
    let tiny_values = |id: u64| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":[{}0]}}"#,
            "0,".repeat(300_000)
        )
    };
    let unreadable: [(&dyn Fn(u64) -> String, &str); 4] = [
        (
            &|id| json!({"jsonrpc": "2.0", "id": id}).to_string(),
            "neither `result` nor `error`",
        ),
        (
            &|id| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"cut off"#),
            "not JSON",
        ),
        (&deep, "recursion limit"),
        (
            &tiny_values,
            "decoded (its JSON values, not only its text), over the limit of 67108864",
        ),
    ];
    for (i, (frame, says)) in unreadable.into_iter().enumerate() {
        let calling = client.clone();
        let pending =
            tokio::spawn(
                async move { call(&calling, "read_file", json!({"filename": "a.txt"})).await },
            );
        let frames = conn.wait_for_frames(i + 1).await;
        let request: Value = serde_json::from_str(&frames[i]).unwrap();
        let id = request["id"].as_u64().unwrap();
        conn.send_text(frame(id));
        let result = within("the call to fail", pending).await.unwrap();
        let err = error_of(&result);
        assert_eq!(err["code"], "E_REMOTE", "{err}");
        let message = err["message"].as_str().unwrap();
        assert!(message.contains("`getFile` could not be read"), "{message}");
        assert!(message.contains(says), "{message}");
        assert!(message.len() < 300, "{message}");
        // The real answer, late: nobody waits for it any more, and it costs nothing.
        conn.send_text(json!({"jsonrpc": "2.0", "id": id, "result": "late"}).to_string());
    }
    assert!(
        h.link.is_connected(),
        "a malformed answer does not cost the connection"
    );
    conn.set_answering(true);
    ok_of(&call(&client, "list_files", json!({})).await);
}

#[tokio::test]
async fn a_silent_game_times_out_and_an_unconfirmed_write_may_have_happened() {
    let mut args = game_args();
    args.rpc_timeout = Duration::from_millis(200);
    let h = start(args).await;
    let game = v3();
    let conn = h.connect(&game).await;
    conn.set_answering(false);
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let err = error_of(&call(&client, "list_files", json!({})).await);
    assert_eq!(err["code"], "E_TIMEOUT");
    assert!(
        err["details"]["elapsed_ms"].as_u64().unwrap() >= 200,
        "{err}"
    );
    assert!(err["message"].as_str().unwrap().contains("ms"), "{err}");
    assert!(h.link.is_connected(), "a timeout is not a disconnect");

    // A write or delete the game did not confirm may still happen when it resumes: no blind retry.
    let write = error_of(
        &call(
            &client,
            "write_file",
            json!({"filename": "a.js", "content": "1"}),
        )
        .await,
    );
    assert_eq!(write["code"], "E_TIMEOUT");
    assert!(
        write["message"]
            .as_str()
            .unwrap()
            .contains("may still have been applied"),
        "{write}"
    );
    let hint = write["hint"].as_str().unwrap();
    assert!(
        hint.contains("read_file") && !hint.contains("retry"),
        "{hint}"
    );
    let delete = error_of(&call(&client, "delete_file", json!({"filename": "a.js"})).await);
    assert!(
        delete["hint"].as_str().unwrap().contains("list_files"),
        "{delete}"
    );
}

#[tokio::test]
async fn invalid_calls_send_nothing_to_the_game() {
    let mut args = game_args();
    args.file_write_max_bytes = 100;
    let h = start(args).await;
    let game = v3();
    let conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let cases = [
        ("read_file", json!({"filename": ""}), "filename"),
        ("read_file", json!({"filename": "   "}), "filename"),
        ("read_file", json!({"filename": "../x.js"}), "filename"),
        ("read_file", json!({"filename": "has space.js"}), "filename"),
        ("read_file", json!({"filename": "noext"}), "filename"),
        ("read_file", json!({"filename": "a.exe"}), "filename"),
        ("read_file", json!({"filename": "a#b.js"}), "filename"),
        ("delete_file", json!({"filename": "NUKE.exe"}), "filename"),
        (
            "calculate_ram",
            json!({"filename": "x.js", "server": " "}),
            "server",
        ),
        (
            "write_file",
            json!({"filename": "a.js", "content": "x".repeat(101)}),
            "content",
        ),
        ("write_file", json!({"filename": "a.js"}), "content"),
        (
            "write_file",
            json!({"filename": "a.js", "content": "", "method": "runScript"}),
            "method",
        ),
        (
            "list_files",
            json!({"server": "home", "params": {}}),
            "params",
        ),
        ("get_all_servers", json!({"bogus": true}), "bogus"),
        ("status", json!({"bogus": true}), "bogus"),
    ];
    for (tool, args, field) in cases {
        let err = error_of(&call(&client, tool, args.clone()).await);
        let code = err["code"].as_str().unwrap();
        assert!(
            code == "E_INVALID_ARGUMENT" || code == "E_TOO_LARGE",
            "{tool} {args}: {err}"
        );
        let text = err.to_string();
        assert!(
            text.contains(field),
            "{tool} {args}: the error names `{field}`: {err}"
        );
    }
    assert_eq!(
        conn.received(),
        Vec::<String>::new(),
        "no frame reached the game"
    );
}

#[tokio::test]
async fn a_foreign_origin_is_refused() {
    let h = start(game_args()).await;
    let game = v3();
    let refused = game
        .connect(&h.game_url, Some("https://evil.example"))
        .await;
    let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("403"), "{message}");
    assert!(!h.link.is_connected());
    // The game's own origins connect: the web build, the Steam build (file://), a local build, none at all.
    for origin in [
        Some("https://bitburner-official.github.io"),
        Some("file://"),
        Some("http://localhost:8000"),
        None,
    ] {
        let conn = game.connect(&h.game_url, origin).await;
        assert!(conn.is_ok(), "{origin:?} should be accepted");
    }
}

#[tokio::test]
async fn extra_origins_are_configurable() {
    let mut args = game_args();
    args.allowed_origins = vec!["null".into()];
    let h = start(args).await;
    let conn = v3().connect(&h.game_url, Some("null")).await;
    assert!(conn.is_ok());
}

#[tokio::test]
async fn a_frozen_game_is_noticed_by_its_missing_pongs() {
    let mut args = game_args();
    args.rpc_timeout = Duration::from_secs(60);
    // The pong deadline is the ping interval: until the freeze, the game (on this test's one thread, beside
    // the bridge and the MCP client) must answer each ping within it, so it is not a tenth of a second.
    args.ping_interval = Duration::from_secs(1);
    let h = start(args).await;
    let game = v3();
    let conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    ok_of(&call(&client, "list_files", json!({})).await);
    conn.freeze();
    let err = error_of(&call(&client, "list_files", json!({})).await);
    assert_eq!(err["code"], "E_DISCONNECTED", "{err}");
    assert!(!h.link.is_connected());
}

#[tokio::test]
async fn a_taken_port_names_the_culprits_and_the_fix() {
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut args = game_args();
    args.port = taken.local_addr().unwrap().port();
    let err = bridge_bitburner::listen(&args, tokio_util::sync::CancellationToken::new())
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("already in use"), "{err}");
    assert!(err.contains("bitburner-filesync"), "{err}");
    assert!(err.contains("BITBURNER_GAME_PORT"), "{err}");
}

#[tokio::test]
async fn v2_games_get_a_params_object_even_for_methods_without_arguments() {
    // v2.x throws on a request without `params` and never answers; the bridge must always send one.
    let h = start(game_args()).await;
    let game = FakeGame::new(GameVersion::V2_6);
    let conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    ok_of(&call(&client, "get_netscript_definitions", json!({})).await);
    ok_of(&call(&client, "get_all_servers", json!({})).await);
    for frame in conn.received() {
        let v: Value = serde_json::from_str(&frame).unwrap();
        assert!(v["params"].is_object(), "{frame}");
        assert!(v["id"].as_u64().is_some_and(|id| id >= 1), "{frame}");
    }
}

#[tokio::test]
async fn a_reply_over_the_frame_limit_is_too_large_not_a_mystery() {
    let h = slow_timeout_harness().await;
    let game = v3();
    let conn = h.connect(&game).await;
    conn.set_answering(false);
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let pending =
        tokio::spawn(async move { call(&client, "read_file", json!({"filename": "a.js"})).await });
    let frames = conn.wait_for_frames(1).await;
    let id = serde_json::from_str::<Value>(&frames[0]).unwrap()["id"].clone();
    let huge = "x".repeat(bridge_bitburner::MAX_GAME_FRAME_BYTES);
    conn.send_text(format!(
        r#"{{"jsonrpc":"2.0","result":"{huge}","id":{id}}}"#
    ));
    drop(huge);
    let err = error_of(&within("the oversized reply", pending).await.unwrap());
    assert_eq!(err["code"], "E_TOO_LARGE", "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("getFile"),
        "{err}"
    );
    let hint = err["hint"].as_str().unwrap();
    assert!(
        hint.contains("32 MiB") && hint.contains("Connect"),
        "{hint}"
    );
}

#[tokio::test]
async fn an_unexpected_reply_with_multibyte_text_is_an_error_not_a_hang() {
    let h = slow_timeout_harness().await;
    let game = v3();
    let conn = h.connect(&game).await;
    conn.set_answering(false);
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let pending = tokio::spawn(async move { call(&client, "list_files", json!({})).await });
    let frames = conn.wait_for_frames(1).await;
    let id = serde_json::from_str::<Value>(&frames[0]).unwrap()["id"].clone();
    // Byte 200 of the reply's JSON falls inside an `é`: cutting there by bytes panicked.
    let odd = json!({"name": "é".repeat(300)});
    conn.send_text(json!({"jsonrpc": "2.0", "result": odd, "id": id}).to_string());
    let err = error_of(&within("the odd reply", pending).await.unwrap());
    assert_eq!(err["code"], "E_REMOTE", "{err}");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("unexpected value") && message.contains("éé"),
        "{message}"
    );
}

#[tokio::test]
async fn a_game_that_came_and_went_unseen_is_still_told_on_the_connection_stream() {
    let h = start(game_args()).await;
    let game = v3();
    // The game connects and drops before anything watches the stream, as when it drops at once.
    let conn = h.connect(&game).await;
    conn.close();
    within(
        "the bridge to see the drop",
        h.link.wait_until(|s| !s.connected),
    )
    .await;
    let stream = h
        .bridge
        .events()
        .get(bridge_bitburner::CONNECTION_STREAM)
        .unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(bridge_bitburner::watch_connection(
        h.link.clone(),
        stream.clone(),
        stop.clone(),
    ));
    let events = |n: usize| {
        let stream = stream.clone();
        async move {
            loop {
                let page = stream.read_since(0, 100, None);
                if page.events.len() >= n {
                    return page.events.into_iter().map(|e| e.data).collect::<Vec<_>>();
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    let told = within("the unseen link as a pair", events(2)).await;
    assert_eq!(told[0]["event"], "connected", "{told:?}");
    assert_eq!(told[0]["short_lived"], 1);
    assert_eq!(told[1]["event"], "disconnected", "{told:?}");
    // A game that stays is told as before, with its peer.
    let _again = h.connect(&game).await;
    let told = within("the lasting link", events(3)).await;
    assert_eq!(told[2]["event"], "connected");
    assert!(told[2]["peer"].is_string(), "{told:?}");
    assert!(told[2].get("short_lived").is_none());
    stop.cancel();
}
