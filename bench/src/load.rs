//! Closed-loop load: k tasks share one client and each keeps one `noop` call in flight, until a call budget
//! or a wall-time budget runs out, whichever comes first.

use crate::error::BenchError;
use crate::raw::RawHttp;
use hdrhistogram::Histogram;
use rmcp::model::CallToolResponse;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::{Peer, RoleClient};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Latencies are recorded in nanoseconds, up to a minute, at three significant digits.
const MAX_LATENCY_NS: u64 = 60_000_000_000;

#[derive(Debug, Clone, Copy)]
pub struct LoadSpec {
    pub concurrency: usize,
    pub max_calls: u64,
    pub max_time: Duration,
}

#[derive(Debug)]
pub struct LoadResult {
    pub calls: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    pub elapsed: Duration,
    pub latency_ns: Histogram<u64>,
}

impl LoadResult {
    pub fn calls_per_sec(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64().max(f64::EPSILON)
    }
}

fn new_histogram() -> Result<Histogram<u64>, BenchError> {
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3)
        .map_err(|e| BenchError::Histogram(e.to_string()))
}

/// Who makes the calls: the rmcp client, or the minimal HTTP client.
#[derive(Clone)]
pub enum Caller {
    Rmcp(Peer<RoleClient>),
    Raw(Arc<RawHttp>),
}

impl Caller {
    pub async fn call(&self) -> Result<(), String> {
        match self {
            Self::Rmcp(peer) => call_noop(peer).await,
            Self::Raw(raw) => raw.call_noop().await,
        }
    }
}

/// One `noop` call; an `isError` result counts as a failure, since the server did not do the call.
async fn call_noop(peer: &Peer<RoleClient>) -> Result<(), String> {
    match peer
        .call_tool_once(CallToolRequestParams::new("noop").with_arguments(JsonObject::new()))
        .await
    {
        Ok(CallToolResponse::Complete(result)) if result.is_error != Some(true) => Ok(()),
        Ok(CallToolResponse::Complete(result)) => Err(format!("tool error: {:?}", result.content)),
        Ok(other) => Err(format!("unexpected response: {other:?}")),
        Err(e) => Err(e.to_string()),
    }
}

/// Sequential calls that are not measured: they fill caches, pools and the JIT of the Node server.
pub async fn warm_up(caller: &Caller, calls: u64) -> Result<(), String> {
    for _ in 0..calls {
        caller.call().await?;
    }
    Ok(())
}

struct TaskResult {
    calls: u64,
    errors: u64,
    first_error: Option<String>,
    latency_ns: Histogram<u64>,
}

pub async fn run(caller: &Caller, spec: LoadSpec) -> Result<LoadResult, BenchError> {
    let issued = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + spec.max_time;
    let mut tasks = Vec::with_capacity(spec.concurrency);
    for _ in 0..spec.concurrency.max(1) {
        let caller = caller.clone();
        let issued = issued.clone();
        let mut latency_ns = new_histogram()?;
        tasks.push(tokio::spawn(async move {
            let (mut calls, mut errors, mut first_error) = (0, 0, None);
            while Instant::now() < deadline
                && issued.fetch_add(1, Ordering::Relaxed) < spec.max_calls
            {
                let t0 = Instant::now();
                let outcome = caller.call().await;
                let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
                match outcome {
                    Ok(()) => {
                        latency_ns.saturating_record(ns);
                        calls += 1;
                    }
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert(e);
                    }
                }
            }
            TaskResult {
                calls,
                errors,
                first_error,
                latency_ns,
            }
        }));
    }
    let mut total = LoadResult {
        calls: 0,
        errors: 0,
        first_error: None,
        elapsed: Duration::ZERO,
        latency_ns: new_histogram()?,
    };
    for task in tasks {
        let part = task.await?;
        total.calls += part.calls;
        total.errors += part.errors;
        if total.first_error.is_none() {
            total.first_error = part.first_error;
        }
        // Same bounds on both sides, so adding cannot fail.
        let _ = total.latency_ns.add(&part.latency_ns);
    }
    total.elapsed = start.elapsed();
    Ok(total)
}
