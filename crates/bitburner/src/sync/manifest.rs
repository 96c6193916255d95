//! What the last sync wrote, so each side's edits since can be told from content it may replace. Kept in
//! `DIR/.bitburner-sync.json`: per game server, each file's path, a hash of the content that was synced and
//! the hashes synced before it (a few), so a game that went back to an older save is told from a game edit;
//! and the conflict copies the sync wrote, so a copy is never pushed and never overwritten once edited.

use super::write::{WriteError, write_inside};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The manifest's file name inside the synced directory; `push` never uploads it.
pub const FILE_NAME: &str = ".bitburner-sync.json";

/// How many earlier synced hashes are kept per file: enough for the saves a player goes back over, small
/// enough that the record stays a few KB for hundreds of scripts.
pub const OLDER_KEPT: usize = 8;

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Manifest {
    /// server → path → what was synced.
    #[serde(default)]
    servers: BTreeMap<String, BTreeMap<String, Entry>>,
    /// Conflict copies this sync wrote: local path ('/'-separated) → what it was written with.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    copies: BTreeMap<String, Copy>,
}

/// One file's record: the hash synced last and, newest first, those synced before it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(from = "EntryText", into = "EntryText")]
struct Entry {
    synced: String,
    older: Vec<String>,
}

/// The record as written: a bare hash (older records, and files synced only once) or with its history.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum EntryText {
    Hash(String),
    History {
        synced: String,
        #[serde(default)]
        older: Vec<String>,
    },
}

impl From<EntryText> for Entry {
    fn from(t: EntryText) -> Self {
        match t {
            EntryText::Hash(synced) => Entry {
                synced,
                older: Vec::new(),
            },
            EntryText::History { synced, mut older } => {
                older.truncate(OLDER_KEPT);
                Entry { synced, older }
            }
        }
    }
}

impl From<Entry> for EntryText {
    fn from(e: Entry) -> Self {
        if e.older.is_empty() {
            EntryText::Hash(e.synced)
        } else {
            EntryText::History {
                synced: e.synced,
                older: e.older,
            }
        }
    }
}

/// A conflict copy: the file it is the game's version of, on which server, and the hash written into it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Copy {
    pub of: String,
    pub server: String,
    pub hash: String,
}

impl Manifest {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(FILE_NAME)
    }

    /// The manifest of `dir`. None yet is an empty one, which makes every file that differs a conflict (it
    /// cannot know which side is unedited). One that exists but cannot be read is the same, and the second
    /// value says why, so the caller tells the player and keeps the old file aside instead of silently
    /// replacing it.
    pub fn load(dir: &Path) -> (Self, Option<String>) {
        let path = Self::path(dir);
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Self::default(), None),
            Ok(m) if m.file_type().is_symlink() => {
                return (
                    Self::default(),
                    Some(
                        "it is a symlink, and the sync never reads or writes through one"
                            .to_owned(),
                    ),
                );
            }
            _ => {}
        }
        let bytes = match super::write::read_regular_blocking(&path) {
            Ok(b) => b,
            Err(e) => return (Self::default(), Some(e.to_string())),
        };
        match serde_json::from_slice(&bytes) {
            Ok(m) => (m, None),
            Err(e) => (
                Self::default(),
                Some(format!("not a record this version reads: {e}")),
            ),
        }
    }

    /// Writes the record atomically (a crash leaves the old one or the new one), never through a symlink.
    pub fn save(&self, dir: &Path) -> Result<(), WriteError> {
        let text = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        write_inside(dir, FILE_NAME, &text)
    }

    pub fn record(&mut self, server: &str, path: &str, content: &[u8]) {
        self.record_digest(server, path, digest(content));
    }

    /// Records a [`digest`] taken before the content was handed away; the hash it replaces becomes the
    /// newest older one.
    pub fn record_digest(&mut self, server: &str, path: &str, digest: String) {
        let entry = self
            .servers
            .entry(server.to_owned())
            .or_default()
            .entry(path.to_owned())
            .or_default();
        if entry.synced == digest {
            return;
        }
        // Synced again, it is the current version, not an older one.
        entry.older.retain(|h| *h != digest);
        let previous = std::mem::replace(&mut entry.synced, digest);
        if !previous.is_empty() {
            entry.older.retain(|h| *h != previous);
            entry.older.insert(0, previous);
        }
        entry.older.truncate(OLDER_KEPT);
    }

    /// The hash of what the last sync of `path` wrote, if it synced it.
    pub fn get(&self, server: &str, path: &str) -> Option<&str> {
        self.entry(server, path).map(|e| e.synced.as_str())
    }

    /// The hashes synced before the last one, newest first.
    pub fn older(&self, server: &str, path: &str) -> &[String] {
        self.entry(server, path)
            .map(|e| e.older.as_slice())
            .unwrap_or_default()
    }

    fn entry(&self, server: &str, path: &str) -> Option<&Entry> {
        self.servers.get(server).and_then(|files| files.get(path))
    }

    /// Whether `content` is what the last sync of `path` wrote.
    pub fn unchanged(&self, server: &str, path: &str, content: &[u8]) -> bool {
        self.get(server, path).is_some_and(|h| h == digest(content))
    }

    /// The conflict copy the sync wrote at `path`, if any.
    pub fn copy(&self, path: &str) -> Option<&Copy> {
        self.copies.get(path)
    }

    pub fn copies(&self) -> impl Iterator<Item = (&String, &Copy)> {
        self.copies.iter()
    }

    pub fn record_copy(&mut self, path: &str, copy: Copy) {
        self.copies.insert(path.to_owned(), copy);
    }

    /// Forgets the copies `keep` says are gone (the player deleted or renamed them), and returns them.
    pub fn retain_copies(&mut self, mut keep: impl FnMut(&str) -> bool) -> Vec<Copy> {
        let gone: Vec<String> = self
            .copies
            .keys()
            .filter(|path| !keep(path))
            .cloned()
            .collect();
        gone.iter()
            .filter_map(|path| self.copies.remove(path))
            .collect()
    }
}

/// FNV-1a, 64 bits: stable across Rust versions (the std hasher is not), and enough to notice an edit;
/// nothing here defends against someone forging a collision in their own files.
pub fn digest(content: impl AsRef<[u8]>) -> String {
    let content = content.as_ref();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in content {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("fnv1a64:{h:016x}:{}", content.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_is_noticed_and_a_record_is_per_server() {
        let mut m = Manifest::default();
        m.record("home", "a.js", b"one");
        assert!(m.unchanged("home", "a.js", b"one"));
        assert!(!m.unchanged("home", "a.js", b"one!"));
        assert!(!m.unchanged("n00dles", "a.js", b"one"));
        assert_eq!(digest(b""), "fnv1a64:cbf29ce484222325:0");
    }

    #[test]
    fn older_hashes_are_kept_newest_first_and_bounded() {
        let mut m = Manifest::default();
        for i in 0..20 {
            m.record("home", "a.js", format!("v{i}").as_bytes());
        }
        let older = m.older("home", "a.js");
        assert_eq!(older.len(), OLDER_KEPT);
        assert_eq!(older[0], digest("v18"));
        // Going back to an older version on purpose makes it the current one, not an older one.
        m.record("home", "a.js", b"v15");
        assert!(!m.older("home", "a.js").contains(&digest("v15")));
        assert_eq!(m.older("home", "a.js")[0], digest("v19"));
    }

    #[test]
    fn a_record_of_bare_hashes_still_reads() {
        let old = br#"{"servers":{"home":{"a.js":"fnv1a64:cbf29ce484222325:0"}}}"#;
        let m: Manifest = serde_json::from_slice(old).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.get("home", "a.js"), Some("fnv1a64:cbf29ce484222325:0"));
        assert!(m.older("home", "a.js").is_empty());
    }
}
