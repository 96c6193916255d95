//! `get_world_info` answers kept while their pages are read. A cube of radius 16 is up to 35 937 blocks, tens
//! of pages; asked again for each page, the game scanned the whole cube once a page (megabytes through the
//! relay each time) and the pages could come from different moments of a changing world. The answer a first
//! page came from now serves the pages after it, while it is recent.

use crate::models::{BlockInfo, EntityInfo, Location, WorldInfo};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// How long an answer serves its later pages: an agent reads them one after another.
const KEPT_FOR: Duration = Duration::from_secs(120);
/// Bytes of answers kept, all cubes together (about two full cubes of radius 16); an answer larger than
/// this alone is not kept, and each of its pages asks the game again.
const KEPT_BYTES: usize = 8 << 20;

/// What a page is asked of: the same cube of the same game.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CubeKey {
    pub game: Option<String>,
    pub x: i64,
    pub y: i64,
    pub z: i64,
    pub radius: u32,
}

/// The kept answers, newest last. Cheap to clone (shared).
#[derive(Clone)]
pub struct WorldPages {
    kept: Arc<Mutex<VecDeque<Kept>>>,
    max_bytes: usize,
    max_age: Duration,
}

struct Kept {
    key: CubeKey,
    at: Instant,
    bytes: usize,
    info: Arc<WorldInfo>,
}

impl Default for WorldPages {
    fn default() -> Self {
        Self::with_limits(KEPT_BYTES, KEPT_FOR)
    }
}

impl WorldPages {
    pub fn with_limits(max_bytes: usize, max_age: Duration) -> Self {
        Self {
            kept: Arc::default(),
            max_bytes,
            max_age,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Kept>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The answer kept for `key`, if it is recent enough.
    pub fn get(&self, key: &CubeKey) -> Option<Arc<WorldInfo>> {
        let mut kept = self.lock();
        let now = Instant::now();
        kept.retain(|k| now.duration_since(k.at) < self.max_age);
        kept.iter()
            .rev()
            .find(|k| k.key == *key)
            .map(|k| k.info.clone())
    }

    /// Keeps `info` as the answer for `key`, in place of an older one for it; the oldest others go while the
    /// total is over the bound.
    pub fn put(&self, key: CubeKey, info: Arc<WorldInfo>) {
        let bytes = weight(&info);
        let mut kept = self.lock();
        kept.retain(|k| k.key != key);
        if bytes > self.max_bytes {
            return;
        }
        let mut total: usize = kept.iter().map(|k| k.bytes).sum::<usize>() + bytes;
        while total > self.max_bytes {
            match kept.pop_front() {
                Some(oldest) => total -= oldest.bytes,
                None => break,
            }
        }
        kept.push_back(Kept {
            key,
            at: Instant::now(),
            bytes,
            info,
        });
    }

    /// Bytes kept now.
    pub fn bytes(&self) -> usize {
        self.lock().iter().map(|k| k.bytes).sum()
    }
}

/// The memory an answer holds: its structures and the text they point to.
fn weight(info: &WorldInfo) -> usize {
    let location = |l: &Location| l.world.len();
    let blocks: usize = info
        .blocks
        .iter()
        .map(|b: &BlockInfo| {
            std::mem::size_of::<BlockInfo>() + b.block_type.len() + location(&b.location)
        })
        .sum();
    let entities: usize = info
        .entities
        .iter()
        .map(|e: &EntityInfo| {
            std::mem::size_of::<EntityInfo>()
                + e.entity_type.len()
                + location(&e.location)
                + e.name.as_ref().map_or(0, String::len)
        })
        .sum();
    std::mem::size_of::<WorldInfo>() + blocks + entities
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn cube(blocks: usize) -> Arc<WorldInfo> {
        let block = BlockInfo {
            block_type: "minecraft:stone".into(),
            location: Location {
                world: "minecraft:overworld".into(),
                x: 0.0,
                y: 0.0,
                z: 0.0,
            },
        };
        Arc::new(WorldInfo {
            blocks: vec![block; blocks],
            entities: Vec::new(),
            total_blocks: None,
            next_offset: None,
        })
    }

    fn key(x: i64) -> CubeKey {
        CubeKey {
            game: None,
            x,
            y: 64,
            z: 0,
            radius: 16,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_serves_its_cube_until_it_is_old() {
        let pages = WorldPages::with_limits(1 << 20, Duration::from_secs(120));
        pages.put(key(0), cube(10));
        assert!(pages.get(&key(0)).is_some());
        assert!(pages.get(&key(1)).is_none(), "another cube");
        let other_game = CubeKey {
            game: Some("b".into()),
            ..key(0)
        };
        assert!(pages.get(&other_game).is_none(), "another game");
        tokio::time::advance(Duration::from_secs(121)).await;
        assert!(pages.get(&key(0)).is_none(), "kept past its time");
        assert_eq!(pages.bytes(), 0, "an old answer is let go");
    }

    #[test]
    fn the_kept_answers_stay_within_their_bytes_oldest_first_out() {
        let one = weight(&cube(1000));
        let pages = WorldPages::with_limits(one * 2 + one / 2, Duration::from_secs(120));
        for x in 0..5 {
            pages.put(key(x), cube(1000));
            assert!(
                pages.bytes() <= one * 2 + one / 2,
                "{} bytes",
                pages.bytes()
            );
        }
        assert!(pages.get(&key(4)).is_some() && pages.get(&key(3)).is_some());
        assert!(pages.get(&key(2)).is_none(), "the oldest went first");
        // An answer over the bound on its own is not kept, and takes nothing out.
        pages.put(key(9), cube(3000));
        assert!(pages.get(&key(9)).is_none());
        assert!(pages.get(&key(4)).is_some());
        // A newer answer for the same cube replaces the older.
        pages.put(key(4), cube(10));
        assert_eq!(pages.get(&key(4)).unwrap().blocks.len(), 10);
    }
}
