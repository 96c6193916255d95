//! `mcp-bridges`: one program, one subcommand per bridge. It parses configuration and starts a bridge;
//! everything else lives in the bridge crates and the core.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "mcp-bridges",
    version,
    about = "MCP servers that let AI agents work on live systems",
    long_about = "MCP servers that let AI agents work on live systems.\n\n\
        Each subcommand is one bridge. Every flag also reads the environment variable shown in its help.\n\
        Logs go to stderr (RUST_LOG=debug for more); stdout carries MCP when serving over stdio.\n\n\
        Examples:\n  \
        mcp-bridges bitburner                      # stdio MCP; the game connects to ws://127.0.0.1:12525\n  \
        mcp-bridges bitburner --http               # Streamable HTTP at http://127.0.0.1:3000/mcp\n  \
        mcp-bridges bitburner push ./scripts       # upload a folder to the game once, then exit\n  \
        mcp-bridges computercraft                  # HTTP MCP on :3000; computers link to :3001"
)]
struct Cli {
    #[command(subcommand)]
    bridge: BridgeCommand,
}

#[derive(Subcommand)]
enum BridgeCommand {
    /// Bitburner: read, write and check the game's scripts through its Remote API.
    Bitburner(bridge_bitburner::BitburnerArgs),
    /// ComputerCraft: run Lua, move turtles and manage files on CC:Tweaked computers.
    Computercraft(bridge_computercraft::CcArgs),
}

impl BridgeCommand {
    fn log_format(&self) -> bridge_core::serve::LogFormat {
        match self {
            Self::Bitburner(args) => args.mcp.log_format,
            Self::Computercraft(args) => args.mcp.log_format,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    bridge_core::serve::init_logging(cli.bridge.log_format());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result: anyhow::Result<()> = runtime.block_on(async {
        match cli.bridge {
            BridgeCommand::Bitburner(args) => bridge_bitburner::run(args).await?,
            BridgeCommand::Computercraft(args) => {
                bridge_computercraft::run(args, bridge_core::serve::shutdown_on_signals()).await?
            }
        }
        Ok(())
    });
    match result {
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
    use clap::CommandFactory;

    /// Flag names from the core and from each bridge share one namespace; clap checks they do not collide.
    #[test]
    fn command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
