//! Reads a folder of `*.meta.yaml` files into a VSC-Bridge `manifest.json` (version 2). Shared by `build.rs`
//! (the built-in catalog) and the run time (`--debug-manifest DIR`), so both read metadata the same way.

use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

/// Every `*.meta.yaml` under `root`, sorted, so the manifest does not depend on directory order.
pub fn meta_files(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".meta.yaml"))
            {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The manifest of the `*.meta.yaml` files under `root`: `{version: 2, generatedAt, scripts: {alias: {metadata,
/// scriptRelPath}}}`. An error names the file and what is wrong with it.
pub fn manifest_of(root: &Path, generated_at: &str) -> Result<Value, String> {
    let files = meta_files(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let mut scripts = Map::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let metadata: Value =
            serde_norway::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        let Some(alias) = metadata.get("alias").and_then(Value::as_str) else {
            return Err(format!("{}: no `alias`", file.display()));
        };
        let rel = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .to_string_lossy()
            .replace('\\', "/")
            .replace(".meta.yaml", ".js");
        if scripts.contains_key(alias) {
            return Err(format!("{}: alias `{alias}` is used twice", file.display()));
        }
        scripts.insert(
            alias.to_owned(),
            json!({ "metadata": metadata, "scriptRelPath": rel }),
        );
    }
    Ok(json!({ "version": 2, "generatedAt": generated_at, "scripts": scripts }))
}
