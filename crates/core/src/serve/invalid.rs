//! Why a message rmcp could not read is no JSON-RPC message, for the error it is answered with: the field at
//! fault and what it must be, and the request's id when it could be read. A bare "Invalid request" with a null
//! id leaves a client library unable to say which of its calls failed, or why.
//!
//! Only ever run on a message already refused, so its cost (the message parsed again, twice) is no call's.

use crate::text::shorten_middle;
use rmcp::model::{ErrorCode, RequestId};
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

/// serde_json's nesting limit: a message nested deeper does not parse.
const MAX_DEPTH: usize = 128;
/// The most characters of a value or a path an explanation quotes.
const MAX_QUOTED_CHARS: usize = 120;
/// The keys whose duplicates rmcp refuses.
const ENVELOPE_KEYS: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];

/// The answer to a refused message.
#[derive(Debug)]
pub(crate) struct Diagnosis {
    /// `PARSE_ERROR` for a message that is not JSON, `INVALID_REQUEST` for JSON that is no JSON-RPC message.
    pub code: ErrorCode,
    /// The id of a request whose `id` and `method` could be read; `None` for anything else, a response
    /// above all: answering a peer's response with an error for its own id is how error storms start.
    pub id: Option<RequestId>,
    pub message: String,
}

impl Diagnosis {
    /// The id as JSON (`null` when none was read), as an HTTP answer writes it.
    pub(crate) fn id_json(&self) -> Value {
        self.id
            .as_ref()
            .and_then(|id| serde_json::to_value(id).ok())
            .unwrap_or(Value::Null)
    }

    fn parse_error(message: String) -> Self {
        Self {
            code: ErrorCode::PARSE_ERROR,
            id: None,
            message: format!("parse error: {message}"),
        }
    }
}

/// Why `message` (one line, or one HTTP body) is not a JSON-RPC message rmcp takes.
pub(crate) fn diagnose(message: &[u8]) -> Diagnosis {
    let message = message
        .strip_prefix(super::wire::UTF8_BOM)
        .unwrap_or(message);
    let mut reader = serde_json::Deserializer::from_slice(message);
    let value: Value = match serde_path_to_error::deserialize(&mut reader) {
        Ok(value) => value,
        Err(e) => return not_json(message, &e),
    };
    // Text after the value makes the whole message no JSON: nothing read from it (an id above all) is used.
    if let Err(e) = reader.end() {
        return Diagnosis::parse_error(format!(
            "the message is not JSON: {e} (one JSON-RPC message at a time, nothing after it)"
        ));
    }
    let Value::Object(object) = value else {
        return invalid(None, not_an_object(&value));
    };
    let duplicate = duplicate_key(message);
    // Which of two ids a client meant is anyone's guess.
    let id = request_id(&object).filter(|_| duplicate.is_none());
    let problem = duplicate
        .map(|key| format!("`{key}` appears more than once"))
        .or_else(|| envelope_problem(&object))
        .unwrap_or_else(|| {
            "the message is JSON but not a JSON-RPC 2.0 request, notification or response"
                .to_owned()
        });
    invalid(id, problem)
}

fn invalid(id: Option<RequestId>, problem: String) -> Diagnosis {
    Diagnosis {
        code: ErrorCode::INVALID_REQUEST,
        id,
        message: format!("invalid request: {problem}"),
    }
}

/// The explanation of a parse failure, with where it happened.
fn not_json(message: &[u8], e: &serde_path_to_error::Error<serde_json::Error>) -> Diagnosis {
    let path = e.path().to_string();
    let at = if path == "." {
        String::new()
    } else {
        format!(" in `{}`", shorten_middle(&path, MAX_QUOTED_CHARS))
    };
    let inner = e.inner();
    // Not UTF-8 is the fault only where serde stopped at the bad byte or after it: a syntax error before it
    // is what the reader met first.
    if let Err(utf8) = std::str::from_utf8(message)
        && offset(message, inner.line(), inner.column()) >= utf8.valid_up_to()
    {
        return Diagnosis::parse_error(format!(
            "the message is not UTF-8: byte {} starts an invalid sequence{at}",
            utf8.valid_up_to()
        ));
    }
    let text = inner.to_string();
    if text.starts_with("recursion limit exceeded") {
        return Diagnosis::parse_error(format!(
            "the message is nested deeper than {MAX_DEPTH} levels, the most this server reads{at} (line {}, \
             column {})",
            inner.line(),
            inner.column()
        ));
    }
    // serde_json calls a lone surrogate (`"\ud800"`) "unexpected end of hex escape": it wanted the pair's second half.
    if text.contains("hex escape") || text.contains("surrogate") {
        return Diagnosis::parse_error(format!(
            "the message is not JSON: a string holds a lone UTF-16 surrogate or a cut-short `\\u` escape{at} \
             (line {}, column {})",
            inner.line(),
            inner.column()
        ));
    }
    Diagnosis::parse_error(format!("the message is not JSON: {text}{at}"))
}

/// The byte offset of serde_json's 1-based line and column (a column counts bytes).
fn offset(message: &[u8], line: usize, column: usize) -> usize {
    let line_start = if line <= 1 {
        0
    } else {
        message
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(line - 2)
            .map_or(message.len(), |(i, _)| i + 1)
    };
    (line_start + column).saturating_sub(1)
}

fn not_an_object(value: &Value) -> String {
    match value {
        Value::Array(_) => "a JSON array: MCP takes one message at a time, not a batch".to_owned(),
        other => format!("a JSON-RPC message is a JSON object, not {}", kind(other)),
    }
}

/// The first problem with the envelope's fields, in the order a reader would fix them.
fn envelope_problem(object: &Map<String, Value>) -> Option<String> {
    match object.get("jsonrpc") {
        None => {
            return Some(
                "`jsonrpc` is missing: every message has `\"jsonrpc\": \"2.0\"`".to_owned(),
            );
        }
        Some(Value::String(version)) if version == "2.0" => {}
        Some(other) => return Some(format!("`jsonrpc` must be \"2.0\", not {}", quote(other))),
    }
    if let Some(id) = object.get("id")
        && !is_id(id)
    {
        let problem = if id.is_u64() {
            "an integer above 9223372036854775807 (2^63 - 1), the largest id this server takes"
                .to_owned()
        } else {
            quote(id)
        };
        return Some(format!(
            "`id` must be a string or an integer, not {problem}"
        ));
    }
    match object.get("method") {
        Some(Value::String(_)) => {}
        Some(other) => return Some(format!("`method` must be a string, not {}", kind(other))),
        None => return response_problem(object),
    }
    match object.get("params") {
        None | Some(Value::Null) => None,
        Some(Value::Object(params)) => match params.get("_meta") {
            None | Some(Value::Object(_) | Value::Null) => None,
            Some(other) => Some(format!(
                "`params._meta` must be an object, not {}",
                kind(other)
            )),
        },
        Some(other) => Some(format!("`params` must be an object, not {}", kind(other))),
    }
}

/// A message without `method`: it can only be a response.
fn response_problem(object: &Map<String, Value>) -> Option<String> {
    let result = object.get("result");
    let error = object.get("error");
    match (result, error) {
        (None, None) => Some(
            "`method` is missing: a request or notification names its method, a response carries `result` \
             or `error`"
                .to_owned(),
        ),
        (Some(_), Some(_)) => Some("a response carries `result` or `error`, not both".to_owned()),
        _ if !object.contains_key("id") => {
            Some("`id` is missing: a response carries the id of the request it answers".to_owned())
        }
        (None, Some(error))
            if !error.get("code").is_some_and(Value::is_i64)
                || !error.get("message").is_some_and(Value::is_string) =>
        {
            Some("`error` must be an object with an integer `code` and a string `message`".to_owned())
        }
        _ => None,
    }
}

/// The id to answer with: only a request's (it has a string `method`), and only a valid one.
fn request_id(object: &Map<String, Value>) -> Option<RequestId> {
    if !object.get("method").is_some_and(Value::is_string) {
        return None;
    }
    let id = object.get("id").filter(|id| is_id(id))?;
    serde_json::from_value(id.clone()).ok()
}

/// rmcp's `NumberOrString`: a string or an `i64`.
fn is_id(id: &Value) -> bool {
    id.is_string() || id.is_i64()
}

/// The first envelope key that appears twice at the top of `message` (already known to be a JSON object).
fn duplicate_key(message: &[u8]) -> Option<&'static str> {
    struct FirstDuplicate;
    impl<'de> Visitor<'de> for FirstDuplicate {
        type Value = Option<&'static str>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut seen = [false; ENVELOPE_KEYS.len()];
            let mut first = None;
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                map.next_value::<IgnoredAny>()?;
                if let Some(i) = ENVELOPE_KEYS.iter().position(|k| *k == key) {
                    if seen[i] && first.is_none() {
                        first = Some(ENVELOPE_KEYS[i]);
                    }
                    seen[i] = true;
                }
            }
            Ok(first)
        }
    }
    struct Keys(Option<&'static str>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_map(FirstDuplicate).map(Keys)
        }
    }
    serde_json::from_slice::<Keys>(message).ok()?.0
}

/// What a value is, for "must be X, not Y".
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number with a fraction",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A value as JSON, shortened: for fields whose value itself is the mistake (`"jsonrpc": "1.0"`).
fn quote(value: &Value) -> String {
    match value {
        Value::Array(_) | Value::Object(_) => kind(value).to_owned(),
        other => shorten_middle(&other.to_string(), MAX_QUOTED_CHARS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_envelope_problem_is_named() {
        let cases: [(&str, &str, Option<i64>); 11] = [
            (
                r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}"#,
                "`id` must be a string or an integer, not an integer above 9223372036854775807",
                None,
            ),
            (r#"{"hello":"world"}"#, "`jsonrpc` is missing", None),
            (
                r#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#,
                "`jsonrpc` must be \"2.0\", not \"1.0\"",
                Some(7),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
                "`id` must be a string or an integer, not 1.5",
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":5}"#,
                "`method` must be a string, not a number",
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"x","params":"p"}"#,
                "`params` must be an object, not a string",
                Some(7),
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"id":8,"method":"ping"}"#,
                "`id` appears more than once",
                None,
            ),
            (r#"{"jsonrpc":"2.0","id":7}"#, "`method` is missing", None),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"n","_meta":[]}}"#,
                "`params._meta` must be an object, not an array",
                Some(7),
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"error":{"code":"x"}}"#,
                "`error` must be an object",
                None,
            ),
            (
                r#"[{"jsonrpc":"2.0","id":7,"method":"ping"}]"#,
                "not a batch",
                None,
            ),
        ];
        for (message, says, id) in cases {
            let d = diagnose(message.as_bytes());
            assert_eq!(d.code, ErrorCode::INVALID_REQUEST, "{message}: {d:?}");
            assert!(d.message.contains(says), "{message}: {d:?}");
            assert_eq!(d.id, id.map(RequestId::Number), "{message}: {d:?}");
        }
    }

    /// Text after the message makes it no JSON: no id read from it is echoed, however valid it looked.
    #[test]
    fn text_after_the_message_is_a_parse_error_without_an_id() {
        for message in [
            &br#"{"jsonrpc":"2.0","id":2,"method":"ping","id":3}{}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"} x"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\xff",
            b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\"}",
        ] {
            let d = diagnose(message);
            let shown = String::from_utf8_lossy(message);
            assert_eq!(d.code, ErrorCode::PARSE_ERROR, "{shown}: {d:?}");
            assert_eq!(d.id, None, "{shown}: {d:?}");
            assert!(d.message.contains("nothing after it"), "{shown}: {d:?}");
        }
    }

    /// A syntax error before the first byte that is not UTF-8 is the one named, at its own path.
    #[test]
    fn the_first_fault_is_named_where_it_is() {
        let d = diagnose(
            b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\",\"params\":{\"a\":tru},\"b\":\"\xff\"}",
        );
        assert_eq!(d.code, ErrorCode::PARSE_ERROR, "{d:?}");
        assert!(!d.message.contains("UTF-8"), "{d:?}");
        assert!(d.message.contains("`params.a`"), "{d:?}");
        // On a later line of a body, the offset counts the lines before.
        let d = diagnose(b"{\"jsonrpc\":\"2.0\",\n\"id\":7,\"method\":\"ping\",\"x\":\"\xff\"}");
        assert!(d.message.contains("not UTF-8: byte 46"), "{d:?}");
        assert_eq!(offset(b"ab\ncd\nef", 3, 2), 7);
        assert_eq!(offset(b"ab", 1, 1), 0);
    }

    #[test]
    fn what_does_not_parse_says_where() {
        let not_utf8 = b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\"}}";
        let d = diagnose(not_utf8);
        assert_eq!(d.code, ErrorCode::PARSE_ERROR, "{d:?}");
        assert!(d.message.contains("not UTF-8: byte 64"), "{d:?}");
        assert!(d.message.contains("`params.name`"), "{d:?}");
        let surrogate =
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"\ud800"}}"#;
        let d = diagnose(surrogate.as_bytes());
        assert!(
            d.message.contains("surrogate") && d.message.contains("`params.name`"),
            "{d:?}"
        );
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"e","arguments":{{"a":{}{}}}}}}}"#,
            "[".repeat(1_000_000),
            "]".repeat(1_000_000)
        );
        let d = diagnose(deep.as_bytes());
        assert_eq!(d.code, ErrorCode::PARSE_ERROR, "{d:?}");
        assert!(d.message.contains("deeper than 128 levels"), "{d:?}");
        assert!(d.message.contains("`params.arguments.a[0]"), "{d:?}");
        assert!(d.message.len() < 400, "{d:?}");
    }
}
