//! What a debugged program starts ends with its session, whatever process group or session it moved to (an
//! attack run's finding): lldb starts the program in a group of its own, so a plain `fork()` child of a C program
//! outlived `debug_stop`, and a Python program's child that called `setsid()` outlived it under debugpy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_debug::config::BackendChoice;
use serde_json::json;
use std::path::Path;
use support::procs::{assert_exited, pids_in, until};
use support::*;

const FORKER_C: &str = r#"#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (fork() == 0) {
        FILE *f = fopen(argv[1], "w");
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
        sleep(300);
        return 0;
    }
    sleep(300);
    return 0;
}
"#;

const FORKER_PY: &str = r#"import os, sys, time
if os.fork() == 0:
    os.setsid()
    with open(sys.argv[1], "w") as f:
        f.write(str(os.getpid()))
    time.sleep(300)
    os._exit(0)
time.sleep(300)
"#;

async fn a_child_ends_with_its_session(ws: &Path, config: serde_json::Value, pid_file: &Path) {
    let c = client(args(ws, BackendChoice::Dap)).await;
    data(&c, "debug_start", json!({"config": config})).await;
    until("the program's child wrote its pid", || {
        !pids_in(pid_file).is_empty()
    })
    .await;
    let child = pids_in(pid_file);
    data(&c, "debug_stop", json!({})).await;
    assert_exited("the debugged program's child", &child).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_c_programs_fork_child_ends_with_the_session() {
    let ws = workspace("desc-c");
    std::fs::write(ws.join("forker.c"), FORKER_C).unwrap();
    compile_c(&ws, "forker", &[]);
    let pid_file = ws.join("child.pid");
    let config = json!({"type": "lldb-dap", "request": "launch", "program": "${workspaceFolder}/forker",
        "args": [pid_file.display().to_string()]});
    a_child_ends_with_its_session(&ws, config, &pid_file).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_programs_setsid_child_ends_with_the_session() {
    let ws = workspace("desc-py");
    std::fs::write(ws.join("forker.py"), FORKER_PY).unwrap();
    let pid_file = ws.join("child.pid");
    // Without debugpy's own following of children, which holds a forked child until it is attached.
    let config = json!({"type": "debugpy", "request": "launch", "program": "${workspaceFolder}/forker.py",
        "args": [pid_file.display().to_string()], "subProcess": false});
    a_child_ends_with_its_session(&ws, config, &pid_file).await;
}
