//! `run_lua`: run a chunk of Lua on one computer and return its values and printed output.

use super::reply;
use crate::protocol::LuaValues;
use crate::state::State;
use bridge_core::{Rendered, ToolCtx, ToolError, ToolSpec, Validate, check};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Largest `code` once escaped as a JSON string (quotes included): the request travels in one frame of at most
/// `protocol::MAX_FRAME` bytes, and the envelope (type, id, method) needs the rest.
pub const MAX_CODE_ESCAPED: usize = crate::protocol::MAX_FRAME - 1024;
const DEFAULT_TIMEOUT_MS: u64 = 10_000;
const MAX_TIMEOUT_MS: u64 = 120_000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunLuaArgs {
    /// Computer id (see list_computers).
    pub computer: u32,
    /// Lua 5.2 source (CC:Tweaked's Cobalt), at most 64512 bytes once escaped as a JSON string (a quote,
    /// backslash or line break counts two bytes, other control characters six). `return` values come back as
    /// `values`; print/write output as `output`.
    pub code: String,
    /// Deadline in milliseconds (default 10000, at most 120000). Code that yields (sleep, os.pullEvent,
    /// turtle moves, ...) is stopped at the deadline; a loop that never yields cannot be stopped by the bridge
    /// and runs until CC aborts it ("Too long without yielding", about 7 s).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

impl Validate for RunLuaArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::non_empty("code", &self.code)?;
        let escaped = serde_json::to_string(&self.code).map_or(usize::MAX, |s| s.len());
        if escaped > MAX_CODE_ESCAPED {
            return Err(ToolError::too_large(format!(
                "`code` is {escaped} bytes once escaped as JSON ({} bytes of source; quotes, backslashes and \
                 line breaks count double); the limit is {MAX_CODE_ESCAPED} bytes",
                self.code.len()
            ))
            .with_hint(
                "write the code to a file with fs_write (any size, sent in chunks), then run_lua \
                 `return dofile(\"that/file.lua\")`",
            )
            .with_details(json!({"field": "code", "limit": MAX_CODE_ESCAPED, "actual": escaped})));
        }
        if let Some(t) = self.timeout_ms {
            check::in_range("timeout_ms", t, 1, MAX_TIMEOUT_MS)?;
        }
        Ok(())
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RunLuaOut {
    /// Every returned value, nils included (as null). Functions and other unserialisable values arrive as
    /// their `tostring`; NaN and infinities as "nan" / "inf". A table with keys exactly 1..n is an array; any
    /// other table, sparse integer keys included, an object with string keys.
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
    values: LuaValues,
}

pub fn specs(state: &Arc<State>) -> Vec<ToolSpec> {
    let s = state.clone();
    vec![
        ToolSpec::new(
            "run_lua",
            "Run Lua code on one ComputerCraft computer and return its results and printed output. The code runs \
             in its own coroutine, so it may sleep, move a turtle or wait for events while the computer keeps \
             serving other requests. Environment: every CC API global (fs, term, turtle, peripheral, redstone, \
             http, textutils, sleep, ...) plus what a program started from the shell gets: shell, require and \
             package (fresh for each run), and multishell on advanced computers only. Each run has its own \
             globals; whatever it changes in _G, the API tables or the terminal (term.redirect, a pagedPrint \
             waiting for a key) is undone when the run ends, however it ends (changes are kept while another \
             run is still going). Deadline: code that yields (sleep, os.pullEvent, turtle moves) is stopped at \
             timeout_ms. A loop that never yields cannot be stopped: the call returns E_TIMEOUT at the deadline, \
             but the loop keeps the computer busy (no other request is served) until CC aborts it with \
             \"Too long without yielding\" after about 7 s; put sleep(0) in long loops. Values: nil → null, NaN \
             and infinities → \"nan\"/\"inf\", functions → their tostring; a table whose keys are exactly 1..n \
             → a JSON array, any other table (sparse integer keys included) → an object with the keys as \
             strings ({[1]=a,[5]=b} → {\"1\":a,\"5\":b}). A Lua error is returned as an E_REMOTE error with \
             the output printed before it.",
        )
        .title("Run Lua")
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
        .request(
            "lua.run",
            json!({ "code": args.code, "timeout": timeout.as_secs_f64() }),
            timeout,
        )
        .await?;
    let raw: Raw = reply(&computer, result)?;
    let values = raw.values.0;
    // Fenced: what the program printed is the computer's to choose, and unfenced it could pass for the
    // bridge's own lines (`returned: ...`, `[bridge] ...`; an attack run's finding).
    let mut text = String::new();
    if !raw.output.is_empty() {
        text.push_str("printed:\n");
        text.push_str(&bridge_core::text::fenced("program-output", &raw.output));
    }
    if raw.truncated {
        text.push_str("\n[output truncated]");
    }
    if !values.is_empty() {
        if !text.is_empty() {
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
