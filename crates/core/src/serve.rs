//! Serving a bridge over MCP: stdio or Streamable HTTP, both protocol eras, graceful shutdown.

mod args;
mod client_link;
mod convert;
mod handler;
mod http;
mod logging;
mod metrics;
mod tasks;

use crate::bridge::Bridge;
use handler::{McpHandler, Shared};
use rmcp::ServiceExt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use args::{LogFormat, McpArgs, Transport};
pub use http::HttpOptions;
pub use logging::init_logging;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "cannot listen for MCP on {addr}: {source}. Choose another address with --mcp-host/--mcp-port (MCP_HOST/MCP_PORT)."
    )]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("MCP transport failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("MCP session failed: {0}")]
    Session(String),
    /// `--mcp-allowed-origin` or `--mcp-allowed-host` could not be understood.
    #[error("{0}")]
    Access(String),
}

fn shared(bridge: Bridge, tool_timeouts: &[(String, Duration)]) -> Arc<Shared> {
    for (name, _) in tool_timeouts {
        if bridge.tool(name).is_none() {
            tracing::warn!(
                "--tool-timeout names `{name}`, which is not a tool of this bridge; ignored"
            );
        }
    }
    Arc::new(Shared {
        timeouts: tool_timeouts.iter().cloned().collect(),
        metrics: metrics::Metrics::new(),
        seal: client_link::StateSeal::new(),
        tasks: tasks::TaskStore::new(tasks::TaskLimits::default()),
        tools: bridge.inner.tools.iter().map(convert::tool).collect(),
        bridge,
    })
}

/// Serves MCP on stdin/stdout until the client closes the stream or `shutdown` is cancelled.
pub async fn serve_stdio(
    bridge: Bridge,
    tool_timeouts: &[(String, Duration)],
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    // Non-blocking pipes on Linux (falls back to tokio's stdio elsewhere): tokio's stdio does blocking reads on
    // a thread pool, which costs several times the CPU per call when the machine is busy (bench/README.md).
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    serve_io(bridge, stdin, stdout, tool_timeouts, shutdown).await
}

/// Serves MCP as newline-delimited JSON over any byte streams: the stdio transport without the process
/// boundary, so tests can drive it through an in-memory pipe.
pub async fn serve_io<R, W>(
    bridge: Bridge,
    read: R,
    write: W,
    tool_timeouts: &[(String, Duration)],
    shutdown: CancellationToken,
) -> Result<(), ServeError>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let handler = McpHandler::new(shared(bridge, tool_timeouts));
    let service = match handler
        .serve_with_ct((read, write), shutdown.child_token())
        .await
    {
        Ok(service) => service,
        // A client that goes away before initializing (or a shutdown meanwhile) is an ordinary end.
        Err(
            rmcp::service::ServerInitializeError::ConnectionClosed(_)
            | rmcp::service::ServerInitializeError::Cancelled,
        ) => {
            tracing::info!("the MCP client closed the connection before initializing");
            return Ok(());
        }
        Err(e) => return Err(ServeError::Session(e.to_string())),
    };
    service
        .waiting()
        .await
        .map_err(|e| ServeError::Session(e.to_string()))?;
    Ok(())
}

/// Serves MCP over HTTP on an already-bound listener (tests bind `127.0.0.1:0`).
pub async fn serve_http(
    bridge: Bridge,
    listener: TcpListener,
    options: HttpOptions,
    tool_timeouts: &[(String, Duration)],
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    http::serve(shared(bridge, tool_timeouts), listener, options, shutdown).await
}

/// Runs a bridge as the user configured it: binds, warns about risky settings, serves until shutdown.
pub async fn run_bridge(
    bridge: Bridge,
    args: &McpArgs,
    default: Transport,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    match args.transport(default) {
        Transport::Stdio => {
            tracing::info!(bridge = bridge.name(), "serving MCP on stdio");
            serve_stdio(bridge, &args.tool_timeouts, shutdown).await
        }
        Transport::Http => {
            let addr = SocketAddr::new(args.mcp_host, args.mcp_port);
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|source| ServeError::Bind { addr, source })?;
            let local = listener.local_addr()?;
            if !args.mcp_host.is_loopback() && args.mcp_token.is_none() {
                tracing::warn!(
                    "MCP is listening on {local}, beyond this machine, WITHOUT a token: anyone on your network can \
                     drive this bridge. Set MCP_TOKEN (or --mcp-token), or bind 127.0.0.1."
                );
            }
            tracing::info!(
                bridge = bridge.name(),
                "serving MCP at http://{local}/mcp (health: http://{local}/health)"
            );
            let options = HttpOptions {
                token: args.mcp_token.clone(),
                extra_origins: args.allowed_origins.clone(),
                extra_hosts: args.allowed_hosts.clone(),
                shutdown_grace: args.shutdown_grace,
                ..HttpOptions::default()
            };
            serve_http(bridge, listener, options, &args.tool_timeouts, shutdown).await
        }
    }
}

/// The `main` of a program that serves one bridge, after argument parsing: serves until SIGINT/SIGTERM and
/// turns a failure into a logged message and a failing exit code.
pub async fn serve_until_signal(
    bridge: Result<Bridge, crate::bridge::BuildError>,
    args: &McpArgs,
    default: Transport,
) -> std::process::ExitCode {
    let bridge = match bridge {
        Ok(bridge) => bridge,
        Err(e) => {
            tracing::error!("cannot assemble the bridge: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match run_bridge(bridge, args, default, shutdown_on_signals()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A token cancelled on SIGINT or SIGTERM, for `run_bridge`.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let trigger = token.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down: no new requests; letting in-flight calls finish");
        trigger.cancel();
    });
    token
}

#[cfg(unix)]
async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(e) => {
            tracing::warn!("cannot watch SIGTERM ({e}); only Ctrl-C stops the bridge");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}
