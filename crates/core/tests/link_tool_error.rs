#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A link failure (`bridge_link::LinkError`) becomes the agent-facing `ToolError` with its stable code.

use bridge_core::link::LinkError;
use bridge_core::{ErrorCode, ToolError};
use std::time::Duration;

#[test]
fn link_errors_map_to_stable_tool_codes() {
    let e = ToolError::from(LinkError::disconnected("socket closed"));
    assert_eq!(e.code(), ErrorCode::Disconnected);
    assert!(e.message().contains("socket closed"));

    let e = ToolError::from(LinkError::Timeout {
        elapsed: Duration::from_millis(1500),
    });
    assert_eq!(e.code(), ErrorCode::Timeout);
    assert!(e.message().contains("1500 ms"), "{}", e.message());
    assert_eq!(e.details()["elapsed_ms"], 1500);
}
