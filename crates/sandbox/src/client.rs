//! The host side of the agent protocol over the core's link: `Peer` correlates each request's final reply
//! by id; live output (`chunk` replies, never final) goes to the request's own bounded channel.

use bridge_core::link::{Connection, LinkError, LinkSender, Peer};
use sandbox_agent::protocol::{Body, Op, Reply, Request};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// Chunks buffered per streaming request before more are dropped (the final reply still carries the
/// output's head and tail; live progress is best effort).
const CHUNK_QUEUE: usize = 64;

type Streams = Arc<Mutex<HashMap<u64, mpsc::Sender<Body>>>>;

#[derive(Clone)]
pub struct AgentClient {
    peer: Peer<Body>,
    streams: Streams,
}

impl std::fmt::Debug for AgentClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentClient")
            .field("peer", &self.peer)
            .finish()
    }
}

impl AgentClient {
    /// Serves the link's incoming frames until it ends; every request in flight then fails with its reason.
    pub fn new(conn: Connection) -> Self {
        let peer: Peer<Body> = Peer::new(conn.sender);
        let streams: Streams = Arc::default();
        let client = Self {
            peer: peer.clone(),
            streams: Arc::clone(&streams),
        };
        tokio::spawn(async move {
            let p = peer.clone();
            peer.serve(conn.incoming, move |frame| dispatch(&p, &streams, &frame))
                .await;
        });
        client
    }

    pub fn sender(&self) -> &LinkSender {
        self.peer.sender()
    }

    pub fn is_closed(&self) -> bool {
        self.peer.sender().is_closed()
    }

    /// Why the link closed, once it has (`"sandbox destroyed"`, the agent's end of the stream).
    pub fn close_reason(&self) -> Option<String> {
        self.peer.sender().close_reason()
    }

    pub fn close(&self, reason: &str) {
        self.peer.close(reason);
    }

    /// One request, its final reply within `timeout`.
    pub async fn call(&self, op: Op, timeout: Duration) -> Result<Body, LinkError> {
        self.peer.request(|id| frame(id, op), timeout).await
    }

    /// Starts a request and returns its id before waiting, so the caller can signal it meanwhile; chunks
    /// go to `chunks`.
    pub async fn start(
        &self,
        op: Op,
        chunks: Option<mpsc::Sender<Body>>,
    ) -> Result<(u64, bridge_core::link::Pending<Body>), LinkError> {
        let (id, pending) = self.peer.start();
        if let Some(tx) = chunks {
            self.streams
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id, tx);
        }
        if let Err(e) = self.peer.sender().send_text(frame(id, op)).await {
            self.unstream(id);
            return Err(e);
        }
        Ok((id, pending))
    }

    pub fn unstream(&self, id: u64) {
        self.streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    pub fn chunk_channel() -> (mpsc::Sender<Body>, mpsc::Receiver<Body>) {
        mpsc::channel(CHUNK_QUEUE)
    }
}

fn frame(id: u64, op: Op) -> String {
    // Serialising our own request types cannot fail (no maps with non-string keys, no foreign types).
    serde_json::to_string(&Request { id, op }).unwrap_or_default()
}

fn dispatch(peer: &Peer<Body>, streams: &Streams, frame: &str) {
    let reply: Reply = match serde_json::from_str(frame) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "the sandbox agent sent a frame that is not a reply");
            return;
        }
    };
    if reply.body.is_final() {
        streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&reply.id);
        peer.resolve(reply.id, reply.body);
    } else if let Some(tx) = streams
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&reply.id)
    {
        let _ = tx.try_send(reply.body);
    }
}
