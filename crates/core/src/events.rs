//! Event streams from live systems.
//!
//! Each stream is a bounded buffer with sequence numbers, exposed as the MCP resource
//! `<bridge>://events/<stream>`. Subscribed clients are told `notifications/resources/updated` when it grows;
//! every client can also pull with a cursor, because many clients ignore pushed notifications.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::{Notify, broadcast};

/// How many resource-updated notices may queue for a slow subscriber before it skips some.
/// Skipping is harmless: a notice only says "read again", and one read sees everything.
const UPDATES_CAPACITY: usize = 1024;

/// All event streams of one bridge, and the channel that tells subscribers a resource changed.
#[derive(Clone)]
pub struct EventHub {
    inner: Arc<HubInner>,
}

struct HubInner {
    scheme: String,
    streams: RwLock<BTreeMap<String, EventStream>>,
    updates: broadcast::Sender<String>,
}

impl EventHub {
    pub(crate) fn new(scheme: &str) -> Self {
        let (updates, _) = broadcast::channel(UPDATES_CAPACITY);
        Self {
            inner: Arc::new(HubInner {
                scheme: scheme.to_owned(),
                streams: RwLock::new(BTreeMap::new()),
                updates,
            }),
        }
    }

    /// Creates (or returns the existing) stream `name`, keeping at most `capacity` events.
    pub fn stream(&self, name: &str, description: &str, capacity: usize) -> EventStream {
        let mut streams = match self.inner.streams.write() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        streams
            .entry(name.to_owned())
            .or_insert_with(|| {
                EventStream::new(
                    name,
                    description,
                    format!("{}://events/{name}", self.inner.scheme),
                    capacity.max(1),
                    self.inner.updates.clone(),
                )
            })
            .clone()
    }

    pub fn get(&self, name: &str) -> Option<EventStream> {
        self.read_streams().get(name).cloned()
    }

    /// The stream whose resource URI is `uri`.
    pub fn by_uri(&self, uri: &str) -> Option<EventStream> {
        self.read_streams()
            .values()
            .find(|s| s.uri() == uri)
            .cloned()
    }

    pub fn streams(&self) -> Vec<EventStream> {
        self.read_streams().values().cloned().collect()
    }

    /// Tells subscribers of `uri` that it changed. For event streams `publish` does this itself.
    pub fn resource_updated(&self, uri: &str) {
        // An error only means nobody is subscribed right now.
        let _ = self.inner.updates.send(uri.to_owned());
    }

    pub(crate) fn subscribe_updates(&self) -> broadcast::Receiver<String> {
        self.inner.updates.subscribe()
    }

    fn read_streams(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, EventStream>> {
        match self.inner.streams.read() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// One named, bounded stream of events.
#[derive(Clone)]
pub struct EventStream {
    inner: Arc<StreamInner>,
}

struct StreamInner {
    name: String,
    description: String,
    uri: String,
    capacity: usize,
    state: Mutex<StreamState>,
    grew: Notify,
    published: AtomicU64,
    updates: broadcast::Sender<String>,
}

struct StreamState {
    buffer: VecDeque<Event>,
    last_seq: u64,
}

/// One event as clients see it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Event {
    /// Position in the stream; starts at 1 and only grows.
    pub seq: u64,
    /// Milliseconds since the Unix epoch when the bridge received it.
    pub time_ms: u64,
    pub data: Value,
}

/// A page of events after a cursor.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct EventPage {
    pub stream: String,
    pub events: Vec<Event>,
    /// Pass this as `since` next time.
    pub next_since: u64,
    /// Events after the cursor that the bounded buffer had already discarded.
    pub dropped: u64,
    /// True when the cursor was ahead of the stream (the bridge restarted); reading restarted from the oldest.
    pub cursor_reset: bool,
    /// Whether more events after `next_since` are waiting.
    pub more: bool,
}

impl EventStream {
    fn new(
        name: &str,
        description: &str,
        uri: String,
        capacity: usize,
        updates: broadcast::Sender<String>,
    ) -> Self {
        Self {
            inner: Arc::new(StreamInner {
                name: name.to_owned(),
                description: description.to_owned(),
                uri,
                capacity,
                state: Mutex::new(StreamState {
                    buffer: VecDeque::with_capacity(capacity.min(1024)),
                    last_seq: 0,
                }),
                grew: Notify::new(),
                published: AtomicU64::new(0),
                updates,
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn description(&self) -> &str {
        &self.inner.description
    }

    pub fn uri(&self) -> &str {
        &self.inner.uri
    }

    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }

    pub fn published_total(&self) -> u64 {
        self.inner.published.load(Ordering::Relaxed)
    }

    /// Appends an event, evicting the oldest when full, and tells subscribers. Returns its sequence number.
    pub fn publish(&self, data: Value) -> u64 {
        let seq = {
            let mut state = self.lock();
            state.last_seq += 1;
            let seq = state.last_seq;
            if state.buffer.len() == self.inner.capacity {
                state.buffer.pop_front();
            }
            state.buffer.push_back(Event {
                seq,
                time_ms: now_ms(),
                data,
            });
            seq
        };
        self.inner.published.fetch_add(1, Ordering::Relaxed);
        self.inner.grew.notify_waiters();
        let _ = self.inner.updates.send(self.inner.uri.clone());
        seq
    }

    pub fn last_seq(&self) -> u64 {
        self.lock().last_seq
    }

    /// Events with `seq > since` whose data has every key/value of `filter`, at most `limit` of them.
    pub fn read_since(
        &self,
        since: u64,
        limit: usize,
        filter: Option<&Map<String, Value>>,
    ) -> EventPage {
        let state = self.lock();
        let (since, cursor_reset) = if since > state.last_seq {
            (0, true)
        } else {
            (since, false)
        };
        let oldest = state.buffer.front().map_or(state.last_seq + 1, |e| e.seq);
        let dropped = oldest.saturating_sub(since + 1);
        let mut events = Vec::new();
        let mut next_since = since.max(oldest.saturating_sub(1));
        let mut more = false;
        for event in state.buffer.iter().filter(|e| e.seq > since) {
            if events.len() == limit {
                more = true;
                break;
            }
            next_since = event.seq;
            if filter.is_none_or(|f| matches(&event.data, f)) {
                events.push(event.clone());
            }
        }
        if !more {
            next_since = next_since.max(state.last_seq);
        }
        EventPage {
            stream: self.inner.name.clone(),
            events,
            next_since,
            dropped,
            cursor_reset,
            more,
        }
    }

    /// Resolves when an event is published after this call. Take it before reading to avoid missing one.
    pub(crate) fn grew(&self) -> tokio::sync::futures::Notified<'_> {
        self.inner.grew.notified()
    }

    /// The most recent `limit` events: the body of the stream's resource.
    pub fn recent(&self, limit: usize) -> Vec<Event> {
        let state = self.lock();
        let skip = state.buffer.len().saturating_sub(limit);
        state.buffer.iter().skip(skip).cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StreamState> {
        match self.inner.state.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

fn matches(data: &Value, filter: &Map<String, Value>) -> bool {
    filter
        .iter()
        .all(|(key, wanted)| data.get(key) == Some(wanted))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stream(capacity: usize) -> EventStream {
        EventHub::new("test").stream("chat", "chat lines", capacity)
    }

    #[test]
    fn sequence_starts_at_one_and_grows() {
        let s = stream(4);
        assert_eq!(s.publish(json!(1)), 1);
        assert_eq!(s.publish(json!(2)), 2);
        assert_eq!(s.uri(), "test://events/chat");
    }

    #[test]
    fn cursor_reads_only_newer_events() {
        let s = stream(10);
        for i in 0..5 {
            s.publish(json!({ "i": i }));
        }
        let page = s.read_since(3, 100, None);
        assert_eq!(
            page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![4, 5]
        );
        assert_eq!(page.next_since, 5);
        assert_eq!(page.dropped, 0);
        assert!(!page.more);
    }

    #[test]
    fn overflow_reports_dropped_events() {
        let s = stream(3);
        for i in 0..10 {
            s.publish(json!(i));
        }
        let page = s.read_since(0, 100, None);
        assert_eq!(
            page.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![8, 9, 10]
        );
        assert_eq!(page.dropped, 7);
        let page = s.read_since(8, 100, None);
        assert_eq!(page.dropped, 0);
    }

    #[test]
    fn limit_pages_through() {
        let s = stream(10);
        for i in 0..5 {
            s.publish(json!(i));
        }
        let first = s.read_since(0, 2, None);
        assert_eq!(first.events.len(), 2);
        assert!(first.more);
        let second = s.read_since(first.next_since, 2, None);
        assert_eq!(second.events[0].seq, 3);
    }

    #[test]
    fn filter_matches_top_level_fields_and_still_advances() {
        let s = stream(10);
        s.publish(json!({"player": "a", "msg": "hi"}));
        s.publish(json!({"player": "b", "msg": "yo"}));
        let filter = json!({"player": "b"});
        let page = s.read_since(0, 10, filter.as_object());
        assert_eq!(page.events.len(), 1);
        assert_eq!(page.events[0].data["msg"], "yo");
        assert_eq!(page.next_since, 2);
    }

    #[test]
    fn cursor_from_the_future_resets() {
        let s = stream(10);
        s.publish(json!(1));
        let page = s.read_since(99, 10, None);
        assert!(page.cursor_reset);
        assert_eq!(page.events.len(), 1);
    }

    #[tokio::test]
    async fn publish_notifies_update_subscribers() {
        let hub = EventHub::new("test");
        let s = hub.stream("chat", "", 4);
        let mut rx = hub.subscribe_updates();
        s.publish(json!("x"));
        assert_eq!(rx.recv().await.unwrap(), "test://events/chat");
    }
}
