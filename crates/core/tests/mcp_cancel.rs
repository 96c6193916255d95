//! A cancelled call's handler always learns it was cancelled and finishes its clean-up (a bridge sends its
//! live system a kill there), on every transport and era, however the cancel and the call's answer race.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_core::serve::HttpOptions;
use bridge_core::{Bridge, ToolCtx, ToolSpec};
use mcp_testkit::start_call;
use rmcp::model::CallToolRequestParams;
use std::time::Duration;
use support::*;
use tokio::sync::mpsc;

const ROUNDS: usize = 100;

/// How a `hold` call ended, as its handler saw it.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The handler saw its cancellation and finished its (asynchronous) clean-up.
    Cleaned,
    /// The handler's future was dropped before its clean-up finished: a live system would keep running.
    Dropped,
}

/// `hold` waits for its cancellation, then cleans up in a few awaited steps, like a bridge that must tell its
/// live system to stop. `started` says the handler runs; `ends` says how it ended.
fn hold_bridge() -> (
    Bridge,
    mpsc::UnboundedReceiver<()>,
    mpsc::UnboundedReceiver<End>,
) {
    hold_bridge_with(bridge_core::tool::TaskSupport::Never)
}

fn hold_bridge_with(
    tasks: bridge_core::tool::TaskSupport,
) -> (
    Bridge,
    mpsc::UnboundedReceiver<()>,
    mpsc::UnboundedReceiver<End>,
) {
    let (started_tx, started) = mpsc::unbounded_channel();
    let (ends_tx, ends) = mpsc::unbounded_channel();
    let mut b = Bridge::builder("hold", "1.0.0");
    b.tool(
        ToolSpec::new("hold", "Wait until cancelled, then clean up.")
            .timeout(Duration::from_secs(3_000))
            .task_support(tasks)
            .handler(move |_: bridge_core::NoArgs, ctx: ToolCtx| {
                let started = started_tx.clone();
                let ends = ends_tx.clone();
                async move {
                    let mut guard = EndGuard(Some(ends));
                    let _ = started.send(());
                    ctx.cancellation().cancelled().await;
                    // The clean-up awaits: a message to the live system and its answer.
                    for _ in 0..3 {
                        tokio::task::yield_now().await;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    if let Some(ends) = guard.0.take() {
                        let _ = ends.send(End::Cleaned);
                    }
                    Ok(serde_json::json!({ "cancelled": true }))
                }
            }),
    );
    (b.build().unwrap(), started, ends)
}

struct EndGuard(Option<mpsc::UnboundedSender<End>>);

impl Drop for EndGuard {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(End::Dropped);
        }
    }
}

async fn cancel_rounds(client: &Client, started: &mut mpsc::UnboundedReceiver<()>) -> usize {
    let mut sent = 0;
    for _ in 0..ROUNDS {
        let handle = start_call(client, "hold", serde_json::json!({})).await;
        within("the handler to start", started.recv())
            .await
            .unwrap();
        handle.cancel(Some("stop".into())).await.unwrap();
        sent += 1;
    }
    sent
}

async fn ends_of(ends: &mut mpsc::UnboundedReceiver<End>, n: usize) -> Vec<End> {
    let mut seen = Vec::with_capacity(n);
    for _ in 0..n {
        seen.push(within("the handler to end", ends.recv()).await.unwrap());
    }
    seen
}

fn assert_all_cleaned(what: &str, seen: &[End]) {
    let cleaned = seen.iter().filter(|e| **e == End::Cleaned).count();
    assert_eq!(
        cleaned,
        seen.len(),
        "{what}: {cleaned} of {} cancelled calls finished their clean-up; the others were dropped mid-way",
        seen.len()
    );
}

#[tokio::test]
async fn a_cancelled_handler_always_finishes_its_clean_up_on_stdio() {
    for era in ERAS {
        let (bridge, mut started, mut ends) = hold_bridge();
        let client = stdio_client(bridge, era, vec![]).await;
        let n = cancel_rounds(&client, &mut started).await;
        assert_all_cleaned(&format!("stdio {era:?}"), &ends_of(&mut ends, n).await);
    }
}

#[tokio::test]
async fn a_cancelled_handler_always_finishes_its_clean_up_on_http() {
    for era in ERAS {
        let (bridge, mut started, mut ends) = hold_bridge();
        let server = start_http(bridge, HttpOptions::default(), vec![]).await;
        let client = http_client(server.addr, era).await;
        let n = cancel_rounds(&client, &mut started).await;
        assert_all_cleaned(&format!("http {era:?}"), &ends_of(&mut ends, n).await);
    }
}

/// tasks/cancel on a task-capable tool: the same clean-up, every time.
#[tokio::test]
async fn a_cancelled_task_always_finishes_its_clean_up() {
    use rmcp::model::{CallToolResponse, CancelTaskParams, ClientCapabilities};
    let tasks = ClientCapabilities::builder().enable_tasks().build();
    for era in ERAS {
        let (bridge, mut started, mut ends) =
            hold_bridge_with(bridge_core::tool::TaskSupport::Optional);
        let client = mcp_testkit::pipe_client_declaring(bridge, era, vec![], tasks.clone()).await;
        for _ in 0..ROUNDS {
            let created = within(
                "the task",
                client.call_tool_once(
                    CallToolRequestParams::new("hold").with_arguments(serde_json::Map::new()),
                ),
            )
            .await
            .unwrap();
            let CallToolResponse::Task(created) = created else {
                panic!("hold should have become a task: {created:?}");
            };
            within("the handler to start", started.recv())
                .await
                .unwrap();
            client
                .cancel_task(CancelTaskParams::new(&created.task.task_id))
                .await
                .unwrap();
        }
        assert_all_cleaned(&format!("tasks {era:?}"), &ends_of(&mut ends, ROUNDS).await);
    }
}
