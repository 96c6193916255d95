//! Running scripts, which the Remote API cannot: an in-game helper script (`mcp-helper.js`) that the bridge
//! writes to `home` and the player starts once (`run mcp-helper.js`). It serves requests through text files the
//! Remote API can write and read (`docs/protocols/bitburner.md` §9):
//!
//! - the helper rewrites `mcp/helper.txt` (`{v, pid, time}`) about every 100 ms while it runs;
//! - the bridge writes `mcp/req-<id>.txt` (`{v, id, op, args}`), the helper deletes it, runs it, and writes
//!   `mcp/res-<id>.txt` (`{v, id, ok, result | error}`), which the bridge reads and deletes.
//!
//! Only the four operations below exist, each with checked, bounded arguments: the helper runs scripts the
//! player already has, never code sent by the bridge.

use super::Ctx;
use super::args::WriteArgs;
use crate::wire::Method;
use bridge_core::{ErrorCode, ToolError, ToolSpec, Validate, check};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The helper protocol's version; a helper speaking another answers every request with an error.
pub const PROTOCOL: u64 = 1;
/// Where the helper lives on `home`.
pub const HELPER_FILE: &str = "mcp-helper.js";
/// The one command that starts it.
pub const START_COMMAND: &str = "run mcp-helper.js";
const HEARTBEAT_FILE: &str = "mcp/helper.txt";
/// A heartbeat older than this means the helper is not running (it beats every ~100 ms).
const HEARTBEAT_STALE: Duration = Duration::from_secs(10);
/// How often the bridge looks for an answer.
const POLL: Duration = Duration::from_millis(50);
/// How long the helper may take to answer one request.
pub const ANSWER_DEADLINE: Duration = Duration::from_secs(10);
pub const MAX_ARGS: usize = 64;
pub const MAX_ARG_BYTES: usize = 4096;
pub const MAX_THREADS: u64 = 1_000_000;
pub const MAX_LOG_LINES: usize = 1000;

/// The in-game helper, as written to `home`.
pub const HELPER_JS: &str = include_str!("mcp-helper.js");

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn home() -> String {
    "home".to_owned()
}

fn one() -> u64 {
    1
}

fn default_lines() -> usize {
    200
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// The script to start, already on `server` (write it with write_file first).
    pub script: String,
    /// Server to run it on (default `home`); scripts on other servers need root access and the file there.
    #[serde(default = "home")]
    pub server: String,
    /// Threads (default 1).
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = MAX_THREADS))]
    pub threads: u64,
    /// Arguments the script gets as `ns.args` (strings, numbers or booleans; at most 64).
    #[serde(default)]
    pub args: Vec<Value>,
}

impl Validate for RunArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::non_empty("server", &self.server)?;
        super::args::game_path("script", &self.script)?;
        check::in_range("threads", self.threads, 1, MAX_THREADS)?;
        if self.args.len() > MAX_ARGS {
            return Err(ToolError::invalid_argument(
                "args",
                format!("{} arguments; the limit is {MAX_ARGS}", self.args.len()),
            ));
        }
        for (i, a) in self.args.iter().enumerate() {
            let ok = match a {
                Value::String(s) => s.len() <= MAX_ARG_BYTES,
                Value::Number(_) | Value::Bool(_) => true,
                _ => false,
            };
            if !ok {
                return Err(ToolError::invalid_argument(
                    "args",
                    format!(
                        "args[{i}] must be a string of at most {MAX_ARG_BYTES} bytes, a number or a boolean"
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PidArgs {
    /// The pid `run_script` returned.
    #[schemars(range(min = 1))]
    pub pid: u64,
}

impl Validate for PidArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::in_range("pid", self.pid, 1, u64::MAX)
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogArgs {
    /// The pid `run_script` returned.
    #[schemars(range(min = 1))]
    pub pid: u64,
    /// The last this many lines (default 200, at most 1000).
    #[serde(default = "default_lines")]
    #[schemars(range(min = 1, max = MAX_LOG_LINES))]
    pub max_lines: usize,
}

impl Validate for LogArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::in_range("pid", self.pid, 1, u64::MAX)?;
        check::in_range("max_lines", self.max_lines, 1, MAX_LOG_LINES)
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateArgs {
    /// Server whose RAM to report (default `home`).
    #[serde(default = "home")]
    pub server: String,
}

impl Validate for StateArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::non_empty("server", &self.server)
    }
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct Started {
    pub pid: u64,
    /// RAM the script takes: its cost per thread times threads, in GB.
    pub ram_gb: f64,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct Logs {
    pub pid: u64,
    pub lines: Vec<String>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct Killed {
    pub pid: u64,
    /// False when no script had that pid (it had ended already).
    pub killed: bool,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct ServerState {
    pub server: String,
    /// The player's money.
    pub money: f64,
    pub hacking_level: f64,
    pub max_ram_gb: f64,
    pub used_ram_gb: f64,
}

#[derive(Deserialize)]
struct Heartbeat {
    v: u64,
    time: f64,
}

#[derive(Deserialize)]
struct Answer {
    v: u64,
    ok: bool,
    #[serde(default)]
    result: Value,
    #[serde(default)]
    error: Option<String>,
}

fn not_running(why: &str) -> ToolError {
    ToolError::unsupported(format!("the in-game helper is not running: {why}")).with_hint(format!(
        "ask the player to type `{START_COMMAND}` in the game's terminal (the bridge has written \
         {HELPER_FILE} to home), then call again"
    ))
}

fn file_params(path: &str) -> Map<String, Value> {
    Map::from_iter([
        ("filename".to_owned(), Value::from(path)),
        ("server".to_owned(), Value::from("home")),
    ])
}

fn missing(e: &ToolError) -> bool {
    e.code() == ErrorCode::Remote
        && (e.message() == "File doesn't exist" || e.message().starts_with("File does not exist"))
}

impl Ctx {
    /// Writes the helper to `home` unless it is there already, as this bridge ships it.
    async fn install_helper(&self) -> Result<(), ToolError> {
        match self.call(Method::GetFile, file_params(HELPER_FILE)).await {
            Ok(Value::String(s)) if s == HELPER_JS => return Ok(()),
            Ok(_) => {}
            Err(e) if missing(&e) => {}
            Err(e) => return Err(e),
        }
        self.write_file(WriteArgs {
            filename: HELPER_FILE.to_owned(),
            content: HELPER_JS.to_owned(),
            server: "home".to_owned(),
        })
        .await
        .map(drop)
    }

    /// Whether a helper of our protocol beat recently; if not, an error naming the command that starts it.
    async fn helper_alive(&self) -> Result<(), ToolError> {
        let beat = match self
            .call(Method::GetFile, file_params(HEARTBEAT_FILE))
            .await
        {
            Ok(Value::String(s)) => serde_json::from_str::<Heartbeat>(&s).ok(),
            Ok(_) => None,
            Err(e) if missing(&e) => None,
            Err(e) => return Err(e),
        };
        let Some(beat) = beat else {
            self.install_helper().await?;
            return Err(not_running("it has never run in this game"));
        };
        let now = crate::link::unix_ms(std::time::SystemTime::now()) as f64;
        let age = Duration::from_millis((now - beat.time).abs() as u64);
        if age > HEARTBEAT_STALE {
            self.install_helper().await?;
            return Err(not_running(&format!(
                "its last sign of life is {} s old",
                age.as_secs()
            )));
        }
        if beat.v != PROTOCOL {
            self.install_helper().await?;
            return Err(ToolError::unsupported(format!(
                "the in-game helper speaks protocol {}, this bridge {PROTOCOL}",
                beat.v
            ))
            .with_hint(format!(
                "the bridge has written its own {HELPER_FILE}: ask the player to type `kill {HELPER_FILE}` and \
                 then `{START_COMMAND}` in the game's terminal"
            )));
        }
        Ok(())
    }

    /// One request to the helper, and its answer.
    pub async fn helper_call(&self, op: &str, args: Value) -> Result<Value, ToolError> {
        self.helper_alive().await?;
        let id = format!(
            "{}-{}",
            crate::link::unix_ms(std::time::SystemTime::now()),
            NEXT_ID.fetch_add(1, Ordering::Relaxed)
        );
        let request = json!({"v": PROTOCOL, "id": id, "op": op, "args": args}).to_string();
        let request_file = format!("mcp/req-{id}.txt");
        let answer_file = format!("mcp/res-{id}.txt");
        let mut params = file_params(&request_file);
        params.insert("content".to_owned(), Value::String(request));
        self.call(Method::PushFile, params).await?;
        let start = Instant::now();
        let text = loop {
            match self.call(Method::GetFile, file_params(&answer_file)).await {
                Ok(Value::String(s)) => break s,
                Ok(other) => {
                    return Err(ToolError::remote(format!(
                        "the game sent a non-text answer file: {other}"
                    )));
                }
                Err(e) if missing(&e) => {}
                Err(e) => return Err(e),
            }
            if start.elapsed() > ANSWER_DEADLINE {
                // Withdrawn, so a helper that resumes later does not run it unseen.
                let _ = self
                    .call(Method::DeleteFile, file_params(&request_file))
                    .await;
                return Err(ToolError::timeout(format!(
                    "the in-game helper did not answer within {} s",
                    ANSWER_DEADLINE.as_secs()
                ))
                .with_hint(format!(
                    "the game may be paused or the helper stuck: check the game window; if the request was \
                     still waiting it was withdrawn. Restarting the helper: `kill {HELPER_FILE}`, then \
                     `{START_COMMAND}`"
                )));
            }
            tokio::time::sleep(POLL).await;
        };
        let _ = self
            .call(Method::DeleteFile, file_params(&answer_file))
            .await;
        let answer: Answer = serde_json::from_str(&text).map_err(|e| {
            ToolError::remote(format!(
                "the helper's answer is not the protocol's JSON: {e}"
            ))
        })?;
        if answer.v != PROTOCOL {
            return Err(ToolError::remote(format!(
                "the helper answered in protocol {}",
                answer.v
            )));
        }
        if answer.ok {
            Ok(answer.result)
        } else {
            Err(ToolError::remote(
                answer
                    .error
                    .unwrap_or_else(|| "the helper failed without saying why".to_owned()),
            )
            .with_details(json!({"op": op})))
        }
    }

    async fn helper_typed<T: serde::de::DeserializeOwned>(
        &self,
        op: &str,
        args: Value,
    ) -> Result<T, ToolError> {
        let value = self.helper_call(op, args).await?;
        serde_json::from_value(value).map_err(|e| {
            ToolError::remote(format!("the helper's answer to {op} is malformed: {e}"))
        })
    }
}

pub fn specs(ctx: &Ctx) -> Vec<ToolSpec> {
    let budget = ctx.budget(8, ctx.link.config().rpc_timeout) + ANSWER_DEADLINE;
    let run = ToolSpec::new(
        "run_script",
        "Start a script on an in-game server (ns.exec, through the in-game helper mcp-helper.js, which the \
         player starts once with `run mcp-helper.js`). Returns the pid and the RAM it takes.",
    )
    .title("Run Script")
    .destructive()
    .open_world()
    .timeout(budget)
    .handler_on(ctx.clone(), |c, args: RunArgs, _| async move {
        let value = serde_json::to_value(&args).map_err(|e| ToolError::remote(e.to_string()))?;
        c.helper_typed::<Started>("run_script", value).await
    });
    let logs = ToolSpec::new(
        "get_script_logs",
        "The last log lines of a running script, by pid (through the in-game helper).",
    )
    .title("Script Logs")
    .read_only()
    .open_world()
    .timeout(budget)
    .handler_on(ctx.clone(), |c, args: LogArgs, _| async move {
        let value = serde_json::to_value(&args).map_err(|e| ToolError::remote(e.to_string()))?;
        c.helper_typed::<Logs>("get_script_logs", value).await
    });
    let kill = ToolSpec::new(
        "kill_script",
        "Stop a running script by pid (through the in-game helper).",
    )
    .title("Kill Script")
    .destructive()
    .open_world()
    .timeout(budget)
    .handler_on(ctx.clone(), |c, args: PidArgs, _| async move {
        let value = serde_json::to_value(&args).map_err(|e| ToolError::remote(e.to_string()))?;
        c.helper_typed::<Killed>("kill_script", value).await
    });
    let state = ToolSpec::new(
        "get_server_state",
        "The player's money and hacking level, and a server's RAM (through the in-game helper).",
    )
    .title("Server State")
    .read_only()
    .open_world()
    .timeout(budget)
    .handler_on(ctx.clone(), |c, args: StateArgs, _| async move {
        let value = serde_json::to_value(&args).map_err(|e| ToolError::remote(e.to_string()))?;
        c.helper_typed::<ServerState>("get_server_state", value)
            .await
    });
    vec![run, logs, kill, state]
}
