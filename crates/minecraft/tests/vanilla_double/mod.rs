//! An RCON server written from the protocol (wiki.vg's RCON page, Minecraft's `RconClient` as
//! docs/protocols/minecraft-rcon-and-log.md describes it), with Minecraft's quirks: one packet per read into a
//! 1460-byte buffer (a read holding anything else closes the connection, and is counted), replies split into
//! 4096-character packets, `Unknown request <hex>` for other packet types, id -1 for a refused login.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the double does with a command.
pub enum Reply {
    Text(String),
    /// Close the connection without answering.
    Drop,
    /// Answer after a pause.
    Slow(String, Duration),
}

pub type Handler = Arc<dyn Fn(&str) -> Reply + Send + Sync>;

pub struct RconDouble {
    pub addr: std::net::SocketAddr,
    pub password: String,
    /// Reads that did not hold exactly one packet (Minecraft drops the connection on those).
    pub bad_reads: Arc<AtomicUsize>,
    pub connections: Arc<AtomicUsize>,
    pub commands: Arc<Mutex<Vec<String>>>,
    /// While set, new connections are closed at once (a server not up yet).
    pub refuse: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
    clients: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Drop for RconDouble {
    /// The server goes away with its connections, as a stopped server does.
    fn drop(&mut self) {
        self.task.abort();
        for c in self.clients.lock().unwrap().drain(..) {
            c.abort();
        }
    }
}

impl RconDouble {
    pub async fn start(password: &str, handler: Handler) -> RconDouble {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::on(listener, password, handler)
    }

    pub fn on(listener: TcpListener, password: &str, handler: Handler) -> RconDouble {
        let addr = listener.local_addr().unwrap();
        let bad_reads = Arc::new(AtomicUsize::new(0));
        let connections = Arc::new(AtomicUsize::new(0));
        let commands = Arc::new(Mutex::new(Vec::new()));
        let refuse = Arc::new(AtomicBool::new(false));
        let pw = password.to_owned();
        let (b, c, cmds, r) = (
            bad_reads.clone(),
            connections.clone(),
            commands.clone(),
            refuse.clone(),
        );
        let clients = Arc::new(Mutex::new(Vec::new()));
        let held = clients.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                if r.load(Ordering::SeqCst) {
                    drop(stream);
                    continue;
                }
                c.fetch_add(1, Ordering::SeqCst);
                let t = tokio::spawn(client(
                    stream,
                    pw.clone(),
                    handler.clone(),
                    b.clone(),
                    cmds.clone(),
                ));
                held.lock().unwrap().push(t.abort_handle());
            }
        });
        RconDouble {
            addr,
            password: password.to_owned(),
            bad_reads,
            connections,
            commands,
            refuse,
            task,
            clients,
        }
    }

    pub fn addr(&self) -> String {
        self.addr.to_string()
    }

    pub fn commands(&self) -> Vec<String> {
        self.commands.lock().unwrap().clone()
    }
}

async fn send(stream: &mut TcpStream, id: i32, kind: i32, body: &str) -> std::io::Result<()> {
    let len = 10 + body.len();
    let mut out = Vec::with_capacity(4 + len);
    out.extend_from_slice(&(len as i32).to_le_bytes());
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(body.as_bytes());
    out.extend_from_slice(&[0, 0]);
    stream.write_all(&out).await
}

/// Minecraft's `sendCmdResponse`: 4096 characters (UTF-16 units there; chars here) a packet.
async fn send_reply(stream: &mut TcpStream, id: i32, text: &str) -> std::io::Result<()> {
    let chars: Vec<char> = text.chars().collect();
    let mut start = 0;
    loop {
        let end = (start + 4096).min(chars.len());
        let part: String = chars[start..end].iter().collect();
        send(stream, id, 0, &part).await?;
        start = end;
        if start >= chars.len() {
            return Ok(());
        }
    }
}

async fn client(
    mut stream: TcpStream,
    password: String,
    handler: Handler,
    bad_reads: Arc<AtomicUsize>,
    commands: Arc<Mutex<Vec<String>>>,
) {
    let mut authed = false;
    let mut buf = vec![0u8; 1460];
    loop {
        let Ok(n) = stream.read(&mut buf).await else {
            return;
        };
        if n < 10 {
            return;
        }
        let len = i32::from_le_bytes(buf[0..4].try_into().unwrap());
        if len as usize != n - 4 {
            bad_reads.fetch_add(1, Ordering::SeqCst);
            return;
        }
        let id = i32::from_le_bytes(buf[4..8].try_into().unwrap());
        let kind = i32::from_le_bytes(buf[8..12].try_into().unwrap());
        let body = String::from_utf8_lossy(&buf[12..n - 2]).into_owned();
        let sent = match kind {
            3 => {
                if !body.is_empty() && body == password {
                    authed = true;
                    send(&mut stream, id, 2, "").await
                } else {
                    authed = false;
                    send(&mut stream, -1, 2, "").await
                }
            }
            2 if !authed => send(&mut stream, -1, 2, "").await,
            2 => {
                commands.lock().unwrap().push(body.clone());
                match handler(&body) {
                    Reply::Text(t) => send_reply(&mut stream, id, &t).await,
                    Reply::Slow(t, pause) => {
                        tokio::time::sleep(pause).await;
                        send_reply(&mut stream, id, &t).await
                    }
                    Reply::Drop => return,
                }
            }
            other => send_reply(&mut stream, id, &format!("Unknown request {other:x}")).await,
        };
        if sent.is_err() {
            return;
        }
    }
}

/// Vanilla 1.21's answers, in its own words (en_us.json), for a world with Steve online.
pub fn vanilla_answers(command: &str) -> Reply {
    // `execute in <dimension> run <command>` answers as the command does.
    let command = match command
        .strip_prefix("execute in ")
        .and_then(|r| r.split_once(" run "))
    {
        Some((_, inner)) => inner,
        None => command,
    };
    let steve = |rest: &str| -> Option<String> {
        let (name, path) = rest.split_once(' ')?;
        if name != "Steve" {
            return Some("No entity was found".into());
        }
        let v = match path {
            "Health" => "20.0f".to_owned(),
            "foodLevel" => "18".to_owned(),
            "Pos" => "[-3.5d, 64.0d, 12.25d]".to_owned(),
            "Dimension" => "\"minecraft:overworld\"".to_owned(),
            "playerGameType" => "0".to_owned(),
            "UUID" => "[I; 110787060, 1156138790, -1514210135, 238594805]".to_owned(),
            "Inventory" => big_inventory(),
            _ => return Some(format!("Found no elements matching {path}")),
        };
        Some(format!("Steve has the following entity data: {v}"))
    };
    let text = if let Some(rest) = command.strip_prefix("data get entity ") {
        steve(rest).unwrap()
    } else if command == "list" {
        "There are 2 of a max of 20 players online: Steve, Alex".into()
    } else if command == "time query daytime" {
        "The time is 6000".into()
    } else if command == "tick query" {
        "The game is running normallyTarget tick rate: 20.0 per second.\nAverage time per tick: 62.5ms (Target: 50.0ms)".into()
    } else if command.starts_with("execute if predicate") {
        if command.contains("raining") {
            "Test passed".into()
        } else {
            "Test failed".into()
        }
    } else if let Some(rest) = command.strip_prefix("tp ") {
        let mut w = rest.split(' ');
        match w.next() {
            Some("Steve") => {
                let (x, y, z) = (w.next().unwrap(), w.next().unwrap(), w.next().unwrap());
                let f = |s: &str| format!("{:.6}", s.parse::<f64>().unwrap());
                format!("Teleported Steve to {}, {}, {}", f(x), f(y), f(z))
            }
            _ => "No entity was found".into(),
        }
    } else if let Some(rest) = command.strip_prefix("give ") {
        let w: Vec<&str> = rest.split(' ').collect();
        if w[0] != "Steve" {
            "No player was found".into()
        } else if w[1] == "minecraft:diamond" {
            format!("Gave {} [Diamond] to Steve", w[2])
        } else {
            format!("Unknown item '{}'", w[1])
        }
    } else if command.starts_with("tellraw ") {
        if command.starts_with("tellraw @a ") || command.starts_with("tellraw Steve ") {
            String::new()
        } else {
            "No player was found".into()
        }
    } else if command.starts_with("say ") {
        String::new()
    } else if command == "seed" {
        "Seed: [-4172144997902289642]".into()
    } else {
        "Unknown or incomplete command, see below for error\nfoo<--[HERE]".into()
    };
    Reply::Text(text)
}

/// A full 36-slot inventory in 1.20.5+ SNBT, with components: well over 4096 characters, so it comes in
/// several packets.
pub fn big_inventory() -> String {
    let items: Vec<String> = (0..36)
        .map(|slot| {
            format!(
                "{{count: {}, Slot: {slot}b, components: {{\"minecraft:custom_name\": '{{\"text\":\"Chest {{{slot}}}, with [brackets] and a long name to pad it out well past the packet size\"}}', \"minecraft:container\": [{{slot: 0, item: {{count: 1, id: \"minecraft:stone\"}}}}]}}, id: \"minecraft:diamond\"}}",
                slot + 1
            )
        })
        .collect();
    format!("[{}]", items.join(", "))
}
