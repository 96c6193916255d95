//! Serving an axum router on TCP so that connections cannot pin the listener: a cap on open connections and
//! on those of one peer address, a deadline for the first request head, a short idle deadline between
//! requests, and a refused request closing its connection.
//!
//! Without these, 1 000 idle sockets and 100 slow-loris clients (one header byte every few seconds) held
//! every listener open forever and, with a low descriptor limit, real calls timed out (issue 8, item 4).
//!
//! - **Cap**: at most [`ListenLimits::max_connections`] accepted connections at once. WebSocket links hold
//!   their slot for their lifetime, so the cap also bounds links. At the cap, a new client makes room: the
//!   listener closes the oldest connection that has sent no request head for a second, or else the oldest
//!   one kept alive with no request in flight for a second (counted as `evicted`), and the new client takes
//!   its slot. Only when no connection may be closed (a request in flight, a WebSocket link, or younger
//!   than that) do new clients wait, in the kernel's backlog, until one frees. Without that, sockets that
//!   connect and say nothing held every slot until their handshake deadline, and an attacker who
//!   reconnected as each timed out kept every new client waiting about 8 s, before any token was checked
//!   (the hostile run of stop 40).
//! - **Cap per peer address**: at most [`ListenLimits::max_per_ip`] of them from one IP address (an IPv6
//!   address counts by its /64, what one host is usually given). A connection beyond it closes the address's
//!   own oldest silent or idle one (as at the cap; an attack run's local program held 64 silent sockets on
//!   loopback and kept every other local client out), or else is closed as soon as it is accepted, so one
//!   client cannot take every slot; loopback is no exception.
//! - **Handshake deadline**: a connection whose first request head has not fully arrived within
//!   [`ListenLimits::handshake_timeout`] of being accepted is closed, however many bytes it dribbles.
//! - **Idle deadline**: a connection with no request in flight is closed [`ListenLimits::idle_timeout`]
//!   after its last request finished (the response body fully sent). Bytes from the client do not extend
//!   it, so a slow-loris on a kept-alive connection is bounded too. It is short (5 s by default, Node's
//!   keep-alive default): a connection that sent one request and went idle held its slot for 120 s, and
//!   1 030 of them kept the next client out for 113 s (issue 25). A request in flight has no deadline here
//!   (tool timeouts bound it), nor does a long response such as an event stream.
//! - **Refused requests close**: an HTTP/1 response refusing the request (400, 401, 403, 408, 413, 429,
//!   431) carries `Connection: close`, and the connection ends once it is sent: a client without the token
//!   gains nothing by keeping the socket.
//! - A connection upgraded to a WebSocket leaves both deadlines behind: the link's own liveness (pings,
//!   probes) judges it from then on. Call [`Conn::upgraded`] when accepting the upgrade.
//!
//! - **TLS** (optional, [`GuardedListener::with_tls`]): the handshake runs inside the connection's I/O object
//!   when the server first reads, not in the accept loop, so one slow client delays no other; it counts
//!   against the handshake deadline like the request head it carries.
//!
//! The deadlines live in the connection's I/O object ([`GuardedIo`]); the service [`serve`] wraps around
//! the router ([`Track`], one per connection) tells it when a request starts and when its response is done. [`ListenStats`] counts every connection
//! closed and why, and [`ListenStats::render`] writes the counts and the limits for `/metrics`.

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{ConnectInfo, Request, connect_info::Connected};
use axum::response::Response;
use axum::routing::future::RouteFuture;
use axum::serve::{IncomingStream, Listener};
use futures::task::AtomicWaker;
use http::{HeaderValue, StatusCode, Version, header};
use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tower::Service;

/// Connection limits of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenLimits {
    /// Open connections (and WebSocket links) at once.
    pub max_connections: usize,
    /// Open connections from one peer address at once (IPv6: one /64). A listener whose clients all come
    /// from one host by design (a Minecraft server's ComputerCraft computers) sets it to `max_connections`.
    pub max_per_ip: usize,
    /// From accept until the first request head has arrived.
    pub handshake_timeout: Duration,
    /// From the end of the last response until the next request head.
    pub idle_timeout: Duration,
}

impl ListenLimits {
    /// 1024 connections, 256 per peer address, 10 s for the first request head, 5 s idle. A quarter of the
    /// slots per address: no one address takes them all, and an MCP client making a hundred calls at once
    /// over HTTP/1.1 (a connection each; the ComputerCraft tests do) is not refused.
    pub const DEFAULT: Self = Self {
        max_connections: 1024,
        max_per_ip: 256,
        handshake_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(5),
    };
}

impl Default for ListenLimits {
    /// [`ListenLimits::DEFAULT`].
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Why the listener closed a connection (or refused one at accept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The first request head (and TLS handshake) did not arrive in time.
    HandshakeTimeout,
    /// No new request arrived in time after the last response.
    IdleTimeout,
    /// A request was refused (401, 403, ...) and the connection closed after the answer.
    Refused,
    /// Its peer address already held [`ListenLimits::max_per_ip`] connections; closed at accept.
    PerIpCap,
    /// At the cap, closed to make room for a new client: it had sent no request head yet, or it was kept
    /// alive with no request in flight.
    Evicted,
}

impl CloseReason {
    pub const ALL: [CloseReason; 5] = [
        CloseReason::HandshakeTimeout,
        CloseReason::IdleTimeout,
        CloseReason::Refused,
        CloseReason::PerIpCap,
        CloseReason::Evicted,
    ];

    /// The `reason` label in `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::HandshakeTimeout => "handshake_timeout",
            CloseReason::IdleTimeout => "idle_timeout",
            CloseReason::Refused => "refused",
            CloseReason::PerIpCap => "per_ip_cap",
            CloseReason::Evicted => "evicted",
        }
    }
}

/// Counters of one listener, for `/metrics`, logs and tests.
#[derive(Debug, Default)]
pub struct ListenStats {
    open: AtomicUsize,
    peak: AtomicUsize,
    accepted: AtomicU64,
    /// Indexed like [`CloseReason::ALL`].
    closed: [AtomicU64; 5],
}

impl ListenStats {
    /// Connections accepted since the start (those closed at once for [`CloseReason::PerIpCap`] included).
    pub fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Connections the listener closed for `reason`.
    pub fn closed(&self, reason: CloseReason) -> u64 {
        self.closed[reason as usize].load(Ordering::SeqCst)
    }

    fn count(&self, reason: CloseReason) {
        self.closed[reason as usize].fetch_add(1, Ordering::SeqCst);
    }

    /// The counts and `limits` in Prometheus text format, each series named `{prefix}_...`.
    pub fn render(&self, prefix: &str, limits: &ListenLimits) -> String {
        render_listeners(prefix, &[(String::new(), self, *limits)])
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// The most connections that were ever open at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    /// Connections closed because a handshake or idle deadline passed.
    pub fn timed_out(&self) -> u64 {
        self.closed(CloseReason::HandshakeTimeout) + self.closed(CloseReason::IdleTimeout)
    }
}

/// Renders the series of several listeners, each told apart by its labels (`listener="..."`, or none).
fn render_listeners(prefix: &str, listeners: &[(String, &ListenStats, ListenLimits)]) -> String {
    use std::fmt::Write;
    type Values = fn(&ListenStats, &ListenLimits) -> Vec<(Option<&'static str>, String)>;
    let families: [(&str, &str, &str, Values); 8] = [
        (
            "connections_open",
            "gauge",
            "Connections open now.",
            |s, _| vec![(None, s.open().to_string())],
        ),
        (
            "connections_peak",
            "gauge",
            "Most connections open at once since the start.",
            |s, _| vec![(None, s.peak().to_string())],
        ),
        (
            "connections_accepted_total",
            "counter",
            "Connections accepted.",
            |s, _| vec![(None, s.accepted().to_string())],
        ),
        (
            "connections_closed_total",
            "counter",
            "Connections the server closed, by reason (handshake_timeout, idle_timeout, refused, per_ip_cap, evicted).",
            |s, _| {
                CloseReason::ALL
                    .iter()
                    .map(|r| (Some(r.as_str()), s.closed(*r).to_string()))
                    .collect()
            },
        ),
        (
            "max_connections",
            "gauge",
            "Limit: connections open at once.",
            |_, l| vec![(None, l.max_connections.to_string())],
        ),
        (
            "max_connections_per_ip",
            "gauge",
            "Limit: connections open at once from one peer address (IPv6: one /64).",
            |_, l| vec![(None, l.max_per_ip.to_string())],
        ),
        (
            "handshake_timeout_seconds",
            "gauge",
            "Limit: time from accept to the first request head.",
            |_, l| vec![(None, format!("{:.3}", l.handshake_timeout.as_secs_f64()))],
        ),
        (
            "idle_timeout_seconds",
            "gauge",
            "Limit: time a kept-alive connection may wait for its next request.",
            |_, l| vec![(None, format!("{:.3}", l.idle_timeout.as_secs_f64()))],
        ),
    ];
    let mut out = String::new();
    for (name, kind, help, values) in families {
        let _ = writeln!(out, "# HELP {prefix}_{name} {help}");
        let _ = writeln!(out, "# TYPE {prefix}_{name} {kind}");
        for (labels, stats, limits) in listeners {
            for (reason, value) in values(stats, limits) {
                let mut all: Vec<String> = Vec::new();
                if !labels.is_empty() {
                    all.push(labels.clone());
                }
                if let Some(reason) = reason {
                    all.push(format!("reason=\"{reason}\""));
                }
                let labels = if all.is_empty() {
                    String::new()
                } else {
                    format!("{{{}}}", all.join(","))
                };
                let _ = writeln!(out, "{prefix}_{name}{labels} {value}");
            }
        }
    }
    out
}

/// Listeners served by `link::serve_with_tls` in this process (a bridge's game or computer port), so the
/// MCP server's `/metrics` shows them beside its own. Held weakly: a listener that stopped drops out.
static REGISTERED: Mutex<Vec<(String, std::sync::Weak<ListenStats>, ListenLimits)>> =
    Mutex::new(Vec::new());

/// Lists `stats` under `name` (its address) for [`render_registered`].
pub fn register(name: String, stats: &Arc<ListenStats>, limits: ListenLimits) {
    let mut all = REGISTERED.lock().unwrap_or_else(PoisonError::into_inner);
    all.retain(|(_, s, _)| s.strong_count() > 0);
    all.push((name, Arc::downgrade(stats), limits));
}

/// The series of every registered listener still serving, labelled `listener="<address>"`; empty when
/// there is none.
pub fn render_registered(prefix: &str) -> String {
    let live: Vec<(String, Arc<ListenStats>, ListenLimits)> = {
        let mut all = REGISTERED.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(|(_, s, _)| s.strong_count() > 0);
        all.iter()
            .filter_map(|(name, s, l)| s.upgrade().map(|s| (name.clone(), s, *l)))
            .collect()
    };
    if live.is_empty() {
        return String::new();
    }
    let listeners: Vec<(String, &ListenStats, ListenLimits)> = live
        .iter()
        .map(|(name, s, l)| (format!("listener=\"{name}\""), s.as_ref(), *l))
        .collect();
    render_listeners(prefix, &listeners)
}

/// A TCP listener that enforces [`ListenLimits`]. Serve it with [`serve`].
pub struct GuardedListener {
    inner: TcpListener,
    limits: ListenLimits,
    slots: Arc<Semaphore>,
    per_ip: Arc<PerIp>,
    /// Every connection accepted and not yet known to be gone, oldest first: where room is made at the cap.
    open: VecDeque<Weak<ConnState>>,
    stats: Arc<ListenStats>,
    tls: Option<TlsAcceptor>,
}

impl GuardedListener {
    pub fn new(inner: TcpListener, limits: ListenLimits) -> Self {
        Self {
            inner,
            slots: Arc::new(Semaphore::new(limits.max_connections.max(1))),
            per_ip: Arc::default(),
            open: VecDeque::new(),
            limits,
            stats: Arc::default(),
            tls: None,
        }
    }

    /// Counts into `stats` instead of a fresh set: a `/metrics` route built before the listener can hold it.
    pub fn with_stats(mut self, stats: Arc<ListenStats>) -> Self {
        self.stats = stats;
        self
    }

    pub fn limits(&self) -> ListenLimits {
        self.limits
    }

    /// Every accepted connection speaks TLS with `config` (see `link::tls::server_config`).
    pub fn with_tls(mut self, config: Arc<rustls::ServerConfig>) -> Self {
        self.tls = Some(TlsAcceptor::from(config));
        self
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    pub fn stats(&self) -> Arc<ListenStats> {
        Arc::clone(&self.stats)
    }
}

impl Listener for GuardedListener {
    type Io = GuardedIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (GuardedIo, SocketAddr) {
        let (tcp, addr, peer_slot, took_own) = loop {
            let (tcp, addr) = match self.inner.accept().await {
                Ok(accepted) => accepted,
                // Out of descriptors and the like: back off instead of spinning, as axum does.
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            self.stats.accepted.fetch_add(1, Ordering::SeqCst);
            let max_per_ip = self.limits.max_per_ip.max(1);
            match PerIp::take(&self.per_ip, addr.ip(), max_per_ip) {
                Some(slot) => break (tcp, addr, slot, false),
                // The address's own silent or idle connection makes room, as one does at the cap.
                None if self
                    .make_room_among(Instant::now(), "its address's cap", |c| {
                        PerIp::key(c.peer.ip()) == PerIp::key(addr.ip())
                    })
                    .is_ok() =>
                {
                    // The closed one gives its place back as it goes: one over for a moment.
                    break (tcp, addr, PerIp::take_over(&self.per_ip, addr.ip()), true);
                }
                None => {
                    // Dropping the socket closes it, before it takes a slot.
                    self.stats.count(CloseReason::PerIpCap);
                    tracing::debug!(
                        peer = %addr,
                        max = self.limits.max_per_ip,
                        "connection closed: its address holds the most connections allowed per address"
                    );
                    drop(tcp);
                }
            }
        };
        let permit = match Arc::clone(&self.slots).try_acquire_owned() {
            Ok(permit) => permit,
            // At the listener's cap too: the address's own connection just closed gives its slot back as it
            // goes; closing another address's as well would make one new connection cost two (a review's
            // finding).
            Err(_) if took_own => match Arc::clone(&self.slots).acquire_owned().await {
                Ok(permit) => permit,
                Err(_) => self.wait_for_room().await,
            },
            Err(_) => self.wait_for_room().await,
        };
        // Request/response links suffer from Nagle's delay (SSE replies stalled ~40 ms without it).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
        let open = self.stats.open.fetch_add(1, Ordering::SeqCst) + 1;
        self.stats.peak.fetch_max(open, Ordering::SeqCst);
        let state = Arc::new(ConnState {
            peer: addr,
            phase: Mutex::new(Phase::Handshake),
            accepted: Instant::now(),
            limits: self.limits,
            waker: AtomicWaker::new(),
            stats: Arc::clone(&self.stats),
            evicted: AtomicBool::new(false),
            body_wait: Mutex::new(None),
        });
        self.remember(&state);
        let inner = match &self.tls {
            Some(acceptor) => Stream::Handshaking(Box::new(acceptor.accept(tcp))),
            None => Stream::Plain(tcp),
        };
        let io = GuardedIo {
            inner,
            sleep: Box::pin(tokio::time::sleep_until(
                state.accepted + self.limits.handshake_timeout,
            )),
            conn: Conn { state },
            stats: Arc::clone(&self.stats),
            expired: false,
            _peer_slot: peer_slot,
            _permit: permit,
        };
        (io, addr)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

impl GuardedListener {
    /// Adds a connection to [`GuardedListener::open`], forgetting the ones gone: at most twice the cap of
    /// entries, so the list stays bounded whatever the order connections close in.
    fn remember(&mut self, state: &Arc<ConnState>) {
        while self.open.front().is_some_and(|c| c.strong_count() == 0) {
            self.open.pop_front();
        }
        if self.open.len() >= self.limits.max_connections.max(1).saturating_mul(2) {
            self.open.retain(|c| c.strong_count() > 0);
        }
        self.open.push_back(Arc::downgrade(state));
    }

    /// A slot for the connection just accepted at the cap, made by closing another ([`Self::make_room`]) or
    /// freed by one that ends. The new connection is held here meanwhile, not served: one over the cap.
    async fn wait_for_room(&mut self) -> OwnedSemaphorePermit {
        let mut warned = false;
        loop {
            let retry = match self.make_room(Instant::now()) {
                Ok(()) => None,
                Err(retry) => {
                    if !warned {
                        warned = true;
                        tracing::warn!(
                            max = self.limits.max_connections,
                            "connection cap reached and no connection may be closed yet; new connections wait"
                        );
                    }
                    Some(retry)
                }
            };
            let acquire = Arc::clone(&self.slots).acquire_owned();
            let acquired = match retry {
                None => acquire.await,
                Some(retry) => tokio::select! {
                    biased;
                    acquired = acquire => acquired,
                    () = tokio::time::sleep_until(retry) => continue,
                },
            };
            // The semaphore is never closed, so this only fails if that changes; then take no cap.
            return match acquired {
                Ok(permit) => permit,
                Err(_) => std::future::pending().await,
            };
        }
    }

    /// Closes the oldest connection that has sent no request head for [`MAKE_ROOM_AFTER`], or else the
    /// oldest kept alive with no request in flight for as long. `Err(when)`: none may be closed yet; look
    /// again at `when` (every open connection may be busy or a WebSocket link, which are never closed).
    fn make_room(&mut self, now: Instant) -> Result<(), Instant> {
        self.make_room_among(now, "the listener's cap", |_| true)
    }

    /// [`Self::make_room`] among the connections `which` takes, at the cap `cap` names (for the log).
    fn make_room_among(
        &mut self,
        now: Instant,
        cap: &str,
        which: impl Fn(&ConnState) -> bool,
    ) -> Result<(), Instant> {
        // Silent ones first, oldest first; then idle ones, oldest first.
        let candidates = self
            .open
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|c| which(c))
            .filter_map(|c| c.eviction_order().map(|(rank, t)| (rank, t, c)));
        let mut retry = now + MAKE_ROOM_AFTER;
        let mut victim: Option<(u8, Instant, Arc<ConnState>)> = None;
        for (rank, t, c) in candidates {
            if t + MAKE_ROOM_AFTER > now {
                retry = retry.min(t + MAKE_ROOM_AFTER);
                continue;
            }
            if victim.as_ref().is_none_or(|(r, v, _)| (rank, t) < (*r, *v)) {
                victim = Some((rank, t, c));
            }
        }
        let Some((_, _, victim)) = victim else {
            return Err(retry);
        };
        victim.evict();
        tracing::debug!(peer = %victim.peer, cap, "connection closed to make room");
        Ok(())
    }
}

/// How long a connection must have been silent (no request head since accept) or idle (no request since
/// its last response) before it may be closed to make room at the cap: a younger one's request may be in
/// its socket, not read yet.
const MAKE_ROOM_AFTER: Duration = Duration::from_secs(1);

/// Open connections per peer address.
#[derive(Debug, Default)]
struct PerIp(Mutex<HashMap<IpAddr, usize>>);

impl PerIp {
    /// The address a peer is counted under: IPv4 as it is (IPv4-mapped IPv6 too), IPv6 by its /64, and all of
    /// 127.0.0.0/8 and ::1 as one: every one of them is this machine, and 127.0.0.2..6 gave one local
    /// program five times the cap (a listener on `::` takes both families).
    fn key(ip: IpAddr) -> IpAddr {
        match ip {
            IpAddr::V4(v4) if v4.is_loopback() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V4(_) => ip,
            IpAddr::V6(v6) if v6.is_loopback() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) if v4.is_loopback() => IpAddr::V4(Ipv4Addr::LOCALHOST),
                Some(v4) => IpAddr::V4(v4),
                None => {
                    let s = v6.segments();
                    IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
                }
            },
        }
    }

    /// One more connection from `ip` whatever it holds: in the place of one of its own just closed.
    fn take_over(this: &Arc<Self>, ip: IpAddr) -> PeerSlot {
        let key = Self::key(ip);
        *this
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_insert(0) += 1;
        PeerSlot {
            per_ip: Arc::clone(this),
            key,
        }
    }

    /// One more connection from `ip`, unless it already holds `max`.
    fn take(this: &Arc<Self>, ip: IpAddr, max: usize) -> Option<PeerSlot> {
        let key = Self::key(ip);
        let mut map = this.0.lock().unwrap_or_else(PoisonError::into_inner);
        let n = map.entry(key).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(PeerSlot {
            per_ip: Arc::clone(this),
            key,
        })
    }
}

/// A connection's place in its address's count, given back when the connection is dropped.
#[derive(Debug)]
struct PeerSlot {
    per_ip: Arc<PerIp>,
    key: IpAddr,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut map = self.per_ip.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = map.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.key);
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    Handshake,
    Busy(usize),
    Idle(Instant),
    Upgraded,
}

#[derive(Debug)]
struct ConnState {
    peer: SocketAddr,
    phase: Mutex<Phase>,
    accepted: Instant,
    limits: ListenLimits,
    /// The reader of this connection, woken when the phase changes its deadline.
    waker: AtomicWaker,
    stats: Arc<ListenStats>,
    /// Closed to make room at the cap ([`GuardedListener::make_room`]); reads fail from then on.
    evicted: AtomicBool,
    /// While a handler waits for a request's body ([`Conn::awaiting_body`]): since when. A body that does not
    /// come is like a head that does not: the connection may be closed to make room.
    body_wait: Mutex<Option<Instant>>,
}

impl ConnState {
    fn update(&self, f: impl FnOnce(&mut Phase)) {
        // Never held across an await; a poisoned phase is still a valid phase.
        f(&mut self.phase.lock().unwrap_or_else(PoisonError::into_inner));
        self.waker.wake();
    }

    /// If it may be closed to make room, where it stands in line and since when it has been silent or idle:
    /// `(0, accepted)` with no request head yet, `(1, since)` idle between requests.
    fn eviction_order(&self) -> Option<(u8, Instant)> {
        if self.evicted.load(Ordering::SeqCst) {
            return None;
        }
        match *self.phase.lock().unwrap_or_else(PoisonError::into_inner) {
            Phase::Handshake => Some((0, self.accepted)),
            Phase::Idle(since) => Some((1, since)),
            Phase::Busy(_) => (*self
                .body_wait
                .lock()
                .unwrap_or_else(PoisonError::into_inner))
            .map(|since| (0, since)),
            Phase::Upgraded => None,
        }
    }

    fn evict(&self) {
        if !self.evicted.swap(true, Ordering::SeqCst) {
            self.stats.count(CloseReason::Evicted);
        }
        self.waker.wake();
    }

    fn deadline(&self) -> Option<Instant> {
        match *self.phase.lock().unwrap_or_else(PoisonError::into_inner) {
            Phase::Handshake => Some(self.accepted + self.limits.handshake_timeout),
            Phase::Idle(since) => Some(since + self.limits.idle_timeout),
            Phase::Busy(_) | Phase::Upgraded => None,
        }
    }
}

/// One accepted connection, as seen by handlers: read it with `ConnectInfo<Conn>`. One `Arc`: it is cloned
/// into every request's extensions.
#[derive(Debug, Clone)]
pub struct Conn {
    state: Arc<ConnState>,
}

impl Conn {
    pub fn peer(&self) -> SocketAddr {
        self.state.peer
    }

    /// The connection becomes a WebSocket: no more handshake or idle deadline.
    pub fn upgraded(&self) {
        self.state.update(|p| *p = Phase::Upgraded);
    }

    /// A handler waits for this connection's request body until the guard drops: meanwhile, at the cap, the
    /// connection may be closed to make room once it has waited a second, as one that sent no head may. 256
    /// request heads whose bodies dripped a byte every few seconds locked every other local client out of the
    /// port (an attack run's finding).
    pub fn awaiting_body(&self) -> AwaitingBody {
        *self
            .state
            .body_wait
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        AwaitingBody(Arc::clone(&self.state))
    }

    fn begin(&self) -> InFlight {
        self.state.update(|p| {
            *p = match *p {
                Phase::Busy(n) => Phase::Busy(n + 1),
                Phase::Upgraded => Phase::Upgraded,
                Phase::Handshake | Phase::Idle(_) => Phase::Busy(1),
            }
        });
        InFlight(Arc::clone(&self.state))
    }
}

impl Connected<IncomingStream<'_, GuardedListener>> for Conn {
    fn connect_info(stream: IncomingStream<'_, GuardedListener>) -> Self {
        stream.io().conn.clone()
    }
}

/// See [`Conn::awaiting_body`].
pub struct AwaitingBody(Arc<ConnState>);

impl Drop for AwaitingBody {
    fn drop(&mut self) {
        *self
            .0
            .body_wait
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// A request in flight on a connection, until its response body is done or dropped.
struct InFlight(Arc<ConnState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.update(|p| {
            *p = match *p {
                Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
                Phase::Busy(_) => Phase::Idle(Instant::now()),
                other => other,
            }
        });
    }
}

/// The response body, carrying the request's [`InFlight`] until the last byte is handed to the connection.
struct Tracked {
    body: Body,
    _in_flight: InFlight,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Statuses that refuse the request itself (its credentials, origin, size or rate), after which the
/// connection is closed rather than kept alive for the refused client.
fn is_refusal(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::BAD_REQUEST
            | StatusCode::UNAUTHORIZED
            | StatusCode::FORBIDDEN
            | StatusCode::REQUEST_TIMEOUT
            | StatusCode::PAYLOAD_TOO_LARGE
            | StatusCode::TOO_MANY_REQUESTS
            | StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
    )
}

/// Makes the [`Track`] service of each accepted connection around the router.
#[derive(Clone)]
struct MakeTrack(Router);

impl Service<IncomingStream<'_, GuardedListener>> for MakeTrack {
    type Response = Track;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Track, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, stream: IncomingStream<'_, GuardedListener>) -> Self::Future {
        std::future::ready(Ok(Track {
            router: self.0.clone(),
            conn: stream.io().conn.clone(),
        }))
    }
}

/// The router as served on one connection: each request marks the connection busy until its response body
/// is done (the idle deadline starts then), gets the connection as `ConnectInfo<Conn>`, and a refusal over
/// HTTP/1 closes the connection. Cloned by hyper for every request, so it holds two `Arc`s and nothing is
/// boxed per request but the response body (to carry [`InFlight`]).
#[derive(Clone)]
struct Track {
    router: Router,
    conn: Conn,
}

impl Service<Request> for Track {
    type Response = Response;
    type Error = Infallible;
    type Future = TrackFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request) -> TrackFuture {
        let in_flight = self.conn.begin();
        // HTTP/2 has no `Connection` header (a refused stream does not end the connection; the idle deadline
        // does); HTTP/1 ends the connection after a response that says `Connection: close`.
        let http1 = request.version() < Version::HTTP_2;
        request
            .extensions_mut()
            .insert(ConnectInfo(self.conn.clone()));
        TrackFuture {
            inner: self.router.call(request),
            in_flight: Some(in_flight),
            http1,
        }
    }
}

/// The router's response future; on completion, wraps the body in [`Tracked`].
struct TrackFuture {
    inner: RouteFuture<Infallible>,
    /// Taken when the response is ready.
    in_flight: Option<InFlight>,
    http1: bool,
}

impl Future for TrackFuture {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Ok(mut response) = ready!(Pin::new(&mut this.inner).poll(cx));
        if this.http1 && is_refusal(response.status()) {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            if let Some(in_flight) = &this.in_flight {
                in_flight.0.stats.count(CloseReason::Refused);
            }
        }
        Poll::Ready(Ok(match this.in_flight.take() {
            Some(in_flight) => response.map(|body| {
                Body::new(Tracked {
                    body,
                    _in_flight: in_flight,
                })
            }),
            None => response,
        }))
    }
}

/// The socket of a connection: plain, or TLS (handshaking, then established).
enum Stream {
    Plain(TcpStream),
    Handshaking(Box<tokio_rustls::Accept<TcpStream>>),
    Tls(Box<TlsStream<TcpStream>>),
    /// The handshake failed; the error was returned once and the connection is done.
    Failed,
}

impl Stream {
    /// Drives a pending TLS handshake; `Ready(Ok)` once the stream can carry data.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Stream::Handshaking(accept) = self else {
            return match self {
                Stream::Failed => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "the TLS handshake failed",
                ))),
                _ => Poll::Ready(Ok(())),
            };
        };
        match Pin::new(accept).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(tls)) => {
                *self = Stream::Tls(Box::new(tls));
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => {
                tracing::debug!(error = %e, "TLS handshake failed");
                *self = Stream::Failed;
                Poll::Ready(Err(e))
            }
        }
    }
}

/// Delegates an I/O call to the established stream, after the handshake if one is pending.
macro_rules! ready_io {
    ($stream:expr, $cx:expr, |$io:ident| $call:expr) => {{
        let stream: &mut Stream = &mut $stream;
        match stream.poll_ready($cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        match stream {
            Stream::Plain(tcp) => {
                let $io = Pin::new(tcp);
                $call
            }
            Stream::Tls(tls) => {
                let $io = Pin::new(tls.as_mut());
                $call
            }
            Stream::Handshaking(_) | Stream::Failed => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the TLS handshake has not completed",
            ))),
        }
    }};
}

/// A connection's socket with its deadlines; see the module docs.
pub struct GuardedIo {
    inner: Stream,
    conn: Conn,
    sleep: Pin<Box<Sleep>>,
    stats: Arc<ListenStats>,
    /// The deadline passed and was counted; reads fail from then on.
    expired: bool,
    _peer_slot: PeerSlot,
    _permit: OwnedSemaphorePermit,
}

impl GuardedIo {
    /// `Err(TimedOut)` once the current deadline has passed; otherwise arranges to be woken at it.
    fn check_deadline(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        self.conn.state.waker.register(cx.waker());
        if self.conn.state.evicted.load(Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed to make room for a new connection at the listener's cap",
            ));
        }
        let Some(deadline) = self.conn.state.deadline() else {
            return Ok(());
        };
        if self.sleep.deadline() != deadline {
            self.sleep.as_mut().reset(deadline);
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            if self.expired {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no request within the connection's deadline",
                ));
            }
            self.expired = true;
            let handshake = matches!(
                *self
                    .conn
                    .state
                    .phase
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
                Phase::Handshake
            );
            self.stats.count(if handshake {
                CloseReason::HandshakeTimeout
            } else {
                CloseReason::IdleTimeout
            });
            tracing::debug!(peer = %self.conn.peer(), "connection closed: no request in time");
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no request within the connection's deadline",
            ));
        }
        Ok(())
    }
}

impl Drop for GuardedIo {
    fn drop(&mut self) {
        self.stats.open.fetch_sub(1, Ordering::SeqCst);
    }
}

impl AsyncRead for GuardedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.check_deadline(cx)?;
        ready_io!(this.inner, cx, |io| io.poll_read(cx, buf))
    }
}

impl AsyncWrite for GuardedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready_io!(self.get_mut().inner, cx, |io| io.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready_io!(self.get_mut().inner, cx, |io| io.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // Finishing a handshake only to close would wait on the client outside any deadline.
        if matches!(this.inner, Stream::Handshaking(_) | Stream::Failed) {
            return Poll::Ready(Ok(()));
        }
        ready_io!(this.inner, cx, |io| io.poll_shutdown(cx))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        ready_io!(self.get_mut().inner, cx, |io| io
            .poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match &self.inner {
            Stream::Plain(tcp) => tcp.is_write_vectored(),
            Stream::Tls(tls) => tls.is_write_vectored(),
            Stream::Handshaking(_) | Stream::Failed => false,
        }
    }
}

/// Serves `router` on `listener` under its limits until `shutdown` is cancelled, then stops accepting and
/// lets requests in flight finish. Handlers can read the connection as `ConnectInfo<Conn>`.
pub async fn serve(
    listener: GuardedListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    axum::serve(listener, MakeTrack(router))
        .with_graceful_shutdown(shutdown)
        .await
}

/// [`serve`] with a cancellation token.
pub async fn serve_until(
    listener: GuardedListener,
    router: Router,
    shutdown: CancellationToken,
) -> io::Result<()> {
    serve(listener, router, shutdown.cancelled_owned()).await
}

#[cfg(test)]
mod per_ip_tests {
    use super::*;

    #[test]
    fn ipv4_counts_as_itself_ipv6_by_its_64_and_mapped_ipv4_as_ipv4() {
        let v4: IpAddr = "192.0.2.7"
            .parse()
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        assert_eq!(PerIp::key(v4), v4);
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap_or(v4);
        assert_eq!(PerIp::key(mapped), v4);
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap_or(v4);
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap_or(v4);
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap_or(v4);
        assert_eq!(PerIp::key(a), PerIp::key(b));
        assert_ne!(PerIp::key(a), PerIp::key(other));
        for local in ["127.0.0.2", "127.9.8.7", "::ffff:127.0.0.5", "::1"] {
            let local: IpAddr = local.parse().unwrap_or(v4);
            assert_eq!(
                PerIp::key(local),
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                "{local}"
            );
        }
    }

    #[test]
    fn several_listeners_render_one_family_each_told_apart_by_label() {
        let a = ListenStats::default();
        let b = ListenStats::default();
        b.count(CloseReason::Refused);
        let text = render_listeners(
            "x",
            &[
                ("listener=\"a\"".into(), &a, ListenLimits::DEFAULT),
                ("listener=\"b\"".into(), &b, ListenLimits::DEFAULT),
            ],
        );
        assert_eq!(
            text.matches("# TYPE x_connections_closed_total counter\n")
                .count(),
            1,
            "{text}"
        );
        assert!(
            text.contains("x_connections_closed_total{listener=\"b\",reason=\"refused\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("x_idle_timeout_seconds{listener=\"a\"} 5.000\n"),
            "{text}"
        );
        let one = b.render("y", &ListenLimits::DEFAULT);
        assert!(
            one.contains("y_connections_closed_total{reason=\"refused\"} 1\n"),
            "{one}"
        );
        assert!(one.contains("y_max_connections_per_ip 256\n"), "{one}");
    }

    #[test]
    fn a_slot_given_back_can_be_taken_again() {
        let per_ip = Arc::new(PerIp::default());
        let ip: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let first = PerIp::take(&per_ip, ip, 2);
        let second = PerIp::take(&per_ip, ip, 2);
        assert!(first.is_some() && second.is_some());
        assert!(
            PerIp::take(&per_ip, ip, 2).is_none(),
            "a third one over the cap"
        );
        drop(first);
        assert!(PerIp::take(&per_ip, ip, 2).is_some());
        drop(second);
    }
}
