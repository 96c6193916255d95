//! How a bridge declares a tool: strict typed arguments, a typed output, annotations and a default timeout.
//!
//! The typed handler is erased here into one shape (`JSON in, JSON + text out`) so the MCP layer never sees
//! bridge types, and bridges never see rmcp types.

use crate::error::ToolError;
use crate::schema;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub mod check;
pub(crate) mod ctx;
pub(crate) mod interaction;

pub use ctx::{MAX_LOG_BYTES, ToolCtx};
pub use interaction::{
    ClientCapability, Elicitation, InputRequest, InputRequired, Inputs, LogLevel, Outcome,
};

/// How long a handler that watches its cancellation may run on after the client cancels, to stop what it
/// started (see [`ToolCtx::cancellation`]); then its future is dropped. Under a second, so a cancel is
/// honoured within one even by a handler that ignores it: a clean-up sends its stop at once and need not wait
/// long for the answer.
pub const CANCEL_GRACE: Duration = Duration::from_millis(900);

/// The timeout a tool gets when neither the bridge nor the user names one.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// The most text a tool result carries unless the caller asks for more: about 20 000 tokens, under what MCP
/// hosts accept (Claude Code refuses results above 25 000 tokens). Both the result's text and its
/// `structuredContent` are held to it; images and audio are not counted. Above it the text is cut at a UTF-8
/// boundary, and the whole text is kept for a while, readable page by page with `resources/read` on the URI
/// the result names (see [`TRUNCATED_META_KEY`]).
pub const RESULT_CAP_BYTES: usize = 80_000;

/// The smallest and largest cap a caller may ask for with [`MAX_RESULT_BYTES_META_KEY`].
pub const RESULT_CAP_RANGE: std::ops::RangeInclusive<usize> = 1024..=(16 << 20);

/// The request `_meta` field (of `tools/call` or of `resources/read` on a result page) that sets the cap for
/// this request, in bytes, within [`RESULT_CAP_RANGE`]: `"_meta": {"io.github.mcp-bridges/maxResultBytes":
/// 500000}`.
pub const MAX_RESULT_BYTES_META_KEY: &str = "io.github.mcp-bridges/maxResultBytes";

/// The result `_meta` field present when a result was cut: `{total_bytes, shown_bytes, rest, structured_bytes}`
/// where `total_bytes`/`shown_bytes` count the text, `rest` is the `mcp-bridges://result/...` URI of the next
/// page (also in the result's text and as a resource link), or `null` when the text was whole or the rest could
/// not be kept, and `structured_bytes` is the size `structuredContent` had before its longest strings and arrays
/// were shortened (`null` when it was not; it is dropped only when shortening cannot make it fit).
pub const TRUNCATED_META_KEY: &str = "io.github.mcp-bridges/truncated";

/// How often the core reports progress on a call whose request carries a progress token, when the handler
/// itself has reported nothing for that long: hosts give up on a call after 60 s without progress.
pub const PROGRESS_HEARTBEAT: Duration = Duration::from_secs(5);

/// Checks on arguments that JSON Schema from schemars cannot express (non-empty, byte limits, path rules).
/// The core runs it after deserialising and before the handler, so a rejected call reaches no live system.
pub trait Validate {
    fn validate(&self) -> Result<(), ToolError> {
        Ok(())
    }
}

/// Tool arguments for tools that take none. Still strict: `{"bogus": 1}` is rejected.
#[derive(Debug, Default, Clone, serde::Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

impl Validate for NoArgs {}

/// A tool output with its own text for the model, instead of the default JSON text.
pub struct Rendered<O> {
    pub value: O,
    pub text: String,
}

/// A tool output with its own text and more content after it (images, resource links): the JSON is still
/// `structuredContent`, `text` the first block, `content` the blocks that follow.
pub struct WithContent<O> {
    pub value: O,
    pub text: String,
    pub content: Vec<Content>,
}

/// MCP tool annotations: hints to clients about side effects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Annotations {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

/// Whether a call of the tool may run as a task (the MCP tasks extension, SEP-2663): the client gets a task id
/// at once and polls `tasks/get` for the result, instead of holding the request open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TaskSupport {
    /// Always answered in the request (the default).
    #[default]
    Never,
    /// A task for clients that declare the extension; an ordinary call for the others.
    Optional,
    /// Only as a task: clients that do not declare the extension get the JSON-RPC error -32021.
    Required,
}

/// One piece of a tool result's `content`.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    Image {
        base64: String,
        mime_type: String,
    },
    Audio {
        base64: String,
        mime_type: String,
    },
    /// An embedded text resource.
    Resource {
        uri: String,
        mime_type: String,
        text: String,
    },
    /// A link to a resource the client may read (`resources/read`), not its contents.
    ResourceLink {
        uri: String,
        name: String,
        mime_type: Option<String>,
        description: Option<String>,
        size: Option<u64>,
    },
    /// JSON that is both a text block (its text, byte for byte) and, when [`ToolOutput::structured`] is
    /// `None`, the result's `structuredContent`. Where the core writes the answer itself (the stdio loop, the
    /// HTTP fast path) the text goes out as `structuredContent` as it is, with no tree built, serialised or
    /// freed; elsewhere it is parsed once. For large results made of stored JSON (an event page).
    Json(JsonText),
}

/// Text checked to be one JSON value.
#[derive(Debug, Clone)]
pub struct JsonText(Box<serde_json::value::RawValue>);

impl JsonText {
    /// `json` once checked to be one JSON value (a scan that builds nothing), on one line: it goes out as it is
    /// inside one line of stdio's JSON-RPC or one SSE `data:` line, which a raw CR or LF would end early. Valid
    /// JSON has none inside a string, so any is whitespace between tokens, and removing it keeps the value.
    pub fn new(json: String) -> Result<Self, serde_json::Error> {
        let raw = serde_json::value::RawValue::from_string(json)?;
        if !raw.get().contains(['\n', '\r']) {
            return Ok(Self(raw));
        }
        let one_line: String = raw
            .get()
            .chars()
            .filter(|c| !matches!(c, '\n' | '\r'))
            .collect();
        serde_json::value::RawValue::from_string(one_line).map(Self)
    }

    pub fn get(&self) -> &str {
        self.0.get()
    }

    pub(crate) fn into_raw(self) -> Box<serde_json::value::RawValue> {
        self.0
    }
}

impl PartialEq for JsonText {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

/// What a handler produced, already in wire shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// `structuredContent`; present whenever the tool declares an output schema, unless a [`Content::Json`]
    /// block stands for it.
    pub structured: Option<Value>,
    pub content: Vec<Content>,
}

pub(crate) type ErasedHandler =
    Arc<dyn Fn(Value, ToolCtx) -> BoxFuture<'static, Result<Outcome, ToolError>> + Send + Sync>;

/// A declared tool. Build with [`ToolSpec::new`], then annotations, then a handler.
#[derive(Clone)]
pub struct ToolSpec {
    pub(crate) name: String,
    pub(crate) title: Option<String>,
    pub(crate) description: String,
    pub(crate) annotations: Annotations,
    pub(crate) timeout: Duration,
    pub(crate) task_support: TaskSupport,
    pub(crate) input_schema: Map<String, Value>,
    pub(crate) output_schema: Option<Map<String, Value>>,
    pub(crate) handler: Option<ErasedHandler>,
    /// Shown in `tools/list`; an unlisted tool still answers calls (see [`ToolSpec::unlisted`]).
    pub(crate) listed: bool,
}

impl std::fmt::Debug for ToolSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolSpec")
            .field("name", &self.name)
            .field("annotations", &self.annotations)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl ToolSpec {
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            title: None,
            description: description.into(),
            annotations: Annotations::default(),
            timeout: DEFAULT_TOOL_TIMEOUT,
            task_support: TaskSupport::Never,
            input_schema: Map::new(),
            output_schema: None,
            handler: None,
            listed: true,
        }
    }

    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Reads only; safe to call at any time. Implies idempotent.
    pub fn read_only(mut self) -> Self {
        self.annotations.read_only = true;
        self.annotations.idempotent = true;
        self
    }

    /// May destroy or overwrite state in the live system.
    pub fn destructive(mut self) -> Self {
        self.annotations.destructive = true;
        self
    }

    /// Calling it twice with the same arguments has the effect of calling it once.
    pub fn idempotent(mut self) -> Self {
        self.annotations.idempotent = true;
        self
    }

    /// Reaches a system outside the bridge's own process (a game, a computer, a debugger).
    pub fn open_world(mut self) -> Self {
        self.annotations.open_world = true;
        self
    }

    /// The default deadline of one call; the user's `--tool-timeout NAME=MS` overrides it.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Lets a call run as a task, for tools that may wait long (a breakpoint, a build). The call becomes a task
    /// when its handler first has to wait; a handler that answers, or asks for input, without waiting answers
    /// in the request (the spec's immediate-result shortcut), so input can be gathered before the task starts.
    pub fn task_support(mut self, support: TaskSupport) -> Self {
        self.task_support = support;
        self
    }

    /// Leaves the tool out of `tools/list` but keeps it callable: for a tool this configuration cannot serve,
    /// whose call should say why (and what would serve it) instead of "unknown tool".
    pub fn unlisted(mut self) -> Self {
        self.listed = false;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the handler; its argument and output types give the tool's input and output schemas.
    pub fn handler<A, O, F, Fut>(self, f: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Validate + Send + 'static,
        O: Serialize + JsonSchema + 'static,
        F: Fn(A, ToolCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        self.handler_with_text(move |args: A, ctx| {
            let fut = f(args, ctx);
            async move {
                let value = fut.await?;
                let text = match serde_json::to_string_pretty(&value) {
                    Ok(text) => text,
                    Err(e) => {
                        return Err(ToolError::internal(format!("output not serialisable: {e}")));
                    }
                };
                Ok(Rendered { value, text })
            }
        })
    }

    /// [`handler`](Self::handler) with a shared state (a bridge's context) handed to each call by value, so a
    /// tool reads `.handler_on(ctx.clone(), |c, args: A, _| async move { c.read(args).await })`.
    pub fn handler_on<S, A, O, F, Fut>(self, state: S, f: F) -> Self
    where
        S: Clone + Send + Sync + 'static,
        A: DeserializeOwned + JsonSchema + Validate + Send + 'static,
        O: Serialize + JsonSchema + 'static,
        F: Fn(S, A, ToolCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        self.handler(move |args: A, ctx| f(state.clone(), args, ctx))
    }

    /// [`handler_with_text`](Self::handler_with_text) with a shared state, as in [`handler_on`](Self::handler_on).
    pub fn handler_with_text_on<S, A, O, F, Fut>(self, state: S, f: F) -> Self
    where
        S: Clone + Send + Sync + 'static,
        A: DeserializeOwned + JsonSchema + Validate + Send + 'static,
        O: Serialize + JsonSchema + 'static,
        F: Fn(S, A, ToolCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Rendered<O>, ToolError>> + Send + 'static,
    {
        self.handler_with_text(move |args: A, ctx| f(state.clone(), args, ctx))
    }

    /// Like [`handler`](Self::handler), for tools whose text for the model is not their JSON.
    pub fn handler_with_text<A, O, F, Fut>(self, f: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Validate + Send + 'static,
        O: Serialize + JsonSchema + 'static,
        F: Fn(A, ToolCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Rendered<O>, ToolError>> + Send + 'static,
    {
        self.handler_with_content(move |args: A, ctx| {
            let fut = f(args, ctx);
            async move {
                fut.await.map(|r| WithContent {
                    value: r.value,
                    text: r.text,
                    content: Vec::new(),
                })
            }
        })
    }

    /// [`handler_with_content`](Self::handler_with_content) with a shared state, as in
    /// [`handler_on`](Self::handler_on).
    pub fn handler_with_content_on<S, A, O, F, Fut>(self, state: S, f: F) -> Self
    where
        S: Clone + Send + Sync + 'static,
        A: DeserializeOwned + JsonSchema + Validate + Send + 'static,
        O: Serialize + JsonSchema + 'static,
        F: Fn(S, A, ToolCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<WithContent<O>, ToolError>> + Send + 'static,
    {
        self.handler_with_content(move |args: A, ctx| f(state.clone(), args, ctx))
    }

    /// Like [`handler_with_text`](Self::handler_with_text), for tools whose result also carries images or
    /// resource links.
    pub fn handler_with_content<A, O, F, Fut>(mut self, f: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + Validate + Send + 'static,
        O: Serialize + JsonSchema + 'static,
        F: Fn(A, ToolCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<WithContent<O>, ToolError>> + Send + 'static,
    {
        self.input_schema = schema::input_schema::<A>();
        self.output_schema = Some(schema::output_schema::<O>());
        // Only schemas with a number, integer or boolean somewhere have strings to coerce: for the others the walk
        // is skipped on every call (bench/README.md, "Profile").
        let coercion = admits_scalars_from_strings(&self.input_schema)
            .then(|| Arc::new(Value::Object(self.input_schema.clone())));
        let f = Arc::new(f);
        self.handler = Some(Arc::new(move |raw: Value, ctx: ToolCtx| {
            let f = f.clone();
            let coercion = coercion.clone();
            Box::pin(async move {
                let args: A = parse_args(raw, coercion.as_deref())?;
                args.validate()?;
                let rendered = f(args, ctx).await?;
                let structured = serde_json::to_value(&rendered.value)
                    .map_err(|e| ToolError::internal(format!("output not serialisable: {e}")))?;
                let mut content = Vec::with_capacity(1 + rendered.content.len());
                content.push(Content::Text(rendered.text));
                content.extend(rendered.content);
                Ok(Outcome::Done(ToolOutput {
                    structured: Some(structured),
                    content,
                }))
            })
        }));
        self
    }
}

impl ToolSpec {
    /// A handler that takes raw JSON and returns any content, or asks for input first ([`Outcome`]), for
    /// tools whose shape no Rust type describes (the conformance fixture's). Bridges should prefer
    /// [`handler`](Self::handler).
    pub fn raw_handler<F, Fut, O>(mut self, input_schema: Map<String, Value>, f: F) -> Self
    where
        F: Fn(Value, ToolCtx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
        O: Into<Outcome>,
    {
        self.input_schema = input_schema;
        self.output_schema = None;
        let f = Arc::new(f);
        self.handler = Some(Arc::new(move |raw, ctx| {
            let f = f.clone();
            Box::pin(async move { f(raw, ctx).await.map(Into::into) })
        }));
        self
    }
}

/// Whether any `type` in the schema (nested ones and definitions included) is one that
/// [`schema::coerce_numeric_strings`] fills from a string.
fn admits_scalars_from_strings(schema: &Map<String, Value>) -> bool {
    fn walk(value: &Value) -> bool {
        match value {
            Value::Object(map) => map
                .iter()
                .any(|(key, v)| (key == "type" && is_coerced_type(v)) || walk(v)),
            Value::Array(items) => items.iter().any(walk),
            _ => false,
        }
    }
    fn is_coerced_type(ty: &Value) -> bool {
        match ty {
            Value::String(t) => matches!(t.as_str(), "number" | "integer" | "boolean"),
            Value::Array(types) => types.iter().any(is_coerced_type),
            _ => false,
        }
    }
    schema.values().any(walk) || schema.get("type").is_some_and(is_coerced_type)
}

/// Deserialises arguments strictly, after turning numeric strings into numbers where the schema wants a number
/// (models often send `"5"` for `5`).
pub(crate) fn parse_args<A: DeserializeOwned>(
    raw: Value,
    coercion: Option<&Value>,
) -> Result<A, ToolError> {
    let empty = raw.is_null() || raw.as_object().is_some_and(Map::is_empty);
    // No arguments (every call of a tool that takes none) are read from an empty map at once: the path
    // tracking below only names a field in an error, and an error here is reported by it all the same.
    if empty {
        let none = serde::de::value::MapDeserializer::<_, serde::de::value::Error>::new(
            std::iter::empty::<(&str, ())>(),
        );
        if let Ok(args) = A::deserialize(none) {
            return Ok(args);
        }
    }
    let mut raw = match raw {
        Value::Null => Value::Object(Map::new()),
        other => other,
    };
    if let Some(input_schema) = coercion.filter(|_| !empty) {
        schema::coerce_numeric_strings(&mut raw, input_schema);
    }
    // The path names the field of a wrong type (`quantity`, `items[2].name`), which serde's message does not.
    serde_path_to_error::deserialize(raw).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        let field = Some(path)
            .filter(|p| p != "." && !p.is_empty())
            .or_else(|| schema::field_named_in_serde_error(&message));
        let mut err = ToolError::invalid_argument(field.as_deref().unwrap_or("arguments"), message);
        if field.is_none() {
            err = err.with_hint("check the tool's inputSchema and call again; nothing was sent");
        }
        err
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn json_text_is_one_line_with_the_same_value() {
        let pretty = "{\r\n  \"a\": \"x\\ny\",\n\t\"b\": [1,\n 2.5e3]\n}\n";
        let text = JsonText::new(pretty.to_owned()).unwrap();
        assert!(!text.get().contains(['\n', '\r']), "{}", text.get());
        let before: Value = serde_json::from_str(pretty).unwrap();
        let after: Value = serde_json::from_str(text.get()).unwrap();
        assert_eq!(after, before);
        assert_eq!(after["a"], "x\ny");
        let compact = r#"{"a":"x\ny"}"#;
        assert_eq!(JsonText::new(compact.to_owned()).unwrap().get(), compact);
        assert!(JsonText::new("{\"a\":\n".to_owned()).is_err());
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Give {
        quantity: u32,
        items: Vec<Named>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Named {
        name: String,
    }

    #[test]
    fn a_wrong_type_names_its_field_and_a_missing_field_still_does() {
        let field_of = |raw: Value| {
            let err = parse_args::<Give>(raw, None).unwrap_err();
            let value = err.details().clone();
            (value["field"].clone(), err.message().to_owned())
        };
        let (field, message) = field_of(json!({"quantity": "lots", "items": []}));
        assert_eq!(field, "quantity", "{message}");
        assert!(message.contains("expected u32"), "{message}");
        let (field, _) = field_of(json!({"quantity": 1, "items": [{"name": 5}]}));
        assert_eq!(field, "items[0].name");
        let (field, _) = field_of(json!({"items": []}));
        assert_eq!(field, "quantity");
    }

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Optional {
        #[serde(default)]
        limit: Option<u32>,
    }

    /// No arguments (absent or `{}`) take the short way; what it accepts and refuses is what the tracked
    /// way does: defaults filled, a missing required field named, unknown fields still refused.
    #[test]
    fn no_arguments_read_as_an_empty_object() {
        for raw in [Value::Null, json!({})] {
            parse_args::<NoArgs>(raw.clone(), None).unwrap();
            assert_eq!(
                parse_args::<Optional>(raw.clone(), None).unwrap(),
                Optional { limit: None }
            );
            assert_eq!(parse_args::<Value>(raw.clone(), None).unwrap(), json!({}));
            let err = parse_args::<Give>(raw, None).unwrap_err();
            assert_eq!(err.details()["field"], "quantity", "{}", err.message());
        }
        let err = parse_args::<NoArgs>(json!({"bogus": 1}), None).unwrap_err();
        assert!(err.message().contains("bogus"), "{}", err.message());
    }

    #[test]
    fn only_schemas_with_numbers_or_booleans_are_coerced() {
        let strings = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        assert!(!admits_scalars_from_strings(&map(strings)));
        let nested = json!({"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}},
            "$defs": {"P": {"type": "object", "properties": {"n": {"type": ["integer", "null"]}}}}});
        assert!(admits_scalars_from_strings(&map(nested)));
        let flag = json!({"type": "object", "properties": {"f": {"anyOf": [{"type": "boolean"}]}}});
        assert!(admits_scalars_from_strings(&map(flag)));
    }
}
