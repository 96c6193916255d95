//! Bouvet's eight tools with its names, parameters and result fields, extended compatibly, plus
//! `keepalive` and background processes. One file per tool family.

mod exec;
mod expose;
pub(crate) mod files;
mod lifecycle;
mod pause;
mod process;
pub(crate) mod session;
mod templates;
pub(crate) mod workspace;

use crate::manager::Manager;
use bridge_core::BridgeBuilder;
use serde::Serialize;
use std::sync::Arc;

/// The most a tool result may take on the wire, its content counted twice (as structured JSON, and again as
/// that JSON escaped into the text block). The Python MCP client refuses an SSE event over 1 MiB
/// (`DEFAULT_MAX_SSE_EVENT_SIZE`, in every Streamable HTTP response that streams), so results stay below it with
/// room for the envelope; rmcp and the TypeScript SDK take more, but one rule serves all three.
pub(crate) const RESULT_BUDGET: usize = 150 << 10; // two copies, each under the core's RESULT_CAP_BYTES

/// What `value` costs in a result: its JSON, plus that JSON again as an escaped string in the text block.
pub(crate) fn wire_bytes<T: Serialize>(value: &T) -> usize {
    let json = serde_json::to_string(value).unwrap_or_default();
    let text = serde_json::to_string(&json).map_or(json.len() * 2, |t| t.len());
    json.len() + text
}

/// The first and last `keep / 2` bytes of `s`, cut on character boundaries, with nothing in between (the
/// result's `truncated` says it was cut).
pub(crate) fn head_tail(s: &str, keep: usize) -> String {
    if s.len() <= keep {
        return s.to_owned();
    }
    let mut head = keep / 2;
    while !s.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = s.len() - (keep - keep / 2);
    while !s.is_char_boundary(tail) {
        tail += 1;
    }
    let mut out = String::with_capacity(head + s.len() - tail);
    out.push_str(&s[..head]);
    out.push_str(&s[tail..]);
    out
}

pub fn register(b: &mut BridgeBuilder, mgr: &Arc<Manager>) {
    lifecycle::register(b, mgr);
    exec::register(b, mgr);
    files::register(b, mgr);
    process::register(b, mgr);
    session::register(b, mgr);
    pause::register(b, mgr);
    workspace::register(b, mgr);
    expose::register(b, mgr);
    templates::register(b, mgr);
}

/// Maps an agent-side failure to the agent-facing error.
pub(crate) fn agent_error(body: sandbox_agent::protocol::Body) -> bridge_core::ToolError {
    use bridge_core::ToolError;
    use sandbox_agent::protocol::{Body, ErrorKind};
    match body {
        Body::Error { kind, message } => match kind {
            ErrorKind::NotFound => ToolError::not_found(message),
            ErrorKind::Invalid => ToolError::new(bridge_core::ErrorCode::InvalidArgument, message),
            ErrorKind::Limit => ToolError::too_large(message),
            ErrorKind::Busy => ToolError::new(bridge_core::ErrorCode::Busy, message),
            ErrorKind::Io | ErrorKind::Spawn => ToolError::remote(message),
        },
        other => ToolError::internal(format!("the sandbox agent answered out of turn: {other:?}")),
    }
}

/// Cuts a result's stdout and stderr (head and tail, in proportion) until it fits [`RESULT_BUDGET`]. Returns
/// whether anything was cut.
pub(crate) fn fit_output<T: Serialize>(
    value: &mut T,
    streams: fn(&mut T) -> (&mut String, &mut String),
) -> bool {
    let mut cut = false;
    // Each round aims 10% under, so one or two rounds suffice; the bound only guards against a loop.
    for _ in 0..8 {
        let wire = wire_bytes(value);
        if wire <= RESULT_BUDGET {
            break;
        }
        let (out, err) = streams(value);
        if out.is_empty() && err.is_empty() {
            break;
        }
        let scale = |len: usize| len * (RESULT_BUDGET / 1024) / (wire / 1024).max(1) * 9 / 10;
        *out = head_tail(out, scale(out.len()));
        *err = head_tail(err, scale(err.len()));
        cut = true;
    }
    cut
}
