//! Files as the protocol needs them: JSON written atomically (temporary file, then rename) so a reader never
//! sees half a file; claims with O_EXCL; reads that retry a file caught mid-rename. Every file is opened with
//! `O_NOFOLLOW` (a link planted in a job directory is refused, not followed) and every read is bounded: the
//! size is checked on the open file before reading, and the read itself stops one byte past the bound.
//!
//! VSC-Bridge also fsyncs each file and the directory. That buys durability across a power cut, which a job
//! directory (IPC between two live processes, answered in milliseconds) does not need, and costs several
//! milliseconds per file on a busy disk; readers are protected by the rename alone. The bytes are the same.

use serde_json::Value;
use std::io::Write;
use std::path::Path;

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;

/// `host.json`, `host.lock`, `claimed.json`, `dlq`: a few hundred bytes each.
pub const SMALL_FILE_BYTES: u64 = 64 << 10;
/// `command.json`: a script name and its parameters.
pub const COMMAND_BYTES: u64 = 1 << 20;
/// `data.json` (and `response.json` / `error.json`) by default; `--debug-max-data-bytes` changes it.
pub const DEFAULT_DATA_BYTES: u64 = 16 << 20;

/// Never through a symlink; never blocking on a FIFO someone planted (its type is refused after the open).
fn no_follow(opts: &mut std::fs::OpenOptions) -> &mut std::fs::OpenOptions {
    opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
}

/// Writes `value` to `path` atomically: `.<name>.<pid>.<ms>.tmp` beside it, then rename.
pub fn write_json_atomic(path: &Path, value: &Value) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    write_atomic(path, &bytes)
}

pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        crate::envelope::now_ms()
    ));
    let result = (|| {
        let mut f = no_follow(
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600),
        )
        .open(&tmp)?;
        f.write_all(bytes)?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Creates `path` only if it does not exist (the claim); false when someone else has it.
pub fn create_exclusive(path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    match no_follow(
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600),
    )
    .open(path)
    {
        Ok(mut f) => {
            f.write_all(bytes)?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// An empty marker file (`done`, `cancel`), mode 0600.
pub fn touch_marker(path: &Path) -> std::io::Result<()> {
    no_follow(
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600),
    )
    .open(path)
    .map(drop)
}

/// Reads and parses a JSON file of at most `limit` bytes, retrying `ENOENT` 3 times 10 ms apart (a rename in
/// flight). Above `limit` it is `ErrorKind::FileTooLarge`, and nothing past the bound is read.
pub fn read_json(path: &Path, limit: u64) -> std::io::Result<Value> {
    let mut attempt = 0;
    loop {
        match read_json_once(path, limit) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && attempt < 3 => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

fn read_json_once(path: &Path, limit: u64) -> std::io::Result<Value> {
    let bytes = read_bounded(path, limit)?;
    serde_json::from_slice(&bytes)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// The whole of a regular file of at most `limit` bytes, opened without following a link.
pub fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let f = no_follow(std::fs::OpenOptions::new().read(true)).open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    let too_large = |len: u64| {
        std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!(
                "{} is {len} bytes, over the {limit}-byte limit",
                path.display()
            ),
        )
    };
    if meta.len() > limit {
        return Err(too_large(meta.len()));
    }
    // The file may grow between fstat and read: the read stops one byte past the bound regardless.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_reader_never_sees_a_partial_file() {
        let dir = std::env::temp_dir().join(format!("atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("response.json");
        let big = json!({"data": "x".repeat(200_000)});
        write_json_atomic(&path, &big).unwrap();
        let writer = {
            let path = path.clone();
            let big = big.clone();
            std::thread::spawn(move || {
                for _ in 0..200 {
                    write_json_atomic(&path, &big).unwrap();
                }
            })
        };
        let mut reads = 0;
        while !writer.is_finished() {
            let v = read_json(&path, DEFAULT_DATA_BYTES).unwrap();
            assert_eq!(v, big);
            reads += 1;
        }
        writer.join().unwrap();
        assert!(reads > 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_over_the_read_bound_is_refused_without_being_read() {
        let dir = std::env::temp_dir().join(format!("bound-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("data.json");
        // Sparse: the bound is checked from the length, so the test costs no disk.
        std::fs::File::create(&path)
            .unwrap()
            .set_len(COMMAND_BYTES + 1)
            .unwrap();
        let err = read_json(&path, COMMAND_BYTES).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::FileTooLarge);
        assert!(
            err.to_string()
                .contains(&format!("over the {COMMAND_BYTES}-byte limit")),
            "{err}"
        );
        std::fs::File::create(&path)
            .unwrap()
            .write_all(b"{\"ok\": true}")
            .unwrap();
        assert_eq!(
            read_json(&path, COMMAND_BYTES).unwrap(),
            json!({"ok": true})
        );
        let link = dir.join("link.json");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let err = read_json(&link, COMMAND_BYTES).unwrap_err();
        assert_eq!(
            err.raw_os_error(),
            Some(libc::ELOOP),
            "a link is not followed"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_claim_is_taken_once() {
        let dir = std::env::temp_dir().join(format!("claim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("claimed.json");
        assert!(create_exclusive(&path, b"{}").unwrap());
        assert!(!create_exclusive(&path, b"{}").unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
