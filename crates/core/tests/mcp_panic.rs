//! No panic in a tool handler leaves a call unanswered: the core answers `E_INTERNAL`, keeps serving, and
//! counts the call in /metrics, on stdio and on HTTP, in both eras.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_core::serve::HttpOptions;
use bridge_core::{Bridge, NoArgs, ToolCtx, ToolSpec};
use serde_json::json;
use support::*;

/// `boom` panics (the bug issue 8 found); `fine` answers.
fn panicking_bridge() -> Bridge {
    let mut b = Bridge::builder("test", "1.2.3");
    b.tool(boom_tool());
    b.tool(
        ToolSpec::new("fine", "Answers.")
            .handler(|_: NoArgs, _: ToolCtx| async move { Ok(json!({ "ok": true })) }),
    );
    b.build().unwrap()
}

async fn assert_answered_internal(client: &Client, era: Era) {
    let result = call(client, "boom", json!({})).await;
    let error = error_of(&result);
    assert_eq!(error["code"], "E_INTERNAL", "{era:?}: {error}");
    assert!(
        error["message"].as_str().unwrap().contains("`boom`"),
        "{era:?}: names the tool: {error}"
    );
    let after = call(client, "fine", json!({})).await;
    assert_eq!(
        after.structured_content,
        Some(json!({ "ok": true })),
        "{era:?}: the server still serves after a panic"
    );
}

#[tokio::test]
async fn a_panicking_tool_is_answered_on_stdio() {
    for era in ERAS {
        let client = stdio_client(panicking_bridge(), era, vec![]).await;
        assert_answered_internal(&client, era).await;
    }
}

#[tokio::test]
async fn a_panicking_tool_is_answered_on_http_and_counted() {
    let server = start_http(panicking_bridge(), HttpOptions::default(), vec![]).await;
    for era in ERAS {
        let client = http_client(server.addr, era).await;
        assert_answered_internal(&client, era).await;
    }
    let metrics = mcp_testkit::http_get(&format!("http://{}/metrics", server.addr)).await;
    assert!(
        metrics
            .contains(r#"mcp_tool_calls_total{bridge="test",tool="boom",outcome="E_INTERNAL"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"mcp_tool_panics_total{bridge="test",tool="boom"} 2"#),
        "{metrics}"
    );
}

struct PanickingResources;

impl bridge_core::resource::ResourceProvider for PanickingResources {
    fn list(
        &self,
    ) -> futures::future::BoxFuture<
        '_,
        Result<Vec<bridge_core::resource::ResourceInfo>, bridge_core::ToolError>,
    > {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn read<'a>(
        &'a self,
        _uri: &'a str,
    ) -> futures::future::BoxFuture<
        'a,
        Result<Option<bridge_core::resource::ResourceBody>, bridge_core::ToolError>,
    > {
        Box::pin(async { panic!("a provider bug") })
    }
}

#[tokio::test]
async fn a_panicking_resource_provider_is_answered() {
    for era in ERAS {
        let mut b = Bridge::builder("test", "1.2.3");
        b.resources(std::sync::Arc::new(PanickingResources));
        let client = stdio_client(b.build().unwrap(), era, vec![]).await;
        let read = within(
            "resources/read",
            client.read_resource(rmcp::model::ReadResourceRequestParams::new("test://x")),
        )
        .await;
        let error = read.err().unwrap().to_string();
        assert!(error.contains("a provider bug"), "{era:?}: {error}");
    }
}
