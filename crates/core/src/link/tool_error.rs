//! The agent-facing form of a link failure: each [`LinkError`] (from `bridge-link`, which knows nothing of
//! MCP) becomes a [`ToolError`] with its stable code and the details a caller can branch on.

use crate::error::ToolError;
use bridge_link::LinkError;

impl From<LinkError> for ToolError {
    fn from(e: LinkError) -> Self {
        let message = e.to_string();
        match e {
            LinkError::Disconnected { reason } => ToolError::disconnected(message)
                .with_details(serde_json::json!({ "reason": reason })),
            LinkError::Timeout { elapsed } => {
                let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
                ToolError::timeout(message).with_details(serde_json::json!({ "elapsed_ms": ms }))
            }
            LinkError::FrameTooLarge { size, limit } => ToolError::too_large(message)
                .with_hint("send less per call")
                .with_details(serde_json::json!({"bytes": size, "limit": limit})),
            LinkError::Connect { target, reason } => ToolError::disconnected(message)
                .with_details(serde_json::json!({"target": target, "reason": reason})),
            LinkError::AddrInUse { env_var, .. } => ToolError::internal(message).with_hint(
                format!("stop the other program or choose another port with {env_var}"),
            ),
            LinkError::QueueFull
            | LinkError::Bind { .. }
            | LinkError::InvalidOriginPattern { .. }
            | LinkError::Io(_) => ToolError::internal(message),
        }
    }
}
