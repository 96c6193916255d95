//! Serving an axum router on TCP so that connections cannot pin the listener: a cap on open connections,
//! a deadline for the first request head, and an idle deadline between requests.
//!
//! Without these, 1 000 idle sockets and 100 slow-loris clients (one header byte every few seconds) held
//! every listener open forever and, with a low descriptor limit, real calls timed out (issue 8, item 4).
//!
//! - **Cap**: at most [`ListenLimits::max_connections`] accepted connections at once. When the cap is
//!   reached the listener stops accepting; new clients wait in the kernel's backlog (no descriptor of ours)
//!   until a slot frees. WebSocket links hold their slot for their lifetime, so the cap also bounds links.
//! - **Handshake deadline**: a connection whose first request head has not fully arrived within
//!   [`ListenLimits::handshake_timeout`] of being accepted is closed, however many bytes it dribbles.
//! - **Idle deadline**: a connection with no request in flight is closed [`ListenLimits::idle_timeout`]
//!   after its last request finished (the response body fully sent). Bytes from the client do not extend
//!   it, so a slow-loris on a kept-alive connection is bounded too.
//! - A connection upgraded to a WebSocket leaves both deadlines behind: the link's own liveness (pings,
//!   probes) judges it from then on. Call [`Conn::upgraded`] when accepting the upgrade.
//!
//! - **TLS** (optional, [`GuardedListener::with_tls`]): the handshake runs inside the connection's I/O object
//!   when the server first reads, not in the accept loop, so one slow client delays no other; it counts
//!   against the handshake deadline like the request head it carries.
//!
//! The deadlines live in the connection's I/O object ([`GuardedIo`]); a middleware added by [`serve`]
//! tells it when a request starts and when its response is done.

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{ConnectInfo, Request, connect_info::Connected};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::serve::{IncomingStream, Listener};
use futures::task::AtomicWaker;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

/// Connection limits of one listener.
#[derive(Debug, Clone, Copy)]
pub struct ListenLimits {
    /// Open connections (and WebSocket links) at once.
    pub max_connections: usize,
    /// From accept until the first request head has arrived.
    pub handshake_timeout: Duration,
    /// From the end of the last response until the next request head.
    pub idle_timeout: Duration,
}

impl Default for ListenLimits {
    /// 1024 connections, 10 s for the first request head, 120 s idle.
    fn default() -> Self {
        Self {
            max_connections: 1024,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
        }
    }
}

/// Counters of one listener, for `/health`, logs and tests.
#[derive(Debug, Default)]
pub struct ListenStats {
    open: AtomicUsize,
    peak: AtomicUsize,
    timed_out: AtomicU64,
}

impl ListenStats {
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
        self.timed_out.load(Ordering::SeqCst)
    }
}

/// A TCP listener that enforces [`ListenLimits`]. Serve it with [`serve`].
pub struct GuardedListener {
    inner: TcpListener,
    limits: ListenLimits,
    slots: Arc<Semaphore>,
    stats: Arc<ListenStats>,
    tls: Option<TlsAcceptor>,
}

impl GuardedListener {
    pub fn new(inner: TcpListener, limits: ListenLimits) -> Self {
        Self {
            inner,
            slots: Arc::new(Semaphore::new(limits.max_connections.max(1))),
            limits,
            stats: Arc::default(),
            tls: None,
        }
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
        let permit = match Arc::clone(&self.slots).try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                tracing::warn!(
                    max = self.limits.max_connections,
                    "connection cap reached; new connections wait until one closes"
                );
                // The semaphore is never closed, so this only fails if that changes; then take no cap.
                match Arc::clone(&self.slots).acquire_owned().await {
                    Ok(permit) => permit,
                    Err(_) => std::future::pending().await,
                }
            }
        };
        let (tcp, addr) = loop {
            match self.inner.accept().await {
                Ok(accepted) => break accepted,
                // Out of descriptors and the like: back off instead of spinning, as axum does.
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        // Request/response links suffer from Nagle's delay (SSE replies stalled ~40 ms without it).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
        let open = self.stats.open.fetch_add(1, Ordering::SeqCst) + 1;
        self.stats.peak.fetch_max(open, Ordering::SeqCst);
        let state = Arc::new(ConnState {
            phase: Mutex::new(Phase::Handshake),
            accepted: Instant::now(),
            limits: self.limits,
            waker: AtomicWaker::new(),
        });
        let inner = match &self.tls {
            Some(acceptor) => Stream::Handshaking(Box::new(acceptor.accept(tcp))),
            None => Stream::Plain(tcp),
        };
        let io = GuardedIo {
            inner,
            conn: Conn {
                peer: addr,
                state: Arc::clone(&state),
            },
            sleep: Box::pin(tokio::time::sleep_until(
                state.accepted + self.limits.handshake_timeout,
            )),
            stats: Arc::clone(&self.stats),
            _permit: permit,
        };
        (io, addr)
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
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
    phase: Mutex<Phase>,
    accepted: Instant,
    limits: ListenLimits,
    /// The reader of this connection, woken when the phase changes its deadline.
    waker: AtomicWaker,
}

impl ConnState {
    fn update(&self, f: impl FnOnce(&mut Phase)) {
        // Never held across an await; a poisoned phase is still a valid phase.
        f(&mut self.phase.lock().unwrap_or_else(PoisonError::into_inner));
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

/// One accepted connection, as seen by handlers: read it with `ConnectInfo<Conn>`.
#[derive(Debug, Clone)]
pub struct Conn {
    peer: SocketAddr,
    state: Arc<ConnState>,
}

impl Conn {
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// The connection becomes a WebSocket: no more handshake or idle deadline.
    pub fn upgraded(&self) {
        self.state.update(|p| *p = Phase::Upgraded);
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

async fn track(request: Request, next: Next) -> Response {
    let in_flight = request
        .extensions()
        .get::<ConnectInfo<Conn>>()
        .map(|c| c.0.begin());
    let response = next.run(request).await;
    match in_flight {
        Some(in_flight) => response.map(|body| {
            Body::new(Tracked {
                body,
                _in_flight: in_flight,
            })
        }),
        None => response,
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
    _permit: OwnedSemaphorePermit,
}

impl GuardedIo {
    /// `Err(TimedOut)` once the current deadline has passed; otherwise arranges to be woken at it.
    fn check_deadline(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        self.conn.state.waker.register(cx.waker());
        let Some(deadline) = self.conn.state.deadline() else {
            return Ok(());
        };
        if self.sleep.deadline() != deadline {
            self.sleep.as_mut().reset(deadline);
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            self.stats.timed_out.fetch_add(1, Ordering::SeqCst);
            tracing::debug!(peer = %self.conn.peer, "connection closed: no request in time");
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
    let router = router.layer(middleware::from_fn(track));
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<Conn>(),
    )
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
