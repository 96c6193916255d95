//! `sync DIR --watch`: the editor-driven loop of bitburner-filesync. A saved local file is pushed (after a
//! quiet moment, so an editor's burst of writes is one push); the game, which tells nobody about its edits, is
//! polled at an interval and its edits are pulled. Every round is one [`reconcile`] in both directions, so
//! the conflict rule of `push`/`pull` holds here too: a file changed on both sides is left alone and reported.

use super::{DEFINITIONS_FILE, Direction, SyncError, SyncReport, manifest, reconcile};
use crate::config::SyncArgs;
use crate::tools::Ctx;
use notify::{EventKind, RecursiveMode, Watcher};
use std::collections::BTreeSet;
use std::path::Path;
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
    let (tx, mut changes) = mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && relevant(&event)
        {
            let _ = tx.send(());
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
        if !definitions_written {
            match write_definitions(ctx, &args.dir).await {
                Ok(()) => definitions_written = true,
                Err(e) => eprintln!("warning: cannot write {DEFINITIONS_FILE}: {e}"),
            }
        }
        match reconcile(ctx, args, Direction::Both).await {
            Ok(round) => {
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
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            _ = poll.tick() => {}
            Some(()) = changes.recv() => {
                // Settle: an editor saves through a temporary file and a rename, several events.
                while let Ok(Some(())) = tokio::time::timeout(options.debounce, changes.recv()).await {}
            }
        }
    }
}

/// Whether a file-system event can be a player's edit: not a read, not the manifest the sync itself writes.
fn relevant(event: &notify::Event) -> bool {
    if matches!(event.kind, EventKind::Access(_) | EventKind::Other) {
        return false;
    }
    event.paths.iter().any(|p| {
        p.file_name()
            .is_some_and(|n| n != manifest::FILE_NAME && n != DEFINITIONS_FILE)
    })
}

/// `NetscriptDefinitions.d.ts` in DIR, as filesync writes it, so an editor type-checks `ns`. Written only
/// when it differs, so a watcher does not wake itself.
async fn write_definitions(ctx: &Ctx, dir: &Path) -> Result<(), SyncError> {
    let text = ctx.definitions().await?;
    let path = dir.join(DEFINITIONS_FILE);
    if tokio::fs::read(&path).await.ok().as_deref() == Some(text.as_bytes()) {
        return Ok(());
    }
    tokio::fs::write(&path, text.as_bytes())
        .await
        .map_err(|source| SyncError::Local { path, source })
}

/// What the player has already been told.
#[derive(Default)]
struct Printed {
    rounds: usize,
    conflicts: BTreeSet<String>,
}

impl Printed {
    fn filter(&mut self, mut round: SyncReport) -> SyncReport {
        if self.rounds > 0 {
            round.skipped.clear();
        }
        self.rounds += 1;
        let now: BTreeSet<String> = round.conflicts.iter().cloned().collect();
        round.conflicts.retain(|c| !self.conflicts.contains(c));
        self.conflicts = now;
        round
    }
}
