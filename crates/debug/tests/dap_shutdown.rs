//! A `debug_start` still waiting on a hung debugger when the bridge itself stops (SIGTERM, or its stdin closed)
//! leaves nothing behind once the bridge process has exited: no adapter, debug server, program, build or socket
//! directory. The call is cut short by the shutdown's drain, so its clean-up starts as the bridge is going away:
//! the bridge must finish it (or kill what it could not end) before it exits. The bridge runs as its own process
//! (`mcp-bridges debug`), over its stdio; the hung debuggers are the doubles of
//! `dap_launch_abandoned.rs`, each with a program in its process group, and real delve held inside its build.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use mcp_testkit::{Era, start_call};
use rmcp::ClientServiceExt;
use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use support::procs::{
    assert_exited, go_held_in_its_build, hung_js_debug, hung_python, js_socket_dirs, pids_in,
    running, until,
};
use support::*;
use tokio::process::{Child, Command};

/// The shipped binary, built once for the test run.
fn mcp_bridges() -> PathBuf {
    mcp_testkit::cargo::build_bin("mcp-bridges", "mcp-bridges")
}

#[derive(Clone, Copy)]
enum Stop {
    Sigterm,
    /// No shutdown of the bridge's own runs: only what the kernel does for it.
    Sigkill,
    /// The MCP client goes away: the stdio transport's end of input.
    StdinClosed,
}

/// `mcp-bridges debug` on `ws` (dap backend, one session at most, a short drain so the launch is cut short soon), with
/// `extra` flags, and an MCP client on its stdio.
async fn bridge(ws: &Path, extra: &[&std::ffi::OsStr]) -> (Child, RunningService<RoleClient, ()>) {
    let mut child = Command::new(mcp_bridges())
        .args(["debug", "--debug-workspace"])
        .arg(ws)
        .args(["--debug-backend", "dap", "--debug-max-sessions", "1"])
        .args(["--shutdown-grace", "200ms"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("mcp-bridges debug starts");
    let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = mcp_testkit::within(
        "the stdio handshake",
        ().serve_with_lifecycle(io, mcp_testkit::lifecycle(Era::Legacy)),
    )
    .await
    .unwrap();
    (child, client)
}

/// Kills, when the test ends however it ends, every pid recorded in the files: a failing run leaves nothing.
struct Reap(Vec<PathBuf>);

impl Drop for Reap {
    fn drop(&mut self) {
        for pid in self.0.iter().flat_map(|f| pids_in(f)) {
            if running(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// A bridge whose `debug_start` is waiting on the debugger.
struct Launching {
    child: Child,
    client: RunningService<RoleClient, ()>,
    call: rmcp::service::RequestHandle<RoleClient>,
}

impl Launching {
    /// Starts `config` and waits until `ready` (the launch is then waiting on the debugger).
    async fn start(
        ws: &Path,
        extra: &[&std::ffi::OsStr],
        config: Value,
        ready: impl Fn() -> bool,
    ) -> Self {
        let (child, client) = bridge(ws, extra).await;
        let call = start_call(&client, "debug_start", json!({"config": config})).await;
        until("the launch reached the debugger", ready).await;
        Self {
            child,
            client,
            call,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }

    /// Stops the bridge as `stop` says and waits for it to exit.
    async fn stop(mut self, stop: Stop) {
        match stop {
            Stop::Sigterm => {
                let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
                nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
            }
            Stop::Sigkill => {
                let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
                nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
            }
            Stop::StdinClosed => {
                drop(self.call);
                drop(self.client);
            }
        }
        let status = mcp_testkit::within("the bridge exits", self.child.wait())
            .await
            .unwrap();
        if !matches!(stop, Stop::Sigkill) {
            assert!(status.success(), "the bridge exits normally: {status}");
        }
    }
}

/// `pid`'s parent, from /proc.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
        .and_then(|p| p.parse().ok())
}

/// `pid` and its ancestors below `top` (delve, `go build` and what it runs, up to the bridge).
fn line_below(pid: u32, top: u32) -> Vec<u32> {
    let mut line = vec![pid];
    while let Some(parent) = parent_of(*line.last().unwrap()) {
        if parent == top || parent <= 1 {
            break;
        }
        line.push(parent);
    }
    line
}

/// debugpy's adapter hung (`hung_dap.py`, its program a `sleep` in its group).
async fn stdio_adapter(stop: Stop, tag: &str) {
    let ws = workspace(tag);
    let _reap = Reap(vec![ws.join("adapter.pid"), ws.join("program.pid")]);
    let python = hung_python(&ws);
    let config = json!({"type": "debugpy", "request": "launch", "name": "py",
        "program": ws.join("target.py").display().to_string()});
    let adapter = ws.join("adapter.pid");
    Launching::start(
        &ws,
        &["--debug-python".as_ref(), python.as_os_str()],
        config,
        || !pids_in(&adapter).is_empty(),
    )
    .await
    .stop(stop)
    .await;
    assert_exited("the adapter", &pids_in(&adapter)).await;
    assert_exited("the program", &pids_in(&ws.join("program.pid"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_launch_leaves_no_adapter_or_program() {
    stdio_adapter(Stop::Sigterm, "shutdown-stdio-term").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_closed_during_a_launch_leaves_no_adapter_or_program() {
    stdio_adapter(Stop::StdinClosed, "shutdown-stdio-eof").await;
}

/// js-debug's server (`hung_js_debug.js`): the program's session hangs after its `launch`, which started the
/// program (a `sleep`) in the server's group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_js_debug_launch_leaves_no_server_program_or_socket_directory() {
    let ws = workspace("shutdown-js");
    let _reap = Reap(vec![ws.join("adapter.pid"), ws.join("program.pid")]);
    let (server, config) = hung_js_debug(&ws);
    let marker = ws.join("child-launch");
    let launching = Launching::start(
        &ws,
        &["--debug-js-debug".as_ref(), server.as_os_str()],
        config,
        || marker.exists(),
    )
    .await;
    let bridge_pid = launching.pid();
    launching.stop(Stop::Sigterm).await;
    assert_exited("js-debug's server", &pids_in(&ws.join("adapter.pid"))).await;
    assert_exited("the program", &pids_in(&ws.join("program.pid"))).await;
    until("js-debug's socket directory is removed", || {
        js_socket_dirs(bridge_pid).is_empty()
    })
    .await;
}

/// Real delve, its `go build` held by a `-toolexec` program that records its pid and sleeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_delve_build_leaves_no_delve_or_build() {
    let ws = workspace("shutdown-go");
    let pid_file = ws.join("build.pid");
    let _reap = Reap(vec![pid_file.clone(), ws.join("line.pid")]);
    let config = go_held_in_its_build(&ws, &pid_file);
    // `-toolexec` runs a program of the configuration's: the launch policy takes it only with the flag.
    let anywhere = std::ffi::OsStr::new("--debug-allow-launch-anywhere");
    let launching =
        Launching::start(&ws, &[anywhere], config, || !pids_in(&pid_file).is_empty()).await;
    let delve_and_build = line_below(pids_in(&pid_file)[0], launching.pid());
    assert!(
        delve_and_build.len() >= 3,
        "the held tool, go build and delve: {delve_and_build:?}"
    );
    let line: Vec<String> = delve_and_build.iter().map(u32::to_string).collect();
    std::fs::write(ws.join("line.pid"), line.join(" ")).unwrap();
    launching.stop(Stop::Sigterm).await;
    assert_exited("delve and its build", &delve_and_build).await;
}

/// Killed outright, the bridge runs no clean-up: its debug servers, which would listen on for good (they do not
/// end when a client's connection does), die with it (their parent-death signal). What a server started in its
/// group is beyond that signal (see docs/debug.md); the test reaps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_killed_outright_takes_its_debug_server_with_it() {
    let ws = workspace("shutdown-kill");
    let _reap = Reap(vec![ws.join("adapter.pid"), ws.join("program.pid")]);
    let (server, config) = hung_js_debug(&ws);
    let marker = ws.join("child-launch");
    Launching::start(
        &ws,
        &["--debug-js-debug".as_ref(), server.as_os_str()],
        config,
        || marker.exists(),
    )
    .await
    .stop(Stop::Sigkill)
    .await;
    assert_exited("js-debug's server", &pids_in(&ws.join("adapter.pid"))).await;
}
