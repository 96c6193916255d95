//! The sandbox bridge: Bouvet's code-sandbox tools on disposable sandboxes, isolated by Linux namespaces
//! by default. Every backend runs the same guest agent (`sandbox-agent`) as PID 1 and hands this bridge a
//! byte stream to it; see ARCHITECTURE.md and docs/protocols/sandbox.md.

pub mod agent_bin;
pub mod backend;
pub mod client;
pub mod config;
pub mod manager;
pub mod network;
pub mod pool;
pub mod template;
pub mod time;
mod tools;

use bridge_core::bridge::BuildError;
use bridge_core::serve::{McpArgs, Transport, run_alone};
use bridge_core::{Bridge, BridgeEntry, BridgeEnv, BridgeError};
use config::{SandboxArgs, SandboxCommand};
use manager::Manager;
use serde_json::json;
use std::sync::Arc;

pub use backend::{BackendChoice, BackendKind};

const INSTRUCTIONS: &str = "Disposable code sandboxes. create_sandbox returns a sandbox_id; execute_code \
(python, javascript, bash, sh) and run_command run code in it with a timeout; read_file, write_file and \
list_directory work on its files (/workspace is the writable home); start_process runs something in the \
background. Sandboxes have no network unless created with network: \"egress\" (outbound only, to the hosts \
network_allow names, e.g. pypi.org:443 for pip), and expire when idle (keepalive renews). destroy_sandbox when \
done.";

/// A started bridge and its manager, for tests and embedding.
pub struct Running {
    pub bridge: Bridge,
    pub manager: Arc<Manager>,
}

/// Builds the bridge: cleans a crashed run's leftovers, starts the pool filler and the reaper on `env`,
/// and destroys every sandbox when `env` shuts down.
pub async fn start(args: SandboxArgs, env: &BridgeEnv) -> Result<Running, BridgeError> {
    let settings = args.settings()?;
    let manager = Manager::new(settings).await?;
    let mut b = Bridge::builder("sandbox", env!("CARGO_PKG_VERSION"));
    b.instructions(INSTRUCTIONS);
    // A 10 MiB file travels in one write_file: base64 makes it 13.3 MiB, JSON escapes of text up to twice.
    b.max_request_bytes(2 * tools::files::MAX_CONTENT_BYTES + (1 << 20));
    tools::register(&mut b, &manager);
    let m = Arc::clone(&manager);
    b.health(move || {
        json!({
            "ok": true,
            "backend": m.settings.backend,
            "isolation": m.isolation(),
            "sandboxes": m.len(),
            "max_sandboxes": m.settings.max_sandboxes,
            "pool": m.pool.stats(),
            "microvm": m.microvm,
            "images": m.image_names(),
            "orphans_cleaned_at_start": m.orphans_cleaned,
        })
    });
    let m = Arc::clone(&manager);
    b.metrics(move || {
        let mut series = m.pool.metrics();
        series.push(bridge_core::bridge::Metric {
            name: "sandbox_alive",
            help: "Sandboxes handed out and not yet destroyed.",
            kind: "gauge",
            value: m.len() as f64,
        });
        series
    });
    let bridge = b
        .build()
        .map_err(|e: BuildError| Box::new(e) as BridgeError)?;
    let links = env.links().clone();
    env.spawn(Arc::clone(&manager.pool).fill(links.clone()));
    env.spawn(Arc::clone(&manager).reap(links.clone()));
    let m = Arc::clone(&manager);
    env.spawn(async move {
        links.cancelled().await;
        m.destroy_all().await;
        tracing::info!("every sandbox destroyed");
    });
    Ok(Running { bridge, manager })
}

/// `mcp-bridges sandbox`.
pub struct Sandbox;

impl BridgeEntry for Sandbox {
    const NAME: &'static str = "sandbox";
    // Bouvet's default: stdio and HTTP (127.0.0.1 here, not Bouvet's 0.0.0.0) from one process.
    const DEFAULT_TRANSPORT: Transport = Transport::Both;
    // Bouvet's names, read when ours are unset.
    const ENV_ALIASES: &'static [(&'static str, &'static str)] = &[
        ("SANDBOX_POOL_ENABLED", "BOUVET_POOL_ENABLED"),
        ("SANDBOX_POOL_MIN_SIZE", "BOUVET_POOL_MIN_SIZE"),
        ("SANDBOX_POOL_MAX_BOOTS", "BOUVET_POOL_MAX_BOOTS"),
        ("SANDBOX_KERNEL", "BOUVET_KERNEL"),
        ("SANDBOX_ROOTFS", "BOUVET_ROOTFS"),
        ("SANDBOX_FIRECRACKER", "BOUVET_FIRECRACKER"),
        ("SANDBOX_STATE_DIR", "BOUVET_CHROOT"),
        ("MCP_HOST", "BOUVET_HTTP_HOST"),
        ("MCP_PORT", "BOUVET_HTTP_PORT"),
        ("MCP_TRANSPORT", "BOUVET_TRANSPORT"),
        // And the names from before one rule named every variable (bridge_core::config).
        ("SANDBOX_MAX", "SANDBOX_MAX_SANDBOXES"),
        ("SANDBOX_IDLE_TIMEOUT", "SANDBOX_IDLE_TIMEOUT_SECS"),
        ("SANDBOX_MAX_LIFETIME", "SANDBOX_MAX_LIFETIME_SECS"),
        ("SANDBOX_CPU", "SANDBOX_CPU_SECS"),
        ("SANDBOX_DEFAULT_TIMEOUT", "SANDBOX_DEFAULT_TIMEOUT_SECS"),
        ("SANDBOX_MAX_TIMEOUT", "SANDBOX_MAX_TIMEOUT_SECS"),
        (
            "SANDBOX_MICROVM_BOOT_TIMEOUT",
            "SANDBOX_MICROVM_BOOT_TIMEOUT_SECS",
        ),
    ];
    type Args = SandboxArgs;
    type Command = SandboxCommand;

    fn mcp(command: &SandboxCommand) -> &McpArgs {
        &command.mcp
    }

    async fn start(args: SandboxArgs, env: &BridgeEnv) -> Result<Bridge, BridgeError> {
        Ok(start(args, env).await?.bridge)
    }

    async fn run(command: SandboxCommand) -> Result<(), BridgeError> {
        if let Some(template::SandboxSub::Template(t)) = &command.sub {
            return Ok(template::run(&command.sandbox.sandbox_state_dir, t)?);
        }
        run_alone::<Self>(&command.mcp, command.sandbox).await
    }
}
