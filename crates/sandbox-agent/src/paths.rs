//! Opening the paths the host names (a file to read or write, a directory to list or to run a program in)
//! without following a magic link on the way.
//!
//! PID 1 holds a descriptor of the host's cgroup directory (tree.rs), so `/proc/1/fd/N/../../..`, and
//! `/proc/self/fd/N/..` in a child before its exec, are the host's `/`. A host naming such a path, or a
//! program planting a symlink to it (or swapping one in between a check and the use), would make the agent
//! read and write host files. `openat2` with `RESOLVE_NO_MAGICLINKS` refuses every `/proc/<pid>/{fd,cwd,root,
//! exe}` link in the resolution itself, so there is no window between checking a path and using it. What is
//! opened must also not be on procfs, sysfs or cgroupfs: read or written by PID 1 it would be with the
//! agent's rights (its own memory map, its environment), not the sandbox user's.

use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::{Mode, SFlag, fstatat, mkdirat};
use nix::sys::statfs::{
    CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, PROC_SUPER_MAGIC, SYSFS_MAGIC, fstatfs,
};
use nix::unistd::{Gid, Uid, fchownat};
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

/// Opens `path` (absolute, or relative to the agent's working directory) with `flags`, creating it with
/// `mode` when `flags` say so; symlinks are followed, magic links never.
pub fn open(path: &Path, flags: OFlag, mode: u32) -> io::Result<OwnedFd> {
    open_at(
        AT_FDCWD,
        path.as_os_str(),
        flags,
        mode,
        ResolveFlag::RESOLVE_NO_MAGICLINKS,
    )
}

/// Opens the entry `name` of the directory `dir` without following any link: a directory being walked
/// that a program replaced with a symlink meanwhile is not entered.
pub fn open_entry(dir: impl AsFd, name: &OsStr, flags: OFlag) -> io::Result<OwnedFd> {
    open_at(dir, name, flags, 0, ResolveFlag::RESOLVE_NO_SYMLINKS)
}

fn open_at(
    dir: impl AsFd,
    path: &OsStr,
    flags: OFlag,
    mode: u32,
    resolve: ResolveFlag,
) -> io::Result<OwnedFd> {
    // openat2 refuses O_PATH with any other flag but these few.
    let extra = match flags.contains(OFlag::O_PATH) {
        true => OFlag::O_CLOEXEC,
        false => OFlag::O_CLOEXEC | OFlag::O_NOCTTY,
    };
    let how = OpenHow::new()
        .flags(flags | extra)
        .mode(Mode::from_bits_truncate(mode))
        .resolve(resolve);
    let fd = openat2(dir, path, how).map_err(refused)?;
    not_a_kernel_filesystem(&fd)?;
    Ok(fd)
}

pub(crate) fn refused(e: Errno) -> io::Error {
    match e {
        Errno::ELOOP => io::Error::new(
            io::ErrorKind::PermissionDenied,
            "the path goes through a /proc link (/proc/<pid>/fd/<n>, cwd, root or exe), which the agent never \
             follows, or has too many symbolic links",
        ),
        Errno::ENOSYS => io::Error::new(
            io::ErrorKind::Unsupported,
            "this kernel has no openat2 (Linux 5.6 or later), which the agent needs to open paths safely",
        ),
        e => io::Error::from(e),
    }
}

fn not_a_kernel_filesystem(fd: &OwnedFd) -> io::Result<()> {
    let kind = fstatfs(fd).map_err(io::Error::from)?.filesystem_type();
    if [
        PROC_SUPER_MAGIC,
        SYSFS_MAGIC,
        CGROUP_SUPER_MAGIC,
        CGROUP2_SUPER_MAGIC,
    ]
    .contains(&kind)
    {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "it is on /proc, /sys or a cgroup filesystem, which the agent does not open for the host (it would \
             with its own rights); run a program such as `cat` to read it as the sandbox's user",
        ));
    }
    Ok(())
}

/// Creates `dir` and the directories above it that are missing, each owned by `owner`, each step opened
/// from the one above without following a magic link.
pub fn create_dirs(dir: &Path, owner: Option<(u32, u32)>) -> io::Result<()> {
    let search = OFlag::O_PATH | OFlag::O_DIRECTORY;
    let mut at = open(
        Path::new(if dir.is_absolute() { "/" } else { "." }),
        search,
        0,
    )?;
    for part in dir.components() {
        let name = match part {
            Component::Normal(name) => name,
            Component::ParentDir => OsStr::new(".."),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => continue,
        };
        let step = |at: &OwnedFd| open_at(at, name, search, 0, ResolveFlag::RESOLVE_NO_MAGICLINKS);
        at = match step(&at) {
            Ok(next) => next,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match mkdirat(&at, name, Mode::from_bits_truncate(0o755)) {
                    Ok(()) => {
                        if let Some((uid, gid)) = owner {
                            let _ = fchownat(
                                &at,
                                name,
                                Some(Uid::from_raw(uid)),
                                Some(Gid::from_raw(gid)),
                                AtFlags::AT_SYMLINK_NOFOLLOW,
                            );
                        }
                    }
                    Err(Errno::EEXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                step(&at)?
            }
            Err(e) => return Err(e),
        };
    }
    Ok(())
}

/// What `name` in `dir` is, the link itself when it is one: (is a directory, size).
pub fn entry_kind(dir: impl AsFd, name: &OsStr) -> io::Result<(bool, u64)> {
    let st = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)?;
    let is_dir = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR;
    Ok((is_dir, u64::try_from(st.st_size).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("agent-paths-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A descriptor of a directory outside, as PID 1 holds the host's cgroup directory: reachable through
    /// `/proc/self/fd/N`, by a path named directly or by a symlink planted to it, and refused both ways.
    #[test]
    fn a_path_through_a_descriptor_link_is_refused() {
        let dir = tempdir("magic");
        let outside = tempdir("magic-outside");
        std::fs::write(outside.join("secret"), "host").unwrap();
        let held = std::fs::File::open(&outside).unwrap();
        let through = format!(
            "/proc/self/fd/{}/secret",
            std::os::fd::AsRawFd::as_raw_fd(&held)
        );
        assert_eq!(std::fs::read_to_string(&through).unwrap(), "host");
        let e = open(Path::new(&through), OFlag::O_RDONLY, 0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        std::os::unix::fs::symlink(&through, dir.join("planted")).unwrap();
        let e = open(&dir.join("planted"), OFlag::O_RDONLY, 0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        std::os::unix::fs::symlink(
            format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&held)),
            dir.join("planted-dir"),
        )
        .unwrap();
        let e = create_dirs(&dir.join("planted-dir/a/b"), None).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(!outside.join("a").exists());
        // An ordinary symlink inside is followed as before.
        std::fs::write(dir.join("real"), "inside").unwrap();
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
        assert!(open(&dir.join("link"), OFlag::O_RDONLY, 0).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&outside);
    }

    #[test]
    fn proc_and_sys_are_not_opened() {
        for path in ["/proc/self/environ", "/proc/self/maps", "/sys/kernel"] {
            let e = open(Path::new(path), OFlag::O_RDONLY, 0).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{path}: {e}");
            assert!(e.to_string().contains("/proc, /sys"), "{e}");
        }
    }

    #[test]
    fn missing_directories_are_created() {
        let dir = tempdir("mkdirs");
        create_dirs(&dir.join("a/b/c"), None).unwrap();
        assert!(dir.join("a/b/c").is_dir());
        create_dirs(&dir.join("a/b/c"), None).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
