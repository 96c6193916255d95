//! `mcp-bench`: measures a no-op tool call on the bridge-core server and on an equivalent server built on
//! the official TypeScript SDK, in the same run, over stdio and Streamable HTTP, on loopback only.
//!
//! For each server and transport: start-to-ready time (spawn → first successful `tools/list`) and idle
//! RSS over several starts; then, on one client per server, closed-loop load at each concurrency, bounded
//! by a call count and a wall time. Prints tables and the Rust/TypeScript ratios; `--json PATH` writes them.
//! Numbers are reported against the core's targets, never asserted: this is not a test.

mod cpu;
mod error;
mod load;
mod raw;
mod report;
mod target;

use clap::Parser;
use error::BenchError;
use load::{Caller, LoadSpec};
use raw::RawHttp;
use report::{ClientKind, CpuUse, Environment, LoadRow, Report, StartupRow};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use target::{Era, HttpConnections, Programs, ServerKind, Target, TransportKind};

/// Load generator for the MCP core: a no-op tool over stdio and HTTP, Rust core vs TypeScript SDK.
#[derive(Debug, Parser)]
#[command(name = "mcp-bench", version)]
struct Cli {
    /// Servers to measure.
    #[arg(long, value_enum, value_delimiter = ',', default_values = ["rust", "baseline", "ts", "ts-stateful"])]
    servers: Vec<ServerKind>,

    /// Transports to measure.
    #[arg(long, value_enum, value_delimiter = ',', default_values = ["stdio", "http"])]
    transports: Vec<TransportKind>,

    /// Protocol eras the client speaks (the TypeScript SDK v1 only has `legacy`).
    #[arg(long, value_enum, value_delimiter = ',', default_values = ["legacy", "modern"])]
    eras: Vec<Era>,

    /// Calls kept in flight, one run each.
    #[arg(long, value_delimiter = ',', default_values = ["1", "8", "32"])]
    concurrency: Vec<usize>,

    /// Most calls per run.
    #[arg(long, default_value_t = 20_000)]
    calls: u64,

    /// Most wall time per run, in seconds.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,

    /// Unmeasured sequential calls after connecting.
    #[arg(long, default_value_t = 500)]
    warmup: u64,

    /// Starts per server and transport for start-to-ready time and idle RSS.
    #[arg(long, default_value_t = 5)]
    ready_runs: usize,

    /// Over HTTP, also measure with a minimal raw client (far less client CPU per call than rmcp), which
    /// shows the server's own capacity.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    raw_http: bool,

    /// HTTP client connection handling.
    #[arg(long, value_enum, default_value = "pooled")]
    http_connections: HttpConnections,

    /// The Rust no-op server (default: `noop-server` next to this program).
    #[arg(long)]
    noop_server: Option<PathBuf>,

    /// Node.js for the TypeScript server.
    #[arg(long, default_value = "node")]
    node: PathBuf,

    /// The TypeScript no-op server (default: bench/ts/server.js of this source tree).
    #[arg(long)]
    ts_server: Option<PathBuf>,

    /// Also write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,

    /// Show the servers' stderr.
    #[arg(long)]
    server_stderr: bool,
}

impl Cli {
    fn programs(&self) -> Programs {
        let beside_me = |name: &str| {
            std::env::current_exe()
                .ok()
                .and_then(|exe| exe.parent().map(|dir| dir.join(name)))
                .unwrap_or_else(|| PathBuf::from(name))
        };
        let noop_server = self
            .noop_server
            .clone()
            .unwrap_or_else(|| beside_me("noop-server"));
        let ts_server = self
            .ts_server
            .clone()
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("ts/server.js"));
        Programs {
            noop_server,
            node: self.node.clone(),
            ts_server,
            baseline_stdio: beside_me("baseline-stdio"),
            baseline_axum: beside_me("baseline-axum"),
            server_stderr: self.server_stderr,
        }
    }

    fn spec(&self, concurrency: usize) -> LoadSpec {
        LoadSpec {
            concurrency,
            max_calls: self.calls,
            max_time: Duration::from_secs_f64(self.seconds.max(0.1)),
        }
    }

    fn target(&self, server: ServerKind, transport: TransportKind, era: Era) -> Target {
        Target {
            server,
            transport,
            era,
            http: self.http_connections,
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli).await {
        Ok(report) if report.failures.is_empty() => ExitCode::SUCCESS,
        Ok(report) => {
            for f in &report.failures {
                eprintln!("mcp-bench: {f}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("mcp-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: &Cli) -> Result<Report, BenchError> {
    let started = std::time::Instant::now();
    let programs = cli.programs();
    let environment = environment(cli, &programs).await;
    println!(
        "mcp-bench: {} cpus (load average {}), rmcp {}, node {}, @modelcontextprotocol/sdk {}, HTTP connections {}",
        environment.cpus,
        environment
            .load_average
            .map_or_else(|| "unknown".into(), |l| format!("{l:.2}")),
        environment.rmcp_version,
        environment.node_version,
        environment.ts_sdk_version,
        environment.http_connections
    );
    println!(
        "per run: at most {} calls or {:.1} s, after {} warm-up calls\n",
        cli.calls, cli.seconds, cli.warmup
    );
    let mut failures = Vec::new();

    println!("== start-to-ready (spawn -> first tools/list) and idle RSS, legacy era ==");
    let mut startup = Vec::new();
    for &transport in &cli.transports {
        for &server in cli.servers.iter().filter(|s| s.own_startup()) {
            let target = cli.target(server, transport, Era::Legacy);
            match startup_samples(&programs, &target, cli.ready_runs.max(1)).await {
                Ok(samples) => startup.push(StartupRow::new(server, transport, &samples)),
                Err(e) => failures.push(e.to_string()),
            }
        }
    }
    print!("{}", report::startup_table(&startup));

    println!("\n== no-op tools/call, closed loop ==");
    println!("{}", report::load_header());
    let mut rows = Vec::new();
    for &transport in &cli.transports {
        for &era in &cli.eras {
            for &server in cli.servers.iter().filter(|s| s.supports(transport, era)) {
                let target = cli.target(server, transport, era);
                match load_runs(cli, &programs, &target).await {
                    Ok((mut new_rows, rss)) => {
                        if era == Era::Legacy
                            && let Some(row) = startup
                                .iter_mut()
                                .find(|s| s.server == server && s.transport == transport)
                        {
                            row.rss_after_load_kib = Some(rss);
                        }
                        rows.append(&mut new_rows);
                    }
                    Err(e) => failures.push(e.to_string()),
                }
            }
        }
    }

    let ratios = report::ratios(&rows);
    let targets = report::targets(&rows, &startup, &ratios);
    println!("\n== memory after load ==");
    print!("{}", report::startup_table(&startup));
    if !ratios.is_empty() {
        println!(
            "\n== Rust core vs baseline and TypeScript SDK (above 1x: Rust better; vs baseline, below 1x is the gap to the floor) =="
        );
        print!("{}", report::ratio_table(&ratios));
    }
    println!("\n== targets (reported, not asserted) ==");
    print!("{}", report::target_table(&targets));
    println!(
        "\nmeasured in {:.0} s; load average now {}",
        started.elapsed().as_secs_f64(),
        cpu::load_average().map_or_else(|| "unknown".into(), |l| format!("{l:.2}"))
    );

    let report = Report {
        environment,
        load: rows,
        startup,
        ratios,
        targets,
        failures,
    };
    if let Some(path) = &cli.json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text).map_err(|source| BenchError::WriteJson {
            path: path.display().to_string(),
            source,
        })?;
        println!("\nJSON written to {}", path.display());
    }
    Ok(report)
}

/// Starts the server `runs` times; returns (start-to-ready, idle RSS KiB) of each start.
async fn startup_samples(
    programs: &Programs,
    target: &Target,
    runs: usize,
) -> Result<Vec<(Duration, u64)>, BenchError> {
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let running = target::start(programs, target).await?;
        let rss = target::rss_kib(running.pid);
        let ready = running.ready;
        running.stop().await;
        samples.push((ready, rss?));
    }
    Ok(samples)
}

/// One server; the rmcp client (and for HTTP the raw client too) at every concurrency; returns the rows and
/// the server's RSS afterwards.
async fn load_runs(
    cli: &Cli,
    programs: &Programs,
    target: &Target,
) -> Result<(Vec<LoadRow>, u64), BenchError> {
    let running = target::start(programs, target).await?;
    let outcome = client_runs(cli, &running, target).await;
    let rss = target::rss_kib(running.pid);
    running.stop().await;
    Ok((outcome?, rss?))
}

async fn client_runs(
    cli: &Cli,
    running: &target::Running,
    target: &Target,
) -> Result<Vec<LoadRow>, BenchError> {
    let mut rows = Vec::new();
    let rmcp = Caller::Rmcp(running.peer());
    series(cli, running.pid, target, ClientKind::Rmcp, &rmcp, &mut rows).await?;
    if let (true, Some(url)) = (cli.raw_http, &running.url) {
        let raw = RawHttp::connect(url.clone(), target.era)
            .await
            .map_err(|message| BenchError::Handshake {
                server: target.name(),
                message: format!("raw client: {message}"),
            })?;
        let raw = Caller::Raw(Arc::new(raw));
        series(cli, running.pid, target, ClientKind::Raw, &raw, &mut rows).await?;
    }
    Ok(rows)
}

/// Warm-up, then one run per concurrency, printing each row as it completes.
async fn series(
    cli: &Cli,
    pid: u32,
    target: &Target,
    client: ClientKind,
    caller: &Caller,
    rows: &mut Vec<LoadRow>,
) -> Result<(), BenchError> {
    let failed = |message: String| BenchError::AllCallsFailed {
        server: format!("{} ({} client)", target.name(), client.label()),
        message,
    };
    load::warm_up(caller, cli.warmup).await.map_err(failed)?;
    for &c in &cli.concurrency {
        let spec = cli.spec(c);
        let before = (cpu::cpu_time(Some(pid)), cpu::cpu_time(None));
        let result = load::run(caller, spec).await?;
        let cpu = CpuUse {
            server: elapsed_cpu(before.0, cpu::cpu_time(Some(pid))),
            client: elapsed_cpu(before.1, cpu::cpu_time(None)),
        };
        if result.calls == 0 {
            return Err(failed(result.first_error.unwrap_or_default()));
        }
        let row = LoadRow::new(client, target, spec, &result, cpu);
        println!("{}", report::load_line(&row));
        if let Some(e) = &row.first_error {
            println!("    first error: {e}");
        }
        rows.push(row);
    }
    Ok(())
}

fn elapsed_cpu(before: Option<Duration>, after: Option<Duration>) -> Option<Duration> {
    Some(after?.saturating_sub(before?))
}

async fn environment(cli: &Cli, programs: &Programs) -> Environment {
    let node_version = tokio::process::Command::new(&programs.node)
        .arg("--version")
        .output()
        .await
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unavailable".into());
    let sdk_manifest = programs
        .ts_server
        .parent()
        .map(|dir| dir.join("node_modules/@modelcontextprotocol/sdk/package.json"));
    let ts_sdk_version = sdk_manifest
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|v| v.get("version").and_then(|v| v.as_str()).map(str::to_owned))
        .unwrap_or_else(|| "not installed".into());
    Environment {
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        load_average: cpu::load_average(),
        node_version,
        ts_sdk_version,
        rmcp_version: "3.9.0",
        http_connections: format!("{:?}", cli.http_connections).to_lowercase(),
        calls_per_run: cli.calls,
        seconds_per_run: cli.seconds,
        warmup_calls: cli.warmup,
        ready_runs: cli.ready_runs,
    }
}
