//! The rmcp `ServerHandler` behind every bridge: dispatch, timeouts, cancellation, progress, resources and
//! subscriptions in both protocol eras.

use super::client_link::{
    PeerClient, SessionLogLevel, StateSeal, from_rmcp_level, missing_capability,
};
use super::convert;
use super::drain::{Drain, InFlight};
use super::inline::Called;
use super::metrics::Metrics;
use super::sessions::{self, SessionLimit, SessionSlot};
use crate::bridge::PromptOutcome;
use crate::error::ErrorCode;
use crate::error::ToolError;
use crate::mount::Mount;
use crate::tool::ctx::{Heartbeat, ProgressSink};
use crate::tool::{Inputs, Outcome, ToolCtx};
use futures::StreamExt;
use futures::future::BoxFuture;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, CustomRequest,
    CustomResult, GetPromptRequestParams, GetPromptResponse, GetPromptResult, GetTaskParams,
    GetTaskResult, Implementation, InitializeRequestParams, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, PromptsCapability, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, RequestMetaObject,
    ResourceContents, ResourceUpdatedNotificationParam, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::task::JoinHandle;

/// How many recent events the resource of an event stream shows.
const RESOURCE_EVENT_LIMIT: usize = 100;

/// Per-process settings every handler instance shares.
pub(crate) struct Shared {
    pub mount: Mount,
    /// `--tool-timeout` overrides, by the tool's position in the mount.
    pub timeouts: HashMap<usize, Duration>,
    /// Shared by the transports of one server (`--stdio --http`), so /metrics counts every call.
    pub metrics: Arc<Metrics>,
    pub seal: StateSeal,
    /// The tools in wire form, built once: schemas are shared, not rebuilt per request.
    pub tools: Arc<[Tool]>,
    pub drain: Arc<Drain>,
    pub tasks: super::tasks::TaskStore,
    /// The whole texts of results cut to their cap, read back with `resources/read`.
    pub results: super::results::ResultStore,
}

/// One handler per MCP session (legacy era) or per request (stateless era); state that must outlive a
/// request lives in `Shared`.
#[derive(Clone)]
pub(crate) struct McpHandler {
    shared: Arc<Shared>,
    session: Arc<SessionSubscriptions>,
    log_level: SessionLogLevel,
    /// Where legacy sessions are counted (HTTP); `None` on stdio, which has one session per process.
    session_limit: Option<Arc<SessionLimit>>,
    /// This session's place under `session_limit`, held until the handler (the session) goes.
    session_slot: Arc<OnceLock<SessionSlot>>,
}

/// `resources/subscribe` state of one legacy session.
#[derive(Default)]
struct SessionSubscriptions {
    uris: Arc<Mutex<HashSet<String>>>,
    forwarder: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for SessionSubscriptions {
    fn drop(&mut self) {
        if let Ok(mut slot) = self.forwarder.lock()
            && let Some(task) = slot.take()
        {
            task.abort();
        }
    }
}

impl McpHandler {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            session: Arc::new(SessionSubscriptions::default()),
            log_level: Arc::default(),
            session_limit: None,
            session_slot: Arc::default(),
        }
    }

    pub(crate) fn with_session_limit(mut self, limit: Arc<SessionLimit>) -> Self {
        self.session_limit = Some(limit);
        self
    }

    fn mount(&self) -> &Mount {
        &self.shared.mount
    }

    /// `tools/call`: [`begin_tool`](Self::begin_tool), then the handler awaited under its timeout, its
    /// cancellation and progress heartbeats.
    async fn run_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        match self.begin_tool(request, &context, &CallMeta::from_map(&context.meta))? {
            Begun::Answered(answer) => answer,
            Begun::Task(task) => task.await,
            Begun::Running(running) => running.run(&context.ct).await.into_response(),
        }
    }

    /// Everything `tools/call` does before its handler first has to wait: the tool looked up, the call
    /// counted in, its limits and context made and the handler called. Synchronous, so a caller that polls
    /// the handler once itself ([`Running::poll_first`]) answers a call that finishes at once without a
    /// timer, a heartbeat or a future of its own.
    ///
    /// `meta` is the call's `_meta` as read once ([`CallMeta`]); `context.meta` is not read again.
    pub(crate) fn begin_tool(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        meta: &CallMeta,
    ) -> Result<Begun, McpError> {
        // rmcp's handler gets a child of the token rmcp keeps for the request: the child is this call's alone.
        self.begin_tool_reporting(request, context, meta, None, CallToken::Request)
    }

    /// [`begin_tool`](Self::begin_tool), the call's progress sent to `progress` when given (the HTTP fast
    /// path queues it for the request's response itself), else through the request's peer when `_meta`
    /// carries a progress token.
    pub(crate) fn begin_tool_reporting(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        meta: &CallMeta,
        progress: Option<Arc<dyn ProgressSink>>,
        token: CallToken,
    ) -> Result<Begun, McpError> {
        let name = request.name;
        let Some(position) = self.mount().tool_position(&name) else {
            return Err(McpError::invalid_params(
                format!("tool not found: {name}"),
                None,
            ));
        };
        let tool = &self.mount().tools()[position];
        let Some(handler) = tool.spec.handler.clone() else {
            return Err(McpError::internal_error(
                format!("tool {name} has no handler"),
                None,
            ));
        };
        let Some(in_flight) = self.shared.drain.enter() else {
            return Ok(Begun::Answered(Ok(
                convert::failure(&shutting_down(&name)).into()
            )));
        };
        let timeout = self
            .shared
            .timeouts
            .get(&position)
            .copied()
            .unwrap_or(tool.spec.timeout);
        let as_task = super::tasks::runs_as_task(tool.spec.task_support, || {
            meta.client_capabilities(&context.peer)
                .is_some_and(|caps| caps.supports_tasks())
        })?;
        let cap = meta.cap.clone()?;
        let progress = progress.or_else(|| {
            meta.progress.clone().map(|token| {
                Arc::new(PeerProgress {
                    peer: context.peer.clone(),
                    token,
                }) as Arc<dyn ProgressSink>
            })
        });
        let inputs = self.inputs(request.input_responses, request.request_state.as_deref())?;
        let args = request
            .arguments
            .map(serde_json::Value::Object)
            .unwrap_or(serde_json::Value::Null);
        if as_task {
            // A task outlives its request: its cancellation is tasks/cancel, not the request's.
            let cancel = tokio_util::sync::CancellationToken::new();
            let client = self.client_link(context, meta);
            let round_cancel = cancel.clone();
            let watched = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let round_watch = watched.clone();
            let round: super::tasks::Round = Arc::new(move |inputs| {
                let ctx = ToolCtx::new(
                    progress.clone(),
                    round_cancel.clone(),
                    tokio::time::Instant::now(),
                )
                .with_client(client.clone(), inputs)
                .with_watch(round_watch.clone())
                .with_result_cap(cap);
                handler(args.clone(), ctx)
            });
            let shared = self.shared.clone();
            let task = super::tasks::Cancel {
                token: cancel,
                watched,
            };
            return Ok(Begun::Task(Box::pin(async move {
                // Counted in until the task is made and answered, as the call it stands for.
                let _in_flight = in_flight;
                super::tasks::call(shared, name.into_owned(), timeout, cap, task, round, inputs)
                    .await
            })));
        }
        // Not a child of the request's token: making and dropping a child locks the request's token and edits
        // its tree twice, for a call that mostly answers on its first poll. The request's cancellation reaches
        // it in `run`, where a waiting call waits for it, and a call answered or dropped unanswered cancels it
        // ([`CallCancel`]).
        let cancel = match token {
            CallToken::Request => context.ct.clone(),
            CallToken::Own => tokio_util::sync::CancellationToken::new(),
        };
        // One clock read for the call: its timeout, its first heartbeat and its duration all count from here.
        let begun = tokio::time::Instant::now();
        let ctx = ToolCtx::new(progress, cancel.clone(), begun)
            .with_client(self.client_link(context, meta), inputs)
            .with_result_cap(cap);
        let watched = ctx.watch();
        // Only a call whose request carries a progress token gets heartbeats.
        let beat = ctx.heartbeat();
        let call = if context.ct.is_cancelled() {
            // Cancelled before it started: nothing was started, so nothing needs stopping.
            Call::Settled(Err(cancelled(&name)), false)
        } else {
            // A panic while the handler builds its future is answered like one while it runs.
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(args, ctx))) {
                Ok(future) => Call::Running(future),
                Err(panic) => {
                    let panic = super::panic::message(panic);
                    Call::Settled(Err(internal_panic(&name, &panic)), true)
                }
            }
        };
        Ok(Begun::Running(Running {
            shared: self.shared.clone(),
            name,
            position,
            timeout,
            deadline: begun + timeout,
            begun,
            cap,
            cancel: CallCancel(cancel),
            watched,
            beat,
            in_flight,
            call,
        }))
    }

    /// The answers and verified state of a retried request (SEP-2322).
    fn inputs(
        &self,
        responses: Option<rmcp::model::InputResponses>,
        sealed_state: Option<&str>,
    ) -> Result<Inputs, McpError> {
        let state = sealed_state.map(|s| self.shared.seal.open(s)).transpose()?;
        Ok(Inputs {
            responses: responses.unwrap_or_default(),
            state,
        })
    }

    fn client_link(
        &self,
        context: &RequestContext<RoleServer>,
        meta: &CallMeta,
    ) -> Arc<PeerClient> {
        // Stateless requests carry their log level; legacy sessions set it once with logging/setLevel.
        let log_threshold = meta
            .log_level
            .map(from_rmcp_level)
            .or_else(|| self.log_level.lock().ok().and_then(|level| *level));
        Arc::new(PeerClient {
            peer: context.peer.clone(),
            declared: meta.capabilities.clone(),
            log_threshold,
        })
    }

    async fn read(&self, uri: &str) -> Result<ResourceContents, McpError> {
        if let Some(stream) = self.mount().stream_by_uri(uri) {
            let body = serde_json::json!({
                "stream": stream.name(),
                "description": stream.description(),
                "last_seq": stream.last_seq(),
                "events": stream.recent(RESOURCE_EVENT_LIMIT),
                "hint": "call poll_events with `since` for events after a cursor",
            });
            return Ok(ResourceContents::TextResourceContents {
                uri: uri.to_owned(),
                mime_type: Some("application/json".into()),
                text: body.to_string(),
                meta: None,
            });
        }
        if self.mount().is_event_uri(uri)
            && let Err(unknown) = self.mount().hubs().resolve(uri)
        {
            return Err(McpError::resource_not_found(unknown.to_string(), None));
        }
        for provider in self.mount().providers() {
            match provider.read(uri).await {
                Ok(Some(body)) => return Ok(convert::resource_body(uri, body)),
                Ok(None) => {}
                Err(error) => return Err(crate::resource::read_error(&error)),
            }
        }
        Err(McpError::resource_not_found(
            format!("no resource at {uri}; call resources/list for what exists"),
            Some(serde_json::json!({ "uri": uri })),
        ))
    }

    fn ensure_forwarder(&self, peer: Peer<RoleServer>) {
        let Ok(mut slot) = self.session.forwarder.lock() else {
            return;
        };
        if slot.as_ref().is_some_and(|task| !task.is_finished()) {
            return;
        }
        let mut updates = self.mount().updates();
        let uris = self.session.uris.clone();
        *slot = Some(tokio::spawn(async move {
            while let Some(uri) = updates.next().await {
                let wanted = uris.lock().map(|set| set.contains(&uri)).unwrap_or(false);
                if wanted
                    && peer
                        .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                        .await
                        .is_err()
                {
                    return;
                }
            }
        }));
    }
}

/// Which token a plain call's handler sees, cancelled once the call is answered (or dropped unanswered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallToken {
    /// The request's own: its context was made for this call alone and nothing reads its token once the call
    /// is answered (rmcp's path, the stdio loop, the HTTP fast path). Saves making a token a call.
    Request,
    /// One of the call's own: the caller still reads the request's token after the answer (the legacy HTTP
    /// front tells a call the client cancelled by it).
    Own,
}

/// What [`McpHandler::begin_tool`] came to.
pub(crate) enum Begun {
    /// Answered without running the handler (the server is shutting down).
    Answered(Result<CallToolResponse, McpError>),
    /// A call made a task: answered once the task is made.
    Task(BoxFuture<'static, Result<CallToolResponse, McpError>>),
    /// The handler was called; its future has not been polled yet.
    Running(Running),
}

enum Call {
    Running(BoxFuture<'static, Result<Outcome, ToolError>>),
    /// Its outcome, and whether the handler panicked.
    Settled(Result<Outcome, ToolError>, bool),
    /// Taken: being polled, or already answered.
    Finished,
}

/// What [`Running::poll_first`] came to.
// Moved once, into its match: boxing the waiting call would cost an allocation on the path that needs none.
#[allow(clippy::large_enum_variant)]
pub(crate) enum FirstPoll {
    Answered(Called),
    /// The handler waits: the call, to be [`run`](Running::run).
    Waiting(Running),
}

/// What [`McpHandler::start_tool`] came to.
// Moved once, into its match: boxing the waiting call would cost an allocation on the path that needs none.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Started {
    /// Answered at once: refused, answered without running the handler, or finished on its first poll.
    Answered(Called),
    /// Made a task: answered once the task is made.
    Task(BoxFuture<'static, Result<CallToolResponse, McpError>>),
    /// The handler waits: the call, to be [`run`](Running::run).
    Waiting(Running),
}

impl McpHandler {
    /// `tools/call` begun ([`begin_tool`](Self::begin_tool)) and its handler polled once with the caller's
    /// context `cx` ([`Running::poll_first`]): what the stdio loop and the HTTP fast path do in the request's
    /// own frame, so a call that finishes at once builds no future, timer or heartbeat.
    pub(crate) fn start_tool(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        meta: &CallMeta,
        token: CallToken,
        cx: &mut std::task::Context<'_>,
    ) -> Started {
        self.start_tool_reporting(request, context, meta, None, token, cx)
    }

    /// [`start_tool`](Self::start_tool), progress sent as [`begin_tool_reporting`](Self::begin_tool_reporting)
    /// sends it.
    pub(crate) fn start_tool_reporting(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        meta: &CallMeta,
        progress: Option<Arc<dyn ProgressSink>>,
        token: CallToken,
        cx: &mut std::task::Context<'_>,
    ) -> Started {
        match self.begin_tool_reporting(request, context, meta, progress, token) {
            Err(error) => Started::Answered(Err(error).into()),
            Ok(Begun::Answered(answer)) => Started::Answered(answer.into()),
            Ok(Begun::Task(task)) => Started::Task(task),
            Ok(Begun::Running(running)) => match running.poll_first(cx) {
                FirstPoll::Answered(called) => Started::Answered(called),
                FirstPoll::Waiting(running) => Started::Waiting(running),
            },
        }
    }
}

/// A plain tool call whose handler was called: polled once by the caller ([`poll_first`](Self::poll_first))
/// and finished at once when ready, else awaited under its timeout and cancellation ([`run`](Self::run)).
pub(crate) struct Running {
    shared: Arc<Shared>,
    name: Cow<'static, str>,
    position: usize,
    timeout: Duration,
    /// The timeout counts from the call's start, not from when it was first found waiting.
    deadline: tokio::time::Instant,
    begun: tokio::time::Instant,
    cap: usize,
    cancel: CallCancel,
    watched: Arc<std::sync::atomic::AtomicBool>,
    beat: Option<Heartbeat>,
    in_flight: InFlight,
    call: Call,
}

/// A call's own cancellation token ([`McpHandler::begin_tool`]), cancelled when the call is answered or
/// dropped unanswered (its request gone), as a child of the request's token was when the request's was.
struct CallCancel(tokio_util::sync::CancellationToken);

impl Drop for CallCancel {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

impl Running {
    /// Polls the handler once with the caller's context: its answer when it finished (or had finished before
    /// it started: cancelled, or panicked while called), else the call back, to be [`run`](Self::run).
    pub(crate) fn poll_first(mut self, cx: &mut std::task::Context<'_>) -> FirstPoll {
        use std::task::Poll;
        let (outcome, panicked) = match std::mem::replace(&mut self.call, Call::Finished) {
            Call::Settled(outcome, panicked) => (outcome, panicked),
            Call::Finished => return FirstPoll::Waiting(self),
            Call::Running(mut future) => {
                let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    future.as_mut().poll(cx)
                }));
                match polled {
                    Ok(Poll::Ready(outcome)) => (outcome, false),
                    Ok(Poll::Pending) => {
                        self.call = Call::Running(future);
                        return FirstPoll::Waiting(self);
                    }
                    Err(panic) => {
                        let panic = super::panic::message(panic);
                        (Err(internal_panic(&self.name, &panic)), true)
                    }
                }
            }
        };
        FirstPoll::Answered(self.finish(outcome, panicked))
    }

    /// Awaits the handler under its timeout, the request's cancellation `ct` and progress heartbeats.
    pub(crate) async fn run(mut self, ct: &tokio_util::sync::CancellationToken) -> Called {
        let future = match std::mem::replace(&mut self.call, Call::Finished) {
            Call::Running(future) => future,
            Call::Settled(outcome, panicked) => return self.finish(outcome, panicked),
            // Not reached: a call is run only while its handler has not finished.
            Call::Finished => {
                let error = cancelled(&self.name);
                return self.finish(Err(error), false);
            }
        };
        let name = &self.name;
        let guarded = super::panic::caught(future);
        let timed = tokio::time::timeout_at(
            self.deadline,
            with_heartbeat(guarded, self.beat.clone(), self.begun),
        );
        tokio::pin!(timed);
        let mut panicked = false;
        // The request's cancellation is passed on to the call's own token first; then the handler is polled
        // once more (biased: it comes first) and can see its cancellation before the choice below is made, as
        // it could when its token was a child of `ct`, cancelled with it.
        let mut passed_on = false;
        let outcome = loop {
            tokio::select! {
                biased;
                result = &mut timed => break match result {
                    Ok(Ok(outcome)) => outcome,
                    Ok(Err(panic)) => {
                        panicked = true;
                        Err(internal_panic(name, &panic))
                    }
                    Err(_) => Err(timed_out(name, self.timeout)),
                },
                () = ct.cancelled(), if !passed_on => {
                    passed_on = true;
                    self.cancel.0.cancel();
                    if let Some(beat) = &self.beat {
                        beat.end();
                    }
                }
                () = std::future::ready(()), if passed_on => {
                    // Dropping the future here would cut a handler's clean-up short (a kill it is sending to
                    // a live system); one that watches its cancellation gets CANCEL_GRACE to finish. The
                    // answer is `cancelled` whatever it returns: the client has given up on the call.
                    if self.watched.load(std::sync::atomic::Ordering::Acquire)
                        && let Ok(Ok(Err(panic))) =
                            tokio::time::timeout(crate::tool::CANCEL_GRACE, &mut timed).await
                    {
                        panicked = true;
                        // Logged as any panic is; the client still hears `cancelled`.
                        let _ = internal_panic(name, &panic);
                    }
                    break Err(cancelled(name));
                }
            }
        };
        self.finish(outcome, panicked)
    }

    /// The handler settled: counted out, metered, and its outcome shaped as the answer.
    fn finish(self, outcome: Result<Outcome, ToolError>, panicked: bool) -> Called {
        let Running {
            shared,
            name,
            position,
            cap,
            cancel,
            in_flight,
            begun,
            ..
        } = self;
        // Whatever the handler left running (a link request, a wait) learns it is no longer wanted.
        drop(cancel);
        shared.drain.answered(in_flight);
        shared.metrics.record_call(
            shared.mount.bridge_label(&shared.mount.tools()[position]),
            &name,
            outcome.as_ref().err().map(ToolError::code),
            panicked,
            begun.elapsed(),
        );
        let response = match outcome {
            Ok(Outcome::Done(output)) => {
                let (result, structured) = convert::success_raw(output);
                let (result, structured) =
                    super::results::cap_raw(&shared.results, result, structured, cap);
                return Called {
                    response: Ok(result.into()),
                    structured,
                };
            }
            Ok(Outcome::InputRequired(input)) => shared.seal.input_required(input).map(Into::into),
            Err(error) if error.code() == ErrorCode::MissingClientCapability => {
                Err(missing_capability(&error))
            }
            Err(error) => {
                tracing::debug!(tool = %name, code = %error.code(), "tool call failed: {error}");
                Ok(convert::failure(&error).into())
            }
        };
        response.into()
    }
}

/// What a `tools/call` reads from its `_meta`, each field decoded once: rmcp's accessors decode from the map
/// on every call (the protocol version three times and the client's capabilities twice a call). Built from
/// rmcp's map ([`from_map`](Self::from_map)) with rmcp's accessors, so a malformed field reads as absent as
/// it does there, or straight from the request's text by the stdio wire when `_meta` holds only what a
/// client usually sends, each well formed (`wire::Lean`).
// Logging is deprecated by SEP-2577 but part of both eras we serve (client_link.rs).
#[allow(deprecated)]
#[derive(Debug, Clone)]
pub(crate) struct CallMeta {
    pub progress: Option<ProgressToken>,
    pub version: Option<ProtocolVersion>,
    pub capabilities: Option<ClientCapabilities>,
    pub log_level: Option<rmcp::model::LoggingLevel>,
    /// `requested_cap`'s answer: its error is returned where `begin_tool` asked for it before.
    pub cap: Result<usize, McpError>,
}

#[allow(deprecated)]
impl Default for CallMeta {
    fn default() -> Self {
        Self {
            progress: None,
            version: None,
            capabilities: None,
            log_level: None,
            cap: Ok(crate::tool::RESULT_CAP_BYTES),
        }
    }
}

#[allow(deprecated)]
impl CallMeta {
    pub(crate) fn from_map(meta: &RequestMetaObject) -> Self {
        if meta.is_empty() {
            return Self::default();
        }
        Self {
            progress: meta.get_progress_token(),
            version: meta.protocol_version(),
            capabilities: meta.client_capabilities(),
            log_level: meta.log_level(),
            cap: super::results::requested_cap(meta),
        }
    }

    /// `RequestContext::client_capabilities` with this `_meta`: a legacy session's from `initialize` when
    /// the request carries none (a session opened by a 2026-07-28 request has no peer info, rmcp's
    /// `request_metadata_required`, so nothing to fall back on).
    pub(crate) fn client_capabilities(
        &self,
        peer: &Peer<RoleServer>,
    ) -> Option<ClientCapabilities> {
        self.capabilities
            .clone()
            .or_else(|| peer.peer_info().map(|info| info.capabilities.clone()))
    }

    /// `RequestContext::protocol_version` with this `_meta`.
    pub(crate) fn protocol_version(&self, peer: &Peer<RoleServer>) -> Option<ProtocolVersion> {
        self.version
            .clone()
            .or_else(|| peer.peer_info().map(|info| info.protocol_version.clone()))
    }
}

fn cancelled(name: &str) -> ToolError {
    ToolError::cancelled(format!("`{name}` was cancelled by the client"))
}

/// Whether a request belongs to protocol 2026-07-28 or later, which removed sessions, `logging/setLevel`,
/// `ping` and `resources/subscribe`.
fn stateless_era(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

fn internal_panic(name: &str, panic: &str) -> ToolError {
    tracing::error!(tool = %name, panic = %panic, "a tool handler panicked; answered E_INTERNAL");
    ToolError::internal(format!("`{name}` failed with an internal error (a bug in the bridge): {panic}"))
        .with_hint(
            "the call may or may not have reached the live system: check its state before retrying; report the bug \
             with the bridge's log",
        )
}

fn shutting_down(name: &str) -> ToolError {
    ToolError::new(
        ErrorCode::Busy,
        format!("the server is shutting down; `{name}` was not started"),
    )
    .with_hint("start the server again, then call again")
}

pub(crate) fn timed_out(name: &str, timeout: Duration) -> ToolError {
    ToolError::timeout(format!(
        "`{name}` did not finish within {} ms",
        timeout.as_millis()
    ))
    .with_hint(format!(
        "retry, or raise this tool's limit with --tool-timeout {name}=MS (MCP_TOOL_TIMEOUTS)"
    ))
    .with_details(
        serde_json::json!({ "timeout_ms": u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX) }),
    )
}

/// Runs `call`, and while it runs sends progress whenever [`PROGRESS_HEARTBEAT`](crate::tool::PROGRESS_HEARTBEAT)
/// passes without any (when the request carries a progress token): hosts give up on a call that reports nothing
/// for 60 s. Ends with the call, so no timer outlives it.
async fn with_heartbeat<F: std::future::Future>(
    call: F,
    beat: Option<Heartbeat>,
    started: tokio::time::Instant,
) -> F::Output {
    let Some(beat) = beat else {
        return call.await;
    };
    tokio::pin!(call);
    loop {
        let Some(sent_at) = beat.sent_at() else {
            return call.await;
        };
        let due = sent_at + crate::tool::PROGRESS_HEARTBEAT;
        tokio::select! {
            biased;
            output = &mut call => return output,
            () = tokio::time::sleep_until(due) => beat.beat(started.elapsed()).await,
        }
    }
}

struct PeerProgress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
}

impl ProgressSink for PeerProgress {
    fn send(&self, done: f64, total: Option<f64>, message: String) -> BoxFuture<'static, ()> {
        let peer = self.peer.clone();
        let mut param = ProgressNotificationParam::new(self.token.clone(), done);
        param.total = total;
        if !message.is_empty() {
            param.message = Some(message);
        }
        Box::pin(async move {
            if let Err(e) = peer.notify_progress(param).await {
                tracing::debug!("progress notification not delivered: {e}");
            }
        })
    }
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        #[allow(deprecated)]
        let mut capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .build();
        if !self.mount().prompts().is_empty() {
            capabilities.prompts = Some(PromptsCapability::default());
        }
        super::tasks::advertise(
            &mut capabilities,
            self.mount().tools().iter().map(|t| &t.spec),
        );
        let mut info = ServerConfig::new(capabilities).with_server_info(Implementation::new(
            self.mount().server_name(),
            self.mount().version(),
        ));
        if let Some(instructions) = self.mount().instructions() {
            info = info.with_instructions(instructions.to_owned());
        }
        info
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        if let Some(limit) = &self.session_limit {
            let slot = limit.admit().inspect_err(|_| {
                tracing::debug!(max = limit.max(), "refused an MCP session: at the limit");
            })?;
            let _ = self.session_slot.set(slot);
        }
        let (client, version) = sessions::client_summary(&request);
        tracing::info!(%client, %version, "MCP session started");
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let listed = self
            .shared
            .tools
            .iter()
            .zip(self.mount().tools())
            .filter(|(_, mounted)| mounted.spec.listed)
            .map(|(tool, _)| tool.clone())
            .collect();
        Ok(ListToolsResult::with_all_items(listed))
    }

    // rmcp asks for a tool on every HTTP request (to check `Mcp-Param-*` headers against its schema).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        let index = self.mount().tool_position(name)?;
        self.shared.tools.get(index).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.run_tool(request, context).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        Ok(GetTaskResult::new(self.shared.tasks.get(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.shared
            .tasks
            .update(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.shared.tasks.cancel(&request.task_id)
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut resources: Vec<_> = self
            .mount()
            .streams()
            .map(|(_, s)| {
                convert::resource(&crate::resource::ResourceInfo {
                    uri: s.uri().to_owned(),
                    name: format!("events/{}", s.name()),
                    description: Some(s.description().to_owned()),
                    mime_type: Some("application/json".into()),
                })
            })
            .collect();
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        for provider in self.mount().providers() {
            match provider.list().await {
                Ok(list) => resources.extend(list.iter().map(convert::resource)),
                // A later page counts from the start of the list as it was: with one provider missing, its
                // offset would skip entries and the client would take the shorter list for the whole.
                Err(e) if cursor.is_some() => {
                    return Err(McpError::internal_error(
                        format!(
                            "a live system could not list its resources while the list was read page by page \
                             ({}); read resources/list again from its first page",
                            crate::text::for_log(&e.to_string())
                        ),
                        None,
                    ));
                }
                // One unreachable live system must not hide the others' resources.
                Err(e) => tracing::debug!("resource provider could not list: {e}"),
            }
        }
        let (page, next) = super::resource_pages::page(resources, cursor)?;
        let mut result = ListResourcesResult::with_all_items(page);
        result.next_cursor = next;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let templates = self
            .mount()
            .providers()
            .flat_map(|p| p.templates())
            .map(|t| convert::resource_template(&t))
            .collect();
        Ok(ListResourceTemplatesResult::with_all_items(templates))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let cap = super::results::requested_cap(&context.meta)?;
        if let Some(page) = self.shared.results.read(&request.uri, cap) {
            return Ok(ReadResourceResult::new(page?).into());
        }
        // A resource provider is bridge code too: its panic must still be answered.
        let contents = super::panic::caught(self.read(&request.uri))
            .await
            .map_err(|panic| {
                tracing::error!(uri = %request.uri, panic = %panic, "a resource provider panicked");
                McpError::internal_error(format!("reading {} failed: {panic}", request.uri), None)
            })??;
        Ok(ReadResourceResult::new(self.shared.results.cap_resource(contents, cap)?).into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        if self.mount().prompts().is_empty() {
            return Err(McpError::method_not_found::<
                rmcp::model::ListPromptsRequestMethod,
            >());
        }
        Ok(ListPromptsResult::with_all_items(
            self.mount().prompts().iter().map(convert::prompt).collect(),
        ))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let Some(spec) = self
            .mount()
            .prompts()
            .iter()
            .find(|p| p.name == request.name)
        else {
            return Err(McpError::invalid_params(
                format!("prompt not found: {}", request.name),
                None,
            ));
        };
        let arguments: BTreeMap<String, String> = request
            .arguments
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| {
                let text = match v {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                };
                (k, text)
            })
            .collect();
        for (name, _, required) in &spec.arguments {
            if *required && !arguments.contains_key(name) {
                return Err(McpError::invalid_params(
                    format!("missing required argument `{name}`"),
                    None,
                ));
            }
        }
        let inputs = self.inputs(request.input_responses, request.request_state.as_deref())?;
        match (spec.render)(&arguments, &inputs)
            .map_err(|e| McpError::invalid_params(e.to_string(), None))?
        {
            PromptOutcome::Messages(messages) => Ok(GetPromptResult::new(
                messages.iter().map(convert::prompt_message).collect(),
            )
            .with_description(spec.description.clone())
            .into()),
            PromptOutcome::InputRequired(input) => {
                Ok(self.shared.seal.input_required(input)?.into())
            }
        }
    }

    // Legacy era only (2026-07-28 puts the level in each request's `_meta`).
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if stateless_era(&context) {
            return Err(McpError::method_not_found::<
                rmcp::model::SetLevelRequestMethod,
            >());
        }
        if let Ok(mut level) = self.log_level.lock() {
            *level = Some(from_rmcp_level(request.level));
        }
        Ok(())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if let Ok(mut uris) = self.session.uris.lock() {
            sessions::subscribe(&mut uris, request.uri)?;
        }
        self.ensure_forwarder(context.peer);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if let Ok(mut uris) = self.session.uris.lock() {
            uris.remove(&request.uri);
        }
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut builder = SubscriptionFilter::builder();
        if let Some(uris) = &requested.resource_subscriptions {
            builder = builder.resource_subscriptions(sessions::listen_uris(uris));
        }
        Some(builder.build())
    }

    // rmcp parses a known method whose params do not fit as a custom request; the client must learn what was
    // wrong with its params, not that the method does not exist.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        Err(super::edges::unparsed_request(
            &request,
            stateless_era(&context),
        ))
    }

    async fn listen(&self, cx: SubscriptionContext) -> Result<(), McpError> {
        let uris: HashSet<String> = cx
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        let mut updates = self.mount().updates();
        loop {
            tokio::select! {
                () = cx.cancelled() => return Ok(()),
                received = updates.next() => match received {
                    Some(uri) if uris.contains(&uri) => {
                        if cx.sink().notify_resource_updated(uri).await.is_err() {
                            return Ok(());
                        }
                    }
                    Some(_) => {}
                    None => return Ok(()),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::ctx::ProgressSink;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    #[derive(Default)]
    struct Recorded(Mutex<Vec<f64>>);

    impl ProgressSink for Recorded {
        fn send(&self, done: f64, _: Option<f64>, _: String) -> BoxFuture<'static, ()> {
            if let Ok(mut sent) = self.0.lock() {
                sent.push(done);
            }
            Box::pin(async {})
        }
    }

    /// A call's context whose progress is recorded, and when the call began.
    fn recorded_call() -> (Arc<Recorded>, ToolCtx, tokio::time::Instant) {
        let sink = Arc::new(Recorded::default());
        let begun = tokio::time::Instant::now();
        let ctx = ToolCtx::new(
            Some(sink.clone() as Arc<dyn ProgressSink>),
            tokio_util::sync::CancellationToken::new(),
            begun,
        );
        (sink, ctx, begun)
    }

    /// A call cancelled 500 ms before its first heartbeat goes on cleaning up for 800 ms: the heartbeat falls in
    /// the clean-up and is not sent, and the wait for the call does not spin on the heartbeat it skipped (the
    /// clock, paused, would then never reach the clean-up's end).
    #[tokio::test(start_paused = true)]
    async fn no_heartbeat_goes_out_after_the_call_is_cancelled() {
        let (sink, ctx, begun) = recorded_call();
        let beat = ctx.heartbeat();
        let ender = beat.clone();
        let call = async {
            tokio::time::sleep(crate::tool::PROGRESS_HEARTBEAT + Duration::from_millis(300)).await;
            "cleaned up"
        };
        let cancel = async {
            tokio::time::sleep(crate::tool::PROGRESS_HEARTBEAT - Duration::from_millis(500)).await;
            if let Some(beat) = &ender {
                beat.end();
            }
        };
        let (output, ()) = tokio::join!(with_heartbeat(call, beat, begun), cancel);
        assert_eq!(output, "cleaned up");
        assert_eq!(*sink.0.lock().unwrap(), Vec::<f64>::new());
        drop(ctx);
    }

    /// Without a cancel the same call gets its heartbeat: the test above fails for the reason it names.
    #[tokio::test(start_paused = true)]
    async fn an_uncancelled_silent_call_gets_its_heartbeat() {
        let (sink, ctx, begun) = recorded_call();
        let call = tokio::time::sleep(crate::tool::PROGRESS_HEARTBEAT + Duration::from_millis(300));
        with_heartbeat(call, ctx.heartbeat(), begun).await;
        assert_eq!(*sink.0.lock().unwrap(), vec![0.0]);
    }
}
