//! Reading and changing a paused program: threads, stack, scopes, variables, evaluate, setVariable. Every
//! variables reference handed out is remembered for the current stop only (`E_STALE_REFERENCE` after a resume).

use super::backend::{DapBackend, Params, dap_err, left, str_param, u64_param};
use super::session::{Session, lock};
use crate::envelope::ScriptError;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::time::Instant;

/// Variables one `debug_list_variables` call expands at most (deep structures are cut, and say so).
const MAX_LISTED: usize = 2000;
/// Children listed per container by default (VSC-Bridge's cap).
const DEFAULT_PAGE: usize = 50;
/// JSON bytes of variables one call returns by default.
const DEFAULT_BYTES: usize = 64 << 10;

#[derive(Clone, Copy)]
struct Page {
    start: usize,
    count: usize,
}

struct Budget {
    items: usize,
    bytes: usize,
    /// `variables` requests for nested containers: debugpy answers one in ~45 ms, in turn.
    requests: usize,
    truncated: bool,
}

/// `variables` requests one `debug_save_variable` makes at most (a 100 000-element list in debugpy's groups of
/// 100 is 1000).
const MAX_SAVE_REQUESTS: usize = 2000;

/// Bytes of the file one `debug_save_variable` writes at most (its children are held until then): the program decides how large
/// its values are (a list of 1200 references to one 60 000-character string is 72 MB of values).
const MAX_SAVE_BYTES: usize = 64 << 20;

/// Nested containers one call expands at most.
const MAX_REQUESTS: usize = 64;

impl DapBackend {
    pub(super) async fn threads(
        &self,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let s = self.session(p)?;
        let body = s
            .client
            .request("threads", json!({}), left(deadline))
            .await
            .map_err(dap_err)?;
        Ok(
            json!({"threads": body.get("threads").cloned().unwrap_or_else(|| json!([])), "sessionId": s.id}),
        )
    }

    pub(super) async fn stack(&self, p: &Params, deadline: Instant) -> Result<Value, ScriptError> {
        let s = self.session(p)?;
        let thread_id = s.paused_thread()?;
        let body = s
            .client
            .request(
                "stackTrace",
                json!({"threadId": thread_id, "startFrame": 0, "levels": 200}),
                left(deadline),
            )
            .await
            .map_err(dap_err)?;
        let frames: Vec<Value> = body
            .get("stackFrames")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|f| {
                json!({"id": f.get("id"), "name": f.get("name"), "file": f.pointer("/source/path"),
                    "line": f.get("line"), "column": f.get("column")})
            })
            .collect();
        Ok(
            json!({"frames": frames, "threadId": thread_id, "sessionId": s.id,
            "totalFrames": body.get("totalFrames").cloned().unwrap_or_else(|| json!(frames.len()))}),
        )
    }

    pub(super) async fn top_frame(
        &self,
        s: &Session,
        deadline: Instant,
    ) -> Result<i64, ScriptError> {
        let thread_id = s.paused_thread()?;
        let body = s
            .client
            .request(
                "stackTrace",
                json!({"threadId": thread_id, "startFrame": 0, "levels": 1}),
                left(deadline),
            )
            .await
            .map_err(dap_err)?;
        body.pointer("/stackFrames/0/id")
            .and_then(Value::as_i64)
            .ok_or_else(|| ScriptError::new("E_NOT_PAUSED", "the paused thread has no stack frame"))
    }

    pub(super) async fn scopes_of(
        &self,
        s: &Session,
        frame_id: i64,
        deadline: Instant,
    ) -> Result<Vec<Value>, ScriptError> {
        let body = s
            .client
            .request("scopes", json!({"frameId": frame_id}), left(deadline))
            .await
            .map_err(|e| {
                let err = dap_err(e);
                if err.code == "E_DAP_REQUEST_FAILED" {
                    ScriptError::new(
                        "E_STALE_REFERENCE",
                        format!(
                            "frame {frame_id} is not a frame of the current stop: {}",
                            err.message
                        ),
                    )
                } else {
                    err
                }
            })?;
        let scopes: Vec<Value> = body
            .get("scopes")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        s.remember_refs(
            scopes
                .iter()
                .filter_map(|sc| sc.get("variablesReference").and_then(Value::as_i64)),
        );
        Ok(scopes)
    }

    pub(super) async fn scopes(&self, p: &Params, deadline: Instant) -> Result<Value, ScriptError> {
        let s = self.session(p)?;
        s.paused_thread()?;
        let frame_id = u64_param(p, "frameId").unwrap_or(0) as i64;
        let scopes = self.scopes_of(&s, frame_id, deadline).await?;
        let list: Vec<Value> = scopes
            .iter()
            .map(|sc| {
                json!({"name": sc.get("name"), "variablesReference": sc.get("variablesReference"),
                "expensive": sc.get("expensive").cloned().unwrap_or(json!(false))})
            })
            .collect();
        Ok(json!({"scopes": list, "frameId": frame_id}))
    }

    pub(super) async fn variables(
        &self,
        s: &Session,
        reference: i64,
        extra: Value,
        deadline: Instant,
    ) -> Result<Vec<Value>, ScriptError> {
        let mut args = json!({"variablesReference": reference});
        if let (Some(a), Some(e)) = (args.as_object_mut(), extra.as_object()) {
            a.extend(e.clone());
        }
        let body = s
            .client
            .request("variables", args, left(deadline))
            .await
            .map_err(dap_err)?;
        let vars: Vec<Value> = body
            .get("variables")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        s.remember_refs(
            vars.iter()
                .filter_map(|v| v.get("variablesReference").and_then(Value::as_i64)),
        );
        Ok(vars)
    }

    /// The top frame's variables by scope, each container paged: at most `count` children (50; the
    /// scope's own variables from `start`), with `total` and `more`, expanded `maxDepth` deep, and cut at
    /// `maxBytes` of JSON or [`MAX_LISTED`] variables (`truncated`). `debug_get_variable` pages further.
    pub(super) async fn list_variables(
        &self,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let s = self.session(p)?;
        let frame_id = self.top_frame(&s, deadline).await?;
        let which = str_param(p, "scope").unwrap_or("all");
        let depth = u64_param(p, "maxDepth").unwrap_or(1);
        let start = u64_param(p, "start").unwrap_or(0) as usize;
        let count = u64_param(p, "count").unwrap_or(DEFAULT_PAGE as u64).max(1) as usize;
        let scopes = self.scopes_of(&s, frame_id, deadline).await?;
        let mut out = Vec::new();
        let mut budget = Budget {
            items: MAX_LISTED,
            bytes: u64_param(p, "maxBytes").unwrap_or(DEFAULT_BYTES as u64) as usize,
            requests: MAX_REQUESTS,
            truncated: false,
        };
        for scope in scopes {
            let name = scope
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let lower = name.to_lowercase();
            let kind = if lower.contains("local") || lower == "arguments" {
                "local"
            } else if lower.contains("global") {
                "global"
            } else if lower.contains("closure") {
                "closure"
            } else {
                "other"
            };
            if which != "all" && which != kind {
                continue;
            }
            let reference = scope
                .get("variablesReference")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if scope.get("expensive").and_then(Value::as_bool) == Some(true)
                && which == "all"
                && kind != "local"
            {
                out.push(json!({"name": name, "variablesReference": reference, "expensive": true, "variables": []}));
                continue;
            }
            let page = Page { start, count };
            let (vars, total) = self
                .expand(&s, reference, depth, page, count, &mut budget, deadline)
                .await?;
            let more = start.saturating_add(vars.len()) < total;
            out.push(
                json!({"name": name, "variablesReference": reference, "variables": vars,
                "total": total, "start": start, "more": more}),
            );
        }
        Ok(json!({"frameId": frame_id, "scopes": out, "truncated": budget.truncated}))
    }

    /// One page of `reference`'s children, each expanded `depth - 1` deeper (their first `child_count`), and
    /// how many children it has in all. The children of one page are fetched with pipelined requests (all
    /// sent, then all awaited): adapters answer each in tens of milliseconds, so one by one a page of
    /// containers took seconds.
    #[allow(clippy::too_many_arguments)]
    async fn expand(
        &self,
        s: &Arc<Session>,
        reference: i64,
        depth: u64,
        page: Page,
        child_count: usize,
        budget: &mut Budget,
        deadline: Instant,
    ) -> Result<(Vec<Value>, usize), ScriptError> {
        let vars = self.variables(s, reference, json!({}), deadline).await?;
        self.expand_vars(s, vars, depth, page, child_count, budget, deadline)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn expand_vars(
        &self,
        s: &Arc<Session>,
        vars: Vec<Value>,
        depth: u64,
        page: Page,
        child_count: usize,
        budget: &mut Budget,
        deadline: Instant,
    ) -> Result<(Vec<Value>, usize), ScriptError> {
        let total = vars.len();
        let mut out = Vec::new();
        let mut refs = Vec::new();
        for v in vars.iter().skip(page.start).take(page.count) {
            let item = var_json(v);
            let cost = item.to_string().len();
            if budget.items == 0 || budget.bytes < cost {
                budget.truncated = true;
                break;
            }
            budget.items -= 1;
            budget.bytes -= cost;
            let child = v
                .get("variablesReference")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            // The adapter's own counts, when given, are a long list's length (debugpy shows 100 and groups).
            let declared = declared_children(v);
            let nested = child > 0 && depth > 1;
            if nested && budget.requests == 0 {
                budget.truncated = true;
            }
            let nested = nested && budget.requests > 0;
            if nested {
                budget.requests -= 1;
            }
            refs.push(nested.then_some((child, declared)));
            out.push(item);
        }
        if budget.truncated {
            return Ok((out, total));
        }
        let fetched = futures::future::join_all(refs.iter().map(|r| async move {
            match r {
                Some((child, _)) => Some(self.variables(s, *child, json!({}), deadline).await),
                None => None,
            }
        }))
        .await;
        let first = Page {
            start: 0,
            count: child_count,
        };
        for ((item, r), got) in out.iter_mut().zip(&refs).zip(fetched) {
            let (Some((_, declared)), Some(got)) = (r, got) else {
                continue;
            };
            let (children, n) = Box::pin(self.expand_vars(
                s,
                got?,
                depth - 1,
                first,
                child_count,
                budget,
                deadline,
            ))
            .await?;
            item["more"] = json!(children.len() < n);
            item["children"] = json!(children);
            item["total"] = json!(n.max(*declared));
            if budget.truncated {
                break;
            }
        }
        Ok((out, total))
    }

    pub(super) async fn get_variable(
        &self,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let s = self.session(p)?;
        s.paused_thread()?;
        let reference = u64_param(p, "variablesReference").unwrap_or(0) as i64;
        s.check_ref(reference)?;
        let mut extra = json!({});
        if let Some(f @ ("indexed" | "named")) = str_param(p, "filter") {
            extra["filter"] = json!(f);
        }
        let start = u64_param(p, "start").unwrap_or(0) as usize;
        let count = u64_param(p, "count").unwrap_or(100) as usize;
        // An adapter that pages (`supportsVariablePaging`) is asked for the page; one that does not (debugpy)
        // sends everything it shows, and the page is cut here.
        let pages = lock(&s.capabilities)
            .get("supportsVariablePaging")
            .and_then(Value::as_bool)
            == Some(true);
        if pages {
            extra["start"] = json!(start);
            extra["count"] = json!(count);
        }
        let vars = self.variables(&s, reference, extra, deadline).await?;
        let skip = if pages { 0 } else { start };
        let total = if pages {
            start.saturating_add(vars.len())
        } else {
            vars.len()
        };
        let list: Vec<Value> = vars.iter().skip(skip).take(count).map(var_json).collect();
        let more = start.saturating_add(list.len()) < total;
        Ok(
            json!({"variablesReference": reference, "variables": list, "total": total, "start": start,
                "more": more, "truncated": more}),
        )
    }

    pub(super) async fn evaluate(
        &self,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let s = self.session(p)?;
        let frame_id = match u64_param(p, "frameId") {
            Some(f) => {
                s.paused_thread()?;
                f as i64
            }
            None => self.top_frame(&s, deadline).await?,
        };
        let expression = str_param(p, "expression").unwrap_or_default();
        let context = str_param(p, "context").unwrap_or("watch");
        let (body, reference) = evaluate_in(&s, expression, frame_id, context, deadline).await?;
        s.remember_refs([reference]);
        Ok(
            json!({"expression": expression, "result": body.get("result"), "type": body.get("type"),
            "variablesReference": reference, "frameId": frame_id}),
        )
    }

    /// `debug_save_variable`: evaluates `expression` in the top frame and writes its value, and its children
    /// fetched `pageSize` at a time (up to `maxItems`), to `outputPath` as one JSON document. The path goes
    /// through the same policy as every file this bridge writes
    /// ([`output_path`](super::policy::LaunchPolicy::output_path)).
    pub(super) async fn save_variable(
        &self,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let s = self.session(p)?;
        s.paused_thread()?;
        let output = self.cfg.policy.output_path(
            str_param(p, "outputPath").unwrap_or_default(),
            &self.cfg.workspace,
        )?;
        let frame_id = self.top_frame(&s, deadline).await?;
        let expression = str_param(p, "expression").unwrap_or_default();
        let context = str_param(p, "context").unwrap_or("watch");
        let page_size = u64_param(p, "pageSize").unwrap_or(500).max(1) as usize;
        let max_items = u64_param(p, "maxItems").map_or(usize::MAX, |n| n as usize);
        let (body, reference) = evaluate_in(&s, expression, frame_id, context, deadline).await?;
        let pages = lock(&s.capabilities)
            .get("supportsVariablePaging")
            .and_then(Value::as_bool)
            == Some(true);
        let mut children = Vec::new();
        let mut requests = 0usize;
        let mut truncated = false;
        let mut held = 0usize;
        // Whether `v` fitted under the byte bound (and was kept).
        let mut keep = |children: &mut Vec<Value>, v: &Value| {
            let item = var_json(v);
            // As written: pretty, each line indented 4 more inside `children`, and `,\n` after it.
            let pretty = serde_json::to_string_pretty(&item).unwrap_or_default();
            let cost = pretty.len() + 4 * (pretty.matches('\n').count() + 1) + 2;
            // A MiB left for the document's own fields (the evaluated `result` is the adapter's short repr).
            if held + cost > MAX_SAVE_BYTES - (1 << 20) {
                return false;
            }
            held += cost;
            children.push(item);
            true
        };
        if reference > 0 {
            if pages {
                let declared = body
                    .get("indexedVariables")
                    .and_then(Value::as_u64)
                    .map(|n| n as usize);
                'pages: loop {
                    let want = page_size.min(max_items.saturating_sub(children.len()));
                    let got = self
                        .variables(
                            &s,
                            reference,
                            json!({"start": children.len(), "count": want}),
                            deadline,
                        )
                        .await?;
                    requests += 1;
                    let n = got.len();
                    for v in &got {
                        if !keep(&mut children, v) {
                            truncated = true;
                            break 'pages;
                        }
                    }
                    if n < want || declared.is_some_and(|d| children.len() >= d) {
                        break;
                    }
                    if children.len() >= max_items || requests >= MAX_SAVE_REQUESTS {
                        truncated = true;
                        break;
                    }
                }
            } else {
                // An adapter without paging sends what it shows in one answer. debugpy shows a long list's
                // first 100 items and a `more` group: a `MoreItemsRange` of the rest when that is under 1000,
                // else a `MoreItems` of such ranges, 1000 items each. The groups are followed in the order
                // they come and their items put in line.
                let mut groups = std::collections::VecDeque::from([reference]);
                'groups: while let Some(r) = groups.pop_front() {
                    let got = self.variables(&s, r, json!({}), deadline).await?;
                    requests += 1;
                    for v in &got {
                        if matches!(
                            v.get("type").and_then(Value::as_str),
                            Some("MoreItems" | "MoreItemsRange")
                        ) {
                            if let Some(g) = v.get("variablesReference").and_then(Value::as_i64) {
                                groups.push_back(g);
                            }
                            continue;
                        }
                        if children.len() >= max_items || !keep(&mut children, v) {
                            truncated = true;
                            break 'groups;
                        }
                    }
                    if requests >= MAX_SAVE_REQUESTS {
                        truncated |= !groups.is_empty();
                        break;
                    }
                }
            }
        }
        let doc = json!({"expression": expression, "type": body.get("type"), "result": body.get("result"),
            "frameId": frame_id, "sessionId": s.id, "count": children.len(), "truncated": truncated,
            "children": children});
        let bytes = serde_json::to_vec_pretty(&doc).map_err(|e| {
            ScriptError::new("E_INTERNAL", format!("the value could not be encoded: {e}"))
        })?;
        // Up to MAX_SAVE_BYTES written with std::fs: off the runtime's threads.
        let len = bytes.len();
        let target = output.path().to_path_buf();
        tokio::task::spawn_blocking(move || output.write(&bytes))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())))
            .map_err(|e| {
                ScriptError::new("E_WRITE_FAILED", format!("{}: {e}", target.display()))
                    .details(json!({"path": target.display().to_string()}))
            })?;
        Ok(
            json!({"success": true, "path": target.display().to_string(), "bytes": len,
            "count": children.len(), "truncated": truncated, "requests": requests,
            "type": body.get("type"), "result": body.get("result")}),
        )
    }

    pub(super) async fn set_variable(
        &self,
        p: &Params,
        deadline: Instant,
    ) -> Result<Value, ScriptError> {
        let s = self.session(p)?;
        s.paused_thread()?;
        let name = str_param(p, "name").unwrap_or_default();
        let value = str_param(p, "value").unwrap_or_default();
        let reference = match u64_param(p, "variablesReference") {
            Some(r) => {
                let r = r as i64;
                s.check_ref(r)?;
                r
            }
            None => {
                let frame = self.top_frame(&s, deadline).await?;
                let scopes = self.scopes_of(&s, frame, deadline).await?;
                scopes
                    .iter()
                    .find(|sc| {
                        sc.get("name")
                            .and_then(Value::as_str)
                            .is_some_and(|n| n.to_lowercase().contains("local"))
                    })
                    .or_else(|| scopes.first())
                    .and_then(|sc| sc.get("variablesReference").and_then(Value::as_i64))
                    .ok_or_else(|| {
                        ScriptError::new("E_NOT_PAUSED", "the top frame has no scopes")
                    })?
            }
        };
        let body = s
            .client
            .request("setVariable", json!({"variablesReference": reference, "name": name, "value": value}), left(deadline))
            .await
            .map_err(|e| dap_err(e).hint("Check the variable name (debug_list_variables) and write the value in the program's syntax"))?;
        // lldb-dap 19 answers with `result` where the spec says `value`.
        let new_value = body
            .get("value")
            .or_else(|| body.get("result"))
            .cloned()
            .unwrap_or(Value::Null);
        Ok(
            json!({"success": true, "name": name, "value": new_value, "type": body.get("type"),
            "variablesReference": reference}),
        )
    }
}

fn var_json(v: &Value) -> Value {
    json!({"name": v.get("name"), "value": v.get("value"), "type": v.get("type"),
        "variablesReference": v.get("variablesReference").cloned().unwrap_or(json!(0))})
}

/// How many children the adapter says `v` has (`indexedVariables` + `namedVariables`), saturating: the
/// numbers are the adapter's.
fn declared_children(v: &Value) -> usize {
    ["indexedVariables", "namedVariables"]
        .iter()
        .filter_map(|k| v.get(*k).and_then(Value::as_u64))
        .fold(0u64, u64::saturating_add)
        .try_into()
        .unwrap_or(usize::MAX)
}

/// One DAP `evaluate` in `frame_id`: its answer, and the reference its children are fetched by (0: none).
async fn evaluate_in(
    s: &Session,
    expression: &str,
    frame_id: i64,
    context: &str,
    deadline: Instant,
) -> Result<(Value, i64), ScriptError> {
    let body = s
        .client
        .request("evaluate", json!({"expression": expression, "frameId": frame_id, "context": context}), left(deadline))
        .await
        .map_err(|e| dap_err(e).hint("Check the expression's syntax for the program's language and that its names exist in this frame"))?;
    let reference = body
        .get("variablesReference")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    Ok((body, reference))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counts are the adapter's words: a sum that overflows panicked (overflow checks) in a list call.
    #[test]
    fn an_adapters_declared_counts_cannot_overflow() {
        let v = json!({"indexedVariables": u64::MAX, "namedVariables": 2});
        assert_eq!(declared_children(&v), usize::MAX);
        assert_eq!(
            declared_children(&json!({"indexedVariables": 3, "namedVariables": 2})),
            5
        );
        assert_eq!(declared_children(&json!({})), 0);
    }
}
