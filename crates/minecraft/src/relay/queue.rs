//! One MCP client's queue at the relay: sequence numbers, acknowledgement, and bounds in messages and bytes
//! (PROTOCOL.md §5). The oldest message goes first when a bound is hit, and the loss is counted for the
//! client's next `lost` notice.
//!
//! Answers to commands are held in a lane of their own, beside the events, under the same numbering and with
//! bounds of their own (the same values): a flood of events pushes out older events, never an answer. An
//! answer dropped is a tool call that never ends (the relay forgot the command when the answer came), an
//! event dropped is a gap the client is told about.
//!
//! A message is kept until acknowledged, so a bound can drop one already written to the link: the client got
//! it (or will), and counting it lost over-reported (the real-stack bench at 50 000 events/s told 58 350 lost
//! of 12 352). Such a message is counted lost only if the link breaks and the client, back, does not
//! acknowledge it: then the writer starts again from the client's acknowledgement, and what was written and
//! dropped after that point is gone.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

fn decimal_digits(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// A queued message. An event is queued once for every client that takes it, as one shared text without a
/// `seq` (its body, an `Arc`): the client's number is spliced in when it is written, so 200 clients hold one
/// copy of an event, not 200 (issue 22: 2.4 MiB of events had become 462 MiB held).
#[derive(Debug, Clone)]
pub struct Item {
    pub seq: u64,
    body: Arc<str>,
    spliced: bool,
}

impl Item {
    /// The message as it goes on the wire, with its `seq`.
    pub fn text(&self) -> String {
        let mut out = String::with_capacity(self.wire_len());
        self.write_to(&mut out);
        out
    }

    /// Appends [`Item::text`] to `out`, without a text of its own in between.
    pub fn write_to(&self, out: &mut String) {
        match (self.spliced, self.body.strip_prefix('{')) {
            (true, Some(rest)) => {
                out.push_str("{\"seq\":");
                // Writing to a String cannot fail.
                let _ = fmt::Write::write_fmt(out, format_args!("{}", self.seq));
                out.push(',');
                out.push_str(rest);
            }
            _ => out.push_str(&self.body),
        }
    }

    /// The length of [`Item::text`].
    pub fn wire_len(&self) -> usize {
        match (self.spliced, self.body.starts_with('{')) {
            // `{"seq":` and the comma, less the brace the body gives up.
            (true, true) => self.body.len() + 7 + decimal_digits(self.seq),
            _ => self.body.len(),
        }
    }

    /// Bytes this item accounts for in its queue (a shared body counts in full in every queue holding it, so
    /// the bounds are the same as if it were copied).
    fn size(&self) -> usize {
        self.body.len() + if self.spliced { 24 } else { 0 }
    }

    /// Whether two items share one body.
    pub fn shares_body_with(&self, other: &Item) -> bool {
        Arc::ptr_eq(&self.body, &other.body)
    }
}

#[derive(Debug)]
pub struct Queue {
    /// Events (and anything else not an answer), oldest first.
    items: VecDeque<Item>,
    /// Answers to commands, oldest first; numbered in the same sequence as `items`.
    answers: VecDeque<Item>,
    /// Bytes of both lanes.
    bytes: usize,
    answer_bytes: usize,
    max_items: usize,
    max_bytes: usize,
    last_seq: u64,
    acked: u64,
    lost_unreported: u64,
    lost_total: u64,
    /// Losses for other reasons than this queue's own bounds (`rate_limited`, `evicted`), not yet reported.
    other_unreported: Vec<(&'static str, u64)>,
    /// The highest seq handed to the writer ([`Queue::after`]) since it last started again.
    written: u64,
    /// Runs of seqs (first, last) dropped by a bound after they were written and not acknowledged yet: lost
    /// only if the writer starts again below them. Oldest first within a lane; a run of one lane may follow
    /// a higher run of the other.
    written_dropped: VecDeque<(u64, u64)>,
}

/// Most runs of written-then-dropped seqs kept; past it the oldest run is counted lost (an over-count, never
/// an under-count). Runs only split where a message was dropped unwritten, so a live link has one or two.
const WRITTEN_DROPPED_RUNS: usize = 1024;

impl Queue {
    pub fn new(max_items: usize, max_bytes: usize) -> Self {
        Self {
            items: VecDeque::new(),
            answers: VecDeque::new(),
            bytes: 0,
            answer_bytes: 0,
            max_items: max_items.max(1),
            max_bytes,
            last_seq: 0,
            acked: 0,
            lost_unreported: 0,
            lost_total: 0,
            other_unreported: Vec::new(),
            written: 0,
            written_dropped: VecDeque::new(),
        }
    }

    /// Queues the message `make(seq)` builds under the next sequence number; returns that number.
    pub fn push(&mut self, make: impl FnOnce(u64) -> String) -> u64 {
        self.last_seq += 1;
        let seq = self.last_seq;
        self.insert(Item {
            seq,
            body: Arc::from(make(seq)),
            spliced: false,
        });
        seq
    }

    /// Queues an answer to a command, `make(seq)`, in the answers' lane: the events' bounds never drop it.
    pub fn push_response(&mut self, make: impl FnOnce(u64) -> String) -> u64 {
        self.last_seq += 1;
        let seq = self.last_seq;
        let item = Item {
            seq,
            body: Arc::from(make(seq)),
            spliced: false,
        };
        self.bytes += item.size();
        self.answer_bytes += item.size();
        self.answers.push_back(item);
        while self.answers.len() > self.max_items || self.answer_bytes > self.max_bytes {
            if !self.drop_front(true) {
                break;
            }
        }
        seq
    }

    /// Queues a shared message body (a JSON object without `seq`) under the next sequence number.
    pub fn push_shared(&mut self, body: Arc<str>) -> u64 {
        self.last_seq += 1;
        let seq = self.last_seq;
        self.insert(Item {
            seq,
            body,
            spliced: true,
        });
        seq
    }

    fn insert(&mut self, item: Item) {
        self.bytes += item.size();
        self.items.push_back(item);
        while self.items.len() > self.max_items || self.bytes - self.answer_bytes > self.max_bytes {
            if !self.drop_front(false) {
                break;
            }
        }
    }

    /// Drops the oldest event, or the oldest answer when no event is left (a bound over every queue of a
    /// token together leaves nothing unbounded): counted lost (reason `queue_full`) if it was not written
    /// yet, else remembered until the client acknowledges it or the writer starts again below it. False when
    /// empty.
    pub fn drop_oldest(&mut self) -> bool {
        self.drop_front(false) || self.drop_front(true)
    }

    /// Drops the oldest message of one lane; false when that lane is empty.
    fn drop_front(&mut self, answer: bool) -> bool {
        let lane = if answer {
            &mut self.answers
        } else {
            &mut self.items
        };
        let Some(old) = lane.pop_front() else {
            return false;
        };
        self.bytes -= old.size();
        if answer {
            self.answer_bytes -= old.size();
        }
        if old.seq > self.written {
            self.count_lost(1);
            return true;
        }
        // Runs stay in seq order within a lane; across the two lanes a run may start below the last one.
        match self.written_dropped.back_mut() {
            Some((_, last)) if *last + 1 == old.seq => *last = old.seq,
            _ => {
                if self.written_dropped.len() >= WRITTEN_DROPPED_RUNS
                    && let Some((first, last)) = self.written_dropped.pop_front()
                {
                    self.count_lost(last - first + 1);
                }
                self.written_dropped.push_back((old.seq, old.seq));
            }
        }
        true
    }

    fn count_lost(&mut self, n: u64) {
        self.lost_unreported += n;
        self.lost_total += n;
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
                self.bytes -= old.size();
            }
        }
        while self.answers.front().is_some_and(|i| i.seq <= seq) {
            if let Some(old) = self.answers.pop_front() {
                self.bytes -= old.size();
                self.answer_bytes -= old.size();
            }
        }
        // Written, dropped, and now acknowledged: the client got them.
        self.written_dropped.retain_mut(|(first, last)| {
            *first = (*first).max(seq + 1);
            *last > seq
        });
    }

    /// Up to `limit` messages after `seq`, in order (a look; the writer takes with [`Queue::write_after`]).
    pub fn after(&self, seq: u64, limit: usize) -> Vec<Item> {
        let mut events = self
            .items
            .range(self.items.partition_point(|i| i.seq <= seq)..)
            .peekable();
        let mut answers = self
            .answers
            .range(self.answers.partition_point(|i| i.seq <= seq)..)
            .peekable();
        // The two lanes merged back into seq order.
        let mut out = Vec::new();
        while out.len() < limit {
            let next = match (events.peek(), answers.peek()) {
                (Some(e), Some(a)) if a.seq < e.seq => answers.next(),
                (Some(_), _) => events.next(),
                (None, _) => answers.next(),
            };
            let Some(item) = next else { break };
            out.push(item.clone());
        }
        out
    }

    /// Up to `limit` messages after `seq`, in order, handed to the writer for the link. A `seq` below what was
    /// handed out before is a writer starting again (a new link, from the client's acknowledgement): messages
    /// written after `seq` and since dropped are lost, counted here.
    pub fn write_after(&mut self, seq: u64, limit: usize) -> Vec<Item> {
        if seq < self.written {
            let gone: u64 = std::mem::take(&mut self.written_dropped)
                .into_iter()
                .filter(|(_, last)| *last > seq)
                .map(|(first, last)| last - first.max(seq + 1) + 1)
                .sum();
            self.count_lost(gone);
            self.written = seq;
        }
        let out = self.after(seq, limit);
        if let Some(last) = out.last() {
            self.written = self.written.max(last.seq);
        }
        out
    }

    /// The count of messages lost since the last call, which resets it.
    pub fn take_lost(&mut self) -> u64 {
        std::mem::take(&mut self.lost_unreported)
    }

    /// Counts `n` messages this client missed for `reason` (`rate_limited`, `evicted`).
    pub fn note_lost(&mut self, reason: &'static str, n: u64) {
        self.lost_total += n;
        match self.other_unreported.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, count)) => *count += n,
            None => self.other_unreported.push((reason, n)),
        }
    }

    /// The losses noted for other reasons since the last call, which resets them.
    pub fn take_other_lost(&mut self) -> Vec<(&'static str, u64)> {
        std::mem::take(&mut self.other_unreported)
    }

    /// Messages queued and not yet acknowledged.
    pub fn unacked(&self) -> u64 {
        self.last_seq.saturating_sub(self.acked)
    }

    pub fn len(&self) -> usize {
        self.items.len() + self.answers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty() && self.answers.is_empty()
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
