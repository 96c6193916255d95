//! `noop-server`: the smallest bridge on bridge-core's public API, with one tool `noop` that takes no
//! arguments and returns `{}`. It is the Rust side of the benchmark, so it measures the core's own overhead:
//! transport, JSON-RPC, argument checking and result shaping, with no work in the handler.
//!
//! `noop-server --stdio` (default) or `noop-server --http --mcp-port N`; logs go to stderr only.

use bridge_core::serve::{McpArgs, Transport, init_logging, serve_until_signal};
use bridge_core::{Bridge, NoArgs, ToolCtx, ToolError, ToolSpec};
use clap::Parser;
use std::process::ExitCode;

// The same allocator as the shipped `mcp-bridges` (crates/cli), so the core's figures are what users run and
// the comparison with the baselines is not one of allocators.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A no-op MCP server for benchmarks.
#[derive(Debug, Parser)]
#[command(name = "noop-server", version)]
struct Cli {
    #[command(flatten)]
    mcp: McpArgs,
}

/// The output of `noop`: an empty object.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
struct Empty {}

fn bridge() -> Result<Bridge, bridge_core::bridge::BuildError> {
    let mut b = Bridge::builder("noop", env!("CARGO_PKG_VERSION"));
    b.tool(
        ToolSpec::new(
            "noop",
            "Does nothing and returns {}; for measuring protocol overhead.",
        )
        .read_only()
        .handler(|_: NoArgs, _: ToolCtx| async { Ok::<_, ToolError>(Empty {}) }),
    );
    b.build()
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.mcp.log_format);
    serve_until_signal(bridge(), &cli.mcp, Transport::Stdio).await
}
