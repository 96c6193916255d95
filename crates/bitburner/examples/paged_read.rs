//! A 1 MB file read to its end in default 64 KiB pages, against one raw read of it (one `read_file` with a
//! 1 MiB page), through MCP over Streamable HTTP → bridge → fake game. Also counts the game's `getFile`s.
//!
//! `cargo run --release -p bridge-bitburner --example paged-read -- [--iterations N] [--bytes B]`
//!
//! Prints the medians and their ratio (the goal is ≤ 1.2×). Numbers only; nothing here passes or fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bitburner_fake::{FakeGame, GameVersion, WEB_ORIGIN};
use bridge_bitburner::{GameArgs, build_bridge, listen};
use bridge_core::serve::{HttpOptions, serve_http};
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2)
        .find(|w| w[0] == name)
        .map(|w| w[1].parse().expect("a number"))
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let iterations = arg("--iterations", 20);
    let bytes = arg("--bytes", 1_000_000);
    let line = "  await ns.hack(\"n00dles\"); // 'x' é\n";
    let body = line.repeat(bytes / line.len() + 1);
    let mut end = bytes.min(body.len());
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    let body = &body[..end];

    let shutdown = CancellationToken::new();
    let mut game_args = GameArgs::defaults();
    game_args.port = 0;
    let listener = listen(&game_args, shutdown.clone()).await.unwrap();
    let bridge = build_bridge(listener.link.clone(), &game_args).unwrap();
    let mcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mcp_addr = mcp.local_addr().unwrap();
    let token = shutdown.clone();
    tokio::spawn(async move { serve_http(bridge, mcp, HttpOptions::default(), &[], token).await });
    let game = FakeGame::new(GameVersion::V3_0);
    game.world()
        .server_mut("home")
        .unwrap()
        .write("big.js", body, true);
    let conn = game
        .connect(&format!("ws://{}", listener.addr), Some(WEB_ORIGIN))
        .await
        .unwrap();
    listener.link.wait_until(|s| s.connected).await;

    let transport = StreamableHttpClientTransport::from_uri(format!("http://{mcp_addr}/mcp"));
    let client = ClientConfig::default()
        .serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
        .await
        .unwrap();
    let read = async |args: Value| {
        let Value::Object(args) = args else {
            unreachable!()
        };
        let r = client
            .call_tool(CallToolRequestParams::new("read_file").with_arguments(args))
            .await
            .unwrap();
        assert_ne!(r.is_error, Some(true), "{r:?}");
        r.structured_content.unwrap_or_default()
    };
    let get_files = || conn.methods().iter().filter(|m| *m == "getFile").count();

    let mut raw = Vec::new();
    let mut paged = Vec::new();
    let mut pages = 0;
    let mut downloads = 0;
    for i in 0..iterations + 2 {
        let start = Instant::now();
        let whole = read(json!({"filename": "big.js", "limit": 1_048_576})).await;
        assert!(
            whole.get("next_offset").is_none(),
            "one page holds the file"
        );
        let raw_ms = start.elapsed().as_secs_f64() * 1000.0;

        let before = get_files();
        let start = Instant::now();
        let mut offset = Some(0u64);
        let mut n = 0;
        while let Some(o) = offset {
            let page = read(json!({"filename": "big.js", "offset": o})).await;
            offset = page.get("next_offset").and_then(Value::as_u64);
            n += 1;
        }
        let paged_ms = start.elapsed().as_secs_f64() * 1000.0;
        if i >= 2 {
            raw.push(raw_ms);
            paged.push(paged_ms);
            pages = n;
            downloads = get_files() - before;
        }
    }
    let (r, p) = (median(raw), median(paged));
    println!(
        "file {} bytes, {iterations} runs, loopback, {} build",
        body.len(),
        if cfg!(debug_assertions) {
            "DEBUG"
        } else {
            "release"
        }
    );
    println!("one raw read (read_file, limit 1 MiB)       median {r:>8.2} ms");
    println!(
        "paged read to the end ({pages} pages of 64 KiB) median {p:>8.2} ms   getFile per paged read: {downloads}"
    );
    println!("ratio paged / raw: {:.2}x", p / r);
    let _ = client.cancel().await;
    shutdown.cancel();
    tokio::time::sleep(Duration::from_millis(10)).await;
}
