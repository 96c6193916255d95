//! The tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`): a tool call that goes on after its request
//! was answered with a task id, polled with `tasks/get`, given input with `tasks/update`, stopped with
//! `tasks/cancel`. (`tasks/result` and `tasks/list` were removed from the extension; rmcp answers them -32601.)
//!
//! Bounded, since any client can create tasks: at most `max_tasks` of them (running or finished) per process,
//! at most `max_result_bytes` of finished results kept in all, at most `max_input_bytes` of answers held per
//! task, and each task is forgotten `ttl` after its creation (cancelled first if it still runs). Expiry is swept
//! on every access, and every 30 s by the server's sweeper (`sweeper.rs`), so an idle server holds none.

use super::client_link::missing_capability;
use super::convert;
use super::handler::Shared;
use crate::error::{ErrorCode, ToolError};
use crate::tool::{InputRequired, Inputs, Outcome, TaskSupport, ToolSpec};
use futures::future::BoxFuture;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, CreateTaskResult, DetailedTask,
    InputRequests, JsonObject, ServerCapabilities, TASKS_EXTENSION_ID, Task, TaskPayload,
    TaskStatus,
};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// One round of a task's tool call: the handler run with the inputs gathered so far.
pub(crate) type Round =
    Arc<dyn Fn(Inputs) -> BoxFuture<'static, Result<Outcome, ToolError>> + Send + Sync>;

/// Declares the extension when at least one tool can run as a task; a server without such tools keeps the
/// `tasks/*` methods unimplemented (-32601).
pub(crate) fn advertise<'a>(
    capabilities: &mut ServerCapabilities,
    tools: impl IntoIterator<Item = &'a ToolSpec>,
) {
    if tools
        .into_iter()
        .any(|t| t.task_support != TaskSupport::Never)
    {
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(TASKS_EXTENSION_ID.to_owned(), JsonObject::new());
    }
}

/// Whether this call runs through the task path: only when the tool allows it and the request (or its session)
/// declared the extension. A tool that requires tasks refuses other clients with -32021, naming the extension.
pub(crate) fn runs_as_task(
    support: TaskSupport,
    declared: impl FnOnce() -> bool,
) -> Result<bool, McpError> {
    if support == TaskSupport::Never {
        // Most calls: no look at the client's capabilities, which rmcp clones on every access.
        return Ok(false);
    }
    let declared = declared();
    match (support, declared) {
        (TaskSupport::Required, false) => Err(McpError::missing_required_client_capability(
            ClientCapabilities::builder().enable_tasks().build(),
        )),
        (_, declared) => Ok(declared),
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct TaskLimits {
    pub max_tasks: usize,
    pub max_result_bytes: usize,
    pub max_input_bytes: usize,
    pub ttl: Duration,
    pub poll_interval: Duration,
}

impl Default for TaskLimits {
    fn default() -> Self {
        Self {
            max_tasks: 256,
            max_result_bytes: 32 << 20,
            max_input_bytes: 1 << 20,
            // Longer than any tool's default timeout, so a task never expires while its call may still finish.
            ttl: Duration::from_secs(300),
            poll_interval: Duration::from_millis(500),
        }
    }
}

enum State {
    Working,
    InputRequired {
        pending: InputRequests,
        answered: BTreeMap<String, Value>,
        answered_bytes: usize,
        state: Option<Value>,
        resume: Option<oneshot::Sender<Inputs>>,
    },
    Finished(TaskPayload),
}

struct Entry {
    task: Task,
    state: State,
    expires: Instant,
    cancel: CancellationToken,
    result_bytes: usize,
}

impl Entry {
    fn detailed(&self) -> DetailedTask {
        let payload = match &self.state {
            State::Working => TaskPayload::Working,
            State::InputRequired { pending, .. } => TaskPayload::InputRequired {
                input_requests: pending.clone(),
            },
            State::Finished(payload) => payload.clone(),
        };
        DetailedTask::new(self.task.clone(), payload)
    }

    fn touch(&mut self) {
        self.task.last_updated_at = rmcp::task_manager::current_timestamp();
    }
}

#[derive(Default)]
struct Entries {
    map: HashMap<String, Entry>,
    result_bytes: usize,
}

impl Entries {
    fn sweep(&mut self, now: Instant) {
        let mut freed = 0;
        self.map.retain(|_, entry| {
            if entry.expires > now {
                return true;
            }
            entry.cancel.cancel();
            freed += entry.result_bytes;
            false
        });
        self.result_bytes -= freed;
    }

    /// Whether a new task would fit under `max`, counting the finished tasks [`Self::make_room`] may forget;
    /// nothing is forgotten (the call may end at once and never take a place).
    fn has_room(&self, max: usize) -> bool {
        self.map.len() < max || self.oldest_finished().is_some()
    }

    /// Whether a new task fits under `max`, after forgetting the oldest finished task if need be: finished
    /// ones waited out their time-to-live before, so one client's 256 quick calls kept every other client
    /// from starting a task for 5 minutes. A task still working is never forgotten.
    fn make_room(&mut self, max: usize) -> bool {
        if self.map.len() < max {
            return true;
        }
        let oldest = self.oldest_finished();
        let Some(entry) = oldest.and_then(|id| self.map.remove(&id)) else {
            return false;
        };
        self.result_bytes -= entry.result_bytes;
        self.map.len() < max
    }

    /// The finished (or cancelled) task created first: every task lives as long, so it expires first.
    fn oldest_finished(&self) -> Option<String> {
        self.map
            .iter()
            .filter(|(_, entry)| matches!(entry.state, State::Finished(_)))
            .min_by_key(|(_, entry)| entry.expires)
            .map(|(id, _)| id.clone())
    }
}

/// Every task of the process.
pub(crate) struct TaskStore {
    limits: TaskLimits,
    entries: Mutex<Entries>,
}

impl TaskStore {
    pub(crate) fn new(limits: TaskLimits) -> Self {
        Self {
            limits,
            entries: Mutex::default(),
        }
    }

    /// Forgets expired tasks and cancels their work (the server's [`super::sweeper`] calls it while nobody
    /// asks about them).
    pub(crate) fn sweep_expired(&self) {
        drop(self.lock());
    }

    fn lock(&self) -> Result<MutexGuard<'_, Entries>, McpError> {
        let mut entries = self
            .entries
            .lock()
            .map_err(|_| McpError::internal_error("the task store is poisoned", None))?;
        entries.sweep(Instant::now());
        Ok(entries)
    }

    fn busy(&self) -> ToolError {
        ToolError::busy(format!(
            "{} tasks are running already, the most this server keeps",
            self.limits.max_tasks
        ))
        .with_hint("every one of them is still running: wait for some to finish or cancel some, then call again")
        .with_details(serde_json::json!({ "max_tasks": self.limits.max_tasks }))
    }

    fn is_full(&self) -> Result<bool, McpError> {
        Ok(!self.lock()?.has_room(self.limits.max_tasks))
    }

    /// Registers a running task; the error is the result to answer instead when the store is full.
    pub(crate) fn create(
        &self,
        cancel: CancellationToken,
    ) -> Result<Result<Task, ToolError>, McpError> {
        let mut entries = self.lock()?;
        if !entries.make_room(self.limits.max_tasks) {
            return Ok(Err(self.busy()));
        }
        let id = format!("{:032x}", rand::random::<u128>());
        let now = rmcp::task_manager::current_timestamp();
        let ttl_ms = u64::try_from(self.limits.ttl.as_millis()).unwrap_or(u64::MAX);
        let poll_ms = u64::try_from(self.limits.poll_interval.as_millis()).unwrap_or(u64::MAX);
        let task = Task::new(id.clone(), TaskStatus::Working, now.clone(), now)
            .with_ttl_ms(ttl_ms)
            .with_poll_interval_ms(poll_ms);
        entries.map.insert(
            id,
            Entry {
                task: task.clone(),
                state: State::Working,
                expires: Instant::now() + self.limits.ttl,
                cancel,
                result_bytes: 0,
            },
        );
        Ok(Ok(task))
    }

    pub(crate) fn get(&self, id: &str) -> Result<DetailedTask, McpError> {
        let entries = self.lock()?;
        let entry = entries.map.get(id).ok_or_else(|| unknown(id))?;
        Ok(entry.detailed())
    }

    /// Records answers; once every pending request is answered the task runs its next round. Answers to keys
    /// that are not pending are ignored, as the spec says.
    pub(crate) fn update(
        &self,
        id: &str,
        responses: BTreeMap<String, Value>,
    ) -> Result<(), McpError> {
        let max_input_bytes = self.limits.max_input_bytes;
        let mut entries = self.lock()?;
        let entry = entries.map.get_mut(id).ok_or_else(|| unknown(id))?;
        let State::InputRequired {
            pending,
            answered,
            answered_bytes,
            state,
            resume,
        } = &mut entry.state
        else {
            return Ok(());
        };
        let mut accepted = Vec::new();
        let mut bytes = *answered_bytes;
        for (key, value) in responses {
            if pending.contains_key(&key) {
                bytes += key.len() + value.to_string().len();
                accepted.push((key, value));
            }
        }
        if bytes > max_input_bytes {
            return Err(McpError::invalid_params(
                format!(
                    "inputResponses: the answers to task {id} would hold {bytes} bytes, more than the limit of \
                     {max_input_bytes}; nothing was recorded"
                ),
                Some(
                    serde_json::json!({ "field": "inputResponses", "limit_bytes": max_input_bytes }),
                ),
            ));
        }
        *answered_bytes = bytes;
        for (key, value) in accepted {
            pending.remove(&key);
            answered.insert(key, value);
        }
        if pending.is_empty()
            && let Some(resume) = resume.take()
        {
            let inputs = Inputs {
                responses: std::mem::take(answered),
                state: state.take(),
            };
            // A driver that is gone was cancelled; the task's state says so already.
            let _ = resume.send(inputs);
            entry.state = State::Working;
        }
        entry.touch();
        Ok(())
    }

    /// Cancelling a finished task is a no-op, as the spec says: the acknowledgement is the same.
    pub(crate) fn cancel(&self, id: &str) -> Result<(), McpError> {
        let mut entries = self.lock()?;
        let entry = entries.map.get_mut(id).ok_or_else(|| unknown(id))?;
        if !matches!(entry.state, State::Finished(_)) {
            entry.cancel.cancel();
            entry.state = State::Finished(TaskPayload::Cancelled);
            entry.touch();
        }
        Ok(())
    }

    /// Parks the task until every request is answered; `None` when the task is gone or already settled.
    fn wait_for_input(
        &self,
        id: &str,
        pending: InputRequests,
        state: Option<Value>,
    ) -> Option<oneshot::Receiver<Inputs>> {
        let mut entries = self.lock().ok()?;
        let entry = entries.map.get_mut(id)?;
        if matches!(entry.state, State::Finished(_)) {
            return None;
        }
        let (resume, resumed) = oneshot::channel();
        entry.state = State::InputRequired {
            pending,
            answered: BTreeMap::new(),
            answered_bytes: 0,
            state,
            resume: Some(resume),
        };
        entry.touch();
        Some(resumed)
    }

    /// Stores a finished task's payload unless it was cancelled or expired meanwhile. A result larger than the
    /// room left for results is replaced by an `E_TOO_LARGE` error result that says so.
    fn finish(&self, id: &str, payload: TaskPayload) {
        let Ok(mut entries) = self.lock() else { return };
        let room = self
            .limits
            .max_result_bytes
            .saturating_sub(entries.result_bytes);
        let mut bytes = payload_bytes(&payload);
        let payload = if bytes > room {
            let error = ToolError::too_large(format!(
                "the result of this task is {bytes} bytes; the server keeps at most {} bytes of task results",
                self.limits.max_result_bytes
            ))
            .with_hint("ask for less, or call the tool without the tasks extension")
            .with_details(serde_json::json!({ "limit_bytes": self.limits.max_result_bytes }));
            let payload = completed(&convert::failure(&error));
            bytes = payload_bytes(&payload);
            payload
        } else {
            payload
        };
        let Some(entry) = entries.map.get_mut(id) else {
            return;
        };
        if matches!(entry.state, State::Finished(_)) {
            return;
        }
        entry.state = State::Finished(payload);
        entry.result_bytes = bytes;
        entry.touch();
        entries.result_bytes += bytes;
    }
}

/// Counts a task's call once its handler has settled, as `run_tool` counts a plain call.
fn record(shared: &Shared, name: &str, outcome: &Result<Outcome, ToolError>, started: Instant) {
    shared.metrics.record_call(
        shared.mount.label_of(name),
        name,
        outcome.as_ref().err().map(ToolError::code),
        false,
        started.elapsed(),
    );
}

fn unknown(id: &str) -> McpError {
    McpError::invalid_params(
        format!("taskId: no task {id} (unknown, or forgotten after its TTL)"),
        Some(serde_json::json!({ "field": "taskId" })),
    )
}

fn payload_bytes(payload: &TaskPayload) -> usize {
    match payload {
        TaskPayload::Completed { result } => Value::Object(result.clone()).to_string().len(),
        TaskPayload::Failed { error } => Value::Object(error.clone()).to_string().len(),
        _ => 0,
    }
}

fn object(value: Result<Value, serde_json::Error>) -> JsonObject {
    match value {
        Ok(Value::Object(object)) => object,
        _ => JsonObject::new(),
    }
}

fn completed(result: &CallToolResult) -> TaskPayload {
    let mut result = object(serde_json::to_value(result));
    // The task's result is the tool result alone; its resultType belongs to the tasks/get envelope.
    result.remove("resultType");
    TaskPayload::Completed { result }
}

fn failed(error: &McpError) -> TaskPayload {
    TaskPayload::Failed {
        error: object(serde_json::to_value(error)),
    }
}

/// How a round ended, in wire terms.
enum Settled {
    Done(TaskPayload),
    Input(InputRequired),
}

fn settle(shared: &Shared, outcome: Result<Outcome, ToolError>, cap: usize) -> Settled {
    match outcome {
        Ok(Outcome::Done(output)) => Settled::Done(completed(&super::results::cap(
            &shared.results,
            convert::success(output),
            cap,
        ))),
        Ok(Outcome::InputRequired(input)) => Settled::Input(input),
        Err(error) if error.code() == ErrorCode::MissingClientCapability => {
            Settled::Done(failed(&missing_capability(&error)))
        }
        Err(error) => Settled::Done(completed(&convert::failure(&error))),
    }
}

fn with_timeout(
    name: &str,
    timeout: Duration,
    round: BoxFuture<'static, Result<Outcome, ToolError>>,
) -> BoxFuture<'static, Result<Outcome, ToolError>> {
    let name = name.to_owned();
    Box::pin(async move {
        tokio::time::timeout(timeout, round)
            .await
            .unwrap_or_else(|_| Err(super::handler::timed_out(&name, timeout)))
    })
}

/// Runs a call of a task-capable tool for a client that declared the extension. The handler is polled once in
/// the request: if it answers (or asks for input) without waiting, that is the response; otherwise the call
/// becomes a task that is registered before its id is returned, so an immediate `tasks/get` finds it.
/// How a task is stopped: its token, and whether its handler watches it (then it gets
/// [`CANCEL_GRACE`](crate::tool::CANCEL_GRACE) to clean up before it is aborted).
pub(crate) struct Cancel {
    pub token: CancellationToken,
    pub watched: Arc<std::sync::atomic::AtomicBool>,
}

pub(crate) async fn call(
    shared: Arc<Shared>,
    name: String,
    timeout: Duration,
    cap: usize,
    cancel: Cancel,
    round: Round,
    inputs: Inputs,
) -> Result<CallToolResponse, McpError> {
    let Cancel {
        token: cancel,
        watched,
    } = cancel;
    // A full store refuses before the handler starts, so a refused call has done nothing.
    if shared.tasks.is_full()? {
        cancel.cancel();
        return Ok(convert::failure(&shared.tasks.busy()).into());
    }
    let started = Instant::now();
    let mut first = with_timeout(&name, timeout, round(inputs));
    let outcome = match futures::poll!(first.as_mut()) {
        Poll::Ready(outcome) => Some(outcome),
        Poll::Pending => None,
    };
    if let Some(outcome) = outcome {
        record(&shared, &name, &outcome, started);
        return match outcome {
            Ok(Outcome::Done(output)) => {
                Ok(super::results::cap(&shared.results, convert::success(output), cap).into())
            }
            Ok(Outcome::InputRequired(input)) => Ok(shared.seal.input_required(input)?.into()),
            Err(error) if error.code() == ErrorCode::MissingClientCapability => {
                Err(missing_capability(&error))
            }
            Err(error) => Ok(convert::failure(&error).into()),
        };
    }
    let task = match shared.tasks.create(cancel.clone())? {
        Ok(task) => task,
        Err(busy) => {
            cancel.cancel();
            return Ok(convert::failure(&busy).into());
        }
    };
    let id = task.task_id.clone();
    tokio::spawn(drive(
        shared, name, timeout, cap, id, cancel, watched, round, first, started,
    ));
    Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
}

#[allow(clippy::too_many_arguments)]
async fn drive(
    shared: Arc<Shared>,
    name: String,
    timeout: Duration,
    cap: usize,
    id: String,
    cancel: CancellationToken,
    watched: Arc<std::sync::atomic::AtomicBool>,
    round: Round,
    first: BoxFuture<'static, Result<Outcome, ToolError>>,
    started: Instant,
) {
    let mut current = first;
    loop {
        // A panicking handler must not take the task with it: it ends as `failed`, as a protocol error does.
        let mut running = tokio::spawn(current);
        let outcome = tokio::select! {
            joined = &mut running => joined,
            () = cancel.cancelled() => {
                // A handler that watches its cancellation may be sending its live system a stop: let it.
                if watched.load(std::sync::atomic::Ordering::Acquire) {
                    let _ = tokio::time::timeout(crate::tool::CANCEL_GRACE, &mut running).await;
                }
                running.abort();
                return;
            }
        };
        let settled = match outcome {
            Ok(outcome) => {
                record(&shared, &name, &outcome, started);
                settle(&shared, outcome, cap)
            }
            Err(join) => Settled::Done(failed(&McpError::internal_error(
                format!("`{name}` failed inside the server: {join}"),
                None,
            ))),
        };
        let input = match settled {
            Settled::Done(payload) => {
                shared.tasks.finish(&id, payload);
                return;
            }
            Settled::Input(input) => input,
        };
        let pending = match shared.seal.input_required(InputRequired {
            requests: input.requests,
            state: None,
        }) {
            Ok(result) => result.input_requests.unwrap_or_default(),
            Err(error) => {
                shared.tasks.finish(&id, failed(&error));
                return;
            }
        };
        let Some(resumed) = shared.tasks.wait_for_input(&id, pending, input.state) else {
            return;
        };
        let inputs = tokio::select! {
            inputs = resumed => match inputs {
                Ok(inputs) => inputs,
                Err(_) => return,
            },
            () = cancel.cancelled() => return,
        };
        current = with_timeout(&name, timeout, round(inputs));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn store(max_tasks: usize, max_result_bytes: usize, max_input_bytes: usize) -> TaskStore {
        TaskStore::new(TaskLimits {
            max_tasks,
            max_result_bytes,
            max_input_bytes,
            ttl: Duration::from_secs(60),
            poll_interval: Duration::from_millis(100),
        })
    }

    fn text_result(text: &str) -> TaskPayload {
        completed(&CallToolResult::success(vec![
            rmcp::model::ContentBlock::text(text.to_owned()),
        ]))
    }

    #[test]
    fn the_task_cap_refuses_one_more_with_e_busy() {
        let tasks = store(2, 1 << 20, 1 << 10);
        tasks.create(CancellationToken::new()).unwrap().unwrap();
        tasks.create(CancellationToken::new()).unwrap().unwrap();
        assert!(tasks.is_full().unwrap());
        let busy = tasks.create(CancellationToken::new()).unwrap().unwrap_err();
        assert_eq!(busy.code(), ErrorCode::Busy);
        assert_eq!(busy.details()["max_tasks"], 2);
        assert_eq!(tasks.lock().unwrap().map.len(), 2, "nothing was added");
    }

    /// Finished and cancelled tasks make room for new ones (oldest first) instead of holding their slot for
    /// their whole time-to-live; working ones never do.
    #[test]
    fn a_full_store_forgets_its_oldest_finished_task_for_a_new_one() {
        let tasks = store(3, 1 << 20, 1 << 10);
        let done = tasks.create(CancellationToken::new()).unwrap().unwrap();
        tasks.finish(&done.task_id, text_result("first"));
        let cancelled = tasks.create(CancellationToken::new()).unwrap().unwrap();
        tasks.cancel(&cancelled.task_id).unwrap();
        let working = tasks.create(CancellationToken::new()).unwrap().unwrap();
        assert!(tasks.lock().unwrap().result_bytes > 0);
        assert!(!tasks.is_full().unwrap(), "finished tasks leave room");
        assert!(
            tasks.get(&done.task_id).is_ok(),
            "asking forgets nothing: the call may end at once and take no place"
        );
        tasks.create(CancellationToken::new()).unwrap().unwrap();
        assert!(
            tasks.get(&done.task_id).is_err(),
            "the oldest finished one went"
        );
        assert_eq!(
            tasks.lock().unwrap().result_bytes,
            0,
            "its result's bytes too"
        );
        assert!(
            tasks.get(&cancelled.task_id).is_ok(),
            "one went for one new task"
        );
        tasks.create(CancellationToken::new()).unwrap().unwrap();
        assert!(tasks.get(&cancelled.task_id).is_err());
        assert!(
            tasks.get(&working.task_id).is_ok(),
            "a working task is never forgotten"
        );
        let busy = tasks.create(CancellationToken::new()).unwrap().unwrap_err();
        assert_eq!(busy.code(), ErrorCode::Busy);
    }

    #[test]
    fn a_result_beyond_the_byte_cap_is_replaced_by_e_too_large() {
        let tasks = store(4, 400, 1 << 10);
        let small = tasks.create(CancellationToken::new()).unwrap().unwrap();
        tasks.finish(&small.task_id, text_result("ok"));
        let kept = tasks.lock().unwrap().result_bytes;
        assert!(kept > 0 && kept <= 400);

        let big = tasks.create(CancellationToken::new()).unwrap().unwrap();
        tasks.finish(&big.task_id, text_result(&"x".repeat(1000)));
        let detailed = tasks.get(&big.task_id).unwrap();
        let TaskPayload::Completed { result } = detailed.payload else {
            panic!("expected a completed task, got {detailed:?}")
        };
        assert_eq!(result["isError"], true);
        let error = &result["_meta"][crate::error::ERROR_META_KEY];
        assert_eq!(error["code"], "E_TOO_LARGE");
        assert_eq!(error["details"]["limit_bytes"], 400);
        assert!(tasks.lock().unwrap().result_bytes < 1000);
        let TaskPayload::Completed { result } = tasks.get(&small.task_id).unwrap().payload else {
            panic!("the small result must stay")
        };
        assert_eq!(result["content"][0]["text"], "ok");
    }

    #[test]
    fn answers_beyond_the_input_cap_are_refused_and_change_nothing() {
        let tasks = store(4, 1 << 20, 64);
        let task = tasks.create(CancellationToken::new()).unwrap().unwrap();
        let request: rmcp::model::InputRequest = serde_json::from_value(serde_json::json!({
            "method": "roots/list"
        }))
        .unwrap();
        let _resumed = tasks
            .wait_for_input(
                &task.task_id,
                BTreeMap::from([("k".to_owned(), request)]),
                None,
            )
            .unwrap();
        let answer = BTreeMap::from([(
            "k".to_owned(),
            serde_json::json!({"roots": "r".repeat(100)}),
        )]);
        let error = tasks.update(&task.task_id, answer).unwrap_err();
        assert!(error.message.contains("inputResponses") && error.message.contains("64"));
        let detailed = tasks.get(&task.task_id).unwrap();
        assert_eq!(
            detailed.status(),
            TaskStatus::InputRequired,
            "still waiting for k"
        );
    }

    #[test]
    fn a_task_is_kept_for_its_ttl() {
        let tasks = store(4, 1 << 20, 1 << 10);
        let task = tasks.create(CancellationToken::new()).unwrap().unwrap();
        assert!(tasks.get(&task.task_id).is_ok());
        assert_eq!(task.ttl_ms, Some(60_000));
    }

    #[test]
    fn a_task_past_its_ttl_is_forgotten_and_cancelled() {
        let tasks = TaskStore::new(TaskLimits {
            ttl: Duration::ZERO,
            ..TaskLimits::default()
        });
        let cancel = CancellationToken::new();
        let task = tasks.create(cancel.clone()).unwrap().unwrap();
        let error = tasks.get(&task.task_id).unwrap_err();
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(error.message.contains(&task.task_id));
        assert!(
            cancel.is_cancelled(),
            "a running task is stopped when forgotten"
        );
        assert!(tasks.lock().unwrap().map.is_empty());
    }
}
