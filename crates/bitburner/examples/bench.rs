//! Latency of `read_file` and `write_file` of a 100 KB file through MCP (rmcp client → Streamable HTTP →
//! bridge → WebSocket → fake game → back), next to a raw WebSocket echo of the same payload on loopback.
//!
//! `cargo run --release -p bridge-bitburner --example bench -- [--iterations N] [--bytes B]`
//!
//! Prints p50/p99 per case and the ratio to the echo. Numbers only; nothing here passes or fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bitburner_fake::{FakeGame, GameVersion, WEB_ORIGIN};
use bridge_bitburner::wire::Method;
use bridge_bitburner::{GameArgs, build_bridge, listen};
use bridge_core::serve::{HttpOptions, serve_http, serve_io};
use futures::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Map, Value, json};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

struct Opts {
    iterations: usize,
    bytes: usize,
}

fn opts() -> Opts {
    let mut o = Opts {
        iterations: 1000,
        bytes: 100 * 1024,
    };
    let args: Vec<String> = std::env::args().collect();
    for pair in args.windows(2) {
        match pair[0].as_str() {
            "--iterations" => o.iterations = pair[1].parse().expect("--iterations N"),
            "--bytes" => o.bytes = pair[1].parse().expect("--bytes B"),
            _ => {}
        }
    }
    o
}

fn payload(bytes: usize) -> String {
    // Script-like text with quotes and newlines, so JSON escaping costs what it costs for real files.
    let line = "  await ns.hack(\"n00dles\"); // 'x'\n";
    line.repeat(bytes / line.len() + 1)[..bytes].to_owned()
}

struct Stats {
    p50: f64,
    p99: f64,
    mean: f64,
}

async fn measure(iterations: usize, mut f: impl AsyncFnMut()) -> Stats {
    for _ in 0..iterations / 10 + 5 {
        f().await;
    }
    let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    for _ in 0..iterations {
        let start = Instant::now();
        f().await;
        h.record(start.elapsed().as_micros().max(1) as u64).unwrap();
    }
    Stats {
        p50: h.value_at_quantile(0.50) as f64 / 1000.0,
        p99: h.value_at_quantile(0.99) as f64 / 1000.0,
        mean: h.mean() / 1000.0,
    }
}

/// A loopback WebSocket server that echoes every text frame, and a client of it.
async fn echo_baseline(o: &Opts, body: &str) -> Stats {
    let body = body.to_owned();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        tcp.set_nodelay(true).unwrap();
        let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
        while let Some(Ok(msg)) = ws.next().await {
            if msg.is_text() && ws.send(msg).await.is_err() {
                break;
            }
        }
    });
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}"))
        .await
        .unwrap();
    measure(o.iterations, async || {
        ws.send(Message::text(body.clone())).await.unwrap();
        let echoed = ws.next().await.unwrap().unwrap();
        assert!(echoed.is_text());
    })
    .await
}

fn print(name: &str, s: &Stats, base: &Stats) {
    println!(
        "{name:<28} p50 {:>8.3} ms  p99 {:>8.3} ms  mean {:>8.3} ms   ratio p50 {:>5.2}x  p99 {:>5.2}x",
        s.p50,
        s.p99,
        s.mean,
        s.p50 / base.p50,
        s.p99 / base.p99
    );
}

#[tokio::main]
async fn main() {
    let o = opts();
    let body = payload(o.bytes);
    let shutdown = CancellationToken::new();

    let mut game_args = GameArgs::defaults();
    game_args.port = 0;
    let game_listener = listen(&game_args, shutdown.clone()).await.unwrap();
    let bridge = build_bridge(game_listener.link.clone(), &game_args).unwrap();
    let stdio_bridge = bridge.clone();
    let mcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mcp_addr = mcp.local_addr().unwrap();
    let token = shutdown.clone();
    tokio::spawn(async move { serve_http(bridge, mcp, HttpOptions::default(), &[], token).await });

    let game = FakeGame::new(GameVersion::V3_0);
    game.world()
        .server_mut("home")
        .unwrap()
        .write("big.js", &body, true);
    // Same size as the file, so the cached definitions show the MCP layer's cost without the game hop.
    game.world().definitions = body.clone();
    let _conn = game
        .connect(&format!("ws://{}", game_listener.addr), Some(WEB_ORIGIN))
        .await
        .unwrap();
    game_listener.link.wait_until(|s| s.connected).await;

    let base = echo_baseline(&o, &body).await;
    println!(
        "payload {} bytes, {} iterations (after warm-up), loopback, {} build",
        o.bytes,
        o.iterations,
        if cfg!(debug_assertions) {
            "DEBUG"
        } else {
            "release"
        }
    );
    println!(
        "{:<28} p50 {:>8.3} ms  p99 {:>8.3} ms  mean {:>8.3} ms",
        "raw WebSocket echo", base.p50, base.p99, base.mean
    );

    // The game hop alone: the bridge's link to the fake game, without MCP in front.
    let link = game_listener.link.clone();
    let params: Map<String, Value> = Map::from_iter([
        ("filename".into(), json!("big.js")),
        ("server".into(), json!("home")),
    ]);
    let hop = measure(o.iterations, async || {
        link.call(Method::GetFile, params.clone()).await.unwrap();
    })
    .await;
    print("getFile game hop (no MCP)", &hop, &base);

    for (era_name, lifecycle) in [
        (
            "2026-07-28",
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        ),
        ("2025-11-25", ClientLifecycleMode::Initialize),
    ] {
        let transport = StreamableHttpClientTransport::from_uri(format!("http://{mcp_addr}/mcp"));
        let client = ClientConfig::default()
            .serve_with_lifecycle(transport, lifecycle)
            .await
            .unwrap();
        let call = async |tool: &'static str, args: Map<String, Value>| {
            let params = CallToolRequestParams::new(tool).with_arguments(args);
            let r = client.call_tool(params).await.unwrap();
            assert_ne!(r.is_error, Some(true), "{r:?}");
        };
        let read_args: Map<String, Value> = Map::from_iter([("filename".into(), json!("big.js"))]);
        let read = measure(o.iterations, async || {
            call("read_file", read_args.clone()).await
        })
        .await;
        print(&format!("read_file  MCP {era_name}"), &read, &base);
        let no_args = Map::new();
        let cached = measure(o.iterations, async || {
            call("get_netscript_definitions", no_args.clone()).await
        })
        .await;
        print(&format!("cached defs MCP {era_name}"), &cached, &base);
        let write_args: Map<String, Value> = Map::from_iter([
            ("filename".into(), json!("out.js")),
            ("content".into(), json!(body)),
        ]);
        let write = measure(o.iterations, async || {
            call("write_file", write_args.clone()).await
        })
        .await;
        print(&format!("write_file MCP {era_name}"), &write, &base);
        let _ = client.cancel().await;
    }
    // The stdio framing over an in-memory pipe: MCP without HTTP.
    let (client_io, server_io) = tokio::io::duplex(8 << 20);
    let (server_read, server_write) = tokio::io::split(server_io);
    let token = shutdown.clone();
    tokio::spawn(
        async move { serve_io(stdio_bridge, server_read, server_write, &[], token).await },
    );
    let client = ClientConfig::default()
        .serve_with_lifecycle(tokio::io::split(client_io), ClientLifecycleMode::Initialize)
        .await
        .unwrap();
    let read_args: Map<String, Value> = Map::from_iter([("filename".into(), json!("big.js"))]);
    let read = measure(o.iterations, async || {
        let params = CallToolRequestParams::new("read_file").with_arguments(read_args.clone());
        let r = client.call_tool(params).await.unwrap();
        assert_ne!(r.is_error, Some(true), "{r:?}");
    })
    .await;
    print("read_file  MCP stdio pipe", &read, &base);
    let _ = client.cancel().await;

    shutdown.cancel();
    tokio::time::sleep(Duration::from_millis(10)).await;
}
