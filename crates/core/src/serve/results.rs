//! Results an agent can afford: a tool result above the request's cap is cut, and its whole text is kept in a
//! bounded, expiring store, read back page by page with `resources/read` on `mcp-bridges://result/ID?offset=N`.
//!
//! Bounded, since any client can make results: at most `max_entries` texts and `max_bytes` bytes in all (the
//! oldest go first), each forgotten `ttl` after it was made. Expiry is swept on every access, and every 30 s by
//! the server's sweeper (`sweeper.rs`), so an idle server holds none.

use crate::error::ToolError;
use crate::json_size::{json_len, shrink};
use crate::text::floor_boundary;
use crate::tool::{
    MAX_RESULT_BYTES_META_KEY, RESULT_CAP_BYTES, RESULT_CAP_RANGE, TRUNCATED_META_KEY,
};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResult, ContentBlock, MetaObject, RequestMetaObject, Resource, ResourceContents,
};
use serde_json::json;
use serde_json::value::RawValue;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// Where kept results are read: `mcp-bridges://result/ID?offset=N`.
const SCHEME: &str = "mcp-bridges://result/";

#[derive(Debug, Clone, Copy)]
pub(crate) struct ResultLimits {
    pub max_entries: usize,
    pub max_bytes: usize,
    pub ttl: Duration,
}

impl Default for ResultLimits {
    fn default() -> Self {
        Self {
            max_entries: 256,
            max_bytes: 64 << 20,
            ttl: Duration::from_secs(600),
        }
    }
}

struct Kept {
    id: String,
    text: String,
    expires: Instant,
}

#[derive(Default)]
struct Entries {
    /// Oldest first.
    queue: VecDeque<Kept>,
    bytes: usize,
}

impl Entries {
    fn sweep(&mut self, now: Instant) {
        while self.queue.front().is_some_and(|k| k.expires <= now) {
            self.pop();
        }
    }

    fn pop(&mut self) {
        if let Some(kept) = self.queue.pop_front() {
            self.bytes -= kept.text.len();
        }
    }
}

/// The whole texts of cut results, per process.
pub(crate) struct ResultStore {
    limits: ResultLimits,
    entries: Mutex<Entries>,
}

impl Default for ResultStore {
    fn default() -> Self {
        Self::new(ResultLimits::default())
    }
}

impl ResultStore {
    pub(crate) fn new(limits: ResultLimits) -> Self {
        Self {
            limits,
            entries: Mutex::default(),
        }
    }

    /// Forgets what expired (the server's [`super::sweeper`] calls it while nobody reads).
    pub(crate) fn sweep_expired(&self) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.sweep(Instant::now());
        }
    }

    #[cfg(test)]
    pub(crate) fn kept_bytes(&self) -> usize {
        self.entries.lock().map(|e| e.bytes).unwrap_or(0)
    }

    /// Keeps `text`, making room by forgetting the oldest; `None` when it alone is larger than the store.
    fn keep(&self, text: String) -> Option<String> {
        if text.len() > self.limits.max_bytes || self.limits.max_entries == 0 {
            return None;
        }
        let mut entries = self.entries.lock().ok()?;
        let now = Instant::now();
        entries.sweep(now);
        while entries.queue.len() >= self.limits.max_entries
            || entries.bytes + text.len() > self.limits.max_bytes
        {
            entries.pop();
        }
        let id = format!("{:032x}", rand::random::<u128>());
        entries.bytes += text.len();
        entries.queue.push_back(Kept {
            id: id.clone(),
            text,
            expires: now + self.limits.ttl,
        });
        Some(id)
    }

    /// Answers `resources/read` on a result page; `None` when `uri` is not a result URI.
    pub(crate) fn read(
        &self,
        uri: &str,
        cap: usize,
    ) -> Option<Result<Vec<ResourceContents>, McpError>> {
        let rest = uri.strip_prefix(SCHEME)?;
        Some(self.page(uri, rest, cap))
    }

    fn page(&self, uri: &str, rest: &str, cap: usize) -> Result<Vec<ResourceContents>, McpError> {
        let (id, query) = rest.split_once('?').unwrap_or((rest, ""));
        let offset = match query.strip_prefix("offset=") {
            None if query.is_empty() => 0,
            Some(n) => n.parse::<usize>().map_err(|_| bad_offset(uri))?,
            None => return Err(bad_offset(uri)),
        };
        let mut entries = self
            .entries
            .lock()
            .map_err(|_| McpError::internal_error("the result store is poisoned", None))?;
        entries.sweep(Instant::now());
        let Some(kept) = entries.queue.iter().find(|k| k.id == id) else {
            return Err(self.gone(uri));
        };
        let total = kept.text.len();
        if offset > total {
            return Err(McpError::invalid_params(
                format!("offset: {offset} is past the end of this result ({total} bytes)"),
                Some(json!({ "field": "offset", "limit": total })),
            ));
        }
        let start = floor_boundary(&kept.text, offset);
        let end = floor_boundary(&kept.text, start.saturating_add(cap).min(total));
        // A cap smaller than one character still moves on.
        let end = if end == start && start < total {
            ceil_boundary(&kept.text, start + 1)
        } else {
            end
        };
        let next = (end < total).then(|| page_uri(id, end));
        let mut meta = serde_json::Map::new();
        meta.insert(
            TRUNCATED_META_KEY.to_owned(),
            json!({ "total_bytes": total, "offset": start, "shown_bytes": end - start, "rest": next }),
        );
        let mut contents = vec![ResourceContents::TextResourceContents {
            uri: uri.to_owned(),
            mime_type: Some("text/plain".into()),
            text: kept.text[start..end].to_owned(),
            meta: Some(MetaObject(meta)),
        }];
        if let Some(next) = next {
            contents.push(ResourceContents::TextResourceContents {
                text: format!(
                    "[bytes {start}..{end} of {total} shown; the rest: resources/read {next}]"
                ),
                uri: next,
                mime_type: Some("text/plain".into()),
                meta: None,
            });
        }
        Ok(contents)
    }
}

impl ResultStore {
    /// Holds a resource's contents to `cap` as a tool result is held: a longer text is kept and answered by its
    /// first page, under the resource's own URI, with the rest to read page by page. A provider's resource is
    /// the live system's (a game's 30 MB file): read whole, it reached the client whole. A blob passes as an
    /// image in a tool result does (pages of text cannot hold it); the provider that makes one bounds it (the
    /// sandbox's files at 512 KiB).
    pub(crate) fn cap_resource(
        &self,
        contents: ResourceContents,
        cap: usize,
    ) -> Result<Vec<ResourceContents>, McpError> {
        match contents {
            ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            } if text.len() > cap => {
                let total = text.len();
                let keepable = total <= self.limits.max_bytes && self.limits.max_entries > 0;
                if keepable {
                    // Fails only when the store's lock is poisoned: its size and count were checked above.
                    let id = self.keep(text).ok_or_else(|| {
                        McpError::internal_error("the result store is poisoned", None)
                    })?;
                    let mut pages = self.page(&uri, &id, cap)?;
                    if let Some(ResourceContents::TextResourceContents { mime_type: m, .. }) =
                        pages.first_mut()
                    {
                        *m = mime_type;
                    }
                    return Ok(pages);
                }
                let shown = floor_boundary(&text, cap);
                let mut meta = serde_json::Map::new();
                meta.insert(
                    TRUNCATED_META_KEY.to_owned(),
                    json!({ "total_bytes": total, "offset": 0, "shown_bytes": shown, "rest": null }),
                );
                Ok(vec![ResourceContents::TextResourceContents {
                    uri,
                    mime_type,
                    text: text[..shown].to_owned(),
                    meta: Some(MetaObject(meta)),
                }])
            }
            contents => Ok(vec![contents]),
        }
    }

    /// A result that expired or was dropped for newer ones (or never was): not found, coded like every
    /// `resources/read` error (`[E_NOT_FOUND] …`, with `{code, message, hint, details}` as data).
    fn gone(&self, uri: &str) -> McpError {
        let ResultLimits {
            max_entries,
            max_bytes,
            ttl,
        } = self.limits;
        crate::resource::read_error(
            &ToolError::not_found(format!(
                "{uri}: this result is no longer kept (results are kept {} s, at most {max_entries} of them and \
                 {max_bytes} bytes in all, the oldest dropped first)",
                ttl.as_secs()
            ))
            .with_hint(format!(
                "call the tool again, and read its rest soon; or call it with _meta {{\"{MAX_RESULT_BYTES_META_KEY}\": \
                 N}} for up to N bytes at once (at most {})",
                RESULT_CAP_RANGE.end()
            ))
            .with_details(json!({
                "uri": uri,
                "ttl_secs": ttl.as_secs(),
                "max_entries": max_entries,
                "max_bytes": max_bytes,
            })),
        )
    }
}

fn bad_offset(uri: &str) -> McpError {
    McpError::invalid_params(
        format!("uri: {uri} is not a result page; expected {SCHEME}ID?offset=N"),
        Some(json!({ "field": "uri" })),
    )
}

fn page_uri(id: &str, offset: usize) -> String {
    format!("{SCHEME}{id}?offset={offset}")
}

/// The cap this request asked for in `_meta`, or the default.
pub(crate) fn requested_cap(meta: &RequestMetaObject) -> Result<usize, McpError> {
    let Some(value) = meta.0.0.get(MAX_RESULT_BYTES_META_KEY) else {
        return Ok(RESULT_CAP_BYTES);
    };
    value
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| RESULT_CAP_RANGE.contains(n))
        .ok_or_else(|| {
            McpError::invalid_params(
                format!(
                    "_meta.{MAX_RESULT_BYTES_META_KEY}: {value} is not a byte count from {} to {}",
                    RESULT_CAP_RANGE.start(),
                    RESULT_CAP_RANGE.end()
                ),
                Some(json!({
                    "field": format!("_meta.{MAX_RESULT_BYTES_META_KEY}"),
                    "min": RESULT_CAP_RANGE.start(),
                    "max": RESULT_CAP_RANGE.end(),
                })),
            )
        })
}

fn ceil_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// [`cap`] for a result whose `structuredContent` is `structured`, JSON text kept beside it
/// ([`convert::success_raw`](super::convert::success_raw)): its length is known, so a result that fits is
/// held to the cap as it is; one that does not is parsed into the result and shortened as [`cap`] shortens
/// any.
pub(crate) fn cap_raw(
    store: &ResultStore,
    result: CallToolResult,
    structured: Option<Box<RawValue>>,
    cap_bytes: usize,
) -> (CallToolResult, Option<Box<RawValue>>) {
    match structured {
        Some(raw) if raw.get().len() > cap_bytes => (
            cap(
                store,
                super::convert::with_structured(result, Some(raw)),
                cap_bytes,
            ),
            None,
        ),
        structured => (cap(store, result, cap_bytes), structured),
    }
}

/// Holds `result` to `cap`: a longer text is cut and kept in `store`, a larger `structuredContent` has its
/// longest strings and arrays shortened (so it still fits the tool's output schema in all but length).
pub(crate) fn cap(store: &ResultStore, mut result: CallToolResult, cap: usize) -> CallToolResult {
    let text_bytes: usize = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.len()))
        .sum();
    let structured_bytes = result.structured_content.as_ref().map_or(0, json_len);
    if text_bytes <= cap && structured_bytes <= cap {
        return result;
    }
    if let Some(structured) = result.structured_content.as_mut()
        && structured_bytes > cap
    {
        shrink(structured, cap);
        if json_len(structured) > cap {
            // Nothing left to shorten (many small fields): the text, cut and kept whole, is all there is.
            result.structured_content = None;
        }
    }
    let total = text_bytes
        + result
            .content
            .iter()
            .filter(|c| c.as_text().is_some())
            .count()
            .saturating_sub(1);
    // structuredContent's own size, when its longest strings and arrays were shortened to fit.
    let shortened = (structured_bytes > cap).then_some(structured_bytes);
    let mut truncated = json!({
        "total_bytes": total, "shown_bytes": total, "rest": null, "structured_bytes": shortened,
    });
    if total > cap {
        let mut texts = Vec::new();
        let mut others = Vec::new();
        for block in std::mem::take(&mut result.content) {
            match block {
                ContentBlock::Text(text) => texts.push(text.text),
                _ => others.push(block),
            }
        }
        let full = texts.join("\n");
        let shown = floor_boundary(&full, cap);
        let head = full[..shown].to_owned();
        let rest = store.keep(full).map(|id| page_uri(&id, shown));
        let notice = match &rest {
            Some(uri) => format!(
                "[cut: {shown} of {total} bytes shown. The rest: resources/read {uri} (pages of up to {cap} bytes), \
                 or call again with _meta {{\"{MAX_RESULT_BYTES_META_KEY}\": N}} for up to N bytes at once (at \
                 most {})]",
                RESULT_CAP_RANGE.end()
            ),
            None => format!(
                "[cut: {shown} of {total} bytes shown; the rest is too large to keep. Ask for less, or call again \
                 with _meta {{\"{MAX_RESULT_BYTES_META_KEY}\": N}} for up to N bytes (at most {})]",
                RESULT_CAP_RANGE.end()
            ),
        };
        truncated = json!({
            "total_bytes": total, "shown_bytes": shown, "rest": rest, "structured_bytes": shortened,
        });
        let mut content = Vec::with_capacity(others.len() + 3);
        content.push(ContentBlock::text(head));
        content.push(ContentBlock::text(notice));
        if let Some(uri) = rest {
            let mut link = Resource::new(uri, "rest of the result");
            link.mime_type = Some("text/plain".into());
            content.push(ContentBlock::resource_link(link));
        }
        content.extend(others);
        result.content = content;
    }
    let meta = result.meta.get_or_insert_with(MetaObject::default);
    meta.0.insert(TRUNCATED_META_KEY.to_owned(), truncated);
    result
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use serde_json::Value;

    fn text_of(contents: &[ResourceContents]) -> &str {
        match &contents[0] {
            ResourceContents::TextResourceContents { text, .. } => text,
            other => panic!("expected text, got {other:?}"),
        }
    }

    fn rest_of(result: &CallToolResult) -> Option<String> {
        result.meta.as_ref().unwrap().0[TRUNCATED_META_KEY]["rest"]
            .as_str()
            .map(str::to_owned)
    }

    #[test]
    fn a_resource_over_the_cap_is_answered_by_its_first_page_and_read_back_whole() {
        let store = ResultStore::default();
        let full = "line of a game's file ✓\n".repeat(20_000);
        let contents = ResourceContents::TextResourceContents {
            uri: "bitburner://home/notes.txt".into(),
            mime_type: Some("text/plain".into()),
            text: full.clone(),
            meta: None,
        };
        let first = store.cap_resource(contents, 1000).unwrap();
        let ResourceContents::TextResourceContents {
            uri, text, meta, ..
        } = &first[0]
        else {
            panic!("text expected: {first:?}");
        };
        assert_eq!(uri, "bitburner://home/notes.txt");
        assert!(text.len() <= 1000 && full.starts_with(text.as_str()));
        let cut = &meta.as_ref().unwrap().0[TRUNCATED_META_KEY];
        assert_eq!(cut["total_bytes"], full.len());
        let mut read = text.clone();
        let mut next = cut["rest"].as_str().map(str::to_owned);
        while let Some(uri) = next {
            let page = store.read(&uri, 64 << 10).unwrap().unwrap();
            read.push_str(text_of(&page));
            let ResourceContents::TextResourceContents { meta, .. } = &page[0] else {
                panic!("text expected");
            };
            next = meta.as_ref().unwrap().0[TRUNCATED_META_KEY]["rest"]
                .as_str()
                .map(str::to_owned);
        }
        assert_eq!(read, full);

        // Within the cap: as it was.
        let small = ResourceContents::TextResourceContents {
            uri: "bitburner://home/a.txt".into(),
            mime_type: None,
            text: "hello".into(),
            meta: None,
        };
        assert_eq!(
            store.cap_resource(small.clone(), 1000).unwrap(),
            vec![small]
        );
        // A blob passes: pages of text cannot hold it.
        let blob = ResourceContents::BlobResourceContents {
            uri: "x://blob".into(),
            mime_type: None,
            blob: "A".repeat(5000),
            meta: None,
        };
        assert_eq!(store.cap_resource(blob.clone(), 1000).unwrap(), vec![blob]);
        // Too large to keep: the first page alone, saying so.
        let tiny = ResultStore::new(ResultLimits {
            max_entries: 4,
            max_bytes: 10_000,
            ttl: Duration::from_secs(60),
        });
        let big = ResourceContents::TextResourceContents {
            uri: "x://big".into(),
            mime_type: None,
            text: full.clone(),
            meta: None,
        };
        let only = tiny.cap_resource(big, 1000).unwrap();
        assert_eq!(only.len(), 1);
        let ResourceContents::TextResourceContents { text, meta, .. } = &only[0] else {
            panic!("text expected");
        };
        assert!(text.len() <= 1000);
        let cut = &meta.as_ref().unwrap().0[TRUNCATED_META_KEY];
        assert_eq!(
            (&cut["total_bytes"], &cut["rest"]),
            (&json!(full.len()), &Value::Null)
        );
    }

    #[test]
    fn a_result_within_the_cap_is_untouched() {
        let store = ResultStore::default();
        let result = CallToolResult::success(vec![ContentBlock::text("ok")]);
        assert_eq!(cap(&store, result.clone(), 1024), result);
    }

    #[test]
    fn a_cut_multibyte_text_reads_back_whole_page_by_page() {
        let store = ResultStore::default();
        let full: String = "héllo wörld ✓ ".repeat(500);
        let result = cap(
            &store,
            CallToolResult::success(vec![ContentBlock::text(full.clone())]),
            1000,
        );
        let head = result.content[0].as_text().unwrap().text.clone();
        assert!(head.len() <= 1000 && full.starts_with(&head));
        let mut read = head;
        let mut next = rest_of(&result);
        while let Some(uri) = next {
            let page = store.read(&uri, 777).unwrap().unwrap();
            assert!(text_of(&page).len() <= 777);
            read.push_str(text_of(&page));
            next = match &page[0] {
                ResourceContents::TextResourceContents { meta, .. } => meta.as_ref().unwrap().0
                    [TRUNCATED_META_KEY]["rest"]
                    .as_str()
                    .map(str::to_owned),
                _ => None,
            };
        }
        assert_eq!(read, full);
    }

    #[test]
    fn a_large_structured_result_keeps_its_shape() {
        let store = ResultStore::default();
        let mut result = CallToolResult::success(vec![ContentBlock::text("x".repeat(5000))]);
        result.structured_content =
            Some(json!({"path": "/a", "content": "y".repeat(5000), "size": 5000}));
        let result = cap(&store, result, 2000);
        let structured = result.structured_content.unwrap();
        assert!(json_len(&structured) <= 2000);
        assert_eq!(structured["path"], "/a");
        assert_eq!(structured["size"], 5000);
        assert!(structured["content"].as_str().unwrap().starts_with("yyy"));
    }

    /// A result whose structuredContent is JSON text: one that fits is left as it is, text and all; one over
    /// the cap is what `cap` makes of the same result with that text parsed (the path before the text was
    /// kept as text), whether or not its text is cut too.
    #[test]
    fn a_structured_text_is_held_to_the_cap_as_the_parsed_value_was() {
        let page = |events: usize| {
            let events: Vec<Value> = (0..events)
                .map(|i| json!({"seq": i, "data": {"message": "é".repeat(300), "n": 1.5e300}}))
                .collect();
            serde_json::to_string(&json!({"stream": "chat", "events": events, "more": false}))
                .unwrap()
        };
        let raw = |text: &str| RawValue::from_string(text.to_owned()).unwrap();
        let small = page(2);
        let result = CallToolResult::success(vec![ContentBlock::text(small.clone())]);
        let (capped, kept) = cap_raw(
            &ResultStore::default(),
            result.clone(),
            Some(raw(&small)),
            80_000,
        );
        assert_eq!(capped, result, "untouched");
        assert_eq!(kept.unwrap().get(), small, "still text");
        for (events, text_cap) in [(40, 80_000), (40, 2_000)] {
            let big = page(events);
            let parsed = {
                let mut r = CallToolResult::success(vec![ContentBlock::text(big.clone())]);
                r.structured_content = Some(serde_json::from_str(&big).unwrap());
                r
            };
            let cap_bytes = if text_cap < big.len() {
                text_cap
            } else {
                big.len() - 1
            };
            let store = ResultStore::default();
            let (capped, kept) = cap_raw(
                &store,
                CallToolResult::success(vec![ContentBlock::text(big.clone())]),
                Some(raw(&big)),
                cap_bytes,
            );
            assert!(kept.is_none(), "parsed into the result");
            let mut before = cap(&ResultStore::default(), parsed, cap_bytes);
            let mut capped = capped;
            // The kept rest's URI is random; everything else is the same.
            for r in [&mut before, &mut capped] {
                r.content
                    .retain(|c| c.as_text().is_some_and(|t| !t.text.starts_with("[cut")));
                r.content.retain(|c| c.as_text().is_some());
                if let Some(meta) = r.meta.as_mut() {
                    meta.0[TRUNCATED_META_KEY]["rest"] = Value::Null;
                }
            }
            assert_eq!(capped, before, "{events} events, cap {cap_bytes}");
            let structured = capped.structured_content.unwrap();
            assert!(json_len(&structured) <= cap_bytes);
            assert_eq!(structured["stream"], "chat");
        }
    }

    #[test]
    fn the_store_is_bounded_in_bytes_and_forgets_the_oldest() {
        let store = ResultStore::new(ResultLimits {
            max_entries: 10,
            max_bytes: 2500,
            ttl: Duration::from_secs(60),
        });
        let first = store.keep("a".repeat(1000)).unwrap();
        let second = store.keep("b".repeat(1000)).unwrap();
        let third = store.keep("c".repeat(1000)).unwrap();
        assert!(
            store.keep("d".repeat(3000)).is_none(),
            "larger than the store"
        );
        assert!(store.read(&page_uri(&first, 0), 100).unwrap().is_err());
        assert!(store.read(&page_uri(&second, 0), 100).unwrap().is_ok());
        assert!(store.read(&page_uri(&third, 0), 100).unwrap().is_ok());
        assert!(store.entries.lock().unwrap().bytes <= 2500);
    }

    #[tokio::test(start_paused = true)]
    async fn a_kept_result_is_forgotten_after_its_ttl() {
        let store = ResultStore::new(ResultLimits {
            ttl: Duration::from_secs(60),
            ..ResultLimits::default()
        });
        let id = store.keep("a".repeat(10)).unwrap();
        tokio::time::advance(Duration::from_secs(61)).await;
        let error = store.read(&page_uri(&id, 0), 100).unwrap().unwrap_err();
        assert!(
            error.message.contains("no longer kept"),
            "{}",
            error.message
        );
        assert_eq!(store.entries.lock().unwrap().bytes, 0);
    }

    #[test]
    fn a_bad_cap_names_the_field_and_the_limits() {
        let mut meta = RequestMetaObject::default();
        meta.0
            .0
            .insert(MAX_RESULT_BYTES_META_KEY.to_owned(), json!(10));
        let error = requested_cap(&meta).unwrap_err();
        assert!(
            error.message.contains(MAX_RESULT_BYTES_META_KEY) && error.message.contains("1024")
        );
        meta.0
            .0
            .insert(MAX_RESULT_BYTES_META_KEY.to_owned(), json!(200_000));
        assert_eq!(requested_cap(&meta).unwrap(), 200_000);
        assert_eq!(
            requested_cap(&RequestMetaObject::default()).unwrap(),
            RESULT_CAP_BYTES
        );
    }
}
