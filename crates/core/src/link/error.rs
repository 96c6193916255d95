//! What can go wrong on a link, typed so bridges can branch on it and agents get a stable code.

use crate::error::{ErrorCode, ToolError};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A failure of a link to a live system.
///
/// `Clone` because one link drop fails many waiting requests with the same error; I/O errors are held in an
/// `Arc` for that reason.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LinkError {
    /// The link is down, or dropped while the request was in flight.
    #[error("link disconnected: {reason}")]
    Disconnected { reason: String },
    /// The live system did not answer in time.
    #[error("no answer within {} ms", elapsed.as_millis())]
    Timeout { elapsed: Duration },
    /// A frame for the peer exceeds the link's frame limit; nothing was sent.
    #[error("a frame of {size} bytes exceeds the link's limit of {limit} bytes")]
    FrameTooLarge { size: usize, limit: usize },
    /// From [`LinkSender::try_send_text`](super::LinkSender::try_send_text): the writer is behind.
    #[error("the link's send queue is full")]
    QueueFull,
    /// Dialling the peer failed (refused, unreachable, the program would not start...).
    #[error("cannot connect to {target}: {reason}")]
    Connect { target: String, reason: String },
    /// The listening port is taken. `what` names the likely holder, `env_var` how to choose another port, so
    /// the message tells the user both.
    #[error(
        "port {} on {} is already in use (is {what} running?); choose another with {env_var}",
        addr.port(),
        addr.ip()
    )]
    AddrInUse {
        addr: SocketAddr,
        what: String,
        env_var: String,
    },
    /// Listening failed for another reason (permission, address not available...).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: Arc<io::Error>,
    },
    /// An origin allow-list entry could not be understood; a configuration error.
    #[error("invalid origin pattern {pattern:?}: {reason}")]
    InvalidOriginPattern { pattern: String, reason: String },
    /// The HTTP server itself failed.
    #[error("link server failed: {0}")]
    Io(Arc<io::Error>),
}

impl LinkError {
    pub fn disconnected(reason: impl Into<String>) -> Self {
        Self::Disconnected {
            reason: reason.into(),
        }
    }

    /// The stable code an agent would see for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Disconnected { .. } => ErrorCode::Disconnected,
            Self::Timeout { .. } => ErrorCode::Timeout,
            Self::FrameTooLarge { .. } => ErrorCode::TooLarge,
            Self::Connect { .. } => ErrorCode::Disconnected,
            Self::QueueFull
            | Self::AddrInUse { .. }
            | Self::Bind { .. }
            | Self::InvalidOriginPattern { .. }
            | Self::Io(_) => ErrorCode::Internal,
        }
    }
}

impl From<io::Error> for LinkError {
    fn from(e: io::Error) -> Self {
        Self::Io(Arc::new(e))
    }
}

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
