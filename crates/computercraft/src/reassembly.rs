//! Replies a computer sends in chunks, reassembled per link. Bounded in bytes whatever the peer sends: a chunk
//! is kept only for a request in flight on its link, a partial reply goes as soon as its request ends
//! (answered whole, timed out or cancelled: the request drops it, see `Computer`), one link holds at most
//! [`MAX_PARTIAL_TOTAL`] and all links together [`MAX_PARTIAL_ALL`]. An attack run held 16 MiB a link for good
//! with partials whose requests had ended, and 30 links took the bridge from 43 MB to 552 MB.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Largest reply reassembled from chunks (the client refuses to send more than 4 MiB).
pub const MAX_REASSEMBLED: usize = 8 << 20;
/// All partial replies of one link together, ids and data; a peer that starts many and finishes none cannot
/// grow past it.
pub const MAX_PARTIAL_TOTAL: usize = 16 << 20;
/// All partial replies of every link together: the link port takes thousands of links.
pub const MAX_PARTIAL_ALL: usize = 128 << 20;

/// What a chunk made of its reply.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Kept; more is to come.
    Held,
    /// The reply's whole text.
    Whole(String),
    /// These requests' partial replies were dropped, for `why`: they fail. `too_large` when a bound was hit
    /// (the rest: chunks out of order).
    Dropped {
        ids: Vec<u64>,
        why: String,
        too_large: bool,
    },
}

/// The partial replies of one link.
pub struct Reassembly {
    parts: HashMap<u64, Partial>,
    /// The most each request in flight takes reassembled, when less than [`MAX_REASSEMBLED`] (a probe's pong).
    limits: HashMap<u64, usize>,
    /// Bytes held: the id text and the data of every partial reply.
    bytes: usize,
    /// The bridge-wide count of these bytes: [`MAX_PARTIAL_ALL`], `/health` and tests.
    gauge: Arc<AtomicUsize>,
}

struct Partial {
    next_seq: u32,
    /// Length of the id as the computer wrote it, counted against the bound.
    id_bytes: usize,
    text: String,
}

impl Partial {
    fn bytes(&self) -> usize {
        self.id_bytes + self.text.len()
    }
}

impl Reassembly {
    pub fn new(gauge: Arc<AtomicUsize>) -> Self {
        Self {
            parts: HashMap::new(),
            limits: HashMap::new(),
            bytes: 0,
            gauge,
        }
    }

    /// Request `id` takes at most `max` bytes reassembled (until [`Self::remove`]).
    pub fn expect(&mut self, id: u64, max: usize) {
        if max < MAX_REASSEMBLED {
            self.limits.insert(id, max);
        }
    }

    /// Drops the partial reply to request `id`, if any, and what was expected of it.
    pub fn remove(&mut self, id: u64) {
        self.limits.remove(&id);
        if let Some(partial) = self.parts.remove(&id) {
            self.bytes -= partial.bytes();
            self.gauge.fetch_sub(partial.bytes(), Ordering::Relaxed);
        }
    }

    /// Drops every partial reply (the link is gone).
    pub fn clear(&mut self) {
        self.parts.clear();
        self.limits.clear();
        self.gauge.fetch_sub(self.bytes, Ordering::Relaxed);
        self.bytes = 0;
    }

    /// Adds chunk `seq` of the reply to request `id` (a request in flight), whose id the computer wrote in
    /// `id_bytes` bytes.
    pub fn add(&mut self, id: u64, id_bytes: usize, seq: u32, data: &str, last: bool) -> Step {
        let dropped = |me: &mut Self, ids: Vec<u64>, why: String, too_large: bool| {
            for id in &ids {
                me.remove(*id);
            }
            Step::Dropped {
                ids,
                why,
                too_large,
            }
        };
        let expected = self.parts.get(&id).map_or(0, |p| p.next_seq);
        if seq != expected {
            let why = format!("reply chunk {seq} arrived where {expected} was expected");
            return dropped(self, vec![id], why, false);
        }
        let held = self.parts.get(&id).map_or(0, |p| p.text.len());
        let max = self.limits.get(&id).copied().unwrap_or(MAX_REASSEMBLED);
        if held + data.len() > max {
            let why = format!("its reply exceeds {max} bytes");
            return dropped(self, vec![id], why, true);
        }
        let adds = data.len() + if expected == 0 { id_bytes } else { 0 };
        if self.bytes + adds > MAX_PARTIAL_TOTAL {
            let ids: Vec<u64> = self.parts.keys().copied().chain([id]).collect();
            let why = format!(
                "partial replies on this link exceed {MAX_PARTIAL_TOTAL} bytes (ids and data)"
            );
            return dropped(self, ids, why, true);
        }
        if self.gauge.load(Ordering::Relaxed) + adds > MAX_PARTIAL_ALL {
            let why = format!(
                "the bridge holds {MAX_PARTIAL_ALL} bytes of partial replies from all computers; retry when \
                 others are done"
            );
            return dropped(self, vec![id], why, true);
        }
        self.bytes += adds;
        self.gauge.fetch_add(adds, Ordering::Relaxed);
        let partial = self.parts.entry(id).or_insert_with(|| Partial {
            next_seq: 0,
            id_bytes,
            text: String::new(),
        });
        partial.next_seq += 1;
        partial.text.push_str(data);
        if !last {
            return Step::Held;
        }
        let text = std::mem::take(&mut partial.text);
        let whole = text.len() + partial.id_bytes;
        self.parts.remove(&id);
        self.bytes -= whole;
        self.gauge.fetch_sub(whole, Ordering::Relaxed);
        self.limits.remove(&id);
        Step::Whole(text)
    }
}

impl Drop for Reassembly {
    fn drop(&mut self) {
        self.gauge.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_counted_is_given_back_however_a_reply_ends() {
        let gauge = Arc::new(AtomicUsize::new(0));
        let mut r = Reassembly::new(Arc::clone(&gauge));
        assert_eq!(r.add(1, 2, 0, "abc", false), Step::Held);
        assert_eq!(gauge.load(Ordering::Relaxed), 5);
        assert_eq!(r.add(1, 2, 1, "de", true), Step::Whole("abcde".into()));
        assert_eq!(gauge.load(Ordering::Relaxed), 0);
        r.add(2, 1, 0, "x", false);
        assert!(matches!(
            r.add(2, 1, 5, "y", false),
            Step::Dropped {
                too_large: false,
                ..
            }
        ));
        r.add(3, 1, 0, "x", false);
        r.remove(3);
        r.add(4, 1, 0, "x", false);
        r.clear();
        assert_eq!(gauge.load(Ordering::Relaxed), 0);
        r.add(5, 1, 0, "x", false);
        drop(r);
        assert_eq!(gauge.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_request_expecting_a_short_reply_takes_no_more() {
        let gauge = Arc::new(AtomicUsize::new(0));
        let mut r = Reassembly::new(Arc::clone(&gauge));
        r.expect(1, 4);
        assert_eq!(r.add(1, 1, 0, "abcd", false), Step::Held);
        assert!(matches!(
            r.add(1, 1, 1, "e", false),
            Step::Dropped {
                too_large: true,
                ..
            }
        ));
        assert_eq!(gauge.load(Ordering::Relaxed), 0);
        assert!(r.limits.is_empty(), "forgotten with its partial");
    }

    #[test]
    fn the_bound_across_links_fails_only_the_chunk_that_would_pass_it() {
        let gauge = Arc::new(AtomicUsize::new(MAX_PARTIAL_ALL - 10));
        let mut r = Reassembly::new(Arc::clone(&gauge));
        assert_eq!(r.add(1, 1, 0, "123456789", false), Step::Held);
        let Step::Dropped { ids, too_large, .. } = r.add(2, 1, 0, "x", false) else {
            panic!("passed the bound across links");
        };
        assert_eq!((ids, too_large), (vec![2], true));
        assert_eq!(gauge.load(Ordering::Relaxed), MAX_PARTIAL_ALL);
    }
}
