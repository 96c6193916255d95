//! Building a workspace binary from inside a test or bench, without undoing the build that made the test.
//!
//! A test process runs with the variables cargo sets for the crate under test (`CARGO_MANIFEST_DIR`,
//! `CARGO_PKG_NAME`, …). A `cargo build` started with them passes them on to build scripts, and some build
//! scripts watch them: ring's declares `rerun-if-env-changed` for `CARGO_MANIFEST_DIR` and `CARGO_PKG_*`. So a
//! test that built `mcp-bridges` re-ran ring's build script, rebuilt ring and everything above it (rustls,
//! tungstenite, axum, every workspace crate), and the next plain cargo command rebuilt them all back: in CI that
//! was the whole test suite compiled a second time (4.5 minutes) for the microVM stage, and again whenever tests
//! of two crates took turns building.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The variables cargo sets for the crate it builds, runs or tests (the cargo book's "Environment variables
/// Cargo sets for crates" and "… for build scripts"). What the user set for cargo (`CARGO_HOME`,
/// `CARGO_TARGET_DIR`, `CARGO_INCREMENTAL`, `RUSTFLAGS`, …) is not among them and stays, so the nested build
/// matches the one that made the test.
fn set_by_cargo_for_a_crate(key: &OsStr) -> bool {
    let Some(key) = key.to_str() else {
        return false;
    };
    const NAMES: &[&str] = &[
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_MANIFEST_LINKS",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_MAKEFLAGS",
        "OUT_DIR",
    ];
    const PREFIXES: &[&str] = &[
        "CARGO_PKG_",
        "CARGO_BIN_EXE_",
        "CARGO_CFG_",
        "CARGO_FEATURE_",
    ];
    NAMES.contains(&key) || PREFIXES.iter().any(|p| key.starts_with(p))
}

/// `cargo` (the one running this test) in the workspace, with the variables cargo set for the crate under test
/// removed.
pub fn cargo() -> Command {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    for (key, _) in std::env::vars_os() {
        if set_by_cargo_for_a_crate(&key) {
            cmd.env_remove(&key);
        }
    }
    cmd
}

/// Binary `bin` of workspace package `package`, built in the running test's profile and target directory, once
/// per test process (cargo does nothing when it is up to date).
///
/// It builds every binary and example of the workspace: with the whole workspace's features, the ones the test
/// build used, so after `cargo nextest run --workspace` cargo only links the few binaries no test needed.
/// `cargo build -p <package>` resolves that package's features alone and compiled a second copy of many
/// dependencies.
pub fn build_bin(package: &str, bin: &str) -> PathBuf {
    // One build makes every binary, so what is kept is that it ran: the profile directory they are in.
    static PROFILE_DIR: OnceLock<PathBuf> = OnceLock::new();
    let profile_dir = PROFILE_DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test knows its own path");
        // target/<profile>/deps/<test> -> target/<profile>
        let profile_dir = exe
            .parent()
            .and_then(|deps| deps.parent())
            .expect("a test binary lives in target/<profile>/deps")
            .to_path_buf();
        let mut cmd = cargo();
        cmd.args(["build", "-q", "--workspace", "--bins", "--examples"]);
        if profile_dir.file_name() == Some(OsStr::new("release")) {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("cargo runs");
        assert!(
            status.success(),
            "cargo build --workspace --bins --examples failed (wanted {package}'s {bin})"
        );
        profile_dir
    });
    let path = profile_dir.join(bin);
    assert!(path.is_file(), "the build made no {}", path.display());
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Files that may start cargo themselves: this module; the CLI's build script, which builds the embedded
    /// agent with its own allow-list of variables; and `cargo tree` in the link crate's split check, which
    /// builds nothing.
    const MAY_START_CARGO: &[&str] = &[
        "crates/testkit/src/cargo.rs",
        "crates/cli/build.rs",
        "crates/link/tests/split.rs",
    ];

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() && name != "target" && name != "node_modules" && name != ".peers" {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The rebuild this module prevents comes back the day a test starts `cargo build` by hand.
    #[test]
    fn no_other_test_or_bench_starts_cargo() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        rust_files(&root.join("crates"), &mut files);
        rust_files(&root.join("bench"), &mut files);
        assert!(files.len() > 100, "the walk found the workspace's sources");
        let needle = ["env!(\"", "CARGO\")"].concat();
        let offenders: Vec<String> = files
            .iter()
            .filter_map(|path| {
                let rel = path
                    .strip_prefix(&root)
                    .ok()?
                    .to_string_lossy()
                    .into_owned();
                let text = std::fs::read_to_string(path).ok()?;
                (text.contains(&needle) && !MAY_START_CARGO.contains(&rel.as_str())).then_some(rel)
            })
            .collect();
        assert!(
            offenders.is_empty(),
            "start cargo through mcp_testkit::cargo (build_bin or cargo()), not env!(\"CARGO\"): {offenders:?}"
        );
    }

    #[test]
    fn only_what_cargo_sets_for_a_crate_is_removed() {
        for key in [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_BIN_EXE_mcp-bridges",
            "CARGO_CFG_TARGET_OS",
            "OUT_DIR",
        ] {
            assert!(set_by_cargo_for_a_crate(OsStr::new(key)), "{key}");
        }
        for key in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_INCREMENTAL",
            "CARGO_BUILD_JOBS",
            "RUSTFLAGS",
            "PATH",
        ] {
            assert!(!set_by_cargo_for_a_crate(OsStr::new(key)), "{key}");
        }
    }
}
