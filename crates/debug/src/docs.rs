//! The pages `docs_list` and `docs_get` serve (VSC-Bridge's server-local docs tools), each with a category and
//! tags, which `docs_list` filters on as upstream's does.

use bridge_core::ToolError;
use serde_json::{Map, Value, json};

pub struct Page {
    pub id: &'static str,
    pub title: &'static str,
    pub summary: &'static str,
    pub category: &'static str,
    pub tags: &'static [&'static str],
    pub text: &'static str,
}

pub const PAGES: &[Page] = &[
    Page {
        id: "debugging-workflow",
        title: "A debugging session, step by step",
        summary: "breakpoint_set → debug_start → debug_wait_for_hit → inspect → change → continue",
        category: "guide",
        tags: &["workflow", "getting-started", "breakpoints", "variables"],
        text: include_str!("../docs/debugging-workflow.md"),
    },
    Page {
        id: "breakpoints",
        title: "Breakpoints of every kind",
        summary: "Line (condition, hit count, log message), function, exception filters, data breakpoints; verified and bound lines",
        category: "reference",
        tags: &["breakpoints", "exceptions", "watchpoints", "dap"],
        text: include_str!("../docs/breakpoints.md"),
    },
    Page {
        id: "languages",
        title: "Languages and their debuggers",
        summary: "Python, C/C++/Rust, Node and Go: launch types, debuggers and how to install each",
        category: "setup",
        tags: &["install", "python", "c", "rust", "node", "go", "dap"],
        text: include_str!("../docs/languages.md"),
    },
    Page {
        id: "backends",
        title: "Backends: vscode and dap",
        summary: "Which backend serves which tools, and how `auto` chooses",
        category: "setup",
        tags: &["backends", "vscode", "dap", "install"],
        text: include_str!("../docs/backends.md"),
    },
    Page {
        id: "errors",
        title: "Error codes and what to do",
        summary: "E_NO_SESSION, E_NOT_PAUSED, E_TIMEOUT, E_STALE_REFERENCE, ... with recovery steps",
        category: "reference",
        tags: &["errors", "troubleshooting"],
        text: include_str!("../docs/errors.md"),
    },
];

/// `docs_list {category?, tags?}`: the pages in that category carrying any of the tags (all when no filter),
/// and every category and tag there is, for the next filter. A tag that is not a string is refused, naming
/// it: dropped, it would widen the filter (`tags: [1]` listed every page).
pub fn list(p: &Map<String, Value>) -> Result<Value, ToolError> {
    let category = p.get("category").and_then(Value::as_str);
    let tags: Vec<&str> = match p.get("tags") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, t)| {
                t.as_str().ok_or_else(|| {
                    ToolError::invalid_argument(
                        "tags",
                        format!("tags[{i}] must be a string (a tag), got {t}"),
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(ToolError::invalid_argument(
                "tags",
                format!("tags must be an array of strings, got {other}"),
            ));
        }
    };
    let docs: Vec<Value> = PAGES
        .iter()
        .filter(|page| category.is_none_or(|c| page.category == c))
        .filter(|page| tags.is_empty() || tags.iter().any(|t| page.tags.contains(t)))
        .map(|page| {
            json!({"id": page.id, "title": page.title, "summary": page.summary,
                "category": page.category, "tags": page.tags})
        })
        .collect();
    let mut categories: Vec<&str> = PAGES.iter().map(|p| p.category).collect();
    categories.sort_unstable();
    categories.dedup();
    let mut all_tags: Vec<&str> = PAGES.iter().flat_map(|p| p.tags.iter().copied()).collect();
    all_tags.sort_unstable();
    all_tags.dedup();
    Ok(json!({"docs": docs, "total": docs.len(), "categories": categories, "tags": all_tags}))
}

/// Why a tool of the VSC-Bridge extension has no `dap` counterpart: what it needs that only a running VS Code
/// has. `None` for tools the dap backend serves.
pub fn vscode_only(alias: &str) -> Option<&'static str> {
    Some(match alias {
        "editor.goto-line" | "editor.get-context" => {
            "it acts on VS Code's editor (open files, cursor, selection); a headless bridge has no editor"
        }
        "editor.show-testing-ui" => "it opens VS Code's Testing view",
        "debug.tracker" => {
            "it reads VS Code's debug adapter tracker; on the dap backend the bridge itself sees every DAP message: use dap_logs, dap_summary, dap_search"
        }
        "symbol.navigate" | "symbol.calls" | "symbol.rename" | "search.symbol-search" => {
            "it asks VS Code's language servers (go to definition, call hierarchy, rename, workspace symbols), which the bridge does not run"
        }
        "code.replace-method" => {
            "it finds the method through VS Code's document symbols (a language server) and edits through VS Code's workspace edit"
        }
        "diagnostic.collect" => {
            "it reads VS Code's Problems (the diagnostics its language servers and linters publish)"
        }
        "test.debug-single" => {
            "it runs a test through VS Code's Testing API and the test extension's debug profile; on the dap backend start the test runner with debug_start (e.g. type debugpy, module pytest)"
        }
        "util.restart-vscode" => "it restarts the VS Code window",
        _ => return None,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn filters_by_category_and_any_tag() {
        let all = list(&Map::new()).unwrap();
        assert_eq!(all["total"], PAGES.len());
        assert!(
            all["categories"]
                .as_array()
                .unwrap()
                .contains(&json!("setup"))
        );
        let p = json!({"category": "reference", "tags": ["exceptions"]});
        let some = list(p.as_object().unwrap()).unwrap();
        assert_eq!(some["docs"][0]["id"], "breakpoints", "{some}");
        assert_eq!(some["total"], 1);
    }

    /// A tag that is not a string was dropped, and `tags: [1]` listed every page as if there were no filter.
    #[test]
    fn a_tag_that_is_not_a_string_is_refused() {
        for (tags, bad) in [(json!(["install", 1]), "tags[1]"), (json!([1]), "tags[0]")] {
            let p = json!({ "tags": tags });
            let e = list(p.as_object().unwrap()).unwrap_err();
            assert_eq!(e.details()["field"], "tags", "{e:?}");
            assert!(e.message().contains(bad), "{e:?}");
        }
    }
}
