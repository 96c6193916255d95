//! The per-call context a handler gets: progress reporting and cancellation, with no SDK types.

use futures::future::BoxFuture;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Where progress goes. Implemented at the MCP edge; absent when the client sent no progress token.
pub(crate) trait ProgressSink: Send + Sync {
    fn send(&self, done: f64, total: Option<f64>, message: String) -> BoxFuture<'static, ()>;
}

/// Context of one tool call.
#[derive(Clone)]
pub struct ToolCtx {
    progress: Option<Arc<dyn ProgressSink>>,
    /// The spec requires progress to increase; a handler that reports out of order must not break clients.
    last_progress: Arc<Mutex<f64>>,
    cancel: CancellationToken,
}

impl ToolCtx {
    pub(crate) fn new(progress: Option<Arc<dyn ProgressSink>>, cancel: CancellationToken) -> Self {
        Self {
            progress,
            last_progress: Arc::new(Mutex::new(f64::NEG_INFINITY)),
            cancel,
        }
    }

    /// A context that reports nowhere: for calling handlers outside MCP (one-shot CLI commands, tests).
    pub fn detached() -> Self {
        Self::new(None, CancellationToken::new())
    }

    /// Reports progress if the client asked for it. Values that do not increase are dropped.
    pub async fn progress(&self, done: f64, total: Option<f64>, message: impl Into<String>) {
        let Some(sink) = &self.progress else { return };
        {
            let Ok(mut last) = self.last_progress.lock() else {
                return;
            };
            if done <= *last {
                return;
            }
            *last = done;
        }
        sink.send(done, total, message.into()).await;
    }

    /// Cancelled when the client cancels the call, the call times out, or the server shuts down.
    pub fn cancellation(&self) -> CancellationToken {
        self.cancel.clone()
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
}
