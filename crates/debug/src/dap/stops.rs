//! What a stop reports (where, the source around it, the stack, and why: a breakpoint, a step, a pause, or an
//! exception with its type and message), and the tools that lead to one besides the resumes: `debug_pause` and
//! `debug_run_to_line`.

use super::backend::{DapBackend, Params, dap_err, left, u64_param};
use super::client::DapError;
use super::session::{Run, Session, Stop, lock};
use crate::envelope::ScriptError;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Lines shown either side of the current one.
pub const CONTEXT_LINES: usize = 3;
/// One source line is cut to this many bytes.
pub const LINE_BYTES: usize = 200;
/// Frames a stop reports.
pub const STACK_FRAMES: u64 = 20;
/// How long the requests describing one stop may take together, at most.
const DESCRIBE_WITHIN: Duration = Duration::from_secs(5);
/// How long they may take at least, past the call's deadline if need be: a stop found just before it is
/// still described (a CI run answered a step found at the end of a 1 s wait with no line, its stackTrace
/// given no time at all).
const DESCRIBE_AT_LEAST: Duration = Duration::from_secs(1);

/// A stop as the tools report it: `{event: "stopped", threadId, reason, stopSeq, file, line, column,
/// functionName, frameId, source, stack, exception?}`. What the adapter cannot tell (a thread resumed
/// meanwhile) is left out; the stop itself is never dropped.
pub async fn describe(s: &Session, stop: &Stop, deadline: Instant) -> Value {
    let mut loc = stop.to_json();
    loc["event"] = json!("stopped");
    loc["sessionId"] = json!(s.id);
    let now = Instant::now();
    let until = deadline.clamp(now + DESCRIBE_AT_LEAST, now + DESCRIBE_WITHIN);
    let trace = s
        .client
        .request(
            "stackTrace",
            json!({"threadId": stop.thread_id, "startFrame": 0, "levels": STACK_FRAMES}),
            left(until),
        )
        .await;
    if let Ok(body) = trace {
        let frames: Vec<Value> = body
            .get("stackFrames")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|f| {
                json!({"name": f.get("name"), "file": f.pointer("/source/path"), "line": f.get("line"),
                    "frameId": f.get("id")})
            })
            .collect();
        if let Some(top) = body.pointer("/stackFrames/0") {
            loc["file"] = top.pointer("/source/path").cloned().unwrap_or(Value::Null);
            loc["line"] = top.get("line").cloned().unwrap_or(Value::Null);
            loc["column"] = top.get("column").cloned().unwrap_or(Value::Null);
            loc["functionName"] = top.get("name").cloned().unwrap_or(Value::Null);
            loc["frameId"] = top.get("id").cloned().unwrap_or(Value::Null);
            if let (Some(path), Some(line)) = (
                top.pointer("/source/path").and_then(Value::as_str),
                top.get("line").and_then(Value::as_u64),
            ) && let Some(source) = context(Path::new(path), line as usize, CONTEXT_LINES)
            {
                loc["source"] = source;
            }
        }
        loc["stack"] = json!(frames);
        if let Some(total) = body.get("totalFrames") {
            loc["totalFrames"] = total.clone();
        }
    }
    if stop.reason == "exception" {
        loc["exception"] = exception(s, stop, until).await;
    }
    loc
}

/// The exception a thread stopped on: `exceptionInfo` where the adapter has it (type, message, break mode),
/// else what the stopped event said.
async fn exception(s: &Session, stop: &Stop, until: Instant) -> Value {
    let from_event = || {
        let text = stop.text.clone().unwrap_or_default();
        match text.split_once(": ") {
            Some((ty, message)) if !ty.contains(' ') => json!({"type": ty, "message": message}),
            _ => json!({"message": text}),
        }
    };
    let offered = lock(&s.capabilities)
        .get("supportsExceptionInfoRequest")
        .and_then(Value::as_bool)
        == Some(true);
    if !offered {
        return from_event();
    }
    match s
        .client
        .request(
            "exceptionInfo",
            json!({"threadId": stop.thread_id}),
            left(until),
        )
        .await
    {
        Ok(info) => {
            let details = info.get("details").cloned().unwrap_or(Value::Null);
            let ty = details
                .get("typeName")
                .or_else(|| details.get("fullTypeName"))
                .or_else(|| info.get("exceptionId"))
                .cloned()
                .unwrap_or(Value::Null);
            let message = details
                .get("message")
                .or_else(|| info.get("description"))
                .cloned()
                .unwrap_or(Value::Null);
            json!({"type": ty, "message": message, "breakMode": info.get("breakMode"),
                "exceptionId": info.get("exceptionId")})
        }
        Err(_) => from_event(),
    }
}

/// `line` of `path` with `around` lines either side, each cut to [`LINE_BYTES`]: `{startLine, line, text}`,
/// the current line marked `>` in `text` (`  12 | ...`). `None` when the file cannot be read or is shorter.
pub fn context(path: &Path, line: usize, around: usize) -> Option<Value> {
    if line == 0 {
        return None;
    }
    let bytes = super::source::read("source", path).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    if line > lines.len() {
        return None;
    }
    let first = line.saturating_sub(around).max(1);
    let last = (line + around).min(lines.len());
    let width = last.to_string().len();
    let mut out = String::new();
    for n in first..=last {
        let mut l = lines[n - 1];
        let mut cut = l.len().min(LINE_BYTES);
        while !l.is_char_boundary(cut) {
            cut -= 1;
        }
        let cut_off = cut < l.len();
        l = &l[..cut];
        let mark = if n == line { '>' } else { ' ' };
        out.push_str(&format!(
            "{mark}{n:>width$} | {l}{}\n",
            if cut_off { " …" } else { "" }
        ));
    }
    Some(json!({"startLine": first, "endLine": last, "line": line, "text": out}))
}

impl DapBackend {
    /// Pauses the program (`threadId`, else the first thread the adapter lists) and reports the stop. A program
    /// already paused answers where it is.
    pub(super) async fn pause(&self, p: &Params, deadline: Instant) -> Result<Value, ScriptError> {
        let s = self.session(p)?;
        let wait_ms = u64_param(p, "timeoutMs").unwrap_or(5000);
        let until = (Instant::now() + Duration::from_millis(wait_ms)).min(deadline);
        if matches!(s.run(), Run::Paused { .. }) || s.pending_stops() > 0 {
            let mut r = self.wait_result(&s, None, until, wait_ms).await?;
            r["alreadyPaused"] = json!(true);
            return Ok(r);
        }
        let thread_id = match u64_param(p, "threadId") {
            Some(t) => t as i64,
            None => {
                let body = s
                    .client
                    .request("threads", json!({}), left(until))
                    .await
                    .map_err(dap_err)?;
                body.pointer("/threads/0/id")
                    .and_then(Value::as_i64)
                    .ok_or_else(|| {
                        ScriptError::new("E_NOT_PAUSED", "the program has no thread to pause")
                    })?
            }
        };
        let baseline = s.shared.state().stops;
        s.client
            .request("pause", json!({"threadId": thread_id}), left(until))
            .await
            .map_err(dap_err)?;
        let mut r = self.wait_result(&s, Some(baseline), until, wait_ms).await?;
        // lldb-dap halts with SIGSTOP and reports the signal as an exception: it is the pause asked for.
        if r["reason"] == "exception"
            && r["description"]
                .as_str()
                .is_some_and(|d| d.contains("SIGSTOP"))
            && let Some(obj) = r.as_object_mut()
        {
            obj.remove("exception");
            obj.insert("adapterReason".into(), json!("exception"));
            obj.insert("reason".into(), json!("pause"));
        }
        Ok(r)
    }

    /// Runs to `path:line`: a breakpoint there, for this session only and until the next stop, then continue.
    /// The stop may be elsewhere (another breakpoint, an exception, the end): `reachedTarget` says.
    pub(super) async fn run_to_line(
        &self,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let s = self.session(p)?;
        let thread_id = s.paused_thread()?;
        let (path, line) = self.source_line(p)?;
        let wait_ms = u64_param(p, "timeoutMs").unwrap_or(30_000);
        let until = (Instant::now() + Duration::from_millis(wait_ms)).min(deadline);
        let own = lock(&s.breakpoints).request(&path);
        let mut with_target = own.clone();
        let mut added = false;
        if let Some(list) = with_target
            .get_mut("breakpoints")
            .and_then(Value::as_array_mut)
            && !list
                .iter()
                .any(|b| b.get("line").and_then(Value::as_u64) == Some(line))
        {
            list.push(json!({"line": line}));
            added = true;
        }
        let bound = s
            .client
            .request("setBreakpoints", with_target, left(until))
            .await
            .map_err(dap_err)?;
        // Where the target bound: the answer's last entry is the one added (answers keep the request's order).
        let target_line = added
            .then(|| {
                bound
                    .get("breakpoints")
                    .and_then(Value::as_array)
                    .and_then(|l| l.last())
                    .and_then(|b| b.get("line"))
                    .and_then(Value::as_u64)
            })
            .flatten()
            .unwrap_or(line);
        let result = self
            .resume_on(&s, "continue", thread_id, until, wait_ms)
            .await;
        // The file's own list comes back whatever happened, so the target breakpoint never stops again.
        let restored = s
            .client
            .request("setBreakpoints", own, left(deadline))
            .await;
        let mut result = result?;
        match restored {
            // The adapter numbered the file's breakpoints afresh: their binding follows.
            Ok(body) => lock(&s.breakpoints).apply(&path, &body),
            Err(DapError::Link(_)) => {}
            Err(e) => {
                result["warning"] = json!(format!(
                    "the temporary breakpoint at line {line} could not be removed: {e}"
                ));
            }
        }
        let here = result["event"] == "stopped"
            && result["line"].as_u64() == Some(target_line)
            && result["file"].as_str().is_some_and(|f| {
                Path::new(f).canonicalize().ok().as_deref() == Some(path.as_path())
            });
        result["reachedTarget"] = json!(here);
        result["target"] = json!({"path": path.display().to_string(), "line": line});
        if here && result["reason"] == "breakpoint" {
            result["reason"] = json!("runToLine");
        }
        Ok(result)
    }

    /// Sends a resume request for `thread_id` and reports the stop it leads to.
    async fn resume_on(
        &self,
        s: &Arc<Session>,
        command: &str,
        thread_id: i64,
        until: Instant,
        wait_ms: u64,
    ) -> Result<Value, ScriptError> {
        let before = match s.resuming(command, thread_id) {
            Ok(b) => b,
            Err(outcome) => {
                let mut r = self.report(s, outcome, until).await;
                r["resumed"] = json!(false);
                return Ok(r);
            }
        };
        let baseline = before.stops;
        if let Err(e) = s
            .client
            .request(command, json!({"threadId": thread_id}), left(until))
            .await
        {
            s.refused(before);
            return Err(dap_err(e));
        }
        self.wait_result(s, Some(baseline), until, wait_ms).await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn context_marks_the_line_and_cuts_long_ones() {
        let dir = std::env::temp_dir().join(format!("stops-ctx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("a.py");
        let long = "x".repeat(1000);
        std::fs::write(&f, format!("one\ntwo\nthree\n{long}\nfive\n")).unwrap();
        let v = context(&f, 2, 1).unwrap();
        assert_eq!(v["text"], " 1 | one\n>2 | two\n 3 | three\n");
        let v = context(&f, 4, 0).unwrap();
        assert!(v["text"].as_str().unwrap().len() < LINE_BYTES + 20, "{v}");
        assert!(context(&f, 99, 1).is_none());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
