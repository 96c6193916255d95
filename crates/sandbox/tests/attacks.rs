//! The attack suite: one test per known attack on a `namespace` sandbox, each asserting the errno or the
//! outcome on the host. Run as root (as CI is). `containment.rs` keeps the older escape checks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::{Value, json};
use support::{Harness, PY_SYSCALL, PtyBridge, start};

async fn sandbox() -> (Harness, String) {
    let h = start(&[]).await;
    let id = h.create().await;
    (h, id)
}

/// Runs `expr` (Python, using `sc`/`sock` from PY_SYSCALL) in a fresh sandbox and returns its JSON value.
async fn probe(expr: &str) -> Value {
    let (h, id) = sandbox().await;
    h.py_json(&id, &format!("{PY_SYSCALL}\nprint(json.dumps({expr}))"))
        .await
}

/// The attack that reached root on the host: a sandboxed program pushing a command into the terminal of the
/// shell that started the bridge (TIOCSTI), through `/dev/tty` or any descriptor it holds. Here the real
/// binary runs under a real pty that is its shell's controlling terminal; the shell reads that terminal
/// after the bridge ends.
#[test]
fn terminal_injection_under_a_real_pty_reaches_nothing() {
    let canary = std::env::temp_dir().join(format!("attack-canary-{}", std::process::id()));
    std::fs::write(&canary, "untouched\n").unwrap();
    let mut bridge = PtyBridge::start();
    let created = bridge.call("create_sandbox", json!({}));
    let id = created["sandbox_id"].as_str().unwrap().to_string();
    // The marker is assembled inside, so the bridge's log of this call cannot contain it.
    let code = format!(
        r#"
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
payload = ("echo " + "PW" + "NED >> {canary}\n").encode()
def err(r):
    return "ok" if r == 0 else errno.errorcode[ctypes.get_errno()]
def sti(fd):
    outcomes = set()
    for b in payload:
        o = err(libc.ioctl(fd, TIOCSTI, ctypes.byref(ctypes.c_char(b))))
        outcomes.add(o)
        if o != "ok":
            break
    return outcomes
res = {{}}
try:
    tty = os.open("/dev/tty", os.O_RDWR)
    res["open_dev_tty"] = "ok"
except OSError as e:
    tty = None
    res["open_dev_tty"] = errno.errorcode[e.errno]
fds = list(range(256)) + ([tty] if tty is not None else [])
res["tiocsti"] = sorted(set().union(*[sti(fd) for fd in fds]))
res["tioclinux"] = sorted({{err(libc.ioctl(fd, TIOCLINUX, ctypes.byref(ctypes.c_char(3)))) for fd in fds}})
stat = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
res["session_leader"] = int(stat[3]) == os.getpid()
res["tty_nr"] = int(stat[4])
print(json.dumps(res))
"#,
        canary = canary.display()
    );
    let out = bridge.call(
        "execute_code",
        json!({"sandbox_id": id, "language": "python", "code": code, "timeout_secs": 60}),
    );
    let stdout = out["stdout"].as_str().unwrap();
    let res: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {out}"));
    let screen_during = bridge.screen_text();
    let status = bridge.finish();
    let canary_after = std::fs::read_to_string(&canary).unwrap();
    let _ = std::fs::remove_file(&canary);
    assert_eq!(
        canary_after, "untouched\n",
        "the shell ran an injected command: {res}"
    );
    assert!(
        !screen_during.contains("PWNED"),
        "injected bytes reached the terminal: {res}"
    );
    assert_eq!(res["open_dev_tty"], "ENOENT", "{res}");
    assert_eq!(res["tiocsti"], json!(["EPERM"]), "{res}");
    assert_eq!(res["tioclinux"], json!(["EPERM"]), "{res}");
    assert_eq!(res["session_leader"], true, "{res}");
    assert_eq!(res["tty_nr"], 0, "no controlling terminal: {res}");
    assert!(status.success(), "the shell ended cleanly: {status:?}");
}

/// A program that wants a terminal gets its own pty from a devpts instance of the sandbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_gets_its_own_pty_and_cannot_inject_into_it() {
    let (h, id) = sandbox().await;
    let res = h
        .py_json(
            &id,
            r#"
import ctypes, errno, json, os, pty
libc = ctypes.CDLL(None, use_errno=True)
m, s = pty.openpty()
os.write(s, b"hello\n")
r = libc.ioctl(s, 0x5412, ctypes.byref(ctypes.c_char(b"x")))
print(json.dumps({"tty": os.ttyname(s), "read": os.read(m, 100).decode(),
    "tiocsti": "ok" if r == 0 else errno.errorcode[ctypes.get_errno()],
    "ptmx": os.readlink("/dev/ptmx")}))
"#,
        )
        .await;
    assert_eq!(res["tty"], "/dev/pts/0", "{res}");
    assert_eq!(res["read"], "hello\r\n", "{res}");
    assert_eq!(res["tiocsti"], "EPERM", "{res}");
    assert_eq!(res["ptmx"], "pts/ptmx", "{res}");
}

/// Only stdin, stdout and stderr reach a program: nothing of the agent's (its stream, the bridge's
/// stderr, rulesets) is inherited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_holds_only_its_three_descriptors() {
    let (h, id) = sandbox().await;
    let res = h
        .py_json(
            &id,
            "import json, os\nprint(json.dumps(sorted(int(f) for f in os.listdir('/proc/self/fd'))))",
        )
        .await;
    // The fourth is listdir's own handle on /proc/self/fd.
    assert_eq!(res, json!([0, 1, 2, 3]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unshare_of_user_and_net_namespaces_is_refused() {
    let (h, id) = sandbox().await;
    let out = h.sh(&id, "unshare -Urn true; echo exit=$?").await;
    assert!(
        out["stderr"]
            .as_str()
            .unwrap()
            .contains("Operation not permitted"),
        "{out}"
    );
    assert_eq!(out["stdout"], "exit=1\n", "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_clone_into_new_user_and_net_namespaces_is_eperm() {
    // clone(CLONE_NEWUSER | CLONE_NEWNET | SIGCHLD)
    let flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNET | libc::SIGCHLD;
    assert_eq!(
        probe(&format!("sc(56, {flags}, 0, 0, 0, 0)")).await,
        "EPERM"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_namespace_flag_on_clone_is_eperm_and_a_plain_fork_works() {
    let flags = [
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWCGROUP,
        0x80, // CLONE_NEWTIME
    ];
    let list: Vec<String> = flags
        .iter()
        .map(|f| format!("sc(56, {}, 0, 0, 0, 0)", f | libc::SIGCHLD))
        .collect();
    let res = probe(&format!(
        "[[{}], sc(56, {}, 0, 0, 0, 0)]",
        list.join(", "),
        libc::SIGCHLD
    ))
    .await;
    assert_eq!(res[0], json!(vec!["EPERM"; 8]), "{res}");
    assert_eq!(res[1], "ok", "{res}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clone3_is_enosys_so_libc_falls_back_to_clone() {
    // clone3 with a zeroed clone_args of the first published size (64 bytes).
    let res = probe("sc(435, ctypes.addressof(ctypes.create_string_buffer(64)), 64)").await;
    assert_eq!(res, "ENOSYS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setns_is_eperm() {
    let res = probe("sc(308, os.open('/proc/self/ns/net', os.O_RDONLY), 0)").await;
    assert_eq!(res, "EPERM");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn io_uring_is_eperm() {
    let res = probe(
        "[sc(425, 1, ctypes.addressof(ctypes.create_string_buffer(120))), sc(426, 0, 0, 0, 0, 0, 0), sc(427, 0, 0, 0, 0)]",
    )
    .await;
    assert_eq!(res, json!(["EPERM", "EPERM", "EPERM"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vsock_sockets_are_eperm() {
    let res = probe("[sock(40, socket.SOCK_STREAM), sock(40, socket.SOCK_DGRAM)]").await;
    assert_eq!(res, json!(["EPERM", "EPERM"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packet_sockets_are_eperm() {
    let res = probe("[sock(17, socket.SOCK_RAW), sock(17, socket.SOCK_DGRAM)]").await;
    assert_eq!(res, json!(["EPERM", "EPERM"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netlink_other_than_route_is_eperm_and_ip_on_lo_still_works() {
    let (h, id) = sandbox().await;
    // NETLINK_ROUTE 0, NETLINK_SOCK_DIAG 4, NETLINK_NETFILTER 12, NETLINK_GENERIC 16, NETLINK_KOBJECT_UEVENT 15
    let res = h
        .py_json(
            &id,
            &format!(
                "{PY_SYSCALL}\nprint(json.dumps([sock(16, socket.SOCK_RAW, p) for p in (0, 4, 12, 16, 15)] + [sock(16, socket.SOCK_DGRAM, 0)]))"
            ),
        )
        .await;
    assert_eq!(res, json!(["ok", "EPERM", "EPERM", "EPERM", "EPERM", "ok"]));
    let out = h.sh(&id, "ip -o addr show dev lo").await;
    assert!(
        out["stdout"].as_str().unwrap().contains("127.0.0.1/8"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x32_system_calls_are_enosys() {
    // getpid, read and openat through the x32 ABI (nr | 0x40000000).
    let res =
        probe("[sc(0x40000000 | 39), sc(0x40000000 | 0, 0, 0, 0), sc(0x40000000 | 257, 0, 0, 0)]")
            .await;
    assert_eq!(res, json!(["ENOSYS", "ENOSYS", "ENOSYS"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bpf_perf_userfaultfd_keyctl_and_ptrace_are_eperm() {
    let res = probe(
        "[sc(321, 0, 0, 0), sc(298, ctypes.addressof(ctypes.create_string_buffer(128)), 0, -1, -1, 0), sc(323, 0), sc(250, 0, 0), sc(101, 16, 1, 0, 0)]",
    )
    .await;
    assert_eq!(res, json!(vec!["EPERM"; 5]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mount_and_its_family_are_eperm() {
    let res = probe(
        "[sc(165, 0, 0, 0, 0, 0), sc(155, 0, 0), sc(161, 0), sc(428, -100, 0, 0), sc(430, 0, 0), sc(166, 0, 0)]",
    )
    .await;
    // mount, pivot_root, chroot, open_tree, fsopen, umount2
    assert_eq!(res, json!(vec!["EPERM"; 6]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_filter_is_reported_with_its_version_and_what_it_refuses() {
    let (h, _id) = sandbox().await;
    let list = h.ok("list_sandboxes", json!({})).await;
    let seccomp = &list["sandboxes"][0]["isolation"]["seccomp"];
    assert!(seccomp["version"].as_u64().unwrap() >= 2, "{seccomp}");
    let eperm = seccomp["eperm"].as_array().unwrap();
    for name in [
        "unshare",
        "setns",
        "io_uring_setup",
        "bpf",
        "ptrace",
        "mount",
        "keyctl",
    ] {
        assert!(eperm.iter().any(|v| v == name), "{name}: {seccomp}");
    }
    assert!(
        seccomp["enosys"].as_str().unwrap().contains("x32"),
        "{seccomp}"
    );
    assert_eq!(&h.manager.isolation()["seccomp"], seccomp);
}

/// Loopback inside a sandbox is its own: a server and a client in it talk, the host's stays unreachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_inside_works_and_the_hosts_stays_unreachable() {
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    host.set_nonblocking(true).unwrap();
    let (h, id) = sandbox().await;
    let res = h
        .py_json(
            &id,
            &format!(
                r#"
import errno, json, socket, threading, http.server, urllib.request
srv = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
threading.Thread(target=srv.serve_forever, daemon=True).start()
with open("hello.txt", "w") as f:
    f.write("hi from inside")
body = urllib.request.urlopen("http://127.0.0.1:%d/hello.txt" % srv.server_address[1], timeout=10).read().decode()
s = socket.socket()
s.settimeout(5)
try:
    s.connect(("127.0.0.1", {port}))
    host = "CONNECTED"
except OSError as e:
    host = errno.errorcode.get(e.errno, str(e))
print(json.dumps({{"body": body, "host": host}}))
"#
            ),
        )
        .await;
    assert_eq!(res["body"], "hi from inside", "{res}");
    assert!(
        res["host"] == "ECONNREFUSED" || res["host"] == "ENETUNREACH",
        "{res}"
    );
    assert!(
        host.accept().is_err(),
        "the host listener accepted a connection"
    );
}

/// Python's output reaches the bridge while the program runs, not at its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_output_streams_before_the_program_ends() {
    let mut h = start(&[]).await;
    let id = h.create().await;
    // It prints, then waits for a file only the test creates after seeing that output; a program whose
    // output is held back until it ends is killed by its timeout with nothing seen.
    let code = "import os, time\nprint('a')\nwhile not os.path.exists('/workspace/go'):\n    time.sleep(0.05)\nprint('b')\n";
    let client = h.client.clone();
    let args = json!({"sandbox_id": id, "language": "python", "code": code, "timeout_secs": 20});
    let mut call =
        tokio::spawn(async move { mcp_testkit::call(&client, "execute_code", args).await });
    tokio::select! {
        p = h.client.progress.recv() => assert!(p.is_some()),
        r = &mut call => panic!("the program ended before any output arrived: {r:?}"),
    }
    h.ok(
        "write_file",
        json!({"sandbox_id": id, "path": "/workspace/go", "content": ""}),
    )
    .await;
    let out = mcp_testkit::ok_of(&call.await.unwrap());
    assert_eq!(out["stdout"], "a\nb\n", "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_pythonunbuffered_wins() {
    let (h, id) = sandbox().await;
    let out = h
        .ok(
            "execute_code",
            json!({"sandbox_id": id, "language": "python", "code": "import os; print(os.environ.get('PYTHONUNBUFFERED'))", "env": {"PYTHONUNBUFFERED": ""}}),
        )
        .await;
    assert_eq!(out["stdout"], "\n", "{out}");
    let out = h
        .py(&id, "import os; print(os.environ['PYTHONUNBUFFERED'])")
        .await;
    assert_eq!(out["stdout"], "1\n", "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etc_has_users_hosts_and_services_programs_need() {
    let (h, id) = sandbox().await;
    let out = h
        .sh(&id, "getent passwd 1000; getent passwd root; getent group 1000; getent hosts 127.0.0.1; getent hosts ::1; cat /etc/hostname")
        .await;
    assert_eq!(
        out["stdout"],
        "sandbox:x:1000:1000:sandbox:/workspace:/bin/sh\nroot:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:\n127.0.0.1       localhost sandbox\n::1             localhost sandbox\nsandbox\n",
        "{out}"
    );
    let res = h
        .py_json(
            &id,
            "import json, socket\nprint(json.dumps([socket.getservbyname('http'), socket.getprotobyname('tcp'), socket.getaddrinfo('localhost', 80, type=socket.SOCK_STREAM)[0][4][0]]))",
        )
        .await;
    assert_eq!(res[0], 80, "{res}");
    assert_eq!(res[1], 6, "{res}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_runs() {
    let on_host = std::process::Command::new("sh")
        .args(["-c", "command -v java"])
        .output()
        .unwrap()
        .status
        .success();
    if !on_host {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI installs a JDK (.ci/run); java is missing"
        );
        eprintln!("java is not installed on this host: nothing to run");
        return;
    }
    let (h, id) = sandbox().await;
    let out = h.sh(&id, "java -version").await;
    assert_eq!(out["exit_code"], 0, "{out}");
    assert!(out["stderr"].as_str().unwrap().contains("version"), "{out}");
}

/// A descriptor the bridge's process holds without close-on-exec (a library's, an inherited one) reaches
/// neither the launcher nor anything in the sandbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_descriptor_leaked_by_the_bridge_does_not_reach_the_sandbox() {
    let path = std::env::temp_dir().join(format!("leaked-fd-{}", std::process::id()));
    std::fs::write(&path, "host file").unwrap();
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: open(2) on a NUL-terminated path; the fd is closed below.
    #[allow(unsafe_code)]
    let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_RDONLY) };
    assert!(fd >= 0);
    let (h, id) = sandbox().await;
    let launcher = h.launcher_pid(&id);
    let mut pids = support::descendants(launcher);
    pids.push(launcher);
    let holders: Vec<u32> = pids
        .iter()
        .copied()
        .filter(|p| {
            std::fs::read_dir(format!("/proc/{p}/fd"))
                .map(|rd| {
                    rd.filter_map(Result::ok)
                        .any(|e| std::fs::read_link(e.path()).is_ok_and(|l| l == path))
                })
                .unwrap_or(false)
        })
        .collect();
    // SAFETY: closes the fd opened above, owned by nothing else.
    #[allow(unsafe_code)]
    unsafe {
        libc::close(fd);
    }
    let _ = std::fs::remove_file(&path);
    assert!(
        pids.len() >= 3,
        "launcher, its child and the agent: {pids:?}"
    );
    assert_eq!(
        holders,
        Vec::<u32>::new(),
        "processes holding the host's file"
    );
}
