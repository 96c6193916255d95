//! The computers linked right now, by computer id. A second hello with the same id replaces the first link.

use crate::computer::Computer;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

#[derive(Default)]
pub struct Registry {
    computers: Mutex<BTreeMap<u32, Arc<Computer>>>,
}

impl Registry {
    // Never held across an await; a poisoned map is still consistent (single inserts and removes).
    fn lock(&self) -> MutexGuard<'_, BTreeMap<u32, Arc<Computer>>> {
        self.computers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `computer`, returning the link it replaces.
    pub fn insert(&self, computer: Arc<Computer>) -> Option<Arc<Computer>> {
        self.lock().insert(computer.id(), computer)
    }

    /// Removes computer `id` if its current link is `link_id` (not a newer replacement).
    pub fn remove_link(&self, id: u32, link_id: u64) -> bool {
        let mut map = self.lock();
        if map.get(&id).is_some_and(|c| c.link_id == link_id) {
            map.remove(&id);
            return true;
        }
        false
    }

    pub fn get(&self, id: u32) -> Option<Arc<Computer>> {
        self.lock().get(&id).cloned()
    }

    /// Every linked computer, ordered by id.
    pub fn snapshot(&self) -> Vec<Arc<Computer>> {
        self.lock().values().cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
