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

/// The status of an `initialize` POSTed to `http://{addr}/mcp`, with `token` as a bearer token.
async fn post_initialize(addr: &str, token: Option<&str>) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, \
         text/event-stream\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.unwrap();
    std::str::from_utf8(&head[9..12]).unwrap().parse().unwrap()
}

/// A host that launched the bridge over stdio asked for no port: the HTTP the bridge opens beside it by default
/// asks for a token made for this run and said on stderr, so another local user cannot drive the stdio
/// client's computers (or sandboxes) through the loopback port.
#[tokio::test]
async fn http_opened_beside_stdio_by_default_asks_for_the_token_it_said() {
    let mut server = Server::spawn(&COMPUTERCRAFT);
    let stdio = support::stdio_client(&mut server, Era::Legacy).await;
    let mcp = server.after("serving MCP at http://", &['/']).await;
    let said = server.line("made for this run").await;
    let token = said
        .split("Bearer ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no token in {said}"));
    assert_eq!(token.len(), 32, "{said}");
    assert_eq!(post_initialize(&mcp, None).await, 401);
    assert_eq!(post_initialize(&mcp, Some("guess")).await, 401);
    assert_eq!(post_initialize(&mcp, Some(token)).await, 200);
    // Stdio is served as ever.
    let listed = stdio.peer().list_all_tools().await.unwrap();
    assert!(listed.iter().any(|t| t.name == "run_lua"));
}

/// Run on its own (stdin not a pipe: a terminal, or /dev/null under a service), the bridge's default HTTP is
/// what the user points a client at, as the ComputerCraft quick start does: no token is made up for it.
#[tokio::test]
async fn http_of_a_bridge_run_on_its_own_asks_for_no_token() {
    let server = Server::spawn_with(&COMPUTERCRAFT, &[], std::process::Stdio::null());
    let mcp = server.after("serving MCP at http://", &['/']).await;
    assert_eq!(post_initialize(&mcp, None).await, 200);
    assert!(
        !server.log().iter().any(|l| l.contains("made for this run")),
        "{:#?}",
        server.log()
    );
}
