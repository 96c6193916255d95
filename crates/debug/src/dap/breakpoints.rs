//! Breakpoints kept per file, because DAP's `setBreakpoints` replaces a file's whole list: every change resends
//! the file's full list. Set before a session exists, they wait here and are sent when it starts. Each knows
//! whether the debugger bound it, and to which line.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Breakpoints the agent can create, over all files.
pub const MAX_BREAKPOINTS: usize = 1000;

#[derive(Debug, Clone, PartialEq)]
pub struct Breakpoint {
    pub line: u64,
    pub condition: Option<String>,
    pub hit_condition: Option<String>,
    pub log_message: Option<String>,
    pub verified: bool,
    pub bound_line: Option<u64>,
    pub id: Option<i64>,
    pub message: Option<String>,
}

impl Breakpoint {
    pub fn new(line: u64) -> Self {
        Self {
            line,
            condition: None,
            hit_condition: None,
            log_message: None,
            verified: false,
            bound_line: None,
            id: None,
            message: None,
        }
    }

    pub fn to_json(&self, path: &Path, pending: bool) -> Value {
        let mut v = json!({
            "path": path.display().to_string(),
            "line": self.line,
            "verified": self.verified,
            "boundLine": self.bound_line,
            "enabled": true,
        });
        if pending {
            v["pending"] = json!(true);
            v["message"] = json!("queued: sent to the debugger when a session starts");
        } else if let Some(m) = &self.message {
            v["message"] = json!(m);
        }
        for (key, val) in [
            ("condition", &self.condition),
            ("hitCondition", &self.hit_condition),
            ("logMessage", &self.log_message),
        ] {
            if let Some(val) = val {
                v[key] = json!(val);
            }
        }
        v
    }

    fn dap(&self) -> Value {
        let mut v = json!({"line": self.line});
        if let Some(c) = &self.condition {
            v["condition"] = json!(c);
        }
        if let Some(c) = &self.hit_condition {
            v["hitCondition"] = json!(c);
        }
        if let Some(c) = &self.log_message {
            v["logMessage"] = json!(c);
        }
        v
    }
}

#[derive(Debug, Default)]
pub struct Store {
    files: BTreeMap<PathBuf, Vec<Breakpoint>>,
}

impl Store {
    pub fn count(&self) -> usize {
        self.files.values().map(Vec::len).sum()
    }

    /// Adds or replaces the breakpoint at `bp.line`; false when the bound is reached.
    pub fn set(&mut self, path: &Path, bp: Breakpoint) -> bool {
        let list = self.files.entry(path.to_path_buf()).or_default();
        if let Some(old) = list.iter_mut().find(|b| b.line == bp.line) {
            *old = bp;
            return true;
        }
        if self.count() >= MAX_BREAKPOINTS {
            return false;
        }
        let list = self.files.entry(path.to_path_buf()).or_default();
        list.push(bp);
        list.sort_by_key(|b| b.line);
        true
    }

    pub fn remove(&mut self, path: &Path, line: u64) -> bool {
        let Some(list) = self.files.get_mut(path) else {
            return false;
        };
        let before = list.len();
        list.retain(|b| b.line != line);
        before != list.len()
    }

    pub fn clear_file(&mut self, path: &Path) -> usize {
        self.files
            .insert(path.to_path_buf(), Vec::new())
            .map_or(0, |l| l.len())
    }

    /// Files that had breakpoints (their lists now empty), so each can be cleared in the debugger too.
    pub fn clear_all(&mut self) -> Vec<PathBuf> {
        let files: Vec<PathBuf> = self.files.keys().cloned().collect();
        for list in self.files.values_mut() {
            list.clear();
        }
        files
    }

    pub fn files(&self) -> Vec<PathBuf> {
        self.files.keys().cloned().collect()
    }

    pub fn get(&self, path: &Path, line: u64) -> Option<&Breakpoint> {
        self.files.get(path)?.iter().find(|b| b.line == line)
    }

    /// The `setBreakpoints` arguments for `path`: its whole list.
    pub fn request(&self, path: &Path) -> Value {
        let list = self.files.get(path).map(Vec::as_slice).unwrap_or(&[]);
        json!({
            "source": {"path": path.display().to_string(), "name": path.file_name().map(|n| n.to_string_lossy().into_owned())},
            "breakpoints": list.iter().map(Breakpoint::dap).collect::<Vec<_>>(),
            "lines": list.iter().map(|b| b.line).collect::<Vec<_>>(),
        })
    }

    /// Records the debugger's answer to [`request`](Self::request), which lists the breakpoints in order.
    pub fn apply(&mut self, path: &Path, response: &Value) {
        let Some(list) = self.files.get_mut(path) else {
            return;
        };
        let answers = response
            .get("breakpoints")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (bp, answer) in list.iter_mut().zip(answers.iter()) {
            update(bp, answer);
        }
    }

    /// A `breakpoint` event: the debugger changed one (bound it later, moved it).
    pub fn on_event(&mut self, body: &Value) {
        let Some(answer) = body.get("breakpoint") else {
            return;
        };
        let Some(id) = answer.get("id").and_then(Value::as_i64) else {
            return;
        };
        for bp in self.files.values_mut().flatten() {
            if bp.id == Some(id) {
                update(bp, answer);
            }
        }
    }

    /// Forgets what a finished session said: the breakpoints wait for the next one.
    pub fn unbind_all(&mut self) {
        for bp in self.files.values_mut().flatten() {
            bp.verified = false;
            bp.bound_line = None;
            bp.id = None;
        }
    }

    pub fn list(&self, pending: bool) -> Vec<Value> {
        self.files
            .iter()
            .flat_map(|(path, list)| list.iter().map(move |b| b.to_json(path, pending)))
            .collect()
    }
}

fn update(bp: &mut Breakpoint, answer: &Value) {
    if let Some(v) = answer.get("verified").and_then(Value::as_bool) {
        bp.verified = v;
    }
    if let Some(line) = answer.get("line").and_then(Value::as_u64) {
        bp.bound_line = Some(line);
    }
    if let Some(id) = answer.get("id").and_then(Value::as_i64) {
        bp.id = Some(id);
    }
    bp.message = answer
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_list_is_resent_whole_and_the_bound_holds() {
        let mut s = Store::default();
        let p = Path::new("/a.py");
        assert!(s.set(p, Breakpoint::new(5)));
        assert!(s.set(p, Breakpoint::new(2)));
        assert_eq!(s.request(p)["lines"], json!([2, 5]));
        s.apply(
            p,
            &json!({"breakpoints": [{"verified": true, "line": 3, "id": 1}, {"verified": false}]}),
        );
        assert_eq!(s.get(p, 2).and_then(|b| b.bound_line), Some(3));
        for line in 100..(100 + MAX_BREAKPOINTS as u64) {
            s.set(p, Breakpoint::new(line));
        }
        assert_eq!(s.count(), MAX_BREAKPOINTS);
        assert!(!s.set(p, Breakpoint::new(99_999)));
        assert!(
            s.set(p, Breakpoint::new(5)),
            "replacing an existing one is always allowed"
        );
    }
}
