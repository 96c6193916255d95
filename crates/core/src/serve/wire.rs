//! The stdio wire: newline-delimited JSON-RPC, read and written as rmcp's `AsyncRwTransport` does, with two
//! costs taken out of every message. The loop that serves it is `stdio.rs`.
//!
//! * **Decoding.** rmcp decodes a line as an untagged enum of the four message shapes and then the untagged
//!   `ClientRequest`, which buffers the request and tries its variants in order, each failure building a
//!   `serde_json::Error`, before `tools/call` (the 14th) matches: about 40 % of a no-op call's instructions.
//!   [`decode`] first reads the `method` and which of `id`/`result`/`error` are present, then decodes the one
//!   request type the method names; anything else (and a line that fails there, so its error stays rmcp's)
//!   takes rmcp's decoding.
//! * **Writing.** A message is serialised into one buffer shared by every sender ([`Out`]), and whoever flushes
//!   writes everything queued with one write and one flush: answers leave in the order they were queued, and
//!   under concurrency several go out per system call.

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ErrorData, InputResponses, JsonObject,
    JsonRpcMessage, JsonRpcRequest, JsonRpcVersion2_0, ListToolsRequest, PingRequest,
    ReadResourceRequest, RequestId, RequestMetaObject, ServerResult,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::sync::{Mutex, PoisonError};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// The longest line read, rmcp's own limit (`async_rw::DEFAULT_MAX_LINE_LENGTH`): a longer one is dropped.
const MAX_LINE: usize = 16 * 1024 * 1024;
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Decodes one line (without its newline) as rmcp's stdio transport would: `Ok(None)` for a message rmcp
/// ignores (a notification outside MCP), `Err` for one it rejects.
pub(crate) fn decode(
    line: &[u8],
) -> Result<Option<RxJsonRpcMessage<RoleServer>>, serde_json::Error> {
    let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
    // Read as text, checked once: read as bytes, serde_json checks each string it meets again (9 a call). A
    // line that is not UTF-8 takes rmcp's decoding, which says so as it did.
    if let Ok(text) = std::str::from_utf8(line)
        && let Some(message) = pre_dispatch(text)
    {
        return Ok(Some(message));
    }
    rmcp_decode(line)
}

/// The methods answered from the envelope's pass (`tools/call`'s params decoded in it) or with one more.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    ToolsCall,
    ToolsList,
    ResourcesRead,
    Ping,
    Other,
}

/// One pass over a line: the JSON-RPC envelope, and `tools/call`'s params decoded into their type where
/// they stand when `method` came before them (as every client writes it). Anything unusual (a duplicate or
/// missing key, a bad `jsonrpc` or id) fails it, and the line takes rmcp's decoding.
#[derive(Default)]
struct Envelope {
    jsonrpc: bool,
    id: Option<RequestId>,
    method: Option<Method>,
    params: bool,
    call: Option<CallParams>,
    /// `result` or `error` present: not a request.
    answer: bool,
}

impl<'de> Deserialize<'de> for Envelope {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EnvelopeVisitor)
    }
}

struct EnvelopeVisitor;

impl<'de> serde::de::Visitor<'de> for EnvelopeVisitor {
    type Value = Envelope;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Envelope, A::Error> {
        use serde::de::{Error, IgnoredAny};
        let mut e = Envelope::default();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match &*key {
                "jsonrpc" if !e.jsonrpc => {
                    map.next_value::<JsonRpcVersion2_0>()?;
                    e.jsonrpc = true;
                }
                "id" if e.id.is_none() => e.id = Some(map.next_value()?),
                "method" if e.method.is_none() => {
                    let method = map.next_value::<Cow<'de, str>>()?;
                    e.method = Some(match &*method {
                        "tools/call" => Method::ToolsCall,
                        "tools/list" => Method::ToolsList,
                        "resources/read" => Method::ResourcesRead,
                        "ping" => Method::Ping,
                        _ => Method::Other,
                    });
                }
                "params" if !e.params => {
                    e.params = true;
                    if e.method == Some(Method::ToolsCall) {
                        e.call = Some(map.next_value()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                "jsonrpc" | "id" | "method" | "params" => {
                    return Err(A::Error::custom("duplicate field"));
                }
                "result" | "error" => {
                    e.answer = true;
                    map.next_value::<IgnoredAny>()?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(e)
    }
}

/// The request, decoded straight into the type its method names; `None` sends the line down rmcp's path.
fn pre_dispatch(line: &str) -> Option<RxJsonRpcMessage<RoleServer>> {
    let envelope = serde_json::from_str::<Envelope>(line).ok()?;
    // Only rmcp's request shape: `method` and `id`, no `result` or `error`.
    if !envelope.jsonrpc || envelope.answer {
        return None;
    }
    let id = envelope.id?;
    match envelope.method? {
        Method::ToolsCall => match envelope.call {
            Some(params) => Some(call_message(id, params)),
            // `params` before `method`, or none: the line again, as a whole.
            None => tool_call(line),
        },
        Method::ToolsList => direct::<ListToolsRequest>(line, ClientRequest::ListToolsRequest),
        Method::ResourcesRead => {
            direct::<ReadResourceRequest>(line, ClientRequest::ReadResourceRequest)
        }
        Method::Ping => direct::<PingRequest>(line, ClientRequest::PingRequest),
        Method::Other => None,
    }
}

fn direct<R: DeserializeOwned>(
    line: &str,
    wrap: fn(R) -> ClientRequest,
) -> Option<RxJsonRpcMessage<RoleServer>> {
    let request: JsonRpcRequest<R> = serde_json::from_str(line).ok()?;
    Some(JsonRpcMessage::Request(JsonRpcRequest::new(
        request.id,
        wrap(request.request),
    )))
}

/// `tools/call`'s params: `CallToolRequestParams`' own fields, read without serde's `flatten` (`JsonRpcRequest`
/// flattens the request and the request flattens its params beside `_meta`, so serde would buffer the line
/// twice before the params are read).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallParams {
    #[serde(rename = "_meta", default)]
    meta: Option<JsonObject>,
    name: Cow<'static, str>,
    #[serde(default)]
    arguments: Option<JsonObject>,
    #[serde(default)]
    input_responses: Option<InputResponses>,
    #[serde(default)]
    request_state: Option<String>,
}

/// `tools/call` as a whole line, when its params could not be read in the envelope's pass.
fn tool_call(line: &str) -> Option<RxJsonRpcMessage<RoleServer>> {
    #[derive(Deserialize)]
    struct Line {
        #[allow(dead_code)]
        jsonrpc: JsonRpcVersion2_0,
        id: RequestId,
        params: CallParams,
    }
    let decoded: Line = serde_json::from_str(line).ok()?;
    Some(call_message(decoded.id, decoded.params))
}

/// The request rmcp would have decoded: `_meta` where rmcp puts it (the request's extensions, not the params).
fn call_message(id: RequestId, decoded: CallParams) -> RxJsonRpcMessage<RoleServer> {
    let mut params = CallToolRequestParams::new(decoded.name);
    params.arguments = decoded.arguments;
    params.input_responses = decoded.input_responses;
    params.request_state = decoded.request_state;
    let mut request = CallToolRequest::new(params);
    if let Some(meta) = decoded.meta {
        request.extensions.insert(RequestMetaObject::from(meta));
    }
    JsonRpcMessage::Request(JsonRpcRequest::new(
        id,
        ClientRequest::CallToolRequest(request),
    ))
}

/// rmcp's `try_parse_with_compatibility`: its decoding, and notifications outside MCP ignored.
fn rmcp_decode(line: &[u8]) -> Result<Option<RxJsonRpcMessage<RoleServer>>, serde_json::Error> {
    let error = match serde_json::from_slice(line) {
        Ok(message) => return Ok(Some(message)),
        Err(error) => error,
    };
    if std::str::from_utf8(line).is_ok()
        && let Ok(value) = serde_json::from_slice::<serde_json::Value>(line)
        && let Some(method) = value.get("method").and_then(serde_json::Value::as_str)
        && ignored_notification(value.get("id").is_none(), method)
    {
        return Ok(None);
    }
    Err(error)
}

fn ignored_notification(is_notification: bool, method: &str) -> bool {
    (is_notification && !standard_method(method))
        || (method.starts_with("notifications/") && !standard_notification(method))
}

fn standard_method(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "server/discover"
            | "prompts/get"
            | "prompts/list"
            | "resources/list"
            | "resources/read"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "resources/templates/list"
            | "subscriptions/listen"
            | "tools/call"
            | "tools/list"
            | "completion/complete"
            | "elicitation/create"
            | "logging/setLevel"
            | "roots/list"
            | "sampling/createMessage"
    ) || standard_notification(method)
}

fn standard_notification(method: &str) -> bool {
    matches!(
        method,
        "notifications/cancelled"
            | "notifications/initialized"
            | "notifications/message"
            | "notifications/progress"
            | "notifications/prompts/list_changed"
            | "notifications/resources/list_changed"
            | "notifications/resources/updated"
            | "notifications/roots/list_changed"
            | "notifications/subscriptions/acknowledged"
            | "notifications/tools/list_changed"
    )
}

/// Answers serialised but not yet written, and the writer: shared by the loop's inline answers, the calls it
/// handed to a task, and rmcp's side of the session. Whoever flushes writes everything queued so far with one
/// write and one flush, so answers leave in the order they were queued and several share a system call.
pub(crate) struct Out<W> {
    queued: Mutex<Vec<u8>>,
    /// The writer and the buffer it writes from (kept for its capacity); `None` once closed.
    writer: tokio::sync::Mutex<Option<(W, Vec<u8>)>>,
}

impl<W: AsyncWrite + Send + Unpin + 'static> Out<W> {
    pub(crate) fn new(write: W) -> Self {
        Self {
            queued: Mutex::new(Vec::new()),
            writer: tokio::sync::Mutex::new(Some((write, Vec::new()))),
        }
    }

    /// Serialises `message` behind what is queued; it is written by the next [`flush`](Self::flush).
    pub(crate) fn queue(&self, message: &TxJsonRpcMessage<RoleServer>) -> std::io::Result<()> {
        let mut queued = self.queued.lock().unwrap_or_else(PoisonError::into_inner);
        let start = queued.len();
        match serde_json::to_writer(&mut *queued, message) {
            Ok(()) => {
                queued.push(b'\n');
                Ok(())
            }
            Err(e) => {
                queued.truncate(start);
                Err(std::io::Error::from(e))
            }
        }
    }

    /// The answer to request `id`, queued as [`queue`](Self::queue) would queue `inline::message(id, result)`:
    /// a result is written straight into the buffer, without being moved into a JSON-RPC message first, with
    /// `structured` as a tool result's `structuredContent` ([`inline::write_result`](super::inline::write_result)).
    pub(crate) fn queue_answer(
        &self,
        id: RequestId,
        result: Result<ServerResult, ErrorData>,
        structured: Option<&RawValue>,
    ) -> std::io::Result<()> {
        let result = match result {
            Ok(result) => result,
            error => return self.queue(&super::inline::message(id, error)),
        };
        let mut queued = self.queued.lock().unwrap_or_else(PoisonError::into_inner);
        let start = queued.len();
        match super::inline::write_result(&mut queued, &id, &result, structured) {
            Ok(()) => {
                queued.push(b'\n');
                Ok(())
            }
            Err(e) => {
                queued.truncate(start);
                Err(std::io::Error::from(e))
            }
        }
    }

    /// Writes whatever is queued.
    pub(crate) async fn flush(&self) -> std::io::Result<()> {
        let mut writer = self.writer.lock().await;
        let Some((write, buffer)) = writer.as_mut() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "Transport is closed",
            ));
        };
        std::mem::swap(
            &mut *self.queued.lock().unwrap_or_else(PoisonError::into_inner),
            buffer,
        );
        // Empty: a flush that held the writer before us has written our message with its own.
        if buffer.is_empty() {
            return Ok(());
        }
        let written = write.write_all(buffer).await;
        buffer.clear();
        written?;
        write.flush().await
    }

    /// Writes what is queued, then drops the writer (the client sees the end of the stream).
    pub(crate) async fn close(&self) {
        if let Err(e) = self.flush().await {
            tracing::debug!("last answers not written: {e}");
        }
        drop(self.writer.lock().await.take());
    }
}

/// What one line read from the client came to.
// One per line, moved straight into its handling: boxing the message would cost an allocation per call.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Incoming {
    Message(RxJsonRpcMessage<RoleServer>),
    /// JSON, but no JSON-RPC message: answered `Invalid Request` (no id to answer with).
    Invalid,
    /// The end of the stream, or a read error.
    End,
}

/// Newline-delimited JSON-RPC read from a byte stream, lines bounded as rmcp bounds them.
pub(crate) struct LineReader<R> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// Dropping the rest of an oversize line, until its newline.
    discarding: bool,
}

impl<R: AsyncRead + Send + Unpin + 'static> LineReader<R> {
    pub(crate) fn new(read: R) -> Self {
        Self {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
        }
    }

    /// True when a whole line is already buffered, so the next [`next`](Self::next) needs no system call.
    pub(crate) fn line_buffered(&self) -> bool {
        self.read.buffer().contains(&b'\n')
    }

    /// The next message; cancel-safe (a partial line stays buffered for the next call).
    pub(crate) async fn next(&mut self) -> Incoming {
        loop {
            match self.read_line().await {
                None => return Incoming::End,
                Some(LineEnd::Line) => {}
                Some(LineEnd::Oversize) => {
                    tracing::error!(
                        max_line_length = MAX_LINE,
                        "Incoming message exceeded the maximum line length, discarding it"
                    );
                    continue;
                }
            }
            let decoded = {
                let line = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                if line.is_empty() {
                    None
                } else {
                    Some(decode(line))
                }
            };
            self.line.clear();
            match decoded {
                None | Some(Ok(None)) => {}
                Some(Ok(Some(message))) => return Incoming::Message(message),
                Some(Err(e)) => match e.classify() {
                    // Not JSON: no id to answer, and answering garbage can start an error storm (rmcp #938).
                    serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                        tracing::debug!("Ignoring unparsable incoming message: {e}");
                    }
                    serde_json::error::Category::Data | serde_json::error::Category::Io => {
                        tracing::debug!("Protocol error on incoming message: {e}");
                        return Incoming::Invalid;
                    }
                },
            }
        }
    }

    /// One whole line into `self.line`, bounded as rmcp bounds it; cancel-safe (a partial line stays in
    /// `self.line` for the next call). `None` at end of stream or on a read error.
    async fn read_line(&mut self) -> Option<LineEnd> {
        loop {
            let available = match self.read.fill_buf().await {
                Ok(available) => available,
                Err(e) => {
                    tracing::error!("Error reading from stream: {e}");
                    return None;
                }
            };
            if available.is_empty() {
                return None;
            }
            let newline = find_newline(available);
            let take = newline.map_or(available.len(), |i| i + 1);
            let mut end = None;
            if self.discarding {
                if newline.is_some() {
                    self.discarding = false;
                }
            } else if self.line.len().saturating_add(take) > MAX_LINE {
                self.line.clear();
                self.discarding = newline.is_none();
                end = Some(LineEnd::Oversize);
            } else {
                self.line.extend_from_slice(&available[..take]);
                if newline.is_some() {
                    end = Some(LineEnd::Line);
                }
            }
            self.read.consume(take);
            if let Some(end) = end {
                return Some(end);
            }
        }
    }
}

/// The first `\n` in `bytes`, eight bytes a step: a byte-by-byte search was a tenth of the loop's own
/// instructions.
fn find_newline(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    const NEWLINES: u64 = u64::from_ne_bytes([b'\n'; 8]);
    let mut chunks = bytes.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let word = u64::from_ne_bytes(word) ^ NEWLINES;
        // Some byte of `word` is zero (a newline in `chunk`): the classic has-zero-byte test.
        if word.wrapping_sub(ONES) & !word & HIGHS != 0 {
            return chunk.iter().position(|b| *b == b'\n').map(|i| offset + i);
        }
        offset += 8;
    }
    let rest = &bytes[offset..];
    rest.iter().position(|b| *b == b'\n').map(|i| offset + i)
}

enum LineEnd {
    Line,
    Oversize,
}

/// The `Invalid Request` answer to a line that was JSON but no JSON-RPC message.
pub(crate) fn invalid_request() -> TxJsonRpcMessage<RoleServer> {
    JsonRpcMessage::error(ErrorData::invalid_request("Invalid request", None), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rmcp_way(line: &[u8]) -> Option<serde_json::Value> {
        let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
        rmcp_decode(line)
            .ok()
            .flatten()
            .map(|m| serde_json::to_value(m).unwrap())
    }

    /// What the JSON does not show: where `_meta` sits (the request's extensions, read into the request's
    /// context, or the params) and the params as typed.
    fn placed(message: Option<RxJsonRpcMessage<RoleServer>>) -> Option<String> {
        use rmcp::model::GetMeta;
        match message? {
            JsonRpcMessage::Request(r) => {
                Some(format!("{:?} {:?}", r.request.get_meta(), r.request))
            }
            other => Some(format!("{other:?}")),
        }
    }

    fn ours(line: &[u8]) -> Option<serde_json::Value> {
        decode(line)
            .ok()
            .flatten()
            .map(|m| serde_json::to_value(m).unwrap())
    }

    #[test]
    fn the_newline_search_finds_the_first_newline_wherever_it_is() {
        for len in 0..40 {
            for at in 0..=len {
                let mut bytes: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
                bytes.extend([0x80, 0xff, 0x0b, 0x09]);
                let expected = (at < len).then_some(at);
                if at < len {
                    bytes[at] = b'\n';
                    bytes[len..].fill(b'\n');
                }
                assert_eq!(find_newline(&bytes), expected, "len {len} at {at}");
            }
        }
    }

    #[test]
    fn the_pre_dispatch_decodes_what_rmcp_decodes() {
        let lines: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"noop","arguments":{}}}"#,
            br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","arguments":{"n":1},"_meta":{"progressToken":3,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"b","version":"0"}}}}"#,
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"c"}}"#,
            br#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"x","arguments":null,"_meta":null,"extra":[1]}}"#,
            br#"{"params":{"requestState":"s","inputResponses":{"q":{"action":"accept"}},"name":"y","arguments":{"a":[1.5,-2,18446744073709551615,"\u00e9"]}},"method":"tools/call","id":11,"jsonrpc":"2.0"}"#,
            br#"{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"events://x"}}"#,
            // Params that do not fit: rmcp's custom request, so the handler can say what is wrong.
            br#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{}}}"#,
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"},"extra":1}"#,
            b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/list\"}",
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            br#"{"jsonrpc":"2.0","id":9,"result":{}}"#,
            // Read in the envelope's pass: escaped keys, an id in float form, fields after the params.
            br#"{"jsonrpc":"2.0","id":1e2,"method":"tools/call","p\u0061rams":{"n\u0061me":"x","arguments":{"a":"\n"}},"extra":{"result":1}}"#,
            br#"{"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"t"}},"id":"\u00e9","jsonrpc":"2.0"}"#,
        ];
        for line in lines {
            let expected = rmcp_way(line);
            assert!(expected.is_some(), "{}", String::from_utf8_lossy(line));
            assert_eq!(ours(line), expected, "{}", String::from_utf8_lossy(line));
            let unbommed = line.strip_prefix(UTF8_BOM).unwrap_or(line);
            assert_eq!(
                placed(decode(line).ok().flatten()),
                placed(rmcp_decode(unbommed).ok().flatten()),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn what_rmcp_refuses_or_takes_as_custom_the_pre_dispatch_does_too() {
        let refused: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"result":{}}"#,
            br#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"ping"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","#,
            br#"[1,2]"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":[]}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":[]}}"#,
            br#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","method":"$/lsp"}"#,
            br#"{"jsonrpc":"2.0","method":"notifications/custom"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"params":{"name":"y"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"error":{}}"#,
            br#"{"id":1,"method":"tools/call","params":{"name":"x"}}"#,
        ];
        for line in refused {
            let ours = decode(line).map(|m| m.map(|m| serde_json::to_value(m).unwrap()));
            let theirs = rmcp_decode(line).map(|m| m.map(|m| serde_json::to_value(m).unwrap()));
            assert_eq!(
                ours.as_ref().map_err(serde_json::Error::classify),
                theirs.as_ref().map_err(serde_json::Error::classify),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }
}
