//! Input rmcp cannot dispatch gets a JSON-RPC error a client can show, and what a legacy client can make the
//! server hold (sessions, subscriptions) is bounded. Issue 8 items 4 and 12, issue 12 item 9.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_core::serve::HttpOptions;
use rmcp::model::{ClientRequest, CustomRequest, SubscribeRequestParams};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::Duration;
use support::*;

const LEGACY_INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
const JSON: (&str, &str) = ("Content-Type", "application/json");
const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");
const MODERN: [(&str, &str); 3] = [JSON, ACCEPT, ("MCP-Protocol-Version", "2026-07-28")];

async fn post(addr: SocketAddr, headers: &[(&str, &str)], body: &str) -> RawReply {
    raw_exchange(addr, "POST", "/mcp", headers, body).await
}

async fn health(addr: SocketAddr) -> Value {
    let (status, body) = raw(addr, "GET", "/health", &[], "").await;
    assert_eq!(status, 200);
    serde_json::from_str(body.trim()).unwrap()
}

#[tokio::test]
async fn malformed_json_is_a_json_rpc_parse_error() {
    let server = start_http(test_bridge().bridge, HttpOptions::default(), vec![]).await;
    for headers in [&[JSON, ACCEPT][..], &MODERN[..]] {
        let reply = post(server.addr, headers, r#"{"jsonrpc":"2.0","id":1,"#).await;
        assert_eq!(reply.status, 400, "{}", reply.body);
        let body = reply.json();
        assert_eq!(body["error"]["code"], -32700, "{body}");
        assert_eq!(body["id"], Value::Null);
        let reply = post(server.addr, headers, r#"{"hello":"world"}"#).await;
        assert_eq!(reply.status, 400);
        assert_eq!(
            reply.json()["error"]["code"],
            -32600,
            "JSON, but not JSON-RPC"
        );
    }
    let reply = post(server.addr, &[("Content-Type", "text/plain"), ACCEPT], "{}").await;
    assert_eq!(
        reply.status, 415,
        "a wrong content type stays an HTTP error"
    );
}

#[tokio::test]
async fn bad_tools_call_params_are_invalid_params_not_method_not_found() {
    let tb = test_bridge();
    let server = start_http(tb.bridge.clone(), HttpOptions::default(), vec![]).await;
    for era in ERAS {
        for transport in ["stdio", "http"] {
            let client = if transport == "http" {
                http_client(server.addr, era).await
            } else {
                stdio_client(tb.bridge.clone(), era, vec![]).await
            };
            let bad = ClientRequest::CustomRequest(CustomRequest::new(
                "tools/call",
                Some(json!({ "name": "echo", "arguments": "not an object" })),
            ));
            let error = within("tools/call", client.service.send_request(bad))
                .await
                .unwrap_err();
            let text = error.to_string();
            assert!(text.contains("-32602"), "{era:?} {transport}: {text}");
            assert!(text.contains("tools/call"), "{era:?} {transport}: {text}");
            let unknown = ClientRequest::CustomRequest(CustomRequest::new("no/such", None));
            let error = within("no/such", client.service.send_request(unknown))
                .await
                .unwrap_err();
            assert!(error.to_string().contains("-32601"), "{error}");
            if era == Era::Modern {
                // Removed in 2026-07-28: the method does not exist, whatever its params.
                let removed = ClientRequest::CustomRequest(CustomRequest::new(
                    "logging/setLevel",
                    Some(json!({ "level": "info" })),
                ));
                let error = within("logging/setLevel", client.service.send_request(removed))
                    .await
                    .unwrap_err();
                assert!(error.to_string().contains("-32601"), "{transport}: {error}");
            }
        }
    }
}

#[tokio::test]
async fn legacy_sessions_are_capped_and_idle_ones_reaped() {
    // Both sessions must still be live when the third asks: an idle time the requests between fit in.
    let options = HttpOptions {
        max_sessions: 2,
        session_idle: Duration::from_secs(3),
        ..HttpOptions::default()
    };
    let server = start_http(test_bridge().bridge, options, vec![]).await;
    let addr = server.addr;
    for _ in 0..2 {
        let reply = post(addr, &[JSON, ACCEPT], LEGACY_INIT).await;
        assert!(reply.json().get("result").is_some(), "{}", reply.body);
    }
    assert_eq!(
        health(addr).await["mcp_sessions"],
        json!({"live": 2, "max": 2})
    );
    let refused = post(addr, &[JSON, ACCEPT], LEGACY_INIT).await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    let refused = refused.json();
    assert_eq!(refused["id"], 1);
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("MCP_MAX_SESSIONS"), "{refused}");
    assert_eq!(refused["error"]["data"]["max_sessions"], 2);
    // The stateless era has no sessions and is not limited.
    let modern = http_client(addr, Era::Modern).await;
    assert_eq!(
        call(&modern, "add", json!({"a": 1, "b": 2})).await.is_error,
        Some(false)
    );
    // Idle sessions are reaped, and their slots come back.
    within("idle sessions to be reaped", async {
        while health(addr).await["mcp_sessions"]["live"] != 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let reply = post(addr, &[JSON, ACCEPT], LEGACY_INIT).await;
    assert!(reply.json().get("result").is_some(), "{}", reply.body);
}

#[tokio::test]
async fn a_deleted_session_answers_204_and_frees_its_slot() {
    let server = start_http(test_bridge().bridge, HttpOptions::default(), vec![]).await;
    let reply = post(server.addr, &[JSON, ACCEPT], LEGACY_INIT).await;
    let id = reply.header("mcp-session-id").unwrap().to_owned();
    assert_eq!(health(server.addr).await["mcp_sessions"]["live"], 1);
    let (status, _) = raw(
        server.addr,
        "DELETE",
        "/mcp",
        &[
            ("Mcp-Session-Id", &id),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        "",
    )
    .await;
    assert_eq!(status, 204, "the Python SDK warns on anything but 200/204");
    within("the slot to be freed", async {
        while health(server.addr).await["mcp_sessions"]["live"] != 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test]
#[allow(deprecated)]
async fn subscriptions_per_session_are_bounded_in_count_and_uri_length() {
    let tb = test_bridge();
    let client = stdio_client(tb.bridge.clone(), Era::Legacy, vec![]).await;
    let huge = format!("test://events/{}", "x".repeat(1 << 20));
    let error = client
        .service
        .subscribe(SubscribeRequestParams::new(huge))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("`uri`") && error.contains("1024"), "{error}");
    for i in 0..64 {
        client
            .service
            .subscribe(SubscribeRequestParams::new(format!("test://events/{i}")))
            .await
            .unwrap();
    }
    let error = client
        .service
        .subscribe(SubscribeRequestParams::new("test://events/chat"))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("64 subscriptions"), "{error}");
}

#[tokio::test]
async fn resources_subscribe_in_the_stateless_era_points_to_listen() {
    let server = start_http(test_bridge().bridge, HttpOptions::default(), vec![]).await;
    // What the Python SDK sends: no Mcp-Name, because the method does not exist in this era.
    let mut headers = MODERN.to_vec();
    headers.push(("Mcp-Method", "resources/subscribe"));
    let body = json!({
        "jsonrpc": "2.0", "id": 7, "method": "resources/subscribe",
        "params": {
            "uri": "test://events/chat",
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    });
    let reply = post(server.addr, &headers, &body.to_string()).await;
    let body = reply.json();
    assert_eq!(body["id"], 7);
    assert_eq!(body["error"]["code"], -32601, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("subscriptions/listen"), "{message}");
    assert!(!message.contains("Mcp-Name"), "{message}");
}

/// A `tools/call` of `echo` whose body is about `bytes` long.
fn echo_call_of(bytes: usize) -> String {
    let text = "x".repeat(bytes);
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": text}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        // The echo is the body's size, above the result cap: asked for whole.
        bridge_core::tool::MAX_RESULT_BYTES_META_KEY: 16 << 20,
    }}})
    .to_string()
}

const ECHO_CALL: [(&str, &str); 5] = [
    JSON,
    ACCEPT,
    ("MCP-Protocol-Version", "2026-07-28"),
    ("Mcp-Method", "tools/call"),
    ("Mcp-Name", "echo"),
];

#[tokio::test]
async fn the_body_limit_refuses_past_it_and_a_bridge_that_needs_more_raises_it() {
    let default = start_http(test_bridge().bridge, HttpOptions::default(), vec![]).await;
    let over = post(default.addr, &ECHO_CALL, &echo_call_of(5 << 20)).await;
    assert_eq!(over.status, 413, "{}", over.body);
    assert!(
        over.body.contains("MCP_MAX_REQUEST_BYTES"),
        "the refusal names the setting: {}",
        over.body
    );
    let under = post(default.addr, &ECHO_CALL, &echo_call_of(3 << 20)).await;
    assert_eq!(
        under.status,
        200,
        "{}",
        &under.body[..under.body.len().min(300)]
    );

    // The same echo, from a bridge that declares it takes up to 8 MiB in one call.
    let mut b = bridge_core::Bridge::builder("big", "1");
    b.max_request_bytes(8 << 20);
    b.tool(
        bridge_core::ToolSpec::new("echo", "Echo text back.").handler(
            |args: EchoArgs, _: bridge_core::ToolCtx| async move { Ok(EchoOut { text: args.text }) },
        ),
    );
    let big = start_http(b.build().unwrap(), HttpOptions::default(), vec![]).await;
    let reply = post(big.addr, &ECHO_CALL, &echo_call_of(5 << 20)).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        &reply.body[..reply.body.len().min(300)]
    );
    assert_eq!(
        reply.json()["result"]["structuredContent"]["text"]
            .as_str()
            .map(str::len),
        Some(5 << 20)
    );
    let past = post(big.addr, &ECHO_CALL, &echo_call_of(9 << 20)).await;
    assert_eq!(past.status, 413, "the raised limit is still a limit");
}

/// A legacy session's id.
async fn legacy_session(addr: SocketAddr) -> String {
    let init = post(addr, &[JSON, ACCEPT], LEGACY_INIT).await;
    init.header("mcp-session-id").unwrap().to_owned()
}

/// The headers of a 2026-07-28 `tools/call` of `echo`.
fn modern_echo_call() -> Vec<(&'static str, &'static str)> {
    let mut modern = MODERN.to_vec();
    modern.extend([("Mcp-Method", "tools/call"), ("Mcp-Name", "echo")]);
    modern
}

/// params with a repeated key (serde refuses it typed; rmcp hands the request over as custom, its params a
/// tree that kept one) are invalid params that say so, not an unknown `tools/call`, in both eras.
#[tokio::test]
async fn a_repeated_key_in_params_is_invalid_params_not_an_unknown_method() {
    let server = start_http(test_bridge().bridge, HttpOptions::default(), vec![]).await;
    let session = legacy_session(server.addr).await;
    let legacy = [JSON, ACCEPT, ("Mcp-Session-Id", session.as_str())];
    let modern = modern_echo_call();
    let meta = r#","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    for (headers, meta) in [(&legacy[..], ""), (&modern[..], meta)] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{{"name":"echo","name":"echo","arguments":{{"text":"hi"}}{meta}}}}}"#
        );
        let answer = post(server.addr, headers, &body).await.json();
        assert_eq!(answer["id"], 5, "{answer}");
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("more than once"), "{message}");
    }
}

/// What the server does not understand is named in its error, shortened: the hostile run of stop 40 sent a
/// 4 MB method name of `\u0000` escapes and got 8 MB back (the name in the message and again in `data`), and
/// a wrong-typed argument of megabytes came back whole in serde's "invalid type" text. The error stays a
/// JSON-RPC error naming what was wrong, and the answer is a small fraction of the request. The unknown
/// method over a legacy session (a 2026-07-28 request must repeat its method in a header); the bad argument
/// in both eras.
#[tokio::test]
async fn an_error_quotes_what_it_did_not_understand_shortened() {
    let server = start_http(test_bridge().bridge, HttpOptions::default(), vec![]).await;
    let session = legacy_session(server.addr).await;
    let legacy = [JSON, ACCEPT, ("Mcp-Session-Id", session.as_str())];
    let modern = modern_echo_call();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let unknown = json!({"jsonrpc": "2.0", "id": 7, "method": "\u{0}".repeat(600_000)});
    let bad_argument = |meta: Option<&Value>| {
        let mut params = json!({"name": "echo", "arguments": "x".repeat(1_000_000)});
        if let Some(meta) = meta {
            params["_meta"] = meta.clone();
        }
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
    };
    let cases = [
        (&legacy[..], unknown, -32601),
        (&legacy[..], bad_argument(None), -32602),
        (&modern[..], bad_argument(Some(&meta)), -32602),
    ];
    for (headers, body, code) in cases {
        let body = body.to_string();
        let reply = post(server.addr, headers, &body).await;
        let text = reply.body.clone();
        assert!(
            text.len() < 8_192,
            "{} bytes answered to {} bytes: {}…",
            text.len(),
            body.len(),
            &text[..text.len().min(300)]
        );
        let answer = reply.json();
        assert_eq!(answer["id"], 7, "{answer}");
        assert_eq!(answer["error"]["code"], code, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("bytes in all"),
            "says how long it was: {message}"
        );
    }
}
