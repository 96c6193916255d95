//! Our own answer to the hot `POST /mcp` requests: a stateless (2026-07-28) `tools/call`, `tools/list` or
//! `resources/read` with plain headers.
//!
//! rmcp's `StreamableHttpService` spends about 105 k instructions on such a request before and after our
//! handler (bench/README.md): it decodes the body by trying `ClientRequest`'s variants in turn, re-serialises
//! the whole message to a `Value` to check the SEP-2243 headers, and builds a server (`serve_directly`: a peer,
//! channels, a service task) for every request. Here the body is decoded by its method name, a `tools/call`'s
//! `_meta` read lean as the stdio loop reads it ([`wire::decode_calls`]), the headers are compared with the
//! decoded request, and the handler runs inline with a peer made once. A `tools/call` skips rmcp's `handle_request` too ([`tool_answer`] does what it does after
//! `call_tool` for this era): its future holds every request handler's state and is copied whole at each move.
//! It is begun and polled once in the request's own frame ([`begin`]), as the stdio loop does: a call that
//! finishes at once builds no future, timer or heartbeat.
//!
//! Only what rmcp would answer the same way takes this path; anything else gets `None` and goes to rmcp
//! untouched: legacy sessions (`Mcp-Session-Id`, or no 2026-07-28 version), notifications, batches, other
//! methods, a `_meta` without the era's required keys, headers rmcp would refuse or decode (duplicates,
//! Base64-wrapped names, `Accept` parameters), tools whose schema promotes arguments to `Mcp-Param-*` headers,
//! requests with a log level in `_meta` (log messages would need the request's own peer), and task-capable
//! tools called with a progress token (a task's progress outlives the request). Server-to-client requests are
//! refused in this era by rmcp's peer itself (its peer info names 2026-07-28), as on rmcp's path.
//!
//! Progress: the request's progress token is swapped for one of ours, a number unique in this process (clients
//! number theirs from 0), and the peer's transport queues each progress notification in its request's slot
//! of [`Routes`] with the client's token back in place. As rmcp does with JSON replies on, a call whose first message is its answer is answered
//! with JSON, and one that reports progress first with an SSE stream of its notifications and then the answer.

use super::super::edges::is_json;
use super::super::handler::{CallMeta, CallToken, McpHandler, Shared, Started};
use super::super::inline;
use super::super::wire::{self, Decoded};
use super::progress_only::{ProgressOnly, ProgressRoute, undeliverable};
use crate::tool::ctx::ProgressSink;
use axum::body::{Body, Bytes};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::Response;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientRequest, ErrorCode,
    ErrorData, GetMeta, Implementation, InitializeRequestParams, JsonRpcMessage,
    JsonRpcNotification, JsonRpcRequest, NumberOrString, ProgressNotification,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestId, RequestMetaObject,
    ServerNotification, ServerResult,
};
use rmcp::service::{RequestContext, TxJsonRpcMessage, serve_directly_with_ct};
use rmcp::{Peer, RoleServer, Service};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::future::Future;
use std::hash::{BuildHasherDefault, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use tokio_util::sync::CancellationToken;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";
/// rmcp's marker of a Base64-wrapped header value (`=?base64?...?=`).
const BASE64_PREFIX: &str = "=?base64?";
// Looked up by `HeaderName`, not by `&str`: a `&str` name is parsed and validated again on every lookup.
static SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
static PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
static MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
static MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// The fast path of one HTTP server.
pub(crate) struct FastPath {
    shared: Arc<Shared>,
    handler: Arc<McpHandler>,
    /// A peer whose transport never carries anything: the requests taken here send nothing to the client
    /// beside their answer.
    peer: Peer<RoleServer>,
    /// The parent of every call's cancellation, cancelled at the end of shutdown's grace as rmcp's is.
    service_token: CancellationToken,
    /// By tool position: the tool's input schema has an `x-mcp-header` annotation (rmcp checks
    /// `Mcp-Param-*` headers against those; such calls take its path).
    param_headers: Vec<bool>,
    /// Requests answered here, for /metrics.
    answered: Arc<AtomicU64>,
    /// Where the peer's progress notifications go, by our progress token.
    routes: Arc<Routes>,
    /// The next progress token of ours: a number, so making one allocates nothing.
    next_token: AtomicI64,
    /// The handler supports 2026-07-28: rmcp's version check on a request of that era passes.
    modern_supported: bool,
}

type Message = TxJsonRpcMessage<RoleServer>;
type RouteMap = HashMap<i64, Arc<Notes>, BuildHasherDefault<TokenHasher>>;

/// Hashes our progress tokens, consecutive numbers made in this process (never the client's): one multiply
/// spreads them over the table, where SipHash cost about 140 instructions a lookup, three a call.
#[derive(Default)]
struct TokenHasher(u64);

impl Hasher for TokenHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*byte)).wrapping_mul(FIBONACCI);
        }
    }

    fn write_i64(&mut self, n: i64) {
        self.0 = u64::from_ne_bytes(n.to_ne_bytes()).wrapping_mul(FIBONACCI);
    }
}

/// 2^64 divided by the golden ratio: multiplying by it mixes consecutive numbers into the high bits too.
const FIBONACCI: u64 = 0x9E37_79B9_7F4A_7C15;

/// A request's progress notifications not yet sent, with the client's token and who waits for them: not
/// behind a channel of its own, as most calls that carry a token (rmcp's client puts one on every request)
/// report nothing, and a channel costs an allocation of 32 message slots.
///
/// A `tools/call` reports straight into it (it is the call's [`ProgressSink`]); another request's handler
/// reports through the peer, whose transport finds it in [`Routes`] by the token of ours it was given.
struct Notes {
    theirs: ProgressToken,
    slot: Mutex<NoteSlot>,
}

#[derive(Default)]
struct NoteSlot {
    queue: Vec<Message>,
    waker: Option<Waker>,
    /// The answer has gone: nothing more is sent.
    closed: bool,
}

impl Notes {
    fn new(theirs: ProgressToken) -> Arc<Self> {
        Arc::new(Self {
            theirs,
            slot: Mutex::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, NoteSlot> {
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a notification for the request's response; false once its answer has gone.
    fn push(&self, item: Message) -> bool {
        let waker = {
            let mut slot = self.lock();
            if slot.closed {
                return false;
            }
            slot.queue.push(item);
            slot.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        true
    }
}

impl ProgressSink for Notes {
    /// What the handler's `PeerProgress` sends through the peer, queued for the response at once: the same
    /// message (`Peer::notify_progress` builds it so), with the client's own token.
    fn send(
        &self,
        done: f64,
        total: Option<f64>,
        message: String,
    ) -> futures::future::BoxFuture<'static, ()> {
        let mut param = ProgressNotificationParam::new(self.theirs.clone(), done);
        param.total = total;
        if !message.is_empty() {
            param.message = Some(message);
        }
        let item = JsonRpcMessage::notification(ServerNotification::ProgressNotification(
            ProgressNotification::new(param),
        ));
        if !self.push(item) {
            tracing::debug!("progress notification not delivered: the call has answered");
        }
        Box::pin(std::future::ready(()))
    }
}

/// The progress of requests in flight that report through the peer, by the token we gave them.
#[derive(Default)]
struct Routes(Mutex<RouteMap>);

impl Routes {
    fn lock(&self) -> std::sync::MutexGuard<'_, RouteMap> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A request's [`Notes`], and its place in [`Routes`] when it has one, given up when the request's answer
/// has gone.
struct Route {
    notes: Arc<Notes>,
    /// Our token in [`Routes`], for a request whose handler reports through the peer.
    registered: Option<(Arc<Routes>, i64)>,
    /// Given up already ([`finish`](Self::finish)).
    finished: bool,
}

impl Route {
    /// The notifications queued so far.
    fn take(&self) -> Vec<Message> {
        std::mem::take(&mut self.notes.lock().queue)
    }

    /// The notifications queued, and no more accepted: the request's answer goes now.
    fn finish(mut self) -> Vec<Message> {
        self.finished = true;
        if let Some((routes, token)) = self.registered.take() {
            routes.lock().remove(&token);
        }
        let mut slot = self.notes.lock();
        slot.closed = true;
        std::mem::take(&mut slot.queue)
    }

    /// Ready with the notifications queued, once there is at least one.
    fn poll_notes(&self, cx: &mut Context<'_>) -> Poll<Vec<Message>> {
        let mut slot = self.notes.lock();
        if slot.queue.is_empty() {
            slot.waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        Poll::Ready(std::mem::take(&mut slot.queue))
    }

    async fn notes(&self) -> Vec<Message> {
        std::future::poll_fn(|cx| self.poll_notes(cx)).await
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        if let Some((routes, token)) = self.registered.take() {
            routes.lock().remove(&token);
        }
        self.notes.lock().closed = true;
    }
}

impl FastPath {
    pub(crate) fn start(shared: Arc<Shared>, service_token: CancellationToken) -> Self {
        let handler = McpHandler::new(shared.clone());
        let modern_supported =
            Service::supported_protocol_versions(&handler).contains(&ProtocolVersion::V_2026_07_28);
        let param_headers = shared
            .tools
            .iter()
            .map(|tool| {
                serde_json::to_string(&*tool.input_schema)
                    .map_or(true, |schema| schema.contains("x-mcp-header"))
            })
            .collect();
        // What rmcp gives a stateless request: peer info naming the request's version, default capabilities.
        let info =
            InitializeRequestParams::new(ClientCapabilities::default(), Implementation::default())
                .with_protocol_version(ProtocolVersion::V_2026_07_28);
        let routes = Arc::new(Routes::default());
        let running = serve_directly_with_ct(
            handler.clone(),
            ProgressOnly(Detached {
                routes: routes.clone(),
            }),
            Some(info),
            service_token.clone(),
        );
        let peer = running.peer().clone();
        // The service loop ends with `service_token`.
        tokio::spawn(async move {
            let _ = running.waiting().await;
        });
        Self {
            shared,
            handler: Arc::new(handler),
            peer,
            service_token,
            param_headers,
            answered: Arc::default(),
            routes,
            next_token: AtomicI64::new(0),
            modern_supported,
        }
    }

    /// How many requests this path has answered.
    pub(crate) fn answered(&self) -> Arc<AtomicU64> {
        self.answered.clone()
    }

    /// The answer to a request this path takes; `None` hands it to rmcp unchanged.
    pub(crate) async fn answer(&self, parts: &Parts, body: &Bytes) -> Option<Response> {
        let accepted = self.accept(&parts.headers, body)?;
        self.answered.fetch_add(1, Ordering::Relaxed);
        Some(self.dispatch(accepted).await)
    }

    /// The request, when rmcp would dispatch it to the handler and answer it with one JSON message.
    fn accept(&self, headers: &HeaderMap, body: &[u8]) -> Option<Accepted> {
        if !self.modern_supported {
            return None;
        }
        let seen = Seen::read(headers);
        if seen.session
            || !seen.accepts_json_and_sse(headers)
            || !is_json(seen.content_type)
            // rmcp's HTTP decoding does not skip a BOM.
            || body.starts_with(UTF8_BOM)
        {
            return None;
        }
        let version = seen.version.single()?;
        if version != ProtocolVersion::V_2026_07_28.as_str() {
            return None;
        }
        let (id, request) = match wire::decode_calls(body) {
            Ok(Some(Decoded::Call(wire::Call {
                id,
                params,
                meta,
                map,
            }))) => (id, Request::Call { params, meta, map }),
            Ok(Some(Decoded::Message(JsonRpcMessage::Request(JsonRpcRequest {
                id,
                request: ClientRequest::CallToolRequest(mut call),
                ..
            })))) => {
                // Not read apart in the envelope's pass: `_meta` is rmcp's map, read as the stdio loop
                // reads it then.
                let map = call.extensions.remove::<RequestMetaObject>();
                let meta = map.as_ref().map(|map| Box::new(CallMeta::from_map(map)));
                (
                    id,
                    Request::Call {
                        params: call.params,
                        meta,
                        map,
                    },
                )
            }
            Ok(Some(Decoded::Message(JsonRpcMessage::Request(JsonRpcRequest {
                id,
                request,
                ..
            })))) => (id, Request::Other(Box::new(request))),
            _ => return None,
        };
        let (method, name) = match &request {
            Request::Call { params, .. } => ("tools/call", Some(params.name.as_ref())),
            Request::Other(other) => match &**other {
                ClientRequest::ListToolsRequest(_) => ("tools/list", None),
                ClientRequest::ReadResourceRequest(read) => {
                    ("resources/read", Some(read.params.uri.as_str()))
                }
                _ => return None,
            },
        };
        if seen.method.single()? != method {
            return None;
        }
        if let Some(name) = name {
            let header = seen.name.single()?;
            if header.starts_with(BASE64_PREFIX) || header != name {
                return None;
            }
        }
        let mut task_capable = false;
        match &request {
            Request::Call { params, meta, .. } => {
                // rmcp's checks before dispatch (the version against the header and the era's required keys:
                // `missing_required_keys` is the version and the capabilities), on `_meta` as read once.
                let meta = meta.as_deref()?;
                if meta.version.as_ref().map(ProtocolVersion::as_str) != Some(version)
                    || meta.capabilities.is_none()
                    || meta.log_level.is_some()
                {
                    return None;
                }
                if let Some(position) = self.shared.mount.tool_position(&params.name) {
                    task_capable = self.shared.mount.tools()[position].spec.task_support
                        != crate::tool::TaskSupport::Never;
                    if self.param_headers.get(position).copied().unwrap_or(true)
                        || (meta.progress.is_some() && task_capable)
                    {
                        return None;
                    }
                }
            }
            Request::Other(request) => {
                let meta = request.get_meta();
                if meta
                    .protocol_version()
                    .as_ref()
                    .map(ProtocolVersion::as_str)
                    != Some(version)
                    || !meta
                        .missing_required_keys(&ProtocolVersion::V_2026_07_28)
                        .is_empty()
                    || meta.log_level().is_some()
                {
                    return None;
                }
            }
        }
        Some(Accepted {
            id,
            request,
            task_capable,
        })
    }

    /// Runs the request inline until it first waits; then in a task of its own, cancelled when the client
    /// goes away (the response is dropped), as rmcp cancels a stateless request.
    async fn dispatch(&self, accepted: Accepted) -> Response {
        let Accepted {
            id,
            request,
            task_capable,
        } = accepted;
        let (ct, route, mut call) = match request {
            Request::Call { params, meta, map } => {
                let mut meta = meta.unwrap_or_default();
                // As the stdio loop makes it: `_meta` read lean is not put back into a map nothing reads.
                let mut context = RequestContext::new(id.clone(), self.peer.clone());
                if let Some(map) = map {
                    context.meta = map;
                }
                self.cancelled_with_service(&context.ct);
                // The call reports into its notes directly, not through the peer: `begin_tool` makes no
                // sink of its own for a `_meta` without the token.
                let route = meta.progress.take().map(|theirs| Route {
                    notes: Notes::new(theirs),
                    registered: None,
                    finished: false,
                });
                let sink = route
                    .as_ref()
                    .map(|route| route.notes.clone() as Arc<dyn ProgressSink>);
                // Only a tool that can run as a task can answer with a task handle.
                let tasks_declared = task_capable
                    && meta
                        .client_capabilities(&context.peer)
                        .is_some_and(|caps| caps.supports_tasks());
                let mut params = params;
                let mut sink = sink;
                // Begun and polled once in this frame, as the stdio loop does: a call that finishes at once
                // builds no future, timer or heartbeat.
                let step = std::future::poll_fn(|cx| {
                    let params = std::mem::replace(&mut params, CallToolRequestParams::new(""));
                    Poll::Ready(begin(
                        &self.handler,
                        params,
                        &context,
                        &meta,
                        sink.take(),
                        cx,
                    ))
                })
                .await;
                // Boxed here, once: the futures above it stay small, so moving them costs no large copies.
                let (ct, call) = match step {
                    Started::Answered(called) => {
                        // Whatever the call left running has stopped: the request's token, the one its handler
                        // saw, was cancelled as it was answered (`handler::CallCancel`).
                        let queued = route.map(Route::finish).unwrap_or_default();
                        if queued.is_empty() {
                            return json_tool_answer(id, called, tasks_declared);
                        }
                        return answered(queued, Ok(tool_answer(id, called, tasks_declared)));
                    }
                    Started::Task(task) => (
                        context.ct.clone(),
                        boxed(|| async move {
                            tool_answer(id, inline::guarded(task).await.into(), tasks_declared)
                        }),
                    ),
                    Started::Waiting(running) => {
                        let ct = context.ct.clone();
                        drop(context);
                        let run_ct = ct.clone();
                        (
                            ct,
                            boxed(|| async move {
                                let called = inline::guarded_call(running.run(&run_ct)).await;
                                tool_answer(id, called, tasks_declared)
                            }),
                        )
                    }
                };
                (ct, route, call)
            }
            Request::Other(request) => {
                let mut request = *request;
                let mut context = inline::context(id.clone(), &mut request, self.peer.clone());
                self.cancelled_with_service(&context.ct);
                let route = context.meta.get_progress_token().map(|theirs| {
                    let (route, ours) = self.route(theirs);
                    context.meta.set_progress_token(ours);
                    route
                });
                let ct = context.ct.clone();
                let handler = self.handler.clone();
                (ct, route, boxed(|| answer(handler, request, context, id)))
            }
        };
        let first = std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
        let route = match (first, route) {
            (Poll::Ready(message), route) => {
                // As rmcp does once the answer is sent: whatever the call left running stops.
                ct.cancel();
                let queued = route.map(Route::finish).unwrap_or_default();
                return answered(queued, Ok(message));
            }
            (Poll::Pending, None) => {
                let guard = ct.clone().drop_guard();
                let joined =
                    tokio::spawn(linked(call, self.service_token.clone(), ct.clone())).await;
                guard.disarm();
                ct.cancel();
                return answered(Vec::new(), joined);
            }
            (Poll::Pending, Some(route)) => route,
        };
        let guard = ct.clone().drop_guard();
        let mut task = tokio::spawn(linked(call, self.service_token.clone(), ct.clone()));
        // rmcp's choice: JSON when the first message is the answer, SSE when it is a notification.
        let first_notes = tokio::select! {
            biased;
            joined = &mut task => {
                guard.disarm();
                ct.cancel();
                return answered(route.take(), joined);
            }
            notes = route.notes() => notes,
        };
        sse(
            first_notes.into_iter().map(Into::into).collect(),
            Some(Streaming {
                task,
                guard: Some(guard),
                ct,
                route,
            }),
        )
    }

    /// A request's own token, not a child of the service token: making a child locks the parent and adds a
    /// node to its tree, and dropping it does both again, for a call that mostly answers at once. A call
    /// that waits is tied to the service token when it is spawned ([`linked`]); one begun after the service
    /// token was cancelled starts cancelled, as a child would.
    fn cancelled_with_service(&self, ct: &CancellationToken) {
        if self.service_token.is_cancelled() {
            ct.cancel();
        }
    }

    /// A place in [`Routes`] for the progress of a request whose client token is `theirs`, and the token of
    /// ours its handler reports with instead, through the peer.
    fn route(&self, theirs: ProgressToken) -> (Route, ProgressToken) {
        let ours = self.next_token.fetch_add(1, Ordering::Relaxed);
        let notes = Notes::new(theirs);
        self.routes.lock().insert(ours, notes.clone());
        let route = Route {
            notes,
            registered: Some((self.routes.clone(), ours)),
            finished: false,
        };
        (route, ProgressToken(NumberOrString::Number(ours)))
    }
}

/// `call`, cancelled through its request's token `ct` when the service token is, as a child token would be.
async fn linked<T>(
    mut call: Pin<Box<dyn Future<Output = T> + Send>>,
    service: CancellationToken,
    ct: CancellationToken,
) -> T {
    tokio::select! {
        biased;
        answer = call.as_mut() => return answer,
        () = service.cancelled() => ct.cancel(),
    }
    call.await
}

/// The future `make` returns, made in its heap slot: allocated first, so the compiler can write the future
/// straight into it, where `Box::pin(future)` makes it on the stack and then copies all of it (the handler's
/// state included: several kB) into the box.
fn boxed<F: Future<Output = inline::Answer> + Send + 'static>(
    make: impl FnOnce() -> F,
) -> Pin<Box<dyn Future<Output = inline::Answer> + Send>> {
    let slot = Box::<F>::new_uninit();
    let future: Box<F> = Box::write(slot, make());
    Box::into_pin(future)
}

/// A request this path takes.
struct Accepted {
    id: RequestId,
    request: Request,
    /// A `tools/call` of a tool that can run as a task.
    task_capable: bool,
}

/// A request taken: a `tools/call` read apart as the stdio loop reads it, or one rmcp's handler answers.
// One per request, moved straight into its dispatch: boxing would cost an allocation per call.
#[allow(clippy::large_enum_variant)]
enum Request {
    Call {
        params: CallToolRequestParams,
        /// `_meta` as read once: lean, or from `map` when it held anything unusual; `None` without one.
        meta: Option<Box<CallMeta>>,
        /// rmcp's map of `_meta`, only when it was read into one.
        map: Option<RequestMetaObject>,
    },
    /// Boxed: every move of the request (decoded, accepted, dispatched) would copy the whole of
    /// `ClientRequest`, the size of its largest variant, for the rare request that is not a call.
    Other(Box<ClientRequest>),
}

/// The reply to a call that has answered: JSON, or SSE when notifications came first.
fn answered(
    queued: Vec<Message>,
    joined: Result<inline::Answer, tokio::task::JoinError>,
) -> Response {
    match joined {
        Ok(message) if queued.is_empty() => json_message(&message),
        Ok(message) => sse(
            queued
                .into_iter()
                .map(Into::into)
                .chain([message])
                .collect(),
            None,
        ),
        Err(e) => {
            tracing::error!("a call's task failed outside its handler: {e}");
            plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
        }
    }
}

/// What is left of a call answered with SSE: its further notifications, then its answer.
struct Streaming {
    task: tokio::task::JoinHandle<inline::Answer>,
    /// Cancels the call if the client goes away (the body is dropped) before its answer.
    guard: Option<tokio_util::sync::DropGuard>,
    ct: CancellationToken,
    route: Route,
}

/// An SSE answer framed as rmcp frames its stateless one: one `data:` event per message, the answer last.
fn sse(ready: Vec<inline::Answer>, rest: Option<Streaming>) -> Response {
    let events = futures::stream::unfold(
        (std::collections::VecDeque::from(ready), rest),
        |(mut pending, mut rest)| async move {
            loop {
                if let Some(message) = pending.pop_front() {
                    return Some((
                        Ok::<_, std::convert::Infallible>(event(&message)),
                        (pending, rest),
                    ));
                }
                let streaming = rest.as_mut()?;
                tokio::select! {
                    biased;
                    joined = &mut streaming.task => {
                        if let Some(guard) = streaming.guard.take() {
                            guard.disarm();
                        }
                        streaming.ct.cancel();
                        pending.extend(streaming.route.take().into_iter().map(Into::into));
                        match joined {
                            Ok(message) => pending.push_back(message),
                            Err(e) => tracing::error!("a call's task failed outside its handler: {e}"),
                        }
                        rest = None;
                    }
                    notes = streaming.route.notes() => pending.extend(notes.into_iter().map(Into::into)),
                }
            }
        },
    );
    let mut response = Response::new(Body::from_stream(events));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

fn event(message: &inline::Answer) -> Bytes {
    let mut bytes = b"data: ".to_vec();
    if let Err(e) = message.write(&mut bytes) {
        tracing::error!("a message could not be serialised: {e}");
        return Bytes::new();
    }
    bytes.extend_from_slice(b"\n\n");
    Bytes::from(bytes)
}

/// `tools/list` and `resources/read`, through rmcp's `handle_request`.
async fn answer(
    handler: Arc<McpHandler>,
    request: ClientRequest,
    context: RequestContext<RoleServer>,
    id: RequestId,
) -> inline::Answer {
    inline::message(
        id,
        inline::guarded(Service::handle_request(&*handler, request, context)).await,
    )
    .into()
}

/// [`McpHandler::start_tool`] with the request's own context `cx` and its `_meta` as read once; a panic in it is answered as an internal
/// error, as [`inline::guarded`] answers one on rmcp's path.
fn begin(
    handler: &McpHandler,
    params: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    meta: &CallMeta,
    progress: Option<Arc<dyn ProgressSink>>,
    cx: &mut Context<'_>,
) -> Started {
    let begun = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        handler.start_tool_reporting(params, context, meta, progress, CallToken::Request, cx)
    }));
    begun.unwrap_or_else(|panic| {
        let panic = super::super::panic::message(panic);
        Started::Answered(Err(inline::panicked(&panic)).into())
    })
}

/// A `tools/call` answer, with what rmcp 3.9.0's `handle_request` (`handler/server.rs`) does after
/// `call_tool` for a request this path takes (2026-07-28): a task handle for a client that did not declare
/// tasks is refused, then the result shaped for the era ([`inline::shape`]). Before the call, rmcp checks
/// the `_meta` version against the supported ones and the era's required keys: [`FastPath::accept`] took
/// only requests that pass both.
fn tool_answer(id: RequestId, called: inline::Called, tasks_declared: bool) -> inline::Answer {
    let (result, structured) = tool_result(called, tasks_declared);
    inline::Answer {
        message: inline::message(id, result),
        structured,
    }
}

/// [`tool_answer`]'s result, not yet in a message.
fn tool_result(
    called: inline::Called,
    tasks_declared: bool,
) -> (Result<ServerResult, ErrorData>, Option<Box<RawValue>>) {
    let inline::Called {
        response,
        structured,
    } = called;
    let result = match response {
        Ok(CallToolResponse::Task(_)) if !tasks_declared => {
            Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ))
        }
        // The fast path serves 2026-07-28 requests only.
        response => inline::shape(response, true),
    };
    (result, structured)
}

/// The JSON answer to a call answered at once with nothing queued: [`json_message`] of [`tool_answer`],
/// a result written straight into the body (as the stdio loop writes one) without being moved into a
/// JSON-RPC message first.
fn json_tool_answer(id: RequestId, called: inline::Called, tasks_declared: bool) -> Response {
    match tool_result(called, tasks_declared) {
        (Ok(result), structured) => {
            let mut body = Vec::with_capacity(512);
            match inline::write_result(&mut body, &id, &result, structured.as_deref()) {
                Ok(()) => json_body(StatusCode::OK, body),
                Err(e) => {
                    tracing::error!("an answer could not be serialised: {e}");
                    plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
                }
            }
        }
        (error, structured) => json_message(&inline::Answer {
            message: inline::message(id, error),
            structured,
        }),
    }
}

/// rmcp's answer to a stateless request: its HTTP status by error code (`jsonrpc_http_status`, with well-formed
/// `_meta`), and the message as JSON.
fn json_message(answer: &inline::Answer) -> Response {
    let status = match &answer.message {
        JsonRpcMessage::Error(error) => match error.error.code {
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
            ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
            _ => StatusCode::OK,
        },
        _ => StatusCode::OK,
    };
    // Room for a small answer at once: `to_vec` starts at 128 bytes and grows by doubling.
    let mut body = Vec::with_capacity(512);
    match answer.write(&mut body) {
        Ok(()) => json_body(status, body),
        Err(e) => {
            tracing::error!("an answer could not be serialised: {e}");
            plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
        }
    }
}

fn json_body(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = status;
    response
}

/// The headers [`FastPath::accept`] reads, found in one pass over the map: a lookup by name hashes the name
/// and probes the table, six times a request.
#[derive(Default)]
struct Seen<'a> {
    session: bool,
    accept: Values<'a>,
    /// The first value, as `HeaderMap::get` gives it.
    content_type: Option<&'a HeaderValue>,
    version: Values<'a>,
    method: Values<'a>,
    name: Values<'a>,
}

impl<'a> Seen<'a> {
    fn read(headers: &'a HeaderMap) -> Self {
        let mut seen = Self::default();
        for (name, value) in headers {
            if *name == header::ACCEPT {
                seen.accept.add(value);
            } else if *name == header::CONTENT_TYPE {
                seen.content_type.get_or_insert(value);
            } else if *name == PROTOCOL_VERSION {
                seen.version.add(value);
            } else if *name == MCP_METHOD {
                seen.method.add(value);
            } else if *name == MCP_NAME {
                seen.name.add(value);
            } else if *name == SESSION_ID {
                seen.session = true;
            }
        }
        seen
    }

    /// `Accept` names both media types rmcp requires, with no parameters (a quality of 0 is rmcp's to read).
    fn accepts_json_and_sse(&self, headers: &HeaderMap) -> bool {
        // What clients send (rmcp's, the TS and Python SDKs'): one value, compared whole before any splitting.
        const USUAL: [&[u8]; 2] = [
            b"application/json, text/event-stream",
            b"text/event-stream, application/json",
        ];
        if let Values {
            first: Some(only),
            more: false,
        } = self.accept
            && USUAL.contains(&only.as_bytes())
        {
            return true;
        }
        accepts_json_and_sse(headers)
    }
}

/// The values of one header.
#[derive(Default)]
struct Values<'a> {
    first: Option<&'a HeaderValue>,
    more: bool,
}

impl<'a> Values<'a> {
    fn add(&mut self, value: &'a HeaderValue) {
        if self.first.is_some() {
            self.more = true;
        } else {
            self.first = Some(value);
        }
    }

    /// The one value, as text; `None` when absent, repeated or not visible ASCII.
    fn single(&self) -> Option<&'a str> {
        if self.more {
            return None;
        }
        self.first?.to_str().ok()
    }
}

/// `Accept` names both media types rmcp requires, with no parameters: each value split into its items.
fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        for item in value.split(',') {
            if item.contains(';') || item.contains('"') {
                return false;
            }
            let item = item.trim();
            json |= item.eq_ignore_ascii_case("application/json");
            sse |= item.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// Where the fast path's peer sends a call's progress: to the call's notes, with the client's token back in
/// place of ours.
struct Detached {
    routes: Arc<Routes>,
}

impl ProgressRoute for Detached {
    const NOT_PROGRESS: &'static str = "a stateless request's peer sends nothing but its progress";

    fn route(
        &self,
        token: &ProgressToken,
        mut item: TxJsonRpcMessage<RoleServer>,
    ) -> std::io::Result<()> {
        const ANSWERED: &str = "the call has answered";
        let NumberOrString::Number(ours) = token.0 else {
            return Err(undeliverable(Self::NOT_PROGRESS));
        };
        let Some(notes) = self.routes.lock().get(&ours).cloned() else {
            return Err(undeliverable(ANSWERED));
        };
        if let JsonRpcMessage::Notification(JsonRpcNotification {
            notification: ServerNotification::ProgressNotification(progress),
            ..
        }) = &mut item
        {
            progress.params.progress_token = notes.theirs.clone();
        }
        if notes.push(item) {
            Ok(())
        } else {
            Err(undeliverable(ANSWERED))
        }
    }
}
