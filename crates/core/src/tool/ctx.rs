//! The per-call context a handler gets: progress reporting and cancellation, with no SDK types.

use super::interaction::{ClientCapability, ClientLink, Elicitation, Inputs, LogLevel};
use crate::error::ToolError;
use futures::future::BoxFuture;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The most bytes of JSON a log message's data takes when sent ([`ToolCtx::log`]).
pub const MAX_LOG_BYTES: usize = 16 * 1024;

/// The last progress sent for a call.
struct Sent {
    done: f64,
    total: Option<f64>,
    at: Instant,
}

/// Where progress goes. Implemented at the MCP edge; absent when the client sent no progress token.
pub(crate) trait ProgressSink: Send + Sync {
    fn send(&self, done: f64, total: Option<f64>, message: String) -> BoxFuture<'static, ()>;
}

/// Where a call's progress goes, and what was last sent there.
struct Progress {
    sink: Arc<dyn ProgressSink>,
    /// The spec requires progress to increase; a handler that reports out of order must not break clients.
    last: Mutex<Sent>,
    /// Set when the call is cancelled: no heartbeat goes out while its handler cleans up.
    ended: AtomicBool,
}

/// Context of one tool call.
#[derive(Clone)]
pub struct ToolCtx {
    /// `None` when the client sent no progress token: then nothing is allocated for it.
    progress: Option<Arc<Progress>>,
    cancel: CancellationToken,
    /// Set once the handler asks about its cancellation: it then gets time to stop what it started.
    watched: Arc<AtomicBool>,
    client: Option<Arc<dyn ClientLink>>,
    /// `None` when the call carries no answers (nearly every call): no allocation for an empty set.
    inputs: Option<Arc<Inputs>>,
    /// The most bytes this call's result may hold before the core cuts it (the caller's `maxResultBytes`).
    result_cap: usize,
}

/// A call's progress heartbeat ([`ToolCtx::heartbeat`]): it shares the context's progress state.
#[derive(Clone)]
pub(crate) struct Heartbeat {
    progress: Arc<Progress>,
}

impl Heartbeat {
    /// When progress was last sent (or the call started); `None` once the call was cancelled, when no heartbeat
    /// is due any more.
    pub(crate) fn sent_at(&self) -> Option<Instant> {
        if self.progress.ended.load(Ordering::Acquire) {
            return None;
        }
        self.progress.last.lock().ok().map(|last| last.at)
    }

    /// Tells the client the call is still running, when nothing was sent for
    /// [`PROGRESS_HEARTBEAT`](crate::tool::PROGRESS_HEARTBEAT): a millionth above the last value sent (or 0),
    /// so the handler's own next value still counts as an increase.
    pub(crate) async fn beat(&self, running_for: std::time::Duration) {
        if self.progress.ended.load(Ordering::Acquire) {
            return;
        }
        let (done, total) = {
            let Ok(mut last) = self.progress.last.lock() else {
                return;
            };
            if last.at.elapsed() < crate::tool::PROGRESS_HEARTBEAT {
                return;
            }
            // A step far above one ulp: JSON parsers are not all exact to the last bit, and two values one ulp
            // apart can arrive equal. A millionth is still invisible in any display of progress.
            let done = if last.done.is_finite() {
                last.done + last.done.abs().max(1.0) * 1e-6
            } else {
                0.0
            };
            last.done = done;
            last.at = Instant::now();
            (done, last.total.filter(|total| done <= *total))
        };
        let message = format!("still running after {} s", running_for.as_secs());
        self.progress.sink.send(done, total, message).await;
    }

    /// No more heartbeats: the call was cancelled.
    pub(crate) fn end(&self) {
        self.progress.ended.store(true, Ordering::Release);
    }
}

impl ToolCtx {
    /// A call's context; `started`: when the call started, from which its first heartbeat counts.
    pub(crate) fn new(
        progress: Option<Arc<dyn ProgressSink>>,
        cancel: CancellationToken,
        started: Instant,
    ) -> Self {
        Self {
            progress: progress.map(|sink| {
                Arc::new(Progress {
                    sink,
                    last: Mutex::new(Sent {
                        done: f64::NEG_INFINITY,
                        total: None,
                        at: started,
                    }),
                    ended: AtomicBool::new(false),
                })
            }),
            cancel,
            watched: Arc::new(AtomicBool::new(false)),
            client: None,
            inputs: None,
            result_cap: crate::tool::RESULT_CAP_BYTES,
        }
    }

    pub(crate) fn with_result_cap(mut self, cap: usize) -> Self {
        self.result_cap = cap;
        self
    }

    /// The most bytes this call's result may hold before the core cuts it: a handler that pages (events,
    /// listings) fills a page up to it instead of having the page cut.
    pub fn result_cap(&self) -> usize {
        self.result_cap
    }

    pub(crate) fn with_client(mut self, client: Arc<dyn ClientLink>, inputs: Inputs) -> Self {
        self.client = Some(client);
        self.inputs =
            (!inputs.responses.is_empty() || inputs.state.is_some()).then(|| Arc::new(inputs));
        self
    }

    /// A context that reports nowhere: for calling handlers outside MCP (one-shot CLI commands, tests).
    pub fn detached() -> Self {
        Self::new(None, CancellationToken::new(), Instant::now())
    }

    /// Reports progress if the client asked for it. Values that do not increase are dropped, and so is all
    /// progress once the call is cancelled, timed out or answered: the client no longer follows its token (a
    /// handler cleaning up after a cancel, or a helper task holding a clone of this context, sends nothing).
    pub async fn progress(&self, done: f64, total: Option<f64>, message: impl Into<String>) {
        let Some(progress) = &self.progress else {
            return;
        };
        if self.cancel.is_cancelled() {
            return;
        }
        {
            let Ok(mut last) = progress.last.lock() else {
                return;
            };
            if done <= last.done {
                return;
            }
            *last = Sent {
                done,
                total,
                at: Instant::now(),
            };
        }
        let mut message = message.into();
        // A message quotes what the live system says; a host shows it as it comes.
        if message.len() > crate::error::MAX_MESSAGE_CHARS {
            message = crate::text::shorten_middle(&message, crate::error::MAX_MESSAGE_CHARS);
        }
        progress.sink.send(done, total, message).await;
    }

    /// What the call's heartbeat needs, when the client asked for progress at all: held instead of a clone
    /// of the context, whose cancellation token locks its tree node when cloned and again when dropped, for
    /// a call that mostly answers at once.
    pub(crate) fn heartbeat(&self) -> Option<Heartbeat> {
        Some(Heartbeat {
            progress: self.progress.clone()?,
        })
    }

    /// Cancelled when the client cancels the call, the call times out, or the server shuts down.
    ///
    /// A handler that asks for its cancellation (here or with [`is_cancelled`](Self::is_cancelled)) owns its
    /// clean-up: when the client cancels, the call's future keeps running for up to
    /// [`CANCEL_GRACE`](crate::tool::CANCEL_GRACE) so it can stop what it started (a kill sent to a live system)
    /// before it is dropped. A handler that never asks is dropped at once.
    pub fn cancellation(&self) -> CancellationToken {
        self.watched.store(true, Ordering::Release);
        self.cancel.clone()
    }

    pub fn is_cancelled(&self) -> bool {
        self.watched.store(true, Ordering::Release);
        self.cancel.is_cancelled()
    }

    /// Whether the handler has asked about its cancellation (see [`cancellation`](Self::cancellation)).
    pub(crate) fn watch(&self) -> Arc<AtomicBool> {
        self.watched.clone()
    }

    /// Shares `watched` with other contexts of the same call (a task's rounds), so asking in any counts.
    pub(crate) fn with_watch(mut self, watched: Arc<AtomicBool>) -> Self {
        self.watched = watched;
        self
    }

    /// Sends a log line to the client, if it asked for logs at this level (legacy `logging/setLevel`, or the
    /// request's log level in the stateless era). Otherwise nothing is sent.
    /// `data` is sent with at most [`MAX_LOG_BYTES`] of JSON (the rest shortened as an error's details are):
    /// it often carries what a live system wrote.
    pub async fn log(&self, level: LogLevel, data: impl Into<Value>) {
        if let Some(client) = &self.client {
            let data = data.into();
            let data = crate::json_size::shortened(&data, MAX_LOG_BYTES).unwrap_or(data);
            client.log(level, data).await;
        }
    }

    /// Whether the client declared `capability`.
    pub fn client_supports(&self, capability: ClientCapability) -> bool {
        self.client.as_ref().is_some_and(|c| c.supports(capability))
    }

    /// Asks the user a question through the client (legacy era; in the stateless era return
    /// [`InputRequired`](super::InputRequired) instead).
    pub async fn elicit(
        &self,
        message: impl Into<String>,
        schema: Value,
    ) -> Result<Elicitation, ToolError> {
        match &self.client {
            Some(client) => client.elicit(message.into(), schema).await,
            None => Err(ToolError::missing_client_capability(
                ClientCapability::Elicitation,
            )),
        }
    }

    /// Asks the client's model to complete `prompt`; returns the `CreateMessageResult` as JSON.
    pub async fn sample(
        &self,
        prompt: impl Into<String>,
        max_tokens: u32,
    ) -> Result<Value, ToolError> {
        match &self.client {
            Some(client) => client.sample(prompt.into(), max_tokens).await,
            None => Err(ToolError::missing_client_capability(
                ClientCapability::Sampling,
            )),
        }
    }

    /// On a retried call, the client's answer to the input request named `key`. Only JSON objects count:
    /// anything else is treated as missing so the tool asks again.
    pub fn input_response(&self, key: &str) -> Option<&serde_json::Map<String, Value>> {
        self.inputs.as_deref()?.response(key)
    }

    /// On a retried call, the state the tool attached to its `InputRequired`, verified untampered.
    pub fn request_state(&self) -> Option<&Value> {
        self.inputs.as_deref()?.state()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::tool::interaction::{ClientCapability, Elicitation, Inputs};

    /// What was sent to the client: progress messages and log data.
    #[derive(Default)]
    struct Sent {
        messages: Mutex<Vec<String>>,
        logs: Mutex<Vec<Value>>,
    }

    impl ProgressSink for Sent {
        fn send(&self, _: f64, _: Option<f64>, message: String) -> BoxFuture<'static, ()> {
            self.messages.lock().unwrap().push(message);
            Box::pin(async {})
        }
    }

    impl ClientLink for Sent {
        fn log(&self, _: LogLevel, data: Value) -> BoxFuture<'static, ()> {
            self.logs.lock().unwrap().push(data);
            Box::pin(async {})
        }
        fn supports(&self, _: ClientCapability) -> bool {
            false
        }
        fn elicit(
            &self,
            _: String,
            _: Value,
        ) -> BoxFuture<'static, Result<Elicitation, ToolError>> {
            Box::pin(async { Err(ToolError::unsupported("not in this test")) })
        }
        fn sample(&self, _: String, _: u32) -> BoxFuture<'static, Result<Value, ToolError>> {
            Box::pin(async { Err(ToolError::unsupported("not in this test")) })
        }
    }

    /// A live system's text in a progress message or in log data (a debug adapter's output event, 4 MiB a
    /// line) reaches the client bounded; small ones as they were.
    #[tokio::test]
    async fn progress_messages_and_log_data_are_sent_bounded() {
        let sent = Arc::new(Sent::default());
        let ctx = ToolCtx::new(
            Some(sent.clone() as Arc<dyn ProgressSink>),
            CancellationToken::new(),
            Instant::now(),
        )
        .with_client(sent.clone(), Inputs::default());
        ctx.progress(1.0, None, "step one").await;
        let huge = format!("start {} end", "o".repeat(4 << 20));
        ctx.progress(2.0, None, huge.clone()).await;
        ctx.log(LogLevel::Info, serde_json::json!({"output": "small"}))
            .await;
        ctx.log(
            LogLevel::Info,
            serde_json::json!({"event": "output", "output": huge}),
        )
        .await;

        let messages = sent.messages.lock().unwrap();
        assert_eq!(messages[0], "step one");
        assert!(
            messages[1].len() < crate::error::MAX_MESSAGE_CHARS + 40,
            "{}",
            messages[1].len()
        );
        assert!(messages[1].starts_with("start o") && messages[1].ends_with("o end"));
        let logs = sent.logs.lock().unwrap();
        assert_eq!(logs[0], serde_json::json!({"output": "small"}));
        assert!(serde_json::to_string(&logs[1]).unwrap().len() <= MAX_LOG_BYTES);
        assert_eq!(logs[1]["event"], "output");
        assert!(logs[1]["output"].as_str().unwrap().ends_with("o end"));
    }
}
