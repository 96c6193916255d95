//! Which agent the bridge starts: a configured one must exist (the error names the command that builds one),
//! else the agent built into mcp-bridges, written into the state dir, else one beside the executable.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bridge_sandbox::agent_bin;
use bridge_sandbox::config::{ConfigError, SandboxArgs};
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: SandboxArgs,
}

fn args(extra: &[&str]) -> SandboxArgs {
    let argv = ["test"].iter().chain(extra).copied();
    Cli::parse_from(argv).args
}

#[test]
fn a_configured_agent_that_does_not_exist_is_an_error_naming_the_build_command() {
    let e = args(&["--sandbox-agent-bin", "/nonexistent/sandbox-agent"])
        .settings()
        .expect_err("no such agent");
    assert!(matches!(e, ConfigError::NoAgent(_)), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("/nonexistent/sandbox-agent"), "{text}");
    assert!(
        text.contains("cargo build --release -p sandbox-agent"),
        "{text}"
    );
    assert!(text.contains("SANDBOX_AGENT_BIN"), "{text}");
}

#[test]
fn the_embedded_agent_goes_to_the_state_dir_unless_one_is_configured() {
    agent_bin::embed(b"not really an agent");
    let state = std::env::temp_dir().join(format!("agent-lookup-{}", std::process::id()));
    let state_arg = state.to_str().unwrap();

    let s = args(&["--sandbox-state-dir", state_arg])
        .settings()
        .unwrap();
    assert_eq!(s.agent_bin.parent(), Some(state.as_path()));
    let name = s.agent_bin.file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("sandbox-agent-"), "{name}");
    assert_eq!(s.install_agent, Some(&b"not really an agent"[..]));

    let configured = std::env::current_exe().unwrap();
    let s = args(&[
        "--sandbox-state-dir",
        state_arg,
        "--sandbox-agent-bin",
        configured.to_str().unwrap(),
    ])
    .settings()
    .unwrap();
    assert_eq!(s.agent_bin, configured);
    assert_eq!(s.install_agent, None);
}
