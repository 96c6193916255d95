//! Reads an agent can afford: a large text (a file, the NetScript definitions) is handed out a page at a time,
//! with its total size and the offset of the next page. The game itself has no paging: the bridge cuts.

use bridge_core::ToolError;
use schemars::JsonSchema;
use serde::Serialize;

/// A page when the caller names no `limit`: about 16k tokens.
pub const DEFAULT_PAGE_BYTES: usize = 64 * 1024;
/// The largest page one reply may carry.
pub const MAX_PAGE_BYTES: usize = 1 << 20;

/// Which part of a large text to return (the `offset` and `limit` arguments of the reading tools). Byte
/// offsets into the UTF-8 text; a page ends at a line end when the window has one, so pages are whole lines.
#[derive(Debug, Clone, Copy, Default)]
pub struct PageArgs {
    pub offset: usize,
    pub limit: Option<usize>,
}

impl PageArgs {
    pub fn validate(&self) -> Result<(), ToolError> {
        if let Some(limit) = self.limit {
            bridge_core::check::in_range("limit", limit, 1, MAX_PAGE_BYTES)?;
        }
        Ok(())
    }

    fn limit(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_PAGE_BYTES)
    }
}

/// Where a page sits in its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct PageInfo {
    /// Size of the whole text in bytes.
    pub total_bytes: usize,
    /// Where this page starts.
    pub offset: usize,
    /// Bytes in this page.
    pub returned_bytes: usize,
    /// Pass as `offset` to read on; absent when this page reaches the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

impl PageInfo {
    pub fn complete(&self) -> bool {
        self.offset == 0 && self.next_offset.is_none()
    }

    /// A line after a partial page's text, so an agent that reads only the text still knows there is more.
    pub fn trailer(&self, tool: &str) -> Option<String> {
        if self.complete() {
            return None;
        }
        let end = self.offset + self.returned_bytes;
        let more = match self.next_offset {
            Some(next) => format!("; call {tool} again with offset {next} for the rest"),
            None => " (the end)".to_owned(),
        };
        Some(format!(
            "\n[bytes {}..{end} of {}{more}]",
            self.offset, self.total_bytes
        ))
    }
}

/// The page of `text` that `args` asks for. An offset past the end is an argument error naming the size.
pub fn cut<'a>(text: &'a str, args: &PageArgs) -> Result<(&'a str, PageInfo), ToolError> {
    let total = text.len();
    if args.offset > total {
        // The text was fetched for this call, so the default "nothing was sent" would be untrue.
        return Err(ToolError::invalid_argument(
            "offset",
            format!("`offset` is {}; the text has {total} bytes", args.offset),
        )
        .with_hint(format!(
            "the text has {total} bytes now: call again with an offset of at most {total} (0 starts over)"
        )));
    }
    let start = floor_boundary(text, args.offset);
    let mut end = start.saturating_add(args.limit()).min(total);
    if end < total {
        let window = &text.as_bytes()[start..end];
        end = match window.iter().rposition(|b| *b == b'\n') {
            Some(nl) => start + nl + 1,
            None => floor_boundary(text, end),
        };
        if end == start {
            // A limit smaller than one character still makes progress.
            end = ceil_boundary(text, start + 1);
        }
    }
    let info = PageInfo {
        total_bytes: total,
        offset: start,
        returned_bytes: end - start,
        next_offset: (end < total).then_some(end),
    };
    Ok((&text[start..end], info))
}

/// The page as the text of a reply: the page itself, then, for a partial page, a line saying where the rest is.
pub fn page_text(text: &str, args: &PageArgs, tool: &str) -> Result<(String, PageInfo), ToolError> {
    let (page, info) = cut(text, args)?;
    let mut out = page.to_owned();
    out.extend(info.trailer(tool));
    Ok((out, info))
}

fn floor_boundary(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(text: &str, mut i: usize) -> usize {
    while i < text.len() && !text.is_char_boundary(i) {
        i += 1;
    }
    i.min(text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(text: &str, offset: usize, limit: usize) -> (String, PageInfo) {
        let args = PageArgs {
            offset,
            limit: Some(limit),
        };
        cut(text, &args)
            .map(|(t, i)| (t.to_owned(), i))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn pages_are_whole_lines_and_chain_to_the_whole_text() {
        let text = "line one\nline two\nline three\n";
        let (first, info) = page(text, 0, 12);
        assert_eq!(first, "line one\n");
        assert_eq!(info.next_offset, Some(9));
        let mut rebuilt = String::new();
        let mut offset = Some(0);
        while let Some(o) = offset {
            let (t, i) = page(text, o, 12);
            rebuilt.push_str(&t);
            offset = i.next_offset;
        }
        assert_eq!(rebuilt, text);
    }

    #[test]
    fn a_page_never_splits_a_character() {
        let text = "ééééé";
        let (t, info) = page(text, 0, 3);
        assert_eq!(t, "é");
        assert_eq!(info.next_offset, Some(2));
        let (t, _) = page(text, 1, 1);
        assert_eq!(
            t, "é",
            "an offset inside a character starts at that character"
        );
    }

    #[test]
    fn small_texts_come_whole_and_offsets_past_the_end_are_refused() {
        let (t, info) = page("abc", 0, 100);
        assert_eq!(t, "abc");
        assert!(info.complete() && info.trailer("read_file").is_none());
        let args = PageArgs {
            offset: 4,
            limit: None,
        };
        let e = cut("abc", &args).err();
        assert!(e.is_some_and(|e| e.message().contains("3 bytes")));
        let too_big = PageArgs {
            offset: 0,
            limit: Some(MAX_PAGE_BYTES + 1),
        };
        assert!(too_big.validate().is_err());
    }
}
