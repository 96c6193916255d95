//! `resources/list` page by page. A live system lists what it holds (a game's every file), so the whole list
//! can be any size; one answer with all of it would be as large, and a host that reads it into the model's
//! context pays for every entry. Pages are bounded in count and bytes, and the cursor is the offset of the next
//! entry in the list as it stands when that page is asked for: a list that changed between pages may show an
//! entry twice or skip one, as a directory listing read in parts does, and never fails.

use rmcp::ErrorData as McpError;
use rmcp::model::Resource;

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
    let start = match cursor {
        None => 0,
        Some(cursor) => cursor.parse::<usize>().map_err(|_| bad_cursor(cursor))?,
    };
    let mut left_out = Vec::new();
    let mut entries = all.into_iter().filter_map(|resource| {
        let bytes = crate::json_size::json_len(&resource);
        if bytes > MAX_ENTRY_BYTES {
            left_out.push(crate::text::for_log(&resource.uri));
            return None;
        }
        Some((resource, bytes))
    });
    let mut page = Vec::new();
    // Two for the brackets; each entry adds its comma.
    let mut used = 2;
    let mut next = None;
    for (index, (resource, bytes)) in entries.by_ref().enumerate().skip(start) {
        if page.len() == MAX_PAGE_ENTRIES || used + bytes + 1 > MAX_PAGE_BYTES {
            next = Some(index.to_string());
            break;
        }
        used += bytes + 1;
        page.push(resource);
    }
    // The rest is still scanned, so that every entry left out is told, whichever page was asked for.
    entries.for_each(drop);
    if let Some(first) = left_out.first() {
        tracing::warn!(
            count = left_out.len(),
            first = %first,
            "resources/list left out resources whose entry is over {MAX_ENTRY_BYTES} bytes; they can still be read by URI"
        );
    }
    Ok((page, next))
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
