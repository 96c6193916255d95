//! Tool arguments: the names of docs/minecraft.md's tool list, strict, checked before anything is sent.
//! Numbers also arrive as numeric strings (the core coerces them).

use bridge_core::tool::check;
use bridge_core::{ToolError, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Longest command text sent (the mod's own `max_command_length`, default 256, applies too).
pub const MAX_COMMAND_BYTES: usize = 1024;
/// Longest chat message.
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// Largest `get_world_info` radius: a cube of 33³ blocks is already ~36 000 positions.
pub const MAX_RADIUS: u32 = 16;
/// Most items one `give_item` hands out (100 stacks of 64).
pub const MAX_QUANTITY: u32 = 6400;
/// Coordinates beyond the world border (±30 million) are refused.
pub const MAX_COORD: f64 = 30_000_000.0;

fn check_game(game: &Option<String>) -> Result<(), ToolError> {
    match game {
        Some(g) if !crate::wire::valid_name(g) => Err(ToolError::invalid_argument(
            "game",
            "`game` must be 1 to 64 characters of A-Z a-z 0-9 _ . -",
        )),
        _ => Ok(()),
    }
}

fn check_player(player: &str) -> Result<(), ToolError> {
    check::non_empty("player", player)?;
    if player.len() > 64 || player.chars().any(char::is_whitespace) {
        return Err(ToolError::invalid_argument(
            "player",
            "`player` must be a player name: at most 64 characters, no spaces",
        ));
    }
    Ok(())
}

fn check_coord(field: &str, v: f64) -> Result<(), ToolError> {
    if !v.is_finite() || v.abs() > MAX_COORD {
        return Err(ToolError::invalid_argument(
            field,
            format!("`{field}` must be a number from -{MAX_COORD} to {MAX_COORD}"),
        ));
    }
    Ok(())
}

/// `get_online_players`, `get_server_info`: only which game.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GameOnly {
    /// Which game server, when more than one is connected to the relay (the name `status` lists).
    #[serde(default)]
    pub game: Option<String>,
}

impl Validate for GameOnly {
    fn validate(&self) -> Result<(), ToolError> {
        check_game(&self.game)
    }
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteCommand {
    /// A server command without the leading `/`, e.g. `time query daytime`. It must match the game's
    /// `allowed_patterns`.
    pub command: String,
    /// Which game server, when more than one is connected to the relay (the name `status` lists).
    #[serde(default)]
    pub game: Option<String>,
}

impl Validate for ExecuteCommand {
    fn validate(&self) -> Result<(), ToolError> {
        check::non_empty("command", &self.command)?;
        check::max_bytes("command", &self.command, MAX_COMMAND_BYTES)?;
        if self.command.contains(['\n', '\r']) {
            return Err(ToolError::invalid_argument(
                "command",
                "`command` must be one line",
            ));
        }
        check_game(&self.game)
    }
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessage {
    /// The chat text.
    pub message: String,
    /// One player to whisper to; everyone when absent.
    #[serde(default)]
    pub target: Option<String>,
    /// Which game server, when more than one is connected to the relay (the name `status` lists).
    #[serde(default)]
    pub game: Option<String>,
}

impl Validate for SendMessage {
    fn validate(&self) -> Result<(), ToolError> {
        check::non_empty("message", &self.message)?;
        check::max_bytes("message", &self.message, MAX_MESSAGE_BYTES)?;
        if let Some(t) = &self.target {
            check_player(t).map_err(|_| {
                ToolError::invalid_argument(
                    "target",
                    "`target` must be a player name without spaces",
                )
            })?;
        }
        check_game(&self.game)
    }
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TeleportPlayer {
    /// Name of an online player.
    pub player: String,
    /// Destination x (east), at most 30 000 000 either way.
    pub x: f64,
    /// Destination y (height).
    pub y: f64,
    /// Destination z (south), at most 30 000 000 either way.
    pub z: f64,
    /// Dimension, e.g. `minecraft:the_nether`; the player's own when absent.
    #[serde(default)]
    pub world: Option<String>,
    /// Which game server, when more than one is connected to the relay (the name `status` lists).
    #[serde(default)]
    pub game: Option<String>,
}

impl Validate for TeleportPlayer {
    fn validate(&self) -> Result<(), ToolError> {
        check_player(&self.player)?;
        check_coord("x", self.x)?;
        check_coord("y", self.y)?;
        check_coord("z", self.z)?;
        if let Some(w) = &self.world {
            check::non_empty("world", w)?;
        }
        check_game(&self.game)
    }
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GiveItem {
    /// Name of an online player.
    pub player: String,
    /// Item id: `diamond` and `minecraft:diamond` alike.
    pub item: String,
    /// How many, 1 to 6400; the game may refuse more than its stack and inventory limits allow.
    pub quantity: u32,
    /// Which game server, when more than one is connected to the relay (the name `status` lists).
    #[serde(default)]
    pub game: Option<String>,
}

/// `diamond` → `minecraft:diamond`; `Minecraft:Diamond` → `minecraft:diamond`. `None` when it is not an
/// item id at all.
pub fn normalize_item(item: &str) -> Option<String> {
    let item = item.trim().to_ascii_lowercase();
    let (ns, path) = match item.split_once(':') {
        Some((ns, path)) => (ns.to_owned(), path.to_owned()),
        None => ("minecraft".to_owned(), item),
    };
    let ok_ns = !ns.is_empty()
        && ns
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
    let ok_path = !path.is_empty()
        && path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./".contains(&b));
    (ok_ns && ok_path && ns.len() + path.len() < 128).then(|| format!("{ns}:{path}"))
}

impl Validate for GiveItem {
    fn validate(&self) -> Result<(), ToolError> {
        check_player(&self.player)?;
        if normalize_item(&self.item).is_none() {
            return Err(ToolError::invalid_argument(
                "item",
                "`item` must be an item id such as `diamond` or `minecraft:diamond`",
            ));
        }
        check::in_range("quantity", self.quantity, 1, MAX_QUANTITY)?;
        check_game(&self.game)
    }
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlayerArgs {
    /// Name of an online player.
    pub player: String,
    /// Which game server, when more than one is connected to the relay (the name `status` lists).
    #[serde(default)]
    pub game: Option<String>,
}

impl Validate for PlayerArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check_player(&self.player)?;
        check_game(&self.game)
    }
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorldArgs {
    /// Centre x (east).
    pub x: i64,
    /// Centre y (height).
    pub y: i64,
    /// Centre z (south).
    pub z: i64,
    /// Half the side of the cube looked at, 0 to 16.
    pub radius: u32,
    /// Blocks to skip: a large answer comes in pages, and the next one starts at the last page's
    /// `next_offset`.
    #[serde(default)]
    pub offset: u64,
    /// Which game server, when more than one is connected to the relay (the name `status` lists).
    #[serde(default)]
    pub game: Option<String>,
}

impl Validate for WorldArgs {
    fn validate(&self) -> Result<(), ToolError> {
        for (field, v) in [("x", self.x), ("y", self.y), ("z", self.z)] {
            check_coord(field, v as f64)?;
        }
        check::in_range("radius", self.radius, 0, MAX_RADIUS)?;
        check_game(&self.game)
    }
}
