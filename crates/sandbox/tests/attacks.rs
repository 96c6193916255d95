//! The attack suite: one test per known attack on a `namespace` sandbox, each asserting the errno or the
//! outcome on the host. Run as root (as CI is). `containment.rs` keeps the older escape checks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use support::{Harness, PY_SYSCALL, start};

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