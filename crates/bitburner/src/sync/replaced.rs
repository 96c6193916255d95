//! The safety net under every pull: the local content a pull replaces is kept in
//! `DIR/.bitburner-sync/replaced/`, so even a pull the rules got wrong costs no work. Bounded in count and
//! bytes; the oldest go first.

use super::write::{WriteError, directory_inside, write_inside};
use std::path::Path;

/// Where the kept files go, relative to the synced directory (hidden, so never scanned or pushed).
pub const DIR: &str = ".bitburner-sync/replaced";
/// At most this many kept files...
pub const MAX_FILES: usize = 64;
/// ...and this many bytes in all. A local file larger than this is not pulled over at all.
pub const MAX_BYTES: u64 = 32 * 1024 * 1024;

/// Keeps `content`, the local version of `name` a pull is about to replace; returns where (relative to
/// `root`). The same content kept last for the same name is not kept twice.
pub fn keep(root: &Path, name: &str, content: &[u8]) -> Result<String, WriteError> {
    if content.len() as u64 > MAX_BYTES {
        return Err(WriteError::Refused(format!(
            "the local {name} is {} bytes, more than the {} MiB kept of replaced files",
            content.len(),
            MAX_BYTES / (1024 * 1024)
        )));
    }
    let dir = directory_inside(root, DIR)?;
    let flat = flatten(name);
    let mut kept = entries(&dir)?;
    if let Some(last) = kept
        .iter()
        .rev()
        .find(|(n, _)| n.get(21..) == Some(flat.as_str()))
        && super::write::read_regular_blocking(&dir.join(&last.0))
            .ok()
            .as_deref()
            == Some(content)
    {
        return Ok(format!("{DIR}/{}", last.0));
    }
    // Nanoseconds since the epoch, zero-padded: the names sort oldest first.
    let mut stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let file = loop {
        let file = format!("{stamp:020}-{flat}");
        if !kept.iter().any(|(n, _)| *n == file) {
            break file;
        }
        stamp += 1;
    };
    write_inside(root, &format!("{DIR}/{file}"), content)?;
    kept.push((file.clone(), content.len() as u64));
    kept.sort();
    prune(&dir, kept, &file, MAX_FILES, MAX_BYTES);
    Ok(format!("{DIR}/{file}"))
}

/// The kept files (name, size), oldest first; anything else in the directory is not ours and is left alone.
fn entries(dir: &Path) -> Result<Vec<(String, u64)>, WriteError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = name.len() > 21
            && name.as_bytes()[..20].iter().all(u8::is_ascii_digit)
            && name.as_bytes()[20] == b'-';
        let Ok(meta) = entry.metadata() else { continue };
        if ours && meta.is_file() {
            out.push((name, meta.len()));
        }
    }
    out.sort();
    Ok(out)
}

/// Removes the oldest kept files until at most `max_files` and `max_bytes` remain, never `newest`.
fn prune(dir: &Path, kept: Vec<(String, u64)>, newest: &str, max_files: usize, max_bytes: u64) {
    let mut count = kept.len();
    let mut bytes: u64 = kept.iter().map(|(_, n)| n).sum();
    for (name, size) in kept {
        if count <= max_files && bytes <= max_bytes {
            break;
        }
        if name == newest {
            continue;
        }
        if std::fs::remove_file(dir.join(&name)).is_ok() {
            count -= 1;
            bytes -= size;
        }
    }
}

/// `lib/a.js` → `lib%2Fa.js`, cut to fit a file name.
fn flatten(name: &str) -> String {
    let mut flat = name.replace('%', "%25").replace('/', "%2F");
    let mut cut = flat.len().min(200);
    while !flat.is_char_boundary(cut) {
        cut -= 1;
    }
    flat.truncate(cut);
    flat
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_go_first_within_both_bounds() {
        let root = std::env::temp_dir().join(format!("bb-replaced-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("kept");
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<String> = (0..5).map(|i| format!("{i:020}-a.js")).collect();
        for n in &names {
            std::fs::write(dir.join(n), "12345").unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(dir.join("not-ours.txt"), "x").unwrap_or_else(|e| panic!("{e}"));
        let kept = entries(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(kept.len(), 5);
        prune(&dir, kept, &names[4], 3, 1000);
        let left = entries(&dir).unwrap_or_else(|e| panic!("{e}"));
        let left: Vec<&str> = left.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(left, [&names[2], &names[3], &names[4]]);
        prune(&dir, entries(&dir).unwrap_or_default(), &names[4], 10, 7);
        let left = entries(&dir).unwrap_or_default();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].0, names[4], "the newest is never removed");
        assert!(dir.join("not-ours.txt").exists());
        assert_eq!(flatten("lib/%a.js"), "lib%2F%25a.js");
        let _ = std::fs::remove_dir_all(&root);
    }
}
