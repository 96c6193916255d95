//! Why a benchmark run could not produce numbers.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("{server} exited with {status} before it was ready")]
    ExitedEarly { server: String, status: String },
    #[error("{server} was not ready within {} ms", .timeout.as_millis())]
    NotReady { server: String, timeout: Duration },
    #[error("MCP handshake with {server} failed: {message}")]
    Handshake { server: String, message: String },
    #[error("tools/list on {server} failed: {message}")]
    ListTools { server: String, message: String },
    #[error("{server} has no `noop` tool")]
    NoNoopTool { server: String },
    #[error("every call failed on {server}; first error: {message}")]
    AllCallsFailed { server: String, message: String },
    #[error("cannot read the memory of process {pid}: {message}")]
    Rss { pid: u32, message: String },
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(String),
    #[error("cannot create a latency histogram: {0}")]
    Histogram(String),
    #[error("cannot pick a free loopback port: {0}")]
    Port(std::io::Error),
    #[error("cannot write {path}: {source}")]
    WriteJson {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot serialise the report: {0}")]
    Serialise(#[from] serde_json::Error),
    #[error("a load task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}
