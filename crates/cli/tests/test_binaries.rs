//! Every test file is built. A crate whose tests share one binary (`autotests = false` and a root that names
//! each file as a module, see `crates/core/tests/integration.rs`) would silently leave out a file nobody named:
//! cargo no longer finds it on its own. This fails naming every such file.

use std::fs;
use std::path::{Path, PathBuf};

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `path` of every `[[test]]` in a manifest, relative to its crate.
fn test_roots(manifest: &str) -> Vec<String> {
    let mut roots = Vec::new();
    let mut in_test = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_test = line == "[[test]]";
            continue;
        }
        if in_test
            && let Some(value) = line.strip_prefix("path")
            && let Some(value) = value.trim_start().strip_prefix('=')
        {
            roots.push(value.trim().trim_matches('"').to_owned());
        }
    }
    roots
}

fn autotests_off(manifest: &str) -> bool {
    manifest
        .lines()
        .any(|l| l.split_whitespace().collect::<String>() == "autotests=false")
}

/// The `.rs` files directly in `tests/` that none of the roots declares with `mod name;` (a root itself is
/// not one).
fn unlisted(roots: &[(String, String)], files: &[String]) -> Vec<String> {
    files
        .iter()
        .filter(|file| {
            !roots
                .iter()
                .any(|(path, _)| path.ends_with(&format!("/{file}")))
        })
        .filter(|file| {
            let module = file.trim_end_matches(".rs");
            !roots
                .iter()
                .any(|(_, text)| text.lines().any(|l| l.trim() == format!("mod {module};")))
        })
        .cloned()
        .collect()
}

#[test]
fn every_test_file_of_a_crate_with_one_test_binary_is_a_module_of_it() {
    let mut missing = Vec::new();
    let mut crates_checked = 0;
    for entry in fs::read_dir(crates_dir()).unwrap().flatten() {
        let dir = entry.path();
        let Ok(manifest) = fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        if !autotests_off(&manifest) {
            continue;
        }
        crates_checked += 1;
        let roots: Vec<(String, String)> = test_roots(&manifest)
            .into_iter()
            .map(|path| {
                let text = fs::read_to_string(dir.join(&path))
                    .unwrap_or_else(|e| panic!("{}: test root {path}: {e}", dir.display()));
                (path, text)
            })
            .collect();
        assert!(
            !roots.is_empty(),
            "{}: autotests = false and no [[test]]: none of its tests is built",
            dir.display()
        );
        let files: Vec<String> = fs::read_dir(dir.join("tests"))
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| name.ends_with(".rs"))
            .collect();
        for file in unlisted(&roots, &files) {
            missing.push(format!("{}/tests/{file}", dir.display()));
        }
    }
    assert!(
        crates_checked >= 8,
        "only {crates_checked} crates share one test binary: the check reads the wrong directory"
    );
    assert!(
        missing.is_empty(),
        "test files no [[test]] root names, so never built: {missing:#?}"
    );
}

#[test]
fn the_check_sees_an_unnamed_file_and_passes_a_named_one() {
    let roots = vec![(
        "tests/integration.rs".to_owned(),
        "mod support;\n\nmod named;\n// mod commented;\n".to_owned(),
    )];
    let files: Vec<String> = ["integration.rs", "named.rs", "commented.rs", "forgotten.rs"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    assert_eq!(unlisted(&roots, &files), ["commented.rs", "forgotten.rs"]);
    let manifest = "[package]\nautotests = false\n\n[[test]]\nname = \"integration\"\npath = \"tests/integration.rs\"\n\n[dev-dependencies]\npath = \"no\"\n";
    assert!(autotests_off(manifest));
    assert_eq!(test_roots(manifest), ["tests/integration.rs"]);
}
