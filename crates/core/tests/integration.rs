//! The integration tests of `crates/core`, one module per behaviour (each file beside this one), built as one test
//! binary: a binary per file linked every dependency again for each, which filled a CI machine's disk
//! (ARCHITECTURE.md, "Testing at the boundaries"). A file added here must be named below, which
//! `crates/cli/tests/test_binaries.rs` checks.

// Tests and their helpers may unwrap and panic: a failure is the test's verdict.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod cancel;
mod link_e2e;
mod link_listen_limits;
mod link_origin;
mod link_tls;
mod link_tool_error;
mod link_transports;
mod link_ws;
mod loopback_default;
mod mcp_calls;
mod mcp_cancel;
mod mcp_client_features;
mod mcp_events;
mod mcp_http;
mod mcp_http_body_budget;
mod mcp_http_edges;
mod mcp_http_fast;
mod mcp_http_guard;
mod mcp_http_slots;
mod mcp_http_stateful;
mod mcp_invalid_messages;
mod mcp_panic;
mod mcp_stdio_loop;
mod mcp_tasks;
mod mcp_tools;
mod poll_page;
mod progress;
mod resource_pages;
mod result_cap;
mod task_listing;
