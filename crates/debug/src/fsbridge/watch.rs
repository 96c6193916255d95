//! Waking on file changes: one inotify watcher (through `notify`, one thread) per client or host, shared by all
//! its jobs, instead of a watcher (and a thread) per job. Every relevant event bumps a generation counter; a
//! waiter subscribed before it looks at the files cannot miss a change made after that look. There is no
//! periodic rescan: a waiter wakes on an event or at the deadline it gives. Where inotify is unavailable,
//! waiters poll every [`POLL`].

use notify::{RecursiveMode, Watcher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// VSC-Bridge's client poll interval, used when inotify is unavailable.
pub const POLL: Duration = Duration::from_millis(50);

pub struct Hub {
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
    generation: watch::Sender<u64>,
}

impl Hub {
    pub fn new() -> Arc<Self> {
        let (generation, _) = watch::channel(0u64);
        let tx = generation.clone();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            // notify 8 reports IN_OPEN/IN_CLOSE_NOWRITE too: every scan of a watched directory (which opens it
            // and its entries) would wake the scanner again, and an idle host would spin a whole core.
            if let Ok(e) = &event
                && matches!(e.kind, notify::EventKind::Access(_))
            {
                return;
            }
            tx.send_modify(|n| *n = n.wrapping_add(1));
        })
        .map_err(|e| tracing::debug!("no file events: {e}; polling"))
        .ok();
        Arc::new(Self {
            watcher: Mutex::new(watcher),
            generation,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<notify::RecommendedWatcher>> {
        self.watcher
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds `path` to the watcher until the guard is dropped. A path that cannot be watched makes the
    /// waiters poll.
    pub fn watch(self: &Arc<Self>, path: &Path, recursive: bool) -> WatchGuard {
        let mode = if recursive {
            RecursiveMode::Recursive
        } else {
            RecursiveMode::NonRecursive
        };
        let mut w = self.lock();
        let ok = w.as_mut().is_some_and(|w| match w.watch(path, mode) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!("no file events for {}: {e}; polling", path.display());
                false
            }
        });
        WatchGuard {
            hub: Arc::clone(self),
            path: path.to_path_buf(),
            polling: !ok,
        }
    }

    /// A waiter; take it before looking at the files, so a change after the look wakes it.
    pub fn subscribe(&self) -> Waiter {
        let mut rx = self.generation.subscribe();
        rx.borrow_and_update();
        Waiter { rx }
    }
}

pub struct WatchGuard {
    hub: Arc<Hub>,
    path: PathBuf,
    polling: bool,
}

impl WatchGuard {
    pub fn is_polling(&self) -> bool {
        self.polling
    }
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        if !self.polling
            && let Some(w) = self.hub.lock().as_mut()
        {
            let _ = w.unwatch(&self.path);
        }
    }
}

pub struct Waiter {
    rx: watch::Receiver<u64>,
}

impl Waiter {
    /// Returns after a change, or at `until`, whichever is first (every [`POLL`] when `polling`).
    pub async fn changed(&mut self, until: Instant, polling: bool) {
        let until = if polling {
            until.min(Instant::now() + POLL)
        } else {
            until
        };
        let _ = tokio::time::timeout_at(until, self.rx.changed()).await;
    }
}
