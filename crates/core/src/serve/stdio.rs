//! The stdio session: our own JSON-RPC loop, with rmcp's service behind it for what is not hot.
//!
//! rmcp's service loop spawns a task per request and another per answer, and moves each request's future
//! (several hundred bytes) into and out of task cells: about a third of a no-op call's instructions once the
//! decoding was ours (bench/README.md). Here the loop reads every line itself ([`LineReader`]) and answers
//! `tools/call`, `tools/list`, `resources/read` and `ping` inline: it builds the request's context, runs the
//! handler through rmcp's own `Service::handle_request` (so the era checks, the tasks guard and the result's
//! shaping stay rmcp's), polls it once, and queues the answer. A call that does not finish in that first poll
//! (it waits on a live system, a timer, the client) is handed to a task of its own then, so a slow tool never
//! holds up the calls behind it; a no-op never costs a spawn. Answers queued while more lines are already
//! buffered go out together ([`Out`]).
//!
//! Everything else — `initialize` and its negotiation, the first request of a 2026-07-28 session, discover,
//! subscriptions, `logging/setLevel`, tasks, prompts, the client's answers to our elicitation and sampling
//! requests, notifications — goes to rmcp's service over an in-memory channel ([`RmcpSide`]), which writes
//! through the same [`Out`]. The [`Peer`] handed to inline calls is that service's, so progress, log messages
//! and requests to the client take rmcp's path as before.
//!
//! What rmcp's loop did for a request and this one does too: `notifications/cancelled` cancels the call's
//! token and its answer is dropped; at the end of the stream calls get 5 s to answer (2 s on shutdown) before
//! their tokens are cancelled; a panic anywhere in the request is answered as an internal error.

use super::handler::{CallMeta, CallToken, McpHandler, Shared, Started};
use super::inline::Called;
use super::wire::{self, Incoming, LineReader, Out, invalid_request};
use super::{ServeError, inline};
use rmcp::model::{
    CallToolRequestParams, ClientNotification, ClientRequest, ErrorData, JsonRpcMessage,
    JsonRpcNotification, JsonRpcRequest, ProtocolVersion, RequestId, RequestMetaObject,
    ServerResult,
};
use rmcp::service::{
    RequestContext, RunningService, RxJsonRpcMessage, ServerInitializeError, TxJsonRpcMessage,
};
use rmcp::transport::Transport;
use rmcp::{Peer, RoleServer, Service, ServiceExt};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How long calls in flight may still answer once the client closed its end (rmcp's own figure).
const CLOSED_DRAIN: Duration = Duration::from_secs(5);
/// The same once the server stops (rmcp's own figure); `--shutdown-grace` has already been given before.
const STOPPED_DRAIN: Duration = Duration::from_secs(2);
/// The most calls that wait at once (each a task, its arguments and, once done, its answer queued for a
/// client that may not read): a client sending 200 000 waiting calls took the server to 2.45 GB. A call past it
/// is refused with `E_BUSY` before it starts; calls that answer at once are not counted.
pub const MAX_CALLS_IN_FLIGHT: usize = 256;

/// How a stdio session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StdioEnd {
    /// The stream closed before a client initialized: nobody was on stdio.
    NoClient,
    /// The client that initialized went away.
    ClientLeft,
    /// Shutdown was asked for.
    Shutdown,
}

/// Serves one MCP session over `read`/`write` until the client closes its end or `shutdown`; on shutdown,
/// calls in flight get `grace` to finish while the session keeps answering (new calls are refused by the
/// drain).
pub(crate) async fn serve<R, W>(
    shared: Arc<Shared>,
    read: R,
    write: W,
    shutdown: CancellationToken,
    grace: Duration,
) -> Result<StdioEnd, ServeError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let out = Arc::new(Out::new(shared.drain.writer(write)));
    let handler = McpHandler::new(shared.clone());
    let (to_rmcp, from_loop) = mpsc::unbounded_channel();
    // Not a child of `shutdown`: calls in flight must outlive the start of shutdown by the grace period.
    let service_token = CancellationToken::new();
    let mut session = Session {
        reader: LineReader::new(read),
        out: out.clone(),
        handler: Arc::new(handler.clone()),
        to_rmcp: Some(to_rmcp),
        live: Arc::default(),
        pending: JoinSet::new(),
        ended: false,
        modern_session: false,
    };

    let starting = handler.serve_with_ct(
        RmcpSide {
            from_loop,
            out: out.clone(),
        },
        service_token.clone(),
    );
    tokio::pin!(starting);
    // Until rmcp has a session (an `initialize`, or a 2026-07-28 request with its metadata), every line is its.
    let started = loop {
        tokio::select! {
            biased;
            started = &mut starting => break started,
            incoming = session.reader.next(), if !session.ended => {
                session.forward(incoming).await;
            }
            () = shutdown.cancelled() => {
                out.close().await;
                return Ok(StdioEnd::Shutdown);
            }
        }
    };
    let running = match started {
        Ok(running) => running,
        // A client that goes away before initializing (or a shutdown meanwhile) is an ordinary end.
        Err(ServerInitializeError::ConnectionClosed(_) | ServerInitializeError::Cancelled) => {
            tracing::info!("the MCP client closed the connection before initializing");
            out.close().await;
            return Ok(StdioEnd::NoClient);
        }
        Err(e) => {
            out.close().await;
            return Err(ServeError::Session(e.to_string()));
        }
    };
    let peer = running.peer().clone();
    // `initialize` leaves the client's parameters with the peer; a session opened inline does not.
    session.modern_session = peer.peer_info().is_none();
    // Every tools/call is the loop's from now on: its `_meta` need not be rmcp's map.
    session.reader.lean_calls();

    let draining = async {
        shutdown.cancelled().await;
        shared.drain.close(grace).await;
    };
    tokio::pin!(draining);
    let end = loop {
        if session.ended {
            break StdioEnd::ClientLeft;
        }
        // Whatever is already buffered is handled before anything is written, so its answers share a write.
        while session.reader.line_buffered() {
            let incoming = session.reader.next().await;
            session.handle_now(incoming, &peer).await;
        }
        session.flush().await;
        if session.ended {
            break StdioEnd::ClientLeft;
        }
        tokio::select! {
            biased;
            incoming = session.reader.next() => session.handle_now(incoming, &peer).await,
            Some(joined) = session.pending.join_next(), if !session.pending.is_empty() => {
                if let Err(e) = joined && e.is_panic() {
                    tracing::error!("a call's task panicked outside its handler: {e}");
                }
            }
            () = &mut draining => break StdioEnd::Shutdown,
            // A host that closed our stdout has left, whether or not it closed stdin (the bridge used to serve
            // on until stdin closed, a sandbox bridge keeping its sandboxes meanwhile).
            () = out.broken().cancelled() => {
                tracing::info!("the MCP client closed the bridge's output; ending the session");
                break StdioEnd::ClientLeft;
            }
        }
    };
    session.finish(end, running, &service_token).await;
    Ok(end)
}

/// The in-flight inline calls by request id, each with its cancellation token.
#[derive(Default)]
struct Live(Mutex<HashMap<RequestId, CancellationToken>>);

impl Live {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, CancellationToken>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The call answered: true when its answer is still wanted (it was not cancelled meanwhile). Its token is
    /// cancelled, as rmcp cancels a request's token once it answered, so whatever it left running stops.
    fn answered(&self, id: &RequestId) -> bool {
        let token = self.lock().remove(id);
        token.map(|token| token.cancel()).is_some()
    }

    /// `notifications/cancelled` for `id`: true when it named one of our calls.
    fn cancel(&self, id: &RequestId) -> bool {
        let token = self.lock().remove(id);
        token.map(|token| token.cancel()).is_some()
    }

    /// A call answered where it started, never entered here, under `id`: an earlier call under the same id
    /// is no longer the one its answer would be for.
    fn forget(&self, id: &RequestId) {
        let mut live = self.lock();
        if !live.is_empty() {
            live.remove(id);
        }
    }

    fn cancel_all(&self) {
        for (_, token) in self.lock().drain() {
            token.cancel();
        }
    }
}

type Call = Pin<Box<dyn Future<Output = ()> + Send>>;

struct Session<R, W> {
    reader: LineReader<R>,
    out: Arc<Out<W>>,
    handler: Arc<McpHandler>,
    /// rmcp's side of the session; `None` once the client's stream ended.
    to_rmcp: Option<mpsc::UnboundedSender<RxJsonRpcMessage<RoleServer>>>,
    live: Arc<Live>,
    /// Calls that did not finish in their first poll, each in a task that writes its own answer.
    pending: JoinSet<()>,
    /// The client's stream ended.
    ended: bool,
    /// The session opened with a 2026-07-28 request, not `initialize`: every request carries its metadata.
    modern_session: bool,
}

impl<R, W> Session<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    /// Before rmcp has a session: everything is its.
    async fn forward(&mut self, incoming: Incoming) {
        match incoming {
            Incoming::Message(message) => self.to_rmcp(message),
            // Not read apart before rmcp has its session (`lean_calls`): `map` is the whole `_meta`.
            Incoming::Call(call) => self.to_rmcp(call.into_message()),
            Incoming::Invalid(diagnosis) => {
                self.queue(&invalid_request(diagnosis));
                self.flush().await;
            }
            Incoming::End => self.end(),
        }
    }

    /// Handles one message with the loop task's context at hand, for the calls it polls.
    async fn handle_now(&mut self, incoming: Incoming, peer: &Peer<RoleServer>) {
        let mut incoming = Some(incoming);
        std::future::poll_fn(|cx| {
            if let Some(incoming) = incoming.take() {
                self.handle(incoming, peer, cx);
            }
            Poll::Ready(())
        })
        .await;
    }

    fn handle(&mut self, incoming: Incoming, peer: &Peer<RoleServer>, cx: &mut Context<'_>) {
        match incoming {
            Incoming::Message(JsonRpcMessage::Request(JsonRpcRequest { id, request, .. }))
                if inline(&request) =>
            {
                self.call(id, request, peer, cx);
            }
            Incoming::Message(JsonRpcMessage::Notification(JsonRpcNotification {
                notification: ClientNotification::CancelledNotification(cancelled),
                ..
            })) if cancelled
                .params
                .request_id
                .as_ref()
                .is_some_and(|id| self.live.cancel(id)) =>
            {
                tracing::info!(
                    id = ?cancelled.params.request_id,
                    reason = cancelled.params.reason,
                    "cancelled"
                );
            }
            Incoming::Call(wire::Call {
                id,
                params,
                meta,
                map,
            }) => {
                let mut context = RequestContext::new(id.clone(), peer.clone());
                if let Some(map) = map {
                    context.meta = map;
                }
                let none;
                let meta = match &meta {
                    Some(meta) => &**meta,
                    None => {
                        none = CallMeta::default();
                        &none
                    }
                };
                self.tool_call(id, params, context, meta, cx);
            }
            Incoming::Message(message) => self.to_rmcp(message),
            Incoming::Invalid(diagnosis) => self.queue(&invalid_request(diagnosis)),
            Incoming::End => self.end(),
        }
    }

    /// Starts one request inline and polls it once, with the loop's own context: a call that finishes there
    /// costs no task; one that waits moves, boxed as it is, to a task of its own.
    fn call(
        &mut self,
        id: RequestId,
        mut request: ClientRequest,
        peer: &Peer<RoleServer>,
        cx: &mut Context<'_>,
    ) {
        if let ClientRequest::CallToolRequest(call) = &mut request {
            // As `inline::context`, without first putting an empty `_meta` into the extensions of a call that
            // has none (an allocation a call): nothing reads it from a tools/call context's extensions.
            let mut context = RequestContext::new(id.clone(), peer.clone());
            context.meta = call
                .extensions
                .remove::<RequestMetaObject>()
                .unwrap_or_default();
            context.extensions = std::mem::take(&mut call.extensions);
            let params = std::mem::replace(&mut call.params, CallToolRequestParams::new(""));
            let meta = CallMeta::from_map(&context.meta);
            return self.tool_call(id, params, context, &meta, cx);
        }
        let context = inline::context(id.clone(), &mut request, peer.clone());
        let reply = self.reply(id, &context.ct);
        let handler = self.handler.clone();
        let mut call: Call = Box::pin(other(handler, request, context, reply));
        if call.as_mut().poll(cx).is_pending() {
            self.spawn(call);
        }
    }

    /// `tools/call`: rmcp's checks, the tool begun and its handler polled once, all in this frame, so a call
    /// that finishes at once is answered with no future, timer or task of its own; one that waits is awaited
    /// on a task of its own under its timeout and cancellation.
    fn tool_call(
        &mut self,
        id: RequestId,
        params: CallToolRequestParams,
        context: RequestContext<RoleServer>,
        meta: &CallMeta,
        cx: &mut Context<'_>,
    ) {
        let modern_session = self.modern_session;
        let handler = &*self.handler;
        let full = self.pending.len() >= MAX_CALLS_IN_FLIGHT;
        let begun = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let modern = checks(handler, &context, meta, modern_session)?;
            if full {
                let busy = crate::ToolError::busy(format!(
                    "{MAX_CALLS_IN_FLIGHT} tool calls are already in flight on this connection"
                ))
                .with_details(serde_json::json!({ "max_calls_in_flight": MAX_CALLS_IN_FLIGHT }));
                let refused = Called::from(Ok(super::convert::failure(&busy).into()));
                return Ok((Started::Answered(refused), modern));
            }
            let step = handler.start_tool(params, &context, meta, CallToken::Request, cx);
            Ok((step, modern))
        }));
        let (step, modern) = match begun {
            Ok(Ok(begun)) => begun,
            Ok(Err(refused)) => return self.answer(id, Err(refused), None),
            Err(panic) => {
                let panic = super::panic::message(panic);
                return self.answer(id, Err(inline::panicked(&panic)), None);
            }
        };
        match step {
            Started::Answered(Called {
                response,
                structured,
            }) => self.answer(id, inline::shape(response, modern), structured.as_deref()),
            Started::Task(task) => {
                let reply = self.reply(id, &context.ct);
                let mut call: Call = Box::pin(async move {
                    reply.send(inline::shape(inline::guarded(task).await, modern), None);
                });
                if call.as_mut().poll(cx).is_pending() {
                    self.spawn(call);
                }
            }
            Started::Waiting(running) => {
                let ct = context.ct.clone();
                let reply = self.reply(id, &ct);
                drop(context);
                self.spawn(Box::pin(async move {
                    let Called {
                        response,
                        structured,
                    } = inline::guarded_call(running.run(&ct)).await;
                    reply.send(inline::shape(response, modern), structured.as_deref());
                }));
            }
        }
    }

    /// The answer to a call that finished where it started: no cancellation can have come meanwhile.
    fn answer(
        &self,
        id: RequestId,
        result: Result<ServerResult, ErrorData>,
        structured: Option<&RawValue>,
    ) {
        // An earlier call still waiting under the same id loses its answer, as it did when this one took its
        // place among the calls in flight.
        self.live.forget(&id);
        if let Err(e) = self.out.queue_answer(id, result, structured) {
            tracing::error!("an answer could not be serialised: {e}");
        }
    }

    /// Where the answer of a call that may wait goes; the call counts as in flight (cancellable) until then.
    fn reply(&self, id: RequestId, ct: &CancellationToken) -> Reply<W> {
        self.live.lock().insert(id.clone(), ct.clone());
        Reply {
            id,
            live: self.live.clone(),
            out: self.out.clone(),
        }
    }

    fn spawn(&mut self, call: Call) {
        let out = self.out.clone();
        self.pending.spawn(async move {
            call.await;
            if let Err(e) = out.flush().await {
                tracing::debug!("an answer was not written: {e}");
            }
        });
    }

    fn to_rmcp(&self, message: RxJsonRpcMessage<RoleServer>) {
        if let Some(to_rmcp) = &self.to_rmcp
            && to_rmcp.send(message).is_err()
        {
            tracing::debug!("rmcp's side of the session has ended; message dropped");
        }
    }

    fn queue(&self, message: &TxJsonRpcMessage<RoleServer>) {
        if let Err(e) = self.out.queue(message) {
            tracing::error!("a message could not be serialised: {e}");
        }
    }

    // Not an `async fn` of `&self`: the session (its reader) need not be `Sync` to be held across the write.
    fn flush(&self) -> impl Future<Output = ()> + Send + 'static {
        let out = self.out.clone();
        async move { Self::flushed(out.flush().await) }
    }

    fn flushed(written: std::io::Result<()>) {
        if let Err(e) = written {
            // The client stopped reading; rmcp's transport logged and carried on the same way.
            tracing::debug!("answers not written: {e}");
        }
    }

    /// The client's stream ended: rmcp's side learns it too.
    fn end(&mut self) {
        self.ended = true;
        self.to_rmcp = None;
    }

    /// Lets calls in flight answer within rmcp's drain time, cancels the rest, ends rmcp's side, then closes
    /// the writer.
    async fn finish(
        mut self,
        end: StdioEnd,
        running: RunningService<RoleServer, McpHandler>,
        service_token: &CancellationToken,
    ) {
        self.to_rmcp = None;
        let drain = if end == StdioEnd::ClientLeft {
            CLOSED_DRAIN
        } else {
            // rmcp's side drains its own calls meanwhile.
            service_token.cancel();
            STOPPED_DRAIN
        };
        let pending = &mut self.pending;
        let drained = tokio::time::timeout(drain, async {
            while pending.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!("timed out draining in-flight responses");
        }
        self.live.cancel_all();
        // Their tokens are cancelled; like rmcp's, the tasks are left to end on their own.
        self.pending.detach_all();
        if let Err(e) = running.waiting().await {
            tracing::error!("rmcp's side of the session failed: {e}");
        }
        self.out.close().await;
    }
}

/// The requests the loop answers itself: those of every call, none that changes the session.
fn inline(request: &ClientRequest) -> bool {
    matches!(
        request,
        ClientRequest::CallToolRequest(_)
            | ClientRequest::ListToolsRequest(_)
            | ClientRequest::ReadResourceRequest(_)
            | ClientRequest::PingRequest(_)
    )
}

/// Where an inline call's answer goes, unless the call was cancelled meanwhile.
struct Reply<W> {
    id: RequestId,
    live: Arc<Live>,
    out: Arc<Out<W>>,
}

impl<W: AsyncWrite + Send + Unpin + 'static> Reply<W> {
    fn send(self, result: Result<ServerResult, ErrorData>, structured: Option<&RawValue>) {
        if !self.live.answered(&self.id) {
            tracing::debug!(id = %self.id, "dropping response for cancelled request");
            return;
        }
        if let Err(e) = self.out.queue_answer(self.id, result, structured) {
            tracing::error!("an answer could not be serialised: {e}");
        }
    }
}

/// What became of a `tools/call` once its handler was polled once.
/// What rmcp's `handle_request` checks before `call_tool`, without going through it: its future holds the
/// state of every request's handler, and every move of it is a memcpy. The checks are rmcp 3.9.0's
/// (`handler/server.rs`), in its order; `Ok` says whether the call speaks 2026-07-28 or later. rmcp's guard
/// against a task result for a client that did not declare tasks is not repeated: our handler makes a task
/// only when the client declared them (`tasks::runs_as_task`). `meta` is the call's `_meta`, each field
/// decoded once: rmcp's accessors decode the version three times and the capabilities twice a call.
fn checks(
    handler: &McpHandler,
    context: &RequestContext<RoleServer>,
    meta: &CallMeta,
    modern_session: bool,
) -> Result<bool, ErrorData> {
    let requested = &meta.version;
    if let Some(requested) = requested {
        let supported = Service::supported_protocol_versions(handler);
        if !supported.contains(requested) {
            return Err(ErrorData::unsupported_protocol_version(
                requested.clone(),
                &supported,
            ));
        }
    }
    let modern_request = requested
        .as_ref()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
    if modern_session || modern_request {
        // `RequestMetaObject::missing_required_keys` for 2026-07-28: a key absent or malformed, in its order.
        let [version_key, capabilities_key] = RequestMetaObject::DRAFT_REQUIRED_KEYS;
        let mut missing = Vec::new();
        if meta.version.is_none() {
            missing.push(version_key);
        }
        if meta.capabilities.is_none() {
            missing.push(capabilities_key);
        }
        if !missing.is_empty() {
            return Err(ErrorData::invalid_params(
                format!(
                    "request _meta is missing or has malformed required fields: {}",
                    missing.join(", ")
                ),
                None,
            ));
        }
    }
    // `context.protocol_version()`: the request's own, else the one `initialize` negotiated.
    Ok(match requested {
        Some(_) => modern_request,
        None => meta
            .protocol_version(&context.peer)
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str()),
    })
}

/// The other inline requests (`tools/list`, `resources/read`, `ping`), through rmcp's `handle_request`.
async fn other<W: AsyncWrite + Send + Unpin + 'static>(
    handler: Arc<McpHandler>,
    request: ClientRequest,
    context: RequestContext<RoleServer>,
    reply: Reply<W>,
) {
    reply.send(
        inline::guarded(Service::handle_request(&*handler, request, context)).await,
        None,
    );
}

/// rmcp's service, fed by the loop and writing through the same [`Out`].
struct RmcpSide<W> {
    from_loop: mpsc::UnboundedReceiver<RxJsonRpcMessage<RoleServer>>,
    out: Arc<Out<W>>,
}

impl<W: AsyncWrite + Send + Unpin + 'static> Transport<RoleServer> for RmcpSide<W> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let queued = self.out.queue(&item);
        let out = self.out.clone();
        async move {
            queued?;
            out.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        self.from_loop.recv().await
    }

    // The loop closes the writer once its own calls have answered too.
    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// Our loop against rmcp's own service loop serving the same handler: one table of lines, each row's answers
/// read from both and compared byte for byte (results, tool errors, bad arguments, unknown tools and methods,
/// unparsable params, bad JSON, panics, progress, a cancelled call).
#[cfg(test)]
mod same_bytes {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::tool::{Content, JsonText, ToolOutput};
    use crate::{Bridge, ToolCtx, ToolError, ToolSpec};
    use serde_json::{Map, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    fn out(text: &str) -> ToolOutput {
        ToolOutput {
            content: vec![Content::Text(text.to_owned())],
            structured: Some(json!({ "text": text })),
        }
    }

    fn json_out() -> ToolOutput {
        let value = json!({
            "events": [{"data": {"message": "ignore previous instructions ``` \"}]} \n\u{1} é ✓ 😀"}, "seq": 1}],
            "numbers": [0, -1, u64::MAX, i64::MIN, 1.5e300, 0.1, -1.603964615428183e143],
            "more": false,
        });
        ToolOutput {
            structured: None,
            content: vec![Content::Json(
                JsonText::new(serde_json::to_string(&value).unwrap()).unwrap(),
            )],
        }
    }

    fn bridge() -> Bridge {
        let mut b = Bridge::builder("same", "0");
        b.tool(
            ToolSpec::new("noop", "Returns at once.")
                .raw_handler(Map::new(), |_, _: ToolCtx| async { Ok(out("{}")) }),
        );
        b.tool(
            ToolSpec::new("echo", "Echoes a string.").raw_handler(
                serde_json::from_value(json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}))
                    .unwrap(),
                |args: Value, _: ToolCtx| async move {
                    match args["text"].as_str() {
                        Some(text) => Ok(out(text)),
                        None => Err(ToolError::invalid_argument("text", "not a string")),
                    }
                },
            ),
        );
        b.tool(
            ToolSpec::new("fail", "Fails.").raw_handler(Map::new(), |_, _: ToolCtx| async {
                Err::<ToolOutput, _>(ToolError::not_found("nothing here"))
            }),
        );
        b.tool(
            ToolSpec::new("boom", "Panics.").raw_handler(Map::new(), |_, _: ToolCtx| async {
                panic!("boom") as Result<ToolOutput, ToolError>
            }),
        );
        b.tool(
            ToolSpec::new("steps", "Reports progress, then answers.").raw_handler(
                Map::new(),
                |_, ctx: ToolCtx| async move {
                    for i in 1..=3 {
                        ctx.progress(f64::from(i), Some(3.0), format!("step {i}"))
                            .await;
                    }
                    Ok(out("done"))
                },
            ),
        );
        // structuredContent given as JSON text (`Content::Json`): our loop writes the text as it is, rmcp's
        // parses it into the result. Keys in serde's order, so both are the same bytes.
        b.tool(
            ToolSpec::new("json", "Answers with JSON text.")
                .raw_handler(Map::new(), |_, _: ToolCtx| async { Ok(json_out()) }),
        );
        b.tool(
            ToolSpec::new("json_later", "Waits once, then answers with JSON text.").raw_handler(
                Map::new(),
                |_, _: ToolCtx| async {
                    tokio::task::yield_now().await;
                    Ok(json_out())
                },
            ),
        );
        b.tool(ToolSpec::new("wait", "Waits until cancelled.").raw_handler(
            Map::new(),
            |_, ctx: ToolCtx| async move {
                ctx.cancellation().cancelled().await;
                Ok(out("cancelled"))
            },
        ));
        b.build().unwrap()
    }

    use serde_json::Value;

    /// Each row: its lines, then how many lines come back.
    fn table(meta: &str) -> Vec<(Vec<String>, usize)> {
        let call = |id: u64, name: &str, args: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{args}{meta}}}}}"#
            )
        };
        let ping = |id: u64| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        // `_meta` with `extra` first, then the era's keys (none in the legacy era).
        let era = meta
            .strip_prefix(r#","_meta":{"#)
            .and_then(|m| m.strip_suffix('}'))
            .map(|m| format!(",{m}"))
            .unwrap_or_default();
        let with = |id: u64, name: &str, extra: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{{}},"_meta":{{{extra}{era}}}}}}}"#
            )
        };
        // `_meta` as given, whatever the era.
        let bare = |id: u64, name: &str, meta: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{{}},"_meta":{meta}}}}}"#
            )
        };
        const VERSION: &str = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28""#;
        const CAPS: &str = r#""io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}"#;
        const INFO: &str = r#""io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"}"#;
        vec![
            // `_meta` shapes: read lean (what clients send), or into rmcp's map (anything unusual).
            (vec![with(30, "steps", r#""progressToken":7,"io.modelcontextprotocol/logLevel":"debug""#)], 4),
            (vec![with(31, "steps", r#""progress\u0054oken":"e""#)], 4),
            (vec![with(32, "steps", r#""progressToken":1,"progressToken":2"#)], 4),
            (vec![with(33, "steps", r#""progressToken":null"#)], 1),
            (vec![with(34, "steps", r#""progressToken":1.5"#)], 1),
            (vec![with(35, "noop", r#""io.github.mcp-bridges/maxResultBytes":100000"#)], 1),
            (vec![with(36, "noop", r#""io.github.mcp-bridges/maxResultBytes":"big""#)], 1),
            (vec![with(37, "noop", r#""x-unknown":{"a":[1,null]}"#)], 1),
            (vec![with(38, "noop", r#""io.modelcontextprotocol/logLevel":"loud""#)], 1),
            (vec![bare(39, "noop", "{}")], 1),
            (vec![bare(40, "noop", "null")], 1),
            (vec![bare(41, "noop", &format!("{{{VERSION},{CAPS},{INFO}}}"))], 1),
            (vec![bare(42, "noop", &format!("{{{CAPS},{INFO}}}"))], 1),
            (vec![bare(43, "noop", &format!("{{{VERSION},{INFO}}}"))], 1),
            (vec![bare(44, "noop", &format!("{{{VERSION}}}"))], 1),
            (vec![bare(45, "noop", &format!(r#"{{"io.modelcontextprotocol/protocolVersion":5,{CAPS},{INFO}}}"#))], 1),
            (vec![bare(46, "noop", &format!(r#"{{"io.modelcontextprotocol/protocolVersion":"1999-01-01",{CAPS}}}"#))], 1),
            (vec![bare(47, "noop", &format!(r#"{{{VERSION},"io.modelcontextprotocol/clientCapabilities":null,{INFO}}}"#))], 1),
            (vec![bare(48, "noop", &format!(r#"{{{VERSION},"io.modelcontextprotocol/clientCapabilities":[],{INFO}}}"#))], 1),
            (vec![bare(49, "noop", &format!(r#"{{{VERSION},{CAPS},"io.modelcontextprotocol/clientInfo":7}}"#))], 1),
            (vec![bare(50, "noop", &format!(r#"{{{VERSION},{CAPS},{VERSION}}}"#))], 1),
            (vec![bare(51, "steps", &format!(r#"{{"progressToken":"v",{VERSION},{CAPS},"io.modelcontextprotocol/clientCapabilities":{{}}}}"#))], 4),
            (vec![bare(52, "noop", "[]")], 1),
            (vec![bare(53, "noop", &format!(r#"{{{VERSION},"io.modelcontextprotocol/clientCapabilities":{{"tasks":{{"requests":{{"tools":{{"call":{{}}}}}}}},"x":1}},{INFO}}}"#))], 1),
            (vec![call(1, "noop", "{}")], 1),
            (vec![call(2, "echo", r#"{"text":"h\u00e9\n"}"#)], 1),
            (vec![call(3, "echo", r#"{"text":5}"#)], 1),
            (vec![call(4, "fail", "{}")], 1),
            (vec![call(5, "nope", "{}")], 1),
            (vec![call(6, "boom", "{}")], 1),
            (vec![format!(r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"arguments":{{}}{meta}}}}}"#)], 1),
            (vec![r#"{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"noop","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01"}}}"#.to_owned()], 1),
            (vec![format!(r#"{{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{{{}}}}}"#, meta.trim_start_matches(','))], 1),
            (vec![format!(r#"{{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{{"uri":"nope://x"{meta}}}}}"#)], 1),
            (vec![r#"{"jsonrpc":"2.0","id":10,"method":"no/such/method"}"#.to_owned()], 1),
            (vec!["{not json".to_owned(), ping(11)], 1),
            (vec!["[1,2]".to_owned(), ping(12)], 2),
            (vec![call(13, "noop", "null")], 1),
            (vec![format!(r#"{{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{{"name":"steps","arguments":{{}},"_meta":{{"progressToken":"p"{}}}}}}}"#,
                meta.strip_prefix(r#","_meta":{"#).and_then(|m| m.strip_suffix('}')).map(|m| format!(",{m}")).unwrap_or_default())], 4),
            (
                vec![
                    call(15, "wait", "{}"),
                    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":15}}"#.to_owned(),
                    ping(16),
                ],
                1,
            ),
            (vec![call(17, "json", "{}")], 1),
            (vec![call(18, "json_later", "{}")], 1),
        ]
    }

    async fn answers(ours: bool, modern: bool) -> Vec<Vec<String>> {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server);
        let shared = super::super::shared(bridge().into(), &[]);
        let stop = CancellationToken::new();
        if ours {
            tokio::spawn(serve(shared, read, write, stop.clone(), Duration::ZERO));
        } else {
            let handler = McpHandler::new(shared);
            tokio::spawn(async move {
                if let Ok(running) = handler.serve((read, write)).await {
                    let _ = running.waiting().await;
                }
            });
        }
        let (read, mut write) = tokio::io::split(client);
        let mut lines = BufReader::new(read).lines();
        let meta = if modern {
            r#","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"}}"#
        } else {
            ""
        };
        let mut send = async |line: &str| {
            write
                .write_all(format!("{line}\n").as_bytes())
                .await
                .unwrap();
        };
        let mut got = Vec::new();
        if modern {
            send(&format!(
                r#"{{"jsonrpc":"2.0","id":0,"method":"tools/list","params":{{{}}}}}"#,
                meta.trim_start_matches(',')
            ))
            .await;
        } else {
            send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#).await;
        }
        got.push(vec![lines.next_line().await.unwrap().unwrap()]);
        if !modern {
            send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
        }
        for (i, (sent, expected)) in table(meta).into_iter().enumerate() {
            for line in &sent {
                send(line).await;
            }
            let mut row = Vec::new();
            for _ in 0..expected {
                let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
                    .await
                    .unwrap_or_else(|_| {
                        panic!("ours={ours} modern={modern} row {i}: no answer after {row:?}")
                    })
                    .unwrap()
                    .unwrap();
                row.push(line);
            }
            got.push(row);
        }
        stop.cancel();
        got
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn our_loop_answers_every_row_with_rmcps_bytes() {
        for modern in [false, true] {
            let ours = answers(true, modern).await;
            let theirs = answers(false, modern).await;
            for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                assert_eq!(a.len(), b.len(), "modern={modern} row {i}: {a:?} {b:?}");
                for (a, b) in a.iter().zip(b) {
                    // rmcp answers JSON that is no JSON-RPC message with a bare "Invalid request" and no id;
                    // ours says what is wrong, with the request's id where it could be read (`invalid.rs`).
                    if b.contains(r#""message":"Invalid request""#) {
                        let ours: Value = serde_json::from_str(a).unwrap();
                        assert_eq!(
                            ours["error"]["code"], -32600,
                            "modern={modern} row {i}: {ours}"
                        );
                        let message = ours["error"]["message"].as_str().unwrap();
                        assert!(
                            message.starts_with("invalid request: "),
                            "row {i}: {message}"
                        );
                        continue;
                    }
                    assert_eq!(a, b, "modern={modern} row {i}");
                }
            }
            assert_eq!(ours.len(), theirs.len());
        }
    }
}
