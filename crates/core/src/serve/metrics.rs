//! Counters behind `GET /metrics`, in Prometheus text format.
//!
//! A handful of counters do not justify a metrics framework; a mutex-guarded map is cheap next to a tool call.

use crate::error::ErrorCode;
use crate::events::EventHub;
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
}

pub(crate) struct Metrics {
    started: Instant,
    tools: Mutex<BTreeMap<String, ToolStats>>,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        Self {
            started: Instant::now(),
            tools: Mutex::new(BTreeMap::new()),
        }
    }

    pub(crate) fn record_call(&self, tool: &str, error: Option<ErrorCode>, elapsed: Duration) {
        let Ok(mut tools) = self.tools.lock() else {
            return;
        };
        let stats = tools.entry(tool.to_owned()).or_default();
        *stats
            .outcomes
            .entry(error.map_or("ok", ErrorCode::as_str))
            .or_default() += 1;
        stats.seconds_sum += elapsed.as_secs_f64();
        stats.count += 1;
    }

    pub(crate) fn render(&self, bridge: &str, events: &EventHub) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP mcp_uptime_seconds Seconds since the bridge started."
        );
        let _ = writeln!(out, "# TYPE mcp_uptime_seconds gauge");
        let _ = writeln!(
            out,
            "mcp_uptime_seconds{{bridge=\"{bridge}\"}} {:.3}",
            self.started.elapsed().as_secs_f64()
        );
        let _ = writeln!(
            out,
            "# HELP mcp_tool_calls_total Tool calls by outcome (ok or error code)."
        );
        let _ = writeln!(out, "# TYPE mcp_tool_calls_total counter");
        let tools = match self.tools.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        for (tool, stats) in tools.iter() {
            for (outcome, n) in &stats.outcomes {
                let _ = writeln!(
                    out,
                    "mcp_tool_calls_total{{tool=\"{tool}\",outcome=\"{outcome}\"}} {n}"
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP mcp_tool_call_seconds Time spent in tool calls."
        );
        let _ = writeln!(out, "# TYPE mcp_tool_call_seconds summary");
        for (tool, stats) in tools.iter() {
            let _ = writeln!(
                out,
                "mcp_tool_call_seconds_sum{{tool=\"{tool}\"}} {:.6}",
                stats.seconds_sum
            );
            let _ = writeln!(
                out,
                "mcp_tool_call_seconds_count{{tool=\"{tool}\"}} {}",
                stats.count
            );
        }
        let _ = writeln!(
            out,
            "# HELP bridge_events_published_total Events published per stream."
        );
        let _ = writeln!(out, "# TYPE bridge_events_published_total counter");
        for stream in events.streams() {
            let _ = writeln!(
                out,
                "bridge_events_published_total{{stream=\"{}\"}} {}",
                stream.name(),
                stream.published_total()
            );
        }
        out
    }
}
