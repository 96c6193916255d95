//! The Firecracker driver against `tests/fake-firecracker`, a double of Firecracker's API socket and hybrid
//! vsock (no Firecracker binary can be had here; docs/protocols/sandbox.md §4). The fake's "guest" is the
//! real agent in process mode, so every tool runs end to end through the driver's API calls, the vsock
//! handshake and the length-prefixed stream; the guest side of vsock (the agent's AF_VSOCK listener) is
//! not exercised.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use mcp_testkit::Era;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use support::{
    Harness, agent_bin, assert_no_vm_left, dead, descendants, eventually, plant_vm_dir, refs,
    start_era,
};

/// A directory holding a `firecracker` that runs the fake with `env`, and stand-in guest files (the fake
/// only checks that they open, as Firecracker's API does before boot).
struct Fixture {
    dir: PathBuf,
}

impl Fixture {
    fn new(env: &[(&str, &str)]) -> Self {
        let dir = std::env::temp_dir().join(format!("fake-fc-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake-firecracker");
        let mut vars = format!(
            "PATH=/usr/local/bin:/usr/bin:/bin FAKE_FC_AGENT={} FAKE_FC_LOG={}",
            agent_bin().display(),
            dir.join("requests.log").display()
        );
        for (k, v) in env {
            vars.push_str(&format!(" {k}='{v}'"));
        }
        // The driver clears the VMM's environment: the fake's settings are baked into its launcher.
        let script = format!(
            "#!/bin/sh\nexec /usr/bin/env {vars} python3 {} \"$@\"\n",
            fake.display()
        );
        let bin = dir.join("firecracker");
        std::fs::write(&bin, script).unwrap();
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(&bin)
            .status()
            .unwrap();
        for f in ["vmlinux", "initrd.cpio", "usr.ext4"] {
            std::fs::write(dir.join(f), f).unwrap();
        }
        Self { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }

    /// Flags for a microvm bridge on this fake Firecracker; a flag in `extra` replaces its default.
    fn flags(&self, extra: &[&str]) -> Vec<String> {
        let defaults = [
            ("--sandbox-backend", "microvm".to_string()),
            ("--sandbox-vmm", "firecracker".into()),
            ("--sandbox-firecracker", self.path("firecracker")),
            ("--sandbox-vmlinux", self.path("vmlinux")),
            ("--sandbox-initrd", self.path("initrd.cpio")),
            ("--sandbox-rootfs", self.path("usr.ext4")),
            // Generous: this host is shared and busy.
            ("--sandbox-microvm-boot-timeout", "20s".into()),
        ];
        let mut f = Vec::new();
        for (flag, value) in defaults {
            if !extra.contains(&flag) {
                f.extend([flag.to_string(), value]);
            }
        }
        f.extend(extra.iter().map(|s| (*s).to_string()));
        f
    }

    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("requests.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The start error of a microvm bridge on a fake given `env`.
async fn start_error(env: &[(&str, &str)], extra: &[&str]) -> String {
    let fx = Fixture::new(env);
    let args = support::args(&refs(&fx.flags(extra)));
    let bridge_env = bridge_core::BridgeEnv::new();
    let err = bridge_sandbox::start(args, &bridge_env)
        .await
        .err()
        .expect("the self-test fails")
        .to_string();
    bridge_env.links().cancel();
    assert_no_vm_left().await;
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_self_test_boots_through_firecracker_and_every_tool_works() {
    let fx = Fixture::new(&[("FAKE_FC_BOOT_DELAY_MS", "300")]);
    let f = fx.flags(&[]);
    let h: Harness = start_era(&refs(&f), Era::Legacy).await;
    let listed = h.ok("list_sandboxes", json!({})).await;
    assert_eq!(listed["backend"], "microvm", "{listed}");
    let probe = &listed["microvm"];
    assert_eq!(probe["available"], true, "{probe}");
    assert_eq!(probe["vmm"], "firecracker");
    let reason = probe["reason"].as_str().unwrap();
    assert!(
        reason.contains("boot self-test passed: firecracker with kvm"),
        "{reason}"
    );

    let id = h.create().await;
    let fake = h.launcher_pid(&id);
    let agents = descendants(fake);
    assert!(!agents.is_empty(), "the fake's guest agent runs");
    let cmdline = std::fs::read(format!("/proc/{fake}/cmdline")).unwrap();
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let at = args.iter().position(|a| a == "--api-sock").unwrap();
    let dir = Path::new(&args[at + 1]).parent().unwrap().to_path_buf();
    assert!(dir.join("vsock.sock").exists(), "{}", dir.display());
    assert_eq!(
        std::fs::read_to_string(dir.join("vmm.pid")).unwrap(),
        fake.to_string()
    );

    for (lang, code) in [
        ("sh", "read x; echo $x | tr a-z A-Z"),
        ("python", "import sys; print(sys.stdin.read().upper())"),
    ] {
        let out = h
            .ok(
                "execute_code",
                json!({"sandbox_id": id, "language": lang, "code": code, "stdin": "hi", "timeout_secs": 30}),
            )
            .await;
        assert_eq!(
            out["stdout"].as_str().unwrap().trim(),
            "HI",
            "{lang}: {out}"
        );
        assert_eq!(out["exit_code"], 0);
    }
    let w = h
        .ok(
            "write_file",
            json!({"sandbox_id": id, "path": "notes/a.txt", "content": "through the vsock"}),
        )
        .await;
    assert_eq!(w["success"], true, "{w}");
    let r = h
        .ok(
            "read_file",
            json!({"sandbox_id": id, "path": "notes/a.txt"}),
        )
        .await;
    assert_eq!(r["content"], "through the vsock");
    let listed = h.ok("list_sandboxes", json!({})).await;
    let me = &listed["sandboxes"][0];
    assert_eq!(me["backend"], "microvm");
    assert!(
        me["isolation"]["isolation"]
            .as_str()
            .unwrap()
            .contains("fake Firecracker"),
        "{me}"
    );

    let d = h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;
    assert_eq!(d["success"], true);
    assert!(
        dead(fake),
        "the fake Firecracker {fake} outlived its sandbox"
    );
    eventually("the fake's agent dies with it", || {
        agents.iter().all(|p| dead(*p))
    })
    .await;
    assert!(!dir.exists(), "{} outlived its sandbox", dir.display());

    // What the driver asked for, in order (the self-test's VM first, then the sandbox's).
    let reqs = fx.requests();
    let paths: Vec<&str> = reqs.iter().map(|r| r["path"].as_str().unwrap()).collect();
    assert_eq!(
        paths[..5],
        [
            "/boot-source",
            "/machine-config",
            "/drives/usr",
            "/vsock",
            "/actions"
        ],
        "{reqs:?}"
    );
    let boot = &reqs[0]["body"];
    assert_eq!(boot["kernel_image_path"], fx.path("vmlinux"));
    assert_eq!(boot["initrd_path"], fx.path("initrd.cpio"));
    let args = boot["boot_args"].as_str().unwrap();
    assert!(
        args.starts_with("console=ttyS0 reboot=k panic=1 pci=off ") && args.ends_with(" -- vm"),
        "{args}"
    );
    assert!(args.contains("sandbox.cfg="), "{args}");
    assert!(reqs[1]["body"]["vcpu_count"].as_u64().unwrap() >= 1);
    assert!(reqs[1]["body"]["mem_size_mib"].as_u64().unwrap() > 64);
    assert_eq!(
        reqs[2]["body"],
        json!({"drive_id": "usr", "path_on_host": fx.path("usr.ext4"), "is_root_device": false, "is_read_only": true})
    );
    assert_eq!(reqs[3]["body"]["guest_cid"], 3);
    assert!(
        reqs[3]["body"]["uds_path"]
            .as_str()
            .unwrap()
            .ends_with("/vsock.sock")
    );
    assert_eq!(reqs[4]["body"], json!({"action_type": "InstanceStart"}));
    drop(h);
    assert_no_vm_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_error_fails_the_self_test_naming_the_endpoint_and_firecrackers_message() {
    let err = start_error(&[("FAKE_FC_FAIL", "/machine-config")], &[]).await;
    assert!(
        err.contains(
            "Firecracker's API refused PUT /machine-config (HTTP 400): injected fault at /machine-config"
        ),
        "{err}"
    );
    assert!(
        err.contains("boot self-test failed (firecracker with kvm"),
        "{err}"
    );
    let err = start_error(&[("FAKE_FC_FAIL", "/vsock")], &[]).await;
    assert!(err.contains("refused PUT /vsock (HTTP 400)"), "{err}");
    // More vCPUs than the host has never reaches Firecracker (whose own limit is 32): the bridge refuses them
    // at start, naming the setting and its bound, before any VMM is launched.
    let err = start_error(&[], &["--sandbox-vcpus", "40"]).await;
    assert!(
        err.contains("SANDBOX_VCPUS is 40; a sandbox may have at most") && !err.contains("PUT"),
        "{err}"
    );
}

/// One raw HTTP/1.1 PUT on the fake's API socket: status and body.
fn raw_put(sock: &Path, path: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(sock).unwrap();
    write!(
        s,
        "PUT {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    (status, body)
}

/// The double answers bad requests as Firecracker does (docs/protocols/sandbox.md §4), so the driver's
/// error paths are tried against those answers.
#[test]
fn the_fake_checks_requests_as_firecracker_does() {
    let fx = Fixture::new(&[]);
    let sock = fx.dir.join("api.sock");
    let mut fake = std::process::Command::new(fx.dir.join("firecracker"))
        .arg("--api-sock")
        .arg(&sock)
        .current_dir(&fx.dir)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    while !sock.exists() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let fault = |(status, body): (u16, String)| -> String {
        assert_eq!(status, 400, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        v["fault_message"].as_str().unwrap().to_string()
    };
    let m = fault(raw_put(
        &sock,
        "/actions",
        r#"{"action_type":"InstanceStart"}"#,
    ));
    assert_eq!(m, "Cannot start microvm without kernel configuration.");
    let m = fault(raw_put(&sock, "/boot-source", r#"{"boot_args":"x"}"#));
    assert!(m.contains("missing field `kernel_image_path`"), "{m}");
    let m = fault(raw_put(
        &sock,
        "/machine-config",
        r#"{"vcpu_count":1,"mem_size_mib":128,"memory":1}"#,
    ));
    assert!(m.contains("unknown field `memory`"), "{m}");
    let m = fault(raw_put(
        &sock,
        "/drives/a",
        r#"{"drive_id":"b","is_root_device":false}"#,
    ));
    assert_eq!(
        m,
        "The id from the path does not match the id from the body!"
    );
    let m = fault(raw_put(
        &sock,
        "/vsock",
        r#"{"guest_cid":2,"uds_path":"/x"}"#,
    ));
    assert!(m.contains("guest_cid"), "{m}");
    let kernel = format!(r#"{{"kernel_image_path":"{}"}}"#, fx.path("vmlinux"));
    assert_eq!(
        raw_put(&sock, "/boot-source", &kernel),
        (204, String::new())
    );
    fake.kill().unwrap();
    fake.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_that_never_answers_connect_fails_the_handshake_in_time() {
    let err = start_error(
        &[("FAKE_FC_NO_CONNECT", "1")],
        &["--sandbox-microvm-boot-timeout", "3s"],
    )
    .await;
    // The boot timeout ended the retries (a handshake retried forever would hang the test instead).
    assert!(
        err.contains("the vsock handshake (CONNECT 52 on")
            && err.contains("did not succeed within the boot timeout"),
        "{err}"
    );
    assert!(
        err.contains("closed without an answer"),
        "the last attempt says why: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_or_overlong_acknowledgement_is_refused() {
    let err = start_error(
        &[("FAKE_FC_ACK", "BUSY")],
        &["--sandbox-microvm-boot-timeout", "3s"],
    )
    .await;
    assert!(
        err.contains("answered \"BUSY\", not \"OK <port>\""),
        "{err}"
    );
    // The acknowledgement is read a byte at a time up to 32 bytes: a longer line is refused there.
    let long = "OK ".to_string() + &"1".repeat(40);
    let err = start_error(
        &[("FAKE_FC_ACK", &long)],
        &["--sandbox-microvm-boot-timeout", "3s"],
    )
    .await;
    assert!(err.contains("an answer longer than 32 bytes"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn firecracker_dying_at_instance_start_is_reported_with_its_output() {
    let err = start_error(&[("FAKE_FC_EXIT_AT_START", "1")], &[]).await;
    assert!(err.contains("PUT /actions"), "{err}");
    assert!(err.contains("injected exit at InstanceStart"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_vmlinux_or_tcg_is_refused_before_any_boot() {
    let err = start_error(&[], &["--sandbox-vmlinux", "/nonexistent/vmlinux"]).await;
    assert!(
        err.contains("no uncompressed guest kernel at /nonexistent/vmlinux"),
        "{err}"
    );
    assert!(err.contains("SANDBOX_VMLINUX"), "{err}");
    let err = start_error(&[], &["--sandbox-microvm-accel", "tcg"]).await;
    assert!(err.contains("Firecracker has no emulator"), "{err}");
    assert!(err.contains("--sandbox-vmm qemu"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_takes_firecracker_when_its_binary_is_present_and_qemu_otherwise() {
    let fx = Fixture::new(&[]);
    for (bin, vmm) in [
        (fx.path("firecracker"), "firecracker"),
        ("/nonexistent/firecracker".to_string(), "qemu"),
    ] {
        let h = start_era(
            &[
                "--sandbox-backend",
                "namespace",
                "--sandbox-vmm",
                "auto",
                "--sandbox-firecracker",
                &bin,
            ],
            Era::Legacy,
        )
        .await;
        let listed = h.ok("list_sandboxes", json!({})).await;
        assert_eq!(listed["microvm"]["vmm"], vmm, "{listed}");
        assert_eq!(listed["microvm"]["firecracker"], vmm == "firecracker");
    }
    // And the self-test really boots the one auto picked.
    let f = fx.flags(&["--sandbox-vmm", "auto"]);
    let h = start_era(&refs(&f), Era::Legacy).await;
    let listed = h.ok("list_sandboxes", json!({})).await;
    assert_eq!(listed["microvm"]["available"], true, "{listed}");
    assert_eq!(listed["microvm"]["vmm"], "firecracker");
    drop(h);
    assert_no_vm_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_runs_firecracker_is_killed_at_start() {
    std::fs::create_dir_all("/tmp/mcp-bridges-sandbox").unwrap();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let dead_owner = gone.id();
    gone.wait().unwrap();
    let crashed = Path::new("/tmp/mcp-bridges-sandbox")
        .join(format!("vm-{dead_owner}-{}", uuid::Uuid::new_v4()));
    // A stand-in for Firecracker: its command line names its VM directory, as `--api-sock` does.
    let mut stand_in = std::process::Command::new("python3")
        .args(["-c", "import time; time.sleep(120)"])
        .arg(crashed.join("api.sock"))
        .spawn()
        .unwrap();
    plant_vm_dir(&crashed, "vmm.pid", stand_in.id());
    let _h = start_era(&[], Era::Legacy).await;
    let status = stand_in.wait().unwrap();
    assert!(
        !status.success(),
        "the crashed run's Firecracker was killed"
    );
    assert!(!crashed.exists(), "{} removed", crashed.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_directory_is_refused_by_name_on_firecracker() {
    let fx = Fixture::new(&[]);
    let image = support::tiny_image();
    let flag = format!("tiny={}", image.display());
    let f = fx.flags(&["--sandbox-image", &flag]);
    let h = start_era(&refs(&f), Era::Legacy).await;
    let res = h.call("create_sandbox", json!({"image": "tiny"})).await;
    let err = support::error_of(&res);
    let text = err.to_string();
    assert!(
        text.contains("image \\\"tiny\\\" is a host directory, which Firecracker cannot share"),
        "{text}"
    );
    // The host's own root still boots.
    let id = h.create().await;
    assert_eq!(h.sh(&id, "echo fine").await["stdout"], "fine\n");
    drop(h);
    assert_no_vm_left().await;
    std::fs::remove_dir_all(&image).unwrap();
}
