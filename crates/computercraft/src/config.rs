//! Command-line flags (each with an environment variable) and the validated settings the bridge runs on.

use bridge_core::config::{self, Unit};
use bridge_core::link::OnDuplicate;
use bridge_core::serve::McpArgs;
use std::net::IpAddr;
use std::time::Duration;

/// `(variable, older name)`: the `CC_` names from before every variable took its bridge's name.
pub const ENV_ALIASES: &[(&str, &str)] = &[
    ("COMPUTERCRAFT_LINK_HOST", "CC_LINK_HOST"),
    ("COMPUTERCRAFT_LINK_PORT", "CC_LINK_PORT"),
    ("COMPUTERCRAFT_LINK_TOKEN", "CC_LINK_TOKEN"),
    ("COMPUTERCRAFT_PROBE_TIMEOUT", "CC_PROBE_TIMEOUT_MS"),
    ("COMPUTERCRAFT_MAX_IN_FLIGHT", "CC_MAX_IN_FLIGHT"),
    ("COMPUTERCRAFT_LINK_PUBLIC_URL", "CC_LINK_PUBLIC_URL"),
];

/// `mcp-bridges computercraft`: flags of the ComputerCraft bridge, plus the shared MCP transport flags.
#[derive(Debug, Clone, clap::Args)]
pub struct CcArgs {
    #[command(flatten)]
    pub mcp: McpArgs,

    #[command(flatten)]
    pub link: LinkArgs,
}

/// Where and how ComputerCraft computers link to the bridge.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "ComputerCraft link")]
pub struct LinkArgs {
    /// Address the computers' WebSocket link (and the installer) listens on. Loopback serves a Minecraft server
    /// on this machine; an address other machines reach (e.g. 0.0.0.0) is refused without --computercraft-link-token.
    #[arg(long = "computercraft-link-host", alias = "link-host", env = "COMPUTERCRAFT_LINK_HOST", default_value = "127.0.0.1", value_parser = config::ip())]
    pub host: IpAddr,

    /// Port of the link listener; `wget run http://<host>:<port>/install.lua` installs the client.
    #[arg(long = "computercraft-link-port", alias = "link-port", env = "COMPUTERCRAFT_LINK_PORT", default_value = "3001", value_parser = config::ranged(0u16, 65535))]
    pub port: u16,

    /// Token computers must present (the installer takes it as its argument and stores it in startup.lua).
    #[arg(
        long = "computercraft-link-token",
        alias = "link-token",
        env = "COMPUTERCRAFT_LINK_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,

    /// How long `probe-computers` waits for answers.
    #[arg(value_name = "DURATION", long = "computercraft-probe-timeout", aliases = ["probe-timeout", "probe-timeout-ms"], env = "COMPUTERCRAFT_PROBE_TIMEOUT", default_value = "2s",
          value_parser = config::duration(Duration::from_millis(1), Duration::from_secs(600), Unit::Millis))]
    pub probe_timeout: Duration,

    /// Requests in flight per computer. CC drops events beyond 256 queued, so keep this well below that.
    #[arg(long = "computercraft-max-in-flight", alias = "max-in-flight", env = "COMPUTERCRAFT_MAX_IN_FLIGHT", default_value = "16", value_parser = config::ranged(1usize, 64))]
    pub max_in_flight: usize,

    /// Address players' computers use to reach this bridge, e.g. `http://mc-host.example:3001`, when it differs
    /// from the one they downloaded the installer from (proxies, port forwarding).
    #[arg(
        long = "computercraft-link-public-url",
        alias = "link-public-url",
        env = "COMPUTERCRAFT_LINK_PUBLIC_URL"
    )]
    pub public_url: Option<String>,

    /// How long a new connection to the link port has to send its request head before it is closed.
    #[arg(id = "link_handshake_timeout", value_name = "DURATION", long = "computercraft-link-handshake-timeout", alias = "link-handshake-timeout", env = "COMPUTERCRAFT_LINK_HANDSHAKE_TIMEOUT", default_value = "10s",
          value_parser = config::duration(Duration::from_millis(100), Duration::from_secs(600), Unit::Millis))]
    pub handshake_timeout: Duration,

    /// How long a kept-alive HTTP connection to the link port (the installer's GETs) with no request in
    /// flight is kept; computers' WebSocket links are judged by their pings instead.
    #[arg(id = "link_idle_timeout", value_name = "DURATION", long = "computercraft-link-idle-timeout", alias = "link-idle-timeout", env = "COMPUTERCRAFT_LINK_IDLE_TIMEOUT", default_value = "5s",
          value_parser = config::duration(Duration::from_millis(100), Duration::from_secs(600), Unit::Millis))]
    pub idle_timeout: Duration,
}

/// Settings of the link side, independent of clap (tests build it directly).
#[derive(Debug, Clone)]
pub struct LinkConfig {
    pub token: Option<String>,
    pub probe_timeout: Duration,
    pub max_in_flight: usize,
    pub public_url: Option<String>,
    /// How long a new connection has to say hello.
    pub hello_timeout: Duration,
    /// WebSocket ping cadence; CC answers pings itself.
    pub ping_interval: Duration,
    pub pong_timeout: Duration,
    /// Deadline of requests whose tool has no timeout argument.
    pub request_timeout: Duration,
    /// What a hello with an id held by another link does: replace it, or be refused while the holder answers
    /// a ping (two live machines with one id).
    pub on_duplicate: OnDuplicate,
    /// The link port's deadlines for a connection's first request head and between requests.
    pub listen_handshake_timeout: Duration,
    pub listen_idle_timeout: Duration,
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            token: None,
            probe_timeout: Duration::from_millis(2000),
            max_in_flight: 16,
            public_url: None,
            hello_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(15),
            pong_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(15),
            // Two worlds on one bridge, or a computer copied in creative mode, give two live machines one id:
            // replacing would make them swap forever and send calls to either (issue 12). A rebooted
            // computer's old link is dead and does not answer the ping, so it is still replaced.
            on_duplicate: OnDuplicate::RefuseIfLive,
            listen_handshake_timeout: Duration::from_secs(10),
            listen_idle_timeout: Duration::from_secs(5),
        }
    }
}

impl From<&LinkArgs> for LinkConfig {
    fn from(a: &LinkArgs) -> Self {
        Self {
            token: a.token.clone().filter(|t| !t.is_empty()),
            probe_timeout: a.probe_timeout,
            max_in_flight: a.max_in_flight,
            public_url: a
                .public_url
                .clone()
                .map(|u| u.trim_end_matches('/').to_owned()),
            listen_handshake_timeout: a.handshake_timeout,
            listen_idle_timeout: a.idle_timeout,
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        cc: CcArgs,
    }

    #[test]
    fn defaults_match_the_documentation() {
        let cli = Cli::try_parse_from(["mcp-bridges"]).unwrap();
        assert_eq!(cli.cc.link.host.to_string(), "127.0.0.1");
        assert_eq!(cli.cc.link.port, 3001);
        assert_eq!(cli.cc.link.probe_timeout, Duration::from_millis(2000));
        let cfg = LinkConfig::from(&cli.cc.link);
        assert_eq!(cfg.max_in_flight, 16);
        assert!(cfg.token.is_none());
    }

    #[test]
    fn bad_values_name_their_variable() {
        let err = Cli::try_parse_from(["mcp-bridges", "--computercraft-probe-timeout", "0s"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("COMPUTERCRAFT_PROBE_TIMEOUT"), "{err}");
        let err = Cli::try_parse_from(["mcp-bridges", "--computercraft-link-host", "nowhere"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("COMPUTERCRAFT_LINK_HOST"), "{err}");
    }

    #[test]
    fn an_empty_token_is_no_token() {
        let cli = Cli::try_parse_from([
            "mcp-bridges",
            "--computercraft-link-token",
            "",
            "--computercraft-link-public-url",
            "http://h:1/",
        ])
        .unwrap();
        let cfg = LinkConfig::from(&cli.cc.link);
        assert!(cfg.token.is_none());
        assert_eq!(cfg.public_url.as_deref(), Some("http://h:1"));
    }
}
