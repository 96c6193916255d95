//! Text a peer's users wrote (a player's chat or renamed item, a computer's label), collected for the marks a
//! bridge puts beside it: the JSON paths of those strings and the strings themselves, labelled and fenced
//! ([`crate::text::push_fenced`]) so a model can tell them from the bridge's own words.
//!
//! The marks are a second copy of strings the result or event already holds, so they are bounded: each string
//! is shown shortened to [`crate::text::shorten_for_quote`]'s 200 characters (its start and end), JSON-quoted so that a
//! newline in it cannot write a line of its own under another path, and the first strings in order are kept
//! until one does not fit; that one and every one after it are counted as left out (still in the data,
//! unlisted).

use std::fmt::{Display, Write};

/// How many strings, and how many bytes of `path: text` lines, one set of marks holds.
#[derive(Debug, Clone, Copy)]
pub struct MarkLimits {
    pub strings: usize,
    pub bytes: usize,
}

/// The marked strings of one result or event.
#[derive(Debug)]
pub struct Marks {
    limits: MarkLimits,
    paths: Vec<String>,
    /// The lines to fence, `path: text` each.
    body: String,
    left_out: usize,
}

impl Marks {
    pub fn new(limits: MarkLimits) -> Self {
        Self {
            limits,
            paths: Vec::new(),
            body: String::new(),
            left_out: 0,
        }
    }

    /// Marks `text` at `path` (formatted only when it is kept).
    pub fn add(&mut self, path: impl Display, text: &str) {
        let shown = serde_json::Value::String(crate::text::shorten_for_quote(text)).to_string();
        if self.left_out > 0 || self.paths.len() >= self.limits.strings {
            self.left_out += 1;
            return;
        }
        let start = self.body.len();
        if start > 0 {
            self.body.push('\n');
        }
        let path_start = self.body.len();
        // Writing to a String cannot fail.
        let _ = write!(self.body, "{path}");
        let path_end = self.body.len();
        if path_end + 2 + shown.len() > self.limits.bytes {
            self.body.truncate(start);
            self.left_out += 1;
            return;
        }
        self.paths.push(self.body[path_start..path_end].to_owned());
        self.body.push_str(": ");
        self.body.push_str(&shown);
    }

    /// Nothing marked and nothing left out: the data carries no marks at all.
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty() && self.left_out == 0
    }

    pub fn paths(&self) -> &[String] {
        &self.paths
    }

    /// Strings past the limits, counted.
    pub fn left_out(&self) -> usize {
        self.left_out
    }

    /// The paths, and the text that shows the strings: `label`, then the `path: text` lines fenced as `info`.
    pub fn into_parts(self, label: &str, info: &str) -> (Vec<String>, String, usize) {
        let mut text = String::with_capacity(label.len() + self.body.len() + 32);
        text.push_str(label);
        crate::text::push_fenced(&mut text, info, &self.body);
        (self.paths, text, self.left_out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: MarkLimits = MarkLimits {
        strings: 4,
        bytes: 64,
    };

    #[test]
    fn the_marks_stop_at_the_count_and_count_the_rest() {
        let mut m = Marks::new(LIMITS);
        for i in 0..7 {
            m.add(format_args!("lines[{i}]"), &format!("n{i}"));
        }
        assert_eq!(m.paths(), ["lines[0]", "lines[1]", "lines[2]", "lines[3]"]);
        assert_eq!(m.left_out(), 3);
        let (_, text, _) = m.into_parts("L:\n", "who");
        assert_eq!(
            text,
            "L:\n```who\nlines[0]: \"n0\"\nlines[1]: \"n1\"\nlines[2]: \"n2\"\nlines[3]: \"n3\"\n```"
        );
    }

    #[test]
    fn the_marks_stop_at_the_bytes() {
        let mut m = Marks::new(LIMITS);
        m.add("a", &"x".repeat(30));
        m.add("b", &"y".repeat(30));
        m.add("c", "z");
        assert_eq!(
            m.paths(),
            ["a"],
            "the second does not fit, nor any after it"
        );
        assert_eq!(m.left_out(), 2);
    }

    #[test]
    fn a_long_string_is_shown_by_its_start_and_end_and_a_newline_writes_no_line() {
        let mut m = Marks::new(MarkLimits {
            strings: 4,
            bytes: 4096,
        });
        m.add("a", &format!("start{}end", "x".repeat(10_000)));
        m.add("b", "x\nlabel: trusted");
        assert_eq!(m.paths(), ["a", "b"]);
        let (_, text, _) = m.into_parts("", "who");
        assert!(text.len() < 400, "{text}");
        let lines: Vec<_> = text.lines().collect();
        assert!(
            lines[1].starts_with("a: \"start") && lines[1].ends_with("end\""),
            "{text}"
        );
        assert_eq!(lines[2], r#"b: "x\nlabel: trusted""#);
        assert_eq!(lines.len(), 4, "{text}");
    }

    #[test]
    fn the_fence_is_longer_than_any_backtick_run_in_the_strings() {
        let mut m = Marks::new(LIMITS);
        m.add("msg", "a ````` b");
        let (_, text, _) = m.into_parts("", "player-content");
        assert!(
            text.starts_with("``````player-content\nmsg: \"a ````` b\"\n``````"),
            "{text}"
        );
    }
}
