//! Serving a bridge over MCP: stdio or Streamable HTTP, both protocol eras, graceful shutdown.

mod args;
mod body_budget;
mod body_read;
mod client_link;
mod convert;
mod drain;
mod edges;
mod handler;
mod http;
mod inline;
mod invalid;
mod logging;
mod metrics;
mod panic;
mod resource_pages;
mod results;
mod sessions;
mod stdio;
mod sweeper;
mod tasks;
mod unreadable;
mod wire;

use crate::bridge::{Bridge, BridgeEntry, BridgeEnv, BridgeError};
use crate::mount::Mount;
use handler::Shared;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use stdio::StdioEnd;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use args::{ExposureError, LogFormat, McpArgs, Transport, check_exposure};
pub use http::{HttpOptions, MAX_LEGACY_RUNNING_CALLS, MAX_LEGACY_SESSION_CALLS, RequestPaths};
pub use logging::init_logging;
/// The most tool calls that wait at once on one stdio connection; one past it is refused with `E_BUSY`.
pub use stdio::MAX_CALLS_IN_FLIGHT as MAX_STDIO_CALLS_IN_FLIGHT;

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

fn shared(mount: Mount, tool_timeouts: &[(String, Duration)]) -> Arc<Shared> {
    shared_counting(mount, tool_timeouts, Arc::new(metrics::Metrics::new()))
}

fn shared_counting(
    mount: Mount,
    tool_timeouts: &[(String, Duration)],
    metrics: Arc<metrics::Metrics>,
) -> Arc<Shared> {
    let (timeouts, unknown) = mount.resolve_timeouts(tool_timeouts);
    for name in unknown {
        tracing::warn!(
            "--tool-timeout names `{name}`, which is not a tool served here (use a name from tools/list, or \
             BRIDGE/TOOL); ignored"
        );
    }
    let shared = Arc::new(Shared {
        timeouts,
        metrics,
        seal: client_link::StateSeal::new(),
        tasks: tasks::TaskStore::new(tasks::TaskLimits::default()),
        results: Default::default(),
        tools: mount
            .tools()
            .iter()
            .map(|t| convert::tool(&t.spec))
            .collect(),
        drain: Arc::default(),
        mount,
    });
    sweeper::start(&shared);
    shared
}

/// Serves MCP on stdin/stdout until the client closes the stream or `shutdown` is cancelled.
pub async fn serve_stdio(
    mount: impl Into<Mount>,
    tool_timeouts: &[(String, Duration)],
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    // Non-blocking pipes on Linux (falls back to tokio's stdio elsewhere): tokio's stdio does blocking reads on
    // a thread pool, which costs several times the CPU per call when the machine is busy (bench/README.md).
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    serve_io_graceful(
        shared(mount.into(), tool_timeouts),
        stdin,
        stdout,
        shutdown,
        Duration::ZERO,
    )
    .await
    .map(drop)
}

/// Serves MCP as newline-delimited JSON over any byte streams: the stdio transport without the process
/// boundary, so tests can drive it through an in-memory pipe. Calls in flight when `shutdown` is cancelled
/// are ended at once; [`run_mount`] lets them finish within the grace the user set.
pub async fn serve_io<R, W>(
    mount: impl Into<Mount>,
    read: R,
    write: W,
    tool_timeouts: &[(String, Duration)],
    shutdown: CancellationToken,
) -> Result<(), ServeError>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    serve_io_graceful(
        shared(mount.into(), tool_timeouts),
        read,
        write,
        shutdown,
        Duration::ZERO,
    )
    .await
    .map(drop)
}

async fn serve_io_graceful<R, W>(
    shared: Arc<Shared>,
    read: R,
    write: W,
    shutdown: CancellationToken,
    grace: Duration,
) -> Result<StdioEnd, ServeError>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    // On a task of the runtime, not in the caller's future: under `#[tokio::main]` that future runs on the
    // main thread, and every line the I/O driver (on a worker) saw ready cost a wake-up of that thread.
    tokio::spawn(stdio::serve(shared, read, write, shutdown, grace))
        .await
        .map_err(|e| ServeError::Session(format!("the stdio session ended abnormally: {e}")))?
}

/// Serves MCP over HTTP on an already-bound listener (tests bind `127.0.0.1:0`).
pub async fn serve_http(
    mount: impl Into<Mount>,
    listener: TcpListener,
    options: HttpOptions,
    tool_timeouts: &[(String, Duration)],
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    http::serve(
        shared(mount.into(), tool_timeouts),
        listener,
        options,
        shutdown,
    )
    .await
}

/// Serves one bridge or several as the user configured it: binds, warns about risky settings, serves until
/// `shutdown`, then lets calls in flight finish within `--shutdown-grace` before it returns.
pub async fn run_mount(
    mount: impl Into<Mount>,
    args: &McpArgs,
    default: Transport,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let mount = mount.into();
    let transport = args.transport(default);
    if transport != Transport::Stdio {
        args.check_exposure()
            .map_err(|e| ServeError::Access(e.to_string()))?;
    }
    if args.mcp_token.is_some() && token_on_the_command_line() {
        tracing::warn!(
            "--mcp-token is on the command line, which every local user can read in the process list; set \
             MCP_TOKEN instead"
        );
    }
    let with_token;
    let args = match transport == Transport::Both && args.transport_is_default() {
        true if args.mcp_token.is_none() && launched_over_stdio() => {
            with_token = beside_stdio_with_a_token(args);
            &with_token
        }
        _ => args,
    };
    match transport {
        Transport::Stdio => {
            tracing::info!(server = mount.server_name(), "serving MCP on stdio");
            run_stdio(shared(mount, &args.tool_timeouts), args, shutdown)
                .await
                .map(drop)
        }
        Transport::Http => {
            let listener = bind_http(&mount, args).await?;
            let shared = shared(mount, &args.tool_timeouts);
            http::serve(shared, listener, http_options(args), shutdown).await
        }
        Transport::Both => run_both(mount, args, shutdown).await,
    }
}

async fn run_stdio(
    shared: Arc<Shared>,
    args: &McpArgs,
    shutdown: CancellationToken,
) -> Result<StdioEnd, ServeError> {
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    serve_io_graceful(shared, stdin, stdout, shutdown, args.shutdown_grace).await
}

/// Whether stdin is a pipe or a socket, as an MCP host launching the bridge gives it: the user then asked for
/// stdio and may not know a port opened too. A terminal or /dev/null is a bridge run on its own, whose HTTP
/// the user points a client at.
fn launched_over_stdio() -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::FileTypeExt;
    let Ok(stdin) = std::io::stdin().as_fd().try_clone_to_owned() else {
        return false;
    };
    std::fs::File::from(stdin)
        .metadata()
        .is_ok_and(|m| m.file_type().is_fifo() || m.file_type().is_socket())
}

fn token_on_the_command_line() -> bool {
    std::env::args_os().any(|arg| {
        let arg = arg.as_encoded_bytes();
        arg == b"--mcp-token" || arg.starts_with(b"--mcp-token=")
    })
}

/// The HTTP a bridge opens beside stdio by default when an MCP host launched it, with a token made for this
/// run: every local user can reach a loopback port, and the stdio client's bridge (its sandboxes, its
/// computers) must not be theirs. The user asked for no port, so the token is said once on stderr, which only
/// they (or their MCP host's log) read; a port opened on purpose (`--http`, `MCP_TRANSPORT`), or by a bridge
/// run on its own from a terminal or a service, keeps the user's own choice.
fn beside_stdio_with_a_token(args: &McpArgs) -> McpArgs {
    let token = format!("{:032x}", rand::random::<u128>());
    tracing::warn!(
        "HTTP opens beside stdio, where any local user could reach it, so it asks for a token made for this run: \
         `Authorization: Bearer {token}`. Set MCP_TOKEN to choose one, or pass --stdio to open no port."
    );
    let mut args = args.clone();
    args.mcp_token = Some(token);
    args
}

/// Stdio and HTTP over the same bridges and one set of metrics; each transport keeps its own drain, because
/// stdio counts a call until its answer is flushed and HTTP until its body is sent.
async fn run_both(
    mount: Mount,
    args: &McpArgs,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let listener = match bind_http(&mount, args).await {
        Ok(listener) => listener,
        // A busy or forbidden port must not take stdio down with it: a host that launched us over a pipe is
        // served, and the log says HTTP is not listening. Only if nobody is on stdio either does it fail.
        Err(bind) => {
            tracing::warn!("{bind} HTTP is NOT listening; serving MCP on stdio only");
            let over_stdio = shared(mount, &args.tool_timeouts);
            return match run_stdio(over_stdio, args, shutdown).await? {
                StdioEnd::NoClient => Err(bind),
                StdioEnd::ClientLeft | StdioEnd::Shutdown => Ok(()),
            };
        }
    };
    tracing::info!(server = mount.server_name(), "serving MCP on stdio too");
    let metrics = Arc::new(metrics::Metrics::new());
    let over_http = shared_counting(mount.clone(), &args.tool_timeouts, metrics.clone());
    let over_stdio = shared_counting(mount, &args.tool_timeouts, metrics);
    let http = http::serve(over_http, listener, http_options(args), shutdown.clone());
    tokio::pin!(http);
    let stdio = run_stdio(over_stdio, args, shutdown.clone());
    tokio::pin!(stdio);
    tokio::select! {
        served = &mut http => {
            // HTTP failed or shut down: stop stdio as well and report HTTP's outcome.
            shutdown.cancel();
            let _ = stdio.await;
            served
        }
        ended = &mut stdio => {
            match ended {
                Ok(StdioEnd::NoClient) => {
                    tracing::info!("stdin closed without an MCP client; serving HTTP only");
                }
                Ok(StdioEnd::ClientLeft) => {
                    // The process that launched us over stdio is gone: do not outlive it.
                    tracing::info!("the stdio client left; shutting down HTTP too");
                    shutdown.cancel();
                }
                Ok(StdioEnd::Shutdown) => {}
                Err(e) => {
                    tracing::error!("stdio transport failed: {e}; shutting down HTTP too");
                    shutdown.cancel();
                }
            }
            http.await
        }
    }
}

async fn bind_http(mount: &Mount, args: &McpArgs) -> Result<TcpListener, ServeError> {
    let addr = SocketAddr::new(args.mcp_host, args.mcp_port);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let local = listener.local_addr()?;
    tracing::info!(
        server = mount.server_name(),
        "serving MCP at http://{local}/mcp (health: http://{local}/health)"
    );
    Ok(listener)
}

fn http_options(args: &McpArgs) -> HttpOptions {
    HttpOptions {
        token: args.mcp_token.clone(),
        extra_origins: args.allowed_origins.clone(),
        extra_hosts: args.allowed_hosts.clone(),
        shutdown_grace: args.shutdown_grace,
        max_sessions: args.max_sessions,
        session_idle: args.session_idle,
        max_request_bytes: args.max_request_bytes,
        max_pending_request_bytes: args.max_pending_request_bytes,
        limits: crate::net::ListenLimits {
            max_connections: args.max_connections,
            max_per_ip: args.max_connections_per_ip,
            handshake_timeout: args.handshake_timeout,
            idle_timeout: args.idle_timeout,
        },
        body_timeout: HttpOptions::DEFAULT_BODY_TIMEOUT,
        paths: RequestPaths::Front,
    }
}

/// The `main` of a program that serves one bridge, after argument parsing: serves until SIGINT/SIGTERM and
/// turns a failure into a logged message and a failing exit code.
pub async fn serve_until_signal(
    bridge: Result<Bridge, crate::bridge::BuildError>,
    args: &McpArgs,
    default: Transport,
) -> std::process::ExitCode {
    let served = run_until_signal(args, default, |_| async move { Ok(Mount::from(bridge?)) }).await;
    match served {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// How long the bridges' tasks may take to end after their links were told to close.
const TASK_JOIN_LIMIT: Duration = Duration::from_secs(10);
/// A closed link's writer gives up on its goodbye after 2 s (`link::session`); a little more for scheduling.
const GOODBYE_LIMIT: Duration = Duration::from_secs(3);

/// The whole life of a server: `start` the bridges with a fresh [`BridgeEnv`], serve them until SIGINT/SIGTERM
/// (or the stdio client leaves), let calls in flight finish, then close the bridges' links and join their tasks.
pub async fn run_until_signal<F, Fut>(
    args: &McpArgs,
    default: Transport,
    start: F,
) -> Result<(), BridgeError>
where
    F: FnOnce(BridgeEnv) -> Fut,
    Fut: std::future::Future<Output = Result<Mount, BridgeError>>,
{
    let env = BridgeEnv::new();
    cancel_on_signals(env.shutdown().clone());
    let served = async {
        let mount = start(env.clone()).await?;
        run_mount(mount, args, default, env.shutdown().clone()).await?;
        Ok::<(), BridgeError>(())
    }
    .await;
    // Only now, with no call in flight, may the links to live systems go.
    env.close(TASK_JOIN_LIMIT).await;
    // Their writers are nobody's tasks: wait for their close frames, or the peers see resets.
    if !crate::link::writers_finished(GOODBYE_LIMIT).await {
        tracing::warn!(
            "some links had not said goodbye {} ms after closing; exiting anyway",
            GOODBYE_LIMIT.as_millis()
        );
    }
    served
}

/// `B` served alone: what its subcommand does without a sub-subcommand.
pub async fn run_alone<B: BridgeEntry>(args: &McpArgs, own: B::Args) -> Result<(), BridgeError> {
    run_until_signal(args, B::DEFAULT_TRANSPORT, |env| async move {
        Ok(Mount::from(B::start(own, &env).await?))
    })
    .await
}

/// Cancels `token` on SIGINT or SIGTERM: the one signal path of every command. The handlers are installed
/// before this returns, not in the task it spawns: a signal that came before that task first ran used to
/// kill the process (the default action) instead of shutting it down.
pub fn cancel_on_signals(token: CancellationToken) {
    let signals = Signals::install();
    tokio::spawn(async move {
        tokio::select! {
            () = signals.wait() => {
                tracing::info!("shutting down: no new requests; letting in-flight calls finish");
                token.cancel();
            }
            () = token.cancelled() => {}
        }
    });
}

/// A token cancelled on SIGINT or SIGTERM.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    cancel_on_signals(token.clone());
    token
}

/// SIGTERM and SIGINT, caught from the moment [`Signals::install`] returns.
#[cfg(unix)]
struct Signals {
    term: Option<tokio::signal::unix::Signal>,
    int: Option<tokio::signal::unix::Signal>,
}

#[cfg(unix)]
impl Signals {
    fn install() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        let watch = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(signal) => Some(signal),
            Err(e) => {
                tracing::warn!("cannot watch {name} ({e}); it will not stop the bridge gracefully");
                None
            }
        };
        Self {
            term: watch(SignalKind::terminate(), "SIGTERM"),
            int: watch(SignalKind::interrupt(), "SIGINT"),
        }
    }

    async fn wait(mut self) {
        async fn one(signal: Option<&mut tokio::signal::unix::Signal>) {
            match signal {
                Some(signal) => {
                    signal.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = one(self.term.as_mut()) => {}
            () = one(self.int.as_mut()) => {}
        }
    }
}

#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn install() -> Self {
        Self
    }

    async fn wait(self) {
        let _ = tokio::signal::ctrl_c().await;
    }
}
