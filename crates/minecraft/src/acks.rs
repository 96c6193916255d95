//! When a link acknowledges what it read (PROTOCOL.md §4.4): the relay to a game, the MCP server to the relay.
//!
//! At once when [`ACK_EVERY`] messages wait for it, else [`ACK_DELAY`] after the first of them. Acknowledging
//! every frame the moment the link's queue ran dry (as before) sent one ack per frame on a steady stream: at
//! 10 000 events/s a game's ~1 000 frames a second were each answered, and each ack woke the peer's event loop
//! (and, on the relay, a worker thread) for nothing but to drop what it held a few milliseconds earlier. On
//! two cores shared with other work every wake-up is a chance to wait for a CPU (issue 22 item 9).

use std::pin::Pin;
use tokio::time::{Duration, Instant, Sleep};

/// Messages acknowledged at least this often.
pub(crate) const ACK_EVERY: u64 = 64;
/// The longest a read message waits for its acknowledgement (PROTOCOL.md asks for 50 ms at most).
pub(crate) const ACK_DELAY: Duration = Duration::from_millis(5);

/// The acknowledgement state of one link, and its timer.
#[derive(Debug)]
pub(crate) struct Acks {
    sent: u64,
    /// Runs while messages wait for their acknowledgement.
    armed: bool,
    timer: Pin<Box<Sleep>>,
}

impl Acks {
    /// `sent`: what the peer already knows to be acknowledged (its `lastSeq`).
    pub(crate) fn new(sent: u64) -> Self {
        Self {
            sent,
            armed: false,
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
        }
    }

    /// After a frame: `seq` is the highest seq read so far. `Some(seq)`: acknowledge up to it now; else the
    /// timer runs for it ([`Self::due`]), or nothing is new.
    pub(crate) fn read(&mut self, seq: u64) -> Option<u64> {
        if seq <= self.sent {
            return None;
        }
        if seq - self.sent >= ACK_EVERY {
            return Some(seq);
        }
        if !self.armed {
            self.armed = true;
            self.timer.as_mut().reset(Instant::now() + ACK_DELAY);
        }
        None
    }

    /// Resolves when the oldest message not yet acknowledged has waited [`ACK_DELAY`]; pending while none
    /// waits. The caller then acknowledges what it read and calls [`Self::sent`].
    pub(crate) async fn due(&mut self) {
        if self.armed {
            self.timer.as_mut().await;
        } else {
            std::future::pending::<()>().await;
        }
    }

    /// An ack up to `seq` went out.
    pub(crate) fn sent(&mut self, seq: u64) {
        self.sent = self.sent.max(seq);
        self.armed = false;
    }

    /// The highest seq acknowledged.
    pub(crate) fn acked(&self) -> u64 {
        self.sent
    }

    /// When the timer fires, while it runs.
    #[cfg(test)]
    fn due_at(&self) -> Option<Instant> {
        self.armed.then(|| self.timer.deadline())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_steady_stream_is_acknowledged_every_ack_every_or_ack_delay_not_every_frame() {
        let mut acks = Acks::new(10);
        assert_eq!(acks.read(10), None, "nothing new");
        assert_eq!(acks.due_at(), None);
        let t0 = Instant::now();
        assert_eq!(acks.read(11), None);
        assert_eq!(acks.due_at(), Some(t0 + ACK_DELAY));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(acks.read(12), None);
        assert_eq!(
            acks.due_at(),
            Some(t0 + ACK_DELAY),
            "the timer already runs"
        );
        tokio::time::timeout(ACK_DELAY, acks.due())
            .await
            .expect("due ACK_DELAY after the first message waiting");
        acks.sent(12);
        assert_eq!(acks.due_at(), None);
        assert_eq!(acks.acked(), 12);
        // A burst of ACK_EVERY goes at once, timer or not.
        assert_eq!(acks.read(13), None);
        assert!(acks.due_at().is_some());
        assert_eq!(acks.read(12 + ACK_EVERY), Some(12 + ACK_EVERY));
        acks.sent(12 + ACK_EVERY);
        assert_eq!(acks.read(12 + ACK_EVERY), None);
        // Nothing waiting: never due.
        assert!(
            tokio::time::timeout(Duration::from_secs(60), acks.due())
                .await
                .is_err()
        );
    }
}
