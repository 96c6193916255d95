//! Tool arguments: strict (unknown fields rejected), `server` defaulting to `home`, filenames checked with
//! the game's own rules before anything is sent.

use crate::path::{self, ExtensionSet};
use bridge_core::{ToolError, Validate, check};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

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
}

impl Validate for DefinitionArgs {}

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
}
