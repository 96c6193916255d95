//! Tools beyond the file tools: definitions, servers, file metadata, saves, and the link status.

use super::Ctx;
use super::args::{DefinitionArgs, FileArgs, SaveArgs, ServerArgs};
use super::definitions;
use super::page::{PageInfo, page_text};
use super::reply::{expect_string, parse};
use crate::link::{LinkStatus, Support};
use crate::wire::Method;
use bridge_core::{ErrorCode, NoArgs, Rendered, ToolError, ToolSpec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What `get_netscript_definitions` returns besides the declarations themselves, which are the text result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Definitions {
    /// Size of the whole `NetscriptDefinitions.d.ts` of the connected game, in bytes.
    pub file_bytes: usize,
    pub strip_exports: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<String>,
    /// Lines that matched `search`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matches: Option<usize>,
    /// Where this page sits in the selected text (the whole file, the namespace, or the search results).
    #[serde(flatten)]
    pub page: PageInfo,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ServerInfo {
    pub hostname: String,
    #[serde(rename(deserialize = "hasAdminRights"))]
    pub has_admin_rights: bool,
    #[serde(rename(deserialize = "purchasedByPlayer"))]
    pub purchased_by_player: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Servers {
    pub servers: Vec<ServerInfo>,
    pub count: usize,
}

/// File times in milliseconds since the Unix epoch, as the game reports them.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct FileMetadata {
    pub filename: String,
    pub atime: f64,
    pub mtime: f64,
    pub btime: f64,
    /// Only some game versions report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<f64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct AllMetadata {
    pub server: String,
    pub files: Vec<FileMetadata>,
    pub count: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SavedGame {
    /// Where the save was written on this machine.
    pub path: String,
    pub bytes: usize,
    pub identifier: String,
    /// Whether the game sent a compressed (binary) save.
    pub binary: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Status {
    #[serde(flatten)]
    pub link: LinkStatus,
    /// Per Remote API method: does the connected game answer it? Learned by asking; `unknown` until then.
    pub methods: BTreeMap<String, Support>,
    /// The game version range implied by `methods`.
    pub game_version: String,
    /// What to do next.
    pub advice: String,
}

#[derive(Deserialize)]
struct RawSave {
    identifier: String,
    binary: bool,
    save: String,
}

/// `removeExportFromDeclarations` of bitburner-filesync: the in-game editor treats the types as globals.
fn strip_exports(text: &str) -> String {
    text.lines()
        .map(|line| {
            let indent = line.len() - line.trim_start().len();
            match line[indent..].strip_prefix("export ") {
                Some(rest) => format!("{}{}", &line[..indent], rest),
                None => line.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Ctx {
    pub async fn definitions(&self) -> Result<Arc<String>, ToolError> {
        if let Some(text) = self.link.cached_definitions() {
            return Ok(text);
        }
        // The declarations are ~350 KB (`docs/protocols/bitburner.md` §5).
        let value = self
            .call_sized(Method::GetDefinitionFile, Map::new(), Some(400_000))
            .await?;
        let text = Arc::new(expect_string(Method::GetDefinitionFile, value)?);
        self.link.cache_definitions(Arc::clone(&text));
        Ok(text)
    }

    /// The part of the definitions `args` selects, one page of it as the text.
    pub async fn get_netscript_definitions(
        &self,
        args: DefinitionArgs,
    ) -> Result<Rendered<Definitions>, ToolError> {
        let file = self.definitions().await?;
        let (mut selected, first_line) = match &args.namespace {
            Some(name) => {
                let section = definitions::namespace(&file, name)?;
                (section.text, section.first_line)
            }
            None => (file.as_str().to_owned(), 1),
        };
        if args.strip_exports {
            selected = strip_exports(&selected);
        }
        let mut matches = None;
        if let Some(term) = &args.search {
            let found = definitions::search(&selected, term, first_line);
            matches = Some(found.matches);
            selected = found.text;
        }
        let (text, page) = page_text(&selected, &args.page(), "get_netscript_definitions")?;
        Ok(Rendered {
            text,
            value: Definitions {
                file_bytes: file.len(),
                strip_exports: args.strip_exports,
                namespace: args.namespace,
                search: args.search,
                matches,
                page,
            },
        })
    }

    pub async fn get_all_servers(&self) -> Result<Servers, ToolError> {
        let value = self.call(Method::GetAllServers, Map::new()).await?;
        let servers: Vec<ServerInfo> = parse(Method::GetAllServers, value)?;
        Ok(Servers {
            count: servers.len(),
            servers,
        })
    }

    pub async fn get_file_metadata(&self, args: FileArgs) -> Result<FileMetadata, ToolError> {
        let (_, params) = args.params()?;
        let value = self.call(Method::GetFileMetadata, params).await?;
        parse(Method::GetFileMetadata, value)
    }

    pub async fn get_all_file_metadata(&self, args: ServerArgs) -> Result<AllMetadata, ToolError> {
        let value = self.call(Method::GetAllFileMetadata, args.params()).await?;
        let files: Vec<FileMetadata> = parse(Method::GetAllFileMetadata, value)?;
        Ok(AllMetadata {
            server: args.server,
            count: files.len(),
            files,
        })
    }

    pub async fn get_save_file(&self, args: SaveArgs) -> Result<SavedGame, ToolError> {
        let Some(dir) = self.limits.save_dir.clone() else {
            return Err(ToolError::unsupported("saving the game to disk is turned off").with_hint(
                "ask the user to restart the bridge with --bitburner-save-dir DIR (or BITBURNER_SAVE_DIR) naming a \
                 directory saves may be written to",
            ));
        };
        let value = self.call(Method::GetSaveFile, Map::new()).await?;
        let raw: RawSave = parse(Method::GetSaveFile, value)?;
        let bytes = if raw.binary {
            // One char per byte (`String.fromCharCode`): not UTF-8.
            raw.save
                .chars()
                .map(|c| u8::try_from(u32::from(c)))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|_| {
                    ToolError::remote("the game sent a binary save with a character above U+00FF")
                })?
        } else {
            raw.save.into_bytes()
        };
        let name = args.filename.unwrap_or_else(|| {
            let ms = crate::link::unix_ms(std::time::SystemTime::now());
            let ext = if raw.binary { "json.gz" } else { "json" };
            format!("bitburner-save-{ms}.{ext}")
        });
        let path = dir.join(&name);
        let len = bytes.len();
        write_new(&dir, &name, bytes, args.overwrite).await?;
        Ok(SavedGame {
            path: path.display().to_string(),
            bytes: len,
            identifier: raw.identifier,
            binary: raw.binary,
        })
    }

    /// The link state, after asking the game about each method whose support is still unknown. `getSaveFile`
    /// is never probed (it builds a whole save); its support follows from the version the others imply.
    pub async fn status(&self) -> Status {
        if self.link.is_connected() {
            let support = self.link.support();
            let unknown = |m: Method| support.get(&m) == Some(&Support::Unknown);
            // Probes whose only purpose is their "Unknown message received" or not; results are discarded.
            if unknown(Method::GetAllServers) {
                let _ = self.link.call(Method::GetAllServers, Map::new()).await;
            }
            let probe_file = Map::from_iter([
                ("filename".to_owned(), Value::from("mcp-bridges-probe.txt")),
                ("server".to_owned(), Value::from("home")),
            ]);
            if unknown(Method::GetFileMetadata) {
                let _ = self.link.call(Method::GetFileMetadata, probe_file).await;
            }
        }
        let mut support = self.link.support();
        let servers = support.get(&Method::GetAllServers).copied();
        let metadata = support.get(&Method::GetFileMetadata).copied();
        // getAllFileMetadata arrived together with getFileMetadata (v3.0.0).
        if let Some(m) = metadata.filter(|m| *m != Support::Unknown) {
            support.entry(Method::GetAllFileMetadata).and_modify(|s| {
                if *s == Support::Unknown {
                    *s = m;
                }
            });
        }
        let game_version = match (servers, metadata) {
            (_, Some(Support::Yes)) => "3.0 or newer",
            (Some(Support::No), _) => "older than 2.6",
            (Some(Support::Yes), Some(Support::No)) => "2.6 to 2.8.x",
            _ => "unknown",
        };
        let save = support
            .entry(Method::GetSaveFile)
            .or_insert(Support::Unknown);
        if *save == Support::Unknown {
            *save = match (servers, metadata) {
                (_, Some(Support::Yes)) => Support::Yes,
                (Some(Support::No), _) => Support::No,
                _ => Support::Unknown,
            };
        }
        let link = self.link.status();
        let advice = if link.connected {
            advice(&support)
        } else {
            self.link
                .not_connected("no game is connected")
                .hint()
                .to_owned()
        };
        Status {
            link,
            methods: support
                .into_iter()
                .map(|(m, s)| (m.name().to_owned(), s))
                .collect(),
            game_version: game_version.to_owned(),
            advice,
        }
    }
}

/// What a connected game lets the agent do, consistent with `methods`: the tools whose method it lacks are
/// named, with the game version that added them.
fn advice(support: &BTreeMap<Method, Support>) -> String {
    let lacking: Vec<String> = support
        .iter()
        .filter(|(_, s)| **s == Support::No)
        .map(|(m, _)| {
            format!(
                "{} ({} needs Bitburner {})",
                super::tool_for(*m),
                m.name(),
                m.since()
            )
        })
        .collect();
    if lacking.is_empty() {
        return "connected: every tool can be used".to_owned();
    }
    format!(
        "connected, but this game version lacks some methods, so these tools fail with E_UNSUPPORTED: {}. \
         Every other tool can be used; updating the game adds the rest",
        lacking.join(", ")
    )
}

/// Writes a save as `dir/name`. A new one is created exclusively (which refuses any name that exists, a symlink
/// too); an overwrite replaces the file atomically and never through or over a symlink, as the sync writes (an
/// attack run had `overwrite: true` truncate a file outside the save directory through a planted link).
async fn write_new(
    dir: &std::path::Path,
    name: &str,
    bytes: Vec<u8>,
    overwrite: bool,
) -> Result<(), ToolError> {
    let path = dir.join(name);
    let failed = |e: std::io::Error| {
        ToolError::internal(format!("cannot write {}: {e}", path.display()))
            .with_hint("check that the save directory exists and is writable")
    };
    if overwrite {
        let (dir, name) = (dir.to_path_buf(), name.to_owned());
        let written = tokio::task::spawn_blocking(move || {
            crate::sync::write::write_inside(&dir, &name, &bytes)
        })
        .await
        .map_err(|e| ToolError::internal(format!("the save's write stopped: {e}")))?;
        return match written {
            Ok(()) => Ok(()),
            // The refusal's own words are the sync's: a save names its file and its directory instead.
            Err(crate::sync::write::WriteError::Refused(_)) => Err(ToolError::invalid_argument(
                "filename",
                format!(
                    "{} is a symlink or a directory: a save is never written through or over one (it could \
                     lead out of the save directory); the save was not written",
                    path.display()
                ),
            )),
            Err(crate::sync::write::WriteError::Io(e)) => Err(failed(e)),
        };
    }
    use tokio::io::AsyncWriteExt;
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .await
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                ToolError::new(
                    ErrorCode::Conflict,
                    format!("{} already exists", path.display()),
                )
                .with_hint("choose another filename, or pass overwrite: true")
            } else {
                failed(e)
            }
        })?;
    file.write_all(&bytes).await.map_err(failed)?;
    file.flush().await.map_err(failed)
}

pub fn specs(ctx: &Ctx) -> Vec<ToolSpec> {
    let rpc = ctx.link.config().rpc_timeout;
    let budget = ctx.budget(1, rpc);
    let defs = ToolSpec::new(
        "get_netscript_definitions",
        "The TypeScript declarations (NetscriptDefinitions.d.ts, ~300 KB, ~75k tokens) of the connected game's \
         NetScript API (game method getDefinitionFile), as the text result, 64 KiB at a time. Take only what \
         you need: `namespace` (one declaration, e.g. `NS`, `Hacknet`, `Singularity`), `search` (matching \
         lines with line numbers), `offset`/`limit` to page. The whole file is also the resource \
         bitburner://definitions/NetscriptDefinitions.d.ts.",
    )
    .title("NetScript API Definitions")
    .read_only()
    .open_world()
    .timeout(budget)
    .handler_with_text_on(ctx.clone(), |c, args: DefinitionArgs, _| async move {
        c.get_netscript_definitions(args).await
    });

    let servers = ToolSpec::new(
        "get_all_servers",
        "Every server in the game with admin rights and ownership (game method getAllServers, v2.6+).",
    )
    .title("List Servers")
    .read_only()
    .open_world()
    .timeout(budget)
    .handler_on(ctx.clone(), |c, _: NoArgs, _| async move { c.get_all_servers().await });

    let meta = ToolSpec::new(
        "get_file_metadata",
        "Creation, modification and access times of one file (game method getFileMetadata, v3.0+).",
    )
    .title("File Times")
    .read_only()
    .open_world()
    .timeout(budget)
    .handler_on(ctx.clone(), |c, args: FileArgs, _| async move {
        c.get_file_metadata(args).await
    });

    let all_meta = ToolSpec::new(
        "get_all_file_metadata",
        "File times of every file on a server (game method getAllFileMetadata, v3.0+).",
    )
    .title("All File Times")
    .read_only()
    .open_world()
    .timeout(budget)
    .handler_on(ctx.clone(), |c, args: ServerArgs, _| async move {
        c.get_all_file_metadata(args).await
    });

    let save = ToolSpec::new(
        "get_save_file",
        "Write the game's save to the save directory the user allowed (--bitburner-save-dir), never into this reply \
         (game method getSaveFile, v2.8.1+). Returns where it was written.",
    )
    .title("Save the Game")
    .open_world()
    .timeout(ctx.budget(1, ctx.link.config().save_timeout))
    .handler_on(ctx.clone(), |c, args: SaveArgs, _| async move { c.get_save_file(args).await });

    let status = ToolSpec::new(
        "status",
        "Whether the game is connected and since when, and which Remote API methods it supports (asked of \
         the game, which has no version handshake). Call it first when another tool reports E_DISCONNECTED.",
    )
    .title("Game Status")
    .read_only()
    .timeout(ctx.budget(2, rpc))
    .handler_on(ctx.clone(), |c, _: NoArgs, _| async move { Ok::<_, ToolError>(c.status().await) });

    vec![defs, servers, meta, all_meta, save, status]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advice_names_the_tools_methods_says_are_missing() {
        let mut support: BTreeMap<Method, Support> =
            Method::ALL.into_iter().map(|m| (m, Support::Yes)).collect();
        assert_eq!(advice(&support), "connected: every tool can be used");
        support.insert(Method::GetFileMetadata, Support::No);
        support.insert(Method::GetSaveFile, Support::Unknown);
        let said = advice(&support);
        assert!(!said.contains("every tool can be used"), "{said}");
        assert!(
            said.contains("get_file_metadata (getFileMetadata needs Bitburner 3.0.0)"),
            "{said}"
        );
        assert!(!said.contains("get_save_file"), "{said}");
    }

    #[test]
    fn strip_exports_keeps_everything_else() {
        let text =
            "export interface NS {\n  hack(): void;\n}\n  export type A = 1;\nconst exported = 1;";
        assert_eq!(
            strip_exports(text),
            "interface NS {\n  hack(): void;\n}\n  type A = 1;\nconst exported = 1;"
        );
    }
}
