//! Tools that can run long are task-capable, and `tools/list` says so in each tool's
//! `_meta["io.modelcontextprotocol/tasks"].taskSupport`: sandbox execution, code cells and file transfer, debug
//! waits, game file transfers, world scans. Quick tools say nothing. Every bridge, as a host starts it (stdio).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_mcp-bridges");

/// Kills and reaps the child however the test ends.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `tools/list` of `mcp-bridges <args>` over stdio, as JSON.
fn tools_of(args: &[&str], env: &[(&str, &str)]) -> Vec<Value> {
    let child = Command::new(BIN)
        .env_clear()
        .env("NO_COLOR", "1")
        .envs(env.iter().copied())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Reaped(child);
    let mut stdin = child.0.stdin.take().unwrap();
    stdin
        .write_all(support::INIT_AND_LIST_TOOLS.as_bytes())
        .unwrap();
    let stdout = BufReader::new(child.0.stdout.take().unwrap());
    for line in stdout.lines() {
        let line = line.unwrap();
        let reply: Value = serde_json::from_str(&line).unwrap();
        if reply["id"] == 2 {
            drop(stdin);
            return reply["result"]["tools"].as_array().unwrap().clone();
        }
    }
    panic!("{args:?}: no tools/list reply");
}

fn task_capable(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .filter(|t| {
            t["_meta"]["io.modelcontextprotocol/tasks"]["taskSupport"].as_str() == Some("optional")
        })
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The command line, the environment, and the tools expected to be task-capable.
type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a [&'a str]);

#[test]
fn long_running_tools_of_every_bridge_are_listed_as_task_capable() {
    let token = [("MINECRAFT_AUTH_TOKEN", "a-test-token-of-32-characters-xx")];
    let cases: [Case; 5] = [
        (
            &["sandbox", "--stdio"],
            &[],
            &[
                "execute_code",
                "run_command",
                "read_file",
                "write_file",
                "run_code",
            ],
        ),
        (
            &["debug", "--stdio"],
            &[],
            &[
                "debug_attach",
                "debug_continue",
                "debug_pause",
                "debug_run_to_line",
                "debug_start",
                "debug_step_into",
                "debug_step_out",
                "debug_step_over",
                "debug_wait_for_hit",
            ],
        ),
        (
            &["bitburner", "--stdio", "--bitburner-game-port", "0"],
            &[],
            &["read_file", "write_file"],
        ),
        (
            &["computercraft", "--stdio", "--computercraft-link-port", "0"],
            &[],
            &["fs_read", "fs_write"],
        ),
        (&["minecraft", "--stdio"], &token, &["get_world_info"]),
    ];
    for (args, env, expected) in cases {
        let tools = tools_of(args, env);
        assert_eq!(task_capable(&tools), expected, "{args:?}");
        assert!(
            tools.len() > expected.len(),
            "{args:?}: quick tools are not marked"
        );
    }
}
