//! The debug bridge: VSC-Bridge's debugging tools (generated from `*.meta.yaml`) served over one of two
//! backends: `vscode`, the file protocol of the VSC-Bridge extension (`.vsc-bridge/`), or `dap`, real debug
//! adapters (debugpy, lldb-dap, js-debug) run headless. `mcp-bridges debug host` is the extension's side of the file
//! protocol, running jobs on the `dap` backend, so the whole path works without VS Code.

pub mod backend;
pub mod catalog;
pub mod config;
pub mod dap;
mod docs;
pub mod envelope;
pub mod fsbridge;
mod tools;

pub use config::{DebugArgs, DebugCommand, DebugSub, HostArgs};

use bridge_core::serve::{McpArgs, Transport, run_alone};
use bridge_core::{Bridge, BridgeEntry, BridgeEnv, BridgeError};

/// `mcp-bridges debug`.
pub struct Debug;

impl BridgeEntry for Debug {
    const NAME: &'static str = "debug";
    const DEFAULT_TRANSPORT: Transport = Transport::Stdio;
    const ENV_ALIASES: &'static [(&'static str, &'static str)] = config::ENV_ALIASES;
    type Args = DebugArgs;
    type Command = DebugCommand;

    fn mcp(command: &DebugCommand) -> &McpArgs {
        &command.mcp
    }

    async fn start(args: DebugArgs, env: &BridgeEnv) -> Result<Bridge, BridgeError> {
        let catalog = match &args.manifest {
            Some(path) => catalog::Catalog::load(path)?,
            None => catalog::Catalog::builtin()?,
        };
        let chosen = backend::choose(&args)?;
        tracing::info!(backend = chosen.backend.kind().as_str(), reason = %chosen.reason, "debug backend chosen");
        let links = env.links().clone();
        let dap = chosen.backend.dap();
        env.spawn(async move {
            links.cancelled().await;
            if let Some(dap) = dap {
                dap.shutdown().await;
            }
        });
        let mut b = Bridge::builder(Self::NAME, env!("CARGO_PKG_VERSION"));
        tools::register(&mut b, &catalog, &args, chosen);
        Ok(b.build()?)
    }

    async fn run(command: DebugCommand) -> Result<(), BridgeError> {
        match command.sub {
            None => run_alone::<Self>(&command.mcp, command.debug).await,
            Some(DebugSub::Host(host)) => fsbridge::host::run(command.debug, host).await,
        }
    }
}
