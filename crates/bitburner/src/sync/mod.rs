//! `push`, `pull` and `sync [--watch]`: file sync for players, through the same code as the tools.
//!
//! Every command compares each file with what was last synced (the [`manifest`]), on both sides: a side that
//! still has the synced content is unchanged. Only a changed side is ever copied over an unchanged one, so no
//! edit is lost: a file changed on both sides is a conflict, left untouched, with the game's version kept next
//! to the local one (`a.js` → `a.game.js`), and the command fails unless `--force`.

pub mod manifest;
pub mod watch;

use crate::config::SyncArgs;
use crate::path;
use crate::tools::Ctx;
use crate::tools::args::{FileArgs, WriteArgs};
use bridge_core::ToolError;
use manifest::Manifest;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The file `sync --watch` writes the game's NetScript declarations into; never pushed.
pub const DEFINITIONS_FILE: &str = "NetscriptDefinitions.d.ts";

/// Which way a command copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Local changes to the game.
    Push,
    /// Game changes to the directory.
    Pull,
    /// Both (`sync`).
    Both,
}

/// What one sync did, file by file.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SyncReport {
    pub pushed: Vec<String>,
    pub pulled: Vec<String>,
    /// Files left alone on purpose, with why (a name the game refuses, a symlink out of the directory, a
    /// game edit that `push` does not take back).
    pub skipped: Vec<(String, String)>,
    /// Files changed on both sides since the last sync: left untouched, the game's version written beside
    /// the local one (see [`conflict_copy`]).
    pub conflicts: Vec<String>,
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
    #[error(
        "{count} files changed both here and in the game since the last sync; nothing of either was \
         overwritten (see the CONFLICT lines): merge each into the local file, delete the .game copy and \
         push, or rerun with --force"
    )]
    Conflicts { count: usize },
    #[error("cannot read {path}: {source}")]
    Local {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot watch {path}: {source}")]
    Watch {
        path: PathBuf,
        #[source]
        source: notify::Error,
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

/// Uploads every file under `args.dir` changed here since the last sync (every file, with `--force`).
pub async fn push(ctx: &Ctx, args: &SyncArgs) -> Result<SyncReport, SyncError> {
    reconcile(ctx, args, Direction::Push).await
}

/// Downloads every file of `args.server` changed in the game since the last sync (every file, with `--force`).
pub async fn pull(ctx: &Ctx, args: &SyncArgs) -> Result<SyncReport, SyncError> {
    reconcile(ctx, args, Direction::Pull).await
}

/// What to do with one file, from its last synced hash and both sides' contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Nothing,
    Push,
    Pull,
    Conflict,
    /// Changed in the game only, and this command does not pull.
    GameAhead,
}

/// The rule of the whole module. `None` is a side without the file. A deletion is never copied: a file
/// deleted on one side and unchanged on the other comes back, so a deletion can cost a re-delete, never work.
pub fn decide(
    direction: Direction,
    force: bool,
    base: Option<&str>,
    local: Option<&[u8]>,
    game: Option<&[u8]>,
) -> Action {
    let can_push = direction != Direction::Pull;
    let can_pull = direction != Direction::Push;
    if local == game {
        return Action::Nothing;
    }
    let changed = |side: Option<&[u8]>| match (base, side) {
        (Some(b), Some(c)) => manifest::digest(c) != b,
        (None, None) => false,
        _ => true,
    };
    let push_or_nothing = if can_push && local.is_some() {
        Action::Push
    } else {
        Action::Nothing
    };
    let pull_or_ahead = if game.is_none() {
        Action::Nothing
    } else if can_pull {
        Action::Pull
    } else {
        Action::GameAhead
    };
    if force {
        // Push wins in `sync --force`: the player asked for the local tree.
        return if can_push {
            push_or_nothing
        } else {
            pull_or_ahead
        };
    }
    match (changed(local), changed(game)) {
        (true, true) => match (local, game) {
            (Some(_), Some(_)) => Action::Conflict,
            (None, _) => pull_or_ahead,
            (_, None) => push_or_nothing,
        },
        (true, false) if local.is_some() => push_or_nothing,
        // Deleted here, unchanged in the game: bring it back rather than delete the player's file there.
        (true, false) => pull_or_ahead,
        (false, true) if game.is_some() => pull_or_ahead,
        (false, true) => push_or_nothing,
        (false, false) => Action::Nothing,
    }
}

/// One sync in `direction`: one `getAllFiles`, one scan of the directory, then per file [`decide`].
pub async fn reconcile(
    ctx: &Ctx,
    args: &SyncArgs,
    direction: Direction,
) -> Result<SyncReport, SyncError> {
    let mut report = SyncReport::default();
    let files = scan(&args.dir, &mut report)?;
    wait_for_game(ctx, args).await?;
    let mut game: BTreeMap<String, String> = ctx
        .all_files(&args.server)
        .await?
        .into_iter()
        .map(|f| (f.filename, f.content))
        .collect();
    let mut manifest = Manifest::load(&args.dir);
    let mut seen = BTreeSet::new();
    let server = args.server.as_str();

    for (relative, local_file) in files {
        let stored = match path::validate(&relative, &path::ExtensionSet::ANY_VERSION) {
            Ok(p) => p.path,
            Err(e) => {
                report.skipped.push((relative, e.to_string()));
                continue;
            }
        };
        let content = match tokio::fs::read(&local_file).await {
            Ok(c) => c,
            Err(e) => {
                report.failed.push((relative, e.to_string()));
                continue;
            }
        };
        seen.insert(stored.clone());
        let theirs = game.remove(&stored);
        let action = decide(
            direction,
            args.force,
            manifest.get(server, &stored),
            Some(&content),
            theirs.as_deref().map(str::as_bytes),
        );
        let outcome = apply(
            ctx,
            args,
            &mut manifest,
            &mut report,
            &stored,
            &local_file,
            Some(content),
            theirs,
            action,
        )
        .await;
        if let Err(e) = outcome {
            save_manifest(&manifest, &args.dir);
            return Err(e);
        }
    }
    // Files only the game has (or whose local copy the scan did not enter).
    for (name, content) in game {
        if seen.contains(&name) {
            continue;
        }
        let Some(local_file) = local_path(&args.dir, &name) else {
            report.skipped.push((
                name,
                "not a path that stays inside the directory".to_owned(),
            ));
            continue;
        };
        let mine = tokio::fs::read(&local_file).await.ok();
        let action = decide(
            direction,
            args.force,
            manifest.get(server, &name),
            mine.as_deref(),
            Some(content.as_bytes()),
        );
        let outcome = apply(
            ctx,
            args,
            &mut manifest,
            &mut report,
            &name,
            &local_file,
            mine,
            Some(content),
            action,
        )
        .await;
        if let Err(e) = outcome {
            save_manifest(&manifest, &args.dir);
            return Err(e);
        }
    }
    save_manifest(&manifest, &args.dir);
    Ok(report)
}

/// Carries out one [`Action`]. Only a lost game connection stops the whole sync.
#[allow(clippy::too_many_arguments)]
async fn apply(
    ctx: &Ctx,
    args: &SyncArgs,
    manifest: &mut Manifest,
    report: &mut SyncReport,
    name: &str,
    local_file: &Path,
    mine: Option<Vec<u8>>,
    theirs: Option<String>,
    action: Action,
) -> Result<(), SyncError> {
    let server = args.server.as_str();
    match action {
        Action::Nothing => {
            if let (Some(m), Some(t)) = (&mine, &theirs)
                && m == t.as_bytes()
            {
                manifest.record(server, name, m);
            }
        }
        Action::GameAhead => report.skipped.push((
            name.to_owned(),
            "changed in the game since the last sync: pull it (push never overwrites a game edit)"
                .to_owned(),
        )),
        Action::Conflict => {
            if let Some(t) = &theirs {
                let copy = conflict_copy(local_file);
                // Rewritten only when it differs, so `--watch` does not wake itself every round.
                let same = std::fs::read(&copy).is_ok_and(|c| c == t.as_bytes());
                let written = if same {
                    Ok(())
                } else {
                    std::fs::write(&copy, t.as_bytes())
                };
                if let Err(e) = written {
                    report.failed.push((
                        name.to_owned(),
                        format!(
                            "changed on both sides, and the game's version cannot be kept in {}: {e}",
                            copy.display()
                        ),
                    ));
                    return Ok(());
                }
            }
            report.conflicts.push(name.to_owned());
        }
        Action::Push => {
            let Some(bytes) = mine else {
                return Ok(());
            };
            let content = match String::from_utf8(bytes) {
                Ok(c) => c,
                Err(_) => {
                    report.failed.push((
                        name.to_owned(),
                        "not UTF-8 text; the game stores only text".to_owned(),
                    ));
                    return Ok(());
                }
            };
            // The game has no compare-and-swap: look again right before writing, so a game edit made since
            // this round's listing is not overwritten (the next round sees it and decides again).
            if theirs.is_some() {
                let args = FileArgs {
                    filename: name.to_owned(),
                    server: args.server.clone(),
                };
                match ctx.file_content(&args).await {
                    Ok((_, now)) if Some(&now) != theirs.as_ref() => return Ok(()),
                    Err(e) if e.code() == bridge_core::ErrorCode::Disconnected => {
                        return Err(e.into());
                    }
                    _ => {}
                }
            }
            let hash = manifest::digest(&content);
            let write = WriteArgs {
                filename: name.to_owned(),
                content,
                server: args.server.clone(),
            };
            match ctx.write_file(write).await {
                Ok(w) => {
                    manifest.record_digest(server, &w.filename, hash);
                    report.pushed.push(w.filename);
                }
                Err(e) if e.code() == bridge_core::ErrorCode::Disconnected => {
                    return Err(e.into());
                }
                Err(e) => report.failed.push((name.to_owned(), e.to_string())),
            }
        }
        Action::Pull => {
            let Some(content) = theirs else {
                return Ok(());
            };
            // A save between reading the file and now is an edit this round did not see: leave it to the next.
            if tokio::fs::read(local_file).await.ok() != mine {
                return Ok(());
            }
            let written = async {
                if let Some(parent) = local_file.parent() {
                    tokio::fs::create_dir_all(parent).await?;
                }
                tokio::fs::write(local_file, content.as_bytes()).await
            }
            .await;
            match written {
                Ok(()) => {
                    manifest.record(server, name, content.as_bytes());
                    report.pulled.push(name.to_owned());
                }
                Err(e) => report.failed.push((name.to_owned(), e.to_string())),
            }
        }
    }
    Ok(())
}

/// A manifest that cannot be written costs only the protection of the next sync; say so and go on.
fn save_manifest(manifest: &Manifest, dir: &Path) {
    if let Err(e) = manifest.save(dir) {
        eprintln!(
            "warning: cannot write {}: {e}; the next sync will treat every file that differs from the game \
             as a conflict",
            Manifest::path(dir).display()
        );
    }
}

/// Where the game's version of a conflicting file is kept: `.game` before the extension (`lib/a.js` →
/// `lib/a.game.js`), so editors still highlight it.
pub fn conflict_copy(local: &Path) -> PathBuf {
    let name = local
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let copy = match name.rfind('.') {
        Some(dot) if dot > 0 => format!("{}.game{}", &name[..dot], &name[dot..]),
        _ => format!("{name}.game"),
    };
    local.with_file_name(copy)
}

/// Whether `name` in `siblings` is a conflict copy of a file next to it (`a.game.js` beside `a.js`).
fn copy_of<'a>(name: &str, siblings: &'a BTreeSet<String>) -> Option<&'a String> {
    let dot = name.rfind('.')?;
    let stem = name[..dot].strip_suffix(".game")?;
    siblings.get(&format!("{stem}{}", &name[dot..]))
}

/// Where a game path lands under `dir`; `None` for anything that could leave it (the game never sends such
/// paths, but this is a file written from data another program sent). `:` is an ordinary character in a game
/// name and on Unix; only Windows reads it as a drive or stream.
fn local_path(dir: &Path, game_path: &str) -> Option<PathBuf> {
    let resolved = path::resolve_file_path(game_path)?;
    let mut out = dir.to_path_buf();
    for segment in resolved.split('/') {
        if segment.is_empty()
            || segment == "."
            || segment == ".."
            || segment.contains('\\')
            || (cfg!(windows) && segment.contains(':'))
        {
            return None;
        }
        out.push(segment);
    }
    Some(out)
}

/// Every file under `dir` as (path relative to it with `/` separators, local path). Hidden directories and
/// `node_modules` are not the player's scripts and are not entered; the manifest, the definitions file and
/// conflict copies are not game files. A symlink is followed when it leads to a place inside `dir`; any
/// other is listed in `report.skipped` with why.
fn scan(dir: &Path, report: &mut SyncReport) -> Result<Vec<(String, PathBuf)>, SyncError> {
    let root = std::fs::canonicalize(dir).map_err(|source| SyncError::Local {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    let mut visited = BTreeSet::from([root.clone()]);
    walk(&root, dir, dir, &mut visited, &mut out, report)?;
    out.sort();
    report.skipped.sort();
    Ok(out)
}

fn walk(
    root: &Path,
    top: &Path,
    dir: &Path,
    visited: &mut BTreeSet<PathBuf>,
    out: &mut Vec<(String, PathBuf)>,
    report: &mut SyncReport,
) -> Result<(), SyncError> {
    let local = |source| SyncError::Local {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(local)?
        .collect::<Result<_, _>>()
        .map_err(local)?;
    entries.sort_by_key(|e| e.file_name());
    let names: BTreeSet<String> = entries
        .iter()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let relative = path
            .strip_prefix(top)
            .unwrap_or(&path)
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/");
        let mut kind = entry.file_type().map_err(local)?;
        if kind.is_symlink() {
            let target = match std::fs::canonicalize(&path) {
                Ok(t) => t,
                Err(_) => {
                    report.skipped.push((
                        relative,
                        "a broken symlink (its target does not exist)".to_owned(),
                    ));
                    continue;
                }
            };
            if !target.starts_with(root) {
                report.skipped.push((
                    relative,
                    format!(
                        "a symlink to {}, outside the synced directory: not followed",
                        target.display()
                    ),
                ));
                continue;
            }
            kind = match std::fs::metadata(&path) {
                Ok(m) => m.file_type(),
                Err(_) => continue,
            };
            if kind.is_dir() && !visited.insert(target) {
                continue;
            }
        }
        if kind.is_dir() {
            if !name.starts_with('.') && name != "node_modules" {
                walk(root, top, &path, visited, out, report)?;
            }
        } else if kind.is_file() {
            if dir == top && (name == manifest::FILE_NAME || name == DEFINITIONS_FILE) {
                continue;
            }
            if let Some(original) = copy_of(&name, &names) {
                report.skipped.push((
                    relative,
                    format!(
                        "the game's version of {original}, kept by a conflict: merge it into {original} and \
                         delete it"
                    ),
                ));
                continue;
            }
            out.push((relative, path));
        }
    }
    Ok(())
}

impl SyncReport {
    pub fn is_empty(&self) -> bool {
        self.pushed.is_empty()
            && self.pulled.is_empty()
            && self.conflicts.is_empty()
            && self.failed.is_empty()
    }

    /// One line per file, then a summary; for the terminal. Fails when any file failed or conflicts, so the
    /// command exits non-zero and a script driving it notices.
    pub fn print(&self, verb: &str) -> Result<(), SyncError> {
        for line in self.lines(verb) {
            println!("{line}");
        }
        self.outcome()
    }

    /// The error the command exits with, if any.
    pub fn outcome(&self) -> Result<(), SyncError> {
        if !self.failed.is_empty() {
            return Err(SyncError::Incomplete {
                failed: self.failed.len(),
                total: self.pushed.len() + self.pulled.len() + self.failed.len(),
            });
        }
        if !self.conflicts.is_empty() {
            return Err(SyncError::Conflicts {
                count: self.conflicts.len(),
            });
        }
        Ok(())
    }

    /// The per-file lines and the summary; `verb` names the command (`pushed`, `pulled`, `synced`).
    pub fn lines(&self, verb: &str) -> Vec<String> {
        let mut out: Vec<String> = self.pushed.iter().map(|f| format!("pushed {f}")).collect();
        out.extend(self.pulled.iter().map(|f| format!("pulled {f}")));
        out.extend(
            self.skipped
                .iter()
                .map(|(f, why)| format!("skipped {f}: {why}")),
        );
        out.extend(self.conflicts.iter().map(|f| {
            let copy = conflict_copy(Path::new(f));
            format!(
                "CONFLICT {f}: changed here and in the game since the last sync; both kept, the game's version \
                 in {} (merge, delete it, push; or --force)",
                copy.display()
            )
        }));
        out.extend(
            self.failed
                .iter()
                .map(|(f, why)| format!("FAILED {f}: {why}")),
        );
        let moved = match verb {
            "pushed" => format!("{} pushed", self.pushed.len()),
            "pulled" => format!("{} pulled", self.pulled.len()),
            _ => format!("{} pushed, {} pulled", self.pushed.len(), self.pulled.len()),
        };
        let conflicts = if self.conflicts.is_empty() {
            String::new()
        } else {
            format!(", {} conflicts", self.conflicts.len())
        };
        out.push(format!(
            "{moved}, {} skipped{conflicts}, {} failed",
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
            pushed: vec!["a.js".into()],
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
    fn only_a_changed_side_is_copied_and_both_changed_is_a_conflict() {
        let base = manifest::digest(b"v1");
        let b = Some(base.as_str());
        let (v1, v2, v3): (&[u8], &[u8], &[u8]) = (b"v1", b"v2", b"v3");
        use Action as A;
        use Direction as D;
        type Case<'a> = (
            Direction,
            Option<&'a str>,
            Option<&'a [u8]>,
            Option<&'a [u8]>,
            Action,
        );
        let cases: &[Case<'_>] = &[
            (D::Push, b, Some(v2), Some(v1), A::Push),
            (D::Push, b, Some(v1), Some(v2), A::GameAhead),
            (D::Push, b, Some(v2), Some(v3), A::Conflict),
            (D::Push, b, Some(v2), Some(v2), A::Nothing),
            (D::Push, None, Some(v1), None, A::Push),
            (D::Push, None, Some(v1), Some(v2), A::Conflict),
            (D::Push, b, Some(v1), None, A::Push),
            (D::Pull, b, Some(v1), Some(v2), A::Pull),
            (D::Pull, b, Some(v2), Some(v1), A::Nothing),
            (D::Pull, b, Some(v2), Some(v3), A::Conflict),
            (D::Pull, None, None, Some(v2), A::Pull),
            (D::Pull, b, None, Some(v1), A::Pull),
            (D::Both, b, Some(v2), Some(v1), A::Push),
            (D::Both, b, Some(v1), Some(v2), A::Pull),
            (D::Both, b, Some(v3), Some(v2), A::Conflict),
        ];
        for (direction, base, local, game, want) in cases {
            assert_eq!(
                decide(*direction, false, *base, *local, *game),
                *want,
                "{direction:?} base {base:?} local {local:?} game {game:?}"
            );
        }
        assert_eq!(decide(D::Push, true, b, Some(v2), Some(v3)), A::Push);
        assert_eq!(decide(D::Pull, true, b, Some(v2), Some(v3)), A::Pull);
    }

    #[test]
    fn conflict_copies_keep_the_extension() {
        assert_eq!(
            conflict_copy(Path::new("/d/lib/a.js")),
            PathBuf::from("/d/lib/a.game.js")
        );
        assert_eq!(
            conflict_copy(Path::new("x.tar.txt")),
            PathBuf::from("x.tar.game.txt")
        );
        let siblings = BTreeSet::from(["a.js".to_owned(), "a.game.js".to_owned()]);
        assert_eq!(
            copy_of("a.game.js", &siblings).map(String::as_str),
            Some("a.js")
        );
        assert_eq!(copy_of("b.game.js", &siblings), None);
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
        assert_eq!(
            local_path(dir, "c:x.js").is_some(),
            !cfg!(windows),
            "`:` is a plain character except on Windows"
        );
    }
}
