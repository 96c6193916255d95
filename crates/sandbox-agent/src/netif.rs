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

/// Starts the user-mode network stack for the sandbox whose namespaces `target` (the launcher's child, which
/// unshared them) holds, and waits until the stack has configured the interface inside: `pasta` in the
/// foreground, a child of the launcher that dies with it (parent-death signal; the launcher also kills it
/// when the sandbox ends). Readiness is the pid file, a pipe here: pasta writes it after configuring the
/// namespace and before serving. Its stdout is /dev/null (the launcher's stdout is the agent's stream); its
/// stderr is the launcher's, whose tail the bridge keeps for errors.
pub fn start_stack(net: &crate::launch::Network, target: u32) -> io::Result<std::process::Child> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let Some(pasta) = &net.stack else {
        return Err(io::Error::other("no user-mode network stack was given"));
    };
    let (ready_r, ready_w) = nix::unistd::pipe().map_err(io::Error::from)?;
    // The write end must cross the exec (pasta opens it by its /proc path); only pasta gets it.
    let fd = ready_w.as_raw_fd();
    nix::fcntl::fcntl(
        &ready_w,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )
    .map_err(io::Error::from)?;
    let mut cmd = Command::new(pasta);
    cmd.args(pasta_args(net, fd, target))
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let launcher = nix::unistd::getpid();
    // SAFETY: runs in the forked child before exec; prctl(2) and getppid(2) are async-signal-safe, take no
    // pointers into the parent's memory, and the errors are raw OS codes.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(io::Error::from)?;
            if nix::unistd::getppid() != launcher {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    drop(ready_w);
    // pasta writes "<pid>\n" once ready; it keeps the inherited descriptor open, so the line (or EOF,
    // when it died during set-up) is the signal.
    let mut said = String::new();
    let mut ready = std::fs::File::from(ready_r);
    let mut byte = [0u8; 1];
    while let Ok(1) = ready.read(&mut byte) {
        if byte[0] == b'\n' || said.len() > 16 {
            break;
        }
        said.push(char::from(byte[0]));
    }
    if said.trim().parse::<u32>().is_err() {
        let _ = child.kill();
        let status = child.wait()?;
        return Err(io::Error::other(format!(
            "{} failed to set up the sandbox's network ({status}); its messages are above",
            pasta.display()
        )));
    }
    Ok(child)
}

/// pasta's options (see docs/protocols/egress.md): attach to `target`'s user and network namespaces,
/// configure the interface there (address and routes copied from the host's default-route interface),
/// forward DNS sent to the resolver address to the host's resolver, and forward no port either way (`-t/-u
/// none`: nothing reaches in; `-T/-U none`: the sandbox's loopback is not bridged to the host's). The
/// gateway address is not mapped to the host (`--no-map-gw`), so the host's loopback is unreachable.
/// `--runas 0` (as root): pasta otherwise drops to `nobody` before joining the namespaces, which a
/// root-owned user namespace refuses; it then confines itself (its own namespaces, an empty root, seccomp).
pub fn pasta_args(net: &crate::launch::Network, ready_fd: i32, target: u32) -> Vec<String> {
    let mut args: Vec<String> = [
        "--foreground",
        "--quiet",
        "--config-net",
        "--no-map-gw",
        "--tcp-ports",
        "none",
        "--udp-ports",
        "none",
        "--tcp-ns",
        "none",
        "--udp-ns",
        "none",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    // Unprivileged, pasta keeps the caller's uid, which owns the sandbox's user namespace.
    if nix::unistd::geteuid().is_root() {
        args.extend(["--runas".into(), "0".into()]);
    }
    if let Some(resolver) = &net.resolver {
        args.extend(["--dns-forward".into(), resolver.clone()]);
    }
    args.extend([
        "--pid".into(),
        format!("/proc/self/fd/{ready_fd}"),
        target.to_string(),
    ]);
    args
}

/// Loads the sandbox's packet filter into its network namespace (this process holds CAP_NET_ADMIN there,
/// programs never do: they run as uid 1000 and the seccomp filter refuses netfilter's netlink family). Run
/// by PID 1 before the root is replaced, while the host's `nft` is in sight.
pub fn load_rules(net: &crate::launch::Network) -> io::Result<()> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let Some(nft) = &net.nft else {
        return Err(io::Error::other("no nft binary was given"));
    };
    let mut child = Command::new(nft)
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(net.ruleset.as_bytes())?;
    }
    let status = child.wait()?;
    if !status.success() {
        return Err(io::Error::other(format!(
            "{} -f - refused the sandbox's ruleset ({status})",
            nft.display()
        )));
    }
    Ok(())
}
