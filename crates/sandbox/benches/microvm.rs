//! microvm numbers (printed, never asserted), under QEMU's TCG emulator because this host's KVM cannot boot a
//! guest (docs/protocols/sandbox.md §3): the floor (the same kernel and initramfs booting to `/init` and
//! powering off at once), cold create (QEMU start to the agent's hello), exec echo straight to the agent and
//! through MCP, warm create from the pool, and the host memory of live VMs; then what the KVM self-test
//! says. Run: `bench/sandbox microvm` or `cargo bench -p bridge-sandbox --bench microvm`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bridge_core::BridgeEnv;
use bridge_sandbox::backend::{self, BackendKind, Spec, microvm};
use clap::Parser;
use common::{Cli, agent_bin, line, memory, ms};
use sandbox_agent::protocol::{Body, ExecSpec, Op, Program};
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn guest() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = root.join(".peers/guest");
    let s = std::process::Command::new(root.join("scripts/build-guest"))
        .arg("--out")
        .arg(&dir)
        .status()
        .unwrap();
    assert!(s.success(), "scripts/build-guest failed");
    dir
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let bin = agent_bin();
    let dir = guest();
    let kernel = dir.join("vmlinuz");
    let initrd = dir.join("initrd.cpio");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("microvm bench, QEMU TCG; load average {}", load.trim());

    // The floor: boot to /init, which finds no config and powers the guest off.
    let mut floor = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        // `timeout`: a floor that hangs must not hang the bench.
        let s = std::process::Command::new("timeout")
            .args(["120", "qemu-system-x86_64"])
            .args([
                "-M",
                "microvm",
                "-nodefaults",
                "-no-user-config",
                "-display",
                "none",
            ])
            .args(["-no-reboot", "-accel", "tcg", "-cpu", "max", "-m", "576"])
            .arg("-kernel")
            .arg(&kernel)
            .arg("-initrd")
            .arg(&initrd)
            .arg("-append")
            .arg(format!(
                "console=ttyS0 quiet panic=-1 reboot=t {} -- vm",
                microvm::tcg_clock_args()
            ))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(s.success());
        floor.push(ms(t.elapsed()));
    }
    line("floor: QEMU TCG boot to /init and power-off", floor);

    let flags = |pool: &str| {
        Cli::parse_from([
            "bench",
            "--sandbox-agent-bin",
            &bin,
            "--sandbox-backend",
            "microvm",
            "--sandbox-microvm-accel",
            "tcg",
            "--sandbox-kernel",
            kernel.to_str().unwrap(),
            "--sandbox-initrd",
            initrd.to_str().unwrap(),
            "--sandbox-pool-min-size",
            pool,
        ])
        .args
    };
    let settings = flags("0").settings().unwrap();
    let spec = Spec {
        image: 0,
        backend: BackendKind::Microvm,
        memory_mib: 512,
        vcpus: 1,
    };
    let mut cold = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let i = backend::launch(&settings, spec).await.unwrap();
        cold.push(ms(t.elapsed()));
        i.destroy().await;
    }
    line("cold create (QEMU start to agent hello)", cold);

    let i = backend::launch(&settings, spec).await.unwrap();
    let mut direct = Vec::new();
    for n in 0..200 {
        let exec = ExecSpec::new(Program::Shell {
            command: format!("echo {n}"),
        });
        let t = Instant::now();
        let r = i
            .client
            .call(Op::Exec(Box::new(exec)), Duration::from_secs(30))
            .await
            .unwrap();
        assert!(matches!(r, Body::Exited(_)));
        direct.push(ms(t.elapsed()));
    }
    line("agent exec `echo` in the guest (sh, no MCP)", direct);
    i.destroy().await;

    let env = BridgeEnv::new();
    let running = bridge_sandbox::start(flags("1"), &env).await.unwrap();
    let mgr = running.manager.clone();
    let client = mcp_testkit::pipe_client(running.bridge, mcp_testkit::Era::Legacy, vec![]).await;
    let mut warm = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..3 {
        while mgr.pool.idle() < 1 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let t = Instant::now();
        let out =
            mcp_testkit::ok_of(&mcp_testkit::call(&client, "create_sandbox", json!({})).await);
        warm.push(ms(t.elapsed()));
        assert_eq!(out["from_pool"], true);
        ids.push(out["sandbox_id"].as_str().unwrap().to_string());
    }
    line("warm create_sandbox via MCP (pool hit)", warm);
    for (lang, code, n) in [("sh", "echo hi", 100), ("python", "print('hi')", 10)] {
        let mut v = Vec::new();
        for _ in 0..n {
            let t = Instant::now();
            let r = mcp_testkit::call(
                &client,
                "execute_code",
                json!({"sandbox_id": ids[0], "language": lang, "code": code}),
            )
            .await;
            v.push(ms(t.elapsed()));
            assert_eq!(mcp_testkit::ok_of(&r)["stdout"], "hi\n");
        }
        line(&format!("execute_code {lang} echo via MCP, in a VM"), v);
    }
    let pids: Vec<u32> = ids
        .iter()
        .map(|id| mgr.get(id).unwrap().instance.launcher_pid().unwrap())
        .collect();
    let (rss, pss) = memory(&pids);
    println!(
        "{} VMs alive (512 MiB each asked, guest RAM is touched lazily): QEMU RSS sum {} MiB, PSS sum {} MiB ({:.0} MiB PSS each)",
        pids.len(),
        rss / 1024,
        pss / 1024,
        pss as f64 / 1024.0 / pids.len() as f64
    );
    env.close(Duration::from_secs(60)).await;

    let kvm = Cli::parse_from([
        "bench",
        "--sandbox-agent-bin",
        &bin,
        "--sandbox-kernel",
        kernel.to_str().unwrap(),
        "--sandbox-initrd",
        initrd.to_str().unwrap(),
    ])
    .args
    .settings()
    .unwrap();
    let t = Instant::now();
    let probe = microvm::self_test(&kvm).await;
    println!(
        "KVM self-test: available={} after {:.0} ms: {}",
        probe.available,
        ms(t.elapsed()),
        probe.reason
    );
}
