//! `tools/list` says which tools may become tasks (the tasks extension, io.modelcontextprotocol/tasks): in the
//! tool's `_meta` under the extension's id, `{"taskSupport": "optional" | "required"}`, as 2025-11-25 named it
//! in `execution`; nothing for the others. Both eras, both transports.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use bridge_core::serve::HttpOptions;
use bridge_core::tool::TaskSupport;
use bridge_core::{Bridge, NoArgs, ToolCtx, ToolSpec};
use rmcp::model::TASKS_EXTENSION_ID;
use serde_json::{Value, json};
use support::*;

fn bridge() -> Bridge {
    let mut b = Bridge::builder("tasks", "1.0.0");
    for (name, support) in [
        ("quick", TaskSupport::Never),
        ("long", TaskSupport::Optional),
        ("only_task", TaskSupport::Required),
    ] {
        b.tool(
            ToolSpec::new(name, "A tool.")
                .task_support(support)
                .handler(|_: NoArgs, _: ToolCtx| async { Ok(json!({})) }),
        );
    }
    b.build().unwrap()
}

async fn support_of(client: &Client) -> Vec<(String, Value)> {
    let tools = within("tools/list", client.list_all_tools()).await.unwrap();
    tools
        .iter()
        .map(|t| {
            let json = serde_json::to_value(t).unwrap();
            (
                t.name.to_string(),
                json["_meta"][TASKS_EXTENSION_ID]["taskSupport"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn tools_list_names_the_task_support_of_each_tool() {
    let expected = vec![
        ("quick".to_owned(), Value::Null),
        ("long".to_owned(), json!("optional")),
        ("only_task".to_owned(), json!("required")),
    ];
    for era in ERAS {
        let client = stdio_client(bridge(), era, vec![]).await;
        assert_eq!(support_of(&client).await, expected, "stdio {era:?}");
        let server = start_http(bridge(), HttpOptions::default(), vec![]).await;
        let client = http_client(server.addr, era).await;
        assert_eq!(support_of(&client).await, expected, "http {era:?}");
    }
}
