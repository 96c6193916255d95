//! Counters behind `GET /metrics`, in Prometheus text format.
//!
//! A handful of counters do not justify a metrics framework; a mutex-guarded map is cheap next to a tool call.

use crate::error::ErrorCode;
use crate::mount::Mount;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Default)]
struct ToolStats {
    /// Keyed by outcome: "ok" or an error code.
    outcomes: BTreeMap<&'static str, u64>,
    seconds_sum: f64,
    count: u64,
    panics: u64,
}

pub(crate) struct Metrics {
    started: Instant,
    /// Keyed by bridge, then tool: looked up by `&str`, so a call allocates no key once its tool was counted.
    tools: Mutex<BTreeMap<String, BTreeMap<String, ToolStats>>>,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        Self {
            started: Instant::now(),
            tools: Mutex::new(BTreeMap::new()),
        }
    }

    pub(crate) fn record_call(
        &self,
        bridge: &str,
        tool: &str,
        error: Option<ErrorCode>,
        panicked: bool,
        elapsed: Duration,
    ) {
        let mut tools = match self.tools.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let by_tool = match tools.get_mut(bridge) {
            Some(by_tool) => by_tool,
            None => tools.entry(bridge.to_owned()).or_default(),
        };
        let stats = match by_tool.get_mut(tool) {
            Some(stats) => stats,
            None => by_tool.entry(tool.to_owned()).or_default(),
        };
        stats.panics += u64::from(panicked);
        *stats
            .outcomes
            .entry(error.map_or("ok", ErrorCode::as_str))
            .or_default() += 1;
        stats.seconds_sum += elapsed.as_secs_f64();
        stats.count += 1;
    }

    /// Every series carries a `bridge` label: the tool's bridge, or the server's name for the `poll_events`
    /// that several mounted bridges share.
    pub(crate) fn render(&self, mount: &Mount) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP mcp_uptime_seconds Seconds since the bridge started."
        );
        let _ = writeln!(out, "# TYPE mcp_uptime_seconds gauge");
        let uptime = self.started.elapsed().as_secs_f64();
        for bridge in mount.bridges() {
            let _ = writeln!(
                out,
                "mcp_uptime_seconds{{bridge=\"{}\"}} {uptime:.3}",
                bridge.name()
            );
        }
        let _ = writeln!(
            out,
            "# HELP mcp_tool_calls_total Tool calls by outcome (ok or error code)."
        );
        let _ = writeln!(out, "# TYPE mcp_tool_calls_total counter");
        let tools = match self.tools.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let series = || {
            tools.iter().flat_map(|(bridge, by_tool)| {
                by_tool.iter().map(move |(tool, s)| (bridge, tool, s))
            })
        };
        for (bridge, tool, stats) in series() {
            for (outcome, n) in &stats.outcomes {
                let _ = writeln!(
                    out,
                    "mcp_tool_calls_total{{bridge=\"{bridge}\",tool=\"{tool}\",outcome=\"{outcome}\"}} {n}"
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP mcp_tool_panics_total Tool calls whose handler panicked (answered E_INTERNAL)."
        );
        let _ = writeln!(out, "# TYPE mcp_tool_panics_total counter");
        for (bridge, tool, stats) in series().filter(|(_, _, s)| s.panics > 0) {
            let _ = writeln!(
                out,
                "mcp_tool_panics_total{{bridge=\"{bridge}\",tool=\"{tool}\"}} {}",
                stats.panics
            );
        }
        let _ = writeln!(
            out,
            "# HELP mcp_tool_call_seconds Time spent in tool calls."
        );
        let _ = writeln!(out, "# TYPE mcp_tool_call_seconds summary");
        for (bridge, tool, stats) in series() {
            let _ = writeln!(
                out,
                "mcp_tool_call_seconds_sum{{bridge=\"{bridge}\",tool=\"{tool}\"}} {:.6}",
                stats.seconds_sum
            );
            let _ = writeln!(
                out,
                "mcp_tool_call_seconds_count{{bridge=\"{bridge}\",tool=\"{tool}\"}} {}",
                stats.count
            );
        }
        let _ = writeln!(
            out,
            "# HELP bridge_events_published_total Events published per stream."
        );
        let _ = writeln!(out, "# TYPE bridge_events_published_total counter");
        for (bridge, stream) in mount.streams() {
            let _ = writeln!(
                out,
                "bridge_events_published_total{{bridge=\"{}\",stream=\"{}\"}} {}",
                bridge.name(),
                stream.name(),
                stream.published_total()
            );
        }
        for bridge in mount.bridges() {
            for m in bridge.metrics() {
                let _ = writeln!(out, "# HELP {} {}", m.name, m.help);
                let _ = writeln!(out, "# TYPE {} {}", m.name, m.kind);
                let _ = writeln!(
                    out,
                    "{}{{bridge=\"{}\"}} {}",
                    m.name,
                    bridge.name(),
                    m.value
                );
            }
        }
        out
    }
}

/// The HTTP transport's own bounds beside its listener's (`net::ListenStats::render`): legacy sessions live
/// and allowed, and the largest request body.
pub(crate) fn render_http_bounds(
    out: &mut String,
    sessions: usize,
    max_sessions: usize,
    max_body: usize,
    budget: &super::body_budget::BodyBudget,
) {
    let gauges = [
        (
            "mcp_sessions_live",
            "Live MCP sessions of the initialize era.",
            sessions,
        ),
        (
            "mcp_sessions_max",
            "Limit: live MCP sessions of the initialize era.",
            max_sessions,
        ),
        (
            "mcp_http_max_request_bytes",
            "Limit: largest HTTP request body.",
            max_body,
        ),
        (
            "mcp_http_pending_request_bytes",
            "Bytes reserved now by the request bodies being read or answered.",
            budget.held(),
        ),
        (
            "mcp_http_max_pending_request_bytes",
            "Limit: bytes of request bodies held at once.",
            budget.max(),
        ),
    ];
    for (name, help, value) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        let _ = writeln!(out, "{name} {value}");
    }
}

#[cfg(test)]
mod bridge_series {
    use super::*;
    use crate::bridge::{Bridge, Metric};

    #[test]
    fn a_bridges_own_series_are_rendered_with_its_label() {
        let mut b = Bridge::builder("pool", "0");
        b.metrics(|| {
            vec![Metric {
                name: "pool_hits_total",
                help: "Hits.",
                kind: "counter",
                value: 3.0,
            }]
        });
        let mount = Mount::from(b.build().unwrap());
        let text = Metrics::new().render(&mount);
        assert!(text.contains("# TYPE pool_hits_total counter\n"), "{text}");
        assert!(
            text.contains("pool_hits_total{bridge=\"pool\"} 3\n"),
            "{text}"
        );
    }
}
