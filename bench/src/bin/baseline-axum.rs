//! `baseline-axum`: the floor for an MCP server over Streamable HTTP. A bare axum handler on POST /mcp
//! answers each JSON-RPC body with its canned reply (bench/src/bin/baseline/reply.rs) as
//! `application/json`, notifications with 202; no sessions, no MCP library. Same runtime as the core's
//! noop-server (tokio multi-thread). mcp-bench drives it like noop-server and reports the core's CPU per
//! call against it.
//!
//! `baseline-axum --http --port N` (the flags mcp-bench passes; `--http` is accepted and ignored).

#[path = "baseline/reply.rs"]
mod reply;

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use clap::Parser;
use std::net::{Ipv4Addr, SocketAddr};

// The same allocator as the shipped `mcp-bridges` (crates/cli), so the core's figures are what users run and
// the comparison with the baselines is not one of allocators.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(name = "baseline-axum")]
struct Cli {
    /// Accepted for symmetry with the other servers' command lines.
    #[arg(long)]
    http: bool,
    /// Loopback port to listen on.
    #[arg(long)]
    port: u16,
}

async fn mcp(body: Bytes) -> Response {
    let mut out = Vec::with_capacity(512);
    if reply::reply(&body, &mut out) {
        ([(header::CONTENT_TYPE, "application/json")], out).into_response()
    } else {
        StatusCode::ACCEPTED.into_response()
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let cli = Cli::parse();
    let app = Router::new().route("/mcp", post(mcp));
    let listener =
        tokio::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, cli.port))).await?;
    // As the core's listener does: small replies must not wait for Nagle.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await
}
