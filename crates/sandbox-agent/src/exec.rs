//! Running programs: code and commands go through a file, never argv; output is read as it comes, kept
//! head-and-tail, optionally streamed; the timeout is enforced here by signalling the program's whole tree
//! (`tree`: its own cgroup, or its descendants; SIGTERM, then SIGKILL after the grace).

use crate::agent::{Agent, Out};
use crate::procs::{Exit, Proc};
use crate::protocol::{
    Body, ErrorKind, ExecSpec, MAX_CODE_BYTES, MAX_OUTPUT_CEILING, Program, StreamName, interpreter,
};
use nix::fcntl::OFlag;
use nix::sys::signal::Signal;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

/// How long output may still arrive after the process ended (a backgrounded grandchild can hold the pipes
/// open forever; it does not hold up the answer).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(250);
const READ_CHUNK: usize = 64 * 1024;

pub async fn run(agent: Arc<Agent>, id: u64, spec: ExecSpec, out: Out) {
    let body = match start(&agent, id, &spec, &out).await {
        Ok(Some(body)) | Err(body) => body,
        Ok(None) => return,
    };
    out.send(id, body).await;
}

/// `Ok(None)` when the final reply was already sent (background start).
async fn start(
    agent: &Arc<Agent>,
    id: u64,
    spec: &ExecSpec,
    out: &Out,
) -> Result<Option<Body>, Body> {
    if spec.max_output == 0 || spec.max_output > MAX_OUTPUT_CEILING {
        return Err(Body::error(
            ErrorKind::Invalid,
            format!("max_output must be 1..={MAX_OUTPUT_CEILING} bytes"),
        ));
    }
    let cwd = spec
        .cwd
        .as_deref()
        .map(|c| agent.resolve(c))
        .unwrap_or_else(|| agent.config.workspace.clone());
    // Opened here without following a magic link, and entered by descriptor in the child: `current_dir` would
    // resolve the path in the child, which still holds PID 1's host cgroup descriptor until its exec, so a
    // program's symlink to `/proc/self/fd/N/..` would start the next program in the host's `/` (paths.rs).
    let cwd_dir =
        crate::paths::open(&cwd, OFlag::O_RDONLY | OFlag::O_DIRECTORY, 0).map_err(|e| {
            // A refused or missing directory is the caller's to change, like a file's path.
            let kind = match crate::files::error_kind(&e) {
                ErrorKind::Io => ErrorKind::Spawn,
                kind => kind,
            };
            Body::error(
                kind,
                format!("cannot use {} as the working directory: {e}", cwd.display()),
            )
        })?;
    let (argv, script) = program_argv(agent, id, &spec.program)?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .env(
            "PATH",
            "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
        )
        .env("HOME", &agent.config.workspace)
        .env("LANG", "C.UTF-8")
        .env("TMPDIR", "/tmp")
        // Python's output then streams as it is printed instead of arriving when a pipe's buffer fills or
        // the program ends; a caller's own value (even empty) replaces it.
        .env("PYTHONUNBUFFERED", "1")
        .envs(&spec.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some((uid, gid)) = agent.config.user {
        cmd.uid(uid).gid(gid);
    }
    // SAFETY: runs in the child between fork and exec; fchdir is one async-signal-safe system call on a
    // descriptor the closure owns (the parent's copy is closed when `cmd` is dropped after the spawn).
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || nix::unistd::fchdir(&cwd_dir).map_err(std::io::Error::from));
    }
    let spawned = agent.procs.spawn(
        id,
        cmd,
        &agent.config.limits,
        spec.max_output,
        spec.background,
    );
    let (proc, mut child) = match spawned {
        Ok(p) => p,
        Err(e) => {
            remove(script);
            return Err(Body::error(e.kind, e.message));
        }
    };
    let stdin = child
        .stdin
        .take()
        .and_then(|s| pipe::Sender::from_owned_fd(s.into()).ok());
    let stdout = child
        .stdout
        .take()
        .and_then(|s| pipe::Receiver::from_owned_fd(s.into()).ok());
    let stderr = child
        .stderr
        .take()
        .and_then(|s| pipe::Receiver::from_owned_fd(s.into()).ok());
    // The reaper owns waiting; the `Child` handle is only dropped.
    drop(child);
    if let Some(stdin) = stdin {
        let initial = spec.stdin.clone();
        let close = spec.close_stdin;
        let slot = agent.stdin_slot(id);
        tokio::spawn(async move {
            let mut stdin = stdin;
            if !initial.is_empty() && stdin.write_all(&initial).await.is_err() {
                return;
            }
            if !close {
                *slot.lock().await = Some(stdin);
            }
        });
    }
    let live = (spec.stream && !spec.background).then(|| out.clone());
    let readers = [
        stdout.map(|r| {
            tokio::spawn(read_into(
                Arc::clone(&proc),
                r,
                StreamName::Stdout,
                id,
                live.clone(),
            ))
        }),
        stderr.map(|r| {
            tokio::spawn(read_into(
                Arc::clone(&proc),
                r,
                StreamName::Stderr,
                id,
                live.clone(),
            ))
        }),
    ];
    let finish = {
        let agent = Arc::clone(agent);
        let proc = Arc::clone(&proc);
        let timeout = spec.timeout_ms.map(Duration::from_millis);
        let grace = Duration::from_millis(spec.grace_ms);
        async move {
            supervise(&proc, timeout, grace).await;
            for r in readers.into_iter().flatten() {
                let abort = r.abort_handle();
                if tokio::time::timeout(DRAIN_AFTER_EXIT, r).await.is_err() {
                    abort.abort();
                }
            }
            agent.drop_stdin(id).await;
            remove(script);
        }
    };
    if spec.background {
        tokio::spawn(finish);
        out.send(id, Body::Started { pid: proc.pid }).await;
        return Ok(None);
    }
    finish.await;
    let report = proc.report(false);
    agent.procs.forget(id);
    Ok(Some(Body::Exited(report)))
}

/// Waits for the process, enforcing the timeout on its whole group.
async fn supervise(proc: &Proc, timeout: Option<Duration>, grace: Duration) -> Exit {
    let Some(timeout) = timeout else {
        return proc.wait().await;
    };
    if let Ok(exit) = tokio::time::timeout(timeout, proc.wait()).await {
        return exit;
    }
    proc.state().timed_out = true;
    proc.signal(Signal::SIGTERM);
    if let Ok(exit) = tokio::time::timeout(grace, proc.wait()).await {
        // The leader obeyed; anything it left in its group did not get a choice.
        proc.signal(Signal::SIGKILL);
        return exit;
    }
    proc.signal(Signal::SIGKILL);
    proc.wait().await
}

async fn read_into(
    proc: Arc<Proc>,
    mut pipe: pipe::Receiver,
    which: StreamName,
    id: u64,
    live: Option<Out>,
) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        {
            let mut st = proc.state();
            match which {
                StreamName::Stdout => st.out.push(&buf[..n]),
                StreamName::Stderr => st.err.push(&buf[..n]),
            }
        }
        if let Some(out) = &live {
            out.send(
                id,
                Body::Chunk {
                    stream: which,
                    data: buf[..n].to_vec(),
                },
            )
            .await;
        }
    }
}

/// The argv to run, and the file holding code or a command (removed when the process ends).
fn program_argv(
    agent: &Agent,
    id: u64,
    program: &Program,
) -> Result<(Vec<String>, Option<PathBuf>), Body> {
    let (interp, suffix, text) = match program {
        Program::Argv { argv } => {
            if argv.is_empty() || argv[0].is_empty() {
                return Err(Body::error(ErrorKind::Invalid, "argv must not be empty"));
            }
            return Ok((argv.clone(), None));
        }
        Program::Shell { command } => ("sh", "sh", command),
        Program::Code { language, code } => {
            let Some((interp, suffix)) = interpreter(language) else {
                return Err(Body::error(
                    ErrorKind::Invalid,
                    format!(
                        "unknown language {language:?}; use python, javascript (node), bash or sh"
                    ),
                ));
            };
            (interp, suffix, code)
        }
    };
    if text.len() > MAX_CODE_BYTES {
        return Err(Body::error(
            ErrorKind::Limit,
            format!(
                "code is {} bytes; the limit is {MAX_CODE_BYTES} bytes",
                text.len()
            ),
        ));
    }
    let path = agent.config.scratch.join(format!("exec-{id}.{suffix}"));
    write_script(&path, text.as_bytes())
        .map_err(|e| Body::error(ErrorKind::Io, format!("could not write the code file: {e}")))?;
    Ok((
        vec![interp.to_string(), path.to_string_lossy().into_owned()],
        Some(path),
    ))
}

/// A new file, never anything already at `path`: PID 1 writes it, and PID 1 holds a descriptor of the host's
/// cgroup directory, so a symlink planted at the name would send the write to the host (no way to plant one was
/// found: the sandbox user cannot write the scratch directory; `O_EXCL` makes it so whatever changes).
fn write_script(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(path)?;
    f.write_all(bytes)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o644))
}

fn remove(script: Option<PathBuf>) {
    if let Some(path) = script {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    #[test]
    fn a_script_is_never_written_through_what_is_already_at_its_name() {
        let dir = std::env::temp_dir().join(format!("agent-script-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("host-file");
        std::fs::write(&target, b"host").unwrap();
        let planted = dir.join("exec-1.py");
        std::os::unix::fs::symlink(&target, &planted).unwrap();
        assert!(super::write_script(&planted, b"print(1)").is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"host");
        let fresh = dir.join("exec-2.py");
        super::write_script(&fresh, b"print(2)").unwrap();
        assert_eq!(std::fs::read(&fresh).unwrap(), b"print(2)");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
