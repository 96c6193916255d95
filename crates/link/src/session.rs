//! One WebSocket link, accepted or dialled: the tasks that move its frames and watch its health.
//!
//! Three tasks per link: a reader (frames in), a writer (the only owner of the socket sink, so sends never
//! interleave) and a watchdog that pings `ping_interval` after the previous probe ended and closes the link
//! when nothing at all (pong or any other frame) arrives within `pong_timeout` of the ping. Neither game sends
//! pings and both answer them (browsers and Netty do so automatically), so a missing pong is the only way to
//! notice a peer that vanished without closing (a laptop lid, a killed game, an unloaded chunk).
//!
//! The tasks see the socket through [`WsIn`]/[`WsOut`], so axum's accepted sockets and tokio-tungstenite's
//! dialled ones share them; each side adapts its own message type (bridge-core's `link/ws.rs` for the
//! listener, `dial.rs` here) and calls [`start`].

use crate::sender::{
    CLOSE_INVALID_DATA, CLOSE_POLICY, CLOSE_PROTOCOL, CLOSE_TOO_BIG, Connection, Deliverer,
    Incoming, LinkSender, LinkState, OUTGOING_QUEUE, Outgoing, PumpEnd, incoming, pump,
    spawn_writer, truncate,
};
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use http::HeaderMap;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite;
use tokio_util::sync::CancellationToken;

/// How long a closing link may spend saying goodbye to its peer.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// RFC 6455 limits a close reason to 123 bytes.
const MAX_CLOSE_REASON: usize = 123;

/// The close code a link answers an unexpected socket error with (1011, internal error).
pub const CLOSE_INTERNAL: u16 = crate::sender::CLOSE_INTERNAL;

/// Sends to one link; the name WebSocket bridges know it by.
pub type WsSender = LinkSender;

/// An accepted WebSocket link, handed to the bridge's `on_connect` callback.
#[derive(Debug)]
pub struct WsConnection {
    /// Unique within this process; for logs and for "newest connection wins" bookkeeping.
    pub id: u64,
    /// The peer's address; `Some` when the listener records connect info (bridge-core's `link::serve` does).
    pub peer: Option<SocketAddr>,
    pub origin: Option<String>,
    /// The upgrade request's headers (User-Agent and the like). `Authorization` is removed.
    pub headers: HeaderMap,
    /// The upgrade request's query parameters, `token` removed (ComputerCraft clients put their id here).
    pub query: HashMap<String, String>,
    pub sender: WsSender,
    /// Text frames from the peer, in order. Ends (`None`) when the link is closed; binary frames are logged
    /// and dropped, invalid UTF-8 closes the link (code 1007) as RFC 6455 requires.
    pub incoming: Incoming,
    /// Cancelled when the link dies, for any reason, before `incoming` ends.
    pub closed: CancellationToken,
}

impl WsConnection {
    /// The transport-independent part, for code that serves links of any kind.
    pub fn into_connection(self) -> Connection {
        Connection {
            id: self.id,
            sender: self.sender,
            incoming: self.incoming,
            closed: self.closed,
        }
    }
}

/// A message read from a WebSocket, in the terms the session needs.
pub enum WsIn {
    Text(String),
    Binary(usize),
    /// Ping or pong: a sign of life and nothing else.
    Control,
    Close(Option<(u16, String)>),
}

/// A message to write.
pub enum WsOut {
    Text(String),
    Ping,
    Close(Option<(u16, String)>),
}

/// A read error: the close code to answer with (`None`: the socket is gone) and the reason.
pub type WsFailure = (Option<u16>, String);

/// Maps a tungstenite read error to the close code we answer with and a reason for logs and failed requests.
pub fn classify(e: &tungstenite::Error) -> WsFailure {
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
pub struct Accepted {
    pub peer: Option<SocketAddr>,
    pub origin: Option<String>,
    pub headers: HeaderMap,
    pub query: HashMap<String, String>,
}

/// Liveness settings; a zero `ping_interval` turns the watchdog off.
#[derive(Clone, Copy)]
pub struct Timing {
    pub ping_interval: Duration,
    pub pong_timeout: Duration,
}

/// Starts the writer and watchdog of one link and returns the bridge's half with the reader, which the
/// caller runs (inline in an upgrade task, or spawned) until the link dies.
pub fn start<St, Si>(
    stream: St,
    sink: Si,
    accepted: Accepted,
    shutdown: &CancellationToken,
    timing: Timing,
) -> (WsConnection, impl Future<Output = ()> + Send + 'static)
where
    St: Stream<Item = Result<WsIn, WsFailure>> + Send + Unpin + 'static,
    Si: Sink<WsOut, Error = String> + Send + Unpin + 'static,
{
    let state = LinkState::new(shutdown);
    tracing::info!(link = state.id, peer = ?accepted.peer, origin = ?accepted.origin, "link connected");
    let (out_tx, out_rx) = mpsc::channel(OUTGOING_QUEUE);
    let (in_tx, in_rx) = incoming();
    let liveness = Arc::new(Liveness::default());

    spawn_writer(write_loop(sink, out_rx, Arc::clone(&state)));
    if !timing.ping_interval.is_zero() {
        tokio::spawn(watchdog(
            out_tx.clone(),
            Arc::clone(&liveness),
            Arc::clone(&state),
            timing,
        ));
    }
    let conn = state.connection(out_tx, in_rx);
    let ws = WsConnection {
        id: conn.id,
        peer: accepted.peer,
        origin: accepted.origin,
        headers: accepted.headers,
        query: accepted.query,
        sender: conn.sender,
        incoming: conn.incoming,
        closed: conn.closed,
    };
    let reader = async move { read_loop(stream, in_tx, &liveness, &state).await };
    (ws, reader)
}

async fn read_loop<St>(mut stream: St, in_tx: Deliverer, liveness: &Liveness, state: &LinkState)
where
    St: Stream<Item = Result<WsIn, WsFailure>> + Unpin,
{
    loop {
        let next = tokio::select! {
            biased;
            () = state.closed.cancelled() => return,
            next = stream.next() => next,
        };
        let msg = match next {
            Some(Ok(msg)) => msg,
            Some(Err((code, reason))) => return state.finish(code, reason),
            None => return state.finish(None, "peer dropped the connection"),
        };
        liveness.frame();
        match msg {
            WsIn::Text(text) => {
                liveness.reader_blocked.store(true, Ordering::Relaxed);
                let open = state.deliver(&in_tx, text).await;
                liveness.reader_blocked.store(false, Ordering::Relaxed);
                if !open {
                    return;
                }
            }
            WsIn::Binary(bytes) => {
                static LOG: crate::log_limit::LogLimit = crate::log_limit::LogLimit::new();
                if let Some(left_out) = LOG.allow() {
                    tracing::warn!(
                        link = state.id,
                        bytes,
                        left_out,
                        "binary frame dropped: this link carries text frames only"
                    );
                }
            }
            WsIn::Control => {}
            WsIn::Close(frame) => {
                let reason = match frame {
                    Some((code, reason)) if reason.is_empty() => {
                        format!("peer closed the link (code {code})")
                    }
                    Some((code, reason)) => format!("peer closed the link (code {code}: {reason})"),
                    None => "peer closed the link".to_owned(),
                };
                // The peer started the closing handshake; tungstenite queues the reply itself.
                return state.finish(None, reason);
            }
        }
    }
}

async fn write_loop<Si>(mut sink: Si, mut out_rx: mpsc::Receiver<Outgoing>, state: Arc<LinkState>)
where
    Si: Sink<WsOut, Error = String> + Unpin,
{
    let pumped = pump(&mut sink, &mut out_rx, &state, |out| match out {
        Outgoing::Text(text) => Some(WsOut::Text(text)),
        Outgoing::Ping => Some(WsOut::Ping),
        Outgoing::Close => None,
    })
    .await;
    if pumped == PumpEnd::Stopped {
        let end = state.end();
        let goodbye = async {
            if let Some(code) = end.code {
                let reason = truncate(&end.reason, MAX_CLOSE_REASON).to_owned();
                sink.send(WsOut::Close(Some((code, reason)))).await?;
            }
            sink.close().await
        };
        // The peer may be gone; a goodbye is a courtesy, never a reason to linger.
        let _ = tokio::time::timeout(CLOSE_GRACE, goodbye).await;
    }
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
        let queued = tokio::select! {
            biased;
            () = state.closed.cancelled() => return,
            sent = tokio::time::timeout_at(deadline, tx.send(Outgoing::Ping)) => matches!(sent, Ok(Ok(()))),
        };
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
                    let ms = pong_timeout.as_millis();
                    // A blocked reader excuses the peer only while it reads what it is sent: a bridge stuck
                    // sending to this very peer (answering its flood) stops reading it too, and excusing that
                    // kept a peer that reads nothing linked for ever.
                    if !queued {
                        tracing::warn!(link = state.id, ms, "peer reads nothing: not even a ping fitted in its outgoing queue; dropped");
                        return state.finish(
                            Some(CLOSE_POLICY),
                            format!("peer read nothing for {ms} ms: its outgoing queue stayed full"),
                        );
                    }
                    if liveness.reader_blocked.load(Ordering::Relaxed) {
                        tracing::debug!(link = state.id, "ping unanswered while the bridge is not reading; not judged");
                        break;
                    }
                    return state.finish(
                        Some(CLOSE_INTERNAL),
                        format!("peer did not answer a ping within {ms} ms"),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A sink whose every send fails, as a socket the peer reset does.
    struct Broken;

    impl Sink<WsOut> for Broken {
        type Error = std::io::Error;
        fn poll_ready(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Err(std::io::ErrorKind::ConnectionReset.into()))
        }
        fn start_send(self: std::pin::Pin<&mut Self>, _: WsOut) -> Result<(), Self::Error> {
            Err(std::io::ErrorKind::ConnectionReset.into())
        }
        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Err(std::io::ErrorKind::ConnectionReset.into()))
        }
        fn poll_close(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Result<(), Self::Error>> {
            std::task::Poll::Ready(Err(std::io::ErrorKind::ConnectionReset.into()))
        }
    }

    // The bridge blocked on a send to this peer stops reading it; the peer read nothing either (not even a ping
    // fitted). That used to be excused as the bridge's own slowness, and the link stayed up for ever.
    #[tokio::test(start_paused = true)]
    async fn a_peer_that_reads_nothing_is_judged_even_while_the_reader_is_blocked() {
        let state = LinkState::new(&CancellationToken::new());
        let (tx, _rx) = mpsc::channel(1);
        tx.send(Outgoing::Text("unread".to_owned())).await.unwrap();
        let liveness = Arc::new(Liveness::default());
        liveness.reader_blocked.store(true, Ordering::Relaxed);
        let timing = Timing {
            ping_interval: Duration::from_secs(1),
            pong_timeout: Duration::from_secs(1),
        };
        watchdog(tx, liveness, state.clone(), timing).await;
        assert!(state.closed.is_cancelled());
        assert_eq!(state.end().code, Some(CLOSE_POLICY));
        assert!(
            state
                .end()
                .reason
                .starts_with("peer read nothing for 1000 ms"),
            "{}",
            state.end().reason
        );
    }

    // A blocked reader still excuses a peer that takes what it is sent: the ping went out, the answer is
    // stuck behind the bridge.
    #[tokio::test(start_paused = true)]
    async fn a_blocked_reader_still_excuses_a_peer_that_reads() {
        let state = LinkState::new(&CancellationToken::new());
        let (tx, mut rx) = mpsc::channel(4);
        let liveness = Arc::new(Liveness::default());
        liveness.reader_blocked.store(true, Ordering::Relaxed);
        let timing = Timing {
            ping_interval: Duration::from_secs(1),
            pong_timeout: Duration::from_secs(1),
        };
        let dog = tokio::spawn(watchdog(tx, liveness, state.clone(), timing));
        for _ in 0..5 {
            assert!(matches!(rx.recv().await, Some(Outgoing::Ping)));
        }
        assert!(!state.closed.is_cancelled());
        state.closed.cancel();
        dog.await.unwrap();
    }

    #[tokio::test]
    async fn a_writer_whose_socket_fails_finishes_the_link_without_touching_the_sink_again() {
        // The WebSocket sink is wrapped in `sink_map_err`, which panics if polled after an error: the goodbye
        // after a failed send used to do that, killing the writer before it marked the link finished.
        let state = LinkState::new(&CancellationToken::new());
        let (tx, rx) = mpsc::channel(4);
        tx.send(Outgoing::Text("lost".to_owned())).await.unwrap();
        let sink = Broken.sink_map_err(|e| e.to_string());
        let writer = tokio::spawn(write_loop(sink, rx, state.clone()));
        writer
            .await
            .expect("the writer ends without a panic after its sink failed");
        assert!(state.finished.is_cancelled());
        assert!(
            state.end().reason.contains("send failed"),
            "{}",
            state.end().reason
        );
    }
}
