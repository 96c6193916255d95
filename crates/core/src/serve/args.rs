//! The MCP-side command-line flags every bridge subcommand flattens in.

use crate::config::{self, Unit};
use std::net::IpAddr;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    Stdio,
    /// Also spelled `sse` and `remote` (Bouvet's names for its HTTP transport).
    #[value(alias = "sse", alias = "remote")]
    Http,
    /// Stdio and HTTP from one process, over the same bridges: a desktop client launches it while other
    /// clients reach it over HTTP.
    Both,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// How clients reach this bridge over MCP.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "MCP transport")]
pub struct McpArgs {
    /// Serve MCP over Streamable HTTP at http://MCP_HOST:MCP_PORT/mcp (with /health and /metrics beside it).
    /// With --stdio too, both at once.
    #[arg(long)]
    pub http: bool,

    /// Serve MCP over standard input and output (what desktop MCP clients launch). With --http too, both at
    /// once.
    #[arg(long)]
    pub stdio: bool,

    /// The transport when neither --stdio nor --http is given (they win over it). `both`: stdio and HTTP from
    /// one process; when the stdio client leaves the server stops, but a stdin that is closed from the start
    /// (a service, `</dev/null`) leaves HTTP serving alone. Any case: `STDIO` and `Both` too.
    #[arg(
        long = "transport",
        env = "MCP_TRANSPORT",
        value_enum,
        ignore_case = true
    )]
    pub transport: Option<Transport>,

    /// Address the HTTP transport binds. Anything but loopback exposes the bridge to your network: set
    /// a token then.
    #[arg(long = "mcp-host", env = "MCP_HOST", default_value = "127.0.0.1", value_parser = config::ip())]
    pub mcp_host: IpAddr,

    /// Port of the HTTP transport (0 picks a free one and logs it).
    #[arg(long = "mcp-port", env = "MCP_PORT", default_value = "3000", value_parser = config::ranged(0u16, 65535))]
    pub mcp_port: u16,

    /// Bearer token HTTP clients must send (`Authorization: Bearer <token>`). Empty or blank is refused: it
    /// would lock every client out. Prefer the variable: a flag's value is in the process list, which every
    /// local user can read.
    #[arg(long = "mcp-token", env = "MCP_TOKEN", hide_env_values = true, value_parser = config::secret())]
    pub mcp_token: Option<String>,

    /// Extra browser origins allowed to call the HTTP transport, e.g. `https://app.example:*` (comma-separated).
    /// Requests from other origins get 403 (DNS-rebinding protection); requests without Origin are allowed.
    #[arg(
        long = "mcp-allowed-origin",
        env = "MCP_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,

    /// Extra Host header values accepted by the HTTP transport (comma-separated); localhost is always accepted.
    #[arg(
        long = "mcp-allowed-host",
        env = "MCP_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,

    /// Override a tool's timeout: TOOL=DURATION, e.g. `read_file=30s` (repeatable, or comma-separated in the
    /// variable).
    #[arg(long = "tool-timeout", env = "MCP_TOOL_TIMEOUTS", value_delimiter = ',', value_parser = config::ToolTimeout)]
    pub tool_timeouts: Vec<(String, Duration)>,

    /// How long in-flight calls may finish after SIGINT/SIGTERM before the bridge exits.
    #[arg(value_name = "DURATION", long = "shutdown-grace", alias = "shutdown-grace-ms", env = "MCP_SHUTDOWN_GRACE", default_value = "5s",
          value_parser = config::duration(Duration::ZERO, Duration::from_secs(600), Unit::Millis))]
    pub shutdown_grace: Duration,

    /// Live MCP sessions of the `initialize` era at most (HTTP); more are refused until some close or idle out.
    #[arg(long = "mcp-max-sessions", env = "MCP_MAX_SESSIONS", default_value = "256", value_parser = config::ranged(1usize, 100_000))]
    pub max_sessions: usize,

    /// Largest HTTP request body in bytes (413 beyond it). A bridge whose tools take more in one call (the
    /// sandbox's 10 MB files) raises it by itself. Not stdio's: a line there may hold 16 MiB (a longer one is
    /// answered with an error when its request's id can be read, and not read).
    #[arg(long = "mcp-max-request-bytes", env = "MCP_MAX_REQUEST_BYTES", default_value = "4194304", value_parser = config::ranged(65_536usize, 268_435_456))]
    pub max_request_bytes: usize,

    /// Request bodies held at once over HTTP, in bytes (at least the largest body), counting what each decodes
    /// to (about 256 bytes per JSON value beside its text): a request whose body does not fit beside the others
    /// is refused with 503 and may retry; one that could never fit, with 413.
    #[arg(long = "mcp-max-pending-request-bytes", env = "MCP_MAX_PENDING_REQUEST_BYTES", default_value = "67108864", value_parser = config::ranged(1_048_576usize, 4_294_967_296))]
    pub max_pending_request_bytes: usize,

    /// An `initialize`-era HTTP session with no traffic for this long is closed.
    #[arg(value_name = "DURATION", long = "mcp-session-idle", alias = "mcp-session-idle-ms", env = "MCP_SESSION_IDLE", default_value = "5m",
          value_parser = config::duration(Duration::from_secs(1), Duration::from_secs(86_400), Unit::Millis))]
    pub session_idle: Duration,

    /// Open HTTP connections at most; more wait in the kernel's backlog until one closes.
    #[arg(long = "mcp-max-connections", env = "MCP_MAX_CONNECTIONS", default_value = "1024", value_parser = config::ranged(1usize, 100_000))]
    pub max_connections: usize,

    /// Open HTTP connections from one address (IPv6: one /64) at most; more are closed at once.
    #[arg(long = "mcp-max-connections-per-ip", env = "MCP_MAX_CONNECTIONS_PER_IP", default_value = "256", value_parser = config::ranged(1usize, 100_000))]
    pub max_connections_per_ip: usize,

    /// How long a new HTTP connection has to send its first request head before it is closed.
    #[arg(value_name = "DURATION", long = "mcp-handshake-timeout", env = "MCP_HANDSHAKE_TIMEOUT", default_value = "10s",
          value_parser = config::duration(Duration::from_millis(100), Duration::from_secs(600), Unit::Millis))]
    pub handshake_timeout: Duration,

    /// How long a kept-alive HTTP connection with no request in flight is kept before it is closed.
    #[arg(value_name = "DURATION", long = "mcp-idle-timeout", env = "MCP_IDLE_TIMEOUT", default_value = "5s",
          value_parser = config::duration(Duration::from_millis(100), Duration::from_secs(600), Unit::Millis))]
    pub idle_timeout: Duration,

    /// Log format on stderr (stdout carries the stdio transport and never gets logs).
    #[arg(long = "log-format", env = "MCP_LOG_FORMAT", default_value = "text")]
    pub log_format: LogFormat,
}

impl McpArgs {
    /// `(variable, older name)` of the MCP flags, read when the new name is unset (see `BridgeEntry::ENV_ALIASES`).
    pub const ENV_ALIASES: &'static [(&'static str, &'static str)] = &[
        ("MCP_SHUTDOWN_GRACE", "MCP_SHUTDOWN_GRACE_MS"),
        ("MCP_SESSION_IDLE", "MCP_SESSION_IDLE_MS"),
    ];

    /// The transport the user chose, or the bridge's default. The flags win over `--transport`/MCP_TRANSPORT,
    /// so a variable set for a whole machine never breaks a command line that names its transport.
    pub fn transport(&self, default: Transport) -> Transport {
        match (self.http, self.stdio) {
            (true, true) => Transport::Both,
            (true, false) => Transport::Http,
            (false, true) => Transport::Stdio,
            (false, false) => self.transport.unwrap_or(default),
        }
    }

    /// Whether no flag or variable chose the transport, so the bridge's default applies.
    pub fn transport_is_default(&self) -> bool {
        !self.http && !self.stdio && self.transport.is_none()
    }

    /// The HTTP transport's address is refused beyond loopback without `--mcp-token`: see [`check_exposure`].
    pub fn check_exposure(&self) -> Result<(), ExposureError> {
        check_exposure(
            "MCP over HTTP",
            self.mcp_host,
            "--mcp-host (MCP_HOST)",
            self.mcp_token.is_some(),
            "--mcp-token (MCP_TOKEN)",
        )
    }
}

/// A listener asked to bind beyond loopback with no token to keep strangers out.
#[derive(Debug, thiserror::Error)]
#[error(
    "{what} would listen on {host}, beyond this machine, without a token: anyone who can reach it could use it. \
     Set {token_flag}, or bind a loopback address such as 127.0.0.1 with {host_flag}."
)]
pub struct ExposureError {
    pub what: &'static str,
    pub host: IpAddr,
    pub host_flag: &'static str,
    pub token_flag: &'static str,
}

/// The one rule of every listener (MCP HTTP, the game links, the relay): loopback by default, and an address
/// other machines can reach only with a token, refused at start rather than warned about in a log nobody reads.
pub fn check_exposure(
    what: &'static str,
    host: IpAddr,
    host_flag: &'static str,
    token_set: bool,
    token_flag: &'static str,
) -> Result<(), ExposureError> {
    if host.is_loopback() || token_set {
        return Ok(());
    }
    Err(ExposureError {
        what,
        host,
        host_flag,
        token_flag,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        mcp: McpArgs,
    }

    fn chosen(args: &[&str], default: Transport) -> Transport {
        let argv = std::iter::once("x").chain(args.iter().copied());
        Cli::try_parse_from(argv).unwrap().mcp.transport(default)
    }

    #[test]
    fn the_flags_win_over_the_transport_option_which_wins_over_the_default() {
        use Transport::{Both, Http, Stdio};
        let cases: [(&[&str], Transport, Transport); 7] = [
            (&[], Stdio, Stdio),
            (&[], Both, Both),
            (&["--http"], Stdio, Http),
            (&["--stdio"], Http, Stdio),
            (&["--stdio", "--http"], Stdio, Both),
            (&["--transport", "both"], Http, Both),
            (&["--transport", "both", "--stdio"], Http, Stdio),
        ];
        for (args, default, want) in cases {
            assert_eq!(
                chosen(args, default),
                want,
                "{args:?} with default {default:?}"
            );
        }
    }

    #[test]
    fn durations_take_units_and_the_older_ms_flags_still_work() {
        let parse = |args: &[&str]| {
            let argv = std::iter::once("x").chain(args.iter().copied());
            Cli::try_parse_from(argv).map(|c| (c.mcp.shutdown_grace, c.mcp.session_idle))
        };
        let defaults = parse(&[]).unwrap();
        assert_eq!(defaults, (Duration::from_secs(5), Duration::from_secs(300)));
        let new = parse(&["--shutdown-grace", "2s", "--mcp-session-idle", "1m"]).unwrap();
        assert_eq!(new, (Duration::from_secs(2), Duration::from_secs(60)));
        let old = parse(&[
            "--shutdown-grace-ms",
            "2000",
            "--mcp-session-idle-ms",
            "60000",
        ])
        .unwrap();
        assert_eq!(old, new);
        let err = parse(&["--shutdown-grace", "11m"])
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("MCP_SHUTDOWN_GRACE (--shutdown-grace)") && err.contains("10m"),
            "{err}"
        );
    }

    /// Bouvet's BOUVET_TRANSPORT values: any case, and `sse`/`remote` for HTTP.
    #[test]
    fn the_transport_option_takes_any_case_and_bouvets_names() {
        use Transport::{Both, Http, Stdio};
        for (value, want) in [
            ("STDIO", Stdio),
            ("Both", Both),
            ("HTTP", Http),
            ("sse", Http),
            ("Remote", Http),
        ] {
            assert_eq!(chosen(&["--transport", value], Stdio), want, "{value}");
        }
        let argv = ["x", "--transport", "carrier-pigeon"];
        assert!(Cli::try_parse_from(argv).is_err());
    }
}
