//! Our `POST /mcp` fast path (stateless requests answered without rmcp's HTTP service) gives the answers and
//! refusals rmcp's path gives: one table of requests, each sent to a server with the fast path and to one
//! without, status, content type and body compared. Each row also says whether the fast path should take it,
//! checked against the server's `mcp_http_fast_path_answered_total`. Issue 25 item 4.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_core::serve::HttpOptions;
use bridge_core::{Bridge, NoArgs, ToolCtx, ToolSpec};
use serde_json::{Value, json};
use std::net::SocketAddr;
use support::*;

const META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"}}"#;

struct Row {
    what: &'static str,
    headers: Vec<(&'static str, String)>,
    body: String,
    fast: bool,
}

fn modern_headers(method: &str, name: Option<&str>) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("Content-Type", "application/json".to_owned()),
        ("Accept", "application/json, text/event-stream".to_owned()),
        ("MCP-Protocol-Version", "2026-07-28".to_owned()),
        ("Mcp-Method", method.to_owned()),
    ];
    if let Some(name) = name {
        headers.push(("Mcp-Name", name.to_owned()));
    }
    headers
}

fn call_body(id: Value, name: &str, arguments: Value, meta: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{arguments},"_meta":{meta}}}}}"#
    )
}

fn row(what: &'static str, headers: Vec<(&'static str, String)>, body: String, fast: bool) -> Row {
    Row {
        what,
        headers,
        body,
        fast,
    }
}

fn with(
    mut headers: Vec<(&'static str, String)>,
    name: &'static str,
    value: &str,
) -> Vec<(&'static str, String)> {
    headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
    headers.push((name, value.to_owned()));
    headers
}

fn without(mut headers: Vec<(&'static str, String)>, name: &str) -> Vec<(&'static str, String)> {
    headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
    headers
}

fn table() -> Vec<Row> {
    let echo = || modern_headers("tools/call", Some("echo"));
    let echo_body = || call_body(json!(1), "echo", json!({"text": "hi"}), META);
    let meta_with = |extra: &str| META.replacen('{', &format!("{{{extra},"), 1);
    vec![
        row("tools/call", echo(), echo_body(), true),
        row(
            "tools/call, string id, integer arguments",
            modern_headers("tools/call", Some("add")),
            call_body(json!("a-1"), "add", json!({"a": 2, "b": "3"}), META),
            true,
        ),
        row(
            "a tool error",
            modern_headers("tools/call", Some("fail")),
            call_body(json!(2), "fail", json!({}), META),
            true,
        ),
        row(
            "bad arguments",
            echo(),
            call_body(json!(3), "echo", json!({"text": 5}), META),
            true,
        ),
        row(
            "an unknown tool",
            modern_headers("tools/call", Some("nope")),
            call_body(json!(4), "nope", json!({}), META),
            true,
        ),
        row(
            "a panicking tool",
            modern_headers("tools/call", Some("boom")),
            call_body(json!(5), "boom", json!({}), META),
            true,
        ),
        row(
            "tools/list",
            modern_headers("tools/list", None),
            format!(r#"{{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{{"_meta":{META}}}}}"#),
            true,
        ),
        row(
            "resources/read of nothing",
            modern_headers("resources/read", Some("nope://x")),
            format!(
                r#"{{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{{"uri":"nope://x","_meta":{META}}}}}"#
            ),
            true,
        ),
        row(
            "tools/call params that do not parse",
            modern_headers("tools/call", None),
            format!(r#"{{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{{"arguments":{{}},"_meta":{META}}}}}"#),
            false,
        ),
        row("no Mcp-Method", without(echo(), "Mcp-Method"), echo_body(), false),
        row("Mcp-Method differs", with(echo(), "Mcp-Method", "tools/list"), echo_body(), false),
        row("no Mcp-Name", without(echo(), "Mcp-Name"), echo_body(), false),
        row("Mcp-Name differs", with(echo(), "Mcp-Name", "add"), echo_body(), false),
        row(
            "Mcp-Name in Base64",
            with(echo(), "Mcp-Name", "=?base64?ZWNobw==?="),
            echo_body(),
            false,
        ),
        row(
            "Mcp-Method twice",
            {
                let mut h = echo();
                h.push(("Mcp-Method", "tools/call".to_owned()));
                h
            },
            echo_body(),
            false,
        ),
        row("Accept in two headers", {
            let mut h = with(echo(), "Accept", "application/json");
            h.push(("Accept", "text/event-stream".to_owned()));
            h
        }, echo_body(), true),
        row("Content-Type twice, JSON first", {
            let mut h = echo();
            h.push(("Content-Type", "text/plain".to_owned()));
            h
        }, echo_body(), true),
        row("Content-Type twice, JSON last", {
            let mut h = with(echo(), "Content-Type", "text/plain");
            h.push(("Content-Type", "application/json".to_owned()));
            h
        }, echo_body(), false),
        row("Mcp-Name twice", {
            let mut h = echo();
            h.push(("Mcp-Name", "echo".to_owned()));
            h
        }, echo_body(), false),
        row("MCP-Protocol-Version twice", {
            let mut h = echo();
            h.push(("MCP-Protocol-Version", "2026-07-28".to_owned()));
            h
        }, echo_body(), false),
        row(
            "tools/list with an Mcp-Name, twice",
            {
                let mut h = modern_headers("tools/list", Some("x"));
                h.push(("Mcp-Name", "y".to_owned()));
                h
            },
            format!(r#"{{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{{"_meta":{META}}}}}"#),
            true,
        ),
        row("an empty session id", with(echo(), "Mcp-Session-Id", ""), echo_body(), false),
        row(
            "_meta without client capabilities",
            echo(),
            call_body(
                json!(9),
                "echo",
                json!({"text": "hi"}),
                r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#,
            ),
            false,
        ),
        row("no _meta", echo(), r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#.to_owned(), false),
        row(
            "_meta names another version",
            with(echo(), "MCP-Protocol-Version", "2025-11-25"),
            echo_body(),
            false,
        ),
        row(
            "no MCP-Protocol-Version",
            without(echo(), "MCP-Protocol-Version"),
            echo_body(),
            false,
        ),
        row(
            "an unknown MCP-Protocol-Version",
            with(echo(), "MCP-Protocol-Version", "2099-01-01"),
            echo_body(),
            false,
        ),
        row(
            "Accept without SSE",
            with(echo(), "Accept", "application/json"),
            echo_body(),
            false,
        ),
        row(
            "Accept with a quality",
            with(echo(), "Accept", "application/json;q=0.9, text/event-stream"),
            echo_body(),
            false,
        ),
        row(
            "Accept with a zero quality",
            with(echo(), "Accept", "application/json;q=0, text/event-stream"),
            echo_body(),
            false,
        ),
        row(
            "Content-Type text/plain",
            with(echo(), "Content-Type", "text/plain"),
            echo_body(),
            false,
        ),
        row(
            "Content-Type with a charset",
            with(echo(), "Content-Type", "application/json; charset=utf-8"),
            echo_body(),
            true,
        ),
        row(
            "a progress token",
            echo(),
            call_body(json!(11), "echo", json!({"text": "hi"}), &meta_with(r#""progressToken":"p""#)),
            true,
        ),
        row(
            "progress reported: SSE",
            modern_headers("tools/call", Some("steps")),
            call_body(json!(15), "steps", json!({}), &meta_with(r#""progressToken":0"#)),
            true,
        ),
        row(
            "progress reported without a token: JSON",
            modern_headers("tools/call", Some("steps")),
            call_body(json!(16), "steps", json!({}), META),
            true,
        ),
        row(
            "a task-capable tool, tasks not declared: answered in the request",
            modern_headers("tools/call", Some("later")),
            call_body(json!(17), "later", json!({}), META),
            true,
        ),
        row(
            "a task-only tool, tasks not declared: refused",
            modern_headers("tools/call", Some("only_task")),
            call_body(json!(18), "only_task", json!({}), META),
            true,
        ),
        row(
            "a task-capable tool, tasks declared: a task",
            modern_headers("tools/call", Some("later")),
            call_body(json!(19), "later", json!({}), &tasks_meta()),
            true,
        ),
        row(
            "a task-only tool, tasks declared: a task",
            modern_headers("tools/call", Some("only_task")),
            call_body(json!(20), "only_task", json!({}), &tasks_meta()),
            true,
        ),
        row(
            "a tool that waits, then answers",
            modern_headers("tools/call", Some("nap")),
            call_body(json!(21), "nap", json!({}), META),
            true,
        ),
        row(
            "a tool that waits, then panics",
            modern_headers("tools/call", Some("late_boom")),
            call_body(json!(22), "late_boom", json!({}), META),
            true,
        ),
        row(
            "a log level",
            echo(),
            call_body(
                json!(12),
                "echo",
                json!({"text": "hi"}),
                &meta_with(r#""io.modelcontextprotocol/logLevel":"debug""#),
            ),
            false,
        ),
        row(
            "a session id",
            with(echo(), "Mcp-Session-Id", "no-such-session"),
            echo_body(),
            false,
        ),
        row(
            "ping, removed in 2026-07-28",
            modern_headers("ping", None),
            format!(r#"{{"jsonrpc":"2.0","id":13,"method":"ping","params":{{"_meta":{META}}}}}"#),
            false,
        ),
        row(
            "a notification",
            modern_headers("notifications/initialized", None),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
            false,
        ),
        row(
            "a batch",
            echo(),
            format!("[{}]", echo_body()),
            false,
        ),
        row(
            "a BOM",
            echo(),
            format!("\u{feff}{}", echo_body()),
            false,
        ),
        row("not JSON", echo(), r#"{"jsonrpc":"2.0","id":1,"#.to_owned(), false),
        row("JSON, not JSON-RPC", echo(), r#"{"hello":"world"}"#.to_owned(), false),
        row(
            "a foreign Origin",
            with(echo(), "Origin", "https://evil.example"),
            echo_body(),
            false,
        ),
        row(
            "a local Origin",
            with(echo(), "Origin", "http://localhost:3000"),
            echo_body(),
            true,
        ),
        row(
            "a foreign Host",
            with(echo(), "Host", "evil.example"),
            echo_body(),
            false,
        ),
        // `_meta` shapes: read lean as the stdio loop reads them (what clients send), or into rmcp's map
        // (anything unusual); either way the fast path answers what rmcp answers, or leaves it to rmcp.
        meta_row("a numeric progress token", &meta_with(r#""progressToken":7"#), true),
        meta_row("a negative progress token", &meta_with(r#""progressToken":-3"#), true),
        meta_row("a progress token with an escaped key", &meta_with(r#""progr\u0065ssToken":"e""#), true),
        meta_row("a progress token twice", &meta_with(r#""progressToken":1,"progressToken":"two""#), true),
        meta_row("a null progress token", &meta_with(r#""progressToken":null"#), true),
        meta_row("a float progress token", &meta_with(r#""progressToken":1.5"#), true),
        meta_row("an array progress token", &meta_with(r#""progressToken":[1]"#), true),
        row(
            "_meta before the name",
            echo(),
            format!(r#"{{"jsonrpc":"2.0","id":36,"method":"tools/call","params":{{"_meta":{META},"name":"echo","arguments":{{"text":"hi"}}}}}}"#),
            true,
        ),
        meta_row("a numeric protocol version", &format!(r#"{{"io.modelcontextprotocol/protocolVersion":5,{CAPS}}}"#), false),
        meta_row("a null protocol version", &format!(r#"{{"io.modelcontextprotocol/protocolVersion":null,{CAPS}}}"#), false),
        meta_row("the protocol version twice, the same", &meta_with(VERSION), true),
        meta_row("the protocol version twice, an older one first", &meta_with(r#""io.modelcontextprotocol/protocolVersion":"2025-11-25""#), true),
        meta_row("the protocol version twice, an older one last", &format!(r#"{{{VERSION},{CAPS},"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}"#), false),
        meta_row("the protocol version with an escaped key", &format!(r#"{{"io.modelcontextprotocol/protocol\u0056ersion":"2026-07-28",{CAPS}}}"#), true),
        meta_row("an escaped protocol version", &format!(r#"{{"io.modelcontextprotocol/protocolVersion":"2026\u002d07-28",{CAPS}}}"#), true),
        meta_row("an older protocol version than the header's", &format!(r#"{{"io.modelcontextprotocol/protocolVersion":"2025-06-18",{CAPS}}}"#), false),
        meta_row("an unknown protocol version", &format!(r#"{{"io.modelcontextprotocol/protocolVersion":"2099-01-01",{CAPS}}}"#), false),
        meta_row("null capabilities", &format!(r#"{{{VERSION},"io.modelcontextprotocol/clientCapabilities":null}}"#), false),
        meta_row("array capabilities", &format!(r#"{{{VERSION},"io.modelcontextprotocol/clientCapabilities":[]}}"#), false),
        meta_row("capabilities twice", &meta_with(r#""io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}"#), true),
        meta_row("capabilities with unknown fields", &format!(r#"{{{VERSION},"io.modelcontextprotocol/clientCapabilities":{{"elicitation":{{}},"x-future":{{"a":[1]}},"extensions":{{"x.y/z":{{}}}}}}}}"#), true),
        meta_row("a result cap", &meta_with(r#""io.github.mcp-bridges/maxResultBytes":2048"#), true),
        meta_row("a result cap too large", &meta_with(r#""io.github.mcp-bridges/maxResultBytes":100000000000"#), true),
        meta_row("a result cap that is text", &meta_with(r#""io.github.mcp-bridges/maxResultBytes":"big""#), true),
        meta_row("a negative result cap", &meta_with(r#""io.github.mcp-bridges/maxResultBytes":-1"#), true),
        meta_row("an unknown key", &meta_with(r#""x-unknown":{"deep":[1,2]}"#), true),
        meta_row("client info that is not an object", &format!(r#"{{{VERSION},{CAPS},"io.modelcontextprotocol/clientInfo":"not an object"}}"#), true),
        meta_row("client info twice", &meta_with(r#""io.modelcontextprotocol/clientInfo":{"name":"u","version":"1"}"#), true),
        meta_row("no client info", &format!("{{{VERSION},{CAPS}}}"), true),
        meta_row("a log level that is not one", &meta_with(r#""io.modelcontextprotocol/logLevel":"loud""#), true),
        meta_row("an empty _meta", "{}", false),
        meta_row("a null _meta", "null", false),
        row(
            "params before the method",
            echo(),
            format!(r#"{{"params":{{"_meta":{META},"name":"echo","arguments":{{"text":"hi"}}}},"jsonrpc":"2.0","id":30,"method":"tools/call"}}"#),
            true,
        ),
        row(
            "params before the method, an unknown _meta key",
            echo(),
            format!(r#"{{"params":{{"_meta":{},"name":"echo","arguments":{{"text":"hi"}}}},"jsonrpc":"2.0","id":31,"method":"tools/call"}}"#, meta_with(r#""x":0"#)),
            true,
        ),
        row(
            "progress reported, a string token with escapes",
            modern_headers("tools/call", Some("steps")),
            call_body(json!(32), "steps", json!({}), &meta_with(r#""progressToken":"p\"q\u00e9""#)),
            true,
        ),
        row(
            "progress reported, a token given twice",
            modern_headers("tools/call", Some("steps")),
            call_body(json!(33), "steps", json!({}), &meta_with(r#""progressToken":"first","progressToken":-9"#)),
            true,
        ),
        row(
            "progress reported, an unknown _meta key",
            modern_headers("tools/call", Some("steps")),
            call_body(json!(34), "steps", json!({}), &meta_with(r#""progressToken":5,"x":{}"#)),
            true,
        ),
        row(
            "a task-capable tool with a progress token",
            modern_headers("tools/call", Some("later")),
            call_body(json!(35), "later", json!({}), &meta_with(r#""progressToken":5"#)),
            false,
        ),
        row(
            "subscribe, removed in 2026-07-28",
            modern_headers("resources/subscribe", Some("events://test/chat")),
            format!(
                r#"{{"jsonrpc":"2.0","id":14,"method":"resources/subscribe","params":{{"uri":"events://test/chat","_meta":{META}}}}}"#
            ),
            false,
        ),
    ]
}

const VERSION: &str = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28""#;
const CAPS: &str = r#""io.modelcontextprotocol/clientCapabilities":{}"#;

/// A call of `echo` with `meta` as its `_meta`.
fn meta_row(what: &'static str, meta: &str, fast: bool) -> Row {
    row(
        what,
        modern_headers("tools/call", Some("echo")),
        call_body(json!(40), "echo", json!({"text": "hi"}), meta),
        fast,
    )
}

/// `_meta` of a client that declares the tasks extension.
fn tasks_meta() -> String {
    META.replace(
        r#"clientCapabilities":{}"#,
        r#"clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#,
    )
}

/// The test bridge's calls, a tool that panics, and an event stream.
fn bridge() -> Bridge {
    let mut b = Bridge::builder("test", "1.2.3");
    let _chat = b.events().stream("chat", "chat lines", 4);
    b.tool(echo_tool()).tool(add_tool()).tool(fail_tool());
    b.tool(boom_tool());
    for tool in progress_wait_and_task_tools() {
        b.tool(tool);
    }
    b.build().unwrap()
}

async fn fast_answered(addr: SocketAddr) -> u64 {
    fast_answered_with(addr, &[]).await
}

/// Status, content type, and the body: its JSON, every SSE event's data, or its text.
fn normalised(reply: &RawReply) -> (u16, Option<String>, Value) {
    let events: Vec<Value> = reply
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect();
    let body = serde_json::from_str::<Value>(reply.body.trim())
        .ok()
        .or_else(|| (!events.is_empty()).then_some(Value::Array(events)))
        .unwrap_or_else(|| Value::String(reply.body.clone()));
    (
        reply.status,
        reply.header("content-type").map(str::to_owned),
        body,
    )
}

async fn start_pair(options: HttpOptions, auth: &[(&str, &str)]) -> (HttpServer, HttpServer) {
    let rmcp_only = start_http_rmcp_only(bridge(), options.clone(), vec![]).await;
    // rmcp's side: nothing is answered on our paths.
    assert_eq!(fast_answered_with(rmcp_only.addr, auth).await, 0);
    let fast = start_http(bridge(), options, vec![]).await;
    (rmcp_only, fast)
}

#[tokio::test]
async fn the_fast_path_answers_and_refuses_as_rmcp_does() {
    let (rmcp_only, fast) = start_pair(HttpOptions::default(), &[]).await;
    for row in table() {
        let headers: Vec<(&str, &str)> =
            row.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let expected = raw_exchange(rmcp_only.addr, "POST", "/mcp", &headers, &row.body).await;
        let before = fast_answered(fast.addr).await;
        let got = raw_exchange(fast.addr, "POST", "/mcp", &headers, &row.body).await;
        let taken = fast_answered(fast.addr).await - before;
        assert_eq!(
            normalised(&got),
            normalised(&expected),
            "{}: fast path vs rmcp\n{}\n{}",
            row.what,
            got.body,
            expected.body
        );
        assert_eq!(
            taken,
            u64::from(row.fast),
            "{}: taken by the fast path",
            row.what
        );
        if row.what.ends_with(": SSE") {
            let (_, content_type, events) = normalised(&got);
            assert_eq!(
                content_type.as_deref(),
                Some("text/event-stream"),
                "{}",
                row.what
            );
            assert_eq!(
                events.as_array().map(Vec::len),
                Some(3),
                "{}: {events}",
                row.what
            );
            assert_eq!(
                events[0]["params"]["progressToken"], 0,
                "the client's token: {events}"
            );
        }
    }
    assert_eq!(fast_answered(rmcp_only.addr).await, 0);
}

#[tokio::test]
async fn with_a_token_the_fast_path_refuses_as_rmcp_does() {
    let options = HttpOptions {
        token: Some("s3cret".into()),
        ..HttpOptions::default()
    };
    let (rmcp_only, fast) = start_pair(options, &[("Authorization", "Bearer s3cret")]).await;
    let body = call_body(json!(1), "echo", json!({"text": "hi"}), META);
    for (auth, fast_taken) in [
        (None, false),
        (Some("Bearer wrong"), false),
        (Some("Bearer s3cret"), true),
    ] {
        let mut headers = modern_headers("tools/call", Some("echo"));
        if let Some(auth) = auth {
            headers.push(("Authorization", auth.to_owned()));
        }
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let expected = raw_exchange(rmcp_only.addr, "POST", "/mcp", &headers, &body).await;
        let got = raw_exchange(fast.addr, "POST", "/mcp", &headers, &body).await;
        assert_eq!(normalised(&got), normalised(&expected), "{auth:?}");
        assert_eq!(
            got.header("www-authenticate"),
            expected.header("www-authenticate"),
            "{auth:?}"
        );
        let status = if fast_taken { 200 } else { 401 };
        assert_eq!(got.status, status, "{auth:?}: {}", got.body);
    }
    let auth = [("Authorization", "Bearer s3cret")];
    assert_eq!(fast_answered_with(fast.addr, &auth).await, 1);
}

async fn fast_answered_with(addr: SocketAddr, headers: &[(&str, &str)]) -> u64 {
    let (status, body) = raw(addr, "GET", "/metrics", headers, "").await;
    assert_eq!(status, 200, "{body}");
    body.lines()
        .find_map(|l| l.strip_prefix("mcp_http_fast_path_answered_total "))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// A call on the fast path that is still waiting when shutdown's grace ends is cancelled, as rmcp cancels
/// its requests then: the call's token is tied to the server's only once it waits.
#[tokio::test]
async fn a_waiting_call_is_cancelled_when_the_grace_ends() {
    let (events, mut heard) = tokio::sync::mpsc::unbounded_channel::<&'static str>();
    let mut b = Bridge::builder("test", "1.2.3");
    b.tool(
        ToolSpec::new("hang", "Waits for its cancellation.").handler(
            move |_: NoArgs, ctx: ToolCtx| {
                let events = events.clone();
                async move {
                    let _ = events.send("started");
                    ctx.cancellation().cancelled().await;
                    let _ = events.send("cancelled");
                    Ok(json!({}))
                }
            },
        ),
    );
    let options = HttpOptions {
        shutdown_grace: std::time::Duration::from_millis(100),
        ..HttpOptions::default()
    };
    let server = start_http(b.build().unwrap(), options, vec![]).await;
    let addr = server.addr;
    let call = tokio::spawn(async move {
        let headers = modern_headers("tools/call", Some("hang"));
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let body = call_body(json!(1), "hang", json!({}), META);
        raw_exchange(addr, "POST", "/mcp", &headers, &body).await
    });
    assert_eq!(
        within("the call to start", heard.recv()).await,
        Some("started")
    );
    assert_eq!(fast_answered(addr).await, 1, "taken by the fast path");
    server.shutdown.cancel();
    assert_eq!(
        within("the call's cancellation", heard.recv()).await,
        Some("cancelled")
    );
    call.abort();
}

/// `/mcp` and the paths below it are all the MCP endpoint, as when it was nested at `/mcp`; the paths below
/// see themselves without the prefix (the OAuth discovery path is refused as such); a path that only
/// begins with `mcp` is not it.
#[tokio::test]
async fn the_paths_below_mcp_are_served_as_mcp_is() {
    let options = HttpOptions {
        token: Some("s3cret".into()),
        ..HttpOptions::default()
    };
    let server = start_http(bridge(), options, vec![]).await;
    let auth = ("Authorization", "Bearer s3cret");
    let mut headers = modern_headers("tools/call", Some("echo"));
    headers.push(("Authorization", "Bearer s3cret".to_owned()));
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let body = call_body(json!(1), "echo", json!({"text": "hi"}), META);
    let at_mcp = raw_exchange(server.addr, "POST", "/mcp", &headers, &body).await;
    assert_eq!(at_mcp.status, 200, "{}", at_mcp.body);
    for path in ["/mcp/", "/mcp/sub", "/mcp/sub/?q=1", "/mcp?q=1"] {
        let got = raw_exchange(server.addr, "POST", path, &headers, &body).await;
        assert_eq!(normalised(&got), normalised(&at_mcp), "{path}");
    }
    assert_eq!(fast_answered_with(server.addr, &[auth]).await, 5);
    for path in ["/mcpx", "/mcp2/x"] {
        let got = raw_exchange(server.addr, "POST", path, &headers, &body).await;
        assert_eq!(got.status, 404, "{path}: {}", got.body);
    }
    // Below `/mcp` the request's path is what follows it: the OAuth discovery path is refused with 404.
    let got = raw_exchange(
        server.addr,
        "GET",
        "/mcp/.well-known/oauth-authorization-server",
        &[auth],
        "",
    )
    .await;
    assert_eq!(got.status, 404, "{}", got.body);
    let got = raw_exchange(server.addr, "GET", "/mcp/.well-known/other", &[], "").await;
    assert_eq!(got.status, 401, "{}", got.body);
}
