//! VSC-Bridge's response envelope, and the one mapping from a script's error to the agent's tool error.

use crate::catalog::ToolDef;
use bridge_core::{ErrorCode, ToolError};
use serde_json::{Value, json};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A failed script: its code (`E_NO_SESSION`), message, details and, when the script knows one, a hint.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptError {
    pub code: String,
    pub message: String,
    pub details: Value,
    pub hint: Option<String>,
}

impl ScriptError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
            details: json!({}),
            hint: None,
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }

    /// The `error` object of an error envelope.
    pub fn to_json(&self) -> Value {
        let mut details = self.details.clone();
        if let (Some(hint), Some(map)) = (&self.hint, details.as_object_mut()) {
            map.entry("hint").or_insert_with(|| json!(hint));
        }
        json!({"code": self.code, "message": self.message, "details": details})
    }

    /// From an error envelope's `error` object (the file protocol's `error.json`).
    pub fn from_json(error: &Value) -> Self {
        let details = error.get("details").cloned().unwrap_or_else(|| json!({}));
        Self {
            code: error
                .get("code")
                .and_then(Value::as_str)
                .unwrap_or("E_INTERNAL")
                .to_owned(),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("the script failed without a message")
                .to_owned(),
            hint: details
                .get("hint")
                .and_then(Value::as_str)
                .map(str::to_owned),
            details,
        }
    }

    /// The agent's error: the script's code kept (not flattened to `E_INTERNAL`), its hint, else the metadata's
    /// `error_contract` hint, else the category's.
    pub fn into_tool_error(self, def: Option<&ToolDef>) -> ToolError {
        let category = category(&self.code);
        let mut err = ToolError::new(category, self.message)
            .with_details(self.details)
            .with_code_name(self.code.clone());
        let hint = self
            .hint
            .or_else(|| def.and_then(|d| d.hint_for(&self.code)).map(str::to_owned))
            .or_else(|| default_hint(&self.code).map(str::to_owned));
        if let Some(hint) = hint {
            err = err.with_hint(hint);
        }
        err
    }
}

fn category(code: &str) -> ErrorCode {
    match code {
        "E_NO_SESSION" | "E_NOT_PAUSED" | "E_NOT_STOPPED" | "E_STALE_REFERENCE" => {
            ErrorCode::Conflict
        }
        "E_TIMEOUT" | "E_PICKUP_TIMEOUT" => ErrorCode::Timeout,
        "E_CANCELLED" => ErrorCode::Cancelled,
        "E_INVALID_PARAMS" | "E_INVALID_LINE" => ErrorCode::InvalidArgument,
        "E_FILE_NOT_FOUND" | "E_SCRIPT_NOT_FOUND" => ErrorCode::NotFound,
        "E_BRIDGE_UNAVAILABLE" | "E_BRIDGE_NOT_FOUND" | "E_NO_RESPONSE" => ErrorCode::Disconnected,
        "E_CAPACITY" | "E_CIRCUIT_OPEN" | "E_BUSY" => ErrorCode::Busy,
        "E_ADAPTER_NOT_FOUND" | "E_UNSUPPORTED_BACKEND" | "E_UNSUPPORTED_LANGUAGE" => {
            ErrorCode::Unsupported
        }
        "E_UNSUPPORTED_BY_ADAPTER" => ErrorCode::Unsupported,
        "E_TOO_MANY_SESSIONS" => ErrorCode::Busy,
        "E_PTRACE_REFUSED" | "E_LAUNCH_REFUSED" => ErrorCode::Conflict,
        "E_DATA_TOO_LARGE" | "E_PAYLOAD_TOO_LARGE" => ErrorCode::TooLarge,
        "E_INTERNAL" => ErrorCode::Internal,
        _ => ErrorCode::Remote,
    }
}

/// The codes VSC-Bridge's extension answers with (its scripts and its file-protocol host).
pub const UPSTREAM_CODES: &[&str] = &[
    "E_NO_SESSION",
    "E_NOT_PAUSED",
    "E_NOT_STOPPED",
    "E_TIMEOUT",
    "E_FILE_NOT_FOUND",
    "E_STALE_REFERENCE",
    "E_INVALID_PARAMS",
    "E_INVALID_LINE",
    "E_EVALUATION_FAILED",
    "E_INTERNAL",
    "E_SCRIPT_NOT_FOUND",
    "E_CAPACITY",
    "E_CIRCUIT_OPEN",
    "E_CANCELLED",
    "E_CRASH_RECOVERY",
    "E_BRIDGE_UNAVAILABLE",
    "E_PICKUP_TIMEOUT",
    "E_NO_RESPONSE",
];

/// The codes only this bridge answers with.
pub const OUR_CODES: &[&str] = &[
    "E_LAUNCH_FAILED",
    "E_ADAPTER_NOT_FOUND",
    "E_UNSUPPORTED_BACKEND",
    "E_UNSUPPORTED_LANGUAGE",
    "E_DAP_REQUEST_FAILED",
    "E_BRIDGE_UNTRUSTED",
    "E_LAUNCH_REFUSED",
    "E_DATA_TOO_LARGE",
    "E_PAYLOAD_TOO_LARGE",
    "E_UNSUPPORTED_BY_ADAPTER",
    "E_TOO_MANY_SESSIONS",
    "E_PTRACE_REFUSED",
];

fn default_hint(code: &str) -> Option<&'static str> {
    Some(match code {
        "E_NO_SESSION" => "Start debug session first using debug_start",
        "E_NOT_PAUSED" => {
            "Wait for the program to stop (debug_wait_for_hit) or set a breakpoint first"
        }
        "E_STALE_REFERENCE" => {
            "The program resumed since; list the variables again and use the new references"
        }
        "E_TIMEOUT" => {
            "Increase timeoutMs, or check with breakpoint_list that the breakpoint is verified"
        }
        "E_BRIDGE_UNAVAILABLE" => {
            "Open the workspace in VS Code with VSC-Bridge, or run `mcp-bridges debug host --debug-workspace W`"
        }
        "E_PICKUP_TIMEOUT" => {
            "The bridge host is not taking jobs; check that VS Code (or `mcp-bridges debug host`) runs for this workspace"
        }
        "E_CANCELLED" => "Call again if the result is still needed",
        "E_INTERNAL" => {
            "The debugger host failed running this script: look at VS Code's Output panel (VSC-Bridge) or the `mcp-bridges debug host` log, check debug_status, then call again; reload the VS Code window if it keeps failing"
        }
        "E_NOT_STOPPED" => {
            "Wait for the program to stop (debug_wait_for_hit) or set a breakpoint first"
        }
        "E_FILE_NOT_FOUND" => {
            "Check the path (relative paths are from the workspace) and that the file exists"
        }
        "E_INVALID_PARAMS" => {
            "Fix the parameter the message names; the tool's schema lists the allowed values"
        }
        "E_INVALID_LINE" => "Pick a line inside the file that holds code (not blank or a comment)",
        "E_EVALUATION_FAILED" => {
            "Check the expression's syntax for the program's language and that its names exist in this frame"
        }
        "E_SCRIPT_NOT_FOUND" => {
            "The host does not know this tool: update VSC-Bridge (or mcp-bridges) so both sides have the same version"
        }
        "E_CAPACITY" => {
            "The host runs its maximum of jobs: wait for a running call (a long wait?) to end, then call again"
        }
        "E_CIRCUIT_OPEN" => {
            "The host is refusing jobs after repeated failures: wait the details' retryAfter ms, check its log, then call again"
        }
        "E_CRASH_RECOVERY" => {
            "The host stopped while this call ran and it was not run again: check debug_status, then decide whether to call again"
        }
        "E_NO_RESPONSE" => {
            "The host finished without an answer: check debug_status, then call again"
        }
        "E_LAUNCH_FAILED" => {
            "Check the configuration's program path and type; dap_logs shows what the program printed"
        }
        "E_DAP_REQUEST_FAILED" => {
            "The debugger refused the request; check debug_status for where the program is"
        }
        "E_BRIDGE_UNTRUSTED" => {
            "Make .vsc-bridge/ yours, mode 0700 and not a symlink (or remove it and let the host recreate it)"
        }
        "E_LAUNCH_REFUSED" => {
            "Launch a program inside the workspace, or restart the bridge with --debug-launch-allow DIR or --debug-allow-launch-anywhere"
        }
        "E_DATA_TOO_LARGE" => {
            "Ask for less (a narrower expression, fewer variables), or raise --debug-max-data-bytes"
        }
        "E_PAYLOAD_TOO_LARGE" => "Send smaller parameters",
        "E_UNSUPPORTED_BY_ADAPTER" => {
            "This debugger does not offer that; debug_status lists what each adapter supports"
        }
        "E_TOO_MANY_SESSIONS" => {
            "End a session you no longer need (debug_stop with its sessionId; debug_list_sessions lists them), or raise --debug-max-sessions"
        }
        "E_PTRACE_REFUSED" => {
            "Run the program under the debugger with debug_start instead, or allow tracing (kernel.yama.ptrace_scope, CAP_SYS_PTRACE)"
        }
        "E_ADAPTER_NOT_FOUND" => {
            "Install the debugger the message names, or point to it with --debug-python / --debug-lldb-dap / --debug-js-debug"
        }
        "E_UNSUPPORTED_BACKEND" => {
            "Use the backend the message names (--debug-backend vscode or dap)"
        }
        "E_UNSUPPORTED_LANGUAGE" => {
            "Use type debugpy/python, lldb-dap/lldb/cppdbg, or pwa-node/node in the launch configuration"
        }
        _ => return None,
    })
}

/// Milliseconds since the epoch, and the same instant as ISO 8601 (`2025-11-25T10:15:00.123Z`).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

pub fn iso8601(ms: u64) -> String {
    let (date, time) = civil(ms);
    format!("{date}T{time}Z")
}

/// `(YYYY-MM-DD, HH:MM:SS.mmm)` of an epoch-milliseconds instant (UTC).
pub fn civil(ms: u64) -> (String, String) {
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (
        format!("{y:04}-{m:02}-{d:02}"),
        format!(
            "{:02}:{:02}:{:02}.{:03}",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60,
            ms % 1000
        ),
    )
}

/// A success envelope.
pub fn success(request_id: &str, data: Value, started: Instant) -> Value {
    json!({
        "ok": true,
        "type": "success",
        "data": data,
        "meta": meta(request_id, started),
    })
}

/// An error envelope.
pub fn failure(request_id: &str, error: &ScriptError, started: Instant) -> Value {
    json!({
        "ok": false,
        "type": "error",
        "error": error.to_json(),
        "meta": meta(request_id, started),
    })
}

fn meta(request_id: &str, started: Instant) -> Value {
    json!({
        "requestId": request_id,
        "mode": "normal",
        "timestamp": iso8601(now_ms()),
        "duration": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates_are_utc_civil_dates() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_732_530_000_123), "2024-11-25T10:20:00.123Z");
    }

    /// The codes VSC-Bridge's extension and this bridge answer with each get a hint saying what the user can
    /// do, never the core's generic "retry once; report a bug" (upstream's `E_INTERNAL` is the extension's
    /// failure, not this bridge's bug).
    #[test]
    fn every_code_gets_a_hint_saying_what_to_do() {
        for code in UPSTREAM_CODES.iter().chain(OUR_CODES) {
            let e = ScriptError::new(code, "x").into_tool_error(None);
            assert!(!e.hint().is_empty(), "{code} has no hint");
            assert!(!e.hint().contains("report a bug"), "{code}: {}", e.hint());
        }
        let e = ScriptError::new("E_INTERNAL", "x").into_tool_error(None);
        assert!(e.hint().contains("Output"), "{}", e.hint());
    }

    #[test]
    fn script_codes_survive_with_their_hints() {
        let e = ScriptError::new("E_NO_SESSION", "no session").into_tool_error(None);
        assert_eq!(e.code_name(), "E_NO_SESSION");
        assert!(e.hint().contains("debug_start"));
    }
}
