//! The names of the conflict copies a sync writes beside a file changed on both sides.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Where the game's version of a conflicting file is kept: `.game` before the extension (`lib/a.js` →
/// `lib/a.game.js`), so editors still highlight it.
pub fn conflict_copy(local: &Path) -> PathBuf {
    let name = local
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    local.with_file_name(copy_file_name(&name, 0))
}

/// `a.js` → `a.game.js` (`n` = 0), `a.game.1.js`, ...
pub(super) fn copy_file_name(name: &str, n: usize) -> String {
    let tag = if n == 0 {
        ".game".to_owned()
    } else {
        format!(".game.{n}")
    };
    match name.rfind('.') {
        Some(dot) if dot > 0 => format!("{}{tag}{}", &name[..dot], &name[dot..]),
        _ => format!("{name}{tag}"),
    }
}

/// [`copy_file_name`] of a '/'-separated relative path.
pub(super) fn copy_name(relative: &str, n: usize) -> String {
    match relative.rsplit_once('/') {
        Some((dir, file)) => format!("{dir}/{}", copy_file_name(file, n)),
        None => copy_file_name(relative, n),
    }
}

/// Whether `name` in `siblings` is a conflict copy of a file next to it (`a.game.js` or `a.game.3.js` beside
/// `a.js`), for copies the record does not list (it was lost, or they came before it listed copies).
pub(super) fn copy_of<'a>(name: &str, siblings: &'a BTreeSet<String>) -> Option<&'a String> {
    let dot = name.rfind('.')?;
    let (base, extension) = name.split_at(dot);
    let stem = base.strip_suffix(".game").or_else(|| {
        let (head, n) = base.rsplit_once('.')?;
        let numbered = !n.is_empty() && n.len() <= 3 && n.bytes().all(|b| b.is_ascii_digit());
        head.strip_suffix(".game").filter(|_| numbered)
    })?;
    siblings.get(&format!("{stem}{extension}"))
}
