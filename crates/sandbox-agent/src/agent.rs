//! The agent's loop: frames in, one task per request, replies out through one writer.

use crate::procs::{Procs, reaper};
use crate::protocol::{
    Body, ErrorKind, Hello, LANGUAGES, Limits, MAX_FRAME_BYTES, MAX_PROCESSES, Op, Reply, Request,
    VERSION,
};
use crate::{exec, files};
use bridge_link::{FrameReader, FrameWriter, Framing};
use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::{Mutex, mpsc};

/// Replies queued towards the host before request tasks wait (backpressure reaches the child's pipes).
const OUT_QUEUE: usize = 64;
/// How long the last replies may take to leave once the host's side of the stream has ended.
const FLUSH_AFTER_EOF: std::time::Duration = std::time::Duration::from_secs(2);

/// What the launcher (or the `process` backend) tells the agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentConfig {
    /// Default cwd and HOME; relative paths resolve against it.
    pub workspace: PathBuf,
    /// Where code files go; writable by the agent only.
    pub scratch: PathBuf,
    /// uid/gid user programs run as, when the agent may change it.
    #[serde(default)]
    pub user: Option<(u32, u32)>,
    #[serde(default)]
    pub limits: Limits,
    /// Said in `hello`: what isolation was really applied.
    #[serde(default)]
    pub enforced: BTreeMap<String, serde_json::Value>,
}

type StdinSlot = Arc<Mutex<Option<pipe::Sender>>>;

pub struct Agent {
    pub config: AgentConfig,
    pub procs: Arc<Procs>,
    stdins: std::sync::Mutex<HashMap<u64, StdinSlot>>,
}

/// The writer's queue.
#[derive(Clone)]
pub struct Out(mpsc::Sender<Reply>);

impl Out {
    pub async fn send(&self, id: u64, body: Body) {
        // The writer is gone only when the host is gone; nothing is left to tell.
        let _ = self.0.send(Reply { id, body }).await;
    }
}

impl Agent {
    pub fn new(config: AgentConfig) -> Arc<Self> {
        Arc::new(Self {
            config,
            procs: Arc::new(Procs::default()),
            stdins: std::sync::Mutex::new(HashMap::new()),
        })
    }

    pub fn resolve(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.config.workspace.join(p)
        }
    }

    pub fn stdin_slot(&self, id: u64) -> StdinSlot {
        let mut map = self.stdins.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(map.entry(id).or_default())
    }

    pub async fn drop_stdin(&self, id: u64) {
        let slot = self
            .stdins
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        if let Some(slot) = slot {
            slot.lock().await.take();
        }
    }

    fn hello(&self) -> Hello {
        let languages = LANGUAGES
            .iter()
            .filter(|(_, bin)| on_path(bin))
            .map(|(name, _)| (*name).to_string())
            .collect();
        Hello {
            version: VERSION,
            pid: std::process::id(),
            languages,
            enforced: self.config.enforced.clone(),
        }
    }
}

fn on_path(bin: &str) -> bool {
    ["/usr/local/bin", "/usr/bin", "/bin"]
        .iter()
        .any(|d| Path::new(d).join(bin).exists())
}

/// Serves requests from `read` until it ends, then kills every process it started.
pub async fn serve<R, W>(agent: Arc<Agent>, read: R, write: W)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let reaper = tokio::spawn(reaper(Arc::clone(&agent.procs)));
    let (tx, mut rx) = mpsc::channel::<Reply>(OUT_QUEUE);
    let writer = tokio::spawn(async move {
        let mut frames = FrameWriter::new(write, Framing::LengthPrefixed, MAX_FRAME_BYTES);
        while let Some(reply) = rx.recv().await {
            let text = match serde_json::to_string(&reply) {
                Ok(t) => t,
                Err(e) => format!(
                    r#"{{"id":{},"type":"error","kind":"io","message":"reply not serialisable: {e}"}}"#,
                    reply.id
                ),
            };
            if frames.send(text).await.is_err() {
                return;
            }
        }
        let _ = frames.close().await;
    });
    let out = Out(tx);
    let mut frames = FrameReader::new(read, Framing::LengthPrefixed, MAX_FRAME_BYTES);
    while let Some(frame) = frames.next().await {
        let text = match frame {
            Ok(t) => t,
            Err(e) => {
                // After a framing error the stream cannot be resynchronised: say why and stop.
                out.send(
                    0,
                    Body::error(ErrorKind::Invalid, format!("bad frame: {e}")),
                )
                .await;
                break;
            }
        };
        match serde_json::from_str::<Request>(&text) {
            Ok(req) => {
                tokio::spawn(handle(Arc::clone(&agent), req, out.clone()));
            }
            Err(e) => {
                let id = serde_json::from_str::<serde_json::Value>(&text)
                    .ok()
                    .and_then(|v| v.get("id").and_then(serde_json::Value::as_u64))
                    .unwrap_or(0);
                out.send(
                    id,
                    Body::error(ErrorKind::Invalid, format!("bad request: {e}")),
                )
                .await;
            }
        }
    }
    for p in agent.procs.all() {
        p.signal(Signal::SIGKILL);
    }
    reaper.abort();
    drop(out);
    // The host is gone: replies still queued may be flushed, but a write that blocks because nobody reads
    // (a virtio port with no host) must not keep PID 1 from powering the guest off.
    let _ = tokio::time::timeout(FLUSH_AFTER_EOF, writer).await;
}

async fn handle(agent: Arc<Agent>, req: Request, out: Out) {
    let id = req.id;
    let body = match req.op {
        Op::Hello => Body::Hello(agent.hello()),
        Op::Exec(spec) => return exec::run(agent, id, *spec, out).await,
        Op::Stdin { target, data, eof } => stdin(&agent, target, data, eof).await,
        Op::Signal { target, signal } => {
            match (agent.procs.get(target), Signal::try_from(signal)) {
                (_, Err(_)) => Body::error(
                    ErrorKind::Invalid,
                    format!("signal {signal} is not a signal"),
                ),
                (None, _) => not_running(target),
                (Some(p), Ok(sig)) => {
                    p.signal(sig);
                    Body::Ok { written: 0 }
                }
            }
        }
        Op::Status { target, state_only } => match agent.procs.get(target) {
            Some(p) => Body::Status(p.report(state_only)),
            None => not_running(target),
        },
        Op::Forget { target } => {
            if agent.procs.forget(target) {
                Body::Ok { written: 0 }
            } else {
                Body::error(
                    ErrorKind::Invalid,
                    format!("process {target} is unknown or still running"),
                )
            }
        }
        Op::Read {
            path,
            offset,
            length,
        } => files::read(agent.resolve(&path), offset, length).await,
        Op::Write {
            path,
            data,
            offset,
            append,
            mode,
        } => {
            files::write(
                agent.resolve(&path),
                data,
                offset,
                append,
                mode,
                agent.config.user,
                agent.config.limits.file_size,
            )
            .await
        }
        Op::List { path, depth } => files::list(agent.resolve(&path), depth).await,
    };
    out.send(id, body).await;
}

fn not_running(target: u64) -> Body {
    Body::error(
        ErrorKind::NotFound,
        format!(
            "no process {target}: never started, or ended and dropped to make room (an ended background process \
             is kept until {MAX_PROCESSES} are tracked)"
        ),
    )
}

async fn stdin(agent: &Agent, target: u64, data: Vec<u8>, eof: bool) -> Body {
    if agent.procs.get(target).is_none() {
        return not_running(target);
    }
    let slot = agent.stdin_slot(target);
    let mut guard = slot.lock().await;
    let Some(pipe) = guard.as_mut() else {
        return Body::error(
            ErrorKind::Invalid,
            format!("stdin of process {target} is closed"),
        );
    };
    if let Err(e) = pipe.write_all(&data).await {
        return Body::error(ErrorKind::Io, format!("writing stdin failed: {e}"));
    }
    if eof {
        guard.take();
    }
    Body::Ok {
        written: data.len() as u64,
    }
}
