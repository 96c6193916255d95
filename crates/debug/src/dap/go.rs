//! Go on delve (`dlv dap`): Debian's delve 1.20 serves DAP on a TCP listener only (no stdio mode, and
//! `--listen unix:/path` is refused: "address tcp//path: unknown port"), to one client, and builds the program
//! itself (`mode: debug`, the default) with the Go toolchain on PATH. The server lives as long as the session.
//!
//! delve binds `127.0.0.1:0` itself and announces the port on its stdout, so no port is chosen in advance and
//! released for it to bind (another process could take it in between); `--only-same-user` (delve's default)
//! refuses connections from other users. The program delve runs writes to delve's stdout and stderr, not through
//! DAP `output` events: both are read into the session's journal, so `dap_logs` shows what it printed.

use super::adapter::Server;
use super::backend::DapBackend;
use super::ending::Launching;
use super::launch::AdapterKind;
use super::session::{Companion, Link, Session, Shared};
use crate::envelope::ScriptError;
use serde_json::Value;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::process::ChildStdout;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What delve prints once it listens, before the address.
const LISTENING: &str = "DAP server listening at: ";
/// The announcement is one short line; a longer first line is not delve's.
const ANNOUNCE_BYTES: u64 = 4096;

impl DapBackend {
    pub(super) async fn launch_go(
        &self,
        id: String,
        mut command: tokio::process::Command,
        config: Value,
        deadline: Instant,
        launching: &mut Launching,
    ) -> Result<Arc<Session>, ScriptError> {
        let failed = |msg: String| {
            ScriptError::new("E_LAUNCH_FAILED", msg).hint(
                "Check the configuration's program (a main package's directory or .go file; `mode: exec` for a built binary) and that `go build` works there",
            )
        };
        // delve runs `go build` (and writes its __debug_bin) in its own working directory, not the
        // configuration's `cwd`: a module is found only from there.
        // A relative `cwd` is the workspace's, as the launch policy judged it, not the bridge's own.
        if let Some(cwd) = config.get("cwd").and_then(Value::as_str) {
            command.current_dir(self.cfg.workspace.join(cwd));
        }
        super::adapter::dies_with_the_bridge(&mut command);
        command
            .args(["dap", "--listen", "127.0.0.1:0", "--only-same-user"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        // Its own group, so the `go build` it runs ends with it (see `Session::end`).
        let mut server = Server::spawn(command).map_err(|e| {
            ScriptError::new("E_ADAPTER_NOT_FOUND", format!("could not start dlv: {e}"))
                .hint(AdapterKind::Delve.install_hint())
        })?;
        let (Some(stdout), Some(stderr)) = (server.stdout.take(), server.stderr.take()) else {
            super::adapter::kill_server(&mut server).await;
            return Err(failed("dlv's stdout or stderr was not piped".into()));
        };
        let mut stdout = BufReader::new(stdout);
        let addr = match tokio::time::timeout_at(deadline, announced(&mut stdout)).await {
            Ok(Ok(addr)) => addr,
            Ok(Err(why)) => {
                super::adapter::kill_server(&mut server).await;
                return Err(failed(format!("dlv dap did not listen: {why}")));
            }
            Err(_) => {
                super::adapter::kill_server(&mut server).await;
                return Err(failed(
                    "dlv dap did not say where it listens in time".into(),
                ));
            }
        };
        // delve sends no reverse requests; the channel only completes the link.
        let (tx, _children) = mpsc::channel::<Value>(1);
        let session = self
            .open_when_listening(
                id,
                AdapterKind::Delve,
                &config,
                || Link::Tcp {
                    addr: addr.clone(),
                    children: tx.clone(),
                },
                &mut server,
                deadline,
            )
            .await
            .map_err(|why| failed(format!("dlv dap did not answer on {addr}: {why}")))?;
        session.keep(Companion::Process(server));
        launching.opened(&session);
        tokio::spawn(pump(stdout, Arc::clone(&session.shared), "stdout"));
        tokio::spawn(pump(stderr, Arc::clone(&session.shared), "stderr"));
        self.register(Arc::clone(&session));
        self.handshake(&session, config, deadline).await?;
        Ok(session)
    }
}

/// The address in delve's first line, `DAP server listening at: 127.0.0.1:PORT`.
async fn announced(stdout: &mut BufReader<ChildStdout>) -> Result<String, String> {
    let mut line = String::new();
    let n = (&mut *stdout)
        .take(ANNOUNCE_BYTES)
        .read_line(&mut line)
        .await
        .map_err(|e| format!("reading its stdout: {e}"))?;
    if n == 0 {
        return Err("it exited before listening".into());
    }
    let addr = line
        .trim()
        .strip_prefix(LISTENING)
        .ok_or_else(|| format!("its first line is not `{LISTENING}<address>`: {line:?}"))?;
    // Only loopback: the configuration asked for 127.0.0.1, and an announcement of anything else is not one
    // the bridge should connect to.
    match addr.parse::<std::net::SocketAddr>() {
        Ok(a) if a.ip().is_loopback() && a.port() != 0 => Ok(addr.to_owned()),
        _ => Err(format!(
            "it announced {addr:?}, not a loopback address with a port"
        )),
    }
}

/// Copies what the program writes to delve's `stream` into the journal as `category` output, chunk by chunk (a
/// line without its newline yet shows too), never splitting a UTF-8 character; ends when delve does.
async fn pump(mut stream: impl AsyncRead + Unpin, shared: Arc<Shared>, category: &'static str) {
    let mut buf = vec![0u8; 16 << 10];
    // Bytes of a character cut by the end of the last read, at most 3.
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        carry.extend_from_slice(&buf[..n]);
        let keep = incomplete_tail(&carry);
        let whole = carry.len() - keep;
        if whole > 0 {
            shared.output(category, &String::from_utf8_lossy(&carry[..whole]));
            carry.drain(..whole);
        }
    }
    if !carry.is_empty() {
        shared.output(category, &String::from_utf8_lossy(&carry));
    }
}

/// How many bytes at the end of `bytes` begin a UTF-8 character still incomplete (0 when none).
fn incomplete_tail(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => 0,
        // `error_len() == None`: the input ended inside a character, which the next read completes.
        Err(e) if e.error_len().is_none() => bytes.len() - e.valid_up_to(),
        // Invalid bytes are shown lossily; only a cut character at the very end waits.
        Err(_) => {
            let start = bytes.len().saturating_sub(3);
            (start..bytes.len())
                .find(|&i| {
                    std::str::from_utf8(&bytes[i..])
                        .is_err_and(|e| e.valid_up_to() == 0 && e.error_len().is_none())
                })
                .map_or(0, |i| bytes.len() - i)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::incomplete_tail;

    #[test]
    fn a_character_cut_by_a_read_waits_for_its_end() {
        let e_acute = "é".as_bytes();
        assert_eq!(incomplete_tail(b"abc"), 0);
        assert_eq!(incomplete_tail(&[b'a', e_acute[0]]), 1);
        assert_eq!(incomplete_tail(&[0xff, b'a', e_acute[0]]), 1);
        assert_eq!(incomplete_tail(&[b'a', 0xff]), 0);
    }
}
