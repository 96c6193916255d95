//! Numbers, never pass/fail:
//!
//! 1. `debug_status` round trip through the file protocol (client → `.vsc-bridge/execute/<job>/` → headless host
//!    → answer files → client), p50/p99, against VSC-Bridge's 50 ms polling; both the raw client and a full MCP
//!    call (rmcp client → bridge → files → host).
//!    The raw round trip again with a CPU-bound process (a shell busy loop) running beside it.
//! 2. Breakpoint hit → variables listed on debugpy: through the bridge (MCP, dap backend) against the same DAP
//!    steps sent straight to debugpy, in the same run.
//! 3. The headless host's CPU while idle (`debug-host`, utime + stime from /proc over 30 s).
//! 4. `debug_list_variables` on a frame holding a 10 000-element list (default page, and maxDepth 3).
//!
//!   cargo bench -p bridge-debug --bench debug_bench              # 500 round trips, 5 debug runs, 30 s idle
//!   cargo bench -p bridge-debug --bench debug_bench -- 2000 10 60
//!
//! Needs debugpy from scripts/install-peers (.peers/venv/bin/python).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bridge_core::BridgeEntry;
use bridge_debug::config::BackendChoice;
use bridge_debug::dap::DapConfig;
use bridge_debug::dap::client::DapClient;
use bridge_debug::fsbridge::client::{FsClient, RunCtx};
use bridge_debug::fsbridge::host::{HostOptions, serve};
use bridge_debug::{Debug, DebugArgs};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let trips = args.first().copied().unwrap_or(500);
    let runs = args.get(1).copied().unwrap_or(5);
    let idle_secs = args.get(2).copied().unwrap_or(30) as u64;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!(
            "load average: {}",
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        );
        file_protocol(trips).await;
        breakpoint_to_variables(runs).await;
        list_variables_10k().await;
        idle_host_cpu(idle_secs);
    });
}

/// A shell busy loop: the CPU-bound job beside the round trips. Killed by its pid when dropped.
struct Hog(std::process::Child);

impl Hog {
    fn start() -> Self {
        Self(
            std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap(),
        )
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn idle_host_cpu(secs: u64) {
    let ws = workspace("idle");
    let mut host = std::process::Command::new(env!("CARGO_BIN_EXE_debug-host"))
        .arg("--debug-workspace")
        .arg(&ws)
        .arg("--debug-python")
        .arg(python())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let before = cpu_ticks(host.id());
    std::thread::sleep(Duration::from_secs(secs));
    let used = cpu_ticks(host.id()) - before;
    let _ = host.kill();
    let _ = host.wait();
    // USER_HZ is 100 on Linux.
    println!(
        "{:<58} {used} ticks = {} ms of CPU in {secs} s ({:.2}% of a core)",
        "idle debug-host CPU (utime+stime)",
        used * 10,
        used as f64 * 10.0 / (secs as f64 * 10.0)
    );
    let _ = std::fs::remove_dir_all(&ws);
}

async fn list_variables_10k() {
    let ws = workspace("vars");
    std::fs::write(
        ws.join("big.py"),
        "def main():\n    xs = list(range(10000))\n    rows = [{'i': i} for i in range(200)]\n    print(len(xs), len(rows))\n\n\nmain()\n",
    )
    .unwrap();
    let env = bridge_core::BridgeEnv::new();
    let bridge = Debug::start(args(&ws, BackendChoice::Dap), &env)
        .await
        .unwrap();
    let c = mcp_testkit::pipe_client(bridge, mcp_testkit::Era::Legacy, vec![]).await;
    mcp_testkit::call(&c, "breakpoint_set", json!({"path": "big.py", "line": 4})).await;
    let r = mcp_testkit::call(
        &c,
        "debug_start",
        json!({"config": {"type": "debugpy", "request": "launch", "program": "${workspaceFolder}/big.py"},
            "wait": true, "timeoutMs": 30000}),
    )
    .await;
    assert_ne!(r.is_error, Some(true));
    for (label, a) in [
        (
            "default page (maxDepth 1, 50 a page)",
            json!({"scope": "local"}),
        ),
        ("maxDepth 3", json!({"scope": "local", "maxDepth": 3})),
    ] {
        let mut samples = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            let r = mcp_testkit::call(&c, "debug_list_variables", a.clone()).await;
            assert_ne!(r.is_error, Some(true));
            samples.push(t.elapsed());
        }
        report(
            &format!("list_variables, 10 000-element list: {label}"),
            samples,
        );
    }
    mcp_testkit::call(&c, "debug_stop", json!({})).await;
    let _ = std::fs::remove_dir_all(&ws);
}

fn python() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.peers/venv/bin/python");
    assert!(root.exists(), "run scripts/install-peers first (debugpy)");
    root
}

fn workspace(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("debug-bench-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("target.py"),
        "def add(a, b):\n    total = a + b\n    return total\n\n\nx = add(40, 2)\nprint(x)\n",
    )
    .unwrap();
    dir.canonicalize().unwrap()
}

fn args(ws: &Path, backend: BackendChoice) -> DebugArgs {
    DebugArgs {
        workspace: ws.to_path_buf(),
        backend,
        bridge_dir: None,
        max_data_bytes: 16 << 20,
        allow_launch_anywhere: false,
        launch_allow: vec![],
        env_allow: vec![],
        timeout: Duration::from_secs(30),
        manifest: None,
        python: Some(python()),
        lldb_dap: None,
        js_debug: None,
        max_sessions: 8,
    }
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{what:<58} n={:<5} p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms",
        samples.len(),
        pct(&samples, 0.5),
        pct(&samples, 0.99),
        pct(&samples, 1.0)
    );
}

async fn file_protocol(trips: usize) {
    let ws = workspace("fs");
    let stop = CancellationToken::new();
    let cfg = DapConfig {
        workspace: ws.clone(),
        python: Some(python()),
        lldb_dap: None,
        js_debug: None,
        policy: Default::default(),
    };
    let host_ws = ws.clone();
    let host_stop = stop.clone();
    let host =
        tokio::spawn(async move { serve(&host_ws, HostOptions::default(), cfg, host_stop).await });
    let root = ws.join(".vsc-bridge");
    while !root.join("host.json").exists() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let client = FsClient::new(root.clone());
    report(
        "debug_status via files + host (raw fs client)",
        status_trips(&client, trips).await,
    );
    {
        let _hog = Hog::start();
        report(
            "  the same, a CPU-bound process beside it",
            status_trips(&client, trips).await,
        );
    }
    let env = bridge_core::BridgeEnv::new();
    let bridge = Debug::start(args(&ws, BackendChoice::Vscode), &env)
        .await
        .unwrap();
    let c = mcp_testkit::pipe_client(bridge, mcp_testkit::Era::Legacy, vec![]).await;
    let mut mcp = Vec::new();
    for _ in 0..trips {
        let t = Instant::now();
        let r = mcp_testkit::call(&c, "debug_status", json!({})).await;
        assert_ne!(r.is_error, Some(true));
        mcp.push(t.elapsed());
    }
    report("debug_status via MCP → files → host (full tool call)", mcp);
    println!(
        "{:<58} VSC-Bridge polls claimed.json and done every 50 ms: ≥ 50 ms per call on average",
        "reference"
    );
    stop.cancel();
    let _ = host.await;
    let _ = std::fs::remove_dir_all(&ws);
}

async fn breakpoint_to_variables(runs: usize) {
    let ws = workspace("bp");
    let mut bridge_times = Vec::new();
    let mut raw_times = Vec::new();
    for _ in 0..runs {
        bridge_times.push(via_bridge(&ws).await);
        raw_times.push(via_raw_dap(&ws).await);
    }
    report(
        "start → breakpoint hit → variables: via the bridge (MCP)",
        bridge_times,
    );
    report(
        "start → breakpoint hit → variables: raw DAP to debugpy",
        raw_times,
    );
    let _ = std::fs::remove_dir_all(&ws);
}

async fn via_bridge(ws: &Path) -> Duration {
    let env = bridge_core::BridgeEnv::new();
    let bridge = Debug::start(args(ws, BackendChoice::Dap), &env)
        .await
        .unwrap();
    let c = mcp_testkit::pipe_client(bridge, mcp_testkit::Era::Legacy, vec![]).await;
    mcp_testkit::call(
        &c,
        "breakpoint_set",
        json!({"path": "target.py", "line": 3}),
    )
    .await;
    let t = Instant::now();
    for (tool, a) in [
        (
            "debug_start",
            json!({"config": {"type": "debugpy", "request": "launch", "program": "${workspaceFolder}/target.py"}}),
        ),
        ("debug_wait_for_hit", json!({"timeoutMs": 30000})),
        ("debug_list_variables", json!({"scope": "local"})),
    ] {
        let r = mcp_testkit::call(&c, tool, a).await;
        assert_ne!(r.is_error, Some(true), "{tool}: {r:?}");
    }
    let took = t.elapsed();
    mcp_testkit::call(&c, "debug_stop", json!({})).await;
    took
}

async fn via_raw_dap(ws: &Path) -> Duration {
    let t = Instant::now();
    let mut cmd = tokio::process::Command::new(python());
    cmd.args(["-m", "debugpy.adapter"]);
    let events: Arc<Mutex<Vec<Value>>> = Arc::default();
    let notify = Arc::new(tokio::sync::Notify::new());
    let stop = CancellationToken::new();
    let (ev, n) = (Arc::clone(&events), Arc::clone(&notify));
    let dap = DapClient::spawn(
        cmd,
        &stop,
        move |e| {
            ev.lock().unwrap().push(e);
            n.notify_waiters();
        },
        |_| {},
    )
    .unwrap();
    let wait_for = |name: &'static str| {
        let events = Arc::clone(&events);
        let notify = Arc::clone(&notify);
        async move {
            loop {
                let n = notify.notified();
                if let Some(e) = events
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|e| e["event"] == name)
                    .cloned()
                {
                    return e;
                }
                n.await;
            }
        }
    };
    let d = Duration::from_secs(30);
    dap.request("initialize", json!({"adapterID": "debugpy", "pathFormat": "path", "linesStartAt1": true, "columnsStartAt1": true}), d).await.unwrap();
    let program = ws.join("target.py").display().to_string();
    let launch = dap
        .send("launch", json!({"type": "debugpy", "request": "launch", "program": program, "console": "internalConsole", "python": [python()]}))
        .await
        .unwrap();
    wait_for("initialized").await;
    dap.request(
        "setBreakpoints",
        json!({"source": {"path": program}, "breakpoints": [{"line": 3}]}),
        d,
    )
    .await
    .unwrap();
    dap.request("configurationDone", json!({}), d)
        .await
        .unwrap();
    launch.wait(d).await.unwrap();
    let stopped = wait_for("stopped").await;
    let thread = stopped["body"]["threadId"].clone();
    let st = dap
        .request("stackTrace", json!({"threadId": thread, "levels": 1}), d)
        .await
        .unwrap();
    let frame = st["stackFrames"][0]["id"].clone();
    let sc = dap
        .request("scopes", json!({"frameId": frame}), d)
        .await
        .unwrap();
    let vref = sc["scopes"][0]["variablesReference"].clone();
    dap.request("variables", json!({"variablesReference": vref}), d)
        .await
        .unwrap();
    let took = t.elapsed();
    let _ = dap
        .request(
            "disconnect",
            json!({"terminateDebuggee": true}),
            Duration::from_secs(3),
        )
        .await;
    stop.cancel();
    took
}

/// `trips` no-op `debug.status` jobs through the file protocol, each timed from submit to answer.
async fn status_trips(client: &FsClient, trips: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(trips);
    for _ in 0..trips {
        let t = Instant::now();
        let ctx = RunCtx {
            cancel: CancellationToken::new(),
            tool: None,
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        client
            .run("debug.status", json!({}), deadline, ctx)
            .await
            .unwrap();
        times.push(t.elapsed());
    }
    times
}
