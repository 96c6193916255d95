//! The MCP server's side of the file protocol, byte-compatible with VSC-Bridge's `src/lib/fs-bridge.ts`, without
//! its bugs: the script's error code is kept, cancellation and our own timeout write `cancel` and wait briefly
//! for `done`, the deadline covers the tool's `timeoutMs`, nothing is retried, events become MCP progress and
//! log notifications.

use super::io::{COMMAND_BYTES, SMALL_FILE_BYTES, read_json, touch_marker, write_json_atomic};
use super::watch::{Hub, Waiter};
use super::{
    CANCEL, CLAIMED_JSON, COMMAND_JSON, DATA_JSON, DONE, ERROR_JSON, EVENTS_NDJSON, EXECUTE_DIR,
    RESPONSE_JSON,
};
use crate::envelope::{ScriptError, iso8601, now_ms};
use bridge_core::ToolCtx;
use bridge_core::tool::LogLevel;
use serde_json::{Value, json};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// VSC-Bridge's pickup window: a job not claimed in this time is `E_PICKUP_TIMEOUT`.
pub const PICKUP_TIMEOUT: Duration = Duration::from_secs(5);
/// After writing `cancel`, how long to wait for the host's `done`.
pub const CANCEL_GRACE: Duration = Duration::from_secs(2);
/// Bytes of `events.ndjson` one job may stream; the rest is not read.
pub const MAX_EVENT_BYTES: u64 = 4 << 20;

/// What a call brings to the file client: its cancellation, and the MCP context for notifications.
#[derive(Clone)]
pub struct RunCtx {
    pub cancel: CancellationToken,
    pub tool: Option<ToolCtx>,
}

pub struct FsClient {
    root: PathBuf,
    max_data: u64,
    /// One watcher (one thread) for all of this client's jobs.
    hub: std::sync::Arc<Hub>,
}

impl FsClient {
    pub fn new(root: PathBuf) -> Self {
        Self {
            root,
            max_data: super::io::DEFAULT_DATA_BYTES,
            hub: Hub::new(),
        }
    }

    /// The largest answer file (`data.json`, `response.json`, `error.json`) read, in bytes.
    pub fn max_data_bytes(mut self, limit: u64) -> Self {
        self.max_data = limit;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Runs `script` through the host; the envelope of `response.json`, or the error of `error.json` (its code
    /// kept), or the client's own error.
    /// The job runs in its own task: when the MCP call is cancelled the core drops the call's future, and the
    /// task still writes `cancel`, waits for `done` and cleans up.
    pub async fn run(
        &self,
        script: &str,
        params: Value,
        deadline: Instant,
        ctx: RunCtx,
    ) -> Result<Value, ScriptError> {
        let job = Job {
            root: self.root.clone(),
            max_data: self.max_data,
            hub: std::sync::Arc::clone(&self.hub),
        };
        let script = script.to_owned();
        tokio::spawn(async move { job.run(&script, params, deadline, ctx).await })
            .await
            .unwrap_or_else(|e| {
                Err(ScriptError::new(
                    "E_INTERNAL",
                    format!("the job task failed: {e}"),
                ))
            })
    }
}

struct Job {
    root: PathBuf,
    max_data: u64,
    hub: std::sync::Arc<Hub>,
}

/// While a job runs, how often the client checks that its host is still alive (no file event says it died).
const LIVENESS_CHECK: Duration = Duration::from_secs(1);

/// `E_BRIDGE_UNTRUSTED`, naming the directory and why.
pub fn untrusted_error(e: &super::trust::Untrusted) -> ScriptError {
    ScriptError::new("E_BRIDGE_UNTRUSTED", e.to_string())
        .hint(e.hint())
        .details(json!({"path": e.path.display().to_string(), "reason": e.reason}))
}

impl Job {
    async fn run(
        &self,
        script: &str,
        params: Value,
        deadline: Instant,
        ctx: RunCtx,
    ) -> Result<Value, ScriptError> {
        if let Err(e) = super::trust::check_root(&self.root) {
            // A missing directory is a host that never ran here, not an attack.
            if std::fs::symlink_metadata(&e.path).is_err() {
                return Err(ScriptError::new(
                    "E_BRIDGE_UNAVAILABLE",
                    format!("host.json not found in {}", self.root.display()),
                ));
            }
            return Err(untrusted_error(&e));
        }
        match super::host_json_age(&self.root) {
            None => {
                return Err(ScriptError::new(
                    "E_BRIDGE_UNAVAILABLE",
                    format!("host.json not found in {}", self.root.display()),
                ));
            }
            Some(age) if age >= crate::backend::FRESH_HOST => {
                return Err(ScriptError::new(
                    "E_BRIDGE_UNAVAILABLE",
                    format!(
                        "the bridge host is not running: host.json was last touched {} s ago",
                        age.as_secs()
                    ),
                )
                .details(json!({"hostJsonAgeMs": age.as_millis() as u64})));
            }
            Some(_) => {}
        }
        let (id, dir) = self.make_job_dir()?;
        // Watched before the command exists, so no change the host makes can come before the watch.
        let guard = self.hub.watch(&dir, false);
        let mut waiter = self.hub.subscribe();
        let timeout_ms = deadline
            .saturating_duration_since(Instant::now())
            .as_millis() as u64;
        let command = json!({"version": 1, "clientId": "mcp-server", "id": id, "createdAt": iso8601(now_ms()),
            "scriptName": script, "params": params, "timeout": timeout_ms});
        let tmp = dir.join(format!("{COMMAND_JSON}.tmp"));
        let write = write_json_atomic(&tmp, &command)
            .and_then(|()| std::fs::rename(&tmp, dir.join(COMMAND_JSON)));
        if let Err(e) = write {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(ScriptError::new(
                "E_INTERNAL",
                format!("could not write {}: {e}", dir.display()),
            ));
        }
        let result = self
            .await_job(&id, &dir, deadline, &ctx, &mut waiter, guard.is_polling())
            .await;
        drop(guard);
        let result = result.and_then(|()| read_result(&dir, self.max_data));
        if dir.join(DONE).exists() || !dir.join(CLAIMED_JSON).exists() {
            // The command goes first: a directory being removed must never look like a new job to a host.
            let _ = std::fs::remove_file(dir.join(COMMAND_JSON));
            let _ = std::fs::remove_dir_all(&dir);
        }
        // Otherwise the host still holds the job; it writes `done` after seeing `cancel` and its GC removes the
        // directory. Removing it under a running job would make the host's writes fail.
        result
    }

    fn make_job_dir(&self) -> Result<(String, PathBuf), ScriptError> {
        let execute = self.root.join(EXECUTE_DIR);
        for _ in 0..16 {
            let id = super::ids::job_id(now_ms());
            let dir = execute.join(&id);
            let mut builder = std::fs::DirBuilder::new();
            #[cfg(unix)]
            {
                use std::os::unix::fs::DirBuilderExt;
                builder.mode(0o700);
            }
            match builder.create(&dir) {
                Ok(()) => return Ok((id, dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(ScriptError::new(
                        "E_BRIDGE_UNAVAILABLE",
                        format!("{}: {e}", execute.display()),
                    ));
                }
            }
        }
        Err(ScriptError::new(
            "E_INTERNAL",
            "no free job id after 16 tries",
        ))
    }

    async fn await_job(
        &self,
        id: &str,
        dir: &Path,
        deadline: Instant,
        ctx: &RunCtx,
        waiter: &mut Waiter,
        polling: bool,
    ) -> Result<(), ScriptError> {
        let started = Instant::now();
        let pickup_until = (started + PICKUP_TIMEOUT).min(deadline);
        let mut events = EventTail::default();
        // Pickup.
        loop {
            if dir.join(CLAIMED_JSON).exists() {
                break;
            }
            if ctx.cancel.is_cancelled() {
                let _ = touch_marker(&dir.join(CANCEL));
                return Err(ScriptError::new(
                    "E_CANCELLED",
                    "cancelled before the host picked the job up",
                ));
            }
            if Instant::now() >= pickup_until {
                // Written first, so a host that claims it a moment later sees the job is not wanted.
                let _ = touch_marker(&dir.join(CANCEL));
                return Err(ScriptError::new(
                    "E_PICKUP_TIMEOUT",
                    format!(
                        "the bridge host did not claim job {id} within {} ms",
                        pickup_until.saturating_duration_since(started).as_millis()
                    ),
                ));
            }
            tokio::select! {
                () = waiter.changed(pickup_until, polling) => {}
                () = ctx.cancel.cancelled() => {}
            }
        }
        // Execution.
        loop {
            events.pump(dir, ctx).await;
            if dir.join(DONE).exists() {
                events.pump(dir, ctx).await;
                return Ok(());
            }
            if let Some(pid) = self.dead_host() {
                return Err(ScriptError::new(
                    "E_BRIDGE_UNAVAILABLE",
                    format!("the bridge host (pid {pid}) died while running job {id}; it will be answered E_CRASH_RECOVERY when a host starts, never re-run"),
                )
                .hint("Restart VS Code (or `mcp-bridges debug host`), check debug_status, then decide whether to call again")
                .details(json!({"jobId": id, "pid": pid})));
            }
            let cancelled = ctx.cancel.is_cancelled();
            if cancelled || Instant::now() >= deadline {
                let _ = touch_marker(&dir.join(CANCEL));
                let grace = Instant::now() + CANCEL_GRACE;
                while Instant::now() < grace && !dir.join(DONE).exists() {
                    waiter.changed(grace, polling).await;
                }
                events.pump(dir, ctx).await;
                return Err(if cancelled {
                    ScriptError::new("E_CANCELLED", format!("job {id} was cancelled"))
                } else {
                    ScriptError::new(
                        "E_TIMEOUT",
                        format!("Command timed out after {} ms", timeout_ms_of(dir)),
                    )
                }
                .details(json!({"jobId": id, "hostFinished": dir.join(DONE).exists()})));
            }
            let until = deadline.min(Instant::now() + LIVENESS_CHECK);
            tokio::select! {
                () = waiter.changed(until, polling) => {}
                () = ctx.cancel.cancelled() => {}
            }
        }
    }
}

impl Job {
    /// The host's pid from `host.json` when the host is dead: its pid is gone from `/proc` and it wrote it from
    /// our own pid namespace, or its heartbeat stopped (3 beats missed, or 30 s for a host that does not say
    /// its interval, as VS Code does not). A pid alone proves nothing about a host in another namespace.
    fn dead_host(&self) -> Option<u64> {
        let host = read_json(&self.root.join(super::HOST_JSON), SMALL_FILE_BYTES).ok()?;
        let pid = host.get("pid").and_then(Value::as_u64).unwrap_or(0);
        if super::pid_gone(pid, host.get("pidNs").and_then(Value::as_str)) {
            return Some(pid);
        }
        let limit = host
            .get("heartbeatMs")
            .and_then(Value::as_u64)
            .map_or(crate::backend::FRESH_HOST, |ms| {
                Duration::from_millis(ms.saturating_mul(3).max(3000))
            });
        let age = super::host_json_age(&self.root)?;
        (age > limit).then_some(pid)
    }
}

fn timeout_ms_of(dir: &Path) -> u64 {
    read_json(&dir.join(COMMAND_JSON), COMMAND_BYTES)
        .ok()
        .and_then(|c| c.get("timeout").and_then(Value::as_u64))
        .unwrap_or(0)
}

/// An answer file over the client's bound: a coded error naming the file and the limit, nothing read past it.
fn too_large(file: &str, limit: u64, e: &std::io::Error) -> ScriptError {
    ScriptError::new("E_DATA_TOO_LARGE", format!("{file}: {e}"))
        .hint("Ask for less (a narrower expression, fewer variables), or raise --debug-max-data-bytes / DEBUG_MAX_DATA_BYTES")
        .details(json!({"field": file, "limit": limit}))
}

/// `error.json` first, else `response.json` (with `dataRef` resolved), else `E_NO_RESPONSE`.
fn read_result(dir: &Path, limit: u64) -> Result<Value, ScriptError> {
    // `done` comes after the answer file, so whichever exists is complete: no retries for the one that does not.
    if dir.join(ERROR_JSON).exists() {
        match read_json(&dir.join(ERROR_JSON), limit) {
            Ok(err) => return Err(ScriptError::from_json(err.get("error").unwrap_or(&err))),
            Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
                return Err(too_large(ERROR_JSON, limit, &e));
            }
            Err(_) => {}
        }
    }
    match read_json(&dir.join(RESPONSE_JSON), limit) {
        Ok(mut resp) => {
            if let Some(data_ref) = resp.get("dataRef").and_then(Value::as_str) {
                if data_ref != DATA_JSON {
                    return Err(ScriptError::new(
                        "E_NO_RESPONSE",
                        format!("dataRef `{data_ref}` is not {DATA_JSON}"),
                    ));
                }
                let data = read_json(&dir.join(DATA_JSON), limit).map_err(|e| {
                    if e.kind() == std::io::ErrorKind::FileTooLarge {
                        too_large(DATA_JSON, limit, &e)
                    } else {
                        ScriptError::new("E_NO_RESPONSE", format!("{DATA_JSON}: {e}"))
                    }
                })?;
                resp["data"] = data;
                if let Some(obj) = resp.as_object_mut() {
                    obj.remove("dataRef");
                }
            }
            Ok(resp)
        }
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
            Err(too_large(RESPONSE_JSON, limit, &e))
        }
        Err(e) => Err(ScriptError::new(
            "E_NO_RESPONSE",
            format!("the host marked the job done without a response: {e}"),
        )),
    }
}

/// Follows `events.ndjson` by byte offset, holding back a partial last line.
#[derive(Default)]
struct EventTail {
    offset: u64,
    partial: Vec<u8>,
}

impl EventTail {
    async fn pump(&mut self, dir: &Path, ctx: &RunCtx) {
        let Some(tool) = &ctx.tool else { return };
        if self.offset >= MAX_EVENT_BYTES {
            return;
        }
        let opened = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(dir.join(EVENTS_NDJSON))
        };
        let Ok(mut f) = opened else {
            return;
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut buf = Vec::new();
        let Ok(n) = f.take(MAX_EVENT_BYTES - self.offset).read_to_end(&mut buf) else {
            return;
        };
        self.offset += n as u64;
        self.partial.extend_from_slice(&buf);
        while let Some(pos) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=pos).collect();
            let Ok(event) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            let msg = event
                .get("msg")
                .or_else(|| event.get("text"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            match event.get("type").and_then(Value::as_str) {
                Some("progress") => {
                    let pct = event.get("pct").and_then(Value::as_f64).unwrap_or(0.0);
                    tool.progress(pct, Some(100.0), msg).await;
                }
                Some(kind) => {
                    let level = match kind {
                        "warn" => LogLevel::Warning,
                        "error" => LogLevel::Error,
                        _ => LogLevel::Info,
                    };
                    tool.log(level, event.clone()).await;
                }
                None => {}
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn events_are_read_whole_lines_only_and_up_to_the_byte_bound() {
        let dir = std::env::temp_dir().join(format!("events-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(EVENTS_NDJSON);
        let ctx = RunCtx {
            cancel: CancellationToken::new(),
            tool: Some(ToolCtx::detached()),
        };
        let mut tail = EventTail::default();
        std::fs::write(&path, b"{\"type\":\"log\",\"msg\":\"a\"}\n{\"type\":\"prog").unwrap();
        tail.pump(&dir, &ctx).await;
        assert_eq!(
            tail.partial, b"{\"type\":\"prog",
            "a partial line waits for its end"
        );
        let line = format!("{{\"type\":\"log\",\"msg\":\"{}\"}}\n", "x".repeat(1000));
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        use std::io::Write;
        f.write_all(b"ress\",\"pct\":50}\n").unwrap();
        for _ in 0..(MAX_EVENT_BYTES as usize / line.len() + 10) {
            f.write_all(line.as_bytes()).unwrap();
        }
        tail.pump(&dir, &ctx).await;
        tail.pump(&dir, &ctx).await;
        assert_eq!(tail.offset, MAX_EVENT_BYTES, "reading stops at the bound");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
