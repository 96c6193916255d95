//! Script dispatch for the `dap` backend, breakpoints and the session's life (start, stop, restart, status).

use super::breakpoints::{Breakpoint, MAX_BREAKPOINTS, Store};
use super::client::DapError;
use super::launch::{self, AdapterKind};
use super::session::{Link, Outcome, Run, Session, lock};
use crate::envelope::ScriptError;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How long after the program ended its adapter is reaped.
const REAP_AFTER: Duration = Duration::from_millis(500);

/// Where the backend finds its debuggers.
#[derive(Debug, Clone)]
pub struct DapConfig {
    pub workspace: PathBuf,
    /// The Python that runs `-m debugpy.adapter`; the first `python3` on `PATH` when `None`.
    pub python: Option<PathBuf>,
    /// The `lldb-dap` binary; searched on `PATH` (and LLVM 19's folder) when `None`.
    pub lldb_dap: Option<PathBuf>,
    /// js-debug's `vsDebugServer.js`/`dapDebugServer.js`; `pwa-node` launches need it.
    pub js_debug: Option<PathBuf>,
    /// What a launch may run and with which environment.
    pub policy: super::policy::LaunchPolicy,
}

pub struct DapBackend {
    pub(super) cfg: DapConfig,
    pub(super) breakpoints: Arc<Mutex<Store>>,
    pub(super) current: Mutex<Option<Arc<Session>>>,
    /// Serialises start/stop/restart so two starts cannot race.
    lifecycle: tokio::sync::Mutex<()>,
    next_id: AtomicU64,
}

pub(super) type Params = Map<String, Value>;

pub(super) fn str_param<'a>(p: &'a Params, key: &str) -> Option<&'a str> {
    p.get(key).and_then(Value::as_str)
}

pub(super) fn u64_param(p: &Params, key: &str) -> Option<u64> {
    p.get(key)
        .and_then(|v| v.as_u64().or_else(|| v.as_f64().map(|f| f as u64)))
}

pub(super) fn bool_param(p: &Params, key: &str) -> Option<bool> {
    p.get(key).and_then(Value::as_bool)
}

pub(super) fn dap_err(e: DapError) -> ScriptError {
    match e {
        DapError::Failed { command, message } => ScriptError::new(
            if command == "evaluate" { "E_EVALUATION_FAILED" } else { "E_DAP_REQUEST_FAILED" },
            format!("{command}: {message}"),
        ),
        DapError::Link(link) => match link {
            bridge_core::link::LinkError::Timeout { .. } => ScriptError::new("E_TIMEOUT", link.to_string())
                .hint("The debugger did not answer in time; check debug_status, or stop and restart the session"),
            other => ScriptError::new("E_NO_SESSION", format!("the debug adapter is gone: {other}"))
                .hint("Start a new session with debug_start"),
        },
    }
}

/// What is left of `deadline`, for a DAP request.
pub(super) fn left(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1))
}

impl DapBackend {
    pub fn new(cfg: DapConfig) -> Self {
        Self {
            cfg,
            breakpoints: Arc::new(Mutex::new(Store::default())),
            current: Mutex::new(None),
            lifecycle: tokio::sync::Mutex::new(()),
            next_id: AtomicU64::new(1),
        }
    }

    /// Ends the live session (the bridge is shutting down).
    pub async fn shutdown(&self) {
        let current = lock(&self.current).clone();
        if let Some(s) = current {
            s.terminate().await;
        }
    }

    /// The aliases this backend serves; the catalog's `backends` lists must agree (a test checks).
    pub fn serves(alias: &str) -> bool {
        matches!(
            alias,
            "breakpoint.set"
                | "breakpoint.remove"
                | "breakpoint.clear.file"
                | "breakpoint.clear.project"
                | "breakpoint.list"
                | "debug.start"
                | "debug.stop"
                | "debug.restart"
                | "debug.status"
                | "debug.threads"
                | "debug.stack"
                | "debug.scopes"
                | "debug.list-variables"
                | "debug.get-variable"
                | "debug.evaluate"
                | "debug.set-variable"
                | "debug.wait-for-hit"
                | "debug.continue"
                | "debug.step-over"
                | "debug.step-into"
                | "debug.step-out"
                | "dap.logs"
                | "dap.exceptions"
                | "dap.search"
                | "dap.summary"
        )
    }

    pub async fn execute(
        &self,
        alias: &str,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        match alias {
            "breakpoint.set" => self.breakpoint_set(p, deadline).await,
            "breakpoint.remove" => self.breakpoint_remove(p, deadline).await,
            "breakpoint.clear.file" => self.breakpoint_clear_file(p, deadline).await,
            "breakpoint.clear.project" => self.breakpoint_clear_project(deadline).await,
            "breakpoint.list" => Ok(self.breakpoint_list()),
            "debug.start" => self.start(p, deadline).await,
            "debug.stop" => self.stop(p).await,
            "debug.restart" => self.restart(p, deadline).await,
            "debug.status" => Ok(self.status()),
            "debug.threads" => self.threads(p, deadline).await,
            "debug.stack" => self.stack(p, deadline).await,
            "debug.scopes" => self.scopes(p, deadline).await,
            "debug.list-variables" => self.list_variables(p, deadline).await,
            "debug.get-variable" => self.get_variable(p, deadline).await,
            "debug.evaluate" => self.evaluate(p, deadline).await,
            "debug.set-variable" => self.set_variable(p, deadline).await,
            "debug.wait-for-hit" => self.wait_for_hit(p, deadline).await,
            "debug.continue" => self.resume("continue", p, deadline, 30_000).await,
            "debug.step-over" => self.resume("next", p, deadline, 5000).await,
            "debug.step-into" => self.resume("stepIn", p, deadline, 5000).await,
            "debug.step-out" => self.resume("stepOut", p, deadline, 5000).await,
            "dap.logs" => self.dap_logs(p),
            "dap.exceptions" => self.dap_exceptions(p),
            "dap.search" => self.dap_search(p),
            "dap.summary" => self.dap_summary(p),
            other => Err(ScriptError::new(
                "E_UNSUPPORTED_BACKEND",
                format!("`{other}` needs the vscode backend (VS Code with VSC-Bridge); this server runs the dap backend"),
            )
            .hint("Run the server with --backend vscode next to VS Code with VSC-Bridge, or use the debugging tools")),
        }
    }

    /// The session a tool acts on: the live one (matching `sessionId` if given), else `E_NO_SESSION`.
    pub(super) fn session(&self, p: &Params) -> Result<Arc<Session>, ScriptError> {
        let current = lock(&self.current).clone();
        let no_session = || {
            ScriptError::new("E_NO_SESSION", "no active debug session")
                .hint("Start debug session first using debug_start")
        };
        let session = current
            .filter(|s| !s.is_terminated())
            .ok_or_else(no_session)?;
        if let Some(id) = str_param(p, "sessionId")
            && id != session.id
        {
            return Err(ScriptError::new(
                "E_NO_SESSION",
                format!(
                    "no active debug session `{id}`; the active one is `{}`",
                    session.id
                ),
            )
            .hint("Omit sessionId, or use the id debug_status shows"));
        }
        Ok(session)
    }

    /// The live session, or the last one (ended), for reading its journal.
    pub(super) fn any_session(&self, p: &Params) -> Result<Arc<Session>, ScriptError> {
        let current = lock(&self.current).clone();
        let session = current.ok_or_else(|| {
            ScriptError::new("E_NO_SESSION", "no debug session has run yet")
                .hint("Start debug session first using debug_start")
        })?;
        if let Some(id) = str_param(p, "sessionId")
            && id != session.id
        {
            return Err(ScriptError::new(
                "E_NO_SESSION",
                format!("no debug session `{id}`"),
            ));
        }
        Ok(session)
    }

    fn resolve_path(&self, raw: &str) -> PathBuf {
        let p = Path::new(raw);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.cfg.workspace.join(p)
        }
    }

    /// An existing source file and a line inside it.
    fn source_line(&self, p: &Params) -> Result<(PathBuf, u64), ScriptError> {
        let raw = str_param(p, "path").unwrap_or_default();
        let path = self.resolve_path(raw);
        let text = std::fs::read(&path).map_err(|e| {
            ScriptError::new("E_FILE_NOT_FOUND", format!("{}: {e}", path.display()))
                .details(json!({"path": path.display().to_string()}))
        })?;
        let path = path.canonicalize().unwrap_or(path);
        let line = u64_param(p, "line").unwrap_or(0);
        let lines = text.split(|b| *b == b'\n').count() as u64;
        if line == 0 || line > lines {
            return Err(ScriptError::new(
                "E_INVALID_LINE",
                format!("line {line} is outside {} (1..={lines})", path.display()),
            )
            .details(json!({"line": line, "lines": lines})));
        }
        Ok((path, line))
    }

    /// Sends `path`'s whole list to the live session, if any, and records the binding.
    async fn sync_file(&self, path: &Path, deadline: Instant) -> Result<bool, ScriptError> {
        let session = lock(&self.current).clone().filter(|s| !s.is_terminated());
        let Some(session) = session else {
            return Ok(false);
        };
        let args = lock(&self.breakpoints).request(path);
        let body = session
            .client
            .request("setBreakpoints", args, left(deadline))
            .await
            .map_err(dap_err)?;
        lock(&self.breakpoints).apply(path, &body);
        Ok(true)
    }

    async fn breakpoint_set(&self, p: &Params, deadline: Instant) -> Result<Value, ScriptError> {
        let (path, line) = self.source_line(p)?;
        let mut bp = Breakpoint::new(line);
        bp.condition = str_param(p, "condition").map(str::to_owned);
        bp.hit_condition = str_param(p, "hitCondition").map(str::to_owned);
        bp.log_message = str_param(p, "logMessage").map(str::to_owned);
        if !lock(&self.breakpoints).set(&path, bp) {
            return Err(ScriptError::new(
                "E_INVALID_PARAMS",
                format!("at most {MAX_BREAKPOINTS} breakpoints"),
            )
            .hint("Clear breakpoints you no longer need (breakpoint_clear_file)"));
        }
        let live = self.sync_file(&path, deadline).await?;
        let store = lock(&self.breakpoints);
        let bp = store
            .get(&path, line)
            .map(|b| b.to_json(&path, !live))
            .unwrap_or(Value::Null);
        Ok(json!({"success": true, "details": {"breakpoint": bp}}))
    }

    async fn breakpoint_remove(&self, p: &Params, deadline: Instant) -> Result<Value, ScriptError> {
        let path = self.resolve_path(str_param(p, "path").unwrap_or_default());
        let path = path.canonicalize().unwrap_or(path);
        let line = u64_param(p, "line").unwrap_or(0);
        let removed = lock(&self.breakpoints).remove(&path, line);
        self.sync_file(&path, deadline).await?;
        Ok(
            json!({"success": true, "details": {"removed": removed, "path": path.display().to_string(), "line": line}}),
        )
    }

    async fn breakpoint_clear_file(
        &self,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let path = self.resolve_path(str_param(p, "path").unwrap_or_default());
        if !path.exists() {
            return Err(ScriptError::new(
                "E_FILE_NOT_FOUND",
                format!("{} does not exist", path.display()),
            ));
        }
        let path = path.canonicalize().unwrap_or(path);
        let cleared = lock(&self.breakpoints).clear_file(&path);
        self.sync_file(&path, deadline).await?;
        Ok(
            json!({"success": true, "details": {"cleared": cleared, "path": path.display().to_string()}}),
        )
    }

    async fn breakpoint_clear_project(&self, deadline: Instant) -> Result<Value, ScriptError> {
        let before = lock(&self.breakpoints).count();
        let files = lock(&self.breakpoints).clear_all();
        for file in files {
            self.sync_file(&file, deadline).await?;
        }
        Ok(json!({"success": true, "details": {"cleared": before}}))
    }

    fn breakpoint_list(&self) -> Value {
        let live = lock(&self.current)
            .as_ref()
            .is_some_and(|s| !s.is_terminated());
        let list = lock(&self.breakpoints).list(!live);
        json!({"breakpoints": list, "total": list.len()})
    }

    /// The launch configuration of a `debug.start` call, variables substituted.
    fn configuration(&self, p: &Params) -> Result<Value, ScriptError> {
        let folder = str_param(p, "folder")
            .map_or_else(|| self.cfg.workspace.clone(), |f| self.resolve_path(f));
        let mut config = match (p.get("config"), str_param(p, "launch")) {
            (Some(c), _) => c.clone(),
            (None, Some(name)) => launch::from_launch_json(&folder, name)?,
            (None, None) => {
                return Err(ScriptError::new(
                    "E_INVALID_PARAMS",
                    "debug_start needs `launch` (a launch.json configuration name) or `config`",
                )
                .hint(
                    "Pass launch: \"<name from .vscode/launch.json>\", or an inline config object",
                ));
            }
        };
        launch::substitute(&mut config, &folder, &|name| {
            self.cfg.policy.env_allowed(name)
        })?;
        Ok(config)
    }

    fn adapter_command(&self, kind: AdapterKind) -> Result<tokio::process::Command, ScriptError> {
        let missing =
            |what: String| ScriptError::new("E_ADAPTER_NOT_FOUND", what).hint(kind.install_hint());
        match kind {
            AdapterKind::Debugpy => {
                let python = match &self.cfg.python {
                    Some(p) => p.clone(),
                    None => launch::find_program(&["python3", "python"], &[])
                        .ok_or_else(|| missing("no python3 on PATH".into()))?,
                };
                // A quick import check gives the install command instead of an adapter that dies at once.
                let ok = std::process::Command::new(&python)
                    .args(["-c", "import debugpy"])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status()
                    .map(|s| s.success())
                    .map_err(|e| missing(format!("{}: {e}", python.display())))?;
                if !ok {
                    return Err(missing(format!(
                        "debugpy is not installed for {}",
                        python.display()
                    )));
                }
                let mut cmd = tokio::process::Command::new(python);
                cmd.args(["-m", "debugpy.adapter"]);
                Ok(cmd)
            }
            AdapterKind::LldbDap => {
                let bin = match &self.cfg.lldb_dap {
                    Some(p) if p.is_file() => p.clone(),
                    Some(p) => return Err(missing(format!("{} does not exist", p.display()))),
                    None => launch::find_program(
                        &["lldb-dap", "lldb-dap-22", "lldb-dap-19", "lldb-vscode-15"],
                        &[
                            "/usr/lib/llvm-22/bin/lldb-dap",
                            "/usr/lib/llvm-19/bin/lldb-dap",
                        ],
                    )
                    .ok_or_else(|| missing("no lldb-dap on PATH".into()))?,
                };
                Ok(tokio::process::Command::new(bin))
            }
            AdapterKind::JsDebug => {
                let script = match &self.cfg.js_debug {
                    Some(p) if p.is_file() => p.clone(),
                    Some(p) => return Err(missing(format!("{} does not exist", p.display()))),
                    None => return Err(missing("js-debug is not configured (--js-debug)".into())),
                };
                let node = launch::find_program(&["node", "nodejs"], &[])
                    .ok_or_else(|| missing("no node on PATH".into()))?;
                let mut cmd = tokio::process::Command::new(node);
                cmd.arg(script);
                Ok(cmd)
            }
        }
    }

    async fn start(&self, p: &Params, deadline: Instant) -> Result<Value, ScriptError> {
        let config = self.configuration(p)?;
        // Checked on the caller's configuration, before the bridge adds its own interpreter to it.
        self.cfg.policy.check(&config, &self.cfg.workspace)?;
        let _guard = self.lifecycle.lock().await;
        let old = lock(&self.current).clone();
        if let Some(old) = old.filter(|s| !s.is_terminated()) {
            old.terminate().await;
        }
        let session = self.launch(config, deadline).await?;
        let mut result = json!({"sessionId": session.id, "adapter": session.adapter.name(),
            "name": session.config.get("name"), "type": session.config.get("type"),
            "breakpoints": lock(&self.breakpoints).list(false)});
        if bool_param(p, "wait") == Some(true) {
            let wait_ms = u64_param(p, "timeoutMs").unwrap_or(30_000);
            let until = Instant::now() + Duration::from_millis(wait_ms);
            result["stop"] = self
                .wait_result(&session, None, until.min(deadline), wait_ms)
                .await?;
        }
        result["state"] = json!(state_name(&session.run()));
        Ok(result)
    }

    /// Launches, then reaps the adapter once the program ends: a `terminated` session is disconnected and its
    /// adapter's process group killed, while what it printed stays in the journal for the `dap_*` tools.
    async fn launch(&self, config: Value, deadline: Instant) -> Result<Arc<Session>, ScriptError> {
        let session = self.launch_session(config, deadline).await?;
        let weak = Arc::downgrade(&session);
        let ended = session.ended();
        tokio::spawn(async move {
            ended.await;
            // The last output events may trail `terminated` by a moment.
            tokio::time::sleep(REAP_AFTER).await;
            if let Some(s) = weak.upgrade() {
                s.terminate().await;
            }
        });
        Ok(session)
    }

    async fn launch_session(
        &self,
        mut config: Value,
        deadline: Instant,
    ) -> Result<Arc<Session>, ScriptError> {
        let ty = config
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let kind = AdapterKind::of_type(&ty).ok_or_else(|| {
            ScriptError::new("E_UNSUPPORTED_LANGUAGE", format!("no debug adapter for launch type `{ty}`"))
                .hint("Use type \"debugpy\"/\"python\" for Python, \"lldb-dap\"/\"lldb\" for C, C++ and Rust, or \"pwa-node\"/\"node\" for JavaScript")
        })?;
        let mut command = self.adapter_command(kind)?;
        self.cfg.policy.apply_env(&mut command);
        if let Some(program) = config.get("program").and_then(Value::as_str) {
            let path = self.resolve_path(program);
            if !path.is_file() {
                return Err(ScriptError::new("E_LAUNCH_FAILED", format!("the program {} does not exist", path.display()))
                    .hint("Fix `program` in the launch configuration (build it first for compiled languages)")
                    .details(json!({"program": path.display().to_string()})));
            }
        }
        if kind == AdapterKind::Debugpy {
            let obj = config.as_object_mut();
            if let Some(obj) = obj {
                obj.entry("console")
                    .or_insert_with(|| json!("internalConsole"));
                obj.entry("justMyCode").or_insert_with(|| json!(true));
                if let Some(py) = &self.cfg.python {
                    obj.entry("python")
                        .or_insert_with(|| json!([py.display().to_string()]));
                }
            }
        }
        if config.get("cwd").is_none()
            && let Some(obj) = config.as_object_mut()
        {
            obj.insert(
                "cwd".into(),
                json!(self.cfg.workspace.display().to_string()),
            );
        }
        let id = format!("dap-{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        lock(&self.breakpoints).unbind_all();
        if kind == AdapterKind::JsDebug {
            return self.launch_js(id, command, config, deadline).await;
        }
        let session = Session::open(
            id,
            kind,
            config.clone(),
            Link::Child(command),
            Arc::clone(&self.breakpoints),
        )
        .await?;
        *lock(&self.current) = Some(Arc::clone(&session));
        match self.handshake(&session, config, deadline).await {
            Ok(()) => Ok(session),
            Err(mut e) => {
                session.terminate().await;
                let tail = session.client.stderr_tail();
                let tail = tail.trim();
                if !tail.is_empty() {
                    let mut cut = tail.len().saturating_sub(2000);
                    while !tail.is_char_boundary(cut) {
                        cut += 1;
                    }
                    e.message =
                        format!("{}; the adapter's stderr ends: {}", e.message, &tail[cut..]);
                }
                Err(e)
            }
        }
    }

    /// initialize → launch (not awaited: debugpy answers it only after configurationDone) → initialized →
    /// breakpoints → exception filters → configurationDone → the launch answer.
    pub(super) async fn handshake(
        &self,
        s: &Arc<Session>,
        config: Value,
        deadline: Instant,
    ) -> Result<(), ScriptError> {
        let failed = |msg: String| {
            ScriptError::new("E_LAUNCH_FAILED", msg)
                .hint("Check the configuration's program path and type; dap_logs shows what the program printed")
        };
        let caps = s
            .client
            .request(
                "initialize",
                json!({"clientID": "mcp-bridges", "clientName": "mcp-bridges debug", "adapterID": s.adapter.name(),
                    "pathFormat": "path", "linesStartAt1": true, "columnsStartAt1": true,
                    "supportsVariableType": true, "supportsRunInTerminalRequest": false,
                    "supportsStartDebuggingRequest": s.adapter == AdapterKind::JsDebug, "locale": "en"}),
                left(deadline),
            )
            .await
            .map_err(|e| failed(format!("the adapter did not initialize: {e}")))?;
        *lock(&s.capabilities) = caps.clone();
        let request = config
            .get("request")
            .and_then(Value::as_str)
            .unwrap_or("launch")
            .to_owned();
        let pending = s
            .client
            .send(&request, config)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let launch_answer = tokio::spawn(pending.wait(left(deadline)));
        if !s.wait_initialized(deadline).await {
            // The launch may have failed first (lldb-dap answers launch before initialized).
            if launch_answer.is_finished()
                && let Ok(answer) = launch_answer.await
            {
                let body = answer.map_err(|e| failed(e.to_string())).and_then(|r| {
                    super::client::body_of(&request, r).map_err(|e| failed(e.to_string()))
                });
                body?;
            }
            return Err(failed(format!(
                "the adapter never sent `initialized`{}",
                s.closed_reason()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            )));
        }
        let files = lock(&self.breakpoints).files();
        for file in files {
            let args = lock(&self.breakpoints).request(&file);
            let body = s
                .client
                .request("setBreakpoints", args, left(deadline))
                .await
                .map_err(|e| failed(e.to_string()))?;
            lock(&self.breakpoints).apply(&file, &body);
        }
        let filters: Vec<Value> = caps
            .get("exceptionBreakpointFilters")
            .and_then(Value::as_array)
            .map(|f| {
                f.iter()
                    .filter(|f| f.get("default").and_then(Value::as_bool) == Some(true))
                    .filter_map(|f| f.get("filter").cloned())
                    .collect()
            })
            .unwrap_or_default();
        s.client
            .request(
                "setExceptionBreakpoints",
                json!({"filters": filters}),
                left(deadline),
            )
            .await
            .map_err(|e| failed(e.to_string()))?;
        if caps
            .get("supportsConfigurationDoneRequest")
            .and_then(Value::as_bool)
            == Some(true)
        {
            s.client
                .request("configurationDone", json!({}), left(deadline))
                .await
                .map_err(|e| failed(e.to_string()))?;
        }
        let answer = launch_answer
            .await
            .map_err(|e| failed(e.to_string()))?
            .map_err(|e| failed(format!("{request}: {e}")))?;
        super::client::body_of(&request, answer).map_err(|e| failed(e.to_string()))?;
        {
            let mut st = s.shared.state();
            if st.run == Run::Starting {
                st.run = Run::Running;
            }
        }
        Ok(())
    }

    /// Idempotent: a session whose program already ended is stopped again (its adapter reaped) and answered
    /// as stopped; only a bridge that never started one answers E_NO_SESSION.
    async fn stop(&self, p: &Params) -> Result<Value, ScriptError> {
        let session = self.any_session(p)?;
        let _guard = self.lifecycle.lock().await;
        let ended = session.is_terminated();
        session.terminate().await;
        lock(&self.breakpoints).unbind_all();
        Ok(
            json!({"success": true, "details": {"sessionId": session.id, "stopped": true, "alreadyEnded": ended}}),
        )
    }

    /// Works on an ended session too: the last configuration is launched again.
    async fn restart(&self, p: &Params, deadline: Instant) -> Result<Value, ScriptError> {
        let session = self.any_session(p)?;
        let _guard = self.lifecycle.lock().await;
        session.terminate().await;
        let fresh = self.launch(session.config.clone(), deadline).await?;
        Ok(json!({"success": true, "details": {"sessionId": fresh.id, "previous": session.id}}))
    }

    pub fn status(&self) -> Value {
        let current = lock(&self.current).clone();
        let Some(s) = current else {
            return json!({"isActive": false, "state": "none", "backend": "dap",
                "breakpoints": lock(&self.breakpoints).count()});
        };
        let run = s.run();
        let mut v = json!({"isActive": run != Run::Terminated, "sessionId": s.id, "adapter": s.adapter.name(),
            "state": state_name(&run), "isPaused": matches!(run, Run::Paused { .. }), "backend": "dap",
            "name": s.config.get("name"), "type": s.config.get("type"),
            "breakpoints": lock(&self.breakpoints).count()});
        if let Run::Paused {
            thread_id,
            reason,
            text,
        } = run
        {
            v["threadId"] = json!(thread_id);
            v["reason"] = json!(reason);
            if let Some(t) = text {
                v["description"] = json!(t);
            }
        }
        if let Some(code) = s.shared.state().exit_code {
            v["exitCode"] = json!(code);
        }
        v
    }

    async fn wait_for_hit(&self, p: &Params, deadline: Instant) -> Result<Value, ScriptError> {
        let session = lock(&self.current).clone().ok_or_else(|| {
            ScriptError::new("E_NO_SESSION", "no debug session to wait on")
                .hint("Start debug session first using debug_start")
        })?;
        let wait_ms = u64_param(p, "timeoutMs").unwrap_or(30_000);
        let until = (Instant::now() + Duration::from_millis(wait_ms)).min(deadline);
        self.wait_result(&session, None, until, wait_ms).await
    }

    /// continue / next / stepIn / stepOut, then the stop they lead to.
    async fn resume(
        &self,
        command: &str,
        p: &Params,
        deadline: Instant,
        default_ms: u64,
    ) -> Result<Value, ScriptError> {
        let session = self.session(p)?;
        let thread_id = session.paused_thread()?;
        let wait_ms = u64_param(p, "timeoutMs").unwrap_or(default_ms);
        let until = (Instant::now() + Duration::from_millis(wait_ms)).min(deadline);
        let before = session.resuming();
        let baseline = before.stops;
        if let Err(e) = session
            .client
            // Bounded by the caller's wait, not the call's deadline, so a silent adapter is told as such
            // (with its hint) before the call itself times out.
            .request(command, json!({"threadId": thread_id}), left(until))
            .await
        {
            return Err(match e {
                // A refusal leaves the program where it was, still paused.
                DapError::Failed { .. } => {
                    let err = dap_err(e);
                    if session.refused(before) {
                        err.hint("The program is still paused where it was")
                    } else {
                        err
                    }
                    .details(json!({"state": state_name(&session.run())}))
                }
                // No answer: the program may or may not be running now.
                DapError::Link(bridge_core::link::LinkError::Timeout { .. }) => dap_err(e).hint(format!(
                    "The debugger did not answer `{command}`; the program may have resumed or not: check debug_status before the next step"
                )),
                DapError::Link(_) => dap_err(e),
            });
        }
        self.wait_result(&session, Some(baseline), until, wait_ms)
            .await
    }

    /// VSC-Bridge's paused-location shape, `{event: "terminated"}`, or `E_TIMEOUT` (never a success).
    async fn wait_result(
        &self,
        s: &Arc<Session>,
        after: Option<u64>,
        until: Instant,
        wait_ms: u64,
    ) -> Result<Value, ScriptError> {
        match s.wait_stop(after, until).await {
            Some(Outcome::Stopped { thread_id, reason }) => {
                let mut loc = json!({"event": "stopped", "threadId": thread_id, "sessionId": s.id, "reason": reason});
                if let Ok(body) = s
                    .client
                    .request("stackTrace", json!({"threadId": thread_id, "startFrame": 0, "levels": 1}), Duration::from_secs(5))
                    .await
                    && let Some(top) = body.pointer("/stackFrames/0")
                {
                    loc["file"] = top.pointer("/source/path").cloned().unwrap_or(Value::Null);
                    loc["line"] = top.get("line").cloned().unwrap_or(Value::Null);
                    loc["column"] = top.get("column").cloned().unwrap_or(Value::Null);
                    loc["functionName"] = top.get("name").cloned().unwrap_or(Value::Null);
                    loc["frameId"] = top.get("id").cloned().unwrap_or(Value::Null);
                }
                Ok(loc)
            }
            Some(Outcome::Terminated { exit_code }) => {
                lock(&self.breakpoints).unbind_all();
                Ok(json!({"event": "terminated", "exitCode": exit_code, "sessionId": s.id}))
            }
            None => Err(ScriptError::new("E_TIMEOUT", format!("the program did not stop within {wait_ms} ms"))
                .hint("Increase timeoutMs, or check with breakpoint_list that the breakpoint is verified (bound) and on a line that runs")
                .details(json!({"timeoutMs": wait_ms, "state": state_name(&s.run())}))),
        }
    }
}

pub(super) fn state_name(run: &Run) -> &'static str {
    match run {
        Run::Starting => "starting",
        Run::Running => "running",
        Run::Paused { .. } => "paused",
        Run::Terminated => "terminated",
    }
}
