//! The tools that change the game: execute_command, send_message, teleport_player, give_item.

use super::Ctx;
use super::args::{ExecuteCommand, GiveItem, SendMessage, TeleportPlayer, normalize_item};
use super::marked;
use crate::models::CommandResult;
use bridge_core::ToolSpec;
use serde_json::json;

pub fn specs(ctx: &Ctx) -> Vec<ToolSpec> {
    let budget = ctx.budget();
    vec![
        ToolSpec::new(
            "execute_command",
            "Run one server command (no leading `/`) and get its output lines and success flag. Only commands \
             matching the game's allowed_patterns run; others fail with INVALID_COMMAND in the details.",
        )
        .title("Run a server command")
        .destructive()
        .open_world()
        .timeout(budget)
        .handler_with_text_on(ctx.clone(), |c, a: ExecuteCommand, _| async move {
            let command = a.command.trim().trim_start_matches('/').to_owned();
            let out = c
                .call::<CommandResult>("execute_command", json!({"command": command}), a.game)
                .await?;
            marked::render(out)
        }),
        ToolSpec::new(
            "send_message",
            "Say something in the game's chat: to everyone, or whispered to `target`.",
        )
        .title("Send a chat message")
        .open_world()
        .timeout(budget)
        .handler_on(ctx.clone(), |c, a: SendMessage, _| async move {
            let mut args = json!({"message": a.message});
            if let Some(t) = a.target {
                args["target"] = json!(t);
            }
            c.call::<CommandResult>("send_message", args, a.game).await
        }),
        ToolSpec::new(
            "teleport_player",
            "Move an online player to x, y, z (in `world`, a dimension id, when given). Returns where they are now.",
        )
        .title("Teleport a player")
        .destructive()
        .open_world()
        .timeout(budget)
        .handler_on(ctx.clone(), |c, a: TeleportPlayer, _| async move {
            let mut args = json!({"player": a.player, "x": a.x, "y": a.y, "z": a.z});
            if let Some(w) = a.world {
                args["world"] = json!(w);
            }
            c.call::<CommandResult>("teleport_player", args, a.game).await
        }),
        ToolSpec::new(
            "give_item",
            "Give an online player `quantity` of an item (`diamond` or `minecraft:diamond`).",
        )
        .title("Give an item")
        .destructive()
        .open_world()
        .timeout(budget)
        .handler_on(ctx.clone(), |c, a: GiveItem, _| async move {
            // Validate already refused ids that do not normalise.
            let item = normalize_item(&a.item).unwrap_or(a.item);
            let args = json!({"player": a.player, "item": item, "quantity": a.quantity});
            c.call::<CommandResult>("give_item", args, a.game).await
        }),
    ]
}
