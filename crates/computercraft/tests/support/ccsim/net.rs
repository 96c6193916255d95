//! `http.websocketAsync` and `http.get` on real connections (docs/protocols/computercraft.md §5), driven by tokio tasks that
//! queue CC's events: `websocket_success(url, handle)`, `websocket_failure(url, err)`,
//! `websocket_message(url, contents, isBinary)`, `websocket_closed(url, reason, code)` (reason and code nil on
//! an abnormal close), `http_success(url, handle)` / `http_failure(url, err)`.
//!
//! Copied limits: at most 4 websockets per computer ("Too many websockets already open"); only ws/wss
//! ("Invalid scheme"); `send` of more than 128 KiB raises "Message is too large"; a frame over 128 KiB from
//! the server closes the link with `websocket_closed(url, "Message is too large", nil)`; text frames are sent
//! as the UTF-8 decoding of the Lua bytes (invalid sequences replaced); each message is one frame; no
//! `Origin` header; `User-Agent: computercraft/<version>`; a closed handle raises "attempt to use a closed
//! file". Pings from the server are answered by the socket task itself (tungstenite pongs while the stream
//! is read), whatever the Lua side does, as Netty does in CC: a client that stopped reading still looks alive.

use super::{Ev, SimHandle};
use futures::{SinkExt, StreamExt};
use mlua::{Lua, MultiValue, Result as LuaResult, Table, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};

/// `AddressRule.WEBSOCKET_MESSAGE`.
pub const FRAME_LIMIT: usize = 128 * 1024;
/// `httpMaxWebsockets`.
pub const MAX_WEBSOCKETS: usize = 4;

#[derive(Debug)]
enum Cmd {
    Text(String),
    Binary(Vec<u8>),
    Close,
}

#[derive(Debug, Clone)]
pub struct SocketCmd {
    tx: mpsc::UnboundedSender<Cmd>,
}

impl SocketCmd {
    pub fn close(&self) {
        let _ = self.tx.send(Cmd::Close);
    }
}

fn err(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(msg.into())
}

pub fn install(lua: &Lua, sim: &Table, h: &SimHandle, generation: u64) -> LuaResult<()> {
    let hh = h.clone();
    sim.set(
        "websocket",
        lua.create_function(move |lua, (url, headers): (String, Option<Table>)| {
            let fail = |msg: &str| -> LuaResult<MultiValue> {
                Ok(MultiValue::from_iter([
                    Value::Boolean(false),
                    Value::String(lua.create_string(msg)?),
                ]))
            };
            let url = if url.contains("://") {
                url
            } else {
                format!("ws://{url}")
            };
            if !(url.starts_with("ws://") || url.starts_with("wss://")) {
                let scheme = url.split("://").next().unwrap_or("");
                return fail(&format!("Invalid scheme '{scheme}'"));
            }
            let mut pairs = Vec::new();
            if let Some(t) = headers {
                for (k, v) in t.pairs::<String, String>().flatten() {
                    pairs.push((k, v));
                }
            }
            let (tx, rx) = mpsc::unbounded_channel();
            {
                let mut s = hh.state();
                if s.sockets.len() >= MAX_WEBSOCKETS {
                    return fail("Too many websockets already open");
                }
                s.sockets.insert(url.clone(), SocketCmd { tx });
            }
            tokio::spawn(run_socket(hh.clone(), url, pairs, generation, rx));
            Ok(MultiValue::from_iter([Value::Boolean(true)]))
        })?,
    )?;
    let hh = h.clone();
    sim.set(
        "ws_send",
        lua.create_function(
            move |_, (url, msg, binary): (String, mlua::LuaString, Option<bool>)| {
                let s = hh.state();
                let sock = s
                    .sockets
                    .get(&url)
                    .ok_or_else(|| err("attempt to use a closed file"))?;
                let bytes = msg.as_bytes().to_vec();
                if bytes.len() > FRAME_LIMIT {
                    return Err(err("Message is too large"));
                }
                let cmd = if binary.unwrap_or(false) {
                    Cmd::Binary(bytes)
                } else {
                    Cmd::Text(String::from_utf8_lossy(&bytes).into_owned())
                };
                sock.tx
                    .send(cmd)
                    .map_err(|_| err("attempt to use a closed file"))
            },
        )?,
    )?;
    let hh = h.clone();
    sim.set(
        "ws_close",
        lua.create_function(move |_, url: String| {
            if let Some(sock) = hh.state().sockets.remove(&url) {
                sock.close();
            }
            Ok(())
        })?,
    )?;
    let hh = h.clone();
    sim.set(
        "http_get",
        lua.create_function(move |_, (url, _headers): (String, Option<Table>)| {
            tokio::spawn(run_get(hh.clone(), url, generation));
            Ok(true)
        })?,
    )?;
    Ok(())
}

/// Queues an event unless the computer rebooted since the socket was opened.
fn push(h: &SimHandle, generation: u64, ev: Vec<Ev>) {
    let mut s = h.state();
    if let (Some(Ev::Str(name)), Some(Ev::Str(body))) = (ev.first(), ev.get(2))
        && name == b"websocket_message"
    {
        s.max_frame_in = s.max_frame_in.max(body.len());
    }
    if s.generation == generation {
        s.push(ev);
        drop(s);
        h.wake.notify_one();
    }
}

fn forget(h: &SimHandle, generation: u64, url: &str) {
    let mut s = h.state();
    if s.generation == generation {
        s.sockets.remove(url);
    }
}

async fn run_socket(
    h: SimHandle,
    url: String,
    headers: Vec<(String, String)>,
    generation: u64,
    mut rx: mpsc::UnboundedReceiver<Cmd>,
) {
    let u = || Ev::Str(url.as_bytes().to_vec());
    let mut req = match url.as_str().into_client_request() {
        Ok(r) => r,
        Err(_) => {
            forget(&h, generation, &url);
            return push(
                &h,
                generation,
                vec!["websocket_failure".into(), u(), "URL malformed".into()],
            );
        }
    };
    for (k, v) in headers {
        if let (Ok(name), Ok(value)) = (
            tungstenite::http::HeaderName::from_bytes(k.as_bytes()),
            tungstenite::http::HeaderValue::from_str(&v),
        ) {
            req.headers_mut().insert(name, value);
        }
    }
    req.headers_mut().insert(
        tungstenite::http::header::USER_AGENT,
        tungstenite::http::HeaderValue::from_static("computercraft/1.113.1"),
    );
    let cfg = WebSocketConfig::default()
        .max_message_size(Some(FRAME_LIMIT))
        .max_frame_size(Some(FRAME_LIMIT));
    let connected = tokio::time::timeout(
        Duration::from_secs(30),
        tokio_tungstenite::connect_async_with_config(req, Some(cfg), true),
    )
    .await;
    let ws = match connected {
        Ok(Ok((ws, _))) => ws,
        Ok(Err(e)) => {
            forget(&h, generation, &url);
            let msg = match e {
                tungstenite::Error::Http(resp) => {
                    format!("Invalid handshake response getStatus: {}", resp.status())
                }
                _ => "Could not connect".to_string(),
            };
            return push(
                &h,
                generation,
                vec!["websocket_failure".into(), u(), Ev::Str(msg.into_bytes())],
            );
        }
        Err(_) => {
            forget(&h, generation, &url);
            return push(
                &h,
                generation,
                vec!["websocket_failure".into(), u(), "Timed out".into()],
            );
        }
    };
    push(
        &h,
        generation,
        vec!["websocket_success".into(), u(), Ev::WsHandle(url.clone())],
    );
    let (mut sink, mut stream) = ws.split();
    loop {
        tokio::select! {
            cmd = rx.recv() => match cmd {
                Some(Cmd::Text(t)) => { let _ = sink.send(Message::text(t)).await; }
                Some(Cmd::Binary(b)) => { let _ = sink.send(Message::binary(b)).await; }
                Some(Cmd::Close) | None => {
                    let _ = sink.send(Message::Close(None)).await;
                    return;
                }
            },
            msg = stream.next() => match msg {
                Some(Ok(Message::Text(t))) => push(&h, generation, vec![
                    "websocket_message".into(), u(), Ev::Str(t.as_bytes().to_vec()), Ev::Bool(false),
                ]),
                Some(Ok(Message::Binary(b))) => push(&h, generation, vec![
                    "websocket_message".into(), u(), Ev::Str(b.to_vec()), Ev::Bool(true),
                ]),
                Some(Ok(Message::Close(frame))) => {
                    forget(&h, generation, &url);
                    let (reason, code) = match frame {
                        Some(f) => (Ev::Str(f.reason.as_bytes().to_vec()), Ev::Num(f64::from(u16::from(f.code)))),
                        None => (Ev::Nil, Ev::Nil),
                    };
                    return push(&h, generation, vec!["websocket_closed".into(), u(), reason, code]);
                }
                Some(Ok(_)) => {}
                Some(Err(tungstenite::Error::Capacity(_))) => {
                    forget(&h, generation, &url);
                    return push(&h, generation, vec![
                        "websocket_closed".into(), u(), "Message is too large".into(), Ev::Nil,
                    ]);
                }
                Some(Err(_)) | None => {
                    forget(&h, generation, &url);
                    return push(&h, generation, vec!["websocket_closed".into(), u(), Ev::Nil, Ev::Nil]);
                }
            },
        }
    }
}

async fn run_get(h: SimHandle, url: String, generation: u64) {
    let u = Ev::Str(url.as_bytes().to_vec());
    match fetch(&url).await {
        Ok((code, body)) if (200..300).contains(&code) => {
            push(
                &h,
                generation,
                vec!["http_success".into(), u, Ev::Http { code, body }],
            );
        }
        Ok((code, body)) => {
            let msg = format!("HTTP {code}");
            push(
                &h,
                generation,
                vec![
                    "http_failure".into(),
                    u,
                    Ev::Str(msg.into_bytes()),
                    Ev::Http { code, body },
                ],
            );
        }
        Err(e) => push(
            &h,
            generation,
            vec!["http_failure".into(), u, Ev::Str(e.into_bytes())],
        ),
    }
}

/// A plain HTTP/1.0 GET (no chunked encoding to undo), enough for fetching the installer.
async fn fetch(url: &str) -> Result<(u16, Vec<u8>), String> {
    let rest = url.strip_prefix("http://").ok_or("Invalid scheme")?;
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let mut tcp = tokio::net::TcpStream::connect(hostport)
        .await
        .map_err(|_| "Could not connect".to_string())?;
    let req = format!(
        "GET {path} HTTP/1.0\r\nHost: {hostport}\r\nUser-Agent: computercraft/1.113.1\r\n\r\n"
    );
    tcp.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).await.map_err(|e| e.to_string())?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("malformed response")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or("malformed status")?;
    Ok((code, raw[split + 4..].to_vec()))
}

/// An HTTP response handle: `readAll`, `readLine`, `read`, `getResponseCode`, `close`.
pub fn http_handle(lua: &Lua, code: u16, body: Vec<u8>) -> LuaResult<Value> {
    let t = lua.create_table()?;
    let state = Arc::new(Mutex::new((body, 0usize)));
    let s = state.clone();
    t.set(
        "readAll",
        lua.create_function(move |lua, ()| {
            let mut g = s.lock().map_err(|_| err("poisoned"))?;
            let rest = g.0[g.1..].to_vec();
            g.1 = g.0.len();
            lua.create_string(rest)
        })?,
    )?;
    let s = state.clone();
    t.set(
        "readLine",
        lua.create_function(move |lua, ()| {
            let mut g = s.lock().map_err(|_| err("poisoned"))?;
            if g.1 >= g.0.len() {
                return Ok(Value::Nil);
            }
            let rest = g.0[g.1..].to_vec();
            let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            g.1 += (end + 1).min(rest.len());
            Ok(Value::String(lua.create_string(&rest[..end])?))
        })?,
    )?;
    let s = state;
    t.set(
        "read",
        lua.create_function(move |lua, n: Option<usize>| {
            let mut g = s.lock().map_err(|_| err("poisoned"))?;
            if g.1 >= g.0.len() {
                return Ok(Value::Nil);
            }
            let end = (g.1 + n.unwrap_or(1)).min(g.0.len());
            let out = g.0[g.1..end].to_vec();
            g.1 = end;
            Ok(Value::String(lua.create_string(out)?))
        })?,
    )?;
    t.set(
        "getResponseCode",
        lua.create_function(move |_, ()| Ok(code))?,
    )?;
    t.set("close", lua.create_function(|_, ()| Ok(()))?)?;
    Ok(Value::Table(t))
}
