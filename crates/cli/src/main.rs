//! `mcp-bridges`: one program, one subcommand per bridge, and `serve` for several bridges in one MCP server.
//! It parses configuration and starts bridges; everything else lives in the bridge crates and the core.

mod commands;
mod config_file;
mod env_alias;
mod serve;

use bridge_core::bridge::{DynEntry, Entry};
use bridge_core::serve::LogFormat;
use bridge_core::{BridgeEntry, BridgeError};
use clap::{CommandFactory, FromArgMatches, Parser};
use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

// The event paths (relay, event streams, poll pages) allocate and free small JSON pieces tens of thousands of
// times a second; with glibc's allocator about 40 % of the relay's and the MCP server's CPU went to malloc and
// free at 50 000 events/s (perf, issue 22). mimalloc's per-thread free lists cut that.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// THE table of bridges. Adding a bridge is one line here: its subcommand's help and its [`BridgeEntry`].
macro_rules! bridges {
    ($( $(#[doc = $doc:literal])* $variant:ident => $entry:ty, )*) => {
        #[derive(clap::Subcommand)]
        enum BridgeCommand {
            $(
                $(#[doc = $doc])*
                #[command(name = <$entry as BridgeEntry>::NAME)]
                $variant(<$entry as BridgeEntry>::Command),
            )*
            /// Several bridges side by side in one MCP server: `serve --bridge A --bridge B` or `serve --config FILE`.
            Serve(serve::ServeArgs),
        }

        /// Every bridge `serve` can mount, in the table's order.
        const BRIDGES: &[&dyn DynEntry] = &[$( &Entry::<$entry>::new(), )*];

        impl BridgeCommand {
            fn log_format(&self) -> LogFormat {
                match self {
                    $( Self::$variant(command) => <$entry as BridgeEntry>::mcp(command).log_format, )*
                    Self::Serve(args) => args.mcp.log_format,
                }
            }

            async fn run(self, serve_matches: Option<&clap::ArgMatches>) -> Result<(), BridgeError> {
                match self {
                    $( Self::$variant(command) => <$entry as BridgeEntry>::run(command).await, )*
                    Self::Serve(args) => serve::run(args, BRIDGES, serve_matches).await,
                }
            }
        }
    };
}

bridges! {
    /// Bitburner: read, write and check the game's scripts through its Remote API.
    Bitburner => bridge_bitburner::Bitburner,
    /// ComputerCraft: run Lua, move turtles and manage files on CC:Tweaked computers.
    Computercraft => bridge_computercraft::ComputerCraft,
    /// Sandbox: disposable code sandboxes (Bouvet's tools), isolated by Linux namespaces.
    Sandbox => bridge_sandbox::Sandbox,
    /// Minecraft: commands, players and world through the relay; game events as streams.
    Minecraft => bridge_minecraft::Minecraft,
    /// Debug: VSC-Bridge's debugging tools over VS Code's file protocol, or headless over DAP (debugpy, lldb-dap).
    Debug => bridge_debug::Debug,
}

#[derive(Parser)]
#[command(
    name = "mcp-bridges",
    version,
    about = "MCP servers that let AI agents work on live systems",
    long_about = "MCP servers that let AI agents work on live systems.\n\n\
        Each subcommand is one bridge; `serve` mounts several in one MCP server. Every flag also reads the \
        environment variable shown in its help.\n\
        Logs go to stderr (RUST_LOG=debug for more); stdout carries MCP when serving over stdio.\n\n\
        Examples:\n  \
        mcp-bridges bitburner                      # stdio MCP; the game connects to ws://127.0.0.1:12525\n  \
        mcp-bridges bitburner --http               # Streamable HTTP at http://127.0.0.1:3000/mcp\n  \
        mcp-bridges bitburner push ./scripts       # upload a folder to the game once, then exit\n  \
        mcp-bridges computercraft                  # stdio and HTTP MCP on :3000; computers link to :3001\n  \
        mcp-bridges debug -w .                     # debugging tools; `debug-host` runs the file protocol's host\n  \
        mcp-bridges serve --bridge bitburner --bridge computercraft --http   # both in one server"
)]
struct Cli {
    #[command(subcommand)]
    command: TopCommand,
}

/// The bridges' subcommands, then the table of commands that are not MCP servers.
// One of each is built per run, from the command line: the variants' sizes differ, the memory does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(clap::Subcommand)]
enum TopCommand {
    #[command(flatten)]
    Bridge(BridgeCommand),
    #[command(flatten)]
    Command(commands::TopLevel),
}

/// What a parsed command line runs.
#[allow(clippy::large_enum_variant)] // one per run, as TopCommand
enum Job {
    /// Bridges served over MCP, alone or in `serve`: the core's serving loop watches the signals.
    Serve(BridgeCommand),
    /// A command that is not an MCP server, a bridge's own ones included (`debug host`, `bitburner push`).
    Command(commands::Command),
}

impl From<TopCommand> for Job {
    fn from(top: TopCommand) -> Self {
        match top {
            TopCommand::Command(command) => Self::Command(command.into()),
            TopCommand::Bridge(BridgeCommand::Debug(bridge_debug::DebugCommand {
                mcp,
                debug,
                sub: Some(bridge_debug::DebugSub::Host(host)),
            })) => Self::Command(commands::Command::DebugHost { mcp, debug, host }),
            TopCommand::Bridge(BridgeCommand::Bitburner(bridge_bitburner::BitburnerArgs {
                mcp,
                game,
                command: Some(command),
            })) => Self::Command(commands::Command::Bitburner { mcp, game, command }),
            TopCommand::Bridge(bridge) => Self::Serve(bridge),
        }
    }
}

impl Job {
    fn log_format(&self) -> LogFormat {
        match self {
            Self::Serve(bridge) => bridge.log_format(),
            Self::Command(command) => command.log_format(),
        }
    }

    async fn run(self, serve_matches: Option<&clap::ArgMatches>) -> Result<(), BridgeError> {
        match self {
            Self::Serve(bridge) => bridge.run(serve_matches).await,
            Self::Command(command) => command.run().await,
        }
    }

    /// The threads its runtime gets: what `--minecraft-worker-threads` asks of the Minecraft relay and MCP
    /// server (event routers, whose hops then never wait for another thread to wake: issue 22), one per core
    /// for everything else, `serve` included (its bridges may block a worker for a while).
    fn worker_threads(&self) -> usize {
        match self {
            Self::Serve(BridgeCommand::Minecraft(command)) => command.worker_threads(),
            Self::Command(commands::Command::MinecraftRelay(command)) => command.worker_threads,
            _ => 0,
        }
    }
}

/// The runtime for `worker_threads` threads: 1 is tokio's current-thread runtime (the job and every task on
/// the main thread), 0 one worker per core (or TOKIO_WORKER_THREADS), more that many workers.
fn runtime(worker_threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = match worker_threads {
        1 => tokio::runtime::Builder::new_current_thread(),
        0 => tokio::runtime::Builder::new_multi_thread(),
        n => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(n);
            builder
        }
    };
    builder.enable_all().build()
}

/// The command line with every bridge's own flags added to `serve`, and the bridges' older variable names.
fn command() -> clap::Command {
    let command = Cli::command().mut_subcommand("serve", |serve| {
        serve::augment(serve, BRIDGES, commands::NAMES)
    });
    let aliases: Vec<(&'static str, &'static str)> = BRIDGES
        .iter()
        .flat_map(|entry| entry.env_aliases().iter().copied())
        .chain(bridge_core::serve::McpArgs::ENV_ALIASES.iter().copied())
        .collect();
    env_alias::apply(command, &aliases)
}

/// Says once for each flag the user named by an older name (`--game-port` for `--bitburner-game-port`), on
/// every command along the path they ran (`debug host` has `debug`'s flags too).
fn warn_older_flags(command: &clap::Command, matches: &clap::ArgMatches) {
    bridge_core::config::warn_older_flags(command);
    if let Some((name, sub_matches)) = matches.subcommand()
        && let Some(sub) = command.find_subcommand(name)
    {
        warn_older_flags(sub, sub_matches);
    }
}

/// How long the runtime waits, once the command returned, for blocking work still running (a stdin read).
const SHUTDOWN_LEFTOVERS: Duration = Duration::from_secs(1);

/// Commands of their own that are a bridge's sub-subcommand underneath: `mcp-bridges debug-host …` is
/// `mcp-bridges debug host …` (the name VSC-Bridge users know for the extension's side).
const SHORTHANDS: &[(&str, &[&str])] = &[("debug-host", &["debug", "host"])];

fn expand_shorthands(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    if let Some(first) = args.get(1)
        && let Some((_, expansion)) = SHORTHANDS.iter().find(|(short, _)| first == *short)
    {
        args.splice(1..2, expansion.iter().map(OsString::from));
    }
    args
}

fn main() -> ExitCode {
    // The static sandbox agent build.rs built; the sandbox bridge writes it into its state dir when used.
    #[cfg(embedded_agent)]
    bridge_sandbox::agent_bin::embed(include_bytes!(concat!(env!("OUT_DIR"), "/sandbox-agent")));
    let mut matches = command().get_matches_from(expand_shorthands(std::env::args_os()));
    if let Some(("serve", serve_matches)) = matches.subcommand()
        && let Some(file) = serve_matches.get_one::<std::path::PathBuf>("config")
    {
        matches = match config_file::reparse(command(), file, BRIDGES) {
            Ok(matches) => matches,
            Err(e) => {
                let _ = e.print();
                eprintln!(
                    "(settings come from {} — `[bitburner] game-port` is the flag `--bitburner-game-port` — and from the command line)",
                    file.display()
                );
                return ExitCode::from(2);
            }
        };
    }
    warn_older_flags(&command(), &matches);
    let job = match Cli::from_arg_matches(&matches) {
        Ok(cli) => Job::from(cli.command),
        Err(e) => e.exit(),
    };
    bridge_core::serve::init_logging(job.log_format());
    let runtime = match runtime(job.worker_threads()) {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let serve_matches = matches.subcommand_matches("serve");
    let outcome = runtime.block_on(job.run(serve_matches));
    // The work is done; what may still run is a read of stdin on tokio's blocking pool (its stdio, used when
    // stdin or stdout is not a pipe), which ends only when the client writes or closes. Dropping the runtime
    // would wait for it, so a bridge told to stop would not.
    runtime.shutdown_timeout(SHUTDOWN_LEFTOVERS);
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flag names from the core and from each bridge share one namespace; clap checks they do not collide,
    /// in each subcommand and in `serve`, which has them all.
    #[test]
    fn command_line_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn a_shorthand_expands_only_in_the_command_position() {
        let argv = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            expand_shorthands(argv(&[
                "mcp-bridges",
                "debug-host",
                "--debug-workspace",
                "w"
            ])),
            argv(&["mcp-bridges", "debug", "host", "--debug-workspace", "w"])
        );
        let untouched = argv(&["mcp-bridges", "debug", "--debug-workspace", "debug-host"]);
        assert_eq!(expand_shorthands(untouched.clone()), untouched);
        for (short, expansion) in SHORTHANDS {
            let mut args = vec![OsString::from("mcp-bridges")];
            args.extend(expansion.iter().map(OsString::from));
            args.push("--help".into());
            let err = command().try_get_matches_from(args).err();
            assert_eq!(
                err.map(|e| e.kind()),
                Some(clap::error::ErrorKind::DisplayHelp),
                "{short} expands to a real command"
            );
        }
    }

    /// `serve` mounts bridges only: a name in the commands' table is never one of them.
    #[test]
    fn no_command_is_a_bridge() {
        for name in commands::NAMES {
            assert!(
                BRIDGES.iter().all(|entry| entry.name() != *name),
                "{name} is in both tables"
            );
        }
        assert!(
            command().find_subcommand("minecraft-relay").is_some(),
            "the relay keeps its own command"
        );
    }

    /// The threads a command line's runtime gets: one for the Minecraft relay and for an MCP server dialling a
    /// relay, one per core where the relay runs in-process, in `serve` and for every other bridge; the flag
    /// says otherwise and its help says so.
    #[test]
    fn the_minecraft_routers_run_on_one_thread_unless_told_otherwise() {
        let threads = |args: &[&str]| {
            let matches = command()
                .try_get_matches_from(std::iter::once("mcp-bridges").chain(args.iter().copied()))
                .map_err(|e| e.to_string())?;
            let cli = Cli::from_arg_matches(&matches).map_err(|e| e.to_string())?;
            Ok::<_, String>(Job::from(cli.command).worker_threads())
        };
        let remote = [
            "minecraft",
            "--minecraft-relay-url",
            "ws://127.0.0.1:1",
            "--minecraft-relay-token",
            "t",
        ];
        assert_eq!(threads(&["minecraft-relay"]), Ok(1));
        assert_eq!(
            threads(&["minecraft-relay", "--minecraft-worker-threads", "0"]),
            Ok(0)
        );
        assert_eq!(threads(&remote), Ok(1));
        assert_eq!(
            threads(&[&remote[..], &["--minecraft-worker-threads", "3"]].concat()),
            Ok(3)
        );
        assert_eq!(threads(&["minecraft"]), Ok(0), "the relay in-process");
        assert_eq!(
            threads(&["minecraft", "--minecraft-worker-threads", "1"]),
            Ok(1)
        );
        assert_eq!(threads(&["bitburner"]), Ok(0));
        assert_eq!(threads(&["serve", "--bridge", "minecraft"]), Ok(0));
        let refused = threads(&[
            "serve",
            "--bridge",
            "minecraft",
            "--minecraft-worker-threads",
            "1",
        ]);
        assert!(refused.is_err(), "serve keeps one per core: {refused:?}");
        let too_many = threads(&["minecraft-relay", "--minecraft-worker-threads", "1000"]);
        assert!(
            too_many.as_ref().is_err_and(
                |e| e.contains("MINECRAFT_WORKER_THREADS") && e.contains("from 0 to 256")
            ),
            "{too_many:?}"
        );
        for sub in ["minecraft", "minecraft-relay"] {
            let help = command()
                .find_subcommand_mut(sub)
                .map(|c| c.render_long_help().to_string())
                .unwrap_or_default();
            assert!(
                help.contains("--minecraft-worker-threads")
                    && help.contains("MINECRAFT_WORKER_THREADS"),
                "{sub} --help teaches the flag:\n{help}"
            );
        }
    }

    /// One thread is tokio's current-thread runtime: the job and every task it spawns run on the caller's
    /// thread; other counts are worker pools of that size.
    #[test]
    fn one_thread_runs_every_task_on_the_main_thread() {
        use tokio::runtime::RuntimeFlavor;
        let one = runtime(1).unwrap();
        let here = std::thread::current().id();
        let (flavor, task_thread) = one.block_on(async {
            let task = tokio::spawn(async { std::thread::current().id() });
            (
                tokio::runtime::Handle::current().runtime_flavor(),
                task.await.unwrap(),
            )
        });
        assert_eq!(flavor, RuntimeFlavor::CurrentThread);
        assert_eq!(task_thread, here);
        let three = runtime(3).unwrap();
        assert_eq!(three.handle().runtime_flavor(), RuntimeFlavor::MultiThread);
        assert_eq!(three.metrics().num_workers(), 3);
        let per_core = runtime(0).unwrap();
        assert_eq!(
            per_core.handle().runtime_flavor(),
            RuntimeFlavor::MultiThread
        );
        assert!(per_core.metrics().num_workers() >= 1);
    }

    #[test]
    fn every_bridge_has_its_subcommand_under_its_name() {
        let cmd = command();
        for entry in BRIDGES {
            assert!(
                cmd.find_subcommand(entry.name()).is_some(),
                "{}",
                entry.name()
            );
        }
    }
}
