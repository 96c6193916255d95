//! Prompts: reusable message templates a bridge may offer (the conformance fixture needs them; bridges may too).

use crate::error::ToolError;
use crate::tool::{Content, InputRequired, Inputs};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptRole {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PromptMessage {
    pub role: PromptRole,
    pub content: Content,
}

/// Messages, or a request for input first (SEP-2322, stateless era).
#[derive(Debug, Clone, PartialEq)]
pub enum PromptOutcome {
    Messages(Vec<PromptMessage>),
    InputRequired(InputRequired),
}

pub(crate) type PromptFn = Arc<
    dyn Fn(&BTreeMap<String, String>, &Inputs) -> Result<PromptOutcome, ToolError> + Send + Sync,
>;

#[derive(Clone)]
pub struct PromptSpec {
    pub(crate) name: String,
    pub(crate) description: String,
    /// (name, description, required)
    pub(crate) arguments: Vec<(String, String, bool)>,
    pub(crate) render: PromptFn,
}

impl PromptSpec {
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        render: impl Fn(&BTreeMap<String, String>) -> Result<Vec<PromptMessage>, ToolError>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        Self::interactive(name, description, move |args, _| {
            render(args).map(PromptOutcome::Messages)
        })
    }

    /// A prompt that may ask the client for input before it can be rendered.
    pub fn interactive(
        name: impl Into<String>,
        description: impl Into<String>,
        render: impl Fn(&BTreeMap<String, String>, &Inputs) -> Result<PromptOutcome, ToolError>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            arguments: Vec::new(),
            render: Arc::new(render),
        }
    }

    pub fn argument(mut self, name: &str, description: &str, required: bool) -> Self {
        self.arguments
            .push((name.to_owned(), description.to_owned(), required));
        self
    }
}
