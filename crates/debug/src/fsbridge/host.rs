//! The extension's side of the file protocol, headless (`mcp-bridges debug host`): owns `.vsc-bridge/` with
//! `host.lock`, keeps `host.json` fresh, claims jobs (O_EXCL `claimed.json`), runs them on the `dap` backend and
//! answers with `response.json` / `error.json` (+ `data.json`), `events.ndjson` and, always last, `done`.
//! Unlike VSC-Bridge's host: script error codes are kept, the command's `timeout` is honoured, a running job
//! renews its lease (touches `claimed.json`) instead of being re-run after 60 s, and a job found claimed but
//! unfinished at start-up is answered `E_CRASH_RECOVERY` (and quarantined with `dlq`), never run again.

use super::io::{
    COMMAND_BYTES, SMALL_FILE_BYTES, create_exclusive, read_json, touch_marker, write_atomic,
    write_json_atomic,
};
use super::trust::{self, Untrusted};
use super::watch::Hub;
use super::{
    CANCEL, CLAIMED_JSON, COMMAND_JSON, DATA_JSON, DLQ, DONE, ERROR_JSON, EVENTS_NDJSON,
    EXECUTE_DIR, HOST_JSON, HOST_LOCK, KEEP, RESPONSE_JSON,
};
use crate::catalog::{BackendKind, Catalog};
use crate::config::{DebugArgs, HostArgs};
use crate::dap::{DapBackend, DapConfig};
use crate::envelope::{self, ScriptError, iso8601, now_ms};
use bridge_core::BridgeError;
use serde_json::{Value, json};
use std::collections::{HashSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant as StdInstant, SystemTime};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Success data above this goes to `data.json` (VSC-Bridge's 2 MB).
pub const DATA_FILE_BYTES: usize = 2 << 20;

#[derive(Debug, Clone)]
pub struct HostOptions {
    pub capacity: usize,
    pub heartbeat: Duration,
    /// A running job touches its `claimed.json` this often.
    pub lease_renew: Duration,
    /// Another host's claim untouched this long is dead: answered `E_CRASH_RECOVERY`.
    pub stale_after: Duration,
    /// Internal failures (`E_INTERNAL`: the host's own, not a script's answer such as a wait's `E_TIMEOUT`) in
    /// `circuit_window` that open the circuit.
    pub circuit_threshold: usize,
    pub circuit_window: Duration,
    pub gc_interval: Duration,
    /// Finished jobs older than this are removed (quarantined ones after 7 times as long; `keep` preserves).
    pub gc_age: Duration,
    /// A job without `timeout` in its command gets this.
    pub default_timeout: Duration,
    /// The bridge directory; the workspace's own `.vsc-bridge/` when `None`.
    pub bridge_dir: Option<PathBuf>,
    /// Debug sessions live at once (`--debug-max-sessions`).
    pub max_sessions: usize,
}

impl Default for HostOptions {
    fn default() -> Self {
        Self {
            capacity: 10,
            heartbeat: Duration::from_secs(5),
            lease_renew: Duration::from_secs(10),
            stale_after: Duration::from_secs(60),
            circuit_threshold: 10,
            circuit_window: Duration::from_secs(60),
            gc_interval: Duration::from_secs(30 * 60),
            gc_age: Duration::from_secs(24 * 3600),
            default_timeout: Duration::from_secs(30),
            bridge_dir: None,
            max_sessions: crate::dap::DEFAULT_MAX_SESSIONS,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{root} is in use by {holder}; stop it first (or wait until its heartbeat is older than 30 s)"
    )]
    Locked { holder: String, root: PathBuf },
    #[error("{0}")]
    Catalog(#[from] crate::catalog::CatalogError),
    /// E_BRIDGE_UNTRUSTED: the directory is not this user's alone.
    #[error("E_BRIDGE_UNTRUSTED: {0}")]
    Untrusted(#[from] Untrusted),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> HostError + '_ {
    move |source| HostError::Io {
        path: path.to_path_buf(),
        source,
    }
}

struct Host {
    root: PathBuf,
    bridge_id: String,
    opts: HostOptions,
    dap: Arc<DapBackend>,
    catalog: Catalog,
    running: Mutex<HashSet<String>>,
    /// The one watcher of `execute/` (recursive), shared by the scan loop and every job's cancel wait.
    hub: Arc<Hub>,
    polling: bool,
    /// Every job this host has claimed whose directory still exists: never claimed twice, even while its client
    /// removes the directory file by file (`claimed.json` may go before `command.json`).
    claimed: Mutex<HashSet<String>>,
    failures: Mutex<VecDeque<StdInstant>>,
}

/// `mcp-bridges debug host` until SIGINT/SIGTERM.
pub async fn run(args: DebugArgs, host: HostArgs) -> Result<(), BridgeError> {
    run_until(args, host, bridge_core::serve::shutdown_on_signals()).await
}

/// The host until `shutdown`: the binary passes the one shutdown token it makes for every command that is
/// not an MCP server.
pub async fn run_until(
    args: DebugArgs,
    host: HostArgs,
    shutdown: CancellationToken,
) -> Result<(), BridgeError> {
    let opts = HostOptions {
        capacity: host.capacity.max(1),
        heartbeat: host.heartbeat,
        bridge_dir: args.bridge_dir.clone(),
        max_sessions: args.max_sessions,
        ..HostOptions::default()
    };
    let ws = crate::backend::workspace(&args);
    let cfg = DapConfig {
        workspace: ws.clone(),
        python: args.python.clone(),
        lldb_dap: args.lldb_dap.clone(),
        js_debug: args.js_debug.clone(),
        policy: crate::backend::policy(&args),
    };
    serve(&ws, opts, cfg, shutdown).await?;
    Ok(())
}

/// Serves `<workspace>/.vsc-bridge/` until `shutdown`.
pub async fn serve(
    workspace: &Path,
    opts: HostOptions,
    cfg: DapConfig,
    shutdown: CancellationToken,
) -> Result<(), HostError> {
    let root = super::bridge_root(workspace, opts.bridge_dir.as_deref());
    let execute = root.join(EXECUTE_DIR);
    trust::ensure_dir(&root)?;
    trust::ensure_dir(&execute)?;
    let _ = create_exclusive(&root.join(".gitignore"), b"*\n");
    let bridge_id = format!("extHost-{:08x}", rand::random::<u32>());
    take_lock(&root, &bridge_id)?;
    let host_json = json!({"bridgeId": bridge_id, "version": 1, "platform": std::env::consts::OS,
        "workspace": workspace.display().to_string(), "pid": std::process::id(),
        "startedAt": iso8601(now_ms()), "wslAware": true, "pidNs": super::pid_ns(),
        "heartbeatMs": opts.heartbeat.as_millis() as u64, "headless": true});
    let hub = Hub::new();
    let guard = hub.watch(&execute, true);
    let max_sessions = opts.max_sessions;
    let host = Arc::new(Host {
        root: root.clone(),
        bridge_id,
        opts,
        dap: Arc::new(DapBackend::new(cfg).max_sessions(max_sessions)),
        catalog: Catalog::builtin()?,
        running: Mutex::new(HashSet::new()),
        hub: Arc::clone(&hub),
        polling: guard.is_polling(),
        claimed: Mutex::new(HashSet::new()),
        failures: Mutex::new(VecDeque::new()),
    });
    tracing::info!(root = %root.display(), id = %host.bridge_id, "bridge host started");
    // Before host.json: a client that sees a fresh host finds the dead host's jobs already answered.
    host.recover_at_start();
    write_json_atomic(&root.join(HOST_JSON), &host_json).map_err(io_err(&root))?;
    let heartbeat = tokio::spawn(heartbeat(
        root.join(HOST_JSON),
        host.opts.heartbeat,
        shutdown.clone(),
    ));
    // No periodic rescan: the loop wakes on a file event, or when the stale-claim check or the GC is due.
    let recovery_every = Duration::from_secs(30).min(host.opts.stale_after);
    let mut next_recovery = Instant::now() + recovery_every;
    let mut next_gc = Instant::now() + host.opts.gc_interval;
    let mut waiter = hub.subscribe();
    while !shutdown.is_cancelled() {
        if Instant::now() >= next_recovery {
            next_recovery = Instant::now() + recovery_every;
            host.recover_stale();
        }
        if Instant::now() >= next_gc {
            next_gc = Instant::now() + host.opts.gc_interval;
            host.gc();
        }
        let mut until = next_recovery.min(next_gc);
        if host.scan() {
            // A job directory without its command yet: its command.json may land before inotify watches the
            // new directory, so look again at the next event, or shortly if that event was missed.
            until = until.min(Instant::now() + Duration::from_millis(2));
        }
        tokio::select! {
            () = waiter.changed(until, host.polling) => {}
            () = shutdown.cancelled() => {}
        }
    }
    drop(guard);
    heartbeat.abort();
    host.dap.shutdown().await;
    let _ = std::fs::remove_file(root.join(HOST_LOCK));
    tracing::info!("bridge host stopped");
    Ok(())
}

/// Takes `host.lock` (O_EXCL). A lock already there is held while `host.json`'s heartbeat is fresh, whoever wrote
/// it: VS Code's extension writes an empty lock, and a host in another pid namespace has a pid our `/proc` does
/// not show. Only a lock of ours whose pid is gone from our own pid namespace is taken over at once (its host
/// crashed); any other is taken over once the heartbeat is older than 30 s.
fn take_lock(root: &Path, bridge_id: &str) -> Result<(), HostError> {
    let lock = root.join(HOST_LOCK);
    let body = json!({"pid": std::process::id(), "bridgeId": bridge_id, "pidNs": super::pid_ns()})
        .to_string();
    for _ in 0..2 {
        if create_exclusive(&lock, body.as_bytes()).map_err(io_err(&lock))? {
            return Ok(());
        }
        if let Some(holder) = lock_holder(root) {
            return Err(HostError::Locked {
                holder,
                root: root.to_path_buf(),
            });
        }
        let _ = std::fs::remove_file(&lock);
    }
    Err(HostError::Locked {
        holder: "another host taking it at the same moment".into(),
        root: root.to_path_buf(),
    })
}

/// Who holds the existing lock, or `None` when it is stale.
fn lock_holder(root: &Path) -> Option<String> {
    let held = read_json(&root.join(HOST_LOCK), SMALL_FILE_BYTES).ok();
    let pid = held
        .as_ref()
        .and_then(|v| v.get("pid"))
        .and_then(Value::as_u64);
    let ns = held
        .as_ref()
        .and_then(|v| v.get("pidNs"))
        .and_then(Value::as_str);
    if let Some(pid) = pid
        && (pid == u64::from(std::process::id()) || super::pid_gone(pid, ns))
    {
        return None;
    }
    let age = super::host_json_age(root).filter(|a| *a < crate::backend::FRESH_HOST)?;
    let who = match pid {
        Some(pid) => format!("a bridge host (pid {pid})"),
        None => "a live VS Code (an empty or foreign host.lock)".into(),
    };
    Some(format!(
        "{who} whose host.json heartbeat is fresh ({} ms old)",
        age.as_millis()
    ))
}

async fn heartbeat(path: PathBuf, every: Duration, shutdown: CancellationToken) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = shutdown.cancelled() => return,
        }
        if let Err(e) = touch(&path) {
            tracing::warn!("heartbeat: {}: {e}", path.display());
        }
    }
}

fn touch(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::File::options()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?
        .set_modified(SystemTime::now())
}

fn name_of(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Whether `path` exists, as itself: a symlink counts as there and is never followed.
fn there(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

fn age_of(path: &Path) -> Option<Duration> {
    Some(
        std::fs::symlink_metadata(path)
            .ok()?
            .modified()
            .ok()?
            .elapsed()
            .unwrap_or(Duration::ZERO),
    )
}

impl Host {
    fn job_dirs(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(self.root.join(EXECUTE_DIR)) else {
            return Vec::new();
        };
        // The entry's own type and owner (lstat): a symlink is never followed into, and a directory someone
        // else made is not this user's job.
        let ours = trust::euid();
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .filter(|e| {
                use std::os::unix::fs::MetadataExt;
                e.file_type().is_ok_and(|t| t.is_dir())
                    && e.metadata().is_ok_and(|m| m.uid() == ours)
            })
            .map(|e| e.path())
            .collect();
        dirs.sort();
        dirs
    }

    /// Start-up, before taking jobs: jobs a dead host claimed and never finished are answered and quarantined
    /// (never re-run); directories without a command are removed once old; stale unclaimed commands too.
    fn recover_at_start(self: &Arc<Self>) {
        for dir in self.job_dirs() {
            let has = |f: &str| there(&dir.join(f));
            if has(CLAIMED_JSON) && !has(DONE) && !has(DLQ) {
                self.quarantine(
                    &dir,
                    "E_CRASH_RECOVERY",
                    "the bridge host stopped while this job ran; it was not run again",
                );
            } else if !has(COMMAND_JSON)
                && age_of(&dir).is_some_and(|a| a > Duration::from_secs(60))
                && !has(KEEP)
            {
                let _ = std::fs::remove_dir_all(&dir);
            } else if has(COMMAND_JSON)
                && !has(CLAIMED_JSON)
                && age_of(&dir.join(COMMAND_JSON)).is_some_and(|a| a > crate::backend::FRESH_HOST)
                && !has(KEEP)
            {
                // Its client gave up long ago (pickup is 5 s): running it now would surprise everyone.
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }

    /// Claims by a host that no longer renews its lease: answered, quarantined, not re-run.
    fn recover_stale(&self) {
        let running = self.running.lock().map(|r| r.clone()).unwrap_or_default();
        for dir in self.job_dirs() {
            let id = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let claimed = dir.join(CLAIMED_JSON);
            if there(&claimed)
                && !there(&dir.join(DONE))
                && !there(&dir.join(DLQ))
                && !running.contains(&id)
                && age_of(&claimed).is_some_and(|a| a > self.opts.stale_after)
            {
                self.quarantine(
                    &dir,
                    "E_CRASH_RECOVERY",
                    "the host running this job stopped renewing its lease; it was not run again",
                );
            }
        }
    }

    fn quarantine(&self, dir: &Path, code: &str, message: &str) {
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let _ = write_json_atomic(
            &dir.join(DLQ),
            &json!({"reason": code, "message": message, "bridgeId": self.bridge_id,
            "at": iso8601(now_ms()), "jobId": id}),
        );
        if !there(&dir.join(RESPONSE_JSON)) && !there(&dir.join(ERROR_JSON)) {
            let err = ScriptError::new(code, message);
            let _ = write_json_atomic(
                &dir.join(ERROR_JSON),
                &envelope::failure(&id, &err, StdInstant::now()),
            );
        }
        let _ = touch_marker(&dir.join(DONE));
    }

    /// Finished jobs past their age; abandoned cancelled jobs after a minute.
    fn gc(&self) {
        for dir in self.job_dirs() {
            if there(&dir.join(KEEP)) {
                continue;
            }
            let Some(age) = age_of(&dir.join(DONE)) else {
                continue;
            };
            let limit = if there(&dir.join(DLQ)) {
                self.opts.gc_age * 7
            } else if there(&dir.join(CANCEL)) {
                self.opts.gc_age.min(Duration::from_secs(60))
            } else {
                self.opts.gc_age
            };
            if age > limit {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }

    /// Claims every new job; true when a fresh directory has no command yet (one is being written).
    fn scan(self: &Arc<Self>) -> bool {
        let mut incomplete = false;
        let dirs = self.job_dirs();
        let seen: HashSet<String> = dirs.iter().map(|d| name_of(d)).collect();
        let done_before = {
            let mut claimed = self
                .claimed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            claimed.retain(|id| seen.contains(id));
            claimed.clone()
        };
        for dir in dirs {
            if done_before.contains(&name_of(&dir)) {
                continue;
            }
            let has = |f: &str| there(&dir.join(f));
            if has(COMMAND_JSON) {
                if !has(CLAIMED_JSON) && !has(DONE) && !has(DLQ) {
                    self.claim(&dir);
                }
            } else if age_of(&dir).is_some_and(|a| a < Duration::from_millis(200)) {
                incomplete = true;
            }
        }
        incomplete
    }

    fn claim(self: &Arc<Self>, dir: &Path) {
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if !super::ids::is_valid_job_id(&id) {
            return;
        }
        let claim = json!({"bridgeId": self.bridge_id, "claimedAt": iso8601(now_ms()), "pid": std::process::id()});
        match create_exclusive(&dir.join(CLAIMED_JSON), claim.to_string().as_bytes()) {
            Ok(true) => {
                self.claimed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(id.clone());
            }
            Ok(false) => return,
            Err(e) => {
                tracing::warn!("claim {}: {e}", dir.display());
                return;
            }
        }
        let started = StdInstant::now();
        let refuse = |err: ScriptError| finish(dir, &id, Err(err), started);
        if there(&dir.join(CANCEL)) {
            return refuse(ScriptError::new(
                "E_CANCELLED",
                "cancelled before it started",
            ));
        }
        if let Some(retry) = self.circuit_open() {
            return refuse(
                ScriptError::new(
                    "E_CIRCUIT_OPEN",
                    "too many failures recently; the host is refusing jobs for a while",
                )
                .details(json!({"retryAfter": retry.as_millis() as u64})),
            );
        }
        {
            let mut running = self
                .running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if running.len() >= self.opts.capacity {
                drop(running);
                return refuse(
                    ScriptError::new(
                        "E_CAPACITY",
                        format!("{} jobs are running already", self.opts.capacity),
                    )
                    .hint("Retry when a running call has finished"),
                );
            }
            running.insert(id.clone());
        }
        let host = Arc::clone(self);
        let dir = dir.to_path_buf();
        tokio::spawn(async move {
            let result = {
                let (host, dir) = (Arc::clone(&host), dir.clone());
                answered_even_if_it_panics(async move { host.execute(&dir).await }).await
            };
            if let Err(e) = &result
                && e.code == "E_INTERNAL"
            {
                host.record_failure();
            }
            // The slot goes back before the answer is visible: a client that calls again the moment it reads
            // `done` must find room, not E_CAPACITY.
            host.running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&id);
            finish(&dir, &id, result, started);
        });
    }

    fn circuit_open(&self) -> Option<Duration> {
        let mut f = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while f
            .front()
            .is_some_and(|t| t.elapsed() > self.opts.circuit_window)
        {
            f.pop_front();
        }
        (f.len() >= self.opts.circuit_threshold).then(|| {
            f.front().map_or(Duration::ZERO, |t| {
                self.opts.circuit_window.saturating_sub(t.elapsed())
            })
        })
    }

    fn record_failure(&self) {
        let mut f = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f.push_back(StdInstant::now());
        while f.len() > self.opts.circuit_threshold {
            f.pop_front();
        }
    }

    async fn execute(&self, dir: &Path) -> Result<Value, ScriptError> {
        let command = read_json(&dir.join(COMMAND_JSON), COMMAND_BYTES).map_err(|e| {
            if e.kind() == std::io::ErrorKind::FileTooLarge {
                ScriptError::new("E_PAYLOAD_TOO_LARGE", format!("{COMMAND_JSON}: {e}"))
                    .hint("Send smaller parameters")
                    .details(json!({"field": COMMAND_JSON, "limit": COMMAND_BYTES}))
            } else {
                ScriptError::new("E_INVALID_PARAMS", format!("{COMMAND_JSON}: {e}"))
            }
        })?;
        let script = command
            .get("scriptName")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let def = self
            .catalog
            .tools
            .iter()
            .find(|t| t.alias == script)
            .ok_or_else(|| {
                ScriptError::new("E_SCRIPT_NOT_FOUND", format!("no script `{script}`"))
            })?;
        if !def.backends.contains(&BackendKind::Dap) {
            return Err(ScriptError::new(
                "E_UNSUPPORTED_BACKEND",
                format!("`{script}` needs VS Code; this headless host runs debuggers only"),
            ));
        }
        let params = crate::catalog::validate::check(
            &def.input_schema,
            command.get("params").cloned().unwrap_or(Value::Null),
        )
        .map_err(|e| {
            ScriptError::new("E_INVALID_PARAMS", e.message().to_owned())
                .details(e.details().clone())
        })?;
        let timeout = command
            .get("timeout")
            .and_then(Value::as_u64)
            .map_or(self.opts.default_timeout, Duration::from_millis);
        let deadline = Instant::now() + timeout;
        let mut events = Events::open(dir);
        events.emit("progress", 0.0, &format!("running {script}"));
        let mut waiter = self.hub.subscribe();
        let cancelled = async {
            loop {
                if there(&dir.join(CANCEL)) {
                    return;
                }
                if Instant::now() >= deadline {
                    // The job's own timeout answers at the deadline; this only waits on.
                    std::future::pending::<()>().await;
                }
                waiter.changed(deadline, self.polling).await;
            }
        };
        // A lease that cannot be renewed is the host's own failure: another host would soon quarantine the job
        // as stale, so answer it now and count it toward the circuit.
        let lease = async {
            loop {
                tokio::time::sleep(self.opts.lease_renew).await;
                if let Err(e) = touch(&dir.join(CLAIMED_JSON)) {
                    return e;
                }
            }
        };
        let result = tokio::select! {
            r = self.dap.execute(&script, &params, deadline) => r,
            () = cancelled => Err(ScriptError::new("E_CANCELLED", "the client cancelled the job")),
            e = lease => Err(ScriptError::new("E_INTERNAL", format!("could not renew the job's lease: {e}"))),
        };
        events.emit(
            "progress",
            100.0,
            if result.is_ok() { "done" } else { "failed" },
        );
        result
    }
}

/// `response.json` (with `data.json` when large) or `error.json`, then `done`, always last.
/// Runs a job in a task of its own, so a panic in it becomes an `E_INTERNAL` answer instead of a job that
/// never writes `done` and a capacity slot that is never given back.
async fn answered_even_if_it_panics(
    job: impl Future<Output = Result<Value, ScriptError>> + Send + 'static,
) -> Result<Value, ScriptError> {
    match tokio::spawn(job).await {
        Ok(result) => result,
        Err(e) => {
            tracing::error!(error = %e, "a debug job failed inside the host");
            Err(ScriptError::new(
                "E_INTERNAL",
                format!("the host failed while running this job: {e}"),
            ))
        }
    }
}

fn finish(dir: &Path, id: &str, result: Result<Value, ScriptError>, started: StdInstant) {
    let written = match result {
        Ok(data) => {
            let text_len = serde_json::to_vec(&data).map_or(0, |b| b.len());
            if text_len > DATA_FILE_BYTES {
                let mut env = envelope::success(id, Value::Null, started);
                if let Some(obj) = env.as_object_mut() {
                    obj.remove("data");
                    obj.insert("dataRef".into(), json!(DATA_JSON));
                }
                serde_json::to_vec(&data)
                    .map_err(std::io::Error::other)
                    .and_then(|bytes| write_atomic(&dir.join(DATA_JSON), &bytes))
                    .and_then(|()| write_json_atomic(&dir.join(RESPONSE_JSON), &env))
            } else {
                write_json_atomic(
                    &dir.join(RESPONSE_JSON),
                    &envelope::success(id, data, started),
                )
            }
        }
        Err(err) => write_json_atomic(&dir.join(ERROR_JSON), &envelope::failure(id, &err, started)),
    };
    if let Err(e) = written {
        tracing::warn!("job {id}: could not write its answer: {e}");
        let _ = write_json_atomic(
            &dir.join(DLQ),
            &json!({"reason": "E_INTERNAL", "message": e.to_string()}),
        );
    }
    let _ = touch_marker(&dir.join(DONE));
}

/// `events.ndjson`, appended one whole line per write.
struct Events {
    file: Option<std::fs::File>,
    seq: u64,
}

impl Events {
    fn open(dir: &Path) -> Self {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(dir.join(EVENTS_NDJSON))
            .ok();
        Self { file, seq: 0 }
    }

    fn emit(&mut self, kind: &str, pct: f64, msg: &str) {
        let line = json!({"ts": now_ms(), "seq": self.seq, "type": kind, "level": "info", "pct": pct, "msg": msg});
        self.seq += 1;
        if let Some(f) = &mut self.file {
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }
}

#[cfg(test)]
mod panic_tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    #[tokio::test]
    async fn a_job_that_panics_is_answered_with_e_internal() {
        let out = answered_even_if_it_panics(async { panic!("a bug in a tool") }).await;
        let e = out.unwrap_err();
        assert_eq!(e.code, "E_INTERNAL");
        assert!(e.message.contains("panicked"), "{}", e.message);
        let fine = answered_even_if_it_panics(async { Ok(json!({"ok": 1})) }).await;
        assert_eq!(fine.unwrap(), json!({"ok": 1}));
    }
}

#[cfg(test)]
mod claim_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A host on a fresh, empty `root` (its execute directory made), on the `dap` backend, polling.
    fn host_in(root: &Path, opts: HostOptions) -> Arc<Host> {
        let _ = std::fs::remove_dir_all(root);
        std::fs::create_dir_all(root.join(EXECUTE_DIR)).unwrap();
        Arc::new(Host {
            root: root.to_path_buf(),
            bridge_id: "extHost-00000000".into(),
            opts,
            dap: Arc::new(DapBackend::new(DapConfig {
                workspace: root.to_path_buf(),
                python: None,
                lldb_dap: None,
                js_debug: None,
                policy: Default::default(),
            })),
            catalog: Catalog::builtin().unwrap(),
            running: Mutex::new(HashSet::new()),
            hub: Hub::new(),
            polling: true,
            claimed: Mutex::new(HashSet::new()),
            failures: Mutex::new(VecDeque::new()),
        })
    }

    /// Writes job `id` (a `debug.status` call) as a client would, and returns its directory.
    fn queue_status_job(root: &Path, id: &str) -> PathBuf {
        let dir = root.join(EXECUTE_DIR).join(id);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(
            dir.join(COMMAND_JSON),
            json!({"version": 1, "id": id, "scriptName": "debug.status", "params": {}, "timeout": 5000})
                .to_string(),
        )
        .unwrap();
        dir
    }

    /// The race behind "finished jobs are claimed again": a client removing its finished job may unlink
    /// `claimed.json` and `done` before `command.json`; a scan then must not see a new job.
    #[tokio::test]
    async fn a_finished_job_half_removed_by_its_client_is_not_claimed_again() {
        let root = std::env::temp_dir().join(format!("claim-once-{}", std::process::id()));
        let host = host_in(&root, HostOptions::default());
        let dir = queue_status_job(&root, "20260101T000000000Z-0001-aaaa");
        host.scan();
        let t = StdInstant::now();
        while !there(&dir.join(DONE)) {
            // A hang guard for loaded machines, not a claim about speed.
            assert!(t.elapsed() < Duration::from_secs(60), "the job is answered");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(there(&dir.join(RESPONSE_JSON)));
        // The client's removal, caught half way: the answer files are gone, the command not yet.
        for f in [CLAIMED_JSON, DONE, RESPONSE_JSON, EVENTS_NDJSON] {
            let _ = std::fs::remove_file(dir.join(f));
        }
        host.scan();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !there(&dir.join(CLAIMED_JSON)) && !there(&dir.join(DONE)),
            "the finished job was claimed again"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// The flake in `capacity_refuses_and_a_long_job_renews_its_lease_instead_of_being_rerun`: the slot was given
    /// back after `done`, so a client calling again the moment it read its answer was refused with E_CAPACITY.
    /// The test holds the slot table's lock across the end of a job: `done` must not appear while the job still
    /// holds its slot.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_jobs_slot_is_free_before_its_answer_is_visible() {
        let root = std::env::temp_dir().join(format!("slot-first-{}", std::process::id()));
        let host = host_in(
            &root,
            HostOptions {
                capacity: 1,
                ..HostOptions::default()
            },
        );
        let id = "20260101T000000000Z-0002-bbbb";
        let dir = queue_status_job(&root, id);
        host.scan();
        let (visible, held) = {
            let slots = host.running.lock().unwrap();
            assert!(slots.contains(id), "the job took the one slot");
            // The job's last progress line is written when it has run; from there only its answer and its slot remain.
            let ran = || {
                std::fs::read_to_string(dir.join(EVENTS_NDJSON))
                    .is_ok_and(|t| t.lines().any(|l| l.contains("\"pct\":100.0")))
            };
            let t = StdInstant::now();
            while !ran() {
                // A hang guard for loaded machines, not a claim about speed.
                assert!(t.elapsed() < Duration::from_secs(60), "the job runs");
                std::thread::sleep(Duration::from_millis(2));
            }
            // Time for an answer written before the slot is given back to appear; with the slot given back first, the
            // job waits on this lock and `done` cannot appear until it is released.
            let t = StdInstant::now();
            while t.elapsed() < Duration::from_millis(500) && !there(&dir.join(DONE)) {
                std::thread::sleep(Duration::from_millis(2));
            }
            (there(&dir.join(DONE)), slots.contains(id))
        };
        assert!(
            !(visible && held),
            "`done` was visible while the job still held its slot: a client calling again at once gets E_CAPACITY"
        );
        let t = StdInstant::now();
        while !there(&dir.join(DONE)) {
            assert!(t.elapsed() < Duration::from_secs(60), "the job is answered");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            !host.running.lock().unwrap().contains(id),
            "the slot is free once answered"
        );
        assert!(there(&dir.join(RESPONSE_JSON)));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
