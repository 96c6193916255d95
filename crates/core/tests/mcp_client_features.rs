//! What a tool may ask of the client: log lines, the user's answer (elicitation: a request mid-call in the
//! legacy era, an InputRequiredResult round in 2026-07-28), and required client capabilities.
#![allow(clippy::unwrap_used, clippy::expect_used, deprecated)]

use crate::support;

use bridge_core::tool::{ClientCapability, InputRequest, InputRequired, LogLevel};
use bridge_core::{Bridge, Content, ToolCtx, ToolError, ToolSpec};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, LoggingMessageNotificationParam, SetLevelRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::{ClientHandler, ClientServiceExt, ErrorData, RoleClient};
use serde_json::{Map, Value, json};
use std::time::Duration;
use support::{ERAS, Era, within};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn bridge() -> Bridge {
    let mut b = Bridge::builder("feat", "0");
    b.tool(
        ToolSpec::new("chatty", "Logs at debug and warning.").raw_handler(
            Map::new(),
            |_, ctx: ToolCtx| async move {
                ctx.log(LogLevel::Debug, json!("debug line")).await;
                ctx.log(LogLevel::Warning, json!("warning line")).await;
                Ok(done("logged"))
            },
        ),
    );
    b.tool(
        ToolSpec::new("ask", "Asks the user a question first.").raw_handler(
            Map::new(),
            |_, ctx: ToolCtx| async move {
                if let Some(answer) = ctx.input_response("q") {
                    let round = ctx.request_state().cloned().unwrap_or(Value::Null);
                    return Ok(done(&format!(
                        "answer={} state={round}",
                        answer["content"]["answer"]
                    ))
                    .into());
                }
                // Legacy sessions can ask mid-call; the stateless era must hand a round back to the client.
                if ctx.client_supports(ClientCapability::Elicitation)
                    && let Ok(e) = ctx.elicit("Proceed?", schema()).await
                {
                    let answer = e
                        .content
                        .map(|c| c["answer"].clone())
                        .unwrap_or(Value::Null);
                    return Ok(done(&format!("answer={answer} state=mid-call")).into());
                }
                let mut requests = std::collections::BTreeMap::new();
                requests.insert(
                    "q".to_owned(),
                    InputRequest::Elicit {
                        message: "Proceed?".into(),
                        schema: schema(),
                    },
                );
                Ok(bridge_core::tool::Outcome::InputRequired(InputRequired {
                    requests,
                    state: Some(json!({"round": 1})),
                }))
            },
        ),
    );
    b.tool(
        ToolSpec::new("needs_sampling", "Refuses clients without sampling.").raw_handler(
            Map::new(),
            |_, ctx: ToolCtx| async move {
                if !ctx.client_supports(ClientCapability::Sampling) {
                    return Err(ToolError::missing_client_capability(
                        ClientCapability::Sampling,
                    ));
                }
                Ok(done("sampled"))
            },
        ),
    );
    b.build().unwrap()
}

fn schema() -> Value {
    json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]})
}

fn done(text: &str) -> bridge_core::tool::ToolOutput {
    bridge_core::tool::ToolOutput {
        structured: None,
        content: vec![Content::Text(text.to_owned())],
    }
}

#[derive(Clone)]
struct User {
    logs: mpsc::UnboundedSender<Value>,
}

impl ClientHandler for User {
    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = Some(json!({"answer": "yes"}));
        Ok(result)
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        let _ = self.logs.send(params.data);
    }

    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::default();
        config.capabilities = ClientCapabilities::builder().enable_elicitation().build();
        config
    }
}

async fn client(
    era: Era,
) -> (
    RunningService<RoleClient, User>,
    mpsc::UnboundedReceiver<Value>,
) {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let (read, write) = tokio::io::split(server_io);
    tokio::spawn(bridge_core::serve::serve_io(
        bridge(),
        read,
        write,
        &[],
        CancellationToken::new(),
    ));
    let (logs_tx, logs) = mpsc::unbounded_channel();
    let lifecycle = match era {
        Era::Legacy => rmcp::ClientLifecycleMode::Initialize,
        Era::Modern => rmcp::ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        },
    };
    let service = User { logs: logs_tx }
        .serve_with_lifecycle(tokio::io::split(client_io), lifecycle)
        .await
        .unwrap();
    (service, logs)
}

fn text(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

#[tokio::test]
async fn logs_reach_a_legacy_client_only_at_or_above_its_level() {
    let (client, mut logs) = client(Era::Legacy).await;
    client
        .call_tool(CallToolRequestParams::new("chatty"))
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(Duration::from_millis(200), logs.recv())
            .await
            .is_err(),
        "no logs before logging/setLevel"
    );
    client
        .set_level(SetLevelRequestParams::new(rmcp::model::LoggingLevel::Info))
        .await
        .unwrap();
    client
        .call_tool(CallToolRequestParams::new("chatty"))
        .await
        .unwrap();
    assert_eq!(
        within("a log line", logs.recv()).await.unwrap(),
        json!("warning line")
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(200), logs.recv())
            .await
            .is_err(),
        "debug is below info"
    );
}

#[tokio::test]
async fn elicitation_in_both_eras() {
    for era in ERAS {
        let (client, _logs) = client(era).await;
        // rmcp's client answers InputRequiredResult rounds through create_elicitation and retries for us.
        let result = client
            .call_tool(CallToolRequestParams::new("ask"))
            .await
            .unwrap();
        let expected = match era {
            Era::Legacy => "answer=\"yes\" state=mid-call",
            Era::Modern => "answer=\"yes\" state={\"round\":1}",
        };
        assert_eq!(text(&result), expected, "{era:?}");
    }
}

#[tokio::test]
async fn a_forged_request_state_is_refused() {
    let (client, _logs) = client(Era::Modern).await;
    let mut params = CallToolRequestParams::new("ask");
    params.request_state = Some("forged-state".into());
    let err = client.call_tool(params).await.unwrap_err();
    assert!(err.to_string().contains("integrity"), "{err}");
}

#[tokio::test]
async fn a_missing_client_capability_is_json_rpc_32021() {
    for era in ERAS {
        let (client, _logs) = client(era).await;
        let err = client
            .call_tool(CallToolRequestParams::new("needs_sampling"))
            .await
            .unwrap_err();
        let text = format!("{err:?}");
        assert!(text.contains("-32021"), "{era:?}: {text}");
    }
}
