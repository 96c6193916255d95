//! No tool result above the cap unless the caller asks: a larger one is cut at a UTF-8 boundary, names its
//! total, and links to the rest, which `resources/read` gives back intact page by page, on both transports and
//! in both eras.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use bridge_core::serve::HttpOptions;
use bridge_core::tool::{
    Content, MAX_RESULT_BYTES_META_KEY, RESULT_CAP_BYTES, TRUNCATED_META_KEY, ToolOutput,
};
use bridge_core::{Bridge, NoArgs, ToolCtx, ToolSpec};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ReadResourceRequestParams, RequestMetaObject,
    ResourceContents,
};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use support::*;

/// About 1 MiB of text with multi-byte characters, so a cut at a byte count lands inside one.
fn big_text() -> String {
    let mut text = String::new();
    let mut line = 0;
    while text.len() < 1 << 20 {
        text.push_str(&format!("line {line}: é ✓ 日本語 — the quick brown fox\n"));
        line += 1;
    }
    text
}

#[derive(Serialize, JsonSchema)]
struct File {
    path: String,
    content: String,
    size: usize,
}

fn big_bridge() -> Bridge {
    let mut b = Bridge::builder("big", "1.0.0");
    b.tool(ToolSpec::new("big_text", "A 1 MiB text.").raw_handler(
        serde_json::from_value(json!({"type": "object"})).unwrap(),
        |_: Value, _: ToolCtx| async move {
            Ok::<_, bridge_core::ToolError>(ToolOutput {
                structured: None,
                content: vec![Content::Text(big_text())],
            })
        },
    ));
    b.tool(
        ToolSpec::new("big_file", "A 1 MiB file, as a typed result.").handler(
            |_: NoArgs, _: ToolCtx| async move {
                let content = big_text();
                Ok(File {
                    path: "/big.txt".into(),
                    size: content.len(),
                    content,
                })
            },
        ),
    );
    b.build().unwrap()
}

async fn call_with_meta(client: &Client, tool: &str, meta: Option<Value>) -> CallToolResult {
    let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(Default::default());
    if let Some(Value::Object(meta)) = meta {
        let mut object = RequestMetaObject::default();
        object.0.0.extend(meta);
        params.meta = Some(object);
    }
    within(tool, client.call_tool(params)).await.unwrap()
}

fn truncated(result: &CallToolResult) -> Value {
    result
        .meta
        .as_ref()
        .and_then(|m| m.0.get(TRUNCATED_META_KEY))
        .cloned()
        .unwrap_or_else(|| panic!("a cut result names its total in _meta: {result:?}"))
}

/// Reads every page from `uri` on, returning the text.
async fn read_rest(client: &Client, mut uri: String) -> String {
    let mut text = String::new();
    loop {
        let page = within(
            "a result page",
            client.read_resource(ReadResourceRequestParams::new(uri.clone())),
        )
        .await
        .unwrap();
        let ResourceContents::TextResourceContents {
            text: part, meta, ..
        } = &page.contents[0]
        else {
            panic!("a page is text: {page:?}")
        };
        assert!(part.len() <= RESULT_CAP_BYTES, "a page holds to the cap");
        text.push_str(part);
        match meta.as_ref().unwrap().0[TRUNCATED_META_KEY]["rest"].as_str() {
            Some(next) => uri = next.to_owned(),
            None => return text,
        }
    }
}

async fn check_cut_and_rest(client: &Client, what: &str) {
    let full = big_text();
    let result = call_with_meta(client, "big_text", None).await;
    assert_ne!(result.is_error, Some(true), "{what}: {result:?}");
    let head = &result.content[0].as_text().unwrap().text;
    assert!(
        head.len() <= RESULT_CAP_BYTES,
        "{what}: {} bytes",
        head.len()
    );
    assert!(
        full.starts_with(head.as_str()),
        "{what}: the head is the start"
    );
    let cut = truncated(&result);
    assert_eq!(cut["total_bytes"], full.len(), "{what}");
    assert_eq!(cut["shown_bytes"], head.len(), "{what}");
    let rest = cut["rest"].as_str().expect("a link to the rest").to_owned();
    let notice = &result.content[1].as_text().unwrap().text;
    assert!(
        notice.contains(&rest) && notice.contains(MAX_RESULT_BYTES_META_KEY),
        "{what}: {notice}"
    );
    assert!(
        result
            .content
            .iter()
            .any(|c| matches!(c, rmcp::model::ContentBlock::ResourceLink(l) if l.uri == rest)),
        "{what}: a resource link to the rest"
    );
    let whole = format!("{head}{}", read_rest(client, rest).await);
    assert!(whole == full, "{what}: the pages read back the text intact");
}

#[tokio::test]
async fn a_big_result_is_cut_and_its_rest_reads_back_intact_on_stdio() {
    for era in ERAS {
        let client = stdio_client(big_bridge(), era, vec![]).await;
        check_cut_and_rest(&client, &format!("stdio {era:?}")).await;
    }
}

#[tokio::test]
async fn a_big_result_is_cut_and_its_rest_reads_back_intact_on_http() {
    for era in ERAS {
        let server = start_http(big_bridge(), HttpOptions::default(), vec![]).await;
        let client = http_client(server.addr, era).await;
        check_cut_and_rest(&client, &format!("http {era:?}")).await;
    }
}

#[tokio::test]
async fn a_typed_result_keeps_its_schema_shape_under_the_cap() {
    let client = stdio_client(big_bridge(), Era::Modern, vec![]).await;
    let result = call_with_meta(&client, "big_file", None).await;
    let structured = result
        .structured_content
        .clone()
        .expect("structuredContent stays");
    assert!(structured.to_string().len() <= RESULT_CAP_BYTES);
    assert_eq!(structured["path"], "/big.txt");
    assert_eq!(structured["size"], big_text().len());
    assert!(
        structured["content"]
            .as_str()
            .unwrap()
            .starts_with("line 0: é")
    );
    let cut = truncated(&result);
    assert!(cut["rest"].is_string());
    assert!(cut["structured_bytes"].as_u64().unwrap() > big_text().len() as u64);
}

#[tokio::test]
async fn the_caller_can_ask_for_the_whole_result() {
    let client = stdio_client(big_bridge(), Era::Legacy, vec![]).await;
    let result = call_with_meta(
        &client,
        "big_text",
        Some(json!({ MAX_RESULT_BYTES_META_KEY: 2 << 20 })),
    )
    .await;
    assert!(
        result
            .meta
            .as_ref()
            .is_none_or(|m| !m.0.contains_key(TRUNCATED_META_KEY))
    );
    assert!(text_of(&result) == big_text(), "the whole text, uncut");
}

#[tokio::test]
async fn a_cap_out_of_range_is_refused_naming_the_field_and_the_limits() {
    let client = stdio_client(big_bridge(), Era::Modern, vec![]).await;
    let mut params = CallToolRequestParams::new("big_text").with_arguments(Default::default());
    let mut meta = RequestMetaObject::default();
    meta.0
        .0
        .insert(MAX_RESULT_BYTES_META_KEY.to_owned(), json!(5));
    params.meta = Some(meta);
    let error = within("the call", client.call_tool(params))
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains(MAX_RESULT_BYTES_META_KEY) && text.contains("1024"),
        "{text}"
    );
}

#[tokio::test]
async fn an_unknown_result_page_says_it_is_no_longer_kept() {
    let client = stdio_client(big_bridge(), Era::Modern, vec![]).await;
    let error = within(
        "the read",
        client.read_resource(ReadResourceRequestParams::new(
            "mcp-bridges://result/0123?offset=0",
        )),
    )
    .await
    .unwrap_err();
    assert!(error.to_string().contains("no longer kept"), "{error}");
}

/// The store's real byte bound (64 MiB) filled with 1 MiB results: the oldest are dropped first, the newest
/// stay readable, and reading a dropped one is a coded not-found error that says why and what to do.
#[tokio::test]
async fn a_full_store_drops_the_oldest_and_a_dropped_result_reads_as_a_coded_error() {
    const STORE_BYTES: usize = 64 << 20;
    let client = stdio_client(big_bridge(), Era::Modern, vec![]).await;
    let total = big_text().len();
    // One more result than the bytes hold, and far fewer than the 256 results the store may keep: the byte
    // bound, not the count, is what drops them.
    let calls = STORE_BYTES / total + 1;
    let mut rests = Vec::with_capacity(calls);
    for _ in 0..calls {
        let result = call_with_meta(&client, "big_text", None).await;
        rests.push(
            truncated(&result)["rest"]
                .as_str()
                .expect("kept")
                .to_owned(),
        );
    }
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for (n, uri) in rests.iter().enumerate() {
        match within(
            "a page",
            client.read_resource(ReadResourceRequestParams::new(uri.clone())),
        )
        .await
        {
            Ok(_) => kept.push(n),
            Err(e) => dropped.push((n, e)),
        }
    }
    let dropped_ids: Vec<usize> = dropped.iter().map(|(n, _)| *n).collect();
    // The oldest go first: the dropped ones are exactly the first results, the rest all readable.
    assert_eq!(
        dropped_ids,
        (0..dropped_ids.len()).collect::<Vec<_>>(),
        "kept {kept:?}"
    );
    assert!(
        !dropped_ids.is_empty(),
        "the store is over its bound, so something was dropped"
    );
    assert!(
        kept.len() * total <= STORE_BYTES,
        "{} kept of {total} bytes each",
        kept.len()
    );
    assert!(
        (kept.len() + 1) * total > STORE_BYTES,
        "only as many dropped as the bound needs: kept {}",
        kept.len()
    );
    let (n, error) = &dropped[0];
    let rmcp::service::ServiceError::McpError(error) = error else {
        panic!("a JSON-RPC error: {error:?}")
    };
    // Not found: -32002, which rmcp answers as -32602 to a client of the 2026-07-28 revision, as it requires.
    assert!(
        [
            rmcp::model::ErrorCode::RESOURCE_NOT_FOUND,
            rmcp::model::ErrorCode::INVALID_PARAMS
        ]
        .contains(&error.code),
        "{error:?}"
    );
    assert!(
        error.message.starts_with("[E_NOT_FOUND] ") && error.message.contains("no longer kept"),
        "{}",
        error.message
    );
    assert!(
        error.message.contains(&STORE_BYTES.to_string()),
        "names the bound: {}",
        error.message
    );
    let data = error.data.clone().unwrap_or_default();
    assert_eq!(data["code"], "E_NOT_FOUND", "{data}");
    assert_eq!(data["details"]["uri"], rests[*n].as_str(), "{data}");
    assert_eq!(data["details"]["max_bytes"], STORE_BYTES, "{data}");
    assert!(
        data["hint"]
            .as_str()
            .is_some_and(|h| h.contains("call the tool again")),
        "{data}"
    );
}

/// A task's result is held to the cap too: `tasks/get` gives the cut text and the link to the rest.
#[tokio::test]
async fn a_big_task_result_is_cut_and_its_rest_reads_back_intact() {
    use rmcp::model::{
        CallToolResponse, ClientCapabilities, GetTaskParams, TaskPayload, TaskStatus,
    };
    let mut b = Bridge::builder("big", "1.0.0");
    b.tool(
        ToolSpec::new("slow_big", "Waits, then answers 1 MiB.")
            .task_support(bridge_core::tool::TaskSupport::Optional)
            .handler_with_text(|_: NoArgs, _: ToolCtx| async move {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                Ok(bridge_core::Rendered {
                    value: json!({}),
                    text: big_text(),
                })
            }),
    );
    let bridge = b.build().unwrap();
    let tasks = ClientCapabilities::builder().enable_tasks().build();
    for era in ERAS {
        let client =
            mcp_testkit::pipe_client_declaring(bridge.clone(), era, vec![], tasks.clone()).await;
        let params = CallToolRequestParams::new("slow_big").with_arguments(Default::default());
        let CallToolResponse::Task(created) = within("the task", client.call_tool_once(params))
            .await
            .unwrap()
        else {
            panic!("slow_big should have become a task")
        };
        let id = created.task.task_id;
        let task = within("the task to settle", async {
            loop {
                let task = client.get_task(GetTaskParams::new(&id)).await.unwrap().task;
                if task.status() != TaskStatus::Working {
                    return task;
                }
                tokio::task::yield_now().await;
            }
        })
        .await;
        let TaskPayload::Completed { result } = task.payload else {
            panic!("{era:?}: a completed task")
        };
        let head = result["content"][0]["text"].as_str().unwrap().to_owned();
        assert!(head.len() <= RESULT_CAP_BYTES, "{era:?}");
        let rest = result["_meta"][TRUNCATED_META_KEY]["rest"]
            .as_str()
            .unwrap()
            .to_owned();
        let whole = format!("{head}{}", read_rest(&client, rest).await);
        assert!(whole == big_text(), "{era:?}: the task's text intact");
    }
}
