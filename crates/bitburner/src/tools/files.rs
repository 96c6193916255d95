//! The file tools (docs/bitburner.md, "Tools"): one tool, one Remote API method.

use super::Ctx;
use super::args::{AllFilesArgs, FileArgs, ReadArgs, ServerArgs, WriteArgs, game_path};
use super::page::{DEFAULT_PAGE_BYTES, PageInfo, page_text};
use super::pins::{PinKey, Pinned, cursor_of};
use super::reply::{expect_string, parse, unconfirmed};
use crate::resources::file_uri;
use crate::wire::Method;
use bridge_core::{Rendered, ToolError, ToolSpec, check};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;

#[derive(Debug, Serialize, JsonSchema)]
pub struct FileList {
    pub server: String,
    /// Paths without a leading `/`; the game lists text files first, then scripts.
    pub files: Vec<String>,
    pub count: usize,
}

/// What `read_file` returns besides the page of the file itself, which is the text result (and only there:
/// a large file is never sent twice in one reply).
#[derive(Debug, Serialize, JsonSchema)]
pub struct FileContent {
    pub server: String,
    pub filename: String,
    #[serde(flatten)]
    pub page: PageInfo,
    /// Pass with the next `offset`: the next pages come from this same content, downloaded once. Present
    /// while the file is not read whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// True when the file changed since the `cursor` passed in: this page starts over at offset 0.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub restarted: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Written {
    pub server: String,
    /// The path as the game stores it.
    pub filename: String,
    pub bytes: usize,
    /// The resource that now holds the file.
    pub uri: String,
    /// How the write is known to have happened when the game's answer was lost (its connection replaced
    /// mid-call): read back from the new connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Deleted {
    pub server: String,
    pub filename: String,
    pub deleted: bool,
    /// As in `write_file`: how the delete is known when the game's answer was lost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<String>,
}

/// One file as `getAllFiles` sends it.
#[derive(Debug, Deserialize)]
pub struct FileEntry {
    pub filename: String,
    pub content: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PagedFile {
    pub filename: String,
    pub bytes: usize,
    /// False when the file alone is larger than `max_bytes`: read it with read_file (offset/limit).
    pub included: bool,
}

/// What `get_all_files` returns besides the contents, which are the text result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AllFiles {
    pub server: String,
    /// The files of this page, scripts first, then text files (the game's order).
    pub files: Vec<PagedFile>,
    /// Files on the server.
    pub total_files: usize,
    /// Content bytes of every file on the server.
    pub total_bytes: usize,
    /// Pass as `offset` for the next page; absent after the last file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Ram {
    pub server: String,
    pub filename: String,
    /// RAM one thread of the script needs, in GB.
    pub ram_gb: f64,
}

/// What the game connected now says about a file after a call whose answer was lost.
enum ReadBack {
    Content(String),
    Missing,
    Unknown,
}

const READ_BACK_APPLIED: &str = "the game connection was replaced while the call was in flight, so its answer was \
lost; read back from the new connection: applied";

/// Whether a game error says the file does not exist (v2.x and v3 wording).
fn is_missing(message: &str) -> bool {
    message == "File doesn't exist" || message.starts_with("File does not exist")
}

/// A call the link sent and then lost with its connection (`link::GameLink::call_within`).
fn in_flight(e: &ToolError) -> bool {
    e.code() == bridge_core::ErrorCode::Disconnected
        && e.details().get("in_flight") == Some(&Value::Bool(true))
}

/// The call's answer was lost, and the game connected now shows it did not happen there.
fn not_applied(e: ToolError, server: &str, path: &str, what: &str) -> ToolError {
    let details = e.details().clone();
    ToolError::disconnected(format!(
        "{}; read back from the game connected now, `{path}` on `{server}` {what}: not applied there",
        e.message()
    ))
    .with_hint(format!(
        "do it again on the game connected now (read_file `{path}` shows what is there)"
    ))
    .with_details(details)
}

/// The header line before each file in `get_all_files`' text.
fn file_header(f: &PagedFile) -> String {
    if f.included {
        format!("// ==== {} ({} bytes) ====\n", f.filename, f.bytes)
    } else {
        format!(
            "// ==== {} ({} bytes: larger than this page, read it with read_file) ====\n",
            f.filename, f.bytes
        )
    }
}

impl Ctx {
    pub async fn list_files(&self, args: ServerArgs) -> Result<FileList, ToolError> {
        let value = self.call(Method::GetFileNames, args.params()).await?;
        let files: Vec<String> = parse(Method::GetFileNames, value)?;
        Ok(FileList {
            server: args.server,
            count: files.len(),
            files,
        })
    }

    /// The whole content of one file.
    pub async fn file_content(&self, args: &FileArgs) -> Result<(String, String), ToolError> {
        let (path, params) = args.params()?;
        let value = self.call(Method::GetFile, params).await?;
        Ok((path, expect_string(Method::GetFile, value)?))
    }

    /// One page of a file: its metadata, and the page's text. The first page downloads the file and pins
    /// it (`pins`); the next pages are cut from the pinned content, so a whole file costs one download.
    pub async fn read_file(&self, args: ReadArgs) -> Result<Rendered<FileContent>, ToolError> {
        let file = args.file();
        let (path, params) = file.params()?;
        let key = PinKey {
            connection: self.link.connection_count(),
            server: args.server.clone(),
            path: path.clone(),
        };
        let mut page = args.page();
        let pinned = if page.offset > 0 {
            self.pins.get(&key, args.cursor.as_deref())
        } else {
            None
        };
        let mut restarted = false;
        let pinned = match pinned {
            Some(p) => p,
            None => {
                let expected = self.pins.size_of(&args.server, &path);
                let value = self.call_sized(Method::GetFile, params, expected).await?;
                let content = expect_string(Method::GetFile, value)?;
                self.pins.size_seen(&args.server, &path, content.len());
                let cursor = cursor_of(&content);
                restarted = page.offset > 0 && args.cursor.as_ref().is_some_and(|c| *c != cursor);
                Pinned {
                    content: Arc::new(content),
                    cursor,
                }
            }
        };
        if restarted {
            page.offset = 0;
        }
        let (mut text, info) = page_text(&pinned.content, &page, "read_file")?;
        if restarted {
            text.push_str(
                "\n[the file changed since that cursor: this page starts over at offset 0; pages read before \
                 belong to the old content]",
            );
        }
        let partial = !info.complete();
        if info.next_offset.is_some() {
            self.pins.put(key, pinned.clone());
        }
        Ok(Rendered {
            text,
            value: FileContent {
                server: args.server,
                filename: path,
                page: info,
                cursor: partial.then_some(pinned.cursor),
                restarted,
            },
        })
    }

    pub async fn write_file(&self, args: WriteArgs) -> Result<Written, ToolError> {
        let path = game_path("filename", &args.filename)?;
        check::max_bytes("content", &args.content, self.limits.file_write_max_bytes).map_err(|e| {
            e.with_hint(
                "the game replaces the whole file on every write, so it cannot be written in pieces: make it \
                 smaller (split it into modules that import each other), or ask the user to raise the limit \
                 (--bitburner-file-write-max-bytes)",
            )
        })?;
        let bytes = args.content.len();
        let written = cursor_of(&args.content);
        let params = Map::from_iter([
            ("filename".to_owned(), Value::from(path.as_str())),
            ("content".to_owned(), Value::String(args.content)),
            ("server".to_owned(), Value::from(args.server.as_str())),
        ]);
        let sent = self.call_sized(Method::PushFile, params, Some(bytes)).await;
        self.pins.drop_file(&args.server, &path);
        let confirmed = match sent {
            Ok(_) => None,
            Err(e) if in_flight(&e) => {
                let now = self.read_back(&args.server, &path).await;
                match now {
                    ReadBack::Content(c) if cursor_of(&c) == written => {
                        Some(READ_BACK_APPLIED.to_owned())
                    }
                    ReadBack::Content(_) | ReadBack::Missing => {
                        return Err(not_applied(
                            e,
                            &args.server,
                            &path,
                            "is not what was written",
                        ));
                    }
                    ReadBack::Unknown => return Err(e),
                }
            }
            Err(e) => return Err(unconfirmed(Method::PushFile, &args.server, &path, e)),
        };
        self.pins.size_seen(&args.server, &path, bytes);
        let uri = file_uri(&args.server, &path);
        self.hub.resource_updated(&uri);
        Ok(Written {
            server: args.server,
            filename: path,
            bytes,
            uri,
            confirmed,
        })
    }

    pub async fn delete_file(&self, args: FileArgs) -> Result<Deleted, ToolError> {
        let (path, params) = args.params()?;
        let sent = self.call(Method::DeleteFile, params).await;
        self.pins.drop_file(&args.server, &path);
        let confirmed = match sent {
            Ok(_) => None,
            Err(e) if in_flight(&e) => match self.read_back(&args.server, &path).await {
                ReadBack::Missing => Some(READ_BACK_APPLIED.to_owned()),
                ReadBack::Content(_) => {
                    return Err(not_applied(e, &args.server, &path, "is still there"));
                }
                ReadBack::Unknown => return Err(e),
            },
            Err(e) => return Err(unconfirmed(Method::DeleteFile, &args.server, &path, e)),
        };
        self.hub.resource_updated(&file_uri(&args.server, &path));
        Ok(Deleted {
            server: args.server,
            filename: path,
            deleted: true,
            confirmed,
        })
    }

    /// The file as the game connected now has it, after a call whose answer was lost.
    async fn read_back(&self, server: &str, path: &str) -> ReadBack {
        if !self.link.is_connected() {
            return ReadBack::Unknown;
        }
        let params = Map::from_iter([
            ("filename".to_owned(), Value::from(path)),
            ("server".to_owned(), Value::from(server)),
        ]);
        let expected = self.pins.size_of(server, path);
        match self.call_sized(Method::GetFile, params, expected).await {
            Ok(Value::String(c)) => ReadBack::Content(c),
            Ok(_) => ReadBack::Unknown,
            Err(e) if e.code() == bridge_core::ErrorCode::Remote && is_missing(e.message()) => {
                ReadBack::Missing
            }
            Err(_) => ReadBack::Unknown,
        }
    }

    /// Every file of a server with its whole content (for `pull`).
    pub async fn all_files(&self, server: &str) -> Result<Vec<FileEntry>, ToolError> {
        let params = ServerArgs {
            server: server.to_owned(),
        }
        .params();
        // Sized by the last listing of this server: `*` is no file name the game allows.
        let expected = self.pins.size_of(server, "*");
        let value = self
            .call_sized(Method::GetAllFiles, params, expected)
            .await?;
        let files: Vec<FileEntry> = parse(Method::GetAllFiles, value)?;
        let total = files
            .iter()
            .map(|f| f.content.len() + f.filename.len())
            .sum();
        self.pins.size_seen(server, "*", total);
        Ok(files)
    }

    /// One page of a server's files: whole files while they fit in `max_bytes`, at least one per page.
    pub async fn get_all_files(&self, args: AllFilesArgs) -> Result<Rendered<AllFiles>, ToolError> {
        let all = self.all_files(&args.server).await?;
        let total_files = all.len();
        if args.offset > total_files {
            return Err(ToolError::invalid_argument(
                "offset",
                format!(
                    "`offset` is {}; the server has {total_files} files",
                    args.offset
                ),
            ));
        }
        let budget = args.max_bytes.unwrap_or(DEFAULT_PAGE_BYTES);
        let total_bytes = all.iter().map(|f| f.content.len()).sum();
        let mut used = 0;
        let mut text = String::new();
        let mut files = Vec::new();
        for file in all.iter().skip(args.offset) {
            let bytes = file.content.len();
            let fits = used + bytes <= budget;
            if !fits && !files.is_empty() {
                break;
            }
            let entry = PagedFile {
                filename: file.filename.clone(),
                bytes,
                included: fits,
            };
            text.push_str(&file_header(&entry));
            if fits {
                used += bytes;
                text.push_str(&file.content);
                if !file.content.is_empty() && !file.content.ends_with('\n') {
                    text.push('\n');
                }
            }
            files.push(entry);
        }
        let end = args.offset + files.len();
        let next_offset = (end < total_files).then_some(end);
        if let Some(next) = next_offset {
            text.push_str(&format!(
                "[files {}..{end} of {total_files}; call get_all_files again with offset {next} for the rest]\n",
                args.offset
            ));
        }
        Ok(Rendered {
            text,
            value: AllFiles {
                server: args.server,
                files,
                total_files,
                total_bytes,
                next_offset,
            },
        })
    }

    pub async fn calculate_ram(&self, args: FileArgs) -> Result<Ram, ToolError> {
        let (path, params) = args.params()?;
        let value = self.call(Method::CalculateRam, params).await?;
        let ram_gb = parse(Method::CalculateRam, value)?;
        Ok(Ram {
            server: args.server,
            filename: path,
            ram_gb,
        })
    }
}

pub fn specs(ctx: &Ctx) -> Vec<ToolSpec> {
    let budget = ctx.budget(1, ctx.link.config().rpc_timeout);
    // Reads and writes of large files get deadlines that grow with the size (`Ctx::call_sized`); a write
    // cut by a replaced connection is read back: room for two such requests.
    let large = ctx.link.config().rpc_timeout
        + super::transfer_allowance(
            ctx.limits
                .file_write_max_bytes
                .max(super::page::MAX_PAGE_BYTES),
        );
    let transfer_budget = ctx.budget(2, large);
    let list = ToolSpec::new(
        "list_files",
        "List the script and text files on an in-game server (game method getFileNames).",
    )
    .title("List Files")
    .read_only()
    .open_world()
    .timeout(budget)
    .handler_on(ctx.clone(), |c, args: ServerArgs, _| async move {
        c.list_files(args).await
    });

    let read = ToolSpec::new(
        "read_file",
        "Read one script or text file from an in-game server (game method getFile). The text result is the \
         file's content, 64 KiB at a time by default: `offset`/`limit` page through larger files, and the \
         structured result gives `total_bytes` and `next_offset`.",
    )
    .title("Read File")
    .read_only()
    .open_world()
    .timeout(transfer_budget)
    .task_support(bridge_core::tool::TaskSupport::Optional)
    .handler_with_text_on(ctx.clone(), |c, args: ReadArgs, _| async move {
        c.read_file(args).await
    });

    let write = ToolSpec::new(
        "write_file",
        "Create or overwrite a script or text file on an in-game server (game method pushFile). Extensions: \
         .js .jsx .ts .tsx .script .txt .json .css (.ts/.jsx/.tsx need game v2.7+, .css v3.0+).",
    )
    .title("Write File")
    .destructive()
    .idempotent()
    .open_world()
    .timeout(transfer_budget)
    .task_support(bridge_core::tool::TaskSupport::Optional)
    .handler_on(ctx.clone(), |c, args: WriteArgs, _| async move { c.write_file(args).await });

    let delete = ToolSpec::new(
        "delete_file",
        "Delete a script or text file from an in-game server (game method deleteFile). A running script \
         cannot be deleted.",
    )
    .title("Delete File")
    .destructive()
    .open_world()
    .timeout(transfer_budget)
    .handler_on(ctx.clone(), |c, args: FileArgs, _| async move { c.delete_file(args).await });

    let all = ToolSpec::new(
        "get_all_files",
        "Read the script and text files of an in-game server (game method getAllFiles): whole files, up to \
         `max_bytes` (64 KiB by default) per page, each after a `// ==== name (N bytes) ====` line in the text \
         result; `offset` (a file index) and `next_offset` page through the rest.",
    )
    .title("Read All Files")
    .read_only()
    .open_world()
    .timeout(transfer_budget)
    .handler_with_text_on(ctx.clone(), |c, args: AllFilesArgs, _| async move {
        c.get_all_files(args).await
    });

    let ram = ToolSpec::new(
        "calculate_ram",
        "RAM in GB one thread of a script needs (game method calculateRam). The script and the files it \
         imports must already be on that server: write them first.",
    )
    .title("Calculate Script RAM")
    .read_only()
    .open_world()
    .timeout(budget)
    .handler_on(ctx.clone(), |c, args: FileArgs, _| async move { c.calculate_ram(args).await });

    vec![list, read, write, delete, all, ram]
}
