//! `list_computers`: who is linked, what they are, since when.

use crate::computer::now_ms;
use crate::protocol::Kind;
use crate::state::State;
use bridge_core::{NoArgs, Rendered, ToolCtx, ToolError, ToolSpec};
use schemars::JsonSchema;
use serde::Serialize;
use std::sync::Arc;

#[derive(Debug, Serialize, JsonSchema)]
pub struct ComputerInfo {
    pub id: u32,
    pub label: Option<String>,
    pub kind: Kind,
    /// CC's `_HOST`, e.g. `ComputerCraft 1.113.1 (Minecraft 1.20.1)`.
    pub host: Option<String>,
    /// Milliseconds since the Unix epoch when this link was made.
    pub connected_since_ms: u64,
    /// Milliseconds since the Unix epoch of the last frame from the computer.
    pub last_seen_ms: u64,
    pub requests_in_flight: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ListOut {
    pub count: usize,
    pub computers: Vec<ComputerInfo>,
    /// Address the computers' link listener is bound to.
    pub link_listen: String,
    /// What a player types on a computer to link it (tell the user when a computer is missing).
    pub install: String,
    /// Ids another live machine tried to link with while the listed one held them: two computers share the
    /// id (a copied computer, or two worlds on one bridge). Calls always go to the listed one; the refused
    /// machine shows the reason on its screen.
    pub duplicate_ids: Vec<DuplicateId>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct DuplicateId {
    pub id: u32,
    /// How many times a second machine was refused this id.
    pub refusals: u64,
}

pub fn specs(state: &Arc<State>) -> Vec<ToolSpec> {
    let s = state.clone();
    vec![
        ToolSpec::new(
            "list_computers",
            "List the ComputerCraft computers linked to the bridge: id (use it in every other tool), label (may be \
             null), kind (computer, turtle or pocket; turtle_* tools need a turtle), when the link was made and \
             when the computer was last heard from. Also gives the in-game command that links a new computer, \
             and duplicate_ids: ids a second machine tried to take while the listed one held them (calls go to \
             the listed one only).",
        )
        .title("List Computers")
        .read_only()
        .handler_with_text(move |_: NoArgs, _ctx: ToolCtx| {
            let s = s.clone();
            async move { Ok::<_, ToolError>(list(&s)) }
        }),
    ]
}

fn list(state: &State) -> Rendered<ListOut> {
    let now = now_ms();
    let computers: Vec<ComputerInfo> = state
        .registry
        .snapshot()
        .iter()
        .map(|c| ComputerInfo {
            id: c.id(),
            label: c.label(),
            kind: c.identity.kind,
            host: c.identity.host.clone(),
            connected_since_ms: c.connected_at_ms,
            last_seen_ms: c.last_seen_ms(),
            requests_in_flight: c.in_flight(),
        })
        .collect();
    let install = state.install_command();
    // Only disputes that last (the holder is still linked), as `/health` shows them.
    let duplicate_ids: Vec<DuplicateId> = state
        .disputes()
        .into_iter()
        .map(|(id, refusals)| DuplicateId { id, refusals })
        .collect();
    let mut text = if computers.is_empty() {
        format!("No computers connected. To link one, run in-game: {install}")
    } else {
        computers
            .iter()
            .map(|c| {
                format!(
                    "{} (Label: {}) {}: linked {} s ago, last seen {} s ago",
                    c.id,
                    crate::computer::shown_label(c.label.as_deref()),
                    c.kind.as_str(),
                    now.saturating_sub(c.connected_since_ms) / 1000,
                    now.saturating_sub(c.last_seen_ms) / 1000
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    for d in &duplicate_ids {
        text.push_str(&format!(
            "\nWarning: another machine also uses id {} (refused {} times); calls go to the one listed. Give \
             one of them another id.",
            d.id, d.refusals
        ));
    }
    Rendered {
        value: ListOut {
            count: computers.len(),
            computers,
            link_listen: state.listen.to_string(),
            install,
            duplicate_ids,
        },
        text,
    }
}
