//! The half of a link a bridge holds, whatever carries it: a sender that queues frames for the link's one
//! writer task, a bounded stream of frames in, and the link's end (first reason wins).
//!
//! The link's `closed` token is cancelled first, whatever ends it; then `incoming` ends. The first recorded
//! reason becomes the `Disconnected` reason of every later send and of every request failed by the drop.

use crate::error::LinkError;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

/// Frames queued towards the peer before `send_text` waits.
pub(super) const OUTGOING_QUEUE: usize = 256;
/// Bytes of frames queued towards the peer per link: `send_text` waits for room beyond it (a frame larger
/// than all of it waits for an empty queue), `try_send_text` fails with `QueueFull`. Counting frames alone let
/// a slow reader hold 256 times the largest frame.
pub const OUTGOING_BYTES: usize = 8 << 20;
/// How long `send_text` waits for room in a full outgoing queue before the peer is judged a slow reader:
/// the link is closed, the reason (with the bytes waiting) sent in the close frame and kept for every later send.
pub const SLOW_READER_PATIENCE: Duration = Duration::from_secs(30);

/// Frames queued towards the bridge before the reader stops reading (backpressure).
pub(super) const INCOMING_QUEUE: usize = 256;
/// Bytes of frames queued towards the bridge per link before the reader stops reading: a peer that floods
/// a slow bridge holds at most this much plus the one frame the reader is waiting to queue.
pub const INCOMING_BYTES: usize = 1 << 20;

pub(super) const CLOSE_NORMAL: u16 = 1000;
pub(super) const CLOSE_GOING_AWAY: u16 = 1001;
#[cfg(feature = "ws")]
pub(super) const CLOSE_PROTOCOL: u16 = 1002;
#[cfg(feature = "ws")]
pub(super) const CLOSE_INVALID_DATA: u16 = 1007;
#[cfg(feature = "ws")]
pub(super) const CLOSE_TOO_BIG: u16 = 1009;
pub(super) const CLOSE_INTERNAL: u16 = 1011;
/// Policy violation: a peer that does not read what it is sent.
pub(super) const CLOSE_POLICY: u16 = 1008;

static NEXT_LINK_ID: AtomicU64 = AtomicU64::new(1);

/// Any link, handed to the bridge: how to send, what arrives, and when it ended.
#[derive(Debug)]
pub struct Connection {
    /// Unique within this process; for logs and for "newest connection wins" bookkeeping.
    pub id: u64,
    pub sender: LinkSender,
    /// Frames from the peer, in order. Ends (`None`) when the link is closed.
    pub incoming: Incoming,
    /// Cancelled when the link dies, for any reason, before `incoming` ends.
    pub closed: CancellationToken,
}

/// Frames from the peer, bounded by count and by bytes ([`INCOMING_BYTES`]): the reader waits until the
/// bridge has taken enough.
#[derive(Debug)]
pub struct Incoming {
    rx: mpsc::Receiver<(String, OwnedSemaphorePermit)>,
    budget: Arc<Semaphore>,
}

impl Incoming {
    /// The next frame; `None` once the link is closed and every frame was taken.
    pub async fn recv(&mut self) -> Option<String> {
        // The permit goes with the frame's bytes: dropping it lets the reader queue more.
        self.rx.recv().await.map(|(frame, _permit)| frame)
    }

    /// Bytes of the budget in use: frames waiting to be taken, and the part of the budget the reader has
    /// already set aside for the next one.
    pub fn queued_bytes(&self) -> usize {
        INCOMING_BYTES.saturating_sub(self.budget.available_permits())
    }
}

/// The reader's end of [`Incoming`].
pub(super) struct Deliverer {
    tx: mpsc::Sender<(String, OwnedSemaphorePermit)>,
    budget: Arc<Semaphore>,
}

/// A link's incoming queue.
pub(super) fn incoming() -> (Deliverer, Incoming) {
    let (tx, rx) = mpsc::channel(INCOMING_QUEUE);
    let budget = Arc::new(Semaphore::new(INCOMING_BYTES));
    (
        Deliverer {
            tx,
            budget: Arc::clone(&budget),
        },
        Incoming { rx, budget },
    )
}

pub(super) enum Outgoing {
    Text(String),
    /// WebSocket links only: the watchdog's probe.
    #[cfg_attr(not(feature = "ws"), allow(dead_code))]
    Ping,
    /// Sent after everything queued before it; the reason is already recorded in `LinkState::end`.
    Close,
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

/// How a link ended: the close code we send (`None` when the peer ended it, the socket is gone, or the
/// transport has no codes) and why.
#[derive(Debug)]
pub(super) struct End {
    #[cfg_attr(not(feature = "ws"), allow(dead_code))]
    pub code: Option<u16>,
    pub reason: String,
}

#[derive(Debug)]
pub(super) struct LinkState {
    pub id: u64,
    pub closed: CancellationToken,
    end: OnceLock<End>,
    /// Cancelled when the writer has said goodbye and let go of the transport.
    pub finished: CancellationToken,
    /// Largest frame `send_text` accepts; `usize::MAX` where the transport has no limit of its own.
    max_frame: AtomicUsize,
    /// Bytes of text frames queued towards the peer and not yet taken by the writer.
    outgoing: AtomicUsize,
    /// Woken whenever the writer takes a frame.
    room: tokio::sync::Notify,
}

impl LinkState {
    /// A new link's state; `shutdown` cancels it from outside.
    pub fn new(shutdown: &CancellationToken) -> Arc<Self> {
        Arc::new(Self {
            id: NEXT_LINK_ID.fetch_add(1, Ordering::Relaxed),
            closed: shutdown.child_token(),
            end: OnceLock::new(),
            finished: CancellationToken::new(),
            max_frame: AtomicUsize::new(usize::MAX),
            outgoing: AtomicUsize::new(0),
            room: tokio::sync::Notify::new(),
        })
    }

    /// Bytes of text frames waiting for the writer.
    pub fn outgoing_bytes(&self) -> usize {
        self.outgoing.load(Ordering::Relaxed)
    }

    /// Takes room for `len` bytes if there is some (or the queue is empty); false otherwise.
    fn reserve(&self, len: usize) -> bool {
        self.outgoing
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                (queued == 0 || queued + len <= OUTGOING_BYTES).then_some(queued + len)
            })
            .is_ok()
    }

    /// Gives back room for a frame the writer took (or that never got queued).
    pub(super) fn release(&self, len: usize) {
        let _ = self
            .outgoing
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                Some(q.saturating_sub(len))
            });
        self.room.notify_waiters();
    }

    /// Makes `send_text` refuse frames over `max` bytes instead of handing them to a writer that would fail.
    pub fn limit_frames(&self, max: usize) {
        self.max_frame.store(max, Ordering::Relaxed);
    }

    /// Records why the link ends (the first reason wins) and tears it down.
    pub fn finish(&self, code: Option<u16>, reason: impl Into<String>) {
        let reason = reason.into();
        if self.end.set(End { code, reason }).is_ok()
            && let Some(end) = self.end.get()
        {
            tracing::info!(link = self.id, reason = %end.reason, "link closing");
        }
        self.closed.cancel();
    }

    /// The recorded end; a link cancelled from outside (server shutdown) has not recorded one yet.
    pub fn end(&self) -> &End {
        self.end.get_or_init(|| End {
            code: Some(CLOSE_GOING_AWAY),
            reason: "server shutting down".to_owned(),
        })
    }

    /// The bridge's half of a link whose writer reads `tx`'s other end.
    pub fn connection(
        self: &Arc<Self>,
        tx: mpsc::Sender<Outgoing>,
        incoming: Incoming,
    ) -> Connection {
        Connection {
            id: self.id,
            sender: LinkSender {
                tx,
                state: Arc::clone(self),
            },
            incoming,
            closed: self.closed.clone(),
        }
    }

    /// Hands one frame to the bridge, waiting while its queue is full (by count or by bytes); false once the
    /// link is closed.
    pub async fn deliver(&self, to: &Deliverer, frame: String) -> bool {
        // A frame larger than the whole budget waits for an empty queue, then takes all of it.
        let need = u32::try_from(frame.len().clamp(1, INCOMING_BYTES)).unwrap_or(u32::MAX);
        let permit = tokio::select! {
            biased;
            () = self.closed.cancelled() => return false,
            permit = Arc::clone(&to.budget).acquire_many_owned(need) => permit,
        };
        let Ok(permit) = permit else { return false };
        let delivered = tokio::select! {
            biased;
            () = self.closed.cancelled() => return false,
            sent = to.tx.send((frame, permit)) => sent.is_ok(),
        };
        if !delivered {
            tracing::debug!(link = self.id, "frame dropped: nobody reads this link");
        }
        true
    }
}

/// Room taken in a link's outgoing bytes for a frame not yet queued; given back when dropped.
struct Reserved<'a> {
    state: &'a LinkState,
    len: usize,
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        self.state.release(self.len);
    }
}

/// Sends to one link. Cheap to clone; all clones feed the same writer, so frames never interleave.
#[derive(Debug, Clone)]
pub struct LinkSender {
    pub(super) tx: mpsc::Sender<Outgoing>,
    pub(super) state: Arc<LinkState>,
}

impl LinkSender {
    /// The link's id, as in [`Connection::id`].
    pub fn id(&self) -> u64 {
        self.state.id
    }

    /// Queues one frame. Fails with `FrameTooLarge` over the link's frame limit. `Ok` means queued, not delivered: correlate an answer to know it arrived. Waits while
    /// the queue is full; fails with `Disconnected` (carrying the close reason) once the link is closed.
    ///
    /// The queue is bounded in bytes too ([`OUTGOING_BYTES`]): a send waits for room, and a peer that lets it
    /// wait longer than [`SLOW_READER_PATIENCE`] is disconnected as a slow reader, told so in the close frame.
    pub async fn send_text(&self, text: impl Into<String>) -> Result<(), LinkError> {
        let text = self.admit(text.into())?;
        let len = text.len();
        // One deadline for the whole send: the room in bytes, then a place among the queued frames. Small frames
        // fill the frame count long before the bytes, so a deadline on the bytes alone let a peer that reads
        // nothing hold a sender forever.
        let deadline = tokio::time::Instant::now() + SLOW_READER_PATIENCE;
        loop {
            let room = self.state.room.notified();
            if self.state.reserve(len) {
                break;
            }
            tokio::select! {
                biased;
                () = self.state.closed.cancelled() => return Err(self.disconnected()),
                () = room => {}
                () = tokio::time::sleep_until(deadline) => return Err(self.slow_reader()),
            }
        }
        // Given back unless the frame gets queued, also when the caller drops this send while it waits (a
        // bounded wait around it): room kept by a frame that never went would shrink the link for good.
        let reserved = Reserved {
            state: &self.state,
            len,
        };
        let sent = tokio::select! {
            biased;
            () = self.state.closed.cancelled() => Err(false),
            sent = self.tx.send(Outgoing::Text(text)) => sent.map_err(|_| false),
            // Err(true): the peer let the deadline pass.
            () = tokio::time::sleep_until(deadline) => Err(true),
        };
        match sent {
            Ok(()) => {
                std::mem::forget(reserved);
                Ok(())
            }
            Err(slow) => {
                // Given back first, so the reason counts only what the peer left unread.
                drop(reserved);
                Err(if slow {
                    self.slow_reader()
                } else {
                    self.disconnected()
                })
            }
        }
    }

    /// Ends a link whose peer let a send wait [`SLOW_READER_PATIENCE`]; the error for that send.
    fn slow_reader(&self) -> LinkError {
        let waiting = self.state.outgoing_bytes();
        let frames = OUTGOING_QUEUE.saturating_sub(self.tx.capacity());
        let secs = SLOW_READER_PATIENCE.as_secs();
        tracing::warn!(
            link = self.state.id,
            bytes = waiting,
            frames,
            "peer reads nothing: a send waited {secs} s for room; the link is dropped as a slow reader"
        );
        // Torn down now: the close frame would only queue behind what it does not read.
        self.state.finish(
            Some(CLOSE_POLICY),
            format!(
                "slow reader: {waiting} bytes unread for {secs} s ({frames} frames queued; limits {OUTGOING_BYTES} bytes, {OUTGOING_QUEUE} frames)"
            ),
        );
        self.disconnected()
    }

    /// What both sends check first: the link is still open and the frame within its limit.
    fn admit(&self, text: String) -> Result<String, LinkError> {
        if self.state.closed.is_cancelled() || self.state.end.get().is_some() {
            return Err(self.disconnected());
        }
        let limit = self.state.max_frame.load(Ordering::Relaxed);
        if text.len() > limit {
            return Err(LinkError::FrameTooLarge {
                size: text.len(),
                limit,
            });
        }
        Ok(text)
    }

    /// Queues one frame now or fails with `QueueFull`, never waiting: a caller holding a lock can put a
    /// frame in the link's order at that instant (a welcome before anything the lock's state lets others
    /// send). Otherwise as [`send_text`](Self::send_text).
    pub fn try_send_text(&self, text: impl Into<String>) -> Result<(), LinkError> {
        let text = self.admit(text.into())?;
        let len = text.len();
        if !self.state.reserve(len) {
            return Err(LinkError::QueueFull);
        }
        self.tx.try_send(Outgoing::Text(text)).map_err(|e| {
            self.state.release(len);
            match e {
                mpsc::error::TrySendError::Full(_) => LinkError::QueueFull,
                mpsc::error::TrySendError::Closed(_) => self.disconnected(),
            }
        })
    }

    /// Closes the link with `reason` (on WebSocket: code 1000, the reason sent to the peer truncated to 123
    /// bytes) after the frames already queued: a refusal or a last answer reaches the peer before the close.
    /// Later sends fail.
    pub fn close(&self, reason: &str) {
        self.close_with(CLOSE_NORMAL, reason);
    }

    /// [`close`](Self::close) with another WebSocket close code (1011 for a peer judged dead, say).
    pub fn close_with(&self, code: u16, reason: &str) {
        let recorded = self
            .state
            .end
            .set(End {
                code: Some(code),
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

    /// Bytes of frames queued towards the peer and not yet taken by the writer.
    pub fn queued_bytes(&self) -> usize {
        self.state.outgoing_bytes()
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

/// Every link writer in the process. Writers are spawned from connection handlers that no bridge task owns,
/// so a program about to exit waits on this to let closed links send their close frames first.
static WRITERS: std::sync::LazyLock<tokio_util::task::TaskTracker> =
    std::sync::LazyLock::new(tokio_util::task::TaskTracker::new);

/// Spawns a link's writer where [`writers_finished`] sees it.
pub(super) fn spawn_writer(writer: impl Future<Output = ()> + Send + 'static) {
    WRITERS.spawn(writer);
}

/// Waits at most `limit` until every link writer has finished, each closed link having sent its close frame
/// or given up on its peer. For the end of a process, after its links were cancelled: without it the process
/// can exit before a goodbye leaves, and the peer sees a reset instead of a close. True when all finished.
pub async fn writers_finished(limit: Duration) -> bool {
    WRITERS.close();
    let done = tokio::time::timeout(limit, WRITERS.wait()).await.is_ok();
    WRITERS.reopen();
    done
}

/// How a link's writer stopped.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PumpEnd {
    /// A close was asked for or the queue ended: the sink still works, so the caller says goodbye on it.
    Stopped,
    /// The sink returned an error. It must not be used again: some sinks (`futures`' `SinkMapErr`) panic
    /// when polled after one.
    SinkFailed,
}

/// A link's writer: sends the queued frames in order, converted by `convert` (`None` skips one the transport
/// has no use for), until a close is dequeued, the queue ends or the link is closed. The caller says goodbye
/// unless the sink failed.
pub(super) async fn pump<Si, M>(
    sink: &mut Si,
    out_rx: &mut mpsc::Receiver<Outgoing>,
    state: &LinkState,
    convert: impl Fn(Outgoing) -> Option<M>,
) -> PumpEnd
where
    Si: futures_util::Sink<M> + Unpin,
    Si::Error: std::fmt::Display,
{
    use futures_util::SinkExt;
    loop {
        let item = tokio::select! {
            biased;
            () = state.closed.cancelled() => return PumpEnd::Stopped,
            item = out_rx.recv() => item,
        };
        if let Some(Outgoing::Text(t)) = &item {
            state.release(t.len());
        }
        let msg = match item {
            Some(Outgoing::Close) | None => return PumpEnd::Stopped,
            Some(other) => match convert(other) {
                Some(msg) => msg,
                None => continue,
            },
        };
        // A peer that stopped reading blocks this send; the watchdog or probe notices and cancels.
        let sent = tokio::select! {
            biased;
            () = state.closed.cancelled() => return PumpEnd::Stopped,
            sent = sink.send(msg) => sent,
        };
        if let Err(e) = sent {
            state.finish(None, format!("send failed: {e}"));
            return PumpEnd::SinkFailed;
        }
    }
}

/// Cuts `s` to at most `max` bytes on a character boundary.
#[cfg(feature = "ws")]
pub(super) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod outgoing_bound_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn link() -> (LinkSender, mpsc::Receiver<Outgoing>) {
        let state = LinkState::new(&CancellationToken::new());
        let (tx, rx) = mpsc::channel(OUTGOING_QUEUE);
        let (_, incoming) = incoming();
        (state.connection(tx, incoming).sender, rx)
    }

    // Issue 22: the outgoing queue was bounded by count only (256 frames), so a slow reader could hold 256 x
    // the largest frame. Now at most OUTGOING_BYTES wait; try_send_text says QueueFull beyond it.
    #[tokio::test]
    async fn the_outgoing_queue_is_bounded_in_bytes() {
        let (sender, mut rx) = link();
        let frame = "x".repeat(1 << 20);
        for _ in 0..OUTGOING_BYTES / frame.len() {
            sender.try_send_text(frame.clone()).unwrap();
        }
        assert_eq!(sender.state.outgoing_bytes(), OUTGOING_BYTES);
        assert!(matches!(
            sender.try_send_text("one more"),
            Err(LinkError::QueueFull)
        ));
        // The writer taking a frame makes room again.
        let Some(Outgoing::Text(t)) = rx.recv().await else {
            panic!("a frame")
        };
        sender.state.release(t.len());
        sender.try_send_text("one more").unwrap();
    }

    // A peer that reads nothing is dropped whatever fills first: 256 small frames hold far less than the byte
    // bound, and a send behind them used to wait with no deadline at all.
    #[tokio::test(start_paused = true)]
    async fn a_reader_of_nothing_is_disconnected_when_small_frames_fill_the_queue() {
        let (sender, _rx) = link();
        for _ in 0..OUTGOING_QUEUE {
            sender.send_text("small").await.unwrap();
        }
        let err = sender.send_text("one more").await.unwrap_err();
        assert!(sender.is_closed());
        let reason = sender.close_reason().unwrap();
        assert!(
            reason.starts_with("slow reader: 1280 bytes unread for 30 s (256 frames queued"),
            "{reason}"
        );
        assert!(err.to_string().contains("slow reader"), "{err}");
        // The frame that never got queued gave its bytes back.
        assert_eq!(sender.state.outgoing_bytes(), 5 * OUTGOING_QUEUE);
    }

    // A send given up by its caller while it waited for a place gives its room back.
    #[tokio::test(start_paused = true)]
    async fn a_send_dropped_while_waiting_gives_its_room_back() {
        let (sender, _rx) = link();
        for _ in 0..OUTGOING_QUEUE {
            sender.send_text("small").await.unwrap();
        }
        let waited =
            tokio::time::timeout(Duration::from_secs(1), sender.send_text("x".repeat(1000))).await;
        assert!(waited.is_err(), "the send was still waiting");
        assert_eq!(sender.state.outgoing_bytes(), 5 * OUTGOING_QUEUE);
        assert!(!sender.is_closed());
    }

    // A peer that does not read for SLOW_READER_PATIENCE is disconnected, and the reason says why.
    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_is_disconnected_and_told() {
        let (sender, _rx) = link();
        let frame = "x".repeat(1 << 20);
        for _ in 0..OUTGOING_BYTES / frame.len() {
            sender.send_text(frame.clone()).await.unwrap();
        }
        let err = sender.send_text(frame.clone()).await.unwrap_err();
        assert!(sender.is_closed());
        let reason = sender.close_reason().unwrap();
        assert!(
            reason.starts_with("slow reader: 8388608 bytes unread"),
            "{reason}"
        );
        assert!(err.to_string().contains("slow reader"), "{err}");
    }
}
