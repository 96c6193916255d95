//! Files pinned for paging: the game has no paging, so a read of page after page would download the whole
//! file every time. The first page pins the content it cut; the next pages are cut from it. A pin belongs to
//! one game connection, is dropped when the bridge writes or deletes the file, and lapses when unused.
//! The sizes seen are kept longer, to give a large file's next download a deadline that fits it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A pin unused this long is dropped: paging is a burst of calls, not a cache of the game.
const IDLE: Duration = Duration::from_secs(300);
/// At most this much content stays pinned; the least recently used pins go first.
const MAX_PINNED_BYTES: usize = 64 << 20;
/// Sizes remembered for deadlines.
const MAX_SIZES: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PinKey {
    pub connection: u64,
    pub server: String,
    pub path: String,
}

/// One pinned content and its cursor (a hash of the content).
#[derive(Debug, Clone)]
pub struct Pinned {
    pub content: Arc<String>,
    pub cursor: String,
}

struct Pin {
    pinned: Pinned,
    used: Instant,
}

#[derive(Default)]
struct Inner {
    pins: HashMap<PinKey, Pin>,
    /// (server, path) → bytes last seen, across connections.
    sizes: HashMap<(String, String), usize>,
}

/// Shared by every clone of the tools' context.
#[derive(Clone, Default)]
pub struct Pins(Arc<Mutex<Inner>>);

impl Pins {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every critical section leaves the maps consistent, so a panicked holder left nothing half-done.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The pinned content of `key`: any with `cursor: None`, only the same content with `Some`.
    pub fn get(&self, key: &PinKey, cursor: Option<&str>) -> Option<Pinned> {
        let mut inner = self.lock();
        let now = Instant::now();
        inner.pins.retain(|_, p| now.duration_since(p.used) < IDLE);
        let pin = inner.pins.get_mut(key)?;
        if cursor.is_some_and(|c| c != pin.pinned.cursor) {
            return None;
        }
        pin.used = now;
        Some(pin.pinned.clone())
    }

    pub fn put(&self, key: PinKey, pinned: Pinned) {
        let mut inner = self.lock();
        let bytes = pinned.content.len();
        if bytes > MAX_PINNED_BYTES {
            return;
        }
        inner.pins.insert(
            key,
            Pin {
                pinned,
                used: Instant::now(),
            },
        );
        while inner
            .pins
            .values()
            .map(|p| p.pinned.content.len())
            .sum::<usize>()
            > MAX_PINNED_BYTES
        {
            let oldest = inner
                .pins
                .iter()
                .min_by_key(|(_, p)| p.used)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => inner.pins.remove(&k),
                None => break,
            };
        }
    }

    /// The bridge changed the file: what was pinned is no longer the game's.
    pub fn drop_file(&self, server: &str, path: &str) {
        self.lock()
            .pins
            .retain(|k, _| !(k.server == server && k.path == path));
    }

    pub fn size_seen(&self, server: &str, path: &str, bytes: usize) {
        let mut inner = self.lock();
        if inner.sizes.len() >= MAX_SIZES {
            inner.sizes.clear();
        }
        inner
            .sizes
            .insert((server.to_owned(), path.to_owned()), bytes);
    }

    pub fn size_of(&self, server: &str, path: &str) -> Option<usize> {
        self.lock()
            .sizes
            .get(&(server.to_owned(), path.to_owned()))
            .copied()
    }
}

/// The cursor of a content: the same content always has the same cursor.
pub fn cursor_of(content: &str) -> String {
    crate::sync::manifest::digest(content)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(path: &str) -> PinKey {
        PinKey {
            connection: 1,
            server: "home".into(),
            path: path.into(),
        }
    }

    #[test]
    fn a_pin_answers_its_own_cursor_only_and_is_dropped_on_write() {
        let pins = Pins::default();
        let content = Arc::new("abc".to_owned());
        let cursor = cursor_of(&content);
        pins.put(
            key("a.js"),
            Pinned {
                content,
                cursor: cursor.clone(),
            },
        );
        assert!(pins.get(&key("a.js"), Some(&cursor)).is_some());
        assert!(pins.get(&key("a.js"), None).is_some());
        assert!(pins.get(&key("a.js"), Some("other")).is_none());
        assert!(pins.get(&key("b.js"), None).is_none());
        let other_connection = PinKey {
            connection: 2,
            ..key("a.js")
        };
        assert!(pins.get(&other_connection, None).is_none());
        pins.drop_file("home", "a.js");
        assert!(pins.get(&key("a.js"), None).is_none());
    }
}
