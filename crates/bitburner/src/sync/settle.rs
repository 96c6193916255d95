//! When `--watch` may take a local file: only once it holds still.
//!
//! An editor that saves in place truncates the file and then writes it; one that saves through a temporary
//! file renames the old one away first, so for a moment the target is missing. A round that looks in between
//! would push an empty or partial script, or take the missing file for a deletion and bring the old version
//! back. The quiet wait after a file-system event does not prevent that: a round can already be running, or
//! start on the poll's tick. So every round checks each file itself. A file is taken only when its size,
//! times and inode have not changed for the debounce period, seen either
//!
//! - by the watch (the same stamp at a look at least the debounce period ago), or
//! - by the file's own times (modified, and on Unix status-changed, which no tool can set back) being that old
//!   while the watcher has heard nothing for that long: the clock of a slow or skewed file system alone is not
//!   trusted, nor a quiet watcher alone (events can be lost).
//!
//! A missing file is judged the same way by its nearest directory, whose times move when a name in it is
//! renamed or removed. A file read while it changed (its stamp before and after the read differ) is not
//! taken. What is not taken waits for a later round (the watch comes back after the debounce period); a file
//! that stays in that state is reported, never pushed half-written.

use std::collections::HashMap;
use std::fs::Metadata;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// When the watcher last heard of a change that can be a player's edit; written by its thread.
#[derive(Debug, Default)]
pub struct LastEvent(Mutex<Option<Instant>>);

impl LastEvent {
    pub fn touch(&self) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }

    /// How long ago the last event was; `None` when there was none.
    fn quiet_for(&self, now: Instant) -> Option<Duration> {
        let last = *self.0.lock().unwrap_or_else(|p| p.into_inner());
        last.map(|t| now.saturating_duration_since(t))
    }
}

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stamp {
    Absent,
    File {
        len: u64,
        modified: Option<SystemTime>,
        /// Status change (Unix `ctime`): moves on every write and rename, and cannot be set back.
        changed: Option<SystemTime>,
        inode: u64,
    },
}

impl Stamp {
    fn of(m: &Metadata) -> Self {
        #[cfg(unix)]
        let (changed, inode) = {
            use std::os::unix::fs::MetadataExt;
            let changed = u64::try_from(m.ctime()).ok().and_then(|s| {
                let nanos = u32::try_from(m.ctime_nsec()).unwrap_or(0);
                SystemTime::UNIX_EPOCH.checked_add(Duration::new(s, nanos))
            });
            (changed, m.ino())
        };
        #[cfg(not(unix))]
        let (changed, inode) = (None, 0);
        Stamp::File {
            len: m.len(),
            modified: m.modified().ok(),
            changed,
            inode,
        }
    }

    fn len(&self) -> Option<u64> {
        match self {
            Stamp::File { len, .. } => Some(*len),
            Stamp::Absent => None,
        }
    }
}

/// How long ago `m` last changed by its own times; `None` when it cannot tell (or a time is in the future).
fn age_of(m: &Metadata, wall: SystemTime) -> Option<Duration> {
    let Stamp::File {
        modified, changed, ..
    } = Stamp::of(m)
    else {
        return None;
    };
    let newest = modified.into_iter().chain(changed).max()?;
    wall.duration_since(newest).ok()
}

/// What the watch knows of one local file (by its path relative to the directory).
#[derive(Debug)]
struct Seen {
    stamp: Stamp,
    /// When this stamp was first seen.
    since: Instant,
    /// Since when every look found the file still changing.
    changing_since: Option<Instant>,
    /// The round that last looked, so files gone from both sides are forgotten.
    round: u64,
}

/// One look at a local file.
#[derive(Debug)]
pub(super) enum Look {
    /// Held still for the debounce period: its content, or `None` when it is (settled) absent.
    Ready(Option<Vec<u8>>),
    /// Being written, renamed or replaced: leave it, neither side, to a later round.
    Changing,
    Failed(std::io::Error),
}

/// The watch's memory of the local files across rounds.
#[derive(Debug)]
pub struct Settle {
    debounce: Duration,
    /// A file still changing after this long is reported.
    report_after: Duration,
    events: Arc<LastEvent>,
    seen: HashMap<String, Seen>,
    round: u64,
    /// Whether this round left a file for later.
    waiting: bool,
}

impl Settle {
    pub fn new(debounce: Duration, events: Arc<LastEvent>) -> Self {
        Self {
            debounce,
            report_after: (debounce * 10).max(Duration::from_secs(1)),
            events,
            seen: HashMap::new(),
            round: 0,
            waiting: false,
        }
    }

    pub(super) fn begin_round(&mut self) {
        self.round += 1;
        self.waiting = false;
    }

    /// Forgets the files this round did not look at, and names those changing for longer than the player
    /// would wait, with why they are not pushed.
    pub(super) fn end_round(&mut self) -> Vec<(String, String)> {
        let round = self.round;
        self.seen.retain(|_, s| s.round == round);
        let now = Instant::now();
        let mut out: Vec<(String, String)> = self
            .seen
            .iter()
            .filter(|(_, s)| {
                s.changing_since
                    .is_some_and(|t| now.saturating_duration_since(t) >= self.report_after)
            })
            .map(|(name, _)| {
                let why = format!(
                    "it keeps changing (for over {} s), so it is not pushed: a file is pushed once it has stayed \
                     unchanged for {} ms, never half-written",
                    self.report_after.as_secs(),
                    self.debounce.as_millis()
                );
                (name.clone(), why)
            })
            .collect();
        out.sort();
        out
    }

    /// When to look again because this round left a file that may have settled by then.
    pub fn retry_after(&self) -> Option<Duration> {
        // Floored so that `--debounce 0` and a file rewritten during every read do not make rounds back to back.
        const MIN: Duration = Duration::from_millis(100);
        self.waiting.then_some(self.debounce.max(MIN))
    }

    /// Reads `path` (the local side of `key`) if it has held still; see the module docs.
    pub(super) async fn look(&mut self, key: &str, path: &Path) -> Look {
        let now = Instant::now();
        let before = match tokio::fs::metadata(path).await {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return self.absent(key, path, now).await;
            }
            Err(e) => return Look::Failed(e),
        };
        let stamp = Stamp::of(&before);
        let bytes = match super::write::read_regular(path).await {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Gone since the stat: a save through a rename is under way.
                self.changed(key, Stamp::Absent, now);
                return Look::Changing;
            }
            Err(e) => return Look::Failed(e),
        };
        let after = match tokio::fs::metadata(path).await {
            Ok(m) => Stamp::of(&m),
            Err(_) => Stamp::Absent,
        };
        let whole = u64::try_from(bytes.len()).ok() == stamp.len();
        if after != stamp || !whole {
            self.changed(key, after, now);
            return Look::Changing;
        }
        let age = age_of(&before, SystemTime::now());
        if self.held_still(key, stamp, now, age) {
            Look::Ready(Some(bytes))
        } else {
            Look::Changing
        }
    }

    /// A missing local file is settled when its nearest directory is: a name renamed away a moment ago is
    /// a save in progress, not a deletion.
    async fn absent(&mut self, key: &str, path: &Path, now: Instant) -> Look {
        let depth = key.split('/').count();
        let mut dir = path.parent();
        let mut age = None;
        for _ in 0..depth {
            let Some(d) = dir else { break };
            if let Ok(m) = tokio::fs::metadata(d).await {
                age = age_of(&m, SystemTime::now());
                break;
            }
            dir = d.parent();
        }
        if self.held_still(key, Stamp::Absent, now, age) {
            Look::Ready(None)
        } else {
            Look::Changing
        }
    }

    fn held_still(&mut self, key: &str, stamp: Stamp, now: Instant, age: Option<Duration>) -> bool {
        let debounce = self.debounce;
        let quiet = self.events.quiet_for(now).is_none_or(|q| q >= debounce);
        let round = self.round;
        let seen = seen_entry(&mut self.seen, key, &stamp, now, round);
        if seen.stamp != stamp {
            seen.stamp = stamp;
            seen.since = now;
        }
        seen.round = round;
        let watched = now.saturating_duration_since(seen.since) >= debounce;
        let dated = quiet && age.is_some_and(|a| a >= debounce);
        let still = watched || dated;
        if still {
            seen.changing_since = None;
        } else {
            seen.changing_since.get_or_insert(now);
            self.waiting = true;
        }
        still
    }

    /// The file changed under this look: its new stamp starts now.
    fn changed(&mut self, key: &str, stamp: Stamp, now: Instant) {
        let round = self.round;
        let seen = seen_entry(&mut self.seen, key, &stamp, now, round);
        seen.stamp = stamp;
        seen.since = now;
        seen.round = round;
        seen.changing_since.get_or_insert(now);
        self.waiting = true;
    }
}

/// What the watch knows of `key`, first seen now with `stamp` when it knew nothing.
fn seen_entry<'a>(
    seen: &'a mut HashMap<String, Seen>,
    key: &str,
    stamp: &Stamp,
    now: Instant,
    round: u64,
) -> &'a mut Seen {
    seen.entry(key.to_owned()).or_insert_with(|| Seen {
        stamp: stamp.clone(),
        since: now,
        changing_since: None,
        round,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("bb-settle-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        dir
    }

    /// A file written just now is not taken at the first look, and is once the watch has seen it unchanged for
    /// the debounce period; a write in between starts the wait again.
    #[tokio::test]
    async fn a_file_is_taken_once_it_held_still_for_the_debounce() {
        let dir = tempdir("still");
        let path = dir.join("a.js");
        std::fs::write(&path, "one").unwrap_or_else(|e| panic!("{e}"));
        let events = Arc::new(LastEvent::default());
        events.touch();
        let mut settle = Settle::new(Duration::from_millis(200), events);
        settle.begin_round();
        assert!(matches!(settle.look("a.js", &path).await, Look::Changing));
        assert_eq!(settle.retry_after(), Some(Duration::from_millis(200)));
        settle.end_round();
        tokio::time::sleep(Duration::from_millis(250)).await;
        settle.begin_round();
        match settle.look("a.js", &path).await {
            Look::Ready(Some(b)) => assert_eq!(b, b"one"),
            other => panic!("{other:?}"),
        }
        assert_eq!(settle.retry_after(), None);
        settle.end_round();
        std::fs::write(&path, "two, longer").unwrap_or_else(|e| panic!("{e}"));
        settle.begin_round();
        assert!(matches!(settle.look("a.js", &path).await, Look::Changing));
        settle.end_round();
    }

    /// A file that was last changed long before the watch started, with the watcher quiet, is taken at once;
    /// so is a missing file in a directory nobody touched.
    #[tokio::test]
    async fn an_old_file_is_taken_at_the_first_look() {
        let dir = tempdir("old");
        let path = dir.join("a.js");
        std::fs::write(&path, "old").unwrap_or_else(|e| panic!("{e}"));
        // Older than the debounce by its own times (status change included): wait that long.
        tokio::time::sleep(Duration::from_millis(120)).await;
        let mut settle = Settle::new(Duration::from_millis(100), Arc::new(LastEvent::default()));
        settle.begin_round();
        assert!(matches!(
            settle.look("a.js", &path).await,
            Look::Ready(Some(_))
        ));
        assert!(matches!(
            settle.look("lib/b.js", &dir.join("lib/b.js")).await,
            Look::Ready(None)
        ));
        settle.end_round();
    }

    /// A record is kept only for the files the last round looked at, so files deleted or renamed away over a
    /// long watch do not pile up.
    #[tokio::test]
    async fn the_records_of_files_no_longer_looked_at_are_forgotten() {
        let dir = tempdir("forget");
        let mut settle = Settle::new(Duration::from_millis(100), Arc::new(LastEvent::default()));
        settle.begin_round();
        for i in 0..500 {
            let path = dir.join(format!("f{i}.js"));
            std::fs::write(&path, "x").unwrap_or_else(|e| panic!("{e}"));
            let _ = settle.look(&format!("f{i}.js"), &path).await;
        }
        settle.end_round();
        assert_eq!(settle.seen.len(), 500);
        settle.begin_round();
        let _ = settle.look("f7.js", &dir.join("f7.js")).await;
        settle.end_round();
        assert_eq!(settle.seen.keys().collect::<Vec<_>>(), ["f7.js"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
