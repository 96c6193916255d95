//! A link over any byte stream (TCP, a Unix socket, a child's stdio): a reader cutting frames with a
//! [`FrameCodec`] and a writer that owns the write half, so frames never interleave. The same
//! [`Connection`] a WebSocket link gives, so the peer layer above does not know the difference.
//!
//! A byte stream has no pings; liveness is the peer layer's probe ([`Peer::watch`](crate::Peer::watch)).
//! A framing error (oversize, garbage, invalid UTF-8) ends the link with the error as its reason: after a
//! framing error the stream cannot be resynchronised.

use crate::sender::{
    Connection, Deliverer, LinkState, OUTGOING_QUEUE, Outgoing, PumpEnd, incoming, pump,
    spawn_writer,
};
use crate::{FrameCodec, Framing};
use futures_util::{SinkExt, StreamExt};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;

/// How long a closing link may spend flushing its last frames.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Frame settings of a byte-stream link.
#[derive(Debug, Clone, Copy)]
pub struct StreamConfig {
    pub framing: Framing,
    /// Largest frame either way; a bigger one from the peer ends the link, a bigger one from the bridge fails
    /// its send.
    pub max_frame_bytes: usize,
}

impl StreamConfig {
    /// `framing` with frames of at most 16 MiB.
    pub fn new(framing: Framing) -> Self {
        Self {
            framing,
            max_frame_bytes: 16 << 20,
        }
    }
}

/// Starts a link over `read`/`write`. Cancelling `shutdown` closes it.
pub fn spawn<R, W>(read: R, write: W, cfg: StreamConfig, shutdown: &CancellationToken) -> Connection
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let state = LinkState::new(shutdown);
    state.limit_frames(cfg.max_frame_bytes);
    tracing::info!(link = state.id, framing = ?cfg.framing, "link connected");
    let (out_tx, out_rx) = mpsc::channel(OUTGOING_QUEUE);
    let (in_tx, in_rx) = incoming();
    let reader = FramedRead::new(read, FrameCodec::new(cfg.framing, cfg.max_frame_bytes));
    let writer = FramedWrite::new(write, FrameCodec::new(cfg.framing, cfg.max_frame_bytes));
    tokio::spawn(read_loop(reader, in_tx, Arc::clone(&state)));
    spawn_writer(write_loop(writer, out_rx, Arc::clone(&state)));
    state.connection(out_tx, in_rx)
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut frames: FramedRead<R, FrameCodec>,
    in_tx: Deliverer,
    state: Arc<LinkState>,
) {
    loop {
        let next = tokio::select! {
            biased;
            () = state.closed.cancelled() => return,
            next = frames.next() => next,
        };
        match next {
            Some(Ok(frame)) => {
                if !state.deliver(&in_tx, frame).await {
                    return;
                }
            }
            Some(Err(e)) => return state.finish(None, e.to_string()),
            None => return state.finish(None, "peer closed the stream"),
        }
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut frames: FramedWrite<W, FrameCodec>,
    mut out_rx: mpsc::Receiver<Outgoing>,
    state: Arc<LinkState>,
) {
    let pumped = pump(&mut frames, &mut out_rx, &state, |out| match out {
        Outgoing::Text(text) => Some(text),
        Outgoing::Ping | Outgoing::Close => None,
    })
    .await;
    if pumped == PumpEnd::Stopped {
        // Flush what was queued before a close, then end our direction: the peer reads EOF.
        let _ = tokio::time::timeout(CLOSE_GRACE, frames.close()).await;
    }
    state.finish(None, "link closed");
    state.finished.cancel();
}
