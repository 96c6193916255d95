//! A Source RCON client for Minecraft servers (docs/protocols/minecraft-rcon-and-log.md): one TCP connection,
//! one command at a time through a queue, multi-packet replies assembled, redialled with capped backoff.
//!
//! Two facts of Minecraft's server (`RconClient`) shape it. It sends a long reply as several packets of up to
//! 4096 characters under the request's id, with nothing marking the last one; so after the first packet of a
//! reply we send a marker packet of an unknown type, which the server answers ("Unknown request 0") only after
//! the whole reply, since it handles one request at a time. And it reads each request with a single `read` of
//! at most 1460 bytes and drops the connection when that read does not hold exactly one packet; so nothing is
//! pipelined: the marker goes out only once the command's first reply packet is in.

use bridge_core::link::Backoff;
use serde::Serialize;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Packet type of a login request.
pub const TYPE_AUTH: i32 = 3;
/// Packet type of a command, and of the answer to a login.
pub const TYPE_EXEC: i32 = 2;
/// The login answer's type (the same number as a command's).
pub const TYPE_AUTH_RESPONSE: i32 = 2;
/// Packet type of a command's reply.
pub const TYPE_RESPONSE: i32 = 0;
/// The id a server answers a refused login with.
pub const AUTH_FAILED_ID: i32 = -1;
/// Longest request payload: Minecraft reads a request into 1460 bytes, of which 4 length, 4 id, 4 type and
/// 2 NULs are framing.
pub const MAX_REQUEST_BYTES: usize = 1460 - 14;
/// Largest reply packet accepted (its length field): Minecraft sends at most 4096 UTF-16 units a packet, at
/// most 3 UTF-8 bytes each, plus 10 bytes of framing; a little room for other servers.
pub const MAX_PACKET_BYTES: usize = 16 << 10;
/// Largest whole reply assembled from its packets, unless the settings say otherwise.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 1 << 20;
/// Commands waiting for the connection, unless the settings say otherwise.
pub const DEFAULT_QUEUE: usize = 256;
/// How long a dial and login may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RconError {
    #[error("cannot reach the RCON port at {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error(
        "the server at {addr} refused the RCON password (it answered the login with id -1): check --minecraft-rcon-password (MINECRAFT_RCON_PASSWORD) against rcon.password in server.properties"
    )]
    Auth { addr: String },
    #[error(
        "the RCON connection to {addr} dropped during the command ({reason}); the command may or may not have run"
    )]
    Dropped { addr: String, reason: String },
    #[error(
        "not connected to RCON at {addr}: the last attempt failed ({last_error}); the next one is in {retry_in_ms} ms"
    )]
    Down {
        addr: String,
        last_error: String,
        retry_in_ms: u64,
    },
    #[error("the command is {bytes} bytes; Minecraft's RCON takes at most {limit} bytes a request")]
    RequestTooLarge { bytes: usize, limit: usize },
    #[error("the command contains a NUL byte, which RCON cannot carry")]
    Nul,
    #[error(
        "the reply passed the {limit}-byte response limit (--minecraft-rcon-max-response); the connection was reset"
    )]
    ResponseTooLarge { limit: usize },
    #[error("the server sent an RCON packet of {len} bytes, over the {limit}-byte packet limit")]
    PacketTooLarge { len: i64, limit: usize },
    #[error("the server sent a malformed RCON packet: {0}")]
    Malformed(String),
    #[error("no RCON reply within {ms} ms; the connection was reset")]
    Timeout { ms: u64 },
    #[error("{limit} RCON commands are already waiting (the queue's limit); try again shortly")]
    QueueFull { limit: usize },
    #[error("the RCON client stopped")]
    Stopped,
}

/// One packet: length (not counted in itself), id, type, payload, two NULs; integers little-endian.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    pub id: i32,
    pub kind: i32,
    pub body: Vec<u8>,
}

impl Packet {
    pub fn encode(&self) -> Vec<u8> {
        let len = 4 + 4 + self.body.len() + 2;
        let mut out = Vec::with_capacity(4 + len);
        out.extend_from_slice(&(len as i32).to_le_bytes());
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&self.kind.to_le_bytes());
        out.extend_from_slice(&self.body);
        out.extend_from_slice(&[0, 0]);
        out
    }

    /// Reads one packet, refusing a length over `max` before reading its body.
    pub async fn read<R: AsyncRead + Unpin>(
        r: &mut R,
        max: usize,
    ) -> std::io::Result<Result<Packet, RconError>> {
        let mut head = [0u8; 4];
        r.read_exact(&mut head).await?;
        let len = i32::from_le_bytes(head);
        if len < 10 || len as i64 > max as i64 {
            return Ok(if len < 10 {
                Err(RconError::Malformed(format!(
                    "length {len} is under the 10-byte minimum"
                )))
            } else {
                Err(RconError::PacketTooLarge {
                    len: len.into(),
                    limit: max,
                })
            });
        }
        let mut buf = vec![0u8; len as usize];
        r.read_exact(&mut buf).await?;
        let id = i32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let kind = i32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
        // The body ends at the first of the two NULs (some servers pad differently; the length is the truth).
        let mut body = buf[8..].to_vec();
        while body.last() == Some(&0) {
            body.pop();
        }
        Ok(Ok(Packet { id, kind, body }))
    }
}

/// How to reach the server.
#[derive(Clone)]
pub struct RconSettings {
    pub addr: String,
    pub password: String,
    /// How long one command may take, waiting in the queue included.
    pub timeout: Duration,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    pub max_response_bytes: usize,
    pub queue: usize,
}

impl std::fmt::Debug for RconSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RconSettings")
            .field("addr", &self.addr)
            .field("password", &"<redacted>")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl RconSettings {
    pub fn new(addr: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            addr: addr.into(),
            password: password.into(),
            timeout: Duration::from_secs(20),
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(30),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            queue: DEFAULT_QUEUE,
        }
    }
}

/// What `status` shows about RCON.
#[derive(Debug, Clone, Default, Serialize, schemars::JsonSchema)]
pub struct RconStatus {
    pub addr: String,
    pub connected: bool,
    /// Failed dials since the last good one.
    pub reconnect_attempts: u64,
    pub connections_total: u64,
    pub commands_total: u64,
    pub commands_failed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

struct Job {
    command: String,
    deadline: Instant,
    reply: oneshot::Sender<Result<String, RconError>>,
}

/// The client; cheap to clone. Commands from every clone go through one queue to one connection.
#[derive(Clone)]
pub struct Rcon {
    tx: mpsc::Sender<Job>,
    status: Arc<Mutex<RconStatus>>,
    settings: Arc<RconSettings>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Rcon {
    /// Starts the connection's task (it dials at once and keeps the connection up) until `stop`.
    pub fn start(settings: RconSettings, stop: CancellationToken) -> Rcon {
        let (tx, rx) = mpsc::channel(settings.queue.max(1));
        let status = Arc::new(Mutex::new(RconStatus {
            addr: settings.addr.clone(),
            ..RconStatus::default()
        }));
        let settings = Arc::new(settings);
        let worker = Worker {
            settings: settings.clone(),
            status: status.clone(),
            conn: None,
            backoff: Backoff::new(settings.backoff_base, settings.backoff_max).with_jitter(0.2),
            next_dial: Instant::now(),
            next_id: 0,
            last_failure: None,
        };
        tokio::spawn(worker.run(rx, stop));
        Rcon {
            tx,
            status,
            settings,
        }
    }

    pub fn status(&self) -> RconStatus {
        lock(&self.status).clone()
    }

    pub fn settings(&self) -> &RconSettings {
        &self.settings
    }

    /// Runs `command` (no leading `/`) and returns its whole reply.
    pub async fn exec(&self, command: &str) -> Result<String, RconError> {
        if command.len() > MAX_REQUEST_BYTES {
            return Err(RconError::RequestTooLarge {
                bytes: command.len(),
                limit: MAX_REQUEST_BYTES,
            });
        }
        if command.contains('\0') {
            return Err(RconError::Nul);
        }
        let (reply, rx) = oneshot::channel();
        let job = Job {
            command: command.to_owned(),
            deadline: Instant::now() + self.settings.timeout,
            reply,
        };
        self.tx.try_send(job).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => RconError::QueueFull {
                limit: self.settings.queue,
            },
            mpsc::error::TrySendError::Closed(_) => RconError::Stopped,
        })?;
        let out = rx.await.unwrap_or(Err(RconError::Stopped));
        let mut st = lock(&self.status);
        st.commands_total += 1;
        if out.is_err() {
            st.commands_failed += 1;
        }
        out
    }
}

struct Worker {
    settings: Arc<RconSettings>,
    status: Arc<Mutex<RconStatus>>,
    conn: Option<TcpStream>,
    backoff: Backoff,
    next_dial: Instant,
    next_id: i32,
    /// Why the last dial failed: a refused password is answered as such until a dial succeeds.
    last_failure: Option<RconError>,
}

impl Worker {
    async fn run(mut self, mut rx: mpsc::Receiver<Job>, stop: CancellationToken) {
        loop {
            if self.conn.is_none() && Instant::now() >= self.next_dial {
                let _ = self.dial().await;
            }
            let wake = self.next_dial;
            let down = self.conn.is_none();
            tokio::select! {
                _ = stop.cancelled() => break,
                job = rx.recv() => match job {
                    Some(job) => self.serve(job).await,
                    None => break,
                },
                _ = tokio::time::sleep_until(wake), if down => {}
            }
        }
    }

    fn id(&mut self) -> i32 {
        // Ids stay positive: -1 means a refused login.
        self.next_id = if self.next_id >= i32::MAX - 1 {
            1
        } else {
            self.next_id + 1
        };
        self.next_id
    }

    async fn dial(&mut self) -> Result<(), RconError> {
        let addr = self.settings.addr.clone();
        let out = tokio::time::timeout(DIAL_TIMEOUT, self.login())
            .await
            .unwrap_or_else(|_| {
                Err(RconError::Connect {
                    addr: addr.clone(),
                    reason: format!("no login answer within {} s", DIAL_TIMEOUT.as_secs()),
                })
            });
        let mut st = lock(&self.status);
        match out {
            Ok(stream) => {
                self.conn = Some(stream);
                self.last_failure = None;
                self.backoff.reset();
                st.connected = true;
                st.connections_total += 1;
                st.reconnect_attempts = 0;
                st.last_error = None;
                tracing::info!(%addr, "connected to RCON");
                Ok(())
            }
            Err(e) => {
                self.next_dial = Instant::now() + self.backoff.next_delay();
                st.connected = false;
                st.reconnect_attempts += 1;
                st.last_error = Some(e.to_string());
                tracing::warn!(%addr, error = %e, "RCON login failed; retrying with backoff");
                self.last_failure = Some(e.clone());
                Err(e)
            }
        }
    }

    async fn login(&mut self) -> Result<TcpStream, RconError> {
        let addr = self.settings.addr.clone();
        let connect = |e: std::io::Error| RconError::Connect {
            addr: addr.clone(),
            reason: e.to_string(),
        };
        let mut stream = TcpStream::connect(&addr).await.map_err(connect)?;
        let _ = stream.set_nodelay(true);
        let id = self.id();
        let login = Packet {
            id,
            kind: TYPE_AUTH,
            body: self.settings.password.as_bytes().to_vec(),
        };
        stream.write_all(&login.encode()).await.map_err(connect)?;
        loop {
            let p = Packet::read(&mut stream, MAX_PACKET_BYTES)
                .await
                .map_err(connect)??;
            // A Source server sends an empty RESPONSE_VALUE before the login's answer.
            if p.kind != TYPE_AUTH_RESPONSE {
                continue;
            }
            if p.id == AUTH_FAILED_ID {
                return Err(RconError::Auth { addr: addr.clone() });
            }
            if p.id == id {
                return Ok(stream);
            }
        }
    }

    fn drop_conn(&mut self, why: &str) {
        if self.conn.take().is_some() {
            let mut st = lock(&self.status);
            st.connected = false;
            st.last_error = Some(why.to_owned());
            tracing::warn!(addr = %self.settings.addr, why, "RCON connection closed; redialling");
        }
    }

    async fn serve(&mut self, job: Job) {
        let now = Instant::now();
        if now >= job.deadline {
            let _ = job.reply.send(Err(RconError::Timeout {
                ms: self.settings.timeout.as_millis() as u64,
            }));
            return;
        }
        // A server restarted between two commands left a closed socket: found before the command is sent,
        // so the command goes out on a fresh connection instead of failing.
        if let Some(conn) = &self.conn {
            let mut probe = [0u8; 1];
            match conn.try_read(&mut probe) {
                Ok(0) => self.drop_conn("the server closed the connection"),
                Ok(_) => self.drop_conn("the server sent data nobody asked for"),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => self.drop_conn(&e.to_string()),
            }
        }
        if self.conn.is_none() {
            if Instant::now() < self.next_dial {
                if let Some(e @ RconError::Auth { .. }) = &self.last_failure {
                    let _ = job.reply.send(Err(e.clone()));
                    return;
                }
                let st = lock(&self.status).clone();
                let _ = job.reply.send(Err(RconError::Down {
                    addr: self.settings.addr.clone(),
                    last_error: st.last_error.unwrap_or_else(|| "none".into()),
                    retry_in_ms: self
                        .next_dial
                        .saturating_duration_since(Instant::now())
                        .as_millis() as u64,
                }));
                return;
            }
            if let Err(e) = self.dial().await {
                let _ = job.reply.send(Err(e));
                return;
            }
        }
        let id = self.id();
        let marker = self.id();
        let max = self.settings.max_response_bytes;
        let addr = self.settings.addr.clone();
        let Some(conn) = self.conn.as_mut() else {
            let _ = job.reply.send(Err(RconError::Stopped));
            return;
        };
        let out = tokio::time::timeout_at(
            job.deadline,
            exchange(conn, id, marker, &job.command, max, quick_ack),
        )
        .await;
        let out = match out {
            Ok(Ok(Ok(text))) => Ok(text),
            Ok(Ok(Err(e))) => {
                self.drop_conn(&e.to_string());
                Err(e)
            }
            Ok(Err(io)) => {
                let reason = if io.kind() == std::io::ErrorKind::UnexpectedEof {
                    "the server closed the connection".to_owned()
                } else {
                    io.to_string()
                };
                self.drop_conn(&reason);
                Err(RconError::Dropped { addr, reason })
            }
            Err(_) => {
                // Its reply may still come: on this connection it would answer the next command.
                self.drop_conn("a command timed out");
                Err(RconError::Timeout {
                    ms: self.settings.timeout.as_millis() as u64,
                })
            }
        };
        let _ = job.reply.send(out);
    }
}

/// One command and its whole reply on `stream`.
pub async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    id: i32,
    marker: i32,
    command: &str,
    max_response: usize,
    before_read: fn(&S),
) -> std::io::Result<Result<String, RconError>> {
    let request = Packet {
        id,
        kind: TYPE_EXEC,
        body: command.as_bytes().to_vec(),
    };
    stream.write_all(&request.encode()).await?;
    let mut body = Vec::new();
    let mut marker_sent = false;
    loop {
        before_read(stream);
        let p = match Packet::read(stream, MAX_PACKET_BYTES).await? {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        if p.id == AUTH_FAILED_ID {
            return Ok(Err(RconError::Malformed(
                "the server answered a command as an unauthenticated one (id -1)".into(),
            )));
        }
        if p.id == marker {
            break;
        }
        if p.id != id {
            // A late answer to an earlier command, or the second half of a Source server's marker echo.
            continue;
        }
        if body.len() + p.body.len() > max_response {
            return Ok(Err(RconError::ResponseTooLarge {
                limit: max_response,
            }));
        }
        body.extend_from_slice(&p.body);
        if !marker_sent {
            // The server has read the command (it is answering it) and sends the rest of the reply before it
            // reads again, so the marker cannot share a read with the command.
            let probe = Packet {
                id: marker,
                kind: TYPE_RESPONSE,
                body: Vec::new(),
            };
            stream.write_all(&probe.encode()).await?;
            marker_sent = true;
        }
    }
    // Minecraft splits replies by UTF-16 units, not bytes, so only the whole is decoded.
    Ok(Ok(String::from_utf8_lossy(&body).into_owned()))
}

/// Acknowledge what arrives at once. Minecraft writes a long reply's packets with Nagle's algorithm on (a
/// Java socket's default), so it holds each packet after the first until the previous one is acknowledged;
/// with delayed acknowledgements on this side that is ~40 ms a packet (measured: a 12 000-character reply took
/// 44 ms against a double that writes like the server, 34 µs with this). Linux forgets the setting as it
/// goes, hence before every read.
fn quick_ack(stream: &TcpStream) {
    #[cfg(target_os = "linux")]
    {
        let _ = socket2::SockRef::from(stream).set_tcp_quickack(true);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = stream;
}
