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

mod scan;

use super::handler::CallMeta;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ErrorData, InputResponses, JsonObject,
    JsonRpcMessage, JsonRpcRequest, JsonRpcVersion2_0, ListToolsRequest, NumberOrString,
    PingRequest, ProgressToken, ProtocolVersion, ReadResourceRequest, RequestId, RequestMetaObject,
    ServerResult,
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
pub(crate) const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Decodes one line (without its newline) as rmcp's stdio transport would: `Ok(None)` for a message rmcp
/// ignores (a notification outside MCP), `Err` for one it rejects.
#[cfg(test)]
pub(crate) fn decode(
    line: &[u8],
) -> Result<Option<RxJsonRpcMessage<RoleServer>>, serde_json::Error> {
    Ok(decode_line(line, false)?.map(Decoded::into_message))
}

/// One message as [`decode`] reads it, a `tools/call` read apart with its `_meta` read lean where it can be
/// ([`Decoded::Call`]): for the HTTP fast path, whose `tools/call` never reaches rmcp's dispatch.
pub(crate) fn decode_calls(body: &[u8]) -> Result<Option<Decoded>, serde_json::Error> {
    decode_line(body, true)
}

/// A line as [`decode`] reads it; with `lean`, a `tools/call` whose params were read in the envelope's pass
/// comes as [`Decoded::Call`], its `_meta` read straight into the [`CallMeta`] the loop's checks and
/// `begin_tool` read, without rmcp's map (built, read five times and dropped: about a third of a 2026-07-28
/// no-op call's instructions) unless `_meta` holds something unusual ([`Lean`]).
fn decode_line(line: &[u8], lean: bool) -> Result<Option<Decoded>, serde_json::Error> {
    let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
    // Read as text, checked once: read as bytes, serde_json checks each string it meets again (9 a call). A
    // line that is not UTF-8 takes rmcp's decoding, which says so as it did.
    if let Ok(text) = std::str::from_utf8(line) {
        if lean && let Some(call) = scan::tools_call(text) {
            return Ok(Some(Decoded::Call(call)));
        }
        if let Some(decoded) = pre_dispatch(text, lean) {
            return Ok(Some(decoded));
        }
    }
    Ok(rmcp_decode(line)?.map(Decoded::Message))
}

/// A decoded line: a message as rmcp decodes it, or a `tools/call` taken apart for the stdio loop.
// One per line, moved straight into its handling: boxing would cost an allocation per call.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Decoded {
    Message(RxJsonRpcMessage<RoleServer>),
    Call(Call),
}

/// A `tools/call` as the stdio loop runs it: `map` is rmcp's `_meta` (what the request's context holds),
/// `None` when there was none or `meta` was read without it.
pub(crate) struct Call {
    pub id: RequestId,
    pub params: CallToolRequestParams,
    /// `None`: no `_meta`. Boxed: it is moved with the line's envelope and message several times, each a
    /// copy of its capabilities.
    pub meta: Option<Box<CallMeta>>,
    pub map: Option<RequestMetaObject>,
}

impl Decoded {
    /// The message rmcp would have decoded. Only for a `Call` read with its map (`lean` off): a lean
    /// one's `_meta` was not kept.
    #[cfg(test)]
    fn into_message(self) -> RxJsonRpcMessage<RoleServer> {
        match self {
            Decoded::Message(message) => message,
            Decoded::Call(call) => call.into_message(),
        }
    }
}

impl Call {
    /// The request rmcp would have decoded: `_meta` where rmcp puts it (the request's extensions, not the
    /// params).
    pub(crate) fn into_message(self) -> RxJsonRpcMessage<RoleServer> {
        let mut request = CallToolRequest::new(self.params);
        if let Some(map) = self.map {
            request.extensions.insert(map);
        }
        JsonRpcMessage::Request(JsonRpcRequest::new(
            self.id,
            ClientRequest::CallToolRequest(request),
        ))
    }
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
///
/// `M` reads `_meta`: rmcp's map ([`JsonObject`]), or the lean view ([`Lean`]), which fails on anything
/// unusual so the line is read again with the map.
struct Envelope<M> {
    jsonrpc: bool,
    id: Option<RequestId>,
    method: Option<Method>,
    params: bool,
    call: Option<CallParams<M>>,
    /// `result` or `error` present: not a request.
    answer: bool,
}

impl<'de, M: Deserialize<'de>> Deserialize<'de> for Envelope<M> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EnvelopeVisitor(std::marker::PhantomData))
    }
}

struct EnvelopeVisitor<M>(std::marker::PhantomData<M>);

impl<'de, M: Deserialize<'de>> serde::de::Visitor<'de> for EnvelopeVisitor<M> {
    type Value = Envelope<M>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Envelope<M>, A::Error> {
        use serde::de::{Error, IgnoredAny};
        let mut e = Envelope {
            jsonrpc: false,
            id: None,
            method: None,
            params: false,
            call: None,
            answer: false,
        };
        while let Some(Text(key)) = map.next_key()? {
            match &*key {
                // rmcp's `JsonRpcVersion2_0` reads a `String` and compares it.
                "jsonrpc" if !e.jsonrpc => {
                    if map.next_value::<Text<'de>>()?.0 != "2.0" {
                        return Err(A::Error::custom("expect const string value \"2.0\""));
                    }
                    e.jsonrpc = true;
                }
                "id" if e.id.is_none() => e.id = Some(map.next_value::<Id>()?.0),
                "method" if e.method.is_none() => {
                    let Text(method) = map.next_value()?;
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
fn pre_dispatch(line: &str, lean: bool) -> Option<Decoded> {
    if lean {
        // A line the lean view cannot read (an unusual `_meta`, or one rmcp refuses) is read again.
        if let Ok(envelope) = serde_json::from_str::<Envelope<Lean>>(line) {
            return dispatch(line, envelope, true);
        }
    }
    dispatch(
        line,
        serde_json::from_str::<Envelope<JsonObject>>(line).ok()?,
        lean,
    )
}

fn dispatch<M: MetaRead>(line: &str, envelope: Envelope<M>, lean: bool) -> Option<Decoded> {
    // Only rmcp's request shape: `method` and `id`, no `result` or `error`.
    if !envelope.jsonrpc || envelope.answer {
        return None;
    }
    let id = envelope.id?;
    match envelope.method? {
        Method::ToolsCall => match envelope.call {
            Some(params) => Some(call(id, params, lean)),
            // `params` before `method`, or none: the line again, as a whole.
            None => tool_call::<M>(line, lean),
        },
        Method::ToolsList => direct::<ListToolsRequest>(line, ClientRequest::ListToolsRequest),
        Method::ResourcesRead => {
            direct::<ReadResourceRequest>(line, ClientRequest::ReadResourceRequest)
        }
        Method::Ping => direct::<PingRequest>(line, ClientRequest::PingRequest),
        Method::Other => None,
    }
    .map(|decoded| match decoded {
        // Lean or not, a call is the same message to rmcp: only the loop reads it apart.
        Decoded::Call(call) if !lean => Decoded::Message(call.into_message()),
        decoded => decoded,
    })
}

fn direct<R: DeserializeOwned>(line: &str, wrap: fn(R) -> ClientRequest) -> Option<Decoded> {
    let request: JsonRpcRequest<R> = serde_json::from_str(line).ok()?;
    Some(Decoded::Message(JsonRpcMessage::Request(
        JsonRpcRequest::new(request.id, wrap(request.request)),
    )))
}

/// `tools/call`'s params: `CallToolRequestParams`' own fields, read without serde's `flatten` (`JsonRpcRequest`
/// flattens the request and the request flattens its params beside `_meta`, so serde would buffer the line
/// twice before the params are read).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallParams<M> {
    #[serde(rename = "_meta", default = "none")]
    meta: Option<M>,
    name: Cow<'static, str>,
    #[serde(default)]
    arguments: Option<JsonObject>,
    #[serde(default)]
    input_responses: Option<InputResponses>,
    #[serde(default)]
    request_state: Option<String>,
}

/// `tools/call` as a whole line, when its params could not be read in the envelope's pass.
fn none<M>() -> Option<M> {
    None
}

fn tool_call<M: MetaRead>(line: &str, lean: bool) -> Option<Decoded> {
    #[derive(Deserialize)]
    struct Line<M> {
        #[allow(dead_code)]
        jsonrpc: JsonRpcVersion2_0,
        id: RequestId,
        params: CallParams<M>,
    }
    let decoded: Line<M> = serde_json::from_str(line).ok()?;
    Some(call(decoded.id, decoded.params, lean))
}

/// The call, with `_meta` as `M` read it.
fn call<M: MetaRead>(id: RequestId, decoded: CallParams<M>, lean: bool) -> Decoded {
    let mut params = CallToolRequestParams::new(decoded.name);
    params.arguments = decoded.arguments;
    params.input_responses = decoded.input_responses;
    params.request_state = decoded.request_state;
    let (meta, map) = M::split(decoded.meta, lean);
    Decoded::Call(Call {
        id,
        params,
        meta,
        map,
    })
}

/// What reads `_meta` in the envelope's pass.
trait MetaRead: for<'de> Deserialize<'de> {
    /// The view the loop reads and rmcp's map, from `_meta` as read (`None`: absent or `null`). The view
    /// is only read (and so only made) when `lean`.
    fn split(meta: Option<Self>, lean: bool) -> (Option<Box<CallMeta>>, Option<RequestMetaObject>);
}

impl MetaRead for JsonObject {
    fn split(meta: Option<Self>, lean: bool) -> (Option<Box<CallMeta>>, Option<RequestMetaObject>) {
        let map = meta.map(RequestMetaObject::from);
        let view = match &map {
            Some(map) if lean => Some(Box::new(CallMeta::from_map(map))),
            _ => None,
        };
        (view, map)
    }
}

impl MetaRead for Lean {
    fn split(
        meta: Option<Self>,
        _lean: bool,
    ) -> (Option<Box<CallMeta>>, Option<RequestMetaObject>) {
        (meta.map(|lean| lean.0), None)
    }
}

/// `_meta` read straight into its typed view, when it holds only the keys a client usually sends (the
/// progress token, the 2026-07-28 protocol version, client capabilities and info, log level), each once and
/// well formed: then every accessor of rmcp's map would return what is read here. Anything else (an unknown
/// or repeated key, `null`, a value of the wrong shape, our result cap) fails, and the line is read with
/// the map.
struct Lean(Box<CallMeta>);

impl<'de> Deserialize<'de> for Lean {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(LeanVisitor)
    }
}

struct LeanVisitor;

impl<'de> serde::de::Visitor<'de> for LeanVisitor {
    type Value = Lean;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a request's _meta")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Lean, A::Error> {
        use serde::de::{Error, IgnoredAny};
        let mut meta = Box::<CallMeta>::default();
        let mut info = false;
        while let Some(Text(key)) = map.next_key()? {
            match &*key {
                "progressToken" if meta.progress.is_none() => {
                    meta.progress = Some(ProgressToken(map.next_value::<Id>()?.0));
                }
                "io.modelcontextprotocol/protocolVersion" if meta.version.is_none() => {
                    let Text(version) = map.next_value()?;
                    meta.version = Some(protocol_version(version).map_err(A::Error::custom)?);
                }
                "io.modelcontextprotocol/clientCapabilities" if meta.capabilities.is_none() => {
                    meta.capabilities = Some(map.next_value()?);
                }
                "io.modelcontextprotocol/logLevel" if meta.log_level.is_none() => {
                    meta.log_level = Some(map.next_value()?);
                }
                // Read by nothing on a call's path; rmcp's map would hold it unread.
                "io.modelcontextprotocol/clientInfo" if !info => {
                    map.next_value::<IgnoredAny>()?;
                    info = true;
                }
                _ => return Err(A::Error::custom("not a lean _meta")),
            }
        }
        Ok(Lean(meta))
    }
}

/// A protocol version as rmcp's `Deserialize` reads it, without the `String` it makes first for a version it
/// knows (what every client sends).
fn protocol_version(text: Cow<'_, str>) -> Result<ProtocolVersion, serde::de::value::Error> {
    use serde::de::IntoDeserializer;
    // What every 2026-07-28 request carries, compared first.
    if text == ProtocolVersion::V_2026_07_28.as_str() {
        return Ok(ProtocolVersion::V_2026_07_28);
    }
    if let Some(known) = ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28)
        .iter()
        .find(|known| known.as_str() == text)
    {
        return Ok(known.clone());
    }
    ProtocolVersion::deserialize(text.into_owned().into_deserializer())
}

/// A string, borrowed from the line when it holds no escape. `Cow<str>`'s own `Deserialize` always makes a
/// `String` (serde borrows only under a derive's `#[serde(borrow)]`): an allocation for every key and
/// method read, eight a `tools/call`.
struct Text<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> serde::de::Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Borrowed(v)))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Owned(v)))
    }
}

/// A request id or progress token as rmcp's `NumberOrString` reads it, without the `serde_json::Value` it
/// reads first: an integer (in float form too, when exact), or a string; anything else fails, and the line
/// is read rmcp's way.
struct Id(NumberOrString);

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(IdVisitor)
    }
}

struct IdVisitor;

impl<'de> serde::de::Visitor<'de> for IdVisitor {
    type Value = Id;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a number or a string")
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Id, E> {
        Ok(Id(NumberOrString::Number(v)))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Id, E> {
        i64::try_from(v)
            .map(|v| Id(NumberOrString::Number(v)))
            .map_err(|_| E::custom("Number too large for i64"))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Id, E> {
        // rmcp's `integral_f64_to_i64`: 2^53 itself is excluded, as 2^53 + 1 reads as the same `f64`.
        const MAX_EXACT: f64 = 9_007_199_254_740_992.0;
        if v.fract() == 0.0 && v.abs() < MAX_EXACT {
            return Ok(Id(NumberOrString::Number(v as i64)));
        }
        Err(E::custom("Expected an integer"))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Id, E> {
        Ok(Id(NumberOrString::String(v.into())))
    }
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
    /// Cancelled when a write failed: the client closed its end of the stream, and nothing written reaches it.
    broken: tokio_util::sync::CancellationToken,
}

impl<W: AsyncWrite + Send + Unpin + 'static> Out<W> {
    pub(crate) fn new(write: W) -> Self {
        Self {
            queued: Mutex::new(Vec::new()),
            writer: tokio::sync::Mutex::new(Some((write, Vec::new()))),
            broken: tokio_util::sync::CancellationToken::new(),
        }
    }

    /// Cancelled once a write failed (see [`Out::broken`]'s field).
    pub(crate) fn broken(&self) -> &tokio_util::sync::CancellationToken {
        &self.broken
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
        let written = match written {
            Ok(()) => write.flush().await,
            Err(e) => Err(e),
        };
        if written.is_err() {
            self.broken.cancel();
        }
        written
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
    /// A `tools/call` read apart ([`LineReader::lean_calls`]).
    Call(Call),
    /// JSON, but no JSON-RPC message: answered with why, and the request's id where it could be read.
    Invalid(super::invalid::Diagnosis),
    /// The end of the stream, or a read error.
    End,
}

/// Newline-delimited JSON-RPC read from a byte stream, lines bounded as rmcp bounds them.
pub(crate) struct LineReader<R> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// Dropping the rest of an oversize line, until its newline.
    discarding: bool,
    /// An oversize line's first and last bytes, for its request's id ([`super::unreadable`]).
    head: Vec<u8>,
    tail: Vec<u8>,
    /// `tools/call` comes as [`Incoming::Call`].
    lean: bool,
}

impl<R: AsyncRead + Send + Unpin + 'static> LineReader<R> {
    pub(crate) fn new(read: R) -> Self {
        Self {
            read: BufReader::new(read),
            line: Vec::new(),
            discarding: false,
            head: Vec::new(),
            tail: Vec::new(),
            lean: false,
        }
    }

    /// From now on a `tools/call` read in the envelope's pass comes as [`Incoming::Call`], its `_meta` read
    /// lean where it can be: for the loop once rmcp has its session, when every call is the loop's.
    pub(crate) fn lean_calls(&mut self) {
        self.lean = true;
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
                    let id = super::unreadable::request_id(&self.head, &self.tail);
                    self.head.clear();
                    self.tail.clear();
                    if let Some(id) = id {
                        return Incoming::Invalid(super::invalid::Diagnosis {
                            code: rmcp::model::ErrorCode::INVALID_REQUEST,
                            id: Some(id),
                            message: format!(
                                "the request's line is longer than {MAX_LINE} bytes, the most this server reads \
                                 on stdio: it was not read (send less at once: files in pages, code in a file)"
                            ),
                        });
                    }
                    continue;
                }
            }
            let line = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let decoded = if line.is_empty() {
                Ok(None)
            } else {
                decode_line(line, self.lean)
            };
            let incoming = match decoded {
                Ok(None) => None,
                Ok(Some(Decoded::Message(message))) => Some(Incoming::Message(message)),
                Ok(Some(Decoded::Call(call))) => Some(Incoming::Call(call)),
                Err(e) => match e.classify() {
                    // Not JSON: no id to answer, and answering garbage can start an error storm (rmcp #938).
                    // A request whose id can still be read (a lone surrogate, nesting past the limit, a
                    // syntax error inside its params) is answered, or its caller would wait for good.
                    serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                        match super::unreadable::request_id(line, line) {
                            Some(id) => {
                                let mut diagnosis = super::invalid::diagnose(line);
                                diagnosis.id = Some(id);
                                Some(Incoming::Invalid(diagnosis))
                            }
                            None => {
                                tracing::debug!("Ignoring unparsable incoming message: {e}");
                                None
                            }
                        }
                    }
                    serde_json::error::Category::Data | serde_json::error::Category::Io => {
                        tracing::debug!("Protocol error on incoming message: {e}");
                        Some(Incoming::Invalid(super::invalid::diagnose(line)))
                    }
                },
            };
            self.line.clear();
            if let Some(incoming) = incoming {
                return incoming;
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
                keep_last(&mut self.tail, &available[..take]);
                if newline.is_some() {
                    self.discarding = false;
                    end = Some(LineEnd::Oversize);
                }
            } else if self.line.len().saturating_add(take) > MAX_LINE {
                let kept = super::unreadable::KEPT_BYTES;
                self.head.clear();
                self.head
                    .extend_from_slice(&self.line[..self.line.len().min(kept)]);
                let more = kept - self.head.len();
                self.head.extend_from_slice(&available[..take.min(more)]);
                self.tail.clear();
                keep_last(&mut self.tail, &self.line);
                keep_last(&mut self.tail, &available[..take]);
                self.line.clear();
                // Answered once its end is in: the end may hold its id.
                if newline.is_some() {
                    end = Some(LineEnd::Oversize);
                } else {
                    self.discarding = true;
                }
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

/// `bytes` appended to `kept`, of which only the last [`super::unreadable::KEPT_BYTES`] stay.
fn keep_last(kept: &mut Vec<u8>, bytes: &[u8]) {
    let max = super::unreadable::KEPT_BYTES;
    let bytes = &bytes[bytes.len().saturating_sub(max)..];
    let drop = (kept.len() + bytes.len()).saturating_sub(max);
    kept.drain(..drop.min(kept.len()));
    kept.extend_from_slice(bytes);
}

/// The first `\n` in `bytes`.
fn find_newline(bytes: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', bytes)
}

enum LineEnd {
    Line,
    Oversize,
}

/// The answer to a line that was JSON but no JSON-RPC message.
pub(crate) fn invalid_request(
    diagnosis: super::invalid::Diagnosis,
) -> TxJsonRpcMessage<RoleServer> {
    let super::invalid::Diagnosis { code, id, message } = diagnosis;
    JsonRpcMessage::error(ErrorData::new(code, message, None), id)
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

    /// A `tools/call` read apart for the loop (`lean`): its params are rmcp's, and its view of `_meta` is
    /// what rmcp's accessors read from rmcp's map.
    fn lean_call_is_rmcps(line: &[u8]) {
        let Ok(Some(Decoded::Call(call))) = decode_line(line, true) else {
            return;
        };
        let unbommed = line.strip_prefix(UTF8_BOM).unwrap_or(line);
        let Some(JsonRpcMessage::Request(mut request)) = rmcp_decode(unbommed).unwrap() else {
            panic!("{}", String::from_utf8_lossy(line));
        };
        assert_eq!(call.id, request.id);
        let ClientRequest::CallToolRequest(theirs) = &mut request.request else {
            panic!("{}", String::from_utf8_lossy(line));
        };
        assert_eq!(format!("{:?}", call.params), format!("{:?}", theirs.params));
        let map = theirs
            .extensions
            .remove::<RequestMetaObject>()
            .unwrap_or_default();
        let view = call.meta.map(|m| *m).unwrap_or_default();
        assert_eq!(
            format!("{view:?}"),
            format!("{:?}", CallMeta::from_map(&map)),
            "{}",
            String::from_utf8_lossy(line)
        );
        if let Some(ours) = call.map {
            assert_eq!(ours, map);
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
            // `_meta` read lean, and unusual ones read into the map on a second pass.
            br#"{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"_meta":{"progr\u0065ssToken":2,"io.modelcontextprotocol/logLevel":"info"},"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":2,"other":{"a":1}}}}"#,
            br#"{"jsonrpc":"2.0","id":22,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/clientCapabilities":null,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
            br#"{"jsonrpc":"2.0","id":23,"method":"tools/call","params":{"name":"x","_meta":{"io.github.mcp-bridges/maxResultBytes":2048}}}"#,
            br#"{"params":{"name":"x","_meta":{"progressToken":3}},"jsonrpc":"2.0","id":24,"method":"tools/call"}"#,
            br#"{"params":{"name":"x","_meta":{"progressToken":3,"x":0}},"jsonrpc":"2.0","id":25,"method":"tools/call"}"#,
            // Ids and versions read without a `Value` or a `String`: every form rmcp's `NumberOrString`
            // reads, and an escaped `jsonrpc`, key and method.
            br#"{"jsonrpc":"2.0","id":-5,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":-2.5e1,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":9007199254740991.0,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":9223372036854775807,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":"","method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":"a\"b\u00e9","method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2\u002e0","\u0069d":26,"method":"tools\/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":27,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":-1.0e0}}}"#,
            br#"{"jsonrpc":"2.0","id":28,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"t\u00e9\n"}}}"#,
            br#"{"jsonrpc":"2.0","id":29,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":9223372036854775807}}}"#,
        ];
        for line in lines {
            lean_call_is_rmcps(line);
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

    /// `_meta` read lean is what rmcp's accessors read from its map, field by field; anything unusual is
    /// left to the map.
    #[test]
    fn a_lean_meta_reads_what_rmcps_map_reads_and_the_unusual_takes_the_map() {
        let v = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28""#;
        let c = r#""io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"tasks":{"requests":{"tools":{"call":{}}}}}"#;
        let i = r#""io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"}"#;
        let rows: &[(String, bool)] = &[
            ("{}".into(), true),
            (format!("{{{v},{c},{i}}}"), true),
            (
                format!(
                    r#"{{"progressToken":7,{v},{c},{i},"io.modelcontextprotocol/logLevel":"debug"}}"#
                ),
                true,
            ),
            (
                r#"{"progressToken":"p","progress\u0054oken2":1}"#.into(),
                false,
            ),
            (r#"{"progress\u0054oken":"p"}"#.into(), true),
            (format!("{{{c}}}"), true),
            (format!("{{{v}}}"), true),
            (
                format!(r#"{{"io.modelcontextprotocol/clientInfo":"not an object",{v},{c}}}"#),
                true,
            ),
            (r#"{"progressToken":1,"progressToken":2}"#.into(), false),
            (r#"{"progressToken":null}"#.into(), false),
            (r#"{"progressToken":1.5}"#.into(), false),
            (r#"{"progressToken":1.0}"#.into(), true),
            (r#"{"progressToken":-7}"#.into(), true),
            (r#"{"progressToken":"a\"\u00e9"}"#.into(), true),
            (r#"{"progressToken":""}"#.into(), true),
            (r#"{"progressToken":9223372036854775808}"#.into(), false),
            (r#"{"progressToken":9007199254740992.0}"#.into(), false),
            (r#"{"progressToken":true}"#.into(), false),
            (r#"{"progressToken":[]}"#.into(), false),
            (
                r#"{"io.modelcontextprotocol/protocolVersion":5}"#.into(),
                false,
            ),
            (
                r#"{"io.modelcontextprotocol/protocolVersion":null}"#.into(),
                false,
            ),
            (
                r#"{"io.modelcontextprotocol/clientCapabilities":null}"#.into(),
                false,
            ),
            (
                r#"{"io.modelcontextprotocol/clientCapabilities":[]}"#.into(),
                false,
            ),
            (
                r#"{"io.modelcontextprotocol/logLevel":"loud"}"#.into(),
                false,
            ),
            (
                r#"{"io.github.mcp-bridges/maxResultBytes":100000}"#.into(),
                false,
            ),
            (
                r#"{"io.github.mcp-bridges/maxResultBytes":"big"}"#.into(),
                false,
            ),
            (r#"{"x-unknown":1}"#.into(), false),
            (format!("{{{v},{v}}}"), false),
            // Versions rmcp knows are read without a `String`; others as rmcp reads them.
            (
                r#"{"io.modelcontextprotocol/protocolVersion":"2025-06-18"}"#.into(),
                true,
            ),
            (
                r#"{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}"#.into(),
                true,
            ),
            (
                r#"{"io.modelcontextprotocol/protocolVersion":"2026\u002d07-28"}"#.into(),
                true,
            ),
            (
                r#"{"io.modelcontextprotocol/protocolVersion":""}"#.into(),
                true,
            ),
        ];
        for (text, lean) in rows {
            let map = RequestMetaObject::from(serde_json::from_str::<JsonObject>(text).unwrap());
            let from_map = format!("{:?}", CallMeta::from_map(&map));
            match serde_json::from_str::<Lean>(text).ok().map(|lean| *lean.0) {
                Some(meta) => {
                    assert!(lean, "read lean: {text}");
                    assert_eq!(format!("{meta:?}"), from_map, "{text}");
                }
                None => assert!(!lean, "not read lean: {text}"),
            }
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
            // What rmcp's `NumberOrString` and `JsonRpcVersion2_0` refuse.
            br#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":9007199254740992.0,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":true,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":2,"id":1,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.00","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":5,"params":{"name":"x"}}"#,
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
