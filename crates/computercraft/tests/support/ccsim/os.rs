//! The `os` API (identity, timers, clock, event queue, reboot) and the captured terminal.
//!
//! Copies: `os.getComputerLabel()` returns *no value* when unlabelled (OSAPI); timers fire after
//! `round(secs / 0.05)` ticks of 50 ms; `os.queueEvent` goes through the same 256-event cap as everything else;
//! `os.reboot()` takes effect once the running code yields.

use super::{Event, SimHandle, TICK, json};
use mlua::{Lua, MultiValue, Table, Value};
use std::time::Instant;

pub(super) fn install_os(lua: &Lua, h: &SimHandle) -> mlua::Result<()> {
    let os = lua.create_table()?;
    let id = h.state().cfg.id;
    os.set("getComputerID", lua.create_function(move |_, ()| Ok(id))?)?;
    os.set("computerID", lua.create_function(move |_, ()| Ok(id))?)?;
    let hh = h.clone();
    // CC returns zero values, not nil, when there is no label (OSAPI.getComputerLabel).
    let get_label = lua.create_function(move |lua, ()| {
        Ok(match hh.state().label.clone() {
            Some(l) => MultiValue::from_iter([Value::String(lua.create_string(l)?)]),
            None => MultiValue::new(),
        })
    })?;
    os.set("getComputerLabel", get_label.clone())?;
    os.set("computerLabel", get_label)?;
    let hh = h.clone();
    os.set(
        "setComputerLabel",
        lua.create_function(move |_, l: Option<String>| {
            hh.state().label = l;
            Ok(())
        })?,
    )?;
    let hh = h.clone();
    os.set(
        "startTimer",
        lua.create_function(move |_, secs: f64| {
            let mut s = hh.state();
            s.next_timer += 1;
            let id = s.next_timer;
            let ticks = (secs / 0.05).round().max(0.0) as u32;
            s.timers.insert(id, Instant::now() + TICK * ticks.max(1));
            drop(s);
            hh.wake.notify_one();
            Ok(id)
        })?,
    )?;
    let hh = h.clone();
    os.set(
        "cancelTimer",
        lua.create_function(move |_, id: u64| {
            hh.state().timers.remove(&id);
            Ok(())
        })?,
    )?;
    let hh = h.clone();
    os.set(
        "clock",
        lua.create_function(move |_, ()| Ok(hh.state().booted_at.elapsed().as_secs_f64()))?,
    )?;
    os.set(
        "epoch",
        lua.create_function(|_, _kind: Option<String>| {
            Ok(std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_millis() as f64))
        })?,
    )?;
    os.set("time", lua.create_function(|_, _: Option<String>| Ok(6.0))?)?;
    os.set("day", lua.create_function(|_, _: Option<String>| Ok(1))?)?;
    os.set("version", lua.create_function(|_, ()| Ok("CraftOS 1.9"))?)?;
    let hh = h.clone();
    os.set(
        "queueEvent",
        lua.create_function(move |_, args: MultiValue| {
            let ev: Event = args.iter().map(super::natives::from_lua).collect();
            hh.state().push(ev);
            hh.wake.notify_one();
            Ok(())
        })?,
    )?;
    let hh = h.clone();
    os.set(
        "reboot",
        lua.create_function(move |_, ()| {
            hh.state().reboot = true;
            hh.wake.notify_one();
            Ok(())
        })?,
    )?;
    let hh = h.clone();
    os.set(
        "shutdown",
        lua.create_function(move |_, ()| {
            hh.stop.cancel();
            Ok(())
        })?,
    )?;
    lua.globals().set("os", os)?;
    Ok(())
}

pub(super) fn install_output(lua: &Lua, sim: &Table, h: &SimHandle) -> mlua::Result<()> {
    let hh = h.clone();
    sim.set(
        "term_write",
        lua.create_function(move |_, s: mlua::LuaString| {
            hh.state()
                .output
                .push_str(&String::from_utf8_lossy(&s.as_bytes()));
            Ok(())
        })?,
    )?;
    let term = lua.create_table()?;
    for name in [
        "clear",
        "clearLine",
        "setCursorPos",
        "setTextColor",
        "setTextColour",
        "setBackgroundColor",
    ] {
        term.set(name, lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    }
    lua.globals().set("term", term)?;
    Ok(())
}

pub(super) fn display(v: &Value) -> String {
    match v {
        Value::Nil => "nil".into(),
        Value::Boolean(b) => b.to_string(),
        Value::Integer(i) => i.to_string(),
        Value::Number(n) => json::format_number(*n),
        Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
        other => format!("{}: {:p}", other.type_name(), other.to_pointer()),
    }
}
