//! Starting the agent's process and turning its stdin/stdout into the core's length-prefixed link.

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

/// Bytes of the agent's stderr kept for error messages.
const STDERR_KEEP: usize = 4096;

#[derive(Debug)]
pub struct Launched {
    child: tokio::sync::Mutex<Option<Child>>,
    pid: Option<u32>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Ask the agent to stop (its stream closes) before killing: without a pid namespace the agent's
    /// children only die if the agent kills them.
    graceful: bool,
}

pub fn start(mut command: Command, bin: &Path) -> Result<(Launched, Connection), LaunchError> {
    let graceful = command.as_std().get_args().next().is_none();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| LaunchError::Spawn(format!("{}: {e}", bin.display())))?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(LaunchError::Spawn(
            "the agent's stdin/stdout could not be piped".into(),
        ));
    };
    let kept = Arc::new(Mutex::new(Vec::new()));
    if let Some(mut err) = child.stderr.take() {
        let kept = Arc::clone(&kept);
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    return;
                }
                let mut k = kept.lock().unwrap_or_else(|p| p.into_inner());
                let room = STDERR_KEEP.saturating_sub(k.len());
                k.extend_from_slice(&buf[..n.min(room)]);
            }
        });
    }
    let cfg = StreamConfig {
        framing: Framing::LengthPrefixed,
        max_frame_bytes: MAX_FRAME_BYTES,
    };
    // The link lives as long as the sandbox: it is closed by `destroy`, not by server shutdown.
    let conn = stream::spawn(stdout, stdin, cfg, &CancellationToken::new());
    Ok((
        Launched {
            pid: child.id(),
            child: tokio::sync::Mutex::new(Some(child)),
            stderr: kept,
            graceful,
        },
        conn,
    ))
}

impl Launched {
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    pub async fn stderr_text(&self) -> String {
        // Let the last lines of a dying agent arrive.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let k = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&k).trim().to_string()
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
