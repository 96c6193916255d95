//! Files as bytes: read a range, write at an offset / append / replace with a mode, list to a depth. The
//! blocking calls run on tokio's blocking pool so a slow disk never stalls the stream.

use crate::protocol::{Body, Entry, ErrorKind, MAX_CHUNK_BYTES, MAX_LIST_ENTRIES};
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

fn io_body(what: &str, path: &Path, e: io::Error) -> Body {
    let kind = match e.kind() {
        io::ErrorKind::NotFound => ErrorKind::NotFound,
        _ => ErrorKind::Io,
    };
    Body::error(kind, format!("{what} {}: {e}", path.display()))
}

async fn blocking(f: impl FnOnce() -> Body + Send + 'static) -> Body {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Body::error(ErrorKind::Io, format!("file task failed: {e}")))
}

pub async fn read(path: PathBuf, offset: u64, length: u64) -> Body {
    blocking(move || {
        let len = (length as usize).min(MAX_CHUNK_BYTES);
        let mut f = match fs::File::open(&path) {
            Ok(f) => f,
            Err(e) => return io_body("cannot open", &path, e),
        };
        let size = match f.metadata() {
            Ok(m) if m.is_dir() => {
                return Body::error(
                    ErrorKind::Invalid,
                    format!("{} is a directory", path.display()),
                );
            }
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

pub async fn write(
    path: PathBuf,
    data: Vec<u8>,
    offset: Option<u64>,
    append: bool,
    mode: Option<u32>,
    owner: Option<(u32, u32)>,
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
            && let Err(e) = mkdirs(parent, owner)
        {
            return io_body("cannot create the directories of", &path, e);
        }
        let existed = path.exists();
        let mut opts = OpenOptions::new();
        opts.write(true).create(true).mode(mode.unwrap_or(0o644));
        if append {
            opts.append(true);
        } else if offset.is_none() {
            opts.truncate(true);
        }
        let mut f = match opts.open(&path) {
            Ok(f) => f,
            Err(e) => return io_body("cannot open", &path, e),
        };
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
        // The sandbox's user must be able to change what the host wrote for it.
        if !existed && let Some((uid, gid)) = owner {
            let _ = std::os::unix::fs::chown(&path, Some(uid), Some(gid));
        }
        Body::Ok {
            written: data.len() as u64,
        }
    })
    .await
}

fn mkdirs(dir: &Path, owner: Option<(u32, u32)>) -> io::Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        mkdirs(parent, owner)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => {
            if let Some((uid, gid)) = owner {
                let _ = std::os::unix::fs::chown(dir, Some(uid), Some(gid));
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

pub async fn list(path: PathBuf, depth: u32) -> Body {
    blocking(move || {
        let depth = depth.clamp(1, 64);
        match fs::metadata(&path) {
            Ok(m) if !m.is_dir() => {
                return Body::error(
                    ErrorKind::Invalid,
                    format!("{} is not a directory", path.display()),
                );
            }
            Ok(_) => {}
            Err(e) => return io_body("cannot list", &path, e),
        }
        let mut entries = Vec::new();
        let mut truncated = false;
        if let Err(e) = walk(&path, "", depth, &mut entries, &mut truncated) {
            return io_body("cannot list", &path, e);
        }
        Body::Entries { entries, truncated }
    })
    .await
}

fn walk(
    dir: &Path,
    prefix: &str,
    depth: u32,
    out: &mut Vec<Entry>,
    truncated: &mut bool,
) -> io::Result<()> {
    let mut names: Vec<_> = fs::read_dir(dir)?.filter_map(Result::ok).collect();
    names.sort_by_key(|e| e.file_name());
    for e in names {
        if out.len() >= MAX_LIST_ENTRIES {
            *truncated = true;
            return Ok(());
        }
        // symlink_metadata: a link is listed, never followed (no loops, no escape through it).
        let Ok(meta) = e.path().symlink_metadata() else {
            continue;
        };
        let name = format!("{prefix}{}", e.file_name().to_string_lossy());
        let is_dir = meta.is_dir();
        out.push(Entry {
            name: name.clone(),
            is_dir,
            size: if is_dir { 0 } else { meta.len() },
        });
        if is_dir && depth > 1 {
            // An unreadable subdirectory is listed but not entered.
            let _ = walk(&e.path(), &format!("{name}/"), depth - 1, out, truncated);
        }
    }
    Ok(())
}
