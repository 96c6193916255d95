//! What the relay knows: the games connected, every MCP client's queue and subscription, the commands in
//! flight; and the routing rules over them (PROTOCOL.md §4–§6). Sockets are `conn.rs`'s business.

use super::audit;
use super::config::McpToken;
use super::queue::Queue;
use super::rate::{self, Scope};
use crate::wire::fast::FastEvent;
use crate::wire::{Code, Envelope, EventType, Kind, Source};
use bridge_core::link::LinkSender;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// An MCP client's queue is known by its token and the `clientId` it says in `hello`.
pub type ClientKey = (usize, String);

/// The token index of a command another relay forwarded through the bus (bus/nats.rs): its client is the
/// NATS reply subject, and its answer goes there instead of to a queue.
pub const REMOTE: usize = usize::MAX;

/// The relay's settings, resolved from its flags.
#[derive(Debug, Clone)]
pub struct Settings {
    pub mcp_tokens: Vec<McpToken>,
    pub minecraft_token: Option<String>,
    pub queue_size: usize,
    pub queue_bytes: usize,
    /// Most client ids (queues) one MCP token may hold; the least recently used disconnected one goes first.
    pub clients_per_token: usize,
    /// Most bytes all the queues of one MCP token may hold together.
    pub token_queue_bytes: usize,
    pub heartbeat: Duration,
    pub command_timeout: Duration,
    /// How long a stopping relay waits for connected MCP servers to acknowledge what they were sent.
    pub drain_grace: Duration,
    pub max_message_bytes: usize,
    /// Bytes of chunked messages being put together at once, every link together.
    pub max_assembling_bytes: usize,
    /// What the messages every link decodes at once may take decoded (`relay::decoding`).
    pub max_decoding_bytes: usize,
    pub mcp_rate: u32,
    pub game_rate: u32,
    /// All the links of one MCP token together.
    pub mcp_token_rate: u32,
    /// Commands to one game, from every MCP server together.
    pub game_command_rate: u32,
    /// Events of every game together.
    pub games_event_rate: u32,
    pub retention: Duration,

    /// Serve wss:// with this (from --tls-cert / --tls-key); `None` serves ws://.
    pub tls: Option<std::sync::Arc<bridge_core::link::tls::ServerConfig>>,
}

/// A connected game adapter.
#[derive(Debug, Clone)]
pub struct GameConn {
    pub link_id: u64,
    pub sender: LinkSender,
    pub instance: String,
    pub adapter: String,
    pub game_version: String,
    pub since_ms: u64,
}

/// One MCP client's place at the relay.
#[derive(Debug)]
pub struct Client {
    pub queue: Queue,
    pub subscriptions: Vec<EventType>,
    /// The live link, if connected: its id and sender.
    pub live: Option<(u64, LinkSender)>,
    /// The secret the live link's MCP server said it runs as (`hello`'s `instance`): the same server redialling
    /// after its link went half-open takes its id back at once, where another server under the id is refused.
    pub instance: Option<String>,
    /// Wakes the client's writer when something was queued.
    pub wake: Arc<Notify>,
    /// Highest seq written to the live link.
    pub sent: u64,
    pub gone_since: Option<Instant>,
}

/// A command waiting for its game's answer.
#[derive(Debug)]
pub struct Pending {
    pub client: ClientKey,
    pub original_id: String,
    pub game: String,
    /// The game's link the command went to: only that link may answer it, and only its end fails it (a
    /// newer link under the same name may be serving by then).
    pub game_link: u64,
    pub command: String,
}

#[derive(Debug, Default)]
pub struct State {
    pub games: HashMap<String, GameConn>,
    /// Counts changes to `games`, so a client told the list twice keeps the newer (PROTOCOL.md §4.6).
    pub games_version: u64,
    /// Highest event seq accepted per `(name, instance)`, bounded ([`Instances`]).
    pub instances: Instances,
    pub clients: HashMap<ClientKey, Client>,
    pub pending: HashMap<String, Pending>,
    /// The latest events of this epoch, for clients resuming from an earlier relay (PROTOCOL.md §5).
    pub backlog: Backlog,
    /// Queues dropped to keep a token within its bounds, and how many messages each held: told to the client
    /// (a `lost` notice, reason `evicted`) if it comes back.
    pub evicted: HashMap<ClientKey, u64>,
}

/// Most dead instances of one game name remembered for their `lastSeq`, so a game restarted a few times in a row
/// still resumes; the live instance is never dropped.
pub const DEAD_INSTANCES_PER_NAME: usize = 4;
/// Most bytes the remembered instances of every game take together. A live instance is never dropped (live
/// ones are bounded by the game connections); dead ones go, least recently seen first.
pub const INSTANCES_BYTES: usize = 256 * 1024;
/// What one remembered instance costs beyond its name and instance id: its slot and the maps' own.
const INSTANCE_OVERHEAD: usize = 64;

/// The highest event `seq` accepted from each game instance (a game's `lastSeq`, PROTOCOL.md §3), by name
/// then instance. A game that reconnects under a fresh instance id each time (a crash loop, or a hostile
/// holder of the game token) would grow it by one entry a connection: so each name keeps its live instance
/// and its [`DEAD_INSTANCES_PER_NAME`] most recently seen dead ones, all within [`INSTANCES_BYTES`]. An
/// instance dropped that comes back is an unknown one: `lastSeq` 0, it resends what it holds unacknowledged,
/// and what the relay had already accepted of that comes again (clients drop repeats by `(game, id)`,
/// PROTOCOL.md §5; through the bus, JetStream's duplicate window drops them first). Nothing is lost.
#[derive(Debug, Default)]
pub struct Instances {
    by_name: HashMap<String, HashMap<String, Slot>>,
    len: usize,
    bytes: usize,
    /// Raised at every touch: the order instances were last seen in.
    tick: u64,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    seq: u64,
    seen: u64,
}

fn instance_cost(name: &str, instance: &str) -> usize {
    name.len() + instance.len() + INSTANCE_OVERHEAD
}

impl Instances {
    /// The highest `seq` accepted from `instance` of `name` (0 if none or forgotten).
    pub fn last(&self, name: &str, instance: &str) -> u64 {
        self.by_name
            .get(name)
            .and_then(|m| m.get(instance))
            .map_or(0, |s| s.seq)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Records `instance` of `name` as seen now (connected, or accepted `seq` from it), raising its `seq`.
    /// A new entry may push out dead ones (`live` says which instances are connected, never dropped; nor is
    /// the one touched): those are returned.
    pub fn touch(
        &mut self,
        name: &str,
        instance: &str,
        seq: u64,
        live: impl Fn(&str, &str) -> bool,
    ) -> Vec<(String, String)> {
        self.tick += 1;
        let tick = self.tick;
        // The usual case, an event from a known instance: no allocation.
        if let Some(slot) = self.by_name.get_mut(name).and_then(|m| m.get_mut(instance)) {
            slot.seq = slot.seq.max(seq);
            slot.seen = tick;
            return Vec::new();
        }
        self.by_name
            .entry(name.to_owned())
            .or_default()
            .insert(instance.to_owned(), Slot { seq, seen: tick });
        self.len += 1;
        self.bytes += instance_cost(name, instance);
        let droppable = |n: &str, i: &str| !((n == name && i == instance) || live(n, i));
        let mut evicted = Vec::new();
        // This name's dead instances: its few most recent stay.
        while let Some(of_name) = self.by_name.get(name) {
            let mut dead = 0;
            let mut oldest: Option<(&String, u64)> = None;
            for (i, slot) in of_name {
                if droppable(name, i) {
                    dead += 1;
                    if oldest.is_none_or(|(_, seen)| slot.seen < seen) {
                        oldest = Some((i, slot.seen));
                    }
                }
            }
            match oldest {
                Some((i, _)) if dead > DEAD_INSTANCES_PER_NAME => {
                    let key = (name.to_owned(), i.clone());
                    self.remove(&key);
                    evicted.push(key);
                }
                _ => break,
            }
        }
        // Every name together: the least recently seen dead instance goes first.
        while self.bytes > INSTANCES_BYTES {
            let oldest = self
                .by_name
                .iter()
                .flat_map(|(n, m)| m.iter().map(move |(i, s)| (n, i, s.seen)))
                .filter(|(n, i, _)| droppable(n, i))
                .min_by_key(|(_, _, seen)| *seen)
                .map(|(n, i, _)| (n.clone(), i.clone()));
            let Some(key) = oldest else {
                break;
            };
            self.remove(&key);
            evicted.push(key);
        }
        evicted
    }

    fn remove(&mut self, (name, instance): &(String, String)) {
        let Some(of_name) = self.by_name.get_mut(name) else {
            return;
        };
        if of_name.remove(instance).is_some() {
            self.len -= 1;
            self.bytes -= instance_cost(name, instance);
        }
        if of_name.is_empty() {
            self.by_name.remove(name);
        }
    }
}

/// Most evicted queues remembered for their `lost` notice.
const EVICTED_REMEMBERED: usize = 4096;

impl State {
    /// Drops the least recently used disconnected queue of `token` (the one gone longest), remembering
    /// what it held; false when every queue of the token is connected.
    pub fn evict_lru(&mut self, token: usize, stats: &Stats) -> bool {
        let victim = self
            .clients
            .iter()
            .filter(|((t, _), c)| *t == token && c.live.is_none())
            .min_by_key(|(_, c)| c.gone_since)
            .map(|(k, _)| k.clone());
        let Some(key) = victim else {
            return false;
        };
        if let Some(c) = self.clients.remove(&key) {
            let lost = c.queue.unacked();
            tracing::warn!(client = %key.1, token, lost, "queue dropped to keep the token within its bounds (least recently used)");
            stats.queues_evicted.fetch_add(1, Ordering::Relaxed);
            stats.evicted_messages.fetch_add(lost, Ordering::Relaxed);
            if self.evicted.len() >= EVICTED_REMEMBERED
                && let Some(k) = self.evicted.keys().next().cloned()
            {
                self.evicted.remove(&k);
            }
            *self.evicted.entry(key).or_default() += lost;
        }
        true
    }

    /// Client ids and queued bytes of `token`.
    pub fn token_usage(&self, token: usize) -> (usize, usize) {
        self.clients
            .iter()
            .filter(|((t, _), _)| *t == token)
            .fold((0, 0), |(n, b), (_, c)| (n + 1, b + c.queue.bytes()))
    }

    /// Keeps `token`'s queues within `max_bytes` together: least recently used disconnected queues go
    /// first, then the oldest messages of its largest queue (each counted lost).
    pub fn enforce_token_bytes(&mut self, token: usize, max_bytes: usize, stats: &Stats) {
        while self.token_usage(token).1 > max_bytes {
            if self.evict_lru(token, stats) {
                continue;
            }
            let largest = self
                .clients
                .iter_mut()
                .filter(|((t, _), _)| *t == token)
                .max_by_key(|(_, c)| c.queue.bytes());
            match largest {
                Some((_, c)) => {
                    if !c.queue.drop_oldest() {
                        return;
                    }
                    c.wake.notify_one();
                }
                None => return,
            }
        }
    }
}

impl State {
    /// The instance of another live adapter holding game `name` here, which `instance` may not take it from
    /// (a link already closed holds nothing: the same or a new instance takes its place).
    pub fn name_held_by(&self, name: &str, instance: &str) -> Option<String> {
        self.games
            .get(name)
            .filter(|g| g.instance != instance && !g.sender.is_closed())
            .map(|g| g.instance.clone())
    }

    /// Whether a live MCP link here holds the client id of `key` against a server of `instance` (the same
    /// server, by its secret `instance`, takes its own place back): `Some` with no detail, the instance being a
    /// secret.
    pub fn client_held_by(&self, key: &ClientKey, instance: Option<&str>) -> Option<String> {
        self.clients
            .get(key)
            .filter(|c| {
                c.live.as_ref().is_some_and(|(_, s)| !s.is_closed())
                    && (instance.is_none() || c.instance.as_deref() != instance)
            })
            .map(|_| "another MCP server".to_owned())
    }

    /// The live link here holding the game name `name` for `instance`, if any.
    pub fn game_link(&self, name: &str, instance: &str) -> Option<LinkSender> {
        self.games
            .get(name)
            .filter(|g| g.instance == instance && !g.sender.is_closed())
            .map(|g| g.sender.clone())
    }

    /// The live link here holding the client id of `key` for the server `instance`, if any. A server that sent
    /// no instance is never known to be the same as another.
    pub fn client_link(&self, key: &ClientKey, instance: Option<&str>) -> Option<LinkSender> {
        instance?;
        let c = self.clients.get(key)?;
        let (_, sender) = c.live.as_ref()?;
        (c.instance.as_deref() == instance && !sender.is_closed()).then(|| sender.clone())
    }

    /// The names of the games connected now, sorted, and the version of that list.
    pub fn games_now(&self) -> (Vec<String>, u64) {
        let mut games: Vec<String> = self.games.keys().cloned().collect();
        games.sort();
        (games, self.games_version)
    }

    /// Senders of the MCP clients connected now (each was sent its `welcome` as it registered).
    pub fn live_clients(&self) -> Vec<LinkSender> {
        self.clients
            .values()
            .filter_map(|c| c.live.as_ref().map(|l| l.1.clone()))
            .collect()
    }
}

/// The latest events, bounded like a client queue, with the game each came from: each as the text every client
/// queue shares (a resuming client's queue takes the same one).
#[derive(Debug, Default)]
pub struct Backlog {
    items: std::collections::VecDeque<(EventType, Arc<str>)>,
    bytes: usize,
}

impl Backlog {
    fn push(&mut self, ty: EventType, body: &Arc<str>, max_items: usize, max_bytes: usize) {
        self.bytes += body.len();
        self.items.push_back((ty, Arc::clone(body)));
        while self.items.len() > max_items || self.bytes > max_bytes {
            match self.items.pop_front() {
                Some(old) => self.bytes -= old.1.len(),
                None => break,
            }
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct Stats {
    pub events_in: AtomicU64,
    pub events_duplicate: AtomicU64,
    pub events_forwarded: AtomicU64,
    pub commands: AtomicU64,
    pub responses: AtomicU64,
    pub schema_errors: AtomicU64,
    /// Messages refused at any rate limit; `rate_limited_by` splits them by the limit (`Scope` order).
    pub rate_limited: AtomicU64,
    pub rate_limited_by: [AtomicU64; 4],
    /// Queues dropped to keep a token within its bounds, and the messages they held.
    pub queues_evicted: AtomicU64,
    pub evicted_messages: AtomicU64,
    /// Hellos refused because the token had all its client ids connected.
    pub clients_refused: AtomicU64,
    /// Hellos refused because another live link holds their (token, clientId).
    pub client_ids_in_use: AtomicU64,
    /// Game events refused at a game's rate limit (each also reported to the clients that missed it).
    pub events_rate_limited: AtomicU64,
    /// Dead game instances forgotten to keep [`Instances`] within its bounds.
    pub instances_evicted: AtomicU64,
    pub permission_denied: AtomicU64,
    pub timeouts: AtomicU64,
    pub version_warnings: AtomicU64,
}

/// The relay: shared by every connection task.
#[derive(Debug, Clone)]
pub struct Relay {
    pub inner: Arc<Inner>,
}

#[derive(Debug)]
pub struct Inner {
    pub settings: Settings,
    pub epoch: String,
    pub state: Mutex<State>,
    pub stats: Stats,
    /// The rate limits shared between links (per token, per game, all games).
    pub rates: Mutex<rate::Shared>,
    next_command: AtomicU64,
    /// The JetStream bus when the relay runs with `--bus`; unset, everything stays in this process.
    pub bus: std::sync::OnceLock<super::bus::NatsBus>,
    /// What the links' unfinished chunked messages hold together.
    pub assembly: Arc<crate::wire::AssemblyBudget>,
    /// What the messages being decoded and handled take decoded, every link together.
    pub decoding: super::decoding::DecodeBudget,
}

/// Who a command goes to, or why it goes nowhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Game(String),
    Refused(Code, String),
}

/// Property 5's rule for commands (PROTOCOL.md §4.3): the named game, or the only one; never a guess among several.
pub fn select_game<'a>(
    named: Option<&str>,
    connected: impl IntoIterator<Item = &'a str>,
) -> Target {
    let mut games: Vec<&str> = connected.into_iter().collect();
    games.sort_unstable();
    match named {
        Some(name) if games.contains(&name) => Target::Game(name.to_owned()),
        Some(name) => Target::Refused(
            Code::ConnectionError,
            format!(
                "game `{name}` is not connected (connected: {})",
                list(&games)
            ),
        ),
        None => match games.as_slice() {
            [] => Target::Refused(
                Code::ConnectionError,
                "no game is connected to the relay".to_owned(),
            ),
            [only] => Target::Game((*only).to_owned()),
            _ => Target::Refused(
                Code::InvalidCommand,
                format!(
                    "{} games are connected: name one ({})",
                    games.len(),
                    list(&games)
                ),
            ),
        },
    }
}

fn list(games: &[&str]) -> String {
    if games.is_empty() {
        "none".to_owned()
    } else {
        games.join(", ")
    }
}

impl Relay {
    pub fn new(settings: Settings) -> Self {
        Self {
            inner: Arc::new(Inner {
                epoch: format!("{:016x}", rand::random::<u64>()),
                state: Mutex::new(State::default()),
                rates: Mutex::new(rate::Shared::new(
                    settings.mcp_token_rate,
                    settings.game_command_rate,
                    settings.games_event_rate,
                )),
                stats: Stats::default(),
                next_command: AtomicU64::new(1),
                bus: std::sync::OnceLock::new(),
                assembly: crate::wire::AssemblyBudget::new(settings.max_assembling_bytes),
                decoding: super::decoding::DecodeBudget::new(
                    settings.max_decoding_bytes,
                    settings.max_message_bytes,
                ),
                settings,
            }),
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    pub fn decoding(&self) -> &super::decoding::DecodeBudget {
        &self.inner.decoding
    }

    pub fn epoch(&self) -> &str {
        &self.inner.epoch
    }

    pub fn stats(&self) -> &Stats {
        &self.inner.stats
    }

    /// The JetStream bus, if the relay runs with `--bus`.
    pub fn bus(&self) -> Option<&super::bus::NatsBus> {
        self.inner.bus.get()
    }

    /// The shared rate limits. Never held while taking the state's lock.
    pub fn rates(&self) -> MutexGuard<'_, rate::Shared> {
        self.inner
            .rates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts a message refused at `scope`'s limit.
    pub fn count_rate_limited(&self, scope: Scope) {
        let s = &self.inner.stats;
        s.rate_limited.fetch_add(1, Ordering::Relaxed);
        s.rate_limited_by[scope as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The state, even if a task panicked holding it (the state stays consistent between statements).
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues the answer `make(seq)` for `key` (in the queue's answers' lane, which events never push out) and
    /// wakes its writer. Returns false when the client is unknown.
    fn enqueue(state: &mut State, key: &ClientKey, make: impl FnOnce(u64) -> String) -> bool {
        match state.clients.get_mut(key) {
            Some(client) => {
                client.queue.push_response(make);
                client.wake.notify_one();
                true
            }
            None => false,
        }
    }

    /// Records that `instance` of `name` connected (seq 0) or sent `seq`; instances it pushes out of
    /// [`Instances`]' bounds are counted and go from the bus too (their publishers, keyed alike), so a
    /// returning one is unknown to both: `lastSeq` 0, and its resent events taken again (see [`Instances`]).
    pub fn instance_seen(&self, state: &mut State, name: &str, instance: &str, seq: u64) {
        let games = &state.games;
        let evicted = state.instances.touch(name, instance, seq, |n, i| {
            games.get(n).is_some_and(|g| g.instance == i)
        });
        for (n, i) in evicted {
            tracing::warn!(game = %n, instance = %i, "forgot a dead game instance to keep within the bounds (least recently seen); if it comes back it resends what it holds unacknowledged");
            self.inner
                .stats
                .instances_evicted
                .fetch_add(1, Ordering::Relaxed);
            if let Some(bus) = self.bus() {
                bus.forget(&n, &i);
            }
        }
    }

    /// A game's event: queued for every client whose subscription has its type (Property 17). Returns
    /// false for a duplicate (already accepted from this `(name, instance)`).
    pub fn accept_event(
        &self,
        game: &str,
        instance: &str,
        ty: EventType,
        event: &Envelope,
    ) -> bool {
        let body = || {
            crate::wire::fast::forward_text(
                &event.version,
                &event.id,
                event.timestamp,
                event.source,
                game,
                event.seq,
                instance,
                &event.payload,
            )
        };
        self.accept(game, instance, ty, event.seq.unwrap_or(0), &event.id, body)
    }

    /// [`Relay::accept_event`] for an event read by the fast path: its payload is written out as it came.
    pub fn accept_fast_event(&self, game: &str, instance: &str, event: &FastEvent<'_>) -> bool {
        let body = || event.forward_text(game, instance);
        self.accept(
            game,
            instance,
            event.ty,
            event.seq.unwrap_or(0),
            &event.id,
            body,
        )
    }

    /// An event numbered `seq` by its game: dropped as a duplicate, or its text (`body`, written once) put on the
    /// bus or shared by the backlog and the queue of every client subscribed to its type.
    fn accept(
        &self,
        game: &str,
        instance: &str,
        ty: EventType,
        seq: u64,
        id: &str,
        body: impl FnOnce() -> String,
    ) -> bool {
        let mut state = self.lock();
        let last = state.instances.last(game, instance);
        if seq <= last {
            self.inner
                .stats
                .events_duplicate
                .fetch_add(1, Ordering::Relaxed);
            return false;
        }
        self.instance_seen(&mut state, game, instance, seq);
        self.inner.stats.events_in.fetch_add(1, Ordering::Relaxed);
        if let Some(bus) = self.bus() {
            // Through JetStream: every relay's clients read it from there (bus/nats.rs).
            drop(state);
            bus.publish_event(game, instance, seq, ty, body());
            return true;
        }
        let state = &mut *state;
        let settings = &self.inner.settings;
        // One text for the backlog and every client: each queue splices its own seq in when writing.
        let body: Arc<str> = Arc::from(body());
        state
            .backlog
            .push(ty, &body, settings.queue_size, settings.queue_bytes);
        let audit = audit::enabled();
        let mut tokens: Vec<usize> = Vec::new();
        for ((token, client_id), client) in state.clients.iter_mut() {
            if !client.subscriptions.contains(&ty) {
                continue;
            }
            client.queue.push_shared(Arc::clone(&body));
            if !tokens.contains(token) {
                tokens.push(*token);
            }
            client.wake.notify_one();
            self.inner
                .stats
                .events_forwarded
                .fetch_add(1, Ordering::Relaxed);
            if audit {
                audit::forwarded(
                    "event",
                    &format!("minecraft:{game}"),
                    &format!("mcp:{token}/{client_id}"),
                    id,
                );
            }
        }
        for token in tokens {
            state.enforce_token_bytes(token, settings.token_queue_bytes, &self.inner.stats);
        }
        true
    }

    /// An event of `game` refused at its rate limit: counted, and every client subscribed to its type (to
    /// every type when it did not validate) hears of it in its next `lost` notice.
    pub fn event_rate_limited(&self, game: &str, ty: Option<EventType>) {
        self.inner
            .stats
            .events_rate_limited
            .fetch_add(1, Ordering::Relaxed);
        tracing::debug!(game, "event over the game's rate limit");
        let mut state = self.lock();
        for client in state.clients.values_mut() {
            if ty.is_none_or(|t| client.subscriptions.contains(&t)) {
                client.queue.note_lost("rate_limited", 1);
                client.wake.notify_one();
            }
        }
    }

    /// Queues this epoch's backlog for a client resuming from an earlier relay: what the relay accepted
    /// before the client was back is not lost (the client drops duplicates by event id).
    pub fn replay_backlog(&self, key: &ClientKey) -> usize {
        let mut state = self.lock();
        let state = &mut *state;
        let Some(client) = state.clients.get_mut(key) else {
            return 0;
        };
        let mut n = 0;
        for (ty, body) in &state.backlog.items {
            if !client.subscriptions.contains(ty) {
                continue;
            }
            client.queue.push_shared(Arc::clone(body));
            n += 1;
        }
        client.wake.notify_one();
        n
    }

    /// An MCP client's command: permission, target, then forwarded with a relay id. An answer the relay
    /// gives itself is queued for the client at once.
    pub fn route_command(
        &self,
        client: &ClientKey,
        command: &Envelope,
    ) -> Option<(LinkSender, Envelope)> {
        let settings = &self.inner.settings;
        let name = command.str_field("command").unwrap_or_default().to_owned();
        self.inner.stats.commands.fetch_add(1, Ordering::Relaxed);
        let token = settings.mcp_tokens.get(client.0);
        let refuse = |code: Code, message: String, details: Value| {
            let mut state = self.lock();
            Self::enqueue(&mut state, client, |seq| {
                respond_error(&command.id, None, seq, code, &message, details).to_text()
            });
            None
        };
        if !token.is_some_and(|t| t.allows(&name)) {
            self.inner
                .stats
                .permission_denied
                .fetch_add(1, Ordering::Relaxed);
            return refuse(
                Code::PermissionDenied,
                format!("this MCP token may not send `{name}`"),
                json!({"command": name}),
            );
        }
        if !crate::wire::COMMANDS.contains(&name.as_str()) {
            return refuse(
                Code::InvalidCommand,
                format!("unknown command type `{name}`"),
                json!({"commands": crate::wire::COMMANDS}),
            );
        }
        // Through the bus, the games of every relay are addressable.
        let remote = self.bus().map(|b| b.remote_games()).unwrap_or_default();
        let mut state = self.lock();
        let target = select_game(
            command.game.as_deref(),
            state
                .games
                .keys()
                .map(String::as_str)
                .chain(remote.iter().map(String::as_str)),
        );
        let game = match target {
            Target::Game(game) => game,
            Target::Refused(code, message) => {
                let mut games: Vec<&String> = state.games.keys().chain(remote.iter()).collect();
                games.sort();
                games.dedup();
                let details = json!({"games": games});
                Self::enqueue(&mut state, client, |seq| {
                    respond_error(&command.id, None, seq, code, &message, details).to_text()
                });
                return None;
            }
        };
        // Every MCP server together may send one game at most --game-command-rate commands a second.
        let limited = self.rates().take_game(&game);
        if let Err(retry) = limited {
            let (message, details) = self.game_rate_limited(&game, retry);
            Self::enqueue(&mut state, client, |seq| {
                respond_error(
                    &command.id,
                    Some(&game),
                    seq,
                    Code::ServerError,
                    &message,
                    details,
                )
                .to_text()
            });
            return None;
        }
        let Some(conn) = state.games.get(&game) else {
            drop(state);
            if let Some(bus) = self.bus() {
                bus.forward_command(self, client, command, &game, &name);
            }
            return None;
        };
        let sender = conn.sender.clone();
        let game_link = conn.link_id;
        let out = self.pend(
            &mut state,
            command,
            Pending {
                client: client.clone(),
                original_id: command.id.clone(),
                game: game.clone(),
                game_link,
                command: name,
            },
        );
        drop(state);
        audit::forwarded(
            "command",
            &format!("mcp:{}/{}", client.0, client.1),
            &format!("minecraft:{game}"),
            &command.id,
        );
        Some((sender, out))
    }

    /// A game's response: back to the client that asked, and to no other.
    pub fn accept_response(&self, game: &str, link_id: u64, response: &Envelope) -> bool {
        let mut state = self.lock();
        // Another game, or an earlier link of this one, answering a command it was not sent is ignored.
        if state
            .pending
            .get(&response.id)
            .is_none_or(|p| p.game_link != link_id)
        {
            return false;
        }
        let Some(pending) = state.pending.remove(&response.id) else {
            return false;
        };
        self.inner.stats.responses.fetch_add(1, Ordering::Relaxed);
        if pending.client.0 == REMOTE {
            drop(state);
            let mut out = response.clone();
            out.id = pending.original_id.clone();
            out.game = Some(game.to_owned());
            if let Some(bus) = self.bus() {
                bus.reply(&pending.client.1, out.to_text());
            }
            return true;
        }
        let dest = format!("mcp:{}/{}", pending.client.0, pending.client.1);
        Self::enqueue(&mut state, &pending.client, |seq| {
            let mut out = response.clone();
            out.id = pending.original_id.clone();
            out.seq = Some(seq);
            out.game = Some(game.to_owned());
            out.to_text()
        });
        audit::forwarded(
            "response",
            &format!("minecraft:{game}"),
            &dest,
            &pending.original_id,
        );
        true
    }

    /// Answers a pending command with an error of the relay's own (timeout, link dropped).
    pub fn fail_pending(&self, relay_id: &str, code: Code, message: &str) -> bool {
        let mut state = self.lock();
        let Some(pending) = state.pending.remove(relay_id) else {
            return false;
        };
        if code == Code::Timeout {
            self.inner.stats.timeouts.fetch_add(1, Ordering::Relaxed);
        }
        let details = json!({"game": pending.game, "command": pending.command});
        if pending.client.0 == REMOTE {
            drop(state);
            let mut out = respond_error(
                &pending.original_id,
                Some(&pending.game),
                0,
                code,
                message,
                details,
            );
            // No `seq` through the bus (0 is not one): the asking relay numbers it for its client.
            out.seq = None;
            if let Some(bus) = self.bus() {
                bus.reply(&pending.client.1, out.to_text());
            }
            return true;
        }
        Self::enqueue(&mut state, &pending.client, |seq| {
            respond_error(
                &pending.original_id,
                Some(&pending.game),
                seq,
                code,
                message,
                details,
            )
            .to_text()
        });
        true
    }

    /// Queues `response` (an answer that came through the bus) for `client` under its next `seq`.
    pub fn queue_response(&self, client: &ClientKey, response: &Envelope) -> bool {
        let mut state = self.lock();
        Self::enqueue(&mut state, client, |seq| {
            let mut out = response.clone();
            out.seq = Some(seq);
            out.to_text()
        })
    }

    /// Counts a command refused at `game`'s command rate, and says so (message, details) as every path does.
    fn game_rate_limited(&self, game: &str, retry: u64) -> (String, Value) {
        self.count_rate_limited(Scope::Game);
        let limit = self.inner.settings.game_command_rate;
        let message = format!(
            "rate limited: game `{game}` was sent more than {limit} commands a second by every MCP server \
             together ({}); retry in {retry} ms",
            Scope::Game.flag(false)
        );
        let details = json!({"reason": "rate_limited", "scope": Scope::Game.as_str(),
                             "limit": limit, "retryAfterMs": retry, "game": game});
        (message, details)
    }

    /// A command another relay forwarded through the bus for `game`, connected here: registered like a
    /// local one, its answer to go to `reply`. Permission was checked by that relay; the game's command rate
    /// is counted here, where every relay's commands for the game meet. Refused: the answer for the asker.
    pub fn route_remote(
        &self,
        reply: String,
        game: &str,
        command: &Envelope,
    ) -> Result<(LinkSender, Envelope), Box<Envelope>> {
        let name = command.str_field("command").unwrap_or_default().to_owned();
        let not_here = || {
            Box::new(respond_error(
                &command.id,
                Some(game),
                0,
                Code::ConnectionError,
                &format!("game `{game}` is not connected to this relay"),
                json!({"game": game, "command": name}),
            ))
        };
        // Checked before the rate is counted, so a command for a game gone from here costs it nothing; and
        // again under the lock below, since the game may go in between.
        if !self.lock().games.contains_key(game) {
            return Err(not_here());
        }
        let limited = self.rates().take_game(game);
        if let Err(retry) = limited {
            let (message, details) = self.game_rate_limited(game, retry);
            return Err(Box::new(respond_error(
                &command.id,
                Some(game),
                0,
                Code::ServerError,
                &message,
                details,
            )));
        }
        let mut state = self.lock();
        let Some(conn) = state.games.get(game) else {
            return Err(not_here());
        };
        let sender = conn.sender.clone();
        let game_link = conn.link_id;
        let out = self.pend(
            &mut state,
            command,
            Pending {
                client: (REMOTE, reply),
                original_id: command.id.clone(),
                game: game.to_owned(),
                game_link,
                command: name,
            },
        );
        Ok((sender, out))
    }

    /// Registers `pending` under a fresh relay id and gives the command as the game is to see it: that id,
    /// no game name, no sequence number.
    fn pend(&self, state: &mut State, command: &Envelope, pending: Pending) -> Envelope {
        let relay_id = format!(
            "r{}",
            self.inner.next_command.fetch_add(1, Ordering::Relaxed)
        );
        state.pending.insert(relay_id.clone(), pending);
        let mut out = command.clone();
        out.kind = Kind::Command;
        out.id = relay_id;
        out.game = None;
        out.seq = None;
        out
    }

    /// A game's link ended: its commands in flight fail with CONNECTION_ERROR.
    pub fn game_gone(&self, game: &str, link_id: u64) {
        let ids: Vec<String> = {
            let mut state = self.lock();
            if state.games.get(game).is_some_and(|g| g.link_id == link_id) {
                state.games.remove(game);
                state.games_version += 1;
            }
            state
                .pending
                .iter()
                .filter(|(_, p)| p.game_link == link_id)
                .map(|(id, _)| id.clone())
                .collect()
        };
        for id in ids {
            self.fail_pending(
                &id,
                Code::ConnectionError,
                &format!("game `{game}` disconnected before answering"),
            );
        }
    }

    /// Senders of every live link, games and clients, for heartbeats and notices.
    pub fn live_senders(&self, games: bool, clients: bool) -> Vec<LinkSender> {
        let state = self.lock();
        let mut out = Vec::new();
        if games {
            out.extend(state.games.values().map(|g| g.sender.clone()));
        }
        if clients {
            out.extend(state.live_clients());
        }
        out
    }

    /// Forgets the queues of clients gone longer than the retention.
    pub fn sweep(&self) {
        let retention = self.inner.settings.retention;
        let mut state = self.lock();
        state.clients.retain(|_, c| {
            c.live.is_some() || c.gone_since.is_none_or(|t| t.elapsed() < retention)
        });
    }

    /// Whether every connected client acknowledged everything queued for it.
    pub fn connected_clients_drained(&self) -> bool {
        let state = self.lock();
        state
            .clients
            .values()
            .filter(|c| c.live.is_some())
            .all(|c| c.queue.drained())
    }

    /// `/health`.
    pub fn health(&self) -> Value {
        let state = self.lock();
        let mut games: Vec<Value> = state
            .games
            .iter()
            .map(|(name, g)| {
                json!({"name": name, "instance": g.instance, "adapter": g.adapter,
                       "gameVersion": g.game_version, "connectedSinceMs": g.since_ms})
            })
            .collect();
        games.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        let mut clients: Vec<Value> = state
            .clients
            .iter()
            .map(|((token, id), c)| {
                json!({"clientId": id, "token": token, "connected": c.live.is_some(),
                       "queueDepth": c.queue.len(), "queueBytes": c.queue.bytes(),
                       "lastSeq": c.queue.last_seq(), "acked": c.queue.acked(),
                       "lostTotal": c.queue.lost_total(),
                       "subscriptions": c.subscriptions.iter().map(|t| t.as_str()).collect::<Vec<_>>()})
            })
            .collect();
        clients.sort_by(|a, b| a["clientId"].as_str().cmp(&b["clientId"].as_str()));
        let mcp_connected = state.clients.values().filter(|c| c.live.is_some()).count();
        json!({
            "status": "ok",
            "scheme": if self.inner.settings.tls.is_some() { "wss" } else { "ws" },
            "epoch": self.inner.epoch,
            "game_connected": !state.games.is_empty(),
            "connections": {"games": state.games.len(), "mcp": mcp_connected},
            "games": games,
            "clients": clients,
            "pendingCommands": state.pending.len(),
        })
    }

    /// `/metrics` in Prometheus text.
    pub fn metrics(&self) -> String {
        use std::fmt::Write;
        let s = &self.inner.stats;
        let state = self.lock();
        let mut out = String::new();
        let mcp = state.clients.values().filter(|c| c.live.is_some()).count();
        let _ = writeln!(out, "# TYPE minecraft_relay_connections gauge");
        let _ = writeln!(
            out,
            "minecraft_relay_connections{{role=\"minecraft\"}} {}",
            state.games.len()
        );
        let _ = writeln!(out, "minecraft_relay_connections{{role=\"mcp\"}} {mcp}");
        let _ = writeln!(out, "# TYPE minecraft_relay_queue_depth gauge");
        for ((token, id), c) in &state.clients {
            let _ = writeln!(
                out,
                "minecraft_relay_queue_depth{{client=\"{token}/{id}\"}} {}",
                c.queue.len()
            );
        }
        let _ = writeln!(out, "# TYPE minecraft_relay_queue_bytes gauge");
        for ((token, id), c) in &state.clients {
            let _ = writeln!(
                out,
                "minecraft_relay_queue_bytes{{client=\"{token}/{id}\"}} {}",
                c.queue.bytes()
            );
        }
        let _ = writeln!(out, "# TYPE minecraft_relay_game_instances gauge");
        let _ = writeln!(
            out,
            "minecraft_relay_game_instances {}",
            state.instances.len()
        );
        let _ = writeln!(out, "# TYPE minecraft_relay_game_instances_bytes gauge");
        let _ = writeln!(
            out,
            "minecraft_relay_game_instances_bytes {}",
            state.instances.bytes()
        );
        let settings = &self.inner.settings;
        let _ = writeln!(out, "# TYPE minecraft_relay_token_clients gauge");
        let _ = writeln!(out, "# TYPE minecraft_relay_token_queue_bytes gauge");
        for token in 0..settings.mcp_tokens.len() {
            let (n, bytes) = state.token_usage(token);
            let _ = writeln!(
                out,
                "minecraft_relay_token_clients{{token=\"{token}\"}} {n}"
            );
            let _ = writeln!(
                out,
                "minecraft_relay_token_queue_bytes{{token=\"{token}\"}} {bytes}"
            );
        }
        let _ = writeln!(out, "# TYPE minecraft_relay_assembling_bytes gauge");
        let _ = writeln!(
            out,
            "minecraft_relay_assembling_bytes {}",
            self.inner.assembly.held()
        );
        let _ = writeln!(out, "# TYPE minecraft_relay_decoding_bytes gauge");
        let _ = writeln!(
            out,
            "minecraft_relay_decoding_bytes {}",
            self.inner.decoding.held()
        );
        // Every bound, so a dashboard can set each gauge against its limit.
        let _ = writeln!(out, "# TYPE minecraft_relay_limit gauge");
        for (name, value) in [
            ("queue_messages", settings.queue_size),
            ("queue_bytes", settings.queue_bytes),
            ("clients_per_token", settings.clients_per_token),
            ("token_queue_bytes", settings.token_queue_bytes),
            ("game_instances_bytes", INSTANCES_BYTES),
            ("dead_instances_per_name", DEAD_INSTANCES_PER_NAME),
            ("max_message_bytes", settings.max_message_bytes),
            ("max_assembled_bytes", crate::wire::MAX_ASSEMBLED_BYTES),
            ("max_assembling_bytes", self.inner.assembly.max()),
            ("max_decoding_bytes", self.inner.decoding.max()),
            ("link_outgoing_bytes", bridge_core::link::OUTGOING_BYTES),
            ("link_incoming_bytes", bridge_core::link::INCOMING_BYTES),
            ("mcp_rate", settings.mcp_rate as usize),
            ("game_rate", settings.game_rate as usize),
            ("mcp_token_rate", settings.mcp_token_rate as usize),
            ("game_command_rate", settings.game_command_rate as usize),
            ("games_event_rate", settings.games_event_rate as usize),
        ] {
            let _ = writeln!(out, "minecraft_relay_limit{{bound=\"{name}\"}} {value}");
        }
        let counters = [
            ("minecraft_relay_queues_evicted_total", &s.queues_evicted),
            (
                "minecraft_relay_queue_evicted_messages_total",
                &s.evicted_messages,
            ),
            ("minecraft_relay_clients_refused_total", &s.clients_refused),
            (
                "minecraft_relay_client_id_in_use_total",
                &s.client_ids_in_use,
            ),
            (
                "minecraft_relay_game_instances_evicted_total",
                &s.instances_evicted,
            ),
            ("minecraft_relay_events_received_total", &s.events_in),
            (
                "minecraft_relay_events_duplicate_total",
                &s.events_duplicate,
            ),
            (
                "minecraft_relay_events_forwarded_total",
                &s.events_forwarded,
            ),
            ("minecraft_relay_commands_total", &s.commands),
            ("minecraft_relay_responses_total", &s.responses),
            ("minecraft_relay_schema_errors_total", &s.schema_errors),
            ("minecraft_relay_rate_limited_total", &s.rate_limited),
            (
                "minecraft_relay_events_rate_limited_total",
                &s.events_rate_limited,
            ),
            (
                "minecraft_relay_permission_denied_total",
                &s.permission_denied,
            ),
            ("minecraft_relay_timeouts_total", &s.timeouts),
            (
                "minecraft_relay_version_warnings_total",
                &s.version_warnings,
            ),
        ];
        for (name, value) in counters {
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name} {}", value.load(Ordering::Relaxed));
        }
        let _ = writeln!(
            out,
            "# TYPE minecraft_relay_rate_limited_by_scope_total counter"
        );
        for scope in Scope::ALL {
            let _ = writeln!(
                out,
                "minecraft_relay_rate_limited_by_scope_total{{scope=\"{}\"}} {}",
                scope.as_str(),
                s.rate_limited_by[scope as usize].load(Ordering::Relaxed)
            );
        }
        let lost: u64 = state.clients.values().map(|c| c.queue.lost_total()).sum();
        let _ = writeln!(out, "# TYPE minecraft_relay_queue_lost_total counter");
        let _ = writeln!(out, "minecraft_relay_queue_lost_total {lost}");
        if let Some(bus) = self.bus() {
            out.push_str(&bus.metrics());
        }
        out
    }
}

/// A `response` with `success: false` the relay writes itself.
pub fn respond_error(
    id: &str,
    game: Option<&str>,
    seq: u64,
    code: Code,
    message: &str,
    details: Value,
) -> Envelope {
    let mut out = Envelope::new(
        Kind::Response,
        id,
        Source::Relay,
        json!({"success": false, "error": {"code": code.as_str(), "message": message, "details": details}}),
    );
    out.seq = Some(seq);
    out.game = game.map(str::to_owned);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none_live(_: &str, _: &str) -> bool {
        false
    }

    #[test]
    fn a_name_keeps_its_live_instance_and_its_latest_dead_ones() {
        let mut m = Instances::default();
        let mut evicted = Vec::new();
        m.touch("g", "live", 7, none_live);
        for i in 0..100 {
            evicted.extend(m.touch("g", &format!("d{i}"), 1, |_, i| i == "live"));
        }
        // The one touched last is never dropped either (in the relay it is the one connecting).
        assert_eq!(m.len(), 2 + DEAD_INSTANCES_PER_NAME);
        assert_eq!(
            m.last("g", "live"),
            7,
            "the live one stays, though seen first"
        );
        // The most recent dead ones stay; the oldest went, in order.
        assert_eq!(m.last("g", "d99"), 1);
        assert_eq!(m.last("g", "d0"), 0);
        assert_eq!(evicted.len(), 100 - 1 - DEAD_INSTANCES_PER_NAME);
        assert_eq!(evicted[0], ("g".to_owned(), "d0".to_owned()));
    }

    #[test]
    fn seeing_a_dead_instance_again_keeps_it() {
        let mut m = Instances::default();
        m.touch("g", "old", 5, none_live);
        for i in 0..DEAD_INSTANCES_PER_NAME * 3 {
            m.touch("g", &format!("n{i}"), 1, none_live);
            // It reconnects now and then (touched at each welcome): never the least recently seen.
            m.touch("g", "old", 0, none_live);
        }
        assert_eq!(m.last("g", "old"), 5, "a seq never goes down");
    }

    #[test]
    fn every_name_together_stays_within_the_bytes() {
        let mut m = Instances::default();
        let long = "x".repeat(64);
        for i in 0..10_000 {
            m.touch(&format!("{i:0>64}"), &long, 1, none_live);
            assert!(m.bytes() <= INSTANCES_BYTES);
        }
        assert_eq!(m.len(), INSTANCES_BYTES / (128 + INSTANCE_OVERHEAD));
        // The bytes counted are the entries held.
        let counted: usize = m
            .by_name
            .iter()
            .flat_map(|(n, is)| is.keys().map(move |i| instance_cost(n, i)))
            .sum();
        assert_eq!(counted, m.bytes());
    }

    #[test]
    fn live_instances_are_never_dropped() {
        let mut m = Instances::default();
        for i in 0..5_000 {
            m.touch(&format!("{i:0>64}"), "i", 1, |_, _| true);
        }
        assert_eq!(m.len(), 5_000, "only dead instances are dropped");
    }
}
