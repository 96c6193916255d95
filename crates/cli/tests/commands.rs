//! The commands that are not MCP servers (`minecraft-relay`, `debug host`, `bitburner sync --watch`): a table of
//! their own beside the bridges, refused by `serve --bridge`, and one shutdown path for all of them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::process::Stdio;
use support::{BIN, Server};

/// The bridges `serve` mounts, in the table's order.
const BRIDGES: &str = "bitburner, computercraft, sandbox, minecraft, debug";

/// Runs the binary to its end with `args`; returns its exit code and stderr.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(BIN)
        .args(args)
        .env_clear()
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// It was accepted, then failed at start (exit 1) with the relay's own message and no list of bridges.
#[test]
fn serve_refuses_the_relay_as_a_bridge_and_names_the_bridges() {
    for name in ["minecraft-relay", "debug-host"] {
        let (code, stderr) = run(&["serve", "--bridge", name]);
        assert_eq!(
            code,
            Some(2),
            "serve --bridge {name}: a usage error: {stderr}"
        );
        assert!(
            stderr.contains(&format!("`{name}` is a command of its own, not a bridge")),
            "{stderr}"
        );
        assert!(stderr.contains(&format!("Bridges: {BRIDGES}")), "{stderr}");
    }
}

#[test]
fn a_config_file_mounting_the_relay_is_refused_the_same_way() {
    let dir = std::env::temp_dir().join(format!("cli-commands-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("serve.toml");
    std::fs::write(&file, "bridges = [\"bitburner\", \"minecraft-relay\"]\n").unwrap();
    let (code, stderr) = run(&["serve", "--config", file.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("`minecraft-relay` is a command of its own, not a bridge"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_misspelt_bridge_still_gets_the_list_of_bridges() {
    let (code, stderr) = run(&["serve", "--bridge", "bitburnr"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("invalid value 'bitburnr'"), "{stderr}");
    assert!(
        stderr.contains("[possible values: bitburner, computercraft, sandbox, minecraft, debug]"),
        "{stderr}"
    );
}

#[test]
fn serve_lists_only_bridges_and_the_relay_keeps_its_command() {
    let out = std::process::Command::new(BIN)
        .args(["serve", "--help"])
        .env_clear()
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("[possible values: bitburner, computercraft, sandbox, minecraft, debug]"),
        "{help}"
    );
    // Only the minecraft bridge's own relay flags (--minecraft-relay-url, ...) carry the name.
    assert!(
        help.match_indices("minecraft-relay")
            .all(|(at, _)| help[..at].ends_with("--")),
        "{help}"
    );
    let out = std::process::Command::new(BIN)
        .arg("--help")
        .env_clear()
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("minecraft-relay"), "{help}");
    let (code, _) = run(&["minecraft-relay", "--help"]);
    assert_eq!(code, Some(0));
}

/// Starts `args`, waits for `ready` in its log, sends `signal` at once, and checks the command logged the
/// shutdown and ended with exit code 0. The relay, signalled as soon as it listened, used to die of the
/// signal itself: the handler was installed by a task that had not run yet.
async fn stops_cleanly(args: &[&str], env: &[(&str, &str)], ready: &str, signal: &str) {
    let mut server = Server::spawn_with_env(args, env);
    server.line(ready).await;
    let pid = server.child.id().unwrap().to_string();
    let status = std::process::Command::new("kill")
        .args([signal, &pid])
        .status()
        .unwrap();
    assert!(status.success());
    server.line("shutting down").await;
    assert_eq!(
        server.exit_code().await,
        Some(0),
        "{args:?} after {signal}: {:?}",
        server.log()
    );
}

/// A command line, its environment, and the log line that says it is up.
struct Case<'a> {
    args: &'a [&'a str],
    env: &'a [(&'a str, &'a str)],
    ready: &'a str,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_stops_on_sigterm_and_sigint() {
    let ws = std::env::temp_dir().join(format!("cli-commands-ws-{}", std::process::id()));
    std::fs::create_dir_all(&ws).unwrap();
    let sync_dir = ws.join("scripts");
    std::fs::create_dir_all(&sync_dir).unwrap();
    let ws_arg = ws.to_str().unwrap();
    let sync_arg = sync_dir.to_str().unwrap();
    let relay_token = [(
        "MINECRAFT_AUTH_TOKEN",
        "a-game-token-long-enough-for-the-relay",
    )];
    let relay: &[&str] = &[
        "minecraft-relay",
        "--relay-host",
        "127.0.0.1",
        "--relay-port",
        "0",
    ];
    let host: &[&str] = &["debug", "--debug-workspace", ws_arg, "host"];
    let sync: &[&str] = &[
        "bitburner",
        "--bitburner-game-port",
        "0",
        "sync",
        "--watch",
        sync_arg,
    ];
    // A bridge served over MCP takes the same path, through the core's serving loop.
    let mcp = support::BITBURNER_OVER_HTTP;
    let commands = [
        Case {
            args: relay,
            env: &relay_token,
            ready: "minecraft relay listening on",
        },
        Case {
            args: host,
            env: &[],
            ready: "bridge host started",
        },
        Case {
            args: sync,
            env: &[],
            ready: "waiting for Bitburner on",
        },
        Case {
            args: mcp,
            env: &[],
            ready: "serving MCP at",
        },
    ];
    for case in commands {
        for signal in ["-TERM", "-INT"] {
            stops_cleanly(case.args, case.env, case.ready, signal).await;
        }
    }
    let _ = std::fs::remove_dir_all(&ws);
}
