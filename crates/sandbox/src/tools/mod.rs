//! Bouvet's eight tools with its names, parameters and result fields, extended compatibly, plus
//! `keepalive` and background processes. One file per tool family.

mod exec;
mod files;
mod lifecycle;
mod process;

use crate::manager::Manager;
use bridge_core::BridgeBuilder;
use std::sync::Arc;

pub fn register(b: &mut BridgeBuilder, mgr: &Arc<Manager>) {
    lifecycle::register(b, mgr);
    exec::register(b, mgr);
    files::register(b, mgr);
    process::register(b, mgr);
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
            ErrorKind::Io | ErrorKind::Spawn => ToolError::remote(message),
        },
        other => ToolError::internal(format!("the sandbox agent answered out of turn: {other:?}")),
    }
}
