//! read_file, write_file, list_directory: Bouvet's `{content}`, `{success}`, `{entries: [{name, is_dir,
//! size}]}`, extended with encoding (utf8/base64), offset/length, mode, append, depth. Up to 10 MiB of
//! content a call, moved in 1 MiB chunks so no frame to the agent is large.

use super::agent_error;
use crate::client::AgentClient;
use crate::manager::Manager;
use bridge_core::{BridgeBuilder, ToolCtx, ToolError, ToolSpec, Validate, check};
use sandbox_agent::protocol::{Body, Entry, ErrorKind, MAX_CHUNK_BYTES, Op, b64};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// Bouvet's 10 MB content limit (docs/protocols/sandbox.md §1), as bytes of the file.
pub const MAX_CONTENT_BYTES: usize = 10 << 20;
/// Bytes one read_file returns at most: its result carries the content twice (text and structured) and must
/// stay within [`super::RESULT_BUDGET`] (the Python MCP client refuses SSE events over 1 MiB). Larger files are
/// read in pages with `offset` (the result's `size`, `bytes` and `truncated` say how much is left); a page of
/// text that escapes heavily in JSON is cut shorter.
pub const MAX_READ_BYTES: usize = 256 << 10;
const CHUNK_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// UTF-8 text (invalid bytes read as U+FFFD).
    #[default]
    Utf8,
    /// Any bytes, as standard base64.
    Base64,
}

// Bouvet's tool: fields beyond these are ignored, as Bouvet ignores them (its clients send extra ones).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadArgs {
    /// The sandbox's id, as create_sandbox returned it.
    pub sandbox_id: String,
    /// File path (relative paths are under /workspace).
    pub path: String,
    /// How `content` is returned (default utf8).
    #[serde(default)]
    pub encoding: Encoding,
    /// First byte to read (default 0).
    #[serde(default)]
    pub offset: Option<u64>,
    /// Bytes to read (default: to the end, at most 256 KiB a call; page with offset).
    #[serde(default)]
    pub length: Option<u64>,
}
impl Validate for ReadArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::path("path", &self.path)?;
        if let Some(l) = self.length {
            check::in_range("length", l, 0, MAX_READ_BYTES as u64)?;
        }
        Ok(())
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ReadResult {
    pub content: String,
    pub encoding: Encoding,
    /// The file's whole size in bytes.
    pub size: u64,
    /// Bytes of the file returned: the next page starts at offset + bytes.
    pub bytes: u64,
    /// True when the file goes on past what was returned (read on from offset + bytes).
    pub truncated: bool,
}

// Bouvet's tool: fields beyond these are ignored, as Bouvet ignores them (its clients send extra ones).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteArgs {
    /// The sandbox's id, as create_sandbox returned it.
    pub sandbox_id: String,
    /// File path (relative paths are under /workspace); missing directories are created.
    pub path: String,
    /// The content (at most 10 MiB of bytes), as text or base64 per `encoding`.
    pub content: String,
    /// How `content` is written: utf8 text as it is, or base64 for any bytes (default utf8).
    #[serde(default)]
    pub encoding: Encoding,
    /// Permission bits in octal, e.g. "755" (default 644 for a new file).
    #[serde(default)]
    pub mode: Option<String>,
    /// Add to the end instead of replacing.
    #[serde(default)]
    pub append: bool,
    /// Write at this byte offset without truncating (ignored with append).
    #[serde(default)]
    pub offset: Option<u64>,
}
impl Validate for WriteArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::path("path", &self.path)?;
        let limit = match self.encoding {
            Encoding::Utf8 => MAX_CONTENT_BYTES,
            Encoding::Base64 => MAX_CONTENT_BYTES.div_ceil(3) * 4,
        };
        check::max_bytes("content", &self.content, limit)?;
        if let Some(m) = &self.mode {
            parse_mode(m)?;
        }
        Ok(())
    }
}

fn parse_mode(m: &str) -> Result<u32, ToolError> {
    let digits = m.trim().trim_start_matches("0o");
    u32::from_str_radix(digits, 8)
        .ok()
        .filter(|v| *v <= 0o7777)
        .ok_or_else(|| {
            ToolError::invalid_argument(
                "mode",
                format!("{m:?} is not octal permission bits like \"644\""),
            )
        })
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct WriteResult {
    pub success: bool,
    pub bytes_written: u64,
}

// Bouvet's tool: fields beyond these are ignored, as Bouvet ignores them (its clients send extra ones).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListArgs {
    /// The sandbox's id, as create_sandbox returned it.
    pub sandbox_id: String,
    /// Directory (relative paths are under /workspace).
    pub path: String,
    /// Levels to descend (default 1: the directory's own entries; names below carry their relative path).
    #[serde(default)]
    pub depth: Option<u32>,
}
impl Validate for ListArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::path("path", &self.path)?;
        if let Some(d) = self.depth {
            check::in_range("depth", d, 1, 64)?;
        }
        Ok(())
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListResult {
    pub entries: Vec<ListEntry>,
    /// True when more than 10,000 entries were found and the rest left out.
    pub truncated: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListEntry {
    pub name: String,
    pub is_dir: bool,
    pub size: u64,
}

impl From<Entry> for ListEntry {
    fn from(e: Entry) -> Self {
        Self {
            name: e.name,
            is_dir: e.is_dir,
            size: e.size,
        }
    }
}

pub fn register(b: &mut BridgeBuilder, mgr: &Arc<Manager>) {
    b.tool(
        ToolSpec::new(
            "read_file",
            "Read a file in a sandbox (text, or base64 for any bytes). At most 256 KiB a call (a result stays \
             under 900 KiB; some MCP clients refuse 1 MiB): page through larger files with offset, reading on \
             from offset + bytes while truncated is true (size is the whole file's). Text pages end on whole \
             UTF-8 characters.",
        )
        .title("Read File")
        .read_only()
        .timeout(Duration::from_secs(120))
        .task_support(bridge_core::tool::TaskSupport::Optional)
        .handler_on(Arc::clone(mgr), |m, a: ReadArgs, _: ToolCtx| async move { read(&m, a).await }),
    );
    b.tool(
        ToolSpec::new(
            "write_file",
            "Write a file in a sandbox (text, or base64 for any bytes; mode, append, offset). Up to 10 MiB.",
        )
        .title("Write File")
        .timeout(Duration::from_secs(120))
        .task_support(bridge_core::tool::TaskSupport::Optional)
        .handler_on(Arc::clone(mgr), |m, a: WriteArgs, _: ToolCtx| async move { write(&m, a).await }),
    );
    b.tool(
        ToolSpec::new(
            "list_directory",
            "List a directory in a sandbox: entries with name, is_dir and size; depth > 1 descends.",
        )
        .title("List Directory")
        .read_only()
        .handler_on(Arc::clone(mgr), |m, a: ListArgs, _: ToolCtx| async move {
            let s = m.get(&a.sandbox_id)?;
            let op = Op::List {
                path: a.path,
                depth: a.depth.unwrap_or(1),
            };
            match s.instance.client.call(op, CHUNK_TIMEOUT).await.map_err(|e| s.link_error(e))? {
                Body::Entries { entries, truncated } => Ok(ListResult {
                    entries: entries.into_iter().map(ListEntry::from).collect(),
                    truncated,
                }),
                other => Err(agent_error(other)),
            }
        }),
    );
}

async fn read(m: &Manager, a: ReadArgs) -> Result<ReadResult, ToolError> {
    let s = m.get(&a.sandbox_id)?;
    let start = a.offset.unwrap_or(0);
    let want = a
        .length
        .unwrap_or(MAX_READ_BYTES as u64)
        .min(MAX_READ_BYTES as u64);
    let (mut data, size) = read_range(&s.instance.client, &a.path, start, want).await?;
    let page = |data: &[u8]| {
        let bytes = data.len() as u64;
        ReadResult {
            content: match a.encoding {
                Encoding::Utf8 => String::from_utf8_lossy(data).into_owned(),
                Encoding::Base64 => b64::encode(data),
            },
            encoding: a.encoding,
            size,
            bytes,
            truncated: start + bytes < size,
        }
    };
    whole_chars(&mut data, a.encoding, start, size);
    let mut result = page(&data);
    // Each round aims 10% under; the bound only guards against a loop.
    for _ in 0..8 {
        let wire = super::wire_bytes(&result);
        if wire <= super::RESULT_BUDGET || data.is_empty() {
            break;
        }
        let keep = data.len() * (super::RESULT_BUDGET / 1024) / (wire / 1024).max(1) * 9 / 10;
        data.truncate(keep);
        whole_chars(&mut data, a.encoding, start, size);
        result = page(&data);
    }
    Ok(result)
}

/// Bytes `start..start + want` of `path` and the file's size, in chunks of at most [`MAX_CHUNK_BYTES`].
async fn read_range(
    client: &AgentClient,
    path: &str,
    start: u64,
    want: u64,
) -> Result<(Vec<u8>, u64), ToolError> {
    let mut data = Vec::new();
    loop {
        let asked = (want - data.len() as u64).min(MAX_CHUNK_BYTES as u64);
        let op = Op::Read {
            path: path.to_owned(),
            offset: start + data.len() as u64,
            length: asked,
        };
        match client.call(op, CHUNK_TIMEOUT).await? {
            Body::Data {
                data: d,
                size: sz,
                eof,
            } => {
                // The agent's word is its frame (4 MiB): bytes beyond what was asked are refused, not kept.
                if d.len() as u64 > asked {
                    return Err(ToolError::remote(format!(
                        "the sandbox agent sent {} bytes of {path} where at most {asked} were asked for",
                        d.len()
                    )));
                }
                let done = eof || d.is_empty() || data.len() as u64 + d.len() as u64 >= want;
                data.extend_from_slice(&d);
                if done {
                    return Ok((data, sz));
                }
            }
            other => return Err(agent_error(other)),
        }
    }
}

/// A text page that stops inside the file ends on a whole UTF-8 character, so pages joined give the file's
/// text (a character split across two pages would read as two U+FFFD).
fn whole_chars(data: &mut Vec<u8>, encoding: Encoding, start: u64, size: u64) {
    if encoding != Encoding::Utf8 || start + data.len() as u64 >= size {
        return;
    }
    if let Err(e) = std::str::from_utf8(data)
        && e.error_len().is_none()
        && e.valid_up_to() > 0
    {
        data.truncate(e.valid_up_to());
    }
}

async fn write(m: &Manager, a: WriteArgs) -> Result<WriteResult, ToolError> {
    let bytes = match a.encoding {
        Encoding::Utf8 => a.content.into_bytes(),
        Encoding::Base64 => b64::decode(a.content.trim()).map_err(|e| {
            ToolError::invalid_argument("content", format!("is not valid base64: {e}"))
        })?,
    };
    if bytes.len() > MAX_CONTENT_BYTES {
        return Err(ToolError::invalid_argument(
            "content",
            format!(
                "is {} bytes; the limit is {MAX_CONTENT_BYTES} bytes",
                bytes.len()
            ),
        ));
    }
    // The agent writes as PID 1, which the sandbox's RLIMIT_FSIZE does not bind: without this, an offset of
    // 2^62 made a file of that apparent size (sparse, costing nothing here), and an export of it could not end.
    let max_file = m.settings.max_file_mib << 20;
    if !a.append {
        let offset = a.offset.unwrap_or(0);
        if offset.saturating_add(bytes.len() as u64) > max_file {
            let field = if a.offset.is_some() {
                "offset"
            } else {
                "content"
            };
            return Err(ToolError::invalid_argument(
                field,
                format!(
                    "offset {offset} plus {} bytes of content ends past {max_file} bytes, the largest file a \
                     sandbox may hold (--sandbox-max-file-mib / SANDBOX_MAX_FILE_MIB)",
                    bytes.len()
                ),
            )
            .with_details(serde_json::json!({"limit": max_file})));
        }
    }
    let mode = a.mode.as_deref().map(parse_mode).transpose()?;
    let s = m.get(&a.sandbox_id)?;
    let mut written = 0u64;
    let mut first = true;
    // An empty write still creates or truncates the file.
    let chunks: Vec<&[u8]> = if bytes.is_empty() {
        vec![&[]]
    } else {
        bytes.chunks(MAX_CHUNK_BYTES).collect()
    };
    for chunk in chunks {
        let (offset, append) = match (a.append, a.offset) {
            (true, _) => (None, true),
            (false, Some(off)) => (Some(off + written), false),
            // Replace: the first chunk truncates, the rest append.
            (false, None) => (None, !first),
        };
        let op = Op::Write {
            path: a.path.clone(),
            data: chunk.to_vec(),
            offset,
            append,
            mode,
        };
        match s
            .instance
            .client
            .call(op, CHUNK_TIMEOUT)
            .await
            .map_err(|e| s.link_error(e))?
        {
            Body::Ok { written: n } => written += n,
            // The agent's own check of where the write would end (an append's start is the file's size).
            Body::Error {
                kind: ErrorKind::Limit,
                message,
            } => {
                let field = if a.append { "append" } else { "content" };
                // The agent wrote nothing of this chunk; earlier chunks of the content are in the file.
                let message = if written > 0 {
                    format!(
                        "{message}; the first {written} bytes of content were written before it (a retry would \
                         write them again)"
                    )
                } else {
                    message
                };
                return Err(ToolError::too_large(message).with_details(
                    serde_json::json!({"field": field, "limit": max_file, "written": written}),
                ));
            }
            other => return Err(agent_error(other)),
        }
        first = false;
    }
    Ok(WriteResult {
        success: true,
        bytes_written: written,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::session::tests::{data, forging_agent};

    /// A compromised agent answers a read of 10 bytes with 2 MiB: refused, and none of it kept (a page is
    /// 256 KiB; before, every reply was appended whatever its length).
    #[tokio::test]
    async fn a_chunk_longer_than_asked_is_refused() {
        let agent = forging_agent(data(2 << 20, 10));
        let Err(e) = read_range(&agent, "/workspace/f.txt", 0, 10).await else {
            panic!("2 MiB passed a read of 10 bytes");
        };
        assert!(
            e.message().contains("/workspace/f.txt") && e.message().contains("at most 10"),
            "{}",
            e.message()
        );
    }

    #[tokio::test]
    async fn a_chunk_within_what_was_asked_is_kept() {
        let agent = forging_agent(data(10, 10));
        let (data, size) = read_range(&agent, "/workspace/f.txt", 0, 10)
            .await
            .expect("10 of 10 bytes");
        assert_eq!((data.len(), size), (10, 10));
    }
}
