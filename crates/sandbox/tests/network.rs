//! Network by policy on the namespace backend: `none` fails fast and says so; `egress` goes out through pasta
//! and reaches only what the allow-list names, never the host's loopback. Real sandboxes, run as root (as CI
//! is): the host side of a test is a listener on an address of a veth interface the test adds (the host's
//! default-route address is copied into the sandbox by pasta, so it names the sandbox itself there).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::{Value, json};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use support::{Harness, start};

/// Python connecting to each `(host, port)` with a 3 s timeout; prints a JSON list of `"ok:<first line the
/// peer sent>"` (`"ok:"` when it sent nothing in 3 s, as a TLS server does), `"timeout"` or the errno's name.
fn py_connect(targets: &[(String, u16)]) -> String {
    let list = serde_json::to_string(targets).unwrap();
    format!(
        r#"
import errno, json, socket
out = []
for host, port in {list}:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((host, port))
        try:
            out.append("ok:" + s.recv(64).decode().strip())
        except socket.timeout:
            out.append("ok:")
    except socket.timeout:
        out.append("timeout")
    except OSError as e:
        out.append(errno.errorcode.get(e.errno, str(e.errno)))
    finally:
        s.close()
print(json.dumps(out))
"#
    )
}

/// A veth pair whose one end holds an address of TEST-NET-2, unique to this test process, removed on drop.
struct HostAddr {
    name: String,
    addr: Ipv4Addr,
}

impl HostAddr {
    fn add(tag: u8) -> Self {
        let pid = std::process::id();
        let name = format!("sbn{}{tag}", pid % 1_000_000);
        let addr = Ipv4Addr::new(198, 51, 100, ((pid % 50) as u8) * 5 + tag);
        let ip = |args: &[&str]| {
            let out = std::process::Command::new("ip")
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "ip {args:?}: {out:?}");
        };
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &name])
            .output();
        let peer = format!("{name}p");
        ip(&["link", "add", &name, "type", "veth", "peer", "name", &peer]);
        ip(&["addr", "add", &format!("{addr}/32"), "dev", &name]);
        ip(&["link", "set", &peer, "up"]);
        ip(&["link", "set", &name, "up"]);
        Self { name, addr }
    }
}

impl Drop for HostAddr {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.name])
            .output();
    }
}

/// A TCP listener on the host that greets every connection with `hello from <addr>` and counts them.
fn listen(addr: Ipv4Addr) -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind((addr, 0)).unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&seen);
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            count.fetch_add(1, Ordering::SeqCst);
            let _ = std::io::Write::write_all(&mut c, format!("hello from {addr}\n").as_bytes());
        }
    });
    (port, seen)
}

async fn create(h: &Harness, args: Value) -> (String, Value) {
    let out = h.ok("create_sandbox", args).await;
    (out["sandbox_id"].as_str().unwrap().to_string(), out)
}

/// The host's default gateway, as pasta copies it into the sandbox.
fn gateway() -> String {
    let out = std::process::Command::new("ip")
        .args(["-4", "route", "show", "default"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == "via" {
            return words.next().unwrap().to_string();
        }
    }
    panic!("no default route: {text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn under_none_a_connect_fails_at_once_with_enetunreach_and_the_result_says_no_network() {
    let h = start(&[]).await;
    let (id, created) = create(&h, json!({})).await;
    assert_eq!(created["network"]["policy"], "none", "{created}");
    let host = HostAddr::add(1);
    let (port, seen) = listen(host.addr);
    let got = h
        .py_json(
            &id,
            &py_connect(&[(host.addr.to_string(), port), ("203.0.113.80".into(), 443)]),
        )
        .await;
    assert_eq!(got, json!(["ENETUNREACH", "ENETUNREACH"]));
    assert_eq!(seen.load(Ordering::SeqCst), 0);
    let listed = h.ok("list_sandboxes", json!({"sandbox_id": id})).await;
    let s = &listed["sandboxes"][0];
    assert_eq!(s["network"]["policy"], "none", "{s}");
    assert_eq!(s["isolation"]["network"]["policy"], "none", "{s}");
    // A name does not resolve either (no DNS at all), at once.
    let dns = h
        .py_json(
            &id,
            r#"
import json, socket
try:
    socket.getaddrinfo("pypi.org", 443)
    print(json.dumps("resolved"))
except socket.gaierror as e:
    print(json.dumps("gaierror"))
"#,
        )
        .await;
    assert_eq!(dns, json!("gaierror"));
}

#[tokio::test(flavor = "multi_thread")]
async fn egress_reaches_what_the_list_names_and_is_refused_elsewhere_at_once() {
    let h = start(&[]).await;
    let host = HostAddr::add(2);
    let (port, seen) = listen(host.addr);
    let (other_port, other_seen) = listen(host.addr);
    let (lo_port, lo_seen) = listen(Ipv4Addr::LOCALHOST);
    let (id, created) = create(
        &h,
        json!({"network": "egress", "network_allow": [format!("{}:{port}", host.addr)]}),
    )
    .await;
    assert_eq!(created["network"]["policy"], "egress", "{created}");
    assert_eq!(
        created["network"]["allow"][0]["addresses"],
        json!([format!("{}/32", host.addr)]),
        "{created}"
    );
    let gw = gateway();
    let got = h
        .py_json(
            &id,
            &py_connect(&[
                (host.addr.to_string(), port),
                (host.addr.to_string(), other_port),
                ("127.0.0.1".into(), lo_port),
                (gw.clone(), lo_port),
                ("203.0.113.80".into(), 443),
            ]),
        )
        .await;
    assert_eq!(
        got,
        json!([
            format!("ok:hello from {}", host.addr),
            "EHOSTUNREACH",
            // The sandbox's own loopback, where nothing listens: not the host's.
            "ECONNREFUSED",
            "EHOSTUNREACH",
            "EHOSTUNREACH",
        ]),
        "gateway {gw}"
    );
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    assert_eq!(other_seen.load(Ordering::SeqCst), 0);
    assert_eq!(lo_seen.load(Ordering::SeqCst), 0);
    let listed = h.ok("list_sandboxes", json!({"sandbox_id": id})).await;
    assert_eq!(listed["sandboxes"][0]["network"]["policy"], "egress");
}

#[tokio::test(flavor = "multi_thread")]
async fn egress_without_a_list_resolves_names_and_reaches_no_host_address_nor_the_host_loopback() {
    let h = start(&[]).await;
    let host = HostAddr::add(3);
    let (port, seen) = listen(host.addr);
    let (lo_port, lo_seen) = listen(Ipv4Addr::LOCALHOST);
    let (id, created) = create(&h, json!({"network": "egress"})).await;
    assert_eq!(
        created["network"]["allow"], "anywhere but the host's own addresses",
        "{created}"
    );
    let gw = gateway();
    let got = h
        .py_json(
            &id,
            &py_connect(&[
                (host.addr.to_string(), port),
                ("127.0.0.1".into(), lo_port),
                (gw.clone(), lo_port),
                ("pypi.org".into(), 443),
            ]),
        )
        .await;
    assert_eq!(got[0], "EHOSTUNREACH", "{got}");
    assert_eq!(got[1], "ECONNREFUSED", "{got}");
    // The gateway is the real router here (not mapped to the host): whatever it answers, the host's
    // loopback listener sees nothing.
    assert_ne!(got[2], json!("ok:hello from 127.0.0.1"), "{got}");
    assert!(
        got[3].as_str().unwrap().starts_with("ok"),
        "pypi.org: {got}"
    );
    assert_eq!(seen.load(Ordering::SeqCst), 0);
    assert_eq!(lo_seen.load(Ordering::SeqCst), 0);
    // DNS goes to the stack's resolver only.
    let other_dns = h
        .py_json(
            &id,
            r#"
import errno, json, socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(3)
try:
    s.connect(("8.8.8.8", 53)); print(json.dumps("ok"))
except OSError as e:
    print(json.dumps(errno.errorcode.get(e.errno, str(e.errno))))
"#,
        )
        .await;
    assert_eq!(other_dns, json!("EHOSTUNREACH"));
}

#[tokio::test(flavor = "multi_thread")]
async fn pip_and_npm_install_a_package_under_egress_with_the_registries_allowed() {
    let h = start(&[]).await;
    let (id, _) = create(
        &h,
        json!({"network": "egress", "network_allow": [
            "pypi.org:443", "files.pythonhosted.org:443", "registry.npmjs.org:443"
        ]}),
    )
    .await;
    // The host's CA bundle (a TLS-inspecting proxy's CA is there, where CI has one); pip's own bundle
    // otherwise.
    let pip = h
        .ok(
            "run_command",
            json!({"sandbox_id": id, "timeout_secs": 300,
                   "env": {"PIP_CERT": "/etc/ssl/certs/ca-certificates.crt"},
                   "command": "python3 -m pip install --no-cache-dir --disable-pip-version-check \
                               --target /workspace/pylib six==1.16.0 && \
                               PYTHONPATH=/workspace/pylib python3 -c 'import six; print(six.__version__)'"}),
        )
        .await;
    assert_eq!(pip["exit_code"], 0, "{pip}");
    assert!(pip["stdout"].as_str().unwrap().contains("1.16.0"), "{pip}");
    let npm = h
        .ok(
            "run_command",
            json!({"sandbox_id": id, "timeout_secs": 300,
                   "env": {"NODE_EXTRA_CA_CERTS": "/etc/ssl/certs/ca-certificates.crt",
                           "npm_config_cache": "/tmp/npm-cache"},
                   "command": "cd /workspace && npm install --no-audit --no-fund is-number@7.0.0 && \
                               node -e 'console.log(require(\"is-number\")(5))'"}),
        )
        .await;
    assert_eq!(npm["exit_code"], 0, "{npm}");
    assert!(npm["stdout"].as_str().unwrap().contains("true"), "{npm}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_network_arguments_are_refused_naming_the_field() {
    let h = start(&[]).await;
    for (args, field) in [
        (json!({"network": "bridge"}), "network"),
        (
            json!({"network": "egress", "network_allow": ["10.0.0.0/40"]}),
            "network_allow",
        ),
        (json!({"network_allow": ["pypi.org"]}), "network_allow"),
        (
            json!({"network": "egress", "network_allow": ["no-such-host.invalid"]}),
            "network_allow",
        ),
    ] {
        let r = h.call("create_sandbox", args.clone()).await;
        assert_eq!(r.is_error, Some(true), "{args}: {r:?}");
        let text = format!("{r:?}");
        assert!(text.contains(field), "{args}: {text}");
    }
    assert_eq!(h.manager.len(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn under_none_pip_and_npm_fail_at_once_and_the_result_says_the_sandbox_has_no_network() {
    let h = start(&[]).await;
    let id = h.create().await;
    for command in [
        "python3 -m pip install --target /workspace/lib six",
        "python3 -m pip install six",
        "cd /workspace && npm install --no-audit --no-fund is-number",
    ] {
        let out = h
            .ok(
                "run_command",
                json!({"sandbox_id": id, "command": command, "timeout_secs": 120}),
            )
            .await;
        assert_ne!(out["exit_code"], 0, "{command}: {out}");
        assert_eq!(out["timed_out"], false, "{command}: {out}");
        let note = out["note"].as_str().unwrap_or_default();
        assert!(note.contains("no network"), "{command}: {out}");
        eprintln!("{command}: {} ms", out["duration_ms"]);
    }
    // Output that has nothing to do with the network gets no note.
    let plain = h.sh(&id, "echo hello; exit 3").await;
    assert!(plain.get("note").is_none(), "{plain}");
}

/// The host pids of the user-mode stack serving sandbox `id` (a child of its launcher).
fn stacks_of(h: &Harness, id: &str) -> Vec<u32> {
    support::descendants(h.launcher_pid(id))
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.starts_with("pasta") || c.starts_with("passt"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_network_stack_ends_with_its_sandbox() {
    let h = start(&[]).await;
    let (id, _) = create(&h, json!({"network": "egress"})).await;
    let stacks = stacks_of(&h, &id);
    assert_eq!(stacks.len(), 1, "{stacks:?}");
    h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;
    support::eventually("the stack ends", || support::dead(stacks[0])).await;
    // A none sandbox has no stack at all.
    let none = h.create().await;
    assert_eq!(stacks_of(&h, &none), Vec::<u32>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_program_cannot_change_the_filter() {
    let h = start(&[]).await;
    let host = HostAddr::add(4);
    let (port, _) = listen(host.addr);
    let (other_port, other_seen) = listen(host.addr);
    let (id, _) = create(
        &h,
        json!({"network": "egress", "network_allow": [format!("{}:{port}", host.addr)]}),
    )
    .await;
    let nft = h
        .sh(
            &id,
            "nft flush ruleset; echo rc=$?; nft list ruleset; echo rc=$?",
        )
        .await;
    let out = format!("{}{}", nft["stdout"], nft["stderr"]);
    assert!(!out.contains("rc=0"), "{nft}");
    assert!(out.contains("Operation not permitted"), "{nft}");
    // Netfilter's netlink family itself is refused to programs (seccomp), whatever their rights.
    let netlink = h
        .py_json(
            &id,
            r#"
import errno, json, socket
try:
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12).close(); print(json.dumps("ok"))
except OSError as e:
    print(json.dumps(errno.errorcode[e.errno]))
"#,
        )
        .await;
    assert_eq!(netlink, json!("EPERM"));
    let got = h
        .py_json(&id, &py_connect(&[(host.addr.to_string(), other_port)]))
        .await;
    assert_eq!(got, json!(["EHOSTUNREACH"]));
    assert_eq!(other_seen.load(Ordering::SeqCst), 0);
}
