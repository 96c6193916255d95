//! Soak of a running ComputerCraft bridge (issue 8, "Prove it"). Not a test: it asserts nothing and prints
//! numbers. It starts the real `mcp-bridges computercraft --http` as a child on free loopback ports, then runs
//! four phases and prints the child's memory (VmRSS before/after, peak sampled VmRSS, VmHWM) and descriptors
//! after each:
//!
//! 1. `calls`: N stateless (2026-07-28 era) `tools/call list_computers` POSTs to /mcp at concurrency C;
//! 2. `chunks`: a WebSocket computer sends chunk frames with unique 100 KiB ids and empty data;
//! 3. `events`: the same computer forwards ~128 KiB events, then one `poll_events` whose reply size is shown;
//! 4. `idle`: idle TCP connections and slow-loris connections (a partial request line) to both ports, held
//!    for a few seconds, with one real call made meanwhile.
//!
//! Every loop is bounded in count and in time. Loopback only.

use anyhow::{Context, Result, anyhow, bail};
use clap::Parser;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

const MODERN_VERSION: &str = "2026-07-28";

#[derive(Parser, Debug)]
#[command(
    about = "Soak a running mcp-bridges computercraft: calls, chunk attack, event flood, idle sockets"
)]
struct Args {
    /// The mcp-bridges binary; default: next to this one.
    #[arg(long)]
    bridge: Option<PathBuf>,
    /// Phase 1: MCP tool calls.
    #[arg(long, default_value_t = 100_000)]
    calls: u64,
    /// Phase 1: calls in flight at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Phase 2: chunk frames with unique 100 KiB ids.
    #[arg(long, default_value_t = 2_000)]
    chunks: u64,
    /// Phase 3: forwarded events of about 128 KiB.
    #[arg(long, default_value_t = 1_100)]
    events: u64,
    /// Phase 4: idle TCP connections per port.
    #[arg(long, default_value_t = 1_000)]
    idle: usize,
    /// Phase 4: slow-loris connections per port.
    #[arg(long, default_value_t = 100)]
    slow: usize,
    /// Phase 4: how long the sockets are held.
    #[arg(long, default_value_t = 5)]
    hold_secs: u64,
    /// Wall-time bound of each phase.
    #[arg(long, default_value_t = 300)]
    phase_secs: u64,
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// VmRSS and VmHWM in KiB.
fn mem(pid: u32) -> Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok((field("VmRSS:"), field("VmHWM:")))
}

fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Samples the child's VmRSS every 20 ms while a phase runs, keeping the highest.
struct Sampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let (s, p) = (stop.clone(), peak.clone());
        let task = tokio::spawn(async move {
            // Bounded: at most an hour of samples.
            for _ in 0..180_000 {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                if let Ok((rss, _)) = mem(pid) {
                    p.fetch_max(rss, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        Self { stop, peak, task }
    }

    async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        self.peak.load(Ordering::Relaxed)
    }
}

/// Runs one phase with memory and descriptor reporting around it.
async fn phase<F, T>(name: &str, pid: u32, bound: Duration, f: F) -> Result<T>
where
    F: std::future::Future<Output = Result<T>>,
{
    let (before, _) = mem(pid)?;
    let fds_before = fds(pid);
    let sampler = Sampler::start(pid);
    let started = Instant::now();
    let out = tokio::time::timeout(bound, f)
        .await
        .map_err(|_| anyhow!("phase {name} exceeded {bound:?}"))?;
    let took = started.elapsed();
    let peak = sampler.finish().await;
    // Let the bridge drop what the phase left behind.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (after, hwm) = mem(pid)?;
    println!(
        "  [{name}] {:.1}s  rss before {}  peak {}  after {}  (VmHWM {})  fds before {} after {}",
        took.as_secs_f64(),
        mib(before),
        mib(peak.max(after)),
        mib(after),
        mib(hwm),
        fds_before,
        fds(pid)
    );
    out
}

/// A stateless JSON-RPC `tools/call` of the 2026-07-28 era; returns the reply body.
#[derive(Clone)]
struct Mcp {
    http: reqwest::Client,
    url: String,
    next_id: Arc<AtomicU64>,
}

impl Mcp {
    fn new(port: u16) -> Result<Self> {
        let http = reqwest::Client::builder().tcp_nodelay(true).build()?;
        Ok(Self {
            http,
            url: format!("http://127.0.0.1:{port}/mcp"),
            next_id: Arc::new(AtomicU64::new(1)),
        })
    }

    async fn call(&self, tool: &str, arguments: Value) -> Result<String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "mcp-soak", "version": "0"}
            }}
        });
        let response = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", MODERN_VERSION)
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool)
            .body(body.to_string())
            .send()
            .await?;
        let status = response.status();
        let text = response.text().await?;
        if !status.is_success() {
            bail!("HTTP {status}: {}", truncate(&text));
        }
        if !text.contains("\"result\"") || text.contains("\"isError\":true") {
            bail!("unexpected reply: {}", truncate(&text));
        }
        Ok(text)
    }
}

fn truncate(s: &str) -> &str {
    let mut end = s.len().min(300);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

async fn calls_phase(mcp: &Mcp, total: u64, concurrency: usize, bound: Duration) -> Result<()> {
    let issued = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let first_error = Arc::new(std::sync::Mutex::new(None::<String>));
    let deadline = Instant::now() + bound;
    let started = Instant::now();
    let mut tasks = Vec::new();
    let mut latencies = Vec::new();
    for _ in 0..concurrency {
        let (mcp, issued, errors, first_error) = (
            mcp.clone(),
            issued.clone(),
            errors.clone(),
            first_error.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while issued.fetch_add(1, Ordering::Relaxed) < total && Instant::now() < deadline {
                let t = Instant::now();
                match mcp.call("list_computers", json!({})).await {
                    Ok(_) => lat.push(t.elapsed()),
                    Err(e) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        if let Ok(mut f) = first_error.lock() {
                            f.get_or_insert_with(|| e.to_string());
                        }
                    }
                }
            }
            lat
        }));
    }
    for t in tasks {
        latencies.extend(t.await?);
    }
    let elapsed = started.elapsed();
    latencies.sort();
    let pct = |p: f64| -> f64 {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    let ok = latencies.len() as u64;
    let errors = errors.load(Ordering::Relaxed);
    println!(
        "  {} ok, {} errors in {:.1}s = {:.0} calls/s; latency p50 {:.2} ms p99 {:.2} ms max {:.2} ms",
        ok,
        errors,
        elapsed.as_secs_f64(),
        (ok + errors) as f64 / elapsed.as_secs_f64().max(f64::EPSILON),
        pct(0.50),
        pct(0.99),
        pct(1.0)
    );
    if let Ok(f) = first_error.lock()
        && let Some(e) = f.as_ref()
    {
        println!("  first error: {e}");
    }
    Ok(())
}

/// A hand-driven computer: a writer task fed by a channel, and a reader that answers pings.
struct Computer {
    tx: mpsc::Sender<Message>,
    pongs: Arc<AtomicU64>,
}

impl Computer {
    async fn link(port: u16, id: u32) -> Result<Self> {
        let url = format!("ws://127.0.0.1:{port}/link");
        let (ws, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .context("linking")?;
        let (mut sink, mut stream) = ws.split();
        let hello =
            json!({"type": "hello", "protocol": 1, "computerId": id, "computerLabel": "soak"});
        sink.send(Message::text(hello.to_string())).await?;
        let answer = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .context("waiting for hello-ok")?;
        match answer {
            Some(Ok(Message::Text(t))) if t.as_str().contains("hello-ok") => {}
            other => bail!("no hello-ok: {other:?}"),
        }
        let (tx, mut rx) = mpsc::channel::<Message>(64);
        tokio::spawn(async move {
            while let Some(m) = rx.recv().await {
                if sink.send(m).await.is_err() {
                    break;
                }
            }
        });
        let pongs = Arc::new(AtomicU64::new(0));
        let (reply, counted) = (tx.clone(), pongs.clone());
        tokio::spawn(async move {
            while let Some(Ok(m)) = stream.next().await {
                let Message::Text(t) = m else { continue };
                let Ok(f) = serde_json::from_str::<Value>(t.as_str()) else {
                    continue;
                };
                if f["type"] == "request" && f["method"] == "ping" {
                    let r =
                        json!({"type": "response", "id": f["id"], "ok": true, "result": "pong"});
                    if reply.send(Message::text(r.to_string())).await.is_err() {
                        break;
                    }
                    counted.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        Ok(Self { tx, pongs })
    }

    async fn send(&self, frame: String) -> Result<()> {
        self.tx
            .send(Message::text(frame))
            .await
            .map_err(|_| anyhow!("the link is closed"))
    }

    /// A `probe-computers` whose pong goes out after every frame queued before: proves they were handled.
    async fn barrier(&self, mcp: &Mcp) -> Result<String> {
        let before = self.pongs.load(Ordering::Relaxed);
        let reply = mcp.call("probe-computers", json!({})).await?;
        if self.pongs.load(Ordering::Relaxed) == before {
            bail!("the probe was not answered by the soak computer: {reply}");
        }
        Ok(if reply.contains("pong") {
            "pong".into()
        } else {
            truncate(&reply).to_owned()
        })
    }
}

async fn chunk_phase(c: &Computer, mcp: &Mcp, frames: u64) -> Result<()> {
    let tail = "7".repeat(100 << 10);
    let started = Instant::now();
    for n in 0..frames {
        let f = json!({"type": "chunk", "id": format!("{n}{tail}"), "seq": 0, "last": false, "data": ""});
        c.send(f.to_string()).await?;
    }
    let probe = c.barrier(mcp).await?;
    println!(
        "  {frames} chunk frames ({:.0} MiB of ids) sent and handled in {:.1}s; probe after: {probe}",
        (frames * (100 << 10)) as f64 / (1 << 20) as f64,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn event_phase(c: &Computer, mcp: &Mcp, events: u64) -> Result<()> {
    // Just under CC's 128 KiB frame limit once wrapped.
    let payload = "e".repeat((128 << 10) - 100);
    let started = Instant::now();
    for n in 0..events {
        let f = json!({"type": "event", "event": "soak", "args": [n, payload]});
        c.send(f.to_string()).await?;
    }
    let probe = c.barrier(mcp).await?;
    let sent = started.elapsed();
    let t = Instant::now();
    let reply = mcp
        .call("poll_events", json!({"stream": "computer_events"}))
        .await?;
    println!(
        "  {events} events of ~128 KiB ({:.0} MiB) forwarded in {:.1}s; probe after: {probe}",
        (events * (128 << 10)) as f64 / (1 << 20) as f64,
        sent.as_secs_f64()
    );
    println!(
        "  poll_events reply: {} bytes ({:.1} KiB) in {:.1} ms",
        reply.len(),
        reply.len() as f64 / 1024.0,
        t.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}

async fn open_many(port: u16, n: usize, partial: Option<&'static [u8]>) -> (Vec<TcpStream>, usize) {
    let mut held = Vec::with_capacity(n);
    let mut failed = 0;
    for _ in 0..n {
        let conn = tokio::time::timeout(
            Duration::from_secs(2),
            TcpStream::connect(("127.0.0.1", port)),
        )
        .await;
        match conn {
            Ok(Ok(mut s)) => {
                if let Some(bytes) = partial
                    && s.write_all(bytes).await.is_err()
                {
                    failed += 1;
                    continue;
                }
                held.push(s);
            }
            _ => failed += 1,
        }
    }
    (held, failed)
}

/// How many of `conns` the server has closed (a read returns EOF or an error without blocking).
fn closed_by_server(conns: &[TcpStream]) -> usize {
    let mut buf = [0u8; 256];
    conns
        .iter()
        .filter(|s| match s.try_read(&mut buf) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
        })
        .count()
}

async fn idle_phase(
    pid: u32,
    mcp: &Mcp,
    mcp_port: u16,
    link_port: u16,
    idle: usize,
    slow: usize,
    hold: Duration,
) -> Result<()> {
    let started = Instant::now();
    let mut groups = Vec::new();
    for (label, port) in [("mcp", mcp_port), ("link", link_port)] {
        let (idle_conns, idle_failed) = open_many(port, idle, None).await;
        let (slow_conns, slow_failed) =
            open_many(port, slow, Some(b"POST /mcp HTTP/1.1\r\nHost: 127")).await;
        println!(
            "  {label} port {port}: {} idle open ({idle_failed} failed), {} slow-loris open ({slow_failed} failed)",
            idle_conns.len(),
            slow_conns.len()
        );
        groups.push((label, idle_conns, slow_conns));
    }
    println!("  opened in {:.1}s", started.elapsed().as_secs_f64());
    tokio::time::sleep(hold / 2).await;
    let t = Instant::now();
    let call = mcp.call("list_computers", json!({})).await;
    let latency = t.elapsed();
    let (rss, _) = mem(pid)?;
    println!("  while held: bridge fds {}, rss {}", fds(pid), mib(rss));
    match &call {
        Ok(_) => println!(
            "  real call while held: ok in {:.2} ms",
            latency.as_secs_f64() * 1e3
        ),
        Err(e) => println!(
            "  real call while held: FAILED after {:.2} ms: {e}",
            latency.as_secs_f64() * 1e3
        ),
    }
    tokio::time::sleep(hold / 2).await;
    for (label, idle_conns, slow_conns) in &groups {
        println!(
            "  {label}: after {:.0}s held, server had closed {} idle and {} slow-loris",
            hold.as_secs_f64(),
            closed_by_server(idle_conns),
            closed_by_server(slow_conns)
        );
    }
    drop(groups);
    Ok(())
}

async fn wait_healthy(port: u16, child: &mut tokio::process::Child) -> Result<Duration> {
    let http = reqwest::Client::new();
    let started = Instant::now();
    for _ in 0..300 {
        if let Some(status) = child.try_wait()? {
            bail!("the bridge exited early: {status}");
        }
        let ok = http
            .get(format!("http://127.0.0.1:{port}/health"))
            .send()
            .await
            .map(|r| r.status().is_success())
            .unwrap_or(false);
        if ok {
            return Ok(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("the bridge was not healthy within 15 s")
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let bridge = match args.bridge {
        Some(b) => b,
        None => std::env::current_exe()?
            .parent()
            .context("no parent directory of this binary")?
            .join("mcp-bridges"),
    };
    let (mcp_port, link_port) = (free_port()?, free_port()?);
    println!(
        "soak: {} computercraft --http --mcp-port {mcp_port} --computercraft-link-host 127.0.0.1 --computercraft-link-port {link_port}",
        bridge.display()
    );
    let mut child = tokio::process::Command::new(&bridge)
        .args(["computercraft", "--http", "--mcp-host", "127.0.0.1"])
        .args(["--mcp-port", &mcp_port.to_string()])
        .args([
            "--computercraft-link-host",
            "127.0.0.1",
            "--computercraft-link-port",
            &link_port.to_string(),
        ])
        .env("RUST_LOG", "error")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bridge.display()))?;
    let pid = child.id().context("the child has no pid")?;
    let ready = wait_healthy(mcp_port, &mut child).await?;
    let (rss, hwm) = mem(pid)?;
    println!(
        "ready in {:.0} ms; pid {pid}; rss {} (VmHWM {}), fds {}",
        ready.as_secs_f64() * 1e3,
        mib(rss),
        mib(hwm),
        fds(pid)
    );
    let bound = Duration::from_secs(args.phase_secs);
    let mcp = Mcp::new(mcp_port)?;
    let outcome: Result<()> = async {
        println!(
            "phase 1: {} list_computers calls, concurrency {}",
            args.calls, args.concurrency
        );
        phase(
            "calls",
            pid,
            bound,
            calls_phase(&mcp, args.calls, args.concurrency, bound),
        )
        .await?;

        let computer = Computer::link(link_port, 4242).await?;
        println!(
            "phase 2: chunk attack, {} frames with unique 100 KiB ids",
            args.chunks
        );
        phase(
            "chunks",
            pid,
            bound,
            chunk_phase(&computer, &mcp, args.chunks),
        )
        .await?;

        println!(
            "phase 3: event flood, {} events of ~128 KiB, then poll_events",
            args.events
        );
        phase(
            "events",
            pid,
            bound,
            event_phase(&computer, &mcp, args.events),
        )
        .await?;

        println!(
            "phase 4: {} idle + {} slow-loris connections to each port, held {} s",
            args.idle, args.slow, args.hold_secs
        );
        phase(
            "idle",
            pid,
            bound,
            idle_phase(
                pid,
                &mcp,
                mcp_port,
                link_port,
                args.idle,
                args.slow,
                Duration::from_secs(args.hold_secs),
            ),
        )
        .await?;
        Ok(())
    }
    .await;
    if let Err(e) = &outcome {
        println!("soak stopped early: {e:#}");
    }

    // SIGTERM without libc: the `kill` utility.
    let term = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()?;
    if !term.success() {
        println!("kill -TERM {pid} failed: {term}");
    }
    match tokio::time::timeout(Duration::from_secs(10), child.wait()).await {
        Ok(status) => println!("bridge exit after SIGTERM: {}", status?),
        Err(_) => {
            println!("bridge did not exit within 10 s of SIGTERM; killing it");
            child.kill().await?;
        }
    }
    outcome
}
