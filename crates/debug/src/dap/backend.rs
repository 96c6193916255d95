//! Script dispatch for the `dap` backend, breakpoints and the session's life (start, stop, restart, status).

use super::breakpoints::Store;
use super::client::DapError;
use super::ending::{Ending, Endings, Launching};
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
/// Live sessions at once unless configured (`--debug-max-sessions`, `DEBUG_MAX_SESSIONS`).
pub const DEFAULT_MAX_SESSIONS: usize = 8;
/// Ended sessions kept for their journal (`dap_logs {sessionId}`); the oldest go first.
const ENDED_KEPT: usize = 16;
/// How long the shutdown waits for sessions to end before it kills what they started. An ending against a hung
/// debugger takes 3 s per `disconnect` (js-debug's program session, then its launcher) and 2 s for a stdio
/// adapter to exit; under the 10 s the core gives a bridge's tasks to end before the process exits anyway.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(7);

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
    /// Every live session and the latest ended ones, oldest first: the last live one is the default.
    pub(super) sessions: Mutex<Vec<Arc<Session>>>,
    max_sessions: usize,
    /// Serialises start/stop/restart so two starts cannot race past the maximum.
    lifecycle: tokio::sync::Mutex<()>,
    next_id: AtomicU64,
    /// Sessions being ended; the shutdown waits for them.
    pub(super) endings: Endings,
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
            sessions: Mutex::new(Vec::new()),
            max_sessions: DEFAULT_MAX_SESSIONS,
            lifecycle: tokio::sync::Mutex::new(()),
            next_id: AtomicU64::new(1),
            endings: Endings::default(),
        }
    }

    /// How many sessions may be live at once; a `debug_start` beyond is `E_TOO_MANY_SESSIONS`.
    #[must_use]
    pub fn max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max.max(1);
        self
    }

    /// Ends every session that is not over yet (the bridge is shutting down): the live ones, and those whose
    /// program ended but whose adapter is still to be reaped, all at once; then waits for these and every ending
    /// already under way (a launch cut short by the drain ends its sessions only now), at most
    /// [`SHUTDOWN_LIMIT`], past which what they started is killed. So when the process exits, nothing a session
    /// started is left.
    pub async fn shutdown(&self) {
        let all = lock(&self.sessions).clone();
        for s in all
            .into_iter()
            .filter(|s| !s.is_finished() && !self.endings.is_ending(s))
        {
            drop(self.endings.end(vec![s], Ending::Terminate));
        }
        self.endings.finish(SHUTDOWN_LIMIT).await;
    }

    /// Ends `session` as `how` says, in a task a caller going away cannot cut short (see [`Endings`]).
    pub(super) async fn end_session(&self, session: &Arc<Session>, how: Ending) {
        let _ = self.endings.end(vec![Arc::clone(session)], how).await;
    }

    /// Adds a session being started; the oldest ended ones beyond [`ENDED_KEPT`] are forgotten.
    pub(super) fn register(&self, session: Arc<Session>) {
        let mut all = lock(&self.sessions);
        all.push(session);
        let ended = all.iter().filter(|s| s.is_terminated()).count();
        let mut extra = ended.saturating_sub(ENDED_KEPT);
        all.retain(|s| {
            let drop = extra > 0 && s.is_terminated();
            if drop {
                extra -= 1;
            }
            !drop
        });
    }

    pub(super) fn live_sessions(&self) -> Vec<Arc<Session>> {
        lock(&self.sessions)
            .iter()
            .filter(|s| !s.is_terminated())
            .cloned()
            .collect()
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
                | "breakpoint.set-function"
                | "breakpoint.exceptions"
                | "breakpoint.set-data"
                | "debug.save-variable"
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
                | "debug.pause"
                | "debug.run-to-line"
                | "debug.list-sessions"
                | "debug.attach"
                | "debug.detach"
                | "dap.logs"
                | "dap.exceptions"
                | "dap.search"
                | "dap.summary"
        )
    }

    /// Runs `alias`. A tool acting on a session gets the one `sessionId` names, else the most recent live one
    /// (the most recent at all for tools that read an ended one's journal), and its result says which.
    pub async fn execute(
        &self,
        alias: &str,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let sessionless = alias.starts_with("breakpoint.")
            || matches!(
                alias,
                "debug.start" | "debug.attach" | "debug.status" | "debug.list-sessions"
            );
        if sessionless || !Self::serves(alias) {
            return self.run_alias(alias, p, deadline).await;
        }
        let session = self.pick(p, reads_ended(alias))?;
        let mut p = p.clone();
        p.insert("sessionId".into(), json!(session.id));
        let mut result = self.run_alias(alias, &p, deadline).await?;
        if let Some(obj) = result.as_object_mut() {
            obj.entry("sessionId").or_insert_with(|| json!(session.id));
        }
        Ok(result)
    }

    async fn run_alias(
        &self,
        alias: &str,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        match alias {
            "breakpoint.set" => self.breakpoint_set(p, deadline).await,
            "breakpoint.remove" => self.breakpoint_remove(p, deadline).await,
            "breakpoint.clear.file" => self.breakpoint_clear_file(p, deadline).await,
            "breakpoint.clear.project" => self.breakpoint_clear_project(p, deadline).await,
            "breakpoint.list" => self.breakpoint_list(p),
            "breakpoint.set-function" => self.breakpoint_set_function(p, deadline).await,
            "breakpoint.exceptions" => self.breakpoint_exceptions(p, deadline).await,
            "breakpoint.set-data" => self.breakpoint_set_data(p, deadline).await,
            "debug.save-variable" => self.save_variable(p, deadline).await,
            "debug.start" => self.start(p, deadline).await,
            "debug.stop" => self.stop(p).await,
            "debug.restart" => self.restart(p, deadline).await,
            "debug.status" => Ok(super::adapters::with_adapters(self.status(), &self.cfg)),
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
            "debug.pause" => self.pause(p, deadline).await,
            "debug.run-to-line" => self.run_to_line(p, deadline).await,
            "debug.list-sessions" => Ok(self.list_sessions()),
            "debug.attach" => self.attach(p, deadline).await,
            "debug.detach" => self.detach(p).await,
            "dap.logs" => self.dap_logs(p),
            "dap.exceptions" => self.dap_exceptions(p),
            "dap.search" => self.dap_search(p),
            "dap.summary" => self.dap_summary(p),
            other => Err(ScriptError::new(
                "E_UNSUPPORTED_BACKEND",
                format!("`{other}` needs the vscode backend (VS Code with VSC-Bridge); this server runs the dap backend"),
            )
            .hint("Run the server with --debug-backend vscode next to VS Code with VSC-Bridge, or use the debugging tools")),
        }
    }

    /// The session `sessionId` names (live, or ended too when `ended`), else the most recent live one, else
    /// (when `ended`) the most recent one; `E_NO_SESSION` naming the sessions there are.
    pub(super) fn pick(&self, p: &Params, ended: bool) -> Result<Arc<Session>, ScriptError> {
        let all = lock(&self.sessions).clone();
        let usable = |s: &&Arc<Session>| ended || !s.is_terminated();
        if let Some(id) = str_param(p, "sessionId") {
            return all
                .iter()
                .find(|s| s.id == id)
                .filter(usable)
                .cloned()
                .ok_or_else(|| {
                    let live: Vec<&str> = all
                        .iter()
                        .filter(|s| !s.is_terminated())
                        .map(|s| s.id.as_str())
                        .collect();
                    let known = all.iter().any(|s| s.id == id);
                    ScriptError::new(
                        "E_NO_SESSION",
                        if known {
                            format!("debug session `{id}` has ended")
                        } else {
                            format!("no debug session `{id}`")
                        },
                    )
                    .hint("Omit sessionId for the most recent session, or use an id debug_list_sessions shows")
                    .details(json!({"sessionId": id, "live": live}))
                });
        }
        let live = all.iter().rev().find(|s| !s.is_terminated());
        let any = if ended { all.last() } else { None };
        live.or(any).cloned().ok_or_else(|| {
            let message = if all.is_empty() {
                "no debug session has run yet"
            } else {
                "no active debug session"
            };
            ScriptError::new("E_NO_SESSION", message)
                .hint("Start debug session first using debug_start")
        })
    }

    /// The live session a tool acts on (see [`Self::pick`]), else `E_NO_SESSION`.
    pub(super) fn session(&self, p: &Params) -> Result<Arc<Session>, ScriptError> {
        self.pick(p, false)
    }

    /// The session a tool reads, live or ended (its journal stays).
    pub(super) fn any_session(&self, p: &Params) -> Result<Arc<Session>, ScriptError> {
        self.pick(p, true)
    }

    /// Every session kept, oldest first, and which one a tool without `sessionId` acts on.
    fn list_sessions(&self) -> Value {
        let all = lock(&self.sessions).clone();
        let default = self.pick(&Params::new(), true).ok().map(|s| s.id.clone());
        let list: Vec<Value> = all
            .iter()
            .map(|s| {
                let mut v = session_summary(s);
                v["default"] = json!(default.as_deref() == Some(s.id.as_str()));
                v
            })
            .collect();
        let live = all.iter().filter(|s| !s.is_terminated()).count();
        json!({"sessions": list, "live": live, "maxSessions": self.max_sessions, "default": default})
    }

    pub(super) fn resolve_path(&self, raw: &str) -> PathBuf {
        let p = Path::new(raw);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.cfg.workspace.join(p)
        }
    }

    /// An existing source file and a line inside it.
    pub(super) fn source_line(&self, p: &Params) -> Result<(PathBuf, u64), ScriptError> {
        let raw = str_param(p, "path").unwrap_or_default();
        let path = self.resolve_path(raw);
        let text = super::source::read("path", &path)?;
        let path = path.canonicalize().unwrap_or(path);
        let line = u64_param(p, "line").unwrap_or(0);
        let lines = text.split(|b| *b == b'\n').count() as u64;
        if line == 0 || line > lines {
            return Err(ScriptError::new(
                "E_INVALID_LINE",
                format!("line {line} is outside {} (1..={lines})", path.display()),
            )
            .details(json!({"field": "line", "line": line, "lines": lines})));
        }
        Ok((path, line))
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
                    None => super::jsdebug::find_js_debug(None, &self.cfg.workspace)
                        .map_err(|_| missing("js-debug was not found (--debug-js-debug)".into()))?,
                };
                let node = launch::find_program(&["node", "nodejs"], &[])
                    .ok_or_else(|| missing("no node on PATH".into()))?;
                let mut cmd = tokio::process::Command::new(node);
                cmd.arg(script);
                Ok(cmd)
            }
            AdapterKind::Delve => launch::find_program(&["dlv"], &[])
                .map(tokio::process::Command::new)
                .ok_or_else(|| missing("no dlv on PATH".into())),
        }
    }

    pub(super) async fn start(&self, p: &Params, deadline: Instant) -> Result<Value, ScriptError> {
        let mut config = self.configuration(p)?;
        super::policy::LaunchPolicy::absolute_paths(&mut config, &self.cfg.workspace);
        // Checked on the caller's configuration, before the bridge adds its own interpreter to it.
        self.cfg.policy.check(&config, &self.cfg.workspace)?;
        let _guard = self.lifecycle.lock().await;
        let live = self.live_sessions();
        if live.len() >= self.max_sessions {
            let ids: Vec<&str> = live.iter().map(|s| s.id.as_str()).collect();
            return Err(ScriptError::new(
                "E_TOO_MANY_SESSIONS",
                format!(
                    "{} debug sessions are live, the maximum (--debug-max-sessions / DEBUG_MAX_SESSIONS is {})",
                    live.len(),
                    self.max_sessions
                ),
            )
            .hint("End one with debug_stop {sessionId}, or start the bridge with a higher --debug-max-sessions")
            .details(json!({"maxSessions": self.max_sessions, "live": ids})));
        }
        // Held until the answer names the session: a call that ends before (cancelled, timed out, its client
        // gone), even while waiting for the first stop, ends the session instead of leaving it unnamed.
        let mut launching = Launching::new(&self.endings);
        let session = self.launch(config, deadline, &mut launching).await?;
        let mut result = json!({"sessionId": session.id, "adapter": session.adapter.name(),
            "name": session.config.get("name"), "type": session.config.get("type"),
            "breakpoints": lock(&session.breakpoints).list(false)});
        if bool_param(p, "wait") == Some(true) {
            let wait_ms = u64_param(p, "timeoutMs").unwrap_or(30_000);
            let until = Instant::now() + Duration::from_millis(wait_ms);
            match self
                .wait_result(&session, None, until.min(deadline), wait_ms)
                .await
            {
                Ok(stop) => result["stop"] = stop,
                // The session runs on; the error names it, so the caller can wait again or stop it.
                Err(mut e) => {
                    if let Some(details) = e.details.as_object_mut() {
                        details.insert("sessionId".into(), json!(session.id));
                    }
                    launching.settle();
                    return Err(e);
                }
            }
        }
        launching.settle();
        result["state"] = json!(state_name(&session.run()));
        Ok(result)
    }

    /// Launches, then reaps the adapter once the program ends: a `terminated` session is disconnected and its
    /// adapter's process group killed, while what it printed stays in the journal for the `dap_*` tools. Every
    /// session a launch path opens goes into `launching`, which ends them unless the caller settles it.
    async fn launch(
        &self,
        config: Value,
        deadline: Instant,
        launching: &mut Launching,
    ) -> Result<Arc<Session>, ScriptError> {
        let session = self.launch_session(config, deadline, launching).await?;
        let weak = Arc::downgrade(&session);
        let ended = session.ended();
        let endings = self.endings.clone();
        tokio::spawn(async move {
            ended.await;
            // The last output events may trail `terminated` by a moment.
            tokio::time::sleep(REAP_AFTER).await;
            if let Some(s) = weak.upgrade() {
                let _ = endings.end(vec![s], Ending::Terminate).await;
            }
        });
        Ok(session)
    }

    async fn launch_session(
        &self,
        mut config: Value,
        deadline: Instant,
        launching: &mut Launching,
    ) -> Result<Arc<Session>, ScriptError> {
        let ty = config
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let kind = AdapterKind::of_type(&ty).ok_or_else(|| {
            ScriptError::new("E_UNSUPPORTED_LANGUAGE", format!("no debug adapter for launch type `{ty}`"))
                .hint("Use type \"debugpy\"/\"python\" for Python, \"lldb-dap\"/\"lldb\" for C, C++ and Rust, \"pwa-node\"/\"node\" for JavaScript, or \"go\" for Go")
        })?;
        let mut command = self.adapter_command(kind)?;
        self.cfg.policy.apply_env(&mut command);
        if let Some(program) = config.get("program").and_then(Value::as_str) {
            let path = self.resolve_path(program);
            // delve builds `program`, which may be a package's directory.
            if !(path.is_file() || kind == AdapterKind::Delve && path.is_dir()) {
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
        self.settle_queue();
        if kind == AdapterKind::JsDebug {
            return self
                .launch_js(id, command, config, deadline, launching)
                .await;
        }
        if kind == AdapterKind::Delve {
            return self
                .launch_go(id, command, config, deadline, launching)
                .await;
        }
        // `python -m debugpy --listen` runs its own adapter on that port: the session speaks to it there.
        let listener = super::attach::listener(kind, &config);
        let link = match &listener {
            Some(addr) => Link::Tcp {
                addr: addr.clone(),
                children: tokio::sync::mpsc::channel(1).0,
            },
            None => Link::Child(command),
        };
        let session = Session::open(
            id,
            kind,
            config.clone(),
            link,
            Arc::clone(&self.breakpoints),
        )
        .await
        .map_err(|e| match &listener {
            Some(addr) => ScriptError::new(
                "E_LAUNCH_FAILED",
                format!("nothing answered at {addr}: {}", e.message),
            )
            .hint("Check that the program runs under python -m debugpy --listen at that address"),
            None => e,
        })?;
        launching.opened(&session);
        self.register(Arc::clone(&session));
        match self.handshake(&session, config, deadline).await {
            Ok(()) => Ok(session),
            // The session is ended by `launching` once this error is answered, not before: a hung adapter's
            // `disconnect` would hold the answer past the call's deadline, and the answer would no longer say
            // what the launch waited for.
            Err(mut e) => {
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
        let mut launch_answer = tokio::spawn(pending.wait(left(deadline)));
        // A launch that fails (delve's build error) is answered and never followed by `initialized`: its answer
        // ends the wait at once. One answered with success first (lldb-dap) waits on for `initialized`.
        let mut answered = false;
        let initialized = tokio::select! {
            ok = s.wait_initialized(deadline) => ok,
            answer = &mut launch_answer => match answer.map_err(|e| failed(e.to_string()))? {
                // Both waits end at the deadline, and either may see it first: what the launch waited for is
                // `initialized` either way, and the error says so.
                Err(bridge_core::link::LinkError::Timeout { .. }) => false,
                answer => {
                    let answer = answer.map_err(|e| failed(format!("{request}: {e}")))?;
                    super::client::body_of(&request, answer).map_err(|e| failed(e.to_string()))?;
                    answered = true;
                    s.wait_initialized(deadline).await
                }
            },
        };
        if !initialized {
            return Err(failed(format!(
                "the adapter never sent `initialized`{}",
                s.closed_reason()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            )));
        }
        self.send_line_breakpoints(s, deadline)
            .await
            .map_err(|e| failed(e.to_string()))?;
        self.configure_breakpoints(s, &caps, deadline)
            .await
            .map_err(|e| failed(e.message))?;
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
        if !answered {
            let answer = launch_answer
                .await
                .map_err(|e| failed(e.to_string()))?
                .map_err(|e| failed(format!("{request}: {e}")))?;
            super::client::body_of(&request, answer).map_err(|e| failed(e.to_string()))?;
        }
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
        self.end_session(&session, Ending::Terminate).await;
        if self.live_sessions().is_empty() {
            lock(&self.breakpoints).unbind_all();
        }
        Ok(
            json!({"success": true, "details": {"sessionId": session.id, "stopped": true, "alreadyEnded": ended}}),
        )
    }

    /// Works on an ended session too: the last configuration is launched again.
    async fn restart(&self, p: &Params, deadline: Instant) -> Result<Value, ScriptError> {
        let session = self.any_session(p)?;
        let _guard = self.lifecycle.lock().await;
        self.end_session(&session, Ending::Terminate).await;
        // The new session starts with the old one's breakpoints (they become the queued ones).
        *lock(&self.breakpoints) = lock(&session.breakpoints).fresh_copy();
        let mut launching = Launching::new(&self.endings);
        let fresh = self
            .launch(session.config.clone(), deadline, &mut launching)
            .await?;
        launching.settle();
        Ok(json!({"success": true, "details": {"sessionId": fresh.id, "previous": session.id}}))
    }

    /// The default session's state (see [`Self::pick`]) and how many are live.
    pub fn status(&self) -> Value {
        let live = self.live_sessions().len();
        let Ok(s) = self.pick(&Params::new(), true) else {
            return json!({"isActive": false, "state": "none", "backend": "dap",
                "breakpoints": lock(&self.breakpoints).count(), "liveSessions": 0,
                "maxSessions": self.max_sessions});
        };
        let mut v = session_summary(&s);
        let run = s.run();
        v["isActive"] = json!(run != Run::Terminated);
        v["isPaused"] = json!(matches!(run, Run::Paused { .. }));
        v["backend"] = json!("dap");
        v["breakpoints"] = json!(lock(&s.breakpoints).count());
        v["liveSessions"] = json!(live);
        v["maxSessions"] = json!(self.max_sessions);
        v
    }

    async fn wait_for_hit(&self, p: &Params, deadline: Instant) -> Result<Value, ScriptError> {
        let session = self.any_session(p)?;
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
        let before = match session.resuming(command, thread_id) {
            Ok(before) => before,
            // Another thread's stop is still unreported: the program is paused there, so it is reported now.
            Err(outcome) => {
                let mut result = self.report(&session, outcome, deadline).await;
                result["resumed"] = json!(false);
                result["note"] = json!(format!(
                    "`{command}` was not sent: thread {} had already stopped and that stop was not reported yet; the program is paused there. Call again to resume",
                    result["threadId"]
                ));
                return Ok(result);
            }
        };
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
                            .details(json!({"state": state_name(&session.run())}))
                    } else {
                        // A stop came meanwhile: it is reported here, once, as where the program is.
                        let mut details = json!({"state": state_name(&session.run())});
                        if let Some(outcome) = session.next_pending() {
                            details["stop"] = self.report(&session, outcome, until).await;
                            details["state"] = json!(state_name(&session.run()));
                        }
                        err.hint("The program stopped elsewhere meanwhile: details.stop says where")
                            .details(details)
                    }
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

    /// VSC-Bridge's paused-location shape (with the source around it, the stack and why), `{event:
    /// "terminated"}`, or `E_TIMEOUT` (never a success).
    pub(super) async fn wait_result(
        &self,
        s: &Arc<Session>,
        after: Option<u64>,
        until: Instant,
        wait_ms: u64,
    ) -> Result<Value, ScriptError> {
        match s.wait_stop(after, until).await {
            Some(outcome) => Ok(self.report(s, outcome, until).await),
            None => Err(ScriptError::new("E_TIMEOUT", format!("the program did not stop within {wait_ms} ms"))
                .hint("Increase timeoutMs, or check with breakpoint_list that the breakpoint is verified (bound) and on a line that runs")
                .details(json!({"timeoutMs": wait_ms, "state": state_name(&s.run())}))),
        }
    }

    pub(super) async fn report(
        &self,
        s: &Arc<Session>,
        outcome: Outcome,
        deadline: Instant,
    ) -> Value {
        match outcome {
            Outcome::Stopped {
                stop,
                passed,
                repeated,
            } => {
                let mut loc = super::stops::describe(s, &stop, deadline).await;
                if repeated {
                    loc["alreadyReported"] = json!(true);
                }
                if !passed.is_empty() {
                    loc["passedStops"] =
                        json!(passed.iter().map(|p| p.to_json()).collect::<Vec<_>>());
                }
                let pending = s.pending_stops();
                if pending > 0 {
                    loc["pendingStops"] = json!(pending);
                }
                loc
            }
            Outcome::Terminated { exit_code, passed } => {
                if self.live_sessions().is_empty() {
                    lock(&self.breakpoints).unbind_all();
                }
                let mut v =
                    json!({"event": "terminated", "exitCode": exit_code, "sessionId": s.id});
                if !passed.is_empty() {
                    v["passedStops"] =
                        json!(passed.iter().map(|p| p.to_json()).collect::<Vec<_>>());
                }
                v
            }
        }
    }
}

/// Which tools read an ended session too (its journal, or its end).
fn reads_ended(alias: &str) -> bool {
    alias.starts_with("dap.")
        || matches!(alias, "debug.stop" | "debug.restart" | "debug.wait-for-hit")
}

/// A session's id, adapter, configuration name and run state.
fn session_summary(s: &Session) -> Value {
    let run = s.run();
    let mut v = json!({"sessionId": s.id, "adapter": s.adapter.name(), "state": state_name(&run),
        "name": s.config.get("name"), "type": s.config.get("type"),
        "program": s.config.get("program")});
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
    let pending = s.pending_stops();
    if pending > 0 {
        v["pendingStops"] = json!(pending);
    }
    let (stops, repeats) = {
        let st = s.shared.state();
        (st.stops, st.repeats)
    };
    v["stops"] = json!(stops);
    if repeats > 0 {
        v["repeatedStopEventsDropped"] = json!(repeats);
    }
    v
}

pub(super) fn state_name(run: &Run) -> &'static str {
    match run {
        Run::Starting => "starting",
        Run::Running => "running",
        Run::Paused { .. } => "paused",
        Run::Terminated => "terminated",
    }
}
