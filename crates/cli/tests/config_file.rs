//! `serve --config FILE`: the same settings as flags, in TOML, checked by the same parsers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use mcp_testkit::{Era, http_get};
use support::Server;

fn write_config(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-bridges-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_mounts_its_bridges_with_their_settings() {
    let path = write_config(
        "both.toml",
        r#"
        bridges = ["bitburner", "computercraft"]
        [mcp]
        http = true
        mcp-port = 0
        [bitburner]
        game-port = 0
        [computercraft]
        link-host = "127.0.0.1"
        link-port = 0
        "#,
    );
    let mut server = Server::spawn(&["serve", "--config", path.to_str().unwrap()]);
    let mcp = server.after("serving MCP at http://", &['/']).await;
    let client = mcp_testkit::http_client(mcp.parse().unwrap(), Era::Modern).await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "computercraft_run_lua")
            && tools.iter().any(|t| t.name == "bitburner_read_file")
    );
    let health = http_get(&format!("http://{mcp}/health")).await;
    assert!(
        health.contains("\"computercraft\"") && health.contains("\"bitburner\""),
        "{health}"
    );
    server.sigterm();
    assert_eq!(server.exit_code().await, Some(0));
}

/// Starts `serve --config` with a file of `contents`; asserts the start is refused (exit 2) and returns stderr.
fn refused_config(name: &str, contents: &str) -> String {
    let path = write_config(name, contents);
    let out = std::process::Command::new(support::BIN)
        .args(["serve", "--config", path.to_str().unwrap()])
        .env_clear()
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    stderr
}

#[test]
fn a_bad_value_in_the_file_names_its_key_variable_and_range() {
    let stderr = refused_config(
        "bad.toml",
        "bridges = [\"bitburner\"]\n[bitburner]\ngame-port = 70000\n",
    );
    for expected in [
        "--bitburner-game-port",
        "BITBURNER_GAME_PORT",
        "0 to 65535",
        "bad.toml",
    ] {
        assert!(stderr.contains(expected), "{expected} in {stderr}");
    }

    let stderr = refused_config(
        "typo.toml",
        "bridges = [\"bitburner\"]\n[bitburner]\ngame-prot = 1\n",
    );
    assert!(
        stderr.contains("unknown key `game-prot` in [bitburner]"),
        "{stderr}"
    );
}
