//! The numbers: load rows, start-up rows, Rust/TypeScript ratios and the targets, as text tables
//! and as JSON.

use crate::load::{LoadResult, LoadSpec};
use crate::target::{Era, ServerKind, Target, TransportKind};
use serde::Serialize;
use std::time::Duration;

#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    pub cpus: usize,
    /// 1-minute load average when the run started: other work on the box skews every number.
    pub load_average: Option<f64>,
    pub node_version: String,
    pub ts_sdk_version: String,
    pub rmcp_version: &'static str,
    pub http_connections: String,
    pub calls_per_run: u64,
    pub seconds_per_run: f64,
    pub warmup_calls: u64,
    pub ready_runs: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadRow {
    pub client: ClientKind,
    pub server: ServerKind,
    pub transport: TransportKind,
    pub era: Era,
    pub concurrency: usize,
    pub calls: u64,
    pub errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    pub seconds: f64,
    pub calls_per_sec: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Server CPU (user + system) per successful call, in microseconds.
    pub server_cpu_us_per_call: Option<f64>,
    /// The load generator's CPU per successful call, in microseconds.
    pub client_cpu_us_per_call: Option<f64>,
}

/// Which client made the calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientKind {
    /// The rmcp client: what a Rust agent would use.
    Rmcp,
    /// bench/src/raw.rs: pre-shaped HTTP posts, to show the server's capacity.
    Raw,
}

impl ClientKind {
    pub fn label(self) -> &'static str {
        match self {
            Self::Rmcp => "rmcp",
            Self::Raw => "raw",
        }
    }
}

/// CPU time spent during one run by the server and by the load generator.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuUse {
    pub server: Option<Duration>,
    pub client: Option<Duration>,
}

fn ns_to_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

impl LoadRow {
    pub fn new(
        client: ClientKind,
        target: &Target,
        spec: LoadSpec,
        result: &LoadResult,
        cpu: CpuUse,
    ) -> Self {
        let h = &result.latency_ns;
        let per_call = |d: Duration| d.as_secs_f64() * 1e6 / (result.calls.max(1) as f64);
        Self {
            client,
            server: target.server,
            transport: target.transport,
            era: target.era,
            concurrency: spec.concurrency,
            calls: result.calls,
            errors: result.errors,
            first_error: result.first_error.clone(),
            seconds: result.elapsed.as_secs_f64(),
            calls_per_sec: result.calls_per_sec(),
            p50_ms: ns_to_ms(h.value_at_quantile(0.50)),
            p90_ms: ns_to_ms(h.value_at_quantile(0.90)),
            p99_ms: ns_to_ms(h.value_at_quantile(0.99)),
            max_ms: ns_to_ms(h.max()),
            server_cpu_us_per_call: cpu.server.map(per_call),
            client_cpu_us_per_call: cpu.client.map(per_call),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct StartupRow {
    pub server: ServerKind,
    pub transport: TransportKind,
    pub samples: usize,
    pub ready_ms_median: f64,
    pub ready_ms_min: f64,
    pub ready_ms_max: f64,
    pub idle_rss_kib_median: u64,
    /// Resident memory right after the load runs of the legacy era (a high-water indication).
    pub rss_after_load_kib: Option<u64>,
}

impl StartupRow {
    /// `samples` holds (ready time, idle RSS in KiB) of each start; must not be empty.
    pub fn new(server: ServerKind, transport: TransportKind, samples: &[(Duration, u64)]) -> Self {
        let mut ready: Vec<f64> = samples.iter().map(|s| s.0.as_secs_f64() * 1e3).collect();
        ready.sort_by(f64::total_cmp);
        let mut rss: Vec<u64> = samples.iter().map(|s| s.1).collect();
        rss.sort_unstable();
        Self {
            server,
            transport,
            samples: samples.len(),
            ready_ms_median: ready.get(ready.len() / 2).copied().unwrap_or(f64::NAN),
            ready_ms_min: ready.first().copied().unwrap_or(f64::NAN),
            ready_ms_max: ready.last().copied().unwrap_or(f64::NAN),
            idle_rss_kib_median: rss.get(rss.len() / 2).copied().unwrap_or(0),
            rss_after_load_kib: None,
        }
    }
}

/// The Rust server against another server on the same transport and concurrency.
#[derive(Debug, Clone, Serialize)]
pub struct RatioRow {
    pub client: ClientKind,
    pub transport: TransportKind,
    pub concurrency: usize,
    pub rust_era: Era,
    pub other: ServerKind,
    /// Rust calls/s over the other's calls/s: above 1 means Rust is faster.
    pub throughput_ratio: f64,
    /// The other's p50 over Rust's p50: above 1 means Rust is faster.
    pub p50_ratio: f64,
    pub p99_ratio: f64,
    /// The other's server CPU per call over Rust's: the cost ratio, which client CPU on the same cores
    /// does not blur.
    pub server_cpu_ratio: Option<f64>,
}

pub fn ratios(rows: &[LoadRow]) -> Vec<RatioRow> {
    let mut out = Vec::new();
    for rust in rows.iter().filter(|r| r.server == ServerKind::Rust) {
        for other in rows.iter().filter(|o| {
            o.server != ServerKind::Rust
                && o.client == rust.client
                && o.transport == rust.transport
                && o.concurrency == rust.concurrency
                // The baseline read the same era's lines (each 2026-07-28 request carries its `_meta`);
                // TS speaks the initialize era only and is compared with both.
                && (o.server != ServerKind::Baseline || o.era == rust.era)
        }) {
            out.push(RatioRow {
                client: rust.client,
                transport: rust.transport,
                concurrency: rust.concurrency,
                rust_era: rust.era,
                other: other.server,
                throughput_ratio: rust.calls_per_sec / other.calls_per_sec.max(f64::EPSILON),
                p50_ratio: other.p50_ms / rust.p50_ms.max(f64::EPSILON),
                p99_ratio: other.p99_ms / rust.p99_ms.max(f64::EPSILON),
                server_cpu_ratio: other
                    .server_cpu_us_per_call
                    .zip(rust.server_cpu_us_per_call)
                    .map(|(o, r)| o / r.max(f64::EPSILON)),
            });
        }
    }
    out
}

/// One of the targets, reported (never asserted).
#[derive(Debug, Clone, Serialize)]
pub struct TargetCheck {
    pub target: String,
    pub measured: String,
    pub met: bool,
}

pub fn targets(rows: &[LoadRow], startup: &[StartupRow], ratios: &[RatioRow]) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    for r in rows.iter().filter(|r| {
        r.server == ServerKind::Rust && r.transport == TransportKind::Http && r.concurrency == 1
    }) {
        out.push(TargetCheck {
            target: format!(
                "HTTP c=1 p99 <= 1 ms (rust, {}, {} client)",
                r.era.label(),
                r.client.label()
            ),
            measured: format!("{:.3} ms", r.p99_ms),
            met: r.p99_ms <= 1.0,
        });
    }
    for q in ratios
        .iter()
        .filter(|q| q.transport == TransportKind::Http && q.other == ServerKind::Ts)
    {
        out.push(TargetCheck {
            target: format!(
                "HTTP throughput >= 10x TS (rust {} vs ts, c={}, {} client)",
                q.rust_era.label(),
                q.concurrency,
                q.client.label()
            ),
            measured: format!("{:.1}x", q.throughput_ratio),
            met: q.throughput_ratio >= 10.0,
        });
    }
    for q in ratios.iter().filter(|q| q.other == ServerKind::Baseline) {
        // A baseline whose CPU could not be read gives no ratio, not an infinite one.
        if let Some(base_over_rust) = q.server_cpu_ratio.filter(|r| *r > 0.0) {
            let rust_over_base = 1.0 / base_over_rust;
            out.push(TargetCheck {
                target: format!(
                    "server CPU/call <= 1.5x baseline (rust {}, {}, c={}, {} client)",
                    q.rust_era.label(),
                    q.transport.label(),
                    q.concurrency,
                    q.client.label()
                ),
                measured: format!("{rust_over_base:.2}x"),
                met: rust_over_base <= 1.5,
            });
        }
    }
    for era in [Era::Legacy, Era::Modern] {
        let best = rows
            .iter()
            .filter(|r| {
                r.server == ServerKind::Rust && r.transport == TransportKind::Stdio && r.era == era
            })
            .max_by(|a, b| a.calls_per_sec.total_cmp(&b.calls_per_sec));
        if let Some(best) = best {
            out.push(TargetCheck {
                target: format!("stdio >= 20k calls/s (rust, {}, best c)", era.label()),
                measured: format!("{:.0}/s at c={}", best.calls_per_sec, best.concurrency),
                met: best.calls_per_sec >= 20_000.0,
            });
        }
    }
    for s in startup.iter().filter(|s| s.server == ServerKind::Rust) {
        let mib = s.idle_rss_kib_median as f64 / 1024.0;
        out.push(TargetCheck {
            target: format!("idle RSS <= 10 MiB (rust, {})", s.transport.label()),
            measured: format!("{mib:.1} MiB"),
            met: mib <= 10.0,
        });
        out.push(TargetCheck {
            target: format!("ready <= 30 ms (rust, {}, median)", s.transport.label()),
            measured: format!("{:.1} ms", s.ready_ms_median),
            met: s.ready_ms_median <= 30.0,
        });
    }
    out
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub environment: Environment,
    pub load: Vec<LoadRow>,
    pub startup: Vec<StartupRow>,
    pub ratios: Vec<RatioRow>,
    pub targets: Vec<TargetCheck>,
    pub failures: Vec<String>,
}

pub fn load_header() -> String {
    format!(
        "{:<9} {:<6} {:<7} {:<12} {:>3} {:>8} {:>10} {:>9} {:>9} {:>9} {:>6} {:>11} {:>11}",
        "transport",
        "client",
        "era",
        "server",
        "c",
        "calls",
        "calls/s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "errors",
        "srv us/call",
        "cli us/call"
    )
}

pub fn load_line(r: &LoadRow) -> String {
    format!(
        "{:<9} {:<6} {:<7} {:<12} {:>3} {:>8} {:>10.0} {:>9.3} {:>9.3} {:>9.3} {:>6} {:>11} {:>11}",
        r.transport.label(),
        r.client.label(),
        r.era.label(),
        r.server.label(),
        r.concurrency,
        r.calls,
        r.calls_per_sec,
        r.p50_ms,
        r.p99_ms,
        r.max_ms,
        r.errors,
        opt_us(r.server_cpu_us_per_call),
        opt_us(r.client_cpu_us_per_call)
    )
}

fn opt_us(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.1}"))
}

pub fn startup_table(rows: &[StartupRow]) -> String {
    let mut s = format!(
        "{:<12} {:<9} {:>7} {:>11} {:>8} {:>8} {:>13} {:>15}\n",
        "server",
        "transport",
        "samples",
        "ready p50ms",
        "min ms",
        "max ms",
        "idle RSS MiB",
        "RSS@load MiB"
    );
    for r in rows {
        let after = r
            .rss_after_load_kib
            .map(|k| format!("{:.1}", k as f64 / 1024.0))
            .unwrap_or_else(|| "-".into());
        s.push_str(&format!(
            "{:<12} {:<9} {:>7} {:>11.1} {:>8.1} {:>8.1} {:>13.1} {:>15}\n",
            r.server.label(),
            r.transport.label(),
            r.samples,
            r.ready_ms_median,
            r.ready_ms_min,
            r.ready_ms_max,
            r.idle_rss_kib_median as f64 / 1024.0,
            after
        ));
    }
    s
}

pub fn ratio_table(rows: &[RatioRow]) -> String {
    let mut s = format!(
        "{:<9} {:<6} {:>3} {:<27} {:>14} {:>13} {:>13} {:>13}\n",
        "transport",
        "client",
        "c",
        "pair",
        "calls/s ratio",
        "p50 speedup",
        "p99 speedup",
        "srv CPU ratio"
    );
    for r in rows {
        let cpu = r
            .server_cpu_ratio
            .map_or_else(|| "-".into(), |v| format!("{v:.1}x"));
        s.push_str(&format!(
            "{:<9} {:<6} {:>3} {:<27} {:>13.1}x {:>12.1}x {:>12.1}x {:>13}\n",
            r.transport.label(),
            r.client.label(),
            r.concurrency,
            format!("rust {} / {}", r.rust_era.label(), r.other.label()),
            r.throughput_ratio,
            r.p50_ratio,
            r.p99_ratio,
            cpu
        ));
    }
    s
}

pub fn target_table(rows: &[TargetCheck]) -> String {
    let mut s = String::new();
    for r in rows {
        s.push_str(&format!(
            "[{}] {:<66} {}\n",
            if r.met { " met " } else { "MISSED" },
            r.target,
            r.measured
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(server: ServerKind, era: Era, cpu: f64) -> LoadRow {
        LoadRow {
            client: ClientKind::Rmcp,
            server,
            transport: TransportKind::Stdio,
            era,
            concurrency: 8,
            calls: 1000,
            errors: 0,
            first_error: None,
            seconds: 1.0,
            calls_per_sec: 1000.0,
            p50_ms: 1.0,
            p90_ms: 1.0,
            p99_ms: 1.0,
            max_ms: 1.0,
            server_cpu_us_per_call: Some(cpu),
            client_cpu_us_per_call: None,
        }
    }

    /// Each era of the core is compared with the baseline that read the same era's lines; TS, which speaks
    /// the initialize era only, with both.
    #[test]
    fn the_core_is_compared_with_the_baseline_of_its_own_era() {
        let rows = [
            row(ServerKind::Rust, Era::Legacy, 3.0),
            row(ServerKind::Rust, Era::Modern, 4.0),
            row(ServerKind::Baseline, Era::Legacy, 2.0),
            row(ServerKind::Baseline, Era::Modern, 2.5),
            row(ServerKind::Ts, Era::Legacy, 8.0),
        ];
        let pairs: Vec<_> = ratios(&rows)
            .iter()
            .map(|q| (q.rust_era, q.other, q.server_cpu_ratio))
            .collect();
        assert_eq!(
            pairs,
            [
                (Era::Legacy, ServerKind::Baseline, Some(2.0 / 3.0)),
                (Era::Legacy, ServerKind::Ts, Some(8.0 / 3.0)),
                (Era::Modern, ServerKind::Baseline, Some(2.5 / 4.0)),
                (Era::Modern, ServerKind::Ts, Some(8.0 / 4.0)),
            ]
        );
    }
}
