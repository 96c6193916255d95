//! The bridge in-process with a real rmcp client (stdio framing over a pipe, or HTTP on loopback), real
//! sandboxes from the real agent binary, and the host-side checks the containment tests need.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use bridge_core::BridgeEnv;
use bridge_core::serve::{HttpOptions, serve_http};
use bridge_sandbox::config::SandboxArgs;
use bridge_sandbox::manager::Manager;
use clap::Parser;
use mcp_testkit::Era;
use rmcp::model::CallToolResult;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

#[allow(unused_imports)]
pub use mcp_testkit::{error_of, ok_of};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: SandboxArgs,
}

/// The agent binary, built once per test process (cargo does nothing when it is up to date).
pub fn agent_bin() -> PathBuf {
    mcp_testkit::cargo::build_bin("sandbox-agent", "sandbox-agent")
}

pub fn args(extra: &[&str]) -> SandboxArgs {
    let bin = agent_bin();
    let mut argv = vec![
        "test".to_string(),
        "--sandbox-agent-bin".into(),
        bin.to_string_lossy().into_owned(),
    ];
    // No warm pool unless a test asks: sandboxes booting in the background would blur what tests count.
    if !extra.contains(&"--sandbox-pool-min-size") {
        argv.extend(["--sandbox-pool-min-size".into(), "0".into()]);
    }
    argv.extend(extra.iter().map(|s| (*s).to_string()));
    Cli::parse_from(argv).args
}

pub struct Harness {
    pub client: mcp_testkit::Client,
    pub manager: Arc<Manager>,
    pub env: BridgeEnv,
    pub http: Option<SocketAddr>,
    stop: CancellationToken,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.stop.cancel();
        self.env.links().cancel();
    }
}

pub async fn start(extra: &[&str]) -> Harness {
    start_era(extra, Era::Legacy).await
}

pub async fn start_era(extra: &[&str], era: Era) -> Harness {
    let env = BridgeEnv::new();
    let running = bridge_sandbox::start(args(extra), &env).await.unwrap();
    let client = mcp_testkit::pipe_client(running.bridge, era, vec![]).await;
    Harness {
        client,
        manager: running.manager,
        env,
        http: None,
        stop: CancellationToken::new(),
    }
}

pub async fn start_http(extra: &[&str], era: Era) -> Harness {
    let env = BridgeEnv::new();
    let running = bridge_sandbox::start(args(extra), &env).await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let bridge = running.bridge.clone();
    let s = stop.clone();
    tokio::spawn(async move { serve_http(bridge, listener, HttpOptions::default(), &[], s).await });
    let client = mcp_testkit::http_client(addr, era).await;
    Harness {
        client,
        manager: running.manager,
        env,
        http: Some(addr),
        stop,
    }
}

impl Harness {
    pub async fn call(&self, tool: &str, args: Value) -> CallToolResult {
        mcp_testkit::call(&self.client, tool, args).await
    }

    pub async fn ok(&self, tool: &str, args: Value) -> Value {
        ok_of(&self.call(tool, args).await)
    }

    pub async fn create(&self) -> String {
        let out = self.ok("create_sandbox", serde_json::json!({})).await;
        out["sandbox_id"].as_str().unwrap().to_string()
    }

    pub async fn sh(&self, id: &str, command: &str) -> Value {
        self.ok(
            "run_command",
            serde_json::json!({"sandbox_id": id, "command": command, "timeout_secs": 30}),
        )
        .await
    }

    /// Host pid of the agent (PID 1) of sandbox `id`, found through the launcher's descendants.
    pub fn launcher_pid(&self, id: &str) -> u32 {
        let s = self.manager.get(id).unwrap();
        s.instance.launcher_pid().unwrap()
    }
}

/// Every descendant pid of `pid` on the host.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        // Children are listed per thread: a multi-threaded agent forks from any of its threads.
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.filter_map(Result::ok) {
            if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
                for c in text.split_whitespace().filter_map(|c| c.parse().ok()) {
                    out.push(c);
                    frontier.push(c);
                }
            }
        }
    }
    out
}

/// The direct children of `pid` on the host.
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.filter_map(Result::ok) {
        if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// True when `pid` no longer runs (gone, or a zombie awaiting its reaper).
pub fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/status")) {
        Ok(s) => s.contains("State:\tZ"),
        Err(_) => true,
    }
}

pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    // A hang guard, not a claim about speed: generous for loaded CI machines.
    for _ in 0..2400 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{what} did not happen within 60 s");
}

/// The microvm guest (kernel, initramfs), brought up to date once per test process by
/// `scripts/build-guest` (a no-op when current; it downloads Debian's kernel the first time).
pub fn guest() -> (PathBuf, PathBuf) {
    static GUEST: OnceLock<PathBuf> = OnceLock::new();
    let dir = GUEST.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let dir = root.join(".peers/guest");
        let out = std::process::Command::new(root.join("scripts/build-guest"))
            .arg("--out")
            .arg(&dir)
            .output()
            .expect("scripts/build-guest runs");
        assert!(
            out.status.success(),
            "scripts/build-guest failed (it needs apt-get with package lists, cpio and cargo):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    });
    (dir.join("vmlinuz"), dir.join("initrd.cpio"))
}

/// Flags for a microvm bridge on QEMU's emulator (this host's KVM cannot boot a guest in time).
pub fn tcg_flags() -> Vec<String> {
    let (kernel, initrd) = guest();
    [
        "--sandbox-backend",
        "microvm",
        "--sandbox-microvm-accel",
        "tcg",
        "--sandbox-kernel",
        kernel.to_str().unwrap(),
        "--sandbox-initrd",
        initrd.to_str().unwrap(),
    ]
    .iter()
    .map(|s| (*s).to_string())
    .collect()
}

/// Processes on the host whose command line contains `needle`.
pub fn processes_naming(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().filter_map(Result::ok) {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(needle) && !dead(pid) {
            found.push(pid);
        }
    }
    found
}

pub fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Plants a crashed run's VM directory at `dir` holding `pid_file` with `pid` in it. The directory appears
/// whole (built under another name, then renamed): other tests' servers sweep the same state dir, and one that
/// found the directory before its pid file was written removed it with no pid to kill.
pub fn plant_vm_dir(dir: &std::path::Path, pid_file: &str, pid: u32) {
    let building = dir.with_file_name(format!("building-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&building).unwrap();
    std::fs::write(building.join(pid_file), pid.to_string()).unwrap();
    std::fs::rename(&building, dir).unwrap();
}

/// This process's VM directories and VMMs: none may outlive their sandbox.
pub fn our_vms() -> (Vec<String>, Vec<u32>) {
    let prefix = format!("vm-{}-", std::process::id());
    let dirs = std::fs::read_dir("/tmp/mcp-bridges-sandbox")
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default();
    (
        dirs,
        processes_naming(&format!("/tmp/mcp-bridges-sandbox/{prefix}")),
    )
}

/// Waits out a pool boot still in flight at shutdown (seconds under TCG), which is then destroyed.
pub async fn assert_no_vm_left() {
    for _ in 0..120 {
        let (dirs, vmms) = our_vms();
        if dirs.is_empty() && vmms.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("VMs left behind: {:?}", our_vms());
}

/// A root file system holding only dash (as `sh`), the C library it needs and a marker file saying `from
/// the <name> image`. `merged`: Debian's merged /usr (`/bin`, `/lib`, `/lib64` are links into `usr/`);
/// otherwise they are directories of their own, as before merged /usr.
fn build_image(name: &str, merged: bool) -> PathBuf {
    let root = std::env::temp_dir().join(format!("{name}-image-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let base = if merged {
        root.join("usr")
    } else {
        root.clone()
    };
    let lib = base.join("lib/x86_64-linux-gnu");
    for d in [
        base.join("bin"),
        base.join("lib64"),
        lib.clone(),
        root.join("usr/share"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::copy("/usr/bin/dash", base.join("bin/sh")).unwrap();
    let host_lib = std::path::Path::new("/usr/lib/x86_64-linux-gnu");
    for so in ["libc.so.6", "ld-linux-x86-64.so.2"] {
        std::fs::copy(host_lib.join(so), lib.join(so)).unwrap();
    }
    std::fs::copy(
        host_lib.join("ld-linux-x86-64.so.2"),
        base.join("lib64/ld-linux-x86-64.so.2"),
    )
    .unwrap();
    std::fs::write(
        root.join("usr/share/marker"),
        format!("from the {name} image\n"),
    )
    .unwrap();
    if merged {
        for (top, to) in [
            ("bin", "usr/bin"),
            ("lib", "usr/lib"),
            ("lib64", "usr/lib64"),
        ] {
            std::os::unix::fs::symlink(to, root.join(top)).unwrap();
        }
    }
    root
}

/// An image with merged /usr: `sh` is `/usr/bin/sh`.
pub fn tiny_image() -> PathBuf {
    build_image("tiny", true)
}

/// An image laid out as before merged /usr: `sh` is `/bin/sh`, and `/lib`, `/lib64` are directories.
pub fn split_image() -> PathBuf {
    build_image("split", false)
}

/// Creates a sandbox of image `name` (from `build_image`) and checks that it sees that image's root and
/// nothing else: only `sh` as a language, the image's marker, and `sh` alone in `bin_dir`. Returns its id.
pub async fn assert_sees_image(h: &Harness, name: &str, bin_dir: &str) -> String {
    let created = h
        .ok("create_sandbox", serde_json::json!({"image": name}))
        .await;
    assert_eq!(created["languages"], serde_json::json!(["sh"]), "{created}");
    let id = created["sandbox_id"].as_str().unwrap().to_string();
    let out = h
        .ok(
            "run_command",
            serde_json::json!({"sandbox_id": id, "command": format!("read x < /usr/share/marker; echo $x; for f in {bin_dir}/*; do echo $f; done")}),
        )
        .await;
    assert_eq!(
        out["stdout"],
        format!("from the {name} image\n{bin_dir}/sh\n"),
        "only the image's files are there: {out}"
    );
    id
}

/// The `mcp-bridges` binary, built once per test process (the attack suite starts the real bridge under a
/// pty).
pub fn bridges_bin() -> PathBuf {
    mcp_testkit::cargo::build_bin("mcp-bridges", "mcp-bridges")
}

impl Harness {
    /// Runs Python `code` in sandbox `id` (30 s timeout) and returns the exec result.
    pub async fn py(&self, id: &str, code: &str) -> Value {
        self.ok(
            "execute_code",
            serde_json::json!({"sandbox_id": id, "language": "python", "code": code, "timeout_secs": 30}),
        )
        .await
    }

    /// Runs Python `code` that prints one JSON value as its last line, and returns that value.
    pub async fn py_json(&self, id: &str, code: &str) -> Value {
        let out = self.py(id, code).await;
        let stdout = out["stdout"].as_str().unwrap_or_default();
        let last = stdout.lines().last().unwrap_or_default();
        serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
    }
}

/// Python defining `sc(nr, *args)`: a raw system call through libc's `syscall`, answering `"ok"` or the
/// errno's name (`"EPERM"`, `"ENOSYS"`, ...). A clone that succeeds exits at once in the child.
pub const PY_SYSCALL: &str = r#"
import ctypes, errno, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if r == 0 and nr == 56:
        os._exit(0)
    if r > 0 and nr == 56:
        os.waitpid(r, 0)
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
def sock(family, kind, proto=0):
    try:
        socket.socket(family, kind, proto).close()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
"#;

/// The real `mcp-bridges sandbox --stdio`, started the way a user starts it from a terminal: a shell that is
/// the session leader of a fresh pty (its controlling terminal) runs the bridge, whose stderr is that pty;
/// MCP goes over pipes. When the bridge ends, the same shell reads commands from the terminal, as a login
/// shell would: anything a sandbox pushed into the terminal's input queue would run on the host.
pub struct PtyBridge {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
    master: std::fs::File,
    /// Everything the terminal printed (the bridge's log, and the echo of anything typed or injected).
    pub screen: Arc<std::sync::Mutex<Vec<u8>>>,
    next_id: u64,
}

/// A fresh pty pair: (master, slave).
#[allow(unsafe_code)]
pub fn open_pty() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    // SAFETY: posix_openpt returns a new fd or -1, checked; grantpt/unlockpt/ptsname_r act on that fd and
    // write only into `name`, whose length is passed.
    unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(m >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
        let master = std::os::fd::OwnedFd::from_raw_fd(m);
        assert_eq!(libc::grantpt(m), 0);
        assert_eq!(libc::unlockpt(m), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(m, name.as_mut_ptr(), name.len()), 0);
        let path = std::ffi::CStr::from_ptr(name.as_ptr()).to_owned();
        let s = libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        assert!(
            s >= 0,
            "open the pty slave: {}",
            std::io::Error::last_os_error()
        );
        (master, std::os::fd::OwnedFd::from_raw_fd(s))
    }
}

impl PtyBridge {
    pub fn start() -> Self {
        use std::io::{BufRead, Read};
        use std::os::unix::process::CommandExt;
        let (master, slave) = open_pty();
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(r#""$@"; exec sh -s <&2"#)
            .arg("sh")
            .arg(bridges_bin())
            .args(["sandbox", "--stdio", "--sandbox-pool-min-size", "0"])
            .arg("--sandbox-agent-bin")
            .arg(agent_bin())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::from(slave));
        // SAFETY: between fork and exec the closure calls only setsid(2) and ioctl(2), async-signal-safe,
        // allocating nothing: the shell becomes a session leader and takes its stderr (the pty) as its
        // controlling terminal, as a login shell has.
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(2, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("the bridge starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let master = std::fs::File::from(master);
        let screen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut reader = master.try_clone().unwrap();
        let kept = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // EIO once every slave fd is closed: the end of the terminal.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    return;
                }
                kept.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let mut b = Self {
            stdin: child.stdin.take(),
            child,
            lines,
            master,
            screen,
            next_id: 1,
        };
        b.request(
            "initialize",
            serde_json::json!({"protocolVersion": "2025-03-26", "capabilities": {},
                "clientInfo": {"name": "attack-suite", "version": "0"}}),
        );
        b.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        b
    }

    fn send(&mut self, msg: &Value) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
    }

    /// A JSON-RPC request; returns its `result` (notifications in between are skipped).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(120))
                .unwrap_or_else(|e| {
                    panic!("no answer to {method}: {e}; screen: {}", self.screen_text())
                });
            let msg: Value = serde_json::from_str(&line).unwrap();
            if msg["id"] == id {
                assert!(msg["error"].is_null(), "{method}: {msg}");
                return msg["result"].clone();
            }
        }
    }

    /// A tool call's structured result.
    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        let r = self.request(
            "tools/call",
            serde_json::json!({"name": tool, "arguments": args}),
        );
        assert_ne!(r["isError"], true, "{tool}: {r}");
        r["structuredContent"].clone()
    }

    pub fn screen_text(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// Ends the bridge (stdin closed), then lets the shell read what is queued on the terminal and end at
    /// the end-of-file typed after it. Returns the shell's exit status.
    pub fn finish(mut self) -> std::process::ExitStatus {
        use std::io::Write;
        drop(self.stdin.take());
        // Typed after anything already queued: the shell reads the queue, then this end-of-file.
        std::thread::sleep(Duration::from_millis(500));
        self.master.write_all(b"\n\x04").unwrap();
        self.child.wait().unwrap()
    }
}

impl Drop for PtyBridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
