//! The registry of sessions the front answers for: our `SessionManager` around rmcp's, each session's
//! handler and peer, its request numbers, its calls in flight and where their progress goes.

use super::super::progress_only::ProgressOnly;
use super::*;
use rmcp::model::ServerResult;

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

/// Our `SessionManager`: rmcp's `LocalSessionManager`, with the registry the front path reads.
pub(crate) struct Sessions {
    pub(super) inner: LocalSessionManager,
    /// Off: rmcp's manager untouched (a test's server that sends every request to rmcp).
    pub(super) front: bool,
    pub(super) shared: Arc<Shared>,
    service_token: CancellationToken,
    /// A front answer touches the session's worker when this long has passed since the last touch.
    pub(super) touch_every: Duration,
    epoch: Instant,
    /// Made by the factory, waiting for their session's `initialize` to be answered.
    pub(super) pending: Mutex<HashMap<SessionId, McpHandler>>,
    live: Mutex<HashMap<SessionId, Arc<Session>>>,
    /// Requests the front answered, for /metrics.
    pub(super) answered: Arc<AtomicU64>,
}

/// One session the front may answer for.
pub(super) struct Session {
    pub(super) id: SessionId,
    pub(super) handler: McpHandler,
    /// Ours: its transport routes a call's progress to the call's stream.
    pub(super) peer: Peer<RoleServer>,
    /// The version the client's `initialize` named: the front takes requests whose header names it.
    pub(super) version: String,
    /// The client declared nothing the server could send it a request for.
    pub(super) takes_calls: bool,
    /// rmcp alone serves the session from now on: `logging/setLevel` came (log messages must go to rmcp's
    /// standalone stream), or a second `initialize` (rmcp's peer now has its client's info and capabilities,
    /// which [`Session::takes_calls`] and [`Session::version`] were read from).
    pub(super) rmcp_only: AtomicBool,
    /// Cancelled when the session closes or the server's service token is: ends our calls and our peer.
    pub(super) ct: CancellationToken,
    /// Milliseconds since [`Sessions::epoch`] of the last touch of rmcp's worker.
    pub(super) touched: AtomicU64,
    pub(super) state: Mutex<State>,
    pub(super) progress: Arc<Progress>,
    /// This session's share of the server's running calls ([`super::MAX_SESSION_CALLS`]).
    pub(super) calls: Arc<tokio::sync::Semaphore>,
}

#[derive(Default)]
pub(super) struct State {
    /// The session's next request number.
    next: u64,
    /// rmcp's number of a stream it serves, by ours.
    pub(super) rmcp: HashMap<u64, u64>,
    /// Our calls that wait, by our number and by their request id.
    pub(super) calls: HashMap<u64, Arc<CallStream>>,
    pub(super) by_request: HashMap<RequestId, u64>,
}

/// Where our peer's progress notifications go: the stream of the call that carries the token. A list, not a
/// map: it holds the session's calls in flight that carry a token (rarely more than a few), and a map's
/// hashing and rehashing as each call comes and goes cost more than the scan.
#[derive(Default)]
pub(super) struct Progress(Mutex<Vec<(ProgressToken, Arc<CallStream>)>>);

impl Progress {
    /// The stream of the call that carries `token`: the latest, as rmcp routes by the latest registration.
    pub(super) fn get(&self, token: &ProgressToken) -> Option<Arc<CallStream>> {
        lock(&self.0)
            .iter()
            .rev()
            .find(|(t, _)| t == token)
            .map(|(_, call)| call.clone())
    }

    pub(super) fn add(&self, token: ProgressToken, call: Arc<CallStream>) {
        lock(&self.0).push((token, call));
    }

    pub(super) fn remove(&self, call: &Arc<CallStream>) {
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
    pub(super) fn number(&self) -> u64 {
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

    pub(super) fn session(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.live).get(id).cloned()
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Starts rmcp's idle clock for the session again, unless that was done less than `touch_every` ago.
    /// rmcp's worker restarts it on each event it sees, and the front's requests and progress pass it by.
    pub(super) async fn touch(&self, session: &Session) {
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

    /// The session's client and server as rmcp's session would have them after `initialize`, which
    /// settled on protocol `negotiated`.
    fn open(
        &self,
        id: &SessionId,
        handler: McpHandler,
        mut params: InitializeRequestParams,
        negotiated: &ProtocolVersion,
    ) {
        // rmcp's peer holds the negotiated version as the client's, and the handler shapes its answers by it
        // (a tools/list of 2026-07-28 carries resultType and cache hints).
        params.protocol_version = negotiated.clone();
        let caps = &params.capabilities;
        // The version the server answered, which the client's requests name from then on, not the one the
        // client asked for: a client asks for the newest it knows (rmcp's own client asks for 2026-07-28 and
        // is answered 2025-11-25). A version rmcp knows (it refuses a header naming another) and of the
        // legacy era (a request whose header names 2026-07-28 or later is stateless to rmcp, with headers of
        // its own to check).
        let legacy_version = ProtocolVersion::KNOWN_VERSIONS.contains(negotiated)
            && negotiated.as_str() < ProtocolVersion::V_2026_07_28.as_str();
        let takes_calls = legacy_version
            && caps.elicitation.is_none()
            && caps.sampling.is_none()
            && caps.roots.is_none();
        let version = negotiated.as_str().to_owned();
        let ct = self.service_token.child_token();
        let progress = Arc::new(Progress::default());
        let running = serve_directly_with_ct(
            handler.clone(),
            ProgressOnly(SessionLink {
                progress: progress.clone(),
            }),
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
            calls: Arc::new(tokio::sync::Semaphore::new(super::MAX_SESSION_CALLS)),
        });
        lock(&self.live).insert(id.clone(), session);
    }

    /// [`Sessions::open`], for a session rmcp still has. rmcp spawns a session's service before it asks for
    /// `initialize`'s answer and closes the session (`close_session`) once that service ends: a shutdown
    /// or a worker gone in between closed it before it was open here, and nothing would take it out again
    /// (the front would answer for it, and its entry would stay until the server stops).
    async fn register(
        &self,
        id: &SessionId,
        handler: McpHandler,
        params: InitializeRequestParams,
        negotiated: &ProtocolVersion,
    ) {
        self.open(id, handler, params, negotiated);
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
        if let (Some(handler), Some(params), JsonRpcMessage::Response(answer)) =
            (handler, params, &response)
            && let ServerResult::InitializeResult(init) = &answer.result
        {
            self.register(id, handler, params, &init.protocol_version)
                .await;
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

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
            .register(
                &id,
                McpHandler::new(shared),
                params,
                &ProtocolVersion::V_2025_11_25,
            )
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
