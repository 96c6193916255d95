//! The relay's connection slots cannot be hoarded (issue 22 item 4, issue 25 item 3): 256 connections that
//! sent one request and went idle, or were refused with 401, kept games out for 117 s. Now silent, idle and
//! refused connections are closed promptly, one address holds a bounded share of the slots, and `/metrics`
//! counts every close by reason beside the limits. Real sockets on loopback; every wait is on a condition
//! and the asserts name which connections closed and why, never how fast.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use mcp_testkit::{status_of, until_closed};
use std::net::SocketAddr;
use support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn health(addr: SocketAddr, close: bool) -> String {
    let close = if close { "Connection: close\r\n" } else { "" };
    format!("GET /health HTTP/1.1\r\nHost: {addr}\r\n{close}\r\n")
}

/// A WebSocket upgrade with a token the relay does not know.
fn wrong_token_upgrade(addr: SocketAddr) -> String {
    format!(
        "GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Authorization: Bearer not-a-token\r\n\r\n"
    )
}

/// `/metrics`, retried while the relay closes the attempt at accept (its address at the cap).
async fn metrics(addr: SocketAddr) -> String {
    within("the metrics", async {
        loop {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            stream
                .write_all(
                    format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                )
                .await
                .unwrap();
            let text = until_closed(stream).await;
            if !text.is_empty() {
                return text;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
}

fn value(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{series} ")))
        .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
        .trim()
        .parse()
        .unwrap()
}

fn closed(reason: &str) -> String {
    format!("minecraft_relay_listener_connections_closed_total{{reason=\"{reason}\"}}")
}

/// The attack of issue 22: a thousand sockets, more than the relay's slots (300 that read `/health` and
/// idle, 300 upgrades refused with 401, 400 that send nothing), then a game. The game gets in, and every
/// one of the thousand was closed by the relay for its reason. The idle deadline is the default one; the
/// handshake deadline is short so the silent ones pass quickly.
#[tokio::test]
async fn a_thousand_idle_sockets_then_a_game_gets_in() {
    let relay = start_relay(relay_args(&[
        "--relay-max-connections",
        "256",
        // All of them come from 127.0.0.1; the cap per address has its own test.
        "--relay-max-connections-per-ip",
        "4096",
        "--relay-handshake-timeout",
        "300ms",
    ]))
    .await;
    let addr = relay.addr;
    let mut idle = Vec::new();
    let mut refused = Vec::new();
    let mut silent = Vec::new();
    // The ones that hold a slot the longest connect first, so they take the slots before the silent ones.
    for _ in 0..300 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(health(addr, false).as_bytes()).await.unwrap();
        idle.push(tokio::spawn(until_closed(s)));
    }
    for _ in 0..300 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(wrong_token_upgrade(addr).as_bytes())
            .await
            .unwrap();
        refused.push(tokio::spawn(until_closed(s)));
    }
    for _ in 0..400 {
        silent.push(tokio::spawn(until_closed(
            TcpStream::connect(addr).await.unwrap(),
        )));
    }

    let game = FakeGame::start(&relay.url(), "survival");
    game.wait_connected(1).await;

    for task in idle {
        let response = within("an idle connection to be closed", task)
            .await
            .unwrap();
        assert_eq!(status_of(&response), 200, "{response}");
    }
    for task in refused {
        let response = within("a refused connection to be closed", task)
            .await
            .unwrap();
        assert_eq!(status_of(&response), 401, "{response}");
        assert!(
            response
                .to_ascii_lowercase()
                .contains("\r\nconnection: close\r\n"),
            "{response}"
        );
    }
    for task in silent {
        let response = within("a silent connection to be closed", task)
            .await
            .unwrap();
        assert_eq!(response, "", "a silent connection gets no answer");
    }
    let m = metrics(addr).await;
    // The 700 not refused were closed by their deadline or, once silent or idle for a second, to make room
    // for a newer client (the game, or the /metrics fetch).
    let timed_out = value(&m, &closed("handshake_timeout")) + value(&m, &closed("idle_timeout"));
    assert_eq!(timed_out + value(&m, &closed("evicted")), 700, "{m}");
    assert_eq!(value(&m, &closed("refused")), 300, "{m}");
    assert_eq!(value(&m, &closed("per_ip_cap")), 0, "{m}");
    assert_eq!(value(&m, "minecraft_relay_listener_connections_peak"), 256);
    assert_eq!(value(&m, "minecraft_relay_listener_max_connections"), 256);
    game.stop();
    relay.stop().await;
}

/// One address holds at most `--relay-max-connections-per-ip` connections: one more is closed at once and
/// counted (the WebSocket client sees the connection fail), and a slot given back is taken again.
#[tokio::test]
async fn one_address_holds_at_most_its_cap_of_relay_connections() {
    let relay = start_relay(relay_args(&["--relay-max-connections-per-ip", "2"])).await;
    let addr = relay.addr;
    let first = raw_connect(&relay.url(), Some(MCP_TOKEN)).await.unwrap();
    let second = raw_connect(&relay.url(), Some(MCP_TOKEN)).await.unwrap();
    let extra = TcpStream::connect(addr).await.unwrap();
    let response = within("the third connection to be closed", until_closed(extra)).await;
    assert_eq!(response, "", "closed at accept, without an answer");
    assert_eq!(
        raw_connect(&relay.url(), Some(MCP_TOKEN)).await.err(),
        Some(0)
    );

    drop(first);
    // Its slot comes back once the relay sees the close; /metrics is served from it.
    let m = metrics(addr).await;
    assert!(value(&m, &closed("per_ip_cap")) >= 2, "{m}");
    assert_eq!(
        value(&m, "minecraft_relay_listener_max_connections_per_ip"),
        2
    );
    drop(second);
    relay.stop().await;
}
