//! execute_code and run_command: Bouvet's `{exit_code, stdout, stderr}` plus signal, timed_out, truncated
//! (head and tail kept), duration. Output streams as MCP progress while the program runs. Code and
//! commands travel in the agent's frame and are written to a file inside: never argv.

use super::agent_error;
use crate::manager::{Manager, Sandbox};
use bridge_core::link::LinkError;
use bridge_core::{BridgeBuilder, ToolCtx, ToolError, ToolSpec, Validate, check};
use sandbox_agent::protocol::{Body, ExecSpec, MAX_CODE_BYTES, Op, ProcReport, Program};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// stdin given with a call travels in one frame.
pub const MAX_STDIN_BYTES: usize = 1 << 20;
/// Environment given with a call, names and values together.
pub const MAX_ENV_BYTES: usize = 64 << 10;
/// Progress messages carry at most this much of a chunk.
const PROGRESS_TEXT: usize = 4096;

// Bouvet's tool: fields beyond these are ignored, as Bouvet ignores them (its clients send extra ones).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExecuteCodeArgs {
    /// The sandbox's id.
    pub sandbox_id: String,
    /// python, javascript, bash or sh, in any case (Bouvet's python3, node and js too).
    pub language: String,
    /// The program's source (at most 1 MiB).
    pub code: String,
    /// Seconds before the program's whole process group gets SIGTERM, then SIGKILL 1 s later (default 60).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Working directory (default /workspace; relative paths are under it).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Text given to the program's standard input (at most 1 MiB), then end of file.
    #[serde(default)]
    pub stdin: Option<String>,
}

// Bouvet's tool: fields beyond these are ignored, as Bouvet ignores them (its clients send extra ones).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunCommandArgs {
    /// The sandbox's id.
    pub sandbox_id: String,
    /// A shell command (run by sh; at most 1 MiB).
    pub command: String,
    /// Seconds before the program's whole process group gets SIGTERM, then SIGKILL 1 s later (default 60).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Working directory (default /workspace; relative paths are under it).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Text given to the program's standard input (at most 1 MiB), then end of file.
    #[serde(default)]
    pub stdin: Option<String>,
}

/// The execution options both tools (and start_process) share.
#[derive(Debug, Default, Clone)]
pub struct ExecOpts {
    pub timeout_secs: Option<u64>,
    pub env: Option<BTreeMap<String, String>>,
    pub cwd: Option<String>,
    pub stdin: Option<String>,
}

macro_rules! opts_of {
    ($a:expr) => {
        ExecOpts {
            timeout_secs: $a.timeout_secs,
            env: $a.env.clone(),
            cwd: $a.cwd.clone(),
            stdin: $a.stdin.clone(),
        }
    };
}

impl ExecOpts {
    pub fn validate(&self) -> Result<(), ToolError> {
        if let Some(t) = self.timeout_secs {
            check::in_range("timeout_secs", t, 1, 86_400)?;
        }
        if let Some(s) = &self.stdin {
            check::max_bytes("stdin", s, MAX_STDIN_BYTES)?;
        }
        if let Some(env) = &self.env {
            let bytes: usize = env.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
            if bytes > MAX_ENV_BYTES {
                return Err(ToolError::invalid_argument(
                    "env",
                    format!("is {bytes} bytes; the limit is {MAX_ENV_BYTES} bytes"),
                ));
            }
            if let Some(k) = env
                .keys()
                .find(|k| k.is_empty() || k.contains('=') || k.contains('\0'))
            {
                return Err(ToolError::invalid_argument(
                    "env",
                    format!("{k:?} is not a variable name"),
                ));
            }
        }
        Ok(())
    }
}

impl Validate for ExecuteCodeArgs {
    fn validate(&self) -> Result<(), ToolError> {
        if sandbox_agent::protocol::interpreter(&self.language.to_ascii_lowercase()).is_none() {
            return Err(ToolError::invalid_argument(
                "language",
                format!(
                    "{:?} is not one of python, javascript (node), bash, sh",
                    self.language
                ),
            ));
        }
        check::max_bytes("code", &self.code, MAX_CODE_BYTES)?;
        opts_of!(self).validate()
    }
}

impl Validate for RunCommandArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::non_empty("command", &self.command)?;
        check::max_bytes("command", &self.command, MAX_CODE_BYTES)?;
        opts_of!(self).validate()
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ExecResult {
    /// The exit status; 128 + the signal number when a signal ended the program.
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    /// The signal that ended the program, if one did.
    pub signal: Option<i32>,
    /// True when the timeout ended it.
    pub timed_out: bool,
    /// True when output was cut: the first and last halves of 1 MiB per stream are kept, and less when the
    /// result would pass 900 KiB (stdout_bytes and stderr_bytes are the whole sizes).
    pub truncated: bool,
    /// Bytes the program wrote to stdout in all.
    pub stdout_bytes: u64,
    /// Bytes the program wrote to stderr in all.
    pub stderr_bytes: u64,
    pub duration_ms: u64,
    /// What the sandbox's network policy explains about this output (no network; a refused destination).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl ExecResult {
    /// Keeps the result within what every client accepts ([`super::RESULT_BUDGET`]).
    pub(crate) fn fit(mut self) -> Self {
        if super::fit_output(&mut self, |r| (&mut r.stdout, &mut r.stderr)) {
            self.truncated = true;
        }
        self
    }
}

impl From<ProcReport> for ExecResult {
    fn from(r: ProcReport) -> Self {
        Self {
            exit_code: r.exit_code.unwrap_or_else(|| 128 + r.signal.unwrap_or(0)),
            stdout: String::from_utf8_lossy(&r.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&r.stderr).into_owned(),
            signal: r.signal,
            timed_out: r.timed_out,
            truncated: r.truncated,
            stdout_bytes: r.stdout_bytes,
            stderr_bytes: r.stderr_bytes,
            duration_ms: r.duration_ms,
            note: None,
        }
    }
}

pub fn register(b: &mut BridgeBuilder, mgr: &Arc<Manager>) {
    let deadline = mgr.settings.max_timeout + Duration::from_secs(30);
    b.tool(
        ToolSpec::new(
            "execute_code",
            "Run code in a sandbox: language python, javascript (node), bash or sh. Returns exit_code, stdout, \
             stderr (plus signal, timed_out, truncated). Output streams as progress while it runs. A result \
             stays under 900 KiB (some MCP clients refuse 1 MiB): longer output is cut head-and-tail and marked \
             truncated; for all of it, write it to a file and page it with read_file.",
        )
        .title("Execute Code")
        .open_world()
        .timeout(deadline)
        .task_support(bridge_core::tool::TaskSupport::Optional)
        .handler_on(Arc::clone(mgr), |m, a: ExecuteCodeArgs, ctx: ToolCtx| async move {
            let s = m.get(&a.sandbox_id)?;
            // Bouvet lower-cases the language: `Python` and `JS` run too.
            let language = a.language.to_ascii_lowercase();
            check_language(&language, &s.instance.hello.languages)?;
            let opts = opts_of!(a);
            let program = Program::Code {
                language,
                code: a.code,
            };
            run(&m, &s, program, opts, &ctx).await
        }),
    );
    b.tool(
        ToolSpec::new(
            "run_command",
            "Run a shell command (sh) in a sandbox. Returns exit_code, stdout, stderr (plus signal, timed_out, \
             truncated). Output streams as progress while it runs. A result stays under 900 KiB: longer output \
             is cut head-and-tail and marked truncated; for all of it, redirect it to a file and page it with \
             read_file.",
        )
        .title("Run Command")
        .open_world()
        .timeout(deadline)
        .task_support(bridge_core::tool::TaskSupport::Optional)
        .handler_on(Arc::clone(mgr), |m, a: RunCommandArgs, ctx: ToolCtx| async move {
            let s = m.get(&a.sandbox_id)?;
            let opts = opts_of!(a);
            run(&m, &s, Program::Shell { command: a.command }, opts, &ctx).await
        }),
    );
}

pub fn exec_spec(m: &Manager, program: Program, opts: ExecOpts) -> Result<ExecSpec, ToolError> {
    let timeout = opts
        .timeout_secs
        .map_or(m.settings.default_timeout, Duration::from_secs);
    if timeout > m.settings.max_timeout {
        return Err(ToolError::invalid_argument(
            "timeout_secs",
            format!(
                "is {} s; the limit is {} s (SANDBOX_MAX_TIMEOUT)",
                timeout.as_secs(),
                m.settings.max_timeout.as_secs()
            ),
        ));
    }
    let mut spec = ExecSpec::new(program);
    spec.env = opts.env.unwrap_or_default();
    spec.cwd = opts.cwd;
    spec.stdin = opts.stdin.map(String::into_bytes).unwrap_or_default();
    spec.timeout_ms = Some(timeout.as_millis() as u64);
    Ok(spec)
}

pub(crate) async fn run(
    m: &Manager,
    s: &Sandbox,
    program: Program,
    opts: ExecOpts,
    ctx: &ToolCtx,
) -> Result<ExecResult, ToolError> {
    // Asked first, so the core knows this handler stops what it starts and lets it send its kill on cancel.
    let cancel = ctx.cancellation();
    let mut spec = exec_spec(m, program, opts)?;
    crate::network::fail_fast_env(&s.network, &mut spec.env);
    spec.stream = true;
    let host_deadline = Duration::from_millis(spec.timeout_ms.unwrap_or(0) + spec.grace_ms)
        + Duration::from_secs(10);
    let client = &s.instance.client;
    let (tx, mut rx) = crate::client::AgentClient::chunk_channel();
    let (id, pending) = client.start(Op::Exec(Box::new(spec)), Some(tx)).await?;
    let wait = pending.wait(host_deadline);
    tokio::pin!(wait);
    let mut seen = 0u64;
    let result = loop {
        tokio::select! {
            r = &mut wait => break r,
            Some(Body::Chunk { stream, data }) = rx.recv() => {
                seen += data.len() as u64;
                let text = String::from_utf8_lossy(&data[..data.len().min(PROGRESS_TEXT)]).into_owned();
                let label = match stream {
                    sandbox_agent::protocol::StreamName::Stdout => "stdout",
                    sandbox_agent::protocol::StreamName::Stderr => "stderr",
                };
                ctx.progress(seen as f64, None, format!("[{label}] {text}")).await;
            }
            () = cancel.cancelled() => {
                kill(s, id).await;
                return Err(ToolError::cancelled("the call was cancelled; its processes were killed"));
            }
        }
    };
    client.unstream(id);
    s.touch();
    match result {
        Ok(Body::Exited(report)) => {
            let mut r = ExecResult::from(report);
            r.note = crate::network::note(&s.network, &r.stdout, &r.stderr);
            Ok(r.fit())
        }
        Ok(other) => Err(agent_error(other)),
        Err(e @ LinkError::Timeout { .. }) => {
            kill(s, id).await;
            Err(ToolError::from(e))
        }
        Err(e) => Err(ToolError::from(e)),
    }
}

async fn kill(s: &Sandbox, id: u64) {
    let _ = s
        .instance
        .client
        .call(
            Op::Signal {
                target: id,
                signal: 9,
            },
            Duration::from_secs(2),
        )
        .await;
}

/// A language this sandbox's root lacks (an image without python, say) is refused by name before anything
/// runs, rather than failing as "No such file or directory".
fn check_language(language: &str, has: &[String]) -> Result<(), ToolError> {
    let interp = sandbox_agent::protocol::interpreter(language).map(|(bin, _)| bin);
    let canonical = sandbox_agent::protocol::LANGUAGES
        .iter()
        .find(|(_, bin)| Some(*bin) == interp)
        .map(|(name, _)| *name);
    match canonical {
        Some(name) if !has.iter().any(|h| h == name) => Err(ToolError::invalid_argument(
            "language",
            format!(
                "this sandbox has no {name} interpreter; it has: {}",
                has.join(", ")
            ),
        )),
        _ => Ok(()),
    }
}
