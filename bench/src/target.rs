//! The servers under test: how to start each one, connect the rmcp client in a chosen protocol era, and
//! measure start-to-ready time and resident memory.

use crate::error::BenchError;
use rmcp::model::ProtocolVersion;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{Peer, RoleClient};
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

const READY_TIMEOUT: Duration = Duration::from_secs(15);
/// Above the largest concurrency we run, so rmcp's own POST limit (default 16) never queues our calls.
const MAX_HTTP_IN_FLIGHT: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ServerKind {
    /// bench/src/bin/noop-server.rs on bridge-core.
    Rust,
    /// bench/ts/server.js on the official TypeScript SDK, stateless HTTP with JSON responses.
    Ts,
    /// The same TypeScript server keeping one HTTP session per client (JSON responses).
    TsStateful,
    /// The floor: bench/src/bin/baseline-stdio.rs (a line echo) or baseline-axum.rs (a bare axum handler),
    /// canned replies and no MCP library.
    Baseline,
}

impl ServerKind {
    pub fn label(self) -> &'static str {
        match self {
            Self::Rust => "rust",
            Self::Ts => "ts",
            Self::TsStateful => "ts-stateful",
            Self::Baseline => "baseline",
        }
    }

    /// The TypeScript SDK v1 speaks only the initialize-era protocol; sessions exist only over HTTP.
    pub fn supports(self, transport: TransportKind, era: Era) -> bool {
        // The baselines answer both eras (bench/src/bin/baseline/reply.rs); the TypeScript SDK v1 the
        // initialize era only.
        let era_ok = matches!(self, Self::Rust | Self::Baseline) || era == Era::Legacy;
        let transport_ok = self != Self::TsStateful || transport == TransportKind::Http;
        era_ok && transport_ok
    }

    /// `ts-stateful` is the `ts` program with another flag: its start-up is the same.
    pub fn own_startup(self) -> bool {
        self != Self::TsStateful
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    Stdio,
    Http,
}

impl TransportKind {
    pub fn label(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::Http => "http",
        }
    }
}

/// The MCP protocol era the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Era {
    /// `initialize` handshake, protocol 2025-11-25 (sessions over HTTP where the server keeps them).
    Legacy,
    /// `server/discover`, protocol 2026-07-28: stateless, per-request metadata.
    Modern,
}

impl Era {
    pub fn label(self) -> &'static str {
        match self {
            Self::Legacy => "legacy",
            Self::Modern => "modern",
        }
    }

    fn lifecycle(self) -> ClientLifecycleMode {
        match self {
            Self::Legacy => ClientLifecycleMode::Initialize,
            Self::Modern => ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        }
    }
}

/// How the HTTP client manages connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum HttpConnections {
    /// Keep-alive pool: what a long-lived agent client does.
    Pooled,
    /// rmcp's default client: a new TCP connection for every request.
    Fresh,
}

/// Where the server programs are.
#[derive(Debug, Clone)]
pub struct Programs {
    pub noop_server: PathBuf,
    pub node: PathBuf,
    pub ts_server: PathBuf,
    pub baseline_stdio: PathBuf,
    pub baseline_axum: PathBuf,
    /// Let the servers' stderr through (otherwise discarded).
    pub server_stderr: bool,
}

/// What to start and how to talk to it.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub server: ServerKind,
    pub transport: TransportKind,
    pub era: Era,
    pub http: HttpConnections,
}

impl Target {
    pub fn name(&self) -> String {
        format!(
            "{} server over {} ({})",
            self.server.label(),
            self.transport.label(),
            self.era.label()
        )
    }
}

pub type Client = RunningService<RoleClient, ()>;

/// A started server with a connected client.
pub struct Running {
    pub client: Client,
    pub pid: u32,
    /// From spawn to the first successful `tools/list`.
    pub ready: Duration,
    /// The MCP endpoint, for HTTP servers.
    pub url: Option<String>,
    /// Only for HTTP: over stdio the client transport owns the child.
    http_child: Option<Child>,
}

impl Running {
    pub fn peer(&self) -> Peer<RoleClient> {
        self.client.peer().clone()
    }

    /// Ends the session and the server process.
    pub async fn stop(self) {
        let _ = self.client.cancel().await;
        if let Some(mut child) = self.http_child {
            let _ = child.kill().await;
        }
    }
}

fn command(programs: &Programs, target: &Target, port: Option<u16>) -> Command {
    let mut cmd = match target.server {
        ServerKind::Rust => {
            let mut cmd = Command::new(&programs.noop_server);
            cmd.env("RUST_LOG", "warn");
            match port {
                Some(port) => cmd.args(["--http", "--mcp-port", &port.to_string()]),
                None => cmd.arg("--stdio"),
            };
            cmd
        }
        ServerKind::Ts | ServerKind::TsStateful => {
            let mut cmd = Command::new(&programs.node);
            cmd.arg(&programs.ts_server);
            match port {
                Some(port) => cmd.args(["--http", "--port", &port.to_string()]),
                None => cmd.arg("--stdio"),
            };
            if target.server == ServerKind::TsStateful {
                cmd.arg("--stateful");
            }
            cmd
        }
        ServerKind::Baseline => match port {
            Some(port) => {
                let mut cmd = Command::new(&programs.baseline_axum);
                cmd.args(["--http", "--port", &port.to_string()]);
                cmd
            }
            None => Command::new(&programs.baseline_stdio),
        },
    };
    cmd.stderr(if programs.server_stderr {
        Stdio::inherit()
    } else {
        Stdio::null()
    });
    cmd.kill_on_drop(true);
    cmd
}

fn program_name(cmd: &Command) -> String {
    cmd.as_std().get_program().to_string_lossy().into_owned()
}

/// Starts the server, connects, and lists its tools; the time this takes is the start-to-ready time.
pub async fn start(programs: &Programs, target: &Target) -> Result<Running, BenchError> {
    match target.transport {
        TransportKind::Stdio => start_stdio(programs, target).await,
        TransportKind::Http => start_http(programs, target).await,
    }
}

async fn start_stdio(programs: &Programs, target: &Target) -> Result<Running, BenchError> {
    let cmd = command(programs, target, None);
    let program = program_name(&cmd);
    let t0 = Instant::now();
    let (process, _) = TokioChildProcess::builder(cmd)
        .stderr(if programs.server_stderr {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .spawn()
        .map_err(|source| BenchError::Spawn { program, source })?;
    let pid = process.id().unwrap_or(0);
    let client = tokio::time::timeout(
        READY_TIMEOUT,
        ().serve_with_lifecycle(process, target.era.lifecycle()),
    )
    .await
    .map_err(|_| not_ready(target))?
    .map_err(|e| handshake_failed(target, e))?;
    list_noop(&client, target).await?;
    Ok(Running {
        client,
        pid,
        ready: t0.elapsed(),
        url: None,
        http_child: None,
    })
}

async fn start_http(programs: &Programs, target: &Target) -> Result<Running, BenchError> {
    let port = free_port()?;
    let mut cmd = command(programs, target, Some(port));
    cmd.stdout(Stdio::null()).stdin(Stdio::null());
    let program = program_name(&cmd);
    let t0 = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|source| BenchError::Spawn { program, source })?;
    let pid = child.id().unwrap_or(0);
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    wait_for_listener(&mut child, addr, target).await?;
    let url = format!("http://{addr}/mcp");
    let config = StreamableHttpClientTransportConfig::with_uri(url.clone())
        .max_concurrent_requests(MAX_HTTP_IN_FLIGHT);
    let transport = match target.http {
        HttpConnections::Pooled => {
            let http = reqwest::Client::builder()
                .tcp_nodelay(true)
                .build()
                .map_err(|e| BenchError::HttpClient(e.to_string()))?;
            StreamableHttpClientTransport::with_client(http, config)
        }
        HttpConnections::Fresh => StreamableHttpClientTransport::from_config(config),
    };
    let client = tokio::time::timeout(
        READY_TIMEOUT,
        ().serve_with_lifecycle(transport, target.era.lifecycle()),
    )
    .await
    .map_err(|_| not_ready(target))?
    .map_err(|e| handshake_failed(target, e))?;
    list_noop(&client, target).await?;
    Ok(Running {
        client,
        pid,
        ready: t0.elapsed(),
        url: Some(url),
        http_child: Some(child),
    })
}

/// Polls the port every millisecond: the server gives no other signal that it listens.
async fn wait_for_listener(
    child: &mut Child,
    addr: SocketAddr,
    target: &Target,
) -> Result<(), BenchError> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(BenchError::ExitedEarly {
                server: target.name(),
                status: status.to_string(),
            });
        }
        if Instant::now() >= deadline {
            return Err(not_ready(target));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

async fn list_noop(client: &Client, target: &Target) -> Result<(), BenchError> {
    let tools = client
        .peer()
        .list_tools(None)
        .await
        .map_err(|e| BenchError::ListTools {
            server: target.name(),
            message: e.to_string(),
        })?;
    if tools.tools.iter().any(|t| t.name == "noop") {
        Ok(())
    } else {
        Err(BenchError::NoNoopTool {
            server: target.name(),
        })
    }
}

fn not_ready(target: &Target) -> BenchError {
    BenchError::NotReady {
        server: target.name(),
        timeout: READY_TIMEOUT,
    }
}

fn handshake_failed(target: &Target, e: impl std::fmt::Display) -> BenchError {
    BenchError::Handshake {
        server: target.name(),
        message: e.to_string(),
    }
}

/// A loopback port that was free a moment ago; the server binds it right after.
fn free_port() -> Result<u16, BenchError> {
    let listener =
        std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(BenchError::Port)?;
    Ok(listener.local_addr().map_err(BenchError::Port)?.port())
}

/// Resident set size of a process, in KiB, from `/proc/<pid>/status`.
pub fn rss_kib(pid: u32) -> Result<u64, BenchError> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| BenchError::Rss {
            pid,
            message: e.to_string(),
        })?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| BenchError::Rss {
            pid,
            message: "no VmRSS line".into(),
        })
}
