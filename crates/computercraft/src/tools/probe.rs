//! `probe-computers`, as docs/computercraft.md specifies: one `pong from <id> (Label: <label>)` line per answer,
//! `timeout from ...` for computers that stay silent, `No computers connected.` when there are none.

use crate::state::State;
use bridge_core::{ErrorCode, NoArgs, Rendered, ToolCtx, ToolError, ToolSpec};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, Clone, Copy, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ProbeStatus {
    Pong,
    Timeout,
    Error,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ProbeAnswer {
    pub computer: u32,
    pub label: Option<String>,
    pub status: ProbeStatus,
    /// The line as printed in the text result.
    pub line: String,
    /// Round trip, for answers.
    pub latency_ms: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ProbeOut {
    /// One per linked computer, ordered by id.
    pub answers: Vec<ProbeAnswer>,
}

pub fn specs(state: &Arc<State>) -> Vec<ToolSpec> {
    let s = state.clone();
    let probe_timeout = state.cfg.probe_timeout;
    vec![
        ToolSpec::new(
            "probe-computers",
            "Ping every linked ComputerCraft computer and report who answers: one line `pong from <id> (Label: \
             <label>)` per answer, `timeout from <id> (Label: <label>)` for computers that stay silent, or \
             `No computers connected.`. Takes no arguments.",
        )
        .title("Probe Computers")
        .read_only()
        .open_world()
        .timeout(probe_timeout + Duration::from_secs(5))
        .handler_with_text(move |_: NoArgs, _ctx: ToolCtx| {
            let s = s.clone();
            async move { Ok::<_, ToolError>(probe(&s).await) }
        }),
    ]
}

pub async fn probe(state: &State) -> Rendered<ProbeOut> {
    let computers = state.registry.snapshot();
    if computers.is_empty() {
        return Rendered {
            value: ProbeOut { answers: vec![] },
            text: "No computers connected.".into(),
        };
    }
    let timeout = state.cfg.probe_timeout;
    let answers = futures::future::join_all(computers.iter().map(|c| async move {
        let started = Instant::now();
        let result = c.probe(timeout).await;
        let who = c.describe();
        let (status, line, latency) = match result {
            Ok(Value::String(line)) => (ProbeStatus::Pong, line, Some(started.elapsed())),
            Ok(other) => (
                ProbeStatus::Pong,
                format!("pong from {who}: {other}"),
                Some(started.elapsed()),
            ),
            Err(e) if matches!(e.code(), ErrorCode::Timeout | ErrorCode::Busy) => {
                (ProbeStatus::Timeout, format!("timeout from {who}"), None)
            }
            Err(e) => (
                ProbeStatus::Error,
                format!("error from {who}: {}", e.message()),
                None,
            ),
        };
        ProbeAnswer {
            computer: c.id(),
            label: c.label(),
            status,
            line,
            latency_ms: latency.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        }
    }))
    .await;
    let text = answers
        .iter()
        .map(|a| a.line.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    Rendered {
        value: ProbeOut { answers },
        text,
    }
}
