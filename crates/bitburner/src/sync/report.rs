//! What a sync tells the player: the per-file lines, the summary, and the exit status.

use super::{SyncError, SyncReport, conflict_copy};
use std::path::Path;

impl SyncReport {
    pub fn is_empty(&self) -> bool {
        self.pushed.is_empty()
            && self.pulled.is_empty()
            && self.conflicts.is_empty()
            && self.failed.is_empty()
            && self.rolled_back.is_empty()
            && self.notes.is_empty()
            && self.still_changing.is_empty()
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
        let mut out: Vec<String> = self
            .pushed
            .iter()
            .map(|f| {
                match (
                    self.resolved.contains(f),
                    self.replaced.iter().find(|(name, _)| name == f),
                ) {
                    (true, Some((_, kept))) => format!(
                        "pushed {f}: its conflict copy was deleted, which resolves the conflict (the game's \
                         version it replaced is kept in {kept})"
                    ),
                    _ => format!("pushed {f}"),
                }
            })
            .collect();
        out.extend(self.pulled.iter().map(
            |f| match self.replaced.iter().find(|(name, _)| name == f) {
                Some((_, kept)) => {
                    format!("pulled {f} (the local version it replaced is kept in {kept})")
                }
                None => format!("pulled {f}"),
            },
        ));
        out.extend(self.rolled_back.iter().map(|f| {
            let then = match (
                self.pushed.contains(f),
                self.replaced.iter().find(|(name, _)| name == f),
            ) {
                (true, Some((_, kept))) => {
                    format!("pushed the local one (the game's older one is kept in {kept})")
                }
                (true, None) => "pushed the local one".to_owned(),
                (false, _) => "kept the local one: push it to put it back in the game".to_owned(),
            };
            format!(
                "ROLLBACK {f}: the game went back to an older version of {f} (it restarted from an older save, \
                 or another game connected); {then}"
            )
        }));
        out.extend(
            self.skipped
                .iter()
                .map(|(f, why)| format!("skipped {f}: {why}")),
        );
        out.extend(self.conflicts.iter().map(|f| {
            let copy = match self.conflict_copies.get(f) {
                Some(copy) => copy.clone(),
                None => conflict_copy(Path::new(f)).display().to_string(),
            };
            format!(
                "CONFLICT {f}: changed here and in the game since the last sync; both kept, the game's version \
                 in {copy} (merge, delete it, push; or --force)"
            )
        }));
        out.extend(
            self.failed
                .iter()
                .map(|(f, why)| format!("FAILED {f}: {why}")),
        );
        out.extend(
            self.still_changing
                .iter()
                .map(|(f, why)| format!("WAITING {f}: {why}")),
        );
        out.extend(self.notes.iter().map(|n| format!("NOTE: {n}")));
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
