//! Reading a source file a caller or an adapter names. The path is anyone's (`breakpoint_set` takes any), so it
//! is opened without blocking (a FIFO or `/dev/stdin` would hold the call, and the bridge's own input with it)
//! and read only when the open file is a regular one of at most [`MAX_SOURCE_BYTES`] (`/dev/zero` would be read
//! until memory ran out).

use crate::envelope::ScriptError;
use serde_json::json;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest source file read.
pub const MAX_SOURCE_BYTES: u64 = 8 << 20;

/// The bytes of the regular file at `path`, for the tool argument `field`.
pub fn read(field: &str, path: &Path) -> Result<Vec<u8>, ScriptError> {
    let shown = path.display().to_string();
    let unreadable = |e: std::io::Error| {
        ScriptError::new("E_FILE_NOT_FOUND", format!("{field}: {shown}: {e}"))
            .details(json!({"field": field, "path": shown}))
    };
    // Looked at before it is opened: opening a device has effects of its own (a watchdog armed, a serial
    // line's modem lines toggled), and a stop's source path is the debuggee's to choose (a review's finding).
    // Opened without blocking all the same, and looked at again once open, for a file swapped in between.
    let before = std::fs::metadata(path).map_err(unreadable)?;
    if !before.is_file() {
        return Err(not_regular(field, &shown));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(unreadable)?;
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(not_regular(field, &shown));
    }
    let too_big = |bytes: u64| {
        ScriptError::new(
            "E_INVALID_PARAMS",
            format!("{field}: {shown} is {bytes} bytes, over the {MAX_SOURCE_BYTES} a source file may have"),
        )
        .details(json!({"field": field, "path": shown, "limit": MAX_SOURCE_BYTES}))
    };
    if meta.len() > MAX_SOURCE_BYTES {
        return Err(too_big(meta.len()));
    }
    let mut bytes = Vec::new();
    // A file that grew since it was measured is still read no further than the limit.
    file.take(MAX_SOURCE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

fn not_regular(field: &str, shown: &str) -> ScriptError {
    ScriptError::new(
        "E_INVALID_PARAMS",
        format!("{field}: {shown} is not a regular file (a source file is one)"),
    )
    .details(json!({"field": field, "path": shown}))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_a_regular_file_within_the_limit_is_read() {
        let dir = std::env::temp_dir().join(format!("dap-source-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("a.py");
        std::fs::write(&file, "x = 1\n").unwrap();
        assert_eq!(read("path", &file).unwrap(), b"x = 1\n");
        let fifo = dir.join("fifo");
        let _ = std::fs::remove_file(&fifo);
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        for not_a_file in [fifo.as_path(), Path::new("/dev/zero"), dir.as_path()] {
            let e = read("path", not_a_file).unwrap_err();
            assert_eq!(e.code, "E_INVALID_PARAMS", "{not_a_file:?}: {e:?}");
            assert_eq!(e.details["field"], "path");
        }
        let big = dir.join("big.py");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_SOURCE_BYTES + 1)
            .unwrap();
        let e = read("path", &big).unwrap_err();
        assert!(e.message.contains("over the"), "{e:?}");
        assert_eq!(
            read("path", &dir.join("missing")).unwrap_err().code,
            "E_FILE_NOT_FOUND"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
