//! Starting the agent's process and turning its stdin/stdout into the core's length-prefixed link; or
//! starting a VMM, whose stdout (the guest's console) and stderr are only kept for error messages.

use super::LaunchError;
use bridge_core::link::{Connection, Framing, StreamConfig, stream};
use sandbox_agent::protocol::MAX_FRAME_BYTES;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio_util::sync::CancellationToken;

/// Bytes of output kept for error messages: the newest, where a failure says why.
const OUTPUT_KEEP: usize = 4096;

#[derive(Debug)]
pub struct Launched {
    child: tokio::sync::Mutex<Option<Child>>,
    pid: Option<u32>,
    output: Arc<Mutex<Vec<u8>>>,
    /// Ask the agent to stop (its stream closes) before killing: without a pid namespace the agent's
    /// children only die if the agent kills them.
    graceful: bool,
}

pub fn start(mut command: Command, bin: &Path) -> Result<(Launched, Connection), LaunchError> {
    let graceful = command.as_std().get_args().next().is_none();
    command.stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = spawn(command, bin)?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(LaunchError::Spawn(
            "the agent's stdin/stdout could not be piped".into(),
        ));
    };
    let output = Arc::new(Mutex::new(Vec::new()));
    keep_tail(child.stderr.take(), &output);
    let cfg = StreamConfig {
        framing: Framing::LengthPrefixed,
        max_frame_bytes: MAX_FRAME_BYTES,
    };
    // The link lives as long as the sandbox: it is closed by `destroy`, not by server shutdown.
    let conn = stream::spawn(stdout, stdin, cfg, &CancellationToken::new());
    Ok((Launched::new(child, output, graceful), conn))
}

/// Starts a VMM. Its stdout (the guest's serial console) and stderr are read and only their tail kept,
/// so a chatty guest costs no memory.
pub fn start_vmm(mut command: Command, bin: &Path) -> Result<Launched, LaunchError> {
    command.stdin(Stdio::null()).stdout(Stdio::piped());
    // A bridge killed outright must not leave VMs running until its next start's orphan sweep. The signal
    // follows the spawning thread, which is a runtime worker: those live as long as the bridge.
    bridge_core::link::child::dies_with_this_process(&mut command);
    let mut child = spawn(command, bin)?;
    let output = Arc::new(Mutex::new(Vec::new()));
    keep_tail(child.stdout.take(), &output);
    keep_tail(child.stderr.take(), &output);
    Ok(Launched::new(child, output, false))
}

fn spawn(mut command: Command, bin: &Path) -> Result<Child, LaunchError> {
    // The sandbox (and a VMM) starts in a session of its own, so it has no controlling terminal: a bridge
    // started from a terminal never hands that terminal to anything inside (TIOCSTI on it pushed commands
    // into the user's shell). Its stdin and stdout are pipes (set by the callers) and stderr is a pipe;
    // nothing else crosses the exec, not even a descriptor the bridge's process holds without
    // close-on-exec (the agent, root of its namespace, would keep it).
    // SAFETY: the closure runs in the child between fork and exec and only calls setsid(2) and
    // close_range(2), which are async-signal-safe and take no pointers; CLOSE_RANGE_CLOEXEC only marks this
    // process's descriptors (the fork machinery's own close-on-exec pipe keeps working until the exec); its
    // errors are raw OS codes (no allocation).
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            if libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            ) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| LaunchError::Spawn(format!("{}: {e}", bin.display())))
}

fn keep_tail(
    from: Option<impl tokio::io::AsyncRead + Unpin + Send + 'static>,
    kept: &Arc<Mutex<Vec<u8>>>,
) {
    let Some(mut from) = from else {
        return;
    };
    let kept = Arc::clone(kept);
    tokio::spawn(async move {
        let mut buf = [0u8; 1024];
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0 {
                return;
            }
            let mut k = kept.lock().unwrap_or_else(|p| p.into_inner());
            k.extend_from_slice(&buf[..n]);
            let excess = k.len().saturating_sub(OUTPUT_KEEP);
            k.drain(..excess);
        }
    });
}

impl Launched {
    fn new(child: Child, output: Arc<Mutex<Vec<u8>>>, graceful: bool) -> Self {
        Self {
            pid: child.id(),
            child: tokio::sync::Mutex::new(Some(child)),
            output,
            graceful,
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The tail of what the process wrote (stderr; and a VMM's console).
    pub async fn output_text(&self) -> String {
        // Let the last lines of a dying process arrive.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let k = self.output.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&k).trim().to_string()
    }

    /// True once the process has ended (it is then reaped).
    pub async fn has_exited(&self) -> bool {
        match self.child.lock().await.as_mut() {
            Some(child) => !matches!(child.try_wait(), Ok(None)),
            None => true,
        }
    }

    /// Kills the process and reaps it.
    pub async fn kill(&self) {
        let Some(mut child) = self.child.lock().await.take() else {
            return;
        };
        if self.graceful
            && tokio::time::timeout(Duration::from_secs(2), child.wait())
                .await
                .is_ok()
        {
            return;
        }
        let _ = child.start_kill();
        let _ = child.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_chatty_process_keeps_only_the_newest_bytes() {
        let (mut tx, rx) = tokio::io::duplex(1024);
        let kept = Arc::new(Mutex::new(Vec::new()));
        keep_tail(Some(rx), &kept);
        let said: Vec<u8> = (0..10 * OUTPUT_KEEP).map(|i| (i % 251) as u8).collect();
        tx.write_all(&said).await.expect("written");
        drop(tx);
        for _ in 0..200 {
            if kept
                .lock()
                .expect("lock")
                .ends_with(&said[said.len() - 16..])
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let k = kept.lock().expect("lock");
        assert_eq!(k.len(), OUTPUT_KEEP);
        assert_eq!(&k[..], &said[said.len() - OUTPUT_KEEP..]);
    }
}
