//! When a link acknowledges what it read (PROTOCOL.md §4.4): the relay to a game, the MCP server to the relay.
//!
//! At once when [`ACK_EVERY`] messages wait for it, else [`ACK_DELAY`] after the first of them. Acknowledging
//! every frame the moment the link's queue ran dry (as before) sent one ack per frame on a steady stream: at
//! 10 000 events/s a game's ~1 000 frames a second were each answered, and each ack woke the peer's event loop
//! (and, on the relay, a worker thread) for nothing but to drop what it held a few milliseconds earlier. On
//! two cores shared with other work every wake-up is a chance to wait for a CPU (issue 22 item 9).

use tokio::time::{Duration, Instant};

/// Messages acknowledged at least this often.
pub(crate) const ACK_EVERY: u64 = 64;
/// The longest a read message waits for its acknowledgement (PROTOCOL.md asks for 50 ms at most).
pub(crate) const ACK_DELAY: Duration = Duration::from_millis(5);

/// What to do after a frame was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Nothing new to acknowledge, or a timer already runs for it.
    Wait,
    /// Acknowledge up to this seq now.
    Now(u64),
    /// Start the timer: acknowledge at this instant unless [`ACK_EVERY`] comes first.
    Arm(Instant),
}

/// The acknowledgement state of one link.
#[derive(Debug)]
pub(crate) struct Acks {
    sent: u64,
    due: Option<Instant>,
}

impl Acks {
    /// `sent`: what the peer already knows to be acknowledged (its `lastSeq`).
    pub(crate) fn new(sent: u64) -> Self {
        Self { sent, due: None }
    }

    /// After a frame: `seq` is the highest seq read so far.
    pub(crate) fn read(&mut self, seq: u64) -> Step {
        if seq <= self.sent {
            return Step::Wait;
        }
        if seq - self.sent >= ACK_EVERY {
            return Step::Now(seq);
        }
        if self.due.is_some() {
            return Step::Wait;
        }
        let due = Instant::now() + ACK_DELAY;
        self.due = Some(due);
        Step::Arm(due)
    }

    /// Whether a timer runs.
    pub(crate) fn armed(&self) -> bool {
        self.due.is_some()
    }

    /// An ack up to `seq` went out.
    pub(crate) fn sent(&mut self, seq: u64) {
        self.sent = self.sent.max(seq);
        self.due = None;
    }

    /// The highest seq acknowledged.
    pub(crate) fn acked(&self) -> u64 {
        self.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_steady_stream_is_acknowledged_every_ack_every_or_ack_delay_not_every_frame() {
        let mut acks = Acks::new(10);
        assert_eq!(acks.read(10), Step::Wait, "nothing new");
        let t0 = Instant::now();
        assert_eq!(acks.read(11), Step::Arm(t0 + ACK_DELAY));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(acks.read(12), Step::Wait, "the timer already runs");
        assert!(acks.armed());
        acks.sent(12);
        assert!(!acks.armed());
        assert_eq!(acks.acked(), 12);
        // A burst of ACK_EVERY goes at once, timer or not.
        assert!(matches!(acks.read(13), Step::Arm(_)));
        assert_eq!(acks.read(12 + ACK_EVERY), Step::Now(12 + ACK_EVERY));
        acks.sent(12 + ACK_EVERY);
        assert_eq!(acks.read(12 + ACK_EVERY), Step::Wait);
    }
}
