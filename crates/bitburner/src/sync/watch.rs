//! `sync DIR --watch`: the editor-driven loop of bitburner-filesync. A saved local file is pushed (after a
//! quiet moment, so an editor's burst of writes is one push); the game, which tells nobody about its edits, is
//! polled at an interval and its edits are pulled. Every round is one [`reconcile_settled`] in both
//! directions, so the conflict rule of `push`/`pull` holds here too: a file changed on both sides is left
//! alone and reported. A round takes a local file only once it holds still ([`super::settle`]): the quiet
//! wait below only saves rounds, it is not what keeps a half-saved file from the game.

use super::settle::{LastEvent, Settle};
use super::write::{self, WriteError, write_inside};
use super::{DEFINITIONS_FILE, Direction, SyncError, SyncReport, manifest, reconcile_settled};
use crate::config::SyncArgs;
use crate::tools::Ctx;
use notify::{EventKind, RecursiveMode, Watcher};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How often and how patiently `--watch` looks.
#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    /// Interval of the game's polling (one `getAllFiles`).
    pub poll: Duration,
    /// Quiet time after the last local change before pushing.
    pub debounce: Duration,
}

/// Runs until `stop`, handing every round that did something to `report` (a conflict only the first time it
/// is seen, skipped files only in the first round). A lost game connection is waited out, not fatal.
pub async fn watch(
    ctx: &Ctx,
    args: &SyncArgs,
    options: WatchOptions,
    stop: CancellationToken,
    mut report: impl FnMut(&SyncReport),
) -> Result<(), SyncError> {
    // One pending wake-up is enough: a burst of events is one change to look at, and the channel stays small.
    let (tx, mut changes) = mpsc::channel(1);
    let events = Arc::new(LastEvent::default());
    let heard = Arc::clone(&events);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && relevant(&event)
        {
            heard.touch();
            let _ = tx.try_send(());
        }
    })
    .map_err(|source| SyncError::Watch {
        path: args.dir.clone(),
        source,
    })?;
    watcher
        .watch(&args.dir, RecursiveMode::Recursive)
        .map_err(|source| SyncError::Watch {
            path: args.dir.clone(),
            source,
        })?;

    let mut settle = Settle::new(options.debounce, events);
    let mut state = Printed::default();
    let mut definitions_written = false;
    let mut poll = tokio::time::interval(options.poll);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if !ctx.link.is_connected() {
            definitions_written = false;
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                _ = ctx.link.wait_connected(args.wait) => {}
            }
            continue;
        }
        let mut refused = None;
        if !definitions_written {
            match write_definitions(ctx, &args.dir).await {
                Ok(()) => definitions_written = true,
                // Refused on purpose (a symlink): asking again every round would change nothing.
                Err(DefinitionsError::Refused(why)) => {
                    definitions_written = true;
                    refused = Some(why);
                }
                Err(DefinitionsError::Failed(e)) => {
                    eprintln!("warning: cannot write {DEFINITIONS_FILE}: {e}")
                }
            }
        }
        match reconcile_settled(ctx, args, Direction::Both, Some(&mut settle)).await {
            Ok(mut round) => {
                if let Some(why) = refused {
                    round.skipped.push((DEFINITIONS_FILE.to_owned(), why));
                }
                let shown = state.filter(round);
                if !shown.is_empty() || !shown.skipped.is_empty() {
                    report(&shown);
                }
            }
            Err(SyncError::Game(e)) => {
                eprintln!("{e}; waiting for the game");
                definitions_written = false;
            }
            Err(e) => return Err(e),
        }
        // A file left for later (still being saved) is looked at again once it may have settled.
        let retry = settle.retry_after();
        let again = async {
            match retry {
                Some(after) => tokio::time::sleep(after).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            _ = poll.tick() => {}
            () = again => {}
            Some(()) = changes.recv() => {
                // Wait for a quiet moment (an editor's save is several events), but no longer than the next
                // poll: a file that never stops changing must not stop the rounds, nor the game's edits
                // from being pulled. A round that comes early leaves a file still changing alone.
                loop {
                    tokio::select! {
                        () = stop.cancelled() => return Ok(()),
                        _ = poll.tick() => break,
                        more = tokio::time::timeout(options.debounce, changes.recv()) => {
                            if !matches!(more, Ok(Some(()))) {
                                break;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Whether a file-system event can be a player's edit: not a read, not what the sync itself keeps (the
/// manifest, its `.bitburner-sync/` directory, its temporary files, the definitions).
fn relevant(event: &notify::Event) -> bool {
    if matches!(event.kind, EventKind::Access(_) | EventKind::Other) {
        return false;
    }
    event.paths.iter().any(|p| {
        let ours = p.components().any(|c| c.as_os_str() == ".bitburner-sync");
        !ours
            && p.file_name().is_some_and(|n| {
                n != manifest::FILE_NAME
                    && n != DEFINITIONS_FILE
                    && !n.to_string_lossy().starts_with(write::TEMP_PREFIX)
            })
    })
}

enum DefinitionsError {
    Refused(String),
    Failed(String),
}

/// `NetscriptDefinitions.d.ts` in DIR, as filesync writes it, so an editor type-checks `ns`. Written only
/// when it differs, so a watcher does not wake itself; never through a symlink (the text comes from
/// whatever connected as the game, and a cloned repository may link this name anywhere).
async fn write_definitions(ctx: &Ctx, dir: &Path) -> Result<(), DefinitionsError> {
    let text = ctx
        .definitions()
        .await
        .map_err(|e| DefinitionsError::Failed(e.to_string()))?;
    let path = write::readable_path(dir, DEFINITIONS_FILE).map_err(|e| match e {
        WriteError::Refused(why) => DefinitionsError::Refused(why),
        WriteError::Io(e) => DefinitionsError::Failed(e.to_string()),
    })?;
    let before = match write::read_regular(&path).await {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        // Not read, so not kept: not replaced either.
        Err(e) => {
            return Err(DefinitionsError::Refused(format!(
                "not replaced: the local {DEFINITIONS_FILE} could not be read to be kept first: {e}"
            )));
        }
    };
    if before.as_deref() == Some(text.as_bytes()) {
        return Ok(());
    }
    let dir = dir.to_path_buf();
    let written = tokio::task::spawn_blocking(move || {
        // What was there (the player's own declarations, or the game's older ones) is kept first, as every
        // other local file the sync replaces.
        if let Some(before) = before {
            super::replaced::keep(&dir, DEFINITIONS_FILE, &before).map_err(|e| {
                WriteError::Refused(format!(
                    "not replaced: the local {DEFINITIONS_FILE} could not be kept first: {e}"
                ))
            })?;
        }
        write_inside(&dir, DEFINITIONS_FILE, text.as_bytes())
    })
    .await
    .map_err(|e| DefinitionsError::Failed(e.to_string()))?;
    written.map_err(|e| match e {
        WriteError::Refused(why) => DefinitionsError::Refused(why),
        WriteError::Io(e) => DefinitionsError::Failed(e.to_string()),
    })
}

/// What the player has already been told.
#[derive(Default)]
struct Printed {
    rounds: usize,
    conflicts: BTreeSet<String>,
    notes: BTreeSet<String>,
    still_changing: BTreeSet<String>,
}

impl Printed {
    fn filter(&mut self, mut round: SyncReport) -> SyncReport {
        if self.rounds > 0 {
            round.skipped.clear();
        }
        self.rounds += 1;
        let mut now: BTreeSet<String> = round.conflicts.iter().cloned().collect();
        // A round that left a conflicting file for later (the conflict copy's own write can make the next look
        // come too soon) did not find the conflict gone: said again when it is seen again, it was said twice.
        now.extend(
            self.conflicts
                .iter()
                .filter(|c| round.left_for_later.contains(c))
                .cloned(),
        );
        round.conflicts.retain(|c| !self.conflicts.contains(c));
        self.conflicts = now;
        // A note that holds round after round (a record that cannot be written) is said once.
        let now: BTreeSet<String> = round.notes.iter().cloned().collect();
        round.notes.retain(|n| !self.notes.contains(n));
        self.notes = now;
        // A file that keeps changing is said once, until it has settled.
        let now: BTreeSet<String> = round
            .still_changing
            .iter()
            .map(|(f, _)| f.clone())
            .collect();
        round
            .still_changing
            .retain(|(f, _)| !self.still_changing.contains(f));
        self.still_changing = now;
        round
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(conflicts: &[&str], left_for_later: &[&str]) -> SyncReport {
        SyncReport {
            conflicts: conflicts.iter().map(|c| (*c).to_owned()).collect(),
            left_for_later: left_for_later.iter().map(|c| (*c).to_owned()).collect(),
            ..SyncReport::default()
        }
    }

    #[test]
    fn a_conflict_is_said_once_even_across_a_round_that_left_its_file_for_later() {
        let mut printed = Printed::default();
        let said = |printed: &mut Printed, r: SyncReport| printed.filter(r).conflicts;
        assert_eq!(said(&mut printed, round(&["a.js"], &[])), ["a.js"]);
        assert!(said(&mut printed, round(&[], &["a.js"])).is_empty());
        assert!(
            said(&mut printed, round(&["a.js"], &[])).is_empty(),
            "still the same conflict"
        );
        // Resolved (a round saw the file and no conflict), then conflicting again: a new conflict, said.
        assert!(said(&mut printed, round(&[], &[])).is_empty());
        assert_eq!(said(&mut printed, round(&["a.js"], &[])), ["a.js"]);
        // Another file left for later does not keep a conflict said.
        assert!(said(&mut printed, round(&[], &["b.js"])).is_empty());
        assert_eq!(said(&mut printed, round(&["a.js"], &[])), ["a.js"]);
    }
}
