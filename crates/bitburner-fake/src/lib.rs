//! A test double of the game's Remote API, described in `docs/protocols/bitburner.md` (the real game cannot be
//! installed here). Like the game, it is the WebSocket *client*: it connects to the bridge, sends nothing
//! until asked, and answers each request the way the real dispatcher does (see `handlers.rs`).
//!
//! Tests steer it through [`GameConnection`]: stop answering (a hung game), hold answers until released (a slow
//! game, so a test can act while a request is in flight), send raw frames, close.

mod handlers;
mod helper;
mod world;

pub use handlers::{Reply, dispatch};
pub use helper::{HelperHandle, Process};
pub use world::{GameFile, GameServer, World};

use futures::{SinkExt, StreamExt};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};

/// Which game the double imitates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GameVersion {
    /// v2.6.1: the transcript of §8; no `getSaveFile`/metadata; missing params get no answer.
    V2_6,
    /// v3.0.x: detailed errors, `.css`, metadata, saves.
    V3_0,
    /// dev after 3.0.1: as v3.0 on the wire, but `id` comes before `result`.
    Dev,
}

impl std::str::FromStr for GameVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "2.6" | "v2.6" => Ok(Self::V2_6),
            "3.0" | "v3.0" => Ok(Self::V3_0),
            "dev" => Ok(Self::Dev),
            other => Err(format!(
                "unknown game version {other:?}: use 2.6, 3.0 or dev"
            )),
        }
    }
}

/// The Origin of the hosted web build; the real Steam build's value is unverified (§5).
pub const WEB_ORIGIN: &str = "https://bitburner-official.github.io";

/// The close code v2.8–v3.0 use when the player presses Disconnect (`Remote.ts` @1b4a312).
pub const INTENTIONAL_CLOSE: u16 = 3000;

#[derive(Debug, thiserror::Error)]
pub enum FakeGameError {
    #[error("cannot connect to {url}: {source}")]
    Connect {
        url: String,
        #[source]
        source: Box<tungstenite::Error>,
    },
    #[error("invalid Origin header: {0}")]
    Origin(String),
}

/// One game with its servers and files, which survive reconnects as in the real game.
#[derive(Clone)]
pub struct FakeGame {
    version: GameVersion,
    world: Arc<Mutex<World>>,
}

impl FakeGame {
    pub fn new(version: GameVersion) -> Self {
        Self {
            version,
            world: Arc::new(Mutex::new(World::default())),
        }
    }

    pub fn version(&self) -> GameVersion {
        self.version
    }

    /// The game's state, to seed or inspect it from a test.
    pub fn world(&self) -> MutexGuard<'_, World> {
        lock(&self.world)
    }

    /// Connect as the game does on "Connect": `new WebSocket("ws://host:port")`, no subprotocol, with an
    /// Origin header (`None` sends none).
    pub async fn connect(
        &self,
        url: &str,
        origin: Option<&str>,
    ) -> Result<GameConnection, FakeGameError> {
        let mut request = url
            .into_client_request()
            .map_err(|source| FakeGameError::Connect {
                url: url.to_owned(),
                source: Box::new(source),
            })?;
        if let Some(origin) = origin {
            let value = origin
                .parse()
                .map_err(|_| FakeGameError::Origin(origin.to_owned()))?;
            request.headers_mut().insert("Origin", value);
        }
        let (socket, _) = tokio_tungstenite::connect_async(request)
            .await
            .map_err(|source| FakeGameError::Connect {
                url: url.to_owned(),
                source: Box::new(source),
            })?;
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let (received_tx, received_rx) = watch::channel(Vec::new());
        let (closed_tx, closed_rx) = watch::channel(None);
        let answering = Arc::new(Mutex::new(true));
        let holding = Arc::new(Mutex::new(Holding::default()));
        tokio::spawn(run(
            socket,
            self.clone(),
            Arc::clone(&answering),
            Arc::clone(&holding),
            control_rx,
            received_tx,
            closed_tx,
        ));
        Ok(GameConnection {
            control: control_tx,
            answering,
            holding,
            received: received_rx,
            closed: closed_rx,
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock can only come from a test; its state is still usable.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

enum Control {
    Send(Message),
    Close(u16),
    Freeze,
    /// Answer the requests held up to this hold generation.
    Release(u64),
}

/// Whether requests are held, and how many holds began: a request is held under the generation it came in,
/// so a release answers the requests of the holds before it, and a hold begun right after a release (before the
/// connection's task took the release) keeps what comes next.
#[derive(Default)]
struct Holding {
    on: bool,
    generation: u64,
}

/// How the connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closed {
    /// The bridge closed it (for example because a newer game connected).
    ByPeer { code: Option<u16>, reason: String },
    /// We closed it.
    ByUs,
    /// The socket failed without a close frame.
    Dropped(String),
}

/// A live connection of the fake game, with test controls.
pub struct GameConnection {
    control: mpsc::UnboundedSender<Control>,
    answering: Arc<Mutex<bool>>,
    holding: Arc<Mutex<Holding>>,
    received: watch::Receiver<Vec<String>>,
    closed: watch::Receiver<Option<Closed>>,
}

impl GameConnection {
    /// Keep reading requests but answer none, like a game stuck or a request the game silently drops.
    pub fn set_answering(&self, answering: bool) {
        *lock(&self.answering) = answering;
    }

    /// Keep every request from now on unanswered until [`release`](Self::release), like a game busy for a
    /// while: the bridge's call stays in flight, and the test can act meanwhile. Each request is recorded in
    /// [`received`](Self::received) when it arrives, so a test can wait for the one it means to hold.
    pub fn hold(&self) {
        let mut holding = lock(&self.holding);
        holding.on = true;
        holding.generation += 1;
    }

    /// Answer the held requests, in the order they came, and stop holding. A request arriving before they are
    /// answered waits behind them.
    pub fn release(&self) {
        let mut holding = lock(&self.holding);
        holding.on = false;
        let _ = self.control.send(Control::Release(holding.generation));
    }

    /// Every request of `method` the bridge sent so far, as its `params`.
    pub fn requests(&self, method: &str) -> Vec<serde_json::Value> {
        self.received()
            .iter()
            .filter_map(|t| serde_json::from_str::<serde_json::Value>(t).ok())
            .filter(|v| v.get("method").and_then(|m| m.as_str()) == Some(method))
            .map(|v| v.get("params").cloned().unwrap_or(serde_json::Value::Null))
            .collect()
    }

    /// Send a frame of our own (a malformed reply, an unknown id, ...).
    pub fn send_text(&self, text: impl Into<String>) {
        let _ = self.control.send(Control::Send(Message::text(text.into())));
    }

    /// Close as the player's Disconnect does.
    pub fn close(&self) {
        let _ = self.control.send(Control::Close(INTENTIONAL_CLOSE));
    }

    /// Stop reading the socket altogether, as a frozen or suspended browser tab does: pings go unanswered.
    pub fn freeze(&self) {
        let _ = self.control.send(Control::Freeze);
    }

    /// Every text frame received from the bridge so far.
    pub fn received(&self) -> Vec<String> {
        self.received.borrow().clone()
    }

    /// Every method the bridge asked for so far, in order.
    pub fn methods(&self) -> Vec<String> {
        self.received()
            .iter()
            .filter_map(|t| serde_json::from_str::<serde_json::Value>(t).ok())
            .filter_map(|v| v.get("method").and_then(|m| m.as_str()).map(str::to_owned))
            .collect()
    }

    /// Wait until at least `n` frames have arrived.
    pub async fn wait_for_frames(&self, n: usize) -> Vec<String> {
        let mut rx = self.received.clone();
        let got = rx.wait_for(|frames| frames.len() >= n).await;
        match got {
            Ok(frames) => frames.clone(),
            Err(_) => self.received(),
        }
    }

    /// Wait until the connection has ended, and say how.
    pub async fn wait_closed(&self) -> Closed {
        let mut rx = self.closed.clone();
        let got = rx.wait_for(Option::is_some).await;
        match got {
            Ok(state) => state.clone().unwrap_or(Closed::ByUs),
            Err(_) => Closed::Dropped("connection task ended".into()),
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.borrow().is_some()
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn run(
    socket: Socket,
    game: FakeGame,
    answering: Arc<Mutex<bool>>,
    holding: Arc<Mutex<Holding>>,
    mut control: mpsc::UnboundedReceiver<Control>,
    received: watch::Sender<Vec<String>>,
    closed: watch::Sender<Option<Closed>>,
) {
    let (mut sink, mut stream) = socket.split();
    // Each held request with the hold generation it came in under.
    let mut held: Vec<(u64, String)> = Vec::new();
    let outcome = loop {
        tokio::select! {
            command = control.recv() => match command {
                Some(Control::Send(message)) => {
                    if let Err(e) = sink.send(message).await {
                        break Closed::Dropped(e.to_string());
                    }
                }
                Some(Control::Close(code)) => {
                    let frame = CloseFrame { code: CloseCode::from(code), reason: "".into() };
                    let _ = sink.send(Message::Close(Some(frame))).await;
                    break Closed::ByUs;
                }
                Some(Control::Freeze) => {
                    // Hold the socket without reading it until the bridge gives up on us and the OS
                    // reports the connection gone, or the test ends.
                    while let Some(command) = control.recv().await {
                        if let Control::Close(_) = command {
                            break;
                        }
                    }
                    break Closed::ByUs;
                }
                Some(Control::Release(generation)) => {
                    let (due, later) = std::mem::take(&mut held)
                        .into_iter()
                        .partition::<Vec<_>, _>(|(g, _)| *g <= generation);
                    held = later;
                    let mut dropped = None;
                    for (_, text) in due {
                        let reply = dispatch(&mut game.world(), game.version, &text);
                        if let Reply::Send(frame) = reply
                            && let Err(e) = sink.send(Message::text(frame)).await
                        {
                            dropped = Some(e.to_string());
                            break;
                        }
                    }
                    if let Some(e) = dropped {
                        break Closed::Dropped(e);
                    }
                }
                None => break Closed::ByUs,
            },
            frame = stream.next() => match frame {
                Some(Ok(Message::Text(text))) => {
                    let text = text.to_string();
                    received.send_modify(|frames| frames.push(text.clone()));
                    if !*lock(&answering) {
                        continue;
                    }
                    {
                        let holding = lock(&holding);
                        // Also behind held requests whose release is on its way, so answers keep their order.
                        if holding.on || !held.is_empty() {
                            held.push((holding.generation, text));
                            continue;
                        }
                    }
                    let reply = dispatch(&mut game.world(), game.version, &text);
                    if let Reply::Send(frame) = reply
                        && let Err(e) = sink.send(Message::text(frame)).await
                    {
                        break Closed::Dropped(e.to_string());
                    }
                }
                // A Blob reaches `JSON.parse` and throws: binary frames get no answer (§2.2).
                Some(Ok(Message::Binary(_))) => {}
                // Browsers answer pings by themselves; tungstenite queues the pong for us (§5 heartbeat).
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                Some(Ok(Message::Close(frame))) => {
                    break Closed::ByPeer {
                        code: frame.as_ref().map(|f| u16::from(f.code)),
                        reason: frame.map(|f| f.reason.to_string()).unwrap_or_default(),
                    };
                }
                Some(Err(e)) => break Closed::Dropped(e.to_string()),
                None => break Closed::Dropped("stream ended".into()),
            },
        }
    };
    // Flushes the close reply tungstenite queued, or sends ours, so the peer sees a clean close.
    let _ = sink.close().await;
    closed.send_replace(Some(outcome));
}
