//! What a session printed and raised, kept for the `dap_*` tools: a ring of entries bounded in bytes; the
//! oldest go first and are counted, so a reader knows output is missing.

use serde_json::{Value, json};
use std::collections::VecDeque;

/// Bytes of text a session's journal holds.
pub const JOURNAL_BYTES: usize = 4 << 20;
/// One entry's text is cut to this (a program printing one huge line cannot evict everything else).
pub const ENTRY_BYTES: usize = 64 << 10;

#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub seq: u64,
    pub ts: u64,
    /// `output`, `exception`, `stopped`, `exited`, `terminated`.
    pub kind: &'static str,
    /// The output category (`stdout`, `stderr`, `console`, ...), or the stop reason.
    pub category: String,
    pub text: String,
    pub source: Option<(String, u64)>,
}

impl Entry {
    pub fn to_json(&self, show_source: bool) -> Value {
        let mut v = json!({"seq": self.seq, "ts": self.ts, "kind": self.kind,
            "category": self.category, "text": self.text});
        if show_source && let Some((path, line)) = &self.source {
            v["source"] = json!({"path": path, "line": line});
        }
        v
    }
}

#[derive(Debug)]
pub struct Journal {
    entries: VecDeque<Entry>,
    bytes: usize,
    limit: usize,
    next_seq: u64,
    pub dropped: u64,
}

impl Journal {
    pub fn new(limit: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            bytes: 0,
            limit,
            next_seq: 0,
            dropped: 0,
        }
    }

    pub fn push(
        &mut self,
        ts: u64,
        kind: &'static str,
        category: &str,
        text: &str,
        source: Option<(String, u64)>,
    ) {
        let mut cut = text.len().min(ENTRY_BYTES).min(self.limit);
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let text = text[..cut].to_owned();
        self.bytes += text.len();
        self.entries.push_back(Entry {
            seq: self.next_seq,
            ts,
            kind,
            category: category.to_owned(),
            text,
            source,
        });
        self.next_seq += 1;
        while self.bytes > self.limit
            && let Some(old) = self.entries.pop_front()
        {
            self.bytes -= old.text.len();
            self.dropped += 1;
        }
    }

    pub fn entries(&self) -> impl DoubleEndedIterator<Item = &Entry> + Clone {
        self.entries.iter()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_bound_drops_the_oldest_and_counts_them() {
        let mut j = Journal::new(100);
        for i in 0..30 {
            j.push(0, "output", "stdout", &format!("line {i:02}\n"), None);
        }
        assert!(j.bytes() <= 100);
        assert_eq!(j.dropped, 30 - j.entries().count() as u64);
        assert_eq!(
            j.entries().last().map(|e| e.text.as_str()),
            Some("line 29\n")
        );
        j.push(0, "output", "stdout", &"é".repeat(1000), None);
        assert!(j.bytes() <= 100);
    }
}
