//! The JetStream bus. Game side: each game instance's events are published in order to `mc.events.<game>`
//! on the stream `MC_EVENTS`, with `Nats-Msg-Id` `<game>/<instance>/<seq>` so a resend (the game's, after a
//! relay died; or ours, after a NATS node died) is stored once; the game's `ack` follows JetStream's, so an
//! acknowledged event is on the stream's replicas. MCP side: each client reads through the durable consumer
//! `mcp-<token>-<clientId>`; what the client acknowledges (its relay `seq`) is acknowledged to JetStream, and a
//! relay taking the client over recreates that consumer from its ack floor, so nothing acknowledged comes back
//! and nothing unacknowledged is skipped. Events the stream no longer holds are reported (`lost`, reason
//! `stream_limits`). A game's name is the cluster's: claimed in the stream `MC_GAME_NAMES` before the game is
//! welcomed, so two servers named alike on two relays cannot both publish to `mc.events.<game>` (see
//! [`NatsBus::claim_name`]).

use super::BusConfig;
use super::bounded::{Bounded, Budget, Latest};
use crate::relay::state::{ClientKey, Relay};
use crate::wire::EventType;
use async_nats::jetstream::{self, consumer, stream};
use async_nats::{ServerAddr, Subject};
use bridge_core::link::LinkSender;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::FuturesOrdered;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// The stream holding every game's events.
pub const STREAM: &str = "MC_EVENTS";
/// Subjects of that stream: `mc.events.<game>`.
pub const EVENTS: &str = "mc.events";
/// The stream holding (one message a subject `mc.floors.<consumer>`, the latest), per client consumer, the stream sequence below which the client has had
/// and acknowledged everything: JetStream moves a consumer's own ack floor past events that aged out unread,
/// so that floor cannot tell what a client missed; this one can.
const FLOORS: &str = "MC_CLIENT_FLOORS";
const FLOOR_SUBJECTS: &str = "mc.floors";
/// The header carrying an event's type, so a consumer filters by subscription without parsing the body.
const TYPE_HEADER: &str = "Mc-Type";
/// Publishes awaiting JetStream's answer per game instance.
const IN_FLIGHT: usize = 1024;
/// How long a client's hello waits for JetStream to say where live events start (`NatsBus::live_start`).
const LIVE_START_WAIT: Duration = Duration::from_secs(2);
/// How long a delivered event may stay unacknowledged before JetStream delivers it again.
const ACK_WAIT: Duration = Duration::from_secs(30);
/// Commands for a game go to `mc.cmd.<game>`, answered by the relay holding its link (core NATS
/// request/reply: a command is not replayed, so it needs no stream).
const COMMANDS: &str = "mc.cmd";
/// Every relay says which games it holds here, every [`PRESENCE_EVERY`] and whenever one connects.
const PRESENCE: &str = "mc.relays.games";
const PRESENCE_EVERY: Duration = Duration::from_secs(1);
/// A relay not heard from for this long holds no game any more (it died).
const PRESENCE_EXPIRES: Duration = Duration::from_secs(4);
/// The stream of claims: one message a subject, the latest claim: `mc.names.<game>` for a game name,
/// `mc.names.mcp.<token>.<clientId>` for an MCP client id (five tokens, so never a game's three). A claim is
/// published with `Nats-Expected-Last-Subject-Sequence` (0 for a name never claimed, else the sequence of the
/// claim it replaces), so of two relays claiming at once only one succeeds.
const NAMES: &str = "MC_GAME_NAMES";
const NAME_SUBJECTS: &str = "mc.names";
/// The relay holding a name writes its claim again this often...
const CLAIM_REFRESH: Duration = Duration::from_secs(1);
/// ...and a claim not written for this long (by JetStream's clock) is a dead relay's: another may take it.
const CLAIM_EXPIRES: Duration = Duration::from_secs(5);
/// How long a game's `hello` waits for JetStream to take its claim (a NATS node died, a leader is being
/// elected) before it is refused.
const CLAIM_PATIENCE: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum BusError {
    #[error("--bus (MINECRAFT_BUS): `{url}` is not a NATS server address: {reason}")]
    Url { url: String, reason: String },
    #[error("--bus (MINECRAFT_BUS): cannot reach NATS at {urls}: {reason}")]
    Connect { urls: String, reason: String },
    #[error("--bus (MINECRAFT_BUS): JetStream refused the stream {STREAM}: {0}")]
    Stream(String),
}

/// Why a game may not have its name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    /// Another live server holds it (on this relay or another): its instance.
    #[error("the name is held by instance {0}")]
    InUse(String),
    /// JetStream did not take the claim within [`CLAIM_PATIENCE`].
    #[error("the NATS cluster did not take the game name's claim: {0}")]
    Unavailable(String),
}

/// A name claim as stored in [`NAMES`].
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct ClaimRecord {
    relay: String,
    instance: String,
    /// A digest of the game token the relay admits games with: a name claimed under one token is not
    /// another token's while its claim lives.
    token: String,
    #[serde(default)]
    released: bool,
}

/// A name this relay holds: the claim's id here, its stream sequence, and the link it is for.
#[derive(Debug)]
struct Claim {
    id: u64,
    seq: u64,
    instance: String,
}

/// One attempt at a claim.
enum Attempt {
    InUse(String),
    /// Another relay wrote the claim between our read and our write: read again.
    Raced,
    Bus(String),
}

/// A relay's link to the NATS cluster.
#[derive(Debug, Clone)]
pub struct NatsBus {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    client: async_nats::Client,
    js: jetstream::Context,
    stream: stream::Stream,
    /// This relay's epoch: written as the description of the consumers it owns.
    epoch: String,
    config: BusConfig,
    publishers: Mutex<HashMap<(String, String), Publisher>>,
    pumps: Mutex<HashMap<ClientKey, Arc<Pump>>>,
    /// JetStream acknowledgements (reply subjects), published in order by one task; bounded in bytes. The
    /// pump's own acks wait for room; one that a client's ack releases and does not fit is dropped (counted;
    /// the client's reader cannot wait for NATS), and JetStream then delivers its event again after
    /// [`ACK_WAIT`], to the pump of this relay (which finds it behind what it read and acknowledges it
    /// again, the client never seeing it twice) or, after a takeover, to a relay that starts from the
    /// client's floor in [`FLOORS`], not from JetStream's acks. A lost ack costs a redelivery, never an event.
    acks: Arc<Bounded<Subject>>,
    floors: stream::Stream,
    /// Floors to write to [`FLOORS`]: the newest per consumer name, written by one task. A floor that does
    /// not fit (more consumers moved than the bound holds) is dropped, counted: a relay taking that client
    /// over starts from the older floor written before, so what it had acknowledged since comes again (the
    /// client drops it by `(game, id)`, PROTOCOL.md §5); nothing is skipped.
    floor_queue: Arc<Latest>,
    /// The games of the other relays, by relay epoch, with when that relay last said so.
    remote: Mutex<HashMap<String, (Vec<String>, std::time::Instant)>>,
    names: stream::Stream,
    /// The game names and client ids this relay holds, by their claim's subject.
    claims: Mutex<HashMap<String, Claim>>,
    next_claim: AtomicU64,
    /// Asks for a presence message now (a game connected here).
    presence_now: tokio::sync::Notify,
    pub stats: BusStats,
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct BusStats {
    pub published: AtomicU64,
    pub publish_retries: AtomicU64,
    pub delivered: AtomicU64,
    pub redelivered: AtomicU64,
    pub lost: AtomicU64,
    pub takeovers: AtomicU64,
    /// A pump whose client is connected here took its consumer back from a relay that recreated it late.
    pub retakes: AtomicU64,
}

/// One game instance's way to JetStream. Its channel carries no bound of its own: every byte in it (and in
/// flight to JetStream) is counted in `budget`, which the game's reader waits on before it accepts an event
/// ([`NatsBus::publish_room`]), so a game faster than NATS is slowed at its socket instead of growing this.
/// Events are never dropped here: the game's cumulative `ack` follows them, so a gap would lose one.
#[derive(Debug, Clone)]
struct Publisher {
    tx: mpsc::UnboundedSender<Outgoing>,
    persisted: watch::Receiver<u64>,
    budget: Arc<Budget>,
}

#[derive(Debug)]
struct Outgoing {
    seq: u64,
    ty: &'static str,
    body: Bytes,
}

/// One MCP client's consumer as this relay reads it.
#[derive(Debug, Default)]
struct Pump {
    tracker: Mutex<Tracker>,
    stop: CancellationToken,
}

/// Events handed to the client's queue and not yet acknowledged by it: its `seq`, the stream's, and where
/// to acknowledge it in JetStream.
#[derive(Debug, Default)]
struct Tracker {
    held: VecDeque<(u64, u64, Subject)>,
    /// The client's cumulative ack.
    acked: u64,
    /// The next stream sequence the pump will read.
    next: u64,
    /// The floor last written to [`FLOORS`].
    stored: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The durable consumer of a client: `mcp-<token>-<clientId>`, with `.` and `_` escaped (consumer names take
/// neither `.` nor the ambiguity).
pub fn consumer_name(key: &ClientKey) -> String {
    let mut out = format!("mcp-{}-", key.0);
    escape_into(&mut out, &key.1);
    out
}

/// `.` and `_` escaped, so a name is one subject token and two names never escape alike.
fn escape_into(out: &mut String, name: &str) {
    for c in name.chars() {
        match c {
            '_' => out.push_str("__"),
            '.' => out.push_str("_d"),
            c => out.push(c),
        }
    }
}

/// The subject of a game name's claim.
fn name_subject(name: &str) -> String {
    let mut out = format!("{NAME_SUBJECTS}.");
    escape_into(&mut out, name);
    out
}

/// The subject of an MCP client id's claim.
fn client_subject(key: &ClientKey) -> String {
    let mut out = format!("{NAME_SUBJECTS}.mcp.{}.", key.0);
    escape_into(&mut out, &key.1);
    out
}

/// How long ago JetStream stored `message` (zero if its clock is ahead of ours).
fn age(message: &jetstream::message::StreamMessage) -> Duration {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let then = u128::try_from(message.time.unix_timestamp_nanos()).unwrap_or(0);
    Duration::from_nanos(u64::try_from(now.saturating_sub(then)).unwrap_or(u64::MAX))
}

impl NatsBus {
    /// Connects to the cluster (any of `urls`, the others on failover) and makes sure the event stream exists.
    pub async fn connect(config: BusConfig, epoch: &str) -> Result<Self, BusError> {
        let mut addrs = Vec::new();
        for url in config
            .urls
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
        {
            let addr: ServerAddr = url.parse().map_err(|e: std::io::Error| BusError::Url {
                url: url.to_owned(),
                reason: e.to_string(),
            })?;
            addrs.push(addr);
        }
        if addrs.is_empty() {
            return Err(BusError::Url {
                url: config.urls.clone(),
                reason: "no address given".to_owned(),
            });
        }
        let client = async_nats::ConnectOptions::new()
            .name(format!("minecraft-relay {epoch}"))
            .connection_timeout(Duration::from_secs(5))
            .max_reconnects(None)
            .retry_on_initial_connect()
            .connect(addrs)
            .await
            .map_err(|e| BusError::Connect {
                urls: config.urls.clone(),
                reason: e.to_string(),
            })?;
        let js = jetstream::new(client.clone());
        let wanted = stream::Config {
            name: STREAM.to_owned(),
            subjects: vec![format!("{EVENTS}.>")],
            max_age: config.max_age,
            max_bytes: i64::try_from(config.max_bytes).unwrap_or(i64::MAX),
            num_replicas: config.replicas,
            storage: stream::StorageType::File,
            // Resends within this window are stored once; JetStream wants it within the age limit.
            duplicate_window: config.max_age.min(Duration::from_secs(120)),
            ..Default::default()
        };
        // A cluster electing its first leaders answers "no responders" or times out for a moment; the three
        // streams share one budget of tries.
        let mut tries = 0;
        let stream = ensure_stream(&js, wanted, &mut tries).await?;
        let small = |name: &str, subjects: &str| stream::Config {
            name: name.to_owned(),
            subjects: vec![format!("{subjects}.>")],
            max_messages_per_subject: 1,
            num_replicas: config.replicas,
            storage: stream::StorageType::File,
            ..Default::default()
        };
        let floors = ensure_stream(&js, small(FLOORS, FLOOR_SUBJECTS), &mut tries).await?;
        let names = ensure_stream(&js, small(NAMES, NAME_SUBJECTS), &mut tries).await?;
        let floor_queue = Arc::new(Latest::new(config.buffer_bytes));
        tokio::spawn(write_floors(
            client.clone(),
            js.clone(),
            Arc::clone(&floor_queue),
        ));
        let acks = Arc::new(Bounded::new(config.buffer_bytes));
        tokio::spawn(send_acks(client.clone(), Arc::clone(&acks)));
        tracing::info!(urls = %config.urls, replicas = config.replicas, "relay bus: NATS JetStream stream {STREAM}");
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                js,
                stream,
                epoch: epoch.to_owned(),
                config,
                publishers: Mutex::new(HashMap::new()),
                pumps: Mutex::new(HashMap::new()),
                acks,
                floors,
                floor_queue,
                remote: Mutex::new(HashMap::new()),
                names,
                claims: Mutex::new(HashMap::new()),
                next_claim: AtomicU64::new(1),
                presence_now: tokio::sync::Notify::new(),
                stats: BusStats::default(),
            }),
        })
    }

    pub fn stats(&self) -> &BusStats {
        &self.inner.stats
    }

    pub fn client(&self) -> &async_nats::Client {
        &self.inner.client
    }

    fn publisher(&self, game: &str, instance: &str) -> Publisher {
        let mut map = lock(&self.inner.publishers);
        let key = (game.to_owned(), instance.to_owned());
        if let Some(p) = map.get(&key).filter(|p| !p.tx.is_closed()) {
            return p.clone();
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let (done, persisted) = watch::channel(0);
        let budget = Arc::new(Budget::new(self.inner.config.buffer_bytes));
        tokio::spawn(publish_loop(
            Arc::clone(&self.inner),
            game.to_owned(),
            instance.to_owned(),
            rx,
            done,
            Arc::clone(&budget),
        ));
        let publisher = Publisher {
            tx,
            persisted,
            budget,
        };
        map.insert(key, publisher.clone());
        publisher
    }

    /// Drops this game instance's publisher: the relay forgot the instance (a dead one, pushed out of its
    /// bounds, state.rs `Instances`). Events still on their way to JetStream go on (the loop drains what it
    /// was given, then ends); an instance that comes back starts from `persisted` 0 and resends, which the
    /// message ids (`<game>/<instance>/<seq>`) make harmless within JetStream's duplicate window.
    pub fn forget(&self, game: &str, instance: &str) {
        lock(&self.inner.publishers).remove(&(game.to_owned(), instance.to_owned()));
    }

    /// The highest `seq` of this game instance that JetStream holds (0 if none this relay published).
    pub fn persisted(&self, game: &str, instance: &str) -> u64 {
        *self.publisher(game, instance).persisted.borrow()
    }

    /// Waits until this game instance has less than `--bus-buffer-bytes` of events on their way to
    /// JetStream. The game's reader calls it before accepting an event, so a game faster than NATS waits at
    /// its socket (its adapter keeps the events in its outbox) rather than growing this relay.
    pub async fn publish_room(&self, game: &str, instance: &str) {
        let budget = Arc::clone(&self.publisher(game, instance).budget);
        budget.room().await;
    }

    /// Publishes a game's event (the text MCP clients get, without its `seq`); the game's `ack` waits for
    /// JetStream's (see [`NatsBus::forward_acks`]). Counted in the instance's budget until JetStream holds it.
    pub fn publish_event(&self, game: &str, instance: &str, seq: u64, ty: EventType, body: String) {
        let publisher = self.publisher(game, instance);
        publisher.budget.add(body.len());
        let _ = publisher.tx.send(Outgoing {
            seq,
            ty: ty.as_str(),
            body: Bytes::from(body),
        });
    }

    /// Acknowledges to a game link every event of its instance that JetStream holds, as it comes to hold
    /// them; ends with the link.
    pub fn forward_acks(&self, game: &str, instance: &str, sender: LinkSender, from: u64) {
        let mut persisted = self.publisher(game, instance).persisted;
        tokio::spawn(async move {
            let mut acked = from;
            loop {
                let seq = *persisted.borrow_and_update();
                if seq > acked {
                    let ack = crate::wire::Envelope::new(
                        crate::wire::Kind::Ack,
                        format!("a-{seq}"),
                        crate::wire::Source::Relay,
                        serde_json::json!({"seq": seq}),
                    );
                    if sender.send_text(ack.to_text()).await.is_err() {
                        return;
                    }
                    acked = seq;
                }
                tokio::select! {
                    changed = persisted.changed() => if changed.is_err() { return },
                    () = tokio::time::sleep(Duration::from_secs(1)) => if sender.is_closed() { return },
                }
            }
        });
    }

    /// Where live events start now: the stream sequence the next event will get. Read before a client's
    /// welcome is sent, so that a first connection's events start no later than its welcome: read after
    /// (when the pump takes the consumer over), an event the game sent in between was skipped, unreported.
    /// `None` when JetStream does not answer soon; the pump then reads it itself, as before.
    pub async fn live_start(&self) -> Option<u64> {
        let mut stream = self.inner.stream.clone();
        let info = tokio::time::timeout(LIVE_START_WAIT, stream.info()).await;
        match info {
            Ok(Ok(info)) => Some(info.state.last_sequence + 1),
            _ => None,
        }
    }

    /// An MCP client said `hello` here: this relay reads its consumer, taking it over from wherever it was
    /// read before. `resume` (the hello named an epoch) continues from the consumer's ack floor; a first
    /// connection starts with live events, from `live_from` ([`Self::live_start`] read before its welcome)
    /// when known.
    pub fn attach(&self, relay: &Relay, key: &ClientKey, resume: bool, live_from: Option<u64>) {
        let pump = {
            let mut pumps = lock(&self.inner.pumps);
            if pumps.get(key).is_some_and(|p| !p.stop.is_cancelled()) {
                return;
            }
            let pump = Arc::new(Pump::default());
            pumps.insert(key.clone(), Arc::clone(&pump));
            pump
        };
        tokio::spawn(run_pump(
            Arc::clone(&self.inner),
            relay.clone(),
            key.clone(),
            pump,
            resume,
            live_from,
        ));
    }

    /// The client acknowledged everything up to its `seq`: so does JetStream.
    pub fn client_acked(&self, key: &ClientKey, seq: u64) {
        let Some(pump) = lock(&self.inner.pumps).get(key).cloned() else {
            return;
        };
        let mut t = lock(&pump.tracker);
        t.acked = t.acked.max(seq);
        while t.held.front().is_some_and(|h| h.0 <= seq) {
            if let Some((_, _, reply)) = t.held.pop_front() {
                ack(&self.inner, reply);
            }
        }
        // Everything below the oldest event still held (or below the next to read) the client has had.
        let floor = t
            .held
            .front()
            .map_or(t.next.saturating_sub(1), |h| h.1.saturating_sub(1));
        if floor > t.stored {
            t.stored = floor;
            self.inner.floor_queue.put(&consumer_name(key), floor);
        }
    }

    /// Claims `name` for the game `instance` linking through `sender`, cluster-wide, before it is welcomed.
    /// The name is free when no claim exists, when its claim was released or expired (its relay died), or
    /// when it is held by the same instance under the same game token (the game reconnected, here or at
    /// another relay). A name this relay holds is judged by its own table, as without the bus. Once claimed,
    /// the claim is refreshed while the link lives and released when it ends; a claim another relay took
    /// over (ours expired while NATS was out of reach) closes the link here.
    pub async fn claim_name(
        &self,
        relay: &Relay,
        name: &str,
        instance: &str,
        sender: &LinkSender,
    ) -> Result<(), ClaimError> {
        let local = || relay.lock().name_held_by(name, instance);
        let what = format!("game name {name}");
        let (holder, name_owned, instance_owned) =
            (relay.clone(), name.to_owned(), instance.to_owned());
        let successor: Successor =
            Box::new(move || holder.lock().game_link(&name_owned, &instance_owned));
        self.claim(name_subject(name), instance, local, what, sender, successor)
            .await
    }

    /// Claims the client id of `key` for the MCP server `instance` (none: a server that sent no `instance`,
    /// which only a dead relay's or a released claim makes way for) linking through `sender`, cluster-wide,
    /// as [`Self::claim_name`] does for a game: two MCP servers under one client id on two relays would read
    /// one consumer and take each other's events and answers. A client id held on this relay is judged by its
    /// own table, as without the bus.
    pub async fn claim_client(
        &self,
        relay: &Relay,
        key: &ClientKey,
        instance: Option<&str>,
        sender: &LinkSender,
    ) -> Result<(), ClaimError> {
        let local = || relay.lock().client_held_by(key, instance);
        let what = format!("client id {}", key.1);
        let (holder, key_owned, instance_owned) =
            (relay.clone(), key.clone(), instance.map(str::to_owned));
        let successor: Successor = Box::new(move || {
            holder
                .lock()
                .client_link(&key_owned, instance_owned.as_deref())
        });
        // The instance is the server's secret: the bus keeps a digest of it.
        let instance = instance.map(super::digest).unwrap_or_default();
        self.claim(
            client_subject(key),
            &instance,
            local,
            what,
            sender,
            successor,
        )
        .await
    }

    /// Claims `subject` for `instance` (`""` matches no instance), `local` saying who holds it on this relay,
    /// `successor` which live link here holds it for `instance` once `sender` closes.
    async fn claim(
        &self,
        subject: String,
        instance: &str,
        local: impl Fn() -> Option<String>,
        what: String,
        sender: &LinkSender,
        successor: Successor,
    ) -> Result<(), ClaimError> {
        let deadline = tokio::time::Instant::now() + CLAIM_PATIENCE;
        let seq = loop {
            match self.try_claim(&subject, instance, &local).await {
                Ok(seq) => break seq,
                Err(Attempt::InUse(holder)) => return Err(ClaimError::InUse(holder)),
                Err(Attempt::Raced) => continue,
                Err(Attempt::Bus(e)) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(claim = %what, error = %e, "claiming");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(Attempt::Bus(e)) => return Err(ClaimError::Unavailable(e)),
            }
        };
        let id = self.inner.next_claim.fetch_add(1, Ordering::Relaxed);
        lock(&self.inner.claims).insert(
            subject.clone(),
            Claim {
                id,
                seq,
                instance: instance.to_owned(),
            },
        );
        tokio::spawn(hold_claim(
            Arc::clone(&self.inner),
            what,
            subject,
            id,
            sender.clone(),
            successor,
        ));
        Ok(())
    }

    /// One read-then-write of a claim: the sequence of ours, or why not.
    async fn try_claim(
        &self,
        subject: &str,
        instance: &str,
        local: &impl Fn() -> Option<String>,
    ) -> Result<u64, Attempt> {
        let inner = &self.inner;
        let last = match inner.names.get_last_raw_message_by_subject(subject).await {
            Ok(m) => Some(m),
            Err(e) if e.kind() == stream::LastRawMessageErrorKind::NoMessageFound => None,
            Err(e) => return Err(Attempt::Bus(e.to_string())),
        };
        let expected = match last {
            None => 0,
            Some(m) => {
                let record = serde_json::from_slice::<ClaimRecord>(&m.payload).ok();
                let held_by = match record {
                    None => None,
                    Some(r) if r.released || age(&m) > CLAIM_EXPIRES => None,
                    Some(r)
                        if !instance.is_empty()
                            && r.instance == instance
                            && r.token == inner.config.token_hash =>
                    {
                        None
                    }
                    // Ours: held while a live link here has it, as without the bus.
                    Some(r) if r.relay == inner.epoch => local(),
                    Some(r) => Some(r.instance),
                };
                if let Some(holder) = held_by {
                    return Err(Attempt::InUse(holder));
                }
                m.sequence
            }
        };
        publish_claim(inner, subject, instance, false, expected).await
    }

    /// The games connected to the other relays now, sorted.
    pub fn remote_games(&self) -> Vec<String> {
        let remote = lock(&self.inner.remote);
        let mut games: Vec<String> = remote
            .values()
            .filter(|(_, at)| at.elapsed() < PRESENCE_EXPIRES)
            .flat_map(|(g, _)| g.iter().cloned())
            .collect();
        games.sort();
        games.dedup();
        games
    }

    /// Says which games this relay holds, and hears the others', until the relay stops.
    pub fn run_presence(&self, relay: &Relay, stop: CancellationToken) {
        let inner = Arc::clone(&self.inner);
        let relay = relay.clone();
        tokio::spawn(async move {
            let mut heard = match inner.client.subscribe(PRESENCE).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(error = %e, "relay bus: cannot hear the other relays' games");
                    return;
                }
            };
            let mut tick = tokio::time::interval(PRESENCE_EVERY);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = tick.tick() => {}
                    () = inner.presence_now.notified() => {}
                    Some(m) = heard.next() => {
                        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&m.payload) else { continue };
                        let Some(epoch) = v["relay"].as_str() else { continue };
                        if epoch == inner.epoch {
                            continue;
                        }
                        let games: Vec<String> = v["games"].as_array().map(|a| {
                            a.iter().filter_map(|g| g.as_str().map(str::to_owned)).collect()
                        }).unwrap_or_default();
                        lock(&inner.remote).insert(epoch.to_owned(), (games, std::time::Instant::now()));
                        continue;
                    }
                }
                let games = relay.lock().games_now().0;
                let text = serde_json::json!({"relay": inner.epoch, "games": games}).to_string();
                let _ = inner.client.publish(PRESENCE, Bytes::from(text)).await;
                lock(&inner.remote).retain(|_, (_, at)| at.elapsed() < PRESENCE_EXPIRES * 4);
            }
        });
    }

    /// Serves the commands other relays send `game` while its link (`sender`) is here.
    pub fn serve_commands(&self, relay: &Relay, game: &str, sender: LinkSender) {
        let inner = Arc::clone(&self.inner);
        let relay = relay.clone();
        let game = game.to_owned();
        inner.presence_now.notify_one();
        tokio::spawn(async move {
            // One queue group: a game's newer link here, subscribed before the older one's task ends, does
            // not make it hear a command twice.
            let mut commands = match inner
                .client
                .queue_subscribe(format!("{COMMANDS}.{game}"), "holders".to_owned())
                .await
            {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(game, error = %e, "relay bus: cannot take commands for this game");
                    return;
                }
            };
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                let m = tokio::select! {
                    _ = tick.tick() => {
                        if sender.is_closed() {
                            let _ = commands.unsubscribe().await;
                            inner.presence_now.notify_one();
                            return;
                        }
                        continue;
                    }
                    m = commands.next() => match m {
                        Some(m) => m,
                        None => return,
                    },
                };
                let Some(reply) = m.reply.clone() else {
                    continue;
                };
                let Ok(text) = std::str::from_utf8(&m.payload) else {
                    continue;
                };
                let Ok(parsed) = crate::wire::parse(text, crate::wire::MAX_ASSEMBLED_BYTES) else {
                    continue;
                };
                match relay.route_remote(reply.to_string(), &game, &parsed.envelope) {
                    Ok((to_game, out)) => {
                        crate::relay::conn::send_to_game(&relay, &to_game, out).await;
                    }
                    Err(mut out) => {
                        // No `seq` (0 is not one): the asking relay numbers it for its client.
                        out.seq = None;
                        let _ = inner
                            .client
                            .publish(reply, Bytes::from(out.to_text()))
                            .await;
                    }
                }
            }
        });
    }

    /// The answer to a command another relay forwarded: back to the asker's reply subject.
    pub fn reply(&self, subject: &str, text: String) {
        let client = self.inner.client.clone();
        let subject = subject.to_owned();
        tokio::spawn(async move {
            if let Err(e) = client.publish(subject, Bytes::from(text)).await {
                tracing::warn!(error = %e, "relay bus: an answer could not be sent back");
            }
        });
    }

    /// Sends a command for a game held by another relay and queues its answer (or the relay's own error:
    /// nobody holds the game, it did not answer in time) for `client`.
    pub fn forward_command(
        &self,
        relay: &Relay,
        client: &ClientKey,
        command: &crate::wire::Envelope,
        game: &str,
        name: &str,
    ) {
        use crate::wire::Code;
        let nats = self.inner.client.clone();
        let bus = self.clone();
        let relay = relay.clone();
        let client = client.clone();
        let mut out = command.clone();
        out.game = Some(game.to_owned());
        out.seq = None;
        let original = command.id.clone();
        let game = game.to_owned();
        let name = name.to_owned();
        let timeout = relay.settings().command_timeout + Duration::from_secs(2);
        tokio::spawn(async move {
            let request = async_nats::Request::new()
                .payload(Bytes::from(out.to_text()))
                .timeout(Some(timeout));
            let asked = nats.send_request(format!("{COMMANDS}.{game}"), request);
            // A relay that died with the request on its way may leave NATS routing it to nobody for a while
            // (no "no responders" then): once no relay announces the game any more, nothing will answer.
            let gone = async {
                loop {
                    tokio::time::sleep(PRESENCE_EVERY).await;
                    if !bus.remote_games().contains(&game)
                        && !relay.lock().games.contains_key(&game)
                    {
                        return;
                    }
                }
            };
            let answer = tokio::select! {
                answer = asked => Some(answer),
                () = gone => None,
            };
            let fail = |code: Code, message: String| {
                crate::relay::state::respond_error(
                    &original,
                    Some(&game),
                    0,
                    code,
                    &message,
                    serde_json::json!({"game": game, "command": name}),
                )
            };
            let Some(answer) = answer else {
                let response = fail(
                    Code::ConnectionError,
                    format!("game `{game}` is no longer connected to any relay"),
                );
                relay.queue_response(&client, &response);
                return;
            };
            let response = match answer {
                Ok(m) => match std::str::from_utf8(&m.payload)
                    .ok()
                    .and_then(|t| crate::wire::parse(t, crate::wire::MAX_ASSEMBLED_BYTES).ok())
                {
                    Some(p) => p.envelope,
                    None => fail(
                        Code::ServerError,
                        "the relay holding the game answered something unreadable".to_owned(),
                    ),
                },
                Err(e) if e.kind() == async_nats::client::RequestErrorKind::NoResponders => fail(
                    Code::ConnectionError,
                    format!("game `{game}` is not connected to any relay"),
                ),
                Err(e) if e.kind() == async_nats::client::RequestErrorKind::TimedOut => fail(
                    Code::Timeout,
                    format!("the game did not answer within {} ms", timeout.as_millis()),
                ),
                Err(e) => fail(Code::ConnectionError, format!("the bus failed: {e}")),
            };
            relay.queue_response(&client, &response);
        });
    }

    /// Stops reading every consumer (the relay is stopping; what was not acknowledged stays in JetStream).
    pub fn stop(&self) {
        for pump in lock(&self.inner.pumps).values() {
            pump.stop.cancel();
        }
    }

    /// Lines for `/metrics`.
    pub fn metrics(&self) -> String {
        use std::fmt::Write;
        let s = &self.inner.stats;
        let mut out = String::new();
        for (name, v) in [
            ("minecraft_relay_bus_published_total", &s.published),
            (
                "minecraft_relay_bus_publish_retries_total",
                &s.publish_retries,
            ),
            ("minecraft_relay_bus_delivered_total", &s.delivered),
            ("minecraft_relay_bus_redelivered_total", &s.redelivered),
            ("minecraft_relay_bus_lost_total", &s.lost),
            ("minecraft_relay_bus_takeovers_total", &s.takeovers),
            ("minecraft_relay_bus_retakes_total", &s.retakes),
        ] {
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name} {}", v.load(Ordering::Relaxed));
        }
        // The bounded queues (bounded.rs): bytes held now and at most, against `--bus-buffer-bytes`, and what
        // each dropped (acks and floors) or how often a game waited (events).
        let inner = &self.inner;
        let (mut publish_held, mut publish_peak, mut publish_waits) = (0, 0, 0);
        for p in lock(&inner.publishers).values() {
            publish_held += p.budget.gauge.held();
            publish_peak = publish_peak.max(p.budget.gauge.peak());
            publish_waits += p.budget.waits.load(Ordering::Relaxed);
        }
        let publishers = lock(&inner.publishers).len();
        let _ = writeln!(out, "# TYPE minecraft_relay_bus_publishers gauge");
        let _ = writeln!(out, "minecraft_relay_bus_publishers {publishers}");
        let gauges = [
            (
                "ack_queue",
                inner.acks.gauge.held(),
                inner.acks.gauge.peak(),
            ),
            (
                "floor_queue",
                inner.floor_queue.gauge.held(),
                inner.floor_queue.gauge.peak(),
            ),
            ("publish_queue", publish_held, publish_peak),
        ];
        for (name, held, peak) in gauges {
            let _ = writeln!(out, "# TYPE minecraft_relay_bus_{name}_bytes gauge");
            let _ = writeln!(out, "minecraft_relay_bus_{name}_bytes {held}");
            let _ = writeln!(out, "# TYPE minecraft_relay_bus_{name}_peak_bytes gauge");
            let _ = writeln!(out, "minecraft_relay_bus_{name}_peak_bytes {peak}");
        }
        let _ = writeln!(out, "# TYPE minecraft_relay_bus_buffer_limit_bytes gauge");
        let _ = writeln!(
            out,
            "minecraft_relay_bus_buffer_limit_bytes {}",
            inner.config.buffer_bytes
        );
        for (name, v) in [
            (
                "minecraft_relay_bus_acks_dropped_total",
                inner.acks.gauge.dropped(),
            ),
            (
                "minecraft_relay_bus_floors_dropped_total",
                inner.floor_queue.gauge.dropped(),
            ),
            ("minecraft_relay_bus_publish_waits_total", publish_waits),
        ] {
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name} {v}");
        }
        out
    }
}

/// Writes a claim of `subject` for `instance` (or its release) over the claim at stream sequence `expected`.
async fn publish_claim(
    inner: &Inner,
    subject: &str,
    instance: &str,
    released: bool,
    expected: u64,
) -> Result<u64, Attempt> {
    let record = ClaimRecord {
        relay: inner.epoch.clone(),
        instance: instance.to_owned(),
        token: inner.config.token_hash.clone(),
        released,
    };
    let body = serde_json::to_vec(&record).map_err(|e| Attempt::Bus(e.to_string()))?;
    let message = jetstream::message::PublishMessage::build()
        .payload(Bytes::from(body))
        .expected_last_subject_sequence(expected);
    let acked = match inner.js.send_publish(subject.to_owned(), message).await {
        Ok(ack) => ack.await,
        Err(e) => Err(e),
    };
    match acked {
        Ok(ack) => Ok(ack.sequence),
        Err(e) if e.kind() == jetstream::context::PublishErrorKind::WrongLastSequence => {
            Err(Attempt::Raced)
        }
        Err(e) => Err(Attempt::Bus(e.to_string())),
    }
}

/// The live link on this relay holding a claim's subject for its instance, asked when the claiming link closes.
type Successor = Box<dyn Fn() -> Option<LinkSender> + Send + Sync>;

/// Keeps a claim (of `what`: a game name, a client id) alive while its link lives, or another link here
/// holding it for the same instance ([`Successor`]), and releases it when none is left. Ends early when a
/// newer claim of this relay replaced it, or when another relay took it (then the link here is closed: the
/// name or client id is served there now).
async fn hold_claim(
    inner: Arc<Inner>,
    what: String,
    subject: String,
    id: u64,
    mut sender: LinkSender,
    successor: Successor,
) {
    let forget = || {
        let mut claims = lock(&inner.claims);
        if claims.get(&subject).is_some_and(|c| c.id == id) {
            claims.remove(&subject);
        }
    };
    let mut tick = tokio::time::interval(CLAIM_REFRESH);
    tick.tick().await;
    loop {
        let mut closed = tokio::select! {
            () = sender.closed() => true,
            _ = tick.tick() => sender.is_closed(),
        };
        // Another link of the same holder here may hold what `sender`'s claimed: the same server's second
        // link, closed before its welcome, left the first one live (a review's finding: releasing here left
        // the live link's id open to another server on another relay).
        if closed && let Some(live) = successor() {
            sender = live;
            closed = false;
        }
        let (seq, instance) = match lock(&inner.claims).get(&subject) {
            Some(c) if c.id == id => (c.seq, c.instance.clone()),
            _ => return,
        };
        match publish_claim(&inner, &subject, &instance, closed, seq).await {
            Ok(_) if closed => {
                forget();
                tracing::debug!(claim = %what, "released");
                return;
            }
            Ok(next) => {
                if let Some(c) = lock(&inner.claims).get_mut(&subject).filter(|c| c.id == id) {
                    c.seq = next;
                }
            }
            Err(Attempt::Raced) => {
                forget();
                if !closed {
                    tracing::warn!(claim = %what, "another relay took this claim (ours here expired): closing the link");
                    sender.close(&format!("the {what} was claimed through another relay"));
                }
                return;
            }
            // NATS out of reach for a moment: the next tick tries again (a release, then, is left to expire).
            Err(Attempt::Bus(e)) | Err(Attempt::InUse(e)) => {
                tracing::debug!(claim = %what, error = %e, "refreshing the claim");
                if closed {
                    forget();
                    return;
                }
            }
        }
    }
}

/// Publishes one game instance's events in order, many in flight, and raises `persisted` to the highest
/// `seq` below which JetStream acknowledged every one. A publish that fails (a NATS node died, a leader is
/// being elected) is sent again under the same message id until JetStream holds it.
async fn publish_loop(
    inner: Arc<Inner>,
    game: String,
    instance: String,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    persisted: watch::Sender<u64>,
    budget: Arc<Budget>,
) {
    let subject = format!("{EVENTS}.{game}");
    let mut in_flight = FuturesOrdered::new();
    let mut open = true;
    loop {
        tokio::select! {
            next = rx.recv(), if open && in_flight.len() < IN_FLIGHT => match next {
                Some(out) => {
                    let ack = send(&inner, &subject, &game, &instance, &out).await;
                    in_flight.push_back(async move {
                        let result = match ack {
                            Ok(ack) => ack.await.map(|_| ()),
                            Err(e) => Err(e),
                        };
                        (out, result)
                    });
                }
                None => open = false,
            },
            Some((out, result)) = in_flight.next() => {
                if let Err(e) = result {
                    tracing::warn!(game, error = %e, seq = out.seq, "JetStream did not take an event; sending it again");
                    resend(&inner, &subject, &game, &instance, &out).await;
                }
                inner.stats.published.fetch_add(1, Ordering::Relaxed);
                budget.release(out.body.len());
                persisted.send_if_modified(|s| {
                    let raised = out.seq > *s;
                    *s = (*s).max(out.seq);
                    raised
                });
            }
            else => return,
        }
    }
}

async fn send(
    inner: &Inner,
    subject: &str,
    game: &str,
    instance: &str,
    out: &Outgoing,
) -> Result<jetstream::context::PublishAckFuture, jetstream::context::PublishError> {
    let message = jetstream::message::PublishMessage::build()
        .payload(out.body.clone())
        .message_id(format!("{game}/{instance}/{}", out.seq))
        .header(TYPE_HEADER, out.ty);
    inner.js.send_publish(subject.to_owned(), message).await
}

/// Sends one event until JetStream acknowledges it (the message id makes a copy it already had harmless).
async fn resend(inner: &Inner, subject: &str, game: &str, instance: &str, out: &Outgoing) {
    let mut wait = Duration::from_millis(50);
    loop {
        inner.stats.publish_retries.fetch_add(1, Ordering::Relaxed);
        let result = match send(inner, subject, game, instance, out).await {
            Ok(ack) => ack.await.map(|_| ()),
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => return,
            Err(e) => tracing::debug!(game, error = %e, seq = out.seq, "retrying an event"),
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(1));
    }
}

/// Queues a JetStream ack for a client's own ack (see [`Inner::acks`] for why one that does not fit may be
/// dropped): the client's reader cannot wait for NATS.
fn ack(inner: &Inner, reply: Subject) {
    let bytes = reply.len();
    inner.acks.push(reply, bytes);
}

/// Queues a JetStream ack the pump makes (an event this client does not take, or one delivered again):
/// the pump waits for room, reading JetStream no faster than its acks leave, and drops none. False when
/// the pump was stopped meanwhile (the ack is left to JetStream's redelivery).
async fn ack_or_stop(inner: &Inner, pump: &Pump, reply: Subject) -> bool {
    let bytes = reply.len();
    tokio::select! {
        () = pump.stop.cancelled() => false,
        () = inner.acks.push_wait(reply, bytes) => true,
    }
}

/// Sends the queued JetStream acks while NATS is reachable. While it is not they wait in the bounded
/// queue, where they are counted, rather than in the NATS client's own buffer.
async fn send_acks(client: async_nats::Client, acks: Arc<Bounded<Subject>>) {
    loop {
        while client.connection_state() != async_nats::connection::State::Connected {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for reply in acks.pop(256).await {
            let _ = client.publish(reply, Bytes::from_static(b"+ACK")).await;
        }
    }
}

/// Writes the queued client floors to [`FLOORS`]. One that JetStream did not take goes back to the queue
/// (unless a newer floor of its consumer came meanwhile) and is tried again.
async fn write_floors(client: async_nats::Client, js: jetstream::Context, floors: Arc<Latest>) {
    loop {
        let mut failed = false;
        for (name, floor) in floors.take().await {
            if !failed {
                let written =
                    if client.connection_state() == async_nats::connection::State::Connected {
                        let subject = format!("{FLOOR_SUBJECTS}.{name}");
                        match js.publish(subject, Bytes::from(floor.to_string())).await {
                            Ok(ack) => ack.await.is_ok(),
                            Err(_) => false,
                        }
                    } else {
                        false
                    };
                if written {
                    continue;
                }
                failed = true;
            }
            floors.put(&name, floor);
        }
        if failed {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// What a pump does after its message stream failed.
enum Resync {
    /// Recreate this relay's consumer from this stream sequence.
    From(u64),
    /// Another relay took the client over, or the client is gone: stop.
    Detach,
}

/// Reads one client's consumer into its queue at this relay until the client is gone from here or another
/// relay takes it over.
async fn run_pump(
    inner: Arc<Inner>,
    relay: Relay,
    key: ClientKey,
    pump: Arc<Pump>,
    resume: bool,
    live_from: Option<u64>,
) {
    let name = consumer_name(&key);
    // The first consumer: from the ack floor of the one found (taking it over), or live events.
    let mut start = loop {
        match take_over(&inner, &name, resume, live_from).await {
            Ok((start, lost)) => {
                if lost > 0 {
                    inner.stats.lost.fetch_add(lost, Ordering::Relaxed);
                    tracing::warn!(consumer = %name, lost, "events aged out of the stream before this client read them");
                    if let Some(c) = relay.lock().clients.get_mut(&key) {
                        c.queue.note_lost("stream_limits", lost);
                        c.wake.notify_one();
                    }
                }
                break start;
            }
            Err(e) => {
                tracing::warn!(consumer = %name, error = %e, "could not take the client's consumer yet");
                if wait_or_stop(&pump, Duration::from_millis(200)).await {
                    return finish(&inner, &relay, &key, &pump);
                }
            }
        }
    };
    inner.stats.takeovers.fetch_add(1, Ordering::Relaxed);
    {
        let mut t = lock(&pump.tracker);
        t.next = start;
        t.stored = start.saturating_sub(1);
    }
    // The next stream sequence this client has not had.
    let mut next = start;
    let mut fresh = true;
    loop {
        let outcome = read(&inner, &relay, &key, &pump, &name, &mut next, &mut fresh).await;
        match outcome {
            None => return finish(&inner, &relay, &key, &pump),
            Some(Resync::Detach) => return finish(&inner, &relay, &key, &pump),
            Some(Resync::From(seq)) => start = seq,
        }
        // Recreate our consumer from the oldest event this relay holds unacknowledged (those come again and
        // only get their new ack subject), or the next one not had: delivery resumes in stream order.
        loop {
            let from = {
                let t = lock(&pump.tracker);
                t.held.front().map(|h| h.1)
            };
            let from = from.map_or(start, |held| held.min(start));
            // Not ours any more: another relay took the client over, so this pump ends, unless the client is
            // connected here. Then the other relay's pump is the stale one: its resynchronisation read our
            // consumer as its own just before we took it over, and recreated it after (a check and a write
            // JetStream cannot make one); left so, nobody would read for the client here. We take it back
            // from where this relay stands; the other pump finds it gone and ends, its client not there.
            let owner = match owned(&inner, &name).await {
                Ok(false) if live_here(&relay, &key) => {
                    // Not at once: one client id connected to two relays (a misconfiguration) makes them
                    // take turns, and this keeps that to a few takes a second.
                    if wait_or_stop(&pump, Duration::from_millis(200)).await {
                        return finish(&inner, &relay, &key, &pump);
                    }
                    inner.stats.retakes.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(consumer = %name, "another relay recreated this client's consumer while the client is here: taking it back");
                    Ok(true)
                }
                other => other,
            };
            match owner {
                Ok(false) => return finish(&inner, &relay, &key, &pump),
                Ok(true) => match recreate(
                    &inner,
                    &name,
                    consumer::DeliverPolicy::ByStartSequence {
                        start_sequence: from,
                    },
                )
                .await
                {
                    Ok(()) => {
                        fresh = true;
                        break;
                    }
                    Err(e) => {
                        tracing::debug!(consumer = %name, error = %e, "recreating the consumer")
                    }
                },
                Err(e) => {
                    tracing::debug!(consumer = %name, error = %e, "reading the consumer's owner")
                }
            }
            if wait_or_stop(&pump, Duration::from_millis(200)).await {
                return finish(&inner, &relay, &key, &pump);
            }
        }
    }
}

/// Sleeps `d`; true when the pump was stopped meanwhile.
async fn wait_or_stop(pump: &Pump, d: Duration) -> bool {
    tokio::select! {
        () = pump.stop.cancelled() => true,
        () = tokio::time::sleep(d) => false,
    }
}

/// The pump ends: unregistered, and the client's queue here dropped if it is not connected here (its events
/// are in JetStream for the relay that took it over).
fn finish(inner: &Inner, relay: &Relay, key: &ClientKey, pump: &Arc<Pump>) {
    pump.stop.cancel();
    {
        let mut pumps = lock(&inner.pumps);
        if pumps.get(key).is_some_and(|p| Arc::ptr_eq(p, pump)) {
            pumps.remove(key);
        }
    }
    let mut state = relay.lock();
    if state.clients.get(key).is_some_and(|c| c.live.is_none()) {
        state.clients.remove(key);
    }
}

/// Whether the client has a live link to this relay.
fn live_here(relay: &Relay, key: &ClientKey) -> bool {
    relay
        .lock()
        .clients
        .get(key)
        .is_some_and(|c| c.live.is_some())
}

/// Whether the consumer is this relay's (its description is our epoch).
async fn owned(inner: &Inner, name: &str) -> Result<bool, String> {
    match inner.stream.consumer_info(name).await {
        Ok(info) => Ok(info.config.description.as_deref() == Some(inner.epoch.as_str())),
        Err(e) if e.to_string().contains("not found") => Ok(false),
        Err(e) => Err(e.to_string()),
    }
}

/// Makes the client's consumer this relay's: from the ack floor of the existing one when resuming, else from
/// `live_from` (where live events started when the client was welcomed) or the next event stored. Returns the
/// first stream sequence to expect.
async fn take_over(
    inner: &Inner,
    name: &str,
    resume: bool,
    live_from: Option<u64>,
) -> Result<(u64, u64), String> {
    // The client's own floor; a consumer's ack floor only where none was written yet.
    let stored = match inner
        .floors
        .get_last_raw_message_by_subject(&format!("{FLOOR_SUBJECTS}.{name}"))
        .await
    {
        Ok(m) => std::str::from_utf8(&m.payload)
            .ok()
            .and_then(|t| t.parse::<u64>().ok()),
        Err(e) if e.kind() == stream::LastRawMessageErrorKind::NoMessageFound => None,
        Err(e) => return Err(e.to_string()),
    };
    let existing = match (stored, inner.stream.consumer_info(name).await) {
        (Some(floor), _) => Some(floor),
        (None, Ok(info)) => Some(info.ack_floor.stream_sequence),
        (None, Err(e)) if e.to_string().contains("not found") => None,
        (None, Err(e)) => return Err(e.to_string()),
    };
    let mut stream = inner.stream.clone();
    let state = stream
        .info()
        .await
        .map_err(|e| e.to_string())?
        .state
        .clone();
    let (start, lost) = start_at(
        existing,
        resume,
        live_from,
        state.first_sequence,
        state.last_sequence,
    );
    recreate(
        inner,
        name,
        consumer::DeliverPolicy::ByStartSequence {
            start_sequence: start,
        },
    )
    .await?;
    Ok((start, lost))
}

/// Where a client's consumer starts, and how many events it missed: `floor` is the last event it acknowledged
/// (if any), `resume` whether its hello named an epoch, `live_from` where live events stood at its welcome
/// ([`NatsBus::live_start`]), and `first..=last` the sequences the stream holds now.
fn start_at(
    floor: Option<u64>,
    resume: bool,
    live_from: Option<u64>,
    first: u64,
    last: u64,
) -> (u64, u64) {
    match floor {
        // Events past the floor the stream no longer holds (its age or byte limit) are lost.
        Some(floor) if resume && first > floor + 1 => (first, first - floor - 1),
        Some(floor) if resume => (floor + 1, 0),
        // A stream recreated since has restarted its sequences: then only the next event is live.
        _ => (
            live_from
                .filter(|from| (first..=last + 1).contains(from))
                .unwrap_or(last + 1),
            0,
        ),
    }
}

async fn recreate(
    inner: &Inner,
    name: &str,
    policy: consumer::DeliverPolicy,
) -> Result<(), String> {
    match inner.stream.delete_consumer(name).await {
        Ok(_) => {}
        Err(e) if e.to_string().contains("not found") => {}
        Err(e) => return Err(e.to_string()),
    }
    inner
        .stream
        .create_consumer(consumer::pull::Config {
            durable_name: Some(name.to_owned()),
            description: Some(inner.epoch.clone()),
            deliver_policy: policy,
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: ACK_WAIT,
            max_ack_pending: inner.config.max_ack_pending,
            inactive_threshold: inner.config.retention,
            ..Default::default()
        })
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Reads the consumer until it fails (`Some(Resync)`) or the pump stops (`None`).
async fn read(
    inner: &Inner,
    relay: &Relay,
    key: &ClientKey,
    pump: &Pump,
    name: &str,
    next: &mut u64,
    fresh: &mut bool,
) -> Option<Resync> {
    let consumer: consumer::PullConsumer = match inner.stream.get_consumer(name).await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(consumer = %name, error = %e, "consumer not readable");
            return Some(Resync::From(*next));
        }
    };
    let messages = consumer
        .stream()
        .max_messages_per_batch(512)
        .heartbeat(Duration::from_secs(2))
        .expires(Duration::from_secs(10))
        .messages()
        .await;
    let mut messages = match messages {
        Ok(m) => m,
        Err(e) => {
            tracing::debug!(consumer = %name, error = %e, "pull failed");
            return Some(Resync::From(*next));
        }
    };
    loop {
        let item = tokio::select! {
            () = pump.stop.cancelled() => return None,
            item = messages.next() => item,
        };
        let message = match item {
            Some(Ok(m)) => m,
            Some(Err(e)) => {
                tracing::debug!(consumer = %name, error = %e, "consumer stream failed; resynchronising");
                return Some(Resync::From(*next));
            }
            None => return Some(Resync::From(*next)),
        };
        let Ok(seq) = message.info().map(|i| i.stream_sequence) else {
            continue;
        };
        let Some(reply) = message.message.reply.clone() else {
            continue;
        };
        let expected = *next;
        {
            if seq < expected {
                // Delivered again (ack wait, or our consumer recreated behind events still held): the held
                // one takes its new ack subject; one already acknowledged or filtered out is acknowledged.
                inner.stats.redelivered.fetch_add(1, Ordering::Relaxed);
                let done = {
                    let mut t = lock(&pump.tracker);
                    match t.held.binary_search_by_key(&seq, |h| h.1) {
                        Ok(i) => {
                            t.held[i].2 = reply;
                            None
                        }
                        Err(_) => Some(reply),
                    }
                };
                if let Some(reply) = done
                    && !ack_or_stop(inner, pump, reply).await
                {
                    return None;
                }
                continue;
            }
            if seq > expected {
                if !*fresh {
                    // Events missing in the middle were lost on the way (a link dropped): read again from them.
                    return Some(Resync::From(expected));
                }
                // The stream no longer holds them (its age or byte limit): lost, and said so.
                let lost = seq - expected;
                inner.stats.lost.fetch_add(lost, Ordering::Relaxed);
                tracing::warn!(consumer = %name, lost, "events aged out of the stream before this client read them");
                if let Some(c) = relay.lock().clients.get_mut(key) {
                    c.queue.note_lost("stream_limits", lost);
                    c.wake.notify_one();
                }
            }
        }
        *next = seq + 1;
        *fresh = false;
        let ty = message
            .message
            .headers
            .as_ref()
            .and_then(|h| h.get(TYPE_HEADER))
            .and_then(|v| EventType::parse(v.as_str()));
        let body = std::str::from_utf8(&message.message.payload).ok();
        let pushed = {
            let mut state = relay.lock();
            let Some(client) = state.clients.get_mut(key) else {
                return Some(Resync::Detach);
            };
            match (ty, body) {
                (Some(ty), Some(body)) if client.subscriptions.contains(&ty) => {
                    let local = client.queue.push_shared(Arc::from(body));
                    client.wake.notify_one();
                    Some(local)
                }
                _ => None,
            }
        };
        // The tracker's `next` moves only now, with the event held (or acknowledged) in the same step: a
        // client ack computing the floor in between would otherwise write a floor past an event still on its
        // way to the client's queue, and a relay taking the client over would skip it.
        let done = {
            let mut t = lock(&pump.tracker);
            t.next = seq + 1;
            match pushed {
                Some(local) => {
                    inner.stats.delivered.fetch_add(1, Ordering::Relaxed);
                    relay
                        .stats()
                        .events_forwarded
                        .fetch_add(1, Ordering::Relaxed);
                    if local <= t.acked {
                        Some(reply)
                    } else {
                        t.held.push_back((local, seq, reply));
                        None
                    }
                }
                // Not a type this client takes.
                None => Some(reply),
            }
        };
        if let Some(reply) = done
            && !ack_or_stop(inner, pump, reply).await
        {
            return None;
        }
    }
}

/// `config`'s stream, made if missing, retried while the cluster elects its first leaders (up to 50 tries of
/// 200 ms over all the calls sharing `tries`).
async fn ensure_stream(
    js: &jetstream::Context,
    config: stream::Config,
    tries: &mut u32,
) -> Result<stream::Stream, BusError> {
    loop {
        match js.get_or_create_stream(config.clone()).await {
            Ok(s) => return Ok(s),
            Err(e) if *tries < 50 => {
                *tries += 1;
                tracing::debug!(error = %e, "JetStream not ready yet");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(BusError::Stream(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::start_at;

    /// What happened, the client's floor, whether it resumed, where live events stood at its welcome, the
    /// sequences the stream holds (first, last), and the (start, lost) expected.
    type Case = (
        &'static str,
        Option<u64>,
        bool,
        Option<u64>,
        (u64, u64),
        (u64, u64),
    );

    #[test]
    fn a_consumer_starts_where_the_client_left_off_or_where_live_events_stood_at_its_welcome() {
        let cases: [Case; 7] = [
            (
                "resumed, nothing aged out",
                Some(10),
                true,
                None,
                (1, 20),
                (11, 0),
            ),
            (
                "resumed past dropped events",
                Some(10),
                true,
                None,
                (15, 20),
                (15, 4),
            ),
            (
                "resumed at the very end",
                Some(20),
                true,
                None,
                (1, 20),
                (21, 0),
            ),
            // df1d999: events 21 and 22 were stored between the welcome (live at 21) and the take-over.
            (
                "first, events after its welcome",
                None,
                false,
                Some(21),
                (1, 22),
                (21, 0),
            ),
            (
                "first, JetStream did not say",
                None,
                false,
                None,
                (1, 22),
                (23, 0),
            ),
            (
                "first, stream recreated since",
                None,
                false,
                Some(500),
                (1, 22),
                (23, 0),
            ),
            (
                "a floor without an epoch",
                Some(3),
                false,
                Some(21),
                (1, 22),
                (21, 0),
            ),
        ];
        for (case, floor, resume, live_from, (first, last), want) in cases {
            assert_eq!(
                start_at(floor, resume, live_from, first, last),
                want,
                "{case}"
            );
        }
    }
}
