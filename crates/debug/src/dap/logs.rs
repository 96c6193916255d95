//! The `dap_*` tools: reading a session's journal (output, exceptions, stops), which VSC-Bridge keeps in the
//! extension and does not expose; headless, the bridge holds it.

use super::backend::state_name;
use super::backend::{DapBackend, Params, bool_param, str_param, u64_param};
use crate::envelope::ScriptError;
use serde_json::{Value, json};

/// The most bytes of lines (matches and their context) one `dap_search` reply is built from; the first match is
/// always kept.
const SEARCH_REPLY_BYTES: usize = 1 << 20;

impl DapBackend {
    pub(super) fn dap_logs(&self, p: &Params) -> Result<Value, ScriptError> {
        let s = self.any_session(p)?;
        let count = u64_param(p, "count").unwrap_or(20) as usize;
        let category = str_param(p, "category").unwrap_or("all");
        let search = str_param(p, "search");
        let since = u64_param(p, "since").unwrap_or(0);
        let show_source = bool_param(p, "showSource").unwrap_or(true);
        let journal = s.shared.journal();
        let matching: Vec<Value> = journal
            .entries()
            .filter(|e| e.kind == "output" && e.ts >= since)
            .filter(|e| category == "all" || e.category == category)
            .filter(|e| search.is_none_or(|q| e.text.contains(q)))
            .map(|e| e.to_json(show_source))
            .collect();
        let total = matching.len();
        let mut logs: Vec<Value> = matching
            .into_iter()
            .skip(total.saturating_sub(count))
            .collect();
        if bool_param(p, "reverse") == Some(true) {
            logs.reverse();
        }
        let text: String = logs.iter().filter_map(|l| l["text"].as_str()).collect();
        Ok(
            json!({"sessionId": s.id, "logs": logs, "text": text, "total": total, "dropped": journal.dropped}),
        )
    }

    pub(super) fn dap_exceptions(&self, p: &Params) -> Result<Value, ScriptError> {
        let s = self.any_session(p)?;
        let count = u64_param(p, "count").unwrap_or(10) as usize;
        let with_context = bool_param(p, "withContext").unwrap_or(true);
        let lines = u64_param(p, "contextLines").unwrap_or(5) as usize;
        let journal = s.shared.journal();
        let entries: Vec<_> = journal.entries().collect();
        let mut out = Vec::new();
        for (i, e) in entries.iter().enumerate().rev() {
            // An exception is a stop on one, or stderr carrying a traceback (an uncaught one without a stop).
            let is_exception = e.kind == "exception"
                || (e.kind == "output"
                    && e.category == "stderr"
                    && (e.text.contains("Traceback") || e.text.contains("Error:")));
            if !is_exception {
                continue;
            }
            let mut item = e.to_json(true);
            if with_context {
                let context: Vec<&str> = entries[..i]
                    .iter()
                    .rev()
                    .filter(|c| c.kind == "output" && c.category != "telemetry")
                    .take(lines)
                    .map(|c| c.text.as_str())
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                item["context"] = json!(context);
            }
            out.push(item);
            if out.len() >= count {
                break;
            }
        }
        Ok(json!({"sessionId": s.id, "exceptions": out, "total": out.len()}))
    }

    pub(super) fn dap_search(&self, p: &Params) -> Result<Value, ScriptError> {
        let s = self.any_session(p)?;
        let pattern = str_param(p, "pattern").unwrap_or_default();
        let case = bool_param(p, "caseSensitive").unwrap_or(false);
        let category = str_param(p, "category").unwrap_or("all");
        let limit = u64_param(p, "limit").unwrap_or(50) as usize;
        let ctx = u64_param(p, "contextLines").unwrap_or(2) as usize;
        let needle = if case {
            pattern.to_owned()
        } else {
            pattern.to_lowercase()
        };
        let journal = s.shared.journal();
        let lines: Vec<(&str, &str)> = journal
            .entries()
            .filter(|e| e.kind == "output" && (category == "all" || e.category == category))
            .flat_map(|e| e.text.lines().map(move |l| (l, e.category.as_str())))
            .collect();
        let mut matches = Vec::new();
        let mut reply_bytes = 0usize;
        let mut cut = false;
        for (i, (line, cat)) in lines.iter().enumerate() {
            let hay = if case {
                (*line).to_owned()
            } else {
                line.to_lowercase()
            };
            if hay.contains(&needle) {
                let before: Vec<&str> = lines[i.saturating_sub(ctx)..i]
                    .iter()
                    .map(|l| l.0)
                    .collect();
                let after: Vec<&str> = lines[i + 1..(i + 1 + ctx).min(lines.len())]
                    .iter()
                    .map(|l| l.0)
                    .collect();
                // Each match copies its context: a thousand matches of a hundred long lines each built half a
                // gigabyte from a megabyte of output before the result was cut (an attack run's finding).
                reply_bytes += [*line]
                    .iter()
                    .chain(&before)
                    .chain(&after)
                    .map(|l| l.len() + 8)
                    .sum::<usize>();
                if reply_bytes > SEARCH_REPLY_BYTES && !matches.is_empty() {
                    cut = true;
                    break;
                }
                matches.push(json!({"line": line, "category": cat, "index": i, "before": before, "after": after}));
                if matches.len() >= limit {
                    break;
                }
            }
        }
        let mut reply = json!({"sessionId": s.id, "pattern": pattern, "matches": matches, "total": matches.len()});
        if cut {
            reply["cut"] = json!({
                "limitBytes": SEARCH_REPLY_BYTES,
                "why": "the matches' lines and context reached the reply's byte limit: ask for fewer contextLines, \
                        a narrower pattern, or page with a smaller limit",
            });
        }
        Ok(reply)
    }

    pub(super) fn dap_summary(&self, p: &Params) -> Result<Value, ScriptError> {
        let s = self.any_session(p)?;
        let journal = s.shared.journal();
        let count = |kind: &str| journal.entries().filter(|e| e.kind == kind).count();
        let st = s.shared.state();
        let mut v = json!({"sessionId": s.id, "adapter": s.adapter.name(), "state": state_name(&st.run),
            "stops": st.stops, "outputs": count("output"), "exceptions": count("exception"),
            "exitCode": st.exit_code, "journalBytes": journal.bytes(), "dropped": journal.dropped});
        if bool_param(p, "compact") != Some(true) {
            v["config"] = s.config.clone();
            v["lastOutput"] = json!(
                journal
                    .entries()
                    .rfind(|e| e.kind == "output")
                    .map(|e| e.text.clone())
            );
        }
        Ok(v)
    }
}
