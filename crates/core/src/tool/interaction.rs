//! What a handler may ask of the MCP client mid-call: log lines, a question to the user (elicitation), a
//! completion from the client's model (sampling), or, in the stateless era, an `InputRequiredResult` that
//! the client answers by calling again (SEP-2322, "MRTR").

use super::ToolOutput;
use crate::error::ToolError;
use futures::future::BoxFuture;
use serde_json::Value;
use std::collections::BTreeMap;

/// Severity of a log line sent to the client (RFC 5424 levels, as MCP uses them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

/// Client features a tool may depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientCapability {
    Elicitation,
    Sampling,
    Roots,
}

impl ClientCapability {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Elicitation => "elicitation",
            Self::Sampling => "sampling",
            Self::Roots => "roots",
        }
    }
}

/// One input a tool needs from the client before it can finish.
#[derive(Debug, Clone, PartialEq)]
pub enum InputRequest {
    /// Ask the user to fill a form; `schema` is a flat JSON Schema object.
    Elicit { message: String, schema: Value },
    /// Ask the client's model to answer `prompt`.
    Sample { prompt: String, max_tokens: u32 },
    /// Ask for the client's roots.
    ListRoots,
}

/// "Call me again with these answers": the stateless-era substitute for server-to-client requests.
/// `state` comes back, sealed against tampering, as [`ToolCtx::request_state`](super::ToolCtx::request_state).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InputRequired {
    pub requests: BTreeMap<String, InputRequest>,
    pub state: Option<Value>,
}

/// A finished call, or a request for input first.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Done(ToolOutput),
    InputRequired(InputRequired),
}

impl From<ToolOutput> for Outcome {
    fn from(output: ToolOutput) -> Self {
        Self::Done(output)
    }
}

impl From<InputRequired> for Outcome {
    fn from(input: InputRequired) -> Self {
        Self::InputRequired(input)
    }
}

/// The user's answer to an elicitation.
#[derive(Debug, Clone, PartialEq)]
pub struct Elicitation {
    /// `accept`, `decline` or `cancel`.
    pub action: String,
    pub content: Option<Value>,
}

/// The client side of a call, implemented at the MCP edge.
pub(crate) trait ClientLink: Send + Sync {
    fn log(&self, level: LogLevel, data: Value) -> BoxFuture<'static, ()>;
    fn supports(&self, capability: ClientCapability) -> bool;
    fn elicit(
        &self,
        message: String,
        schema: Value,
    ) -> BoxFuture<'static, Result<Elicitation, ToolError>>;
    fn sample(
        &self,
        prompt: String,
        max_tokens: u32,
    ) -> BoxFuture<'static, Result<Value, ToolError>>;
}

/// The answers a retried call (or prompt request) carries.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub(crate) responses: BTreeMap<String, Value>,
    pub(crate) state: Option<Value>,
}

impl Inputs {
    /// The client's answer to the input request named `key`. Only JSON objects count: anything else is
    /// treated as missing so the caller asks again.
    pub fn response(&self, key: &str) -> Option<&serde_json::Map<String, Value>> {
        self.responses.get(key).and_then(Value::as_object)
    }

    /// The state attached to the previous `InputRequired`, verified untampered.
    pub fn state(&self) -> Option<&Value> {
        self.state.as_ref()
    }
}
