//! The link to the game: at most one game connection at a time (the newest wins), one correlator per
//! connection, and capability bookkeeping (the game has no version handshake).
//!
//! The WebSocket listener, liveness pings and the correlator come from `bridge_core::link`; this module only
//! adds the Bitburner rules on top of them.

use crate::wire::{self, Method, Outcome};
use bridge_core::ToolError;
use bridge_core::link::{
    Correlator, LinkError, WsConfig, WsConnection, WsSender, parse_id, ws_router,
};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;

/// Why an older game connection was closed.
const REPLACED: &str = "replaced by a newer game connection";

/// Settings of the link that tools see.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// Deadline of one request; the game has none of its own and ignores some requests entirely.
    pub rpc_timeout: Duration,
    /// Deadline of `getSaveFile`, which builds a save of several MB.
    pub save_timeout: Duration,
    /// How long a call waits for a game to connect before failing with `E_DISCONNECTED`.
    pub connect_wait: Duration,
    /// Where the game should connect, for the hint of `E_DISCONNECTED` (host, port).
    pub advertised: (String, u16),
}

/// Whether the connected game answers a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Support {
    Yes,
    No,
    Unknown,
}

struct Current {
    sender: WsSender,
    correlator: Correlator<Outcome>,
    since: SystemTime,
    peer: Option<SocketAddr>,
    origin: Option<String>,
    support: BTreeMap<Method, Support>,
    definitions: Option<Arc<String>>,
}

#[derive(Default)]
struct State {
    current: Option<Current>,
    connections_total: u64,
    last_disconnect: Option<(SystemTime, String)>,
}

/// The bridge's view of the game. Cheap to clone.
#[derive(Clone)]
pub struct GameLink {
    state: Arc<Mutex<State>>,
    /// Bumped on every connect and disconnect, and when a call starts or stops waiting for a game.
    generation: watch::Sender<u64>,
    /// Calls parked until a game connects (`connect_wait`).
    waiting: Arc<AtomicUsize>,
    config: Arc<LinkConfig>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // Never held across an await; a poisoned lock still holds consistent state.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A snapshot for the `status` tool and `/health`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LinkStatus {
    pub connected: bool,
    /// Milliseconds since the Unix epoch when the current game connected.
    pub connected_since_ms: Option<u64>,
    pub connected_for_s: Option<u64>,
    pub peer: Option<String>,
    pub origin: Option<String>,
    /// Game connections accepted since the bridge started.
    pub connections_total: u64,
    /// Why the last game connection ended, if one did.
    pub last_disconnect: Option<String>,
    /// Where the game should connect: `ws://host:port`.
    pub listen: String,
    /// Tool calls waiting for a game to connect (see `BITBURNER_CONNECT_WAIT_MS`).
    pub calls_waiting_for_game: usize,
}

/// Counts a call as waiting for a game while it lives.
struct Parked<'a>(&'a GameLink);

impl<'a> Parked<'a> {
    fn new(link: &'a GameLink) -> Self {
        link.waiting.fetch_add(1, Ordering::SeqCst);
        link.generation.send_modify(|g| *g += 1);
        Self(link)
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
        self.0.generation.send_modify(|g| *g += 1);
    }
}

impl GameLink {
    pub fn new(config: LinkConfig) -> Self {
        Self {
            state: Arc::default(),
            generation: watch::Sender::new(0),
            waiting: Arc::default(),
            config: Arc::new(config),
        }
    }

    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// The axum router serving the game's WebSocket at `/` (the game connects to `ws://host:port`).
    pub fn router(&self, ws: WsConfig) -> axum::Router {
        let link = self.clone();
        ws_router(ws, "/", move |conn| link.accept(conn))
    }

    /// A new game connection: it replaces the current one, whose requests fail at once.
    fn accept(&self, conn: WsConnection) {
        let WsConnection {
            id,
            peer,
            origin,
            sender,
            mut incoming,
            ..
        } = conn;
        let correlator = Correlator::new();
        let previous = {
            let mut state = lock(&self.state);
            state.connections_total += 1;
            let previous = state.current.replace(Current {
                sender: sender.clone(),
                correlator: correlator.clone(),
                since: SystemTime::now(),
                peer,
                origin: origin.clone(),
                support: BTreeMap::new(),
                definitions: None,
            });
            if previous.is_some() {
                state.last_disconnect = Some((SystemTime::now(), REPLACED.to_owned()));
            }
            previous
        };
        if let Some(old) = previous {
            tracing::info!(
                old = old.sender.id(),
                new = id,
                "a newer game connection replaces the older one"
            );
            old.sender.close(REPLACED);
            old.correlator.close(LinkError::disconnected(REPLACED));
        }
        tracing::info!(link = id, ?peer, ?origin, "game connected");
        self.generation.send_modify(|g| *g += 1);

        let link = self.clone();
        tokio::spawn(async move {
            while let Some(text) = incoming.recv().await {
                route_reply(id, &correlator, &text);
            }
            // The link is gone: every request still waiting fails now, not at its timeout.
            let err = sender.disconnected();
            let failed = correlator.close(err.clone());
            tracing::info!(link = id, failed, reason = %err, "game disconnected");
            link.forget(id, &err);
        });
    }

    fn forget(&self, link_id: u64, err: &LinkError) {
        let mut state = lock(&self.state);
        if state
            .current
            .as_ref()
            .is_some_and(|c| c.sender.id() == link_id)
        {
            state.current = None;
            state.last_disconnect = Some((SystemTime::now(), err.to_string()));
            drop(state);
            self.generation.send_modify(|g| *g += 1);
        }
    }

    /// Closes the current game connection with `reason` (code 1000), so the game shows a normal disconnect
    /// instead of an error when a one-shot command exits.
    pub async fn close(&self, reason: &str) {
        let sender = lock(&self.state).current.as_ref().map(|c| c.sender.clone());
        let Some(sender) = sender else { return };
        sender.close(reason);
        // The writer gives up on an unresponsive peer by itself; this bound only guards against a bug there.
        let _ = tokio::time::timeout(Duration::from_secs(5), sender.finished()).await;
    }

    pub fn is_connected(&self) -> bool {
        lock(&self.state).current.is_some()
    }

    /// Waits until a game is connected, at most `wait`. Returns whether one is.
    pub async fn wait_connected(&self, wait: Duration) -> bool {
        let mut rx = self.generation.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if self.is_connected() {
                return true;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                _ => return self.is_connected(),
            }
        }
    }

    /// Waits until the link's status satisfies `pred` (re-checked on every connect and disconnect).
    pub async fn wait_until(&self, pred: impl Fn(&LinkStatus) -> bool) {
        let mut rx = self.generation.subscribe();
        while !pred(&self.status()) {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// `E_DISCONNECTED` with the exact steps that connect the game.
    pub fn not_connected(&self, why: &str) -> ToolError {
        let (host, port) = &self.config.advertised;
        ToolError::disconnected(format!("Bitburner is not connected: {why}")).with_hint(format!(
            "In Bitburner open Options → Remote API, set hostname `{host}` and port `{port}`, press Connect \
             (on game v3.0+ also set a Reconnection delay such as 5 s so it reconnects by itself); then call again"
        ))
    }

    /// Sends one request to the current game and waits for its answer. `Unknown message received` for a
    /// method becomes `E_UNSUPPORTED` (this game version lacks it); every other game error is `E_REMOTE`
    /// with the game's text verbatim.
    pub async fn call(
        &self,
        method: Method,
        params: Map<String, Value>,
    ) -> Result<Value, ToolError> {
        let (sender, correlator) = self.current_or_wait().await?;
        let (id, pending) = correlator.start();
        sender
            .send_text(wire::request_frame(id, method, params))
            .await
            .map_err(|e| self.link_error(e))?;
        let timeout = match method {
            Method::GetSaveFile => self.config.save_timeout,
            _ => self.config.rpc_timeout,
        };
        let outcome = pending
            .wait(timeout)
            .await
            .map_err(|e| self.link_error(e))?;
        match outcome {
            Outcome::Result(value) => {
                self.record(sender.id(), method, Support::Yes);
                Ok(value)
            }
            Outcome::Error(message) if message == wire::UNKNOWN_METHOD => {
                self.record(sender.id(), method, Support::No);
                Err(ToolError::unsupported(format!(
                    "the connected game does not know `{}`: it answered {message:?}",
                    method.name()
                ))
                .with_hint(format!(
                    "`{}` needs Bitburner {} or newer; update the game or use another tool",
                    method.name(),
                    method.since()
                )))
            }
            Outcome::Error(message) => {
                // A refusal still proves the method exists.
                self.record(sender.id(), method, Support::Yes);
                Err(ToolError::remote(message)
                    .with_details(serde_json::json!({"method": method.name()})))
            }
        }
    }

    async fn current_or_wait(&self) -> Result<(WsSender, Correlator<Outcome>), ToolError> {
        if !self.config.connect_wait.is_zero() && !self.is_connected() {
            let _parked = Parked::new(self);
            self.wait_connected(self.config.connect_wait).await;
        }
        let state = lock(&self.state);
        match &state.current {
            Some(c) => Ok((c.sender.clone(), c.correlator.clone())),
            None => {
                let why = match &state.last_disconnect {
                    Some((_, reason)) => format!("the last game connection ended ({reason})"),
                    None => "no game has connected since the bridge started".to_owned(),
                };
                Err(self.not_connected(&why))
            }
        }
    }

    fn link_error(&self, e: LinkError) -> ToolError {
        match e {
            LinkError::Disconnected { reason } => self.not_connected(&format!(
                "the game connection dropped while the call was in flight ({reason})"
            )),
            LinkError::Timeout { elapsed } => {
                let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
                ToolError::timeout(format!("the game did not answer within {ms} ms"))
                    .with_hint(
                        "the game may be paused, busy or frozen; call `status`, check the game window, \
                         then retry (raise RPC_TIMEOUT_MS if the game is just slow)",
                    )
                    .with_details(serde_json::json!({"elapsed_ms": ms}))
            }
            other => ToolError::from(other),
        }
    }

    fn record(&self, link_id: u64, method: Method, support: Support) {
        let mut state = lock(&self.state);
        if let Some(c) = state.current.as_mut().filter(|c| c.sender.id() == link_id) {
            c.support.insert(method, support);
        }
    }

    /// What is known about the current game's methods.
    pub fn support(&self) -> BTreeMap<Method, Support> {
        let state = lock(&self.state);
        let known = state
            .current
            .as_ref()
            .map(|c| c.support.clone())
            .unwrap_or_default();
        Method::ALL
            .into_iter()
            .map(|m| (m, known.get(&m).copied().unwrap_or(Support::Unknown)))
            .collect()
    }

    /// The NetScript definitions cached for this game connection (they only change with the game).
    pub fn cached_definitions(&self) -> Option<Arc<String>> {
        lock(&self.state)
            .current
            .as_ref()
            .and_then(|c| c.definitions.clone())
    }

    pub fn cache_definitions(&self, text: Arc<String>) {
        if let Some(c) = lock(&self.state).current.as_mut() {
            c.definitions = Some(text);
        }
    }

    pub fn status(&self) -> LinkStatus {
        let state = lock(&self.state);
        let (host, port) = &self.config.advertised;
        let current = state.current.as_ref();
        let since_ms = current.map(|c| unix_ms(c.since));
        LinkStatus {
            connected: current.is_some(),
            connected_since_ms: since_ms,
            connected_for_s: current.map(|c| c.since.elapsed().map(|d| d.as_secs()).unwrap_or(0)),
            peer: current.and_then(|c| c.peer.map(|p| p.to_string())),
            origin: current.and_then(|c| c.origin.clone()),
            connections_total: state.connections_total,
            last_disconnect: state.last_disconnect.as_ref().map(|(_, r)| r.clone()),
            listen: format!("ws://{host}:{port}"),
            calls_waiting_for_game: self.waiting.load(Ordering::SeqCst),
        }
    }
}

pub(crate) fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Hands one frame from the game to its waiter. The game never sends anything unsolicited, so a frame that
/// is not an answer to a pending request of ours is logged and dropped.
fn route_reply(link: u64, correlator: &Correlator<Outcome>, text: &str) {
    match wire::parse_response(text) {
        Ok(response) => match response.id.as_ref().and_then(parse_id) {
            Some(id) => {
                correlator.resolve(id, response.outcome);
            }
            None => tracing::warn!(link, id = ?response.id, "reply without one of our ids dropped"),
        },
        Err(e) => {
            tracing::warn!(link, error = %e, bytes = text.len(), "malformed frame from the game ignored")
        }
    }
}
