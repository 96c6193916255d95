//! File tools: list, read, write, delete on a computer's file system. Binary-safe (bytes travel as base64)
//! and chunked, so no frame exceeds the link's limit whatever the file size.

use super::reply;
use crate::b64;
use crate::protocol::lua_seq;
use crate::state::State;
use bridge_core::{Rendered, ToolCtx, ToolError, ToolSpec, Validate, check};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Raw bytes per read chunk: 64 KiB of base64 after JSON framing stays under the 64 KiB frame target.
const READ_CHUNK: usize = 45 * 1024;
/// Raw bytes per write chunk, for the same reason.
const WRITE_CHUNK: usize = 45 * 1024;
/// A computer has 1,000,000 bytes by default; allow generous server configs but keep memory bounded.
const MAX_FILE: usize = 8 << 20;

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// UTF-8 text.
    #[default]
    Utf8,
    /// Arbitrary bytes as standard base64.
    Base64,
}

/// A path that climbs above the computer's root (`..`, `/../x`, `a/../../x`) is the caller's mistake, whatever
/// the runtime's `fs.combine` would make of it.
fn check_path(field: &str, path: &str) -> Result<(), ToolError> {
    let mut depth = 0usize;
    for part in path.split(['/', '\\']) {
        match part.trim() {
            "" | "." => {}
            ".." => {
                depth = depth.checked_sub(1).ok_or_else(|| {
                    ToolError::invalid_argument(
                        field,
                        format!("{field} {path:?} climbs above the computer's root"),
                    )
                })?;
            }
            _ => depth += 1,
        }
    }
    Ok(())
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsListArgs {
    /// Computer id (see list_computers).
    pub computer: u32,
    /// Directory, relative to the computer's root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
}
impl Validate for FsListArgs {
    fn validate(&self) -> Result<(), ToolError> {
        self.path
            .as_deref()
            .map_or(Ok(()), |p| check_path("path", p))
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsPathArgs {
    /// Computer id (see list_computers).
    pub computer: u32,
    /// File path, relative to the computer's root (e.g. `startup.lua`, `programs/mine.lua`).
    pub path: String,
}
impl Validate for FsPathArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::non_empty("path", &self.path)?;
        check_path("path", &self.path)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsWriteArgs {
    /// Computer id (see list_computers).
    pub computer: u32,
    /// File path, relative to the computer's root; missing directories are created; an existing file is
    /// replaced only once the whole content arrived.
    pub path: String,
    /// The file's content, as UTF-8 text or base64 (see `encoding`).
    pub content: String,
    /// How `content` is encoded (default utf8).
    #[serde(default)]
    pub encoding: Encoding,
}
impl Validate for FsWriteArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::non_empty("path", &self.path)?;
        check_path("path", &self.path)?;
        check::max_bytes("content", &self.content, MAX_FILE * 4 / 3 + 4)
    }
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Entry {
    pub name: String,
    pub dir: bool,
    /// Bytes; 0 for directories.
    pub size: u64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FsListOut {
    pub path: String,
    pub entries: Vec<Entry>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FsReadOut {
    pub path: String,
    pub size: usize,
    /// utf8 when the bytes are valid UTF-8 text, else base64.
    pub encoding: Encoding,
    pub content: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FsWriteOut {
    pub path: String,
    pub size: usize,
    /// Frames the content travelled in.
    pub chunks: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FsDeleteOut {
    pub deleted: String,
}

#[derive(Deserialize)]
struct ListReply {
    #[serde(deserialize_with = "lua_seq")]
    entries: Vec<Entry>,
}

#[derive(Deserialize)]
struct ReadReply {
    size: usize,
    data: String,
    eof: bool,
}

pub fn specs(state: &Arc<State>) -> Vec<ToolSpec> {
    let (s1, s2, s3, s4) = (state.clone(), state.clone(), state.clone(), state.clone());
    vec![
        ToolSpec::new("fs_list", "List a directory on a computer: names, whether each is a directory, sizes.")
            .title("List Directory")
            .read_only()
            .open_world()
            .handler_with_text(move |args: FsListArgs, _ctx: ToolCtx| {
                let s = s1.clone();
                async move { list(&s, args).await }
            }),
        ToolSpec::new(
            "fs_read",
            "Read a file from a computer. Text comes back as UTF-8 (`encoding: utf8`); other bytes as base64 \
             (`encoding: base64`). Any size: the file travels in chunks.",
        )
        .title("Read File")
        .read_only()
        .open_world()
        .timeout(Duration::from_secs(120))
        .task_support(bridge_core::tool::TaskSupport::Optional)
        .handler_with_text(move |args: FsPathArgs, ctx: ToolCtx| {
            let s = s2.clone();
            async move { read(&s, args, ctx).await }
        }),
        ToolSpec::new(
            "fs_write",
            "Write a file on a computer, creating directories as needed and replacing the file atomically once \
             all of it arrived. Content is UTF-8 text, or base64 with `encoding: base64` for binary files. \
             Mind the computer's disk space (1 MB by default).",
        )
        .title("Write File")
        .destructive()
        .idempotent()
        .open_world()
        .timeout(Duration::from_secs(120))
        .task_support(bridge_core::tool::TaskSupport::Optional)
        .handler_with_text(move |args: FsWriteArgs, ctx: ToolCtx| {
            let s = s3.clone();
            async move { write(&s, args, ctx).await }
        }),
        ToolSpec::new("fs_delete", "Delete a file or a directory (with its contents) on a computer.")
            .title("Delete File")
            .destructive()
            .open_world()
            .handler_with_text(move |args: FsPathArgs, _ctx: ToolCtx| {
                let s = s4.clone();
                async move { delete(&s, args).await }
            }),
    ]
}

async fn list(state: &State, args: FsListArgs) -> Result<Rendered<FsListOut>, ToolError> {
    let computer = state.computer(args.computer)?;
    let path = args.path.unwrap_or_default();
    let result = computer
        .request(
            "fs.list",
            json!({ "path": path }),
            state.cfg.request_timeout,
        )
        .await?;
    let r: ListReply = reply(&computer, result)?;
    let text = if r.entries.is_empty() {
        format!("{} is empty", if path.is_empty() { "/" } else { &path })
    } else {
        r.entries
            .iter()
            .map(|e| {
                if e.dir {
                    format!("{}/", e.name)
                } else {
                    format!("{} ({} bytes)", e.name, e.size)
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(Rendered {
        value: FsListOut {
            path,
            entries: r.entries,
        },
        text,
    })
}

async fn read(
    state: &State,
    args: FsPathArgs,
    ctx: ToolCtx,
) -> Result<Rendered<FsReadOut>, ToolError> {
    let computer = state.computer(args.computer)?;
    let mut bytes: Vec<u8> = Vec::new();
    loop {
        let params = json!({ "path": args.path, "offset": bytes.len(), "length": READ_CHUNK });
        let result = computer
            .request("fs.read", params, state.cfg.request_timeout)
            .await?;
        let r: ReadReply = reply(&computer, result)?;
        if r.size > MAX_FILE {
            return Err(ToolError::too_large(format!(
                "{} is {} bytes; fs_read reads at most {MAX_FILE}",
                args.path, r.size
            ))
            .with_hint("read a part of it with run_lua (fs.open, handle.seek, handle.read)"));
        }
        let chunk = b64::decode(&r.data).map_err(|e| {
            ToolError::internal(format!("computer {} sent bad base64: {e}", computer.id()))
        })?;
        let got = chunk.len();
        bytes.extend_from_slice(&chunk);
        ctx.progress(
            bytes.len() as f64,
            Some(r.size as f64),
            format!("read {} of {} bytes", bytes.len(), r.size),
        )
        .await;
        if r.eof || got == 0 || bytes.len() > MAX_FILE {
            break;
        }
    }
    let size = bytes.len();
    let (encoding, content) = match String::from_utf8(bytes) {
        Ok(text) if !text.contains('\0') => (Encoding::Utf8, text),
        Ok(text) => (Encoding::Base64, b64::encode(text.as_bytes())),
        Err(e) => (Encoding::Base64, b64::encode(e.as_bytes())),
    };
    let text = match encoding {
        Encoding::Utf8 => content.clone(),
        Encoding::Base64 => {
            format!("({size} bytes of binary data, base64 in structuredContent.content)\n{content}")
        }
    };
    Ok(Rendered {
        value: FsReadOut {
            path: args.path,
            size,
            encoding,
            content,
        },
        text,
    })
}

async fn write(
    state: &State,
    args: FsWriteArgs,
    ctx: ToolCtx,
) -> Result<Rendered<FsWriteOut>, ToolError> {
    let bytes = match args.encoding {
        Encoding::Utf8 => args.content.into_bytes(),
        Encoding::Base64 => b64::decode(args.content.trim()).map_err(|e| {
            ToolError::invalid_argument("content", format!("content is not valid base64: {e}"))
        })?,
    };
    if bytes.len() > MAX_FILE {
        return Err(ToolError::too_large(format!(
            "content is {} bytes; the limit is {MAX_FILE}",
            bytes.len()
        )));
    }
    let computer = state.computer(args.computer)?;
    let pieces: Vec<&[u8]> = if bytes.is_empty() {
        vec![&[][..]]
    } else {
        bytes.chunks(WRITE_CHUNK).collect()
    };
    let n = pieces.len();
    for (i, piece) in pieces.iter().enumerate() {
        let part = match (i, n) {
            (_, 1) => "whole",
            (0, _) => "first",
            (i, n) if i + 1 == n => "last",
            _ => "middle",
        };
        let params = json!({ "path": args.path, "data": b64::encode(piece), "part": part });
        computer
            .request("fs.write", params, state.cfg.request_timeout)
            .await?;
        ctx.progress(
            (i + 1) as f64,
            Some(n as f64),
            format!("sent {} of {n} chunks", i + 1),
        )
        .await;
    }
    let size = bytes.len();
    let text = format!("wrote {size} bytes to {} in {n} chunk(s)", args.path);
    Ok(Rendered {
        value: FsWriteOut {
            path: args.path,
            size,
            chunks: n,
        },
        text,
    })
}

async fn delete(state: &State, args: FsPathArgs) -> Result<Rendered<FsDeleteOut>, ToolError> {
    let computer = state.computer(args.computer)?;
    computer
        .request(
            "fs.delete",
            json!({ "path": args.path }),
            state.cfg.request_timeout,
        )
        .await?;
    let text = format!("deleted {}", args.path);
    Ok(Rendered {
        value: FsDeleteOut { deleted: args.path },
        text,
    })
}
