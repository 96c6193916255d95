//! The id of a request that could not be read: a line that does not parse (a lone surrogate, nesting past
//! serde's limit, a syntax error inside `params`) or was too long to read whole. Such a request used to go
//! unanswered, and a client with no timeout of its own (the Python SDK's) waited for good. Its envelope is read
//! here without checking the values it steps over, so the request gets an error naming what was wrong.
//!
//! Only a request's id: the object must have `method` at its top level and no `result` or `error`. Answering a
//! response, or text that is no message, with an error is how error storms start (rmcp #938).

use rmcp::model::{NumberOrString, RequestId};

/// How much of an over-long line's start and end is kept to look for its id.
pub(crate) const KEPT_BYTES: usize = 4096;

/// The request id in `head` (a line's start, or all of it), or in `tail` (its end, where the official TypeScript
/// SDK writes `id`: `{"method":..., "params":..., "jsonrpc":"2.0","id":7}`).
pub(crate) fn request_id(head: &[u8], tail: &[u8]) -> Option<RequestId> {
    let head = head.strip_prefix(super::wire::UTF8_BOM).unwrap_or(head);
    let top = TopLevel::read(head);
    if !top.method || top.answer {
        return None;
    }
    top.id.or_else(|| last_member_id(tail))
}

#[derive(Default)]
struct TopLevel {
    id: Option<RequestId>,
    method: bool,
    answer: bool,
}

impl TopLevel {
    /// The top-level members of the object `text` starts, as far as it goes.
    fn read(text: &[u8]) -> Self {
        let mut top = Self::default();
        let mut at = Cursor { text, at: 0 };
        if at.next_non_space() != Some(b'{') {
            return top;
        }
        loop {
            match at.next_non_space() {
                Some(b'"') => {}
                _ => return top,
            }
            let Some(key) = at.plain_string() else {
                return top;
            };
            if at.next_non_space() != Some(b':') {
                return top;
            }
            match key {
                b"id" => top.id = at.id(),
                b"method" => top.method = true,
                b"result" | b"error" => top.answer = true,
                _ => {}
            }
            if !at.skip_value() {
                return top;
            }
            match at.next_non_space() {
                Some(b',') => {}
                _ => return top,
            }
        }
    }
}

struct Cursor<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn peek_non_space(&mut self) -> Option<u8> {
        while let Some(b) = self.text.get(self.at) {
            if !matches!(b, b' ' | b'\t' | b'\r' | b'\n') {
                return Some(*b);
            }
            self.at += 1;
        }
        None
    }

    fn next_non_space(&mut self) -> Option<u8> {
        let b = self.peek_non_space()?;
        self.at += 1;
        Some(b)
    }

    /// After an opening quote: the string's bytes, when it holds no escape (then `None`, the scan stops).
    fn plain_string(&mut self) -> Option<&'a [u8]> {
        let start = self.at;
        let len = memchr::memchr2(b'"', b'\\', &self.text[start..])?;
        if self.text[start + len] != b'"' {
            return None;
        }
        self.at = start + len + 1;
        Some(&self.text[start..start + len])
    }

    /// An id in its plain form (an integer, or a string with no escape), left unread otherwise.
    fn id(&mut self) -> Option<RequestId> {
        let start = self.at;
        let id = match self.peek_non_space()? {
            b'"' => {
                self.at += 1;
                let text = std::str::from_utf8(self.plain_string()?).ok()?;
                Some(NumberOrString::String(text.into()))
            }
            _ => {
                let from = self.at;
                let digits = self.text[from..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit() || **b == b'-')
                    .count();
                // `1.5` or `1e3` is no integer: answering it as id 1 would answer another request.
                let ends = self
                    .text
                    .get(from + digits)
                    .is_some_and(|b| b.is_ascii_whitespace() || *b == b',' || *b == b'}');
                if !ends {
                    self.at = start;
                    return None;
                }
                std::str::from_utf8(&self.text[from..from + digits])
                    .ok()?
                    .parse::<i64>()
                    .ok()
                    .map(NumberOrString::Number)
            }
        };
        // The value is stepped over by `skip_value` like any other.
        self.at = start;
        id
    }

    /// Steps over one value without checking it: strings (escapes included) and nesting are followed, nothing
    /// else; `false` at the end of the text.
    fn skip_value(&mut self) -> bool {
        let mut depth = 0usize;
        loop {
            let Some(b) = self.peek_non_space() else {
                return false;
            };
            match b {
                b'"' => {
                    self.at += 1;
                    if !self.skip_string_rest() {
                        return false;
                    }
                }
                b'{' | b'[' => {
                    depth += 1;
                    self.at += 1;
                }
                // At the top, what ends the member ends the value (left for the caller).
                b'}' | b']' | b',' if depth == 0 => return true,
                b'}' | b']' => {
                    depth -= 1;
                    self.at += 1;
                }
                _ => self.at += 1,
            }
        }
    }

    /// After an opening quote, past the closing one; `false` at the end of the text.
    fn skip_string_rest(&mut self) -> bool {
        loop {
            let Some(len) = memchr::memchr2(b'"', b'\\', &self.text[self.at..]) else {
                return false;
            };
            let stop = self.at + len;
            if self.text[stop] == b'"' {
                self.at = stop + 1;
                return true;
            }
            self.at = stop + 2;
            if self.at > self.text.len() {
                return false;
            }
        }
    }
}

/// The id of `…,"id":7}` or `…,"id":"a"}` ending `tail`.
fn last_member_id(tail: &[u8]) -> Option<RequestId> {
    let text = tail.trim_ascii_end();
    let text = text.strip_suffix(b"}")?.trim_ascii_end();
    let (id, rest) = if let Some(inner) = text.strip_suffix(b"\"") {
        let open = memchr::memrchr(b'"', inner)?;
        let value = &inner[open + 1..];
        if value.contains(&b'\\') || inner[..open].ends_with(b"\\") {
            return None;
        }
        (
            NumberOrString::String(std::str::from_utf8(value).ok()?.into()),
            &inner[..open],
        )
    } else {
        let digits = text
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_digit() || **b == b'-')
            .count();
        let value = &text[text.len() - digits..];
        (
            NumberOrString::Number(std::str::from_utf8(value).ok()?.parse().ok()?),
            &text[..text.len() - digits],
        )
    };
    let rest = rest.trim_ascii_end().strip_suffix(b":")?.trim_ascii_end();
    let rest = rest.strip_suffix(b"\"id\"")?.trim_ascii_end();
    (rest.ends_with(b",") || rest.ends_with(b"{")).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(line: &str) -> Option<RequestId> {
        request_id(line.as_bytes(), line.as_bytes())
    }

    #[test]
    fn a_requests_id_is_read_whatever_its_params_hold() {
        let deep = format!("{}{}", "[".repeat(1000), "]".repeat(1000));
        for (line, want) in [
            (
                r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"a":"\udcff"}}"#
                    .to_owned(),
                Some(NumberOrString::Number(4)),
            ),
            (
                format!(r#"{{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{deep}}}"#),
                Some(NumberOrString::String("x-1".into())),
            ),
            // The TypeScript SDK's order: id last.
            (
                r#"{"method":"tools/call","params":{"s":"}\"{,"},"jsonrpc":"2.0","id":7}"#
                    .to_owned(),
                Some(NumberOrString::Number(7)),
            ),
            (
                r#"{"method":"x","params":{"a": tru},"id":9}"#.to_owned(),
                Some(NumberOrString::Number(9)),
            ),
            // No method: a response, or no message; never answered.
            (
                r#"{"jsonrpc":"2.0","id":4,"result":{"a":"\udcff"}}"#.to_owned(),
                None,
            ),
            (r#"{"jsonrpc":"2.0","id":4,"params":{}}"#.to_owned(), None),
            (
                r#"{"id":1.5,"method":"x","params":{"a": tru}}"#.to_owned(),
                None,
            ),
            (
                r#"{"id":1e3,"method":"x","params":{"a": tru}}"#.to_owned(),
                None,
            ),
            (
                r#"{"method":"x","params":{"a": tru},"id":1.5}"#.to_owned(),
                None,
            ),
            (
                r#"{"id" : 12 ,"method":"x","params":{"a": tru}}"#.to_owned(),
                Some(NumberOrString::Number(12)),
            ),
            (r#"{"id":4,"method":"x","error":{}}"#.to_owned(), None),
            ("garbage".to_owned(), None),
            ("{".to_owned(), None),
            (String::new(), None),
        ] {
            assert_eq!(id(&line), want, "{line}");
        }
    }

    #[test]
    fn an_over_long_lines_id_is_read_from_its_start_or_its_end() {
        let head = br#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"arguments":{"content":"aaaa"#;
        assert_eq!(
            request_id(head, b"aaa\"}}}"),
            Some(NumberOrString::Number(12))
        );
        let head = br#"{"method":"tools/call","params":{"arguments":{"content":"aaaa"#;
        let tail = br#"aaaa"}},"jsonrpc":"2.0","id":"t-3"}"#;
        assert_eq!(
            request_id(head, tail),
            Some(NumberOrString::String("t-3".into()))
        );
        assert_eq!(request_id(head, br#"aaaa"}},"jsonrpc":"2.0"}"#), None);
        let response = br#"{"jsonrpc":"2.0","id":12,"result":{"content":"aaaa"#;
        assert_eq!(request_id(response, b"\"}}"), None);
    }
}
