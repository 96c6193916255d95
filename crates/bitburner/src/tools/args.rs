//! Tool arguments: strict (unknown fields rejected), `server` defaulting to `home`, filenames checked with
//! the game's own rules before anything is sent.

use super::page::{MAX_PAGE_BYTES, PageArgs};
use crate::path::{self, ExtensionSet};
use bridge_core::{ToolError, Validate, check};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

/// `NAME_MAX` of Linux, macOS and Windows file systems: a longer name fails at `open`, after the save was built.
pub const MAX_SAVE_NAME_BYTES: usize = 255;

/// A search term is a name or a phrase, not a document.
pub const MAX_SEARCH_BYTES: usize = 200;

fn home() -> String {
    "home".to_owned()
}

/// Validates `filename` with the game's rules and returns the form the game stores.
pub fn game_path(field: &str, filename: &str) -> Result<String, ToolError> {
    path::validate(filename, &ExtensionSet::ANY_VERSION)
        .map(|p| p.path)
        .map_err(|e| {
            ToolError::invalid_argument(field, format!("{filename:?} is not a valid game filename: {e}"))
                .with_hint(format!(
                    "use a path like `dir/name.js` with an extension the game stores ({}); nothing was sent",
                    describe(&ExtensionSet::ANY_VERSION)
                ))
        })
}

fn describe(set: &ExtensionSet) -> String {
    set.scripts
        .iter()
        .chain(set.text)
        .copied()
        .collect::<Vec<_>>()
        .join(" ")
}

fn check_server(server: &str) -> Result<(), ToolError> {
    check::non_empty("server", server)
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerArgs {
    /// In-game server: hostname or IP (default `home`).
    #[serde(default = "home")]
    pub server: String,
}

impl Validate for ServerArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check_server(&self.server)
    }
}

impl ServerArgs {
    pub fn params(&self) -> Map<String, Value> {
        Map::from_iter([("server".to_owned(), Value::from(self.server.as_str()))])
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileArgs {
    /// Path of the file on the server, e.g. `hack.js` or `lib/util.ts` (a leading `/` is ignored).
    pub filename: String,
    /// In-game server: hostname or IP (default `home`).
    #[serde(default = "home")]
    pub server: String,
}

impl Validate for FileArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check_server(&self.server)?;
        game_path("filename", &self.filename).map(drop)
    }
}

impl FileArgs {
    /// The request params, with the filename in the form the game stores.
    pub fn params(&self) -> Result<(String, Map<String, Value>), ToolError> {
        let path = game_path("filename", &self.filename)?;
        let params = Map::from_iter([
            ("filename".to_owned(), Value::from(path.as_str())),
            ("server".to_owned(), Value::from(self.server.as_str())),
        ]);
        Ok((path, params))
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// Path of the file on the server, e.g. `hack.js` or `lib/util.ts` (a leading `/` is ignored).
    pub filename: String,
    /// In-game server: hostname or IP (default `home`).
    #[serde(default = "home")]
    pub server: String,
    /// Byte offset to start at: 0, or the `next_offset` of the previous page (default 0).
    #[serde(default)]
    pub offset: usize,
    /// Most bytes to return (default 65536, at most 1048576). Pages end at a line end.
    #[serde(default)]
    #[schemars(range(min = 1, max = super::page::MAX_PAGE_BYTES))]
    pub limit: Option<usize>,
    /// The `cursor` of the previous page: the next pages come from the same content, downloaded once. If
    /// the file changed since, the read restarts at offset 0 and says so (`restarted`).
    #[serde(default)]
    pub cursor: Option<String>,
}

impl Validate for ReadArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check_server(&self.server)?;
        game_path("filename", &self.filename)?;
        self.page().validate()
    }
}

impl ReadArgs {
    pub fn file(&self) -> FileArgs {
        FileArgs {
            filename: self.filename.clone(),
            server: self.server.clone(),
        }
    }

    pub fn page(&self) -> PageArgs {
        PageArgs {
            offset: self.offset,
            limit: self.limit,
        }
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AllFilesArgs {
    /// In-game server: hostname or IP (default `home`).
    #[serde(default = "home")]
    pub server: String,
    /// Index of the first file to return: 0, or the `next_offset` of the previous page (default 0).
    #[serde(default)]
    pub offset: usize,
    /// Most content bytes in this page (default 65536, at most 1048576). A file that does not fit alone is
    /// listed without its content: read it with read_file.
    #[serde(default)]
    #[schemars(range(min = 1, max = super::page::MAX_PAGE_BYTES))]
    pub max_bytes: Option<usize>,
}

impl Validate for AllFilesArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check_server(&self.server)?;
        if let Some(max) = self.max_bytes {
            check::in_range("max_bytes", max, 1, MAX_PAGE_BYTES)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// Path of the file on the server, e.g. `hack.js` or `data/targets.json`. Created or overwritten.
    pub filename: String,
    /// The whole new content (at most FILE_WRITE_MAX_BYTES bytes, UTF-8).
    pub content: String,
    /// In-game server: hostname or IP (default `home`).
    #[serde(default = "home")]
    pub server: String,
}

impl Validate for WriteArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check_server(&self.server)?;
        game_path("filename", &self.filename).map(drop)
    }
}

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DefinitionArgs {
    /// Remove `export` keywords so the declarations work as globals, like the in-game editor (default false).
    #[serde(default)]
    pub strip_exports: bool,
    /// Only this declaration, with its doc comment: an interface, type or enum name such as `NS`, `Hacknet`,
    /// `Singularity`, `Server`. An unknown name is refused with the list of names.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Only the lines containing this text (case-insensitive), each with its line number and the
    /// declaration it belongs to.
    #[serde(default)]
    pub search: Option<String>,
    /// Byte offset to start at: 0, or the `next_offset` of the previous page (default 0).
    #[serde(default)]
    pub offset: usize,
    /// Most bytes to return (default 65536, at most 1048576). Pages end at a line end.
    #[serde(default)]
    #[schemars(range(min = 1, max = super::page::MAX_PAGE_BYTES))]
    pub limit: Option<usize>,
}

impl Validate for DefinitionArgs {
    fn validate(&self) -> Result<(), ToolError> {
        if let Some(name) = &self.namespace {
            check::non_empty("namespace", name)?;
        }
        if let Some(text) = &self.search {
            check::non_empty("search", text)?;
            if text.len() > MAX_SEARCH_BYTES {
                return Err(ToolError::invalid_argument(
                    "search",
                    format!(
                        "`search` is {} bytes; the limit is {MAX_SEARCH_BYTES} bytes",
                        text.len()
                    ),
                ));
            }
        }
        self.page().validate()
    }
}

impl DefinitionArgs {
    pub fn page(&self) -> PageArgs {
        PageArgs {
            offset: self.offset,
            limit: self.limit,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SaveArgs {
    /// File name inside the save directory the user allowed (no directories). Default:
    /// `bitburner-save-<unix ms>.json` (`.json.gz` for a binary save).
    #[serde(default)]
    pub filename: Option<String>,
    /// Replace an existing file of that name (default false).
    #[serde(default)]
    pub overwrite: bool,
}

impl Validate for SaveArgs {
    fn validate(&self) -> Result<(), ToolError> {
        let Some(name) = &self.filename else {
            return Ok(());
        };
        check::non_empty("filename", name)?;
        if name.len() > MAX_SAVE_NAME_BYTES {
            return Err(ToolError::invalid_argument(
                "filename",
                format!(
                    "`filename` is {} bytes; the limit is {MAX_SAVE_NAME_BYTES} bytes (the longest file name \
                     file systems take)",
                    name.len()
                ),
            )
            .with_details(serde_json::json!({"limit": MAX_SAVE_NAME_BYTES, "actual": name.len()})));
        }
        let plain =
            !name.contains(['/', '\\']) && name != "." && name != ".." && !name.contains('\0');
        if !plain {
            return Err(ToolError::invalid_argument(
                "filename",
                format!("{name:?} must be a plain file name, without directories"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bridge_core::ErrorCode;

    fn parse<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn server_defaults_to_home_and_unknown_fields_are_refused() {
        let a: Result<FileArgs, _> = parse(serde_json::json!({"filename": "a.js"}));
        assert_eq!(a.map(|a| a.server), Ok("home".to_owned()));
        let b: Result<FileArgs, _> = parse(serde_json::json!({"filename": "a.js", "method": "x"}));
        assert!(b.is_err_and(|e| e.contains("unknown field")));
        let c: Result<DefinitionArgs, _> = parse(serde_json::json!({"bogus": 1}));
        assert!(c.is_err());
    }

    #[test]
    fn filenames_follow_the_game_rules() {
        let bad = FileArgs {
            filename: "../x.js".into(),
            server: "home".into(),
        };
        let e = bad.validate().err();
        assert_eq!(
            e.as_ref().map(ToolError::code),
            Some(ErrorCode::InvalidArgument)
        );
        assert_eq!(
            e.map(|e| e.details()["field"].clone()),
            Some(Value::from("filename"))
        );
        let good = FileArgs {
            filename: "/lib/x.js".into(),
            server: "home".into(),
        };
        assert_eq!(good.params().map(|p| p.0), Ok("lib/x.js".to_owned()));
        let blank_server = FileArgs {
            filename: "x.js".into(),
            server: "  ".into(),
        };
        assert!(blank_server.validate().is_err());
    }

    #[test]
    fn save_names_stay_inside_the_save_directory() {
        for bad in ["../x.json", "a/b.json", "..", " "] {
            let args = SaveArgs {
                filename: Some(bad.into()),
                overwrite: false,
            };
            assert!(args.validate().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_save_name_too_long_for_the_file_system_is_an_argument_error() {
        let args = SaveArgs {
            filename: Some(format!("{}.json", "s".repeat(300))),
            overwrite: false,
        };
        let e = args.validate().err();
        assert_eq!(
            e.as_ref().map(ToolError::code),
            Some(ErrorCode::InvalidArgument)
        );
        let e = e.map(|e| (e.details()["field"].clone(), e.message().to_owned()));
        assert!(
            e.as_ref()
                .is_some_and(|(field, message)| field == "filename" && message.contains("255")),
            "{e:?}"
        );
    }
}
