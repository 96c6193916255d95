//! The agent's wire: one byte stream, cut into frames by bridge-link's u32 big-endian length prefix
//! (`bridge_link::Framing::LengthPrefixed`), each frame one JSON object. Requests carry an `id` chosen
//! by the host; every reply names the `id` it answers, so any number of requests run at once on one stream.
//! Bytes (file content, stdin, output) travel as standard base64 strings, so files are binary-safe.
//!
//! Every request gets exactly one *final* reply. Only `chunk` replies (live output of a foreground exec that
//! asked for `stream`) come before it. See docs/protocols/sandbox.md.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Protocol version said in `hello`. 2: `status` takes `state_only`, and an error may be of kind `busy`. The
/// host sends a field an agent of an older version does not know only when `hello` says it can (an older agent
/// refuses unknown fields), so a bridge keeps working with an older guest image.
pub const VERSION: u32 = 2;
/// The first version whose `status` takes `state_only`.
pub const STATE_ONLY_SINCE: u32 = 2;
/// Largest frame either way. A 1 MiB chunk in base64 plus JSON fits with room to spare.
pub const MAX_FRAME_BYTES: usize = 4 << 20;
/// Largest raw byte count in one `read` answer or one `write`/`stdin` request; bigger transfers are chunked.
pub const MAX_CHUNK_BYTES: usize = 1 << 20;
/// Largest code or shell command one exec may carry (Bouvet's 1 MB command limit, docs/protocols/sandbox.md §1, honestly: it is written
/// to a file, never put in argv).
pub const MAX_CODE_BYTES: usize = 1 << 20;
/// Output kept per stream of one process by default: head and tail halves, the middle dropped.
pub const DEFAULT_MAX_OUTPUT: usize = 1 << 20;
/// Hard ceiling on `max_output`, so a final reply always fits a frame (two streams, base64).
pub const MAX_OUTPUT_CEILING: usize = 1 << 20;
/// Entries one `list` answer holds at most.
pub const MAX_LIST_ENTRIES: usize = 10_000;
/// Processes (foreground and background) one agent tracks at once.
pub const MAX_PROCESSES: usize = 64;

/// Base64 (standard alphabet, padded) for `Vec<u8>` fields.
pub mod b64 {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }

    pub fn encode(bytes: &[u8]) -> String {
        STANDARD.encode(bytes)
    }

    pub fn decode(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
        STANDARD.decode(text)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Request {
    pub id: u64,
    #[serde(flatten)]
    pub op: Op,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Op {
    /// Version, pid, languages and the isolation the launcher really applied.
    Hello,
    Exec(Box<ExecSpec>),
    /// Bytes for the stdin of process `target` (the id of its exec request); `eof` closes it after.
    Stdin {
        target: u64,
        #[serde(with = "b64", default)]
        data: Vec<u8>,
        #[serde(default)]
        eof: bool,
    },
    /// A signal to the whole process group of `target`.
    Signal {
        target: u64,
        signal: i32,
    },
    /// State and output (head and tail) of process `target` so far. With `state_only` the output is left
    /// out (`stdout` and `stderr` empty, their byte counts given): a poll for the end, which does not count
    /// as the output having been read (see `procs`).
    Status {
        target: u64,
        #[serde(default, skip_serializing_if = "is_false")]
        state_only: bool,
    },
    /// Forget a finished background process.
    Forget {
        target: u64,
    },
    Read {
        path: String,
        #[serde(default)]
        offset: u64,
        length: u64,
    },
    Write {
        path: String,
        #[serde(with = "b64", default)]
        data: Vec<u8>,
        /// Write at this offset without truncating; `None` with `append == false` replaces the file.
        #[serde(default)]
        offset: Option<u64>,
        #[serde(default)]
        append: bool,
        #[serde(default)]
        mode: Option<u32>,
    },
    List {
        path: String,
        #[serde(default = "one")]
        depth: u32,
    },
}

fn one() -> u32 {
    1
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What to run. Code and shell commands are written to a file inside the sandbox and the interpreter is
/// given the file's path, so their size is bounded by [`MAX_CODE_BYTES`], not by `MAX_ARG_STRLEN` (128 KiB).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Program {
    Argv { argv: Vec<String> },
    Shell { command: String },
    Code { language: String, code: String },
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// RLIMIT_DATA in bytes: heap and writable private mappings. Not RLIMIT_AS, which counts the address
    /// space V8 (node) reserves without using and stops it from starting.
    pub data: Option<u64>,
    /// RLIMIT_NPROC.
    pub processes: Option<u64>,
    /// RLIMIT_CPU in seconds.
    pub cpu_secs: Option<u64>,
    /// RLIMIT_FSIZE in bytes.
    pub file_size: Option<u64>,
    /// RLIMIT_NOFILE.
    pub open_files: Option<u64>,
    /// Install the seccomp deny-list (`seccomp.rs`) in every program.
    #[serde(default)]
    pub seccomp: bool,
    /// Confine every program with Landlock (`confine.rs`): the sandbox's paths only, no TCP bind/connect.
    #[serde(default)]
    pub landlock: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExecSpec {
    pub program: Program,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// Written to stdin right away.
    #[serde(with = "b64", default)]
    pub stdin: Vec<u8>,
    /// Close stdin after `stdin` (a command that reads stdin then sees EOF).
    #[serde(default = "yes")]
    pub close_stdin: bool,
    /// Enforced here, inside the sandbox: SIGTERM to the process group, SIGKILL after `grace_ms`.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default = "default_grace")]
    pub grace_ms: u64,
    /// Bytes kept per stream (head and tail halves).
    #[serde(default = "default_max_output")]
    pub max_output: usize,
    /// Answer `started` at once and keep the process for `status`/`signal`/`stdin`.
    #[serde(default)]
    pub background: bool,
    /// Send `chunk` replies while a foreground process runs.
    #[serde(default)]
    pub stream: bool,
}

fn yes() -> bool {
    true
}
fn default_grace() -> u64 {
    1000
}
fn default_max_output() -> usize {
    DEFAULT_MAX_OUTPUT
}

impl ExecSpec {
    pub fn new(program: Program) -> Self {
        Self {
            program,
            env: BTreeMap::new(),
            cwd: None,
            stdin: Vec::new(),
            close_stdin: true,
            timeout_ms: None,
            grace_ms: default_grace(),
            max_output: DEFAULT_MAX_OUTPUT,
            background: false,
            stream: false,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StreamName {
    Stdout,
    Stderr,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Reply {
    pub id: u64,
    #[serde(flatten)]
    pub body: Body,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Body {
    Hello(Hello),
    /// A background process started; its handle is the exec request's id.
    Started {
        pid: i32,
    },
    /// Live output; never final.
    Chunk {
        stream: StreamName,
        #[serde(with = "b64")]
        data: Vec<u8>,
    },
    Exited(ProcReport),
    Status(ProcReport),
    Data {
        #[serde(with = "b64")]
        data: Vec<u8>,
        /// The file's whole size.
        size: u64,
        eof: bool,
    },
    Ok {
        #[serde(default)]
        written: u64,
    },
    Entries {
        entries: Vec<Entry>,
        truncated: bool,
    },
    Error {
        kind: ErrorKind,
        message: String,
    },
}

impl Body {
    /// Everything but live output ends its request.
    pub fn is_final(&self) -> bool {
        !matches!(self, Body::Chunk { .. })
    }

    pub fn error(kind: ErrorKind, message: impl Into<String>) -> Self {
        Body::Error {
            kind,
            message: message.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The request could not be parsed or names a bad value.
    Invalid,
    /// No such file, directory or process.
    NotFound,
    /// A size limit of the agent (code, files, frames).
    Limit,
    /// Too many running already (processes): one must end before another starts.
    Busy,
    /// An I/O error, message verbatim.
    Io,
    /// The program could not be started.
    Spawn,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Hello {
    pub version: u32,
    /// The agent's pid in its own pid namespace (1 inside a sandbox).
    pub pid: u32,
    /// Languages whose interpreter exists in this sandbox.
    pub languages: Vec<String>,
    /// What the launcher really applied, by name (see docs/protocols/sandbox.md).
    pub enforced: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ProcReport {
    pub pid: i32,
    pub running: bool,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub truncated: bool,
    #[serde(with = "b64")]
    pub stdout: Vec<u8>,
    #[serde(with = "b64")]
    pub stderr: Vec<u8>,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub duration_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    /// Relative to the listed directory (`sub/file` at depth 2).
    pub name: String,
    pub is_dir: bool,
    pub size: u64,
}

/// Interpreter for a language name, and the file suffix its code file gets.
pub fn interpreter(language: &str) -> Option<(&'static str, &'static str)> {
    match language {
        "python" | "python3" => Some(("python3", "py")),
        "javascript" | "node" | "js" => Some(("node", "js")),
        "bash" => Some(("bash", "sh")),
        "sh" => Some(("sh", "sh")),
        _ => None,
    }
}

/// The languages the MCP surface names, each with its interpreter.
pub const LANGUAGES: [(&str, &str); 4] = [
    ("python", "python3"),
    ("javascript", "node"),
    ("bash", "bash"),
    ("sh", "sh"),
];

impl Op {
    /// A `status` of `target` for an agent that said `agent_version` in its hello: only the state when asked and
    /// the agent can leave the output out; an older agent refuses the field, so it gets a full status.
    pub fn status(target: u64, state_only: bool, agent_version: u32) -> Self {
        Op::Status {
            target,
            state_only: state_only && agent_version >= STATE_ONLY_SINCE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bridge keeps working with an older guest image: what it sends a version-1 agent carries no field that
    /// agent refuses (`deny_unknown_fields`).
    #[test]
    fn a_version_1_agent_gets_a_status_request_it_knows() {
        let old = serde_json::to_value(Op::status(3, true, 1)).unwrap();
        assert!(old.get("state_only").is_none(), "{old}");
        let new = serde_json::to_value(Op::status(3, true, VERSION)).unwrap();
        assert_eq!(new["state_only"], true, "{new}");
    }

    #[test]
    fn requests_and_replies_round_trip_as_json() {
        let req = Request {
            id: 7,
            op: Op::Write {
                path: "a".into(),
                data: vec![0, 255, 10],
                offset: None,
                append: true,
                mode: Some(0o600),
            },
        };
        let text = serde_json::to_string(&req).unwrap();
        assert!(text.contains("\"op\":\"write\""), "{text}");
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), req);
        let reply = Reply {
            id: 7,
            body: Body::Chunk {
                stream: StreamName::Stderr,
                data: b"x".to_vec(),
            },
        };
        let text = serde_json::to_string(&reply).unwrap();
        assert_eq!(serde_json::from_str::<Reply>(&text).unwrap(), reply);
        assert!(!reply.body.is_final());
    }

    #[test]
    fn unknown_fields_in_a_request_are_refused() {
        let bad = r#"{"id":1,"op":"signal","target":2,"signal":9,"extra":1}"#;
        assert!(serde_json::from_str::<Request>(bad).is_err());
    }
}
