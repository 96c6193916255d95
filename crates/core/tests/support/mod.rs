//! A small bridge with one tool per core behaviour, and clients for both protocol eras on both transports.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use bridge_core::events::EventStream;
use bridge_core::serve::{HttpOptions, serve_http, serve_io};
use bridge_core::{Bridge, NoArgs, ToolCtx, ToolError, ToolSpec, Validate, check};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ProgressNotificationParam,
    ProtocolVersion, ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EchoArgs {
    pub text: String,
}
impl Validate for EchoArgs {}

#[derive(Serialize, JsonSchema)]
pub struct EchoOut {
    pub text: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddArgs {
    pub a: i64,
    pub b: i64,
}
impl Validate for AddArgs {}

#[derive(Serialize, JsonSchema)]
pub struct Sum {
    pub sum: i64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PutArgs {
    pub name: String,
    pub content: String,
}
impl Validate for PutArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::non_empty("name", &self.name)?;
        check::max_bytes("content", &self.content, 16)
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SleepArgs {
    pub ms: u64,
}
impl Validate for SleepArgs {}

#[derive(Serialize, JsonSchema)]
pub struct Done {
    pub done: bool,
}

/// What the test bridge saw, so tests can assert effects on the server side.
#[derive(Clone)]
pub struct Probe {
    /// Every `put` that reached its handler (validation failures must not).
    pub puts: mpsc::UnboundedSender<String>,
    /// Sent when a `sleep` call is stopped before it finishes.
    pub cancelled: mpsc::UnboundedSender<()>,
}

pub struct TestBridge {
    pub bridge: Bridge,
    pub chat: EventStream,
    pub puts: mpsc::UnboundedReceiver<String>,
    pub cancelled: mpsc::UnboundedReceiver<()>,
}

pub fn test_bridge() -> TestBridge {
    let (puts_tx, puts) = mpsc::unbounded_channel();
    let (cancelled_tx, cancelled) = mpsc::unbounded_channel();
    let probe = Probe {
        puts: puts_tx,
        cancelled: cancelled_tx,
    };
    let mut b = Bridge::builder("test", "1.2.3");
    let chat = b.events().stream("chat", "chat lines", 4);
    b.tool(
        ToolSpec::new("echo", "Echo text back.")
            .read_only()
            .handler(|args: EchoArgs, _: ToolCtx| async move { Ok(EchoOut { text: args.text }) }),
    );
    b.tool(
        ToolSpec::new("add", "Add two integers.")
            .read_only()
            .handler(|args: AddArgs, _: ToolCtx| async move {
                Ok(Sum {
                    sum: args.a + args.b,
                })
            }),
    );
    let p = probe.clone();
    b.tool(
        ToolSpec::new("put", "Store content under a name.")
            .destructive()
            .handler(move |args: PutArgs, _: ToolCtx| {
                let p = p.clone();
                async move {
                    let _ = p.puts.send(args.name);
                    Ok(Done { done: true })
                }
            }),
    );
    b.tool(
        ToolSpec::new("fail", "Always fails like a live system would.").handler(
            |_: NoArgs, _: ToolCtx| async move {
                Err::<Done, _>(ToolError::remote("game said no").with_hint("ask the game nicely"))
            },
        ),
    );
    let p = probe.clone();
    b.tool(
        ToolSpec::new("sleep", "Sleep, reporting progress every 50 ms.")
            .timeout(Duration::from_millis(400))
            .handler(move |args: SleepArgs, ctx: ToolCtx| {
                let p = p.clone();
                async move {
                    // The core stops a handler by dropping its future; the guard reports that.
                    let mut guard = StopGuard(Some(p.cancelled.clone()));
                    let steps = args.ms / 50;
                    for step in 0..steps {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        ctx.progress(
                            (step + 1) as f64,
                            Some(steps as f64),
                            format!("step {}", step + 1),
                        )
                        .await;
                    }
                    guard.0 = None;
                    Ok(Done { done: true })
                }
            }),
    );
    let chat_for_tool = chat.clone();
    b.tool(ToolSpec::new("say", "Publish a chat event.").handler(
        move |args: EchoArgs, _: ToolCtx| {
            let chat = chat_for_tool.clone();
            async move {
                chat.publish(json!({ "text": args.text }));
                Ok(Done { done: true })
            }
        },
    ));
    b.health(|| json!({ "game_connected": false }));
    TestBridge {
        bridge: b.build().unwrap(),
        chat,
        puts,
        cancelled,
    }
}

/// Reports on drop unless disarmed: proof that a handler was stopped before it finished.
struct StopGuard(Option<mpsc::UnboundedSender<()>>);

impl Drop for StopGuard {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// A client handler that forwards notifications to channels.
#[derive(Clone)]
pub struct Recorder {
    pub updates: mpsc::UnboundedSender<String>,
    pub progress: mpsc::UnboundedSender<f64>,
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
        ClientConfig::default()
    }
}

pub struct Client {
    pub service: RunningService<RoleClient, Recorder>,
    pub updates: mpsc::UnboundedReceiver<String>,
    pub progress: mpsc::UnboundedReceiver<f64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// `initialize` handshake, 2025-11-25.
    Legacy,
    /// Stateless, 2026-07-28.
    Modern,
}

pub const ERAS: [Era; 2] = [Era::Legacy, Era::Modern];

fn lifecycle(era: Era) -> ClientLifecycleMode {
    match era {
        Era::Legacy => ClientLifecycleMode::Initialize,
        Era::Modern => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    }
}

fn recorder() -> (
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
        },
        updates,
        progress,
    )
}

pub struct HttpServer {
    pub addr: SocketAddr,
    pub shutdown: CancellationToken,
    pub task: tokio::task::JoinHandle<Result<(), bridge_core::serve::ServeError>>,
}

pub async fn start_http(
    bridge: Bridge,
    options: HttpOptions,
    timeouts: Vec<(String, Duration)>,
) -> HttpServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let task =
        tokio::spawn(async move { serve_http(bridge, listener, options, &timeouts, token).await });
    HttpServer {
        addr,
        shutdown,
        task,
    }
}

pub async fn http_client(addr: SocketAddr, era: Era) -> Client {
    let (handler, updates, progress) = recorder();
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
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

/// The stdio transport over an in-memory pipe: the same framing as a child process, without one.
pub async fn stdio_client(bridge: Bridge, era: Era, timeouts: Vec<(String, Duration)>) -> Client {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server_io);
    tokio::spawn(async move {
        let _ = serve_io(
            bridge,
            server_read,
            server_write,
            &timeouts,
            CancellationToken::new(),
        )
        .await;
    });
    let (handler, updates, progress) = recorder();
    let (client_read, client_write) = tokio::io::split(client_io);
    let service = handler
        .serve_with_lifecycle((client_read, client_write), lifecycle(era))
        .await
        .unwrap();
    Client {
        service,
        updates,
        progress,
    }
}

pub async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .service
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap()
}

/// The `{code, message, hint, details}` of an error result; panics if the call succeeded.
pub fn error_of(result: &CallToolResult) -> Value {
    assert_eq!(
        result.is_error,
        Some(true),
        "expected a tool error, got {result:?}"
    );
    result
        .structured_content
        .clone()
        .expect("error results carry structuredContent")
}

pub fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

pub async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

pub fn arc<T>(t: T) -> Arc<T> {
    Arc::new(t)
}
