//! What /proc says about the processes the bridge (in this test process) started: the debug servers it runs
//! and the sockets they listen on.

use std::collections::HashSet;

/// This process's direct children whose argv `matches`, with their pid and argv.
pub fn children_by_argv(matches: impl Fn(&[String]) -> bool) -> Vec<(u32, Vec<String>)> {
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`: comm may hold spaces, so fields are counted after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid != Some(me) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let argv: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if matches(&argv) {
            found.push((pid, argv));
        }
    }
    found
}

/// TCP sockets in LISTEN state (`0A`) among the process's open sockets, as `local_address` from /proc.
pub fn tcp_listeners(pid: u32) -> Vec<String> {
    let inodes: HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|l| {
            l.to_str()
                .and_then(|l| l.strip_prefix("socket:["))
                .and_then(|l| l.strip_suffix(']'))
                .map(str::to_owned)
        })
        .collect();
    let mut listening = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 9 && f[3] == "0A" && inodes.contains(f[9]) {
                listening.push(format!("{table} {}", f[1]));
            }
        }
    }
    listening
}

/// Whether `pid` is a process that has not exited (a zombie has).
pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// The pids written to `file`, whitespace-separated (none while it does not exist).
pub fn pids_in(file: &std::path::Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Waits (bounded by the hang guard) until `ready` holds.
pub async fn until(what: &str, ready: impl Fn() -> bool) {
    let begun = std::time::Instant::now();
    while !ready() {
        assert!(begun.elapsed() < super::HANG_GUARD, "never: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Waits (bounded) until every one of `pids`, which must not be empty, has exited.
pub async fn assert_exited(what: &str, pids: &[u32]) {
    assert!(!pids.is_empty(), "no pid of {what} was recorded");
    until(&format!("{what} {pids:?} exited"), || {
        !pids.iter().any(|p| running(*p))
    })
    .await;
}

/// A shell script at `path`, executable.
pub fn script(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A stand-in for `--debug-python` in `ws` whose debugpy adapter is `hung_dap.py` (it answers `initialize` and
/// nothing else), started with a "program" in its process group as debugpy's debuggee is: a `sleep` whose pid
/// goes to `ws/program.pid`; the adapter's pid goes to `ws/adapter.pid`.
pub fn hung_python(ws: &std::path::Path) -> std::path::PathBuf {
    let hung = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/hung_dap.py");
    let python = ws.join("fake-python");
    script(
        &python,
        &format!(
            "#!/bin/sh\n# `-c 'import debugpy'` is the bridge's check; anything else starts the adapter.\n[ \"$1\" = -c ] && exit 0\nsleep 600 </dev/null >/dev/null 2>&1 &\necho $! > '{program}'\necho $$ > '{adapter}'\nexec python3 '{hung}'\n",
            program = ws.join("program.pid").display(),
            adapter = ws.join("adapter.pid").display(),
            hung = hung.display()
        ),
    );
    python
}

/// A program for js-debug in `ws` (`t.js`, never run) and, as js-debug's server (`--debug-js-debug`), a copy of
/// `hung_js_debug.js`: the launcher's connection works, the program's session hangs after its `launch`, which
/// starts a "program" in the server's group (its pid in `ws/program.pid`, the server's in `ws/adapter.pid`) and
/// creates `ws/child-launch`. Returns the server and the launch configuration.
pub fn hung_js_debug(ws: &std::path::Path) -> (std::path::PathBuf, serde_json::Value) {
    std::fs::write(ws.join("t.js"), "console.log('never run');\n").unwrap();
    let server = ws.join("hung_js_debug.js");
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/hung_js_debug.js"),
        &server,
    )
    .unwrap();
    let config = serde_json::json!({"type": "pwa-node", "request": "launch", "name": "js",
        "program": ws.join("t.js").display().to_string()});
    (server, config)
}

/// A Go program in `ws/gomain` and a launch configuration for it whose `go build` is held by a `-toolexec`
/// program that appends its pid to `pid_file` and sleeps: real delve, hung inside its build.
pub fn go_held_in_its_build(ws: &std::path::Path, pid_file: &std::path::Path) -> serde_json::Value {
    std::fs::create_dir_all(ws.join("gomain")).unwrap();
    std::fs::write(
        ws.join("gomain/main.go"),
        "package main\n\nfunc main() {}\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("gomain/go.mod"),
        "module example.com/t\n\ngo 1.19\n",
    )
    .unwrap();
    let tool = ws.join("hang-tool");
    script(
        &tool,
        &format!(
            "#!/bin/sh\necho $$ >> '{}'\nexec sleep 600\n",
            pid_file.display()
        ),
    );
    let dir = ws.join("gomain").display().to_string();
    serde_json::json!({"type": "go", "request": "launch", "name": "go", "program": dir, "cwd": dir,
        "buildFlags": format!("-toolexec={}", tool.display())})
}

/// The private socket directories of js-debug servers the bridge in process `bridge_pid` started.
pub fn js_socket_dirs(bridge_pid: u32) -> Vec<std::path::PathBuf> {
    let prefix = format!("mcp-bridges-js-debug-{bridge_pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}
