//! execute_code and run_command: Bouvet's `{exit_code, stdout, stderr}` plus signal, timed_out, truncated
//! (head and tail kept), duration. Output streams as MCP progress while the program runs. Code and
//! commands travel in the agent's frame and are written to a file inside: never argv.

use super::agent_error;
use crate::manager::{Manager, Sandbox};
use bridge_core::link::LinkError;
use bridge_core::{BridgeBuilder, ToolCtx, ToolError, ToolSpec, Validate, check};
use sandbox_agent::protocol::{
    Body, ExecSpec, MAX_CODE_BYTES, Op, ProcReport, Program, StreamName,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// stdin given with a call travels in one frame.
pub const MAX_STDIN_BYTES: usize = 1 << 20;
/// Environment given with a call, names and values together.
pub const MAX_ENV_BYTES: usize = 64 << 10;
/// A progress message's bytes at most, after decoding (invalid UTF-8 triples in size) and with its label: under
/// the core's 4 000-character cap, so the message is never cut in the middle.
const PROGRESS_TEXT: usize = 4000;
/// Live output is reported at most once per this interval. Four updates a second still read as live to a
/// person watching, while a program printing in a tight loop (hundreds of 4 KiB chunks a second, one
/// notification each, held back only by how fast the client reads) costs the client at most 4 messages of
/// [`PROGRESS_TEXT`] a second. The whole output is in the result either way.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);

// Bouvet's tool: fields beyond these are ignored, as Bouvet ignores them (its clients send extra ones).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ExecuteCodeArgs {
    /// The sandbox's id.
    pub sandbox_id: String,
    /// python, javascript, bash or sh, in any case (Bouvet's python3, node and js too).
    pub language: String,
    /// The program's source (at most 1 MiB).
    pub code: String,
    /// Seconds before the program's whole process group gets SIGTERM, then SIGKILL 1 s later (default 60).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Working directory (default /workspace; relative paths are under it).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Text given to the program's standard input (at most 1 MiB), then end of file.
    #[serde(default)]
    pub stdin: Option<String>,
}

// Bouvet's tool: fields beyond these are ignored, as Bouvet ignores them (its clients send extra ones).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunCommandArgs {
    /// The sandbox's id.
    pub sandbox_id: String,
    /// A shell command (run by sh; at most 1 MiB).
    pub command: String,
    /// Seconds before the program's whole process group gets SIGTERM, then SIGKILL 1 s later (default 60).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Working directory (default /workspace; relative paths are under it).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Text given to the program's standard input (at most 1 MiB), then end of file.
    #[serde(default)]
    pub stdin: Option<String>,
}

/// The execution options both tools (and start_process) share.
#[derive(Debug, Default, Clone)]
pub struct ExecOpts {
    pub timeout_secs: Option<u64>,
    pub env: Option<BTreeMap<String, String>>,
    pub cwd: Option<String>,
    pub stdin: Option<String>,
}

macro_rules! opts_of {
    ($a:expr) => {
        ExecOpts {
            timeout_secs: $a.timeout_secs,
            env: $a.env.clone(),
            cwd: $a.cwd.clone(),
            stdin: $a.stdin.clone(),
        }
    };
}

impl ExecOpts {
    pub fn validate(&self) -> Result<(), ToolError> {
        if let Some(t) = self.timeout_secs {
            check::in_range("timeout_secs", t, 1, 86_400)?;
        }
        if let Some(s) = &self.stdin {
            check::max_bytes("stdin", s, MAX_STDIN_BYTES)?;
        }
        if let Some(env) = &self.env {
            let bytes: usize = env.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
            if bytes > MAX_ENV_BYTES {
                return Err(ToolError::invalid_argument(
                    "env",
                    format!("is {bytes} bytes; the limit is {MAX_ENV_BYTES} bytes"),
                ));
            }
            if let Some(k) = env
                .keys()
                .find(|k| k.is_empty() || k.contains('=') || k.contains('\0'))
            {
                return Err(ToolError::invalid_argument(
                    "env",
                    format!("{k:?} is not a variable name"),
                ));
            }
        }
        Ok(())
    }
}

impl Validate for ExecuteCodeArgs {
    fn validate(&self) -> Result<(), ToolError> {
        if sandbox_agent::protocol::interpreter(&self.language.to_ascii_lowercase()).is_none() {
            return Err(ToolError::invalid_argument(
                "language",
                format!(
                    "{:?} is not one of python, javascript (node), bash, sh",
                    self.language
                ),
            ));
        }
        check::max_bytes("code", &self.code, MAX_CODE_BYTES)?;
        opts_of!(self).validate()
    }
}

impl Validate for RunCommandArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::non_empty("command", &self.command)?;
        check::max_bytes("command", &self.command, MAX_CODE_BYTES)?;
        opts_of!(self).validate()
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ExecResult {
    /// The exit status; 128 + the signal number when a signal ended the program.
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    /// The signal that ended the program, if one did.
    pub signal: Option<i32>,
    /// True when the timeout ended it.
    pub timed_out: bool,
    /// True when output was cut: the first and last halves of 1 MiB per stream are kept, and less when the
    /// result would pass 900 KiB (stdout_bytes and stderr_bytes are the whole sizes).
    pub truncated: bool,
    /// Bytes the program wrote to stdout in all.
    pub stdout_bytes: u64,
    /// Bytes the program wrote to stderr in all.
    pub stderr_bytes: u64,
    pub duration_ms: u64,
    /// What the sandbox's network policy explains about this output (no network; a refused destination).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl ExecResult {
    /// Keeps the result within what every client accepts ([`super::RESULT_BUDGET`]).
    pub(crate) fn fit(mut self) -> Self {
        if super::fit_output(&mut self, |r| (&mut r.stdout, &mut r.stderr)) {
            self.truncated = true;
        }
        self
    }
}

impl From<ProcReport> for ExecResult {
    fn from(r: ProcReport) -> Self {
        Self {
            exit_code: r.exit_code.unwrap_or_else(|| 128 + r.signal.unwrap_or(0)),
            stdout: String::from_utf8_lossy(&r.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&r.stderr).into_owned(),
            signal: r.signal,
            timed_out: r.timed_out,
            truncated: r.truncated,
            stdout_bytes: r.stdout_bytes,
            stderr_bytes: r.stderr_bytes,
            duration_ms: r.duration_ms,
            note: None,
        }
    }
}

pub fn register(b: &mut BridgeBuilder, mgr: &Arc<Manager>) {
    let deadline = mgr.settings.max_timeout + Duration::from_secs(30);
    b.tool(
        ToolSpec::new(
            "execute_code",
            "Run code in a sandbox: language python, javascript (node), bash or sh. Returns exit_code, stdout, \
             stderr (plus signal, timed_out, truncated). Output streams as progress while it runs. A result \
             stays under 900 KiB (some MCP clients refuse 1 MiB): longer output is cut head-and-tail and marked \
             truncated; for all of it, write it to a file and page it with read_file.",
        )
        .title("Execute Code")
        .open_world()
        .timeout(deadline)
        .task_support(bridge_core::tool::TaskSupport::Optional)
        .handler_on(Arc::clone(mgr), |m, a: ExecuteCodeArgs, ctx: ToolCtx| async move {
            let s = m.get(&a.sandbox_id)?;
            // Bouvet lower-cases the language: `Python` and `JS` run too.
            let language = a.language.to_ascii_lowercase();
            check_language(&language, &s.instance.hello.languages)?;
            let opts = opts_of!(a);
            let program = Program::Code {
                language,
                code: a.code,
            };
            run(&m, &s, program, opts, &ctx).await
        }),
    );
    b.tool(
        ToolSpec::new(
            "run_command",
            "Run a shell command (sh) in a sandbox. Returns exit_code, stdout, stderr (plus signal, timed_out, \
             truncated). Output streams as progress while it runs. A result stays under 900 KiB: longer output \
             is cut head-and-tail and marked truncated; for all of it, redirect it to a file and page it with \
             read_file.",
        )
        .title("Run Command")
        .open_world()
        .timeout(deadline)
        .task_support(bridge_core::tool::TaskSupport::Optional)
        .handler_on(Arc::clone(mgr), |m, a: RunCommandArgs, ctx: ToolCtx| async move {
            let s = m.get(&a.sandbox_id)?;
            let opts = opts_of!(a);
            run(&m, &s, Program::Shell { command: a.command }, opts, &ctx).await
        }),
    );
}

pub fn exec_spec(m: &Manager, program: Program, opts: ExecOpts) -> Result<ExecSpec, ToolError> {
    let timeout = opts
        .timeout_secs
        .map_or(m.settings.default_timeout, Duration::from_secs);
    if timeout > m.settings.max_timeout {
        return Err(ToolError::invalid_argument(
            "timeout_secs",
            format!(
                "is {} s; the limit is {} s (SANDBOX_MAX_TIMEOUT)",
                timeout.as_secs(),
                m.settings.max_timeout.as_secs()
            ),
        ));
    }
    let mut spec = ExecSpec::new(program);
    spec.env = opts.env.unwrap_or_default();
    spec.cwd = opts.cwd;
    spec.stdin = opts.stdin.map(String::into_bytes).unwrap_or_default();
    spec.timeout_ms = Some(timeout.as_millis() as u64);
    Ok(spec)
}

pub(crate) async fn run(
    m: &Manager,
    s: &Sandbox,
    program: Program,
    opts: ExecOpts,
    ctx: &ToolCtx,
) -> Result<ExecResult, ToolError> {
    // Asked first, so the core knows this handler stops what it starts and lets it send its kill on cancel.
    let cancel = ctx.cancellation();
    let mut spec = exec_spec(m, program, opts)?;
    crate::network::fail_fast_env(&s.network, &mut spec.env);
    spec.stream = true;
    let host_deadline = Duration::from_millis(spec.timeout_ms.unwrap_or(0) + spec.grace_ms)
        + Duration::from_secs(10);
    let client = &s.instance.client;
    let (tx, mut rx) = crate::client::AgentClient::chunk_channel();
    let (id, pending) = client
        .start(Op::Exec(Box::new(spec)), Some(tx))
        .await
        .map_err(|e| s.link_error(e))?;
    let wait = pending.wait(host_deadline);
    tokio::pin!(wait);
    let mut live = LiveOutput::default();
    let result = loop {
        let due = live.due();
        tokio::select! {
            r = &mut wait => break r,
            Some(Body::Chunk { stream, data }) = rx.recv() => {
                if let Some((seen, message)) = live.chunk(Instant::now(), stream, &data) {
                    ctx.progress(seen as f64, None, message).await;
                }
            }
            () = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                if let Some((seen, message)) = live.flush(Instant::now()) {
                    ctx.progress(seen as f64, None, message).await;
                }
            }
            () = cancel.cancelled() => {
                kill(s, id).await;
                return Err(ToolError::cancelled("the call was cancelled; its processes were killed"));
            }
        }
    };
    // Output the program wrote last is still queued or held back for its interval: it goes out before the
    // result, as the tail a person watching saw last.
    while let Ok(Body::Chunk { stream, data }) = rx.try_recv() {
        live.take(stream, &data);
    }
    let printed = match &result {
        Ok(Body::Exited(report)) => Some(report.stdout_bytes.saturating_add(report.stderr_bytes)),
        _ => None,
    };
    if let Some((seen, message)) = live.finish(printed) {
        ctx.progress(seen as f64, None, message).await;
    }
    client.unstream(id);
    s.touch();
    match result {
        Ok(Body::Exited(report)) => {
            let mut r = ExecResult::from(report);
            r.note = crate::network::note(&s.network, &r.stdout, &r.stderr);
            Ok(r.fit())
        }
        Ok(other) => Err(agent_error(other)),
        Err(e @ LinkError::Timeout { .. }) => {
            kill(s, id).await;
            Err(ToolError::from(e))
        }
        Err(e) => Err(s.link_error(e)),
    }
}

/// A program's live output as progress: at most one notification per [`PROGRESS_INTERVAL`], carrying the
/// bytes seen so far (as the progress value) and the latest output's tail (as the message, at most
/// [`PROGRESS_TEXT`] bytes). What arrives within an interval is held back and goes out when it is over.
#[derive(Default)]
struct LiveOutput {
    seen: u64,
    stream: Option<StreamName>,
    /// The latest output of `stream`, at most [`TAIL_BYTES`].
    tail: String,
    /// The earliest the next notification may go.
    next: Option<Instant>,
    /// Output arrived since the last notification.
    pending: bool,
}

/// "[stdout] " and "[stderr] " are this long.
const LABEL_BYTES: usize = 9;
const TAIL_BYTES: usize = PROGRESS_TEXT - LABEL_BYTES;

impl LiveOutput {
    /// Takes a chunk; the notification to send now, if the last one was an interval ago.
    fn chunk(&mut self, now: Instant, stream: StreamName, data: &[u8]) -> Option<(u64, String)> {
        self.take(stream, data);
        self.flush(now)
    }

    /// Output held back and not yet sent, whatever its interval: the program has ended. `printed` is the
    /// agent's count of every byte written, which the chunks seen fall short of when some were dropped
    /// (the client read slower than the program printed): the last notification says the whole count.
    fn finish(&mut self, printed: Option<u64>) -> Option<(u64, String)> {
        if let Some(printed) = printed.filter(|&p| p > self.seen) {
            self.seen = printed;
            self.pending = true;
        }
        self.next = None;
        self.flush(Instant::now())
    }

    /// Takes a chunk into the tail, to be sent when its interval is over.
    fn take(&mut self, stream: StreamName, data: &[u8]) {
        self.seen += data.len() as u64;
        if self.stream != Some(stream) {
            self.stream = Some(stream);
            self.tail.clear();
        }
        // Decoding never makes text shorter, so the tail's bytes come from the chunk's last TAIL_BYTES.
        let from = data.len().saturating_sub(TAIL_BYTES);
        self.tail.push_str(&String::from_utf8_lossy(&data[from..]));
        if self.tail.len() > TAIL_BYTES {
            // The first character boundary at or after the cut (`str::ceil_char_boundary` is newer than
            // the workspace's MSRV); the string's end is one, so this ends.
            let mut cut = self.tail.len() - TAIL_BYTES;
            while !self.tail.is_char_boundary(cut) {
                cut += 1;
            }
            self.tail.drain(..cut);
        }
        self.pending = true;
    }

    /// When output held back is due.
    fn due(&self) -> Option<Instant> {
        self.next.filter(|_| self.pending)
    }

    /// The notification for output held back, if any and its interval is over.
    fn flush(&mut self, now: Instant) -> Option<(u64, String)> {
        if !self.pending || self.next.is_some_and(|next| now < next) {
            return None;
        }
        self.pending = false;
        self.next = Some(now + PROGRESS_INTERVAL);
        let label = match self.stream {
            Some(StreamName::Stderr) => "stderr",
            _ => "stdout",
        };
        Some((self.seen, format!("[{label}] {}", self.tail)))
    }
}

async fn kill(s: &Sandbox, id: u64) {
    let _ = s
        .instance
        .client
        .call(
            Op::Signal {
                target: id,
                signal: 9,
            },
            Duration::from_secs(2),
        )
        .await;
}

/// A language this sandbox's root lacks (an image without python, say) is refused by name before anything
/// runs, rather than failing as "No such file or directory".
fn check_language(language: &str, has: &[String]) -> Result<(), ToolError> {
    let interp = sandbox_agent::protocol::interpreter(language).map(|(bin, _)| bin);
    let canonical = sandbox_agent::protocol::LANGUAGES
        .iter()
        .find(|(_, bin)| Some(*bin) == interp)
        .map(|(name, _)| *name);
    match canonical {
        Some(name) if !has.iter().any(|h| h == name) => Err(ToolError::invalid_argument(
            "language",
            format!(
                "this sandbox has no {name} interpreter; it has: {}",
                has.join(", ")
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// An agent's chunk of 4 096 bytes that are not UTF-8 decodes to 12 288 (each byte becomes U+FFFD): the
    /// message is held to its byte limit after decoding, cut on a character boundary.
    #[test]
    fn a_progress_message_is_held_to_its_bytes_after_decoding() {
        let mut live = LiveOutput::default();
        let (seen, message) = live
            .chunk(Instant::now(), StreamName::Stdout, &[0xff; 4096])
            .expect("the first chunk is reported at once");
        assert_eq!(seen, 4096);
        assert!(
            message.len() <= PROGRESS_TEXT,
            "a message of {} bytes; the limit is {PROGRESS_TEXT}",
            message.len()
        );
        assert!(message.starts_with("[stdout] \u{fffd}"), "{message:?}");
    }

    /// A chunk every millisecond for two seconds: one notification at once, then at most one per interval,
    /// each carrying the latest output and the bytes seen so far; output held back goes out when its
    /// interval is over, not when the next chunk comes.
    #[test]
    fn chunks_are_coalesced_to_one_notification_per_interval() {
        let t0 = Instant::now();
        let mut live = LiveOutput::default();
        let mut sent = Vec::new();
        for i in 0..2000u64 {
            let now = t0 + ms(i);
            if let Some(at) = live.due().filter(|at| *at <= now) {
                sent.extend(live.flush(at).map(|m| (at, m)));
            }
            let line = format!("line {i}\n");
            sent.extend(
                live.chunk(now, StreamName::Stdout, line.as_bytes())
                    .map(|m| (now, m)),
            );
        }
        let last = t0 + ms(1999);
        let tail = live.due().expect("the last lines wait for their interval");
        assert!(tail > last && tail <= last + PROGRESS_INTERVAL);
        sent.extend(live.flush(tail).map(|m| (tail, m)));
        assert!(live.due().is_none() && live.flush(tail + ms(1000)).is_none());

        let intervals = (2000 / PROGRESS_INTERVAL.as_millis()) as usize;
        assert!(
            sent.len() <= intervals + 2,
            "{} notifications in 2 s; at most {} at one per {PROGRESS_INTERVAL:?}",
            sent.len(),
            intervals + 2
        );
        assert_eq!(sent[0].0, t0, "the first output is reported at once");
        for pair in sent.windows(2) {
            assert!(pair[1].0 - pair[0].0 >= PROGRESS_INTERVAL, "{pair:?}");
        }
        let (seen, message) = &sent.last().expect("some").1;
        let all: u64 = (0..2000u64)
            .map(|i| format!("line {i}\n").len() as u64)
            .sum();
        assert_eq!(*seen, all, "the bytes seen, all of them");
        assert!(message.ends_with("line 1999\n"), "{message:?}");
        assert!(
            message.contains("line 1998\n"),
            "the tail spans chunks: {message:?}"
        );
    }

    /// The program ended inside an interval: what it wrote last goes out at once, before the result.
    #[test]
    fn output_held_back_goes_out_when_the_program_ends() {
        let t0 = Instant::now();
        let mut live = LiveOutput::default();
        assert!(live.chunk(t0, StreamName::Stdout, b"a\n").is_some());
        assert!(
            live.chunk(t0 + ms(100), StreamName::Stdout, b"FINAL\n")
                .is_none()
        );
        let (seen, message) = live.finish(Some(8)).expect("the last output is sent");
        assert_eq!(seen, 8);
        assert!(message.ends_with("FINAL\n"), "{message:?}");
        assert!(live.finish(Some(8)).is_none(), "sent once");
    }

    /// Live chunks are dropped when the client reads slower than the program prints; the last
    /// notification still says every byte the agent counted, even when nothing was held back.
    #[test]
    fn the_last_notification_says_every_byte_printed_though_chunks_were_dropped() {
        let t0 = Instant::now();
        let mut live = LiveOutput::default();
        assert!(live.chunk(t0, StreamName::Stdout, b"first\n").is_some());
        let (seen, message) = live.finish(Some(1_000)).expect("the count went out");
        assert_eq!(seen, 1_000);
        assert_eq!(message, "[stdout] first\n");
        assert!(live.finish(Some(1_000)).is_none(), "sent once");
        // A count below what was seen (no report: the call failed) never moves progress backwards.
        let mut live = LiveOutput::default();
        assert!(live.chunk(t0, StreamName::Stdout, b"abc").is_some());
        assert!(live.finish(None).is_none());
        assert!(live.finish(Some(1)).is_none());
    }

    /// Output held back from one stream is not shown under the other's label.
    #[test]
    fn the_tail_is_of_the_latest_stream() {
        let t0 = Instant::now();
        let mut live = LiveOutput::default();
        assert!(live.chunk(t0, StreamName::Stdout, b"out\n").is_some());
        assert!(
            live.chunk(t0 + ms(10), StreamName::Stdout, b"more\n")
                .is_none()
        );
        assert!(
            live.chunk(t0 + ms(20), StreamName::Stderr, b"err\n")
                .is_none()
        );
        let at = live.due().expect("held back");
        assert_eq!(at, t0 + PROGRESS_INTERVAL);
        let (seen, message) = live.flush(at).expect("due");
        assert_eq!(seen, 13);
        assert_eq!(message, "[stderr] err\n");
    }
}
