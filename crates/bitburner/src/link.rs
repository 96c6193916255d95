//! The link to the game: at most one game connection at a time (the newest wins), one correlator per
//! connection, and capability bookkeeping (the game has no version handshake).
//!
//! The WebSocket listener, liveness pings and the correlator come from `bridge_core::link`; this module only
//! adds the Bitburner rules on top of them.

use crate::wire::{self, Method, Outcome};
use bridge_core::ToolError;
use bridge_core::link::{
    Correlator, LinkError, Peer, SinglePeer, WsConfig, WsConnection, parse_id, ws_router,
};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

/// What the bridge keeps about the connected game besides its link.
struct Game {
    peer: Option<SocketAddr>,
    origin: Option<String>,
    support: BTreeMap<Method, Support>,
    definitions: Option<Arc<String>>,
}

/// The bridge's view of the game. Cheap to clone.
#[derive(Clone)]
pub struct GameLink {
    /// At most one game; a newer connection replaces the older.
    slot: SinglePeer<Outcome, Game>,
    /// Calls parked until a game connects (`connect_wait`).
    waiting: Arc<AtomicUsize>,
    config: Arc<LinkConfig>,
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
    /// Tool calls waiting for a game to connect (see `BITBURNER_CONNECT_WAIT`).
    pub calls_waiting_for_game: usize,
}

/// Counts a call as waiting for a game while it lives.
struct Parked<'a>(&'a GameLink);

impl<'a> Parked<'a> {
    fn new(link: &'a GameLink) -> Self {
        link.waiting.fetch_add(1, Ordering::SeqCst);
        link.slot.notify();
        Self(link)
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
        self.0.slot.notify();
    }
}

impl GameLink {
    pub fn new(config: LinkConfig) -> Self {
        Self {
            slot: SinglePeer::new(),
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
            incoming,
            ..
        } = conn;
        tracing::info!(link = id, ?peer, ?origin, "game connected");
        let game = Game {
            peer,
            origin,
            support: BTreeMap::new(),
            definitions: None,
        };
        let peer = Peer::new(sender);
        let correlator = peer.correlator().clone();
        // Installed before this returns, so a call right after the handshake finds the game.
        let served = self.slot.run(peer, game, REPLACED, incoming, move |text| {
            route_reply(id, &correlator, &text)
        });
        tokio::spawn(served);
    }

    /// Closes the current game connection with `reason` (code 1000), so the game shows a normal disconnect
    /// instead of an error when a one-shot command exits.
    pub async fn close(&self, reason: &str) {
        let Some(peer) = self.slot.current() else {
            return;
        };
        let sender = peer.sender();
        sender.close(reason);
        // The writer gives up on an unresponsive peer by itself; this bound only guards against a bug there.
        let _ = tokio::time::timeout(Duration::from_secs(5), sender.finished()).await;
    }

    /// Game connections accepted so far: a different number is a different connection (maybe another game).
    pub fn connection_count(&self) -> u64 {
        self.slot.connections_total()
    }

    pub fn is_connected(&self) -> bool {
        self.slot.is_connected()
    }

    /// Waits until a game is connected, at most `wait`. Returns whether one is.
    pub async fn wait_connected(&self, wait: Duration) -> bool {
        self.slot.wait_connected(wait).await
    }

    /// Waits until the link's status satisfies `pred` (re-checked on every connect and disconnect).
    pub async fn wait_until(&self, pred: impl Fn(&LinkStatus) -> bool) {
        let mut rx = self.slot.subscribe();
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
        let timeout = match method {
            Method::GetSaveFile => self.config.save_timeout,
            _ => self.config.rpc_timeout,
        };
        self.call_within(method, params, timeout).await
    }

    /// [`Self::call`] with its own deadline (a large transfer needs more than a small one).
    pub async fn call_within(
        &self,
        method: Method,
        params: Map<String, Value>,
        timeout: Duration,
    ) -> Result<Value, ToolError> {
        let peer = self.current_or_wait().await?;
        let outcome = peer
            .request(|id| wire::request_frame(id, method, params), timeout)
            .await
            .map_err(|e| self.link_error(method, e))?;
        match outcome {
            Outcome::Result(value) => {
                self.record(peer.id(), method, Support::Yes);
                Ok(value)
            }
            Outcome::Error(message) if message == wire::UNKNOWN_METHOD => {
                self.record(peer.id(), method, Support::No);
                Err(ToolError::unsupported(format!(
                    "the connected game does not know `{}`: it answered {message:?}",
                    method.name()
                ))
                .with_hint(unsupported_hint(method)))
            }
            Outcome::Malformed(why) => Err(ToolError::remote(format!(
                "the game's answer to `{}` could not be read: {why}",
                method.name()
            ))
            .with_hint(if method.changes_files() {
                "the game may have applied it or not: read it back (read_file or list_files) before changing it \
                 again; if answers keep coming malformed, update the game or check what else connects to this port"
            } else {
                "retry once; if answers keep coming malformed, update the game or check what else connects to this \
                 port"
            })
            .with_details(serde_json::json!({"method": method.name()}))),
            Outcome::Error(message) => {
                // A refusal still proves the method exists.
                self.record(peer.id(), method, Support::Yes);
                Err(ToolError::remote(message)
                    .with_details(serde_json::json!({"method": method.name()})))
            }
        }
    }

    async fn current_or_wait(&self) -> Result<Peer<Outcome>, ToolError> {
        if !self.config.connect_wait.is_zero() && !self.is_connected() {
            let _parked = Parked::new(self);
            self.wait_connected(self.config.connect_wait).await;
        }
        match self.slot.current() {
            Some(peer) => Ok(peer),
            None => {
                let why = match self.slot.last_end() {
                    Some((_, reason)) => format!("the last game connection ended ({reason})"),
                    None => "no game has connected since the bridge started".to_owned(),
                };
                Err(self.not_connected(&why))
            }
        }
    }

    fn link_error(&self, method: Method, e: LinkError) -> ToolError {
        match e {
            LinkError::Disconnected { reason } => {
                let e = self.not_connected(&format!(
                    "the game connection dropped while the call was in flight ({reason})"
                ));
                let e = if method.changes_files() {
                    // The request was sent: the game may well have applied it before the connection ended.
                    e.with_hint(
                        "the game may have applied it before the connection ended, or not: whether it did is \
                         unknown. Once a game is connected, read it back (read_file or list_files) and change \
                         it again only if it is not as you wanted",
                    )
                } else {
                    e
                };
                e.with_details(serde_json::json!({
                    "method": method.name(),
                    "in_flight": true,
                    "replaced": reason == REPLACED,
                }))
            }
            LinkError::Timeout { elapsed } => {
                let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
                ToolError::timeout(format!("the game did not answer within {ms} ms"))
                    .with_hint(
                        "the game may be paused, busy or frozen; call `status`, check the game window, \
                         then retry (raise BITBURNER_RPC_TIMEOUT if the game is just slow)",
                    )
                    .with_details(serde_json::json!({"elapsed_ms": ms}))
            }
            other => ToolError::from(other),
        }
    }

    fn record(&self, link_id: u64, method: Method, support: Support) {
        self.slot
            .with_link(link_id, |c| c.meta.support.insert(method, support));
    }

    /// What is known about the current game's methods.
    pub fn support(&self) -> BTreeMap<Method, Support> {
        let known = self
            .slot
            .with_current(|c| c.map(|c| c.meta.support.clone()))
            .unwrap_or_default();
        Method::ALL
            .into_iter()
            .map(|m| (m, known.get(&m).copied().unwrap_or(Support::Unknown)))
            .collect()
    }

    /// The NetScript definitions cached for this game connection (they only change with the game).
    pub fn cached_definitions(&self) -> Option<Arc<String>> {
        self.slot
            .with_current(|c| c.and_then(|c| c.meta.definitions.clone()))
    }

    pub fn cache_definitions(&self, text: Arc<String>) {
        self.slot.with_current(|c| {
            if let Some(c) = c {
                c.meta.definitions = Some(text);
            }
        });
    }

    pub fn status(&self) -> LinkStatus {
        let (host, port) = &self.config.advertised;
        let (since, peer, origin) = self.slot.with_current(|c| match c {
            Some(c) => (
                Some(c.since),
                c.meta.peer.map(|p| p.to_string()),
                c.meta.origin.clone(),
            ),
            None => (None, None, None),
        });
        LinkStatus {
            connected: since.is_some(),
            connected_since_ms: since.map(unix_ms),
            connected_for_s: since.map(|s| s.elapsed().map(|d| d.as_secs()).unwrap_or(0)),
            peer,
            origin,
            connections_total: self.slot.connections_total(),
            last_disconnect: self.slot.last_end().map(|(_, r)| r),
            listen: format!("ws://{host}:{port}"),
            calls_waiting_for_game: self.waiting.load(Ordering::SeqCst),
        }
    }
}

/// What the player can do when the connected game lacks `method`.
fn unsupported_hint(method: Method) -> String {
    match method {
        // No other tool can fetch a save: the game's own menu can.
        Method::GetSaveFile => format!(
            "this game is older than {}, which is the first to send its save through the Remote API: ask the \
             player to save it from the game instead (Options → Export Game, which downloads the save file), \
             or to update the game",
            method.since()
        ),
        _ => format!(
            "`{}` needs Bitburner {} or newer; update the game or use another tool",
            method.name(),
            method.since()
        ),
    }
}

pub(crate) fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

use bridge_core::link::log_limit::LogLimit;

/// Hands one frame from the game to its waiter. The game never sends anything unsolicited, so a frame that
/// is not an answer to a pending request of ours is logged and dropped.
fn route_reply(link: u64, correlator: &Correlator<Outcome>, text: &str) {
    match wire::parse_response(text) {
        Ok(response) => match response.id.as_ref().and_then(parse_id) {
            Some(id) => {
                correlator.resolve(id, response.outcome);
            }
            None => {
                static LOG: LogLimit = LogLimit::new();
                if let Some(left_out) = LOG.allow() {
                    let id = bridge_core::text::for_log(&format!("{:?}", response.id));
                    tracing::warn!(link, %id, left_out, "reply without one of our ids dropped")
                }
            }
        },
        Err(e) => match wire::salvage_id(text).as_ref().and_then(parse_id) {
            Some(id) if correlator.resolve(id, Outcome::Malformed(e.to_string())) => {
                let error = bridge_core::text::for_log(&e.to_string());
                tracing::warn!(link, id, %error, bytes = text.len(), "malformed answer from the game");
            }
            _ => {
                static LOG: LogLimit = LogLimit::new();
                if let Some(left_out) = LOG.allow() {
                    let error = bridge_core::text::for_log(&e.to_string());
                    tracing::warn!(link, %error, bytes = text.len(), left_out, "malformed frame from the game ignored")
                }
            }
        },
    }
}
