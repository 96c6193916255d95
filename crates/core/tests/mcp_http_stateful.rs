//! The legacy era over HTTP (protocol versions before 2026-07-28: `initialize`, `Mcp-Session-Id`, SSE replies)
//! answers byte for byte as rmcp's `StreamableHttpService` with its `LocalSessionManager` answers: one table of
//! requests, each sent in a session of a server with our front (fast path on, the default) and in a session of
//! a server with every request going to rmcp's service, status, content type and the de-chunked body compared
//! byte for byte, SSE event ids (`<index>/<request number>`), the `retry:` priming event and progress
//! notifications on the request's own stream included. The front must leave this era to rmcp until it answers
//! it itself; whatever answers it then (a session manager of ours, a front path) must pass this table
//! unchanged. Issue 25 item 4.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_core::serve::HttpOptions;
use bridge_core::{Bridge, NoArgs, ToolCtx, ToolSpec};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use support::*;
use tokio::sync::{Semaphore, mpsc};

const VERSION: &str = "2025-11-25";

/// `initialize` asking for protocol `version`.
fn init_asking(version: &str, capabilities: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{capabilities},"clientInfo":{{"name":"stateful","version":"1"}}}}}}"#
    )
}

fn call(id: Value, name: &str, arguments: Value) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{arguments}}}}}"#
    )
}

fn call_with_meta(id: Value, name: &str, arguments: Value, meta: Value) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{arguments},"_meta":{meta}}}}}"#
    )
}

fn request(id: Value, method: &str, params: Option<Value>) -> String {
    match params {
        Some(params) => {
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#)
        }
        None => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}"}}"#),
    }
}

/// What a row changes in the session's usual headers.
#[derive(Clone, Copy)]
enum Headers {
    Session,
    /// No `MCP-Protocol-Version` (a legacy client may leave it out).
    NoVersion,
    /// A version other than the session's.
    OtherVersion,
    /// An `Mcp-Session-Id` no server gave.
    UnknownSession,
    /// No `Mcp-Session-Id` at all.
    NoSession,
    /// `Accept` without `text/event-stream`.
    JsonOnly,
    /// A `Mcp-Method` header that contradicts the body.
    WrongMethodHeader,
}

struct Row {
    what: &'static str,
    headers: Headers,
    body: String,
}

fn row(what: &'static str, body: String) -> Row {
    Row {
        what,
        headers: Headers::Session,
        body,
    }
}

fn with(what: &'static str, headers: Headers, body: String) -> Row {
    Row {
        what,
        headers,
        body,
    }
}

fn table() -> Vec<Row> {
    let echo = || json!({"text": "hi"});
    vec![
        row("tools/list", request(json!(1), "tools/list", None)),
        row("tools/call echo", call(json!(2), "echo", echo())),
        row("tools/call, string id", call(json!("two"), "echo", echo())),
        row(
            "tools/call with a progress token (rmcp's client sends one on every request)",
            call_with_meta(json!(3), "echo", echo(), json!({"progressToken": 3})),
        ),
        row(
            "tools/call, string progress token",
            call_with_meta(
                json!(4),
                "add",
                json!({"a": 2, "b": 3}),
                json!({"progressToken": "p-4"}),
            ),
        ),
        row(
            "tools/call add",
            call(json!(5), "add", json!({"a": 2, "b": 3})),
        ),
        row(
            "tools/call, a tool error",
            call(json!(6), "fail", json!({})),
        ),
        row(
            "tools/call, a tool that panics",
            call(json!(7), "boom", json!({})),
        ),
        row(
            "tools/call reporting progress, on the request's stream",
            call_with_meta(json!(8), "steps", json!({}), json!({"progressToken": 8})),
        ),
        row(
            "tools/call reporting progress without a token",
            call(json!(9), "steps", json!({})),
        ),
        row(
            "tools/call that waits, then answers",
            call(json!(10), "nap", json!({})),
        ),
        row(
            "tools/call that waits, with a token",
            call_with_meta(json!(11), "nap", json!({}), json!({"progressToken": 11})),
        ),
        row(
            "tools/call that waits, then panics",
            call(json!(12), "late_boom", json!({})),
        ),
        row(
            "tools/call, unknown tool",
            call(json!(13), "nope", json!({})),
        ),
        row(
            "tools/call, missing argument",
            call(json!(14), "echo", json!({})),
        ),
        row(
            "tools/call, wrong argument type",
            call(json!(15), "echo", json!({"text": 5})),
        ),
        row(
            "tools/call, task-capable tool without tasks declared",
            call(json!(16), "later", json!({})),
        ),
        row(
            "tools/call, task-only tool without tasks declared",
            call(json!(17), "only_task", json!({})),
        ),
        row(
            "tools/call, log level in _meta",
            call_with_meta(
                json!(18),
                "echo",
                echo(),
                json!({"io.modelcontextprotocol/logLevel": "debug"}),
            ),
        ),
        row(
            "tools/call, unknown _meta key",
            call_with_meta(
                json!(19),
                "echo",
                echo(),
                json!({"x.example/other": [1, 2]}),
            ),
        ),
        row("resources/list", request(json!(20), "resources/list", None)),
        row(
            "resources/templates/list",
            request(json!(21), "resources/templates/list", None),
        ),
        row(
            "resources/read, unknown uri",
            request(
                json!(22),
                "resources/read",
                Some(json!({"uri": "test://nope"})),
            ),
        ),
        row("prompts/list", request(json!(23), "prompts/list", None)),
        row("ping", request(json!(24), "ping", None)),
        row(
            "logging/setLevel",
            request(
                json!(25),
                "logging/setLevel",
                Some(json!({"level": "debug"})),
            ),
        ),
        row(
            "tools/call after logging/setLevel",
            call(json!(26), "echo", echo()),
        ),
        row("unknown method", request(json!(27), "nope/nope", None)),
        row(
            "a notification",
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":999}}"#
                .to_owned(),
        ),
        row(
            "malformed JSON",
            r#"{"jsonrpc":"2.0","id":28,"method":"#.to_owned(),
        ),
        row("a batch", format!("[{}]", request(json!(29), "ping", None))),
        row(
            "a body with a BOM",
            format!("\u{feff}{}", call(json!(30), "echo", echo())),
        ),
        row(
            "params not an object",
            r#"{"jsonrpc":"2.0","id":31,"method":"tools/call","params":[1]}"#.to_owned(),
        ),
        with(
            "no MCP-Protocol-Version header",
            Headers::NoVersion,
            call(json!(32), "echo", echo()),
        ),
        with(
            "another MCP-Protocol-Version than the session's",
            Headers::OtherVersion,
            call(json!(33), "echo", echo()),
        ),
        with(
            "Accept without text/event-stream",
            Headers::JsonOnly,
            call(json!(34), "echo", echo()),
        ),
        with(
            "an Mcp-Method header that contradicts the body",
            Headers::WrongMethodHeader,
            call(json!(35), "echo", echo()),
        ),
        with(
            "an unknown session",
            Headers::UnknownSession,
            call(json!(36), "echo", echo()),
        ),
        with(
            "no session",
            Headers::NoSession,
            call(json!(37), "echo", echo()),
        ),
        row("the call after them all", call(json!(38), "echo", echo())),
    ]
}

/// The test bridge's tools: answered at once, failing, panicking, reporting progress, waiting, task-capable.
fn bridge() -> Bridge {
    held_bridge().0
}

/// What the `hold` tool of one server reports, and the gate that lets it answer.
struct Hold {
    heard: mpsc::UnboundedReceiver<&'static str>,
    gate: Arc<Semaphore>,
}

/// [`bridge`], and a handle on its `hold` tool: it reports progress once, then waits for a permit of the gate
/// (then answers) or for its cancellation (then reports it).
fn held_bridge() -> (Bridge, Hold) {
    let (events, heard) = mpsc::unbounded_channel::<&'static str>();
    let gate = Arc::new(Semaphore::new(0));
    let mut b = Bridge::builder("test", "1.2.3");
    let tool_gate = gate.clone();
    b.tool(
        ToolSpec::new("hold", "Reports progress, then waits for the test's gate.").handler(
            move |_: NoArgs, ctx: ToolCtx| {
                let events = events.clone();
                let gate = tool_gate.clone();
                async move {
                    ctx.progress(1.0, Some(2.0), "held").await;
                    let _ = events.send("started");
                    let cancelled = ctx.cancellation();
                    tokio::select! {
                        permit = gate.acquire() => {
                            permit.unwrap().forget();
                            Ok(json!({ "released": true }))
                        }
                        () = cancelled.cancelled() => {
                            let _ = events.send("cancelled");
                            Ok(json!({ "released": false }))
                        }
                    }
                }
            },
        ),
    );
    let _chat = b.events().stream("chat", "chat lines", 4);
    b.tool(echo_tool())
        .tool(add_tool())
        .tool(fail_tool())
        .tool(boom_tool());
    for tool in progress_wait_and_task_tools() {
        b.tool(tool);
    }
    (b.build().unwrap(), Hold { heard, gate })
}

/// A body sent with `Transfer-Encoding: chunked` put back together: where the chunks fall depends on when
/// the server flushed, not on what it said.
fn dechunked(reply: &RawReply) -> String {
    let chunked = reply
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    if !chunked {
        return reply.body.clone();
    }
    let mut rest = reply.body.as_str();
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        body.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
    body
}

/// Status, content type and the body exactly as sent.
fn exact(reply: &RawReply) -> (u16, Option<String>, String) {
    (
        reply.status,
        reply.header("content-type").map(str::to_owned),
        dechunked(reply),
    )
}

/// One legacy session on a server.
struct Session {
    addr: SocketAddr,
    id: String,
}

impl Session {
    async fn open(addr: SocketAddr, capabilities: &str) -> (Self, RawReply) {
        Self::open_asking(addr, VERSION, capabilities).await
    }

    /// A session whose client asked for protocol `version`; its requests name [`VERSION`], what the
    /// server answers.
    async fn open_asking(addr: SocketAddr, version: &str, capabilities: &str) -> (Self, RawReply) {
        let headers = [
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        let reply = raw_exchange(
            addr,
            "POST",
            "/mcp",
            &headers,
            &init_asking(version, capabilities),
        )
        .await;
        assert_eq!(reply.status, 200, "initialize: {}", reply.body);
        let id = reply.header("mcp-session-id").unwrap().to_owned();
        let session = Self { addr, id };
        let initialized = session
            .send(
                Headers::Session,
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            )
            .await;
        assert_eq!(initialized.status, 202, "{}", initialized.body);
        (session, reply)
    }

    async fn send(&self, headers: Headers, body: &str) -> RawReply {
        let mut list = vec![("Content-Type", "application/json")];
        list.push(match headers {
            Headers::JsonOnly => ("Accept", "application/json"),
            _ => ("Accept", "application/json, text/event-stream"),
        });
        match headers {
            Headers::NoVersion => {}
            Headers::OtherVersion => list.push(("MCP-Protocol-Version", "2025-06-18")),
            _ => list.push(("MCP-Protocol-Version", VERSION)),
        }
        match headers {
            Headers::NoSession => {}
            Headers::UnknownSession => list.push(("Mcp-Session-Id", "no-such-session")),
            _ => list.push(("Mcp-Session-Id", self.id.as_str())),
        }
        if let Headers::WrongMethodHeader = headers {
            list.push(("Mcp-Method", "tools/list"));
        }
        raw_exchange(self.addr, "POST", "/mcp", &list, body).await
    }

    async fn get(&self, last_event_id: &str) -> RawReply {
        let headers = [
            ("Accept", "text/event-stream"),
            ("MCP-Protocol-Version", VERSION),
            ("Mcp-Session-Id", self.id.as_str()),
            ("Last-Event-ID", last_event_id),
        ];
        raw_exchange(self.addr, "GET", "/mcp", &headers, "").await
    }

    async fn delete(&self) -> RawReply {
        let headers = [
            ("MCP-Protocol-Version", VERSION),
            ("Mcp-Session-Id", self.id.as_str()),
        ];
        raw_exchange(self.addr, "DELETE", "/mcp", &headers, "").await
    }
}

/// A POST whose reply is read as it comes.
struct Streaming {
    stream: tokio::net::TcpStream,
    read: Vec<u8>,
}

impl Streaming {
    async fn post(session: &Session, body: &str) -> Self {
        use tokio::io::AsyncWriteExt;
        let mut stream = tokio::net::TcpStream::connect(session.addr).await.unwrap();
        let request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {VERSION}\r\n\
             Mcp-Session-Id: {}\r\nContent-Length: {}\r\n\r\n{body}",
            session.addr,
            session.id,
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        Self {
            stream,
            read: Vec::new(),
        }
    }

    /// Reads until `needle` has arrived.
    async fn read_until(&mut self, needle: &str) {
        use tokio::io::AsyncReadExt;
        within(needle, async {
            while !String::from_utf8_lossy(&self.read).contains(needle) {
                let mut chunk = [0u8; 4096];
                let n = self.stream.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the stream ended before {needle}");
                self.read.extend_from_slice(&chunk[..n]);
            }
        })
        .await;
    }

    /// The rest, to the end of the reply.
    async fn finish(mut self) -> RawReply {
        use tokio::io::AsyncReadExt;
        self.stream.read_to_end(&mut self.read).await.unwrap();
        RawReply::parse(&self.read)
    }
}

async fn fast_answered(addr: SocketAddr) -> u64 {
    let (status, body) = raw(addr, "GET", "/metrics", &[], "").await;
    assert_eq!(status, 200, "{body}");
    body.lines()
        .find_map(|l| l.strip_prefix("mcp_http_fast_path_answered_total "))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// A server with every request going to rmcp's service, and one with our front.
async fn start_pair() -> (HttpServer, HttpServer) {
    let rmcp_only = start_http_rmcp_only(bridge(), HttpOptions::default(), vec![]).await;
    // rmcp's side: nothing is answered on our paths.
    assert_eq!(fast_answered(rmcp_only.addr).await, 0);
    let ours = start_http(bridge(), HttpOptions::default(), vec![]).await;
    (rmcp_only, ours)
}

async fn same_answers(capabilities: &str) {
    let (rmcp_only, ours) = start_pair().await;
    let (expected_session, expected) = Session::open(rmcp_only.addr, capabilities).await;
    let (got_session, got) = Session::open(ours.addr, capabilities).await;
    assert_eq!(exact(&got), exact(&expected), "initialize");
    let before = fast_answered(ours.addr).await;
    for row in table() {
        let expected = expected_session.send(row.headers, &row.body).await;
        let got = got_session.send(row.headers, &row.body).await;
        assert_eq!(
            exact(&got),
            exact(&expected),
            "{}: ours vs rmcp's\n{}\n{}",
            row.what,
            got.body,
            expected.body
        );
        if row.what.ends_with("on the request's stream") {
            let body = dechunked(&got);
            let events: Vec<Value> = body
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str(d.trim()).ok())
                .collect();
            assert_eq!(events.len(), 3, "two progress notes and the answer: {body}");
            assert_eq!(events[0]["params"]["progressToken"], 8, "{body}");
            assert!(body.contains("retry:"), "the priming event: {body}");
        }
    }
    // Resuming a request that has answered: rmcp keeps no cache of it.
    for last in ["1/1", "0/0", "1/999", "x"] {
        let expected = expected_session.get(last).await;
        let got = got_session.get(last).await;
        assert_eq!(
            exact(&got),
            exact(&expected),
            "GET with Last-Event-ID {last}"
        );
    }
    // Closed, the session answers nothing more.
    assert_eq!(
        exact(&got_session.delete().await),
        exact(&expected_session.delete().await)
    );
    let after = call(json!(40), "echo", json!({"text": "hi"}));
    assert_eq!(
        exact(&got_session.send(Headers::Session, &after).await),
        exact(&expected_session.send(Headers::Session, &after).await),
        "a request in a deleted session"
    );
    assert_eq!(
        fast_answered(ours.addr).await,
        before,
        "the stateless fast path leaves legacy sessions to rmcp"
    );
}

#[tokio::test]
async fn a_legacy_session_answers_as_rmcps_does() {
    same_answers("{}").await;
}

#[tokio::test]
async fn a_legacy_session_that_declared_tasks_answers_as_rmcps_does() {
    same_answers(r#"{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#).await;
}

/// On one server: a `hold` call in flight is resumed with `Last-Event-ID` (its answer then arrives on the new
/// stream, the old one ends), and a second is cancelled by `notifications/cancelled` (its stream ends with no
/// answer). Returns every reply, in order.
async fn in_flight(server: &HttpServer, hold: &mut Hold) -> Vec<(u16, Option<String>, String)> {
    let (session, _) = Session::open(server.addr, "{}").await;
    let session = Arc::new(session);
    let mut replies = Vec::new();
    // Request number 0 of the session, read as it comes: the client loses it once the progress note is in.
    let body = call_with_meta(json!(1), "hold", json!({}), json!({"progressToken": "h"}));
    let mut first = Streaming::post(&session, &body).await;
    first.read_until(r#""progressToken":"h""#).await;
    assert_eq!(
        within("hold to start", hold.heard.recv()).await,
        Some("started")
    );
    // The client lost the stream after the progress note: the priming event, the note and the answer come
    // again.
    let resumed = {
        let session = session.clone();
        tokio::spawn(async move { session.get("0/0").await })
    };
    let first = within("the first stream to end", first.finish()).await;
    replies.push(exact(&first));
    hold.gate.add_permits(1);
    replies.push(exact(&within("the resumed stream", resumed).await.unwrap()));
    // Request number 1: cancelled by the client.
    let body = call(json!(2), "hold", json!({}));
    let second = {
        let session = session.clone();
        tokio::spawn(async move { session.send(Headers::Session, &body).await })
    };
    assert_eq!(
        within("hold to start", hold.heard.recv()).await,
        Some("started")
    );
    let cancel = session
        .send(
            Headers::Session,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"no longer needed"}}"#,
        )
        .await;
    replies.push(exact(&cancel));
    assert_eq!(
        within("hold to be cancelled", hold.heard.recv()).await,
        Some("cancelled")
    );
    replies.push(exact(
        &within("the cancelled stream", second).await.unwrap(),
    ));
    // The session goes on.
    replies.push(exact(
        &session
            .send(
                Headers::Session,
                &call(json!(3), "echo", json!({"text": "after"})),
            )
            .await,
    ));
    replies
}

#[tokio::test]
async fn a_call_in_flight_resumes_and_cancels_as_rmcps_does() {
    let got = as_rmcp_answers(in_flight, 3, "two hold calls and the echo after").await;
    // What rmcp does, and what any other answer to this era must keep doing.
    let resumed = &got[1].2;
    assert!(
        resumed.contains(r#""progressToken":"h""#) && resumed.contains(r#""released":true"#),
        "the resumed stream replays the progress note and carries the answer: {resumed}"
    );
    assert!(
        !got[0].2.contains("released"),
        "the first stream ended: {}",
        got[0].2
    );
    assert!(
        !got[3].2.contains("released"),
        "a cancelled call is not answered: {}",
        got[3].2
    );
}

/// At shutdown a session's call in flight may finish within the grace; one still waiting when the grace ends
/// is cancelled, its stream ends, and the server stops: what rmcp's session does, and what any other answer
/// to this era must do.
#[tokio::test]
async fn a_legacy_call_still_waiting_when_the_grace_ends_is_cancelled() {
    let (bridge, mut hold) = held_bridge();
    let options = HttpOptions {
        shutdown_grace: std::time::Duration::from_millis(200),
        ..HttpOptions::default()
    };
    let server = start_http(bridge, options, vec![]).await;
    let (session, _) = Session::open(server.addr, "{}").await;
    let mut waiting = Streaming::post(&session, &call(json!(1), "hold", json!({}))).await;
    waiting.read_until("retry:").await;
    assert_eq!(
        within("hold to start", hold.heard.recv()).await,
        Some("started")
    );
    server.shutdown.cancel();
    assert_eq!(
        within("hold to be cancelled", hold.heard.recv()).await,
        Some("cancelled")
    );
    let reply = within("the stream to end", waiting.finish()).await;
    assert!(
        !dechunked(&reply).contains("released"),
        "no answer after the grace: {}",
        reply.body
    );
    within("the server to stop", server.task)
        .await
        .unwrap()
        .unwrap();
}

async fn legacy_answered(addr: SocketAddr) -> u64 {
    let (status, body) = raw(addr, "GET", "/metrics", &[], "").await;
    assert_eq!(status, 200, "{body}");
    body.lines()
        .find_map(|l| l.strip_prefix("mcp_http_legacy_front_answered_total "))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// The table's hot requests (`tools/call` of a tool that is not task-capable, `tools/list`, `ping`, with
/// the session's headers, before `logging/setLevel`) are answered by our legacy front, not by rmcp's service:
/// the byte-for-byte tables above then compare our answers with rmcp's.
#[tokio::test]
async fn the_legacy_front_answers_the_hot_requests_of_the_table() {
    let ours = start_http(bridge(), HttpOptions::default(), vec![]).await;
    let (session, _) = Session::open(ours.addr, "{}").await;
    assert_eq!(legacy_answered(ours.addr).await, 0, "initialize is rmcp's");
    let hot = [
        request(json!(1), "tools/list", None),
        call(json!(2), "echo", json!({"text": "hi"})),
        call_with_meta(json!(3), "steps", json!({}), json!({"progressToken": 3})),
        call(json!(4), "nap", json!({})),
        request(json!(5), "ping", None),
    ];
    for body in &hot {
        let reply = session.send(Headers::Session, body).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    assert_eq!(legacy_answered(ours.addr).await, hot.len() as u64);
    // Left to rmcp: a task-capable tool, other methods, other headers, and everything after a log level.
    let cold = [
        (Headers::Session, call(json!(6), "later", json!({}))),
        (Headers::Session, request(json!(7), "resources/list", None)),
        (
            Headers::NoVersion,
            call(json!(8), "echo", json!({"text": "hi"})),
        ),
        (
            Headers::OtherVersion,
            call(json!(9), "echo", json!({"text": "hi"})),
        ),
        (
            Headers::Session,
            request(
                json!(10),
                "logging/setLevel",
                Some(json!({"level": "debug"})),
            ),
        ),
        (
            Headers::Session,
            call(json!(11), "echo", json!({"text": "hi"})),
        ),
    ];
    for (headers, body) in &cold {
        session.send(*headers, body).await;
    }
    assert_eq!(legacy_answered(ours.addr).await, hot.len() as u64);
}

/// [`in_flight`] after a few requests our front answered and a `logging/setLevel` that sends the rest of the
/// session to rmcp: the request numbers in rmcp's event ids are ours (rmcp counted none of the front's), and
/// a `Last-Event-ID` naming ours finds rmcp's stream.
async fn in_flight_after_front(
    server: &HttpServer,
    hold: &mut Hold,
) -> Vec<(u16, Option<String>, String)> {
    let (session, _) = Session::open(server.addr, "{}").await;
    let mut replies = Vec::new();
    for body in [
        call(json!(1), "echo", json!({"text": "hi"})),
        request(json!(2), "tools/list", None),
        request(json!(3), "logging/setLevel", Some(json!({"level": "info"}))),
    ] {
        replies.push(exact(&session.send(Headers::Session, &body).await));
    }
    let session = Arc::new(session);
    let body = call_with_meta(json!(4), "hold", json!({}), json!({"progressToken": "h"}));
    let mut first = Streaming::post(&session, &body).await;
    first.read_until(r#""progressToken":"h""#).await;
    assert_eq!(
        within("hold to start", hold.heard.recv()).await,
        Some("started")
    );
    // Request number 3 of the session (0, 1 and 2 came first).
    let resumed = {
        let session = session.clone();
        tokio::spawn(async move { session.get("0/3").await })
    };
    let first = within("the first stream to end", first.finish()).await;
    replies.push(exact(&first));
    hold.gate.add_permits(1);
    replies.push(exact(&within("the resumed stream", resumed).await.unwrap()));
    replies.push(exact(&session.get("1/3").await));
    replies
}

/// Runs `scenario` on a server that leaves every request to rmcp and on ours, each with a held bridge of its
/// own; asserts the front answered `front_answered` of ours (`which`) and that every step's reply is rmcp's,
/// byte for byte. Returns our replies.
async fn as_rmcp_answers(
    scenario: impl AsyncFn(&HttpServer, &mut Hold) -> Vec<(u16, Option<String>, String)>,
    front_answered: u64,
    which: &str,
) -> Vec<(u16, Option<String>, String)> {
    let (bridge, mut rmcp_hold) = held_bridge();
    let rmcp_only = start_http_rmcp_only(bridge, HttpOptions::default(), vec![]).await;
    assert_eq!(fast_answered(rmcp_only.addr).await, 0);
    let (bridge, mut our_hold) = held_bridge();
    let ours = start_http(bridge, HttpOptions::default(), vec![]).await;
    let expected = scenario(&rmcp_only, &mut rmcp_hold).await;
    let got = scenario(&ours, &mut our_hold).await;
    assert_eq!(legacy_answered(ours.addr).await, front_answered, "{which}");
    for (step, (got, expected)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(got, expected, "step {step}: ours vs rmcp's");
    }
    assert_eq!(got.len(), expected.len());
    got
}

#[tokio::test]
async fn rmcps_streams_carry_the_sessions_request_numbers_after_front_answers() {
    let got = as_rmcp_answers(in_flight_after_front, 2, "echo and tools/list").await;
    let resumed = &got[4].2;
    assert!(
        resumed.contains("id: 1/3") && resumed.contains(r#""released":true"#),
        "the resumed stream is request 3's: {resumed}"
    );
}

/// On one server: a `hold` call cancelled by `notifications/cancelled`, then resumed with `Last-Event-ID`:
/// its kept events come again and the stream ends (rmcp keeps a cancelled request's events for a while);
/// an index past what is kept gets an empty stream.
async fn cancelled_then_resumed(
    server: &HttpServer,
    hold: &mut Hold,
) -> Vec<(u16, Option<String>, String)> {
    let (session, _) = Session::open(server.addr, "{}").await;
    let mut replies = Vec::new();
    let body = call_with_meta(json!(1), "hold", json!({}), json!({"progressToken": 7}));
    let mut first = Streaming::post(&session, &body).await;
    first.read_until(r#""progressToken":7"#).await;
    assert_eq!(
        within("hold to start", hold.heard.recv()).await,
        Some("started")
    );
    let cancel = session
        .send(
            Headers::Session,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        )
        .await;
    replies.push(exact(&cancel));
    assert_eq!(
        within("hold to be cancelled", hold.heard.recv()).await,
        Some("cancelled")
    );
    replies.push(exact(&within("the cancelled stream", first.finish()).await));
    for last in ["0/0", "1/0", "2/0", "9/0"] {
        replies.push(exact(&session.get(last).await));
    }
    replies
}

#[tokio::test]
async fn a_cancelled_call_is_resumed_as_rmcps_is() {
    let got = as_rmcp_answers(cancelled_then_resumed, 1, "the hold call").await;
    assert!(
        got[2].2.contains(r#""progressToken":7"#),
        "the resumed stream replays the progress note: {}",
        got[2].2
    );
}

/// A client that asks for a newer protocol than the legacy era's in `initialize` (rmcp's own client asks for
/// 2026-07-28) is answered 2025-11-25 and names that in its requests: the front takes them (it read the
/// version the client asked for, so none of rmcp's client's requests ever reached it), answering as rmcp does.
async fn asking_for_a_newer_version(
    server: &HttpServer,
    _: &mut Hold,
) -> Vec<(u16, Option<String>, String)> {
    let (session, init) = Session::open_asking(server.addr, "2026-07-28", "{}").await;
    assert!(
        dechunked(&init).contains(&format!(r#""protocolVersion":"{VERSION}""#)),
        "answered the legacy era's version: {}",
        init.body
    );
    let mut replies = Vec::new();
    for body in [
        call(json!(1), "echo", json!({"text": "hi"})),
        request(json!(2), "tools/list", None),
        request(json!(3), "ping", None),
    ] {
        replies.push(exact(&session.send(Headers::Session, &body).await));
    }
    replies
}

#[tokio::test]
async fn a_client_that_asked_for_a_newer_version_is_answered_by_the_front_as_rmcp_answers() {
    as_rmcp_answers(asking_for_a_newer_version, 3, "echo, tools/list, ping").await;
}

/// rmcp closes a session after `session_idle` without traffic through it; requests the front answers keep
/// the session alive as rmcp's would have.
#[tokio::test]
async fn a_session_busy_on_the_front_is_not_reaped_as_idle() {
    // The gaps between calls are well under the idle time even with a loaded machine's pauses in them.
    let options = HttpOptions {
        session_idle: std::time::Duration::from_millis(1500),
        ..HttpOptions::default()
    };
    let server = start_http(bridge(), options, vec![]).await;
    let (session, _) = Session::open(server.addr, "{}").await;
    // Four idle periods of calls, each one well within the idle time of the one before.
    for i in 0..30 {
        let reply = session
            .send(
                Headers::Session,
                &call(json!(i), "echo", json!({"text": "hi"})),
            )
            .await;
        assert_eq!(reply.status, 200, "call {i}: {}", reply.body);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(legacy_answered(server.addr).await, 30);
    // Left alone, it is reaped.
    within("the idle session to be reaped", async {
        loop {
            let reply = session
                .send(Headers::Session, &request(json!(99), "ping", None))
                .await;
            if reply.status == 404 {
                break;
            }
            // Longer than the idle time: each look is traffic that would keep the session.
            tokio::time::sleep(std::time::Duration::from_millis(2000)).await;
        }
    })
    .await;
}

/// A call the front answers passes rmcp's session worker by, progress and all: the session must not be closed
/// as idle under it (rmcp's worker sees a call's progress and keeps the session; ours is touched while the
/// call runs). The call outlives three idle times with nothing else sent, then answers.
#[tokio::test]
async fn a_session_is_not_reaped_under_a_long_front_call() {
    // An idle time the set-up and the checks after the call fit in on a loaded machine.
    let options = HttpOptions {
        session_idle: std::time::Duration::from_millis(1000),
        ..HttpOptions::default()
    };
    let (bridge, mut hold) = held_bridge();
    let server = start_http(bridge, options, vec![]).await;
    let (session, _) = Session::open(server.addr, "{}").await;
    let body = call_with_meta(json!(1), "hold", json!({}), json!({"progressToken": 7}));
    let mut held = Streaming::post(&session, &body).await;
    held.read_until(r#""progressToken":7"#).await;
    assert_eq!(
        within("hold to start", hold.heard.recv()).await,
        Some("started")
    );
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    hold.gate.add_permits(1);
    let finished = within("the held call's answer", held.finish()).await;
    assert!(
        finished.body.contains(r#""released":true"#),
        "the call ran to its end: {}",
        finished.body
    );
    assert_eq!(legacy_answered(server.addr).await, 1, "the hold call");
    let ping = session
        .send(Headers::Session, &request(json!(2), "ping", None))
        .await;
    assert_eq!(ping.status, 200, "the session lives on: {}", ping.body);
}

/// A second `initialize` in a session gives rmcp's peer the new client's info and capabilities; the front
/// read its own from the first, so from then on rmcp alone serves the session (here: the client now takes
/// elicitation requests, which only rmcp's peer can send on a call's stream).
#[tokio::test]
async fn a_second_initialize_leaves_the_session_to_rmcp() {
    let server = start_http(bridge(), HttpOptions::default(), vec![]).await;
    let (session, _) = Session::open(server.addr, "{}").await;
    let echo = call(json!(1), "echo", json!({"text": "hi"}));
    assert_eq!(session.send(Headers::Session, &echo).await.status, 200);
    assert_eq!(legacy_answered(server.addr).await, 1);
    let again = request(
        json!(2),
        "initialize",
        Some(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "again", "version": "1"}
        })),
    );
    let reinit = session.send(Headers::Session, &again).await;
    assert_eq!(reinit.status, 200, "{}", reinit.body);
    let echo = call(json!(3), "echo", json!({"text": "hi"}));
    let reply = session.send(Headers::Session, &echo).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        legacy_answered(server.addr).await,
        1,
        "after a second initialize the call went to rmcp"
    );
}

/// Starts a call in `session` and drops the connection once the answer's headers are in: the call goes on (the
/// client may resume its stream), as a client opening and dropping connections leaves it.
async fn start_and_drop(session: &Session, body: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, \
         text/event-stream\r\nMCP-Protocol-Version: {VERSION}\r\nMcp-Session-Id: {id}\r\nContent-Length: {len}\r\n\r\n{body}",
        addr = session.addr,
        id = session.id,
        len = body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(session.addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).await.unwrap(),
            1,
            "closed before the headers"
        );
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
}

/// Calls whose clients dropped their connections ran on without a bound (20 000 took the server to 342 MB):
/// past the bound a call is refused with `E_BUSY` before it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_calls_are_bounded_and_the_one_past_the_bound_is_refused_busy() {
    let mut b = Bridge::builder("hang", "0");
    b.tool(
        ToolSpec::new("hang", "Never answers.").handler(|_: NoArgs, _: ToolCtx| async move {
            std::future::pending::<()>().await;
            Ok(json!({}))
        }),
    );
    let server = start_http(b.build().unwrap(), HttpOptions::default(), vec![]).await;
    let max = bridge_core::serve::MAX_LEGACY_RUNNING_CALLS;
    let share = bridge_core::serve::MAX_LEGACY_SESSION_CALLS;
    let mut sessions = Vec::new();
    for _ in 0..max / share {
        let (session, _) = Session::open(server.addr, "{}").await;
        for id in 1..=share {
            start_and_drop(&session, &call(json!(id), "hang", json!({}))).await;
        }
        sessions.push(session);
    }
    // One session past its share (an attack run's finding: one session took every slot, and every other
    // session's calls were refused).
    let own = sessions[0]
        .send(Headers::Session, &call(json!(share + 1), "hang", json!({})))
        .await;
    assert_eq!(own.status, 200, "{}", own.body);
    assert!(
        own.body.contains("[E_BUSY]")
            && own
                .body
                .contains(&format!("{share} tool calls of this session")),
        "{}",
        own.body
    );
    // The server's bound, reached by all sessions together.
    let (other, _) = Session::open(server.addr, "{}").await;
    let refused = other
        .send(Headers::Session, &call(json!(1), "hang", json!({})))
        .await;
    assert_eq!(refused.status, 200, "{}", refused.body);
    assert!(
        refused.body.contains("[E_BUSY]") && refused.body.contains(&max.to_string()),
        "{}",
        refused.body
    );
}
