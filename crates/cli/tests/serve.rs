//! `mcp-bridges serve`: Bitburner and ComputerCraft mounted side by side in one MCP server, driven through a
//! real MCP client over stdio and HTTP in both eras: tools of both listed and callable, events of both read
//! with one `poll_events`, /health and /metrics per bridge.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bitburner_fake::{FakeGame, GameConnection, GameVersion, WEB_ORIGIN};
use mcp_testkit::{ERAS, Era, call, http_get, ok_of, text_of};
use rmcp::RoleClient;
use serde_json::{Value, json};
use support::{RawComputer, Server};

const BOTH: [&str; 10] = [
    "serve",
    "--bridge",
    "bitburner",
    "--bridge",
    "computercraft",
    "--bitburner-game-port",
    "0",
    "--computercraft-link-host",
    "127.0.0.1",
    "--computercraft-link-port=0",
];

/// The two live systems, connected to `server`.
struct Systems {
    _game: GameConnection,
    computer: RawComputer,
}

async fn connect_systems(server: &Server) -> Systems {
    let game_url = format!(
        "ws://{}",
        server.after("waiting for Bitburner on ws://", &[' ']).await
    );
    let link_url = format!(
        "ws://{}",
        server.after("computers link at ws://", &[';']).await
    );
    let game = FakeGame::new(GameVersion::V3_0);
    game.world()
        .server_mut("home")
        .unwrap()
        .write("notes.txt", "from the game", false);
    let conn = game.connect(&game_url, Some(WEB_ORIGIN)).await.unwrap();
    let computer = RawComputer::link(&link_url, 7, "base").await;
    Systems {
        _game: conn,
        computer,
    }
}

async fn poll(client: &rmcp::Peer<RoleClient>, stream: &str, filter: Value) -> Vec<Value> {
    let args = json!({"stream": stream, "wait_ms": 30000, "filter": filter});
    let page = ok_of(&call(client, "poll_events", args).await);
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["data"].clone())
        .collect()
}

/// What every transport and era must show of the two bridges in one server.
async fn exercise_both(client: &rmcp::Peer<RoleClient>, systems: &Systems, era: Era) {
    // Both live systems announce themselves on their bridge's stream, read through the one poll_events.
    let game = poll(client, "bitburner/connection", json!({})).await;
    assert_eq!(game[0]["event"], "connected", "{era:?}: {game:?}");
    let computers = poll(client, "computercraft://events/computers", json!({})).await;
    assert_eq!(computers[0]["event"], "connected", "{era:?}: {computers:?}");
    assert_eq!(computers[0]["computer"], 7);

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    // `serve` names every tool `<bridge>_<tool>`, whichever bridges are mounted.
    for name in [
        "bitburner_read_file",
        "bitburner_write_file",
        "bitburner_status",
        "computercraft_run_lua",
        "computercraft_fs_list",
        "computercraft_probe-computers",
    ] {
        assert!(names.contains(&name), "{era:?}: {name} in {names:?}");
    }
    assert_eq!(
        names.iter().filter(|n| **n == "poll_events").count(),
        1,
        "{era:?}: one poll_events for every bridge"
    );

    let read = call(
        client,
        "bitburner_read_file",
        json!({"filename": "notes.txt"}),
    )
    .await;
    assert!(
        text_of(&read).contains("from the game"),
        "{era:?}: {read:?}"
    );
    let lua = call(
        client,
        "computercraft_run_lua",
        json!({"computer": 7, "code": "return 42"}),
    )
    .await;
    assert_eq!(
        ok_of(&lua)["values"],
        json!([42]),
        "{era:?}: {}",
        text_of(&lua)
    );

    let event = format!("test_{era:?}");
    systems
        .computer
        .events
        .send(json!({"type": "event", "event": event, "args": []}))
        .unwrap();
    let events = poll(client, "computer_events", json!({"event": event})).await;
    assert_eq!(
        events.len(),
        1,
        "{era:?}: a unique stream name needs no bridge: {events:?}"
    );
    assert_eq!(events[0]["computer"], 7);

    let resources = client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    for uri in [
        "bitburner://events/connection",
        "computercraft://events/computers",
        "bitburner://files/home/notes.txt",
    ] {
        assert!(uris.contains(&uri), "{era:?}: {uri} in {uris:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_bridges_in_one_server_over_http() {
    let mut args = BOTH.to_vec();
    args.extend(["--http", "--mcp-port", "0"]);
    let mut server = Server::spawn(&args);
    let systems = connect_systems(&server).await;
    let mcp = server.after("serving MCP at http://", &['/']).await;
    for era in ERAS {
        let client = mcp_testkit::http_client(mcp.parse().unwrap(), era).await;
        exercise_both(&client, &systems, era).await;
    }
    let info = mcp_testkit::http_client(mcp.parse().unwrap(), Era::Legacy).await;
    let server_info = info.peer_info().unwrap().server_info.clone();
    assert_eq!(server_info.unwrap().name, "mcp-bridges");
    let instructions = info.peer_info().unwrap().instructions.clone().unwrap();
    assert!(
        instructions.contains("## bitburner") && instructions.contains("## computercraft"),
        "{instructions}"
    );

    let health: Value =
        serde_json::from_str(&http_get(&format!("http://{mcp}/health")).await).unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(
        health["bridges"]["bitburner"]["game_connected"], true,
        "{health}"
    );
    assert_eq!(
        health["bridges"]["computercraft"]["computers"], 1,
        "{health}"
    );

    let metrics = http_get(&format!("http://{mcp}/metrics")).await;
    for series in [
        r#"mcp_tool_calls_total{bridge="bitburner",tool="bitburner_read_file",outcome="ok"} 2"#,
        r#"mcp_tool_calls_total{bridge="computercraft",tool="computercraft_run_lua",outcome="ok"} 2"#,
        r#"mcp_tool_calls_total{bridge="mcp-bridges",tool="poll_events",outcome="ok"} 6"#,
        r#"bridge_events_published_total{bridge="computercraft",stream="computer_events"} 2"#,
        r#"mcp_uptime_seconds{bridge="bitburner"}"#,
    ] {
        assert!(metrics.contains(series), "{series} in\n{metrics}");
    }
    server.sigterm();
    assert_eq!(server.exit_code().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_bridges_in_one_server_over_stdio() {
    for era in ERAS {
        let mut args = BOTH.to_vec();
        args.push("--stdio");
        let mut server = Server::spawn(&args);
        let systems = connect_systems(&server).await;
        let client = support::stdio_client(&mut server, era).await;
        exercise_both(&client, &systems, era).await;
        drop(client);
        assert_eq!(
            server.exit_code().await,
            Some(0),
            "{era:?}: the client leaving ends the server"
        );
    }
}

#[test]
fn serve_is_listed_with_its_own_description() {
    let out = std::process::Command::new(support::BIN)
        .arg("--help")
        .env_clear()
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let serve = help
        .lines()
        .find(|l| l.trim_start().starts_with("serve"))
        .unwrap();
    assert!(serve.contains("Several bridges side by side"), "{help}");
}

#[test]
fn help_states_the_naming_rule_and_every_bridge_s_flags() {
    let out = std::process::Command::new(support::BIN)
        .args(["serve", "--help"])
        .env_clear()
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "`<bridge>_<tool>`",
        "--bitburner-game-port",
        "--computercraft-link-port",
        "--bridge <NAME>",
        "--config <FILE>",
    ] {
        assert!(help.contains(expected), "{expected} in\n{help}");
    }
}
