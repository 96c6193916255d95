//! What the last sync wrote, so each side's edits since can be told from content it may replace. Kept in `DIR/.bitburner-sync.json`: per game server, each file's path and a hash of the content
//! that was synced.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The manifest's file name inside the synced directory; `push` never uploads it.
pub const FILE_NAME: &str = ".bitburner-sync.json";

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Manifest {
    /// server → path → hash of the content last synced.
    #[serde(default)]
    servers: BTreeMap<String, BTreeMap<String, String>>,
}

impl Manifest {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(FILE_NAME)
    }

    /// The manifest of `dir`; none yet (or unreadable) is an empty one, which makes `pull` keep every
    /// existing file whose content differs: it cannot know they are unedited.
    pub fn load(dir: &Path) -> Self {
        std::fs::read(Self::path(dir))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(Self::path(dir), text)
    }

    pub fn record(&mut self, server: &str, path: &str, content: &[u8]) {
        self.record_digest(server, path, digest(content));
    }

    /// Records a [`digest`] taken before the content was handed away.
    pub fn record_digest(&mut self, server: &str, path: &str, digest: String) {
        self.servers
            .entry(server.to_owned())
            .or_default()
            .insert(path.to_owned(), digest);
    }

    /// The hash of what the last sync of `path` wrote, if it synced it.
    pub fn get(&self, server: &str, path: &str) -> Option<&str> {
        self.servers
            .get(server)
            .and_then(|files| files.get(path))
            .map(String::as_str)
    }

    /// Whether `content` is what the last sync of `path` wrote.
    pub fn unchanged(&self, server: &str, path: &str, content: &[u8]) -> bool {
        self.servers
            .get(server)
            .and_then(|files| files.get(path))
            .is_some_and(|h| *h == digest(content))
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
}
