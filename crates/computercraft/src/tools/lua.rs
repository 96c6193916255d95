//! `run_lua`: run a chunk of Lua on one computer and return its values and printed output.

use super::reply;
use crate::protocol::lua_values;
use crate::state::State;
use bridge_core::{Rendered, ToolCtx, ToolError, ToolSpec, Validate, check};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Largest chunk of code: it travels in one frame.
const MAX_CODE: usize = 48 * 1024;
const DEFAULT_TIMEOUT_MS: u64 = 10_000;
const MAX_TIMEOUT_MS: u64 = 120_000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunLuaArgs {
    /// Computer id (see list_computers).
    pub computer: u32,
    /// Lua 5.2 source (CC:Tweaked's Cobalt). `return` values come back as `values`; print/write output as
    /// `output`. All CC APIs are available (fs, turtle, peripheral, redstone, sleep, ...).
    pub code: String,
    /// Deadline in milliseconds (default 10000, at most 120000). The computer stops the code when it passes.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

impl Validate for RunLuaArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::non_empty("code", &self.code)?;
        check::max_bytes("code", &self.code, MAX_CODE)?;
        if let Some(t) = self.timeout_ms {
            check::in_range("timeout_ms", t, 1, MAX_TIMEOUT_MS)?;
        }
        Ok(())
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RunLuaOut {
    /// Every returned value, nils included (as null). Functions and other unserialisable values arrive as
    /// their `tostring`; NaN and infinities as "nan" / "inf".
    pub values: Vec<Value>,
    /// What the code printed (print, write, printError), at most 32 KiB.
    pub output: String,
    pub output_truncated: bool,
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    output: String,
    #[serde(default)]
    truncated: bool,
    #[serde(flatten)]
    rest: Value,
}

pub fn specs(state: &Arc<State>) -> Vec<ToolSpec> {
    let s = state.clone();
    vec![
        ToolSpec::new(
            "run_lua",
            "Run Lua code on one ComputerCraft computer and return its results and printed output. The code runs \
             in its own coroutine, so it may sleep, move a turtle or wait for events while the computer keeps \
             serving other requests. Code that runs 7 s without yielding is aborted by CC (\"Too long without \
             yielding\"): call sleep(0) or os.queueEvent/os.pullEvent in long loops. A Lua error is returned as \
             an E_REMOTE error with the output printed before it.",
        )
        .destructive()
        .open_world()
        .timeout(Duration::from_millis(MAX_TIMEOUT_MS + 5_000))
        .handler_with_text(move |args: RunLuaArgs, _ctx: ToolCtx| {
            let s = s.clone();
            async move { run(&s, args).await }
        }),
    ]
}

async fn run(state: &State, args: RunLuaArgs) -> Result<Rendered<RunLuaOut>, ToolError> {
    let computer = state.computer(args.computer)?;
    let timeout = Duration::from_millis(args.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS));
    let result = computer
        .request("lua.run", json!({ "code": args.code }), timeout)
        .await?;
    let raw: Raw = reply(&computer, result)?;
    let values = lua_values(&raw.rest);
    let mut text = raw.output.clone();
    if raw.truncated {
        text.push_str("\n[output truncated]");
    }
    if !values.is_empty() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        let shown: Vec<String> = values.iter().map(Value::to_string).collect();
        text.push_str(&format!("returned: {}", shown.join(", ")));
    }
    if text.is_empty() {
        text = "(no output, no values)".into();
    }
    Ok(Rendered {
        value: RunLuaOut {
            values,
            output: raw.output,
            output_truncated: raw.truncated,
        },
        text,
    })
}
