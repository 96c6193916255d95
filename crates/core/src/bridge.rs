//! A bridge as the core sees it: a name, tools, resources, prompts, event streams and a health report.

use crate::events::EventHub;
use crate::resource::ResourceProvider;
use crate::tool::ToolSpec;
use rustc_hash::FxHashMap;
use serde_json::{Map, Value};
use std::sync::Arc;

mod contract;
pub(crate) mod poll_events;
mod prompt;

pub use contract::{BridgeEntry, BridgeEnv, BridgeError, DynEntry, Entry};
pub use prompt::{PromptMessage, PromptOutcome, PromptRole, PromptSpec};

pub(crate) type HealthFn = Arc<dyn Fn() -> Map<String, Value> + Send + Sync>;
pub(crate) type MetricsFn = Arc<dyn Fn() -> Vec<Metric> + Send + Sync>;

/// One series a bridge adds to `GET /metrics` (labelled with `bridge` by the core).
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    /// Prometheus series name, e.g. `sandbox_pool_hits_total`.
    pub name: &'static str,
    pub help: &'static str,
    /// `counter` or `gauge`.
    pub kind: &'static str,
    pub value: f64,
}

/// A bridge ready to be served. Cheap to clone.
#[derive(Clone)]
pub struct Bridge {
    pub(crate) inner: Arc<BridgeInner>,
}

pub(crate) struct BridgeInner {
    pub name: String,
    pub version: String,
    pub instructions: Option<String>,
    /// In declaration order: `tools/list` must be deterministic.
    pub tools: Vec<ToolSpec>,
    pub tool_index: FxHashMap<String, usize>,
    pub prompts: Vec<PromptSpec>,
    pub providers: Vec<Arc<dyn ResourceProvider>>,
    pub events: EventHub,
    pub health: Option<HealthFn>,
    pub metrics: Option<MetricsFn>,
    pub max_request_bytes: Option<usize>,
}

/// Why a bridge could not be assembled: programming errors, caught at start-up.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("tool `{0}` is declared twice")]
    DuplicateTool(String),
    #[error("tool name `{0}` is invalid: use 1-128 characters from A-Z a-z 0-9 _ - .")]
    InvalidToolName(String),
    #[error("tool `{0}` has no handler")]
    MissingHandler(String),
}

pub struct BridgeBuilder {
    name: String,
    version: String,
    instructions: Option<String>,
    tools: Vec<ToolSpec>,
    prompts: Vec<PromptSpec>,
    providers: Vec<Arc<dyn ResourceProvider>>,
    events: EventHub,
    health: Option<HealthFn>,
    metrics: Option<MetricsFn>,
    max_request_bytes: Option<usize>,
}

impl Bridge {
    /// `name` is also the URI scheme of the bridge's resources (`<name>://events/<stream>`).
    pub fn builder(name: &str, version: &str) -> BridgeBuilder {
        BridgeBuilder {
            name: name.to_owned(),
            version: version.to_owned(),
            instructions: None,
            tools: Vec::new(),
            prompts: Vec::new(),
            providers: Vec::new(),
            events: EventHub::new(name),
            health: None,
            metrics: None,
            max_request_bytes: None,
        }
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn version(&self) -> &str {
        &self.inner.version
    }

    pub fn events(&self) -> &EventHub {
        &self.inner.events
    }

    pub fn tool_names(&self) -> Vec<&str> {
        self.inner.tools.iter().map(|t| t.name.as_str()).collect()
    }

    /// The bridge's own part of `GET /health`.
    pub fn health(&self) -> Map<String, Value> {
        self.inner.health.as_ref().map(|f| f()).unwrap_or_default()
    }

    /// The bridge's own series for `GET /metrics`.
    pub fn metrics(&self) -> Vec<Metric> {
        self.inner.metrics.as_ref().map(|f| f()).unwrap_or_default()
    }

    /// The HTTP request body this bridge's tools need at least, when more than the server's default.
    pub fn max_request_bytes(&self) -> Option<usize> {
        self.inner.max_request_bytes
    }

    #[cfg(test)]
    pub(crate) fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.inner
            .tool_index
            .get(name)
            .map(|&i| &self.inner.tools[i])
    }
}

impl BridgeBuilder {
    pub fn instructions(&mut self, text: impl Into<String>) -> &mut Self {
        self.instructions = Some(text.into());
        self
    }

    /// The bridge's event streams; create them with [`EventHub::stream`] before `build`.
    pub fn events(&self) -> EventHub {
        self.events.clone()
    }

    pub fn tool(&mut self, spec: ToolSpec) -> &mut Self {
        self.tools.push(spec);
        self
    }

    pub fn prompt(&mut self, spec: PromptSpec) -> &mut Self {
        self.prompts.push(spec);
        self
    }

    pub fn resources(&mut self, provider: Arc<dyn ResourceProvider>) -> &mut Self {
        self.providers.push(provider);
        self
    }

    /// Fields merged into the JSON of `GET /health`; called on every health request, so keep it cheap.
    pub fn health(&mut self, f: impl Fn() -> Value + Send + Sync + 'static) -> &mut Self {
        self.health = Some(Arc::new(move || match f() {
            Value::Object(map) => map,
            other => Map::from_iter([("state".to_owned(), other)]),
        }));
        self
    }

    /// Series added to `GET /metrics`, each labelled `bridge="<name>"`; called on every scrape, so keep it cheap.
    pub fn metrics(&mut self, f: impl Fn() -> Vec<Metric> + Send + Sync + 'static) -> &mut Self {
        self.metrics = Some(Arc::new(f));
        self
    }

    /// Raises the HTTP request body limit (`--mcp-max-request-bytes`) to `bytes` when the bridge's tools take
    /// more than the default in one call (a file's content, say). Stdio has no such limit.
    pub fn max_request_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_request_bytes = Some(bytes);
        self
    }

    pub fn build(self) -> Result<Bridge, BuildError> {
        let mut tools = self.tools;
        if !self.events.streams().is_empty() {
            tools.push(poll_events::tool(poll_events::Hubs::new(vec![(
                self.name.clone(),
                self.events.clone(),
            )])));
        }
        let mut tool_index = FxHashMap::default();
        for (i, tool) in tools.iter().enumerate() {
            if !valid_tool_name(&tool.name) {
                return Err(BuildError::InvalidToolName(tool.name.clone()));
            }
            if tool.handler.is_none() {
                return Err(BuildError::MissingHandler(tool.name.clone()));
            }
            if tool_index.insert(tool.name.clone(), i).is_some() {
                return Err(BuildError::DuplicateTool(tool.name.clone()));
            }
        }
        Ok(Bridge {
            inner: Arc::new(BridgeInner {
                name: self.name,
                version: self.version,
                instructions: self.instructions,
                tools,
                tool_index,
                prompts: self.prompts,
                providers: self.providers,
                events: self.events,
                health: self.health,
                metrics: self.metrics,
                max_request_bytes: self.max_request_bytes,
            }),
        })
    }
}

fn valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{NoArgs, ToolCtx};

    fn noop(name: &str) -> ToolSpec {
        ToolSpec::new(name, "does nothing")
            .handler(|_: NoArgs, _: ToolCtx| async { Ok(serde_json::json!({})) })
    }

    #[test]
    fn tool_names_are_checked() {
        for (name, ok) in [
            ("read_file", true),
            ("probe-computers", true),
            ("a.b", true),
            ("", false),
            ("a b", false),
        ] {
            let mut b = Bridge::builder("t", "0");
            b.tool(noop(name));
            assert_eq!(b.build().is_ok(), ok, "{name:?}");
        }
    }

    #[test]
    fn duplicates_and_missing_handlers_are_rejected() {
        let mut b = Bridge::builder("t", "0");
        b.tool(noop("x")).tool(noop("x"));
        assert!(matches!(b.build(), Err(BuildError::DuplicateTool(_))));
        let mut b = Bridge::builder("t", "0");
        b.tool(ToolSpec::new("y", "no handler"));
        assert!(matches!(b.build(), Err(BuildError::MissingHandler(_))));
    }

    #[test]
    fn poll_events_appears_only_with_streams() {
        let b = Bridge::builder("t", "0");
        assert!(b.build().unwrap().tool("poll_events").is_none());
        let b = Bridge::builder("t", "0");
        b.events().stream("chat", "", 8);
        assert!(b.build().unwrap().tool("poll_events").is_some());
    }
}
