//! Which agent binary the bridge starts as PID 1 of a sandbox, and the one `mcp-bridges` carries.
//!
//! The binary's build script builds the agent statically and hands the bytes here once at start
//! ([`embed`]); this crate does not depend on the binary. In order:
//! 1. `--sandbox-agent-bin`/`SANDBOX_AGENT_BIN`, which must exist;
//! 2. the embedded agent, written once into the state dir as `sandbox-agent-<sha256 prefix>` ([`install`]):
//!    owned by this process's user, mode 0555, replaced atomically when its content is not the embedded one;
//! 3. (the bridge used as a library, e.g. its tests) a `sandbox-agent` beside the executable.

use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The command that builds an agent to point `--sandbox-agent-bin` at; error messages name it.
pub const BUILD_COMMAND: &str = "cargo build --release -p sandbox-agent";
/// Mode of the installed agent: readable and executable by all (a sandbox's PID 1 runs as a mapped uid),
/// writable by nobody.
pub const MODE: u32 = 0o555;

static EMBEDDED: OnceLock<&'static [u8]> = OnceLock::new();

/// Gives the bridge the agent its binary carries. The first call wins; later ones are ignored.
pub fn embed(agent: &'static [u8]) {
    let _ = EMBEDDED.set(agent);
}

/// The agent given to [`embed`], if any.
pub fn embedded() -> Option<&'static [u8]> {
    EMBEDDED.get().copied()
}

/// Where [`install`] puts `agent` in `state_dir`: the name carries the content's SHA-256, so bridges of
/// different versions sharing a state dir never replace each other's agent.
pub fn installed_path(state_dir: &Path, agent: &[u8]) -> PathBuf {
    let digest = Sha256::digest(agent);
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    state_dir.join(format!("sandbox-agent-{hex}"))
}

/// Makes `path` an executable copy of `agent`, owned by this process's user, mode [`MODE`]: kept when it
/// already is one, else written to a fresh temporary file (O_EXCL, never through a symlink) and renamed over
/// `path` (a symlink or a stray file there is replaced, not followed). `path`'s directory must be the
/// checked state dir (ours, writable by nobody else), so only this user can have put anything there.
pub fn install(path: &Path, agent: &[u8]) -> Result<(), String> {
    if is_copy(path, agent) {
        return Ok(());
    }
    let dir = path.parent().ok_or("the agent's path has no directory")?;
    let name = path
        .file_name()
        .ok_or("the agent's path has no file name")?
        .to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = write_new(&tmp, agent).and_then(|()| {
        std::fs::rename(&tmp, path).map_err(|e| format!("rename {} to it: {e}", tmp.display()))
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if is_copy(path, agent) {
        Ok(())
    } else {
        Err("after writing it, it is not the embedded agent (owner, mode or content differ)".into())
    }
}

fn write_new(tmp: &Path, agent: &[u8]) -> Result<(), String> {
    let what = |e: std::io::Error| format!("write {}: {e}", tmp.display());
    // A temporary left by a crashed start of a process with our pid would make O_EXCL fail for ever.
    let _ = std::fs::remove_file(tmp);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(tmp)
        .map_err(what)?;
    file.write_all(agent).map_err(what)?;
    file.set_permissions(std::fs::Permissions::from_mode(MODE))
        .map_err(what)?;
    file.sync_all().map_err(what)?;
    // Closed before the rename: an executable still open for writing cannot be run (ETXTBSY).
    drop(file);
    Ok(())
}

/// Whether `path` (not followed if a symlink) is a regular file of ours, mode [`MODE`], holding `agent`.
fn is_copy(path: &Path, agent: &[u8]) -> bool {
    let Ok(mut file) = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
    else {
        return false;
    };
    let Ok(meta) = file.metadata() else {
        return false;
    };
    let ours = meta.uid() == nix::unistd::geteuid().as_raw();
    if !meta.is_file() || !ours || meta.mode() & 0o7777 != MODE || meta.len() != agent.len() as u64
    {
        return false;
    }
    same_content(&mut file, agent)
}

fn same_content(file: &mut File, agent: &[u8]) -> bool {
    let mut content = Vec::with_capacity(agent.len());
    file.read_to_end(&mut content).is_ok() && content == agent
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("agent-bin-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("dir");
        d
    }

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).expect("exists").mode() & 0o7777
    }

    #[test]
    fn the_agent_is_written_once_read_only_and_named_by_its_content() {
        let d = dir("once");
        let path = installed_path(&d, b"agent one");
        assert_ne!(path, installed_path(&d, b"agent two"));
        install(&path, b"agent one").expect("installed");
        assert_eq!(std::fs::read(&path).expect("read"), b"agent one");
        assert_eq!(mode(&path), 0o555);
        let inode = std::fs::metadata(&path).expect("meta").ino();
        install(&path, b"agent one").expect("kept");
        assert_eq!(
            std::fs::metadata(&path).expect("meta").ino(),
            inode,
            "rewritten"
        );
        std::fs::remove_dir_all(&d).expect("clean");
    }

    #[test]
    fn a_symlink_in_its_place_is_replaced_not_followed() {
        let d = dir("symlink");
        let victim = d.join("victim");
        std::fs::write(&victim, b"precious").expect("victim");
        let path = installed_path(&d, b"agent");
        symlink(&victim, &path).expect("symlink");
        install(&path, b"agent").expect("installed");
        assert_eq!(std::fs::read(&victim).expect("read"), b"precious");
        let meta = std::fs::symlink_metadata(&path).expect("meta");
        assert!(meta.is_file(), "{:?}", meta.file_type());
        assert_eq!(std::fs::read(&path).expect("read"), b"agent");
        std::fs::remove_dir_all(&d).expect("clean");
    }

    #[test]
    fn a_writable_or_altered_copy_is_replaced() {
        let d = dir("altered");
        let path = installed_path(&d, b"agent");
        std::fs::write(&path, b"agent").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        install(&path, b"agent").expect("installed");
        assert_eq!(mode(&path), 0o555);

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::write(&path, b"tampr").expect("tamper");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o555)).expect("chmod");
        install(&path, b"agent").expect("installed");
        assert_eq!(std::fs::read(&path).expect("read"), b"agent");
        std::fs::remove_dir_all(&d).expect("clean");
    }
}
