//! Redstone tools: read every side (or one), set a side's output on/off or to an analog strength.

use super::reply;
use crate::protocol::lua_seq;
use crate::state::State;
use bridge_core::{Rendered, ToolCtx, ToolError, ToolSpec, Validate, check};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RsSide {
    Top,
    Bottom,
    Left,
    Right,
    Front,
    Back,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetArgs {
    /// Computer id (see list_computers).
    pub computer: u32,
    /// One side; all six when omitted.
    #[serde(default)]
    pub side: Option<RsSide>,
}
impl Validate for GetArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetArgs {
    /// Computer id (see list_computers).
    pub computer: u32,
    /// The side to set: top, bottom, left, right, front or back (relative to the computer).
    pub side: RsSide,
    /// Full-strength output on or off. Give exactly one of `on` and `strength`.
    #[serde(default)]
    pub on: Option<bool>,
    /// Analog output strength, 0 to 15.
    #[serde(default)]
    pub strength: Option<u8>,
}
impl Validate for SetArgs {
    fn validate(&self) -> Result<(), ToolError> {
        match (self.on, self.strength) {
            (Some(_), None) => Ok(()),
            (None, Some(s)) => check::in_range("strength", s, 0, 15),
            _ => Err(ToolError::invalid_argument(
                "on",
                "give exactly one of `on` (true/false) and `strength` (0-15)",
            )),
        }
    }
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all(deserialize = "camelCase"))]
pub struct SideState {
    pub side: RsSide,
    pub input: bool,
    pub analog_input: u8,
    pub output: bool,
    pub analog_output: u8,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct GetOut {
    #[serde(deserialize_with = "lua_seq")]
    pub sides: Vec<SideState>,
}

fn line(s: &SideState) -> String {
    format!(
        "{:?}: input {} (strength {}), output {} (strength {})",
        s.side, s.input, s.analog_input, s.output, s.analog_output
    )
    .to_lowercase()
}

pub fn specs(state: &Arc<State>) -> Vec<ToolSpec> {
    let (s1, s2) = (state.clone(), state.clone());
    vec![
        ToolSpec::new(
            "redstone_get",
            "Read a computer's redstone: input and output, on/off and analog strength \
                      (0-15), for one side or all six.",
        )
        .title("Read Redstone")
        .read_only()
        .open_world()
        .handler_with_text(move |a: GetArgs, _ctx: ToolCtx| {
            let s = s1.clone();
            async move {
                let c = s.computer(a.computer)?;
                let params = match a.side {
                    Some(side) => json!({ "side": side }),
                    None => json!({}),
                };
                let result = c
                    .request("redstone.get", params, s.cfg.request_timeout)
                    .await?;
                let out: GetOut = reply(&c, result)?;
                let text = out.sides.iter().map(line).collect::<Vec<_>>().join("\n");
                Ok(Rendered { value: out, text })
            }
        }),
        ToolSpec::new(
            "redstone_set",
            "Set a computer's redstone output on one side: `on` for full strength on/off, \
                      or `strength` 0-15. Returns that side's state.",
        )
        .title("Set Redstone Output")
        .idempotent()
        .open_world()
        .handler_with_text(move |a: SetArgs, _ctx: ToolCtx| {
            let s = s2.clone();
            async move {
                let c = s.computer(a.computer)?;
                let params = match (a.on, a.strength) {
                    (_, Some(strength)) => json!({ "side": a.side, "strength": strength }),
                    (on, None) => json!({ "side": a.side, "on": on.unwrap_or(false) }),
                };
                let result = c
                    .request("redstone.set", params, s.cfg.request_timeout)
                    .await?;
                let out: SideState = reply(&c, result)?;
                Ok(Rendered {
                    text: line(&out),
                    value: out,
                })
            }
        }),
    ]
}
