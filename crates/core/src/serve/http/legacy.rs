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
//!   (a resume of a request number rmcp never gives) when an eighth of that time has passed since the last.
//!
//! Everything else goes to rmcp as before: unknown sessions, other methods, notifications, responses,
//! batches, a BOM, headers it would refuse or read (another protocol version than the session's, `Accept`
//! parameters, `Mcp-Method`/`Mcp-Name`), a `_meta` with a protocol version, capabilities or log level,
//! task-capable tools, and every request of a session whose client declared elicitation, sampling or roots
//! (a call could send it a request, which must ride the call's own stream and come back to the peer that
//! sent it) or that set a log level (log messages go to the session's standalone stream, rmcp's).

use super::super::edges::is_json;
use super::super::handler::{CallMeta, McpHandler, Shared, Started};
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
    ProtocolVersion, RequestId, ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::{RequestContext, RxJsonRpcMessage, TxJsonRpcMessage, serve_directly_with_ct};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker, SessionError,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use rmcp::transport::{Transport, WorkerTransport};
use rmcp::{Peer, RoleServer, Service};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";
static SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
static PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
static MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
static MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
/// What rmcp's `LocalSessionManager` primes a request's stream with (`SessionConfig::sse_retry`, 3 s).
const RETRY_MS: u64 = 3000;
/// Events of a request's stream kept for `Last-Event-ID`, as rmcp keeps (`SessionConfig::channel_capacity`).
const KEPT_EVENTS: usize = 16;
/// rmcp's SSE keep-alive (`StreamableHttpServerConfig::sse_keep_alive`, 15 s): a comment when nothing else
/// was sent for this long.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// A request number rmcp never gives (it counts from 0 in each session): resuming it touches the session's
/// worker (its idle clock starts again) and does nothing else.
const NO_REQUEST: u64 = u64::MAX;
/// rmcp streams whose number is kept for `Last-Event-ID` after their client went away unanswered.
const MAX_MAPPED: usize = 4096;

/// How often the front restarts rmcp's idle clock for a session it serves: a session's last touch is at most
/// this much older than its last request, so rmcp's keep-alive is the session idle time plus this
/// ([`rmcp_keep_alive`]), and a session closes between `idle` and `idle + idle / 32` after its last request.
pub(crate) fn touch_every(idle: Duration) -> Duration {
    (idle / 32).max(Duration::from_millis(1))
}

/// rmcp's keep-alive for sessions with the front on: see [`touch_every`].
pub(crate) fn rmcp_keep_alive(idle: Duration) -> Duration {
    idle.saturating_add(touch_every(idle))
}

thread_local! {
    /// The handler rmcp's factory made last on this thread. rmcp 3.9.0's `handle_post` calls the factory
    /// (`get_service`) and then `SessionManager::create_session`, whose first poll happens in the same poll
    /// of the request's future (no `.await` between them that could yield): the handler taken at the start of
    /// [`Sessions::create_session`] is the one made for that session. A factory call not followed by
    /// `create_session` (a stateless request's) leaves one the next call replaces.
    static MADE: RefCell<Option<McpHandler>> = const { RefCell::new(None) };
}

/// Called by the factory with each handler it makes, for [`Sessions::create_session`] to take.
pub(crate) fn made(handler: &McpHandler) {
    MADE.with(|slot| *slot.borrow_mut() = Some(handler.clone()));
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Our `SessionManager`: rmcp's `LocalSessionManager`, with the registry the front path reads.
pub(crate) struct Sessions {
    inner: LocalSessionManager,
    /// Off: rmcp's manager untouched (a test's server that sends every request to rmcp).
    front: bool,
    shared: Arc<Shared>,
    service_token: CancellationToken,
    /// A front answer touches the session's worker when this long has passed since the last touch.
    touch_every: Duration,
    epoch: Instant,
    /// Made by the factory, waiting for their session's `initialize` to be answered.
    pending: Mutex<HashMap<SessionId, McpHandler>>,
    live: Mutex<HashMap<SessionId, Arc<Session>>>,
    /// Requests the front answered, for /metrics.
    answered: Arc<AtomicU64>,
}

/// One session the front may answer for.
struct Session {
    id: SessionId,
    handler: McpHandler,
    /// Ours: its transport routes a call's progress to the call's stream.
    peer: Peer<RoleServer>,
    /// The version the client's `initialize` named: the front takes requests whose header names it.
    version: String,
    /// The client declared nothing the server could send it a request for.
    takes_calls: bool,
    /// rmcp alone serves the session from now on: `logging/setLevel` came (log messages must go to rmcp's
    /// standalone stream), or a second `initialize` (rmcp's peer now has its client's info and capabilities,
    /// which [`Session::takes_calls`] and [`Session::version`] were read from).
    rmcp_only: AtomicBool,
    /// Cancelled when the session closes or the server's service token is: ends our calls and our peer.
    ct: CancellationToken,
    /// Milliseconds since [`Sessions::epoch`] of the last touch of rmcp's worker.
    touched: AtomicU64,
    state: Mutex<State>,
    progress: Arc<Progress>,
}

#[derive(Default)]
struct State {
    /// The session's next request number.
    next: u64,
    /// rmcp's number of a stream it serves, by ours.
    rmcp: HashMap<u64, u64>,
    /// Our calls that wait, by our number and by their request id.
    calls: HashMap<u64, Arc<CallStream>>,
    by_request: HashMap<RequestId, u64>,
}

/// Where our peer's progress notifications go: the stream of the call that carries the token. A list, not a
/// map: it holds the session's calls in flight that carry a token (rarely more than a few), and a map's
/// hashing and rehashing as each call comes and goes cost more than the scan.
#[derive(Default)]
struct Progress(Mutex<Vec<(ProgressToken, Arc<CallStream>)>>);

impl Progress {
    /// The stream of the call that carries `token`: the latest, as rmcp routes by the latest registration.
    fn get(&self, token: &ProgressToken) -> Option<Arc<CallStream>> {
        lock(&self.0)
            .iter()
            .rev()
            .find(|(t, _)| t == token)
            .map(|(_, call)| call.clone())
    }

    fn add(&self, token: ProgressToken, call: Arc<CallStream>) {
        lock(&self.0).push((token, call));
    }

    fn remove(&self, call: &Arc<CallStream>) {
        let mut calls = lock(&self.0);
        if let Some(at) = calls.iter().position(|(_, c)| Arc::ptr_eq(c, call)) {
            // Not `swap_remove`: `get` relies on the order of registration.
            calls.remove(at);
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.ct.cancel();
    }
}

impl Session {
    fn number(&self) -> u64 {
        let mut state = lock(&self.state);
        let number = state.next;
        state.next = number.wrapping_add(1);
        number
    }

    fn cancel_calls(&self) {
        let calls: Vec<_> = lock(&self.state).calls.drain().map(|(_, c)| c).collect();
        for call in calls {
            call.end();
        }
    }
}

impl Sessions {
    pub(crate) fn new(
        inner: LocalSessionManager,
        front: bool,
        shared: Arc<Shared>,
        service_token: CancellationToken,
        idle: Duration,
    ) -> Self {
        Self {
            inner,
            front,
            shared,
            service_token,
            touch_every: touch_every(idle),
            epoch: Instant::now(),
            pending: Mutex::default(),
            live: Mutex::default(),
            answered: Arc::default(),
        }
    }

    /// How many requests the front has answered.
    pub(crate) fn answered(&self) -> Arc<AtomicU64> {
        self.answered.clone()
    }

    fn session(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.live).get(id).cloned()
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Starts rmcp's idle clock for the session again, unless that was done less than `touch_every` ago.
    /// rmcp's worker restarts it on each event it sees, and the front's requests and progress pass it by.
    async fn touch(&self, session: &Session) {
        let now = self.now_ms();
        let touch_ms = u64::try_from(self.touch_every.as_millis()).unwrap_or(u64::MAX);
        let touched = session.touched.load(Ordering::Relaxed);
        if now.saturating_sub(touched) >= touch_ms
            && session
                .touched
                .compare_exchange(touched, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            // The error is the point: rmcp's worker saw an event and starts its idle clock again.
            let _ = self
                .inner
                .resume(&session.id, format!("0/{NO_REQUEST}"))
                .await;
        }
    }

    /// The session's client and server as rmcp's session would have them after `initialize`.
    fn open(&self, id: &SessionId, handler: McpHandler, params: InitializeRequestParams) {
        let caps = &params.capabilities;
        // A version rmcp knows (it refuses a header naming another) and of the legacy era (a request whose
        // header names 2026-07-28 or later is stateless to rmcp, with headers of its own to check).
        let legacy_version = ProtocolVersion::KNOWN_VERSIONS.contains(&params.protocol_version)
            && params.protocol_version.as_str() < ProtocolVersion::V_2026_07_28.as_str();
        let takes_calls = legacy_version
            && caps.elicitation.is_none()
            && caps.sampling.is_none()
            && caps.roots.is_none();
        let version = params.protocol_version.as_str().to_owned();
        let ct = self.service_token.child_token();
        let progress = Arc::new(Progress::default());
        let running = serve_directly_with_ct(
            handler.clone(),
            SessionLink {
                progress: progress.clone(),
            },
            Some(params),
            ct.clone(),
        );
        let peer = running.peer().clone();
        // The loop ends with `ct`.
        tokio::spawn(async move {
            let _ = running.waiting().await;
        });
        let session = Arc::new(Session {
            id: id.clone(),
            handler,
            peer,
            version,
            takes_calls,
            rmcp_only: AtomicBool::new(false),
            ct,
            touched: AtomicU64::new(self.now_ms()),
            state: Mutex::default(),
            progress,
        });
        lock(&self.live).insert(id.clone(), session);
    }

    /// [`Sessions::open`], for a session rmcp still has. rmcp spawns a session's service before it asks for
    /// `initialize`'s answer and closes the session (`close_session`) once that service ends: a shutdown
    /// or a worker gone in between closed it before it was open here, and nothing would take it out again
    /// (the front would answer for it, and its entry would stay until the server stops).
    async fn register(&self, id: &SessionId, handler: McpHandler, params: InitializeRequestParams) {
        self.open(id, handler, params);
        if !self.inner.has_session(id).await.unwrap_or(false) {
            self.forget(id);
        }
    }

    /// The front no longer answers for the session; its calls end.
    fn forget(&self, id: &SessionId) {
        let session = lock(&self.live).remove(id);
        if let Some(session) = session {
            session.ct.cancel();
            session.cancel_calls();
        }
    }

    /// rmcp's stream for our request `number`: its event ids carry our number, and the number it gave is
    /// kept for a resume.
    fn renumbered(
        session: Arc<Session>,
        number: u64,
        stream: impl Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    ) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static {
        stream.map(move |mut message| {
            if let Some(id) = &message.event_id
                && let Some((index, theirs)) = id.split_once('/')
            {
                if let Ok(theirs) = theirs.parse::<u64>() {
                    let mut state = lock(&session.state);
                    let finished = matches!(
                        message.message.as_deref(),
                        Some(JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_))
                    );
                    if finished {
                        state.rmcp.remove(&number);
                    } else if state.rmcp.insert(number, theirs).is_none()
                        && state.rmcp.len() > MAX_MAPPED
                    {
                        let oldest = number.saturating_sub(MAX_MAPPED as u64);
                        state.rmcp.retain(|ours, _| *ours > oldest);
                    }
                }
                message.event_id = Some(format!("{index}/{number}"));
            }
            message
        })
    }
}

impl SessionManager for Sessions {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        // Before any await: see `MADE`.
        let handler = MADE.with(|slot| slot.borrow_mut().take());
        let (id, transport) = self.inner.create_session().await?;
        if self.front
            && let Some(handler) = handler
        {
            lock(&self.pending).insert(id.clone(), handler);
        }
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let params = match &message {
            JsonRpcMessage::Request(JsonRpcRequest {
                request: ClientRequest::InitializeRequest(init),
                ..
            }) => Some(init.params.clone()),
            _ => None,
        };
        let handler = lock(&self.pending).remove(id);
        let response = self.inner.initialize_session(id, message).await?;
        if let (Some(handler), Some(params), JsonRpcMessage::Response(_)) =
            (handler, params, &response)
        {
            self.register(id, handler, params).await;
        }
        Ok(response)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        lock(&self.pending).remove(id);
        self.forget(id);
        let closed = self.inner.close_session(id).await;
        // A `register` meanwhile found rmcp's session still there: it goes now that rmcp's has.
        self.forget(id);
        closed
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let Some(session) = self.session(id) else {
            return Ok(self.inner.create_stream(id, message).await?.left_stream());
        };
        if let JsonRpcMessage::Request(JsonRpcRequest {
            request: ClientRequest::SetLevelRequest(_) | ClientRequest::InitializeRequest(_),
            ..
        }) = &message
        {
            session.rmcp_only.store(true, Ordering::Relaxed);
        }
        let number = session.number();
        let stream = self.inner.create_stream(id, message).await?;
        Ok(Self::renumbered(session, number, stream).right_stream())
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        if let JsonRpcMessage::Notification(JsonRpcNotification {
            notification: ClientNotification::CancelledNotification(cancelled),
            ..
        }) = &message
            && let Some(request) = &cancelled.params.request_id
            && let Some(session) = self.session(id)
        {
            let call = {
                let mut state = lock(&session.state);
                state.calls.retain(|_, call| !call.expired());
                state
                    .by_request
                    .remove(request)
                    .and_then(|number| state.calls.get(&number).cloned())
            };
            if let Some(call) = call {
                call.cancel();
            }
        }
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let parsed = last_event_id.split_once('/').and_then(|(index, number)| {
            Some((index.parse::<usize>().ok()?, number.parse::<u64>().ok()?))
        });
        let (Some(session), Some((index, number))) = (self.session(id), parsed) else {
            return Ok(self
                .inner
                .resume(id, last_event_id)
                .await?
                .left_stream()
                .left_stream());
        };
        let (ours, theirs) = {
            let state = lock(&session.state);
            (
                state.calls.get(&number).cloned(),
                state.rmcp.get(&number).copied(),
            )
        };
        if let Some(call) = ours.filter(|call| !call.expired()) {
            let Some(receiver) = call.resume(index) else {
                return Err(SessionError::InvalidEventId.into());
            };
            let stream = futures::stream::unfold(receiver, |mut receiver| async move {
                receiver.recv().await.map(|message| (message, receiver))
            });
            return Ok(stream.right_stream());
        }
        // A number rmcp does not serve (one of ours that has answered) is resumed as one it never gave.
        let theirs = theirs.unwrap_or(NO_REQUEST);
        let stream = self.inner.resume(id, format!("{index}/{theirs}")).await?;
        Ok(Self::renumbered(session, number, stream)
            .right_stream()
            .left_stream())
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}

/// The events of one of our calls that waits, kept as rmcp keeps a request-wise stream's
/// (`LocalSessionWorker`'s `CachedTx`: the last [`KEPT_EVENTS`], the priming event first among them).
struct CallStream {
    number: u64,
    ct: CancellationToken,
    inner: Mutex<CallInner>,
}

struct CallInner {
    /// The priming event (index 0) is still among the kept: made again when replayed.
    priming_kept: bool,
    /// The events after it, in order, the last one's index `next_index - 1`.
    kept: VecDeque<ServerSseMessage>,
    next_index: usize,
    /// The stream the client reads now; `None` once it ended.
    tx: Option<mpsc::Sender<ServerSseMessage>>,
    /// Cancelled by the client: kept for a late resume (which replays and ends) until rmcp would drop it.
    completed_at: Option<Instant>,
}

/// How long rmcp keeps a request's events after the client cancelled it (`SessionConfig::completed_cache_ttl`).
const COMPLETED_KEPT: Duration = Duration::from_secs(60);

impl CallStream {
    fn new(number: u64, ct: CancellationToken) -> Self {
        Self {
            number,
            ct,
            inner: Mutex::new(CallInner {
                priming_kept: true,
                kept: VecDeque::new(),
                next_index: 1,
                tx: None,
                completed_at: None,
            }),
        }
    }

    fn priming(&self) -> ServerSseMessage {
        ServerSseMessage::priming(
            format!("0/{}", self.number),
            Duration::from_millis(RETRY_MS),
        )
    }

    /// A message on the call's stream, kept for a resume.
    fn push(&self, message: ServerJsonRpcMessage) {
        let mut inner = lock(&self.inner);
        let event = ServerSseMessage::new(format!("{}/{}", inner.next_index, self.number), message);
        inner.next_index += 1;
        if inner.kept.len() + usize::from(inner.priming_kept) >= KEPT_EVENTS {
            if inner.priming_kept {
                inner.priming_kept = false;
            } else {
                inner.kept.pop_front();
            }
        }
        inner.kept.push_back(event.clone());
        // A client that does not read fills its stream's channel (`KEPT_EVENTS`): the stream ends there
        // instead of growing. It still delivers what it holds, so the client, reading on, has every event up
        // to this one's predecessor; it resumes from the last it read with `Last-Event-ID`, and this event and
        // the ones after it are among the kept (rmcp's worker would instead wait for the reader, holding up the
        // whole session).
        if let Some(tx) = &inner.tx
            && tx.try_send(event).is_err()
        {
            inner.tx = None;
        }
    }

    /// A new stream for the client, from event `index` on (rmcp's `CachedTx::sync`); the one it read before
    /// ends, even when `index` is past what is kept (then `None`, and rmcp's empty stream answers).
    fn resume(&self, index: usize) -> Option<mpsc::Receiver<ServerSseMessage>> {
        let mut inner = lock(&self.inner);
        inner.tx = None;
        let total = inner.kept.len() + usize::from(inner.priming_kept);
        let front = if inner.priming_kept {
            0
        } else {
            inner.next_index - inner.kept.len()
        };
        let skip = index.saturating_sub(front);
        if skip > total {
            return None;
        }
        let (tx, rx) = mpsc::channel(KEPT_EVENTS);
        let priming = inner.priming_kept.then(|| self.priming());
        // At most `KEPT_EVENTS` in all: the channel holds them.
        for event in priming
            .into_iter()
            .chain(inner.kept.iter().cloned())
            .skip(skip)
        {
            let _ = tx.try_send(event);
        }
        // A cancelled call's stream ends once replayed.
        if inner.completed_at.is_none() {
            inner.tx = Some(tx);
        }
        Some(rx)
    }

    /// Cancelled by the client's `notifications/cancelled`: the call stops, its stream ends, its events stay
    /// for a late resume.
    fn cancel(&self) {
        {
            let mut inner = lock(&self.inner);
            inner.tx = None;
            inner.completed_at = Some(Instant::now());
        }
        self.ct.cancel();
    }

    /// Ended with its session (closed, or the server's shutdown): the call stops, its stream ends.
    fn end(&self) {
        lock(&self.inner).tx = None;
        self.ct.cancel();
    }

    /// Cancelled long enough ago that rmcp would no longer resume it.
    fn expired(&self) -> bool {
        lock(&self.inner)
            .completed_at
            .is_some_and(|at| at.elapsed() >= COMPLETED_KEPT)
    }
}

/// Our peer's transport: a call's progress goes to its stream; the front takes no call that could make the
/// peer send anything else (see the module's notes).
struct SessionLink {
    progress: Arc<Progress>,
}

impl Transport<RoleServer> for SessionLink {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let call = match &item {
            JsonRpcMessage::Notification(JsonRpcNotification {
                notification: ServerNotification::ProgressNotification(progress),
                ..
            }) => self.progress.get(&progress.params.progress_token),
            _ => None,
        };
        let sent = match call {
            Some(call) => {
                call.push(item);
                Ok(())
            }
            None => {
                tracing::debug!("a legacy session's front call sent a message with nowhere to go");
                Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "no stream for this message",
                ))
            }
        };
        std::future::ready(sent)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        std::future::pending().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
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
}

impl LegacyPath {
    pub(crate) fn new(sessions: Arc<Sessions>) -> Self {
        Self { sessions }
    }

    /// The answer to a request this path takes; `None` hands it to rmcp unchanged.
    pub(crate) async fn answer(&self, parts: &Parts, body: &Bytes) -> Option<Response> {
        let (session, taken) = self.accept(&parts.headers, body)?;
        self.sessions.answered.fetch_add(1, Ordering::Relaxed);
        self.sessions.touch(&session).await;
        Some(self.dispatch(session, taken).await)
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

    async fn dispatch(&self, session: Arc<Session>, taken: Taken) -> Response {
        let number = session.number();
        match taken {
            Taken::Other(id, mut request) => {
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
            } => self.call(session, number, id, params, meta, map).await,
        }
    }

    async fn call(
        &self,
        session: Arc<Session>,
        number: u64,
        id: RequestId,
        mut params: CallToolRequestParams,
        meta: Option<Box<CallMeta>>,
        map: Option<rmcp::model::RequestMetaObject>,
    ) -> Response {
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
        handler.start_tool(params, context, meta, cx)
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

/// The whole stream of a request that has answered: the priming event, the notes, the answer.
fn finished(number: u64, notes: &[ServerSseMessage], answer: &inline::Answer) -> Vec<u8> {
    let mut body = Vec::with_capacity(512);
    write_priming(&mut body, number);
    for note in notes {
        write_event(&mut body, note);
    }
    body.extend_from_slice(b"data: ");
    if let Err(e) = answer.write(&mut body) {
        tracing::error!("an answer could not be serialised: {e}");
    }
    body.extend_from_slice(b"\nid: ");
    write_number(&mut body, notes.len() as u64 + 1);
    body.push(b'/');
    write_number(&mut body, number);
    body.extend_from_slice(b"\n\n");
    body
}

fn write_priming(body: &mut Vec<u8>, number: u64) {
    body.extend_from_slice(b"data: \nid: 0/");
    write_number(body, number);
    body.extend_from_slice(b"\nretry: ");
    write_number(body, RETRY_MS);
    body.extend_from_slice(b"\n\n");
}

/// `n` in decimal, as `Display` writes it, without the formatting machinery (a tenth of a call's own work).
fn write_number(body: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    body.extend_from_slice(&digits[at..]);
}

/// An event as rmcp's SSE body writes it (`sse_stream::Sse` into bytes).
fn write_event(body: &mut Vec<u8>, event: &ServerSseMessage) {
    body.extend_from_slice(b"data: ");
    if let Some(message) = &event.message
        && let Err(e) = serde_json::to_writer(&mut *body, &**message)
    {
        tracing::error!("a message could not be serialised: {e}");
    }
    body.push(b'\n');
    if let Some(id) = &event.event_id {
        body.extend_from_slice(b"id: ");
        body.extend_from_slice(id.as_bytes());
        body.push(b'\n');
    }
    if let Some(retry) = event.retry {
        body.extend_from_slice(format!("retry: {}\n", retry.as_millis()).as_bytes());
    }
    body.push(b'\n');
}

fn event_bytes(event: &ServerSseMessage) -> Bytes {
    let mut body = Vec::with_capacity(256);
    write_event(&mut body, event);
    Bytes::from(body)
}

/// rmcp's SSE response headers.
fn sse_response(body: Body) -> Response {
    static ACCEL_BUFFERING: HeaderName = HeaderName::from_static("x-accel-buffering");
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.reserve(3);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(ACCEL_BUFFERING.clone(), HeaderValue::from_static("no"));
    response
}

fn sse_body(body: Vec<u8>) -> Response {
    sse_response(Body::from(body))
}

/// The stream of a call that waits: the priming event, then what comes, a keep-alive comment when nothing
/// came for [`KEEP_ALIVE`]; it ends when the call's sender goes.
fn streaming_body(first: ServerSseMessage, rx: mpsc::Receiver<ServerSseMessage>) -> Response {
    let events = futures::stream::unfold((Some(first), rx), |(mut first, mut rx)| async move {
        if let Some(first) = first.take() {
            return Some((
                Ok::<_, std::convert::Infallible>(event_bytes(&first)),
                (None, rx),
            ));
        }
        tokio::select! {
            message = rx.recv() => message.map(|m| (Ok(event_bytes(&m)), (None, rx))),
            () = tokio::time::sleep(KEEP_ALIVE) => Some((Ok(Bytes::from_static(b":\n\n")), (None, rx))),
        }
    });
    sse_response(Body::from_stream(events))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn numbers_are_written_as_display_writes_them() {
        for n in [0, 7, 10, 99, 100, 4096, u64::from(u32::MAX), u64::MAX] {
            let mut body = Vec::new();
            write_number(&mut body, n);
            assert_eq!(body, n.to_string().into_bytes());
        }
    }

    /// A client that stops reading a call's stream while progress keeps coming: its channel never holds
    /// more than `KEPT_EVENTS` (it grew with every note before), the stream it reads ends, and a resume from
    /// the last event it read brings the answer after the events it read, in order (the notes between are
    /// gone: only the last `KEPT_EVENTS` are kept, as rmcp keeps).
    #[tokio::test]
    async fn a_stream_nobody_reads_ends_at_its_bound_and_the_answer_is_resumed() {
        let call = CallStream::new(3, CancellationToken::new());
        let mut rx = call.resume(0).unwrap();
        let note = |n: u32| {
            let token = ProgressToken(rmcp::model::NumberOrString::Number(1));
            JsonRpcMessage::notification(ServerNotification::ProgressNotification(
                rmcp::model::ProgressNotification::new(
                    rmcp::model::ProgressNotificationParam::new(token, f64::from(n)),
                ),
            ))
        };
        for n in 1..=1000 {
            call.push(note(n));
            assert!(
                rx.len() <= KEPT_EVENTS,
                "{} events held at note {n}",
                rx.len()
            );
        }
        let answer =
            JsonRpcMessage::response(rmcp::model::ServerResult::empty(()), RequestId::Number(9));
        call.push(answer);
        let index = |event: &ServerSseMessage| -> usize {
            let id = event.event_id.as_deref().unwrap();
            assert!(id.ends_with("/3"), "{id}");
            id.split_once('/').unwrap().0.parse().unwrap()
        };
        let mut read = Vec::new();
        while let Some(event) = rx.recv().await {
            read.push(index(&event));
        }
        assert_eq!(
            read,
            (0..KEPT_EVENTS).collect::<Vec<_>>(),
            "read until its stream ended"
        );
        let last = *read.last().unwrap();
        // What the client's `Last-Event-ID` names: the last event it read.
        let mut resumed = call.resume(last).unwrap();
        let mut events = Vec::new();
        while let Ok(event) = resumed.try_recv() {
            events.push(event);
        }
        let indexes: Vec<usize> = events.iter().map(index).collect();
        assert!(indexes.windows(2).all(|w| w[1] == w[0] + 1), "{indexes:?}");
        assert!(indexes[0] > last, "{indexes:?} after {last}");
        assert_eq!(
            *indexes.last().unwrap(),
            1001,
            "the answer is the last event"
        );
        assert!(matches!(
            events.last().unwrap().message.as_deref(),
            Some(JsonRpcMessage::Response(_))
        ));
    }

    /// rmcp closed the session (its service ended: a shutdown, its worker gone) before its `initialize`
    /// answer reached us: the front must not take it up (before, it stayed in the registry, answered for,
    /// until the server stopped).
    #[tokio::test]
    async fn a_session_rmcp_no_longer_has_is_not_taken_up() {
        let bridge = crate::bridge::Bridge::builder("t", "1").build().unwrap();
        let metrics = Arc::new(crate::serve::metrics::Metrics::new());
        let shared = crate::serve::shared_counting(bridge.into(), &[], metrics);
        let sessions = Sessions::new(
            LocalSessionManager::default(),
            true,
            shared.clone(),
            CancellationToken::new(),
            Duration::from_secs(60),
        );
        let params = InitializeRequestParams::new(
            rmcp::model::ClientCapabilities::default(),
            rmcp::model::Implementation::new("test", "1"),
        );
        let id: SessionId = "closed-before-open".into();
        sessions
            .register(&id, McpHandler::new(shared), params)
            .await;
        assert!(sessions.session(&id).is_none(), "taken up");
    }

    /// rmcp routes a progress token to the call that registered it last; when an earlier call of the list
    /// ends, that order must hold for the ones left.
    #[test]
    fn progress_goes_to_the_latest_call_with_its_token_after_another_ends() {
        let progress = Progress::default();
        let call = |n| Arc::new(CallStream::new(n, CancellationToken::new()));
        let (u, t1, t2) = (call(1), call(2), call(3));
        let token = |s: &str| ProgressToken(rmcp::model::NumberOrString::String(s.into()));
        progress.add(token("u"), u.clone());
        progress.add(token("t"), t1.clone());
        progress.add(token("t"), t2.clone());
        progress.remove(&u);
        let routed = progress.get(&token("t")).map(|c| c.number);
        assert_eq!(routed, Some(3), "the latest call with the token");
        progress.remove(&t2);
        assert_eq!(progress.get(&token("t")).map(|c| c.number), Some(2));
        assert!(progress.get(&token("u")).is_none());
    }
}
