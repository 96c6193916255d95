//! Builds the sandbox agent (PID 1 of every sandbox) so that `mcp-bridges` carries it: `cargo run --release
//! -p mcp-bridges -- sandbox` and `cargo install --path crates/cli` build only this binary, and cargo has no
//! stable way to ask for another package's binary as a dependency. So this script runs a nested
//!
//!     cargo build -p sandbox-agent --bin sandbox-agent --profile sandbox-agent --target <this target> --locked
//!
//! with crt-static, into `<target dir>/sandbox-agent` (shared by the debug and release builds of this crate,
//! so it is built once per target dir), and main.rs embeds the result with `include_bytes!`. At run time the
//! sandbox bridge writes it once into its state dir (bridge_sandbox::agent_bin).
//!
//! `MCP_BRIDGES_AGENT=/path/to/sandbox-agent` embeds that (static) binary instead of building one;
//! `MCP_BRIDGES_AGENT=none` embeds nothing (the bridge then needs --sandbox-agent-bin). The agent is Linux
//! only: on other targets nothing is embedded.
#![allow(clippy::expect_used)] // a build script reports failure by panicking; the message is the report

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const CHOICE_ENV: &str = "MCP_BRIDGES_AGENT";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(embedded_agent)");
    println!("cargo::rerun-if-env-changed={CHOICE_ENV}");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    let embedded = out_dir.join("sandbox-agent");
    let source = match std::env::var_os(CHOICE_ENV) {
        Some(v) if v == "none" => None,
        Some(path) => {
            let path = PathBuf::from(path);
            println!("cargo::rerun-if-changed={}", path.display());
            Some(path)
        }
        None if target.contains("-linux-") => Some(build_agent(&out_dir, &target)),
        None => None,
    };
    let Some(source) = source else {
        return;
    };
    std::fs::copy(&source, &embedded).unwrap_or_else(|e| {
        panic!(
            "cannot copy the sandbox agent {} into {}: {e}",
            source.display(),
            embedded.display()
        )
    });
    println!("cargo::rustc-cfg=embedded_agent");
}

/// Runs the nested build and returns the agent it made.
fn build_agent(out_dir: &Path, target: &str) -> PathBuf {
    let manifest_dir = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let workspace = manifest_dir
        .parent()
        .and_then(Path::parent)
        .expect("crates/cli sits two levels below the workspace root")
        .to_path_buf();
    for input in [
        "crates/sandbox-agent",
        "crates/link",
        "Cargo.lock",
        "Cargo.toml",
    ] {
        println!(
            "cargo::rerun-if-changed={}",
            workspace.join(input).display()
        );
    }
    // Never OUT_DIR/sandbox-agent itself: that path is the embedded file main() writes.
    let target_dir = outer_target_dir(out_dir)
        .map(|dir| dir.join("sandbox-agent"))
        .unwrap_or_else(|| out_dir.join("agent-build"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(&cargo);
    // Only what the user set for cargo as a whole survives (home, network, registries) and the jobserver
    // (CARGO_MAKEFLAGS), so the nested build shares this build's job slots. Everything cargo set for this
    // script (its package, profile, features, rustflags, target dir) or a wrapper such as clippy-driver
    // would otherwise leak into the agent's build.
    for (key, _) in std::env::vars_os() {
        if leaks_into_nested_build(&key) {
            cmd.env_remove(&key);
        }
    }
    let stderr = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .expect("stderr can be duplicated");
    cmd.current_dir(&workspace)
        .args([
            "build",
            "--locked",
            "-p",
            "sandbox-agent",
            "--bin",
            "sandbox-agent",
        ])
        .args(["--profile", "sandbox-agent", "--target", target])
        .arg("--target-dir")
        .arg(&target_dir)
        // The initramfs has no libc and a sandbox's root may be another distribution's: link libc in.
        // With --target, these flags reach only the agent's own code, not build scripts or proc macros.
        .env("CARGO_ENCODED_RUSTFLAGS", "-Ctarget-feature=+crt-static")
        // cargo prints only to stderr, but this script's stdout is read by cargo for directives.
        .stdout(Stdio::from(stderr));
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", cargo.to_string_lossy()));
    assert!(
        status.success(),
        "building the sandbox agent failed ({status}); the same build by hand: \
         cargo build --locked -p sandbox-agent --profile sandbox-agent --target {target} \
         with RUSTFLAGS='-C target-feature=+crt-static'. Or embed a prebuilt agent with {CHOICE_ENV}=PATH, \
         or none with {CHOICE_ENV}=none"
    );
    target_dir
        .join(target)
        .join("sandbox-agent")
        .join("sandbox-agent")
}

/// The outer build's target directory (or its `<triple>` directory), read from the shape cargo gives OUT_DIR:
/// `<target>/[<triple>/]<profile>/build/<pkg>-<hash>/out`. The nested build cannot share that directory itself
/// (it would wait forever on the lock the outer build holds), so it goes into a `sandbox-agent` directory
/// beside the profiles, shared by the debug and release builds. The shape is checked, not trusted: any other
/// layout falls back to a directory of this OUT_DIR (correct, only rebuilt per profile).
fn outer_target_dir(out_dir: &Path) -> Option<PathBuf> {
    let package_dir = out_dir.parent()?;
    let build_dir = package_dir.parent()?;
    if build_dir.file_name()? != "build" {
        return None;
    }
    build_dir.parent()?.parent().map(Path::to_path_buf)
}

fn leaks_into_nested_build(key: &OsString) -> bool {
    let Some(key) = key.to_str() else {
        return false;
    };
    const KEEP: &[&str] = &["CARGO_HOME", "CARGO_MAKEFLAGS"];
    const KEEP_PREFIXES: &[&str] = &[
        "CARGO_NET_",
        "CARGO_HTTP_",
        "CARGO_REGISTRIES_",
        "CARGO_REGISTRY_",
    ];
    const DROP: &[&str] = &[
        "RUSTFLAGS",
        "RUSTDOCFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
        "OUT_DIR",
        "TARGET",
        "HOST",
        "NUM_JOBS",
        "OPT_LEVEL",
        "DEBUG",
        "PROFILE",
        "RUSTC_LINKER",
    ];
    if key.starts_with("CARGO_") {
        return !(KEEP.contains(&key) || KEEP_PREFIXES.iter().any(|p| key.starts_with(p)));
    }
    DROP.contains(&key)
}
