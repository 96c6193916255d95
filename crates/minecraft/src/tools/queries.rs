//! The tools that read the game: players, one player, the server, the blocks and entities around a point.

use super::Ctx;
use super::args::{GameOnly, PlayerArgs, WorldArgs};
use super::marked;
use super::world_pages::CubeKey;
use crate::models::{OnlinePlayers, PlayerInfo, ServerInfo, WorldInfo};
use bridge_core::ToolSpec;
use serde_json::json;
use std::sync::Arc;

pub fn specs(ctx: &Ctx) -> Vec<ToolSpec> {
    let budget = ctx.budget();
    vec![
        ToolSpec::new("get_online_players", "The names of the players online now.")
            .title("List online players")
            .read_only()
            .open_world()
            .timeout(budget)
            .handler_with_text_on(ctx.clone(), |c, a: GameOnly, _| async move {
                let mut out: OnlinePlayers = c.call("get_online_players", json!({}), a.game).await?;
                out.count = out.players.len();
                marked::render(out)
            }),
        ToolSpec::new(
            "get_player_info",
            "One online player: health, food, location, game mode and inventory. PLAYER_NOT_FOUND when offline.",
        )
        .title("Get player details")
        .read_only()
        .open_world()
        .timeout(budget)
        .handler_with_text_on(ctx.clone(), |c, a: PlayerArgs, _| async move {
            let info = c
                .call::<PlayerInfo>("get_player_info", json!({"player": a.player}), a.game)
                .await?;
            marked::render(info)
        }),
        ToolSpec::new(
            "get_server_info",
            "The server: version, players online and the maximum, time of day (ticks), weather, TPS.",
        )
        .title("Get server info")
        .read_only()
        .open_world()
        .timeout(budget)
        .handler_on(ctx.clone(), |c, a: GameOnly, _| async move {
            c.call::<ServerInfo>("get_server_info", json!({}), a.game).await
        }),
        ToolSpec::new(
            "get_world_info",
            "Non-air blocks and the entities in the cube of `radius` (0 to 16) around x, y, z. A large cube comes \
             in pages: `total_blocks` says how many there are, and while `next_offset` is present, call again with \
             `offset` set to it for the next page.",
        )
        .title("Inspect blocks and entities nearby")
        .read_only()
        .open_world()
        .timeout(budget)
        .task_support(bridge_core::tool::TaskSupport::Optional)
        .handler_with_text_on(ctx.clone(), |c, a: WorldArgs, _| async move {
            let key = CubeKey {
                game: a.game.clone(),
                x: a.x,
                y: a.y,
                z: a.z,
                radius: a.radius,
            };
            // A later page comes from the answer its first page came from (tools::world_pages); a first page
            // always asks the game.
            if a.offset > 0
                && let Some(info) = c.world.get(&key)
            {
                return marked::render(info.page(a.offset));
            }
            let args = json!({"x": a.x, "y": a.y, "z": a.z, "radius": a.radius});
            let info = Arc::new(c.call::<WorldInfo>("get_world_info", args, a.game).await?);
            let page = info.page(a.offset);
            if page.next_offset.is_some() {
                c.world.put(key, info);
            }
            marked::render(page)
        }),
    ]
}
