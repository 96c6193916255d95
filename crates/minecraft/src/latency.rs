//! An opt-in trace of when each hop handled a frame of events (issue 22 item 9): with
//! `RUST_LOG=…,mc_latency=trace` the relay and the MCP server log, per frame, when it was read and when it was
//! done with, and the last event number it held, so the real-stack bench (`MC_STACK_TRACE`) can tell which hop
//! adds the latency's tail. Off by default; then each frame costs one callsite check.

/// The target the trace lines are logged under.
pub(crate) const TARGET: &str = "mc_latency";

/// Whether the trace is on (`RUST_LOG` enables [`TARGET`] at TRACE).
pub(crate) fn on() -> bool {
    tracing::enabled!(target: TARGET, tracing::Level::TRACE)
}

/// Microseconds since the Unix epoch (the clock the bench's drivers stamp events with).
pub(crate) fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// When tracing: the time now (when a frame was read), for its trace line once it is handled.
pub(crate) fn start() -> Option<u64> {
    on().then(now_us)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::{EnvFilter, prelude::*};

    fn with_filter<T>(filter: &str, f: impl FnOnce() -> T) -> T {
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::fmt::layer().with_filter(EnvFilter::new(filter)));
        tracing::subscriber::with_default(subscriber, f)
    }

    #[test]
    fn the_trace_is_off_unless_its_target_is_asked_for() {
        assert_eq!(with_filter("info", start), None);
        assert_eq!(with_filter("trace,mc_latency=off", start), None);
        assert!(with_filter("warn,mc_latency=trace", start).is_some_and(|t| t > 0));
    }
}
