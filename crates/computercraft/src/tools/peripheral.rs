//! Peripheral tools: list what is attached (sides and wired-modem names), call a method.

use super::reply;
use crate::protocol::{LuaValues, lua_seq};
use crate::state::State;
use bridge_core::{Rendered, ToolCtx, ToolError, ToolSpec, Validate, check};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Computer id (see list_computers).
    pub computer: u32,
}
impl Validate for ListArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallArgs {
    /// Computer id (see list_computers).
    pub computer: u32,
    /// Peripheral name: a side (`top`, `left`, ...) or a wired-modem name (`minecraft:chest_0`).
    pub name: String,
    /// Method name, as listed by peripheral_list.
    pub method: String,
    /// Arguments, in order (JSON values; null for nil).
    #[serde(default)]
    pub args: Vec<Value>,
}
impl Validate for CallArgs {
    fn validate(&self) -> Result<(), ToolError> {
        check::non_empty("name", &self.name)?;
        check::non_empty("method", &self.method)
    }
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct PeripheralInfo {
    pub name: String,
    /// Every type the peripheral has (e.g. `minecraft:chest` and `inventory`).
    #[serde(deserialize_with = "lua_seq")]
    pub types: Vec<String>,
    #[serde(deserialize_with = "lua_seq")]
    pub methods: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ListOut {
    #[serde(deserialize_with = "lua_seq")]
    pub peripherals: Vec<PeripheralInfo>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CallOut {
    /// Every value the method returned (nil as null).
    pub values: Vec<Value>,
}

pub fn specs(state: &Arc<State>) -> Vec<ToolSpec> {
    let (s1, s2) = (state.clone(), state.clone());
    vec![
        ToolSpec::new(
            "peripheral_list",
            "List the peripherals attached to a computer (on its sides or through wired modems): name, types, \
             methods.",
        )
        .title("List Peripherals")
        .read_only()
        .open_world()
        .handler_with_text(move |a: ListArgs, _ctx: ToolCtx| {
            let s = s1.clone();
            async move {
                let c = s.computer(a.computer)?;
                let result = c.request("peripheral.list", json!({}), s.cfg.request_timeout).await?;
                let out: ListOut = reply(&c, result)?;
                let text = if out.peripherals.is_empty() {
                    "no peripherals attached".to_string()
                } else {
                    out.peripherals
                        .iter()
                        .map(|p| format!("{} [{}]: {}", p.name, p.types.join(", "), p.methods.join(", ")))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                Ok(Rendered { value: out, text })
            }
        }),
        ToolSpec::new(
            "peripheral_call",
            "Call a method of a peripheral (peripheral.call(name, method, ...)) and return all its results. \
             Methods can act on the world (a monitor, a speaker, an inventory transfer).",
        )
        .title("Call Peripheral Method")
        .destructive()
        .open_world()
        .handler_with_text(move |a: CallArgs, _ctx: ToolCtx| {
            let s = s2.clone();
            async move {
                let c = s.computer(a.computer)?;
                let params = json!({ "name": a.name, "method": a.method, "nargs": a.args.len(), "args": a.args });
                let result = c.request("peripheral.call", params, s.cfg.request_timeout).await?;
                let LuaValues(values) = reply(&c, result)?;
                let shown: Vec<String> = values.iter().map(Value::to_string).collect();
                let text = format!("{}.{} returned: {}", a.name, a.method, shown.join(", "));
                Ok(Rendered { value: CallOut { values }, text })
            }
        }),
    ]
}
