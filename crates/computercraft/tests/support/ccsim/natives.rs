//! The Rust side of the world APIs (turtle commands and queries, peripherals, redstone) exposed to the prelude
//! through `_SIM`, and conversions between Lua values and JSON for them.

use super::{Ev, Event, SimHandle, world};
use mlua::{Lua, MultiValue, Table, Value};
use serde_json::Value as Json;
use std::time::Instant;

pub(super) fn install_world(lua: &Lua, sim: &Table, h: &SimHandle) -> mlua::Result<()> {
    sim.set("turtle_commands", world::COMMANDS.to_vec())?;
    sim.set("turtle_queries", world::QUERIES.to_vec())?;
    let hh = h.clone();
    sim.set(
        "turtle_issue",
        lua.create_function(move |lua, (name, args): (String, MultiValue)| {
            let args: Vec<Json> = args.iter().map(to_json).collect();
            let mut s = hh.state();
            if s.turtle_ongoing >= 16 {
                return Ok((
                    Value::Boolean(false),
                    Value::String(lua.create_string("Too many ongoing turtle commands")?),
                ));
            }
            let delay = s.cfg.turtle_delay;
            let Some(t) = s.world.turtle.as_mut() else {
                return Err(mlua::Error::runtime("not a turtle"));
            };
            let outcome = t.command(&name, &args).map_err(mlua::Error::runtime)?;
            s.next_timer += 1;
            let id = s.next_timer;
            let mut ev: Event = vec!["turtle_response".into(), Ev::Num(id as f64)];
            ev.extend(outcome.values.into_iter().map(Ev::Json));
            let at = Instant::now() + delay;
            s.delayed.push((at, ev));
            s.turtle_ongoing += 1;
            if outcome.inventory_changed {
                s.delayed.push((at, vec!["turtle_inventory".into()]));
            }
            drop(s);
            hh.wake.notify_one();
            Ok((Value::Number(id as f64), Value::Nil))
        })?,
    )?;
    let hh = h.clone();
    sim.set(
        "turtle_query",
        lua.create_function(move |lua, (name, args): (String, MultiValue)| {
            let args: Vec<Json> = args.iter().map(to_json).collect();
            let s = hh.state();
            let t = s
                .world
                .turtle
                .as_ref()
                .ok_or_else(|| mlua::Error::runtime("not a turtle"))?;
            let values = t.query(&name, &args).map_err(mlua::Error::runtime)?;
            values
                .iter()
                .map(|v| from_json(lua, v))
                .collect::<mlua::Result<MultiValue>>()
        })?,
    )?;
    let hh = h.clone();
    sim.set(
        "peripheral_names",
        lua.create_function(move |_, ()| {
            Ok(hh
                .state()
                .world
                .peripherals
                .keys()
                .cloned()
                .collect::<Vec<_>>())
        })?,
    )?;
    let hh = h.clone();
    sim.set(
        "peripheral_types",
        lua.create_function(move |_, name: String| {
            Ok(hh
                .state()
                .world
                .peripherals
                .get(&name)
                .map(|p| p.types().iter().map(|s| s.to_string()).collect::<Vec<_>>()))
        })?,
    )?;
    let hh = h.clone();
    sim.set(
        "peripheral_methods",
        lua.create_function(move |_, name: String| {
            Ok(hh.state().world.peripherals.get(&name).map(|p| {
                p.methods()
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
            }))
        })?,
    )?;
    let hh = h.clone();
    sim.set(
        "peripheral_call",
        lua.create_function(
            move |lua, (name, method, args): (String, String, MultiValue)| {
                let args: Vec<Json> = args.iter().map(to_json).collect();
                let mut s = hh.state();
                let p = s
                    .world
                    .peripherals
                    .get_mut(&name)
                    .ok_or_else(|| mlua::Error::runtime("No peripheral attached"))?;
                let values = p.call(&method, &args).map_err(mlua::Error::runtime)?;
                values
                    .iter()
                    .map(|v| from_json(lua, v))
                    .collect::<mlua::Result<MultiValue>>()
            },
        )?,
    )?;
    let hh = h.clone();
    sim.set(
        "redstone",
        lua.create_function(move |lua, (op, args): (String, MultiValue)| {
            let args: Vec<Json> = args.iter().map(to_json).collect();
            let values = hh
                .state()
                .world
                .redstone(&op, &args)
                .map_err(mlua::Error::runtime)?;
            values
                .iter()
                .map(|v| from_json(lua, v))
                .collect::<mlua::Result<MultiValue>>()
        })?,
    )?;
    Ok(())
}

/// Lua → event value (for `os.queueEvent`).
pub(super) fn from_lua(v: &Value) -> Ev {
    match v {
        Value::Nil => Ev::Nil,
        Value::Boolean(b) => Ev::Bool(*b),
        Value::Integer(i) => Ev::Num(*i as f64),
        Value::Number(n) => Ev::Num(*n),
        Value::String(s) => Ev::Str(s.as_bytes().to_vec()),
        other => Ev::Json(to_json(other)),
    }
}

/// Lua → JSON for the Rust-side world (tables become objects or arrays; strings lossy UTF-8).
pub fn to_json(v: &Value) -> Json {
    match v {
        Value::Nil => Json::Null,
        Value::Boolean(b) => Json::Bool(*b),
        Value::Integer(i) => Json::from(*i),
        Value::Number(n) => serde_json::Number::from_f64(*n).map_or(Json::Null, Json::Number),
        Value::String(s) => Json::String(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
        Value::Table(t) => {
            let len = t.raw_len();
            if len > 0 {
                Json::Array(
                    (1..=len)
                        .map(|i| to_json(&t.raw_get::<Value>(i).unwrap_or(Value::Nil)))
                        .collect(),
                )
            } else {
                let mut map = serde_json::Map::new();
                for (k, val) in t.clone().pairs::<Value, Value>().flatten() {
                    map.insert(super::os::display(&k), to_json(&val));
                }
                Json::Object(map)
            }
        }
        other => Json::String(other.type_name().to_string()),
    }
}

pub fn from_json(lua: &Lua, v: &Json) -> mlua::Result<Value> {
    Ok(match v {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
        Json::String(s) => Value::String(lua.create_string(s)?),
        Json::Array(items) => {
            let t = lua.create_table()?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, from_json(lua, item)?)?;
            }
            Value::Table(t)
        }
        Json::Object(map) => {
            let t = lua.create_table()?;
            for (k, item) in map {
                match k.parse::<f64>() {
                    // Inventory `list()` results are keyed by slot number in CC.
                    Ok(n) if n.fract() == 0.0 => t.raw_set(n, from_json(lua, item)?)?,
                    _ => t.raw_set(k.as_str(), from_json(lua, item)?)?,
                }
            }
            Value::Table(t)
        }
    })
}
