//! The agent binary over a raw byte stream, as a backend sees it: partial and oversize frames, concurrent
//! requests, timeouts that kill a whole process tree, code larger than argv allows, bytes for files, and
//! PID 1 duties inside a namespace sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use sandbox_agent::protocol::{
    Body, ErrorKind, ExecSpec, MAX_FRAME_BYTES, Op, Program, Reply, Request,
};
use serde_json::json;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long a test waits for what must happen before it calls it hung: generous, for loaded CI machines;
/// never a claim about speed.
const HANG_GUARD: Duration = Duration::from_secs(60);

struct Agent {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
}

fn plain() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sandbox-agent"));
    let dir = std::env::temp_dir().join(format!("agent-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    cmd.current_dir(dir);
    cmd
}

fn namespaced() -> Command {
    namespaced_with(false)
}

fn namespaced_with(landlock: bool) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sandbox-agent"));
    cmd.arg("namespace").env(
        "SANDBOX_AGENT_LAUNCH",
        json!({
            "id_base": 1_300_000_000u32, "ro_binds": ["/usr", "/etc/alternatives", "/etc/ld.so.cache"],
            "workspace_mib": 32, "tmp_mib": 32, "hostname": "sandbox",
            "limits": {"processes": 64, "data": 1u64 << 30, "landlock": landlock}
        })
        .to_string(),
    );
    cmd
}

impl Agent {
    fn start(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Self {
            stdin: child.stdin.take().unwrap(),
            stdout: child.stdout.take().unwrap(),
            child,
        }
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    async fn send(&mut self, id: u64, op: Op) {
        let text = serde_json::to_vec(&Request { id, op }).unwrap();
        let mut frame = (text.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&text);
        self.send_raw(&frame).await;
    }

    async fn recv(&mut self) -> Option<Reply> {
        let mut len = [0u8; 4];
        self.stdout.read_exact(&mut len).await.ok()?;
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        self.stdout.read_exact(&mut body).await.ok()?;
        Some(serde_json::from_slice(&body).unwrap())
    }

    /// The next final reply (chunks skipped).
    async fn reply(&mut self) -> Reply {
        loop {
            let r = tokio::time::timeout(HANG_GUARD, self.recv())
                .await
                .expect("the agent answered (hang guard)")
                .expect("agent stream open");
            if r.body.is_final() {
                return r;
            }
        }
    }

    /// The status of process `target` once `done` holds, asked again every 20 ms under ids from `first_id` up:
    /// polled, not slept on, as a loaded machine runs the process when it can.
    async fn status_until(
        &mut self,
        first_id: u64,
        target: u64,
        done: impl Fn(&sandbox_agent::protocol::ProcReport) -> bool,
    ) -> sandbox_agent::protocol::ProcReport {
        let guard = tokio::time::Instant::now() + HANG_GUARD;
        for id in first_id.. {
            self.send(
                id,
                Op::Status {
                    target,
                    state_only: false,
                },
            )
            .await;
            match self.reply().await.body {
                Body::Status(p) if done(&p) => return p,
                Body::Status(p) => {
                    assert!(tokio::time::Instant::now() < guard, "never came: {p:?}")
                }
                other => panic!("{other:?}"),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        unreachable!("ids run out")
    }

    async fn shell(&mut self, id: u64, command: &str, timeout_ms: Option<u64>) -> Reply {
        let mut spec = ExecSpec::new(Program::Shell {
            command: command.into(),
        });
        spec.timeout_ms = timeout_ms;
        self.send(id, Op::Exec(Box::new(spec))).await;
        self.reply().await
    }
}

fn exited(r: &Reply) -> &sandbox_agent::protocol::ProcReport {
    match &r.body {
        Body::Exited(p) => p,
        other => panic!("expected exited, got {other:?}"),
    }
}

#[tokio::test]
async fn a_frame_arriving_in_pieces_is_answered_once_whole() {
    let mut a = Agent::start(plain());
    let text = serde_json::to_vec(&Request {
        id: 5,
        op: Op::Hello,
    })
    .unwrap();
    let mut frame = (text.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&text);
    for piece in frame.chunks(3) {
        a.send_raw(piece).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let r = a.reply().await;
    assert_eq!(r.id, 5);
    assert!(matches!(r.body, Body::Hello(ref h) if h.version == 2));
}

#[tokio::test]
async fn an_oversize_frame_is_refused_by_its_header_and_ends_the_stream() {
    let mut a = Agent::start(plain());
    // Only the header: the agent must refuse before buffering 5 MiB.
    a.send_raw(&((MAX_FRAME_BYTES as u32) + 1).to_be_bytes())
        .await;
    a.send_raw(&[b'x'; 16]).await;
    let r = a.reply().await;
    match r.body {
        Body::Error { message, .. } => assert!(message.contains("limit"), "{message}"),
        other => panic!("expected an error, got {other:?}"),
    }
    assert!(
        a.recv().await.is_none(),
        "the stream ends after a framing error"
    );
    let status = tokio::time::timeout(HANG_GUARD, a.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn a_malformed_request_gets_an_error_naming_its_id() {
    let mut a = Agent::start(plain());
    let text = br#"{"id":9,"op":"warp"}"#;
    let mut frame = (text.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(text);
    a.send_raw(&frame).await;
    let r = a.reply().await;
    assert_eq!(r.id, 9);
    assert!(matches!(r.body, Body::Error { .. }));
    a.send(10, Op::Hello).await;
    assert_eq!(a.reply().await.id, 10, "the stream survives a bad request");
}

#[tokio::test]
async fn concurrent_requests_run_at_once() {
    let mut a = Agent::start(plain());
    // A barrier: each program marks itself started and waits until all four are, so each prints `done` only
    // if the four ran at the same time; run one after another, the first would wait for the others until its
    // 10 s timeout killed it.
    let barrier = std::env::temp_dir().join(format!(
        "agent-barrier-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&barrier).unwrap();
    for id in 1..=4 {
        let mut spec = ExecSpec::new(Program::Shell {
            command: format!(
                "cd '{}' && touch started.{id} && until [ \"$(ls | wc -l)\" -ge 4 ]; do sleep 0.05; done; echo done",
                barrier.display()
            ),
        });
        spec.timeout_ms = Some(10_000);
        a.send(id, Op::Exec(Box::new(spec))).await;
    }
    a.send(99, Op::Hello).await;
    let first = a.reply().await;
    assert_eq!(first.id, 99, "hello is not stuck behind the programs");
    let mut ids = Vec::new();
    for _ in 0..4 {
        let r = a.reply().await;
        let p = exited(&r);
        assert!(
            !p.timed_out,
            "request {} waited for the others in vain",
            r.id
        );
        assert_eq!(p.stdout, b"done\n");
        ids.push(r.id);
    }
    ids.sort_unstable();
    assert_eq!(ids, vec![1, 2, 3, 4]);
    let _ = std::fs::remove_dir_all(&barrier);
}

#[tokio::test]
async fn a_timeout_kills_a_process_tree_that_ignores_sigterm() {
    // In its own pid namespace, so `pgrep` sees only this sandbox's processes.
    let mut a = Agent::start(namespaced());
    let r = a
        .shell(
            1,
            "trap '' TERM; (trap '' TERM; sleep 60) & sleep 60 & wait",
            Some(500),
        )
        .await;
    // Killed by the 500 ms deadline (SIGKILL, SIGTERM being ignored), not ended by the sleeps, which would
    // report neither.
    let p = exited(&r);
    assert!(p.timed_out);
    assert_eq!(p.signal, Some(9));
    let r = a.shell(2, "pgrep -x sleep || echo none", None).await;
    assert_eq!(
        exited(&r).stdout,
        b"none\n",
        "no sleep survived the timeout"
    );
}

#[tokio::test]
async fn code_larger_than_argv_allows_runs_from_a_file() {
    let mut a = Agent::start(plain());
    // 600 KiB of Python: far past MAX_ARG_STRLEN (128 KiB).
    let code = format!("x = '{}'\nprint(len(x))\n", "a".repeat(600 * 1024));
    let spec = ExecSpec::new(Program::Code {
        language: "python".into(),
        code,
    });
    a.send(1, Op::Exec(Box::new(spec))).await;
    let r = a.reply().await;
    assert_eq!(exited(&r).stdout, format!("{}\n", 600 * 1024).as_bytes());
}

#[tokio::test]
async fn files_are_bytes_with_offsets_append_and_modes() {
    let mut a = Agent::start(plain());
    let bytes: Vec<u8> = (0..=255).collect();
    let write = |data: Vec<u8>, offset, append, mode| Op::Write {
        path: "d/bin".into(),
        data,
        offset,
        append,
        mode,
    };
    a.send(1, write(bytes.clone(), None, false, Some(0o600)))
        .await;
    assert!(matches!(a.reply().await.body, Body::Ok { written: 256 }));
    a.send(2, write(vec![1, 2], None, true, None)).await;
    a.reply().await;
    a.send(3, write(vec![9], Some(0), false, None)).await;
    a.reply().await;
    a.send(
        4,
        Op::Read {
            path: "d/bin".into(),
            offset: 250,
            length: 100,
        },
    )
    .await;
    match a.reply().await.body {
        Body::Data { data, size, eof } => {
            assert_eq!(size, 258);
            assert!(eof);
            assert_eq!(data, vec![250, 251, 252, 253, 254, 255, 1, 2]);
        }
        other => panic!("{other:?}"),
    }
    let r = a
        .shell(5, "head -c 1 d/bin | od -An -tu1; stat -c %a d/bin", None)
        .await;
    assert_eq!(
        String::from_utf8_lossy(&exited(&r).stdout)
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["9", "600"]
    );
    a.send(
        6,
        Op::List {
            path: ".".into(),
            depth: 2,
        },
    )
    .await;
    match a.reply().await.body {
        Body::Entries { entries, truncated } => {
            assert!(!truncated);
            let names: Vec<_> = entries.iter().map(|e| e.name.as_str()).collect();
            assert!(
                names.contains(&"d") && names.contains(&"d/bin"),
                "{names:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    a.send(
        7,
        Op::Read {
            path: "missing".into(),
            offset: 0,
            length: 1,
        },
    )
    .await;
    assert!(matches!(
        a.reply().await.body,
        Body::Error {
            kind: sandbox_agent::protocol::ErrorKind::NotFound,
            ..
        }
    ));
}

#[tokio::test]
async fn output_past_the_limit_keeps_head_and_tail() {
    let mut a = Agent::start(plain());
    let mut spec = ExecSpec::new(Program::Shell {
        command: "echo START; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo END".into(),
    });
    spec.max_output = 1000;
    a.send(1, Op::Exec(Box::new(spec))).await;
    let r = a.reply().await;
    let p = exited(&r);
    assert!(p.truncated);
    assert_eq!(p.stdout.len(), 1000);
    assert!(p.stdout.starts_with(b"START\n"));
    assert!(p.stdout.ends_with(b"\nEND\n"));
    assert_eq!(p.stdout_bytes, 6 + 3_000_000 + 1 + 4);
}

#[tokio::test]
async fn background_processes_take_stdin_signals_and_report_status() {
    let mut a = Agent::start(plain());
    let mut spec = ExecSpec::new(Program::Shell {
        command: "read line; echo got:$line; sleep 60".into(),
    });
    spec.background = true;
    spec.close_stdin = false;
    a.send(1, Op::Exec(Box::new(spec))).await;
    assert!(matches!(a.reply().await.body, Body::Started { .. }));
    tokio::time::sleep(Duration::from_millis(100)).await;
    a.send(
        2,
        Op::Stdin {
            target: 1,
            data: b"hi\n".to_vec(),
            eof: true,
        },
    )
    .await;
    assert!(matches!(a.reply().await.body, Body::Ok { written: 3 }));
    let p = a.status_until(1000, 1, |p| !p.stdout.is_empty()).await;
    assert!(p.running);
    assert_eq!(p.stdout, b"got:hi\n");
    // A poll for the state: no output, but how much there is.
    a.send(
        33,
        Op::Status {
            target: 1,
            state_only: true,
        },
    )
    .await;
    match a.reply().await.body {
        Body::Status(p) => {
            assert!(p.running);
            assert!(p.stdout.is_empty() && p.stderr.is_empty(), "{p:?}");
            assert_eq!(p.stdout_bytes, 7);
        }
        other => panic!("{other:?}"),
    }
    a.send(
        4,
        Op::Signal {
            target: 1,
            signal: 15,
        },
    )
    .await;
    a.reply().await;
    let p = a.status_until(2000, 1, |p| !p.running).await;
    assert_eq!(p.signal, Some(15));
}

/// A working directory the agent refuses (through a /proc magic link) or that does not exist is the caller's
/// to change, as a file's path is: not a failure to start the program.
#[tokio::test]
async fn a_refused_or_missing_working_directory_is_the_callers_mistake() {
    let mut a = Agent::start(plain());
    for (id, cwd, want) in [
        (1, "/proc/self/cwd", ErrorKind::Invalid),
        (2, "/no/such/directory", ErrorKind::NotFound),
    ] {
        let mut spec = ExecSpec::new(Program::Shell {
            command: "pwd".into(),
        });
        spec.cwd = Some(cwd.into());
        a.send(id, Op::Exec(Box::new(spec))).await;
        match a.reply().await.body {
            Body::Error { kind, message } => {
                assert_eq!(kind, want, "{cwd}: {message}");
                assert!(message.contains("working directory"), "{message}");
            }
            other => panic!("{cwd}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn as_pid_1_the_agent_reaps_orphans() {
    let mut a = Agent::start(namespaced());
    a.send(1, Op::Hello).await;
    match a.reply().await.body {
        Body::Hello(h) => assert_eq!(h.pid, 1),
        other => panic!("{other:?}"),
    }
    // Each `sh -c '... &'` leaves an orphan that exits a moment later and is reparented to PID 1.
    // The count is retried for up to 10 s: a loaded machine may run PID 1's reaping late, never not at all.
    let r = a.shell(2, "for i in 1 2 3 4 5; do sh -c 'sleep 0.1 &'; done; sleep 0.5; for i in $(seq 100); do [ \"$(grep -l '^State:.*Z' /proc/[0-9]*/status | wc -l)\" = 0 ] && break; sleep 0.1; done; grep -l '^State:.*Z' /proc/[0-9]*/status | wc -l", None).await;
    assert_eq!(
        String::from_utf8_lossy(&exited(&r).stdout).trim(),
        "0",
        "no zombies left"
    );
}

#[tokio::test]
async fn closing_the_stream_ends_the_agent_and_its_processes() {
    let mut a = Agent::start(plain());
    let mut spec = ExecSpec::new(Program::Shell {
        command: "echo $$ > pidfile; sleep 60".into(),
    });
    spec.background = true;
    a.send(1, Op::Exec(Box::new(spec))).await;
    let pid = match a.reply().await.body {
        Body::Started { pid } => pid,
        other => panic!("{other:?}"),
    };
    drop(a.stdin);
    let status = tokio::time::timeout(HANG_GUARD, a.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
    // Gone, or a zombie waiting for the host's init to reap it: either way no longer running. A killed process
    // still has to be scheduled to die, so this waits for it (until the hang guard).
    let ended = |state: &str| state.is_empty() || state.contains("State:\tZ");
    let guard = tokio::time::Instant::now() + HANG_GUARD;
    let mut state = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    while !ended(&state) && tokio::time::Instant::now() < guard {
        tokio::time::sleep(Duration::from_millis(20)).await;
        state = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    }
    assert!(ended(&state), "the background process is gone: {state}");
}

/// Landlock, not the mounts, refuses a rename through procfs; the sandbox's writable places still work, and
/// TCP on the sandbox's own lo is not Landlock's to refuse (its network namespace holds nothing else), so a
/// connect to a closed port there is the kernel's ECONNREFUSED with Landlock on or off.
#[tokio::test]
async fn landlock_refuses_what_the_mounts_allow_and_keeps_the_sandbox_usable() {
    let script = "echo renamed > /proc/self/comm && echo comm-written; \
        echo w > /workspace/f && cat /workspace/f; echo t > /tmp/f && cat /tmp/f; \
        echo s > /dev/shm/f && cat /dev/shm/f; head -c 4 /dev/urandom > /dev/null && echo dev-ok; \
        python3 -c 'import socket; socket.socket().connect((\"127.0.0.1\", 9))' 2>&1 | tail -1";
    for landlock in [false, true] {
        let mut a = Agent::start(namespaced_with(landlock));
        a.send(1, Op::Hello).await;
        let enforced = match a.reply().await.body {
            Body::Hello(h) => h.enforced["landlock"].clone(),
            other => panic!("{other:?}"),
        };
        let r = a.shell(2, script, None).await;
        let out = String::from_utf8_lossy(&exited(&r).stdout).into_owned();
        let err = String::from_utf8_lossy(&exited(&r).stderr).into_owned();
        assert!(
            out.contains("w\nt\ns\ndev-ok\n"),
            "landlock {landlock}: {out} {err}"
        );
        if landlock {
            assert_eq!(enforced["status"], "fully enforced", "{enforced}");
            assert!(enforced["abi"].as_i64().unwrap() >= 5, "{enforced}");
            assert!(!out.contains("comm-written"), "{out}");
            assert!(err.contains("Permission denied"), "{err}");
        } else {
            assert_eq!(enforced, json!(false));
            assert!(out.contains("comm-written"), "{out} {err}");
        }
        assert!(
            out.contains("ConnectionRefusedError") && !out.contains("PermissionError"),
            "landlock {landlock}: TCP on the sandbox's lo reaches the kernel: {out}"
        );
    }
}
