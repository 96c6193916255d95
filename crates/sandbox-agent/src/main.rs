//! `sandbox-agent [namespace]`: without an argument, serve the protocol on stdin/stdout in the current
//! environment (the `process` backend; config in `SANDBOX_AGENT_CONFIG`); with `namespace`, first build a
//! sandbox from `SANDBOX_AGENT_LAUNCH` and serve as its PID 1; with `vm`, be `/init` of a microVM guest
//! (config on the kernel command line) and serve on its virtio-serial port.

use sandbox_agent::agent::{Agent, AgentConfig};
use sandbox_agent::launch::{self, LAUNCH_ENV, LaunchConfig, Launched};
use sandbox_agent::vm;

const CONFIG_ENV: &str = "SANDBOX_AGENT_CONFIG";

fn main() {
    let mode = std::env::args().nth(1);
    if mode.as_deref() == Some(vm::VM_MODE) {
        guest();
    }
    let config = match mode.as_deref() {
        Some("namespace") => match namespace() {
            Ok(c) => c,
            Err(code) => std::process::exit(code),
        },
        None | Some("serve") => match plain() {
            Ok(c) => c,
            Err(msg) => fail(&msg),
        },
        Some(other) => fail(&format!(
            "unknown mode {other:?}; use `namespace`, `vm` (as a guest's /init) or nothing"
        )),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(sandbox_agent::BLOCKING_THREADS)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => fail(&format!("no runtime: {e}")),
    };
    let own_scratch =
        (mode.is_none() && std::env::var_os(CONFIG_ENV).is_none()).then(|| config.scratch.clone());
    runtime.block_on(sandbox_agent::serve(
        Agent::new(config),
        tokio::io::stdin(),
        tokio::io::stdout(),
    ));
    if let Some(dir) = own_scratch {
        let _ = std::fs::remove_dir_all(dir);
    }
    // Background tasks (stdin reader thread) must not keep PID 1 alive.
    std::process::exit(0);
}

/// PID 1 of a microVM: whatever happens, the guest powers off rather than letting the kernel panic.
fn guest() -> ! {
    let (config, port) = match vm::boot() {
        Ok(booted) => booted,
        Err(e) => {
            eprintln!("sandbox-agent: guest setup failed: {e}");
            vm::power_off();
        }
    };
    let serve = |port: std::fs::File| -> Result<(), String> {
        let writer = port.try_clone().map_err(|e| format!("dup the port: {e}"))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(sandbox_agent::BLOCKING_THREADS)
            .enable_all()
            .build()
            .map_err(|e| format!("no runtime: {e}"))?;
        runtime.block_on(sandbox_agent::serve(
            Agent::new(config),
            tokio::fs::File::from_std(port),
            tokio::fs::File::from_std(writer),
        ));
        Ok(())
    };
    if let Err(e) = serve(port) {
        eprintln!("sandbox-agent: {e}");
    }
    vm::power_off();
}

fn fail(msg: &str) -> ! {
    eprintln!("sandbox-agent: {msg}");
    std::process::exit(2)
}

fn namespace() -> Result<AgentConfig, i32> {
    let text = std::env::var(LAUNCH_ENV).unwrap_or_default();
    let cfg: LaunchConfig =
        serde_json::from_str(&text).unwrap_or_else(|e| fail(&format!("{LAUNCH_ENV}: {e}")));
    // SAFETY-free: the variable is removed so nothing started inside can read the host's settings.
    // (Children get a cleared environment anyway.)
    match launch::run(&cfg) {
        Ok(Launched::Agent(c)) => Ok(*c),
        Ok(Launched::Exit(code)) => Err(code),
        Err(e) => {
            eprintln!("sandbox-agent: sandbox setup failed: {e}");
            Err(3)
        }
    }
}

fn plain() -> Result<AgentConfig, String> {
    match std::env::var(CONFIG_ENV) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| format!("{CONFIG_ENV}: {e}")),
        Err(_) => {
            let cwd = std::env::current_dir().map_err(|e| format!("no cwd: {e}"))?;
            // Code files of concurrent agents must not collide.
            let scratch =
                std::env::temp_dir().join(format!("sandbox-agent-{}", std::process::id()));
            std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
            Ok(AgentConfig {
                workspace: cwd.clone(),
                scratch,
                user: None,
                limits: Default::default(),
                enforced: Default::default(),
            })
        }
    }
}
