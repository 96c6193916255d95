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

use super::handler::{McpHandler, Shared};
use super::wire::{Incoming, LineReader, Out, invalid_request};
use super::{ServeError, panic};
use rmcp::model::{
    ClientNotification, ClientRequest, ErrorData, GetExtensions, GetMeta, JsonRpcMessage,
    JsonRpcNotification, JsonRpcRequest, RequestId,
};
use rmcp::service::{
    RequestContext, RunningService, RxJsonRpcMessage, ServerInitializeError, TxJsonRpcMessage,
};
use rmcp::transport::Transport;
use rmcp::{Peer, RoleServer, Service, ServiceExt};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How long calls in flight may still answer once the client closed its end (rmcp's own figure).
const CLOSED_DRAIN: Duration = Duration::from_secs(5);
/// The same once the server stops (rmcp's own figure); `--shutdown-grace` has already been given before.
const STOPPED_DRAIN: Duration = Duration::from_secs(2);

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
            session.handle(incoming, &peer).await;
        }
        session.flush().await;
        if session.ended {
            break StdioEnd::ClientLeft;
        }
        tokio::select! {
            biased;
            incoming = session.reader.next() => session.handle(incoming, &peer).await,
            Some(joined) = session.pending.join_next(), if !session.pending.is_empty() => {
                if let Err(e) = joined && e.is_panic() {
                    tracing::error!("a call's task panicked outside its handler: {e}");
                }
            }
            () = &mut draining => break StdioEnd::Shutdown,
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
            Incoming::Invalid => {
                self.queue(&invalid_request());
                self.flush().await;
            }
            Incoming::End => self.end(),
        }
    }

    async fn handle(&mut self, incoming: Incoming, peer: &Peer<RoleServer>) {
        match incoming {
            Incoming::Message(JsonRpcMessage::Request(JsonRpcRequest { id, request, .. }))
                if inline(&request) =>
            {
                self.call(id, request, peer).await;
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
            Incoming::Message(message) => self.to_rmcp(message),
            Incoming::Invalid => self.queue(&invalid_request()),
            Incoming::End => self.end(),
        }
    }

    /// Runs one request inline until it first waits; if it does, the rest runs in a task of its own.
    async fn call(&mut self, id: RequestId, mut request: ClientRequest, peer: &Peer<RoleServer>) {
        let mut context = RequestContext::new(id.clone(), peer.clone());
        // The meta first: it is kept in the extensions, which would otherwise take it along.
        context.meta = std::mem::take(request.get_meta_mut());
        context.extensions = std::mem::take(request.extensions_mut());
        self.live.lock().insert(id.clone(), context.ct.clone());
        let handler = self.handler.clone();
        let live = self.live.clone();
        let out = self.out.clone();
        let mut call: Call = Box::pin(async move {
            let answer = answer(&handler, request, context, id.clone()).await;
            if live.answered(&id) {
                if let Err(e) = out.queue(&answer) {
                    tracing::error!(%id, "the answer could not be serialised: {e}");
                }
            } else {
                tracing::debug!(%id, "dropping response for cancelled request");
            }
        });
        let finished = std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx).is_ready()));
        if !finished.await {
            let out = self.out.clone();
            self.pending.spawn(async move {
                call.await;
                if let Err(e) = out.flush().await {
                    tracing::debug!("an answer was not written: {e}");
                }
            });
        }
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

    async fn flush(&self) {
        if let Err(e) = self.out.flush().await {
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

async fn answer(
    handler: &McpHandler,
    request: ClientRequest,
    context: RequestContext<RoleServer>,
    id: RequestId,
) -> TxJsonRpcMessage<RoleServer> {
    match panic::caught(Service::handle_request(handler, request, context)).await {
        Ok(Ok(result)) => JsonRpcMessage::response(result, id),
        Ok(Err(error)) => JsonRpcMessage::error(error, Some(id)),
        // Tool handlers' panics are caught (and answered as a tool error) in the handler; this is the rest.
        Err(panic) => {
            tracing::error!(%id, panic = %panic, "a request panicked; answered as an internal error");
            JsonRpcMessage::error(
                ErrorData::internal_error(
                    format!("internal error (a bug in the bridge): {panic}"),
                    None,
                ),
                Some(id),
            )
        }
    }
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
