#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The relay over TLS (`wss://`, issue 9): a self-signed certificate made here with rcgen, the relay serving
//! it, the simulated game and the MCP server dialling `wss://` and trusting it with `--minecraft-relay-ca`; a tool call
//! and an event through; a plain `ws://` client and an untrusted CA refused while the relay keeps serving;
//! bad flags stop the start with an error naming them.

use crate::support;

use bridge_core::link::tls;
use bridge_minecraft::relay;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use support::*;

/// PEM files of a fresh self-signed certificate for `localhost` and 127.0.0.1.
struct Pems {
    dir: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Pems {
    fn new() -> Pems {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mc-relay-tls-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let made = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
            .unwrap();
        let cert = dir.join("cert.pem");
        let key = dir.join("key.pem");
        std::fs::write(&cert, made.cert.pem()).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        Pems { dir, cert, key }
    }

    fn cert(&self) -> &str {
        self.cert.to_str().unwrap()
    }

    fn key(&self) -> &str {
        self.key.to_str().unwrap()
    }
}

impl Drop for Pems {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn tls_relay(pems: &Pems) -> TestRelay {
    start_relay(relay_args(&[
        "--tls-cert",
        pems.cert(),
        "--tls-key",
        pems.key(),
    ]))
    .await
}

fn wss(relay: &TestRelay) -> String {
    format!("wss://localhost:{}/", relay.addr.port())
}

fn trust(ca: &Path) -> Option<Arc<tls::ClientConfig>> {
    Some(tls::client_config(Some(ca)).unwrap())
}

async fn status_until(server: &McpServer, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    within(what, async {
        loop {
            let s = ok_of(&call(&server.client, "status", json!({})).await);
            if ok(&s) {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

#[tokio::test]
async fn a_tool_call_and_an_event_go_through_a_wss_relay() {
    let pems = Pems::new();
    let relay = tls_relay(&pems).await;
    assert_eq!(relay.relay.health()["scheme"], "wss");
    let game = FakeGame::start_with(&wss(&relay), "survival", trust(&pems.cert));
    game.wait_connected(1).await;
    let server = McpServer::start(mc_args(&[
        "--minecraft-relay-url",
        &wss(&relay),
        "--minecraft-relay-token",
        MCP_TOKEN,
        "--minecraft-relay-ca",
        pems.cert(),
    ]))
    .await;
    server.ready(1).await;
    let s = ok_of(&call(&server.client, "status", json!({})).await);
    assert!(
        s["relay_url"].as_str().unwrap().starts_with("wss://"),
        "{s}"
    );

    let r = ok_of(
        &call(
            &server.client,
            "execute_command",
            json!({"command": "/time query daytime"}),
        )
        .await,
    );
    assert_eq!(r["success"], true);
    assert_eq!(r["output"], json!(["It is 1000"]));
    assert_eq!(game.executed(), vec!["time query daytime"]);

    game.emit("player_chat", event_data("player_chat", 7));
    game.wait_acked().await;
    let events = within("the event over wss", async {
        loop {
            let (events, _) = server.poll("player_chat", 0).await;
            if !events.is_empty() {
                return events;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["data"]["data"], event_data("player_chat", 7));

    server.stop().await;
    game.stop();
    relay.stop().await;
}

#[tokio::test]
async fn a_plain_ws_client_fails_cleanly_and_the_relay_keeps_serving() {
    let pems = Pems::new();
    let relay = tls_relay(&pems).await;
    let plain = format!("ws://127.0.0.1:{}/", relay.addr.port());
    for _ in 0..3 {
        let refused = within(
            "the plain dial to fail",
            raw_connect(&plain, Some(GAME_TOKEN)),
        )
        .await;
        assert!(
            refused.is_err(),
            "a plain ws:// link to a TLS relay must fail"
        );
    }
    // An MCP server dialling ws:// reports the failure and stays down; the relay still serves wss://.
    let server = McpServer::start(mc_args(&[
        "--minecraft-relay-url",
        &plain,
        "--minecraft-relay-token",
        MCP_TOKEN,
    ]))
    .await;
    status_until(&server, "status to report the failed dial", |s| {
        s["connected"] == false && s["last_error"].is_string()
    })
    .await;
    let game = FakeGame::start_with(&wss(&relay), "survival", trust(&pems.cert));
    game.wait_connected(1).await;
    let h = relay.relay.health();
    assert_eq!(h["connections"]["games"], 1, "{h}");
    server.stop().await;
    game.stop();
    relay.stop().await;
}

#[tokio::test]
async fn a_wrong_ca_is_refused_and_status_says_so() {
    let pems = Pems::new();
    let other = Pems::new();
    let relay = tls_relay(&pems).await;
    let url = wss(&relay);
    // A CA that did not sign the relay's certificate, and none (the public web roots only).
    for ca in [Some(other.cert()), None] {
        let mut argv = vec![
            "--minecraft-relay-url",
            url.as_str(),
            "--minecraft-relay-token",
            MCP_TOKEN,
        ];
        if let Some(ca) = ca {
            argv.extend(["--minecraft-relay-ca", ca]);
        }
        let server = McpServer::start(mc_args(&argv)).await;
        let s = status_until(&server, "status to report the untrusted certificate", |s| {
            s["last_error"].is_string()
        })
        .await;
        assert_eq!(s["connected"], false);
        let e = s["last_error"].as_str().unwrap();
        assert!(e.contains("TLS handshake failed"), "{e}");
        assert!(e.contains("certificate"), "{e}");
        assert!(e.contains("--minecraft-relay-ca"), "{e}");
        // A tool call fails with the connection error, not a hang.
        let err = error_of(&call(&server.client, "get_online_players", json!({})).await);
        assert!(err.to_string().contains("CONNECTION_ERROR"), "{err}");
        server.stop().await;
    }
    relay.stop().await;
}

#[tokio::test]
async fn bad_tls_flags_stop_the_relay_with_an_error_naming_them() {
    let pems = Pems::new();
    let other = Pems::new();
    let missing = pems.dir.join("missing.pem");
    let missing = missing.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &["--tls-cert", pems.cert()],
            "--tls-key (RELAY_TLS_KEY) is not",
        ),
        (
            &["--tls-key", pems.key()],
            "--tls-cert (RELAY_TLS_CERT) is not",
        ),
        (
            &["--tls-cert", missing, "--tls-key", pems.key()],
            "--tls-cert (RELAY_TLS_CERT): cannot read",
        ),
        (
            &["--tls-cert", pems.cert(), "--tls-key", missing],
            "--tls-key (RELAY_TLS_KEY): cannot read",
        ),
        (
            &["--tls-cert", pems.cert(), "--tls-key", other.key()],
            "do not go together",
        ),
    ];
    for (flags, wanted) in cases {
        let err = relay::settings(&relay_args(flags), Vec::new()).unwrap_err();
        assert!(err.to_string().contains(wanted), "{flags:?}: {err}");
    }
}

#[tokio::test]
async fn bad_relay_ca_flags_stop_the_mcp_server_with_an_error_naming_them() {
    let pems = Pems::new();
    let missing = pems.dir.join("missing.pem");
    let env = bridge_core::BridgeEnv::new();
    let cases: [(Vec<&str>, &str); 3] = [
        (
            vec![
                "--minecraft-relay-url",
                "wss://localhost:1/",
                "--minecraft-relay-ca",
                missing.to_str().unwrap(),
            ],
            "--minecraft-relay-ca (MINECRAFT_RELAY_CA)",
        ),
        (
            vec![
                "--minecraft-relay-url",
                "ws://localhost:1/",
                "--minecraft-relay-ca",
                pems.cert(),
            ],
            "is not wss://",
        ),
        // The embedded relay checks its TLS flags too.
        (
            vec![
                "--minecraft-tls-cert",
                pems.cert(),
                "--minecraft-auth-token",
                GAME_TOKEN,
            ],
            "--tls-key (RELAY_TLS_KEY) is not",
        ),
    ];
    for (mut flags, wanted) in cases {
        flags.extend(["--minecraft-relay-token", MCP_TOKEN]);
        let started =
            <bridge_minecraft::Minecraft as bridge_core::BridgeEntry>::start(mc_args(&flags), &env)
                .await;
        let err = started.err().expect("bad flags must stop the start");
        assert!(err.to_string().contains(wanted), "{flags:?}: {err}");
    }
    env.close(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn the_embedded_relay_serves_wss_and_its_own_mcp_server_links_to_it() {
    let pems = Pems::new();
    let port = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = McpServer::start(mc_args(&[
        "--minecraft-relay-port",
        &port.to_string(),
        "--minecraft-auth-token",
        GAME_TOKEN,
        "--minecraft-tls-cert",
        pems.cert(),
        "--minecraft-tls-key",
        pems.key(),
    ]))
    .await;
    let game = FakeGame::start_with(
        &format!("wss://localhost:{port}/"),
        "survival",
        trust(&pems.cert),
    );
    game.wait_connected(1).await;
    server.ready(1).await;
    let s = ok_of(&call(&server.client, "status", json!({})).await);
    assert_eq!(s["mode"], "embedded");
    assert!(
        s["relay_url"].as_str().unwrap().starts_with("wss://"),
        "{s}"
    );
    let r = ok_of(&call(&server.client, "get_online_players", json!({})).await);
    assert_eq!(r["count"], 2);
    // Plain ws:// is not served.
    let plain = raw_connect(&format!("ws://127.0.0.1:{port}/"), Some(GAME_TOKEN)).await;
    assert!(plain.is_err());
    server.stop().await;
    game.stop();
}
