//! How much memory the bridge needs to pass on one large game reply: the bridge runs as a child process (this
//! example again, with `--serve`), a fake game holds one file of `--bytes` (default 8 MB), and an MCP client
//! over the child's stdio reads it. Prints the child's resident set before, its peak (`VmHWM`) after each
//! read, and the peak's growth as a multiple of the file size.
//!
//! `cargo run --release -p bridge-bitburner --example reply-memory -- [--bytes B]`
//!
//! Numbers only; nothing here passes or fails. Linux only (reads `/proc/<pid>/status`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bitburner_fake::{FakeGame, GameVersion, WEB_ORIGIN};
use bridge_bitburner::{GameArgs, build_bridge, listen};
use bridge_core::serve::serve_io;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2).find(|p| p[0] == name).map(|p| p[1].clone())
}

/// `VmRSS` and `VmHWM` of a process, in KiB.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The child: the bridge alone, MCP on stdio, the game port from `--bitburner-game-port`.
async fn serve(port: u16) {
    let mut game = GameArgs::defaults();
    game.port = port;
    game.rpc_timeout = Duration::from_secs(60);
    let shutdown = CancellationToken::new();
    let listener = listen(&game, shutdown.clone()).await.unwrap();
    let bridge = build_bridge(listener.link, &game).unwrap();
    let _ = serve_io(
        bridge,
        tokio::io::stdin(),
        tokio::io::stdout(),
        &[],
        shutdown,
    )
    .await;
}

#[tokio::main]
async fn main() {
    if let Some(port) = arg("--serve") {
        serve(port.parse().unwrap()).await;
        return;
    }
    let bytes: usize = arg("--bytes").map_or(8_000_000, |b| b.parse().unwrap());
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let mut cmd = tokio::process::Command::new(std::env::current_exe().unwrap());
    cmd.arg("--serve").arg(port.to_string());
    let (child, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let client = ().serve(child).await.unwrap();

    // Script-like text with quotes and a non-ASCII character, so JSON escaping costs what it costs.
    let line = "  await ns.hack(\"n00dles\"); // 'é'\n";
    let body = line.repeat(bytes / line.len() + 1);
    let game = FakeGame::new(GameVersion::V3_0);
    game.world()
        .server_mut("home")
        .unwrap()
        .write("big.js", &body, true);
    let url = format!("ws://127.0.0.1:{port}");
    let mut conn = None;
    for _ in 0..200 {
        if let Ok(c) = game.connect(&url, Some(WEB_ORIGIN)).await {
            conn = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _conn = conn.expect("the bridge's game port");
    let call = async |tool: &str, args: Value| {
        let Value::Object(args) = args else {
            unreachable!()
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        let r = client.call_tool(params).await.unwrap();
        if r.is_error == Some(true) {
            // An older bridge refuses the paging arguments; its line shows nothing new then.
            println!("  {tool} refused: {:?}", r.content);
        }
        r
    };
    // Warm up: connected, definitions cached, buffers grown by small replies.
    while call("status", json!({})).await.structured_content.unwrap()["connected"] != true {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    call("list_files", json!({})).await;
    let (rss, _) = memory(pid);
    let mb = body.len() as f64 / 1e6;
    println!(
        "bridge child pid {pid}; file {mb:.1} MB; RSS before {:.1} MB",
        rss as f64 / 1024.0
    );
    // Each line: the peak during one call, above the resident set just before it (the kernel's high-water
    // mark is reset before each call through /proc/<pid>/clear_refs).
    let measured = async |what: &str, call: std::pin::Pin<Box<dyn Future<Output = ()> + '_>>| {
        let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
        let (before, _) = memory(pid);
        call.await;
        let (after, peak) = memory(pid);
        let grown = peak.saturating_sub(before) as f64 / 1024.0;
        println!(
            "{what:<36} before {:>6.1} MB, peak {:>6.1} MB (+{grown:>5.1} MB = {:>4.1}x the file), after {:>6.1} MB",
            before as f64 / 1024.0,
            peak as f64 / 1024.0,
            grown / (mb / 1.048_576),
            after as f64 / 1024.0
        );
    };
    measured(
        "read_file (default page, 64 KiB)",
        Box::pin(async {
            call("read_file", json!({"filename": "big.js"})).await;
        }),
    )
    .await;
    measured(
        "read_file (limit 1 MiB)",
        Box::pin(async {
            call(
                "read_file",
                json!({"filename": "big.js", "limit": 1_048_576}),
            )
            .await;
        }),
    )
    .await;
    measured(
        "get_all_files (one page)",
        Box::pin(async {
            call("get_all_files", json!({})).await;
        }),
    )
    .await;
    measured(
        "resources/read of the whole file",
        Box::pin(async {
            let resource = ReadResourceRequestParams::new("bitburner://files/home/big.js");
            client.read_resource(resource).await.unwrap();
        }),
    )
    .await;
    let _ = client.cancel().await;
}
