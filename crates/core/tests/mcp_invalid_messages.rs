//! A message that is no JSON-RPC request is answered with what is wrong with it, the field named, and with the
//! request's id when it could be read: on HTTP in both eras, and on stdio before and after the session opens.
//! Before, every such message got "Invalid request" with a null id. Issue 25 item 2 (one error shape, clear
//! errors).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_core::serve::HttpOptions;
use serde_json::{Value, json};
use support::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

const JSON: (&str, &str) = ("Content-Type", "application/json");
const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");
const MODERN: [(&str, &str); 3] = [JSON, ACCEPT, ("MCP-Protocol-Version", "2026-07-28")];

struct Case {
    message: Vec<u8>,
    code: i64,
    /// What the error message must say.
    says: &'static [&'static str],
    id: Value,
}

fn case(message: impl Into<Vec<u8>>, code: i64, says: &'static [&'static str], id: Value) -> Case {
    Case {
        message: message.into(),
        code,
        says,
        id,
    }
}

fn deeply_nested() -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"echo","arguments":{{"a":{}{}}}}}}}"#,
        "[".repeat(1_000_000),
        "]".repeat(1_000_000)
    )
}

/// JSON that no JSON-RPC message is.
fn not_json_rpc() -> Vec<Case> {
    vec![
        // rmcp meets the repeated `id` before the text after the object, so stdio answers this one too; which
        // id was meant is anyone's guess, and the text after it makes it no JSON: no id.
        case(
            r#"{"jsonrpc":"2.0","id":2,"method":"ping","id":3}{}"#,
            -32700,
            &["trailing characters"],
            Value::Null,
        ),
        case(
            r#"{"hello":"world"}"#,
            -32600,
            &["`jsonrpc` is missing"],
            Value::Null,
        ),
        case(
            r#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#,
            -32600,
            &["`jsonrpc` must be \"2.0\", not \"1.0\""],
            json!(7),
        ),
        case(
            r#"{"jsonrpc":"2.0","id":"a","method":5}"#,
            -32600,
            &["`method` must be a string, not a number"],
            Value::Null,
        ),
        case(
            r#"{"jsonrpc":"2.0","id":7,"id":8,"method":"ping"}"#,
            -32600,
            &["`id` appears more than once"],
            Value::Null,
        ),
        case(
            r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#,
            -32600,
            &["`id` must be a string or an integer, not an object"],
            Value::Null,
        ),
        case(
            r#"{"jsonrpc":"2.0","id":7}"#,
            -32600,
            &["`method` is missing"],
            Value::Null,
        ),
        case(
            r#""just a string""#,
            -32600,
            &["a JSON object, not a string"],
            Value::Null,
        ),
    ]
}

/// Not JSON at all: a parse error that says where.
fn not_json() -> Vec<Case> {
    vec![
        // A valid request with text after it is no JSON: its id is not used.
        case(
            r#"{"jsonrpc":"2.0","id":7,"method":"ping"} x"#,
            -32700,
            &["trailing characters", "nothing after it"],
            Value::Null,
        ),
        case(
            &b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\"}}"[..],
            -32700,
            &["not UTF-8", "`params.name`"],
            Value::Null,
        ),
        case(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"\ud800"}}"#,
            -32700,
            &["surrogate", "`params.name`"],
            Value::Null,
        ),
        case(deeply_nested(), -32700, &["deeper than 128 levels", "`params.arguments.a[0]"], Value::Null),
    ]
}

/// How an answer without an id says so: HTTP writes `"id": null` (JSON-RPC 2.0), stdio leaves `id` out as
/// rmcp's transport does (MCP's schema makes an error response's `id` optional and allows no `null`).
#[derive(Clone, Copy)]
enum NoId {
    Null,
    Absent,
}

fn check(case: &Case, answer: &Value, context: &str, no_id: NoId) {
    let shown = String::from_utf8_lossy(&case.message);
    let shown: String = shown.chars().take(120).collect();
    assert_eq!(answer["jsonrpc"], "2.0", "{context} {shown}: {answer}");
    assert_eq!(
        answer["error"]["code"], case.code,
        "{context} {shown}: {answer}"
    );
    let id = answer.get("id");
    match (&case.id, no_id) {
        (Value::Null, NoId::Null) => {
            assert_eq!(id, Some(&Value::Null), "{context} {shown}: {answer}")
        }
        (Value::Null, NoId::Absent) => assert_eq!(id, None, "{context} {shown}: {answer}"),
        (expected, _) => assert_eq!(id, Some(expected), "{context} {shown}: {answer}"),
    }
    let message = answer["error"]["message"].as_str().unwrap();
    for says in case.says {
        assert!(message.contains(says), "{context} {shown}: {message}");
    }
    assert!(
        message.len() < 600,
        "{context}: the answer quotes too much: {message}"
    );
}

#[tokio::test]
async fn http_names_what_is_wrong_in_both_eras() {
    let server = start_http(test_bridge().bridge, HttpOptions::default(), vec![]).await;
    for (era, headers) in [("legacy", &[JSON, ACCEPT][..]), ("2026-07-28", &MODERN[..])] {
        for case in not_json_rpc().iter().chain(&not_json()) {
            let reply = raw_exchange(server.addr, "POST", "/mcp", headers, &case.message).await;
            assert_eq!(reply.status, 400, "{era}: {}", reply.body);
            check(case, &reply.json(), era, NoId::Null);
        }
    }
}

/// A raw stdio session on an in-memory pipe.
struct Stdio {
    lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
}

impl Stdio {
    fn start() -> Self {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server);
        tokio::spawn(bridge_core::serve::serve_io(
            test_bridge().bridge,
            read,
            write,
            &[],
            CancellationToken::new(),
        ));
        let (read, write) = tokio::io::split(client);
        Self {
            lines: BufReader::new(read).lines(),
            write,
        }
    }

    async fn send(&mut self, line: &[u8]) {
        self.write.write_all(line).await.unwrap();
        self.write.write_all(b"\n").await.unwrap();
    }

    async fn answer(&mut self) -> Value {
        let line = within("a stdio answer", self.lines.next_line())
            .await
            .unwrap()
            .expect("an answer");
        serde_json::from_str(&line).unwrap()
    }

    async fn initialize(&mut self) {
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}});
        self.send(initialize.to_string().as_bytes()).await;
        assert!(self.answer().await["result"].is_object());
        self.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
    }

    /// Sends `case`, then a ping: what comes back first is the case's answer, or the ping's if the case got
    /// none.
    async fn exchange(&mut self, case: &Case, ping_id: u64) -> Option<Value> {
        self.send(&case.message).await;
        let ping = json!({"jsonrpc": "2.0", "id": ping_id, "method": "ping"});
        self.send(ping.to_string().as_bytes()).await;
        let first = self.answer().await;
        if first["id"] == ping_id {
            return None;
        }
        let second = self.answer().await;
        assert_eq!(second["id"], ping_id, "{second}");
        Some(first)
    }
}

#[tokio::test]
async fn stdio_names_what_is_wrong_before_and_after_initialize() {
    for case in not_json_rpc() {
        let mut stdio = Stdio::start();
        // No ping before `initialize`: rmcp would end the session.
        stdio.send(&case.message).await;
        check(
            &case,
            &stdio.answer().await,
            "stdio, before initialize",
            NoId::Absent,
        );
        stdio.initialize().await;
        let after = stdio.exchange(&case, 101).await.expect("an answer");
        check(&case, &after, "stdio, in the session", NoId::Absent);
    }
    // Not JSON but a request whose id can be read (every case here is `id` 7 with a `method`): answered with
    // that id, as its caller waits for it (a client with no timeout of its own waited for good); the error says
    // what is wrong as on HTTP.
    let mut stdio = Stdio::start();
    stdio.initialize().await;
    for (i, case) in not_json().iter().enumerate() {
        let answer = stdio
            .exchange(case, 100 + i as u64)
            .await
            .expect("an answer");
        let case = Case {
            id: json!(7),
            message: case.message.clone(),
            ..*case
        };
        check(&case, &answer, "stdio, not JSON", NoId::Absent);
    }
    // No request's id to read: not answered (answering garbage, or a peer's response, with an error starts error
    // storms between peers), and nothing else lost.
    for (i, garbage) in [
        &b"garbage"[..],
        b"{",
        br#"{"jsonrpc":"2.0","id":4,"result":{"a":"\ud800"}}"#,
        br#"{"jsonrpc":"2.0","id":4,"params":{"a":"\ud800"}}"#,
    ]
    .into_iter()
    .enumerate()
    {
        let case = case(garbage, 0, &[], Value::Null);
        assert_eq!(stdio.exchange(&case, 200 + i as u64).await, None);
    }
}

/// A line over the 16 MiB stdio reads is not read, but its request is answered when its id can be found at the
/// line's start (Python's SDK writes `id` before `params`) or its end (the TypeScript SDK writes it last).
#[tokio::test]
async fn stdio_answers_a_request_too_long_to_read_when_its_id_shows() {
    let mut stdio = Stdio::start();
    stdio.initialize().await;
    let content = "a".repeat(17 << 20);
    let python = format!(
        r#"{{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{content}"}}}}}}"#
    );
    let typescript = format!(
        r#"{{"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{content}"}}}},"jsonrpc":"2.0","id":"ts-32"}}"#
    );
    for (line, id) in [(python, json!(31)), (typescript, json!("ts-32"))] {
        let answer = stdio.exchange(&case(line, 0, &[], Value::Null), 33).await;
        let answer = answer.expect("an answer to the long line");
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("16777216 bytes"), "{message}");
    }
}
