//! Stdio and HTTP from one process (`--stdio --http`, `MCP_TRANSPORT=both`): both reach the same bridge, one
//! /metrics counts both, the stdio client leaving ends the server, and a stdin closed from the start leaves
//! HTTP serving.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use mcp_testkit::{Era, call, http_get, ok_of, text_of};
use serde_json::json;
use support::{RawComputer, Server};

const COMPUTERCRAFT: [&str; 7] = [
    "computercraft",
    "--mcp-port",
    "0",
    "--computercraft-link-host",
    "127.0.0.1",
    "--computercraft-link-port",
    "0",
];

async fn link_computer(server: &Server) -> RawComputer {
    let link_url = format!(
        "ws://{}",
        server.after("computers link at ws://", &[';']).await
    );
    let computer = RawComputer::link(&link_url, 7, "base").await;
    // The hello is only sent: a tool call that reaches the server before it has read it finds no computer 7
    // (CI saw `E_NOT_FOUND computer 7 is not linked` once). The server logs the link once it is registered.
    server.line("computer linked").await;
    computer
}

async fn run_lua_answers(client: &rmcp::Peer<rmcp::RoleClient>, via: &str) {
    let lua = call(
        client,
        "run_lua",
        json!({"computer": 7, "code": "return 42"}),
    )
    .await;
    assert_eq!(
        ok_of(&lua)["values"],
        json!([42]),
        "{via}: {}",
        text_of(&lua)
    );
}

#[tokio::test]
async fn stdio_and_http_serve_the_same_bridge_and_the_stdio_client_leaving_ends_both() {
    let mut args = COMPUTERCRAFT.to_vec();
    args.extend(["--stdio", "--http"]);
    let mut server = Server::spawn(&args);
    let _computer = link_computer(&server).await;
    let mcp = server.after("serving MCP at http://", &['/']).await;

    let stdio = support::stdio_client(&mut server, Era::Legacy).await;
    run_lua_answers(stdio.peer(), "stdio").await;
    let http = mcp_testkit::http_client(mcp.parse().unwrap(), Era::Modern).await;
    run_lua_answers(http.peer(), "http").await;

    let metrics = http_get(&format!("http://{mcp}/metrics")).await;
    let both = r#"mcp_tool_calls_total{bridge="computercraft",tool="run_lua",outcome="ok"} 2"#;
    assert!(metrics.contains(both), "{both} in\n{metrics}");

    // The client that launched the server over stdio goes away: the server must not outlive it.
    drop(stdio);
    assert_eq!(server.exit_code().await, Some(0));
    assert!(
        server
            .log()
            .iter()
            .any(|l| l.contains("the stdio client left")),
        "{:#?}",
        server.log()
    );
}

#[tokio::test]
async fn mcp_transport_both_with_stdin_closed_from_the_start_keeps_serving_http() {
    let mut server = Server::spawn_with_env(&COMPUTERCRAFT, &[("MCP_TRANSPORT", "both")]);
    // Nobody will ever speak on stdin, as under a service manager or `</dev/null`.
    drop(server.stdio());
    let _computer = link_computer(&server).await;
    let mcp = server.after("serving MCP at http://", &['/']).await;
    server.line("serving HTTP only").await;

    let http = mcp_testkit::http_client(mcp.parse().unwrap(), Era::Legacy).await;
    run_lua_answers(http.peer(), "http after stdin closed").await;
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the server exited with HTTP clients still served: {:#?}",
        server.log()
    );
    server.sigterm();
    assert_eq!(server.exit_code().await, Some(0));
}
