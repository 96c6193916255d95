//! Files as the protocol needs them: JSON written atomically (temporary file, then rename) so a reader never
//! sees half a file; claims with O_EXCL; reads that retry a file caught mid-rename.
//!
//! VSC-Bridge also fsyncs each file and the directory. That buys durability across a power cut, which a job
//! directory (IPC between two live processes, answered in milliseconds) does not need, and costs several
//! milliseconds per file on a busy disk; readers are protected by the rename alone. The bytes are the same.

use serde_json::Value;
use std::io::Write;
use std::path::Path;

/// A JSON file the protocol reads is refused above this (a `data.json` may be large, the rest are small).
pub const MAX_READ_BYTES: u64 = 256 << 20;

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
        let mut f = std::fs::File::create(&tmp)?;
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
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
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
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path).map(drop)
}

/// Reads and parses a JSON file, retrying `ENOENT` 3 times 10 ms apart (a rename in flight).
pub fn read_json(path: &Path) -> std::io::Result<Value> {
    let mut attempt = 0;
    loop {
        match read_json_once(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && attempt < 3 => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

fn read_json_once(path: &Path) -> std::io::Result<Value> {
    let len = std::fs::metadata(path)?.len();
    if len > MAX_READ_BYTES {
        return Err(std::io::Error::other(format!(
            "{} is {len} bytes, over {MAX_READ_BYTES}",
            path.display()
        )));
    }
    let bytes = std::fs::read(path)?;
    serde_json::from_slice(&bytes)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
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
            let v = read_json(&path).unwrap();
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
            .set_len(MAX_READ_BYTES + 1)
            .unwrap();
        let err = read_json(&path).unwrap_err();
        assert!(
            err.to_string().contains(&format!("over {MAX_READ_BYTES}")),
            "{err}"
        );
        std::fs::File::create(&path)
            .unwrap()
            .write_all(b"{\"ok\": true}")
            .unwrap();
        assert_eq!(read_json(&path).unwrap(), json!({"ok": true}));
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
