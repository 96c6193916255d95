#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue 22 item 6: two game servers with the same name used to kick each other off forever (a second live
//! adapter replaced the first, which redialled and replaced the second, …). Now the name stays with the
//! adapter that holds it; another instance is refused with a clear error, while the same instance
//! reconnecting (its old link half-dead) still takes its place.

use crate::support;

use support::*;

#[tokio::test]
async fn a_second_game_under_a_taken_name_is_refused_not_swapped_in() {
    let relay = start_relay(relay_args(&[])).await;
    let (_first, w) = game_hello(&relay.url(), "default", "i1").await;
    assert_eq!(w["type"], "welcome");
    let (_second, refused) = game_hello(&relay.url(), "default", "i2").await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["payload"]["code"], "PERMISSION_DENIED");
    assert_eq!(refused["payload"]["details"]["reason"], "name_in_use");
    let message = refused["payload"]["message"].as_str().unwrap();
    assert!(
        message.contains("server_name"),
        "tells how to fix it: {message}"
    );
    // The first keeps the name.
    let health: serde_json::Value = serde_json::from_str(
        &mcp_testkit::http_get(&format!("http://{}/health", relay.addr)).await,
    )
    .unwrap();
    assert_eq!(health["games"][0]["instance"], "i1");
    // The same instance reconnecting takes its own place back.
    let (_again, w) = game_hello(&relay.url(), "default", "i1").await;
    assert_eq!(w["type"], "welcome");
    relay.stop().await;
}
