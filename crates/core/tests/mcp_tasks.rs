//! The tasks extension (SEP-2663) through the rmcp client, in both eras: which calls become tasks, and a task's
//! life (tasks/get, tasks/update with input, tasks/cancel). The tools wait on gates the test opens, so nothing
//! here depends on timing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use bridge_core::error::ERROR_META_KEY;
use bridge_core::tool::{InputRequest, InputRequired, Outcome, TaskSupport};
use bridge_core::{Bridge, Content, ToolCtx, ToolError, ToolSpec};
use mcp_testkit::{ERAS, Era, pipe_client, pipe_client_declaring, within};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, DetailedTask,
    GetTaskParams, TaskPayload, TaskStatus, UpdateTaskParams,
};
use rmcp::{Peer, RoleClient};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::{Semaphore, mpsc};

struct TestTools {
    bridge: Bridge,
    /// Each permit lets one waiting call of `gated` finish.
    gate: Arc<Semaphore>,
    /// One message per `gated` call whose handler was dropped before it finished (cancelled).
    dropped: mpsc::UnboundedReceiver<()>,
}

struct SignalOnDrop(Option<mpsc::UnboundedSender<()>>);

impl SignalOnDrop {
    /// The call finished: its end is not a cancellation.
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for SignalOnDrop {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

fn no_args() -> Map<String, Value> {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
        .as_object()
        .unwrap()
        .clone()
}

fn text(s: impl Into<String>) -> Outcome {
    Outcome::Done(bridge_core::tool::ToolOutput {
        structured: None,
        content: vec![Content::Text(s.into())],
    })
}

fn tools() -> TestTools {
    let gate = Arc::new(Semaphore::new(0));
    let (dropped_tx, dropped) = mpsc::unbounded_channel();
    let mut b = Bridge::builder("tasks-test", "0.0.0");
    let g = gate.clone();
    b.tool(
        ToolSpec::new("gated", "Finishes when the test opens the gate")
            .task_support(TaskSupport::Optional)
            .raw_handler(no_args(), move |_, _ctx| {
                let gate = g.clone();
                let guard = SignalOnDrop(Some(dropped_tx.clone()));
                async move {
                    gate.acquire().await.unwrap().forget();
                    guard.disarm();
                    Ok::<_, ToolError>(text("opened"))
                }
            }),
    );
    b.tool(
        ToolSpec::new("instant", "Answers without waiting")
            .task_support(TaskSupport::Optional)
            .raw_handler(no_args(), |_, _ctx| async {
                Ok::<_, ToolError>(text("now"))
            }),
    );
    b.tool(
        ToolSpec::new("required", "Runs only as a task")
            .task_support(TaskSupport::Required)
            .raw_handler(no_args(), |_, _ctx| async {
                tokio::task::yield_now().await;
                Ok::<_, ToolError>(text("done"))
            }),
    );
    b.tool(
        ToolSpec::new("failing", "Fails with a tool error from inside a task")
            .task_support(TaskSupport::Optional)
            .raw_handler(no_args(), |_, _ctx| async {
                tokio::task::yield_now().await;
                Err::<Outcome, _>(ToolError::not_found("no such thing").with_hint("list first"))
            }),
    );
    b.tool(
        ToolSpec::new("asks", "Asks for a color from inside a task, then reports it")
            .task_support(TaskSupport::Optional)
            .raw_handler(no_args(), |_, ctx: ToolCtx| async move {
                tokio::task::yield_now().await;
                Ok::<_, ToolError>(match ctx.input_response("color") {
                    Some(answer) => text(format!("color: {}", answer["content"]["color"])),
                    None => Outcome::InputRequired(InputRequired {
                        requests: BTreeMap::from([(
                            "color".to_owned(),
                            InputRequest::Elicit {
                                message: "Which color?".into(),
                                schema: json!({"type": "object", "properties": {"color": {"type": "string"}}}),
                            },
                        )]),
                        state: None,
                    }),
                })
            }),
    );
    TestTools {
        bridge: b.build().unwrap(),
        gate,
        dropped,
    }
}

fn with_tasks() -> ClientCapabilities {
    ClientCapabilities::builder().enable_tasks().build()
}

async fn call_once(peer: &Peer<RoleClient>, tool: &str) -> CallToolResponse {
    within(
        tool,
        peer.call_tool_once(CallToolRequestParams::new(tool.to_owned())),
    )
    .await
    .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

async fn task_of(peer: &Peer<RoleClient>, tool: &str) -> String {
    match call_once(peer, tool).await {
        CallToolResponse::Task(created) => {
            assert_eq!(created.task.status, TaskStatus::Working);
            assert!(created.task.ttl_ms.is_some_and(|ttl| ttl > 0));
            created.task.task_id
        }
        other => panic!("{tool} should have become a task, got {other:?}"),
    }
}

async fn get(peer: &Peer<RoleClient>, id: &str) -> DetailedTask {
    peer.get_task(GetTaskParams::new(id)).await.unwrap().task
}

/// Polls tasks/get until the task leaves `working` (the condition the test waits on).
async fn settled(peer: &Peer<RoleClient>, id: &str) -> DetailedTask {
    within("the task to settle", async {
        loop {
            let task = get(peer, id).await;
            if task.status() != TaskStatus::Working {
                return task;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
}

fn result_of(task: &DetailedTask) -> &Map<String, Value> {
    match &task.payload {
        TaskPayload::Completed { result } => result,
        other => panic!("expected a completed task, got {other:?}"),
    }
}

#[tokio::test]
async fn a_waiting_call_becomes_a_task_that_tasks_get_follows_to_its_result() {
    for era in ERAS {
        let tt = tools();
        let client = pipe_client_declaring(tt.bridge.clone(), era, vec![], with_tasks()).await;
        let id = task_of(&client, "gated").await;
        // Registered before the id was returned: an immediate tasks/get finds it, still running.
        assert_eq!(get(&client, &id).await.status(), TaskStatus::Working);
        tt.gate.add_permits(1);
        let task = settled(&client, &id).await;
        assert_eq!(task.status(), TaskStatus::Completed, "{era:?}");
        let result = result_of(&task);
        assert_eq!(result["content"][0]["text"], "opened");
        assert_ne!(result.get("isError"), Some(&json!(true)));
    }
}

#[tokio::test]
async fn a_call_that_does_not_wait_is_answered_directly() {
    for era in ERAS {
        let tt = tools();
        let client = pipe_client_declaring(tt.bridge.clone(), era, vec![], with_tasks()).await;
        match call_once(&client, "instant").await {
            CallToolResponse::Complete(result) => {
                assert_eq!(result.content[0].as_text().unwrap().text, "now")
            }
            other => panic!("{era:?}: expected a direct result, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn clients_without_the_extension_get_ordinary_calls_or_minus_32021() {
    for era in ERAS {
        let tt = tools();
        let client = pipe_client(tt.bridge.clone(), era, vec![]).await;
        tt.gate.add_permits(1);
        match call_once(&client, "gated").await {
            CallToolResponse::Complete(result) => {
                assert_eq!(result.content[0].as_text().unwrap().text, "opened")
            }
            other => panic!("{era:?}: an optional task tool runs inline, got {other:?}"),
        }
        let refused = client
            .call_tool_once(CallToolRequestParams::new("required"))
            .await
            .unwrap_err();
        let rmcp::ServiceError::McpError(error) = refused else {
            panic!("{era:?}: expected a JSON-RPC error, got {refused:?}")
        };
        assert_eq!(error.code.0, -32021, "{era:?}");
        let data = error.data.unwrap();
        assert!(
            data["requiredCapabilities"]["extensions"]
                .get("io.modelcontextprotocol/tasks")
                .is_some(),
            "{data}"
        );
        // Nor may it reach the task methods.
        let gated = client.get_task(GetTaskParams::new("x")).await.unwrap_err();
        assert!(
            matches!(&gated, rmcp::ServiceError::McpError(e) if e.code.0 == -32021),
            "{gated:?}"
        );
    }
}

#[tokio::test]
async fn a_required_task_tool_runs_as_a_task() {
    let tt = tools();
    let client = pipe_client_declaring(tt.bridge.clone(), Era::Modern, vec![], with_tasks()).await;
    let id = task_of(&client, "required").await;
    let task = settled(&client, &id).await;
    assert_eq!(result_of(&task)["content"][0]["text"], "done");
}

#[tokio::test]
async fn a_tool_error_in_a_task_completes_with_is_error_and_the_code_in_meta() {
    for era in ERAS {
        let tt = tools();
        let client = pipe_client_declaring(tt.bridge.clone(), era, vec![], with_tasks()).await;
        let id = task_of(&client, "failing").await;
        let task = settled(&client, &id).await;
        assert_eq!(task.status(), TaskStatus::Completed, "{era:?}");
        let result = result_of(&task);
        assert_eq!(result["isError"], true);
        assert!(result.get("structuredContent").is_none());
        assert_eq!(result["_meta"][ERROR_META_KEY]["code"], "E_NOT_FOUND");
        assert_eq!(result["_meta"][ERROR_META_KEY]["hint"], "list first");
    }
}

#[tokio::test]
async fn tasks_cancel_stops_the_handler_and_the_task_reads_cancelled() {
    for era in ERAS {
        let mut tt = tools();
        let client = pipe_client_declaring(tt.bridge.clone(), era, vec![], with_tasks()).await;
        let id = task_of(&client, "gated").await;
        client
            .cancel_task(CancelTaskParams::new(&id))
            .await
            .unwrap();
        within("the handler to be dropped", tt.dropped.recv())
            .await
            .unwrap();
        assert_eq!(get(&client, &id).await.status(), TaskStatus::Cancelled);
        // Cancelling a finished task is acknowledged the same way and changes nothing.
        client
            .cancel_task(CancelTaskParams::new(&id))
            .await
            .unwrap();
        assert_eq!(get(&client, &id).await.status(), TaskStatus::Cancelled);
    }
}

#[tokio::test]
async fn input_asked_inside_a_task_is_answered_with_tasks_update() {
    for era in ERAS {
        let tt = tools();
        let client = pipe_client_declaring(tt.bridge.clone(), era, vec![], with_tasks()).await;
        let id = task_of(&client, "asks").await;
        let waiting = settled(&client, &id).await;
        let TaskPayload::InputRequired { input_requests } = &waiting.payload else {
            panic!("{era:?}: expected input_required, got {waiting:?}")
        };
        assert_eq!(input_requests.keys().collect::<Vec<_>>(), ["color"]);
        // An answer to a key that was not asked is ignored; the task keeps waiting.
        let stray = UpdateTaskParams::new(&id, BTreeMap::from([("other".into(), json!({}))]));
        client.update_task(stray).await.unwrap();
        assert_eq!(get(&client, &id).await.status(), TaskStatus::InputRequired);

        let answer = json!({"action": "accept", "content": {"color": "teal"}});
        let update = UpdateTaskParams::new(&id, BTreeMap::from([("color".into(), answer)]));
        client.update_task(update).await.unwrap();
        let done = settled(&client, &id).await;
        assert_eq!(result_of(&done)["content"][0]["text"], "color: \"teal\"");
    }
}

#[tokio::test]
async fn an_unknown_task_id_is_invalid_params() {
    let tt = tools();
    let client = pipe_client_declaring(tt.bridge.clone(), Era::Modern, vec![], with_tasks()).await;
    let error = client
        .get_task(GetTaskParams::new("no-such-task"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, rmcp::ServiceError::McpError(e) if e.code.0 == -32602 && e.message.contains("no-such-task")),
        "{error:?}"
    );
}
