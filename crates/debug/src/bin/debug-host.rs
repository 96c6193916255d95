//! `debug-host --debug-workspace W`: the same host as `mcp-bridges debug host`, as its own small program, so the
//! file-protocol tests can kill it like a crashed VS Code.

use bridge_debug::{DebugArgs, HostArgs};
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "debug-host",
    about = "VSC-Bridge's file-protocol host, headless, running jobs on real debuggers"
)]
struct Cli {
    #[command(flatten)]
    debug: DebugArgs,
    #[command(flatten)]
    host: HostArgs,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match bridge_debug::fsbridge::host::run(cli.debug, cli.host).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("debug-host: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
