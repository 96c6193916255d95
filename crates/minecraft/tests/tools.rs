#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, deprecated)]
//! Every tool end to end: MCP client → MCP server → relay (in-process) → the simulated game and back; the
//! protocol's error codes (PROTOCOL.md §7) in the details; events pushed to subscribers and pulled with
//! poll_events.

use crate::support;

use serde_json::json;
use support::*;

/// The MCP server with its relay in-process on a free port, and a game linked to it.
async fn embedded() -> (McpServer, FakeGame) {
    let port = free_port().await;
    let server = McpServer::start(mc_args(&[
        "--minecraft-relay-port",
        &port.to_string(),
        "--minecraft-auth-token",
        GAME_TOKEN,
    ]))
    .await;
    let game = FakeGame::start(&format!("ws://127.0.0.1:{port}"), "survival");
    game.wait_connected(1).await;
    server.ready(1).await;
    (server, game)
}

async fn free_port() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test]
async fn every_tool_reaches_the_game_and_returns_the_seed_models() {
    let (server, game) = embedded().await;
    let c = &server.client;

    let r = ok_of(
        &call(
            c,
            "execute_command",
            json!({"command": "/time query daytime"}),
        )
        .await,
    );
    assert_eq!(r["success"], true);
    assert_eq!(r["output"], json!(["It is 1000"]));
    assert_eq!(
        game.executed(),
        vec!["time query daytime"],
        "the leading / is stripped"
    );

    let r = ok_of(
        &call(
            c,
            "send_message",
            json!({"message": "hi", "target": "Steve"}),
        )
        .await,
    );
    assert_eq!(r["success"], true);

    // Numbers as numeric strings are accepted.
    let r = ok_of(
        &call(
            c,
            "teleport_player",
            json!({"player": "Steve", "x": "10", "y": 70, "z": "-5.5"}),
        )
        .await,
    );
    assert_eq!(r["location"]["x"], 10.0);
    assert_eq!(r["location"]["z"], -5.5);

    let r = ok_of(
        &call(
            c,
            "give_item",
            json!({"player": "Steve", "item": "diamond", "quantity": "3"}),
        )
        .await,
    );
    assert_eq!(r["success"], true);
    let r2 = ok_of(
        &call(
            c,
            "give_item",
            json!({"player": "Steve", "item": "minecraft:diamond", "quantity": 3}),
        )
        .await,
    );
    assert_eq!(r, r2, "diamond and minecraft:diamond are the same item");
    let gives: Vec<_> = game
        .commands()
        .into_iter()
        .filter(|c| c["payload"]["command"] == "give_item")
        .map(|c| c["payload"]["args"]["item"].clone())
        .collect();
    assert_eq!(
        gives,
        vec![json!("minecraft:diamond"), json!("minecraft:diamond")]
    );

    let r = ok_of(&call(c, "get_online_players", json!({})).await);
    assert_eq!(r["players"], json!(["Steve", "Alex"]));
    assert_eq!(r["count"], 2);

    let r = ok_of(&call(c, "get_player_info", json!({"player": "Alex"})).await);
    for field in [
        "name",
        "uuid",
        "health",
        "foodLevel",
        "location",
        "gameMode",
        "inventory",
    ] {
        assert!(r.get(field).is_some(), "PlayerInfo has {field}: {r}");
    }
    assert_eq!(r["inventory"][0]["type"], "minecraft:diamond");

    let r = ok_of(&call(c, "get_server_info", json!({})).await);
    for field in [
        "version",
        "onlinePlayers",
        "maxPlayers",
        "timeOfDay",
        "weather",
        "tps",
    ] {
        assert!(r.get(field).is_some(), "ServerInfo has {field}: {r}");
    }

    let r = ok_of(
        &call(
            c,
            "get_world_info",
            json!({"x": 0, "y": 64, "z": "0", "radius": 4}),
        )
        .await,
    );
    assert_eq!(r["blocks"][0]["type"], "minecraft:grass_block");
    assert_eq!(r["entities"][0]["name"], "Steve");

    let s = ok_of(&call(c, "status", json!({})).await);
    assert_eq!(s["mode"], "embedded");
    assert_eq!(s["games"], json!(["survival"]));
    server.stop().await;
    game.stop();
}

#[tokio::test]
async fn the_seed_error_codes_reach_the_agent_in_the_details() {
    let (server, game) = embedded().await;
    let c = &server.client;

    // Issue 22 item 7: the protocol's code first in the text the model reads, the same in _meta (the generic
    // category beside it).
    let r = call(c, "execute_command", json!({"command": "op Steve"})).await;
    assert!(
        text_of(&r).starts_with("[INVALID_COMMAND] "),
        "{}",
        text_of(&r)
    );
    let e = error_of(&r);
    assert_eq!(e["code"], "INVALID_COMMAND");
    assert_eq!(e["category"], "E_INVALID_ARGUMENT");
    assert_eq!(e["details"].get("code"), None, "the code is at `code` only");
    assert!(!e["hint"].as_str().unwrap().is_empty());
    assert!(
        game.executed().is_empty(),
        "an un-whitelisted command never runs"
    );

    let r = call(c, "get_player_info", json!({"player": "Herobrine"})).await;
    assert!(text_of(&r).starts_with("[PLAYER_NOT_FOUND] "));
    let e = error_of(&r);
    assert_eq!(e["code"], "PLAYER_NOT_FOUND");
    assert_eq!(e["category"], "E_NOT_FOUND");
    assert_eq!(e["details"].get("code"), None, "the code is at `code` only");

    // Bad arguments are refused before anything is sent, naming the field and the limit.
    let before = game.commands().len();
    let e = error_of(
        &call(
            c,
            "get_world_info",
            json!({"x": 0, "y": 0, "z": 0, "radius": 17}),
        )
        .await,
    );
    assert_eq!(e["code"], "E_INVALID_ARGUMENT");
    assert!(e["message"].as_str().unwrap().contains("radius"), "{e}");
    let e = error_of(
        &call(
            c,
            "give_item",
            json!({"player": "Steve", "item": "not an item", "quantity": 1}),
        )
        .await,
    );
    assert!(e["message"].as_str().unwrap().contains("item"), "{e}");
    let e = error_of(
        &call(
            c,
            "give_item",
            json!({"player": "Steve", "item": "diamond", "quantity": 0}),
        )
        .await,
    );
    assert!(e["message"].as_str().unwrap().contains("quantity"), "{e}");
    assert_eq!(
        game.commands().len(),
        before,
        "refused arguments reach no game"
    );

    // No game at all: CONNECTION_ERROR.
    game.stop();
    within("the game to be gone", async {
        loop {
            let s = ok_of(&call(c, "status", json!({})).await);
            if s["games"].as_array().unwrap().is_empty() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    let r = call(c, "get_online_players", json!({})).await;
    assert!(text_of(&r).starts_with("[CONNECTION_ERROR] "));
    let e = error_of(&r);
    assert_eq!(e["code"], "CONNECTION_ERROR");
    assert_eq!(e["category"], "E_DISCONNECTED");
    assert_eq!(e["details"].get("code"), None, "the code is at `code` only");
    server.stop().await;
}

#[tokio::test]
async fn events_are_pushed_to_subscribers_and_pulled_with_poll_events() {
    let (mut server, game) = embedded().await;
    server
        .client
        .subscribe(rmcp::model::SubscribeRequestParams::new(
            "minecraft://events/player_chat",
        ))
        .await
        .unwrap();
    let types = [
        "player_join",
        "player_chat",
        "block_break",
        "player_death",
        "player_quit",
    ];
    for (i, ty) in types.iter().enumerate() {
        game.emit(ty, event_data(ty, i as u64));
    }
    game.wait_acked().await;
    // Pushed: the subscribed stream's URI, and only that one (Property 17 at the MCP edge).
    let uri = within("a resources/updated notice", server.client.updates.recv())
        .await
        .unwrap();
    assert_eq!(uri, "minecraft://events/player_chat");
    // Pulled: every type, with GameEvent's fields (PROTOCOL.md §4.1).
    for (i, ty) in types.iter().enumerate() {
        let events = within("the event", async {
            loop {
                let (events, _) = server.poll(ty, 0).await;
                if !events.is_empty() {
                    return events;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        })
        .await;
        assert_eq!(events.len(), 1, "{ty}: {events:?}");
        let data = &events[0]["data"];
        assert_eq!(data["eventType"], *ty);
        assert!(data["timestamp"].is_number());
        assert_eq!(data["game"], "survival");
        assert_eq!(data["data"], event_data(ty, i as u64));
    }
    server.stop().await;
    game.stop();
}

/// Every Minecraft tool has a title and every input field a description (MCP Inspector --strict checks both).
#[tokio::test]
async fn every_tool_has_a_title_and_every_input_field_a_description() {
    let (server, _game) = embedded().await;
    let tools = within("tools/list", server.client.list_all_tools())
        .await
        .unwrap();
    assert!(tools.len() >= 10, "{} tools", tools.len());
    let mut missing = Vec::new();
    // poll_events is the core's, shared by every bridge with event streams; its title is the core's to give.
    for t in tools.iter().filter(|t| t.name != "poll_events") {
        if t.title.as_deref().is_none_or(str::is_empty) {
            missing.push(format!("{}: title", t.name));
        }
        let props = t
            .input_schema
            .get("properties")
            .and_then(|p| p.as_object())
            .cloned()
            .unwrap_or_default();
        for (field, schema) in props {
            let described = schema
                .get("description")
                .and_then(|d| d.as_str())
                .is_some_and(|d| !d.trim().is_empty());
            if !described {
                missing.push(format!("{}.{field}: description", t.name));
            }
        }
    }
    assert!(missing.is_empty(), "missing: {missing:?}");
    // Clients check structuredContent against the output schema: the marks are declared where they appear.
    for name in [
        "execute_command",
        "get_online_players",
        "get_player_info",
        "get_world_info",
    ] {
        let t = tools.iter().find(|t| t.name == name).unwrap();
        let schema = serde_json::to_value(t.output_schema.as_deref().unwrap()).unwrap();
        for field in ["untrusted", "untrusted_left_out"] {
            assert!(
                schema["properties"].get(field).is_some(),
                "{name}'s output schema has {field}: {schema}"
            );
        }
    }
}

/// Finding C7: what players wrote reaches the model through tool results too (an item renamed on an anvil, a
/// name tag, a command's output, a name). Each result lists those strings' paths in `untrusted` and its text
/// shows them fenced, the fence longer than any backtick run in them.
#[tokio::test]
async fn player_written_strings_in_tool_results_are_marked_and_fenced() {
    let (server, game) = embedded().await;
    let c = &server.client;

    let r = call(c, "get_player_info", json!({"player": "Alex"})).await;
    let info = ok_of(&r);
    assert_eq!(info["inventory"][1]["displayName"], RENAMED);
    assert_eq!(
        info["untrusted"],
        json!([
            "name",
            "inventory[0].displayName",
            "inventory[1].displayName"
        ]),
        "{info}"
    );
    assert_fenced(
        &text_of(&r),
        &[
            "name: Alex".to_owned(),
            format!("inventory[1].displayName: {RENAMED}"),
        ],
    );

    let r = call(
        c,
        "get_world_info",
        json!({"x": 0, "y": 64, "z": 0, "radius": 4}),
    )
    .await;
    let world = ok_of(&r);
    assert_eq!(
        world["untrusted"],
        json!(["entities[0].name", "entities[1].name"]),
        "{world}"
    );
    assert_fenced(&text_of(&r), &[format!("entities[1].name: {RENAMED}")]);

    let r = call(
        c,
        "execute_command",
        json!({"command": format!("say {RENAMED}")}),
    )
    .await;
    let said = ok_of(&r);
    assert_eq!(said["untrusted"], json!(["output[0]"]), "{said}");
    assert_fenced(&text_of(&r), &[format!("output[0]: [Server] {RENAMED}")]);

    let r = call(c, "get_online_players", json!({})).await;
    assert_eq!(ok_of(&r)["untrusted"], json!(["players[0]", "players[1]"]));
    assert_fenced(&text_of(&r), &["players[0]: Steve".to_owned()]);

    // Nothing players wrote, nothing marked.
    let r = call(c, "get_server_info", json!({})).await;
    assert_eq!(ok_of(&r).get("untrusted"), None);
    assert!(!text_of(&r).contains("Untrusted"), "{}", text_of(&r));
    server.stop().await;
    game.stop();
}

/// The marks are bounded: a farm of a hundred name-tagged mobs marks the first of them, and the result says
/// how many were left out.
#[tokio::test]
async fn marked_strings_are_bounded_and_the_rest_counted() {
    let (server, game) = embedded().await;
    let r = call(
        &server.client,
        "get_world_info",
        json!({"x": 0, "y": 64, "z": 0, "radius": 5}),
    )
    .await;
    let world = ok_of(&r);
    assert_eq!(world["entities"].as_array().unwrap().len(), NAMED_MOBS);
    let marked = world["untrusted"].as_array().unwrap();
    let left_out = world["untrusted_left_out"].as_u64().unwrap() as usize;
    assert!(!marked.is_empty() && left_out > 0, "{world}");
    assert_eq!(marked.len() + left_out, NAMED_MOBS);
    assert_eq!(marked[0], "entities[0].name");
    let text = text_of(&r);
    assert_fenced(&text, &[format!("entities[0].name: 000 {RENAMED}")]);
    assert!(
        text.contains(&format!("{left_out} more player-written strings")),
        "{text}"
    );
    server.stop().await;
    game.stop();
}

/// `text` has the untrusted label, then a fence longer than any backtick run in `lines` (four backticks
/// where they hold [`RENAMED`]'s three) holding each of them whole (`path: text`, the text JSON-quoted), then
/// the fence's end.
fn assert_fenced(text: &str, lines: &[String]) {
    let lines: Vec<String> = lines
        .iter()
        .map(|line| {
            let (path, said) = line.split_once(": ").unwrap();
            format!("{path}: {}", json!(said))
        })
        .collect();
    let fence = if lines.iter().any(|l| l.contains("```")) {
        "````"
    } else {
        "```"
    };
    let label = text
        .find("Untrusted player content")
        .unwrap_or_else(|| panic!("no label: {text}"));
    let open = format!("\n{fence}player-content\n");
    let start = text[label..]
        .find(&open)
        .map(|i| label + i + open.len())
        .unwrap_or_else(|| panic!("no fence {fence} after the label: {text}"));
    let end = text[start..]
        .find(&format!("\n{fence}"))
        .map(|i| start + i)
        .unwrap_or_else(|| panic!("the fence is not closed: {text}"));
    let body: Vec<&str> = text[start..end].lines().collect();
    for line in &lines {
        assert!(body.contains(&line.as_str()), "{line:?} not fenced: {text}");
    }
}
