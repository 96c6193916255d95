//! `decode-cost`: what rmcp's decoding of one incoming `tools/call` line costs on the server, and what a
//! method-name pre-dispatch at our edge would cost instead, on the exact lines the benchmark's clients send.
//!
//! rmcp decodes every line as `RxJsonRpcMessage<RoleServer>`: an untagged enum over the four message shapes
//! (each shape-checked through a flattened buffer), then the untagged `ClientRequest`, which tries its
//! variants in order (`tools/call` is the 14th) on a buffered copy until one accepts the `method`. The
//! pre-dispatch reads `method` and the presence of `id`/`result`/`error` first (borrowing, nothing
//! buffered), then decodes the one request type that method names, and falls back to rmcp's decoding for
//! anything else. Both decodings are checked to give the same message before timing.
//!
//! `decode-cost [--iterations N]`; prints ns per line for each.

use clap::Parser;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequest, ClientRequest, JsonRpcMessage, JsonRpcRequest, ListToolsRequest, PingRequest,
};
use rmcp::service::RxJsonRpcMessage;
use serde::Deserialize;
use std::borrow::Cow;
use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Debug, Parser)]
#[command(name = "decode-cost")]
struct Cli {
    /// Decodings per line and method.
    #[arg(long, default_value_t = 200_000)]
    iterations: u32,
}

/// True when the key is present, whatever its value (`null` included), as rmcp's shape check counts it.
#[derive(Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| Self(true))
    }
}

#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(default)]
    id: Present,
    #[serde(default)]
    result: Present,
    #[serde(default)]
    error: Present,
}

fn generic(line: &[u8]) -> Result<RxJsonRpcMessage<RoleServer>, serde_json::Error> {
    serde_json::from_slice(line)
}

fn direct<R: serde::de::DeserializeOwned>(
    line: &[u8],
    wrap: fn(R) -> ClientRequest,
) -> Option<RxJsonRpcMessage<RoleServer>> {
    let r: JsonRpcRequest<R> = serde_json::from_slice(line).ok()?;
    Some(JsonRpcMessage::Request(JsonRpcRequest::new(
        r.id,
        wrap(r.request),
    )))
}

/// The pre-dispatch: only a well-shaped request with a method it knows takes the direct path; everything
/// else (and a direct decoding that fails, so errors stay rmcp's) goes through rmcp's decoding.
fn pre_dispatch(line: &[u8]) -> Result<RxJsonRpcMessage<RoleServer>, serde_json::Error> {
    if let Ok(peek) = serde_json::from_slice::<Peek<'_>>(line)
        && peek.id.0
        && !peek.result.0
        && !peek.error.0
    {
        let fast = match peek.method.as_deref() {
            Some("tools/call") => direct::<CallToolRequest>(line, ClientRequest::CallToolRequest),
            Some("tools/list") => direct::<ListToolsRequest>(line, ClientRequest::ListToolsRequest),
            Some("ping") => direct::<PingRequest>(line, ClientRequest::PingRequest),
            _ => None,
        };
        if let Some(message) = fast {
            return Ok(message);
        }
    }
    generic(line)
}

fn time(iterations: u32, mut f: impl FnMut()) -> f64 {
    let t0 = Instant::now();
    for _ in 0..iterations {
        f();
    }
    t0.elapsed().as_nanos() as f64 / f64::from(iterations)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let lines: [(&str, &[u8]); 3] = [
        (
            "tools/call, legacy (rmcp client)",
            br#"{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"noop","arguments":{}}}"#,
        ),
        (
            "tools/call, modern (_meta per request)",
            br#"{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"noop","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcp-bench","version":"0"}}}}"#,
        ),
        (
            "tools/list",
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
        ),
    ];
    println!(
        "{:<40} {:>12} {:>14} {:>12} {:>8}",
        "line", "rmcp ns", "pre-dispatch", "Value ns", "saved"
    );
    for (name, line) in lines {
        // Same message both ways, compared as the JSON rmcp would hand on.
        let (a, b) = match (generic(line), pre_dispatch(line)) {
            (Ok(a), Ok(b)) => (serde_json::to_value(a), serde_json::to_value(b)),
            (a, b) => {
                eprintln!(
                    "decode-cost: {name}: rmcp {:?}, pre-dispatch {:?}",
                    a.err(),
                    b.err()
                );
                return ExitCode::FAILURE;
            }
        };
        if a.as_ref().ok() != b.as_ref().ok() || a.is_err() {
            eprintln!("decode-cost: {name}: the two decodings differ: {a:?} vs {b:?}");
            return ExitCode::FAILURE;
        }
        let n = cli.iterations;
        let rmcp = time(n, || {
            let _ = black_box(generic(black_box(line)));
        });
        let fast = time(n, || {
            let _ = black_box(pre_dispatch(black_box(line)));
        });
        let value = time(n, || {
            let _ = black_box(serde_json::from_slice::<serde_json::Value>(black_box(line)));
        });
        println!(
            "{name:<40} {rmcp:>12.0} {fast:>14.0} {value:>12.0} {:>7.0}%",
            (1.0 - fast / rmcp) * 100.0
        );
    }
    ExitCode::SUCCESS
}
