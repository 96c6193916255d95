//! An adapter process on its stdio, started here rather than through the core's `dial::child` for three reasons
//! of this bridge's own: its stderr is read in fixed chunks into a small ring (a line-by-line reader holds a
//! whole line, and an adapter writing hundreds of MiB without a newline grew the bridge by as much), the tail
//! of that ring explains a launch that failed, and the adapter runs in a process group of its own so the
//! debuggee and anything else it started are killed with it.

use bridge_core::link::stream::{self, StreamConfig};
use bridge_core::link::{Connection, LinkError};
use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

/// Bytes of the adapter's stderr kept (the latest).
pub const STDERR_TAIL: usize = 16 << 10;
/// How long a closed adapter gets to exit by itself before its group is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// The latest [`STDERR_TAIL`] bytes an adapter wrote to stderr.
#[derive(Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<u8>>>);

impl StderrTail {
    fn push(&self, bytes: &[u8]) {
        let mut ring = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let keep = bytes.len().min(STDERR_TAIL);
        ring.extend(&bytes[bytes.len() - keep..]);
        let excess = ring.len().saturating_sub(STDERR_TAIL);
        ring.drain(..excess);
    }

    pub fn text(&self) -> String {
        let ring = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (a, b) = ring.as_slices();
        let mut v = Vec::with_capacity(ring.len());
        v.extend_from_slice(a);
        v.extend_from_slice(b);
        String::from_utf8_lossy(&v).into_owned()
    }
}

/// An adapter process this bridge started: the group it leads, and whether that group has been ended.
#[derive(Clone)]
pub struct AdapterProcess {
    pgid: Option<u32>,
    ended: CancellationToken,
}

impl AdapterProcess {
    /// Resolves once the process has exited and its group was killed after it (see [`spawn`]); at most
    /// [`EXIT_GRACE`] and a kill after its link closed.
    pub async fn ended(&self) {
        self.ended.cancelled().await;
    }

    /// The process group it leads.
    pub fn group(&self) -> Option<u32> {
        self.pgid
    }
}

/// Starts `command` linked over its stdin/stdout. The link closes when the process exits; when the link closes
/// (or `shutdown` fires) the process gets [`EXIT_GRACE`] to exit, then its whole group is killed, and the group
/// is killed again once it has exited, for children it left behind; only then is it [`AdapterProcess::ended`].
pub fn spawn(
    mut command: Command,
    cfg: StreamConfig,
    shutdown: &CancellationToken,
) -> Result<(Connection, StderrTail, AdapterProcess), LinkError> {
    let target = format!("{:?}", command.as_std().get_program());
    dies_with_the_bridge(&mut command);
    let tag = super::reap::tag(&mut command);
    let mut process = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| LinkError::Connect {
            target: target.clone(),
            reason: e.to_string(),
        })?;
    let pgid = process.id();
    super::reap::remember(pgid, tag);
    let (Some(stdin), Some(stdout)) = (process.stdin.take(), process.stdout.take()) else {
        return Err(LinkError::Connect {
            target,
            reason: "its stdin or stdout could not be piped".into(),
        });
    };
    let tail = StderrTail::default();
    if let Some(mut stderr) = process.stderr.take() {
        let tail = tail.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 8192];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                tail.push(&buf[..n]);
            }
        });
    }
    let conn = stream::spawn(stdout, stdin, cfg, shutdown);
    let sender = conn.sender.clone();
    let process_handle = AdapterProcess {
        pgid,
        ended: CancellationToken::new(),
    };
    let ended = process_handle.ended.clone();
    tokio::spawn(async move {
        tokio::select! {
            status = process.wait() => {
                let why = match status {
                    Ok(status) => format!("the adapter exited ({status})"),
                    Err(e) => format!("the adapter could not be waited for: {e}"),
                };
                sender.close(&why);
            }
            () = sender.closed() => {
                if tokio::time::timeout(EXIT_GRACE, process.wait()).await.is_err() {
                    kill_group(pgid);
                    let _ = process.kill().await;
                }
            }
        }
        // Whatever the adapter started (the debuggee, its children, in its group or not) goes with it.
        super::reap::end_group(pgid, true);
        ended.cancel();
    });
    Ok((conn, tail, process_handle))
}

/// A debug server (js-debug's, delve) leading a process group of its own, tagged ([`super::reap`]). Ended by
/// [`kill_server`]; dropped without it (a launch cut short by the caller's cancellation), its group and what it
/// started are ended and its tag forgotten then, while it is not yet reaped.
pub struct Server {
    child: tokio::process::Child,
    /// Its pid, kept: `Child::id` forgets it once the child is reaped (by `try_wait` too), and what it started
    /// is still to be ended then.
    pid: Option<u32>,
    /// [`kill_server`] ended it and its group.
    ended: bool,
}

impl Server {
    /// Starts `command` (with `process_group(0)`) tagged.
    pub(super) fn spawn(mut command: Command) -> std::io::Result<Self> {
        let tag = super::reap::tag(&mut command);
        let child = command.process_group(0).kill_on_drop(true).spawn()?;
        let pid = child.id();
        super::reap::remember(pid, tag);
        Ok(Self {
            child,
            pid,
            ended: false,
        })
    }
}

impl Server {
    /// The pid it started with (the group it leads), reaped or not.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }
}

impl std::ops::Deref for Server {
    type Target = tokio::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.child
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.child
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if !self.ended {
            super::reap::end_group(self.pid, true);
        }
    }
}

/// Ends a debug server: its group first, so what it started (a program, delve's `go build`) goes with it rather
/// than outliving it, then the server itself. The group is signalled while the server is not yet reaped, so its
/// id cannot belong to anyone else; the pass after the reap reaches what is left of the group (which keeps the
/// id in use while it has members) and what carries the tag.
pub(super) async fn kill_server(server: &mut Server) {
    let pid = server.pid;
    kill_group(pid);
    let _ = server.kill().await;
    super::reap::end_group(pid, true);
    server.ended = true;
}

/// Has the process `command` starts killed when the bridge's process dies, even by SIGKILL: the debug servers
/// (js-debug's, delve), which listen on for good once their client is gone, and the adapters. Only that process
/// gets it, not what it starts in its group. The bridge starts them from async code on a runtime worker, as
/// [`bridge_core::link::child::dies_with_this_process`] requires.
pub(super) fn dies_with_the_bridge(command: &mut Command) {
    bridge_core::link::child::dies_with_this_process(command);
}

/// SIGKILL to the process group `pgid` leads (a process started with `process_group(0)`), if any, and to
/// what its leader started outside it ([`super::reap`]).
pub(super) fn kill_group(pgid: Option<u32>) {
    super::reap::end_group(pgid, false);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server started by `sh -c "setsid sh -c 'echo $$ > FILE; exec sleep 300' & {then}"`, and the pid of
    /// that `setsid` child, which left the server's group and session.
    #[allow(clippy::unwrap_used)]
    async fn server_with_a_setsid_child(
        name: &str,
        then: &str,
    ) -> (Server, i32, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("server-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("child");
        let mut command = Command::new("sh");
        command.args([
            "-c",
            &format!(
                "setsid sh -c 'echo $$ > {}; exec sleep 300' & {then}",
                out.display()
            ),
        ]);
        let server = Server::spawn(command).unwrap();
        let started = std::time::Instant::now();
        loop {
            if let Some(pid) = std::fs::read_to_string(&out)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                return (server, pid, dir);
            }
            assert!(started.elapsed().as_secs() < 60, "the child never started");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Drops `server` (led by `leader`): its tag is forgotten and its `setsid` child ends.
    #[allow(clippy::unwrap_used)]
    async fn dropped_ends_all(server: Server, leader: u32, child: i32, dir: &std::path::Path) {
        drop(server);
        assert!(
            !super::super::reap::remembered(leader),
            "the tag was forgotten"
        );
        wait_dead(child).await;
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Waits until `pid` is dead, or a zombie its (reaped) parent left to init.
    #[allow(clippy::unwrap_used)]
    async fn wait_dead(pid: i32) {
        let ended = std::time::Instant::now();
        while std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| !s[s.rfind(')').unwrap() + 1..].trim_start().starts_with('Z'))
        {
            assert!(
                ended.elapsed().as_secs() < 60,
                "the setsid child outlived its server"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// A server that exited by itself is reaped by the `try_wait` of `open_when_listening`, after which
    /// `Child::id` is `None`: what it started must still be ended, and its tag forgotten (a review's finding).
    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn a_server_reaped_by_try_wait_still_takes_what_it_started_with_it() {
        let (mut server, child, dir) = server_with_a_setsid_child("reaped", "exit 0").await;
        let leader = server.pid().unwrap();
        let started = std::time::Instant::now();
        while !matches!(server.try_wait(), Ok(Some(_))) {
            assert!(started.elapsed().as_secs() < 60, "the leader never exited");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(server.id().is_none(), "reaped");
        dropped_ends_all(server, leader, child, &dir).await;
    }

    /// A launch cut short (its future dropped by a cancellation) drops its server before `kill_server`: what
    /// the server started must not outlive it, nor its tag stay behind.
    #[tokio::test]
    #[allow(clippy::unwrap_used)]
    async fn a_server_dropped_unended_takes_its_group_and_its_tag_with_it() {
        let (server, child, dir) = server_with_a_setsid_child("drop", "sleep 300").await;
        let leader = server.id().unwrap();
        assert!(super::super::reap::remembered(leader));
        dropped_ends_all(server, leader, child, &dir).await;
    }

    #[test]
    fn the_tail_keeps_the_latest_bytes_only() {
        let t = StderrTail::default();
        t.push(&vec![b'a'; STDERR_TAIL * 3]);
        t.push(b"end");
        let text = t.text();
        assert_eq!(text.len(), STDERR_TAIL);
        assert!(text.ends_with("aend"));
    }
}
