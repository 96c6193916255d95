//! `push`, `pull` and `sync [--watch]`: file sync for players, through the same code as the tools.
//!
//! Every command compares each file with what was last synced (the [`manifest`]), on both sides: a side that
//! still has the synced content is unchanged. Only a changed side is ever copied over an unchanged one, so no
//! edit is lost: a file changed on both sides is a conflict, left untouched, with the game's version kept next
//! to the local one (`a.js` → `a.game.js`), and the command fails unless `--force`. A game showing an older
//! synced version (an older save loaded) made no edit: it never wins over the local file. Every local write
//! goes through [`write::write_inside`] (inside the directory, never through a symlink, atomic), and what a
//! pull replaces is kept first ([`replaced`]).

mod copies;
pub mod manifest;
pub mod replaced;
mod report;
mod scan;
pub mod settle;
pub mod watch;
pub mod write;

use crate::config::SyncArgs;
use crate::path;
use crate::tools::Ctx;
use crate::tools::args::{FileArgs, WriteArgs};
use bridge_core::ToolError;
pub use copies::conflict_copy;
use copies::{copy_name, copy_of};
use manifest::Manifest;
use scan::scan;
use settle::{Look, Settle};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use write::{WriteError, readable_path, write_inside};

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
    /// Files the game had gone back to an older synced version of (restarted from an older save, another
    /// build): never pulled; the local one is pushed (and also listed in `pushed`) or, by `pull`, kept.
    pub rolled_back: Vec<String>,
    /// Local content a pull replaced, and where it was kept (relative to the directory).
    pub replaced: Vec<(String, String)>,
    /// Where the game's version of each conflicting file was kept (relative to the directory).
    pub conflict_copies: BTreeMap<String, String>,
    /// What the player must know that is about no one file: a record that could not be read or written.
    pub notes: Vec<String>,
    /// `--watch` only: local files that have kept changing for a while, so were not pushed (never half-written),
    /// with why.
    pub still_changing: Vec<(String, String)>,
    /// `--watch` only: files (by their game names) this round left alone because the local one was mid-save;
    /// nothing was decided about them, so what an earlier round said of them still holds.
    pub left_for_later: Vec<String>,
    /// Files pushed over the game's version because their conflict copy was deleted (also listed in `pushed`;
    /// the game's version is kept first, in `replaced`).
    pub resolved: Vec<String>,
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
    /// The game shows an older synced version (an older save, another build): push the local one back.
    Restore,
    /// The same, and this command does not push: keep the local one and say so.
    RolledBack,
}

/// The rule of the whole module. `base` is the hash synced last, `older` those synced before it; `None` is a
/// side without the file. A deletion is never copied: a file deleted on one side and unchanged on the other
/// comes back, so a deletion can cost a re-delete, never work.
pub fn decide(
    direction: Direction,
    force: bool,
    base: Option<&str>,
    older: &[String],
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
    // The game holds content this directory synced before the last sync: nothing new was made there (the
    // game restarted from an older save, another build connected), so it carries no edit to take, and
    // taking it would throw away the newer local file, the only copy of it left.
    if let (Some(_), Some(g)) = (local, game) {
        let g = manifest::digest(g);
        if base != Some(g.as_str()) && older.contains(&g) {
            return if can_push {
                Action::Restore
            } else {
                Action::RolledBack
            };
        }
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
    reconcile_settled(ctx, args, direction, None).await
}

/// [`reconcile`], taking a local file only once it holds still (`--watch`: [`settle`]); a file still being
/// saved is left, on both sides, to a later round.
pub async fn reconcile_settled(
    ctx: &Ctx,
    args: &SyncArgs,
    direction: Direction,
    mut settle: Option<&mut Settle>,
) -> Result<SyncReport, SyncError> {
    if let Some(s) = settle.as_deref_mut() {
        s.begin_round();
    }
    let mut report = SyncReport::default();
    let server = args.server.as_str();
    let (mut manifest, unreadable) = Manifest::load(&args.dir);
    if let Some(why) = unreadable {
        report.notes.push(set_aside(&args.dir, &why));
    }
    // A copy the player deleted or renamed is no longer ours to track, and its conflict is resolved: the way
    // out the report gives is "merge, delete the copy, push". The game's version the copy held has been seen,
    // so it is now what both sides are compared with: the local file (merged, or kept as it was) is the newer
    // one and is pushed, the game's version kept first (a copy removed by a cleanup, not a merge, loses
    // nothing), while a game changed again since the copy was taken still conflicts.
    let gone = gone_copies(&manifest, &args.dir, settle.as_deref_mut()).await;
    let gone = manifest.retain_copies(|p| !gone.contains(p));
    let mut resolved = BTreeSet::new();
    for copy in gone {
        let Ok(name) = path::validate(&copy.of, &path::ExtensionSet::ANY_VERSION) else {
            continue;
        };
        // A version synced since (or before) was settled another way; taking it back as the base would
        // make a later game edit look like a conflict.
        let settled = manifest.get(&copy.server, &name.path) == Some(copy.hash.as_str())
            || manifest
                .older(&copy.server, &name.path)
                .contains(&copy.hash);
        if !settled {
            manifest.record_digest(&copy.server, &name.path, copy.hash);
            if copy.server == server {
                resolved.insert(name.path);
            }
        }
    }
    let files = scan(&args.dir, &manifest, server, &mut report)?;
    wait_for_game(ctx, args).await?;
    let mut game: BTreeMap<String, String> = ctx
        .all_files(&args.server)
        .await?
        .into_iter()
        .map(|f| (f.filename, f.content))
        .collect();
    let game_names: BTreeSet<String> = game.keys().cloned().collect();
    let mut round = Round {
        ctx,
        args,
        manifest: &mut manifest,
        report: &mut report,
        game_names: &game_names,
        resolved: &resolved,
        settle,
    };
    let outcome = round.files(files, &mut game, direction).await;
    if let Some(s) = round.settle {
        round.report.still_changing = s.end_round();
    }
    if let Some(note) = save_manifest(&manifest, &args.dir) {
        report.notes.push(note);
    }
    outcome.map(|()| report)
}

/// One file as both sides name it: the game's name, the local path relative to the directory, the path.
struct Target<'a> {
    name: &'a str,
    relative: &'a str,
    local: &'a Path,
}

/// What one [`reconcile`] works on.
struct Round<'a> {
    ctx: &'a Ctx,
    args: &'a SyncArgs,
    manifest: &'a mut Manifest,
    report: &'a mut SyncReport,
    /// Every file the game has this round, so a conflict copy never takes a game file's name.
    game_names: &'a BTreeSet<String>,
    /// Files (game names) whose conflict this round found resolved: their copy was deleted.
    resolved: &'a BTreeSet<String>,
    /// `--watch`: what the local files looked like in earlier rounds.
    settle: Option<&'a mut Settle>,
}

impl Round<'_> {
    /// A local file's content for this round, `None` when there is none. Without [`Settle`] (one command) it
    /// is read as it is. A file that is there but cannot be read is [`Look::Failed`], never taken for absent: a
    /// file deleted here is pulled back, and that would write over it with nothing kept.
    async fn read_local(&mut self, relative: &str, path: &Path) -> Look {
        match self.settle.as_deref_mut() {
            Some(s) => s.look(relative, path).await,
            None => match write::read_regular(path).await {
                Ok(c) => Look::Ready(Some(c)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Look::Ready(None),
                Err(e) => Look::Failed(e),
            },
        }
    }

    async fn files(
        &mut self,
        files: Vec<(String, PathBuf)>,
        game: &mut BTreeMap<String, String>,
        direction: Direction,
    ) -> Result<(), SyncError> {
        let server = self.args.server.clone();
        let mut seen = BTreeSet::new();
        for (relative, local_file) in files {
            let stored = match path::validate(&relative, &path::ExtensionSet::ANY_VERSION) {
                Ok(p) => p.path,
                Err(e) => {
                    self.report.skipped.push((relative, e.to_string()));
                    continue;
                }
            };
            let content = match self.read_local(&relative, &local_file).await {
                Look::Ready(Some(c)) => c,
                // Mid-save (or gone since the scan): neither side is touched this round, not even the game's
                // version of it, which the loop below would otherwise take for a game-only file.
                Look::Ready(None) | Look::Changing => {
                    self.report.left_for_later.push(stored.clone());
                    seen.insert(stored);
                    continue;
                }
                Look::Failed(e) => {
                    self.report.failed.push((relative, e.to_string()));
                    // Nor is the game's version of it then a game-only file, for the loop below to pull.
                    seen.insert(stored);
                    continue;
                }
            };
            seen.insert(stored.clone());
            let theirs = game.remove(&stored);
            let action = decide(
                direction,
                self.args.force,
                self.manifest.get(&server, &stored),
                self.manifest.older(&server, &stored),
                Some(&content),
                theirs.as_deref().map(str::as_bytes),
            );
            let target = Target {
                name: &stored,
                relative: &relative,
                local: &local_file,
            };
            self.apply(&target, Some(content), theirs, action).await?;
        }
        // Files only the game has (or whose local copy the scan did not enter).
        for (name, content) in std::mem::take(game) {
            if seen.contains(&name) {
                continue;
            }
            let Some(relative) = local_relative(&name) else {
                self.report.skipped.push((
                    name,
                    "not a path the sync writes: it leaves the directory, or is a hidden folder, node_modules \
                     or a name the sync keeps for itself"
                        .to_owned(),
                ));
                continue;
            };
            if let Some(copy) = self.manifest.copy(&relative) {
                let why = format!(
                    "the conflict copy of {} is kept here under this name: not synced (rename the copy to \
                     sync this game file)",
                    copy.of
                );
                self.report.skipped.push((name, why));
                continue;
            }
            // Never read through a symlink the scan refused: it could push a file from outside the directory.
            let local_file = match readable_path(&self.args.dir, &relative) {
                Ok(p) => p,
                Err(e) => {
                    self.report.skipped.push((name, e.to_string()));
                    continue;
                }
            };
            let mine = match self.read_local(&relative, &local_file).await {
                Look::Ready(mine) => mine,
                // Renamed away a moment ago: an editor's save in progress, not a deletion to undo.
                Look::Changing => {
                    self.report.left_for_later.push(name);
                    continue;
                }
                Look::Failed(e) => {
                    self.report.failed.push((name, e.to_string()));
                    continue;
                }
            };
            let action = decide(
                direction,
                self.args.force,
                self.manifest.get(&server, &name),
                self.manifest.older(&server, &name),
                mine.as_deref(),
                Some(content.as_bytes()),
            );
            let target = Target {
                name: &name,
                relative: &relative,
                local: &local_file,
            };
            self.apply(&target, mine, Some(content), action).await?;
        }
        Ok(())
    }

    /// Carries out one [`Action`]. Only a lost game connection stops the whole sync.
    async fn apply(
        &mut self,
        target: &Target<'_>,
        mine: Option<Vec<u8>>,
        theirs: Option<String>,
        action: Action,
    ) -> Result<(), SyncError> {
        let server = self.args.server.as_str();
        let name = target.name;
        match action {
            Action::Nothing => {
                if let (Some(m), Some(t)) = (&mine, &theirs)
                    && m == t.as_bytes()
                {
                    self.manifest.record(server, name, m);
                }
            }
            Action::GameAhead => self.report.skipped.push((
                name.to_owned(),
                "changed in the game since the last sync: pull it (push never overwrites a game edit)"
                    .to_owned(),
            )),
            Action::RolledBack => self.report.rolled_back.push(name.to_owned()),
            Action::Conflict => {
                if let Some(t) = &theirs {
                    match self.keep_conflict_copy(target.relative, t) {
                        Ok(copy) => {
                            self.report.conflict_copies.insert(name.to_owned(), copy);
                        }
                        Err(e) => {
                            self.report.failed.push((
                                name.to_owned(),
                                format!(
                                    "changed on both sides, and the game's version cannot be kept beside it: {e}"
                                ),
                            ));
                            return Ok(());
                        }
                    }
                }
                self.report.conflicts.push(name.to_owned());
            }
            Action::Push | Action::Restore => {
                let Some(bytes) = mine else {
                    return Ok(());
                };
                let content = match String::from_utf8(bytes) {
                    Ok(c) => c,
                    Err(_) => {
                        self.report.failed.push((
                            name.to_owned(),
                            "not UTF-8 text; the game stores only text".to_owned(),
                        ));
                        return Ok(());
                    }
                };
                // The game has no compare-and-swap: look again right before writing, so a game edit made
                // since this round's listing is not overwritten (the next round sees it and decides again).
                if theirs.is_some() {
                    let args = FileArgs {
                        filename: name.to_owned(),
                        server: self.args.server.clone(),
                    };
                    // Not pushed then, and said so: a push that left a file out has not finished.
                    let not_pushed = match self.ctx.file_content(&args).await {
                        Ok((_, now)) if Some(&now) == theirs.as_ref() => None,
                        Ok(_) => Some(
                            "changed in the game during this sync, so not pushed over; sync again to \
                             decide"
                                .to_owned(),
                        ),
                        Err(e) if e.code() == bridge_core::ErrorCode::Disconnected => {
                            return Err(e.into());
                        }
                        Err(e) => Some(format!(
                            "the game's copy could not be looked at again right before writing, so not \
                             pushed over: {e}"
                        )),
                    };
                    if let Some(why) = not_pushed {
                        self.report.failed.push((name.to_owned(), why));
                        return Ok(());
                    }
                }
                // The game's version goes only once it is kept: what it went back to (Restore) is an older
                // version the directory had, but maybe not one the player wants gone (a revert made in the game
                // on purpose); a conflict resolved by deleting its copy may have lost that copy to a cleanup
                // rather than a merge.
                let resolving = action == Action::Push && self.resolved.contains(name);
                let keep_first = match action {
                    Action::Restore => Some("the game's older version"),
                    _ if resolving => Some("the game's version"),
                    _ => None,
                };
                if let (Some(what), Some(game_version)) = (keep_first, &theirs) {
                    let refused = format!("not pushed: {what} could not be kept first");
                    let kept_as = copy_name(name, 0);
                    if !self.keep_first(name, &kept_as, game_version.as_bytes(), &refused) {
                        return Ok(());
                    }
                }
                let hash = manifest::digest(&content);
                let write = WriteArgs {
                    filename: name.to_owned(),
                    content,
                    server: self.args.server.clone(),
                };
                match self.ctx.write_file(write).await {
                    Ok(w) => {
                        self.manifest.record_digest(server, &w.filename, hash);
                        if action == Action::Restore {
                            self.report.rolled_back.push(w.filename.clone());
                        }
                        if resolving {
                            self.report.resolved.push(w.filename.clone());
                        }
                        self.report.pushed.push(w.filename);
                    }
                    Err(e) if e.code() == bridge_core::ErrorCode::Disconnected => {
                        return Err(e.into());
                    }
                    Err(e) => self.report.failed.push((name.to_owned(), e.to_string())),
                }
            }
            Action::Pull => {
                let Some(content) = theirs else {
                    return Ok(());
                };
                // A save between reading the file and now is an edit this round did not see: leave it to the next.
                if write::read_regular(target.local).await.ok() != mine {
                    return Ok(());
                }
                let dir = &self.args.dir;
                // Refused before anything is kept: a symlink is never written through.
                if let Err(e) = readable_path(dir, target.relative) {
                    self.report.skipped.push((name.to_owned(), e.to_string()));
                    return Ok(());
                }
                if let Some(old) = &mine
                    && old.as_slice() != content.as_bytes()
                {
                    let refused = "not pulled: the local version could not be kept first";
                    if !self.keep_first(name, name, old, refused) {
                        return Ok(());
                    }
                }
                match write_inside(dir, target.relative, content.as_bytes()) {
                    Ok(()) => {
                        self.manifest.record(server, name, content.as_bytes());
                        self.report.pulled.push(name.to_owned());
                    }
                    Err(WriteError::Refused(why)) => self.report.skipped.push((name.to_owned(), why)),
                    Err(e) => self.report.failed.push((name.to_owned(), e.to_string())),
                }
            }
        }
        Ok(())
    }

    /// Writes the game's version of a conflicting file beside the local one and returns where (relative to
    /// the directory). Never over a file the player may care about: a real game file of that name, a copy
    /// the player has edited (merging in it, say) or anything it did not write; then the next free name
    /// (`a.game.1.js`, ...). A version the player already has in a copy is not written again.
    /// Keeps `content` (what a write about to happen to `name` replaces) under `kept_as` in the replaced files,
    /// and says where; false, with `name` failed as `refused` says, when it cannot be kept (then nothing is
    /// written).
    fn keep_first(&mut self, name: &str, kept_as: &str, content: &[u8], refused: &str) -> bool {
        match replaced::keep(&self.args.dir, kept_as, content) {
            Ok(kept) => {
                self.report.replaced.push((name.to_owned(), kept));
                true
            }
            Err(e) => {
                self.report
                    .failed
                    .push((name.to_owned(), format!("{refused}: {e}")));
                false
            }
        }
    }

    fn keep_conflict_copy(&mut self, relative: &str, theirs: &str) -> Result<String, WriteError> {
        let server = self.args.server.as_str();
        let dir = &self.args.dir;
        let hash = manifest::digest(theirs);
        if let Some((path, _)) = self
            .manifest
            .copies()
            .find(|(_, c)| c.of == relative && c.server == server && c.hash == hash)
        {
            return Ok(path.clone());
        }
        let record = manifest::Copy {
            of: relative.to_owned(),
            server: server.to_owned(),
            hash,
        };
        for n in 0..MAX_COPIES {
            let candidate = copy_name(relative, n);
            if self.game_names.contains(&candidate)
                || self.manifest.get(server, &candidate).is_some()
            {
                continue;
            }
            let path = match readable_path(dir, &candidate) {
                Ok(p) => p,
                // That name is a symlink: the next one.
                Err(WriteError::Refused(_))
                    if std::fs::symlink_metadata(dir.join(&candidate))
                        .is_ok_and(|m| m.file_type().is_symlink()) =>
                {
                    continue;
                }
                Err(e) => return Err(e),
            };
            match std::fs::symlink_metadata(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Ok(m) if m.is_file() => {
                    let current = write::read_regular_blocking(&path)?;
                    if current == theirs.as_bytes() {
                        self.manifest.record_copy(&candidate, record);
                        return Ok(candidate);
                    }
                    // A copy this sync wrote and nobody edited holds an older game version the game itself
                    // replaced since; anything else is someone's work.
                    let ours_untouched = self
                        .manifest
                        .copy(&candidate)
                        .is_some_and(|c| c.of == relative && c.hash == manifest::digest(&current));
                    if !ours_untouched {
                        continue;
                    }
                    // The game version it holds may exist nowhere else now (the game replaced it without a sync).
                    replaced::keep(dir, &candidate, &current)?;
                }
                Ok(_) => continue,
                Err(e) => return Err(e.into()),
            }
            write_inside(dir, &candidate, theirs.as_bytes())?;
            self.manifest.record_copy(&candidate, record);
            return Ok(candidate);
        }
        Err(WriteError::Refused(format!(
            "{} to {} are all taken",
            copy_name(relative, 0),
            copy_name(relative, MAX_COPIES - 1)
        )))
    }
}

/// How many conflict copies of one file may exist side by side before a conflict is reported failed.
const MAX_COPIES: usize = 20;

/// The record could not be read: keep it aside for the player (it is replaced at the end of this sync) and
/// say what that means.
fn set_aside(dir: &Path, why: &str) -> String {
    const ASIDE: &str = ".bitburner-sync/unreadable-record.json";
    let file = manifest::FILE_NAME;
    let head = format!(
        "the record {file} cannot be read ({why}); every file that differs from the game is a conflict this time \
         and nothing is overwritten"
    );
    let is_file = std::fs::symlink_metadata(Manifest::path(dir)).is_ok_and(|m| m.is_file());
    if !is_file {
        // Neither kept nor replaced: the sync writes over no symlink, so it stays until the player removes it.
        return format!(
            "{head}; it is not a plain file, so it is left as it is and no record is kept until it is removed"
        );
    }
    let kept = write::read_regular_blocking(&Manifest::path(dir))
        .map_err(WriteError::from)
        .and_then(|bytes| write_inside(dir, ASIDE, &bytes));
    match kept {
        Ok(()) => format!("{head}; the unreadable record is kept in {ASIDE}"),
        Err(e) => {
            format!("{head}; the unreadable record could not be kept aside ({e}) and is replaced")
        }
    }
}

/// A manifest that cannot be written costs only the protection of the next sync; say so (as a note of the
/// report, which `--watch` prints once however many rounds meet it) and go on.
fn save_manifest(manifest: &Manifest, dir: &Path) -> Option<String> {
    let e = manifest.save(dir).err()?;
    let note = format!(
        "cannot write {}: {e}; the next sync will treat every file that differs from the game as a conflict",
        Manifest::path(dir).display()
    );
    Some(note)
}

/// Where a game path lands under the directory, '/'-separated; `None` for anything that could leave it, and
/// for what the scan never reads back: a hidden directory or `node_modules` on the way (among them the sync's
/// own `.bitburner-sync/`, whose kept files a game could otherwise plant or push out), the sync's temporary
/// files, and at the top the record, the definitions and the name of the sync's folder. The game never sends
/// such paths, but this is a file written from data another program sent.
fn local_relative(game_path: &str) -> Option<String> {
    let resolved = path::resolve_file_path(game_path)?;
    let segments: Vec<&str> = resolved.split('/').collect();
    let (file, dirs) = segments.split_last()?;
    let bad = !segments.iter().all(|s| write::plain_segment(s));
    let unread_dir = !dirs.iter().all(|d| scan::entered(d));
    let ours = file.starts_with(write::TEMP_PREFIX)
        || (dirs.is_empty() && [manifest::FILE_NAME, DEFINITIONS_FILE, SYNC_FOLDER].contains(file));
    (!bad && !unread_dir && !ours).then_some(resolved)
}

/// The conflict copies the record lists whose file is not there any more: never one that could not be looked
/// at (a directory that could not be read for a round is no deletion), and under `--watch` only one whose
/// absence has held still like a file's (an editor saving the copy by a rename leaves it missing a moment).
async fn gone_copies(
    manifest: &Manifest,
    dir: &Path,
    mut settle: Option<&mut Settle>,
) -> BTreeSet<String> {
    let mut gone = BTreeSet::new();
    for (relative, _) in manifest.copies() {
        // A path the sync would not read through (a symlink on the way) is not looked at: not gone.
        let Ok(file) = readable_path(dir, relative) else {
            continue;
        };
        if !matches!(std::fs::symlink_metadata(&file), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
        {
            continue;
        }
        let settled = match settle.as_deref_mut() {
            Some(s) => matches!(s.look(relative, &file).await, Look::Ready(None)),
            None => true,
        };
        if settled {
            gone.insert(relative.clone());
        }
    }
    gone
}

/// The folder of what the sync keeps for the player (replaced files, an unreadable record).
const SYNC_FOLDER: &str = ".bitburner-sync";

#[cfg(test)]
mod tests {
    use super::*;

    /// Under `--watch`, a conflict copy missing a moment (an editor saving it by a rename) is not gone: its
    /// absence must hold still as a file's does. Without the watch, missing is gone.
    #[tokio::test]
    async fn a_copy_missing_a_moment_under_watch_is_not_yet_gone() {
        let dir = std::env::temp_dir().join(format!("bb-gone-copies-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let mut manifest = Manifest::default();
        let copy = manifest::Copy {
            of: "a.js".into(),
            server: "home".into(),
            hash: manifest::digest(b"the game's"),
        };
        manifest.record_copy("a.game.js", copy.clone());
        manifest.record_copy(
            "b.game.js",
            manifest::Copy {
                of: "b.js".into(),
                ..copy
            },
        );
        std::fs::write(dir.join("b.game.js"), "kept").unwrap_or_else(|e| panic!("{e}"));
        // a.game.js was just renamed away: its directory changed a moment ago.
        let events = std::sync::Arc::new(settle::LastEvent::default());
        events.touch();
        let mut settle = Settle::new(std::time::Duration::from_millis(200), events);
        settle.begin_round();
        let gone = gone_copies(&manifest, &dir, Some(&mut settle)).await;
        assert!(gone.is_empty(), "{gone:?}");
        settle.end_round();
        let gone = gone_copies(&manifest, &dir, None).await;
        assert_eq!(gone.into_iter().collect::<Vec<_>>(), ["a.game.js"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

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
                decide(*direction, false, *base, &[], *local, *game),
                *want,
                "{direction:?} base {base:?} local {local:?} game {game:?}"
            );
        }
        assert_eq!(decide(D::Push, true, b, &[], Some(v2), Some(v3)), A::Push);
        assert_eq!(decide(D::Pull, true, b, &[], Some(v2), Some(v3)), A::Pull);
    }

    #[test]
    fn a_game_back_at_an_older_synced_version_made_no_edit() {
        let (v1, v2, v3): (&[u8], &[u8], &[u8]) = (b"v1", b"v2", b"v3");
        let base = manifest::digest(v2);
        let b = Some(base.as_str());
        let older = [manifest::digest(v1)];
        use Action as A;
        use Direction as D;
        assert_eq!(
            decide(D::Both, false, b, &older, Some(v2), Some(v1)),
            A::Restore
        );
        assert_eq!(
            decide(D::Pull, false, b, &older, Some(v2), Some(v1)),
            A::RolledBack
        );
        assert_eq!(
            decide(D::Push, false, b, &older, Some(v3), Some(v1)),
            A::Restore
        );
        // A version never synced is an edit made in the game.
        assert_eq!(
            decide(D::Both, false, b, &older, Some(v2), Some(v3)),
            A::Pull
        );
        // --force still does what it says.
        assert_eq!(
            decide(D::Pull, true, b, &older, Some(v2), Some(v1)),
            A::Pull
        );
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
        assert_eq!(
            copy_of("a.game.12.js", &siblings).map(String::as_str),
            Some("a.js")
        );
        assert_eq!(copy_of("a.game.x.js", &siblings), None);
        assert_eq!(copy_of("a.x.js", &siblings), None);
        assert_eq!(copy_name("lib/a.js", 0), "lib/a.game.js");
        assert_eq!(copy_name("lib/a.js", 2), "lib/a.game.2.js");
        assert_eq!(copy_name("README", 1), "README.game.1");
    }

    #[test]
    fn pulled_paths_stay_inside_the_directory() {
        assert_eq!(local_relative("lib/x.js").as_deref(), Some("lib/x.js"));
        assert_eq!(local_relative("/lib/x.js").as_deref(), Some("lib/x.js"));
        assert_eq!(local_relative("a/../x.js").as_deref(), Some("x.js"));
        assert_eq!(local_relative("../x.js"), None);
        for ours in [
            ".bitburner-sync/replaced/x.js",
            ".git/x.js",
            "lib/node_modules/x.js",
            ".bitburner-sync.json",
            "NetscriptDefinitions.d.ts",
            ".bitburner-sync-tmp-1-2",
        ] {
            assert_eq!(local_relative(ours), None, "{ours}");
        }
        // A hidden file is read back by the scan, so it syncs; only hidden folders are not entered.
        assert_eq!(local_relative("lib/.x.js").as_deref(), Some("lib/.x.js"));
        assert_eq!(
            local_relative("lib/NetscriptDefinitions.d.ts").as_deref(),
            Some("lib/NetscriptDefinitions.d.ts")
        );
        assert_eq!(
            local_relative("c:x.js").is_some(),
            !cfg!(windows),
            "`:` is a plain character except on Windows"
        );
    }
}
