//! The peer layer every bridge uses above its link, whatever the transport: requests correlated by id with a
//! deadline each, every request failed at once when the link drops, and liveness for transports without
//! pings.
//!
//! A bridge makes a [`Peer`] from a link's sender, publishes it (see `policy` for the single-peer and
//! registry policies), and runs [`Peer::serve`] over the link's incoming frames with its own frame parser,
//! which hands answers to [`Peer::resolve`]. When the link ends `serve` closes the correlator with the link's
//! close reason, so nothing waits out its timeout for a peer that is gone.

use crate::correlator::{Correlator, Pending};
use crate::error::LinkError;
use crate::sender::{CLOSE_INTERNAL, Incoming, LinkSender};
use std::future::Future;
use std::time::Duration;

/// One connected peer: its link and the requests waiting for its answers. Cheap to clone; clones share both.
pub struct Peer<T> {
    sender: LinkSender,
    correlator: Correlator<T>,
}

impl<T> Clone for Peer<T> {
    fn clone(&self) -> Self {
        Self {
            sender: self.sender.clone(),
            correlator: self.correlator.clone(),
        }
    }
}

impl<T> std::fmt::Debug for Peer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("link", &self.sender.id())
            .field("correlator", &self.correlator)
            .finish()
    }
}

impl<T: Send + 'static> Peer<T> {
    pub fn new(sender: LinkSender) -> Self {
        Self {
            sender,
            correlator: Correlator::new(),
        }
    }

    /// The link's id.
    pub fn id(&self) -> u64 {
        self.sender.id()
    }

    pub fn sender(&self) -> &LinkSender {
        &self.sender
    }

    pub fn correlator(&self) -> &Correlator<T> {
        &self.correlator
    }

    /// Registers a request before its frame is sent (so a fast answer cannot arrive before its entry): its id
    /// and the handle to wait with. For callers that send the frame themselves; most use
    /// [`request`](Self::request).
    pub fn start(&self) -> (u64, Pending<T>) {
        self.correlator.start()
    }

    /// Sends the frame `frame(id)` and waits for the answer to `id`, at most `timeout`. Fails with
    /// `Timeout`, with `Disconnected` (the link's close reason) if the link drops meanwhile, or with the
    /// send's error; the request's entry is gone however it ends.
    pub async fn request(
        &self,
        frame: impl FnOnce(u64) -> String,
        timeout: Duration,
    ) -> Result<T, LinkError> {
        let (id, pending) = self.correlator.start();
        self.sender.send_text(frame(id)).await?;
        pending.wait(timeout).await
    }

    /// Delivers the answer to request `id`; false (and logged) when nobody waits for it.
    pub fn resolve(&self, id: u64, value: T) -> bool {
        self.correlator.resolve(id, value)
    }

    /// Closes the link with `reason` after the frames queued before; requests in flight then fail with it.
    pub fn close(&self, reason: &str) {
        self.sender.close(reason);
    }

    /// Hands every frame from the peer to `on_frame` until the link ends, then fails every request still in
    /// flight, and every later one, with the link's close reason, which it returns.
    pub async fn serve(
        &self,
        mut incoming: Incoming,
        mut on_frame: impl FnMut(String),
    ) -> LinkError {
        while let Some(frame) = incoming.recv().await {
            on_frame(frame);
        }
        let err = self.sender.disconnected();
        let failed = self.correlator.close(err.clone());
        tracing::info!(link = self.id(), failed, reason = %err, "peer gone");
        err
    }

    /// Liveness for links without pings (byte streams): every `interval`, `probe` is asked (typically a cheap
    /// request through this peer); a probe that fails or takes longer than `timeout` closes the link, so
    /// requests fail at once instead of each waiting out its own deadline. Stops when the link closes.
    pub fn watch<P, F>(&self, interval: Duration, timeout: Duration, probe: P)
    where
        P: Fn(Peer<T>) -> F + Send + 'static,
        F: Future<Output = bool> + Send,
    {
        let peer = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    () = peer.sender.closed() => return,
                    () = tokio::time::sleep(interval) => {}
                }
                let alive = tokio::select! {
                    biased;
                    () = peer.sender.closed() => return,
                    alive = tokio::time::timeout(timeout, probe(peer.clone())) => alive,
                };
                if alive != Ok(true) {
                    let ms = timeout.as_millis();
                    peer.sender.close_with(
                        CLOSE_INTERNAL,
                        &format!("peer did not answer the liveness probe within {ms} ms"),
                    );
                    return;
                }
            }
        });
    }
}
