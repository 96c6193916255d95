//! Which `.vsc-bridge/` directory may be used, checked like OpenSSH's `StrictModes`: whoever can write into the
//! directory can answer the bridge's calls (forge `evaluate` results, read the parameters), so both sides use
//! only a directory owned by the running user, writable by nobody else, and not reached through a symlink.
//! Files inside are opened with `O_NOFOLLOW` (see `io.rs`), so a link planted in a job directory is not followed.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A directory the bridge will not use, and why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{path} is not a safe bridge directory: {reason}")]
pub struct Untrusted {
    pub path: PathBuf,
    pub reason: String,
}

impl Untrusted {
    fn new(path: &Path, reason: impl Into<String>) -> Self {
        Self {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }

    /// What to do about it, for the error's hint.
    pub fn hint(&self) -> String {
        format!(
            "Only a directory owned by the bridge's user (uid {}), mode 0700 (no group/other write), and not a symlink is used: fix it (chown/chmod 700) or remove it and let `mcp-bridges debug host` or VS Code recreate it",
            euid()
        )
    }
}

/// The effective uid of this process: the owner every bridge directory and job must have.
pub fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Checks `path` without following a final symlink: a directory, owned by us, not group/other-writable.
pub fn check_dir(path: &Path) -> Result<(), Untrusted> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| Untrusted::new(path, format!("cannot stat it: {e}")))?;
    check_meta(path, &meta)
}

/// The same check on metadata already taken with `lstat` (or from a directory entry).
pub fn check_meta(path: &Path, meta: &std::fs::Metadata) -> Result<(), Untrusted> {
    if meta.file_type().is_symlink() {
        return Err(Untrusted::new(path, "it is a symlink"));
    }
    if !meta.is_dir() {
        return Err(Untrusted::new(path, "it is not a directory"));
    }
    let ours = euid();
    if meta.uid() != ours {
        return Err(Untrusted::new(
            path,
            format!(
                "it is owned by uid {}, not by this user (uid {ours})",
                meta.uid()
            ),
        ));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(Untrusted::new(
            path,
            format!("mode {mode:04o} lets group or others write into it"),
        ));
    }
    Ok(())
}

/// Creates `path` with mode 0700 when it is missing (its parent must exist: never `-p`), then checks it. An
/// existing directory is never loosened or tightened behind the owner's back: it passes the check or is refused.
pub fn ensure_dir(path: &Path) -> Result<(), Untrusted> {
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {
            // The umask may have cleared bits but never adds any; set exactly 0700 regardless.
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| Untrusted::new(path, format!("cannot set mode 0700: {e}")))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(Untrusted::new(path, format!("cannot create it: {e}"))),
    }
    check_dir(path)
}

/// The bridge directory and its `execute/`, both checked.
pub fn check_root(root: &Path) -> Result<(), Untrusted> {
    check_dir(root)?;
    check_dir(&root.join(super::EXECUTE_DIR))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn created_0700_and_loose_or_linked_directories_are_refused() {
        let base = std::env::temp_dir().join(format!("trust-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir(&base).unwrap();
        let dir = base.join(".vsc-bridge");
        ensure_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
        let e = check_dir(&dir).unwrap_err();
        assert!(e.reason.contains("0770"), "{e}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let link = base.join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert_eq!(check_dir(&link).unwrap_err().reason, "it is a symlink");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
