//! Landlock for sandboxed programs: what a program may read and write, enforced by the kernel whatever
//! the mounts allow (procfs, a tmpfs `/dev`, anything a later mount adds); and [`detach`], which leaves a
//! program no terminal and no descriptor it was not meant to have.
//!
//! TCP is not restricted here: the sandbox has its own network namespace, holding only `lo` under the
//! `none` policy (the only peers are in the same sandbox; the host's loopback is another namespace's and
//! unreachable, `attacks.rs` checks it) and a user-mode stack's interface filtered by nft under `egress`
//! (`network.rs` in the bridge). Landlock's TCP rules match ports, not namespaces, so denying bind and
//! connect only broke a server and its client inside one sandbox.
//!
//! The ruleset is built in the agent before the fork (building opens paths and allocates) and only
//! `landlock_restrict_self` runs between fork and exec. The rules describe the namespace sandbox's layout
//! (`launch.rs`); a path missing from it is skipped.

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, LandlockStatus, PathBeneath, PathFd,
    RestrictionStatus, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError,
    RulesetStatus,
};
use serde_json::{Value, json};

/// The newest ABI whose rights these rules use: V5 handles device ioctls.
/// Older kernels enforce what they can (best effort) and the status says so.
const TARGET: ABI = ABI::V5;

/// Read and execute: the read-only system, procfs and the agent's code files.
const READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/proc",
    "/dev",
    "/run/agent",
];
/// Read and write: the sandbox's tmpfs mounts and the device nodes ordinary programs open for writing.
const WRITE: &[&str] = &[
    "/workspace",
    "/tmp",
    "/dev/shm",
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    // The sandbox's own devpts instance (a program's own ptys; /dev/ptmx links into it).
    "/dev/pts",
];

/// Builds the ruleset one program gets: every filesystem right is handled (so denied unless a rule grants
/// it); `/` may only be listed, so `ls /` works without reading anything new.
pub fn ruleset() -> Result<RulesetCreated, RulesetError> {
    let all = AccessFs::from_all(TARGET);
    let mut created = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .create()?;
    created = allow(created, "/", AccessFs::ReadDir.into())?;
    for path in READ {
        created = allow(created, path, AccessFs::from_read(TARGET))?;
    }
    for path in WRITE {
        created = allow(created, path, all)?;
    }
    Ok(created)
}

fn allow(
    created: RulesetCreated,
    path: &str,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, RulesetError> {
    let Ok(fd) = PathFd::new(path) else {
        return Ok(created);
    };
    // A device node or file takes only the rights a file has; directory rights on it are an error.
    let access = if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        access
    } else {
        access & AccessFs::from_file(TARGET)
    };
    created.add_rule(PathBeneath::new(fd, access))
}

/// Between fork and exec: applies `ruleset` to this process. No allocation, no lock.
pub fn restrict(ruleset: RulesetCreated) -> std::io::Result<()> {
    match ruleset.restrict_self() {
        Ok(_) => Ok(()),
        // The crate's error holds the errno it saw; reading it again allocates nothing.
        Err(_) => Err(std::io::Error::last_os_error()),
    }
}

/// Between fork and exec: a new session (so no controlling terminal: even a terminal fd that reached the
/// program cannot become its terminal, and /dev/tty names nothing), and every descriptor above stderr
/// marked close-on-exec (only stdin, stdout and stderr cross the exec; the fork machinery's own
/// close-on-exec pipe keeps working). Async-signal-safe: two system calls, no allocation.
pub fn detach() -> std::io::Result<()> {
    // SAFETY: setsid(2) and close_range(2) take no pointers; close_range with CLOSE_RANGE_CLOEXEC only
    // sets flags on descriptors of this (forked, about-to-exec) process.
    #[allow(unsafe_code)]
    let rc = unsafe {
        if libc::setsid() < 0 {
            -1
        } else {
            libc::syscall(
                libc::SYS_close_range,
                3 as libc::c_uint,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            )
        }
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// What a program really gets, for `enforced`: restricts a short-lived thread of the agent (Landlock and
/// no_new_privs bind only the calling thread) with the same ruleset and reports the kernel's answer.
pub fn probe() -> Value {
    let outcome = std::thread::spawn(|| ruleset().and_then(|r| r.restrict_self())).join();
    match outcome {
        Ok(Ok(status)) => describe(&status),
        Ok(Err(e)) => not_enforced(&e.to_string()),
        Err(_) => not_enforced("the probe thread panicked"),
    }
}

fn describe(status: &RestrictionStatus) -> Value {
    let abi = match status.landlock {
        LandlockStatus::Available {
            effective_abi,
            kernel_abi,
        } => kernel_abi.unwrap_or(effective_abi as i32),
        LandlockStatus::NotEnabled => return not_enforced("Landlock is disabled in this kernel"),
        LandlockStatus::NotImplemented => return not_enforced("this kernel has no Landlock"),
    };
    let text = match status.ruleset {
        RulesetStatus::FullyEnforced => "fully enforced",
        RulesetStatus::PartiallyEnforced => "partially enforced",
        RulesetStatus::NotEnforced => "not enforced",
    };
    json!({"abi": abi, "status": text})
}

fn not_enforced(reason: &str) -> Value {
    json!({"status": "not enforced", "reason": reason})
}
