//! Persistent code sessions: run_code keeps a Python kernel per (sandbox, session name) whose globals live
//! between calls, like a notebook's; interrupt_session, restart_session and close_session act on it. Rich
//! results: matplotlib figures come back as PNG image content, files written under the output folder as
//! resource links (`sandbox://<id>/<path>`, served by [`SandboxFiles`]), a DataFrame or a list of dicts as a
//! text table.
//!
//! The kernel (`assets/kernel.py`) is a background process of the sandbox, started through the agent's
//! ordinary exec like start_process; nothing in the agent knows about it. Each cell is an ordinary streaming
//! exec of the same file in its relay role, which hands the kernel its own stdout and stderr: everything the
//! cell prints, subprocesses included, is streamed as progress and bounded (head and tail) exactly as
//! execute_code's output is, with the same timeout, cancel and kill. The cell's value, error, figures and
//! files come back in a JSON file of the session directory, read with the agent's `read`.
//!
//! Figures are made small enough in the kernel, by matplotlib itself: rendered at a dpi that keeps the longer
//! side within [`MAX_SIDE_PX`] and lowered until the PNG fits [`MAX_IMAGE_BYTES`]. Re-rendering stays sharp
//! where resampling a bitmap blurs text, needs no imaging library in the sandbox (PIL is not there) and no
//! image codec crate in the bridge; a figure that still does not fit is left out with a note naming the limit.

use super::exec::{ExecOpts, ExecResult};
use crate::client::AgentClient;
use crate::manager::{Manager, Sandbox};
use bridge_core::resource::{ResourceBody, ResourceInfo, ResourceProvider, ResourceTemplateInfo};
use bridge_core::{
    BridgeBuilder, Content, ErrorCode, ToolCtx, ToolError, ToolSpec, Validate, WithContent, check,
};
use futures::future::BoxFuture;
use sandbox_agent::protocol::{Body, ExecSpec, MAX_CODE_BYTES, Op, Program, b64};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The kernel and its relay, written into the sandbox by the agent like any code: never argv.
const KERNEL: &str = include_str!("../../assets/kernel.py");
/// The session a call names none of.
pub const DEFAULT_SESSION: &str = "default";
/// One figure's PNG at most, as image content.
pub const MAX_IMAGE_BYTES: usize = 256 << 10;
/// All images of one result together: with the text's two copies ([`super::RESULT_BUDGET`]) and base64's
/// third more, a result stays under the 1 MiB SSE event the Python client accepts.
pub const MAX_IMAGES_BYTES: usize = 512 << 10;
/// The longer side of a figure, in pixels.
pub const MAX_SIDE_PX: u32 = 1600;
/// Figures returned per cell.
pub const MAX_FIGURES: usize = 4;
/// The value's repr, the table and the traceback are each kept to this (head and tail).
pub const MAX_TEXT_BYTES: usize = 32 << 10;
/// Files under the output folder listed per cell.
pub const MAX_FILES: usize = 20;
/// The most a `sandbox://` resource read returns (base64 makes a third more on the wire).
pub const MAX_RESOURCE_BYTES: usize = 512 << 10;
/// The output folder, inside the sandbox.
pub const OUTPUT_DIR: &str = "/workspace/output";
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The kernel's own stdout and stderr (anything it prints between cells) kept per stream.
const KERNEL_OUTPUT: usize = 16 << 10;

/// One sandbox's sessions by name; they end with the sandbox (the kernel is one of its processes).
#[derive(Default)]
pub struct Sessions {
    map: tokio::sync::Mutex<HashMap<String, Arc<Session>>>,
}

pub struct Session {
    /// The agent's handle of the kernel process (its exec request's id).
    process_id: u64,
    pid: i32,
    cells: AtomicU64,
    /// One cell at a time.
    running: tokio::sync::Mutex<()>,
}

// Fields beyond these are refused: a misspelt option must not be silently ignored.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCodeArgs {
    /// The sandbox's id, as create_sandbox returned it.
    pub sandbox_id: String,
    /// Python source (at most 1 MiB). Runs in the session's globals; a trailing expression's value is
    /// returned (a pandas DataFrame or a list of dicts as a text table), matplotlib figures as PNG images.
    pub code: String,
    /// python (the default; the only language with a session). For others use execute_code.
    #[serde(default)]
    pub language: Option<String>,
    /// The session's name (default "default"): letters, digits, '-' and '_', at most 32. Each name is a
    /// kernel of its own; at most SANDBOX_MAX_SESSIONS (4) per sandbox.
    #[serde(default)]
    pub session: Option<String>,
    /// Seconds before the cell is interrupted (KeyboardInterrupt; the session keeps its state). Default 60.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Restart the session (all its state gone) before running the code.
    #[serde(default)]
    pub restart: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionArgs {
    /// The sandbox's id, as create_sandbox returned it.
    pub sandbox_id: String,
    /// The session's name (default "default").
    #[serde(default)]
    pub session: Option<String>,
}

fn check_session(name: Option<&str>) -> Result<(), ToolError> {
    let Some(name) = name else { return Ok(()) };
    let ok = !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ToolError::invalid_argument(
            "session",
            format!("{name:?} is not a session name: 1 to 32 letters, digits, '-' or '_'"),
        ))
    }
}

impl Validate for RunCodeArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::max_bytes("code", &self.code, MAX_CODE_BYTES)?;
        if let Some(l) = &self.language
            && !matches!(l.to_ascii_lowercase().as_str(), "python" | "python3")
        {
            return Err(ToolError::invalid_argument(
                "language",
                format!("{l:?} has no session; only python does (execute_code runs the others)"),
            ));
        }
        check_session(self.session.as_deref())?;
        ExecOpts {
            timeout_secs: self.timeout_secs,
            ..ExecOpts::default()
        }
        .validate()
    }
}

impl Validate for SessionArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check_session(self.session.as_deref())
    }
}

/// What a cell raised.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CellError {
    /// The exception's class, e.g. ZeroDivisionError or KeyboardInterrupt.
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
    /// The traceback as Python prints it, from the cell's own frames.
    pub traceback: String,
}

/// A matplotlib figure, returned as image content.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Figure {
    /// The index of its image in the result's content.
    pub content_index: usize,
    pub width: u32,
    pub height: u32,
    /// The PNG's size.
    pub bytes: u64,
    /// The resolution it was rendered at (lowered to fit the limits).
    pub dpi: f64,
}

/// A file the cell wrote (or changed) under the output folder.
#[derive(Debug, Serialize, JsonSchema)]
pub struct OutputFile {
    /// Its path inside the sandbox (read_file reads it).
    pub path: String,
    pub bytes: u64,
    pub mime_type: String,
    /// The resource URI the result links to (resources/read reads it).
    pub uri: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CodeResult {
    /// The session the code ran in.
    pub session: String,
    /// ok, error (the cell raised), interrupted, timed_out (interrupted at its timeout), or kernel_died (the
    /// session's state is gone; the next run_code starts a new one).
    pub status: String,
    /// The cell's number in this session (from 1).
    pub cell: u64,
    /// True when this call started the session's kernel (a first call, a restart, or after the kernel died).
    pub new_session: bool,
    /// What the cell printed, its subprocesses' output included.
    pub stdout: String,
    pub stderr: String,
    /// The trailing expression's repr, when it has one and it is not a table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// The trailing expression as a text table (a pandas DataFrame or Series, a list of dicts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<CellError>,
    pub figures: Vec<Figure>,
    /// Files written under /workspace/output by the cell, linked as resources.
    pub files: Vec<OutputFile>,
    /// What was left out or cut, with the limit that did it.
    pub notes: Vec<String>,
    /// True when stdout or stderr was cut: the first and last halves of 1 MiB per stream are kept, and less
    /// when the result would pass 900 KiB (stdout_bytes and stderr_bytes are the whole sizes).
    pub truncated: bool,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub duration_ms: u64,
}

/// The kernel's JSON result file.
#[derive(Debug, Default, Deserialize)]
struct KernelResult {
    #[serde(default)]
    status: String,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    table: Option<String>,
    #[serde(default)]
    error: Option<CellError>,
    #[serde(default)]
    figures: Vec<KernelFigure>,
    #[serde(default)]
    files: Vec<KernelFile>,
    #[serde(default)]
    notes: Vec<String>,
}

/// The most notes of the kernel's a result keeps, each at most [`KERNEL_NOTE_BYTES`] bytes.
const KERNEL_NOTES: usize = 20;
const KERNEL_NOTE_BYTES: usize = 1_000;
/// The most figures of one cell the bridge reads (their bytes are bounded by [`MAX_IMAGES_BYTES`] besides).
const KERNEL_FIGURES: usize = 64;
/// The longest file path and MIME type a listed file may have.
const KERNEL_PATH_BYTES: usize = 4096;
const KERNEL_MIME_BYTES: usize = 255;

impl KernelResult {
    /// The result held to the kernel's own limits. The kernel writes it in the process the cell runs in, so a
    /// cell can write anything there (replace `json.dump`); the bridge does not pass on more than the kernel
    /// would have. What is left out is counted in `notes`, the bridge's own.
    fn held(mut self, notes: &mut Vec<String>) -> Self {
        self.status = match self.status.as_str() {
            "" => "ok".into(),
            "ok" | "error" | "interrupted" => self.status,
            _ => {
                notes.push("the kernel reported a status it never uses; shown as error".into());
                "error".into()
            }
        };
        let listed = self.files.len();
        self.files.retain(|f| {
            f.path.len() <= KERNEL_PATH_BYTES
                && f.path.starts_with(OUTPUT_DIR)
                && f.mime_type.len() <= KERNEL_MIME_BYTES
        });
        if self.files.len() < listed {
            notes.push(format!(
                "{} files the kernel listed are not under {OUTPUT_DIR} or have names too long; left out",
                listed - self.files.len()
            ));
        }
        if self.files.len() > MAX_FILES {
            notes.push(format!(
                "{} more files than the {MAX_FILES} listed were reported; left out",
                self.files.len() - MAX_FILES
            ));
            self.files.truncate(MAX_FILES);
        }
        self.figures.truncate(KERNEL_FIGURES);
        if self.notes.len() > KERNEL_NOTES {
            let more = self.notes.len() - KERNEL_NOTES;
            self.notes.truncate(KERNEL_NOTES);
            self.notes
                .push(format!("{more} more notes from the kernel left out"));
        }
        for note in &mut self.notes {
            if note.len() > KERNEL_NOTE_BYTES {
                *note = super::head_tail(note, KERNEL_NOTE_BYTES);
            }
        }
        self
    }
}

#[derive(Debug, Deserialize)]
struct KernelFigure {
    path: String,
    bytes: u64,
    width: u32,
    height: u32,
    dpi: f64,
}

#[derive(Debug, Deserialize)]
struct KernelFile {
    path: String,
    bytes: u64,
    mime_type: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SessionState {
    /// The session's name.
    pub session: String,
    /// What was done: interrupted, restarted or closed.
    pub action: String,
    /// The kernel's pid inside the sandbox (after a restart, the new one's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
}

fn session_dir(s: &Sandbox, name: &str) -> String {
    format!("/tmp/.mcp-kernel-{}/{name}", s.id)
}

impl Sessions {
    /// The session's kernel, started when it has none or its kernel has ended; the bool says it was started.
    async fn ensure(
        &self,
        m: &Manager,
        s: &Sandbox,
        name: &str,
        notes: &mut Vec<String>,
    ) -> Result<(Arc<Session>, bool), ToolError> {
        let mut map = self.map.lock().await;
        if let Some(existing) = map.get(name).cloned() {
            match kernel_exit(s, existing.process_id).await {
                None => return Ok((existing, false)),
                Some(how) => {
                    notes.push(format!(
                        "the session's kernel had ended ({how}); a new one was started and the old state is gone"
                    ));
                    map.remove(name);
                    forget(s, existing.process_id).await;
                }
            }
        }
        if map.len() >= m.settings.max_sessions {
            let mut names: Vec<&String> = map.keys().collect();
            names.sort();
            return Err(ToolError::busy(format!(
                "this sandbox already has {} code sessions, the limit (SANDBOX_MAX_SESSIONS)",
                map.len()
            ))
            .with_code_name("E_SESSION_LIMIT")
            .with_hint("close one with close_session, or run in one of the open sessions")
            .with_details(json!({"limit": m.settings.max_sessions, "sessions": names})));
        }
        let session = Arc::new(start_kernel(s, name).await?);
        map.insert(name.to_owned(), Arc::clone(&session));
        Ok((session, true))
    }

    async fn take(&self, name: &str) -> Option<Arc<Session>> {
        self.map.lock().await.remove(name)
    }

    async fn get(&self, name: &str) -> Option<Arc<Session>> {
        self.map.lock().await.get(name).cloned()
    }
}

async fn start_kernel(s: &Sandbox, name: &str) -> Result<Session, ToolError> {
    let dir = session_dir(s, name);
    let mut spec = ExecSpec::new(Program::Code {
        language: "python".into(),
        code: KERNEL.into(),
    });
    spec.env = BTreeMap::from([
        ("MCP_KERNEL_ROLE".into(), "serve".into()),
        ("MCP_KERNEL_DIR".into(), dir.clone()),
        ("MCP_KERNEL_OUTPUT".into(), OUTPUT_DIR.into()),
        ("MCP_KERNEL_MAX_IMAGE".into(), MAX_IMAGE_BYTES.to_string()),
        ("MCP_KERNEL_MAX_SIDE".into(), MAX_SIDE_PX.to_string()),
        ("MCP_KERNEL_MAX_FIGURES".into(), MAX_FIGURES.to_string()),
        ("MCP_KERNEL_MAX_TEXT".into(), MAX_TEXT_BYTES.to_string()),
        ("MCP_KERNEL_MAX_FILES".into(), MAX_FILES.to_string()),
        // Figures render off-screen, and matplotlib's caches stay out of the workspace.
        ("MPLBACKEND".into(), "Agg".into()),
        ("MPLCONFIGDIR".into(), format!("{dir}.mpl")),
        // Debian's matplotlib looks for its settings in /etc, which a sandbox's generated /etc lacks; the
        // same file is in /usr (a path that does not exist is skipped, as with pip's matplotlib).
        (
            "MATPLOTLIBRC".into(),
            "/usr/share/matplotlib/mpl-data/matplotlibrc".into(),
        ),
    ]);
    spec.background = true;
    spec.max_output = KERNEL_OUTPUT;
    let client = &s.instance.client;
    let (process_id, pending) = client.start(Op::Exec(Box::new(spec)), None).await?;
    match pending.wait(CALL_TIMEOUT).await? {
        Body::Started { pid } => Ok(Session {
            process_id,
            pid,
            cells: AtomicU64::new(0),
            running: tokio::sync::Mutex::new(()),
        }),
        other => Err(super::agent_error(other)),
    }
}

/// How the kernel ended, or `None` while it runs.
async fn kernel_exit(s: &Sandbox, process_id: u64) -> Option<String> {
    match s
        .instance
        .client
        .call(
            Op::Status {
                target: process_id,
                state_only: false,
            },
            CALL_TIMEOUT,
        )
        .await
    {
        Ok(Body::Status(r)) if r.running => None,
        Ok(Body::Status(r)) => {
            let how = match (r.exit_code, r.signal) {
                (_, Some(sig)) => format!("signal {sig}"),
                (Some(code), None) => format!("exit code {code}"),
                (None, None) => "unknown".into(),
            };
            let err = String::from_utf8_lossy(&r.stderr);
            let tail = super::head_tail(err.trim(), 2048);
            Some(if tail.is_empty() {
                how
            } else {
                format!("{how}; it said: {tail}")
            })
        }
        Ok(_) => Some("no longer known to the agent".into()),
        Err(e) => Some(format!("the agent did not answer: {e}")),
    }
}

async fn signal(s: &Sandbox, process_id: u64, sig: i32) -> Result<(), ToolError> {
    match s
        .instance
        .client
        .call(
            Op::Signal {
                target: process_id,
                signal: sig,
            },
            CALL_TIMEOUT,
        )
        .await?
    {
        Body::Ok { .. } => Ok(()),
        other => Err(super::agent_error(other)),
    }
}

/// Drops an ended kernel from the agent's table, which holds 64 processes at most; the reaper may take a
/// moment after a kill.
async fn forget(s: &Sandbox, process_id: u64) {
    let client = &s.instance.client;
    for _ in 0..100 {
        match client
            .call(Op::Forget { target: process_id }, CALL_TIMEOUT)
            .await
        {
            Ok(Body::Ok { .. }) | Err(_) => return,
            // Refused: still running (not reaped yet), or unknown.
            Ok(_) => match client
                .call(
                    Op::status(process_id, true, s.instance.hello.version),
                    CALL_TIMEOUT,
                )
                .await
            {
                Ok(Body::Status(r)) if r.running => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok(Body::Status(_)) => {}
                _ => return,
            },
        }
    }
}

async fn kill_kernel(s: &Sandbox, session: &Session) {
    let _ = signal(s, session.process_id, 9).await;
    forget(s, session.process_id).await;
}

/// A whole small file from the sandbox (at most `limit` bytes; more is an error naming the limit).
async fn read_small(client: &AgentClient, path: &str, limit: usize) -> Result<Vec<u8>, ToolError> {
    let op = Op::Read {
        path: path.to_owned(),
        offset: 0,
        length: limit as u64 + 1,
    };
    match client.call(op, CALL_TIMEOUT).await? {
        Body::Data { data, size, .. } => {
            // The size is the agent's word and the data what it sent: a compromised agent can fill its
            // 4 MiB frame whatever size it reports, so the bytes themselves are held to the limit.
            let sent = data.len();
            if size > limit as u64 || sent > limit {
                return Err(ToolError::too_large(format!(
                    "{path} is {} bytes; the limit is {limit} bytes",
                    size.max(sent as u64)
                )));
            }
            if sent as u64 > size {
                return Err(ToolError::remote(format!(
                    "the sandbox agent sent {sent} bytes of {path}, which it says is {size} bytes"
                )));
            }
            Ok(data)
        }
        other => Err(super::agent_error(other)),
    }
}

const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Runs one cell. The session's lock is held throughout, so cells of one session never overlap.
async fn run_code(
    m: Arc<Manager>,
    a: RunCodeArgs,
    ctx: ToolCtx,
) -> Result<WithContent<CodeResult>, ToolError> {
    let s = m.get(&a.sandbox_id)?;
    if !s.instance.hello.languages.iter().any(|l| l == "python") {
        return Err(ToolError::invalid_argument(
            "language",
            format!(
                "this sandbox has no python interpreter; it has: {}",
                s.instance.hello.languages.join(", ")
            ),
        ));
    }
    let name = a.session.clone().unwrap_or_else(|| DEFAULT_SESSION.into());
    let mut notes = Vec::new();
    if a.restart == Some(true)
        && let Some(old) = s.sessions.take(&name).await
    {
        kill_kernel(&s, &old).await;
    }
    let (session, new_session) = s.sessions.ensure(&m, &s, &name, &mut notes).await?;
    let Ok(_running) = session.running.try_lock() else {
        return Err(ToolError::busy(format!(
            "session {name:?} is running a cell; wait for it, or stop it with interrupt_session"
        )));
    };
    let cell = session.cells.fetch_add(1, Ordering::Relaxed) + 1;
    let dir = session_dir(&s, &name);
    let request = json!({"cell": cell, "code": a.code}).to_string();
    let opts = ExecOpts {
        timeout_secs: a.timeout_secs,
        env: Some(BTreeMap::from([
            ("MCP_KERNEL_ROLE".into(), "cell".into()),
            ("MCP_KERNEL_DIR".into(), dir.clone()),
        ])),
        cwd: None,
        stdin: Some(request),
    };
    // The relay needs only the standard library: without site (-S) and isolated (-I) it starts ~20% sooner,
    // and the file (12 KiB) fits an argument (128 KiB) with room to spare.
    let program = Program::Argv {
        argv: vec![
            "python3".into(),
            "-S".into(),
            "-I".into(),
            "-c".into(),
            KERNEL.into(),
        ],
    };
    let ran = super::exec::run(&m, &s, program, opts, &ctx).await;
    let relay: ExecResult = match ran {
        Ok(r) => r,
        Err(e) => {
            if e.code() == ErrorCode::Cancelled || e.code() == ErrorCode::Timeout {
                // The relay is gone; the cell may still run in the kernel.
                let _ = signal(&s, session.process_id, 2).await;
            }
            return Err(e);
        }
    };
    let mut out = CodeResult {
        session: name.clone(),
        status: "ok".into(),
        cell,
        new_session,
        stdout: relay.stdout,
        stderr: relay.stderr,
        value: None,
        table: None,
        error: None,
        figures: Vec::new(),
        files: Vec::new(),
        notes,
        truncated: relay.truncated,
        stdout_bytes: relay.stdout_bytes,
        stderr_bytes: relay.stderr_bytes,
        duration_ms: relay.duration_ms,
    };
    let mut content = Vec::new();
    if relay.timed_out {
        let _ = signal(&s, session.process_id, 2).await;
        out.status = "timed_out".into();
        out.notes.push(format!(
            "the cell passed its timeout and was interrupted (KeyboardInterrupt); the session keeps its state. \
             Give timeout_secs (at most {} s) for longer cells",
            m.settings.max_timeout.as_secs()
        ));
        return Ok(render(out, content));
    }
    if relay.exit_code != 0 {
        if let Some(how) = kernel_exit(&s, session.process_id).await {
            if let Some(gone) = s.sessions.take(&name).await {
                forget(&s, gone.process_id).await;
            }
            out.status = "kernel_died".into();
            out.notes.push(format!(
                "the session's kernel ended ({how}); its state is gone and the next run_code starts a new one"
            ));
            return Ok(render(out, content));
        }
        // Fenced: the cell's words, set apart from the hint that follows.
        return Err(ToolError::remote(format!(
            "the cell's relay ended with exit code {} and the kernel still runs; its stderr:\n{}",
            relay.exit_code,
            bridge_core::text::fenced("stderr", &super::head_tail(out.stderr.trim(), 2048))
        ))
        .with_hint("call interrupt_session or restart_session"));
    }
    let raw = read_small(&s.instance.client, &format!("{dir}/r-{cell}.json"), 1 << 20).await?;
    let k: KernelResult = serde_json::from_slice(&raw)
        .map_err(|e| ToolError::internal(format!("the kernel's result is not JSON: {e}")))?;
    let k = k.held(&mut out.notes);
    out.status = k.status;
    out.value = k.value;
    out.table = k.table;
    out.error = k.error;
    out.notes.extend(k.notes);
    let mut image_bytes = 0usize;
    for f in k.figures {
        // Saturating: the listed size is the cell's word, and may be u64::MAX.
        if image_bytes.saturating_add(usize::try_from(f.bytes).unwrap_or(usize::MAX))
            > MAX_IMAGES_BYTES
        {
            out.notes.push(format!(
                "a {}x{} figure was left out: images of one result are limited to {MAX_IMAGES_BYTES} bytes",
                f.width, f.height
            ));
            continue;
        }
        // No more than the budget has left: a forged size cannot make the host read 64 full figures.
        let room = MAX_IMAGE_BYTES.min(MAX_IMAGES_BYTES - image_bytes);
        match read_small(&s.instance.client, &f.path, room).await {
            // The size the kernel listed is the cell's word (a cell can forge the result): the budget is
            // held by the bytes read, which stop at what it has left.
            Err(e) if e.code() == ErrorCode::TooLarge && room < MAX_IMAGE_BYTES => {
                out.notes.push(format!(
                    "a {}x{} figure was left out: images of one result are limited to {MAX_IMAGES_BYTES} bytes",
                    f.width, f.height
                ));
            }
            Ok(png) if png.starts_with(PNG_MAGIC) => {
                image_bytes += png.len();
                // The text block comes first in the content, so images start at index 1.
                out.figures.push(Figure {
                    content_index: 1 + content.len(),
                    width: f.width,
                    height: f.height,
                    bytes: png.len() as u64,
                    dpi: f.dpi,
                });
                content.push(Content::Image {
                    base64: b64::encode(&png),
                    mime_type: "image/png".into(),
                });
            }
            Ok(_) => out.notes.push(format!("{} is not a PNG; left out", f.path)),
            Err(e) => out
                .notes
                .push(format!("figure {} could not be read: {e}", f.path)),
        }
    }
    for f in k.files {
        let uri = resource_uri(&s, &f.path);
        content.push(Content::ResourceLink {
            uri: uri.clone(),
            name: f.path.rsplit('/').next().unwrap_or(&f.path).to_owned(),
            mime_type: Some(f.mime_type.clone()),
            description: Some(format!("written by cell {cell} of session {name}")),
            size: Some(f.bytes),
        });
        out.files.push(OutputFile {
            path: f.path,
            bytes: f.bytes,
            mime_type: f.mime_type,
            uri,
        });
    }
    Ok(render(out, content))
}

fn render(mut out: CodeResult, content: Vec<Content>) -> WithContent<CodeResult> {
    if super::fit_output(&mut out, |r| (&mut r.stdout, &mut r.stderr)) {
        out.truncated = true;
    }
    if out.truncated {
        out.notes.push(format!(
            "output was cut: the cell wrote {} bytes to stdout and {} to stderr; a result keeps the first and \
             last halves of {} per stream, less to stay under 900 KiB. For all of it, write it to a file and \
             page it with read_file",
            out.stdout_bytes,
            out.stderr_bytes,
            "1 MiB"
        ));
    }
    let text = serde_json::to_string_pretty(&out).unwrap_or_default();
    WithContent {
        value: out,
        text,
        content,
    }
}

fn resource_uri(s: &Sandbox, path: &str) -> String {
    format!("sandbox://{}/{}", s.id, path.trim_start_matches('/'))
}

fn name_of(a: &SessionArgs) -> String {
    a.session.clone().unwrap_or_else(|| DEFAULT_SESSION.into())
}

fn no_session(name: &str) -> ToolError {
    ToolError::not_found(format!("this sandbox has no code session {name:?}"))
        .with_hint("run_code starts one")
}

pub fn register(b: &mut BridgeBuilder, mgr: &Arc<Manager>) {
    let deadline = mgr.settings.max_timeout + Duration::from_secs(30);
    b.tool(
        ToolSpec::new(
            "run_code",
            "Run Python in a persistent session of a sandbox, like a notebook cell: variables, imports and \
             functions stay for the next call. A trailing expression's value is returned (a pandas DataFrame \
             or a list of dicts as a text table); matplotlib figures come back as PNG images (at most 4, each \
             under 256 KiB, re-rendered smaller when large); files the cell writes under /workspace/output as \
             resource links (readable with read_file or resources/read). Output streams as progress. A cell \
             that passes its timeout is interrupted and the session keeps its state; see interrupt_session, \
             restart_session, close_session.",
        )
        .title("Run Code in a Session")
        .open_world()
        .timeout(deadline)
        .task_support(bridge_core::tool::TaskSupport::Optional)
        .handler_with_content_on(Arc::clone(mgr), run_code),
    );
    b.tool(
        ToolSpec::new(
            "interrupt_session",
            "Interrupt the cell a code session is running (KeyboardInterrupt, as Ctrl-C in a notebook): the \
             cell ends with status interrupted and the session keeps its state. Does nothing between cells.",
        )
        .title("Interrupt Code Session")
        .handler_on(Arc::clone(mgr), |m, a: SessionArgs, _: ToolCtx| async move {
            let s = m.get(&a.sandbox_id)?;
            let name = name_of(&a);
            let session = s.sessions.get(&name).await.ok_or_else(|| no_session(&name))?;
            signal(&s, session.process_id, 2).await?;
            Ok(SessionState {
                session: name,
                action: "interrupted".into(),
                pid: Some(session.pid),
            })
        }),
    );
    b.tool(
        ToolSpec::new(
            "restart_session",
            "Restart a code session: its kernel is killed (a running cell with it) and a new one started; \
             every variable and import is gone.",
        )
        .title("Restart Code Session")
        .destructive()
        .handler_on(Arc::clone(mgr), |m, a: SessionArgs, _: ToolCtx| async move {
            let s = m.get(&a.sandbox_id)?;
            let name = name_of(&a);
            let old = s.sessions.take(&name).await.ok_or_else(|| no_session(&name))?;
            kill_kernel(&s, &old).await;
            let (session, _) = s.sessions.ensure(&m, &s, &name, &mut Vec::new()).await?;
            Ok(SessionState {
                session: name,
                action: "restarted".into(),
                pid: Some(session.pid),
            })
        }),
    );
    b.tool(
        ToolSpec::new(
            "close_session",
            "Close a code session: its kernel is killed and its state gone, which frees its place among the \
             sandbox's sessions (at most SANDBOX_MAX_SESSIONS).",
        )
        .title("Close Code Session")
        .destructive()
        .handler_on(Arc::clone(mgr), |m, a: SessionArgs, _: ToolCtx| async move {
            let s = m.get(&a.sandbox_id)?;
            let name = name_of(&a);
            let old = s.sessions.take(&name).await.ok_or_else(|| no_session(&name))?;
            kill_kernel(&s, &old).await;
            Ok(SessionState {
                session: name,
                action: "closed".into(),
                pid: None,
            })
        }),
    );
    b.resources(Arc::new(SandboxFiles(Arc::clone(mgr))));
}

/// `sandbox://<sandbox id>/<path>`: a file of a live sandbox, as run_code's resource links name them.
pub struct SandboxFiles(Arc<Manager>);

impl ResourceProvider for SandboxFiles {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ResourceInfo>, ToolError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn templates(&self) -> Vec<ResourceTemplateInfo> {
        vec![ResourceTemplateInfo {
            uri_template: "sandbox://{sandbox_id}/{+path}".into(),
            name: "sandbox file".into(),
            description: Some(format!(
                "A file inside a live sandbox (at most {MAX_RESOURCE_BYTES} bytes; read_file pages larger ones)"
            )),
            mime_type: None,
        }]
    }

    fn read<'a>(&'a self, uri: &'a str) -> BoxFuture<'a, Result<Option<ResourceBody>, ToolError>> {
        Box::pin(async move {
            let Some(rest) = uri.strip_prefix("sandbox://") else {
                return Ok(None);
            };
            let (id, path) = rest.split_once('/').unwrap_or((rest, ""));
            // Not a sandbox's id (`sandbox://events/...` is the bridge's event streams): not ours.
            if uuid::Uuid::parse_str(id).is_err() {
                return Ok(None);
            }
            let s = self.0.get(id)?;
            let path = format!("/{path}");
            let data = read_small(&s.instance.client, &path, MAX_RESOURCE_BYTES).await?;
            let mime = mime_of(&path);
            Ok(Some(match String::from_utf8(data) {
                Ok(text) if !mime.starts_with("image/") => ResourceBody::Text {
                    mime_type: mime.into(),
                    text,
                },
                Ok(text) => ResourceBody::Blob {
                    mime_type: mime.into(),
                    bytes: text.into_bytes(),
                },
                Err(e) => ResourceBody::Blob {
                    mime_type: mime.into(),
                    bytes: e.into_bytes(),
                },
            }))
        })
    }
}

fn mime_of(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("svg") => "image/svg+xml",
        Some("csv") => "text/csv",
        Some("json") => "application/json",
        Some("html" | "htm") => "text/html",
        Some("txt" | "md" | "log" | "py") => "text/plain",
        _ => "application/octet-stream",
    }
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bridge_core::link::{Framing, StreamConfig, stream};
    use sandbox_agent::protocol::{MAX_FRAME_BYTES, Reply, Request};
    use tokio_util::sync::CancellationToken;

    /// A compromised agent on the other end of an in-memory link: every request is answered with `body`.
    pub(crate) fn forging_agent(body: Body) -> AgentClient {
        let cfg = || StreamConfig {
            framing: Framing::LengthPrefixed,
            max_frame_bytes: MAX_FRAME_BYTES,
        };
        let (host_io, agent_io) = tokio::io::duplex(64 << 10);
        let (hr, hw) = tokio::io::split(host_io);
        let (ar, aw) = tokio::io::split(agent_io);
        let token = CancellationToken::new();
        let host = stream::spawn(hr, hw, cfg(), &token);
        let mut agent = stream::spawn(ar, aw, cfg(), &token);
        tokio::spawn(async move {
            while let Some(frame) = agent.incoming.recv().await {
                let req: Request = serde_json::from_str(&frame).expect("a request");
                let reply = Reply {
                    id: req.id,
                    body: body.clone(),
                };
                let text = serde_json::to_string(&reply).expect("a reply");
                if agent.sender.send_text(text).await.is_err() {
                    return;
                }
            }
        });
        AgentClient::new(host)
    }

    /// A read's answer: `bytes` of data from a file said to be `size` bytes.
    pub(crate) fn data(bytes: usize, size: u64) -> Body {
        Body::Data {
            data: vec![b'x'; bytes],
            size,
            eof: true,
        }
    }

    /// The agent's frame holds up to 4 MiB (about 3 MiB of data after base64): one that says a file is
    /// 10 bytes and sends 2.5 MiB of it is refused by the bytes it sent, naming the file and the limit the
    /// caller asked for.
    #[tokio::test]
    async fn a_read_longer_than_its_limit_is_refused_whatever_size_the_agent_reports() {
        let agent = forging_agent(data(5 << 19, 10));
        let Err(e) = read_small(&agent, "/workspace/output/a.png", MAX_RESOURCE_BYTES).await else {
            panic!("2.5 MiB passed a 512 KiB limit");
        };
        assert_eq!(e.code(), ErrorCode::TooLarge, "{e:?}");
        assert!(
            e.message().contains("/workspace/output/a.png")
                && e.message().contains(&MAX_RESOURCE_BYTES.to_string()),
            "{}",
            e.message()
        );
    }

    /// Within the limit but more than the size the agent itself reported: the answer contradicts itself.
    #[tokio::test]
    async fn a_read_longer_than_the_size_reported_is_refused() {
        let agent = forging_agent(data(100, 10));
        let Err(e) = read_small(&agent, "/workspace/f.txt", MAX_RESOURCE_BYTES).await else {
            panic!("100 bytes of a 10-byte file passed");
        };
        assert!(
            e.message().contains("/workspace/f.txt") && e.message().contains("100"),
            "{}",
            e.message()
        );
    }

    #[tokio::test]
    async fn a_read_within_its_limit_comes_back_whole() {
        let agent = forging_agent(data(10, 10));
        let got = read_small(&agent, "/workspace/f.txt", 10)
            .await
            .expect("10 bytes of a 10-byte limit");
        assert_eq!(got, vec![b'x'; 10]);
    }
}
