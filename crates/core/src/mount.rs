//! What one MCP server serves: one bridge, or several side by side under one tool namespace, one
//! `poll_events`, and every bridge's resources, prompts and instructions.

use crate::bridge::poll_events::{self, Hubs};
use crate::bridge::{Bridge, PromptSpec};
use crate::events::EventStream;
use crate::resource::ResourceProvider;
use crate::tool::ToolSpec;
use futures::{Stream, StreamExt};
use rustc_hash::FxHashMap;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_stream::wrappers::BroadcastStream;

/// The naming rule of `serve`, as `--help` and the README state it.
pub const NAMING_RULE: &str = "In `serve`, every tool is named `<bridge>_<tool>` (bitburner's `status` is \
`bitburner_status`), however many bridges are mounted and whichever they are, so a client's configuration \
keeps working when a bridge is added or removed. One `poll_events` reads every bridge's event streams, named \
`<bridge>/<stream>` or by their resource URI. `--tool-timeout` takes a tool's mounted name, `<bridge>/<tool>`, \
or its own name where only one bridge has it.";

/// The server name of a mount of several bridges (a single bridge is `mcp-bridges-<name>`).
pub const MULTI_SERVER_NAME: &str = "mcp-bridges";

/// One or several bridges, ready to serve. Cheap to clone.
#[derive(Clone)]
pub struct Mount {
    inner: Arc<MountInner>,
}

struct MountInner {
    server_name: String,
    version: String,
    instructions: Option<String>,
    bridges: Vec<Bridge>,
    tools: Vec<MountedTool>,
    /// FxHash: looked up on every call with the tool's name; the keys are our own tools, not a peer's.
    tool_index: FxHashMap<String, usize>,
    prompts: Vec<PromptSpec>,
    hubs: Hubs,
}

/// A tool under its mounted name.
pub(crate) struct MountedTool {
    pub spec: ToolSpec,
    /// The bridge it belongs to; `None` for the shared `poll_events` of several bridges.
    pub bridge: Option<usize>,
    /// Its name within its bridge.
    pub original: String,
}

/// Why bridges cannot be mounted together.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("no bridge to serve: name at least one")]
    Empty,
    #[error("bridge `{0}` is mounted twice")]
    DuplicateBridge(String),
    #[error("tool `{0}` exists twice even with every name prefixed by its bridge's; rename a tool")]
    Collision(String),
}

impl From<Bridge> for Mount {
    fn from(bridge: Bridge) -> Self {
        let tools = bridge
            .inner
            .tools
            .iter()
            .map(|spec| MountedTool {
                original: spec.name.clone(),
                spec: spec.clone(),
                bridge: Some(0),
            })
            .collect();
        let hubs = Hubs::new(vec![(bridge.name().to_owned(), bridge.events().clone())]);
        Self {
            inner: Arc::new(MountInner {
                server_name: format!("mcp-bridges-{}", bridge.name()),
                version: bridge.version().to_owned(),
                instructions: bridge.inner.instructions.clone(),
                tool_index: bridge.inner.tool_index.clone(),
                prompts: bridge.inner.prompts.clone(),
                tools,
                hubs,
                bridges: vec![bridge],
            }),
        }
    }
}

impl Mount {
    /// Mounts `bridges` side by side under [`NAMING_RULE`] (what `serve` runs, even for one bridge; a
    /// bridge's own subcommand serves it [`From`] the bridge, under its tools' own names).
    pub fn new(bridges: Vec<Bridge>) -> Result<Self, MountError> {
        if bridges.is_empty() {
            return Err(MountError::Empty);
        }
        let mut seen = std::collections::HashSet::new();
        for b in &bridges {
            if !seen.insert(b.name()) {
                return Err(MountError::DuplicateBridge(b.name().to_owned()));
            }
        }
        let mut tools = Vec::new();
        for (i, b) in bridges.iter().enumerate() {
            for t in b.inner.tools.iter().filter(|t| t.name != POLL_EVENTS) {
                let mut spec = t.clone();
                // Always, not only on a clash: a name that changed when another bridge was mounted would break
                // every client configuration and prompt that named it.
                spec.name = format!("{}_{}", b.name(), t.name);
                tools.push(MountedTool {
                    spec,
                    bridge: Some(i),
                    original: t.name.clone(),
                });
            }
        }
        let hubs = Hubs::new(
            bridges
                .iter()
                .map(|b| (b.name().to_owned(), b.events().clone()))
                .collect(),
        );
        if bridges.iter().any(|b| !b.events().streams().is_empty()) {
            tools.push(MountedTool {
                spec: poll_events::tool(hubs.clone()),
                bridge: None,
                original: POLL_EVENTS.to_owned(),
            });
        }
        let mut tool_index = FxHashMap::default();
        for (i, t) in tools.iter().enumerate() {
            if tool_index.insert(t.spec.name.clone(), i).is_some() {
                return Err(MountError::Collision(t.spec.name.clone()));
            }
        }
        let prompts = bridges
            .iter()
            .flat_map(|b| b.inner.prompts.iter().cloned())
            .collect();
        let (server_name, version) = match bridges.as_slice() {
            [one] => (
                format!("mcp-bridges-{}", one.name()),
                one.version().to_owned(),
            ),
            _ => (
                MULTI_SERVER_NAME.to_owned(),
                env!("CARGO_PKG_VERSION").to_owned(),
            ),
        };
        Ok(Self {
            inner: Arc::new(MountInner {
                server_name,
                version,
                instructions: Some(combined_instructions(&bridges)),
                bridges,
                tools,
                tool_index,
                prompts,
                hubs,
            }),
        })
    }

    pub fn server_name(&self) -> &str {
        &self.inner.server_name
    }

    pub fn version(&self) -> &str {
        &self.inner.version
    }

    pub fn bridges(&self) -> &[Bridge] {
        &self.inner.bridges
    }

    /// The tool names clients see, in `tools/list` order.
    pub fn tool_names(&self) -> Vec<&str> {
        self.inner
            .tools
            .iter()
            .map(|t| t.spec.name.as_str())
            .collect()
    }

    /// The largest HTTP request body any mounted bridge asked for.
    pub(crate) fn max_request_bytes(&self) -> Option<usize> {
        self.inner
            .bridges
            .iter()
            .filter_map(Bridge::max_request_bytes)
            .max()
    }

    pub(crate) fn instructions(&self) -> Option<&str> {
        self.inner.instructions.as_deref()
    }

    pub(crate) fn tools(&self) -> &[MountedTool] {
        &self.inner.tools
    }

    pub(crate) fn tool_position(&self, name: &str) -> Option<usize> {
        self.inner.tool_index.get(name).copied()
    }

    #[cfg(test)]
    pub(crate) fn tool(&self, name: &str) -> Option<&MountedTool> {
        self.tool_position(name).map(|i| &self.inner.tools[i])
    }

    pub(crate) fn prompts(&self) -> &[PromptSpec] {
        &self.inner.prompts
    }

    pub(crate) fn hubs(&self) -> &Hubs {
        &self.inner.hubs
    }

    /// The label of `tool` in metrics: its bridge's name, or the server's for the shared `poll_events`.
    pub(crate) fn bridge_label(&self, tool: &MountedTool) -> &str {
        tool.bridge
            .and_then(|i| self.inner.bridges.get(i))
            .map_or(self.server_name(), Bridge::name)
    }

    /// [`bridge_label`](Self::bridge_label) of the tool mounted as `name`.
    pub(crate) fn label_of(&self, name: &str) -> &str {
        self.tool_position(name).map_or(self.server_name(), |i| {
            self.bridge_label(&self.inner.tools[i])
        })
    }

    pub(crate) fn providers(&self) -> impl Iterator<Item = &Arc<dyn ResourceProvider>> {
        self.inner
            .bridges
            .iter()
            .flat_map(|b| b.inner.providers.iter())
    }

    pub(crate) fn streams(&self) -> impl Iterator<Item = (&Bridge, EventStream)> {
        self.inner
            .bridges
            .iter()
            .flat_map(|b| b.events().streams().into_iter().map(move |s| (b, s)))
    }

    /// The stream behind an event resource URI.
    pub(crate) fn stream_by_uri(&self, uri: &str) -> Option<EventStream> {
        self.inner
            .bridges
            .iter()
            .find_map(|b| b.events().by_uri(uri))
    }

    /// Whether `uri` is in some bridge's event namespace (`<bridge>://events/...`).
    pub(crate) fn is_event_uri(&self, uri: &str) -> bool {
        self.inner.bridges.iter().any(|b| {
            uri.strip_prefix(b.name())
                .is_some_and(|rest| rest.starts_with("://events/"))
        })
    }

    /// Every bridge's "resource changed" notices, merged; a subscriber that lags skips notices, which is
    /// harmless (a notice only says "read again").
    pub(crate) fn updates(&self) -> impl Stream<Item = String> + Send + Unpin + 'static {
        futures::stream::select_all(self.inner.bridges.iter().map(|b| {
            BroadcastStream::new(b.events().subscribe_updates())
                .filter_map(|r| std::future::ready(r.ok()))
        }))
    }

    /// `--tool-timeout` entries by mounted tool position: a key is a mounted name or `<bridge>/<tool>`. Keys
    /// that name no tool are returned apart, for a warning.
    pub(crate) fn resolve_timeouts(
        &self,
        entries: &[(String, Duration)],
    ) -> (HashMap<usize, Duration>, Vec<String>) {
        let mut resolved = HashMap::new();
        let mut unknown = Vec::new();
        for (key, timeout) in entries {
            let position = self
                .tool_position(key)
                .or_else(|| {
                    let (bridge, tool) = key.split_once('/')?;
                    self.inner.tools.iter().position(|t| {
                        t.original == tool
                            && t.bridge
                                .is_some_and(|i| self.inner.bridges[i].name() == bridge)
                    })
                })
                .or_else(|| {
                    // A tool's own name, where only one mounted bridge has it.
                    let mut owners = self
                        .inner
                        .tools
                        .iter()
                        .enumerate()
                        .filter(|(_, t)| t.bridge.is_some() && t.original == *key);
                    match (owners.next(), owners.next()) {
                        (Some((i, _)), None) => Some(i),
                        _ => None,
                    }
                });
            match position {
                Some(i) => {
                    resolved.insert(i, *timeout);
                }
                None => unknown.push(key.clone()),
            }
        }
        (resolved, unknown)
    }

    /// The bridges' part of `GET /health`: one bridge's fields at the top level, as when served alone; several
    /// under `bridges.<name>`.
    pub(crate) fn health(&self) -> Map<String, Value> {
        let mut body = Map::new();
        match self.inner.bridges.as_slice() {
            [bridge] => {
                body.insert("bridge".into(), bridge.name().into());
                body.insert("version".into(), bridge.version().into());
                body.extend(bridge.health());
            }
            bridges => {
                body.insert("bridge".into(), self.server_name().into());
                body.insert("version".into(), self.version().into());
                let parts = bridges
                    .iter()
                    .map(|b| {
                        let mut part = Map::new();
                        part.insert("version".into(), b.version().into());
                        part.extend(b.health());
                        (b.name().to_owned(), Value::Object(part))
                    })
                    .collect();
                body.insert("bridges".into(), Value::Object(parts));
            }
        }
        body
    }
}

const POLL_EVENTS: &str = "poll_events";

fn combined_instructions(bridges: &[Bridge]) -> String {
    let names: Vec<&str> = bridges.iter().map(Bridge::name).collect();
    let mut text = format!(
        "This server mounts these bridges: {}. {NAMING_RULE}",
        names.join(", ")
    );
    for b in bridges {
        if let Some(own) = &b.inner.instructions {
            text.push_str(&format!("\n\n## {}\n{own}", b.name()));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{NoArgs, ToolCtx};

    fn bridge(name: &str, tools: &[&str], stream: Option<&str>) -> Bridge {
        let mut b = Bridge::builder(name, "1.0");
        b.instructions(format!("use {name}"));
        for t in tools {
            b.tool(
                ToolSpec::new(*t, format!("{name} {t}"))
                    .handler(|_: NoArgs, _: ToolCtx| async { Ok(serde_json::json!({})) }),
            );
        }
        if let Some(s) = stream {
            b.events().stream(s, "", 4);
        }
        b.build().unwrap()
    }

    #[test]
    fn one_bridge_in_serve_is_named_as_among_others() {
        let m = Mount::new(vec![bridge("a", &["status"], Some("chat"))]).unwrap();
        assert_eq!(m.server_name(), "mcp-bridges-a");
        assert_eq!(m.tool_names(), ["a_status", "poll_events"]);
        assert!(m.instructions().is_some_and(|t| t.ends_with("## a\nuse a")));
        assert_eq!(m.health()["bridge"], "a");
        // Its own subcommand serves it under its own names.
        let alone = Mount::from(bridge("a", &["status"], Some("chat")));
        assert_eq!(alone.tool_names(), ["status", "poll_events"]);
    }

    #[test]
    fn a_tool_s_name_does_not_depend_on_the_other_bridges() {
        let names_of_a = |others: Vec<Bridge>| {
            let mut bridges = vec![bridge("a", &["status", "only_a"], Some("chat"))];
            bridges.extend(others);
            let m = Mount::new(bridges).unwrap();
            m.tool_names()
                .into_iter()
                .filter(|n| n.starts_with("a_"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        let expected = ["a_status", "a_only_a"];
        assert_eq!(names_of_a(vec![]), expected);
        assert_eq!(names_of_a(vec![bridge("b", &["other"], None)]), expected);
        assert_eq!(names_of_a(vec![bridge("b", &["status"], None)]), expected);
    }

    #[test]
    fn several_bridges_share_one_poll_events_and_their_instructions() {
        let m = Mount::new(vec![
            bridge("a", &["status", "only_a"], Some("chat")),
            bridge("b", &["status"], Some("chat")),
        ])
        .unwrap();
        assert_eq!(m.server_name(), MULTI_SERVER_NAME);
        assert_eq!(
            m.tool_names(),
            ["a_status", "a_only_a", "b_status", "poll_events"],
            "one poll_events for both"
        );
        assert_eq!(m.tool("b_status").unwrap().spec.description, "b status");
        let text = m.instructions().unwrap();
        assert!(
            text.contains("## a\nuse a") && text.contains("## b\nuse b"),
            "{text}"
        );
        assert!(text.contains("`<bridge>_<tool>`"), "{text}");
        assert!(m.health()["bridges"]["b"].is_object());
    }

    #[test]
    fn a_prefixed_name_that_collides_is_refused() {
        let result = Mount::new(vec![
            bridge("a", &["b_status"], None),
            bridge("a_b", &["status"], None),
        ]);
        assert!(matches!(result, Err(MountError::Collision(n)) if n == "a_b_status"));
        let twice = Mount::new(vec![bridge("a", &[], None), bridge("a", &[], None)]);
        assert!(matches!(twice, Err(MountError::DuplicateBridge(_))));
    }

    #[test]
    fn timeouts_resolve_by_mounted_name_or_bridge_and_tool() {
        let m = Mount::new(vec![
            bridge("a", &["status", "x"], None),
            bridge("b", &["status"], None),
        ])
        .unwrap();
        let ms = Duration::from_millis;
        let (resolved, unknown) = m.resolve_timeouts(&[
            ("b/status".into(), ms(1)),
            ("a_status".into(), ms(2)),
            ("x".into(), ms(3)),
            ("status".into(), ms(4)),
        ]);
        assert_eq!(resolved[&m.tool_position("b_status").unwrap()], ms(1));
        assert_eq!(resolved[&m.tool_position("a_status").unwrap()], ms(2));
        assert_eq!(
            resolved[&m.tool_position("a_x").unwrap()],
            ms(3),
            "a tool's own name, where only one bridge has it"
        );
        assert_eq!(unknown, ["status"], "ambiguous: two bridges have one");
    }
}
