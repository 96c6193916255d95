//! Graceful shutdown of the MCP side: count the calls in flight, refuse new ones once shutdown starts, and
//! tell the server when the last answer has left.
//!
//! A call counts until its answer is on its way to the client, not merely until its handler returned: HTTP
//! holds the count in the response body until the body has been sent; stdio parks it until the next frame
//! written after the handler returned has been flushed.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncWrite;
use tokio::sync::Notify;

#[derive(Default)]
pub(crate) struct Drain {
    in_flight: AtomicUsize,
    closing: AtomicBool,
    idle: Notify,
    /// Set on stdio: answered calls wait here for their answer to be written.
    defer_to_writer: AtomicBool,
    parked: Mutex<Vec<InFlight>>,
}

/// One call in flight; dropping it (however the call ended) counts it out.
pub(crate) struct InFlight(Arc<Drain>);

impl Drain {
    /// Counts a call in, or `None` when shutdown has started and new calls are refused.
    pub(crate) fn enter(self: &Arc<Self>) -> Option<InFlight> {
        let call = self.track();
        (!self.closing.load(Ordering::SeqCst)).then_some(call)
    }

    /// Counts a request in whatever the state: for answers already being produced.
    pub(crate) fn track(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlight(self.clone())
    }

    /// The handler of `call` has returned: its answer still has to be written.
    pub(crate) fn answered(&self, call: InFlight) {
        if self.defer_to_writer.load(Ordering::SeqCst) {
            lock(&self.parked).push(call);
        }
    }

    /// Wraps the stdio writer, so answered calls count until their answer is flushed.
    pub(crate) fn writer<W>(self: &Arc<Self>, inner: W) -> FlushWatch<W> {
        self.defer_to_writer.store(true, Ordering::SeqCst);
        FlushWatch {
            inner,
            drain: self.clone(),
            writing: Vec::new(),
        }
    }

    /// Refuses new calls, then waits until those in flight have been answered or `grace` has passed. True
    /// when they all were.
    pub(crate) async fn close(&self, grace: Duration) -> bool {
        self.closing.store(true, Ordering::SeqCst);
        let drained = async {
            loop {
                // Register before checking, so a call that ends in between still wakes us.
                let idle = self.idle.notified();
                if self.in_flight.load(Ordering::SeqCst) == 0 {
                    return;
                }
                idle.await;
            }
        };
        let finished = tokio::time::timeout(grace, drained).await.is_ok();
        if !finished {
            tracing::warn!(
                in_flight = self.in_flight.load(Ordering::SeqCst),
                "calls still running after the {} ms shutdown grace; ending them",
                grace.as_millis()
            );
        }
        finished
    }

    fn leave(&self) {
        if self.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle.notify_waiters();
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.leave();
    }
}

/// HTTP: a POST to `/mcp` counts until its response body has been sent (or the client went away), so shutdown
/// does not end a session whose answer is still on its way.
pub(crate) fn hold(call: InFlight, response: axum::response::Response) -> axum::response::Response {
    response.map(|inner| axum::body::Body::new(HeldBody { inner, _call: call }))
}

/// A response body that holds its call in flight until the body is dropped (sent, or the client went away).
/// It forwards the size hint, so a JSON reply keeps its `Content-Length` instead of turning chunked.
struct HeldBody {
    inner: axum::body::Body,
    _call: InFlight,
}

impl http_body::Body for HeldBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A writer that releases the calls answered before a write began once that write has been flushed.
pub(crate) struct FlushWatch<W> {
    inner: W,
    drain: Arc<Drain>,
    writing: Vec<InFlight>,
}

impl<W: AsyncWrite + Unpin> AsyncWrite for FlushWatch<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let parked = std::mem::take(&mut *lock(&self.drain.parked));
        self.writing.extend(parked);
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let flushed = Pin::new(&mut self.inner).poll_flush(cx);
        if flushed.is_ready() {
            self.writing.clear();
        }
        flushed
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test(start_paused = true)]
    async fn close_waits_for_calls_in_flight_then_refuses_new_ones() {
        let drain = Arc::new(Drain::default());
        let call = drain.enter();
        assert!(call.is_some());
        let closing = {
            let drain = drain.clone();
            tokio::spawn(async move { drain.close(Duration::from_secs(5)).await })
        };
        tokio::task::yield_now().await;
        assert!(drain.enter().is_none(), "no new calls once closing");
        assert!(!closing.is_finished());
        drop(call);
        assert!(closing.await.unwrap(), "finished within the grace");
    }

    #[tokio::test(start_paused = true)]
    async fn close_gives_up_after_the_grace() {
        let drain = Arc::new(Drain::default());
        let _stuck = drain.enter();
        assert!(!drain.close(Duration::from_secs(5)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn on_stdio_an_answered_call_counts_until_the_next_write_is_flushed() {
        let drain = Arc::new(Drain::default());
        let mut writer = drain.writer(Vec::new());
        let call = drain.enter().unwrap();
        drain.answered(call);
        assert_eq!(
            drain.in_flight.load(Ordering::SeqCst),
            1,
            "parked until written"
        );
        writer.write_all(b"{\"id\":1}\n").await.unwrap();
        writer.flush().await.unwrap();
        assert_eq!(drain.in_flight.load(Ordering::SeqCst), 0);
    }
}
