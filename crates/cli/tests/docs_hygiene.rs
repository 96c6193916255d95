//! The repository explains itself: no file cites a document that lives outside it (the design notes the project
//! started from, a research page on the author's machine). A reader of a clone cannot open those, so a fact
//! taken from one is written down here, in docs/ or beside the code, and cited by that path instead.
//!
//! This walks the work tree (not git's index, so it also runs on an unpacked archive) and fails naming every
//! offending line. Random-number seeds (`seed`, `seeded`, `SEED`) are not citations and pass.

use std::fs;
use std::path::{Path, PathBuf};

/// Directories that are not the project's text: build output, installed peers, VCS data.
const SKIP_DIRS: &[&str] = &[
    "target",
    ".git",
    ".peers",
    "node_modules",
    "__pycache__",
    "out",
];

/// Text files worth reading: docs, code, scripts, configuration.
const EXTENSIONS: &[&str] = &[
    "md", "rs", "py", "js", "cjs", "mjs", "ts", "lua", "java", "toml", "yaml", "yml", "sh", "json",
];

/// What a citation of an outside document looks like (matched lowercase). Each entry: the needle, and whether
/// the character after it must not be a letter (so `the seeded` is not `the seed`).
const CITATIONS: &[(&str, bool)] = &[
    ("/work/shared", false),
    ("shared/reference/", false),
    ("shared/seeds/", false),
    ("design.md", false),
    ("the seed", true),
    ("seed's", false),
    ("seed property", false),
    ("seed properties", false),
    ("seed §", false),
    ("ref §", false),
    ("reference §", false),
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn wanted(path: &Path) -> bool {
    if let Some(ext) = path.extension().and_then(|e| e.to_str()) {
        return EXTENSIONS.contains(&ext);
    }
    // Extensionless scripts (scripts/test, bench/profile-stdio, .ci/run): those that start with a shebang.
    fs::read(path).is_ok_and(|bytes| bytes.starts_with(b"#!"))
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if kind.is_dir() {
            // A directory with a CACHEDIR.TAG is build output wherever it is (a nested target dir).
            if !SKIP_DIRS.contains(&name.as_ref()) && !path.join("CACHEDIR.TAG").exists() {
                walk(&path, files);
            }
        } else if kind.is_file() && wanted(&path) {
            files.push(path);
        }
    }
}

/// `../shared/` is a path out of the repository; `…/shared/` (an elided upstream path) is not.
fn cites_parent_shared(line: &str) -> bool {
    line.match_indices("../shared/")
        .any(|(at, _)| at == 0 || line.as_bytes()[at - 1] != b'.')
}

fn citation(line: &str) -> Option<&'static str> {
    if cites_parent_shared(line) {
        return Some("../shared/");
    }
    let lower = line.to_lowercase();
    CITATIONS.iter().find_map(|&(needle, word)| {
        lower.match_indices(needle).find_map(|(at, _)| {
            let next = lower[at + needle.len()..].chars().next();
            let ends_word = !word || !next.is_some_and(char::is_alphanumeric);
            ends_word.then_some(needle)
        })
    })
}

#[test]
fn no_file_cites_a_document_outside_the_repository() {
    let root = repo_root();
    let this_file = Path::new(file!()).file_name();
    let mut files = Vec::new();
    walk(&root, &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("README.md")),
        "the walk found no README.md under {}",
        root.display()
    );
    let mut found = Vec::new();
    for file in &files {
        if file.file_name() == this_file && file.parent().is_some_and(|p| p.ends_with("tests")) {
            continue;
        }
        let Ok(text) = fs::read_to_string(file) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if let Some(needle) = citation(line) {
                let shown = file.strip_prefix(&root).unwrap_or(file);
                found.push(format!(
                    "{}:{}: cites {needle:?}: {}",
                    shown.display(),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "{} line(s) cite a document outside the repository; say the fact, or cite a file in it \
         (docs/, docs/protocols/, crates/minecraft/PROTOCOL.md):\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_check_sees_what_it_should() {
    assert_eq!(citation("see ../shared/reference/x.md"), Some("../shared/"));
    assert_eq!(citation("`java/.../shared/computer/core`"), None);
    assert_eq!(
        citation("Errors start with the seed's code"),
        Some("the seed")
    );
    assert_eq!(citation("(seed Property 7)"), Some("seed property"));
    assert_eq!(citation("(ref §1.4)"), Some("ref §"));
    assert_eq!(
        citation("as seeded generator loops; prints its seed on failure"),
        None
    );
    assert_eq!(citation("the seeded loop"), None);
    assert_eq!(citation("const SEED = 0x5EED"), None);
}
