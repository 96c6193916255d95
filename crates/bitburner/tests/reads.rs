//! Reads that cost what they should: a paged read downloads the file once, a file changed between pages
//! restarts cleanly, and a call cut by a newer game connection says what happened instead of "call again".
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::{Value, json};
use support::*;

fn big_file() -> String {
    (0..8000)
        .map(|i| format!("// line {i:05} é {}\n", "x".repeat(30)))
        .collect()
}

fn get_file_count(methods: &[String]) -> usize {
    methods.iter().filter(|m| *m == "getFile").count()
}

async fn read_all(client: &Client, filename: &str) -> (String, usize, Vec<Value>) {
    let mut rebuilt = String::new();
    let mut offset = Some(0);
    let mut pages = Vec::new();
    while let Some(o) = offset {
        let page = call(
            client,
            "read_file",
            json!({"filename": filename, "offset": o}),
        )
        .await;
        let info = ok_of(&page);
        let body = info["returned_bytes"].as_u64().unwrap() as usize;
        rebuilt.push_str(&text_of(&page)[..body]);
        offset = info["next_offset"].as_u64().map(|n| n as usize);
        pages.push(info);
    }
    let n = pages.len();
    (rebuilt, n, pages)
}

#[tokio::test]
async fn a_paged_read_downloads_the_file_once() {
    let h = start(game_args()).await;
    let game = v3();
    let big = big_file();
    game.world()
        .server_mut("home")
        .unwrap()
        .write("big.js", &big, true);
    let conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let (rebuilt, pages, infos) = read_all(&client, "big.js").await;
    assert_eq!(rebuilt, big);
    assert!(pages > 4, "{pages} pages");
    assert_eq!(
        get_file_count(&conn.methods()),
        1,
        "one download for {pages} pages"
    );
    assert!(infos[0]["cursor"].is_string(), "{}", infos[0]);

    // Reading from the start again is a new read: it fetches the file as it is now.
    let (_, _, _) = read_all(&client, "big.js").await;
    assert_eq!(get_file_count(&conn.methods()), 2);
}

#[tokio::test]
async fn a_file_changed_between_pages_restarts_cleanly() {
    let h = start(game_args()).await;
    let game = v3();
    let big = big_file();
    game.world()
        .server_mut("home")
        .unwrap()
        .write("big.js", &big, true);
    let _conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let first = ok_of(&call(&client, "read_file", json!({"filename": "big.js"})).await);
    let cursor = first["cursor"].as_str().unwrap().to_owned();
    let next = first["next_offset"].as_u64().unwrap();
    // A write through the bridge drops what was pinned; the new content has another cursor.
    let changed = format!("// changed\n{big}");
    ok_of(
        &call(
            &client,
            "write_file",
            json!({"filename": "big.js", "content": changed}),
        )
        .await,
    );
    let page = call(
        &client,
        "read_file",
        json!({"filename": "big.js", "offset": next, "cursor": cursor}),
    )
    .await;
    let info = ok_of(&page);
    assert_eq!(info["restarted"], true, "{info}");
    assert_eq!(info["offset"], 0);
    assert!(text_of(&page).starts_with("// changed\n"));
    assert!(
        text_of(&page).contains("changed since"),
        "the text says why it restarted"
    );
}

#[tokio::test]
async fn an_offset_past_the_end_does_not_claim_nothing_was_sent() {
    let h = start(game_args()).await;
    let game = v3();
    game.world()
        .server_mut("home")
        .unwrap()
        .write("a.js", "abc", true);
    let _conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let past = error_of(
        &call(
            &client,
            "read_file",
            json!({"filename": "a.js", "offset": 10}),
        )
        .await,
    );
    assert_eq!(past["code"], "E_INVALID_ARGUMENT");
    let hint = past["hint"].as_str().unwrap();
    assert!(!hint.contains("nothing was sent"), "{hint}");
    assert!(hint.contains("3 bytes"), "{hint}");
}

/// A write in flight when a newer game connection replaces the old one: the game may have applied it. The
/// bridge reads it back on the new connection and says which it was.
#[tokio::test]
async fn a_write_cut_by_a_newer_connection_is_read_back() {
    let h = start(game_args()).await;
    let game = v3();
    let old = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;

    // The old tab received the write and applied it, but its answer never came: replaced first.
    old.set_answering(false);
    let writing = {
        let peer = client.peer().clone();
        tokio::spawn(async move {
            call(
                &peer,
                "write_file",
                json!({"filename": "a.js", "content": "// applied"}),
            )
            .await
        })
    };
    old.wait_for_frames(1).await;
    game.world()
        .server_mut("home")
        .unwrap()
        .write("a.js", "// applied", true);
    let new = h.connect(&game).await;
    let applied = within("the write", writing).await.unwrap();
    let v = ok_of(&applied);
    assert_eq!(v["filename"], "a.js");
    assert!(
        v["confirmed"]
            .as_str()
            .unwrap_or_default()
            .contains("read back"),
        "{v}"
    );

    // Not applied: the answer says it is unknown and to read it back, not "call again".
    new.set_answering(false);
    let writing = {
        let peer = client.peer().clone();
        tokio::spawn(async move {
            call(
                &peer,
                "write_file",
                json!({"filename": "b.js", "content": "// lost"}),
            )
            .await
        })
    };
    new.wait_for_frames(2).await;
    let third = h.connect(&game).await;
    let e = error_of(&within("the write", writing).await.unwrap());
    let text = format!("{} {}", e["message"], e["hint"]);
    assert!(text.contains("read_file"), "{text}");
    assert!(
        !e["hint"].as_str().unwrap().ends_with("then call again"),
        "{text}"
    );
    assert!(
        third.methods().contains(&"getFile".to_owned()),
        "read back on the new connection"
    );
}

/// A write in flight when the game disconnects with no other to ask: the outcome is unknown, and the error says
/// to read it back, not to call again.
#[tokio::test]
async fn a_write_cut_with_no_game_left_is_unknown_not_retry() {
    let h = start(game_args()).await;
    let game = v3();
    let conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    conn.set_answering(false);
    let writing = {
        let peer = client.peer().clone();
        tokio::spawn(async move {
            call(
                &peer,
                "write_file",
                json!({"filename": "a.js", "content": "// ?"}),
            )
            .await
        })
    };
    conn.wait_for_frames(1).await;
    conn.close();
    let e = error_of(&within("the write", writing).await.unwrap());
    assert_eq!(e["code"], "E_DISCONNECTED");
    let hint = e["hint"].as_str().unwrap();
    assert!(
        hint.contains("unknown") && hint.contains("read it back"),
        "{hint}"
    );
    assert!(!hint.ends_with("then call again"), "{hint}");
    assert_eq!(e["details"]["in_flight"], true);
}
