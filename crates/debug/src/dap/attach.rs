//! Attaching to a program the bridge did not start, and detaching from it. `debug_attach` reaches:
//! - a debugpy listener (`python -m debugpy --listen HOST:PORT`) by `address`;
//! - a process by `pid`: Python through debugpy (the bridge injects debugpy's server with lldb, see
//!   [`DapBackend::attach_python_pid`]), anything else through lldb-dap's attach by `pid`, a node started with
//!   `--inspect` through js-debug at the inspector's address read from its command line; `language` overrides
//!   the guess made from `/proc/PID/exe`;
//! - Node's inspector by `address` with `language: node` (js-debug's `pwa-node` attach).
//!
//! The trust policy is launch's: attaching at all needs `--debug-allow-launch-anywhere`, and a pid must be a process
//! of the bridge's own user (real, effective and saved uid), even where the bridge could ptrace more (root).
//! Where the kernel would refuse ptrace (Yama's `ptrace_scope`), the attach is refused before any debugger
//! runs, with the reason and what to change. `debug_detach` leaves the program running in every case.

use super::backend::{DapBackend, Params, bool_param, str_param, u64_param};
use super::ending::Ending;
use super::launch::{AdapterKind, find_program};
use crate::envelope::ScriptError;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use tokio::time::Instant;

/// Yama's setting: who may ptrace whom (absent without Yama: classic rules).
const PTRACE_SCOPE: &str = "/proc/sys/kernel/yama/ptrace_scope";
/// Bit of CAP_SYS_PTRACE in `/proc/self/status`'s `CapEff`.
const CAP_SYS_PTRACE: u32 = 19;
/// The kernel's largest pid (`PID_MAX_LIMIT` on 64-bit).
const PID_MAX: u32 = 1 << 22;
/// Node's inspector when `--inspect` names no port.
const INSPECTOR_PORT: u16 = 9229;

/// Which debugger a process is attached with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    Python,
    Native,
    Node,
}

impl Lang {
    fn name(self) -> &'static str {
        match self {
            Self::Python => "python",
            Self::Native => "native",
            Self::Node => "node",
        }
    }
}

impl DapBackend {
    /// `debug_attach {address | pid, language?}`: a `debug_start` of the attach configuration each kind needs.
    pub(super) async fn attach(&self, p: &Params, deadline: Instant) -> Result<Value, ScriptError> {
        let language = parse_language(str_param(p, "language"))?;
        let pid = match p.get("pid") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| (1..=PID_MAX).contains(n))
                    .ok_or_else(|| {
                        ScriptError::new(
                            "E_INVALID_PARAMS",
                            format!("pid {v} is not a process id (1..=4194304)"),
                        )
                        .details(json!({"field": "pid"}))
                    })?,
            ),
        };
        let address = str_param(p, "address");
        let jmc = bool_param(p, "justMyCode").unwrap_or(true);
        let (config, attached, lang) = match (pid, address) {
            (Some(_), Some(_)) => {
                return Err(ScriptError::new(
                    "E_INVALID_PARAMS",
                    "pass either address (a listener) or pid (a process), not both",
                )
                .details(json!({"field": "pid"})));
            }
            (None, None) => {
                return Err(ScriptError::new(
                    "E_INVALID_PARAMS",
                    "debug_attach needs address (host:port of a debugpy listener or Node inspector) or pid",
                )
                .details(json!({"field": "address"})));
            }
            (None, Some(address)) => {
                let (host, port) = parse_address(address)?;
                self.cfg.policy.attach_allowed("address")?;
                let lang = language.unwrap_or(Lang::Python);
                let config = match lang {
                    Lang::Python => {
                        json!({"type": "debugpy", "request": "attach", "name": format!("attach {host}:{port}"),
                            "connect": {"host": host, "port": port}, "justMyCode": jmc})
                    }
                    Lang::Node => node_config(&host, port, &format!("attach {host}:{port}")),
                    Lang::Native => {
                        return Err(ScriptError::new(
                            "E_INVALID_PARAMS",
                            "a native program (lldb-dap) is attached to by pid, not by address",
                        )
                        .hint("Pass pid instead of address")
                        .details(json!({"field": "language"})));
                    }
                };
                (config, json!(format!("{host}:{port}")), lang)
            }
            (Some(pid), None) => {
                // Judged before the process is looked at: the opt-in comes first.
                self.cfg.policy.attach_allowed("pid")?;
                let process = Process::read(pid)?;
                process.owned_by(nix::unistd::geteuid().as_raw())?;
                let lang = language.unwrap_or_else(|| process.guess());
                let name = format!("attach pid {pid}");
                let config = match lang {
                    Lang::Python => {
                        ptrace_allowed(pid)?;
                        return self.attach_python_pid(p, pid, jmc, deadline).await;
                    }
                    Lang::Native => {
                        ptrace_allowed(pid)?;
                        json!({"type": "lldb-dap", "request": "attach", "name": name, "pid": pid})
                    }
                    Lang::Node => {
                        let (host, port) = process.inspector()?;
                        node_config(&host, port, &name)
                    }
                };
                (config, json!({"pid": pid}), lang)
            }
        };
        let mut start = Params::new();
        start.insert("config".into(), config);
        if let Some(w) = bool_param(p, "wait") {
            start.insert("wait".into(), json!(w));
        }
        if let Some(t) = u64_param(p, "timeoutMs") {
            start.insert("timeoutMs".into(), json!(t));
        }
        let mut result = self
            .start(&start, deadline)
            .await
            .map_err(|e| ptrace_failure(e, pid))?;
        result["attached"] = attached;
        result["language"] = json!(lang.name());
        Ok(result)
    }

    /// Python by pid. debugpy's own attach by `processId` calls into the process from gdb (or lldb) and runs
    /// its whole start-up inside that call: on kernels whose extended register state gdb 13 cannot write
    /// ("Couldn't write extended state status", Debian bookworm's gdb on a recent kernel with AMX) the call
    /// fails and the interrupted `sleep` of the program leaks ERESTARTNOHAND and kills it; under lldb the
    /// start-up's `uname -p` (a vfork) interrupts the call. So the bridge injects with lldb itself, and the
    /// call only takes the GIL, starts a thread that runs debugpy's `attach_pid_injected` (connecting to the
    /// adapter, which listens for it), and gives the GIL back: the vfork happens after the detach.
    async fn attach_python_pid(
        &self,
        p: &Params,
        pid: u32,
        jmc: bool,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let lldb = find_program(&["lldb", "lldb-19"], &["/usr/lib/llvm-19/bin/lldb"]).ok_or_else(|| {
            ScriptError::new(
                "E_ADAPTER_NOT_FOUND",
                "attaching to a running Python by pid injects debugpy through lldb, and there is no lldb on PATH",
            )
            .hint("Install lldb (apt-get install lldb-19), or run the program under python -m debugpy --listen HOST:PORT and attach by address")
        })?;
        let server_dir = self.debugpy_server_dir()?;
        let port = free_port().map_err(|e| {
            ScriptError::new("E_LAUNCH_FAILED", format!("no free port for debugpy: {e}"))
        })?;
        let name = format!("attach pid {pid}");
        let config = json!({"type": "debugpy", "request": "attach", "name": name,
            "listen": {"host": "127.0.0.1", "port": port}, "justMyCode": jmc});
        let mut start = Params::new();
        start.insert("config".into(), config);
        for key in ["wait", "timeoutMs"] {
            if let Some(v) = p.get(key) {
                start.insert(key.into(), v.clone());
            }
        }
        let started = self.start(&start, deadline);
        let injected = inject_python(&lldb, pid, port, &server_dir, deadline);
        tokio::pin!(started);
        tokio::pin!(injected);
        // The start waits for the program's debug server, which only the injection brings: an injection that
        // failed ends the waiting session at once instead of at the deadline.
        let result = tokio::select! {
            r = &mut started => {
                let inj = injected.await;
                r.and_then(|v| inj.map(|()| v))
            }
            inj = &mut injected => match inj {
                Ok(()) => started.await,
                Err(e) => {
                    for s in self.live_sessions() {
                        if s.config.get("name").and_then(Value::as_str) == Some(name.as_str()) {
                            self.end_session(&s, Ending::Terminate).await;
                        }
                    }
                    let _ = started.await;
                    Err(e)
                }
            },
        };
        let mut result = result.map_err(|e| ptrace_failure(e, Some(pid)))?;
        // The adapter takes whichever debug server connects first, and any local process can connect to a
        // loopback port: the session is kept only if every connection to the adapter came from `pid`.
        let foreign = foreign_clients(port, pid);
        if !foreign.is_empty() {
            let id = result.get("sessionId").and_then(Value::as_str);
            for s in self.live_sessions() {
                if Some(s.id.as_str()) == id {
                    self.end_session(&s, Ending::Terminate).await;
                }
            }
            return Err(ScriptError::new(
                "E_LAUNCH_FAILED",
                format!(
                    "another process connected to debugpy's port 127.0.0.1:{port} while attaching to process {pid} (socket inodes {foreign:?}): the session was ended"
                ),
            )
            .hint("Call again; if it keeps happening, something on this machine is racing for debugger ports")
            .details(json!({"pid": pid, "port": port})));
        }
        result["attached"] = json!({"pid": pid});
        result["language"] = json!(Lang::Python.name());
        Ok(result)
    }

    /// debugpy's `server` directory (which holds `attach_pid_injected.py`) for the Python that runs the adapter.
    fn debugpy_server_dir(&self) -> Result<PathBuf, ScriptError> {
        let python = self
            .cfg
            .python
            .clone()
            .or_else(|| find_program(&["python3", "python"], &[]))
            .ok_or_else(|| {
                ScriptError::new("E_ADAPTER_NOT_FOUND", "no python3 on PATH")
                    .hint(AdapterKind::Debugpy.install_hint())
            })?;
        let out = std::process::Command::new(&python)
            .args([
                "-c",
                "import debugpy, os; print(os.path.dirname(debugpy.__file__))",
            ])
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| {
                ScriptError::new("E_ADAPTER_NOT_FOUND", format!("{}: {e}", python.display()))
            })?;
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("server");
        if !out.status.success() || !dir.join("attach_pid_injected.py").is_file() {
            return Err(ScriptError::new(
                "E_ADAPTER_NOT_FOUND",
                format!("debugpy is not installed for {}", python.display()),
            )
            .hint(AdapterKind::Debugpy.install_hint()));
        }
        Ok(dir)
    }

    /// Ends the session but not an attached program. A launched one runs in its adapter's process group,
    /// which goes with the adapter: it ends either way, and the answer says so.
    pub(super) async fn detach(&self, p: &Params) -> Result<Value, ScriptError> {
        let session = self.session(p)?;
        let attached = session.is_attached();
        self.end_session(&session, Ending::Detach).await;
        let note = if attached {
            "the program runs on without the debugger (its breakpoints removed)"
        } else {
            "the bridge launched this program: it ended with its debugger"
        };
        Ok(json!({"success": true, "sessionId": session.id, "detached": attached, "note": note}))
    }
}

/// A port chosen, then released for debugpy's adapter to listen on (another process may take it in between:
/// the adapter then fails to listen and the attach fails, nothing worse).
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Whether something listens on 127.0.0.1:`port` (`/proc/net/tcp`, without connecting: debugpy's adapter
/// would take a connection for the program's debug server).
fn listening(port: u16) -> bool {
    let want = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp").is_ok_and(|t| {
        t.lines().skip(1).any(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.get(1) == Some(&want.as_str()) && cols.get(3) == Some(&"0A")
        })
    })
}

/// The client ends of the connections to 127.0.0.1:`port` that are not `pid`'s sockets (their inodes).
fn foreign_clients(port: u16, pid: u32) -> Vec<u64> {
    let want = format!("0100007F:{port:04X}");
    let clients: Vec<u64> = std::fs::read_to_string("/proc/net/tcp")
        .map(|t| {
            t.lines()
                .skip(1)
                .filter_map(|l| {
                    let cols: Vec<&str> = l.split_whitespace().collect();
                    (cols.get(2) == Some(&want.as_str()) && cols.get(3) == Some(&"01"))
                        .then(|| cols.get(9).and_then(|i| i.parse().ok()))
                        .flatten()
                })
                .collect()
        })
        .unwrap_or_default();
    let own: std::collections::HashSet<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| {
                    l.to_str()?
                        .strip_prefix("socket:[")?
                        .strip_suffix(']')?
                        .parse()
                        .ok()
                })
                .collect()
        })
        .unwrap_or_default();
    clients.into_iter().filter(|i| !own.contains(i)).collect()
}

/// The Python the injected call runs: a thread that starts debugpy's server and connects it to the adapter.
fn injected_source(server_dir: &Path, port: u16) -> String {
    let dir = serde_json::to_string(&server_dir.display().to_string()).unwrap_or_default();
    let setup = format!(
        "{{'mode': 'connect', 'address': ['127.0.0.1', {port}], 'wait_for_client': False, 'log_to': None, 'adapter_access_token': None}}"
    );
    [
        "import sys, threading".to_owned(),
        "def _mcp_bridges_attach():".to_owned(),
        format!("    sys.path.insert(0, {dir})"),
        "    try:".to_owned(),
        "        import attach_pid_injected".to_owned(),
        "    finally:".to_owned(),
        "        del sys.path[0]".to_owned(),
        format!("    attach_pid_injected.attach({setup})"),
        "threading.Thread(target=_mcp_bridges_attach, name='mcp-bridges attach', daemon=True).start()"
            .to_owned(),
        String::new(),
    ]
    .join("\n")
}

/// Waits for the adapter to listen on `port`, then has lldb run [`injected_source`] in `pid` under the GIL
/// and detach. The function pointers are cast so that a Python without debug symbols works too.
async fn inject_python(
    lldb: &Path,
    pid: u32,
    port: u16,
    server_dir: &Path,
    deadline: Instant,
) -> Result<(), ScriptError> {
    let failed = |msg: String| {
        ScriptError::new("E_LAUNCH_FAILED", msg).hint(
            "Check that the process runs CPython 3.8 or newer; or run it under python -m debugpy --listen HOST:PORT and attach by address",
        )
    };
    while !listening(port) {
        if Instant::now() >= deadline {
            return Err(failed(format!(
                "debugpy's adapter never listened on 127.0.0.1:{port}"
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let hex: String = injected_source(server_dir, port)
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    let run = format!(
        "expr -- ((int (*)(const char *))PyRun_SimpleString)(\"exec(bytes.fromhex('{hex}').decode())\")"
    );
    let mut cmd = tokio::process::Command::new(lldb);
    cmd.args(["--no-lldbinit", "--batch", "-p", &pid.to_string(), "-o"])
        .arg("expr -- int $mcp_gil = ((int (*)(void))PyGILState_Ensure)()")
        .arg("-o")
        .arg(run)
        .arg("-o")
        .arg("expr -- ((void (*)(int))PyGILState_Release)($mcp_gil)")
        .args(["-o", "process detach"])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(super::backend::left(deadline), cmd.output())
        .await
        .map_err(|_| {
            failed(format!(
                "lldb did not finish injecting debugpy into process {pid} in time"
            ))
        })?
        .map_err(|e| failed(format!("could not run {}: {e}", lldb.display())))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // PyRun_SimpleString answers 0 when the thread was started.
    let ran = text
        .lines()
        .any(|l| l.trim_start().starts_with("(int) $") && l.trim_end().ends_with("= 0"));
    if out.status.success() && ran && !text.contains("error:") {
        return Ok(());
    }
    let mut tail: Vec<&str> = text.lines().filter(|l| !l.contains("fromhex")).collect();
    tail.reverse();
    tail.truncate(12);
    tail.reverse();
    Err(failed(format!(
        "lldb could not inject debugpy into process {pid}: {}",
        tail.join(" | ")
    )))
}

/// js-debug's attach to a Node inspector; a program waiting in `--inspect-brk` is let go.
fn node_config(host: &str, port: u16, name: &str) -> Value {
    json!({"type": "pwa-node", "request": "attach", "name": name, "address": host, "port": port,
        "continueOnAttach": true})
}

fn parse_language(raw: Option<&str>) -> Result<Option<Lang>, ScriptError> {
    Ok(match raw {
        None => None,
        Some("python") => Some(Lang::Python),
        Some("node") => Some(Lang::Node),
        Some("native" | "c" | "cpp" | "rust") => Some(Lang::Native),
        Some(other) => {
            return Err(ScriptError::new(
                "E_INVALID_PARAMS",
                format!("language `{other}` is not one of python, node, native, c, cpp, rust"),
            )
            .details(json!({"field": "language"})));
        }
    })
}

/// What `/proc` says of a process: who owns it, what it runs, its arguments and `NODE_OPTIONS`.
struct Process {
    pid: u32,
    /// Real, effective and saved uid.
    uids: Vec<u32>,
    exe: Option<PathBuf>,
    args: Vec<String>,
    node_options: Option<String>,
}

impl Process {
    fn read(pid: u32) -> Result<Self, ScriptError> {
        if pid == std::process::id() {
            return Err(ScriptError::new(
                "E_INVALID_PARAMS",
                format!("pid {pid} is this bridge itself"),
            )
            .details(json!({"field": "pid"})));
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| {
            ScriptError::new("E_INVALID_PARAMS", format!("no process {pid}: {e}"))
                .hint("Pass the pid of a running process (ps, pgrep)")
                .details(json!({"field": "pid", "pid": pid}))
        })?;
        let uids = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .map(|rest| {
                rest.split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .take(3)
                    .collect()
            })
            .unwrap_or_default();
        let args = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|raw| {
                raw.split(|b| *b == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let node_options = std::fs::read(format!("/proc/{pid}/environ"))
            .ok()
            .and_then(|raw| {
                raw.split(|b| *b == 0).find_map(|kv| {
                    kv.strip_prefix(b"NODE_OPTIONS=")
                        .map(|v| String::from_utf8_lossy(v).into_owned())
                })
            });
        Ok(Self {
            pid,
            uids,
            exe: std::fs::read_link(format!("/proc/{pid}/exe")).ok(),
            args,
            node_options,
        })
    }

    /// The trust policy: only the bridge's own user's processes, whatever else the bridge could trace.
    fn owned_by(&self, me: u32) -> Result<(), ScriptError> {
        if self.uids.len() == 3 && self.uids.iter().all(|u| *u == me) {
            return Ok(());
        }
        let uid = self.uids.first().copied();
        Err(ScriptError::new(
            "E_LAUNCH_REFUSED",
            format!(
                "process {} belongs to uid {} (real, effective, saved: {:?}), not to the bridge's user (uid {me}): the bridge attaches only to its own user's processes",
                self.pid,
                uid.map_or_else(|| "?".into(), |u| u.to_string()),
                self.uids
            ),
        )
        .hint("Run the bridge as that process's user, or start the program as the bridge's user (debug_start)")
        .details(json!({"field": "pid", "pid": self.pid, "uid": uid, "uids": self.uids, "bridgeUid": me})))
    }

    /// Python for a `python*`/`pypy*` executable, Node for `node`/`nodejs`, else native (lldb-dap).
    fn guess(&self) -> Lang {
        let name = self
            .exe
            .as_deref()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with("python") || name.starts_with("pypy") {
            Lang::Python
        } else if name == "node" || name == "nodejs" {
            Lang::Node
        } else {
            Lang::Native
        }
    }

    /// Where a node's inspector listens, from `--inspect[-brk|-wait][=[host:]port]` and `--inspect-port` in
    /// `NODE_OPTIONS` and then on its command line (which wins, as in node).
    fn inspector(&self) -> Result<(String, u16), ScriptError> {
        let from_env: Vec<String> = self
            .node_options
            .as_deref()
            .map(|o| o.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        // node's own options come before the script; what follows it is the script's.
        let own = self
            .args
            .iter()
            .skip(1)
            .take_while(|a| a.starts_with('-'))
            .cloned();
        let found = inspector_of(from_env.into_iter().chain(own));
        let not_inspecting = || {
            ScriptError::new(
                "E_INVALID_PARAMS",
                format!(
                    "process {} is a node without its inspector open (no --inspect on its command line or in NODE_OPTIONS)",
                    self.pid
                ),
            )
            .hint("Start it with node --inspect=127.0.0.1:9229 (or send it SIGUSR1, which opens the inspector on 127.0.0.1:9229) and attach by address with language node")
            .details(json!({"field": "pid", "pid": self.pid}))
        };
        let (host, port) = found.ok_or_else(not_inspecting)?;
        if port == 0 {
            return Err(ScriptError::new(
                "E_INVALID_PARAMS",
                format!(
                    "process {} opened its inspector on a random port (--inspect=0), which its command line does not tell",
                    self.pid
                ),
            )
            .hint("Attach by address with language node: node printed the port (Debugger listening on ws://HOST:PORT/...)")
            .details(json!({"field": "pid", "pid": self.pid})));
        }
        Ok((host, port))
    }
}

/// The inspector address the last `--inspect*` option names; `None` when none opens it.
fn inspector_of(options: impl Iterator<Item = String>) -> Option<(String, u16)> {
    let mut open = false;
    let (mut host, mut port) = ("127.0.0.1".to_owned(), INSPECTOR_PORT);
    for opt in options {
        let (flag, value) = match opt.split_once('=') {
            Some((f, v)) => (f.to_owned(), Some(v.to_owned())),
            None => (opt.clone(), None),
        };
        match flag.as_str() {
            "--inspect" | "--inspect-brk" | "--inspect-wait" => open = true,
            "--inspect-port" | "--debug-port" => {}
            _ => continue,
        }
        let Some(value) = value else { continue };
        match value.rsplit_once(':') {
            Some((h, p)) => {
                if let Ok(p) = p.parse() {
                    host = h.trim_start_matches('[').trim_end_matches(']').to_owned();
                    port = p;
                }
            }
            None => match value.parse() {
                Ok(p) => port = p,
                Err(_) => host = value,
            },
        }
    }
    // A wildcard listens on loopback too.
    match host.as_str() {
        "0.0.0.0" | "" => host = "127.0.0.1".into(),
        "::" => host = "::1".into(),
        _ => {}
    }
    open.then_some((host, port))
}

/// Why Yama would refuse to let the bridge's debugger ptrace an existing process it did not start, if it
/// would. The debugger (lldb-server) is started by the bridge or its adapter, so it is never the target's ancestor.
fn ptrace_refusal(scope: Option<u8>, cap_sys_ptrace: bool) -> Option<String> {
    match scope {
        Some(3) => Some("kernel.yama.ptrace_scope is 3: no process may be traced until reboot".into()),
        Some(2) if !cap_sys_ptrace => Some(
            "kernel.yama.ptrace_scope is 2: only a process with CAP_SYS_PTRACE may trace, and the bridge lacks it".into(),
        ),
        Some(1) if !cap_sys_ptrace => Some(
            "kernel.yama.ptrace_scope is 1: a process may trace only its own descendants, and the debugger is not the target's ancestor (the bridge lacks CAP_SYS_PTRACE)".into(),
        ),
        _ => None,
    }
}

const PTRACE_HINT: &str = "As root: sysctl kernel.yama.ptrace_scope=0 (1 and 2 also allow it if the bridge runs with CAP_SYS_PTRACE); or start the program under the debugger (debug_start), or for Python under python -m debugpy --listen HOST:PORT and attach by address";

fn ptrace_allowed(pid: u32) -> Result<(), ScriptError> {
    let scope = std::fs::read_to_string(PTRACE_SCOPE)
        .ok()
        .and_then(|s| s.trim().parse().ok());
    let cap = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << CAP_SYS_PTRACE) != 0);
    match ptrace_refusal(scope, cap) {
        None => Ok(()),
        Some(why) => Err(ScriptError::new(
            "E_PTRACE_REFUSED",
            format!("the kernel would refuse to trace process {pid}: {why}"),
        )
        .hint(PTRACE_HINT)
        .details(json!({"field": "pid", "pid": pid, "ptraceScope": scope, "capSysPtrace": cap}))),
    }
}

/// A debugger's own report that ptrace was refused (a seccomp filter, a non-dumpable process) becomes
/// `E_PTRACE_REFUSED` with what to do.
fn ptrace_failure(e: ScriptError, pid: Option<u32>) -> ScriptError {
    let told = [
        "Operation not permitted",
        "ptrace",
        "not permitted to attach",
    ];
    if pid.is_none() || e.code != "E_LAUNCH_FAILED" || !told.iter().any(|t| e.message.contains(t)) {
        return e;
    }
    ScriptError::new(
        "E_PTRACE_REFUSED",
        format!(
            "the debugger was not allowed to trace the process: {}",
            e.message
        ),
    )
    .hint(PTRACE_HINT)
    .details(json!({"field": "pid", "pid": pid}))
}

/// The address of the debugpy listener a configuration attaches to (`connect: {host, port}`), if it does.
pub(super) fn listener(kind: AdapterKind, config: &Value) -> Option<String> {
    if kind != AdapterKind::Debugpy
        || config.get("request").and_then(Value::as_str) != Some("attach")
    {
        return None;
    }
    let connect = config.get("connect")?;
    let host = connect
        .get("host")
        .and_then(Value::as_str)
        .unwrap_or("127.0.0.1");
    let port = connect.get("port").and_then(Value::as_u64)?;
    Some(if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    })
}

/// `host:port` (an IPv6 host in brackets), or `E_INVALID_PARAMS` naming the field.
fn parse_address(address: &str) -> Result<(String, u16), ScriptError> {
    let invalid = || {
        ScriptError::new(
            "E_INVALID_PARAMS",
            format!("address `{address}` is not host:port (e.g. 127.0.0.1:5678)"),
        )
        .details(json!({"field": "address"}))
    };
    let (host, port) = address.rsplit_once(':').ok_or_else(invalid)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u16 = port.parse().map_err(|_| invalid())?;
    if host.is_empty() || port == 0 {
        return Err(invalid());
    }
    Ok((host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_or_name_the_field() {
        assert_eq!(
            parse_address("127.0.0.1:5678").ok(),
            Some(("127.0.0.1".to_owned(), 5678))
        );
        assert_eq!(parse_address("[::1]:9").ok(), Some(("::1".to_owned(), 9)));
        for bad in ["", "5678", "host:", "host:0", ":80", "h:99999"] {
            let e = parse_address(bad).err().map(|e| e.code);
            assert_eq!(e.as_deref(), Some("E_INVALID_PARAMS"), "{bad}");
        }
    }

    fn inspector(opts: &[&str]) -> Option<(String, u16)> {
        inspector_of(opts.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn the_inspector_address_comes_from_node_s_options() {
        let at = |h: &str, p| Some((h.to_owned(), p));
        assert_eq!(inspector(&["--inspect"]), at("127.0.0.1", 9229));
        assert_eq!(inspector(&["--inspect=9300"]), at("127.0.0.1", 9300));
        assert_eq!(
            inspector(&["--inspect-brk=0.0.0.0:9301"]),
            at("127.0.0.1", 9301)
        );
        assert_eq!(inspector(&["--inspect=[::1]:9302"]), at("::1", 9302));
        assert_eq!(
            inspector(&["--inspect", "--inspect-port=9303"]),
            at("127.0.0.1", 9303)
        );
        assert_eq!(
            inspector(&["--inspect-port=9303"]),
            None,
            "a port alone opens nothing"
        );
        assert_eq!(inspector(&["--max-old-space-size=100"]), None);
    }

    /// A connection to the adapter's port is the attached process's own only if its client socket is among
    /// that process's file descriptors.
    #[test]
    #[allow(clippy::unwrap_used)]
    fn a_connection_from_another_process_is_foreign() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(listening(port));
        let _client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _accepted = listener.accept().unwrap();
        assert_eq!(foreign_clients(port, std::process::id()), Vec::<u64>::new());
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let foreign = foreign_clients(port, other.id());
        let _ = other.kill();
        let _ = other.wait();
        assert_eq!(foreign.len(), 1, "{foreign:?}");
    }

    #[test]
    fn yama_scopes_refuse_unless_the_capability_allows() {
        assert!(
            ptrace_refusal(None, false).is_none(),
            "no Yama: classic rules"
        );
        assert!(ptrace_refusal(Some(0), false).is_none());
        assert!(ptrace_refusal(Some(1), false).is_some_and(|w| w.contains("ptrace_scope is 1")));
        assert!(ptrace_refusal(Some(1), true).is_none());
        assert!(ptrace_refusal(Some(2), false).is_some());
        assert!(ptrace_refusal(Some(2), true).is_none());
        assert!(
            ptrace_refusal(Some(3), true).is_some(),
            "3 refuses even CAP_SYS_PTRACE"
        );
    }

    #[test]
    fn a_debugger_s_ptrace_refusal_is_coded() {
        let e = ScriptError::new(
            "E_LAUNCH_FAILED",
            "attach failed: ptrace(PTRACE_ATTACH): Operation not permitted",
        );
        assert_eq!(ptrace_failure(e, Some(7)).code, "E_PTRACE_REFUSED");
        let e = ScriptError::new("E_LAUNCH_FAILED", "Operation not permitted");
        assert_eq!(
            ptrace_failure(e, None).code,
            "E_LAUNCH_FAILED",
            "by address: no ptrace"
        );
    }
}
