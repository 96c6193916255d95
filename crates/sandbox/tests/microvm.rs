//! The microvm backend for real: Debian's kernel with our initramfs under QEMU. This host's KVM cannot
//! boot a guest in time (docs/protocols/sandbox.md), so the KVM self-test must fail and say why, and the
//! tools are proven under QEMU's TCG emulator (~5 s a boot). `scripts/test` runs this file in its own
//! stage, one test at a time: TCG needs a quiet CPU.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use mcp_testkit::Era;
use serde_json::json;
use std::path::Path;
use support::{
    Harness, assert_no_vm_left, dead, guest, plant_vm_dir, refs, start_era, start_http, tcg_flags,
};

fn flags(extra: &[&str]) -> Vec<String> {
    let mut f = tcg_flags();
    f.extend(extra.iter().map(|s| (*s).to_string()));
    f
}

/// The VM directory QEMU `pid` was started with (its `-pidfile` lives there).
fn vm_dir_of(pid: u32) -> std::path::PathBuf {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let at = args.iter().position(|a| a == "-pidfile").unwrap();
    Path::new(&args[at + 1]).parent().unwrap().to_path_buf()
}

fn kvm_cannot_boot_here() -> bool {
    !Path::new("/dev/kvm").exists() || Path::new("/sys/module/kvm_pvm").exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_boot_tests_kvm_and_falls_back_to_namespace_saying_why() {
    let (kernel, initrd) = guest();
    let h = start_era(
        &[
            "--sandbox-backend",
            "auto",
            "--sandbox-kernel",
            kernel.to_str().unwrap(),
            "--sandbox-initrd",
            initrd.to_str().unwrap(),
        ],
        Era::Legacy,
    )
    .await;
    let listed = h.ok("list_sandboxes", json!({})).await;
    let probe = &listed["microvm"];
    assert_eq!(probe["self_tested"], true, "{probe}");
    assert_eq!(probe["accel"], "kvm");
    assert_eq!(probe["boot_timeout_secs"], 3);
    if kvm_cannot_boot_here() {
        assert_eq!(probe["available"], false, "{probe}");
        assert_eq!(listed["backend"], "namespace");
        let reason = probe["reason"].as_str().unwrap();
        assert!(
            reason.contains("boot self-test failed (qemu with kvm, limit 3 s)")
                || reason.contains("/dev/kvm cannot be opened"),
            "{reason}"
        );
        assert!(
            reason.contains("kvm_pvm") || reason.contains("absent"),
            "{reason}"
        );
        // The fallback really works.
        let id = h.create().await;
        let out = h.sh(&id, "echo fine").await;
        assert_eq!(out["stdout"], "fine\n");
    } else {
        assert_eq!(probe["available"], true, "{probe}");
        assert_eq!(listed["backend"], "microvm");
    }
    assert_no_vm_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn microvm_asked_for_refuses_to_start_with_the_reason() {
    let (kernel, initrd) = guest();
    let env = bridge_core::BridgeEnv::new();
    let missing = support::args(&[
        "--sandbox-backend",
        "microvm",
        "--sandbox-kernel",
        "/nonexistent/vmlinuz",
        "--sandbox-initrd",
        initrd.to_str().unwrap(),
    ]);
    let err = bridge_sandbox::start(missing, &env)
        .await
        .err()
        .expect("no kernel, no start")
        .to_string();
    assert!(
        err.contains("no guest kernel at /nonexistent/vmlinuz"),
        "{err}"
    );
    assert!(err.contains("SANDBOX_KERNEL"), "{err}");
    if kvm_cannot_boot_here() {
        let kvm = support::args(&[
            "--sandbox-backend",
            "microvm",
            "--sandbox-kernel",
            kernel.to_str().unwrap(),
            "--sandbox-initrd",
            initrd.to_str().unwrap(),
        ]);
        let err = bridge_sandbox::start(kvm, &env)
            .await
            .err()
            .expect("the KVM self-test fails here")
            .to_string();
        assert!(
            err.contains("--sandbox-backend microvm was asked for"),
            "{err}"
        );
        assert!(err.contains("kvm"), "{err}");
    }
    env.links().cancel();
    assert_no_vm_left().await;
}

/// Every tool in a TCG microVM through a real client, then the VM is destroyed without a trace.
async fn every_tool(h: &Harness) {
    let listed = h.ok("list_sandboxes", json!({})).await;
    assert_eq!(listed["backend"], "microvm");
    assert_eq!(listed["microvm"]["available"], true, "{listed}");
    assert!(listed["microvm"]["boot_ms"].as_u64().unwrap() > 0);
    let id = h.create().await;
    let qemu = h.launcher_pid(&id);
    let dir = vm_dir_of(qemu);
    assert!(dir.join("agent.sock").exists(), "{}", dir.display());
    for (lang, code) in [
        ("python", "import sys; print(sys.stdin.read().upper())"),
        (
            "javascript",
            "process.stdin.on('data', d => console.log(String(d).toUpperCase()))",
        ),
        ("bash", "read x; echo ${x^^}"),
        ("sh", "read x; echo $x | tr a-z A-Z"),
    ] {
        let out = h
            .ok(
                "execute_code",
                json!({"sandbox_id": id, "language": lang, "code": code, "stdin": "hi", "timeout_secs": 60}),
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
            json!({"sandbox_id": id, "path": "notes/a.txt", "content": "in the guest"}),
        )
        .await;
    assert_eq!(w["success"], true);
    let r = h
        .ok(
            "read_file",
            json!({"sandbox_id": id, "path": "/workspace/notes/a.txt"}),
        )
        .await;
    assert_eq!(r["content"], "in the guest");
    let l = h
        .ok(
            "list_directory",
            json!({"sandbox_id": id, "path": "/workspace"}),
        )
        .await;
    assert_eq!(l["entries"][0]["name"], "notes", "{l}");
    assert_eq!(l["entries"][0]["is_dir"], true);
    let p = h
        .ok(
            "start_process",
            json!({"sandbox_id": id, "command": "echo up; sleep 60"}),
        )
        .await;
    let pid = p["process_id"].as_u64().unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let st = h
        .ok(
            "process_status",
            json!({"sandbox_id": id, "process_id": pid}),
        )
        .await;
    assert_eq!(st["running"], true, "{st}");
    let o = h
        .ok(
            "process_output",
            json!({"sandbox_id": id, "process_id": pid}),
        )
        .await;
    assert_eq!(o["stdout"], "up\n");
    h.ok("kill_process", json!({"sandbox_id": id, "process_id": pid}))
        .await;
    pause_freezes_the_vmm(h, &id).await;
    let kept = h.ok("keepalive", json!({"sandbox_id": id})).await;
    assert_eq!(kept["success"], true);
    let listed = h.ok("list_sandboxes", json!({})).await;
    let me = &listed["sandboxes"][0];
    assert_eq!(me["backend"], "microvm");
    assert_eq!(me["isolation"]["isolation"], "microvm (qemu, tcg)", "{me}");
    assert_eq!(me["isolation"]["read_only_root"], true, "{me}");
    let kernel = me["isolation"]["kernel"].as_str().unwrap();
    assert!(
        kernel.ends_with("-amd64"),
        "the guest runs Debian's kernel, not the host's: {kernel}"
    );
    assert!(
        me["languages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l == "python"),
        "{me}"
    );
    let d = h.ok("destroy_sandbox", json!({"sandbox_id": id})).await;
    assert_eq!(d["success"], true);
    assert!(dead(qemu), "QEMU {qemu} outlived its sandbox");
    assert!(!dir.exists(), "{} outlived its sandbox", dir.display());
}

/// pause_sandbox freezes the VMM's cgroup: with a busy loop in the guest, QEMU's CPU time stands still for a
/// second, and after resume_sandbox it grows again and the guest answers.
async fn pause_freezes_the_vmm(h: &Harness, id: &str) {
    let busy = h
        .ok(
            "start_process",
            json!({"sandbox_id": id, "command": "while :; do :; done"}),
        )
        .await;
    let dirs = h.manager.get(id).unwrap().instance.cgroup_dirs();
    let cpu_ns = || -> u64 {
        dirs.iter()
            .find_map(|d| std::fs::read_to_string(d.join("cpuacct.usage")).ok())
            .unwrap_or_else(|| panic!("no cpuacct.usage in {dirs:?}"))
            .trim()
            .parse()
            .unwrap()
    };
    let p = h.ok("pause_sandbox", json!({"sandbox_id": id})).await;
    assert_eq!(p["state"], "paused", "{p}");
    let paused_at = cpu_ns();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert_eq!(cpu_ns(), paused_at, "QEMU used no CPU while paused");
    let r = h.ok("resume_sandbox", json!({"sandbox_id": id})).await;
    assert_eq!(r["state"], "running", "{r}");
    let resumed_at = cpu_ns();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(cpu_ns() > resumed_at, "the guest runs again after resume");
    h.ok(
        "kill_process",
        json!({"sandbox_id": id, "process_id": busy["process_id"]}),
    )
    .await;
    let out = h.sh(id, "echo back").await;
    assert_eq!(out["stdout"], "back\n", "{out}");
    println!(
        "microvm pause {:.3} ms, resume {:.3} ms",
        p["latency_ms"].as_f64().unwrap(),
        r["latency_ms"].as_f64().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_in_a_tcg_microvm_over_stdio() {
    let f = flags(&[]);
    let h = start_era(&refs(&f), Era::Legacy).await;
    every_tool(&h).await;
    // Shutting down destroys the warm VM the pool keeps for the spec used.
    drop(h);
    assert_no_vm_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_in_a_tcg_microvm_over_http() {
    let f = flags(&[]);
    let h = start_http(&refs(&f), Era::Modern).await;
    every_tool(&h).await;
    drop(h);
    assert_no_vm_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_microvm_contains_its_code() {
    let canary = std::env::temp_dir().join(format!("vm-canary-{}", std::process::id()));
    std::fs::write(&canary, "host secret").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let f = flags(&[]);
    let h = start_era(&refs(&f), Era::Legacy).await;
    let id = h.create().await;
    let path = canary.to_str().unwrap();
    let out = h
        .sh(
            &id,
            &format!(
                "cat {path}; echo pwned > {path}; id -u; cat /proc/net/dev; touch /usr/x 2>&1; touch /x 2>&1; \
                 (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>&1 || echo no-connect; \
                 (exec 3<>/dev/tcp/10.0.2.2/{port}) 2>&1 || echo no-route; ls /sys/class/net"
            ),
        )
        .await;
    let text = out["stdout"].as_str().unwrap();
    assert!(!text.contains("host secret"), "{out}");
    assert_eq!(std::fs::read_to_string(&canary).unwrap(), "host secret");
    assert!(text.contains("1000\n"), "an unprivileged uid: {out}");
    assert!(
        text.contains("touch: cannot touch '/usr/x': Read-only file system"),
        "the host's /usr is read-only: {out}"
    );
    assert!(
        text.contains("touch: cannot touch '/x'"),
        "the guest's / is not writable: {out}"
    );
    assert!(
        text.contains("no-connect") && text.contains("no-route"),
        "{out}"
    );
    assert_eq!(text.lines().last(), Some("lo"), "only lo: {out}");
    assert!(!text.contains("eth0"), "{out}");
    // A tree ignoring SIGTERM dies at its deadline, and the VM keeps serving.
    let t = h
        .ok(
            "run_command",
            json!({"sandbox_id": id, "command": "trap '' TERM; (trap '' TERM; sleep 100) & sleep 100", "timeout_secs": 2}),
        )
        .await;
    assert_eq!(t["timed_out"], true, "{t}");
    let ps = h.sh(&id, "pgrep -c sleep || true").await;
    assert_eq!(ps["stdout"].as_str().unwrap().trim(), "0", "{ps}");
    // A fork bomb and a memory bomb are stopped inside the guest.
    let bomb = h
        .ok(
            "run_command",
            json!({"sandbox_id": id, "command": "b() { b | b & }; b; sleep 3; echo survived", "timeout_secs": 3}),
        )
        .await;
    let reported = bomb["timed_out"] == true
        || bomb["stderr"].as_str().unwrap().contains("fork")
        || bomb["exit_code"] != 0;
    assert!(reported, "the bomb's end is reported: {bomb}");
    let n = h.sh(&id, "pgrep -c -u 1000 . || true").await;
    assert!(
        n["stdout"].as_str().unwrap().trim().parse::<u32>().unwrap() <= 128,
        "RLIMIT_NPROC bounds the bomb's leftovers: {n}"
    );
    let mem = h
        .ok(
            "execute_code",
            json!({"sandbox_id": id, "language": "python", "code": "x = bytearray(4 << 30)", "timeout_secs": 30}),
        )
        .await;
    assert_ne!(mem["exit_code"], 0, "{mem}");
    assert!(
        mem["stderr"].as_str().unwrap().contains("MemoryError"),
        "{mem}"
    );
    let after = h.sh(&id, "echo alive").await;
    assert_eq!(after["stdout"], "alive\n");
    drop(listener);
    let _ = std::fs::remove_file(&canary);
    drop(h);
    assert_no_vm_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_runs_qemu_is_killed_at_start_and_a_live_neighbours_is_not() {
    std::fs::create_dir_all("/tmp/mcp-bridges-sandbox").unwrap();
    let gone = std::process::Command::new("true").spawn().unwrap();
    let mut gone = gone;
    let dead_owner = gone.id();
    gone.wait().unwrap();
    let crashed = Path::new("/tmp/mcp-bridges-sandbox")
        .join(format!("vm-{dead_owner}-{}", uuid::Uuid::new_v4()));
    let live = Path::new("/tmp/mcp-bridges-sandbox").join(format!("vm-1-{}", uuid::Uuid::new_v4()));
    let mut stand_ins = Vec::new();
    for dir in [&crashed, &live] {
        // A stand-in for QEMU: its command line names its VM directory, as QEMU's does.
        let p = std::process::Command::new("python3")
            .args(["-c", "import time; time.sleep(120)"])
            .arg(dir)
            .spawn()
            .unwrap();
        plant_vm_dir(dir, "qemu.pid", p.id());
        stand_ins.push(p);
    }
    // A crashed run whose pid file names a pid reused since by an unrelated process: that one is spared.
    let reused = Path::new("/tmp/mcp-bridges-sandbox")
        .join(format!("vm-{dead_owner}-{}", uuid::Uuid::new_v4()));
    let mut bystander = std::process::Command::new("sleep")
        .arg("120")
        .spawn()
        .unwrap();
    plant_vm_dir(&reused, "qemu.pid", bystander.id());
    let h = start_era(&[], Era::Legacy).await;
    let listed = h.ok("list_sandboxes", json!({})).await;
    assert_eq!(listed["backend"], "namespace");
    assert!(
        bystander.try_wait().unwrap().is_none(),
        "a pid reused by a process that is not that VM's QEMU is left alone"
    );
    assert!(
        !reused.exists(),
        "the crashed run's directory is removed all the same"
    );
    bystander.kill().unwrap();
    bystander.wait().unwrap();
    let mut crashed_qemu = stand_ins.remove(0);
    let status = crashed_qemu.wait().unwrap();
    assert!(!status.success(), "the crashed run's QEMU was killed");
    assert!(!crashed.exists(), "{} removed", crashed.display());
    let mut live_qemu = stand_ins.remove(0);
    assert!(
        live_qemu.try_wait().unwrap().is_none(),
        "pid 1's VM left alone"
    );
    assert!(live.exists());
    live_qemu.kill().unwrap();
    live_qemu.wait().unwrap();
    std::fs::remove_dir_all(&live).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_microvm_mounts_the_image_it_asks_for() {
    boots_image_named("tiny", support::tiny_image(), "/usr/bin").await;
}

/// One length-prefixed request to a guest's agent, and its reply.
fn agent_call(s: &mut std::os::unix::net::UnixStream, req: serde_json::Value) -> serde_json::Value {
    use std::io::{Read, Write};
    let body = serde_json::to_vec(&req).unwrap();
    s.write_all(&(body.len() as u32).to_be_bytes()).unwrap();
    s.write_all(&body).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut reply = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut reply).unwrap();
    serde_json::from_slice(&reply).unwrap()
}

/// The guest side of Firecracker's read-only `/usr` drive, which no Firecracker can show here: the same
/// initramfs under QEMU, given a virtio-blk ext4 image and `drive_at: /usr`, loads the vsock, virtio-blk and
/// ext4 modules and mounts the image read-only at /usr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_microvm_guest_mounts_its_read_only_drive_at_usr() {
    use sandbox_agent::protocol::Limits;
    use sandbox_agent::vm::VmConfig;
    let (kernel, initrd) = guest();
    let dir = std::env::temp_dir().join(format!("vm-drive-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(dir.join("tree")).unwrap();
    std::fs::write(dir.join("tree/marker"), "from the drive\n").unwrap();
    let image = dir.join("usr.ext4");
    let made = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-d"])
        .arg(dir.join("tree"))
        .arg(&image)
        .arg("16M")
        .status()
        .expect("mkfs.ext4 (e2fsprogs) runs");
    assert!(made.success());
    let cfg = VmConfig {
        workspace_mib: 16,
        tmp_mib: 16,
        hostname: "sandbox".into(),
        shares: Vec::new(),
        port: "agent".into(),
        vsock_port: None,
        drive_at: Some("/usr".into()),
        links: Vec::new(),
        limits: Limits::default(),
        isolation: "drive check".into(),
    };
    let append = format!(
        "console=ttyS0 reboot=t panic=-1 quiet no_timer_check {} {} -- vm",
        cfg.cmdline_arg().unwrap(),
        bridge_sandbox::backend::microvm::tcg_clock_args()
    );
    let sock = dir.join("agent.sock");
    let mut qemu = std::process::Command::new("qemu-system-x86_64")
        .args([
            "-M",
            "microvm",
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
        ])
        .args([
            "-no-reboot",
            "-serial",
            "null",
            "-accel",
            "tcg,tb-size=64",
            "-cpu",
            "max",
        ])
        .args(["-m", "256", "-smp", "1", "-kernel"])
        .arg(&kernel)
        .arg("-initrd")
        .arg(&initrd)
        .arg("-append")
        .arg(append)
        .args(["-device", "virtio-serial-device", "-chardev"])
        .arg(format!(
            "socket,id=agent,path={},server=on,wait=off",
            sock.display()
        ))
        .args([
            "-device",
            "virtserialport,chardev=agent,name=agent",
            "-drive",
        ])
        .arg(format!(
            "file={},if=none,id=usr,format=raw,readonly=on",
            image.display()
        ))
        .args(["-device", "virtio-blk-device,drive=usr"])
        .spawn()
        .expect("qemu-system-x86_64 runs");
    let mut s = loop {
        if let Ok(s) = std::os::unix::net::UnixStream::connect(&sock) {
            break s;
        }
        assert!(qemu.try_wait().unwrap().is_none(), "QEMU exited");
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    s.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    let hello = agent_call(&mut s, json!({"id": 1, "op": "hello"}));
    assert_eq!(hello["type"], "hello", "{hello}");
    let loaded = hello["enforced"]["modules_loaded"].as_array().unwrap();
    for m in ["vmw_vsock_virtio_transport", "virtio_blk", "ext4"] {
        assert!(loaded.iter().any(|l| l == m), "{m} not loaded: {hello}");
    }
    let read = agent_call(
        &mut s,
        json!({"id": 2, "op": "read", "path": "/usr/marker", "length": 100}),
    );
    assert_eq!(read["data"], "ZnJvbSB0aGUgZHJpdmUK", "{read}"); // "from the drive\n"
    let write = agent_call(
        &mut s,
        json!({"id": 3, "op": "write", "path": "/usr/new", "data": "eA=="}),
    );
    assert_eq!(write["type"], "error", "{write}");
    assert!(
        write.to_string().contains("Read-only file system"),
        "{write}"
    );
    qemu.kill().unwrap();
    qemu.wait().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_microvm_boots_an_image_without_merged_usr() {
    boots_image_named("split", support::split_image(), "/bin").await;
}

/// A microvm started with `image` as `--sandbox-image name=…` sees that image and nothing else (see
/// `assert_sees_image`), and leaves no VM behind.
async fn boots_image_named(name: &str, image: std::path::PathBuf, bin_dir: &str) {
    let flag = format!("{name}={}", image.display());
    let f = flags(&["--sandbox-image", &flag]);
    let h = start_era(&refs(&f), Era::Legacy).await;
    support::assert_sees_image(&h, name, bin_dir).await;
    drop(h);
    assert_no_vm_left().await;
    std::fs::remove_dir_all(&image).unwrap();
}
