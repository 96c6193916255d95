//! One MCP client's queue at the relay: sequence numbers, acknowledgement, and bounds in messages and bytes
//! (PROTOCOL.md §5). The oldest message goes first when a bound is hit, and the loss is counted for the
//! client's next `lost` notice.

use std::collections::VecDeque;
use std::sync::Arc;

/// A queued message: its sequence number and its text (which already carries that number).
#[derive(Debug, Clone)]
pub struct Item {
    pub seq: u64,
    pub text: Arc<str>,
}

#[derive(Debug)]
pub struct Queue {
    items: VecDeque<Item>,
    bytes: usize,
    max_items: usize,
    max_bytes: usize,
    last_seq: u64,
    acked: u64,
    lost_unreported: u64,
    lost_total: u64,
    /// Events this client would have had, refused at a game's rate limit, not yet reported.
    rate_limited_unreported: u64,
}

impl Queue {
    pub fn new(max_items: usize, max_bytes: usize) -> Self {
        Self {
            items: VecDeque::new(),
            bytes: 0,
            max_items: max_items.max(1),
            max_bytes,
            last_seq: 0,
            acked: 0,
            lost_unreported: 0,
            lost_total: 0,
            rate_limited_unreported: 0,
        }
    }

    /// Queues the message `make(seq)` builds under the next sequence number; returns that number.
    pub fn push(&mut self, make: impl FnOnce(u64) -> String) -> u64 {
        self.last_seq += 1;
        let seq = self.last_seq;
        let text: Arc<str> = Arc::from(make(seq));
        self.bytes += text.len();
        self.items.push_back(Item { seq, text });
        while self.items.len() > self.max_items || self.bytes > self.max_bytes {
            let Some(old) = self.items.pop_front() else {
                break;
            };
            self.bytes -= old.text.len();
            self.lost_unreported += 1;
            self.lost_total += 1;
        }
        seq
    }

    /// Everything up to `seq` is acknowledged (cumulative); acknowledging the future is capped at the last
    /// sequence number given out.
    pub fn ack(&mut self, seq: u64) {
        let seq = seq.min(self.last_seq);
        if seq <= self.acked {
            return;
        }
        self.acked = seq;
        while self.items.front().is_some_and(|i| i.seq <= seq) {
            if let Some(old) = self.items.pop_front() {
                self.bytes -= old.text.len();
            }
        }
    }

    /// Up to `limit` messages after `seq`, in order.
    pub fn after(&self, seq: u64, limit: usize) -> Vec<Item> {
        let start = self.items.partition_point(|i| i.seq <= seq);
        self.items.range(start..).take(limit).cloned().collect()
    }

    /// The count of messages lost since the last call, which resets it.
    pub fn take_lost(&mut self) -> u64 {
        std::mem::take(&mut self.lost_unreported)
    }

    /// Counts an event this client missed because its game went over its rate limit.
    pub fn note_rate_limited(&mut self) {
        self.rate_limited_unreported += 1;
        self.lost_total += 1;
    }

    /// The count of rate-limited events since the last call, which resets it.
    pub fn take_rate_limited(&mut self) -> u64 {
        std::mem::take(&mut self.rate_limited_unreported)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn acked(&self) -> u64 {
        self.acked
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    pub fn lost_total(&self) -> u64 {
        self.lost_total
    }

    /// Whether everything given out has been acknowledged.
    pub fn drained(&self) -> bool {
        self.acked >= self.last_seq
    }
}
