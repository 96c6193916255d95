//! Generates the built-in tool catalog: every `meta/**/*.meta.yaml` into `$OUT_DIR/manifest.json` (VSC-Bridge's
//! manifest v2), which the crate embeds and turns into its tool table. A bad file fails the build, naming it.

#[path = "src/catalog/meta_dir.rs"]
mod meta_dir;

use std::path::PathBuf;

fn main() -> Result<(), String> {
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?).join("meta");
    println!("cargo::rerun-if-changed={}", root.display());
    for file in meta_dir::meta_files(&root).map_err(|e| e.to_string())? {
        println!("cargo::rerun-if-changed={}", file.display());
    }
    // A fixed stamp: the same metadata gives the same bytes, so the golden tools/list never churns.
    let manifest = meta_dir::manifest_of(&root, "1970-01-01T00:00:00.000Z")?;
    let out =
        PathBuf::from(std::env::var("OUT_DIR").map_err(|e| e.to_string())?).join("manifest.json");
    let text = serde_json::to_string_pretty(&manifest).map_err(|e| e.to_string())?;
    std::fs::write(&out, text).map_err(|e| format!("{}: {e}", out.display()))
}
