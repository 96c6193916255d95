//! `status`: the link to the relay, the games behind it, what to do next.

use super::Ctx;
use crate::client::LinkStatus;
use bridge_core::{NoArgs, ToolSpec};
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Debug, Serialize, JsonSchema)]
pub struct Status {
    #[serde(flatten)]
    pub link: LinkStatus,
    /// What to do next.
    pub advice: String,
}

fn advice(s: &LinkStatus) -> String {
    if !s.connected {
        return format!(
            "Not connected to the relay at {} (attempts: {}, last error: {}). Check the relay runs and \
             MINECRAFT_RELAY_TOKEN is one of its MINECRAFT_MCP_AUTH_TOKENS; this bridge keeps retrying.",
            s.relay_url,
            s.reconnect_attempts,
            s.last_error.as_deref().unwrap_or("none")
        );
    }
    match s.games.len() {
        0 => "Connected to the relay, but no game server is: start the server with the mod or plugin \
              pointed at the relay."
            .to_owned(),
        1 => format!("Ready: game `{}` is connected.", s.games[0]),
        n => format!("{n} games are connected: pass `game` to every tool ({}).", s.games.join(", ")),
    }
}

pub fn spec(ctx: &Ctx) -> ToolSpec {
    ToolSpec::new(
        "status",
        "The bridge's link to the relay (connected, retries, last error, relay epoch, events received, \
         messages lost) and the game servers connected to it.",
    )
        .title("Relay and game status")
    .read_only()
    .handler_on(ctx.clone(), |c, _: NoArgs, _| async move {
        let link = c.link.status();
        Ok(Status {
            advice: advice(&link),
            link,
        })
    })
}
