//! `resources/list` is answered page by page: a live system can list any number of resources (a game with
//! thousands of files), and one answer with all of them would be as large as the list. Each page holds at
//! most 500 resources and 256 KiB of JSON, `nextCursor` leads to the rest, and a resource whose entry alone is
//! over 4 KiB (a name a script chose) is left out of the list, still readable by its URI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_core::resource::{ResourceBody, ResourceInfo, ResourceProvider};
use bridge_core::{Bridge, ToolError};
use futures::future::BoxFuture;
use rmcp::model::PaginatedRequestParams;
use std::collections::HashSet;
use std::sync::Arc;
use support::*;

/// Lists `count` resources, each described in `description_bytes` bytes, and one more whose name is 10 000
/// bytes long.
struct Many {
    count: usize,
    description_bytes: usize,
}

const HUGE_URI: &str = "test://huge";

impl ResourceProvider for Many {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ResourceInfo>, ToolError>> {
        Box::pin(async move {
            let mut all: Vec<_> = (0..self.count)
                .map(|i| ResourceInfo {
                    uri: format!("test://file/{i}"),
                    name: format!("file {i}"),
                    description: Some("d".repeat(self.description_bytes)),
                    mime_type: Some("text/plain".into()),
                })
                .collect();
            all.insert(
                self.count / 2,
                ResourceInfo {
                    uri: HUGE_URI.into(),
                    name: "n".repeat(10_000),
                    description: None,
                    mime_type: None,
                },
            );
            Ok(all)
        })
    }

    fn read<'a>(&'a self, uri: &'a str) -> BoxFuture<'a, Result<Option<ResourceBody>, ToolError>> {
        Box::pin(async move {
            Ok(uri.starts_with("test://").then(|| ResourceBody::Text {
                mime_type: "text/plain".into(),
                text: format!("the text of {uri}"),
            }))
        })
    }
}

fn bridge(count: usize, description_bytes: usize) -> Bridge {
    let mut b = Bridge::builder("test", "1.2.3");
    b.resources(Arc::new(Many {
        count,
        description_bytes,
    }));
    b.build().unwrap()
}

/// Every page, read by following `nextCursor` from the first.
async fn pages(client: &Client) -> Vec<Vec<rmcp::model::Resource>> {
    let mut pages = Vec::new();
    let mut cursor = None;
    loop {
        let page = within(
            "resources/list",
            client.list_resources(Some(PaginatedRequestParams::default().with_cursor(cursor))),
        )
        .await
        .unwrap();
        pages.push(page.resources);
        cursor = page.next_cursor;
        if cursor.is_none() || pages.len() > 100 {
            return pages;
        }
    }
}

fn listed_uris(pages: &[Vec<rmcp::model::Resource>]) -> Vec<String> {
    pages.iter().flatten().map(|r| r.uri.clone()).collect()
}

#[tokio::test]
async fn a_long_list_comes_in_pages_of_at_most_500_with_every_resource_once() {
    for era in ERAS {
        let client = stdio_client(bridge(1_300, 10), era, vec![]).await;
        let pages = pages(&client).await;
        let sizes: Vec<_> = pages.iter().map(Vec::len).collect();
        assert!(
            sizes.iter().all(|&n| n <= 500),
            "{era:?}: page sizes {sizes:?}"
        );
        assert_eq!(sizes.len(), 3, "{era:?}: page sizes {sizes:?}");
        let uris = listed_uris(&pages);
        let distinct: HashSet<_> = uris.iter().collect();
        assert_eq!(uris.len(), 1_300, "{era:?}: every resource once");
        assert_eq!(distinct.len(), 1_300, "{era:?}: no resource twice");
        assert!(
            !distinct.contains(&HUGE_URI.to_owned()),
            "{era:?}: the 10 kB entry is left out"
        );
    }
}

#[tokio::test]
async fn a_page_holds_at_most_256_kib_of_entries() {
    // 400 entries of about 1 KiB: the count allows one page, the bytes do not.
    let client = stdio_client(bridge(400, 1_000), Era::Legacy, vec![]).await;
    let pages = pages(&client).await;
    assert!(pages.len() >= 2, "split by bytes: {} page(s)", pages.len());
    for page in &pages {
        let bytes = serde_json::to_vec(page).unwrap().len();
        assert!(bytes <= 256 * 1024, "a page of {bytes} bytes");
    }
    assert_eq!(listed_uris(&pages).len(), 400);
}

#[tokio::test]
async fn a_resource_left_out_of_the_list_is_still_read_by_its_uri() {
    let client = stdio_client(bridge(3, 10), Era::Legacy, vec![]).await;
    let uris = listed_uris(&pages(&client).await);
    assert_eq!(uris.len(), 3, "{uris:?}");
    let read = within(
        "resources/read",
        client.read_resource(rmcp::model::ReadResourceRequestParams::new(HUGE_URI)),
    )
    .await
    .unwrap();
    let text = serde_json::to_string(&read.contents).unwrap();
    assert!(text.contains("the text of test://huge"), "{text}");
}

#[tokio::test]
async fn a_cursor_that_is_no_offset_is_refused_naming_the_field() {
    let client = stdio_client(bridge(3, 10), Era::Legacy, vec![]).await;
    for bad in [
        "not-a-cursor",
        "-1",
        "7",
        "7-zz",
        "99999999999999999999999-0",
    ] {
        let error = within(
            "resources/list",
            client.list_resources(Some(
                PaginatedRequestParams::default().with_cursor(Some(bad.into())),
            )),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(error.contains("cursor"), "{bad}: {error}");
    }
}

/// Lists as [`Many`] the first time, then fails: a game whose link dropped between two pages.
struct DropsAfterOneList {
    many: Many,
    lists: std::sync::atomic::AtomicUsize,
}

impl ResourceProvider for DropsAfterOneList {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ResourceInfo>, ToolError>> {
        if self.lists.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            return self.many.list();
        }
        Box::pin(async { Err(ToolError::disconnected("the game is not connected")) })
    }

    fn read<'a>(&'a self, uri: &'a str) -> BoxFuture<'a, Result<Option<ResourceBody>, ToolError>> {
        self.many.read(uri)
    }
}

#[tokio::test]
async fn a_later_page_fails_when_a_live_system_cannot_list_instead_of_ending_the_list_short() {
    let error = second_page_of(Arc::new(DropsAfterOneList {
        many: Many {
            count: 700,
            description_bytes: 10,
        },
        lists: Default::default(),
    }))
    .await
    .unwrap_err();
    assert!(
        error.contains("could not list") && error.contains("first page"),
        "{error}"
    );
}

/// Lists `first` entries the first time and `then` entries after: a game that disconnected (Bitburner then
/// lists only its definitions) or wrote files between two pages.
struct Changes {
    first: usize,
    then: usize,
    lists: std::sync::atomic::AtomicUsize,
}

impl ResourceProvider for Changes {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ResourceInfo>, ToolError>> {
        let count = if self.lists.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            self.first
        } else {
            self.then
        };
        Box::pin(async move {
            Ok((0..count)
                .map(|i| ResourceInfo {
                    uri: format!("test://file/{i}"),
                    name: format!("file {i}"),
                    description: None,
                    mime_type: None,
                })
                .collect())
        })
    }

    fn read<'a>(&'a self, _uri: &'a str) -> BoxFuture<'a, Result<Option<ResourceBody>, ToolError>> {
        Box::pin(async { Ok(None) })
    }
}

/// The URIs of the second page of `provider`'s list, or the error that answers it.
async fn second_page_of(provider: Arc<dyn ResourceProvider>) -> Result<Vec<String>, String> {
    let mut b = Bridge::builder("test", "1.2.3");
    b.resources(provider);
    let client = stdio_client(b.build().unwrap(), Era::Legacy, vec![]).await;
    let page = within("resources/list", client.list_resources(None))
        .await
        .unwrap();
    let cursor = page.next_cursor.expect("two pages");
    within(
        "resources/list",
        client.list_resources(Some(
            PaginatedRequestParams::default().with_cursor(Some(cursor)),
        )),
    )
    .await
    .map(|page| page.resources.into_iter().map(|r| r.uri).collect())
    .map_err(|e| e.to_string())
}

async fn second_page(first: usize, then: usize) -> Result<Vec<String>, String> {
    second_page_of(Arc::new(Changes {
        first,
        then,
        lists: Default::default(),
    }))
    .await
}

#[tokio::test]
async fn a_list_that_changed_before_the_cursor_is_refused_and_one_that_grew_after_it_is_read_on() {
    // Gone to one entry between the pages: before, the second page was empty and the list looked whole.
    let error = second_page(700, 1).await.unwrap_err();
    assert!(
        error.contains("changed") && error.contains("first page"),
        "{error}"
    );
    // Exactly the first page's entries left: the list now ends at the cursor, which is no change before it.
    assert_eq!(second_page(700, 500).await.unwrap(), Vec::<String>::new());
    // Grown after the cursor: the second page has the old rest and the new entries.
    let rest = second_page(700, 900).await.unwrap();
    assert_eq!(rest.len(), 400);
    assert_eq!(rest[0], "test://file/500");
}
