//! The pages `docs_list` and `docs_get` serve (VSC-Bridge's server-local docs tools).

pub struct Page {
    pub id: &'static str,
    pub title: &'static str,
    pub summary: &'static str,
    pub text: &'static str,
}

pub const PAGES: &[Page] = &[
    Page {
        id: "debugging-workflow",
        title: "A debugging session, step by step",
        summary: "breakpoint_set → debug_start → debug_wait_for_hit → inspect → change → continue",
        text: include_str!("../docs/debugging-workflow.md"),
    },
    Page {
        id: "backends",
        title: "Backends: vscode and dap",
        summary: "Which backend serves which tools, and how `auto` chooses",
        text: include_str!("../docs/backends.md"),
    },
    Page {
        id: "errors",
        title: "Error codes and what to do",
        summary: "E_NO_SESSION, E_NOT_PAUSED, E_TIMEOUT, E_STALE_REFERENCE, ... with recovery steps",
        text: include_str!("../docs/errors.md"),
    },
];
