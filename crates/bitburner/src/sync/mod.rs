//! `push <dir>` and `pull <dir>`: one-shot file sync for players, through the same code as the tools.
//! `pull` never silently replaces a file the player edited since the last sync (see [`manifest`]).

pub mod manifest;

use crate::config::SyncArgs;
use crate::path;
use crate::tools::Ctx;
use crate::tools::args::WriteArgs;
use bridge_core::ToolError;
use manifest::Manifest;
use std::path::{Path, PathBuf};

/// What one sync did, file by file.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SyncReport {
    pub done: Vec<String>,
    /// Files left alone on purpose (not a name or extension the game stores), with why.
    pub skipped: Vec<(String, String)>,
    /// Local files `pull` left alone because the player changed them since the last sync.
    pub kept: Vec<String>,
    /// Files that should have synced but did not, with the error.
    pub failed: Vec<(String, String)>,
}

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("{0}")]
    Game(#[from] ToolError),
    #[error(
        "{failed} of {total} files failed to sync; nothing else went wrong (see the FAILED lines)"
    )]
    Incomplete { failed: usize, total: usize },
    #[error("cannot read {path}: {source}")]
    Local {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

async fn wait_for_game(ctx: &Ctx, args: &SyncArgs) -> Result<(), SyncError> {
    if ctx.link.is_connected() {
        return Ok(());
    }
    let status = ctx.link.status();
    eprintln!("waiting for Bitburner to connect to {} ...", status.listen);
    if ctx.link.wait_connected(args.wait).await {
        return Ok(());
    }
    let waited = args.wait.as_secs();
    Err(ctx
        .link
        .not_connected(&format!("no game connected within {waited} s"))
        .into())
}

/// Uploads every file under `args.dir` whose relative path the game accepts.
pub async fn push(ctx: &Ctx, args: &SyncArgs) -> Result<SyncReport, SyncError> {
    let mut files = Vec::new();
    collect(&args.dir, &args.dir, &mut files)?;
    wait_for_game(ctx, args).await?;
    let mut report = SyncReport::default();
    let mut manifest = Manifest::load(&args.dir);
    for (relative, local) in files {
        if let Err(e) = path::validate(&relative, &path::ExtensionSet::ANY_VERSION) {
            report.skipped.push((relative, e.to_string()));
            continue;
        }
        let content = match tokio::fs::read_to_string(&local).await {
            Ok(c) => c,
            Err(e) => {
                report.failed.push((relative, e.to_string()));
                continue;
            }
        };
        let hash_of = manifest::digest(&content);
        let write = WriteArgs {
            filename: relative.clone(),
            content,
            server: args.server.clone(),
        };
        match ctx.write_file(write).await {
            Ok(w) => {
                manifest.record_digest(&args.server, &w.filename, hash_of);
                report.done.push(w.filename);
            }
            Err(e) if e.code() == bridge_core::ErrorCode::Disconnected => {
                save_manifest(&manifest, &args.dir);
                return Err(e.into());
            }
            Err(e) => report.failed.push((relative, e.to_string())),
        }
    }
    save_manifest(&manifest, &args.dir);
    Ok(report)
}

/// A manifest that cannot be written costs only the protection of the next `pull`; say so and go on.
fn save_manifest(manifest: &Manifest, dir: &Path) {
    if let Err(e) = manifest.save(dir) {
        eprintln!(
            "warning: cannot write {}: {e}; the next pull will keep every local file that differs from the game",
            Manifest::path(dir).display()
        );
    }
}

/// Downloads every script and text file of `args.server` into `args.dir`.
pub async fn pull(ctx: &Ctx, args: &SyncArgs) -> Result<SyncReport, SyncError> {
    wait_for_game(ctx, args).await?;
    let all = ctx.all_files(&args.server).await?;
    let mut report = SyncReport::default();
    let mut manifest = Manifest::load(&args.dir);
    for file in all {
        let Some(local) = local_path(&args.dir, &file.filename) else {
            report.skipped.push((
                file.filename,
                "not a path that stays inside the directory".to_owned(),
            ));
            continue;
        };
        if !args.force
            && let Ok(current) = tokio::fs::read(&local).await
            && current != file.content.as_bytes()
            && !manifest.unchanged(&args.server, &file.filename, &current)
        {
            report.kept.push(file.filename);
            continue;
        }
        let written = async {
            if let Some(parent) = local.parent() {
                tokio::fs::create_dir_all(parent).await?;
            }
            tokio::fs::write(&local, file.content.as_bytes()).await
        }
        .await;
        match written {
            Ok(()) => {
                manifest.record(&args.server, &file.filename, file.content.as_bytes());
                report.done.push(file.filename);
            }
            Err(e) => report.failed.push((file.filename, e.to_string())),
        }
    }
    save_manifest(&manifest, &args.dir);
    Ok(report)
}

/// Where a game path lands under `dir`; `None` for anything that could leave it (the game never sends such
/// paths, but this is a file written from data another program sent).
fn local_path(dir: &Path, game_path: &str) -> Option<PathBuf> {
    let resolved = path::resolve_file_path(game_path)?;
    let mut out = dir.to_path_buf();
    for segment in resolved.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." || segment.contains(['\\', ':'])
        {
            return None;
        }
        out.push(segment);
    }
    Some(out)
}

/// Every file under `dir` as (path relative to `root` with `/` separators, local path). Hidden directories
/// and `node_modules` are not the player's scripts and are not entered.
fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) -> Result<(), SyncError> {
    let local = |source| SyncError::Local {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(local)?
        .collect::<Result<_, _>>()
        .map_err(local)?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type().map_err(local)?;
        if kind.is_dir() {
            if !name.starts_with('.') && name != "node_modules" {
                collect(root, &path, out)?;
            }
        } else if kind.is_file() && !(dir == root && name == manifest::FILE_NAME) {
            let relative = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            out.push((relative, path));
        }
    }
    Ok(())
}

impl SyncReport {
    /// One line per file, then a summary; for the terminal. Fails when any file failed, so the command exits
    /// non-zero and a script driving it notices.
    pub fn print(&self, verb: &str) -> Result<(), SyncError> {
        for line in self.lines(verb) {
            println!("{line}");
        }
        if self.failed.is_empty() {
            return Ok(());
        }
        Err(SyncError::Incomplete {
            failed: self.failed.len(),
            total: self.done.len() + self.failed.len(),
        })
    }

    fn lines(&self, verb: &str) -> Vec<String> {
        let mut out: Vec<String> = self.done.iter().map(|f| format!("{verb} {f}")).collect();
        out.extend(
            self.skipped
                .iter()
                .map(|(f, why)| format!("skipped {f}: {why}")),
        );
        out.extend(
            self.kept.iter().map(|f| {
                format!("kept {f}: changed here since the last sync (--force replaces it)")
            }),
        );
        out.extend(
            self.failed
                .iter()
                .map(|(f, why)| format!("FAILED {f}: {why}")),
        );
        let kept = if self.kept.is_empty() {
            String::new()
        } else {
            format!(", {} kept", self.kept.len())
        };
        out.push(format!(
            "{} {verb}, {} skipped{kept}, {} failed",
            self.done.len(),
            self.skipped.len(),
            self.failed.len()
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_file_makes_the_command_fail() {
        let ok = SyncReport {
            done: vec!["a.js".into()],
            skipped: vec![("README.md".into(), "extension".into())],
            ..SyncReport::default()
        };
        assert!(ok.print("pushed").is_ok());
        let failed = SyncReport {
            failed: vec![("b.js".into(), "E_REMOTE".into())],
            ..ok
        };
        let e = failed.print("pushed").err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("1 of 2 files failed to sync; nothing else went wrong (see the FAILED lines)")
        );
        assert_eq!(
            failed.lines("pushed").last().map(String::as_str),
            Some("1 pushed, 1 skipped, 1 failed")
        );
    }

    #[test]
    fn pulled_paths_stay_inside_the_directory() {
        let dir = Path::new("/tmp/out");
        assert_eq!(
            local_path(dir, "lib/x.js"),
            Some(PathBuf::from("/tmp/out/lib/x.js"))
        );
        assert_eq!(
            local_path(dir, "/lib/x.js"),
            Some(PathBuf::from("/tmp/out/lib/x.js"))
        );
        assert_eq!(
            local_path(dir, "a/../x.js"),
            Some(PathBuf::from("/tmp/out/x.js"))
        );
        assert_eq!(local_path(dir, "../x.js"), None);
        assert_eq!(local_path(dir, "c:x.js"), None);
    }
}
