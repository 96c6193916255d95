//! The in-game helper (`mcp-helper.js`, `docs/protocols/bitburner.md` §9) as the double plays it: a task
//! that, like the script, beats in `mcp/helper.txt`, takes each `mcp/req-<id>.txt`, and writes
//! `mcp/res-<id>.txt`. Its processes are a table in the [`World`](crate::World), so tests can look at them.

use crate::FakeGame;
use crate::handlers::ram_cost;
use crate::world::now_ms;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A script the helper started.
#[derive(Debug, Clone, PartialEq)]
pub struct Process {
    pub pid: u64,
    pub server: String,
    pub script: String,
    pub threads: u64,
    pub args: Vec<Value>,
    pub logs: Vec<String>,
}

/// The running helper; dropping it stops it (as `kill mcp-helper.js`).
pub struct HelperHandle {
    stop: Arc<AtomicBool>,
}

impl Drop for HelperHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl FakeGame {
    /// `run mcp-helper.js` speaking protocol `version`.
    pub fn start_helper(&self, version: u64) -> HelperHandle {
        let stop = Arc::new(AtomicBool::new(false));
        let game = self.clone();
        let stopped = Arc::clone(&stop);
        tokio::spawn(async move {
            while !stopped.load(Ordering::SeqCst) {
                round(&game, version);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        HelperHandle { stop }
    }
}

fn round(game: &FakeGame, version: u64) {
    let mut world = game.world();
    let beat = json!({"v": version, "pid": 1, "time": now_ms()}).to_string();
    let Some(home) = world.server_mut("home") else {
        return;
    };
    home.write("mcp/helper.txt", &beat, false);
    let requests: Vec<(String, String)> = home
        .text_files
        .iter()
        .filter(|(p, _)| p.starts_with("mcp/req-") && p.ends_with(".txt"))
        .map(|(p, f)| (p.clone(), f.content.clone()))
        .collect();
    for (path, content) in requests {
        let id = path["mcp/req-".len()..path.len() - ".txt".len()].to_owned();
        let answer = match serde_json::from_str::<Value>(&content) {
            Ok(request) if request["v"] == json!(version) => {
                match serve(&mut world, &request["op"], &request["args"]) {
                    Ok(result) => json!({"v": version, "id": id, "ok": true, "result": result}),
                    Err(error) => json!({"v": version, "id": id, "ok": false, "error": error}),
                }
            }
            Ok(request) => json!({"v": version, "id": id, "ok": false,
                "error": format!("protocol {}; this helper speaks {version}", request["v"])}),
            Err(e) => json!({"v": version, "id": id, "ok": false, "error": e.to_string()}),
        };
        if let Some(home) = world.server_mut("home") {
            let _ = home.remove(&path, false);
            home.write(&format!("mcp/res-{id}.txt"), &answer.to_string(), false);
        }
    }
}

fn serve(world: &mut crate::World, op: &Value, args: &Value) -> Result<Value, String> {
    let pid = args["pid"].as_u64().unwrap_or(0);
    match op.as_str().unwrap_or_default() {
        "run_script" => {
            let server = args["server"].as_str().unwrap_or("home").to_owned();
            let script = args["script"].as_str().unwrap_or_default().to_owned();
            let threads = args["threads"].as_u64().unwrap_or(1).max(1);
            let code = world
                .server(&server)
                .and_then(|s| s.script(&script))
                .map(|f| f.content.clone())
                .ok_or_else(|| {
                    format!(
                        "could not start {script} on {server}: the script is missing there, the server lacks \
                         the RAM, or you have no root access"
                    )
                })?;
            let ram = ram_cost(&code).unwrap_or(1.6) * threads as f64;
            world.next_pid += 1;
            let pid = world.next_pid;
            let script_args: Vec<Value> = args["args"].as_array().cloned().unwrap_or_default();
            world.processes.push(Process {
                pid,
                server,
                script: script.clone(),
                threads,
                logs: vec![format!("{script}: started with {} threads", threads)],
                args: script_args,
            });
            Ok(json!({"pid": pid, "ram_gb": (ram * 100.0).round() / 100.0}))
        }
        "get_script_logs" => {
            let lines = args["max_lines"].as_u64().unwrap_or(200) as usize;
            let p = world
                .processes
                .iter()
                .find(|p| p.pid == pid)
                .ok_or_else(|| format!("no script is running with pid {pid}"))?;
            let skip = p.logs.len().saturating_sub(lines);
            Ok(json!({"pid": pid, "lines": p.logs[skip..]}))
        }
        "kill_script" => {
            let before = world.processes.len();
            world.processes.retain(|p| p.pid != pid);
            Ok(json!({"pid": pid, "killed": world.processes.len() < before}))
        }
        "get_server_state" => {
            let server = args["server"].as_str().unwrap_or("home").to_owned();
            if world.server(&server).is_none() {
                return Err(format!("Invalid hostname: {server}"));
            }
            let used: f64 = world
                .processes
                .iter()
                .filter(|p| p.server == server)
                .map(|p| p.threads as f64 * 1.7)
                .sum();
            Ok(
                json!({"server": server, "money": world.money, "hacking_level": 1,
                      "max_ram_gb": 32, "used_ram_gb": used}),
            )
        }
        other => Err(format!("unknown operation {other}")),
    }
}
