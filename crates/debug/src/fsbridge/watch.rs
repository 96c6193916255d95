//! Waking on file changes: inotify (through `notify`) where it works, polling where it does not. Even with
//! inotify a waiter wakes now and then to look again, because an event can be missed (a directory created
//! and written before its watch was added).

use notify::{RecursiveMode, Watcher};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// VSC-Bridge's client poll interval, used when inotify is unavailable.
pub const POLL: Duration = Duration::from_millis(50);
/// How often a waiter looks again even though inotify works.
pub const SAFETY: Duration = Duration::from_millis(500);

pub struct DirWatch {
    notify: Arc<Notify>,
    watcher: Option<notify::RecommendedWatcher>,
}

impl DirWatch {
    pub fn new(path: &Path, recursive: bool) -> Self {
        let notify = Arc::new(Notify::new());
        let n = Arc::clone(&notify);
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            // notify 8 watches IN_OPEN/IN_CLOSE_NOWRITE too: without this filter every scan of the directory
            // (which opens it and its entries) wakes the scanner again, and an idle host spins a whole core.
            if let Ok(e) = &event
                && matches!(e.kind, notify::EventKind::Access(_))
            {
                return;
            }
            n.notify_one()
        })
        .and_then(|mut w| {
            let mode = if recursive {
                RecursiveMode::Recursive
            } else {
                RecursiveMode::NonRecursive
            };
            w.watch(path, mode).map(|()| w)
        })
        .map_err(|e| tracing::debug!("no file events for {}: {e}; polling", path.display()))
        .ok();
        Self { notify, watcher }
    }

    pub fn is_polling(&self) -> bool {
        self.watcher.is_none()
    }

    /// Returns after a change (maybe), or after the poll interval, whichever is first.
    pub async fn changed(&self) {
        let wait = if self.is_polling() { POLL } else { SAFETY };
        let _ = tokio::time::timeout(wait, self.notify.notified()).await;
    }
}
