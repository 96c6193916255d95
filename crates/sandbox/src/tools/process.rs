//! Background processes: start_process, process_status, process_output, kill_process. A process's id is
//! the agent's handle for it; its output is kept head-and-tail (1 MiB per stream) after it ended, until the
//! agent needs its place among the 64 it tracks (`sandbox_agent::procs`): those whose output process_output
//! returned after their end go first, process_status's answer (no output) does not count.

use super::agent_error;
use super::exec::{ExecOpts, ExecResult, exec_spec};
use crate::manager::Manager;
use bridge_core::{BridgeBuilder, ToolCtx, ToolError, ToolSpec, Validate, check};
use sandbox_agent::protocol::{Body, MAX_CODE_BYTES, Op, ProcReport, Program};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const CALL_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    /// The sandbox's id, as create_sandbox returned it.
    pub sandbox_id: String,
    /// A shell command (sh), e.g. `python3 -m http.server 8000`.
    pub command: String,
    /// Seconds before the process and everything it started are killed (default: runs until killed or the
    /// sandbox ends).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Working directory (default /workspace; relative paths are under it).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Text for its standard input, then end of file.
    #[serde(default)]
    pub stdin: Option<String>,
}
impl Validate for StartArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::non_empty("command", &self.command)?;
        check::max_bytes("command", &self.command, MAX_CODE_BYTES)?;
        self.opts().validate()
    }
}
impl StartArgs {
    fn opts(&self) -> ExecOpts {
        ExecOpts {
            timeout_secs: self.timeout_secs,
            env: self.env.clone(),
            cwd: self.cwd.clone(),
            stdin: self.stdin.clone(),
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Started {
    /// Give it to process_status, process_output and kill_process.
    pub process_id: u64,
    /// Its pid inside the sandbox.
    pub pid: i32,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcArgs {
    /// The sandbox's id, as create_sandbox returned it.
    pub sandbox_id: String,
    /// The process, as start_process returned it.
    pub process_id: u64,
}
impl Validate for ProcArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KillArgs {
    /// The sandbox's id, as create_sandbox returned it.
    pub sandbox_id: String,
    /// The process, as start_process returned it.
    pub process_id: u64,
    /// Signal number for the process and everything it started (default 9, SIGKILL; 15 is SIGTERM).
    #[serde(default)]
    pub signal: Option<i32>,
}
impl Validate for KillArgs {
    fn validate(&self) -> Result<(), ToolError> {
        if let Some(s) = self.signal {
            check::in_range("signal", s, 1, 64)?;
        }
        Ok(())
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Status {
    pub running: bool,
    pub pid: i32,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub duration_ms: u64,
}

/// A background process's output and state. While it runs there is no exit status: `exit_code` and `signal`
/// are absent (an exit code was once made up from a missing signal as 128).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// True while the process runs.
    pub running: bool,
    /// The exit status once it ended; 128 + the signal number when a signal ended it. Absent while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The signal that ended it, if one did. Absent while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// True when its timeout ended it.
    pub timed_out: bool,
    /// True when output was cut: the first and last halves of 1 MiB per stream are kept.
    pub truncated: bool,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub duration_ms: u64,
}

impl From<ProcReport> for Output {
    fn from(r: ProcReport) -> Self {
        let running = r.running;
        let ended = ExecResult::from(r).fit();
        Self {
            running,
            exit_code: (!running).then_some(ended.exit_code),
            stdout: ended.stdout,
            stderr: ended.stderr,
            signal: if running { None } else { ended.signal },
            timed_out: ended.timed_out,
            truncated: ended.truncated,
            stdout_bytes: ended.stdout_bytes,
            stderr_bytes: ended.stderr_bytes,
            duration_ms: ended.duration_ms,
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Killed {
    pub success: bool,
}

pub fn register(b: &mut BridgeBuilder, mgr: &Arc<Manager>) {
    b.tool(
        ToolSpec::new(
            "start_process",
            "Start a shell command in the background in a sandbox; returns a process_id for process_status, \
             process_output and kill_process.",
        )
        .title("Start Process")
        .open_world()
        .handler_on(Arc::clone(mgr), |m, a: StartArgs, _: ToolCtx| async move {
            let s = m.get(&a.sandbox_id)?;
            let opts = a.opts();
            let mut spec = exec_spec(&m, Program::Shell { command: a.command }, opts)?;
            if a.timeout_secs.is_none() {
                spec.timeout_ms = None;
            }
            spec.background = true;
            let (id, pending) = s
                .instance
                .client
                .start(Op::Exec(Box::new(spec)), None)
                .await
                .map_err(|e| s.link_error(e))?;
            match pending.wait(CALL_TIMEOUT).await? {
                Body::Started { pid } => Ok(Started { process_id: id, pid }),
                other => Err(agent_error(other)),
            }
        }),
    );
    b.tool(
        ToolSpec::new(
            "process_status",
            "Whether a background process runs, and how it ended.",
        )
        .title("Process Status")
        .read_only()
        .handler_on(Arc::clone(mgr), |m, a: ProcArgs, _: ToolCtx| async move {
            let s = m.get(&a.sandbox_id)?;
            match s
                .instance
                .client
                .call(
                    // Its end seen is not its output read: the agent keeps it until process_output.
                    Op::status(a.process_id, true, s.instance.hello.version),
                    CALL_TIMEOUT,
                )
                .await?
            {
                Body::Status(r) => Ok(Status {
                    running: r.running,
                    pid: r.pid,
                    exit_code: r.exit_code,
                    signal: r.signal,
                    timed_out: r.timed_out,
                    stdout_bytes: r.stdout_bytes,
                    stderr_bytes: r.stderr_bytes,
                    duration_ms: r.duration_ms,
                }),
                other => Err(agent_error(other)),
            }
        }),
    );
    b.tool(
        ToolSpec::new(
            "process_output",
            "A background process's output so far (first and last halves of 1 MiB per stream, less when the \
             result would pass 900 KiB) and state.",
        )
        .title("Process Output")
        .read_only()
        .handler_on(Arc::clone(mgr), |m, a: ProcArgs, _: ToolCtx| async move {
            let s = m.get(&a.sandbox_id)?;
            let op = Op::Status {
                target: a.process_id,
                state_only: false,
            };
            match s.instance.client.call(op, CALL_TIMEOUT).await.map_err(|e| s.link_error(e))? {
                Body::Status(r) => Ok(Output::from(r)),
                other => Err(agent_error(other)),
            }
        }),
    );
    b.tool(
        ToolSpec::new(
            "kill_process",
            "Send a signal (default SIGKILL) to a background process and everything it started, children in \
             sessions of their own included.",
        )
        .title("Kill Process")
        .destructive()
        .handler_on(Arc::clone(mgr), |m, a: KillArgs, _: ToolCtx| async move {
            let s = m.get(&a.sandbox_id)?;
            let op = Op::Signal {
                target: a.process_id,
                signal: a.signal.unwrap_or(9),
            };
            match s.instance.client.call(op, CALL_TIMEOUT).await.map_err(|e| s.link_error(e))? {
                Body::Ok { .. } => Ok(Killed { success: true }),
                other => Err(agent_error(other)),
            }
        }),
    );
}
