//! A DAP client over the core's link: `Content-Length` frames on a child's stdio, requests correlated by `seq`
//! (or a TCP connection, for js-debug) through the core's `Peer`. Events go to a callback in arrival order;
//! `startDebugging` is accepted when the caller takes child sessions (js-debug), other reverse requests are
//! declined, as `initialize` told the adapter.

use super::adapter::{AdapterProcess, StderrTail};
use bridge_core::link::stream::StreamConfig;
use bridge_core::link::{Connection, Framing, LinkError, Peer, dial};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::process::Command;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A DAP frame larger than this ends the link (a variables page or a long output line fits many times).
const MAX_FRAME_BYTES: usize = 8 << 20;

#[derive(Debug, Clone, thiserror::Error)]
pub enum DapError {
    /// The adapter answered `success: false`.
    #[error("{command} failed: {message}")]
    Failed { command: String, message: String },
    #[error("{0}")]
    Link(#[from] LinkError),
}

#[derive(Clone)]
pub struct DapClient {
    peer: Peer<Value>,
    stderr: StderrTail,
    /// The adapter's process, when the bridge started it on this link's stdio.
    process: Option<AdapterProcess>,
}

impl DapClient {
    /// Starts the adapter `command`; `on_event` sees every event, in order. The link closes when `shutdown` is
    /// cancelled or the adapter exits; `on_closed` then runs once.
    pub fn spawn(
        command: Command,
        shutdown: &CancellationToken,
        on_event: impl FnMut(Value) + Send + 'static,
        on_closed: impl FnOnce(String) + Send + 'static,
    ) -> Result<Self, LinkError> {
        let (conn, tail, process) = super::adapter::spawn(command, stream_config(), shutdown)?;
        let mut client = Self::serve(conn, on_event, on_closed, None);
        client.stderr = tail;
        client.process = Some(process);
        Ok(client)
    }

    /// Connects to an adapter listening on TCP (js-debug). The `startDebugging` reverse requests it sends are
    /// answered with success and their arguments go to `children` (a full queue drops them: one child is
    /// expected per launch).
    pub async fn tcp(
        addr: &str,
        shutdown: &CancellationToken,
        on_event: impl FnMut(Value) + Send + 'static,
        on_closed: impl FnOnce(String) + Send + 'static,
        children: mpsc::Sender<Value>,
    ) -> Result<Self, LinkError> {
        let conn = dial::tcp(addr, stream_config(), shutdown).await?;
        Ok(Self::serve(conn, on_event, on_closed, Some(children)))
    }

    /// As [`Self::tcp`], over the Unix socket at `path` (js-debug).
    pub async fn unix(
        path: &std::path::Path,
        shutdown: &CancellationToken,
        on_event: impl FnMut(Value) + Send + 'static,
        on_closed: impl FnOnce(String) + Send + 'static,
        children: mpsc::Sender<Value>,
    ) -> Result<Self, LinkError> {
        let conn = dial::unix(path, stream_config(), shutdown).await?;
        Ok(Self::serve(conn, on_event, on_closed, Some(children)))
    }

    fn serve(
        conn: Connection,
        mut on_event: impl FnMut(Value) + Send + 'static,
        on_closed: impl FnOnce(String) + Send + 'static,
        children: Option<mpsc::Sender<Value>>,
    ) -> Self {
        let peer: Peer<Value> = Peer::new(conn.sender);
        let client = Self {
            peer: peer.clone(),
            stderr: StderrTail::default(),
            process: None,
        };
        let replier = client.clone();
        let incoming = conn.incoming;
        tokio::spawn(async move {
            let reason = peer
                .serve(incoming, |frame| {
                    let Ok(msg) = serde_json::from_str::<Value>(&frame) else {
                        tracing::warn!("adapter sent a frame that is not JSON");
                        return;
                    };
                    match msg.get("type").and_then(Value::as_str) {
                        Some("response") => {
                            if let Some(id) = msg.get("request_seq").and_then(Value::as_u64) {
                                peer.resolve(id, msg);
                            }
                        }
                        Some("event") => on_event(msg),
                        Some("request") => match &children {
                            Some(tx)
                                if msg.get("command").and_then(Value::as_str)
                                    == Some("startDebugging") =>
                            {
                                let _ = tx
                                    .try_send(msg.get("arguments").cloned().unwrap_or(Value::Null));
                                replier.reply(&msg, true);
                            }
                            _ => replier.reply(&msg, false),
                        },
                        _ => {}
                    }
                })
                .await;
            on_closed(reason.to_string());
        });
        client
    }

    /// Sends a request without waiting (debugpy answers `launch` only after `configurationDone`); the answer
    /// comes from the returned handle.
    pub async fn send(
        &self,
        command: &str,
        arguments: Value,
    ) -> Result<bridge_core::link::Pending<Value>, DapError> {
        let (seq, pending) = self.peer.start();
        let frame =
            json!({"seq": seq, "type": "request", "command": command, "arguments": arguments});
        self.peer.sender().send_text(frame.to_string()).await?;
        Ok(pending)
    }

    /// A request and its response body.
    pub async fn request(
        &self,
        command: &str,
        arguments: Value,
        timeout: Duration,
    ) -> Result<Value, DapError> {
        let pending = self.send(command, arguments).await?;
        body_of(command, pending.wait(timeout).await?)
    }

    fn reply(&self, msg: &Value, success: bool) {
        let seq = msg.get("seq").and_then(Value::as_u64).unwrap_or(0);
        let command = msg
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let sender = self.peer.sender().clone();
        tokio::spawn(async move {
            let reply = if success {
                json!({"seq": 0, "type": "response", "request_seq": seq, "command": command, "success": true})
            } else {
                json!({"seq": 0, "type": "response", "request_seq": seq, "command": command,
                    "success": false, "message": "not supported by this client"})
            };
            let _ = sender.send_text(reply.to_string()).await;
        });
    }

    /// The latest bytes the adapter wrote to stderr (empty for a TCP adapter).
    pub fn stderr_tail(&self) -> String {
        self.stderr.text()
    }

    pub fn close(&self, reason: &str) {
        self.peer.close(reason);
    }

    /// The adapter's process, when it runs on this link's stdio (not for a server reached over a socket).
    pub fn process(&self) -> Option<&AdapterProcess> {
        self.process.as_ref()
    }

    pub fn is_closed(&self) -> bool {
        self.peer.sender().is_closed()
    }
}

fn stream_config() -> StreamConfig {
    StreamConfig {
        framing: Framing::ContentLength,
        max_frame_bytes: MAX_FRAME_BYTES,
    }
}

/// The body of a response, or its failure with the adapter's message.
pub fn body_of(command: &str, response: Value) -> Result<Value, DapError> {
    if response.get("success").and_then(Value::as_bool) == Some(true) {
        Ok(response.get("body").cloned().unwrap_or(Value::Null))
    } else {
        let message = response
            .pointer("/body/error/format")
            .or_else(|| response.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("no message")
            .to_owned();
        Err(DapError::Failed {
            command: command.to_owned(),
            message,
        })
    }
}
