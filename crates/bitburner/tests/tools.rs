//! Every tool end to end: rmcp client → bridge (HTTP in both eras, and stdio) → fake game → back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bitburner_fake::{FakeGame, GameVersion};
use serde_json::{Value, json};
use support::*;

const SCRIPT: &str = "export async function main(ns){ ns.hack('n00dles'); }";

async fn exercise_every_tool(client: &Client, save_dir: &std::path::Path) {
    let c = client;
    // write_file normalises the leading slash as the game does, and names the resource it changed.
    let written = ok_of(
        &call(
            c,
            "write_file",
            json!({"filename": "/lib/hack.js", "content": SCRIPT}),
        )
        .await,
    );
    assert_eq!(written["filename"], "lib/hack.js");
    assert_eq!(written["server"], "home");
    assert_eq!(written["bytes"], SCRIPT.len());
    assert_eq!(written["uri"], "bitburner://files/home/lib/hack.js");
    ok_of(
        &call(
            c,
            "write_file",
            json!({"filename": "notes.txt", "content": ""}),
        )
        .await,
    );

    let listed = ok_of(&call(c, "list_files", json!({})).await);
    assert_eq!(
        listed["files"],
        json!(["notes.txt", "lib/hack.js"]),
        "text files first, as the game lists"
    );
    assert_eq!(listed["count"], 2);

    let read = call(c, "read_file", json!({"filename": "lib/hack.js"})).await;
    assert_eq!(text_of(&read), SCRIPT, "the text result is the file itself");
    assert_eq!(
        ok_of(&read),
        json!({"server": "home", "filename": "lib/hack.js", "total_bytes": SCRIPT.len(),
               "offset": 0, "returned_bytes": SCRIPT.len()}),
        "the structured result describes the file without repeating it"
    );
    let empty = call(
        c,
        "read_file",
        json!({"filename": "notes.txt", "server": "home"}),
    )
    .await;
    assert_eq!(ok_of(&empty)["total_bytes"], 0);
    assert_eq!(
        text_of(&empty),
        "",
        "an empty file is content, not an error"
    );

    let all = call(c, "get_all_files", json!({"server": "home"})).await;
    assert_eq!(
        ok_of(&all)["files"][0],
        json!({"filename": "lib/hack.js", "bytes": SCRIPT.len(), "included": true})
    );
    assert_eq!(ok_of(&all)["total_files"], 2);
    assert_eq!(
        text_of(&all),
        format!(
            "// ==== lib/hack.js ({} bytes) ====\n{SCRIPT}\n// ==== notes.txt (0 bytes) ====\n",
            SCRIPT.len()
        )
    );

    let ram = ok_of(&call(c, "calculate_ram", json!({"filename": "lib/hack.js"})).await);
    assert_eq!(ram["ram_gb"], 1.7);

    let defs = call(c, "get_netscript_definitions", json!({})).await;
    assert!(text_of(&defs).contains("export interface NS"));
    assert!(ok_of(&defs).get("content").is_none());
    let stripped = text_of(
        &call(
            c,
            "get_netscript_definitions",
            json!({"strip_exports": true}),
        )
        .await,
    );
    assert!(
        stripped.contains("interface NS") && !stripped.contains("export "),
        "{stripped}"
    );

    let servers = ok_of(&call(c, "get_all_servers", json!({})).await);
    assert_eq!(
        servers["servers"][0],
        json!({"hostname": "home", "has_admin_rights": true, "purchased_by_player": true})
    );

    let meta = ok_of(&call(c, "get_file_metadata", json!({"filename": "notes.txt"})).await);
    assert_eq!(meta["filename"], "notes.txt");
    assert!(meta["mtime"].as_f64().unwrap() > 0.0);
    let all_meta = ok_of(&call(c, "get_all_file_metadata", json!({})).await);
    assert_eq!(all_meta["count"], 2);

    let save = ok_of(&call(c, "get_save_file", json!({})).await);
    let path = std::path::PathBuf::from(save["path"].as_str().unwrap());
    assert!(path.starts_with(save_dir), "{path:?}");
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(
        &bytes[..6],
        &[0x1f, 0x8b, 0x08, 0x00, 0xff, 0x80],
        "binary save decoded byte per char"
    );
    assert_eq!(save["bytes"], bytes.len());

    let deleted = ok_of(&call(c, "delete_file", json!({"filename": "notes.txt"})).await);
    assert_eq!(deleted["deleted"], true);
    let gone = error_of(&call(c, "read_file", json!({"filename": "notes.txt"})).await);
    assert_eq!(gone["code"], "E_REMOTE");
    assert_eq!(
        gone["message"], "File does not exist. Filename: notes.txt",
        "the game's words, verbatim"
    );

    let status = ok_of(&call(c, "status", json!({})).await);
    assert_eq!(status["connected"], true);
    assert_eq!(status["game_version"], "3.0 or newer");
    assert_eq!(status["methods"]["getSaveFile"], "yes");
}

#[tokio::test]
async fn every_tool_over_http_in_both_eras() {
    for era in ERAS {
        let dir = tempdir(&format!("http-{era:?}"));
        let mut args = game_args();
        args.save_dir = Some(dir.clone());
        let h = start(args).await;
        let game = v3();
        let _conn = h.connect(&game).await;
        let client = http_client(h.mcp_addr, era).await;
        exercise_every_tool(&client, &dir).await;
    }
}

#[tokio::test]
async fn every_tool_over_stdio() {
    let dir = tempdir("stdio");
    let mut args = game_args();
    args.save_dir = Some(dir.clone());
    let h = start(args).await;
    let game = v3();
    let _conn = h.connect(&game).await;
    let client = stdio_client(h.bridge.clone(), Era::Legacy).await;
    exercise_every_tool(&client, &dir).await;
}

#[tokio::test]
async fn tools_list_is_strict_and_complete() {
    let h = start(game_args()).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let tools = within("tools/list", client.service.list_all_tools())
        .await
        .unwrap();
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "calculate_ram",
            "delete_file",
            "get_all_file_metadata",
            "get_all_files",
            "get_all_servers",
            "get_file_metadata",
            "get_netscript_definitions",
            "get_save_file",
            "get_script_logs",
            "get_server_state",
            "kill_script",
            "list_files",
            "poll_events",
            "read_file",
            "run_script",
            "status",
            "write_file"
        ]
    );
    for tool in &tools {
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(
            schema["additionalProperties"], false,
            "{} must refuse unknown arguments",
            tool.name
        );
        assert!(
            tool.output_schema.is_some(),
            "{} declares its output",
            tool.name
        );
    }
    let read = tools.iter().find(|t| t.name == "read_file").unwrap();
    assert_eq!(read.input_schema["properties"]["server"]["default"], "home");
    // A last page has no next_offset: the schema must not require it, or validating clients refuse the result.
    let output = Value::Object((*read.output_schema.clone().unwrap()).clone());
    let required = output["required"].as_array().unwrap();
    assert!(required.contains(&json!("total_bytes")), "{output}");
    assert!(!required.contains(&json!("next_offset")), "{output}");
    let delete = tools.iter().find(|t| t.name == "delete_file").unwrap();
    assert_eq!(
        delete.annotations.as_ref().and_then(|a| a.destructive_hint),
        Some(true)
    );
}

#[tokio::test]
async fn an_older_game_says_what_it_lacks() {
    let h = start(game_args()).await;
    let game = FakeGame::new(GameVersion::V2_6);
    let _conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let err = error_of(&call(&client, "get_file_metadata", json!({"filename": "a.js"})).await);
    assert_eq!(err["code"], "E_UNSUPPORTED");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("Unknown message received")
    );
    assert!(err["hint"].as_str().unwrap().contains("3.0.0"));
    // v2.x words its errors differently; they still arrive verbatim.
    let missing = error_of(&call(&client, "read_file", json!({"filename": "nope.js"})).await);
    assert_eq!(missing["message"], "File doesn't exist");
    let status = ok_of(&call(&client, "status", json!({})).await);
    assert_eq!(status["methods"]["getAllServers"], "yes");
    assert_eq!(status["methods"]["getFileMetadata"], "no");
    assert_eq!(status["methods"]["getAllFileMetadata"], "no");
    assert_eq!(status["methods"]["getSaveFile"], "unknown");
    assert_eq!(status["game_version"], "2.6 to 2.8.x");
    let advice = status["advice"].as_str().unwrap();
    assert!(
        !advice.contains("every tool can be used") && advice.contains("get_file_metadata"),
        "advice agrees with methods: {advice}"
    );
}

#[tokio::test]
async fn saving_is_refused_unless_the_user_allowed_a_directory() {
    let h = start(game_args()).await;
    let game = v3();
    let conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let err = error_of(&call(&client, "get_save_file", json!({})).await);
    assert_eq!(err["code"], "E_UNSUPPORTED");
    assert!(
        err["hint"]
            .as_str()
            .unwrap()
            .contains("--bitburner-save-dir")
    );
    assert!(conn.methods().is_empty(), "nothing was asked of the game");
}

#[tokio::test]
async fn an_existing_save_is_not_overwritten_unless_asked() {
    let dir = tempdir("overwrite");
    let mut args = game_args();
    args.save_dir = Some(dir.clone());
    let h = start(args).await;
    let game = v3();
    let _conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    ok_of(&call(&client, "get_save_file", json!({"filename": "s.json.gz"})).await);
    let again = error_of(&call(&client, "get_save_file", json!({"filename": "s.json.gz"})).await);
    assert_eq!(again["code"], "E_CONFLICT");
    ok_of(
        &call(
            &client,
            "get_save_file",
            json!({"filename": "s.json.gz", "overwrite": true}),
        )
        .await,
    );
    let escape = error_of(&call(&client, "get_save_file", json!({"filename": "../s.json"})).await);
    assert_eq!(escape["code"], "E_INVALID_ARGUMENT");
    // A link planted in the save directory, to a file or to nothing, is never written through (an attack run
    // had `overwrite: true` truncate the file outside the directory, or create one there).
    let outside = tempdir("overwrite-outside");
    std::fs::write(outside.join("victim.txt"), "keep me").unwrap();
    std::os::unix::fs::symlink(outside.join("victim.txt"), dir.join("evil.json")).unwrap();
    std::os::unix::fs::symlink(outside.join("made.json"), dir.join("dangling.json")).unwrap();
    for name in ["evil.json", "dangling.json"] {
        for overwrite in [true, false] {
            let e = error_of(
                &call(
                    &client,
                    "get_save_file",
                    json!({"filename": name, "overwrite": overwrite}),
                )
                .await,
            );
            assert!(
                ["E_INVALID_ARGUMENT", "E_CONFLICT"].contains(&e["code"].as_str().unwrap()),
                "{name} {overwrite}: {e}"
            );
            assert!(
                !e["message"].as_str().unwrap().contains("sync"),
                "says what a save does, not the sync: {e}"
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("victim.txt")).unwrap(),
        "keep me"
    );
    assert!(
        !outside.join("made.json").exists(),
        "nothing made through the dangling link"
    );
    assert!(
        std::fs::symlink_metadata(dir.join("evil.json"))
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link itself is left as it was"
    );
}

/// A game file read as a resource is held to the result cap as `read_file` is: a 900 KB file (a script can
/// write one with `ns.write`) comes back as its first page, with the rest to read page by page.
#[tokio::test]
async fn a_large_file_read_as_a_resource_is_cut_to_the_result_cap() {
    use bridge_core::tool::{RESULT_CAP_BYTES, TRUNCATED_META_KEY};
    use rmcp::model::{ReadResourceRequestParams, ResourceContents};
    let h = start(game_args()).await;
    let game = v3();
    let _conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Legacy).await;
    let content = "x".repeat(900_000);
    ok_of(
        &call(
            &client,
            "write_file",
            json!({"filename": "big.txt", "content": content}),
        )
        .await,
    );

    let read = within(
        "resources/read",
        client.service.read_resource(ReadResourceRequestParams::new(
            "bitburner://files/home/big.txt",
        )),
    )
    .await
    .unwrap();
    let ResourceContents::TextResourceContents { text, meta, .. } = &read.contents[0] else {
        panic!("text expected")
    };
    assert!(text.len() <= RESULT_CAP_BYTES, "{} bytes", text.len());
    let cut = &meta.as_ref().unwrap().0[TRUNCATED_META_KEY];
    assert_eq!(cut["total_bytes"], 900_000, "{cut}");
    assert!(cut["rest"].as_str().is_some(), "{cut}");
    let sent = serde_json::to_string(&read).unwrap().len();
    assert!(sent < 2 * RESULT_CAP_BYTES, "the answer is {sent} bytes");
}

#[tokio::test]
async fn resources_serve_definitions_and_files_and_announce_changes() {
    use rmcp::model::{ReadResourceRequestParams, ResourceContents, SubscribeRequestParams};
    let h = start(game_args()).await;
    let game = v3();
    let _conn = h.connect(&game).await;
    let mut client = http_client(h.mcp_addr, Era::Legacy).await;
    ok_of(
        &call(
            &client,
            "write_file",
            json!({"filename": "a.js", "content": SCRIPT}),
        )
        .await,
    );

    let listed = within("resources/list", client.service.list_all_resources())
        .await
        .unwrap();
    let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
    assert!(
        uris.contains(&"bitburner://definitions/NetscriptDefinitions.d.ts"),
        "{uris:?}"
    );
    assert!(uris.contains(&"bitburner://files/home/a.js"), "{uris:?}");

    let read = within(
        "resources/read",
        client.service.read_resource(ReadResourceRequestParams::new(
            "bitburner://files/home/a.js",
        )),
    )
    .await
    .unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
        panic!("text expected")
    };
    assert_eq!(text, SCRIPT);

    // Subscriptions are the legacy era's push channel; this client speaks that era on purpose.
    #[allow(deprecated)]
    within(
        "resources/subscribe",
        client
            .service
            .subscribe(SubscribeRequestParams::new("bitburner://files/home/a.js")),
    )
    .await
    .unwrap();
    ok_of(
        &call(
            &client,
            "write_file",
            json!({"filename": "a.js", "content": "// v2"}),
        )
        .await,
    );
    let uri = within("resources/updated", client.updates.recv())
        .await
        .unwrap();
    assert_eq!(uri, "bitburner://files/home/a.js");
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("bitburner-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn modern_clients_hear_file_changes_through_listen() {
    use rmcp::model::{ServerNotification, SubscriptionFilter};
    let h = start(game_args()).await;
    let game = v3();
    let _conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let uri = "bitburner://files/home/lib/x.js";
    let filter = SubscriptionFilter::builder()
        .resource_subscriptions(vec![uri.to_owned()])
        .build();
    let mut sub = within("listen", client.service.peer().listen(filter))
        .await
        .unwrap();
    ok_of(
        &call(
            &client,
            "write_file",
            json!({"filename": "/lib/x.js", "content": "1"}),
        )
        .await,
    );
    let note = within("resources/updated", sub.next())
        .await
        .unwrap()
        .unwrap();
    match note {
        ServerNotification::ResourceUpdatedNotification(n) => assert_eq!(n.params.uri, uri),
        other => panic!("unexpected {other:?}"),
    }
    ok_of(&call(&client, "delete_file", json!({"filename": "lib/x.js"})).await);
    let note = within("resources/updated", sub.next())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(note, ServerNotification::ResourceUpdatedNotification(n) if n.params.uri == uri)
    );
}

/// The structured result must describe a body, never carry it again next to the text.
fn structured_size(result: &rmcp::model::CallToolResult) -> usize {
    ok_of(result).to_string().len()
}

#[tokio::test]
async fn large_reads_come_in_pages_and_never_twice() {
    let h = start(game_args()).await;
    let game = v3();
    // 200 KB with a two-byte character on every line: pages must not split it.
    let big: String = (0..4000)
        .map(|i| format!("// line {i:05} é {}\n", "x".repeat(30)))
        .collect();
    {
        let mut world = game.world();
        let home = world.server_mut("home").unwrap();
        home.write("big.js", &big, true);
        for i in 0..20 {
            home.write(&format!("f{i:02}.txt"), &"y".repeat(10_000), false);
        }
    }
    let _conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;

    let mut rebuilt = String::new();
    let mut offset = Some(0);
    let mut pages = 0;
    while let Some(o) = offset {
        let page = call(
            &client,
            "read_file",
            json!({"filename": "big.js", "offset": o}),
        )
        .await;
        let info = ok_of(&page);
        assert_eq!(info["total_bytes"], big.len());
        assert!(structured_size(&page) < 300, "{info}");
        let text = text_of(&page);
        let body = info["returned_bytes"].as_u64().unwrap() as usize;
        assert!(body <= 65_536, "default page size");
        if info.get("next_offset").is_some() {
            assert!(
                text[body..].contains("call read_file again with offset"),
                "trailer"
            );
        }
        rebuilt.push_str(&text[..body]);
        offset = info["next_offset"].as_u64().map(|n| n as usize);
        pages += 1;
    }
    assert_eq!(rebuilt, big, "the pages chain back into the file");
    assert_eq!(pages, big.len().div_ceil(65_536));
    let small = ok_of(
        &call(
            &client,
            "read_file",
            json!({"filename": "big.js", "offset": 0, "limit": 1000}),
        )
        .await,
    );
    assert!(small["returned_bytes"].as_u64().unwrap() <= 1000);
    let past = error_of(
        &call(
            &client,
            "read_file",
            json!({"filename": "big.js", "offset": big.len() + 1}),
        )
        .await,
    );
    assert_eq!(past["code"], "E_INVALID_ARGUMENT");

    // get_all_files: whole files up to the budget, then a cursor.
    let first = call(&client, "get_all_files", json!({"max_bytes": 25_000})).await;
    let info = ok_of(&first);
    assert_eq!(info["total_files"], 21);
    assert_eq!(
        info["files"][0],
        json!({"filename": "big.js", "bytes": big.len(), "included": false}),
        "a file larger than the page is named, not sent"
    );
    assert_eq!(
        info["files"][1]["included"], true,
        "the page fills on after it"
    );
    assert_eq!(info["next_offset"], 3);
    assert!(text_of(&first).len() < 25_000 + 1000);
    assert!(
        !text_of(&first).contains("// line"),
        "the large file's content is not sent"
    );
    let second = call(
        &client,
        "get_all_files",
        json!({"max_bytes": 25_000, "offset": 3}),
    )
    .await;
    assert_eq!(ok_of(&second)["files"].as_array().unwrap().len(), 2);
    assert_eq!(ok_of(&second)["next_offset"], 5);
    assert!(structured_size(&second) < 1000);
}

#[tokio::test]
async fn definitions_can_be_taken_in_part() {
    let h = start(game_args()).await;
    let game = v3();
    let _conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let ns = call(
        &client,
        "get_netscript_definitions",
        json!({"namespace": "NS"}),
    )
    .await;
    assert!(text_of(&ns).starts_with("/** Netscript API (fake game). */\nexport interface NS {"));
    assert!(!text_of(&ns).contains("ScriptArg"));
    assert!(structured_size(&ns) < 300);
    let found = call(
        &client,
        "get_netscript_definitions",
        json!({"search": "GROW", "strip_exports": true}),
    )
    .await;
    assert_eq!(ok_of(&found)["matches"], 1);
    assert_eq!(
        text_of(&found),
        "L4 [NS]: grow(host: string): Promise<number>;\n"
    );
    let unknown = error_of(
        &call(
            &client,
            "get_netscript_definitions",
            json!({"namespace": "Nope"}),
        )
        .await,
    );
    assert_eq!(unknown["code"], "E_INVALID_ARGUMENT");
    assert!(unknown["message"].as_str().unwrap().contains("NS"));
}

#[tokio::test]
async fn terse_game_errors_come_with_a_specific_hint() {
    let h = start(game_args()).await;
    let game = FakeGame::new(GameVersion::V2_6);
    game.world()
        .server_mut("home")
        .unwrap()
        .write("bad.js", "function main( {", true);
    let _conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let ram = error_of(&call(&client, "calculate_ram", json!({"filename": "bad.js"})).await);
    assert_eq!(ram["message"], "Ram cost could not be calculated");
    assert!(
        ram["hint"].as_str().unwrap().contains("syntax error"),
        "{ram}"
    );
    assert!(ram["hint"].as_str().unwrap().contains("imports"), "{ram}");
    let host = error_of(&call(&client, "list_files", json!({"server": "nowhere"})).await);
    assert_eq!(host["message"], "Server hostname invalid");
    assert!(
        host["hint"].as_str().unwrap().contains("get_all_servers"),
        "{host}"
    );
}

#[tokio::test]
async fn a_file_too_large_to_write_is_not_invited_to_be_written_in_pieces() {
    let mut args = game_args();
    args.file_write_max_bytes = 100;
    let h = start(args).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let err = error_of(
        &call(
            &client,
            "write_file",
            json!({"filename": "a.js", "content": "x".repeat(101)}),
        )
        .await,
    );
    assert_eq!(err["code"], "E_TOO_LARGE");
    let hint = err["hint"].as_str().unwrap();
    assert!(!hint.contains("in pieces of"), "{hint}");
    assert!(hint.contains("replaces the whole file"), "{hint}");
}

#[tokio::test]
async fn a_save_name_too_long_is_an_argument_error() {
    let dir = tempdir("long-name");
    let mut args = game_args();
    args.save_dir = Some(dir);
    let h = start(args).await;
    let game = v3();
    let conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let name = format!("{}.json", "s".repeat(400));
    let err = error_of(&call(&client, "get_save_file", json!({"filename": name})).await);
    assert_eq!(err["code"], "E_INVALID_ARGUMENT", "{err}");
    assert_eq!(err["details"]["field"], "filename");
    assert_eq!(err["details"]["limit"], 255);
    assert!(conn.methods().is_empty(), "no save was built for nothing");
}

/// A refusal, ours or the game's, names the field and the rule without echoing the input whole: the game's
/// "File does not exist. Filename: …" for a 650 000-character name came back whole, in the text and in `_meta`
/// (1.3 MB).
#[tokio::test]
async fn a_huge_file_name_is_refused_without_echoing_it() {
    let h = start(game_args()).await;
    let game = v3();
    let _conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let long = "a".repeat(650_000);
    let cases = [
        (
            format!("{long}.txt"),
            "E_REMOTE",
            "File does not exist",
            ".txt",
        ),
        (
            format!("{long} b.txt"),
            "E_INVALID_ARGUMENT",
            "aaaa",
            "contains a space",
        ),
    ];
    for (name, code, starts, ends) in cases {
        let result = call(&client, "read_file", json!({ "filename": name })).await;
        let size = serde_json::to_string(&result).unwrap().len();
        assert!(size < 12_000, "{code}: the answer is {size} bytes");
        let err = error_of(&result);
        assert_eq!(err["code"], code, "{err}");
        let message = err["message"].as_str().unwrap();
        assert!(message.contains(starts), "{message}");
        assert!(message.contains(ends), "{message}");
        assert!(message.contains("bytes in all"), "{message}");
    }
    // The same name in a resource URI: the read's error is held to the same length, message and data. A
    // legacy session: a 2026-07-28 request repeats the URI in a header, which no server takes at this size.
    let legacy = http_client(h.mcp_addr, Era::Legacy).await;
    let uri = format!("bitburner://files/home/{long}%20b.txt");
    let error = within(
        "resources/read",
        legacy
            .service
            .read_resource(rmcp::model::ReadResourceRequestParams::new(uri)),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(error.len() < 12_000, "the error is {} bytes", error.len());
    assert!(
        error.contains("bytes in all"),
        "{}",
        &error[..error.len().min(600)]
    );
}
