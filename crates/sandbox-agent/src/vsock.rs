//! The agent's end of Firecracker's vsock: listen on AF_VSOCK (any CID, the configured port), take the
//! host's one connection and serve on it. Firecracker forwards a host `CONNECT <port>\n` on its Unix socket
//! to this listener (docs/protocols/sandbox.md §4); until something listens it closes the host's attempt,
//! so the host retries while the guest boots.

use crate::launch::{SetupError, step};
use nix::sys::socket::{
    AddressFamily, Backlog, SockFlag, SockType, VsockAddr, accept4, bind, listen, socket,
};
use std::fs::File;
use std::os::fd::{FromRawFd, OwnedFd};

/// `VMADDR_CID_ANY`: accept connections addressed to whatever CID the guest was given.
const CID_ANY: u32 = u32::MAX;

/// Blocks until the host connects to `port`; the connection as a file (read and write).
pub fn accept_one(port: u32) -> Result<File, SetupError> {
    let listener = step(
        "vsock socket",
        socket(
            AddressFamily::Vsock,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        ),
    )?;
    step(
        format!("vsock bind to port {port}"),
        bind(
            std::os::fd::AsRawFd::as_raw_fd(&listener),
            &VsockAddr::new(CID_ANY, port),
        ),
    )?;
    step(
        "vsock listen",
        listen(&listener, Backlog::new(1).unwrap_or(Backlog::MAXCONN)),
    )?;
    let fd = step(
        "vsock accept",
        accept4(
            std::os::fd::AsRawFd::as_raw_fd(&listener),
            SockFlag::SOCK_CLOEXEC,
        ),
    )?;
    // SAFETY: `accept` just returned `fd` as a new descriptor that nothing else owns; the OwnedFd takes it.
    #[allow(unsafe_code)]
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // The listener is closed here: one host connection per guest, like the virtio-serial port.
    Ok(File::from(owned))
}
