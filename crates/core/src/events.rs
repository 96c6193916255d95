//! Event streams from live systems.
//!
//! Each stream is a bounded buffer with sequence numbers, exposed as the MCP resource
//! `<bridge>://events/<stream>`. Subscribed clients are told `notifications/resources/updated` when it grows;
//! every client can also pull with a cursor, because many clients ignore pushed notifications.
//!
//! A live system decides what it publishes, so every bound is in bytes as well as in events: a stream keeps
//! at most its byte budget (the oldest events go first, and readers learn how many through `dropped`), one
//! event larger than [`MAX_EVENT_BYTES`] is kept only as a stub saying its size, and one read returns at most
//! [`MAX_PAGE_BYTES`] (with `more` and `next_since` to read the rest).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::{Notify, broadcast};

/// How many resource-updated notices may queue for a slow subscriber before it skips some.
/// Skipping is harmless: a notice only says "read again", and one read sees everything.
const UPDATES_CAPACITY: usize = 1024;

/// What one stream may hold, counted as the JSON size of its events, unless the bridge chose otherwise.
pub const DEFAULT_STREAM_BYTES: usize = 4 << 20;
/// The largest event kept whole. A larger one is replaced by a stub with its size and the start of its JSON:
/// an agent cannot afford it in one reply, and a buffer of them is how a peer grows memory without bound.
pub const MAX_EVENT_BYTES: usize = 64 << 10;
/// The most one read returns (a `poll_events` page, the stream's resource): about 64k tokens.
pub const MAX_PAGE_BYTES: usize = 256 << 10;
/// How much of an oversize event's JSON its stub keeps.
const PREVIEW_BYTES: usize = 512;
/// `seq`, `time_ms` and the punctuation around `data`, counted towards every event's size.
const EVENT_OVERHEAD: usize = 64;

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

    /// Creates (or returns the existing) stream `name`, keeping at most `capacity` events and
    /// [`DEFAULT_STREAM_BYTES`].
    pub fn stream(&self, name: &str, description: &str, capacity: usize) -> EventStream {
        self.stream_with_bytes(name, description, capacity, DEFAULT_STREAM_BYTES)
    }

    /// Creates (or returns the existing) stream `name`, keeping at most `capacity` events and `max_bytes` of
    /// event JSON, whichever is reached first.
    pub fn stream_with_bytes(
        &self,
        name: &str,
        description: &str,
        capacity: usize,
        max_bytes: usize,
    ) -> EventStream {
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
                    max_bytes.max(1),
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
    max_bytes: usize,
    state: Mutex<StreamState>,
    grew: Notify,
    published: AtomicU64,
    updates: broadcast::Sender<String>,
}

struct StreamState {
    buffer: VecDeque<Stored>,
    /// Sum of `Stored::bytes` over `buffer`.
    bytes: usize,
    last_seq: u64,
}

struct Stored {
    event: Event,
    /// The event's JSON size, overhead included.
    bytes: usize,
}

/// One event as clients see it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Event {
    /// Position in the stream; starts at 1 and only grows.
    pub seq: u64,
    /// Milliseconds since the Unix epoch when the bridge received it.
    pub time_ms: u64,
    /// What the live system reported. An event over 64 KiB of JSON is replaced by
    /// `{"truncated": true, "bytes": <its size>, "preview": "<its first 512 bytes of JSON>"}`.
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
    /// Whether more events after `next_since` are waiting (the page reached `limit` or its size cap): call
    /// again with `since = next_since` for them.
    pub more: bool,
}

impl EventStream {
    fn new(
        name: &str,
        description: &str,
        uri: String,
        capacity: usize,
        max_bytes: usize,
        updates: broadcast::Sender<String>,
    ) -> Self {
        Self {
            inner: Arc::new(StreamInner {
                name: name.to_owned(),
                description: description.to_owned(),
                uri,
                capacity,
                max_bytes,
                state: Mutex::new(StreamState {
                    buffer: VecDeque::with_capacity(capacity.min(1024)),
                    bytes: 0,
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

    /// The stream's byte budget.
    pub fn max_bytes(&self) -> usize {
        self.inner.max_bytes
    }

    /// The JSON size of the events held now; never above [`Self::max_bytes`].
    pub fn retained_bytes(&self) -> usize {
        self.lock().bytes
    }

    pub fn published_total(&self) -> u64 {
        self.inner.published.load(Ordering::Relaxed)
    }

    /// Appends an event, evicting the oldest while the stream is over its event count or byte budget, and
    /// tells subscribers. Returns its sequence number.
    pub fn publish(&self, data: Value) -> u64 {
        let (data, size) = within_event_limit(data, MAX_EVENT_BYTES.min(self.inner.max_bytes));
        let bytes = size + EVENT_OVERHEAD;
        let seq = {
            let mut state = self.lock();
            state.last_seq += 1;
            let seq = state.last_seq;
            while !state.buffer.is_empty()
                && (state.buffer.len() >= self.inner.capacity
                    || state.bytes + bytes > self.inner.max_bytes)
            {
                if let Some(old) = state.buffer.pop_front() {
                    state.bytes -= old.bytes;
                }
            }
            state.bytes += bytes;
            state.buffer.push_back(Stored {
                event: Event {
                    seq,
                    time_ms: now_ms(),
                    data,
                },
                bytes,
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

    /// Events with `seq > since` whose data has every key/value of `filter`, at most `limit` of them and at
    /// most [`MAX_PAGE_BYTES`] of JSON.
    pub fn read_since(
        &self,
        since: u64,
        limit: usize,
        filter: Option<&Map<String, Value>>,
    ) -> EventPage {
        self.read_page(since, limit, MAX_PAGE_BYTES, filter)
    }

    /// [`Self::read_since`] with a byte cap of the caller's: a page holds events up to `max_bytes` of JSON, and
    /// always at least one, so a reader moves on whatever the cap.
    pub fn read_page(
        &self,
        since: u64,
        limit: usize,
        max_bytes: usize,
        filter: Option<&Map<String, Value>>,
    ) -> EventPage {
        let state = self.lock();
        let (since, cursor_reset) = if since > state.last_seq {
            (0, true)
        } else {
            (since, false)
        };
        let oldest = state
            .buffer
            .front()
            .map_or(state.last_seq + 1, |s| s.event.seq);
        let dropped = oldest.saturating_sub(since + 1);
        let mut events = Vec::new();
        let mut bytes = 0;
        let mut next_since = since.max(oldest.saturating_sub(1));
        let mut more = false;
        for stored in state.buffer.iter().filter(|s| s.event.seq > since) {
            let wanted = filter.is_none_or(|f| matches(&stored.event.data, f));
            if wanted
                && (events.len() == limit
                    || (!events.is_empty() && bytes + stored.bytes > max_bytes))
            {
                more = true;
                break;
            }
            next_since = stored.event.seq;
            if wanted {
                bytes += stored.bytes;
                events.push(stored.event.clone());
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

    /// The most recent events, at most `limit` of them and [`MAX_PAGE_BYTES`] of JSON: the body of the
    /// stream's resource.
    pub fn recent(&self, limit: usize) -> Vec<Event> {
        let state = self.lock();
        let mut bytes = 0;
        let newest_first = state
            .buffer
            .iter()
            .rev()
            .take(limit)
            .take_while(|stored| {
                bytes += stored.bytes;
                bytes <= MAX_PAGE_BYTES
            })
            .count();
        let skip = state.buffer.len() - newest_first;
        state
            .buffer
            .iter()
            .skip(skip)
            .map(|stored| stored.event.clone())
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StreamState> {
        match self.inner.state.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// `data` and its JSON size, or a stub in its place when it is over `limit`.
fn within_event_limit(data: Value, limit: usize) -> (Value, usize) {
    let mut measure = Measure::default();
    // Writing into `Measure` cannot fail, and a `Value` always serialises.
    let _ = serde_json::to_writer(&mut measure, &data);
    if measure.bytes <= limit {
        return (data, measure.bytes);
    }
    let mut cut = measure.preview.len();
    let preview = loop {
        match std::str::from_utf8(&measure.preview[..cut]) {
            Ok(text) => break text.to_owned(),
            Err(e) => cut = e.valid_up_to(),
        }
    };
    let stub = serde_json::json!({
        "truncated": true,
        "bytes": measure.bytes,
        "preview": preview,
    });
    let size = serde_json::to_string(&stub).map_or(PREVIEW_BYTES * 2, |s| s.len());
    (stub, size)
}

/// Counts the bytes of a JSON serialisation and keeps its start, without holding the rest.
#[derive(Default)]
struct Measure {
    bytes: usize,
    preview: Vec<u8>,
}

impl io::Write for Measure {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes += buf.len();
        let room = PREVIEW_BYTES.saturating_sub(self.preview.len());
        self.preview.extend_from_slice(&buf[..room.min(buf.len())]);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
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

    fn json_len(value: &impl Serialize) -> usize {
        serde_json::to_string(value).unwrap().len()
    }

    #[test]
    fn byte_budget_evicts_the_oldest_and_readers_learn_how_many() {
        let s = EventHub::new("test").stream_with_bytes("big", "", 10_000, 20_000);
        let text = "x".repeat(1_000);
        for i in 0..100 {
            s.publish(json!({ "i": i, "text": text }));
        }
        assert!(s.retained_bytes() <= 20_000, "{}", s.retained_bytes());
        let page = s.read_since(0, 1000, None);
        assert!(page.events.len() < 20, "{} events kept", page.events.len());
        assert_eq!(page.dropped, 100 - page.events.len() as u64);
        assert_eq!(page.events.last().unwrap().seq, 100);
    }

    #[test]
    fn an_oversize_event_is_kept_as_a_stub_with_its_size() {
        let s = stream(10);
        let huge = "é".repeat(MAX_EVENT_BYTES);
        s.publish(json!({ "text": huge }));
        let event = &s.read_since(0, 10, None).events[0];
        assert_eq!(event.data["truncated"], true);
        assert_eq!(event.data["bytes"], json_len(&json!({ "text": huge })));
        let preview = event.data["preview"].as_str().unwrap();
        assert!(preview.starts_with(r#"{"text":"éé"#), "{preview}");
        assert!(preview.len() <= PREVIEW_BYTES);
        assert!(
            s.retained_bytes() < 2 * PREVIEW_BYTES,
            "only the stub is held"
        );
        s.publish(json!({ "text": "x".repeat(MAX_EVENT_BYTES - 20) }));
        let page = s.read_since(1, 10, None);
        assert!(
            page.events[0].data.get("truncated").is_none(),
            "fits: kept whole"
        );
    }

    #[test]
    fn a_page_stops_at_its_byte_cap_and_the_next_read_continues() {
        let s = stream(1000);
        let text = "y".repeat(MAX_EVENT_BYTES - 100);
        for _ in 0..20 {
            s.publish(json!(text));
        }
        let first = s.read_since(0, 1000, None);
        assert!(first.more);
        assert!(json_len(&first) <= MAX_PAGE_BYTES, "{}", json_len(&first));
        assert_eq!(first.next_since, first.events.last().unwrap().seq);
        let second = s.read_since(first.next_since, 1000, None);
        assert_eq!(second.events[0].seq, first.next_since + 1, "no gap");
        assert_eq!(second.dropped, 0);
        let tiny = s.read_page(0, 1000, 1, None);
        assert_eq!(tiny.events.len(), 1, "a page always makes progress");
        assert!(json_len(&s.recent(1000)) <= MAX_PAGE_BYTES);
        assert_eq!(s.recent(1000).last().unwrap().seq, 20, "the newest events");
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
