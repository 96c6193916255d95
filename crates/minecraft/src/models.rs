//! The data models of PROTOCOL.md §4, with their field names (camelCase on the wire and in tool results). Game answers
//! are read into these, so a game that sends something else gets a clear error instead of a guess.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Location {
    pub world: String,
    pub x: f64,
    pub y: f64,
    pub z: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ItemStack {
    #[serde(rename = "type")]
    pub item_type: String,
    pub quantity: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlayerInfo {
    pub name: String,
    pub uuid: String,
    pub health: f64,
    pub food_level: f64,
    pub location: Location,
    pub game_mode: String,
    pub inventory: Vec<ItemStack>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerInfo {
    pub version: String,
    pub online_players: u32,
    pub max_players: u32,
    pub time_of_day: f64,
    pub weather: String,
    pub tps: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BlockInfo {
    #[serde(rename = "type")]
    pub block_type: String,
    pub location: Location,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EntityInfo {
    #[serde(rename = "type")]
    pub entity_type: String,
    pub location: Location,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorldInfo {
    pub blocks: Vec<BlockInfo>,
    pub entities: Vec<EntityInfo>,
    /// Non-air blocks in the whole cube (set by the MCP server; `blocks` may be one page of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_blocks: Option<u64>,
    /// Where the next page starts (pass it as `offset`); absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
}

/// Bytes of compact block JSON one `get_world_info` page carries: a result holds it about three times over
/// (indented text and structured content), and MCP clients refuse messages over 1 MiB (the Python SDK's SSE
/// event limit).
pub const WORLD_PAGE_BYTES: usize = 32 << 10; // so the result fits the core's RESULT_CAP_BYTES (80 KB)

impl WorldInfo {
    /// The page of blocks from `offset` that fits [`WORLD_PAGE_BYTES`] (at least one block), with the total
    /// and where the next page starts.
    pub fn page(&self, offset: u64) -> Self {
        let total = self.blocks.len() as u64;
        let start = usize::try_from(offset.min(total)).unwrap_or(usize::MAX);
        let mut bytes = 0;
        let mut end = start;
        for b in &self.blocks[start..] {
            bytes += serde_json::to_string(b).map_or(0, |t| t.len()) + 1;
            if bytes > WORLD_PAGE_BYTES && end > start {
                break;
            }
            end += 1;
        }
        Self {
            blocks: self.blocks[start..end].to_vec(),
            entities: self.entities.clone(),
            total_blocks: Some(total),
            next_offset: ((end as u64) < total).then_some(end as u64),
        }
    }
}

/// `CommandResult` (PROTOCOL.md §4.2), plus the command's output lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CommandResult {
    pub success: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the command printed, one line each (execute_command).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Vec<String>>,
    /// Where the player is now (teleport_player).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OnlinePlayers {
    pub players: Vec<String>,
    #[serde(default)]
    pub count: usize,
}
