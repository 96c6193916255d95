//! Command-line flags (each with an environment variable) of `mcp-bridges bitburner`.

use bridge_core::config::{self, Unit};
use bridge_core::serve::McpArgs;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Origins the game itself connects from: the hosted web build, local builds (`npm run start`, the jsdom
/// test environment sends `http://localhost`), and the Steam/Electron build, which loads the game from
/// `file://`. A missing Origin (a non-browser program on this machine) is accepted too.
pub const DEFAULT_GAME_ORIGINS: [&str; 8] = [
    "https://bitburner-official.github.io",
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://[::1]:*",
    "https://[::1]:*",
    "file://",
];

/// `mcp-bridges bitburner [push|pull DIR]`.
#[derive(Debug, Clone, clap::Args)]
pub struct BitburnerArgs {
    #[command(flatten)]
    pub mcp: McpArgs,
    #[command(flatten)]
    pub game: GameArgs,
    /// Without a command: serve MCP. With one: sync files once and exit.
    #[command(subcommand)]
    pub command: Option<BitburnerCommand>,
}

/// One-shot file sync for players, with the same code as the MCP tools.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum BitburnerCommand {
    /// Upload every script and text file under DIR to the game (paths relative to DIR), then exit; exits
    /// non-zero when any file failed. Records what it wrote in DIR/.bitburner-sync.json for `pull`.
    Push(SyncArgs),
    /// Download every script and text file of a game server into DIR, then exit. A local file changed since
    /// the last push or pull is kept, not overwritten, unless --force: DIR/.bitburner-sync.json records a hash
    /// of each file as last synced (a file the manifest does not know counts as changed when it differs).
    Pull(SyncArgs),
    /// Both ways at once: each file goes from the side that changed it since the last sync; a file changed on
    /// both sides is a conflict (the game's version kept as NAME.game.EXT). With --watch, keep going: push a
    /// local file when it is saved, poll the game for its edits and pull them, and keep
    /// DIR/NetscriptDefinitions.d.ts up to date, until Ctrl-C.
    Sync(WatchArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub sync: SyncArgs,
    /// Keep syncing until interrupted.
    #[arg(long)]
    pub watch: bool,
    /// --watch: how often to look for edits made in the game (one getAllFiles).
    #[arg(value_name = "DURATION", long = "poll", alias = "poll-ms", env = "BITBURNER_POLL", default_value = "2s",
          value_parser = config::duration(Duration::from_millis(100), Duration::from_secs(3600), Unit::Millis))]
    pub poll: Duration,
    /// --watch: how long a local file must stay unchanged before it is pushed (editors write in bursts and
    /// in steps; a half-saved file is never pushed).
    #[arg(value_name = "DURATION", long = "debounce", alias = "debounce-ms", env = "BITBURNER_DEBOUNCE", default_value = "300ms",
          value_parser = config::duration(Duration::ZERO, Duration::from_secs(60), Unit::Millis))]
    pub debounce: Duration,
}

#[derive(Debug, Clone, clap::Args)]
pub struct SyncArgs {
    /// Local directory.
    pub dir: PathBuf,
    /// In-game server to sync with.
    #[arg(long, default_value = "home")]
    pub server: String,
    /// How long to wait for the game to connect.
    #[arg(value_name = "DURATION", long = "wait", alias = "wait-ms", env = "BITBURNER_WAIT", default_value = "2m",
          value_parser = config::duration(Duration::ZERO, Duration::from_secs(3600), Unit::Millis))]
    pub wait: Duration,
    /// Copy even over a side changed since the last sync (push: over game edits; pull: over local edits;
    /// sync: the local side wins). Without it such a file is a conflict and the command fails.
    #[arg(long)]
    pub force: bool,
}

/// How the game reaches the bridge, and the limits of what the bridge sends it.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Game link")]
pub struct GameArgs {
    /// Address the game's WebSocket listener binds (the game connects to it: Options → Remote API).
    #[arg(id = "game_host", long = "bitburner-game-host", alias = "game-host", value_name = "IP", env = "BITBURNER_GAME_HOST", default_value = "127.0.0.1",
          value_parser = config::ip())]
    pub host: IpAddr,

    /// Port the game connects to. bitburner-filesync and viteburner default to 12525 too: run only one,
    /// or give this bridge another port and enter the same port in the game.
    #[arg(id = "game_port", long = "bitburner-game-port", alias = "game-port", value_name = "PORT", env = "BITBURNER_GAME_PORT", default_value = "12525",
          value_parser = config::ranged(0u16, 65535))]
    pub port: u16,

    /// Extra Origins allowed to connect as the game, added to the built-in list (the web build,
    /// localhost, file://). `*` allows any; `null` is needed if your game build sends `Origin: null`.
    #[arg(
        id = "game_allowed_origins",
        long = "bitburner-game-allowed-origin",
        alias = "game-allowed-origin",
        value_name = "ORIGINS",
        env = "BITBURNER_GAME_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,

    /// Deadline of one request to the game (the game has none and silently ignores some requests).
    #[arg(value_name = "DURATION", long = "bitburner-rpc-timeout", aliases = ["rpc-timeout", "rpc-timeout-ms"], env = "BITBURNER_RPC_TIMEOUT", default_value = "5s",
          value_parser = config::duration(Duration::from_millis(1), Duration::from_secs(600), Unit::Millis))]
    pub rpc_timeout: Duration,

    /// Deadline of `get_save_file` (the game builds a save of several MB first).
    #[arg(value_name = "DURATION", long = "bitburner-save-timeout", aliases = ["save-timeout", "save-timeout-ms"], env = "BITBURNER_SAVE_TIMEOUT", default_value = "1m",
          value_parser = config::duration(Duration::from_millis(1), Duration::from_secs(600), Unit::Millis))]
    pub save_timeout: Duration,

    /// Largest `content` `write_file` sends, in bytes (UTF-8).
    #[arg(long = "bitburner-file-write-max-bytes", alias = "file-write-max-bytes", env = "BITBURNER_FILE_WRITE_MAX_BYTES", default_value = "1000000",
          value_parser = config::ranged(1usize, 64 << 20))]
    pub file_write_max_bytes: usize,

    /// How long a tool call waits for the game to connect before failing with E_DISCONNECTED.
    #[arg(value_name = "DURATION", long = "bitburner-connect-wait", aliases = ["connect-wait", "connect-wait-ms"], env = "BITBURNER_CONNECT_WAIT", default_value = "0s",
          value_parser = config::duration(Duration::ZERO, Duration::from_secs(600), Unit::Millis))]
    pub connect_wait: Duration,

    /// How often the bridge pings the game to notice a game that vanished without closing (0: never).
    #[arg(value_name = "DURATION", long = "bitburner-ping-interval", aliases = ["ping-interval", "ping-interval-ms"], env = "BITBURNER_PING_INTERVAL", default_value = "15s",
          value_parser = config::duration(Duration::ZERO, Duration::from_secs(600), Unit::Millis))]
    pub ping_interval: Duration,

    /// Directory `get_save_file` may write saves into. Without it, `get_save_file` is refused.
    #[arg(
        long = "bitburner-save-dir",
        alias = "save-dir",
        env = "BITBURNER_SAVE_DIR"
    )]
    pub save_dir: Option<PathBuf>,

    /// How long a new connection to the game port has to send its request head before it is closed.
    #[arg(id = "game_handshake_timeout", value_name = "DURATION", long = "bitburner-game-handshake-timeout", alias = "game-handshake-timeout", env = "BITBURNER_GAME_HANDSHAKE_TIMEOUT", default_value = "10s",
          value_parser = config::duration(Duration::from_millis(100), Duration::from_secs(600), Unit::Millis))]
    pub handshake_timeout: Duration,

    /// How long a kept-alive HTTP connection to the game port with no request in flight is kept (the game's
    /// WebSocket link is judged by its pings instead).
    #[arg(id = "game_idle_timeout", value_name = "DURATION", long = "bitburner-game-idle-timeout", alias = "game-idle-timeout", env = "BITBURNER_GAME_IDLE_TIMEOUT", default_value = "5s",
          value_parser = config::duration(Duration::from_millis(100), Duration::from_secs(600), Unit::Millis))]
    pub idle_timeout: Duration,
}

impl GameArgs {
    /// The settings with their documented defaults, for tests and embedding.
    pub fn defaults() -> Self {
        Self {
            host: IpAddr::from([127, 0, 0, 1]),
            port: 12525,
            allowed_origins: Vec::new(),
            rpc_timeout: Duration::from_millis(5000),
            save_timeout: Duration::from_secs(60),
            file_write_max_bytes: 1_000_000,
            connect_wait: Duration::ZERO,
            ping_interval: Duration::from_secs(15),
            save_dir: None,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(5),
        }
    }

    /// The built-in origins plus the user's.
    pub fn origin_patterns(&self) -> Vec<String> {
        DEFAULT_GAME_ORIGINS
            .iter()
            .map(|s| (*s).to_owned())
            .chain(self.allowed_origins.iter().map(|s| s.trim().to_owned()))
            .filter(|s| !s.is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::path::Path;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: BitburnerArgs,
    }

    #[test]
    fn defaults_match_the_documented_ones() {
        let cli = Cli::try_parse_from(["x"]).map(|c| c.args.game);
        let game = cli
            .as_ref()
            .map(|g| (g.host, g.port, g.rpc_timeout, g.file_write_max_bytes));
        let d = GameArgs::defaults();
        assert_eq!(
            game.ok(),
            Some((d.host, d.port, d.rpc_timeout, d.file_write_max_bytes))
        );
        let limits = cli.as_ref().map(|g| (g.handshake_timeout, g.idle_timeout));
        assert_eq!(limits.ok(), Some((d.handshake_timeout, d.idle_timeout)));
    }

    #[test]
    fn push_and_pull_are_subcommands() {
        let cli = Cli::try_parse_from(["x", "--bitburner-game-port", "12600", "push", "scripts"]);
        let Ok(cli) = cli else {
            panic!("push did not parse");
        };
        assert_eq!(cli.args.game.port, 12600);
        assert!(
            matches!(cli.args.command, Some(BitburnerCommand::Push(ref s)) if s.dir == Path::new("scripts"))
        );
    }

    #[test]
    fn sync_takes_watch_and_its_intervals() {
        let cli = Cli::try_parse_from(["x", "sync", "scripts", "--watch", "--poll", "500ms"]);
        let Ok(cli) = cli else {
            panic!("sync did not parse");
        };
        let Some(BitburnerCommand::Sync(w)) = cli.args.command else {
            panic!("not sync");
        };
        assert!(w.watch && !w.sync.force);
        assert_eq!(w.poll, Duration::from_millis(500));
        assert_eq!(w.debounce, Duration::from_millis(300));
        assert_eq!(w.sync.dir, Path::new("scripts"));
    }

    #[test]
    fn a_bad_value_names_its_variable() {
        let err = Cli::try_parse_from(["x", "--bitburner-rpc-timeout", "0s"])
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("BITBURNER_RPC_TIMEOUT (--bitburner-rpc-timeout)")));
    }

    #[test]
    fn the_older_ms_flags_read_milliseconds() {
        let cli = Cli::try_parse_from([
            "x",
            "--rpc-timeout-ms",
            "2500",
            "--bitburner-connect-wait",
            "3s",
        ]);
        let game = cli.map(|c| c.args.game).ok();
        assert_eq!(
            game.map(|g| (g.rpc_timeout, g.connect_wait)),
            Some((Duration::from_millis(2500), Duration::from_secs(3)))
        );
    }
}
