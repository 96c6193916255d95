//! The entry shape every bridge exposes, so the binary can run any bridge alone (its subcommand) or several
//! side by side (`serve`) without knowing what is inside.
//!
//! A bridge names its flags (`Args`), and given a [`BridgeEnv`] starts its links and background tasks and
//! returns the [`Bridge`] the core serves. The core owns the process's lifecycle: it stops the MCP side first,
//! lets in-flight calls finish, then cancels [`BridgeEnv::links`] and waits for the bridge's tasks.

use super::Bridge;
use crate::serve::{McpArgs, Transport};
use futures::future::BoxFuture;
use std::future::Future;
use std::marker::PhantomData;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What a bridge's start-up or run can fail with; the binary prints it as one line.
pub type BridgeError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What the core hands a bridge when it starts it: the process's shutdown signals and the set its background
/// tasks join. Cheap to clone.
#[derive(Clone, Default)]
pub struct BridgeEnv {
    shutdown: CancellationToken,
    links: CancellationToken,
    tasks: TaskTracker,
}

impl BridgeEnv {
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancelled when the process starts to stop (SIGINT/SIGTERM, or the stdio client went away). The MCP side
    /// stops taking requests then; calls in flight still need the bridge's links, so do not close them here.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Cancelled once the MCP side has drained (or its grace ran out): close the links to live systems now.
    /// Give this token to link listeners.
    pub fn links(&self) -> &CancellationToken {
        &self.links
    }

    /// Spawns a background task the core waits for on exit; it should end soon after [`links`](Self::links)
    /// is cancelled.
    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tasks.spawn(task)
    }

    /// How many background tasks are still running.
    pub fn running_tasks(&self) -> usize {
        self.tasks.len()
    }

    /// The end of the lifecycle: shutdown (if not yet), links closed, then every task joined, at most `limit`.
    pub async fn close(&self, limit: std::time::Duration) {
        self.shutdown.cancel();
        self.links.cancel();
        self.tasks.close();
        if tokio::time::timeout(limit, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                tasks = self.tasks.len(),
                "background tasks still running {} ms after the links closed; exiting anyway",
                limit.as_millis()
            );
        }
    }
}

/// One bridge as the binary sees it. Implement it on a unit struct; list that struct in the CLI's table.
pub trait BridgeEntry: Send + Sync + 'static {
    /// Its subcommand, `--bridge` value, TOML table, resource URI scheme and metrics label; also the prefix of
    /// its flags' environment variables (`crate::config::env_name`).
    const NAME: &'static str;
    /// The transport when served alone and the user chose none.
    const DEFAULT_TRANSPORT: Transport;
    /// `(variable, older name)`: environment variables renamed to follow the naming rule (`crate::config`);
    /// the older name is still read when the new one is unset, with a deprecation warning.
    const ENV_ALIASES: &'static [(&'static str, &'static str)] = &[];
    /// The bridge's own flags, each with its environment variable, without the MCP ones: flattened into its
    /// subcommand and, beside every other bridge's, into `serve`.
    type Args: clap::Args + Clone + Send + Sync + 'static;
    /// The subcommand's flags: [`McpArgs`], [`Args`](Self::Args) and whatever only the subcommand has.
    type Command: clap::Args + Send + 'static;

    /// The MCP flags of a parsed subcommand (the binary sets up logging from them).
    fn mcp(command: &Self::Command) -> &McpArgs;

    /// Starts the bridge's links and background tasks (on `env`) and returns what the core serves.
    fn start(
        args: Self::Args,
        env: &BridgeEnv,
    ) -> impl Future<Output = Result<Bridge, BridgeError>> + Send;

    /// Runs the subcommand. Serving the bridge alone is [`crate::serve::run_alone`].
    fn run(command: Self::Command) -> impl Future<Output = Result<(), BridgeError>> + Send;
}

/// A [`BridgeEntry`] behind a vtable, so one table can list bridges of different types.
pub trait DynEntry: Send + Sync {
    fn name(&self) -> &'static str;
    /// As [`BridgeEntry::ENV_ALIASES`].
    fn env_aliases(&self) -> &'static [(&'static str, &'static str)];
    /// Adds the bridge's own flags to `command` (the `serve` command).
    fn augment(&self, command: clap::Command) -> clap::Command;
    /// Reads the bridge's flags from `matches` (of a command `augment` built) and starts it.
    fn start(
        &self,
        matches: &clap::ArgMatches,
        env: &BridgeEnv,
    ) -> BoxFuture<'static, Result<Bridge, BridgeError>>;
}

/// The [`DynEntry`] of bridge `B`.
pub struct Entry<B>(PhantomData<fn() -> B>);

impl<B> Entry<B> {
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<B> Default for Entry<B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<B: BridgeEntry> DynEntry for Entry<B> {
    fn name(&self) -> &'static str {
        B::NAME
    }

    fn env_aliases(&self) -> &'static [(&'static str, &'static str)] {
        B::ENV_ALIASES
    }

    fn augment(&self, command: clap::Command) -> clap::Command {
        <B::Args as clap::Args>::augment_args(command)
    }

    fn start(
        &self,
        matches: &clap::ArgMatches,
        env: &BridgeEnv,
    ) -> BoxFuture<'static, Result<Bridge, BridgeError>> {
        let args = <B::Args as clap::FromArgMatches>::from_arg_matches(matches);
        let env = env.clone();
        Box::pin(async move { B::start(args?, &env).await })
    }
}
