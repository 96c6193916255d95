//! Logs go to stderr only: on the stdio transport, stdout is the protocol.

use super::LogFormat;
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// What is logged unless `RUST_LOG` says otherwise. rmcp logs every stateless request's start and end and a
/// session's whole `clientInfo` at INFO (three lines a call, and a client chooses how big); our own INFO lines
/// say what a person running the bridge needs, once per session or connection.
const DEFAULT_FILTER: &str = "info,rmcp=warn";

/// Installs the global subscriber. Level from `RUST_LOG` (default [`DEFAULT_FILTER`]). Safe to call twice: the
/// second call is ignored, which tests rely on.
pub fn init_logging(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    // Colour codes only help a person at a terminal; in a client's log file they are noise.
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
