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
pub mod procs;
pub mod protocol;
pub mod seccomp;
pub mod vm;
mod vsock;

pub use agent::{Agent, AgentConfig, serve};
