//! Request/response correlation for JSON-RPC-style links.
//!
//! Live systems answer out of order (Bitburner's `getSaveFile` can be overtaken), sometimes never, and their
//! links drop mid-request. The correlator hands out ids, parks one waiter per id, and guarantees three things:
//! a waiter is failed *at once* with `Disconnected` when its link drops (an agent should not wait out a 30 s
//! timeout for a game that was closed); every waiter gets an answer or an error by its deadline; and no
//! pending entry outlives its waiter, whether it timed out, was answered, or its future was dropped
//! (a cancelled tool call).

use crate::error::LinkError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Largest id handed out: JavaScript peers parse ids as doubles, so larger integers come back changed.
pub const MAX_ID: u64 = (1 << 53) - 1;

type Slot<T> = oneshot::Sender<Result<T, LinkError>>;

struct Inner<T> {
    next_id: u64,
    pending: HashMap<u64, Slot<T>>,
    /// Set by [`Correlator::close`]: later requests fail immediately with this error.
    closed: Option<LinkError>,
}

/// Matches responses to requests by integer id. Cheap to clone; clones share state.
pub struct Correlator<T> {
    inner: Arc<Mutex<Inner<T>>>,
}

impl<T> Clone for Correlator<T> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T> Default for Correlator<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> std::fmt::Debug for Correlator<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = lock(&self.inner);
        f.debug_struct("Correlator")
            .field("next_id", &inner.next_id)
            .field("pending", &inner.pending.len())
            .field("closed", &inner.closed.is_some())
            .finish()
    }
}

// The lock is never held across an await or user code, so a poisoned lock only means another thread panicked
// between two map operations; the map is still consistent.
fn lock<T>(m: &Mutex<Inner<T>>) -> MutexGuard<'_, Inner<T>> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<T> Correlator<T> {
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                next_id: 1,
                pending: HashMap::new(),
                closed: None,
            })),
        }
    }

    /// Registers a request: returns its id (1, 2, 3, ... never above [`MAX_ID`]) and the handle to await the
    /// answer with. Send the request *after* calling this, so a fast answer cannot arrive before its entry.
    /// On a closed correlator the handle fails immediately with the close error.
    pub fn start(&self) -> (u64, Pending<T>) {
        let (tx, rx) = oneshot::channel();
        let mut inner = lock(&self.inner);
        let id = inner.next_id;
        inner.next_id = if id >= MAX_ID { 1 } else { id + 1 };
        match &inner.closed {
            Some(err) => {
                // The receiver is alive (we hold it), so this cannot fail.
                let _ = tx.send(Err(err.clone()));
            }
            None => {
                inner.pending.insert(id, tx);
            }
        }
        drop(inner);
        let pending = Pending {
            id,
            rx,
            inner: Arc::clone(&self.inner),
        };
        (id, pending)
    }

    /// Delivers the answer for `id`. Returns false, and logs, when no request with that id is waiting
    /// (never issued, already timed out, or its caller gave up); the answer is dropped.
    pub fn resolve(&self, id: u64, value: T) -> bool {
        self.complete(id, Ok(value))
    }

    /// Fails the one request `id` (for example when its frame could not be sent). Same return as
    /// [`resolve`](Self::resolve).
    pub fn fail(&self, id: u64, err: LinkError) -> bool {
        self.complete(id, Err(err))
    }

    fn complete(&self, id: u64, result: Result<T, LinkError>) -> bool {
        let mut inner = lock(&self.inner);
        let slot = inner.pending.remove(&id);
        let issued = id != 0 && id < inner.next_id;
        drop(inner);
        match slot {
            // A send error means the waiter was dropped in the instant since we removed it: nobody wants it.
            Some(tx) => tx.send(result).is_ok(),
            None if issued => {
                tracing::debug!(
                    id,
                    "late answer for a request that timed out or was cancelled; dropped"
                );
                false
            }
            None => {
                static LOG: crate::log_limit::LogLimit = crate::log_limit::LogLimit::new();
                if let Some(left_out) = LOG.allow() {
                    tracing::warn!(
                        id,
                        left_out,
                        "answer with an id that was never issued; dropped"
                    );
                }
                false
            }
        }
    }

    /// Fails every waiting request with `err` at once and returns how many there were. The correlator stays
    /// usable; use [`close`](Self::close) when the link it serves is gone for good.
    pub fn fail_all(&self, err: LinkError) -> usize {
        let drained: Vec<Slot<T>> = lock(&self.inner)
            .pending
            .drain()
            .map(|(_, tx)| tx)
            .collect();
        let n = drained.len();
        for tx in drained {
            let _ = tx.send(Err(err.clone()));
        }
        if n > 0 {
            tracing::debug!(n, error = %err, "failed all pending requests");
        }
        n
    }

    /// Fails every waiting request with `err` and makes every later [`start`](Self::start) fail the same way.
    /// Call it when the link this correlator belongs to has died, so a request racing the drop cannot hang
    /// until its timeout.
    pub fn close(&self, err: LinkError) -> usize {
        let drained: Vec<Slot<T>> = {
            let mut inner = lock(&self.inner);
            inner.closed = Some(err.clone());
            inner.pending.drain().map(|(_, tx)| tx).collect()
        };
        let n = drained.len();
        for tx in drained {
            let _ = tx.send(Err(err.clone()));
        }
        n
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        lock(&self.inner).closed.is_some()
    }

    /// Whether request `id` is waiting for its answer: a peer's partial answer (a chunk) for anything else
    /// has nobody to go to and need not be kept.
    pub fn is_pending(&self, id: u64) -> bool {
        lock(&self.inner).pending.contains_key(&id)
    }

    /// How many requests are waiting for an answer.
    pub fn pending(&self) -> usize {
        lock(&self.inner).pending.len()
    }
}

/// One request's answer to come. Dropping it (for example when the tool call is cancelled) removes the
/// request's entry, so a late answer is logged and dropped instead of leaking.
#[must_use = "a request whose Pending is dropped is forgotten at once"]
pub struct Pending<T> {
    id: u64,
    rx: oneshot::Receiver<Result<T, LinkError>>,
    inner: Arc<Mutex<Inner<T>>>,
}

impl<T> std::fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").field("id", &self.id).finish()
    }
}

impl<T> Pending<T> {
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Waits for the answer, at most `timeout`. Fails with [`LinkError::Timeout`] (carrying the time waited)
    /// or with whatever error the link was failed with. The entry is gone when this returns.
    pub async fn wait(mut self, timeout: Duration) -> Result<T, LinkError> {
        let started = Instant::now();
        match tokio::time::timeout(timeout, &mut self.rx).await {
            Ok(Ok(result)) => result,
            // Only possible if the entry was removed without an answer, which the correlator never does.
            Ok(Err(_)) => Err(LinkError::disconnected("request abandoned by its link")),
            Err(_) => Err(LinkError::Timeout {
                elapsed: started.elapsed(),
            }),
        }
    }
}

impl<T> Drop for Pending<T> {
    fn drop(&mut self) {
        lock(&self.inner).pending.remove(&self.id);
    }
}

/// Reads a request id echoed by a peer. Peers echo ids verbatim and some stringify them, so this accepts an
/// integer JSON number (also in float form, `3.0`, as JavaScript may write it) or a string of decimal digits,
/// in `1..=MAX_ID`. Anything else is `None`: not an answer to any request of ours.
pub fn parse_id(id: &serde_json::Value) -> Option<u64> {
    let n = match id {
        serde_json::Value::Number(n) => match n.as_u64() {
            Some(n) => n,
            None => {
                let f = n.as_f64()?;
                // Exact integral doubles only; `as` saturates, and the range check below rejects the rest.
                if f.fract() != 0.0 || !(1.0..=MAX_ID as f64).contains(&f) {
                    return None;
                }
                f as u64
            }
        },
        serde_json::Value::String(s) => {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            s.parse().ok()?
        }
        _ => return None,
    };
    (1..=MAX_ID).contains(&n).then_some(n)
}
