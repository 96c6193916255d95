//! One accepted WebSocket link: the tasks that move its frames and watch its health.
//!
//! Three tasks per link: a reader (frames in), a writer (the only owner of the socket sink, so sends never
//! interleave) and a watchdog that pings `ping_interval` after the previous probe ended and closes the link
//! when nothing at all (pong or any other frame) arrives within `pong_timeout` of the ping. Neither game sends
//! pings and both answer them (browsers and Netty do so automatically), so a missing pong is the only way to
//! notice a peer that vanished without closing (a laptop lid, a killed game, an unloaded chunk).
//!
//! The link's `closed` token is cancelled first, whatever ends it; then `incoming` ends. The first recorded
//! reason wins and becomes the `Disconnected` reason of every later send.

use super::error::LinkError;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use http::HeaderMap;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite;
use tokio_util::sync::CancellationToken;

/// Frames queued towards the peer before `send_text` waits.
const OUTGOING_QUEUE: usize = 256;
/// Text frames queued towards the bridge before the reader stops reading (backpressure).
const INCOMING_QUEUE: usize = 256;
/// How long a closing link may spend saying goodbye to its peer.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// RFC 6455 limits a close reason to 123 bytes.
const MAX_CLOSE_REASON: usize = 123;

const CLOSE_NORMAL: u16 = 1000;
const CLOSE_GOING_AWAY: u16 = 1001;
const CLOSE_PROTOCOL: u16 = 1002;
const CLOSE_INVALID_DATA: u16 = 1007;
const CLOSE_TOO_BIG: u16 = 1009;
const CLOSE_INTERNAL: u16 = 1011;

static NEXT_LINK_ID: AtomicU64 = AtomicU64::new(1);

/// An accepted link, handed to the bridge's `on_connect` callback.
#[derive(Debug)]
pub struct WsConnection {
    /// Unique within this process; for logs and for "newest connection wins" bookkeeping.
    pub id: u64,
    /// The peer's address; `Some` when served by [`serve`](super::serve) (which records connect info).
    pub peer: Option<SocketAddr>,
    pub origin: Option<String>,
    /// The upgrade request's headers (User-Agent and the like). `Authorization` is removed.
    pub headers: HeaderMap,
    /// The upgrade request's query parameters, `token` removed (ComputerCraft clients put their id here).
    pub query: HashMap<String, String>,
    pub sender: WsSender,
    /// Text frames from the peer, in order. Ends (`None`) when the link is closed; binary frames are logged
    /// and dropped, invalid UTF-8 closes the link (code 1007) as RFC 6455 requires.
    pub incoming: mpsc::Receiver<String>,
    /// Cancelled when the link dies, for any reason, before `incoming` ends.
    pub closed: CancellationToken,
}

enum Outgoing {
    Text(String),
    Ping,
    /// Sent after everything queued before it; the reason is already recorded in `LinkState::end`.
    Close,
}

/// How a link ended: the close code we send (`None` when the peer ended it or the socket is gone) and why.
#[derive(Debug)]
struct End {
    code: Option<u16>,
    reason: String,
}

#[derive(Debug)]
struct LinkState {
    id: u64,
    closed: CancellationToken,
    end: OnceLock<End>,
    /// Cancelled when the writer has said goodbye and let go of the socket.
    finished: CancellationToken,
}

impl LinkState {
    /// Records why the link ends (the first reason wins) and tears it down.
    fn finish(&self, code: Option<u16>, reason: impl Into<String>) {
        let reason = reason.into();
        if self.end.set(End { code, reason }).is_ok()
            && let Some(end) = self.end.get()
        {
            tracing::info!(link = self.id, reason = %end.reason, "link closing");
        }
        self.closed.cancel();
    }

    /// The recorded end; a link cancelled from outside (server shutdown) has not recorded one yet.
    fn end(&self) -> &End {
        self.end.get_or_init(|| End {
            code: Some(CLOSE_GOING_AWAY),
            reason: "server shutting down".to_owned(),
        })
    }
}

/// Sends to one link. Cheap to clone; all clones feed the same writer, so frames never interleave.
#[derive(Debug, Clone)]
pub struct WsSender {
    tx: mpsc::Sender<Outgoing>,
    state: Arc<LinkState>,
}

impl std::fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Text(t) => write!(f, "Text({} bytes)", t.len()),
            Self::Ping => f.write_str("Ping"),
            Self::Close => f.write_str("Close"),
        }
    }
}

impl WsSender {
    /// The link's id, as in [`WsConnection::id`].
    pub fn id(&self) -> u64 {
        self.state.id
    }

    /// Queues one text frame. `Ok` means queued, not delivered: correlate an answer to know it arrived.
    /// Waits while the queue is full; fails with `Disconnected` (carrying the close reason) once the link
    /// is closed.
    pub async fn send_text(&self, text: impl Into<String>) -> Result<(), LinkError> {
        if self.state.closed.is_cancelled() || self.state.end.get().is_some() {
            return Err(self.disconnected());
        }
        tokio::select! {
            biased;
            () = self.state.closed.cancelled() => Err(self.disconnected()),
            sent = self.tx.send(Outgoing::Text(text.into())) => sent.map_err(|_| self.disconnected()),
        }
    }

    /// Closes the link with code 1000 and `reason` (sent to the peer, truncated to 123 bytes), after the
    /// frames already queued: a refusal or a last answer reaches the peer before the close. Later sends fail.
    pub fn close(&self, reason: &str) {
        let recorded = self
            .state
            .end
            .set(End {
                code: Some(CLOSE_NORMAL),
                reason: reason.to_owned(),
            })
            .is_ok();
        if !recorded {
            return;
        }
        tracing::info!(link = self.state.id, reason, "link closing");
        // A full queue means the peer stopped reading; it would not get the close frame either.
        if self.tx.try_send(Outgoing::Close).is_err() {
            self.state.closed.cancel();
        }
    }

    /// Waits until the link is closed and the goodbye has been sent (or given up on), for a program that
    /// must not exit before its peer has been told.
    pub async fn finished(&self) {
        self.state.finished.cancelled().await;
    }

    pub fn is_closed(&self) -> bool {
        self.state.closed.is_cancelled()
    }

    /// Waits until the link is closed.
    pub async fn closed(&self) {
        self.state.closed.cancelled().await;
    }

    /// Why the link closed; `None` while it is open.
    pub fn close_reason(&self) -> Option<String> {
        self.is_closed().then(|| self.state.end().reason.clone())
    }

    /// The error for requests on this link now that it is closed: `Disconnected` with the close reason.
    pub fn disconnected(&self) -> LinkError {
        LinkError::disconnected(
            self.close_reason()
                .unwrap_or_else(|| "link is closing".to_owned()),
        )
    }
}

/// Signs of life from the peer, shared by the reader (which records them) and the watchdog (which judges).
#[derive(Default)]
struct Liveness {
    frames: AtomicU64,
    /// The reader is waiting for the bridge to take a frame, so it cannot see pongs; not the peer's fault.
    reader_blocked: AtomicBool,
    seen: Notify,
}

impl Liveness {
    fn frame(&self) {
        self.frames.fetch_add(1, Ordering::Relaxed);
        self.seen.notify_waiters();
    }
}

/// What the handshake learned about the peer.
pub(super) struct Accepted {
    pub peer: Option<SocketAddr>,
    pub origin: Option<String>,
    pub headers: HeaderMap,
    pub query: HashMap<String, String>,
}

/// Liveness settings; a zero `ping_interval` turns the watchdog off.
#[derive(Clone, Copy)]
pub(super) struct Timing {
    pub ping_interval: Duration,
    pub pong_timeout: Duration,
}

/// Runs one link until it dies. `on_connect` receives the bridge's half before the first frame is read.
pub(super) async fn run(
    socket: WebSocket,
    accepted: Accepted,
    shutdown: &CancellationToken,
    timing: Timing,
    on_connect: impl FnOnce(WsConnection),
) {
    let state = Arc::new(LinkState {
        id: NEXT_LINK_ID.fetch_add(1, Ordering::Relaxed),
        closed: shutdown.child_token(),
        end: OnceLock::new(),
        finished: CancellationToken::new(),
    });
    tracing::info!(link = state.id, peer = ?accepted.peer, origin = ?accepted.origin, "link connected");
    let (out_tx, out_rx) = mpsc::channel(OUTGOING_QUEUE);
    let (in_tx, in_rx) = mpsc::channel(INCOMING_QUEUE);
    let liveness = Arc::new(Liveness::default());
    let (sink, stream) = socket.split();

    tokio::spawn(write_loop(sink, out_rx, Arc::clone(&state)));
    if !timing.ping_interval.is_zero() {
        tokio::spawn(watchdog(
            out_tx.clone(),
            Arc::clone(&liveness),
            Arc::clone(&state),
            timing,
        ));
    }
    on_connect(WsConnection {
        id: state.id,
        peer: accepted.peer,
        origin: accepted.origin,
        headers: accepted.headers,
        query: accepted.query,
        sender: WsSender {
            tx: out_tx,
            state: Arc::clone(&state),
        },
        incoming: in_rx,
        closed: state.closed.clone(),
    });
    read_loop(stream, in_tx, &liveness, &state).await;
}

async fn read_loop(
    mut stream: SplitStream<WebSocket>,
    in_tx: mpsc::Sender<String>,
    liveness: &Liveness,
    state: &LinkState,
) {
    loop {
        let next = tokio::select! {
            biased;
            () = state.closed.cancelled() => return,
            next = stream.next() => next,
        };
        let msg = match next {
            Some(Ok(msg)) => msg,
            Some(Err(e)) => {
                let (code, reason) = classify(e);
                return state.finish(code, reason);
            }
            None => return state.finish(None, "peer dropped the connection"),
        };
        liveness.frame();
        match msg {
            Message::Text(text) => {
                liveness.reader_blocked.store(true, Ordering::Relaxed);
                let delivered = tokio::select! {
                    biased;
                    () = state.closed.cancelled() => return,
                    sent = in_tx.send(text.as_str().to_owned()) => sent.is_ok(),
                };
                liveness.reader_blocked.store(false, Ordering::Relaxed);
                if !delivered {
                    tracing::debug!(
                        link = state.id,
                        "text frame dropped: nobody reads this link"
                    );
                }
            }
            Message::Binary(data) => tracing::warn!(
                link = state.id,
                bytes = data.len(),
                "binary frame dropped: this link carries text frames only"
            ),
            Message::Ping(_) | Message::Pong(_) => {}
            Message::Close(frame) => {
                let reason = match frame {
                    Some(f) if f.reason.is_empty() => {
                        format!("peer closed the link (code {})", f.code)
                    }
                    Some(f) => format!(
                        "peer closed the link (code {}: {})",
                        f.code,
                        f.reason.as_str()
                    ),
                    None => "peer closed the link".to_owned(),
                };
                // The peer started the closing handshake; tungstenite queues the reply itself.
                return state.finish(None, reason);
            }
        }
    }
}

/// Maps a read error to the close code we answer with and a reason for logs and for failed requests.
fn classify(e: axum::Error) -> (Option<u16>, String) {
    let inner = e.into_inner();
    let Some(e) = inner.downcast_ref::<tungstenite::Error>() else {
        return (Some(CLOSE_INTERNAL), format!("websocket error: {inner}"));
    };
    use tungstenite::error::{CapacityError, ProtocolError};
    match e {
        tungstenite::Error::Capacity(CapacityError::MessageTooLong { size, max_size }) => (
            Some(CLOSE_TOO_BIG),
            format!("peer sent a {size}-byte frame; the limit is {max_size} bytes"),
        ),
        tungstenite::Error::Utf8(_) => (
            Some(CLOSE_INVALID_DATA),
            "peer sent a text frame that is not valid UTF-8".to_owned(),
        ),
        tungstenite::Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => (
            None,
            "peer dropped the connection without closing it".to_owned(),
        ),
        tungstenite::Error::Io(io) => (None, format!("connection failed: {io}")),
        tungstenite::Error::Protocol(p) => (Some(CLOSE_PROTOCOL), format!("protocol error: {p}")),
        other => (Some(CLOSE_INTERNAL), format!("websocket error: {other}")),
    }
}

async fn write_loop(
    mut sink: SplitSink<WebSocket, Message>,
    mut out_rx: mpsc::Receiver<Outgoing>,
    state: Arc<LinkState>,
) {
    loop {
        let item = tokio::select! {
            biased;
            () = state.closed.cancelled() => break,
            item = out_rx.recv() => item,
        };
        let msg = match item {
            Some(Outgoing::Text(text)) => Message::Text(text.into()),
            Some(Outgoing::Ping) => Message::Ping(Default::default()),
            Some(Outgoing::Close) | None => break,
        };
        // A peer that stopped reading blocks this send; the watchdog notices and cancels.
        let sent = tokio::select! {
            biased;
            () = state.closed.cancelled() => break,
            sent = sink.send(msg) => sent,
        };
        if let Err(e) = sent {
            state.finish(None, format!("send failed: {e}"));
            break;
        }
    }
    let end = state.end();
    let goodbye = async {
        if let Some(code) = end.code {
            let frame = CloseFrame {
                code,
                reason: Utf8Bytes::from(truncate(&end.reason, MAX_CLOSE_REASON)),
            };
            sink.send(Message::Close(Some(frame))).await?;
        }
        sink.close().await
    };
    // The peer may be gone; a goodbye is a courtesy, never a reason to linger.
    let _ = tokio::time::timeout(CLOSE_GRACE, goodbye).await;
    // A close asked for by the bridge ends the link only now, after its queued frames went out.
    state.closed.cancel();
    state.finished.cancel();
}

async fn watchdog(
    tx: mpsc::Sender<Outgoing>,
    liveness: Arc<Liveness>,
    state: Arc<LinkState>,
    timing: Timing,
) {
    let Timing {
        ping_interval: interval,
        pong_timeout,
    } = timing;
    loop {
        tokio::select! {
            biased;
            () = state.closed.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        let before = liveness.frames.load(Ordering::Relaxed);
        let deadline = Instant::now() + pong_timeout;
        // Queue the ping behind any pending frames, but a full queue does not stop the clock: a peer that
        // stopped reading is as dead as one that stopped answering.
        tokio::select! {
            biased;
            () = state.closed.cancelled() => return,
            _ = tokio::time::timeout_at(deadline, tx.send(Outgoing::Ping)) => {}
        }
        loop {
            // Registered before the check, so a frame arriving in between still wakes us.
            let seen = liveness.seen.notified();
            if liveness.frames.load(Ordering::Relaxed) != before {
                break;
            }
            tokio::select! {
                biased;
                () = state.closed.cancelled() => return,
                () = seen => {}
                () = tokio::time::sleep_until(deadline) => {
                    if liveness.reader_blocked.load(Ordering::Relaxed) {
                        tracing::debug!(link = state.id, "ping unanswered while the bridge is not reading; not judged");
                        break;
                    }
                    let ms = pong_timeout.as_millis();
                    return state.finish(
                        Some(CLOSE_INTERNAL),
                        format!("peer did not answer a ping within {ms} ms"),
                    );
                }
            }
        }
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
