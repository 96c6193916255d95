//! Two mounted bridges with a tool of the same name: both are served, each under `<bridge>_<tool>` (as every
//! tool in `serve` is); `--tool-timeout` reaches each by `<bridge>/<tool>`. Through a real MCP client
//! over the stdio framing, in both eras.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bridge_bitburner::{Bitburner, GameArgs};
use bridge_core::{Bridge, BridgeEntry, BridgeEnv, Mount, NoArgs, ToolCtx, ToolSpec};
use mcp_testkit::{ERAS, call, error_of, ok_of};
use serde_json::json;
use std::time::Duration;

/// A second bridge whose `status` collides with Bitburner's, and whose `status` never answers.
fn other() -> Bridge {
    let mut b = Bridge::builder("other", "0.1.0");
    b.tool(
        ToolSpec::new("status", "Never answers.").handler(|_: NoArgs, _: ToolCtx| async move {
            std::future::pending::<()>().await;
            Ok(json!({}))
        }),
    );
    b.events().stream("ticks", "", 4);
    b.build().unwrap()
}

#[tokio::test]
async fn colliding_tool_names_are_prefixed_with_their_bridge() {
    let env = BridgeEnv::new();
    let mut game = GameArgs::defaults();
    game.port = 0;
    let bitburner = Bitburner::start(game, &env).await.unwrap();
    let mount = Mount::new(vec![bitburner, other()]).unwrap();
    for era in ERAS {
        let timeouts = vec![("other/status".to_owned(), Duration::from_millis(50))];
        let client = mcp_testkit::pipe_client(mount.clone(), era, timeouts).await;
        let tools = client.list_all_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert!(
            names.contains(&"bitburner_status") && names.contains(&"other_status"),
            "{era:?}: {names:?}"
        );
        assert!(!names.contains(&"status"), "{era:?}: no bare name");
        assert!(
            names.contains(&"bitburner_read_file"),
            "{era:?}: names that do not collide are prefixed too"
        );

        let status = call(&client, "bitburner_status", json!({})).await;
        assert_eq!(
            ok_of(&status)["connected"],
            false,
            "{era:?}: Bitburner's own status"
        );
        let other = call(&client, "other_status", json!({})).await;
        assert_eq!(
            error_of(&other)["code"],
            "E_TIMEOUT",
            "{era:?}: the timeout given as other/status applies to other's status only"
        );
        let ticks = call(&client, "poll_events", json!({"stream": "other/ticks"})).await;
        assert_eq!(ok_of(&ticks)["stream"], "ticks");
    }
    env.close(Duration::from_secs(10)).await;
    assert_eq!(env.running_tasks(), 0, "the bridge's tasks were joined");
}
