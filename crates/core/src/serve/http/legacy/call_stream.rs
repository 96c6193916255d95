//! The events of a front call that waits, kept for `Last-Event-ID` as rmcp keeps a request-wise stream's, and
//! the transport of our peer, which routes a call's progress to them.

use super::super::progress_only::{ProgressRoute, undeliverable};
use super::*;

/// What rmcp's `LocalSessionManager` primes a request's stream with (`SessionConfig::sse_retry`, 3 s).
pub(super) const RETRY_MS: u64 = 3000;
/// Events of a request's stream kept for `Last-Event-ID`, as rmcp keeps (`SessionConfig::channel_capacity`).
pub(super) const KEPT_EVENTS: usize = 16;

/// The events of one of our calls that waits, kept as rmcp keeps a request-wise stream's
/// (`LocalSessionWorker`'s `CachedTx`: the last [`KEPT_EVENTS`], the priming event first among them).
pub(super) struct CallStream {
    pub(super) number: u64,
    pub(super) ct: CancellationToken,
    pub(super) inner: Mutex<CallInner>,
}

pub(super) struct CallInner {
    /// The priming event (index 0) is still among the kept: made again when replayed.
    priming_kept: bool,
    /// The events after it, in order, the last one's index `next_index - 1`.
    pub(super) kept: VecDeque<ServerSseMessage>,
    next_index: usize,
    /// The stream the client reads now; `None` once it ended.
    pub(super) tx: Option<mpsc::Sender<ServerSseMessage>>,
    /// Cancelled by the client: kept for a late resume (which replays and ends) until rmcp would drop it.
    pub(super) completed_at: Option<Instant>,
}

/// How long rmcp keeps a request's events after the client cancelled it (`SessionConfig::completed_cache_ttl`).
const COMPLETED_KEPT: Duration = Duration::from_secs(60);

impl CallStream {
    pub(super) fn new(number: u64, ct: CancellationToken) -> Self {
        Self {
            number,
            ct,
            inner: Mutex::new(CallInner {
                priming_kept: true,
                kept: VecDeque::new(),
                next_index: 1,
                tx: None,
                completed_at: None,
            }),
        }
    }

    pub(super) fn priming(&self) -> ServerSseMessage {
        ServerSseMessage::priming(
            format!("0/{}", self.number),
            Duration::from_millis(RETRY_MS),
        )
    }

    /// A message on the call's stream, kept for a resume.
    pub(super) fn push(&self, message: ServerJsonRpcMessage) {
        let mut inner = lock(&self.inner);
        let event = ServerSseMessage::new(format!("{}/{}", inner.next_index, self.number), message);
        inner.next_index += 1;
        if inner.kept.len() + usize::from(inner.priming_kept) >= KEPT_EVENTS {
            if inner.priming_kept {
                inner.priming_kept = false;
            } else {
                inner.kept.pop_front();
            }
        }
        inner.kept.push_back(event.clone());
        // A client that does not read fills its stream's channel (`KEPT_EVENTS`): the stream ends there
        // instead of growing. It still delivers what it holds, so the client, reading on, has every event up
        // to this one's predecessor; it resumes from the last it read with `Last-Event-ID`, and this event and
        // the ones after it are among the kept (rmcp's worker would instead wait for the reader, holding up the
        // whole session).
        if let Some(tx) = &inner.tx
            && tx.try_send(event).is_err()
        {
            inner.tx = None;
        }
    }

    /// A new stream for the client, from event `index` on (rmcp's `CachedTx::sync`); the one it read before
    /// ends, even when `index` is past what is kept (then `None`, and rmcp's empty stream answers).
    pub(super) fn resume(&self, index: usize) -> Option<mpsc::Receiver<ServerSseMessage>> {
        let mut inner = lock(&self.inner);
        inner.tx = None;
        let total = inner.kept.len() + usize::from(inner.priming_kept);
        let front = if inner.priming_kept {
            0
        } else {
            inner.next_index - inner.kept.len()
        };
        let skip = index.saturating_sub(front);
        if skip > total {
            return None;
        }
        let (tx, rx) = mpsc::channel(KEPT_EVENTS);
        let priming = inner.priming_kept.then(|| self.priming());
        // At most `KEPT_EVENTS` in all: the channel holds them.
        for event in priming
            .into_iter()
            .chain(inner.kept.iter().cloned())
            .skip(skip)
        {
            let _ = tx.try_send(event);
        }
        // A cancelled call's stream ends once replayed.
        if inner.completed_at.is_none() {
            inner.tx = Some(tx);
        }
        Some(rx)
    }

    /// Cancelled by the client's `notifications/cancelled`: the call stops, its stream ends, its events stay
    /// for a late resume.
    pub(super) fn cancel(&self) {
        {
            let mut inner = lock(&self.inner);
            inner.tx = None;
            inner.completed_at = Some(Instant::now());
        }
        self.ct.cancel();
    }

    /// Ended with its session (closed, or the server's shutdown): the call stops, its stream ends.
    pub(super) fn end(&self) {
        lock(&self.inner).tx = None;
        self.ct.cancel();
    }

    /// Cancelled long enough ago that rmcp would no longer resume it.
    pub(super) fn expired(&self) -> bool {
        lock(&self.inner)
            .completed_at
            .is_some_and(|at| at.elapsed() >= COMPLETED_KEPT)
    }
}

/// Our peer's transport: a call's progress goes to its stream; the front takes no call that could make the
/// peer send anything else (see the module's notes).
pub(super) struct SessionLink {
    pub(super) progress: Arc<Progress>,
}

impl ProgressRoute for SessionLink {
    const NOT_PROGRESS: &'static str = "no stream for this message";

    fn route(
        &self,
        token: &ProgressToken,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> std::io::Result<()> {
        let Some(call) = self.progress.get(token) else {
            tracing::debug!("a legacy session's front call sent progress with nowhere to go");
            return Err(undeliverable(Self::NOT_PROGRESS));
        };
        call.push(item);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use rmcp::model::ServerNotification;

    /// A client that stops reading a call's stream while progress keeps coming: its channel never holds
    /// more than `KEPT_EVENTS` (it grew with every note before), the stream it reads ends, and a resume from
    /// the last event it read brings the answer after the events it read, in order (the notes between are
    /// gone: only the last `KEPT_EVENTS` are kept, as rmcp keeps).
    #[tokio::test]
    async fn a_stream_nobody_reads_ends_at_its_bound_and_the_answer_is_resumed() {
        let call = CallStream::new(3, CancellationToken::new());
        let mut rx = call.resume(0).unwrap();
        let note = |n: u32| {
            let token = ProgressToken(rmcp::model::NumberOrString::Number(1));
            JsonRpcMessage::notification(ServerNotification::ProgressNotification(
                rmcp::model::ProgressNotification::new(
                    rmcp::model::ProgressNotificationParam::new(token, f64::from(n)),
                ),
            ))
        };
        for n in 1..=1000 {
            call.push(note(n));
            assert!(
                rx.len() <= KEPT_EVENTS,
                "{} events held at note {n}",
                rx.len()
            );
        }
        let answer =
            JsonRpcMessage::response(rmcp::model::ServerResult::empty(()), RequestId::Number(9));
        call.push(answer);
        let index = |event: &ServerSseMessage| -> usize {
            let id = event.event_id.as_deref().unwrap();
            assert!(id.ends_with("/3"), "{id}");
            id.split_once('/').unwrap().0.parse().unwrap()
        };
        let mut read = Vec::new();
        while let Some(event) = rx.recv().await {
            read.push(index(&event));
        }
        assert_eq!(
            read,
            (0..KEPT_EVENTS).collect::<Vec<_>>(),
            "read until its stream ended"
        );
        let last = *read.last().unwrap();
        // What the client's `Last-Event-ID` names: the last event it read.
        let mut resumed = call.resume(last).unwrap();
        let mut events = Vec::new();
        while let Ok(event) = resumed.try_recv() {
            events.push(event);
        }
        let indexes: Vec<usize> = events.iter().map(index).collect();
        assert!(indexes.windows(2).all(|w| w[1] == w[0] + 1), "{indexes:?}");
        assert!(indexes[0] > last, "{indexes:?} after {last}");
        assert_eq!(
            *indexes.last().unwrap(),
            1001,
            "the answer is the last event"
        );
        assert!(matches!(
            events.last().unwrap().message.as_deref(),
            Some(JsonRpcMessage::Response(_))
        ));
    }
}
