//! A small bridge with one tool per core behaviour, and clients for both protocol eras on both transports.
// Each test file compiles this module on its own and uses a part of it.
#![allow(dead_code, unused_imports, clippy::unwrap_used, clippy::expect_used)]

use bridge_core::events::EventStream;
use bridge_core::serve::{HttpOptions, serve_http};
use bridge_core::{Bridge, NoArgs, ToolCtx, ToolError, ToolSpec, Validate, check};
pub use mcp_testkit::{Client, ERAS, Era, call, error_of, http_client, text_of, within};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::net::SocketAddr;
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

/// `echo`: answers its `text`.
pub fn echo_tool() -> ToolSpec {
    ToolSpec::new("echo", "Echo text back.")
        .read_only()
        .handler(|args: EchoArgs, _: ToolCtx| async move { Ok(EchoOut { text: args.text }) })
}

/// `add`: answers the sum of `a` and `b`.
pub fn add_tool() -> ToolSpec {
    ToolSpec::new("add", "Add two integers.")
        .read_only()
        .handler(|args: AddArgs, _: ToolCtx| async move {
            Ok(Sum {
                sum: args.a + args.b,
            })
        })
}

/// `fail`: always a remote error with a hint.
pub fn fail_tool() -> ToolSpec {
    ToolSpec::new("fail", "Always fails like a live system would.").handler(
        |_: NoArgs, _: ToolCtx| async move {
            Err::<Done, _>(ToolError::remote("game said no").with_hint("ask the game nicely"))
        },
    )
}

/// `boom`: panics, as the bug issue 8 found: `String::truncate` at byte 201, inside an `é`.
pub fn boom_tool() -> ToolSpec {
    ToolSpec::new("boom", "Cuts a reply at byte 201, inside an `é`.").handler(
        |_: NoArgs, _: ToolCtx| async move {
            let mut reply = "é".repeat(150);
            reply.truncate(201);
            Ok(json!({ "reply": reply }))
        },
    )
}

/// `steps` reports progress twice, then answers; `nap` and `late_boom` wait on a timer first, so neither is
/// answered on its first poll (then answer, or panic); `later` and `only_task` run as tasks for clients that
/// declare tasks (optionally, or only so). The HTTP byte-for-byte tables call them on every path.
pub fn progress_wait_and_task_tools() -> Vec<ToolSpec> {
    use bridge_core::tool::TaskSupport;
    let mut tools = vec![
        ToolSpec::new("steps", "Reports progress twice, then answers.").handler(
            |_: NoArgs, ctx: ToolCtx| async move {
                for step in 1..=2 {
                    tokio::task::yield_now().await;
                    ctx.progress(f64::from(step), Some(2.0), format!("step {step}"))
                        .await;
                }
                Ok(json!({ "steps": 2 }))
            },
        ),
        ToolSpec::new("nap", "Sleeps a moment, then answers.").handler(
            |_: NoArgs, _: ToolCtx| async move {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                Ok(json!({ "slept": true }))
            },
        ),
        ToolSpec::new("late_boom", "Sleeps a moment, then panics.").handler(
            |_: NoArgs, _: ToolCtx| async move {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                if std::hint::black_box(true) {
                    panic!("late boom");
                }
                Ok(json!({}))
            },
        ),
    ];
    for (name, support) in [
        ("later", TaskSupport::Optional),
        ("only_task", TaskSupport::Required),
    ] {
        tools.push(
            ToolSpec::new(name, "Runs as a task for clients that declare tasks.")
                .task_support(support)
                .handler(|_: NoArgs, _: ToolCtx| async move { Ok(json!({ "done": true })) }),
        );
    }
    tools
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
    b.tool(echo_tool());
    b.tool(add_tool());
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
    b.tool(fail_tool());
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

/// [`start_http`] with rmcp's service answering every request (`RequestPaths::RmcpOnly`): what the front paths are
/// compared with.
pub async fn start_http_rmcp_only(
    bridge: Bridge,
    options: HttpOptions,
    timeouts: Vec<(String, Duration)>,
) -> HttpServer {
    let options = HttpOptions {
        paths: bridge_core::serve::RequestPaths::RmcpOnly,
        ..options
    };
    start_http(bridge, options, timeouts).await
}

/// One raw HTTP/1.1 exchange, so headers are exactly what the test says. Returns (status, body).
pub async fn raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let reply = raw_exchange(addr, method, path, headers, body).await;
    (reply.status, reply.body)
}

/// What a raw exchange got back.
pub struct RawReply {
    pub status: u16,
    /// The status line and headers, as sent.
    pub head: String,
    pub body: String,
}

impl RawReply {
    /// A whole response as read off the socket: status line and headers, then the body.
    pub fn parse(response: &[u8]) -> Self {
        let text = String::from_utf8_lossy(response).to_string();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        Self {
            status,
            head: head.to_owned(),
            body: body.to_owned(),
        }
    }

    /// A response header's value (names compare case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    /// The body as JSON: the body itself, or the data of its first SSE event.
    pub fn json(&self) -> serde_json::Value {
        let text = self
            .body
            .lines()
            .find_map(|l| {
                l.strip_prefix("data:")
                    .map(str::trim)
                    .filter(|d| !d.is_empty())
            })
            .unwrap_or(self.body.trim());
        serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

pub async fn raw_exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: impl AsRef<[u8]>,
) -> RawReply {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = body.as_ref();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    let mut request = request.into_bytes();
    request.extend_from_slice(body);
    stream.write_all(&request).await.unwrap();
    let mut response = Vec::new();
    within("an HTTP response", stream.read_to_end(&mut response))
        .await
        .unwrap();
    RawReply::parse(&response)
}

/// The stdio transport over an in-memory pipe.
pub async fn stdio_client(bridge: Bridge, era: Era, timeouts: Vec<(String, Duration)>) -> Client {
    mcp_testkit::pipe_client(bridge, era, timeouts).await
}

/// The value of one series (exact name and labels) in a `/metrics` page.
pub fn series_value(metrics: &str, series: &str) -> f64 {
    let prefix = format!("{series} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
        .trim()
        .parse()
        .unwrap()
}
