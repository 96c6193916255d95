//! The whole "protocol" of the baseline servers: find a message's `id` and `method`, and answer with a
//! canned reply for the few methods a client needs to call `noop`, in either era. No MCP library, no
//! schema, no argument checking: what is left is the floor any MCP server pays (framing, one JSON parse of
//! the request, one write of the reply), which is what the core's CPU per call is compared with.

use serde::Deserialize;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a client opened the 2026-07-28 era (`server/discover`): its results then carry `resultType`, as
/// the core's do. One client per baseline process and era (mcp-bench starts one per run), so the modern rows
/// are compared with a baseline that read the same lines, each with its `_meta`.
static MODERN: AtomicBool = AtomicBool::new(false);

/// The two fields a JSON-RPC server cannot avoid reading; serde skips the rest (still scanning them).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(borrow, default)]
    method: Option<&'a str>,
}

const INITIALIZE: &str = r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"baseline","version":"0"}}"#;
const TOOLS: &str = r#"{"tools":[{"name":"noop","description":"Does nothing and returns {}.","inputSchema":{"type":"object","properties":{}},"outputSchema":{"type":"object","properties":{}},"annotations":{"readOnlyHint":true}}]}"#;
const NOOP: &str =
    r#"{"content":[{"type":"text","text":"{}"}],"structuredContent":{},"isError":false}"#;
const DISCOVER: &str = r#"{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"baseline","version":"0"}}}"#;
const TOOLS_MODERN: &str = r#"{"resultType":"complete","ttlMs":0,"cacheScope":"private","tools":[{"name":"noop","description":"Does nothing and returns {}.","inputSchema":{"type":"object","properties":{}},"outputSchema":{"type":"object","properties":{}},"annotations":{"readOnlyHint":true}}]}"#;
const NOOP_MODERN: &str = r#"{"resultType":"complete","content":[{"type":"text","text":"{}"}],"structuredContent":{},"isError":false}"#;
const UNKNOWN: &str = r#"{"code":-32601,"message":"method not found"}"#;

/// Appends the reply to `message` (a newline is not added) and returns true, or returns false when the
/// message needs no reply (a notification, a response, or a line that is not JSON).
pub fn reply(message: &[u8], out: &mut Vec<u8>) -> bool {
    let Ok(envelope) = serde_json::from_slice::<Envelope<'_>>(message) else {
        return false;
    };
    let (Some(id), Some(method)) = (envelope.id, envelope.method) else {
        return false;
    };
    let modern = MODERN.load(Ordering::Relaxed);
    let (key, body) = match method {
        "initialize" => ("result", INITIALIZE),
        "server/discover" => {
            MODERN.store(true, Ordering::Relaxed);
            ("result", DISCOVER)
        }
        "tools/list" if modern => ("result", TOOLS_MODERN),
        "tools/list" => ("result", TOOLS),
        "tools/call" if modern => ("result", NOOP_MODERN),
        "tools/call" => ("result", NOOP),
        "ping" => ("result", "{}"),
        _ => ("error", UNKNOWN),
    };
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    // Writing a Value into a Vec cannot fail; the fallback keeps the reply valid JSON regardless.
    if serde_json::to_writer(&mut *out, &id).is_err() {
        out.extend_from_slice(b"null");
    }
    out.extend_from_slice(b",\"");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\":");
    out.extend_from_slice(body.as_bytes());
    out.push(b'}');
    true
}
