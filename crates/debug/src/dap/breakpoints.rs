//! Breakpoints kept per file, because DAP's `setBreakpoints` replaces a file's whole list: every change resends
//! the file's full list. Each session has its own [`Store`], so sessions of one program stop independently; the
//! bridge's own store is the queue, which every session started later begins with (a copy): once no session is
//! live it holds the most recent session's breakpoints, and tools change it until a session starts. A tool acts
//! on `sessionId`'s session, else the most recent live one, else the queue. Each knows
//! whether the debugger bound it, and to which line. Function breakpoints, the exception filters chosen and
//! data breakpoints (watchpoints) are kept here too: each kind is one DAP request that replaces the whole set.

use super::backend::{DapBackend, Params, bool_param, dap_err, left, str_param, u64_param};
use super::client::DapError;
use super::session::{Session, lock};
use crate::envelope::ScriptError;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

/// Breakpoints the agent can create, over all files.
pub const MAX_BREAKPOINTS: usize = 1000;

#[derive(Debug, Clone, PartialEq)]
pub struct Breakpoint {
    pub line: u64,
    pub condition: Option<String>,
    pub hit_condition: Option<String>,
    pub log_message: Option<String>,
    pub verified: bool,
    pub bound_line: Option<u64>,
    pub id: Option<i64>,
    pub message: Option<String>,
}

impl Breakpoint {
    pub fn new(line: u64) -> Self {
        Self {
            line,
            condition: None,
            hit_condition: None,
            log_message: None,
            verified: false,
            bound_line: None,
            id: None,
            message: None,
        }
    }

    pub fn to_json(&self, path: &Path, pending: bool) -> Value {
        let mut v = json!({
            "kind": "line",
            "path": path.display().to_string(),
            "line": self.line,
            "verified": self.verified,
            "boundLine": self.bound_line,
            "enabled": true,
        });
        if pending {
            v["pending"] = json!(true);
            v["message"] = json!("queued: sent to the debugger when a session starts");
        } else if let Some(m) = &self.message {
            v["message"] = json!(m);
        }
        for (key, val) in [
            ("condition", &self.condition),
            ("hitCondition", &self.hit_condition),
            ("logMessage", &self.log_message),
        ] {
            if let Some(val) = val {
                v[key] = json!(val);
            }
        }
        v
    }

    fn dap(&self) -> Value {
        let mut v = json!({"line": self.line});
        if let Some(c) = &self.condition {
            v["condition"] = json!(c);
        }
        if let Some(c) = &self.hit_condition {
            v["hitCondition"] = json!(c);
        }
        if let Some(c) = &self.log_message {
            v["logMessage"] = json!(c);
        }
        v
    }
}

/// A breakpoint on a function's name (`setFunctionBreakpoints`).
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionBreakpoint {
    pub name: String,
    pub condition: Option<String>,
    pub hit_condition: Option<String>,
    pub binding: Binding,
}

/// A data breakpoint (watchpoint): `data_id` comes from the adapter's `dataBreakpointInfo` and is good for the
/// session that issued it only.
#[derive(Debug, Clone, PartialEq)]
pub struct DataBreakpoint {
    pub data_id: String,
    pub description: String,
    pub access_type: Option<String>,
    pub condition: Option<String>,
    pub hit_condition: Option<String>,
    pub binding: Binding,
}

/// What the adapter said of one breakpoint: verified or not, where it bound, why not.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Binding {
    pub verified: bool,
    pub id: Option<i64>,
    pub path: Option<String>,
    pub line: Option<u64>,
    pub message: Option<String>,
}

impl Binding {
    fn update(&mut self, answer: &Value) {
        if let Some(v) = answer.get("verified").and_then(Value::as_bool) {
            self.verified = v;
        }
        if let Some(id) = answer.get("id").and_then(Value::as_i64) {
            self.id = Some(id);
        }
        if let Some(line) = answer.get("line").and_then(Value::as_u64) {
            self.line = Some(line);
        }
        if let Some(path) = answer.pointer("/source/path").and_then(Value::as_str) {
            self.path = Some(path.to_owned());
        }
        self.message = answer
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned);
    }

    fn to_json(&self, v: &mut Value, pending: bool) {
        v["verified"] = json!(self.verified);
        if self.path.is_some() {
            v["boundPath"] = json!(self.path);
        }
        v["boundLine"] = json!(self.line);
        if pending {
            v["pending"] = json!(true);
            v["message"] = json!("queued: sent to the debugger when a session starts");
        } else if let Some(m) = &self.message {
            v["message"] = json!(m);
        }
    }
}

impl FunctionBreakpoint {
    pub fn to_json(&self, pending: bool) -> Value {
        let mut v = json!({"kind": "function", "name": self.name, "enabled": true});
        self.binding.to_json(&mut v, pending);
        optional(&mut v, "condition", &self.condition);
        optional(&mut v, "hitCondition", &self.hit_condition);
        v
    }

    fn dap(&self) -> Value {
        let mut v = json!({"name": self.name});
        optional(&mut v, "condition", &self.condition);
        optional(&mut v, "hitCondition", &self.hit_condition);
        v
    }
}

impl DataBreakpoint {
    pub fn to_json(&self) -> Value {
        let mut v = json!({"kind": "data", "dataId": self.data_id, "description": self.description,
            "accessType": self.access_type, "enabled": true});
        self.binding.to_json(&mut v, false);
        optional(&mut v, "condition", &self.condition);
        optional(&mut v, "hitCondition", &self.hit_condition);
        v
    }

    fn dap(&self) -> Value {
        let mut v = json!({"dataId": self.data_id});
        optional(&mut v, "accessType", &self.access_type);
        optional(&mut v, "condition", &self.condition);
        optional(&mut v, "hitCondition", &self.hit_condition);
        v
    }
}

fn optional(v: &mut Value, key: &str, val: &Option<String>) {
    if let Some(val) = val {
        v[key] = json!(val);
    }
}

/// One exception filter chosen (`raised`, `uncaught`, `cpp_throw`...), with its condition if any.
#[derive(Debug, Clone, PartialEq)]
pub struct ExceptionFilter {
    pub id: String,
    pub condition: Option<String>,
}

#[derive(Debug, Default, Clone)]
pub struct Store {
    files: BTreeMap<PathBuf, Vec<Breakpoint>>,
    pub functions: Vec<FunctionBreakpoint>,
    /// `None`: the filters the adapter marks `default`.
    pub exceptions: Option<Vec<ExceptionFilter>>,
    pub data: Vec<DataBreakpoint>,
    /// The queue only: the session whose breakpoints it last took (see [`DapBackend::settle_queue`]).
    pub seeded_by: Option<String>,
}

impl Store {
    pub fn count(&self) -> usize {
        self.files.values().map(Vec::len).sum::<usize>() + self.functions.len() + self.data.len()
    }

    /// Adds or replaces the function breakpoint on `bp.name`; false when the bound is reached.
    pub fn set_function(&mut self, bp: FunctionBreakpoint) -> bool {
        if let Some(old) = self.functions.iter_mut().find(|b| b.name == bp.name) {
            *old = bp;
            return true;
        }
        if self.count() >= MAX_BREAKPOINTS {
            return false;
        }
        self.functions.push(bp);
        true
    }

    pub fn remove_function(&mut self, name: &str) -> bool {
        let before = self.functions.len();
        self.functions.retain(|b| b.name != name);
        before != self.functions.len()
    }

    /// Adds or replaces the data breakpoint on `bp.data_id`; false when the bound is reached.
    pub fn set_data(&mut self, bp: DataBreakpoint) -> bool {
        if let Some(old) = self.data.iter_mut().find(|b| b.data_id == bp.data_id) {
            *old = bp;
            return true;
        }
        if self.count() >= MAX_BREAKPOINTS {
            return false;
        }
        self.data.push(bp);
        true
    }

    pub fn remove_data(&mut self, data_id: &str) -> bool {
        let before = self.data.len();
        self.data.retain(|b| b.data_id != data_id);
        before != self.data.len()
    }

    /// The `setFunctionBreakpoints` arguments: the whole list.
    pub fn function_request(&self) -> Value {
        json!({"breakpoints": self.functions.iter().map(FunctionBreakpoint::dap).collect::<Vec<_>>()})
    }

    /// The `setDataBreakpoints` arguments: the whole list.
    pub fn data_request(&self) -> Value {
        json!({"breakpoints": self.data.iter().map(DataBreakpoint::dap).collect::<Vec<_>>()})
    }

    /// Records the answer to [`function_request`](Self::function_request), in order.
    pub fn apply_functions(&mut self, response: &Value) {
        for (bp, answer) in self.functions.iter_mut().zip(answers(response)) {
            bp.binding.update(answer);
        }
    }

    pub fn apply_data(&mut self, response: &Value) {
        for (bp, answer) in self.data.iter_mut().zip(answers(response)) {
            bp.binding.update(answer);
        }
    }

    /// Adds or replaces the breakpoint at `bp.line`; false when the bound is reached.
    pub fn set(&mut self, path: &Path, bp: Breakpoint) -> bool {
        if let Some(old) = self
            .files
            .get_mut(path)
            .and_then(|list| list.iter_mut().find(|b| b.line == bp.line))
        {
            *old = bp;
            return true;
        }
        if self.count() >= MAX_BREAKPOINTS {
            return false;
        }
        let list = self.files.entry(path.to_path_buf()).or_default();
        list.push(bp);
        list.sort_by_key(|b| b.line);
        true
    }

    pub fn remove(&mut self, path: &Path, line: u64) -> bool {
        let Some(list) = self.files.get_mut(path) else {
            return false;
        };
        let before = list.len();
        list.retain(|b| b.line != line);
        before != list.len()
    }

    pub fn clear_file(&mut self, path: &Path) -> usize {
        self.files
            .insert(path.to_path_buf(), Vec::new())
            .map_or(0, |l| l.len())
    }

    /// Files that had breakpoints (their lists now empty), so each can be cleared in the debugger too.
    pub fn clear_all(&mut self) -> Vec<PathBuf> {
        let files: Vec<PathBuf> = self.files.keys().cloned().collect();
        for list in self.files.values_mut() {
            list.clear();
        }
        files
    }

    pub fn files(&self) -> Vec<PathBuf> {
        self.files.keys().cloned().collect()
    }

    pub fn get(&self, path: &Path, line: u64) -> Option<&Breakpoint> {
        self.files.get(path)?.iter().find(|b| b.line == line)
    }

    /// The `setBreakpoints` arguments for `path`: its whole list.
    pub fn request(&self, path: &Path) -> Value {
        let list = self.files.get(path).map(Vec::as_slice).unwrap_or(&[]);
        json!({
            "source": {"path": path.display().to_string(), "name": path.file_name().map(|n| n.to_string_lossy().into_owned())},
            "breakpoints": list.iter().map(Breakpoint::dap).collect::<Vec<_>>(),
            "lines": list.iter().map(|b| b.line).collect::<Vec<_>>(),
        })
    }

    /// Records the debugger's answer to [`request`](Self::request), which lists the breakpoints in order.
    pub fn apply(&mut self, path: &Path, response: &Value) {
        let Some(list) = self.files.get_mut(path) else {
            return;
        };
        let answers = response
            .get("breakpoints")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (bp, answer) in list.iter_mut().zip(answers.iter()) {
            update(bp, answer);
        }
    }

    /// A `breakpoint` event: the debugger changed one (bound it later, moved it).
    pub fn on_event(&mut self, body: &Value) {
        let Some(answer) = body.get("breakpoint") else {
            return;
        };
        let Some(id) = answer.get("id").and_then(Value::as_i64) else {
            return;
        };
        for bp in self.files.values_mut().flatten() {
            if bp.id == Some(id) {
                update(bp, answer);
            }
        }
        for b in self
            .functions
            .iter_mut()
            .map(|b| &mut b.binding)
            .chain(self.data.iter_mut().map(|b| &mut b.binding))
        {
            if b.id == Some(id) {
                b.update(answer);
            }
        }
    }

    /// What a new session starts with: these breakpoints, none bound yet.
    pub fn fresh_copy(&self) -> Store {
        let mut copy = self.clone();
        copy.unbind_all();
        copy
    }

    /// Forgets what a finished session said: the breakpoints wait for the next one.
    pub fn unbind_all(&mut self) {
        for bp in self.files.values_mut().flatten() {
            bp.verified = false;
            bp.bound_line = None;
            bp.id = None;
        }
        for bp in &mut self.functions {
            bp.binding = Binding::default();
        }
        // A data breakpoint's id names memory of the session that ended.
        self.data.clear();
    }

    /// Line breakpoints, then function and data breakpoints (each with its `kind`).
    pub fn list(&self, pending: bool) -> Vec<Value> {
        self.files
            .iter()
            .flat_map(|(path, list)| list.iter().map(move |b| b.to_json(path, pending)))
            .chain(self.functions.iter().map(|b| b.to_json(pending)))
            .chain(self.data.iter().map(DataBreakpoint::to_json))
            .collect()
    }
}

fn answers(response: &Value) -> impl Iterator<Item = &Value> {
    response
        .get("breakpoints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn update(bp: &mut Breakpoint, answer: &Value) {
    if let Some(v) = answer.get("verified").and_then(Value::as_bool) {
        bp.verified = v;
    }
    if let Some(line) = answer.get("line").and_then(Value::as_u64) {
        bp.bound_line = Some(line);
    }
    if let Some(id) = answer.get("id").and_then(Value::as_i64) {
        bp.id = Some(id);
    }
    bp.message = answer
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned);
}

fn supports(caps: &Value, cap: &str) -> bool {
    caps.get(cap).and_then(Value::as_bool) == Some(true)
}

fn unsupported(s: &Session, what: &str, cap: &str) -> ScriptError {
    ScriptError::new(
        "E_UNSUPPORTED_BY_ADAPTER",
        format!(
            "{} does not support {what} (its initialize capabilities lack `{cap}`)",
            s.adapter.name()
        ),
    )
    .hint("Use a line breakpoint (breakpoint_set), with a condition if needed, instead")
    .details(json!({"adapter": s.adapter.name(), "capability": cap}))
}

fn too_many() -> ScriptError {
    ScriptError::new(
        "E_INVALID_PARAMS",
        format!("at most {MAX_BREAKPOINTS} breakpoints"),
    )
    .hint("Remove breakpoints you no longer need")
}

/// The filters an adapter offers, as its `initialize` answer lists them.
fn offered(caps: &Value) -> Vec<Value> {
    caps.get("exceptionBreakpointFilters")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn filter_ids(offered: &[Value]) -> Vec<&str> {
    offered
        .iter()
        .filter_map(|f| f.get("filter").and_then(Value::as_str))
        .collect()
}

/// `setExceptionBreakpoints` arguments: the chosen filters this adapter offers (others are for another
/// language's adapter, and skipped), or the adapter's defaults when none were chosen.
fn exception_args(chosen: &Option<Vec<ExceptionFilter>>, caps: &Value) -> Value {
    let offered = offered(caps);
    let ids = filter_ids(&offered);
    match chosen {
        None => {
            let defaults: Vec<&str> = offered
                .iter()
                .filter(|f| f.get("default").and_then(Value::as_bool) == Some(true))
                .filter_map(|f| f.get("filter").and_then(Value::as_str))
                .collect();
            json!({"filters": defaults})
        }
        Some(list) => {
            let list: Vec<&ExceptionFilter> = list
                .iter()
                .filter(|f| ids.contains(&f.id.as_str()))
                .collect();
            let plain: Vec<&str> = list
                .iter()
                .filter(|f| f.condition.is_none())
                .map(|f| f.id.as_str())
                .collect();
            let options: Vec<Value> = list
                .iter()
                .filter_map(|f| {
                    f.condition
                        .as_ref()
                        .map(|c| json!({"filterId": f.id, "condition": c}))
                })
                .collect();
            let mut args = json!({"filters": plain});
            if !options.is_empty() {
                args["filterOptions"] = json!(options);
            }
            args
        }
    }
}

/// The breakpoints a tool acts on: a live session's own, or (no session live) the queue every session started
/// later begins with.
pub(super) struct Target {
    pub session: Option<Arc<Session>>,
    pub store: Arc<Mutex<Store>>,
}

impl Target {
    /// Whether the breakpoints wait for a session (none is live).
    fn queued(&self) -> bool {
        self.session.is_none()
    }

    fn id(&self) -> Value {
        json!(self.session.as_ref().map(|s| s.id.as_str()))
    }

    /// `{success, sessionId, queued, details}`: every breakpoint tool names where it acted.
    fn answer(&self, details: Value) -> Value {
        json!({"success": true, "sessionId": self.id(), "queued": self.queued(), "details": details})
    }
}

impl DapBackend {
    /// With no session live, the queue takes the most recent session's breakpoints, once: the next session
    /// starts with what the last one had (as an editor keeps them), and changes made to the queue afterwards
    /// stand. Called before the queue is read or changed: by a breakpoint tool with no session live, and
    /// before a session starts.
    pub(super) fn settle_queue(&self) {
        let all = lock(&self.sessions).clone();
        if all.iter().any(|s| !s.is_terminated()) {
            return;
        }
        let Some(last) = all.last() else {
            return;
        };
        if lock(&self.breakpoints).seeded_by.as_deref() == Some(last.id.as_str()) {
            return;
        }
        // The session's lock is let go before the queue's is taken: restart takes them the other way round.
        let mut fresh = lock(&last.breakpoints).fresh_copy();
        fresh.seeded_by = Some(last.id.clone());
        *lock(&self.breakpoints) = fresh;
    }

    /// The session `sessionId` names (live, else `E_NO_SESSION`), else the most recent live one, else the queue.
    pub(super) fn target(&self, p: &Params) -> Result<Target, ScriptError> {
        let session = if str_param(p, "sessionId").is_some() {
            Some(self.session(p)?)
        } else {
            self.session(p).ok()
        };
        if session.is_none() {
            self.settle_queue();
        }
        let store = session.as_ref().map_or_else(
            || Arc::clone(&self.breakpoints),
            |s| Arc::clone(&s.breakpoints),
        );
        Ok(Target { session, store })
    }

    /// Sends `path`'s whole list to the target's session, if any, and records where it bound.
    async fn sync_file(
        &self,
        t: &Target,
        path: &Path,
        deadline: Instant,
    ) -> Result<(), ScriptError> {
        let Some(s) = &t.session else {
            return Ok(());
        };
        let args = lock(&t.store).request(path);
        let body = s
            .client
            .request("setBreakpoints", args, left(deadline))
            .await
            .map_err(dap_err)?;
        lock(&t.store).apply(path, &body);
        Ok(())
    }

    /// At a session's start: every file's list of the session's own breakpoints.
    pub(super) async fn send_line_breakpoints(
        &self,
        s: &Session,
        deadline: Instant,
    ) -> Result<(), DapError> {
        let files = lock(&s.breakpoints).files();
        for file in files {
            let args = lock(&s.breakpoints).request(&file);
            let body = s
                .client
                .request("setBreakpoints", args, left(deadline))
                .await?;
            lock(&s.breakpoints).apply(&file, &body);
        }
        Ok(())
    }

    pub(super) async fn breakpoint_set(
        &self,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let t = self.target(p)?;
        let (path, line) = self.source_line(p)?;
        let mut bp = Breakpoint::new(line);
        bp.condition = str_param(p, "condition").map(str::to_owned);
        bp.hit_condition = str_param(p, "hitCondition").map(str::to_owned);
        bp.log_message = str_param(p, "logMessage").map(str::to_owned);
        if !lock(&t.store).set(&path, bp) {
            return Err(too_many());
        }
        self.sync_file(&t, &path, deadline).await?;
        let bp = lock(&t.store)
            .get(&path, line)
            .map(|b| b.to_json(&path, t.queued()))
            .unwrap_or(Value::Null);
        Ok(t.answer(json!({"breakpoint": bp})))
    }

    pub(super) async fn breakpoint_remove(
        &self,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let t = self.target(p)?;
        let path = self.resolve_path(str_param(p, "path").unwrap_or_default());
        let path = path.canonicalize().unwrap_or(path);
        let line = u64_param(p, "line").unwrap_or(0);
        let removed = lock(&t.store).remove(&path, line);
        self.sync_file(&t, &path, deadline).await?;
        Ok(t.answer(json!({"removed": removed, "path": path.display().to_string(), "line": line})))
    }

    pub(super) async fn breakpoint_clear_file(
        &self,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let t = self.target(p)?;
        let path = self.resolve_path(str_param(p, "path").unwrap_or_default());
        if !path.exists() {
            return Err(ScriptError::new(
                "E_FILE_NOT_FOUND",
                format!("{} does not exist", path.display()),
            ));
        }
        let path = path.canonicalize().unwrap_or(path);
        let cleared = lock(&t.store).clear_file(&path);
        self.sync_file(&t, &path, deadline).await?;
        Ok(t.answer(json!({"cleared": cleared, "path": path.display().to_string()})))
    }

    pub(super) async fn breakpoint_clear_project(
        &self,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let t = self.target(p)?;
        let before = lock(&t.store).count();
        let files = lock(&t.store).clear_all();
        for file in files {
            self.sync_file(&t, &file, deadline).await?;
        }
        Ok(t.answer(json!({"cleared": before})))
    }

    pub(super) fn breakpoint_list(&self, p: &Params) -> Result<Value, ScriptError> {
        let t = self.target(p)?;
        let list = lock(&t.store).list(t.queued());
        Ok(
            json!({"breakpoints": list, "total": list.len(), "sessionId": t.id(), "queued": t.queued()}),
        )
    }

    async fn sync_functions(&self, s: &Session, deadline: Instant) -> Result<(), ScriptError> {
        let args = lock(&s.breakpoints).function_request();
        let body = s
            .client
            .request("setFunctionBreakpoints", args, left(deadline))
            .await
            .map_err(dap_err)?;
        lock(&s.breakpoints).apply_functions(&body);
        Ok(())
    }

    async fn sync_data(&self, s: &Session, deadline: Instant) -> Result<(), ScriptError> {
        let args = lock(&s.breakpoints).data_request();
        let body = s
            .client
            .request("setDataBreakpoints", args, left(deadline))
            .await
            .map_err(dap_err)?;
        lock(&s.breakpoints).apply_data(&body);
        Ok(())
    }

    /// `breakpoint_set_function`: stop when a function is entered (by name), queued before a session.
    pub(super) async fn breakpoint_set_function(
        &self,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let name = str_param(p, "name").unwrap_or_default().trim().to_owned();
        if name.is_empty() {
            return Err(ScriptError::new(
                "E_INVALID_PARAMS",
                "`name` must name a function",
            ));
        }
        let t = self.target(p)?;
        if let Some(s) = &t.session
            && !supports(&lock(&s.capabilities), "supportsFunctionBreakpoints")
        {
            return Err(unsupported(
                s,
                "function breakpoints",
                "supportsFunctionBreakpoints",
            ));
        }
        let remove = bool_param(p, "remove") == Some(true);
        let removed = if remove {
            lock(&t.store).remove_function(&name)
        } else {
            let bp = FunctionBreakpoint {
                name: name.clone(),
                condition: str_param(p, "condition").map(str::to_owned),
                hit_condition: str_param(p, "hitCondition").map(str::to_owned),
                binding: Binding::default(),
            };
            if !lock(&t.store).set_function(bp) {
                return Err(too_many());
            }
            false
        };
        if let Some(s) = &t.session {
            self.sync_functions(s, deadline).await?;
        }
        let mut details = {
            let store = lock(&t.store);
            let bp = store
                .functions
                .iter()
                .find(|b| b.name == name)
                .map(|b| b.to_json(t.queued()));
            json!({"breakpoint": bp, "functionBreakpoints": store.functions.len()})
        };
        if remove {
            details["removed"] = json!(removed);
        }
        Ok(t.answer(details))
    }

    /// `breakpoint_exceptions`: which exceptions stop the program. Without `filters`, the filters the adapter
    /// offers and those in force; with them, exactly those (an empty list: none stop).
    pub(super) async fn breakpoint_exceptions(
        &self,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let t = self.target(p)?;
        let live = t.session.clone();
        let caps = live.as_ref().map(|s| lock(&s.capabilities).clone());
        let offered_list = caps.as_ref().map(offered);
        if let Some(raw) = p.get("filters") {
            let ids: Vec<String> = raw
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            let conditions = p.get("conditions").and_then(Value::as_object);
            if let (Some(offered), Some(s)) = (&offered_list, &live) {
                let known = filter_ids(offered);
                if let Some(bad) = ids.iter().find(|id| !known.contains(&id.as_str())) {
                    return Err(ScriptError::new(
                        "E_INVALID_PARAMS",
                        format!(
                            "filters: {} offers no exception filter `{bad}`; it offers {}",
                            s.adapter.name(),
                            known.join(", ")
                        ),
                    )
                    .hint(
                        "Call breakpoint_exceptions without filters to see what the adapter offers",
                    )
                    .details(json!({"field": "filters", "offered": known})));
                }
                if conditions.is_some_and(|c| !c.is_empty())
                    && !caps
                        .as_ref()
                        .is_some_and(|c| supports(c, "supportsExceptionFilterOptions"))
                {
                    return Err(unsupported(
                        s,
                        "conditions on exception filters",
                        "supportsExceptionFilterOptions",
                    ));
                }
            }
            let chosen: Vec<ExceptionFilter> = ids
                .iter()
                .map(|id| ExceptionFilter {
                    id: id.clone(),
                    condition: conditions
                        .and_then(|c| c.get(id))
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                })
                .collect();
            lock(&t.store).exceptions = Some(chosen);
        }
        let chosen = lock(&t.store).exceptions.clone();
        let mut answer =
            json!({"custom": chosen.is_some(), "sessionId": t.id(), "queued": t.queued()});
        if let (Some(s), Some(caps)) = (&live, &caps) {
            let args = exception_args(&chosen, caps);
            if p.get("filters").is_some() {
                let body = s
                    .client
                    .request("setExceptionBreakpoints", args.clone(), left(deadline))
                    .await
                    .map_err(dap_err)?;
                if let Some(bps) = body.get("breakpoints") {
                    answer["breakpoints"] = bps.clone();
                }
            }
            answer["adapter"] = json!(s.adapter.name());
            answer["offered"] = json!(offered(caps));
            answer["active"] = args["filters"].clone();
            if let Some(o) = args.get("filterOptions") {
                answer["activeWithConditions"] = o.clone();
            }
        } else {
            answer["pending"] = json!(true);
            answer["active"] = match &chosen {
                Some(list) => json!(list.iter().map(|f| &f.id).collect::<Vec<_>>()),
                None => json!("the adapter's defaults"),
            };
            answer["message"] = json!(
                "no session: the choice is sent when one starts (filters the adapter does not offer are skipped); \
                 debugpy offers raised, uncaught, userUnhandled; lldb-dap cpp_throw, cpp_catch, objc_throw, objc_catch"
            );
        }
        Ok(answer)
    }

    /// `breakpoint_set_data`: stop when a variable is written (or read), where the adapter supports it.
    pub(super) async fn breakpoint_set_data(
        &self,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let s = self.session(p)?;
        if !supports(&lock(&s.capabilities), "supportsDataBreakpoints") {
            return Err(unsupported(
                &s,
                "data breakpoints",
                "supportsDataBreakpoints",
            ));
        }
        if let Some(id) = str_param(p, "dataId")
            && bool_param(p, "remove") == Some(true)
        {
            let removed = lock(&s.breakpoints).remove_data(id);
            self.sync_data(&s, deadline).await?;
            return Ok(
                json!({"success": true, "sessionId": s.id, "details": {"removed": removed, "dataId": id}}),
            );
        }
        s.paused_thread()?;
        let name = str_param(p, "name").unwrap_or_default().to_owned();
        let reference = match u64_param(p, "variablesReference") {
            Some(r) => {
                s.check_ref(r as i64)?;
                r as i64
            }
            None => self.scope_holding(&s, &name, deadline).await?,
        };
        let info = s
            .client
            .request(
                "dataBreakpointInfo",
                json!({"variablesReference": reference, "name": name}),
                left(deadline),
            )
            .await
            .map_err(dap_err)?;
        let description = info
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let Some(data_id) = info.get("dataId").and_then(Value::as_str) else {
            return Err(ScriptError::new(
                "E_DATA_BREAKPOINT_UNAVAILABLE",
                format!("{} cannot watch `{name}`: {description}", s.adapter.name()),
            )
            .hint("Watch a variable of the paused frame (a local or a field), not a computed value")
            .details(json!({"name": name, "variablesReference": reference})));
        };
        let access_types = info.get("accessTypes").cloned().unwrap_or(Value::Null);
        let access_type = str_param(p, "accessType").map(str::to_owned);
        if let (Some(a), Some(types)) = (&access_type, access_types.as_array())
            && !types.iter().any(|t| t.as_str() == Some(a))
        {
            return Err(ScriptError::new(
                "E_INVALID_PARAMS",
                format!("accessType: `{name}` can be watched for {access_types} only, not `{a}`"),
            )
            .details(json!({"field": "accessType", "accessTypes": access_types})));
        }
        let bp = DataBreakpoint {
            data_id: data_id.to_owned(),
            description,
            access_type,
            condition: str_param(p, "condition").map(str::to_owned),
            hit_condition: str_param(p, "hitCondition").map(str::to_owned),
            binding: Binding::default(),
        };
        if !lock(&s.breakpoints).set_data(bp) {
            return Err(too_many());
        }
        self.sync_data(&s, deadline).await?;
        let bp = lock(&s.breakpoints)
            .data
            .iter()
            .find(|b| b.data_id == data_id)
            .map(DataBreakpoint::to_json);
        Ok(
            json!({"success": true, "sessionId": s.id, "details": {"breakpoint": bp, "accessTypes": access_types,
            "canPersist": info.get("canPersist")}}),
        )
    }

    /// The variables reference of the top frame's scope that has a variable `name`.
    async fn scope_holding(
        &self,
        s: &Arc<Session>,
        name: &str,
        deadline: Instant,
    ) -> Result<i64, ScriptError> {
        let frame = self.top_frame(s, deadline).await?;
        let scopes = self.scopes_of(s, frame, deadline).await?;
        for scope in scopes {
            if scope.get("expensive").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            let Some(r) = scope.get("variablesReference").and_then(Value::as_i64) else {
                continue;
            };
            let vars = self.variables(s, r, json!({}), deadline).await?;
            if vars
                .iter()
                .any(|v| v.get("name").and_then(Value::as_str) == Some(name))
            {
                return Ok(r);
            }
        }
        Err(ScriptError::new(
            "E_INVALID_PARAMS",
            format!("name: no variable `{name}` in the paused frame's scopes"),
        )
        .hint("Pass a name debug_list_variables shows, or variablesReference of the container that holds it")
        .details(json!({"field": "name"})))
    }

    /// At a session's start, after the line breakpoints: function breakpoints, then the exception filters
    /// chosen (or the adapter's defaults). Data breakpoints need a paused program, so none exist yet.
    pub(super) async fn configure_breakpoints(
        &self,
        s: &Session,
        caps: &Value,
        deadline: Instant,
    ) -> Result<(), ScriptError> {
        let has_functions = !lock(&s.breakpoints).functions.is_empty();
        if has_functions {
            if supports(caps, "supportsFunctionBreakpoints") {
                self.sync_functions(s, deadline).await?;
            } else {
                let note = format!("{} does not support function breakpoints", s.adapter.name());
                for b in &mut lock(&s.breakpoints).functions {
                    b.binding.message = Some(note.clone());
                }
            }
        }
        let args = exception_args(&lock(&s.breakpoints).exceptions, caps);
        s.client
            .request("setExceptionBreakpoints", args, left(deadline))
            .await
            .map_err(dap_err)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_list_is_resent_whole_and_the_bound_holds() {
        let mut s = Store::default();
        let p = Path::new("/a.py");
        assert!(s.set(p, Breakpoint::new(5)));
        assert!(s.set(p, Breakpoint::new(2)));
        assert_eq!(s.request(p)["lines"], json!([2, 5]));
        s.apply(
            p,
            &json!({"breakpoints": [{"verified": true, "line": 3, "id": 1}, {"verified": false}]}),
        );
        assert_eq!(s.get(p, 2).and_then(|b| b.bound_line), Some(3));
        for line in 100..(100 + MAX_BREAKPOINTS as u64) {
            s.set(p, Breakpoint::new(line));
        }
        assert_eq!(s.count(), MAX_BREAKPOINTS);
        assert!(!s.set(p, Breakpoint::new(99_999)));
        // A refused one leaves no trace: each new file it named was kept (and its empty list sent at every
        // session's start).
        assert!(!s.set(Path::new("/b.py"), Breakpoint::new(1)));
        assert_eq!(s.files(), vec![p.to_path_buf()]);
        assert!(
            s.set(p, Breakpoint::new(5)),
            "replacing an existing one is always allowed"
        );
    }

    #[test]
    fn exception_filters_default_or_chosen_and_offered_only() {
        let caps = json!({"exceptionBreakpointFilters": [
            {"filter": "raised", "default": false}, {"filter": "uncaught", "default": true}]});
        assert_eq!(
            exception_args(&None, &caps),
            json!({"filters": ["uncaught"]})
        );
        let chosen = Some(vec![
            ExceptionFilter {
                id: "raised".into(),
                condition: None,
            },
            ExceptionFilter {
                id: "cpp_throw".into(),
                condition: None,
            },
            ExceptionFilter {
                id: "uncaught".into(),
                condition: Some("x".into()),
            },
        ]);
        assert_eq!(
            exception_args(&chosen, &caps),
            json!({"filters": ["raised"], "filterOptions": [{"filterId": "uncaught", "condition": "x"}]})
        );
        assert_eq!(exception_args(&Some(vec![]), &caps), json!({"filters": []}));
    }
}
