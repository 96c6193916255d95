//! The audit line for every message the relay forwards (Property 16): type, source, destination.

/// Where audit lines go; filter with `RUST_LOG=minecraft_audit=off` (or `=info` to keep them).
pub const TARGET: &str = "minecraft_audit";

/// The text of one audit line.
pub fn line(kind: &str, source: &str, destination: &str, id: &str) -> String {
    // The id is the sender's: quoted, so a newline in it cannot start a line of its own in the audit log.
    let id = bridge_core::text::for_log(id);
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

#[cfg(test)]
mod tests {
    #[test]
    fn an_id_with_a_newline_stays_on_its_line() {
        let line = super::line(
            "command",
            "mcp:0/desk",
            "minecraft:lobby",
            "c1\nforged INFO line",
        );
        assert!(!line.contains('\n'), "{line}");
        assert!(line.ends_with("id=c1\\nforged INFO line"), "{line}");
    }
}
