//! Sandbox numbers (printed, never asserted): the floor (a bare `unshare` spawn of /bin/true with the same
//! namespaces), cold create (launch to agent hello), warm create (a pop from the pool), execute_code echo
//! through MCP (stdio framing, in-process pipe) and straight to the agent, and the host memory of 100 live
//! sandboxes. Run: `bench/sandbox` or `cargo bench -p bridge-sandbox --bench sandbox`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bridge_core::BridgeEnv;
use bridge_sandbox::backend::{self, BackendKind, Spec};
use clap::Parser;
use common::{Cli, agent_bin, line, memory, ms, tree};
use sandbox_agent::protocol::{Body, ExecSpec, Op, Program};
use serde_json::json;
use std::time::{Duration, Instant};

/// The floor: `unshare` of the namespaces a namespace sandbox has, running /bin/true.
const FLOOR_ARGS: [&str; 9] = [
    "--user",
    "--map-root-user",
    "--pid",
    "--fork",
    "--net",
    "--mount",
    "--ipc",
    "--uts",
    "/bin/true",
];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let bin = agent_bin();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("sandbox bench (agent {bin}); load average {}", load.trim());

    // The floor: the kernel's part of a namespace sandbox, no file system work.
    let mut floor = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let s = std::process::Command::new("unshare")
            .args(FLOOR_ARGS)
            .status()
            .unwrap();
        assert!(s.success());
        floor.push(ms(t.elapsed()));
    }
    line("floor: unshare -U -p -n -m -i -u /bin/true", floor);

    let args = Cli::parse_from([
        "bench",
        "--sandbox-agent-bin",
        &bin,
        "--sandbox-pool-min-size",
        "0",
        "--sandbox-max",
        "200",
    ])
    .args;
    let settings = args.settings().unwrap();
    let spec = Spec {
        image: 0,
        backend: BackendKind::Namespace,
        memory_mib: 512,
        vcpus: 1,
    };

    let mut cold = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let i = backend::launch(&settings, spec).await.unwrap();
        cold.push(ms(t.elapsed()));
        i.destroy().await;
    }
    line("cold create (spawn, namespaces, root, hello)", cold);

    // Like for like: joining a cgroup v1 hierarchy takes the kernel's threadgroup lock for writing, which waits
    // for an RCU grace period (milliseconds, longer under load) and which the bare floor never pays. So the
    // floor again, joining a fresh set of this bridge's cgroups first, and cold create without cgroups.
    let mut floor_cg = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let groups = backend::Cgroups::create(spec, 64, &settings).await;
        spawn_floor_in(&groups.dirs());
        floor_cg.push(ms(t.elapsed()));
        groups.remove().await;
    }
    line("floor joining this bridge's cgroups first", floor_cg);
    let mut bare = settings.clone();
    bare.cgroups = false;
    let mut cold_bare = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        let i = backend::launch(&bare, spec).await.unwrap();
        cold_bare.push(ms(t.elapsed()));
        i.destroy().await;
    }
    line("cold create without cgroups", cold_bare);

    // Straight to the agent: the protocol's own cost.
    let i = backend::launch(&settings, spec).await.unwrap();
    let mut direct = Vec::new();
    for n in 0..300 {
        let spec = ExecSpec::new(Program::Shell {
            command: format!("echo {n}"),
        });
        let t = Instant::now();
        let r = i
            .client
            .call(Op::Exec(Box::new(spec)), Duration::from_secs(10))
            .await
            .unwrap();
        assert!(matches!(r, Body::Exited(_)));
        direct.push(ms(t.elapsed()));
    }
    line("agent exec `echo` (sh, no MCP)", direct);
    i.destroy().await;

    // Through MCP with the warm pool on.
    let env = BridgeEnv::new();
    let args = Cli::parse_from([
        "bench",
        "--sandbox-agent-bin",
        &bin,
        "--sandbox-pool-min-size",
        "3",
        "--sandbox-max",
        "200",
    ])
    .args;
    let running = bridge_sandbox::start(args, &env).await.unwrap();
    let mgr = running.manager.clone();
    let client = mcp_testkit::pipe_client(running.bridge, mcp_testkit::Era::Legacy, vec![]).await;
    let mut warm = Vec::new();
    for _ in 0..20 {
        while mgr.pool.idle() < 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let t = Instant::now();
        let out =
            mcp_testkit::ok_of(&mcp_testkit::call(&client, "create_sandbox", json!({})).await);
        warm.push(ms(t.elapsed()));
        assert_eq!(out["from_pool"], true);
        mcp_testkit::call(
            &client,
            "destroy_sandbox",
            json!({"sandbox_id": out["sandbox_id"]}),
        )
        .await;
    }
    line("warm create_sandbox via MCP (pool hit)", warm);
    let out = mcp_testkit::ok_of(&mcp_testkit::call(&client, "create_sandbox", json!({})).await);
    let id = out["sandbox_id"].as_str().unwrap().to_string();
    for (lang, code) in [("sh", "echo hi"), ("python", "print('hi')")] {
        let mut v = Vec::new();
        for _ in 0..if lang == "sh" { 300 } else { 50 } {
            let t = Instant::now();
            let r = mcp_testkit::call(
                &client,
                "execute_code",
                json!({"sandbox_id": id, "language": lang, "code": code}),
            )
            .await;
            v.push(ms(t.elapsed()));
            assert_eq!(mcp_testkit::ok_of(&r)["stdout"], "hi\n");
        }
        line(&format!("execute_code {lang} echo via MCP"), v);
    }

    // 100 alive at once.
    let before = memory(&[std::process::id()]);
    let mut ids = Vec::new();
    let t = Instant::now();
    for _ in 0..100 {
        let out =
            mcp_testkit::ok_of(&mcp_testkit::call(&client, "create_sandbox", json!({})).await);
        ids.push(out["sandbox_id"].as_str().unwrap().to_string());
    }
    let took = t.elapsed();
    let mut pids = Vec::new();
    for id in &ids {
        let s = mgr.get(id).unwrap();
        pids.extend(tree(s.instance.launcher_pid().unwrap()));
    }
    let (rss, pss) = memory(&pids);
    let after = memory(&[std::process::id()]);
    println!(
        "100 sandboxes alive: created in {:.0} ms; {} processes; RSS sum {} MiB, PSS sum {} MiB ({:.2} MiB PSS each); bridge RSS {} -> {} MiB",
        ms(took),
        pids.len(),
        rss / 1024,
        pss / 1024,
        pss as f64 / 1024.0 / 100.0,
        before.0 / 1024,
        after.0 / 1024
    );
    let t = Instant::now();
    env.close(Duration::from_secs(60)).await;
    println!(
        "shutdown destroyed {} sandboxes in {:.0} ms",
        ids.len() + 1,
        ms(t.elapsed())
    );
}

/// Runs the floor's `unshare` inside `dirs` (each a cgroup directory).
fn spawn_floor_in(dirs: &[std::path::PathBuf]) {
    use std::os::unix::process::CommandExt;
    let procs: Vec<std::ffi::CString> = dirs
        .iter()
        .map(|d| {
            std::ffi::CString::new(d.join("cgroup.procs").into_os_string().into_encoded_bytes())
                .unwrap()
        })
        .collect();
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(FLOOR_ARGS);
    #[allow(unsafe_code)]
    // SAFETY: the closure runs between fork and exec in the child, where only async-signal-safe calls are
    // allowed: it calls open(2), write(2) and close(2) on C strings built before the fork, and allocates
    // nothing. Writing "0" to cgroup.procs moves the writing process itself.
    unsafe {
        cmd.pre_exec(move || {
            for path in &procs {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let wrote = libc::write(fd, b"0".as_ptr().cast(), 1);
                libc::close(fd);
                if wrote != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let s = cmd.status().unwrap();
    assert!(s.success());
}
