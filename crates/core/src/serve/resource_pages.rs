//! `resources/list` page by page. A live system lists what it holds (a game's every file), so the whole list
//! can be any size; one answer with all of it would be as large, and a host that reads it into the model's
//! context pays for every entry. Pages are bounded in count and bytes. The list is made anew for every page, so
//! the cursor is the offset of the next entry and a hash of the URIs before it: a list that changed before the
//! offset (a live system gone between two pages) is refused with a request to start over, instead of a page
//! that skips or repeats entries and a client that takes the shorter list for the whole.

use rmcp::ErrorData as McpError;
use rmcp::model::Resource;
use std::hash::{Hash, Hasher};

/// Entries a page holds at most.
pub(crate) const MAX_PAGE_ENTRIES: usize = 500;
/// The JSON of a page's entries, at most.
pub(crate) const MAX_PAGE_BYTES: usize = 256 * 1024;
/// An entry above this (a name or description a script wrote) is left out of the list: no client shows it
/// usefully, and it would crowd out the others. The resource stays readable by its URI.
pub(crate) const MAX_ENTRY_BYTES: usize = 4 * 1024;

/// One page of `all`, starting where `cursor` says, and the cursor of the page after it.
pub(crate) fn page(
    all: Vec<Resource>,
    cursor: Option<&str>,
) -> Result<(Vec<Resource>, Option<String>), McpError> {
    let (start, expected) = match cursor {
        None => (0, None),
        Some(cursor) => {
            let (start, hash) = parse(cursor).ok_or_else(|| bad_cursor(cursor))?;
            (start, Some(hash))
        }
    };
    let mut left_out = 0usize;
    let mut first_left_out = None;
    let mut entries = all.into_iter().filter_map(|resource| {
        let bytes = crate::json_size::json_len(&resource);
        if bytes > MAX_ENTRY_BYTES {
            left_out += 1;
            first_left_out.get_or_insert_with(|| crate::text::for_log(&resource.uri));
            return None;
        }
        Some((resource, bytes))
    });
    // The URIs before the page, hashed: the cursor carries them, so a list that changed before the offset (a
    // live system gone between two pages, a file deleted) is told instead of skipping or repeating entries.
    let mut before = std::hash::DefaultHasher::new();
    let mut page = Vec::new();
    // Two for the brackets; each entry adds its comma.
    let mut used = 2;
    let mut next = None;
    let mut counted = 0;
    for (index, (resource, bytes)) in entries.by_ref().enumerate() {
        counted = index + 1;
        if index < start {
            resource.uri.hash(&mut before);
            continue;
        }
        if index == start && expected.is_some_and(|e| e != before.finish()) {
            return Err(changed());
        }
        if page.len() == MAX_PAGE_ENTRIES || used + bytes + 1 > MAX_PAGE_BYTES {
            next = Some(format!("{index}-{:016x}", before.finish()));
            break;
        }
        resource.uri.hash(&mut before);
        used += bytes + 1;
        page.push(resource);
    }
    // The rest is still scanned, so that every entry left out is told, whichever page was asked for.
    entries.for_each(drop);
    // A list that now ends at or before the offset: unchanged only if it still has every entry before it.
    if counted <= start && expected.is_some_and(|e| counted < start || e != before.finish()) {
        return Err(changed());
    }
    if let Some(first) = first_left_out {
        tracing::warn!(
            count = left_out,
            first = %first,
            "resources/list left out resources whose entry is over {MAX_ENTRY_BYTES} bytes; they can still be read by URI"
        );
    }
    Ok((page, next))
}

/// A cursor's offset and the hash of the URIs before it.
fn parse(cursor: &str) -> Option<(usize, u64)> {
    let (offset, hash) = cursor.split_once('-')?;
    Some((offset.parse().ok()?, u64::from_str_radix(hash, 16).ok()?))
}

fn changed() -> McpError {
    McpError::invalid_params(
        "the list of resources changed since the page before (a live system connected, disconnected or \
         changed its files); read resources/list again from its first page"
            .to_owned(),
        Some(serde_json::json!({ "field": "cursor" })),
    )
}

fn bad_cursor(cursor: &str) -> McpError {
    McpError::invalid_params(
        format!(
            "cursor `{}` is not one this server gave: resources/list cursors are the `nextCursor` of the page \
             before; ask without a cursor to start over",
            crate::text::for_log(cursor)
        ),
        Some(serde_json::json!({ "field": "cursor" })),
    )
}
