//! Load benchmark: N simulated CC computers (the shipped Lua client in ccsim) linked to one bridge over
//! loopback WebSockets. Reports the bridge process's resident memory and `probe-computers` latency through
//! a real MCP client. Numbers only; nothing here passes or fails on timing.
//!
//!   cargo bench -p bridge-computercraft --bench link_load                # 1000 Lua computers, 30 probes
//!   cargo bench -p bridge-computercraft --bench link_load -- 200 10      # 200 computers, 10 probes
//!   cargo bench -p bridge-computercraft --bench link_load -- 1000 30 raw # minimal Rust computers
//!
//! The bridge runs in a child process (this binary with `--bridge-child`) so its RSS is its own, not the
//! simulators'. `lua` computers run the shipped client in ccsim (1000 Lua states share this process's two
//! cores with nothing else, so their own JSON work is part of the latency); `raw` computers are a few lines
//! of Rust that answer pings at once, so the latency is the bridge's and the MCP round trip's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/ccsim/mod.rs"]
mod ccsim;

use bridge_computercraft::{LinkConfig, start};
use bridge_core::serve::{HttpOptions, serve_http};
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if args.first().map(String::as_str) == Some("--bridge-child") {
        rt.block_on(bridge_child());
    } else {
        let n = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
        let probes = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(30);
        let raw = args.get(2).map(String::as_str) == Some("raw");
        rt.block_on(drive(n, probes, raw));
    }
}

async fn bridge_child() {
    let shutdown = CancellationToken::new();
    let cfg = LinkConfig {
        probe_timeout: Duration::from_secs(10),
        ..LinkConfig::default()
    };
    let link = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let running = start(cfg, link, shutdown.clone()).await.unwrap();
    let mcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mcp_addr = mcp.local_addr().unwrap();
    let bridge = running.bridge.clone();
    let stop = shutdown.clone();
    tokio::spawn(async move { serve_http(bridge, mcp, HttpOptions::default(), &[], stop).await });
    println!("READY {} {}", running.link_addr, mcp_addr);
    // Exit when the parent closes our stdin.
    let _ = tokio::task::spawn_blocking(|| std::io::stdin().lines().count()).await;
    shutdown.cancel();
}

fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A computer reduced to the protocol: hello, then answer every ping.
async fn raw_computer(url: String, id: u32) {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let Ok((ws, _)) = tokio_tungstenite::connect_async(format!("{url}?id={id}")).await else {
        return;
    };
    let (mut tx, mut rx) = ws.split();
    let hello = serde_json::json!({"type": "hello", "protocol": 1, "computerId": id, "computerLabel": format!("raw-{id}")});
    if tx.send(Message::text(hello.to_string())).await.is_err() {
        return;
    }
    while let Some(Ok(msg)) = rx.next().await {
        let Message::Text(t) = msg else { continue };
        let Ok(frame) = serde_json::from_str::<serde_json::Value>(t.as_str()) else {
            continue;
        };
        if frame["type"] == "request" {
            let reply = serde_json::json!({"type": "response", "id": frame["id"], "ok": true,
                "result": format!("pong from {id} (Label: raw-{id})")});
            if tx.send(Message::text(reply.to_string())).await.is_err() {
                return;
            }
        }
    }
}

/// User + system CPU time of a process so far, from /proc/<pid>/stat (in clock ticks of 10 ms).
fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<f64>().ok())
        .sum();
    ticks * 10.0
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

async fn drive(n: u32, probes: usize, raw: bool) {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .arg("--bridge-child")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let mut parts = line.split_whitespace().skip(1);
    let link_addr = parts.next().unwrap().to_owned();
    let mcp_addr = parts.next().unwrap().to_owned();
    let (idle_rss, _) = rss_kib(pid);
    println!(
        "bridge pid {pid}: link {link_addr}, mcp {mcp_addr}; RSS before any computer: {} KiB",
        idle_rss
    );

    let url = format!("ws://{link_addr}/link");
    let root = ccsim::temp_root("bench");
    let started = Instant::now();
    let mut sims = Vec::new();
    for id in 0..n {
        if raw {
            tokio::spawn(raw_computer(url.clone(), id));
            continue;
        }
        let mut cfg = ccsim::SimConfig::new(id, root.join(id.to_string()));
        cfg.label = (id % 3 != 0).then(|| format!("bench-{id}"));
        sims.push(ccsim::spawn(cfg.running_client(&url, None)));
    }
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{mcp_addr}/mcp"));
    let client = ().serve_with_lifecycle(transport, ClientLifecycleMode::Initialize).await.unwrap();
    loop {
        let r = client
            .call_tool(CallToolRequestParams::new("list_computers"))
            .await
            .unwrap();
        let count = r
            .structured_content
            .as_ref()
            .and_then(|v| v["count"].as_u64())
            .unwrap_or(0);
        if count == u64::from(n) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "only {count} of {n} linked"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let link_time = started.elapsed();
    let (rss_linked, _) = rss_kib(pid);
    println!("{} computers", if raw { "raw" } else { "Lua (ccsim)" });
    println!(
        "{n} computers linked in {:.1} s; bridge RSS {:.1} MiB",
        link_time.as_secs_f64(),
        rss_linked as f64 / 1024.0
    );

    let mut times = Vec::new();
    let cpu_before = cpu_ms(pid);
    for _ in 0..probes {
        let t = Instant::now();
        let r = client
            .call_tool(CallToolRequestParams::new("probe-computers"))
            .await
            .unwrap();
        times.push(t.elapsed());
        let answers = r
            .structured_content
            .as_ref()
            .and_then(|v| v["answers"].as_array().cloned())
            .unwrap_or_default();
        let pongs = answers.iter().filter(|a| a["status"] == "pong").count();
        assert_eq!(pongs, n as usize, "not every computer answered");
    }
    let bridge_cpu = (cpu_ms(pid) - cpu_before) / probes as f64;
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let (rss, hwm) = rss_kib(pid);
    println!(
        "probe-computers over {n} computers, {probes} runs: min {:.1} ms, median {:.1} ms, p95 {:.1} ms, max {:.1} ms",
        ms(times[0]),
        ms(times[times.len() / 2]),
        ms(times[(times.len() * 95 / 100).min(times.len() - 1)]),
        ms(times[times.len() - 1])
    );
    println!(
        "bridge CPU per probe-computers: {bridge_cpu:.1} ms (user + system, averaged over {probes} runs)"
    );
    println!(
        "bridge RSS after probes: {:.1} MiB (peak {:.1} MiB)",
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    println!(
        "load average at the end (2 cores, shared machine): {}",
        load_average()
    );
    for s in &sims {
        s.stop();
    }
    drop(child.stdin.take());
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(root);
}
