//! The bridge's biggest answer, `fs_read` of a 1 MiB file, held to the core's result cap: the text is cut with
//! its total and a link to the rest, and the pages read back give the file intact; a caller that asks for more
//! with the cap's `_meta` field gets it whole.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use bridge_core::tool::{MAX_RESULT_BYTES_META_KEY, RESULT_CAP_BYTES, TRUNCATED_META_KEY};
use rmcp::model::{
    CallToolRequestParams, ReadResourceRequestParams, RequestMetaObject, ResourceContents,
};
use serde_json::json;
use support::ccsim::SimKind;
use support::harness::{ok_of, start_bridge, test_config, text_of, within};

/// 1 MiB of text with multi-byte characters, so a cut at a byte count lands inside one.
fn file_text() -> String {
    let mut text = String::new();
    let mut line = 0;
    while text.len() < 1 << 20 {
        text.push_str(&format!("-- line {line}: é ✓ 日本語\n"));
        line += 1;
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_read_of_a_1_mib_file_is_cut_and_its_rest_reads_back_intact() {
    let h = start_bridge(test_config()).await;
    let cfg = h.computer(4, None, SimKind::Computer);
    let full = file_text();
    std::fs::write(cfg.root.join("big.lua"), &full).unwrap();
    let _c = h.link(cfg).await;

    let r = h
        .call("fs_read", json!({"computer": 4, "path": "big.lua"}))
        .await;
    let out = ok_of(&r);
    assert_eq!(out["size"], full.len());
    assert!(out.to_string().len() <= RESULT_CAP_BYTES);
    let head = r.content[0].as_text().unwrap().text.clone();
    assert!(head.len() <= RESULT_CAP_BYTES && full.starts_with(&head));
    let cut = &r.meta.as_ref().unwrap().0[TRUNCATED_META_KEY];
    assert_eq!(cut["total_bytes"], full.len());
    let mut read = head;
    let mut next = cut["rest"].as_str().map(str::to_owned);
    while let Some(uri) = next {
        let page = within(
            "a page",
            h.client.read_resource(ReadResourceRequestParams::new(uri)),
        )
        .await
        .unwrap();
        let ResourceContents::TextResourceContents { text, meta, .. } = &page.contents[0] else {
            panic!("a text page: {page:?}")
        };
        read.push_str(text);
        next = meta.as_ref().unwrap().0[TRUNCATED_META_KEY]["rest"]
            .as_str()
            .map(str::to_owned);
    }
    assert!(read == full, "the pages join into the file");

    let mut params = CallToolRequestParams::new("fs_read").with_arguments(
        json!({"computer": 4, "path": "big.lua"})
            .as_object()
            .unwrap()
            .clone(),
    );
    let mut meta = RequestMetaObject::default();
    meta.0
        .0
        .insert(MAX_RESULT_BYTES_META_KEY.to_owned(), json!(4 << 20));
    params.meta = Some(meta);
    let whole = within("fs_read", h.client.call_tool(params)).await.unwrap();
    assert!(text_of(&whole) == full, "asked for, the file comes whole");
    assert_eq!(ok_of(&whole)["content"], full.as_str());
}
