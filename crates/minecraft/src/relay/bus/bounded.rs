//! The queues between what this relay's peers do and NATS, each bounded in bytes (`--bus-buffer-bytes`), so
//! a slow or unreachable NATS never lets a fast peer grow the relay's memory:
//!
//! - [`Latest`]: a value per key where only the newest matters (a client's floor, written to
//!   `MC_CLIENT_FLOORS`). A newer value replaces the older one, so it holds one entry per client consumer
//!   that moved; a key that does not fit is dropped and counted.
//! - [`Bounded`]: items that each matter but may be lost safely (JetStream acks): a FIFO that drops and counts
//!   what does not fit.
//! - [`Budget`]: bytes in flight that must not be dropped (a game's events on their way to JetStream): the
//!   producer waits for room instead.
//!
//! Each keeps its current and highest size for `/metrics`, so a test (and a dashboard) sees the bound hold.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use tokio::sync::Notify;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Sizes for `/metrics`: bytes held now, the most ever held, and what was dropped for the bound.
#[derive(Debug, Default)]
pub struct Gauge {
    held: AtomicUsize,
    peak: AtomicUsize,
    dropped: AtomicU64,
}

impl Gauge {
    fn set(&self, bytes: usize) {
        self.held.store(bytes, Ordering::Relaxed);
        self.peak.fetch_max(bytes, Ordering::Relaxed);
    }

    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// The newest value per key, within `limit` bytes (a key's bytes and the value's eight).
#[derive(Debug)]
pub struct Latest {
    map: Mutex<HashMap<String, u64>>,
    limit: usize,
    wake: Notify,
    pub gauge: Gauge,
}

fn entry_bytes(key: &str) -> usize {
    key.len() + std::mem::size_of::<u64>()
}

impl Latest {
    pub fn new(limit: usize) -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            limit,
            wake: Notify::new(),
            gauge: Gauge::default(),
        }
    }

    /// Keeps `value` for `key` unless a higher one is kept already. A new key that would pass the limit is
    /// dropped (false) and counted.
    pub fn put(&self, key: &str, value: u64) -> bool {
        let mut map = lock(&self.map);
        if let Some(v) = map.get_mut(key) {
            *v = (*v).max(value);
            return true;
        }
        let bytes = self.gauge.held() + entry_bytes(key);
        if bytes > self.limit {
            self.gauge.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        map.insert(key.to_owned(), value);
        self.gauge.set(bytes);
        drop(map);
        self.wake.notify_one();
        true
    }

    /// Everything kept, emptied; waits while nothing is.
    pub async fn take(&self) -> Vec<(String, u64)> {
        loop {
            let woken = self.wake.notified();
            {
                let mut map = lock(&self.map);
                if !map.is_empty() {
                    self.gauge.set(0);
                    return map.drain().collect();
                }
            }
            woken.await;
        }
    }
}

/// A FIFO of items within `limit` bytes; what does not fit is dropped and counted.
#[derive(Debug)]
pub struct Bounded<T> {
    queue: Mutex<VecDeque<(T, usize)>>,
    limit: usize,
    wake: Notify,
    /// Told when items leave, for [`Bounded::push_wait`].
    room: Notify,
    pub gauge: Gauge,
}

impl<T> Bounded<T> {
    pub fn new(limit: usize) -> Self {
        Self {
            queue: Mutex::new(VecDeque::new()),
            limit,
            wake: Notify::new(),
            room: Notify::new(),
            gauge: Gauge::default(),
        }
    }

    /// Queues `item` of `bytes` once it fits (at once into an empty queue, whatever its size): for a
    /// producer that can wait rather than drop.
    pub async fn push_wait(&self, item: T, bytes: usize) {
        loop {
            let room = self.room.notified();
            {
                let mut queue = lock(&self.queue);
                let held = self.gauge.held() + bytes;
                if held <= self.limit || queue.is_empty() {
                    queue.push_back((item, bytes));
                    self.gauge.set(held);
                    drop(queue);
                    self.wake.notify_one();
                    return;
                }
            }
            room.await;
        }
    }

    /// Queues `item` of `bytes`, or drops it (false, counted) when it would pass the limit.
    pub fn push(&self, item: T, bytes: usize) -> bool {
        let mut queue = lock(&self.queue);
        let held = self.gauge.held() + bytes;
        if held > self.limit {
            self.gauge.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        queue.push_back((item, bytes));
        self.gauge.set(held);
        drop(queue);
        self.wake.notify_one();
        true
    }

    /// Up to `max` items from the front; waits while there are none.
    pub async fn pop(&self, max: usize) -> Vec<T> {
        loop {
            let woken = self.wake.notified();
            {
                let mut queue = lock(&self.queue);
                if !queue.is_empty() {
                    let n = max.min(queue.len());
                    let mut freed = 0;
                    let out = queue
                        .drain(..n)
                        .map(|(item, bytes)| {
                            freed += bytes;
                            item
                        })
                        .collect();
                    self.gauge.set(self.gauge.held().saturating_sub(freed));
                    drop(queue);
                    self.room.notify_waiters();
                    return out;
                }
            }
            woken.await;
        }
    }
}

/// Bytes a producer may have in flight; it waits for room rather than dropping.
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    room: Notify,
    pub gauge: Gauge,
    /// Times a producer had to wait.
    pub waits: AtomicU64,
}

impl Budget {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            room: Notify::new(),
            gauge: Gauge::default(),
            waits: AtomicU64::new(0),
        }
    }

    /// Waits until less than the limit is in flight. The caller then [`Budget::add`]s what it sends, so the
    /// most ever in flight is the limit plus one item.
    pub async fn room(&self) {
        let mut waited = false;
        loop {
            let woken = self.room.notified();
            if self.gauge.held() < self.limit {
                return;
            }
            if !waited {
                waited = true;
                self.waits.fetch_add(1, Ordering::Relaxed);
            }
            woken.await;
        }
    }

    pub fn add(&self, bytes: usize) {
        let held = self.gauge.held.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.gauge.peak.fetch_max(held, Ordering::Relaxed);
    }

    pub fn release(&self, bytes: usize) {
        let _ = self
            .gauge
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
                Some(h.saturating_sub(bytes))
            });
        self.room.notify_waiters();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    /// A client acking fast while nothing drains its floors: one entry, the newest value, however many acks.
    #[tokio::test]
    async fn latest_keeps_one_entry_per_key_however_many_puts() {
        let floors = Latest::new(1024);
        for floor in 1..=100_000u64 {
            assert!(floors.put("mcp-0-desk", floor));
        }
        // An older value arriving late does not move a floor back.
        assert!(floors.put("mcp-0-desk", 5));
        assert_eq!(floors.gauge.peak(), entry_bytes("mcp-0-desk"));
        assert_eq!(
            floors.take().await,
            vec![("mcp-0-desk".to_owned(), 100_000)]
        );
        assert_eq!(floors.gauge.held(), 0);
        assert_eq!(floors.gauge.dropped(), 0);
    }

    /// New keys past the limit are dropped and counted; the keys kept still take newer values.
    #[tokio::test]
    async fn latest_drops_and_counts_new_keys_past_its_limit() {
        let limit = 4 * entry_bytes("mcp-0-c0");
        let floors = Latest::new(limit);
        for i in 0..10 {
            floors.put(&format!("mcp-0-c{i}"), 1);
        }
        assert_eq!(floors.gauge.dropped(), 6);
        assert_eq!(floors.gauge.peak(), limit);
        assert!(floors.put("mcp-0-c0", 9));
        let mut taken = floors.take().await;
        taken.sort();
        assert_eq!(taken.len(), 4);
        assert_eq!(taken[0], ("mcp-0-c0".to_owned(), 9));
        // Room again once written.
        assert!(floors.put("mcp-0-c9", 2));
    }

    /// Acks pushed faster than they are sent: the queue holds at most its limit, drops the rest and counts
    /// them, and what it kept comes out in order.
    #[tokio::test]
    async fn bounded_holds_its_limit_and_counts_the_rest() {
        let acks = Bounded::new(1000);
        let mut kept = 0;
        for i in 0..1000u32 {
            let subject = format!("$JS.ACK.MC_EVENTS.mcp-0-desk.1.{i}.{i}.0.0");
            if acks.push(subject.clone(), subject.len()) {
                kept += 1;
            }
            assert!(acks.gauge.held() <= 1000);
        }
        assert!(kept > 0 && kept < 1000);
        assert_eq!(acks.gauge.dropped(), 1000 - kept);
        assert!(acks.gauge.peak() <= 1000);
        let first = acks.pop(3).await;
        assert_eq!(first[0], "$JS.ACK.MC_EVENTS.mcp-0-desk.1.0.0.0.0");
        assert_eq!(first.len(), 3);
        let rest = acks.pop(usize::MAX).await;
        assert_eq!(first.len() + rest.len(), kept as usize);
        assert_eq!(acks.gauge.held(), 0);
    }

    /// A producer that may wait is let in once what it pushes fits, and never dropped.
    #[tokio::test]
    async fn bounded_push_wait_waits_for_room_instead_of_dropping() {
        let acks = Arc::new(Bounded::new(100));
        acks.push_wait("a".to_owned(), 80).await;
        let waiting = {
            let acks = Arc::clone(&acks);
            tokio::spawn(async move { acks.push_wait("b".to_owned(), 80).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        assert_eq!(acks.pop(10).await, ["a"]);
        waiting.await.unwrap();
        assert_eq!(acks.pop(10).await, ["b"]);
        assert_eq!(acks.gauge.dropped(), 0);
        assert_eq!(acks.gauge.peak(), 80);
    }

    /// A producer past the budget waits until bytes are released, and is counted as having waited.
    #[tokio::test]
    async fn budget_makes_the_producer_wait_for_room() {
        let budget = Arc::new(Budget::new(100));
        budget.room().await;
        budget.add(150);
        let waiting = {
            let budget = Arc::clone(&budget);
            tokio::spawn(async move { budget.room().await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        budget.release(150);
        waiting.await.unwrap();
        assert_eq!(budget.waits.load(Ordering::Relaxed), 1);
        assert_eq!(budget.gauge.peak(), 150);
        assert_eq!(budget.gauge.held(), 0);
    }
}
