//! MCP client helpers shared by the workspace's tests, so each bridge's tests say what they check, not how
//! to drive a client. Test-only code: failures panic with a message saying what was expected.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod cargo;
pub mod net;

use bridge_core::Mount;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
    ProgressNotificationParam, ProtocolVersion, ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, Peer, RoleClient};
use serde_json::Value;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The two protocol eras every transport must serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// `initialize` handshake, 2025-11-25.
    Legacy,
    /// Stateless, 2026-07-28.
    Modern,
}

pub const ERAS: [Era; 2] = [Era::Legacy, Era::Modern];

pub fn lifecycle(era: Era) -> ClientLifecycleMode {
    match era {
        Era::Legacy => ClientLifecycleMode::Initialize,
        Era::Modern => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    }
}

/// A client handler that forwards `resources/updated` and progress notifications to channels.
#[derive(Clone)]
pub struct Recorder {
    updates: mpsc::UnboundedSender<String>,
    progress: mpsc::UnboundedSender<f64>,
    capabilities: ClientCapabilities,
}

impl ClientHandler for Recorder {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let _ = self.updates.send(params.uri);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let _ = self.progress.send(params.progress);
    }

    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::default();
        config.capabilities = self.capabilities.clone();
        config
    }
}

/// A connected MCP client and what the server pushed to it.
pub struct Client {
    pub service: RunningService<RoleClient, Recorder>,
    /// URIs from `notifications/resources/updated`.
    pub updates: mpsc::UnboundedReceiver<String>,
    /// Values from `notifications/progress`.
    pub progress: mpsc::UnboundedReceiver<f64>,
}

impl std::ops::Deref for Client {
    type Target = RunningService<RoleClient, Recorder>;

    fn deref(&self) -> &Self::Target {
        &self.service
    }
}

fn recorder(
    capabilities: ClientCapabilities,
) -> (
    Recorder,
    mpsc::UnboundedReceiver<String>,
    mpsc::UnboundedReceiver<f64>,
) {
    let (updates_tx, updates) = mpsc::unbounded_channel();
    let (progress_tx, progress) = mpsc::unbounded_channel();
    (
        Recorder {
            updates: updates_tx,
            progress: progress_tx,
            capabilities,
        },
        updates,
        progress,
    )
}

/// Connects to `http://addr/mcp` in the given era.
pub async fn http_client(addr: SocketAddr, era: Era) -> Client {
    let (handler, updates, progress) = recorder(ClientCapabilities::default());
    // reqwest's default honours HTTP_PROXY and friends: a developer's proxy must not sit between a test and
    // the server it started on loopback.
    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let transport = StreamableHttpClientTransport::with_client(
        http,
        StreamableHttpClientTransportConfig::with_uri(format!("http://{addr}/mcp")),
    );
    let service = handler
        .serve_with_lifecycle(transport, lifecycle(era))
        .await
        .unwrap();
    Client {
        service,
        updates,
        progress,
    }
}

/// Serves `bridge` over the stdio framing through an in-memory pipe and connects to it: the stdio transport
/// without a child process.
pub async fn pipe_client(
    bridge: impl Into<Mount>,
    era: Era,
    tool_timeouts: Vec<(String, Duration)>,
) -> Client {
    pipe_client_declaring(bridge, era, tool_timeouts, ClientCapabilities::default()).await
}

/// [`pipe_client`] for a client that declares `capabilities` (at `initialize`, or in each request's `_meta`).
pub async fn pipe_client_declaring(
    bridge: impl Into<Mount>,
    era: Era,
    tool_timeouts: Vec<(String, Duration)>,
    capabilities: ClientCapabilities,
) -> Client {
    let mount = bridge.into();
    let (client_io, server_io) = tokio::io::duplex(1 << 22);
    let (server_read, server_write) = tokio::io::split(server_io);
    tokio::spawn(async move {
        let _ = bridge_core::serve::serve_io(
            mount,
            server_read,
            server_write,
            &tool_timeouts,
            CancellationToken::new(),
        )
        .await;
    });
    let (handler, updates, progress) = recorder(capabilities);
    let service = handler
        .serve_with_lifecycle(tokio::io::split(client_io), lifecycle(era))
        .await
        .unwrap();
    Client {
        service,
        updates,
        progress,
    }
}

/// Calls `tool` with `args` (a JSON object); panics on a protocol error or after 60 s. Takes any client
/// (`&Client`, `&RunningService`) through deref.
pub async fn call(client: &Peer<RoleClient>, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be a JSON object, got {args}")
    };
    within(
        tool,
        client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args)),
    )
    .await
    .unwrap_or_else(|e| panic!("{tool}: protocol error {e}"))
}

/// Sends a call of `tool` with `args` (a JSON object) and returns at once with its handle, which can cancel
/// it (`notifications/cancelled`) or await its answer; for tests of cancellation.
pub async fn start_call(
    client: &Peer<RoleClient>,
    tool: &str,
    args: Value,
) -> rmcp::service::RequestHandle<RoleClient> {
    let Value::Object(args) = args else {
        panic!("arguments must be a JSON object, got {args}")
    };
    let request = rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
        CallToolRequestParams::new(tool.to_owned()).with_arguments(args),
    ));
    client
        .send_cancellable_request(request, rmcp::service::PeerRequestOptions::no_options())
        .await
        .unwrap_or_else(|e| panic!("{tool}: the request could not be sent: {e}"))
}

/// `structuredContent` of a successful call.
pub fn ok_of(result: &CallToolResult) -> Value {
    assert_ne!(
        result.is_error,
        Some(true),
        "expected success, got {result:?}"
    );
    result
        .structured_content
        .clone()
        .expect("structuredContent")
}

/// `{code, message, hint, details}` of a failed call, from the result's `_meta`. Also checks what every client
/// relies on: no `structuredContent` (clients validate it against the tool's output schema) and the text
/// `[CODE] message — hint` carrying the same code and hint.
pub fn error_of(result: &CallToolResult) -> Value {
    assert_eq!(
        result.is_error,
        Some(true),
        "expected a tool error, got {result:?}"
    );
    assert_eq!(
        result.structured_content, None,
        "error results must not carry structuredContent"
    );
    let error = result
        .meta
        .as_ref()
        .and_then(|meta| meta.0.get(bridge_core::error::ERROR_META_KEY))
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "error results carry _meta[{}]: {result:?}",
                bridge_core::error::ERROR_META_KEY
            )
        });
    let text = text_of(result);
    let code = error["code"].as_str().expect("a string code");
    let hint = error["hint"].as_str().expect("a string hint");
    assert!(
        text.starts_with(&format!("[{code}] ")) && text.ends_with(&format!(" — {hint}")),
        "the text {text:?} must read `[{code}] message — {hint}`"
    );
    error
}

/// The text blocks of a result, joined by newlines.
pub fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Awaits `fut`, panicking with `what` after 60 s: a hung test names what it was waiting for. Generous,
/// because CI machines are shared and slow; tests never assert speed.
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// A minimal HTTP/1.0 GET on loopback, returning the body: enough for `/health` and served files, with no HTTP
/// client crate in the way of what the server really sent.
pub async fn http_get(url: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (host, path) = rest.split_at(rest.find('/').expect("a path after the host"));
    let mut tcp = tokio::net::TcpStream::connect(host).await.unwrap();
    tcp.write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut raw = String::new();
    tcp.read_to_string(&mut raw).await.unwrap();
    raw.split_once("\r\n\r\n")
        .expect("an HTTP response")
        .1
        .to_string()
}

/// A slow-loris client: sends `head` one byte at a time, forever (cycling), until the server closes the
/// connection. The pace is far inside any idle timeout, so only a deadline that bytes do not extend ends it.
pub fn slow_loris(addr: SocketAddr, head: &'static [u8]) -> tokio::task::JoinHandle<()> {
    use tokio::io::AsyncWriteExt;
    tokio::spawn(async move {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        for byte in head.iter().cycle() {
            if stream.write_all(&[*byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
}

/// `n` connections to `addr` that never send a byte.
pub async fn idle_connections(addr: SocketAddr, n: usize) -> Vec<tokio::net::TcpStream> {
    let mut idle = Vec::with_capacity(n);
    for _ in 0..n {
        idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    idle
}

/// Everything a server sends on `stream` until it closes the connection (EOF or reset).
pub async fn until_closed(mut stream: tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&got).into_owned(),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// The status code of a raw HTTP/1 response (0 when there is none).
pub fn status_of(response: &str) -> u16 {
    response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}
