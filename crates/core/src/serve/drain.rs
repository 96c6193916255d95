//! Graceful shutdown of the MCP side: count the tool calls in flight, refuse new ones once shutdown starts,
//! and tell the server when the last one has finished.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

#[derive(Default)]
pub(crate) struct Drain {
    in_flight: AtomicUsize,
    closing: AtomicBool,
    idle: Notify,
}

/// One call in flight; dropping it (however the call ended) counts it out.
pub(crate) struct Call<'a>(&'a Drain);

impl Drain {
    /// Counts a call in, or `None` when shutdown has started and new calls are refused.
    pub(crate) fn enter(&self) -> Option<Call<'_>> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        if self.closing.load(Ordering::SeqCst) {
            self.leave();
            return None;
        }
        Some(Call(self))
    }

    /// Refuses new calls, then waits until those in flight have finished or `grace` has passed. True when
    /// they all finished.
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

impl Drop for Call<'_> {
    fn drop(&mut self) {
        self.0.leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn close_waits_for_calls_in_flight_then_refuses_new_ones() {
        let drain = std::sync::Arc::new(Drain::default());
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
        let drain = Drain::default();
        let _stuck = drain.enter();
        assert!(!drain.close(Duration::from_secs(5)).await);
    }
}
