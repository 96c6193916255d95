//! `debug-host` as a child process, the headless VS Code of these tests; killed like a crashed editor.
#![allow(dead_code)]

use super::*;
use std::process::{Child, Command, Stdio};

pub struct HostProc {
    pub child: Child,
    pub ws: PathBuf,
}

impl HostProc {
    pub fn start(ws: &Path) -> Self {
        let child = Command::new(env!("CARGO_BIN_EXE_debug-host"))
            .arg("--debug-workspace")
            .arg(ws)
            .arg("--debug-python")
            .arg(python())
            .arg("--debug-lldb-dap")
            .arg(lldb_dap())
            .arg("--heartbeat")
            .arg("1000")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("debug-host starts");
        let host_json = ws.join(".vsc-bridge/host.json");
        let lock = ws.join(".vsc-bridge/host.lock");
        let t = std::time::Instant::now();
        while !(host_json.exists() && lock.exists() && pid_in_host_json(ws) == Some(child.id())) {
            assert!(
                t.elapsed() < super::HANG_GUARD,
                "debug-host did not write host.json"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            child,
            ws: ws.to_path_buf(),
        }
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HostProc {
    fn drop(&mut self) {
        self.kill();
    }
}

fn pid_in_host_json(ws: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(ws.join(".vsc-bridge/host.json")).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    v["pid"].as_u64().map(|p| p as u32)
}

/// The job directories under `execute/`.
pub fn job_dirs(ws: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(ws.join(".vsc-bridge/execute")) else {
        return vec![];
    };
    let mut v: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    v.sort();
    v
}

/// Waits until no job directory is left (the client removes each after `done`).
pub async fn no_jobs_left(ws: &Path) {
    let t = std::time::Instant::now();
    while !job_dirs(ws).is_empty() {
        assert!(
            t.elapsed() < super::HANG_GUARD,
            "job directories left behind: {:?}",
            job_dirs(ws)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
