//! The audit line for every message the relay forwards (Property 16): type, source, destination.

/// Where audit lines go; filter with `RUST_LOG=minecraft_audit=off` (or `=info` to keep them).
pub const TARGET: &str = "minecraft_audit";

/// The text of one audit line.
pub fn line(kind: &str, source: &str, destination: &str, id: &str) -> String {
    format!("forwarded type={kind} source={source} destination={destination} id={id}")
}

/// Whether audit lines are written: a caller that formats its names per message asks first.
pub fn enabled() -> bool {
    tracing::enabled!(target: TARGET, tracing::Level::INFO)
}

/// Logs one forwarded message.
pub fn forwarded(kind: &str, source: &str, destination: &str, id: &str) {
    if enabled() {
        tracing::info!(target: TARGET, "{}", line(kind, source, destination, id));
    }
}
