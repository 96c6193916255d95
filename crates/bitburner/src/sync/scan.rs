//! Which local files a sync considers: the walk of the synced directory.

use super::manifest::{self, Manifest};
use super::{DEFINITIONS_FILE, SyncError, SyncReport, copy_of, write};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Every file under `dir` as (path relative to it with `/` separators, local path). Hidden directories and
/// `node_modules` are not the player's scripts and are not entered; the manifest, the definitions file,
/// conflict copies and the sync's temporary files are not game files, and an editor's own files
/// ([`editor_file`]) are passed over without a word. A symlink is followed when it leads to
/// a place inside `dir`; any other, and a subdirectory that cannot be read, is listed in `report.skipped`
/// with why.
pub(super) fn scan(
    dir: &Path,
    manifest: &Manifest,
    server: &str,
    report: &mut SyncReport,
) -> Result<Vec<(String, PathBuf)>, SyncError> {
    let root = std::fs::canonicalize(dir).map_err(|source| SyncError::Local {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    let mut walk = Walk {
        root: &root,
        top: dir,
        manifest,
        server,
        visited: BTreeSet::from([root.clone()]),
        out: &mut out,
        report,
    };
    walk.dir(dir)?;
    out.sort();
    report.skipped.sort();
    Ok(out)
}

struct Walk<'a> {
    root: &'a Path,
    top: &'a Path,
    manifest: &'a Manifest,
    server: &'a str,
    visited: BTreeSet<PathBuf>,
    out: &'a mut Vec<(String, PathBuf)>,
    report: &'a mut SyncReport,
}

impl Walk<'_> {
    fn relative(&self, path: &Path) -> String {
        path.strip_prefix(self.top)
            .unwrap_or(path)
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/")
    }

    fn dir(&mut self, dir: &Path) -> Result<(), SyncError> {
        let listed = std::fs::read_dir(dir).and_then(|r| r.collect::<Result<Vec<_>, _>>());
        let mut entries = match listed {
            Ok(e) => e,
            Err(source) if dir == self.top => {
                return Err(SyncError::Local {
                    path: dir.to_path_buf(),
                    source,
                });
            }
            // One unreadable subdirectory must not stop the rest (nor end `--watch`).
            Err(e) => {
                let relative = self.relative(dir);
                self.report.skipped.push((
                    relative,
                    format!("a directory that cannot be read ({e}): not synced"),
                ));
                return Ok(());
            }
        };
        entries.sort_by_key(|e| e.file_name());
        let names: BTreeSet<String> = entries
            .iter()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        for entry in entries {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let relative = self.relative(&path);
            let mut kind = match entry.file_type() {
                Ok(k) => k,
                Err(e) => {
                    self.report
                        .skipped
                        .push((relative, format!("cannot be read ({e})")));
                    continue;
                }
            };
            // Before the symlink checks: emacs' lock `.#a.js` is a symlink to nowhere.
            if !kind.is_dir() && editor_file(&name, &names) {
                continue;
            }
            if kind.is_symlink() {
                let target = match std::fs::canonicalize(&path) {
                    Ok(t) => t,
                    Err(_) => {
                        self.report.skipped.push((
                            relative,
                            "a broken symlink (its target does not exist)".to_owned(),
                        ));
                        continue;
                    }
                };
                if !target.starts_with(self.root) {
                    self.report.skipped.push((
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
                if kind.is_dir() && !self.visited.insert(target) {
                    continue;
                }
            }
            if kind.is_dir() {
                if entered(&name) {
                    self.dir(&path)?;
                }
            } else if kind.is_file() {
                let at_top = dir == self.top;
                if (at_top && (name == manifest::FILE_NAME || name == DEFINITIONS_FILE))
                    || name.starts_with(write::TEMP_PREFIX)
                {
                    continue;
                }
                // A copy the sync wrote is never a game file; a file named like one is, when the record
                // knows it as synced (the game really has `a.game.js`). Unrecorded, the name decides.
                let original = match self.manifest.copy(&relative) {
                    Some(copy) => Some(copy.of.clone()),
                    None if self.manifest.get(self.server, &relative).is_none() => {
                        copy_of(&name, &names).cloned()
                    }
                    None => None,
                };
                if let Some(original) = original {
                    self.report.skipped.push((
                        relative,
                        format!(
                            "the game's version of {original}, kept by a conflict: merge it into {original} \
                             and delete it"
                        ),
                    ));
                    continue;
                }
                self.out.push((relative, path));
            }
        }
        Ok(())
    }
}

/// An editor's own file beside the one it edits: a swap, backup, lock, auto-save or probe file, or the
/// temporary file of a save through a rename. `siblings` are the names in the same directory.
///
/// Most of these the game refuses anyway (a `~` or `#`, or no extension it stores), so skipping them only
/// spares a `skipped` line per file; they are vim's (`.a.js.swp` .. `.swa`, `a.js~`, `.a.js.un~`, the write
/// probe `4913`), emacs' (`#a.js#`, `.#a.js`, `a.js~`), JetBrains' safe write (`a.js___jb_tmp___`,
/// `___jb_old___`, `___jb_bak___`), Kate's (`.a.js.kate-swp`), GLib's (`.goutputstream-*`, gedit) and macOS'
/// `.DS_Store`. Three kinds the game would store, so they must not go: macOS' AppleDouble `._a.js` and
/// emacs' checker copies `flycheck_a.js` and `a_flymake.js`, each only when `a.js` is beside it, so a
/// player's script merely named like one is still synced.
pub(super) fn editor_file(name: &str, siblings: &BTreeSet<String>) -> bool {
    const JETBRAINS: &[&str] = &["___jb_tmp___", "___jb_old___", "___jb_bak___"];
    let vim_swap = name.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty()
            && ext.len() == 3
            && ext.starts_with("sw")
            && ext
                .as_bytes()
                .get(2)
                .is_some_and(|c| (b'a'..=b'p').contains(c))
    });
    let beside = |original: Option<&str>| original.is_some_and(|o| siblings.contains(o));
    let flymake = name
        .rsplit_once('.')
        .and_then(|(stem, ext)| Some(format!("{}.{ext}", stem.strip_suffix("_flymake")?)));
    name.ends_with('~')
        || (name.len() > 1 && name.starts_with('#') && name.ends_with('#'))
        || name.starts_with(".#")
        || vim_swap
        || (!name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()))
        || JETBRAINS.iter().any(|s| name.ends_with(s))
        || name.ends_with(".kate-swp")
        || name.starts_with(".goutputstream-")
        || name == ".DS_Store"
        || beside(name.strip_prefix("._"))
        || beside(name.strip_prefix("flycheck_"))
        || beside(flymake.as_deref())
}

/// Whether the scan enters a directory of this name: hidden ones (the sync's own `.bitburner-sync/`, `.git`)
/// and `node_modules` hold no player's scripts.
pub(super) fn entered(dir_name: &str) -> bool {
    !dir_name.starts_with('.') && dir_name != "node_modules"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::{ExtensionSet, validate};

    #[test]
    fn editor_files_are_known_and_players_scripts_are_not_taken_for_them() {
        let siblings: BTreeSet<String> = ["a.js", "lib.ts"].iter().map(|s| s.to_string()).collect();
        let editors = [
            ".a.js.swp",
            ".a.js.swo",
            ".a.js.swa",
            "a.js~",
            ".a.js.un~",
            "4913",
            "#a.js#",
            ".#a.js",
            "a.js___jb_tmp___",
            "a.js___jb_old___",
            "a.js___jb_bak___",
            ".a.js.kate-swp",
            ".goutputstream-X1Y2Z3",
            ".DS_Store",
            "._a.js",
            "flycheck_a.js",
            "a_flymake.js",
            "lib_flymake.ts",
        ];
        for name in editors {
            assert!(editor_file(name, &siblings), "{name} is an editor's file");
        }
        // The ones the game would store are exactly the three kept beside their file.
        let storable: Vec<&str> = editors
            .into_iter()
            .filter(|n| validate(n, &ExtensionSet::ANY_VERSION).is_ok())
            .collect();
        assert_eq!(
            storable,
            ["._a.js", "flycheck_a.js", "a_flymake.js", "lib_flymake.ts"]
        );
        let players = [
            "a.js",
            "swap.js",
            "x.swp.js",
            "2024.txt",
            "hash#.js",
            "._b.js",
            "flycheck_b.js",
            "b_flymake.js",
            "jb.js",
            "notes.txt",
            ".hidden.js",
        ];
        for name in players {
            assert!(
                !editor_file(name, &siblings),
                "{name} may be a player's script"
            );
        }
    }
}
