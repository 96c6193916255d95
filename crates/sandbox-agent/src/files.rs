//! Files as bytes: read a range, write at an offset / append / replace with a mode, list to a depth. The
//! blocking calls run on tokio's blocking pool so a slow disk never stalls the stream. Every path is opened
//! through `paths` (no magic link followed), and only regular files are read or written: a FIFO a program
//! made would hold a blocking thread for good.

use crate::paths;
use crate::protocol::{Body, Entry, ErrorKind, MAX_CHUNK_BYTES, MAX_LIST_ENTRIES};
use nix::dir::Dir;
use nix::fcntl::OFlag;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn io_body(what: &str, path: &Path, e: io::Error) -> Body {
    Body::error(error_kind(&e), format!("{what} {}: {e}", path.display()))
}

/// What a failure to open or use a path is to the caller. A path the agent refuses (`paths`: a /proc link, a
/// kernel filesystem, no openat2; a write through a symlink to nothing) is the caller's to change: those carry
/// no OS error. The system's own refusal (EACCES from a mode or Landlock, EPERM) is its answer, verbatim.
pub(crate) fn error_kind(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::NotFound => ErrorKind::NotFound,
        io::ErrorKind::PermissionDenied
        | io::ErrorKind::Unsupported
        | io::ErrorKind::InvalidInput
            if e.raw_os_error().is_none() =>
        {
            ErrorKind::Invalid
        }
        _ => ErrorKind::Io,
    }
}

async fn blocking(f: impl FnOnce() -> Body + Send + 'static) -> Body {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Body::error(ErrorKind::Io, format!("file task failed: {e}")))
}

pub async fn read(path: PathBuf, offset: u64, length: u64) -> Body {
    blocking(move || {
        let len = (length as usize).min(MAX_CHUNK_BYTES);
        let mut f = match paths::open(&path, OFlag::O_RDONLY | OFlag::O_NONBLOCK, 0) {
            Ok(fd) => fs::File::from(fd),
            Err(e) => return io_body("cannot open", &path, e),
        };
        let size = match f.metadata() {
            Ok(m) if m.is_dir() => {
                return Body::error(
                    ErrorKind::Invalid,
                    format!("{} is a directory", path.display()),
                );
            }
            Ok(m) if !m.is_file() => return not_regular(&path),
            Ok(m) => m.len(),
            Err(e) => return io_body("cannot stat", &path, e),
        };
        if let Err(e) = f.seek(SeekFrom::Start(offset)) {
            return io_body("cannot seek in", &path, e);
        }
        let mut data = Vec::with_capacity(len.min(size.saturating_sub(offset) as usize));
        if let Err(e) = f.take(len as u64).read_to_end(&mut data) {
            return io_body("cannot read", &path, e);
        }
        let eof = offset + data.len() as u64 >= size;
        Body::Data { data, size, eof }
    })
    .await
}

/// Writes `data` to `path`. `max_size` is the sandbox's largest file (its RLIMIT_FSIZE): the agent writes as
/// PID 1, which that limit does not bind, so a write that would end past it is refused here, writing nothing.
pub async fn write(
    path: PathBuf,
    data: Vec<u8>,
    offset: Option<u64>,
    append: bool,
    mode: Option<u32>,
    owner: Option<(u32, u32)>,
    max_size: Option<u64>,
) -> Body {
    if data.len() > MAX_CHUNK_BYTES {
        return Body::error(
            ErrorKind::Limit,
            format!(
                "a write carries at most {MAX_CHUNK_BYTES} bytes; chunk it with offset or append"
            ),
        );
    }
    blocking(move || {
        if let Some(parent) = path.parent()
            && let Err(e) = paths::create_dirs(parent, owner)
        {
            return io_body("cannot create the directories of", &path, e);
        }
        let (mut f, created) = match open_for_write(&path, append, mode) {
            Ok(opened) => opened,
            // A FIFO no program reads: a non-blocking open for writing fails so, before it can be looked at.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => return not_regular(&path),
            Err(e) => return io_body("cannot open", &path, e),
        };
        let size = match f.metadata() {
            Ok(m) if m.is_file() => m.len(),
            Ok(_) => return not_regular(&path),
            Err(e) => return io_body("cannot stat", &path, e),
        };
        let start = match (append, offset) {
            (true, _) => size,
            (false, Some(off)) => off,
            (false, None) => 0,
        };
        if let Some(max) = max_size
            && start.saturating_add(data.len() as u64) > max
        {
            return Body::error(
                ErrorKind::Limit,
                format!(
                    "{}: writing {} bytes at byte {start} would end past {max} bytes, the largest file a sandbox \
                     may hold (--sandbox-max-file-mib / SANDBOX_MAX_FILE_MIB); nothing was written",
                    path.display(),
                    data.len()
                ),
            );
        }
        if !created
            && offset.is_none()
            && !append
            && let Err(e) = f.set_len(0)
        {
            return io_body("cannot truncate", &path, e);
        }
        if let Some(off) = offset.filter(|_| !append)
            && let Err(e) = f.seek(SeekFrom::Start(off))
        {
            return io_body("cannot seek in", &path, e);
        }
        if let Err(e) = f.write_all(&data) {
            return io_body("cannot write", &path, e);
        }
        if let Some(m) = mode
            && let Err(e) = f.set_permissions(fs::Permissions::from_mode(m & 0o7777))
        {
            return io_body("cannot chmod", &path, e);
        }
        // The sandbox's user must be able to change what the host wrote for it; by descriptor, so a name
        // swapped meanwhile changes nothing else.
        if created && let Some((uid, gid)) = owner {
            let _ = std::os::unix::fs::fchown(&f, Some(uid), Some(gid));
        }
        Body::Ok {
            written: data.len() as u64,
        }
    })
    .await
}

/// Opens `path` to write, creating it when it does not exist (`true` then): created exclusively, so a file
/// the host did not make is never taken for a new one and handed to the sandbox's user. Not truncated here:
/// the caller truncates once it knows the file is a regular one (a FIFO must not block the open either).
///
/// Two rounds at most: a name that exists for the exclusive create yet not for the plain open is a symlink to
/// nothing (or a program racing the agent), and looping on it would hold a blocking thread for good.
fn open_for_write(path: &Path, append: bool, mode: Option<u32>) -> io::Result<(fs::File, bool)> {
    let mut flags = OFlag::O_WRONLY | OFlag::O_NONBLOCK;
    if append {
        flags |= OFlag::O_APPEND;
    }
    for _ in 0..2 {
        match paths::open(path, flags, 0) {
            Ok(fd) => return Ok((fs::File::from(fd), false)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let create = flags | OFlag::O_CREAT | OFlag::O_EXCL;
        match paths::open(path, create, mode.unwrap_or(0o644)) {
            Ok(fd) => return Ok((fs::File::from(fd), true)),
            // Made by someone else between the two opens: open it as an existing file.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        "it is a symbolic link to nothing (or it keeps appearing and vanishing): the agent writes no file \
         through it",
    ))
}

fn not_regular(path: &Path) -> Body {
    Body::error(
        ErrorKind::Invalid,
        format!(
            "{} is not a regular file (a FIFO, socket or device), which the agent does not read or write: it \
             could block; run a program to use it",
            path.display()
        ),
    )
}

pub async fn list(path: PathBuf, depth: u32) -> Body {
    blocking(move || {
        let depth = depth.clamp(1, 64);
        let dir = match paths::open(&path, OFlag::O_RDONLY | OFlag::O_DIRECTORY, 0) {
            Ok(dir) => dir,
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
                return Body::error(
                    ErrorKind::Invalid,
                    format!("{} is not a directory", path.display()),
                );
            }
            Err(e) => return io_body("cannot list", &path, e),
        };
        let mut entries = Vec::new();
        let mut truncated = false;
        if let Err(e) = walk(dir, "", depth, &mut entries, &mut truncated) {
            return io_body("cannot list", &path, e);
        }
        Body::Entries { entries, truncated }
    })
    .await
}

/// Lists `dir` by descriptor, each subdirectory opened from it without following a link: a directory a
/// program swaps for a symlink while it is listed is not entered.
fn walk(
    dir: OwnedFd,
    prefix: &str,
    depth: u32,
    out: &mut Vec<Entry>,
    truncated: &mut bool,
) -> io::Result<()> {
    let mut dir = Dir::from_fd(dir)?;
    let mut names: Vec<OsString> = dir
        .iter()
        .filter_map(Result::ok)
        .map(|e| OsStr::from_bytes(e.file_name().to_bytes()).to_owned())
        .filter(|n| n != "." && n != "..")
        .collect();
    names.sort();
    for file_name in names {
        if out.len() >= MAX_LIST_ENTRIES {
            *truncated = true;
            return Ok(());
        }
        // The link itself: never followed (no loops, no escape through it).
        let Ok((is_dir, size)) = paths::entry_kind(&dir, &file_name) else {
            continue;
        };
        let name = format!("{prefix}{}", file_name.to_string_lossy());
        out.push(Entry {
            name: name.clone(),
            is_dir,
            size: if is_dir { 0 } else { size },
        });
        if is_dir && depth > 1 {
            // An unreadable subdirectory is listed but not entered.
            if let Ok(sub) =
                paths::open_entry(&dir, &file_name, OFlag::O_RDONLY | OFlag::O_DIRECTORY)
            {
                let _ = walk(sub, &format!("{name}/"), depth - 1, out, truncated);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// What the agent refuses is the caller's to change; what the system refuses is its answer.
    #[test]
    fn a_refused_path_is_invalid_and_the_systems_own_refusal_is_its_answer() {
        let path = Path::new("/w/f");
        let kind = |e: io::Error| match io_body("cannot open", path, e) {
            Body::Error { kind, .. } => kind,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            kind(paths::refused(nix::errno::Errno::ELOOP)),
            ErrorKind::Invalid
        );
        assert_eq!(
            kind(paths::refused(nix::errno::Errno::ENOSYS)),
            ErrorKind::Invalid
        );
        assert_eq!(
            kind(paths::refused(nix::errno::Errno::EACCES)),
            ErrorKind::Io
        );
        assert_eq!(
            kind(io::Error::from(nix::errno::Errno::EPERM)),
            ErrorKind::Io
        );
    }

    /// The agent writes as PID 1, past the sandbox's RLIMIT_FSIZE: an append that would grow a file past it is
    /// refused and writes nothing; one that ends at it is taken.
    #[tokio::test]
    async fn an_append_past_the_largest_file_is_refused_and_writes_nothing() {
        let dir = std::env::temp_dir().join(format!("agent-files-{}-append", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("f");
        fs::write(&f, b"123456").unwrap();
        let refused = write(f.clone(), b"789".to_vec(), None, true, None, None, Some(8)).await;
        let Body::Error { kind, message } = refused else {
            panic!("{refused:?}")
        };
        assert_eq!(kind, ErrorKind::Limit, "{message}");
        assert!(message.contains("8 bytes"), "{message}");
        assert_eq!(fs::read(&f).unwrap(), b"123456");
        let taken = write(f.clone(), b"78".to_vec(), None, true, None, None, Some(8)).await;
        assert!(matches!(taken, Body::Ok { written: 2 }), "{taken:?}");
        assert_eq!(fs::read(&f).unwrap(), b"12345678");
        let _ = fs::remove_dir_all(&dir);
    }

    /// A symlink to nothing exists for the exclusive create and not for the plain open: the write is refused
    /// at once instead of trying the two opens for ever.
    #[tokio::test]
    async fn a_write_through_a_symlink_to_nothing_is_refused_not_retried_for_ever() {
        let dir = std::env::temp_dir().join(format!("agent-files-{}-dangling", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(dir.join("missing"), dir.join("link")).unwrap();
        let written = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            write(
                dir.join("link"),
                b"x".to_vec(),
                None,
                false,
                None,
                None,
                None,
            ),
        )
        .await
        .expect("the write answers");
        let Body::Error { message, kind } = written else {
            panic!("{written:?}")
        };
        assert!(message.contains("symbolic link to nothing"), "{message}");
        assert_eq!(
            kind,
            ErrorKind::Invalid,
            "the path is the caller's to change"
        );
        assert!(!dir.join("missing").exists());
        let _ = fs::remove_dir_all(&dir);
    }
}
