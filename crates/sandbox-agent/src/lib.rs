//! The sandbox guest agent: PID 1 of every sandbox, speaking one framed, multiplexed protocol
//! ([`protocol`]) over its stdin/stdout. The `namespace` launcher ([`launch`]) builds the sandbox around it;
//! in a microVM the agent is the guest's `/init` ([`vm`]).

pub mod agent;
mod confine;
mod exec;
mod files;
pub mod launch;
mod netif;
pub mod outbuf;
mod paths;
pub mod procs;
pub mod protocol;
pub mod seccomp;
pub mod tree;
pub mod vm;
mod vsock;

pub use agent::{Agent, AgentConfig, serve};

/// The agent's own blocking-thread pool, bounded so its tasks fit `AGENT_TASKS`.
pub const BLOCKING_THREADS: usize = 16;
/// Tasks (threads) the agent itself may need: its runtime's workers and blocking pool, the main thread,
/// and slack. A sandbox's pids cgroup gets this much on top of the user's processes, so a fork bomb that
/// fills its own limit cannot stop the agent from starting a thread and answering.
pub const AGENT_TASKS: u64 = 32;
