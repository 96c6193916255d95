//! File tools: list, read, write, delete on a computer's file system. Binary-safe (bytes travel as base64)
//! and chunked, so no frame exceeds the link's limit whatever the file size.

use super::reply;
use crate::b64;
use crate::computer::Computer;
use crate::protocol::lua_seq;
use crate::state::State;
use bridge_core::text::for_log;
use bridge_core::{ErrorCode, Rendered, ToolCtx, ToolError, ToolSpec, Validate, check};
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
/// The longest `content` of an `fs_write`: [`MAX_FILE`] bytes in base64.
pub const MAX_WRITE_CONTENT_BYTES: usize = MAX_FILE * 4 / 3 + 4;

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// UTF-8 text.
    #[default]
    Utf8,
    /// Arbitrary bytes as standard base64.
    Base64,
}

/// CC cuts every name in a path at 255 characters (`FileSystem.sanitizePath`), so a longer name silently
/// means another file. Counted in bytes: CC sees a Lua string's bytes as its characters.
const NAME_MAX: usize = 255;
/// What a write adds to its file's name for the temp file it fills first: `.mcp-part-` and a write id of at
/// most 16 hex digits.
const TEMP_SUFFIX_MAX: usize = ".mcp-part-".len() + 16;

/// A path's names as CC resolves them (`FileSystem.sanitizePath`): `\` is `/`; control characters and
/// `"*:<>?|` are dropped; each name is trimmed of spaces (Java's `trim`, which leaves a Unicode space such as
/// U+00A0 in the name, as CC does); empty names, `.` and runs of three or more dots are skipped;
/// `..` takes the name before it back. A path that climbs above the computer's root (`..`, `/../x`,
/// `a/../../x`) is the caller's mistake, whatever the runtime's `fs.combine` would make of it, and so is a name
/// CC would cut.
fn resolve(field: &str, path: &str) -> Result<Vec<String>, ToolError> {
    let cleaned: String = path
        .chars()
        .filter(|c| *c >= ' ' && !matches!(c, '"' | '*' | ':' | '<' | '>' | '?' | '|'))
        .collect();
    let mut names: Vec<String> = Vec::new();
    for part in cleaned.split(['/', '\\']) {
        let part = part.trim_matches(' ');
        if part.is_empty() || (part.bytes().all(|b| b == b'.') && part.len() != 2) {
            continue;
        }
        if part == ".." {
            if names.pop().is_none() {
                return Err(ToolError::invalid_argument(
                    field,
                    format!("{field} {path:?} climbs above the computer's root"),
                ));
            }
            continue;
        }
        if part.len() > NAME_MAX {
            return Err(ToolError::invalid_argument(
                field,
                format!(
                    "{field} has a name of {} bytes ({}); CC cuts names at {NAME_MAX} bytes, so it would be \
                     another file",
                    part.len(),
                    for_log(part)
                ),
            ));
        }
        names.push(part.to_owned());
    }
    Ok(names)
}

fn check_path(field: &str, path: &str) -> Result<(), ToolError> {
    resolve(field, path).map(drop)
}

/// The file as CC names it (`a//b/../c.lua` → `a/c.lua`): what two writes to the same file share.
fn cc_path(path: &str) -> String {
    resolve("path", path).unwrap_or_default().join("/")
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
        check::path("path", &self.path)?;
        check_path("path", &self.path)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsDeleteArgs {
    /// Computer id (see list_computers).
    pub computer: u32,
    /// File or directory, relative to the computer's root; never the root itself.
    pub path: String,
}
impl Validate for FsDeleteArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::path("path", &self.path)?;
        if resolve("path", &self.path)?.is_empty() {
            return Err(ToolError::invalid_argument(
                "path",
                format!(
                    "path {:?} is the computer's root; fs_delete deletes files and directories in it, not \
                     the root (that would erase every program and file on the computer)",
                    for_log(&self.path)
                ),
            )
            .with_hint("call fs_list, then delete the entries you mean one by one"));
        }
        Ok(())
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
        check::path("path", &self.path)?;
        let names = resolve("path", &self.path)?;
        match names.last() {
            None => {
                return Err(ToolError::invalid_argument(
                    "path",
                    format!(
                        "path {:?} is the computer's root, not a file",
                        for_log(&self.path)
                    ),
                ));
            }
            Some(name) if name.len() > NAME_MAX - TEMP_SUFFIX_MAX => {
                return Err(ToolError::invalid_argument(
                    "path",
                    format!(
                        "path's file name is {} bytes; fs_write takes at most {} ({NAME_MAX}, CC's limit, less \
                         {TEMP_SUFFIX_MAX} for the name of the temp file it fills first)",
                        name.len(),
                        NAME_MAX - TEMP_SUFFIX_MAX
                    ),
                )
                .with_hint("choose a shorter file name"));
            }
            Some(_) => {}
        }
        check::max_bytes("content", &self.content, MAX_WRITE_CONTENT_BYTES)
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
    /// `fs.attributes(path).modified` (ms) where the computer has it (CC:Tweaked 1.87+); older clients and
    /// runtimes send none.
    #[serde(default)]
    modified: Option<f64>,
    /// The read id, when the chunk comes from the copy of the file the computer took at the first chunk; a client
    /// without copies, or a file that fits in one chunk or is too large for a copy, sends none.
    #[serde(default)]
    read: Option<String>,
}

#[derive(Deserialize)]
struct WriteReply {
    /// The temp file's size after a chunk; the file's once it is in place.
    size: usize,
    done: bool,
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
             (`encoding: base64`). Up to 8 MiB: the file travels in chunks, all from one copy the computer takes \
             at once, so a file a program writes meanwhile (a growing log) comes back whole, as it was when the \
             read began.",
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
        ToolSpec::new(
            "fs_delete",
            "Delete a file or a directory (with its contents) on a computer; never the root.",
        )
            .title("Delete File")
            .destructive()
            .open_world()
            .handler_with_text(move |args: FsDeleteArgs, _ctx: ToolCtx| {
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

/// How many times `fs_read` starts over (the file changed under a client that keeps no copy, or the computer
/// dropped its copy to make room for other reads) before it gives up.
const READ_ATTEMPTS: usize = 2;

/// How one pass over a file ended.
enum Pass {
    Whole(Vec<u8>),
    /// The file changed between chunks (a client that keeps no copy of it).
    Changed,
    /// The computer dropped its copy of the file before the last chunk.
    CopyDropped,
}

async fn read(
    state: &State,
    args: FsPathArgs,
    ctx: ToolCtx,
) -> Result<Rendered<FsReadOut>, ToolError> {
    let computer = state.computer(args.computer)?;
    let mut attempt = 0;
    let bytes = loop {
        attempt += 1;
        let pass = read_once(state, &computer, &args.path, &ctx).await?;
        let failed = match pass {
            Pass::Whole(bytes) => break bytes,
            _ if attempt < READ_ATTEMPTS => continue,
            Pass::Changed => ToolError::new(
                ErrorCode::Conflict,
                format!(
                    "computer {}: {} changed while it was being read ({READ_ATTEMPTS} tries); a program on the \
                     computer is writing it",
                    computer.id(),
                    args.path
                ),
            )
            .with_hint(
                "read it again once that program is done, or read it with run_lua in one step (fs.open, \
                 handle.readAll) if it is small",
            ),
            Pass::CopyDropped => ToolError::busy(format!(
                "computer {}: the copy of {} being read was dropped to make room for other reads \
                 ({READ_ATTEMPTS} tries)",
                computer.id(),
                args.path
            ))
            .with_hint("read fewer files at once on that computer, then retry"),
        };
        return Err(failed.with_details(json!({"computer": computer.id(), "path": args.path})));
    };
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

/// One pass over the file, chunk by chunk, under a read id of its own. The client copies the whole file at the
/// first chunk and serves the rest from that copy (its replies carry the id), so the chunks are one version of
/// the file by construction. A client that keeps no copy is checked instead: every chunk must have the first
/// one's size and modification time, and the file must not end short of that size.
async fn read_once(
    state: &State,
    computer: &Arc<Computer>,
    path: &str,
    ctx: &ToolCtx,
) -> Result<Pass, ToolError> {
    let read_id = state.writes.next_id();
    // Until the last chunk, the computer may hold a copy of the file for this read: a read that stops early for
    // any reason (an error, a timeout, a cancelled call, a new pass) tells it to drop the copy.
    let mut release = CleanupOnDrop {
        computer: Some(computer.clone()),
        method: "fs.read_done",
        params: json!({ "read": read_id }),
        timeout: state.cfg.request_timeout,
    };
    let mut bytes: Vec<u8> = Vec::new();
    let mut first: Option<(usize, Option<f64>, bool)> = None;
    loop {
        // A first chunk served without a copy (no room on the computer, or a client that keeps none): the rest
        // is asked for without the id, and checked chunk by chunk.
        let mut params = json!({ "path": path, "offset": bytes.len(), "length": READ_CHUNK });
        if first.is_none_or(|(_, _, copy)| copy) {
            params["read"] = json!(read_id);
        }
        let result = match computer
            .request("fs.read", params, state.cfg.request_timeout)
            .await
        {
            Ok(result) => result,
            Err(e)
                if first.is_some_and(|(_, _, copy)| copy)
                    && e.code() == ErrorCode::Conflict
                    && e.details()["read"] == "dropped" =>
            {
                return Ok(Pass::CopyDropped);
            }
            Err(e) => return Err(e),
        };
        let r: ReadReply = reply(computer, result)?;
        if r.size > MAX_FILE {
            return Err(ToolError::too_large(format!(
                "{path} is {} bytes; fs_read reads at most {MAX_FILE}",
                r.size
            ))
            .with_hint("read a part of it with run_lua (fs.open, handle.seek, handle.read)"));
        }
        let copy = r.read.as_deref() == Some(read_id.as_str());
        if first.is_none() && !copy {
            // No copy was taken (one chunk holds the file, or the client keeps none): nothing to drop.
            release.disarm();
        }
        // Chunks from one copy are one version whatever its modification time says.
        let version = (r.size, if copy { None } else { r.modified }, copy);
        if *first.get_or_insert(version) != version {
            return Ok(Pass::Changed);
        }
        let chunk = b64::decode(&r.data).map_err(|e| {
            ToolError::internal(format!("computer {} sent bad base64: {e}", computer.id()))
        })?;
        let got = chunk.len();
        bytes.extend_from_slice(&chunk);
        if bytes.len() > r.size {
            return Ok(Pass::Changed);
        }
        ctx.progress(
            bytes.len() as f64,
            Some(r.size as f64),
            format!("read {} of {} bytes", bytes.len(), r.size),
        )
        .await;
        if r.eof || got == 0 {
            // The client dropped its copy with the last chunk.
            release.disarm();
            // Short of the size the file had: it shrank, whatever the computer says about the end.
            return Ok(if bytes.len() == r.size {
                Pass::Whole(bytes)
            } else {
                Pass::Changed
            });
        }
    }
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
    // One write at a time per file: two would race to replace it.
    let _turn = state.writes.turn(computer.id(), cc_path(&args.path)).await;
    let write_id = state.writes.next_id();
    // Until the file is in place, a write that stops for any reason (an error, a timeout, a cancelled call)
    // tells the computer to delete its temp file.
    let mut abort = CleanupOnDrop {
        computer: Some(computer.clone()),
        method: "fs.abort",
        params: json!({ "path": args.path, "write": write_id }),
        timeout: state.cfg.request_timeout,
    };
    let pieces: Vec<&[u8]> = if bytes.is_empty() {
        vec![&[][..]]
    } else {
        bytes.chunks(WRITE_CHUNK).collect()
    };
    let n = pieces.len();
    let mut sent = 0;
    for (i, piece) in pieces.iter().enumerate() {
        let part = match (i, n) {
            (_, 1) => "whole",
            (0, _) => "first",
            (i, n) if i + 1 == n => "last",
            _ => "middle",
        };
        let params = json!({ "path": args.path, "data": b64::encode(piece), "part": part, "write": write_id });
        let result = computer
            .request("fs.write", params, state.cfg.request_timeout)
            .await?;
        let r: WriteReply = reply(&computer, result)?;
        sent += piece.len();
        let last = i + 1 == n;
        if r.size != sent || r.done != last {
            return Err(ToolError::new(
                ErrorCode::Conflict,
                format!(
                    "computer {}: {} held {} bytes after {sent} were sent{}; something else on the computer \
                     wrote it at the same time",
                    computer.id(),
                    args.path,
                    r.size,
                    if last && r.done { " (the file is in place)" } else { "" },
                ),
            )
            .with_hint("read the file back (fs_read) and write it again if it is wrong")
            .with_details(json!({"computer": computer.id(), "path": args.path, "size": r.size, "sent": sent})));
        }
        ctx.progress(
            (i + 1) as f64,
            Some(n as f64),
            format!("sent {} of {n} chunks", i + 1),
        )
        .await;
    }
    abort.disarm();
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

async fn delete(state: &State, args: FsDeleteArgs) -> Result<Rendered<FsDeleteOut>, ToolError> {
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

/// How many times a clean-up request is sent when the computer answers it busy or not in time.
const CLEANUP_ATTEMPTS: u32 = 3;
/// The wait before the second try; doubled before the third.
const CLEANUP_BACKOFF: Duration = Duration::from_millis(500);

/// Tells the computer to free what an unfinished request left there when it is dropped armed: a write's temp
/// file (`fs.abort`, when the write's call failed, timed out or was cancelled: the handler is dropped then,
/// between chunks as well as during one) or a read's copy of a file (`fs.read_done`). Nobody waits for the
/// answer, so it is sent from a task of its own, tried again a few times while the computer is busy or slow,
/// and given up when the computer is gone (its client drops both when its link drops) or says no.
struct CleanupOnDrop {
    computer: Option<Arc<Computer>>,
    method: &'static str,
    params: serde_json::Value,
    timeout: Duration,
}

impl CleanupOnDrop {
    fn disarm(&mut self) {
        self.computer = None;
    }
}

impl Drop for CleanupOnDrop {
    fn drop(&mut self) {
        let Some(computer) = self.computer.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (method, params, timeout) = (self.method, self.params.take(), self.timeout);
        runtime.spawn(async move {
            let mut backoff = CLEANUP_BACKOFF;
            for attempt in 1..=CLEANUP_ATTEMPTS {
                match computer
                    .cleanup_request(method, params.clone(), timeout)
                    .await
                {
                    Err(e)
                        if attempt < CLEANUP_ATTEMPTS
                            && matches!(e.code(), ErrorCode::Busy | ErrorCode::Timeout) =>
                    {
                        tokio::time::sleep(backoff).await;
                        backoff *= 2;
                    }
                    _ => return,
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_resolve_as_cc_resolves_them() {
        assert_eq!(resolve("path", "a//b/../c.lua").unwrap(), ["a", "c.lua"]);
        assert_eq!(resolve("path", "\\a\\ ./.../b?|").unwrap(), ["a", "b"]);
        assert_eq!(cc_path("/x/./y"), "x/y");
        for root in ["/", ".", "a/..", "./", "\\", "..."] {
            assert!(resolve("path", root).unwrap().is_empty(), "{root:?}");
        }
        for above in ["..", "/../x", "a/../../x", ".?./x"] {
            let e = resolve("path", above).unwrap_err();
            assert!(e.message().contains("climbs above"), "{above:?}: {e:?}");
        }
        assert!(resolve("path", &"n".repeat(NAME_MAX)).is_ok());
        let e = resolve("path", &format!("d/{}/f", "n".repeat(NAME_MAX + 1))).unwrap_err();
        assert!(
            e.message().contains("256 bytes") && e.message().contains("255"),
            "{e:?}"
        );
        // Java's `trim` takes spaces only: CC keeps a Unicode space (and DEL) in a name, and counts its bytes.
        assert_eq!(
            resolve("path", " \u{a0}a\u{2003} /..\u{7f}").unwrap(),
            ["\u{a0}a\u{2003}", "..\u{7f}"]
        );
        let spaced = format!("{}\u{a0}", "n".repeat(NAME_MAX - 1));
        let e = resolve("path", &spaced).unwrap_err();
        assert!(e.message().contains("256 bytes"), "{e:?}");
    }

    #[test]
    fn a_write_leaves_room_for_its_temp_name_and_a_delete_spares_the_root() {
        let write = |path: &str| FsWriteArgs {
            computer: 1,
            path: path.into(),
            content: String::new(),
            encoding: Encoding::Utf8,
        };
        assert!(
            write(&"w".repeat(NAME_MAX - TEMP_SUFFIX_MAX))
                .validate()
                .is_ok()
        );
        let e = write(&"w".repeat(NAME_MAX - TEMP_SUFFIX_MAX + 1))
            .validate()
            .unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert!(
            e.message().contains("path") && e.message().contains("255"),
            "{e:?}"
        );
        // The name that counts is the one the path ends at once resolved.
        assert!(
            write(&format!("{}/..", "w".repeat(NAME_MAX)))
                .validate()
                .is_err()
        );
        assert!(write("a/..").validate().is_err());
        let delete = |path: &str| FsDeleteArgs {
            computer: 1,
            path: path.into(),
        };
        assert!(
            delete("/")
                .validate()
                .unwrap_err()
                .message()
                .contains("root")
        );
        assert!(delete("a/b").validate().is_ok());
    }
}
