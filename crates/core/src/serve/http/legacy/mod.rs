//! Our own answer to the hot requests of a legacy-era session (protocol versions before 2026-07-28:
//! `initialize`, `Mcp-Session-Id`, SSE replies): a `tools/call`, `tools/list` or `ping` of a session this
//! server opened, answered in front of rmcp's `StreamableHttpService` with the session's own handler, byte
//! for byte as rmcp's session answers it (`tests/mcp_http_stateful.rs`).
//!
//! rmcp spends about 150 k instructions on such a request: it decodes the body by trying `ClientRequest`'s
//! variants in turn, hands it to the session's worker task, which opens a request-wise channel and passes it
//! to the session's service loop, which spawns a task for the handler; the answer goes back the same way.
//! Here the body is decoded by its method name ([`wire::decode_calls`]) and the call begun and polled once in
//! the request's own frame, as the stateless fast path does.
//!
//! What makes it rmcp's answer:
//! - [`Sessions`], our `SessionManager` around rmcp's `LocalSessionManager`, keeps a registry of the sessions
//!   rmcp opened: the handler the factory made for each (handed over through [`made`]) and a peer of ours
//!   whose peer info is the session's `initialize` params.
//! - SSE event ids are `<index>/<request number>`; the request numbers of a session are ours, counted for
//!   the requests answered here and for those rmcp answers alike (rmcp's own numbers are rewritten in its
//!   streams, and translated back when a client resumes with `Last-Event-ID`).
//! - A call that waits runs in a task of its own; its events are kept as rmcp keeps a request-wise stream's
//!   (for `Last-Event-ID`), a `notifications/cancelled` naming it cancels it and ends its stream, closing the
//!   session or shutdown's end cancels it.
//! - rmcp's worker closes a session after `keep_alive` without events: a request answered here touches it
//!   (a resume of a request number rmcp never gives) when a thirty-second of that time has passed since the
//!   last, and a call that waits touches it as often while it runs.
//!
//! Everything else goes to rmcp as before: unknown sessions, other methods, notifications, responses,
//! batches, a BOM, headers it would refuse or read (another protocol version than the session's, `Accept`
//! parameters, `Mcp-Method`/`Mcp-Name`), a `_meta` with a protocol version, capabilities or log level,
//! task-capable tools, and every request of a session whose client declared elicitation, sampling or roots
//! (a call could send it a request, which must ride the call's own stream and come back to the peer that
//! sent it) or that set a log level (log messages go to the session's standalone stream, rmcp's).

use super::super::body_budget::Reserved;
use super::super::edges::is_json;
use super::super::handler::{CallMeta, CallToken, McpHandler, Shared, Started};
use super::super::inline;
use super::super::wire::{self, Decoded};
use axum::body::{Body, Bytes};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::Response;
use futures::{Stream, StreamExt};
use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientNotification, ClientRequest,
    InitializeRequestParams, JsonRpcMessage, JsonRpcNotification, JsonRpcRequest, ProgressToken,
    ProtocolVersion, RequestId, ServerJsonRpcMessage,
};
use rmcp::service::{RequestContext, TxJsonRpcMessage, serve_directly_with_ct};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker, SessionError,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use rmcp::{Peer, RoleServer, Service};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

mod call_stream;
mod sessions;
mod sse;

use call_stream::*;
use sessions::*;
pub(crate) use sessions::{Sessions, made, rmcp_keep_alive};
use sse::*;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";
static SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
static PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
static MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
static MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A request the front takes.
enum Taken {
    Call {
        id: RequestId,
        params: CallToolRequestParams,
        meta: Option<Box<CallMeta>>,
        map: Option<rmcp::model::RequestMetaObject>,
    },
    Other(RequestId, ClientRequest),
}

/// The front path of one HTTP server.
pub(crate) struct LegacyPath {
    sessions: Arc<Sessions>,
    /// One permit a tool call of these sessions while it runs, across all of them: a call goes on after its
    /// client disconnects (it may resume the stream), so without a bound one client opening and dropping
    /// connections kept 20 000 calls (342 MB) running.
    calls: Arc<Semaphore>,
}

/// The most tool calls that run at once in this server's legacy HTTP sessions; one past it is refused with
/// `E_BUSY` before it starts.
pub const MAX_RUNNING_CALLS: usize = 1024;

/// The most of [`MAX_RUNNING_CALLS`] one session's calls take: one session starting a thousand long calls and
/// dropping their connections kept every other session's calls refused `E_BUSY` (an attack run's finding).
pub const MAX_SESSION_CALLS: usize = MAX_RUNNING_CALLS / 4;

impl LegacyPath {
    pub(crate) fn new(sessions: Arc<Sessions>) -> Self {
        Self {
            sessions,
            calls: Arc::new(Semaphore::new(MAX_RUNNING_CALLS)),
        }
    }

    /// The answer to a request this path takes; `None` hands it to rmcp unchanged. A call that goes on
    /// after the answer's headers keeps `body`'s place in the body budget (`reserved`) until it ends: its
    /// decoded arguments outweigh the body, and a dropped connection must not give that back.
    pub(crate) async fn answer(
        &self,
        parts: &Parts,
        body: &Bytes,
        reserved: &mut Option<Reserved>,
    ) -> Option<Response> {
        let (session, taken) = self.accept(&parts.headers, body)?;
        self.sessions.answered.fetch_add(1, Ordering::Relaxed);
        self.sessions.touch(&session).await;
        Some(self.dispatch(session, taken, reserved).await)
    }

    fn accept(&self, headers: &HeaderMap, body: &[u8]) -> Option<(Arc<Session>, Taken)> {
        let mut id = None;
        let mut version = None;
        let mut accept = None;
        for (name, value) in headers {
            if *name == SESSION_ID {
                if id.replace(value).is_some() {
                    return None;
                }
            } else if *name == PROTOCOL_VERSION {
                if version.replace(value).is_some() {
                    return None;
                }
            } else if *name == header::ACCEPT {
                if accept.replace(value).is_some() {
                    return None;
                }
            } else if *name == MCP_METHOD || *name == MCP_NAME {
                return None;
            }
        }
        // What clients send (rmcp's, the TS and Python SDKs'); anything else is rmcp's to read.
        const USUAL: [&[u8]; 2] = [
            b"application/json, text/event-stream",
            b"text/event-stream, application/json",
        ];
        if !accept.is_some_and(|a| USUAL.contains(&a.as_bytes()))
            || !is_json(headers.get(header::CONTENT_TYPE))
            || body.starts_with(UTF8_BOM)
        {
            return None;
        }
        let session = self.sessions.session(id?.to_str().ok()?)?;
        if !session.takes_calls
            || session.rmcp_only.load(Ordering::Relaxed)
            || version?.as_bytes() != session.version.as_bytes()
        {
            return None;
        }
        let taken = match wire::decode_calls(body) {
            Ok(Some(Decoded::Call(wire::Call {
                id,
                params,
                meta,
                map,
            }))) => Taken::Call {
                id,
                params,
                meta,
                map,
            },
            Ok(Some(Decoded::Message(JsonRpcMessage::Request(JsonRpcRequest {
                id,
                request: ClientRequest::CallToolRequest(mut call),
                ..
            })))) => {
                let map = call.extensions.remove::<rmcp::model::RequestMetaObject>();
                let meta = map.as_ref().map(|map| Box::new(CallMeta::from_map(map)));
                Taken::Call {
                    id,
                    params: call.params,
                    meta,
                    map,
                }
            }
            Ok(Some(Decoded::Message(JsonRpcMessage::Request(JsonRpcRequest {
                id,
                request:
                    request @ (ClientRequest::ListToolsRequest(_) | ClientRequest::PingRequest(_)),
                ..
            })))) => Taken::Other(id, request),
            _ => return None,
        };
        match &taken {
            Taken::Call { params, meta, .. } => {
                if let Some(meta) = meta.as_deref()
                    && (meta.version.is_some()
                        || meta.capabilities.is_some()
                        || meta.log_level.is_some())
                {
                    return None;
                }
                let mount = &self.sessions.shared.mount;
                if let Some(position) = mount.tool_position(&params.name)
                    && mount.tools()[position].spec.task_support != crate::tool::TaskSupport::Never
                {
                    return None;
                }
            }
            Taken::Other(_, request) => {
                use rmcp::model::GetMeta;
                let meta = request.get_meta();
                if meta.protocol_version().is_some() || meta.log_level().is_some() {
                    return None;
                }
            }
        }
        Some((session, taken))
    }

    async fn dispatch(
        &self,
        session: Arc<Session>,
        taken: Taken,
        reserved: &mut Option<Reserved>,
    ) -> Response {
        match taken {
            Taken::Other(id, mut request) => {
                let number = session.number();
                let context = inline::context(id.clone(), &mut request, session.peer.clone());
                let handled =
                    inline::guarded(Service::handle_request(&session.handler, request, context))
                        .await;
                let answer = inline::Answer::from(inline::message(id, handled));
                sse_body(finished(number, &[], &answer))
            }
            Taken::Call {
                id,
                params,
                meta,
                map,
            } => {
                let busy = |why: String, details: serde_json::Value| {
                    let busy = crate::ToolError::busy(why).with_details(details);
                    let refused =
                        inline::Called::from(Ok(crate::serve::convert::failure(&busy).into()));
                    sse_body(finished(
                        session.number(),
                        &[],
                        &tool_answer(id.clone(), refused),
                    ))
                };
                let Ok(own) = session.calls.clone().try_acquire_owned() else {
                    return busy(
                        format!(
                            "{MAX_SESSION_CALLS} tool calls of this session are already running"
                        ),
                        serde_json::json!({ "max_session_calls": MAX_SESSION_CALLS }),
                    );
                };
                let Ok(slot) = self.calls.clone().try_acquire_owned() else {
                    return busy(
                        format!(
                            "{MAX_RUNNING_CALLS} tool calls are already running in this server's HTTP sessions"
                        ),
                        serde_json::json!({ "max_running_calls": MAX_RUNNING_CALLS }),
                    );
                };
                let held = Held {
                    _slot: slot,
                    _own: own,
                    _body: reserved.take(),
                };
                self.call(session, id, params, meta, map, held).await
            }
        }
    }

    async fn call(
        &self,
        session: Arc<Session>,
        id: RequestId,
        mut params: CallToolRequestParams,
        meta: Option<Box<CallMeta>>,
        map: Option<rmcp::model::RequestMetaObject>,
        held: Held,
    ) -> Response {
        let number = session.number();
        let meta = meta.unwrap_or_default();
        let mut context = RequestContext::new(id.clone(), session.peer.clone());
        if let Some(map) = map {
            context.meta = map;
        }
        if session.ct.is_cancelled() {
            context.ct.cancel();
        }
        let stream = Arc::new(CallStream::new(number, context.ct.clone()));
        if let Some(token) = &meta.progress {
            session.progress.add(token.clone(), stream.clone());
        }
        let handler = session.handler.clone();
        let step = std::future::poll_fn(|cx| {
            let params = std::mem::replace(&mut params, CallToolRequestParams::new(""));
            Poll::Ready(begin(&handler, params, &context, &meta, cx))
        })
        .await;
        let running = match step {
            Started::Answered(called) => {
                let answer = tool_answer(id, called);
                let notes: Vec<ServerSseMessage> = {
                    if meta.progress.is_some() {
                        session.progress.remove(&stream);
                    }
                    lock(&stream.inner).kept.drain(..).collect()
                };
                return sse_body(finished(number, &notes, &answer));
            }
            Started::Task(task) => {
                let id = id.clone();
                boxed(async move { tool_answer(id, inline::guarded(task).await.into()) })
            }
            Started::Waiting(running) => {
                let ct = context.ct.clone();
                let id = id.clone();
                boxed(async move { tool_answer(id, inline::guarded_call(running.run(&ct)).await) })
            }
        };
        drop(context);
        let (tx, rx) = mpsc::channel(KEPT_EVENTS);
        let first = {
            let mut inner = lock(&stream.inner);
            // Fewer than `KEPT_EVENTS` (the priming event is among them): the channel holds them.
            for event in &inner.kept {
                let _ = tx.try_send(event.clone());
            }
            inner.tx = Some(tx);
            stream.priming()
        };
        {
            let mut state = lock(&session.state);
            state.calls.retain(|_, call| !call.expired());
            state.calls.insert(number, stream.clone());
            state.by_request.insert(id.clone(), number);
        }
        let has_token = meta.progress.is_some();
        let sessions = self.sessions.clone();
        tokio::spawn(async move {
            let _held = held;
            let mut running = running;
            // rmcp's worker sees a call's progress and keeps the session alive while it comes; this call's
            // progress passes it by, so the session is touched while the call runs (with or without
            // progress: a session is not closed under a call in flight).
            let mut touch = tokio::time::interval(sessions.touch_every);
            touch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // Cancelled, the call still runs to its end (it sees the cancellation), as rmcp's would; its
            // answer then goes nowhere.
            let answer = loop {
                tokio::select! {
                    biased;
                    answer = &mut running => break answer,
                    () = session.ct.cancelled() => {
                        stream.ct.cancel();
                        break running.await;
                    }
                    _ = touch.tick() => sessions.touch(&session).await,
                }
            };
            let cancelled_by_client = lock(&stream.inner).completed_at.is_some();
            {
                let mut state = lock(&session.state);
                if !cancelled_by_client
                    && state
                        .calls
                        .get(&number)
                        .is_some_and(|c| Arc::ptr_eq(c, &stream))
                {
                    state.calls.remove(&number);
                }
                if state.by_request.get(&id) == Some(&number) {
                    state.by_request.remove(&id);
                }
            }
            if has_token {
                session.progress.remove(&stream);
            }
            match answer {
                answer if !stream.ct.is_cancelled() => {
                    stream.push(answer.into_message());
                    lock(&stream.inner).tx = None;
                }
                _ if cancelled_by_client => {}
                _ => stream.end(),
            }
        });
        streaming_body(first, rx)
    }
}

/// What a running call holds until it ends: its place among the running calls, and its body's bytes.
/// Only held: both are given back when the call's task drops it.
struct Held {
    _slot: OwnedSemaphorePermit,
    /// The session's share ([`MAX_SESSION_CALLS`]).
    _own: OwnedSemaphorePermit,
    _body: Option<Reserved>,
}

type Answering = std::pin::Pin<Box<dyn Future<Output = inline::Answer> + Send>>;

fn boxed(future: impl Future<Output = inline::Answer> + Send + 'static) -> Answering {
    Box::pin(future)
}

trait IntoMessage {
    fn into_message(self) -> ServerJsonRpcMessage;
}

impl IntoMessage for inline::Answer {
    /// rmcp's form: the structured text parsed into the result.
    fn into_message(self) -> ServerJsonRpcMessage {
        let inline::Answer {
            message,
            structured,
        } = self;
        match (message, structured) {
            (JsonRpcMessage::Response(mut response), Some(structured)) => {
                if let rmcp::model::ServerResult::CallToolResult(result) = &mut response.result
                    && result.structured_content.is_none()
                {
                    result.structured_content = serde_json::from_str(structured.get()).ok();
                }
                JsonRpcMessage::Response(response)
            }
            (message, _) => message,
        }
    }
}

fn begin(
    handler: &McpHandler,
    params: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
    meta: &CallMeta,
    cx: &mut Context<'_>,
) -> Started {
    let begun = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        handler.start_tool(params, context, meta, CallToken::Own, cx)
    }));
    begun.unwrap_or_else(|panic| {
        let panic = super::super::panic::message(panic);
        Started::Answered(Err(inline::panicked(&panic)).into())
    })
}

/// What rmcp's session answers a legacy `tools/call` with.
fn tool_answer(id: RequestId, called: inline::Called) -> inline::Answer {
    let inline::Called {
        response,
        structured,
    } = called;
    inline::Answer {
        message: inline::message(id, inline::shape(response, false)),
        structured,
    }
}
