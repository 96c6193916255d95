//! The `os` API (identity, timers, clock, event queue, reboot) and the captured terminal.
//!
//! Copies: `os.getComputerLabel()` returns *no value* when unlabelled (OSAPI); timers fire after
//! `round(secs / 0.05)` ticks of 50 ms; `os.queueEvent` goes through the same 256-event cap as everything else;
//! `os.reboot()` takes effect once the running code yields; `os.shutdown()` turns the computer off.
//!
//! The native terminal is a 51×19 grid with a cursor, like a basic computer's (`Terminal.java` in CC:T's
//! core): `write` puts text at the cursor without wrapping or moving to the next line (bios `write` does that
//! with `setCursorPos` and `scroll`). Everything written is also appended to `Shared::output`, with a line
//! break whenever the cursor changes row or the screen scrolls, so tests can read the session as a log.

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
            hh.state().halted = Some("shut down".into());
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
    let native = lua.create_table()?;
    let hh = h.clone();
    native.set(
        "write",
        lua.create_function(move |_, s: Value| {
            let text = display(&s);
            let mut st = hh.state();
            st.screen.write(&text);
            st.output.push_str(&text);
            Ok(())
        })?,
    )?;
    let hh = h.clone();
    native.set(
        "scroll",
        lua.create_function(move |_, n: i64| {
            let mut st = hh.state();
            st.screen.scroll(n);
            for _ in 0..n.max(0) {
                st.output.push('\n');
            }
            Ok(())
        })?,
    )?;
    let hh = h.clone();
    native.set(
        "setCursorPos",
        lua.create_function(move |_, (x, y): (f64, f64)| {
            let mut st = hh.state();
            let (x, y) = (x.floor() as i64, y.floor() as i64);
            if y != st.screen.y {
                st.output.push('\n');
            }
            st.screen.x = x;
            st.screen.y = y;
            Ok(())
        })?,
    )?;
    let hh = h.clone();
    native.set(
        "getCursorPos",
        lua.create_function(move |_, ()| {
            let st = hh.state();
            Ok((st.screen.x, st.screen.y))
        })?,
    )?;
    native.set(
        "getSize",
        lua.create_function(|_, ()| Ok((Screen::WIDTH, Screen::HEIGHT)))?,
    )?;
    let hh = h.clone();
    native.set(
        "clear",
        lua.create_function(move |_, ()| {
            hh.state().screen.clear();
            Ok(())
        })?,
    )?;
    let hh = h.clone();
    native.set(
        "clearLine",
        lua.create_function(move |_, ()| {
            let mut st = hh.state();
            let y = st.screen.y;
            st.screen.blank(y);
            Ok(())
        })?,
    )?;
    for name in ["isColour", "isColor", "getCursorBlink"] {
        native.set(name, lua.create_function(|_, ()| Ok(false))?)?;
    }
    for name in [
        "getTextColour",
        "getTextColor",
        "getBackgroundColour",
        "getBackgroundColor",
    ] {
        // colours.white and colours.black.
        let colour = if name.starts_with("getText") {
            1
        } else {
            32768
        };
        native.set(name, lua.create_function(move |_, ()| Ok(colour))?)?;
    }
    for name in [
        "setTextColour",
        "setTextColor",
        "setBackgroundColour",
        "setBackgroundColor",
        "setCursorBlink",
    ] {
        native.set(name, lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    }
    sim.set("native_term", native)?;
    Ok(())
}

/// A basic computer's screen: 51×19 characters, cursor positions 1-based and allowed off-screen.
#[derive(Debug, Clone)]
pub struct Screen {
    pub x: i64,
    pub y: i64,
    lines: Vec<Vec<char>>,
}

impl Default for Screen {
    fn default() -> Self {
        Self {
            x: 1,
            y: 1,
            lines: vec![vec![' '; Self::WIDTH as usize]; Self::HEIGHT as usize],
        }
    }
}

impl Screen {
    pub const WIDTH: i64 = 51;
    pub const HEIGHT: i64 = 19;

    fn write(&mut self, text: &str) {
        for c in text.chars() {
            if (1..=Self::WIDTH).contains(&self.x) && (1..=Self::HEIGHT).contains(&self.y) {
                self.lines[(self.y - 1) as usize][(self.x - 1) as usize] = c;
            }
            self.x += 1;
        }
    }

    fn scroll(&mut self, n: i64) {
        for _ in 0..n.clamp(0, Self::HEIGHT) {
            self.lines.remove(0);
            self.lines.push(vec![' '; Self::WIDTH as usize]);
        }
    }

    fn blank(&mut self, y: i64) {
        if (1..=Self::HEIGHT).contains(&y) {
            self.lines[(y - 1) as usize] = vec![' '; Self::WIDTH as usize];
        }
    }

    fn clear(&mut self) {
        for y in 1..=Self::HEIGHT {
            self.blank(y);
        }
    }

    /// The screen's rows, trailing spaces trimmed.
    pub fn rows(&self) -> Vec<String> {
        self.lines
            .iter()
            .map(|l| l.iter().collect::<String>().trim_end().to_string())
            .collect()
    }
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
