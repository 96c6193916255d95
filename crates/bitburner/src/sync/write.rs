//! The one way the sync writes a local file: inside the directory, never through a symlink, never in place.
//!
//! A synced directory is often a cloned repository, so it can hold symlinks that lead anywhere
//! (`lib -> ../elsewhere`, `NetscriptDefinitions.d.ts -> ~/.bashrc`), and what is written comes from the game's
//! side of a socket any local program can open. So every directory on the way is checked one component at a
//! time (created when missing, refused when it is a symlink or not a directory), the target itself must not be
//! a symlink, and the content goes to a new file created exclusively beside it (`O_CREAT|O_EXCL` never follows
//! a symlink), synced, then renamed over the target. The rename also makes a pull atomic (a crash or a dropped
//! game leaves the old file or the new one, never half of one) and replaces a hard-linked target instead of
//! writing through the link into its other names.
//!
//! What is left: someone who can already write into the directory could swap a checked directory for a
//! symlink between the check and the write. That person can edit the scripts anyway; the defence here is
//! against what the directory holds and what the game sends, not against a concurrent local attacker.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Every temporary file the sync creates starts with this; the scan and the watcher ignore such names.
pub const TEMP_PREFIX: &str = ".bitburner-sync-tmp-";

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Refused on purpose (a symlink on the way, a name that leaves the directory); says why.
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Whether `segment` is one plain name inside its directory: not empty, `.` or `..`, no `\\`. `:` is an
/// ordinary character in a game name and on Unix; only Windows reads it as a drive or stream.
pub fn plain_segment(segment: &str) -> bool {
    !(segment.is_empty()
        || segment == "."
        || segment == ".."
        || segment.contains('\\')
        || (cfg!(windows) && segment.contains(':')))
}

/// `relative` ('/'-separated) as plain names, or why not.
fn segments(relative: &str) -> Result<Vec<&str>, WriteError> {
    let parts: Vec<&str> = relative.split('/').collect();
    if !parts.iter().all(|s| plain_segment(s)) {
        return Err(WriteError::Refused(format!(
            "{relative} is not a path that stays inside the directory"
        )));
    }
    Ok(parts)
}

fn symlink_refusal(shown: &str) -> WriteError {
    WriteError::Refused(format!(
        "{shown} is a symlink: the sync writes no file through or over one, nor reads a game file's local \
         side through one (it could lead out of the directory)"
    ))
}

/// The path of `relative` under `root` with every directory on the way checked: a real directory, not a
/// symlink. Missing directories are created when `create`, else the path is returned as is (nothing there).
fn checked(root: &Path, relative: &str, create: bool) -> Result<PathBuf, WriteError> {
    let parts = segments(relative)?;
    let mut path = std::fs::canonicalize(root)?;
    let Some((file, dirs)) = parts.split_last() else {
        return Err(WriteError::Refused(format!("{relative} names no file")));
    };
    for (i, dir) in dirs.iter().enumerate() {
        path.push(dir);
        let shown = parts[..=i].join("/");
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => return Err(symlink_refusal(&shown)),
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(WriteError::Refused(format!(
                    "{shown} is a file, not a directory"
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !create {
                    // Nothing below a missing directory exists; there is nothing to read through.
                    path.extend(&parts[i + 1..]);
                    return Ok(path);
                }
                match std::fs::create_dir(&path) {
                    Ok(()) => {}
                    // Made by someone else meanwhile: take it only if it is a real directory.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        let m = std::fs::symlink_metadata(&path)?;
                        if m.file_type().is_symlink() || !m.is_dir() {
                            return Err(symlink_refusal(&shown));
                        }
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    path.push(file);
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_symlink() => Err(symlink_refusal(relative)),
        Ok(m) if m.is_dir() => Err(WriteError::Refused(format!(
            "{relative} is a directory here"
        ))),
        _ => Ok(path),
    }
}

/// Where `relative` is under `root` if it can be read without following a symlink; refused otherwise.
pub fn readable_path(root: &Path, relative: &str) -> Result<PathBuf, WriteError> {
    checked(root, relative, false)
}

/// Makes the directories of `relative` (a directory path) under `root`, each a real one; returns its path.
pub fn directory_inside(root: &Path, relative: &str) -> Result<PathBuf, WriteError> {
    let inner = format!("{relative}/{TEMP_PREFIX}probe");
    let path = checked(root, &inner, true)?;
    Ok(path.parent().map(Path::to_path_buf).unwrap_or(path))
}

/// The content of the local file at `path`, only when it is a regular file (after symlinks): a FIFO named like
/// a game file blocked its read for good, and the sync with it, past SIGTERM (an attack run's finding). The
/// open does not block (`O_NONBLOCK`), and the type is judged on what was opened, so nothing swapped in between
/// can block the read either.
pub async fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || read_regular_blocking(&path))
        .await
        .map_err(std::io::Error::other)?
}

/// [`read_regular`] for blocking code.
pub fn read_regular_blocking(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let mut file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn not_regular() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        "not a regular file (a FIFO, a device or a directory); the sync reads only regular files",
    )
}

/// Replaces `root/relative` with `bytes`, atomically, never through or over a symlink (module docs).
pub fn write_inside(root: &Path, relative: &str, bytes: &[u8]) -> Result<(), WriteError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let target = checked(root, relative, true)?;
    let dir = target
        .parent()
        .ok_or_else(|| WriteError::Refused(format!("{relative} has no directory")))?;
    // Keep the mode of the file being replaced (an executable bit, say), as writing in place did.
    let mode = std::fs::symlink_metadata(&target)
        .ok()
        .map(|m| m.permissions());
    let mut attempts = 0;
    let (temp, mut file) = loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!("{TEMP_PREFIX}{}-{n}", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
        {
            Ok(f) => break (temp, f),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempts < 16 => {
                attempts += 1;
            }
            Err(e) => return Err(e.into()),
        }
    };
    let written = (|| {
        file.write_all(bytes)?;
        if let Some(mode) = mode {
            file.set_permissions(mode)?;
        }
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp, &target)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(e.into());
    }
    // The rename is durable once the directory is; best effort, some systems cannot sync a directory.
    #[cfg(unix)]
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bb-write-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        dir
    }

    #[test]
    fn writes_replace_the_file_and_make_directories() {
        let dir = tempdir("plain");
        write_inside(&dir, "lib/deep/a.js", b"one").unwrap_or_else(|e| panic!("{e}"));
        write_inside(&dir, "lib/deep/a.js", b"two").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            std::fs::read(dir.join("lib/deep/a.js")).ok().as_deref(),
            Some(&b"two"[..])
        );
        let names: Vec<_> = std::fs::read_dir(dir.join("lib/deep"))
            .map(|r| r.filter_map(Result::ok).map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert_eq!(names.len(), 1, "no temporary file is left: {names:?}");
        assert!(matches!(
            write_inside(&dir, "../x.js", b"x"),
            Err(WriteError::Refused(_))
        ));
    }

    #[cfg(unix)]
    #[test]
    fn a_hard_link_is_replaced_not_written_through() {
        let dir = tempdir("hardlink");
        std::fs::write(dir.join("other.txt"), "keep").unwrap_or_else(|e| panic!("{e}"));
        std::fs::hard_link(dir.join("other.txt"), dir.join("a.js"))
            .unwrap_or_else(|e| panic!("{e}"));
        write_inside(&dir, "a.js", b"new").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            std::fs::read_to_string(dir.join("other.txt"))
                .ok()
                .as_deref(),
            Some("keep")
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("a.js")).ok().as_deref(),
            Some("new")
        );
    }
}
