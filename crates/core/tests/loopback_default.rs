//! Every listener on loopback unless a token is set (issue 25, item 7): MCP over HTTP binds 127.0.0.1 by
//! default, and an address other machines can reach is refused at start without `--mcp-token`, with an error
//! naming both flags.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bridge_core::Bridge;
use bridge_core::serve::{McpArgs, Transport, run_mount};
use clap::Parser;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    mcp: McpArgs,
}

fn args(argv: &[&str]) -> McpArgs {
    Cli::try_parse_from(std::iter::once("x").chain(argv.iter().copied()))
        .unwrap()
        .mcp
}

fn bridge() -> Bridge {
    Bridge::builder("loopback", "0").build().unwrap()
}

#[test]
fn mcp_http_binds_loopback_by_default() {
    assert!(args(&[]).mcp_host.is_loopback());
}

#[tokio::test]
async fn mcp_http_beyond_loopback_without_a_token_is_refused_naming_both_flags() {
    for argv in [
        &["--http", "--mcp-host", "0.0.0.0", "--mcp-port", "0"][..],
        &["--transport", "both", "--mcp-host", "::", "--mcp-port", "0"],
    ] {
        let shutdown = CancellationToken::new();
        // Told to stop already, so a server that wrongly binds returns at once instead of serving on.
        shutdown.cancel();
        let err = run_mount(bridge(), &args(argv), Transport::Stdio, shutdown)
            .await
            .expect_err("refused");
        let msg = err.to_string();
        assert!(
            msg.contains("--mcp-host") && msg.contains("--mcp-token") && msg.contains("MCP_TOKEN"),
            "{argv:?}: {msg}"
        );
    }
}

#[tokio::test]
async fn mcp_http_beyond_loopback_with_a_token_is_served() {
    let argv = [
        "--http",
        "--mcp-host",
        "0.0.0.0",
        "--mcp-port",
        "0",
        "--mcp-token",
        "s3cret",
    ];
    let shutdown = CancellationToken::new();
    // Already told to stop: it binds, serves nobody and returns.
    shutdown.cancel();
    run_mount(bridge(), &args(&argv), Transport::Stdio, shutdown)
        .await
        .expect("a token makes a reachable address acceptable");
}
