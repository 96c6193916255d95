//! What the two paths that answer requests themselves, instead of through rmcp's service loop (the stdio
//! loop, [`super::stdio`], and the HTTP fast path, [`super::http`]), do alike around the handler: the
//! request's context as rmcp's loop builds it, a panic answered as an internal error, and the result as its
//! JSON-RPC answer.

use super::panic;
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientRequest, ContentBlock, ErrorCode, ErrorData,
    GetExtensions, GetMeta, JsonRpcMessage, JsonRpcResponse, RequestId, ServerResult,
};
use rmcp::service::{RequestContext, TxJsonRpcMessage};
use rmcp::{Peer, RoleServer};
use serde_json::value::RawValue;
use std::future::Future;

/// A `tools/call` answer before it is shaped for its era: rmcp's response, and beside it the result's
/// `structuredContent` as JSON text when a [`Content::Json`](crate::tool::Content::Json) block gave it
/// (the result itself then has none). The writers of the paths that answer requests themselves put that
/// text into the answer as it is ([`write_result`]); anything that hands the answer to rmcp takes
/// [`into_response`](Self::into_response), the text parsed into the result.
pub(crate) struct Called {
    pub(crate) response: Result<CallToolResponse, ErrorData>,
    pub(crate) structured: Option<Box<RawValue>>,
}

impl From<Result<CallToolResponse, ErrorData>> for Called {
    fn from(response: Result<CallToolResponse, ErrorData>) -> Self {
        Self {
            response,
            structured: None,
        }
    }
}

impl Called {
    /// rmcp's form of the answer: the structured text parsed into the result.
    pub(crate) fn into_response(self) -> Result<CallToolResponse, ErrorData> {
        match (self.response, self.structured) {
            (Ok(CallToolResponse::Complete(result)), structured @ Some(_)) => {
                Ok(super::convert::with_structured(result, structured).into())
            }
            (response, _) => response,
        }
    }
}

/// The request's context, with its `_meta` and extensions taken out of it as rmcp's loop does.
pub(crate) fn context(
    id: RequestId,
    request: &mut ClientRequest,
    peer: Peer<RoleServer>,
) -> RequestContext<RoleServer> {
    let mut context = RequestContext::new(id, peer);
    // The meta first: it is kept in the extensions, which would otherwise take it along.
    context.meta = std::mem::take(request.get_meta_mut());
    context.extensions = std::mem::take(request.extensions_mut());
    context
}

/// Runs a handler's future; a panic outside a tool handler's own guard (which answers it as a tool error)
/// is still answered, as an internal error.
pub(crate) async fn guarded<T>(
    handled: impl Future<Output = Result<T, ErrorData>>,
) -> Result<T, ErrorData> {
    panic::caught(handled)
        .await
        .unwrap_or_else(|panic| Err(panicked(&panic)))
}

/// The internal error that answers a request that panicked with `panic`.
pub(crate) fn panicked(panic: &str) -> ErrorData {
    tracing::error!(panic = %panic, "a request panicked; answered as an internal error");
    ErrorData::internal_error(
        format!("internal error (a bug in the bridge): {panic}"),
        None,
    )
}

/// The JSON-RPC answer to request `id`.
pub(crate) fn message(
    id: RequestId,
    result: Result<ServerResult, ErrorData>,
) -> TxJsonRpcMessage<RoleServer> {
    match result {
        Ok(result) => JsonRpcMessage::response(result, id),
        Err(error) => {
            tracing::debug!(%id, code = error.code.0, "answered with an error: {}", error.message);
            JsonRpcMessage::error(error, Some(id))
        }
    }
}

/// What rmcp's `handle_request` makes of `call_tool`'s answer (rmcp 3.9.0, `handler/server.rs`), for a
/// request of protocol 2026-07-28 or newer (`modern`) or an older one.
pub(crate) fn shape(
    called: Result<CallToolResponse, ErrorData>,
    modern: bool,
) -> Result<ServerResult, ErrorData> {
    match called {
        Ok(response) => {
            let mut result = ServerResult::from(response);
            if matches!(result, ServerResult::InputRequiredResult(_)) && !modern {
                Err(ErrorData::invalid_request(
                    "InputRequiredResult requires negotiated protocol version 2026-07-28 or newer",
                    None,
                ))
            } else {
                if modern {
                    result.fill_missing_cache_hints();
                } else {
                    result.strip_result_type_for_legacy_peer();
                }
                Ok(result)
            }
        }
        Err(mut error) => {
            if modern && error.code == ErrorCode::RESOURCE_NOT_FOUND {
                error.code = ErrorCode::INVALID_PARAMS;
            }
            Err(error)
        }
    }
}

/// Writes the JSON-RPC answer to `id` into `buf`, as serde writes [`message`]`(id, Ok(result))` but for
/// `structured`: when it is given and `result` is a tool result without `structuredContent` of its own,
/// that JSON text is its `structuredContent`, copied as it is (no tree parsed, serialised or freed). The
/// stdio loop and the HTTP fast path both write through here.
pub(crate) fn write_result(
    buf: &mut Vec<u8>,
    id: &RequestId,
    result: &ServerResult,
    structured: Option<&RawValue>,
) -> serde_json::Result<()> {
    // The fields of rmcp's `JsonRpcResponse`, in its order.
    buf.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    serde_json::to_writer(&mut *buf, id)?;
    buf.extend_from_slice(br#","result":"#);
    match result {
        ServerResult::CallToolResult(result) => write_call_result(buf, result, structured)?,
        result => serde_json::to_writer(&mut *buf, result)?,
    }
    buf.push(b'}');
    Ok(())
}

/// Writes a tool result as rmcp serialises it (rmcp 3.9.0, `model.rs`: the same fields, names, order and
/// omissions), with `structured` as its `structuredContent` when it has none of its own. Written by hand
/// because rmcp's derived serialiser goes through serde's tagged-enum adapter for every content block,
/// ~1.9k instructions of a no-op call's ~48k.
fn write_call_result(
    buf: &mut Vec<u8>,
    result: &CallToolResult,
    structured: Option<&RawValue>,
) -> serde_json::Result<()> {
    buf.push(b'{');
    if let Some(result_type) = &result.result_type {
        buf.extend_from_slice(br#""resultType":"#);
        serde_json::to_writer(&mut *buf, result_type)?;
        buf.push(b',');
    }
    buf.extend_from_slice(br#""content":["#);
    for (i, block) in result.content.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        write_content(buf, block)?;
    }
    buf.push(b']');
    match (&result.structured_content, structured) {
        (Some(own), _) => {
            buf.extend_from_slice(br#","structuredContent":"#);
            serde_json::to_writer(&mut *buf, own)?;
        }
        (None, Some(text)) => {
            buf.extend_from_slice(br#","structuredContent":"#);
            buf.extend_from_slice(text.get().as_bytes());
        }
        (None, None) => {}
    }
    if let Some(is_error) = result.is_error {
        buf.extend_from_slice(if is_error {
            br#","isError":true"#
        } else {
            br#","isError":false"#
        });
    }
    if let Some(meta) = &result.meta {
        buf.extend_from_slice(br#","_meta":"#);
        serde_json::to_writer(&mut *buf, meta)?;
    }
    buf.push(b'}');
    Ok(())
}

/// Writes a content block as rmcp serialises it: a text block by hand (`type` first, then the fields of
/// rmcp's `TextContent` in its order, absent ones omitted; the text escaped by serde_json as rmcp's is),
/// any other kind through rmcp's serialiser.
fn write_content(buf: &mut Vec<u8>, block: &ContentBlock) -> serde_json::Result<()> {
    match block {
        ContentBlock::Text(text) => {
            buf.extend_from_slice(br#"{"type":"text","text":"#);
            serde_json::to_writer(&mut *buf, &text.text)?;
            if let Some(meta) = &text.meta {
                buf.extend_from_slice(br#","_meta":"#);
                serde_json::to_writer(&mut *buf, meta)?;
            }
            if let Some(annotations) = &text.annotations {
                buf.extend_from_slice(br#","annotations":"#);
                serde_json::to_writer(&mut *buf, annotations)?;
            }
            buf.push(b'}');
            Ok(())
        }
        block => serde_json::to_writer(buf, block),
    }
}

/// A message to the client, with a tool result's `structuredContent` as JSON text beside it ([`Called`]).
pub(crate) struct Answer {
    pub(crate) message: TxJsonRpcMessage<RoleServer>,
    pub(crate) structured: Option<Box<RawValue>>,
}

impl From<TxJsonRpcMessage<RoleServer>> for Answer {
    fn from(message: TxJsonRpcMessage<RoleServer>) -> Self {
        Self {
            message,
            structured: None,
        }
    }
}

impl Answer {
    /// Writes the message into `buf`: a response through [`write_result`], anything else as serde writes it.
    pub(crate) fn write(&self, buf: &mut Vec<u8>) -> serde_json::Result<()> {
        match &self.message {
            JsonRpcMessage::Response(JsonRpcResponse { id, result, .. }) => {
                write_result(buf, id, result, self.structured.as_deref())
            }
            message => serde_json::to_writer(buf, message),
        }
    }
}

/// [`guarded`] for a call that answers with a [`Called`].
pub(crate) async fn guarded_call(called: impl Future<Output = Called>) -> Called {
    match guarded(async { Ok(called.await) }).await {
        Ok(called) => called,
        Err(panicked) => Err(panicked).into(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use rmcp::model::{MetaObject, ResultType};
    use serde_json::{Value, json};

    /// JSON text whose keys are in serde's order (sorted): parsed and written again it is the same bytes, so
    /// the spliced answer must equal rmcp's byte for byte.
    fn canonical() -> String {
        let value: Value = serde_json::from_str(
            r#"{"a":"h\u00e9 \"q\" \\ \n\t\u0001 ✓ 😀 ``` \"}]}","b":[0,-1,18446744073709551615,-9223372036854775808,1.5e300,0.1,1.0715660391465826e-75],"c":{"d":null,"e":true,"f":{}},"g":[]}"#,
        )
        .unwrap();
        serde_json::to_string(&value).unwrap()
    }

    /// Every field rmcp writes around `structuredContent`, present and absent: the splice writes them in its
    /// order, with its names and omissions.
    #[test]
    fn a_spliced_result_is_rmcps_answer_byte_for_byte() {
        let text = canonical();
        let id = RequestId::Number(7);
        for (result_type, is_error, meta) in [
            (None, None, None),
            (Some(ResultType::COMPLETE), Some(false), None),
            (None, Some(true), Some(json!({"k": "v"}))),
            (Some(ResultType::COMPLETE), None, Some(json!({"x": [1]}))),
        ] {
            let mut result = CallToolResult::success(vec![ContentBlock::text(text.clone())]);
            result.result_type = result_type;
            result.is_error = is_error;
            result.meta = meta.map(|m| match m {
                Value::Object(m) => MetaObject(m),
                _ => unreachable!(),
            });
            let mut with_value = result.clone();
            with_value.structured_content = Some(serde_json::from_str(&text).unwrap());
            let expected = serde_json::to_vec(&message(
                id.clone(),
                Ok(ServerResult::CallToolResult(with_value)),
            ))
            .unwrap();
            let raw = RawValue::from_string(text.clone()).unwrap();
            let result = ServerResult::CallToolResult(result);
            let mut spliced = Vec::new();
            write_result(&mut spliced, &id, &result, Some(&raw)).unwrap();
            assert_eq!(
                String::from_utf8(spliced).unwrap(),
                String::from_utf8(expected.clone()).unwrap()
            );
            let mut answer = Vec::new();
            Answer {
                message: message(id.clone(), Ok(result)),
                structured: Some(raw),
            }
            .write(&mut answer)
            .unwrap();
            assert_eq!(answer, expected, "through Answer::write");
        }
    }

    /// Keys in another order than serde's (an event page's own) still give the same JSON; and a result that
    /// has `structuredContent` of its own keeps it.
    #[test]
    fn a_spliced_result_equals_rmcps_as_json_whatever_the_key_order() {
        let text =
            r#"{"stream":"s","events":[{"seq":1,"data":{"z":1,"a":"\u00e9"}}],"more":false}"#;
        let id = RequestId::String("x".into());
        let raw = RawValue::from_string(text.to_owned()).unwrap();
        let result = CallToolResult::success(vec![ContentBlock::text(text)]);
        let mut spliced = Vec::new();
        write_result(
            &mut spliced,
            &id,
            &ServerResult::CallToolResult(result.clone()),
            Some(&raw),
        )
        .unwrap();
        let mut with_value = result.clone();
        with_value.structured_content = Some(serde_json::from_str(text).unwrap());
        let expected = serde_json::to_value(message(
            id.clone(),
            Ok(ServerResult::CallToolResult(with_value.clone())),
        ))
        .unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&spliced).unwrap(), expected);
        let mut own = Vec::new();
        write_result(
            &mut own,
            &id,
            &ServerResult::CallToolResult(with_value.clone()),
            Some(&RawValue::from_string("[1]".into()).unwrap()),
        )
        .unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&own).unwrap(), expected);
        let called = Called {
            response: Ok(result.into()),
            structured: Some(raw),
        };
        match called.into_response().unwrap() {
            CallToolResponse::Complete(parsed) => assert_eq!(parsed, with_value),
            other => panic!("{other:?}"),
        }
    }

    /// The hand-written content writer against rmcp's serialiser: text that needs escaping (quotes,
    /// backslashes, control characters, U+2028/U+2029, non-ASCII, empty), a text block's `_meta` and
    /// annotations, several blocks, and blocks of the kinds written through rmcp's serialiser.
    #[test]
    fn a_written_result_is_rmcps_answer_byte_for_byte() {
        let texts = [
            String::new(),
            "plain".to_owned(),
            r#"say "hi" \ / back\slash"#.to_owned(),
            "\u{0}\u{1}\u{8}\u{9}\n\u{b}\u{c}\r\u{1f}\u{7f}".to_owned(),
            "h\u{e9} \u{2713} \u{1f600} \u{2028} \u{2029} \u{feff}".to_owned(),
            "{\"structured\":[1,2.5,null]}".to_owned(),
        ];
        let block = |value: Value| -> ContentBlock { serde_json::from_value(value).unwrap() };
        let mut contents: Vec<Vec<ContentBlock>> = texts
            .iter()
            .map(|text| vec![ContentBlock::text(text.clone())])
            .collect();
        contents.push(Vec::new());
        contents.push(vec![
            block(json!({"type": "text", "text": "with meta", "_meta": {"k": "v\u{2028}", "n": [1]}})),
            block(json!({"type": "text", "text": "annotated",
                "annotations": {"audience": ["user", "assistant"], "priority": 0.5, "lastModified": "2026-01-02T03:04:05Z"}})),
            block(json!({"type": "text", "text": "both", "_meta": {}, "annotations": {"priority": 1.0}})),
            block(json!({"type": "image", "data": "aGk=", "mimeType": "image/png"})),
            block(json!({"type": "audio", "data": "aGk=", "mimeType": "audio/wav", "annotations": {"priority": 0.25}})),
            block(json!({"type": "resource_link", "uri": "file:///a\"b", "name": "a"})),
            block(json!({"type": "resource", "resource": {"uri": "mem://x", "text": "t\u{2028}"}})),
            ContentBlock::text("last"),
        ]);
        let id = RequestId::String("r\"1".into());
        for content in contents {
            for (result_type, structured, is_error, meta) in [
                (None, None, None, None),
                (
                    Some(ResultType::COMPLETE),
                    Some(json!({"a": "\u{2028}"})),
                    Some(true),
                    Some(json!({"m": 1})),
                ),
                (
                    Some(ResultType::COMPLETE),
                    Some(Value::Null),
                    Some(false),
                    None,
                ),
            ] {
                let mut result = CallToolResult::success(content.clone());
                result.result_type = result_type;
                result.structured_content = structured;
                result.is_error = is_error;
                result.meta = meta.map(|m| match m {
                    Value::Object(m) => MetaObject(m),
                    _ => unreachable!(),
                });
                let result = ServerResult::CallToolResult(result);
                let expected =
                    serde_json::to_vec(&message(id.clone(), Ok(result.clone()))).unwrap();
                let mut written = Vec::new();
                write_result(&mut written, &id, &result, None).unwrap();
                assert_eq!(
                    String::from_utf8(written).unwrap(),
                    String::from_utf8(expected).unwrap()
                );
            }
        }
    }
}
