//! Running scripts through the in-game helper (`mcp-helper.js`, `docs/protocols/bitburner.md` §9), with the
//! double playing the helper.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_bitburner::tools::helper::{HELPER_FILE, HELPER_JS, PROTOCOL, START_COMMAND};
use serde_json::json;
use support::*;

const SCRIPT: &str = "export async function main(ns){ ns.hack('n00dles'); }";

#[tokio::test]
async fn without_the_helper_a_tool_names_the_command_that_starts_it() {
    let h = start(game_args()).await;
    let game = v3();
    let _conn = h.connect(&game).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let e = error_of(&call(&client, "run_script", json!({"script": "hack.js"})).await);
    assert_eq!(e["code"], "E_UNSUPPORTED");
    assert!(e["hint"].as_str().unwrap().contains(START_COMMAND), "{e}");
    let helper = game
        .world()
        .server("home")
        .unwrap()
        .file(HELPER_FILE)
        .unwrap()
        .content
        .clone();
    assert_eq!(
        helper, HELPER_JS,
        "the bridge wrote the helper for the player to start"
    );
}

#[tokio::test]
async fn scripts_run_log_and_die_through_the_helper() {
    let h = start(game_args()).await;
    let game = v3();
    game.world()
        .server_mut("home")
        .unwrap()
        .write("hack.js", SCRIPT, true);
    let _conn = h.connect(&game).await;
    let _helper = game.start_helper(PROTOCOL);
    let client = http_client(h.mcp_addr, Era::Modern).await;

    let started = ok_of(
        &call(
            &client,
            "run_script",
            json!({"script": "hack.js", "threads": 2, "args": ["n00dles", 1, true]}),
        )
        .await,
    );
    let pid = started["pid"].as_u64().unwrap();
    assert!(pid > 0);
    assert_eq!(started["ram_gb"], 3.4);
    {
        let world = game.world();
        let p = world.processes.iter().find(|p| p.pid == pid).unwrap();
        assert_eq!((p.script.as_str(), p.threads), ("hack.js", 2));
        assert_eq!(p.args, [json!("n00dles"), json!(1), json!(true)]);
    }
    let logs = ok_of(&call(&client, "get_script_logs", json!({"pid": pid})).await);
    assert!(!logs["lines"].as_array().unwrap().is_empty(), "{logs}");
    let state = ok_of(&call(&client, "get_server_state", json!({})).await);
    assert_eq!(state["money"], 1_000_000.0);
    assert!(state["used_ram_gb"].as_f64().unwrap() > 0.0, "{state}");
    let killed = ok_of(&call(&client, "kill_script", json!({"pid": pid})).await);
    assert_eq!(killed["killed"], true);
    let again = ok_of(&call(&client, "kill_script", json!({"pid": pid})).await);
    assert_eq!(again["killed"], false);

    let missing = error_of(&call(&client, "run_script", json!({"script": "nope.js"})).await);
    assert_eq!(missing["code"], "E_REMOTE");
    assert!(
        missing["message"].as_str().unwrap().contains("nope.js"),
        "{missing}"
    );
    // No request or answer is left behind.
    let left: Vec<String> = game
        .world()
        .server("home")
        .unwrap()
        .text_files
        .iter()
        .map(|(p, _)| p.clone())
        .filter(|p| p.starts_with("mcp/re"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn a_helper_of_another_protocol_is_named_and_bad_arguments_send_nothing() {
    let h = start(game_args()).await;
    let game = v3();
    let conn = h.connect(&game).await;
    let _helper = game.start_helper(PROTOCOL + 1);
    let client = http_client(h.mcp_addr, Era::Modern).await;
    for bad in [
        json!({"script": "hack.js", "threads": 0}),
        json!({"script": "hack.js", "args": vec![1; 65]}),
        json!({"script": "hack.js", "args": [{"an": "object"}]}),
        json!({"script": "no extension"}),
    ] {
        let e = error_of(&call(&client, "run_script", bad.clone()).await);
        assert_eq!(e["code"], "E_INVALID_ARGUMENT", "{bad}: {e}");
    }
    assert!(
        conn.methods().is_empty(),
        "nothing was sent for bad arguments"
    );
    // Wait for the helper's first heartbeat, then ask.
    within("the heartbeat", async {
        while game
            .world()
            .server("home")
            .unwrap()
            .file("mcp/helper.txt")
            .is_none()
        {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    let e = error_of(&call(&client, "get_server_state", json!({})).await);
    assert_eq!(e["code"], "E_UNSUPPORTED");
    assert!(e["message"].as_str().unwrap().contains("protocol"), "{e}");
    assert!(e["hint"].as_str().unwrap().contains(START_COMMAND), "{e}");
}
