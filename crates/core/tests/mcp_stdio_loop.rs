//! The stdio loop answers the calls of every session itself: a call that finishes at once runs on the session's
//! own task (no task spawned per call), one that waits gets a task of its own so the calls behind it go on, and
//! answers keep the request's id in both eras.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bridge_core::tool::ToolOutput;
use bridge_core::{Bridge, Content, ToolCtx, ToolSpec};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

fn out(structured: Value) -> ToolOutput {
    ToolOutput {
        content: vec![Content::Text(structured.to_string())],
        structured: Some(structured),
    }
}

fn bridge(gate: Arc<Notify>) -> Bridge {
    let mut b = Bridge::builder("loop", "0");
    b.tool(
        ToolSpec::new("task_id", "The id of the task the handler runs on.").raw_handler(
            Map::new(),
            |_, _: ToolCtx| async move {
                Ok(out(
                    json!({ "task": format!("{:?}", tokio::task::try_id()) }),
                ))
            },
        ),
    );
    let waiting = gate.clone();
    b.tool(
        ToolSpec::new("wait", "Waits until `release` is called.").raw_handler(
            Map::new(),
            move |_, _: ToolCtx| {
                let gate = waiting.clone();
                async move {
                    gate.notified().await;
                    Ok(out(json!({ "waited": true })))
                }
            },
        ),
    );
    b.tool(ToolSpec::new("release", "Lets `wait` finish.").raw_handler(
        Map::new(),
        move |_, _: ToolCtx| {
            let gate = gate.clone();
            async move {
                gate.notify_one();
                Ok(out(json!({ "released": true })))
            }
        },
    ));
    b.build().unwrap()
}

struct Raw {
    lines: tokio::io::Lines<BufReader<ReadHalf<DuplexStream>>>,
    write: WriteHalf<DuplexStream>,
    meta: Value,
}

impl Raw {
    async fn start(modern: bool) -> Self {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server);
        tokio::spawn(bridge_core::serve::serve_io(
            bridge(Arc::new(Notify::new())),
            read,
            write,
            &[],
            CancellationToken::new(),
        ));
        let (read, write) = tokio::io::split(client);
        let mut raw = Self {
            lines: BufReader::new(read).lines(),
            write,
            meta: Value::Null,
        };
        if modern {
            raw.meta = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            });
            // The first request of a 2026-07-28 session opens it (rmcp's side answers that one).
            raw.send(json!({"jsonrpc": "2.0", "id": 0, "method": "tools/list", "params": {"_meta": raw.meta}}))
                .await;
        } else {
            raw.send(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}}),
            )
            .await;
        }
        assert!(raw.answer().await["result"].is_object());
        if !modern {
            raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .await;
        }
        raw
    }

    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.write.write_all(line.as_bytes()).await.unwrap();
    }

    async fn call(&mut self, id: u64, tool: &str) {
        let mut params = json!({"name": tool, "arguments": {}});
        if !self.meta.is_null() {
            params["_meta"] = self.meta.clone();
        }
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
            .await;
    }

    async fn answer(&mut self) -> Value {
        let line = self.lines.next_line().await.unwrap().expect("an answer");
        serde_json::from_str(&line).unwrap()
    }
}

fn structured(answer: &Value) -> &Value {
    assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    &answer["result"]["structuredContent"]
}

/// Before: rmcp's service loop spawned a task per request, so each call reported another task id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_finish_at_once_run_on_the_session_task_in_both_eras() {
    for modern in [false, true] {
        let mut raw = Raw::start(modern).await;
        let mut tasks = Vec::new();
        for id in 1..=5 {
            raw.call(id, "task_id").await;
            let answer = raw.answer().await;
            assert_eq!(answer["id"], json!(id), "{answer}");
            tasks.push(structured(&answer)["task"].clone());
        }
        assert!(tasks[0].as_str().unwrap().starts_with("Some("), "{tasks:?}");
        assert!(
            tasks.iter().all(|t| *t == tasks[0]),
            "modern={modern}: every call should run on the session's task, saw {tasks:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_waits_does_not_hold_up_the_calls_behind_it() {
    for modern in [false, true] {
        let mut raw = Raw::start(modern).await;
        raw.call(1, "wait").await;
        raw.call(2, "task_id").await;
        raw.call(3, "release").await;
        // `wait` can only finish after `release`, which comes after it on the same stream.
        let answers = [raw.answer().await, raw.answer().await, raw.answer().await];
        let ids: Vec<_> = answers.iter().map(|a| a["id"].clone()).collect();
        assert_eq!(ids, [json!(2), json!(3), json!(1)], "modern={modern}");
        assert_eq!(structured(&answers[2])["waited"], json!(true));
    }
}

#[tokio::test(flavor = "current_thread")]
async fn lines_sent_together_are_all_answered_on_a_current_thread_runtime() {
    let mut raw = Raw::start(false).await;
    let mut batch = String::new();
    for id in 1..=64 {
        batch.push_str(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "task_id", "arguments": {}}})
            .to_string(),
        );
        batch.push('\n');
    }
    raw.write.write_all(batch.as_bytes()).await.unwrap();
    for id in 1..=64 {
        assert_eq!(raw.answer().await["id"], json!(id));
    }
}

/// A client sending waiting calls without end (200 000 took the server to 2.45 GB): past the bound, a call is
/// refused with `E_BUSY` before it starts, and once one ends there is room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_in_flight_are_bounded_and_the_one_past_the_bound_is_refused_busy() {
    let max = bridge_core::serve::MAX_STDIO_CALLS_IN_FLIGHT as u64;
    let mut raw = Raw::start(false).await;
    for id in 1..=max {
        raw.call(id, "wait").await;
    }
    raw.call(max + 1, "wait").await;
    let refused = raw.answer().await;
    assert_eq!(refused["id"], json!(max + 1), "{refused}");
    assert_eq!(refused["result"]["isError"], json!(true), "{refused}");
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("[E_BUSY]") && text.contains(&max.to_string()),
        "{text}"
    );

    raw.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    )
    .await;
    // The cancelled call's task ends, and the loop takes it off the calls in flight, soon after.
    let mut id = max + 2;
    loop {
        raw.call(id, "task_id").await;
        let answer = raw.answer().await;
        assert_eq!(answer["id"], json!(id), "{answer}");
        if answer["result"]["isError"] == json!(false) {
            break;
        }
        assert!(id < max + 2_000, "no room after a cancel: {answer}");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        id += 1;
    }
}
