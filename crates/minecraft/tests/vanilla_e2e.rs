//! End to end through the real binary: `mcp-bridges minecraft --minecraft-rcon … --minecraft-server-log …` on stdio, an MCP client
//! calling a command tool (answered by the RCON double) and reading a chat event written to the log file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::vanilla_double;

use mcp_testkit::{Era, call, ok_of, within};
use rmcp::ClientServiceExt;
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, BufReader};
use vanilla_double::RconDouble;

/// The `mcp-bridges` binary, built once per test process (cargo does nothing when it is up to date).
fn binary() -> PathBuf {
    mcp_testkit::cargo::build_bin("mcp-bridges", "mcp-bridges")
}

#[tokio::test]
async fn the_binary_runs_commands_over_rcon_and_reads_chat_from_the_log() {
    let double = RconDouble::start("e2e-secret", Arc::new(vanilla_double::vanilla_answers)).await;
    let dir = std::env::temp_dir().join(format!("vanilla-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("latest.log");
    std::fs::write(
        &log,
        "[10:00:00] [Server thread/INFO]: <Old> history, not an event\n",
    )
    .unwrap();

    let mut child = tokio::process::Command::new(binary())
        .args([
            "minecraft",
            "--minecraft-rcon",
            &double.addr(),
            "--minecraft-server-log",
            log.to_str().unwrap(),
        ])
        .env_clear()
        // The password from the environment, as a deployment passes it (never on the command line).
        .env("MINECRAFT_RCON_PASSWORD", "e2e-secret")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let logged = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = logged.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            sink.lock().unwrap().push(line);
        }
    });
    let (read, write) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = within(
        "the stdio handshake",
        ().serve_with_lifecycle((read, write), mcp_testkit::lifecycle(Era::Legacy)),
    )
    .await
    .unwrap();

    let tools = within("tools/list", client.list_all_tools()).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for t in [
        "execute_command",
        "get_online_players",
        "get_player_info",
        "status",
        "poll_events",
    ] {
        assert!(names.contains(&t), "{t} in {names:?}");
    }

    let out = ok_of(&call(&client, "execute_command", json!({"command": "list"})).await);
    assert_eq!(
        out["output"],
        json!(["There are 2 of a max of 20 players online: Steve, Alex"])
    );
    assert!(double.commands().contains(&"list".to_owned()));

    // Once the follower has opened the file at its end, a player speaks.
    crate::vanilla_tools::log_followed(&client).await;
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    f.write_all(b"[12:34:56] [Server thread/INFO]: <Steve> hello from the log\n")
        .unwrap();
    drop(f);
    let chat = within("the chat event", async {
        loop {
            let page = ok_of(
                &call(
                    &client,
                    "poll_events",
                    json!({"stream": "player_chat", "since": 0, "wait_ms": 1000}),
                )
                .await,
            );
            if let Some(e) = page["events"].as_array().and_then(|a| a.first()) {
                return e["data"].clone();
            }
        }
    })
    .await;
    assert_eq!(chat["eventType"], "player_chat");
    assert_eq!(
        chat["data"],
        json!({"player": "Steve", "message": "hello from the log"})
    );
    assert_eq!(chat["untrusted"], json!(["data.player", "data.message"]));
    let page = ok_of(
        &call(
            &client,
            "poll_events",
            json!({"stream": "player_chat", "since": 0}),
        )
        .await,
    );
    assert_eq!(
        page["events"].as_array().unwrap().len(),
        1,
        "the history line was not replayed"
    );

    client.cancel().await.unwrap();
    let _ = within("the server to exit", child.wait()).await;
    let log_text = logged.lock().unwrap().join("\n");
    assert!(
        !log_text.contains("e2e-secret"),
        "the password never reaches the log:\n{log_text}"
    );
    assert!(log_text.contains("connected to RCON"), "{log_text}");
}
