//! Every advertised bound is accepted at its edge, and each of v2.6.1's terse messages comes with a hint that
//! tells the player what to do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bitburner_fake::{FakeGame, GameVersion};
use serde_json::{Value, json};
use support::*;

/// (tool, integer argument, the other arguments a call needs).
const BOUNDED: &[(&str, &str, &str)] = &[
    ("read_file", "limit", r#"{"filename": "a.js"}"#),
    ("get_all_files", "max_bytes", "{}"),
    ("get_netscript_definitions", "limit", "{}"),
];

#[tokio::test]
async fn every_advertised_minimum_and_maximum_is_accepted() {
    let h = start(game_args()).await;
    let game = v3();
    game.world()
        .server_mut("home")
        .unwrap()
        .write("a.js", "abc\ndef\n", true);
    let _conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let tools = within("tools/list", client.service.list_all_tools())
        .await
        .unwrap();
    for (tool, field, rest) in BOUNDED {
        let spec = tools.iter().find(|t| t.name == *tool).unwrap();
        let schema = &spec.input_schema["properties"][*field];
        for edge in ["minimum", "maximum"] {
            let value = schema[edge].clone();
            assert!(
                value.is_u64(),
                "{tool}.{field} advertises a {edge}: {schema}"
            );
            let mut args: Value = serde_json::from_str(rest).unwrap();
            args[*field] = value.clone();
            let result = call(&client, tool, args).await;
            assert_ne!(
                result.is_error,
                Some(true),
                "{tool}.{field} = {value} (its {edge}) is refused: {}",
                text_of(&result)
            );
        }
        let below = schema["minimum"].as_u64().unwrap();
        if below > 0 {
            let mut args: Value = serde_json::from_str(rest).unwrap();
            args[*field] = json!(below - 1);
            let e = error_of(&call(&client, tool, args).await);
            assert_eq!(
                e["code"], "E_INVALID_ARGUMENT",
                "{tool}.{field} below its minimum"
            );
        }
    }
}

#[tokio::test]
async fn every_v2_6_message_has_a_hint_that_says_what_to_do() {
    let h = start(game_args()).await;
    let game = FakeGame::new(GameVersion::V2_6);
    game.world()
        .server_mut("home")
        .unwrap()
        .write("notes.txt", "x", false);
    let _conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let generic = |e: &Value| {
        let hint = e["hint"].as_str().unwrap_or_default().to_owned();
        hint.is_empty() || hint.starts_with("the game refused")
    };
    // getSaveFile on 2.6.1: no other tool can do it, so the hint names the game's own export.
    let mut args = game_args();
    args.save_dir = Some(std::env::temp_dir());
    let h2 = start(args).await;
    let _conn2 = h2.connect(&game).await;
    let client2 = http_client(h2.mcp_addr, Era::Modern).await;
    let save = error_of(&call(&client2, "get_save_file", json!({})).await);
    assert_eq!(save["code"], "E_UNSUPPORTED");
    let hint = save["hint"].as_str().unwrap();
    assert!(hint.contains("Export"), "{hint}");
    assert!(!hint.contains("use another tool"), "{hint}");

    // calculate_ram of a text file: `Filename isn't a script filename`.
    let not_script =
        error_of(&call(&client, "calculate_ram", json!({"filename": "notes.txt"})).await);
    assert_eq!(not_script["message"], "Filename isn't a script filename");
    assert!(
        not_script["hint"].as_str().unwrap().contains(".js"),
        "{not_script}"
    );
    // deleteFile of a missing file: `Script x.js not found.` / `Text file y.txt not found.`
    for (name, message) in [
        ("x.js", "Script x.js not found."),
        ("y.txt", "Text file y.txt not found."),
    ] {
        let gone = error_of(&call(&client, "delete_file", json!({"filename": name})).await);
        assert_eq!(gone["message"], message);
        assert!(!generic(&gone), "{gone}");
        assert!(
            gone["hint"].as_str().unwrap().contains("list_files"),
            "{gone}"
        );
    }
}

/// The messages a request of this bridge cannot provoke from the double (it always sends valid names and
/// params) still get their hints: checked on the hint function itself.
#[test]
fn unprovokable_v2_6_messages_get_hints() {
    use bridge_bitburner::tools::reply::explain;
    use bridge_bitburner::wire::Method;
    use bridge_core::ToolError;
    for (method, message, needle) in [
        (Method::PushFile, "Misses parameters", "update"),
        (Method::GetFile, "Message misses parameters", "update"),
        (Method::PushFile, "Invalid file path", "list_files"),
        (Method::DeleteFile, "Invalid filename", "list_files"),
    ] {
        let e = explain(method, ToolError::remote(message));
        assert_eq!(e.message(), message);
        assert_ne!(e.hint(), ToolError::remote(message).hint(), "{message}");
        assert!(e.hint().contains(needle), "{message}: {}", e.hint());
    }
}
