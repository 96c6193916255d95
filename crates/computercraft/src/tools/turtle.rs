//! Turtle tools. Each turtle action answers `true` or `false, reason` in CC; a refusal ("Movement
//! obstructed", "Out of fuel") is a normal result with `success: false`, not a tool error. On a computer
//! that is not a turtle every tool fails with `E_UNSUPPORTED` before anything is sent.

use super::reply;
use crate::computer::Computer;
use crate::protocol::{Kind, LuaValues, lua_seq};
use crate::state::State;
use bridge_core::{Rendered, ToolCtx, ToolError, ToolSpec, Validate, check};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Turtle actions take a few ticks each; allow for a lagging server.
const TURTLE_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Move {
    Forward,
    Back,
    Up,
    Down,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Turn {
    Left,
    Right,
}

/// Where a dig/place/detect/inspect acts, relative to the turtle.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    #[default]
    Front,
    Up,
    Down,
}

impl Side {
    fn action(self, base: &str) -> String {
        match self {
            Self::Front => base.to_string(),
            Self::Up => format!("{base}Up"),
            Self::Down => format!("{base}Down"),
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveArgs {
    /// Turtle id (see list_computers; kind must be turtle).
    pub computer: u32,
    /// Which way: forward, back, up or down.
    pub direction: Move,
}
impl Validate for MoveArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnArgs {
    /// Turtle id.
    pub computer: u32,
    /// Which way to face: left or right.
    pub direction: Turn,
}
impl Validate for TurnArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SideArgs {
    /// Turtle id.
    pub computer: u32,
    /// front (default), up or down.
    #[serde(default)]
    pub side: Side,
}
impl Validate for SideArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurtleArgs {
    /// Turtle id.
    pub computer: u32,
}
impl Validate for TurtleArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelectArgs {
    /// Turtle id.
    pub computer: u32,
    /// Inventory slot, 1 to 16.
    pub slot: u32,
}
impl Validate for SelectArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::in_range("slot", self.slot, 1, 16)
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RefuelArgs {
    /// Turtle id.
    pub computer: u32,
    /// Items of the selected slot to burn (default: all of them; 0 only checks that they are fuel).
    #[serde(default)]
    pub count: Option<u32>,
}
impl Validate for RefuelArgs {
    fn validate(&self) -> Result<(), ToolError> {
        match self.count {
            Some(c) => check::in_range("count", c, 0, 64),
            None => Ok(()),
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ActionOut {
    /// What CC answered: true when the action happened.
    pub success: bool,
    /// CC's reason when it did not ("Movement obstructed", "Out of fuel", "Nothing to dig here", ...).
    pub reason: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RefuelOut {
    pub success: bool,
    pub reason: Option<String>,
    /// Fuel after refuelling: a number, or "unlimited" when the server disables fuel.
    pub fuel_level: Value,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct DetectOut {
    pub block_present: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct InspectOut {
    /// `{name, state, tags}` of the block, or null when there is none.
    pub block: Option<Value>,
    pub reason: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Slot {
    pub slot: u32,
    pub name: String,
    pub count: u32,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct InventoryOut {
    /// The selected slot (1-16).
    pub selected: u32,
    /// A number, or "unlimited".
    pub fuel: Value,
    /// Non-empty slots only.
    #[serde(deserialize_with = "lua_seq")]
    pub slots: Vec<Slot>,
}

fn need_turtle(state: &State, id: u32) -> Result<Arc<Computer>, ToolError> {
    let c = state.computer(id)?;
    if c.identity.kind != Kind::Turtle {
        return Err(ToolError::unsupported(format!(
            "computer {id} is a {}, not a turtle",
            c.identity.kind.as_str()
        ))
        .with_hint(
            "list_computers shows each computer's kind; call turtle tools with a turtle's id",
        )
        .with_details(json!({"computer": id, "kind": c.identity.kind})));
    }
    Ok(c)
}

/// Runs `turtle.<action>(args...)` and returns all its results.
async fn call(
    state: &State,
    id: u32,
    action: &str,
    args: Vec<Value>,
) -> Result<Vec<Value>, ToolError> {
    let c = need_turtle(state, id)?;
    let params = json!({ "action": action, "nargs": args.len(), "args": args });
    let result = c.request("turtle", params, TURTLE_TIMEOUT).await?;
    let LuaValues(values) = reply(&c, result)?;
    Ok(values)
}

fn action_out(values: &[Value]) -> ActionOut {
    ActionOut {
        success: values.first().and_then(Value::as_bool).unwrap_or(false),
        reason: values.get(1).and_then(Value::as_str).map(str::to_owned),
    }
}

fn render(what: &str, out: ActionOut) -> Rendered<ActionOut> {
    let text = match &out.reason {
        None if out.success => format!("{what}: done"),
        Some(r) => format!("{what}: failed: {r}"),
        None => format!("{what}: failed"),
    };
    Rendered { value: out, text }
}

pub fn specs(state: &Arc<State>) -> Vec<ToolSpec> {
    let s = || state.clone();
    let (s1, s2, s3, s4, s5, s6, s7, s8, s9) = (s(), s(), s(), s(), s(), s(), s(), s(), s());
    vec![
        ToolSpec::new(
            "turtle_move",
            "Move a turtle one block forward, back, up or down (uses 1 fuel). success false \
                      with a reason when blocked or out of fuel.",
        )
        .title("Move Turtle")
        .open_world()
        .timeout(TURTLE_TIMEOUT + Duration::from_secs(5))
        .handler_with_text(move |a: MoveArgs, _ctx: ToolCtx| {
            let s = s1.clone();
            async move {
                let action = match a.direction {
                    Move::Forward => "forward",
                    Move::Back => "back",
                    Move::Up => "up",
                    Move::Down => "down",
                };
                let v = call(&s, a.computer, action, vec![]).await?;
                Ok(render(&format!("move {action}"), action_out(&v)))
            }
        }),
        ToolSpec::new("turtle_turn", "Turn a turtle left or right on the spot.")
            .title("Turn Turtle")
            .open_world()
            .timeout(TURTLE_TIMEOUT + Duration::from_secs(5))
            .handler_with_text(move |a: TurnArgs, _ctx: ToolCtx| {
                let s = s2.clone();
                async move {
                    let action = match a.direction {
                        Turn::Left => "turnLeft",
                        Turn::Right => "turnRight",
                    };
                    let v = call(&s, a.computer, action, vec![]).await?;
                    Ok(render(action, action_out(&v)))
                }
            }),
        ToolSpec::new(
            "turtle_dig",
            "Dig the block in front of, above or below a turtle (needs a pickaxe or other \
                      tool equipped); the drops go to its inventory.",
        )
        .title("Dig")
        .destructive()
        .open_world()
        .timeout(TURTLE_TIMEOUT + Duration::from_secs(5))
        .handler_with_text(move |a: SideArgs, _ctx: ToolCtx| {
            let s = s3.clone();
            async move {
                let action = a.side.action("dig");
                let v = call(&s, a.computer, &action, vec![]).await?;
                Ok(render(&action, action_out(&v)))
            }
        }),
        ToolSpec::new(
            "turtle_place",
            "Place the selected slot's block in front of, above or below a turtle.",
        )
        .title("Place Block")
        .open_world()
        .timeout(TURTLE_TIMEOUT + Duration::from_secs(5))
        .handler_with_text(move |a: SideArgs, _ctx: ToolCtx| {
            let s = s4.clone();
            async move {
                let action = a.side.action("place");
                let v = call(&s, a.computer, &action, vec![]).await?;
                Ok(render(&action, action_out(&v)))
            }
        }),
        ToolSpec::new(
            "turtle_detect",
            "Whether there is a solid block in front of, above or below a turtle.",
        )
        .title("Detect Blocks")
        .read_only()
        .open_world()
        .timeout(TURTLE_TIMEOUT + Duration::from_secs(5))
        .handler_with_text(move |a: SideArgs, _ctx: ToolCtx| {
            let s = s5.clone();
            async move {
                let action = a.side.action("detect");
                let v = call(&s, a.computer, &action, vec![]).await?;
                let present = v.first().and_then(Value::as_bool).unwrap_or(false);
                let text = format!(
                    "{action}: {}",
                    if present { "block present" } else { "nothing" }
                );
                Ok(Rendered {
                    value: DetectOut {
                        block_present: present,
                    },
                    text,
                })
            }
        }),
        ToolSpec::new(
            "turtle_inspect",
            "Name, block state and tags of the block in front of, above or below a \
                      turtle; block is null when there is none.",
        )
        .title("Inspect Block")
        .read_only()
        .open_world()
        .timeout(TURTLE_TIMEOUT + Duration::from_secs(5))
        .handler_with_text(move |a: SideArgs, _ctx: ToolCtx| {
            let s = s6.clone();
            async move {
                let action = a.side.action("inspect");
                let v = call(&s, a.computer, &action, vec![]).await?;
                let found = v.first().and_then(Value::as_bool).unwrap_or(false);
                let out = if found {
                    InspectOut {
                        block: v.get(1).cloned(),
                        reason: None,
                    }
                } else {
                    InspectOut {
                        block: None,
                        reason: v.get(1).and_then(Value::as_str).map(str::to_owned),
                    }
                };
                let text = match (&out.block, &out.reason) {
                    (Some(b), _) => format!("{action}: {b}"),
                    (None, Some(r)) => format!("{action}: {r}"),
                    (None, None) => format!("{action}: nothing"),
                };
                Ok(Rendered { value: out, text })
            }
        }),
        ToolSpec::new(
            "turtle_inventory",
            "A turtle's 16 inventory slots (non-empty ones: slot, item name, count), \
                      the selected slot and the fuel level.",
        )
        .title("Turtle Inventory")
        .read_only()
        .open_world()
        .timeout(TURTLE_TIMEOUT + Duration::from_secs(5))
        .handler_with_text(move |a: TurtleArgs, _ctx: ToolCtx| {
            let s = s7.clone();
            async move {
                let c = need_turtle(&s, a.computer)?;
                let result = c
                    .request("turtle.inventory", json!({}), TURTLE_TIMEOUT)
                    .await?;
                let inv: InventoryOut = reply(&c, result)?;
                let mut lines = vec![format!("selected slot {}, fuel {}", inv.selected, inv.fuel)];
                lines.extend(
                    inv.slots
                        .iter()
                        .map(|s| format!("slot {}: {} x{}", s.slot, s.name, s.count)),
                );
                if inv.slots.is_empty() {
                    lines.push("inventory empty".into());
                }
                Ok(Rendered {
                    text: lines.join("\n"),
                    value: inv,
                })
            }
        }),
        ToolSpec::new(
            "turtle_select",
            "Select one of a turtle's 16 inventory slots (for place, refuel, drop).",
        )
        .title("Select Slot")
        .idempotent()
        .open_world()
        .timeout(TURTLE_TIMEOUT + Duration::from_secs(5))
        .handler_with_text(move |a: SelectArgs, _ctx: ToolCtx| {
            let s = s8.clone();
            async move {
                let v = call(&s, a.computer, "select", vec![json!(a.slot)]).await?;
                Ok(render(&format!("select slot {}", a.slot), action_out(&v)))
            }
        }),
        ToolSpec::new(
            "turtle_refuel",
            "Burn fuel items (coal, charcoal, lava buckets, ...) from the selected slot; \
                      returns the new fuel level.",
        )
        .title("Refuel Turtle")
        .open_world()
        .timeout(TURTLE_TIMEOUT + Duration::from_secs(5))
        .handler_with_text(move |a: RefuelArgs, _ctx: ToolCtx| {
            let s = s9.clone();
            async move {
                let args = a.count.map(|c| vec![json!(c)]).unwrap_or_default();
                let v = call(&s, a.computer, "refuel", args).await?;
                let out = action_out(&v);
                let level = call(&s, a.computer, "getFuelLevel", vec![]).await?;
                let fuel_level = level.into_iter().next().unwrap_or(Value::Null);
                let text = match &out.reason {
                    Some(r) => format!("refuel failed: {r}; fuel level {fuel_level}"),
                    None => format!("refuelled; fuel level {fuel_level}"),
                };
                Ok(Rendered {
                    value: RefuelOut {
                        success: out.success,
                        reason: out.reason,
                        fuel_level,
                    },
                    text,
                })
            }
        }),
    ]
}
