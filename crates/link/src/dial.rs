//! Links the bridge opens itself: a WebSocket (Minecraft's bridge mod), TCP (RCON, DAP servers), a Unix
//! socket, or a child process's stdin/stdout (debug adapters). Each gives the same [`Connection`] as an
//! accepted link (`websocket` with the `ws` feature); [`redial`] keeps one up across drops with exponential backoff and jitter.

use crate::backoff::Backoff;
use crate::error::LinkError;
use crate::sender::Connection;
#[cfg(feature = "ws")]
use crate::session::{self, Accepted, Timing, WsConnection, WsIn, WsOut};
use crate::stream::{self, StreamConfig};
#[cfg(feature = "ws")]
use futures_util::{SinkExt, StreamExt, future};
use std::future::Future;
use std::process::Stdio;
#[cfg(feature = "ws")]
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
#[cfg(feature = "ws")]
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
#[cfg(feature = "ws")]
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
#[cfg(feature = "ws")]
use tokio_tungstenite::tungstenite::{self, Message, protocol::CloseFrame};
use tokio_util::sync::CancellationToken;

/// Longest stderr line of a child logged whole; longer ones are cut.
const MAX_STDERR_LINE: usize = 4096;

/// Settings of a dialled WebSocket.
#[cfg(feature = "ws")]
#[derive(Debug, Clone)]
pub struct WsDial {
    /// `ws://` or `wss://` URL.
    pub url: String,
    pub max_frame_bytes: usize,
    /// How often the watchdog pings; `Duration::ZERO` turns it off.
    pub ping_interval: Duration,
    pub pong_timeout: Duration,
    /// How long the TCP connect and WebSocket handshake may take.
    pub connect_timeout: Duration,
    /// Sent as `Authorization: Bearer <token>` on the upgrade request (never in the URL, where logs keep it).
    pub bearer: Option<String>,
    /// Whom a `wss://` server must prove to be; `None` trusts the public web roots
    /// ([`crate::tls::client_config`]).
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

#[cfg(feature = "ws")]
impl WsDial {
    /// 16 MiB frames, a ping every 15 s answered within 10 s, 10 s to connect.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            max_frame_bytes: 16 << 20,
            ping_interval: Duration::from_secs(15),
            pong_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            bearer: None,
            tls: None,
        }
    }
}

/// Opens one WebSocket link; the same pings, close handling and frame limit as an accepted one.
#[cfg(feature = "ws")]
pub async fn websocket(
    cfg: &WsDial,
    shutdown: &CancellationToken,
) -> Result<WsConnection, LinkError> {
    let failed = |reason: String| LinkError::Connect {
        target: cfg.url.clone(),
        reason,
    };
    let ws_cfg = WebSocketConfig::default()
        .max_message_size(Some(cfg.max_frame_bytes))
        .max_frame_size(Some(cfg.max_frame_bytes));
    let mut request = cfg
        .url
        .as_str()
        .into_client_request()
        .map_err(|e| failed(e.to_string()))?;
    if let Some(token) = &cfg.bearer {
        let value = http::HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| failed("the token is not a valid header value".to_owned()))?;
        request
            .headers_mut()
            .insert(http::header::AUTHORIZATION, value);
    }
    // Always our own rustls configuration for wss://, so the crypto provider is the one this crate picks.
    let connector = match (cfg.url.starts_with("wss://"), &cfg.tls) {
        (false, _) => None,
        (true, Some(tls)) => Some(tokio_tungstenite::Connector::Rustls(Arc::clone(tls))),
        (true, None) => Some(tokio_tungstenite::Connector::Rustls(
            crate::tls::client_config(None).map_err(|e| failed(e.to_string()))?,
        )),
    };
    let (socket, response) = tokio::time::timeout(
        cfg.connect_timeout,
        tokio_tungstenite::connect_async_tls_with_config(request, Some(ws_cfg), true, connector),
    )
    .await
    .map_err(|_| {
        failed(format!(
            "no handshake within {} ms",
            cfg.connect_timeout.as_millis()
        ))
    })?
    .map_err(|e| failed(describe_dial_error(e)))?;
    let peer = match socket.get_ref() {
        tokio_tungstenite::MaybeTlsStream::Plain(tcp) => tcp.peer_addr().ok(),
        tokio_tungstenite::MaybeTlsStream::Rustls(tls) => tls.get_ref().0.peer_addr().ok(),
        _ => None,
    };
    let (sink, stream) = socket.split();
    let stream = stream.map(|read| {
        read.map(from_tungstenite)
            .map_err(|e| session::classify(&e))
    });
    let sink = sink
        .with(|out| future::ready(Ok::<_, tungstenite::Error>(to_tungstenite(out))))
        .sink_map_err(|e| e.to_string());
    let accepted = Accepted {
        peer,
        origin: None,
        headers: response.headers().clone(),
        query: Default::default(),
    };
    let timing = Timing {
        ping_interval: cfg.ping_interval,
        pong_timeout: cfg.pong_timeout,
    };
    let (conn, reader) = session::start(stream, sink, accepted, shutdown, timing);
    tokio::spawn(reader);
    Ok(conn)
}

/// tokio-rustls reports a refused certificate as an I/O error wrapping the rustls one; say it is TLS.
#[cfg(feature = "ws")]
fn describe_dial_error(e: tungstenite::Error) -> String {
    match e {
        tungstenite::Error::Tls(tls) => format!("TLS handshake failed: {tls}"),
        tungstenite::Error::Io(io)
            if io
                .get_ref()
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some()) =>
        {
            format!("TLS handshake failed: {io}")
        }
        other => other.to_string(),
    }
}

#[cfg(feature = "ws")]
fn from_tungstenite(msg: Message) -> WsIn {
    match msg {
        Message::Text(text) => WsIn::Text(text.as_str().to_owned()),
        Message::Binary(data) => WsIn::Binary(data.len()),
        Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => WsIn::Control,
        Message::Close(frame) => {
            WsIn::Close(frame.map(|f| (f.code.into(), f.reason.as_str().to_owned())))
        }
    }
}

#[cfg(feature = "ws")]
fn to_tungstenite(out: WsOut) -> Message {
    match out {
        WsOut::Text(text) => Message::text(text),
        WsOut::Ping => Message::Ping(Default::default()),
        WsOut::Close(frame) => Message::Close(frame.map(|(code, reason)| CloseFrame {
            code: code.into(),
            reason: reason.into(),
        })),
    }
}

fn connect_failed(target: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> LinkError {
    move |e| LinkError::Connect {
        target: target.to_string(),
        reason: e.to_string(),
    }
}

/// Opens a TCP link to `target` (`host:port`).
pub async fn tcp(
    target: &str,
    cfg: StreamConfig,
    shutdown: &CancellationToken,
) -> Result<Connection, LinkError> {
    let tcp = tokio::net::TcpStream::connect(target)
        .await
        .map_err(connect_failed(target))?;
    // Request/response links suffer from Nagle's delay.
    let _ = tcp.set_nodelay(true);
    let (read, write) = tcp.into_split();
    Ok(stream::spawn(read, write, cfg, shutdown))
}

/// Opens a link over the Unix socket at `path`.
#[cfg(unix)]
pub async fn unix(
    path: &std::path::Path,
    cfg: StreamConfig,
    shutdown: &CancellationToken,
) -> Result<Connection, LinkError> {
    let socket = tokio::net::UnixStream::connect(path)
        .await
        .map_err(connect_failed(path.display()))?;
    let (read, write) = socket.into_split();
    Ok(stream::spawn(read, write, cfg, shutdown))
}

/// Starts `command` and links to it over its stdin/stdout; its stderr goes to the log at debug level, line by
/// line. The process is killed when the link closes (after its stdin is closed and it had a moment to exit),
/// and the link closes when the process exits.
pub fn child(
    mut command: Command,
    cfg: StreamConfig,
    shutdown: &CancellationToken,
) -> Result<Connection, LinkError> {
    let target = format!("{:?}", command.as_std().get_program());
    let mut process = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| LinkError::Connect {
            target: target.clone(),
            reason: e.to_string(),
        })?;
    let (Some(stdin), Some(stdout)) = (process.stdin.take(), process.stdout.take()) else {
        return Err(LinkError::Connect {
            target,
            reason: "its stdin or stdout could not be piped".into(),
        });
    };
    if let Some(stderr) = process.stderr.take() {
        let target = target.clone();
        tokio::spawn(stderr_lines(stderr, move |line| {
            tracing::debug!(program = %target, "stderr: {}", String::from_utf8_lossy(line));
        }));
    }
    let conn = stream::spawn(stdout, stdin, cfg, shutdown);
    let sender = conn.sender.clone();
    tokio::spawn(async move {
        tokio::select! {
            status = process.wait() => {
                let why = match status {
                    Ok(status) => format!("the program exited ({status})"),
                    Err(e) => format!("the program could not be waited for: {e}"),
                };
                sender.close(&why);
            }
            () = sender.closed() => {
                // Its stdin is closed now; give it a moment to exit by itself, then kill it.
                if tokio::time::timeout(Duration::from_secs(2), process.wait()).await.is_err() {
                    let _ = process.kill().await;
                }
            }
        }
    });
    Ok(conn)
}

/// Hands each line of a child's stderr to `each`, cut to its first `MAX_STDERR_LINE` bytes. Read in chunks so
/// a child writing without newlines costs a line's bound, not its whole output (a line splitter buffers to the
/// newline).
async fn stderr_lines<R: AsyncRead + Unpin>(mut stderr: R, mut each: impl FnMut(&[u8])) {
    let mut chunk = [0u8; 4096];
    let mut line = Vec::with_capacity(MAX_STDERR_LINE);
    loop {
        let n = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for piece in chunk[..n].split_inclusive(|b| *b == b'\n') {
            let (text, ends) = match piece.strip_suffix(b"\n") {
                Some(text) => (text, true),
                None => (piece, false),
            };
            let room = MAX_STDERR_LINE - line.len();
            line.extend_from_slice(&text[..text.len().min(room)]);
            if ends {
                each(&line);
                line.clear();
            }
        }
    }
    if !line.is_empty() {
        each(&line);
    }
}

/// Keeps a dialled link up: connects with `connect`, hands each link to `serve` (which returns when the link
/// is done with), and after a failed attempt or a dropped link waits `backoff`'s next delay before trying
/// again. A link that lasted at least `healthy_after` resets the backoff. Returns when `shutdown` is
/// cancelled.
pub async fn redial<C, CF, S, SF>(
    mut connect: C,
    mut serve: S,
    mut backoff: Backoff,
    healthy_after: Duration,
    shutdown: CancellationToken,
) where
    C: FnMut() -> CF,
    CF: Future<Output = Result<Connection, LinkError>>,
    S: FnMut(Connection) -> SF,
    SF: Future<Output = ()>,
{
    let mut last_failure: Option<String> = None;
    while !shutdown.is_cancelled() {
        let attempt = tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            attempt = connect() => attempt,
        };
        match attempt {
            Ok(conn) => {
                last_failure = None;
                let started = tokio::time::Instant::now();
                tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return,
                    () = serve(conn) => {}
                }
                if started.elapsed() >= healthy_after {
                    backoff.reset();
                }
            }
            Err(e) => {
                // A peer down for an hour is one line per distinct failure, not one per attempt.
                let text = e.to_string();
                if last_failure.as_deref() == Some(text.as_str()) {
                    tracing::debug!(error = %e, attempt = backoff.attempt(), "link attempt failed again")
                } else {
                    tracing::warn!(error = %e, attempt = backoff.attempt(), "link attempt failed; retrying forever with backoff");
                    last_failure = Some(text);
                }
            }
        }
        let delay = backoff.next_delay();
        tracing::debug!(
            delay_ms = delay.as_millis() as u64,
            "reconnecting after a delay"
        );
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
}

#[cfg(test)]
mod stderr_tests {
    use super::{MAX_STDERR_LINE, stderr_lines};
    use tokio::io::AsyncReadExt;

    /// 64 MiB without a newline are one line cut to its bound, and the lines after it still arrive whole.
    #[tokio::test]
    async fn a_child_writing_without_newlines_costs_one_lines_bound() {
        let flood = tokio::io::repeat(b'x').take(64 << 20);
        let rest: &[u8] = b"\nnext\nlast";
        let mut lines: Vec<Vec<u8>> = Vec::new();
        stderr_lines(flood.chain(rest), |l| lines.push(l.to_vec())).await;
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].len(), MAX_STDERR_LINE);
        assert!(lines[0].iter().all(|b| *b == b'x'));
        assert_eq!(lines[1], b"next");
        assert_eq!(lines[2], b"last");
    }
}
