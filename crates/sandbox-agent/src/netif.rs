//! Bringing `lo` up in a fresh network namespace, so `localhost` works inside while nothing else exists.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

pub fn loopback_up() -> io::Result<()> {
    // SAFETY: socket(2) with constant arguments; the returned fd is owned by `sock` at once.
    #[allow(unsafe_code)]
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh, valid fd nobody else owns.
    #[allow(unsafe_code)]
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    #[allow(unsafe_code)]
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write only `req`, which lives across both calls and
    // has the interface name NUL-terminated; the flags union member is the one these requests use.
    #[allow(unsafe_code)]
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) < 0 {
            return Err(io::Error::last_os_error());
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
