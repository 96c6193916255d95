//! Tools over both transports and both protocol eras: listing, strict arguments, structured output, errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_core::serve::HttpOptions;
use serde_json::json;
use support::*;

async fn clients() -> Vec<(String, Client, Option<HttpServer>)> {
    let mut out = Vec::new();
    for era in ERAS {
        let server = start_http(test_bridge().bridge, HttpOptions::default(), vec![]).await;
        let client = http_client(server.addr, era).await;
        out.push((format!("http/{era:?}"), client, Some(server)));
        out.push((
            format!("stdio/{era:?}"),
            stdio_client(test_bridge().bridge, era, vec![]).await,
            None,
        ));
    }
    out
}

#[tokio::test]
async fn tools_are_listed_with_strict_schemas_and_annotations() {
    for (label, client, _server) in clients().await {
        let tools = client.service.list_all_tools().await.unwrap();
        let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
        assert_eq!(
            names,
            ["echo", "add", "put", "fail", "sleep", "say", "poll_events"],
            "{label}"
        );
        for tool in &tools {
            assert_eq!(
                tool.input_schema.get("additionalProperties"),
                Some(&json!(false)),
                "{label} {}",
                tool.name
            );
            assert!(
                tool.output_schema.is_some(),
                "{label} {} has an output schema",
                tool.name
            );
        }
        let echo = &tools[0];
        assert_eq!(
            echo.annotations.as_ref().and_then(|a| a.read_only_hint),
            Some(true),
            "{label}"
        );
        let put = &tools[2];
        assert_eq!(
            put.annotations.as_ref().and_then(|a| a.destructive_hint),
            Some(true),
            "{label}"
        );
    }
}

#[tokio::test]
async fn structured_output_and_numeric_strings() {
    for (label, client, _server) in clients().await {
        let r = call(&client, "echo", json!({"text": "hi"})).await;
        assert_eq!(r.is_error, Some(false), "{label}");
        assert_eq!(r.structured_content, Some(json!({"text": "hi"})), "{label}");
        let r = call(&client, "add", json!({"a": "2", "b": 40})).await;
        assert_eq!(
            r.structured_content,
            Some(json!({"sum": 42})),
            "{label}: numeric strings become numbers"
        );
    }
}

#[tokio::test]
async fn bad_arguments_are_tool_errors_naming_the_field() {
    for (label, client, _server) in clients().await {
        let cases = [
            (
                "echo",
                json!({"text": "x", "bogus": 1}),
                "E_INVALID_ARGUMENT",
                "bogus",
            ),
            ("echo", json!({}), "E_INVALID_ARGUMENT", "text"),
            (
                "add",
                json!({"a": "two", "b": 1}),
                "E_INVALID_ARGUMENT",
                "a",
            ),
            (
                "put",
                json!({"name": "  ", "content": "x"}),
                "E_INVALID_ARGUMENT",
                "name",
            ),
            (
                "put",
                json!({"name": "a", "content": "0123456789abcdefXYZ"}),
                "E_TOO_LARGE",
                "content",
            ),
            (
                "poll_events",
                json!({"stream": "chat", "limit": 0}),
                "E_INVALID_ARGUMENT",
                "limit",
            ),
            (
                "poll_events",
                json!({"stream": "nope"}),
                "E_NOT_FOUND",
                "stream",
            ),
            (
                "fail",
                json!({"extra": true}),
                "E_INVALID_ARGUMENT",
                "extra",
            ),
        ];
        for (tool, args, code, field) in cases {
            let r = call(&client, tool, args.clone()).await;
            let e = error_of(&r);
            assert_eq!(e["code"], code, "{label} {tool} {args}");
            assert_eq!(e["details"]["field"], field, "{label} {tool} {args}");
            let text = text_of(&r);
            assert!(
                text.starts_with(&format!("[{code}] ")) && text.contains(" — "),
                "{label}: {text}"
            );
        }
    }
}

#[tokio::test]
async fn rejected_calls_do_not_run_the_handler() {
    let mut tb = test_bridge();
    let client = stdio_client(tb.bridge.clone(), Era::Legacy, vec![]).await;
    let r = call(&client, "put", json!({"name": "", "content": "x"})).await;
    error_of(&r);
    let r = call(&client, "put", json!({"name": "ok", "content": "x"})).await;
    assert_eq!(r.is_error, Some(false));
    assert_eq!(tb.puts.recv().await.unwrap(), "ok");
    assert!(
        tb.puts.try_recv().is_err(),
        "the invalid call must not have reached the handler"
    );
}

#[tokio::test]
async fn remote_errors_keep_message_and_hint() {
    for (label, client, _server) in clients().await {
        let r = call(&client, "fail", json!({})).await;
        let e = error_of(&r);
        assert_eq!(e["code"], "E_REMOTE", "{label}");
        assert_eq!(e["message"], "game said no", "{label}");
        assert_eq!(e["hint"], "ask the game nicely", "{label}");
        assert_eq!(
            text_of(&r),
            "[E_REMOTE] game said no — ask the game nicely",
            "{label}"
        );
    }
}

#[tokio::test]
async fn unknown_tool_is_a_protocol_error() {
    for (label, client, _server) in clients().await {
        let err = client
            .service
            .call_tool(rmcp::model::CallToolRequestParams::new("no_such_tool"))
            .await;
        assert!(err.is_err(), "{label}: {err:?}");
    }
}

/// An unlisted tool is absent from tools/list but still answers, and a bridge's own error code name reaches the
/// agent in the text and `_meta` (the category stays in `_meta.category`).
#[tokio::test]
async fn unlisted_tools_answer_and_code_names_reach_the_agent() {
    use bridge_core::{Bridge, ErrorCode, NoArgs, ToolCtx, ToolError, ToolSpec};
    let mut b = Bridge::builder("test", "1.0.0");
    b.tool(
        ToolSpec::new("shown", "Listed.")
            .handler(|_: NoArgs, _: ToolCtx| async move { Ok(json!({})) }),
    );
    b.tool(ToolSpec::new("hidden", "Not listed.").unlisted().handler(
        |_: NoArgs, _: ToolCtx| async move {
            Err::<serde_json::Value, _>(
                ToolError::new(ErrorCode::Unsupported, "needs the other backend")
                    .with_code_name("E_UNSUPPORTED_BACKEND"),
            )
        },
    ));
    let client = stdio_client(b.build().unwrap(), ERAS[0], vec![]).await;
    let names: Vec<String> = client
        .service
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["shown"]);
    let result = call(&client, "hidden", json!({})).await;
    let error = error_of(&result);
    assert_eq!(error["code"], "E_UNSUPPORTED_BACKEND");
    assert_eq!(error["category"], "E_UNSUPPORTED");
}
