//! Minecraft relay bench (issue 9, "Prove it"). Not a test: it asserts nothing and prints numbers.
//!
//! In one process, on loopback: the relay, the MCP server (`mcp-bridges minecraft --minecraft-relay-url`) dialling it,
//! an MCP client (rmcp) on the MCP server's stdio framing over an in-memory pipe, and a simulated game adapter
//! speaking PROTOCOL.md over a real WebSocket.
//!
//! 1. `events`: the game emits chat events at each `--rates` for `--seconds`; the MCP client pulls them with
//!    `poll_events` (wait_ms). Per rate: sent, received, lost, sustained rate, p50/p99/max latency from the
//!    game's send to the client's read.
//! 2. `commands`: `--calls` sequential round trips of `get_server_info`: direct WebSocket (client ↔ game, no
//!    relay), raw through the relay (an MCP-role WebSocket ↔ relay ↔ game), and the MCP tool call (MCP client
//!    ↔ MCP server ↔ relay ↔ game), in the same run.

use anyhow::{Context, Result, anyhow};
use bridge_core::{BridgeEntry, BridgeEnv};
use bridge_minecraft::relay::{self, RelayArgs};
use bridge_minecraft::{Minecraft, MinecraftArgs};
use clap::Parser;
use futures::{SinkExt, StreamExt};
use hdrhistogram::Histogram;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_util::sync::CancellationToken;

const GAME_TOKEN: &str = "bench-game";
const MCP_TOKEN: &str = "bench-mcp";

#[derive(Parser, Debug)]
#[command(
    about = "Minecraft relay bench: events through the relay to an MCP client; command round trips"
)]
struct Args {
    /// Event rates to run, events per second.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,10000")]
    rates: Vec<u64>,
    /// Seconds per rate.
    #[arg(long, default_value_t = 3)]
    seconds: u64,
    /// Command round trips per path.
    #[arg(long, default_value_t = 1000)]
    calls: u64,
}

#[derive(Parser)]
struct RelayCli {
    #[command(flatten)]
    relay: RelayArgs,
}

#[derive(Parser)]
struct McCli {
    #[command(flatten)]
    mc: MinecraftArgs,
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn envelope(kind: &str, id: &str, payload: Value) -> Value {
    json!({"version": "1.0", "type": kind, "id": id, "timestamp": now_us() / 1000, "source": "minecraft", "payload": payload})
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn dial(url: &str, token: &str) -> Result<Ws> {
    let mut req = url.into_client_request()?;
    req.headers_mut()
        .insert("authorization", format!("Bearer {token}").parse()?);
    // Nagle would hold the ack behind the next command for the delayed-ACK timer (40 ms).
    Ok(
        tokio_tungstenite::connect_async_with_config(req, None, true)
            .await?
            .0,
    )
}

fn server_info(id: &str) -> String {
    envelope(
        "response",
        id,
        json!({"success": true, "data": {"version": "1.21.4", "onlinePlayers": 0,
        "maxPlayers": 20, "timeOfDay": 1000, "weather": "clear", "tps": 20.0}}),
    )
    .to_string()
}

/// The simulated game: answers commands at once; emits events when told (rate, seconds) through `plan`.
async fn game(
    url: String,
    mut plan: tokio::sync::mpsc::Receiver<(u64, u64)>,
    sent_total: tokio::sync::mpsc::Sender<u64>,
) -> Result<()> {
    let ws = dial(&url, GAME_TOKEN).await?;
    let (mut tx, mut rx) = ws.split();
    tx.send(Message::text(
        envelope("hello", "h", json!({"name": "bench", "instance": "b1"})).to_string(),
    ))
    .await?;
    let mut seq = 0u64;
    let mut emitting: Option<(u64, Instant, Instant, u64)> = None; // rate, start, end, sent
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    loop {
        tokio::select! {
            msg = rx.next() => {
                let Some(Ok(Message::Text(t))) = msg else {
                    if msg.is_none() { return Ok(()); }
                    continue;
                };
                let v: Value = serde_json::from_str(&t)?;
                if v["type"] == "command" {
                    tx.send(Message::text(server_info(v["id"].as_str().unwrap_or_default()))).await?;
                }
            }
            p = plan.recv(), if emitting.is_none() => {
                let Some((rate, secs)) = p else { return Ok(()) };
                let start = Instant::now();
                emitting = Some((rate, start, start + Duration::from_secs(secs), 0));
            }
            _ = tick.tick(), if emitting.is_some() => {
                let Some((rate, start, end, sent)) = emitting.as_mut() else { continue };
                let now = Instant::now();
                let due = if now >= *end { *rate * (*end - *start).as_secs() } else {
                    (now - *start).as_micros() as u64 * *rate / 1_000_000
                };
                while *sent < due {
                    seq += 1;
                    *sent += 1;
                    let mut e = envelope("event", &format!("b1-{seq}"), json!({"eventType": "player_chat",
                        "timestamp": now_us() / 1000, "data": {"player": "bench", "message": "x", "sentUs": now_us()}}));
                    e["seq"] = json!(seq);
                    tx.feed(Message::text(e.to_string())).await?;
                }
                tx.flush().await?;
                if now >= *end {
                    sent_total.send(*sent).await?;
                    emitting = None;
                }
            }
        }
    }
}

fn pct(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let stop = CancellationToken::new();
    let relay_args = RelayCli::parse_from([
        "relay",
        "--relay-port",
        "0",
        "--minecraft-auth-token",
        GAME_TOKEN,
        "--mcp-auth-tokens",
        MCP_TOKEN,
        "--message-queue-size",
        "200000",
        "--message-queue-bytes",
        "268435456",
        "--mcp-rate",
        "1000000",
        "--game-rate",
        "10000000",
        // The command round trips go as fast as they answer, far past the defaults (200 commands a second per
        // game, 400 messages per MCP token); the events, past the games' combined default.
        "--game-command-rate",
        "1000000",
        "--mcp-token-rate",
        "1000000",
        "--games-event-rate",
        "10000000",
    ])
    .relay;
    let settings = relay::settings(&relay_args, Vec::new()).map_err(|e| anyhow!("{e}"))?;
    let handle = relay::start(&relay_args, settings, stop.clone())
        .await
        .map_err(|e| anyhow!("{e}"))?;
    let url = format!("ws://{}/", handle.addr);

    let (plan_tx, plan_rx) = tokio::sync::mpsc::channel(4);
    let (sent_tx, mut sent_rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(game(url.clone(), plan_rx, sent_tx));

    let mc = McCli::parse_from([
        "mc",
        "--minecraft-relay-url",
        &url,
        "--minecraft-relay-token",
        MCP_TOKEN,
        "--minecraft-event-buffer",
        "200000",
        "--minecraft-reconnect-base",
        "50ms",
    ])
    .mc;
    let env = BridgeEnv::new();
    let bridge = Minecraft::start(mc, &env)
        .await
        .map_err(|e| anyhow!("{e}"))?;
    let (client_io, server_io) = tokio::io::duplex(1 << 24);
    let (sr, sw) = tokio::io::split(server_io);
    tokio::spawn(async move {
        bridge_core::serve::serve_io(bridge, sr, sw, &[], CancellationToken::new()).await
    });
    let client = ().serve(tokio::io::split(client_io)).await.context("MCP client")?;
    let call = |name: &'static str, a: Value| {
        let client = &client;
        async move {
            let Value::Object(a) = a else { unreachable!() };
            client
                .call_tool(CallToolRequestParams::new(name).with_arguments(a))
                .await
        }
    };
    // Wait for the game behind the relay.
    let t0 = Instant::now();
    loop {
        let s = call("status", json!({})).await?;
        let games = s
            .structured_content
            .as_ref()
            .and_then(|v| v["games"].as_array().map(Vec::len));
        if games == Some(1) {
            break;
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(anyhow!("the game never showed up: {s:?}"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    println!("== events: simulated game -> relay -> MCP server -> MCP client (poll_events) ==");
    println!(
        "{:>8} {:>8} {:>8} {:>6} {:>10} {:>9} {:>9} {:>9}",
        "rate/s", "sent", "received", "lost", "sustained/s", "p50 ms", "p99 ms", "max ms"
    );
    let mut since = 0u64;
    for &rate in &args.rates {
        plan_tx.send((rate, args.seconds)).await?;
        let start = Instant::now();
        let mut hist = Histogram::<u64>::new(3)?;
        let mut received = 0u64;
        let mut sent: Option<u64> = None;
        let mut last_rx = start;
        loop {
            if let Ok(n) = sent_rx.try_recv() {
                sent = Some(n);
            }
            if let Some(n) = sent
                && (received >= n || last_rx.elapsed() > Duration::from_secs(3))
            {
                break;
            }
            let page = call(
                "poll_events",
                json!({"stream": "player_chat", "since": since, "limit": 1000, "wait_ms": 200}),
            )
            .await?;
            let page = page.structured_content.unwrap_or_default();
            since = page["next_since"].as_u64().unwrap_or(since);
            let now = now_us();
            for e in page["events"].as_array().into_iter().flatten() {
                let sent_us = e["data"]["data"]["sentUs"].as_u64().unwrap_or(now);
                hist.record(now.saturating_sub(sent_us).max(1))?;
                received += 1;
                last_rx = Instant::now();
            }
        }
        let sent = sent.unwrap_or(0);
        let secs = (last_rx - start).as_secs_f64().max(0.001);
        println!(
            "{:>8} {:>8} {:>8} {:>6} {:>10.0} {:>9.2} {:>9.2} {:>9.2}",
            rate,
            sent,
            received,
            sent.saturating_sub(received),
            received as f64 / secs,
            pct(&hist, 0.5),
            pct(&hist, 0.99),
            hist.max() as f64 / 1000.0
        );
    }

    println!(
        "\n== command round trip: get_server_info, {} sequential calls each ==",
        args.calls
    );
    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>9}",
        "path", "calls/s", "p50 ms", "p99 ms", "max ms"
    );
    // Direct WebSocket: a client and a game-like echo server, no relay.
    let echo = TcpListener::bind("127.0.0.1:0").await?;
    let echo_addr = echo.local_addr()?;
    tokio::spawn(async move {
        while let Ok((s, _)) = echo.accept().await {
            tokio::spawn(async move {
                let Ok(ws) = tokio_tungstenite::accept_async(s).await else {
                    return;
                };
                let (mut tx, mut rx) = ws.split();
                while let Some(Ok(Message::Text(t))) = rx.next().await {
                    let v: Value = serde_json::from_str(&t).unwrap_or_default();
                    if tx
                        .send(Message::text(server_info(
                            v["id"].as_str().unwrap_or_default(),
                        )))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    let cmd = |id: u64| {
        json!({"version": "1.0", "type": "command", "id": id.to_string(), "timestamp": 0, "source": "mcp",
               "payload": {"command": "get_server_info", "args": {}}})
        .to_string()
    };
    let direct = dial(&format!("ws://{echo_addr}/"), "none").await?;
    report(
        "direct WebSocket (no relay)",
        round_trips(direct, args.calls, &cmd, false).await?,
    );
    let mut via = dial(&url, MCP_TOKEN).await?;
    via.send(Message::text(
        json!({"version": "1.0", "type": "hello", "id": "h", "timestamp": 0, "source": "mcp",
        "payload": {"clientId": "bench-raw", "subscriptions": []}})
        .to_string(),
    ))
    .await?;
    report(
        "raw WebSocket through the relay",
        round_trips(via, args.calls, &cmd, true).await?,
    );
    let mut h = Histogram::<u64>::new(3)?;
    let t = Instant::now();
    for _ in 0..args.calls {
        let s = Instant::now();
        let r = call("get_server_info", json!({})).await?;
        if r.is_error == Some(true) {
            return Err(anyhow!("get_server_info failed: {r:?}"));
        }
        h.record(s.elapsed().as_micros() as u64)?;
    }
    report("MCP tool call (client->server->relay)", (h, t.elapsed()));

    client.cancel().await.ok();
    env.close(Duration::from_secs(3)).await;
    stop.cancel();
    let _ = handle.task.await;
    Ok(())
}

/// Sequential command round trips on `ws`; with `acks` the relay's sequenced responses are acknowledged.
async fn round_trips(
    mut ws: Ws,
    calls: u64,
    cmd: &dyn Fn(u64) -> String,
    acks: bool,
) -> Result<(Histogram<u64>, Duration)> {
    let mut h = Histogram::<u64>::new(3)?;
    let t = Instant::now();
    for id in 1..=calls {
        let s = Instant::now();
        let want = id.to_string();
        ws.send(Message::text(cmd(id))).await?;
        loop {
            let Some(msg) = ws.next().await else {
                return Err(anyhow!("link closed"));
            };
            let Message::Text(text) = msg? else { continue };
            let v: Value = serde_json::from_str(&text)?;
            if v["type"] == "response" && v["id"] == want.as_str() {
                if acks && let Some(seq) = v["seq"].as_u64() {
                    ws.send(Message::text(json!({"version": "1.0", "type": "ack", "id": format!("a{seq}"), "timestamp": 0,
                        "source": "mcp", "payload": {"seq": seq}}).to_string())).await?;
                }
                break;
            }
        }
        h.record(s.elapsed().as_micros() as u64)?;
    }
    Ok((h, t.elapsed()))
}

fn report(path: &str, (h, took): (Histogram<u64>, Duration)) {
    println!(
        "{:<34} {:>9.0} {:>9.3} {:>9.3} {:>9.3}",
        path,
        h.len() as f64 / took.as_secs_f64(),
        pct(&h, 0.5),
        pct(&h, 0.99),
        h.max() as f64 / 1000.0
    );
}
