//! The `fs` API over a host directory, following CC:Tweaked's rules (docs/protocols/computercraft.md §7): paths are relative to
//! the computer's root whatever their leading slash, `..` cannot climb out, `rom/` is read-only, missing
//! files give `nil, "<path>: No such file"` from `open` and errors from `list`, handles read and write raw
//! bytes (since 1.109 text mode too), binary `read()` without a count returns one byte as a number, the
//! computer has a space limit (`computer_space_limit`, 1,000,000 bytes by default), a name of 255 characters or
//! more in a path is cut to 255, and `fs.attributes` gives times in milliseconds.

use mlua::{Lua, MultiValue, Result as LuaResult, Table, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub const SPACE_LIMIT: u64 = 1_000_000;

/// `sanitizePath` cuts a name of 255 characters or more to its first 255 (then strips it): a longer name is
/// silently another name.
pub const NAME_MAX: usize = 255;

fn cut(part: &str) -> &str {
    if part.len() < NAME_MAX {
        return part;
    }
    let mut end = NAME_MAX;
    while !part.is_char_boundary(end) {
        end -= 1;
    }
    part[..end].trim()
}

/// Names nothing in a CC path: `FileSystem.sanitizePath` skips `.` and any run of three dots or more.
fn no_name(part: &str) -> bool {
    part.is_empty() || (part.bytes().all(|b| b == b'.') && part.len() != 2)
}

/// Normalises a CC path: `a//b/.../../c` → `a/c`; `None` when it climbs above the root.
pub fn normalise(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split(['/', '\\']) {
        match part {
            p if no_name(p) => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(cut(p)),
        }
    }
    Some(parts.join("/"))
}

/// `FileSystem.sanitizePath` as `fs.combine` uses it: like [`normalise`], but a `..` that climbs above the
/// root is kept (`../x` stays `../x`); only using such a path raises "Invalid Path".
pub fn sanitise(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split(['/', '\\']).map(str::trim) {
        match part {
            p if no_name(p) => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            p => parts.push(cut(p)),
        }
    }
    parts.join("/")
}

fn err(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::runtime(msg.into())
}

#[derive(Clone)]
/// The computer's directory and its space limit in bytes.
struct Root(Arc<PathBuf>, u64);

impl Root {
    fn resolve(&self, path: &str) -> LuaResult<(String, PathBuf)> {
        let norm = normalise(path).ok_or_else(|| err(format!("/{path}: Invalid Path")))?;
        let host = if norm.is_empty() {
            self.0.to_path_buf()
        } else {
            self.0.join(&norm)
        };
        Ok((norm, host))
    }

    fn used(&self) -> u64 {
        fn walk(p: &Path) -> u64 {
            let Ok(rd) = std::fs::read_dir(p) else {
                return 0;
            };
            rd.flatten()
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => walk(&e.path()) + 500,
                    Ok(m) => m.len().max(500),
                    Err(_) => 0,
                })
                .sum()
        }
        walk(&self.0)
    }
}

fn read_only(norm: &str) -> bool {
    norm == "rom" || norm.starts_with("rom/")
}

pub fn install(lua: &Lua, root: PathBuf, space_limit: u64) -> LuaResult<()> {
    let fs = lua.create_table()?;
    let root = Root(Arc::new(root), space_limit);

    fs.set(
        "combine",
        lua.create_function(|_, parts: mlua::Variadic<String>| Ok(sanitise(&parts.join("/"))))?,
    )?;
    fs.set(
        "getName",
        lua.create_function(|_, p: String| {
            let n = normalise(&p).unwrap_or_default();
            Ok(if n.is_empty() {
                "root".to_string()
            } else {
                n.rsplit('/').next().unwrap_or("").to_string()
            })
        })?,
    )?;
    fs.set(
        "getDir",
        lua.create_function(|_, p: String| {
            let n = normalise(&p).unwrap_or_default();
            Ok(match n.rsplit_once('/') {
                Some((dir, _)) => dir.to_string(),
                None if n.is_empty() => "..".to_string(),
                None => String::new(),
            })
        })?,
    )?;
    let r = root.clone();
    fs.set(
        "exists",
        lua.create_function(move |_, p: String| Ok(r.resolve(&p).is_ok_and(|(_, h)| h.exists())))?,
    )?;
    let r = root.clone();
    fs.set(
        "isDir",
        lua.create_function(move |_, p: String| Ok(r.resolve(&p).is_ok_and(|(_, h)| h.is_dir())))?,
    )?;
    fs.set(
        "isReadOnly",
        lua.create_function(|_, p: String| Ok(normalise(&p).is_some_and(|n| read_only(&n))))?,
    )?;
    let r = root.clone();
    fs.set(
        "getSize",
        lua.create_function(move |_, p: String| {
            let (norm, host) = r.resolve(&p)?;
            match std::fs::metadata(&host) {
                Ok(m) if m.is_dir() => Ok(0),
                Ok(m) => Ok(m.len()),
                Err(_) => Err(err(format!("/{norm}: No such file"))),
            }
        })?,
    )?;
    let r = root.clone();
    // `fs.attributes` (CC:Tweaked 1.87+): times in milliseconds since the epoch.
    fs.set(
        "attributes",
        lua.create_function(move |lua, p: String| {
            let (norm, host) = r.resolve(&p)?;
            let m = std::fs::metadata(&host).map_err(|_| err(format!("/{norm}: No such file")))?;
            let ms = |t: std::io::Result<std::time::SystemTime>| {
                t.ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_millis() as i64)
            };
            let t = lua.create_table()?;
            t.set("size", if m.is_dir() { 0 } else { m.len() })?;
            t.set("isDir", m.is_dir())?;
            t.set("isReadOnly", read_only(&norm))?;
            t.set("created", ms(m.created()))?;
            t.set("modified", ms(m.modified()))?;
            t.set("modification", ms(m.modified()))?;
            Ok(t)
        })?,
    )?;
    let r = root.clone();
    fs.set(
        "list",
        lua.create_function(move |_, p: String| {
            let (norm, host) = r.resolve(&p)?;
            if !host.is_dir() {
                return Err(err(format!("/{norm}: Not a directory")));
            }
            let mut names: Vec<String> = std::fs::read_dir(&host)
                .map_err(|e| err(e.to_string()))?
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            Ok(names)
        })?,
    )?;
    let r = root.clone();
    fs.set(
        "makeDir",
        lua.create_function(move |_, p: String| {
            let (norm, host) = r.resolve(&p)?;
            if read_only(&norm) {
                return Err(err(format!("/{norm}: Access denied")));
            }
            if host.is_file() {
                return Err(err(format!("/{norm}: File exists")));
            }
            std::fs::create_dir_all(&host).map_err(|e| err(e.to_string()))
        })?,
    )?;
    let r = root.clone();
    fs.set(
        "delete",
        lua.create_function(move |_, p: String| {
            let (norm, host) = r.resolve(&p)?;
            if read_only(&norm) || norm.is_empty() {
                return Err(err(format!("/{norm}: Access denied")));
            }
            if host.is_dir() {
                std::fs::remove_dir_all(&host).map_err(|e| err(e.to_string()))
            } else if host.exists() {
                std::fs::remove_file(&host).map_err(|e| err(e.to_string()))
            } else {
                Ok(())
            }
        })?,
    )?;
    let r = root.clone();
    fs.set(
        "move",
        lua.create_function(move |_, (from, to): (String, String)| {
            let (fnorm, fhost) = r.resolve(&from)?;
            let (tnorm, thost) = r.resolve(&to)?;
            if !fhost.exists() {
                return Err(err(format!("/{fnorm}: No such file")));
            }
            if thost.exists() {
                return Err(err(format!("/{tnorm}: File exists")));
            }
            if read_only(&fnorm) || read_only(&tnorm) {
                return Err(err("Access denied"));
            }
            std::fs::rename(&fhost, &thost).map_err(|e| err(e.to_string()))
        })?,
    )?;
    let r = root.clone();
    fs.set(
        "getFreeSpace",
        lua.create_function(move |_, _p: String| Ok(r.1.saturating_sub(r.used())))?,
    )?;
    fs.set("getDrive", lua.create_function(|_, _p: String| Ok("hdd"))?)?;
    let r = root.clone();
    fs.set(
        "open",
        lua.create_function(move |lua, (p, mode): (String, String)| open(lua, &r, &p, &mode))?,
    )?;
    lua.globals().set("fs", fs)?;
    Ok(())
}

struct Handle {
    data: Vec<u8>,
    pos: usize,
    closed: bool,
}

fn open(lua: &Lua, root: &Root, path: &str, mode: &str) -> LuaResult<MultiValue> {
    let binary = mode.ends_with('b');
    let base = mode.trim_end_matches('b');
    if !matches!(base, "r" | "w" | "a") {
        return Err(err(format!("Unsupported mode '{mode}'")));
    }
    let (norm, host) = root.resolve(path)?;
    let fail = |msg: String| -> LuaResult<MultiValue> {
        Ok(MultiValue::from_iter([
            Value::Nil,
            Value::String(lua.create_string(msg)?),
        ]))
    };
    if host.is_dir() {
        return fail(format!("/{norm}: Is a directory"));
    }
    let table = lua.create_table()?;
    if base == "r" {
        let Ok(data) = std::fs::read(&host) else {
            return fail(format!("/{norm}: No such file"));
        };
        let h = Arc::new(Mutex::new(Handle {
            data,
            pos: 0,
            closed: false,
        }));
        install_read(lua, &table, h, binary)?;
    } else {
        if read_only(&norm) {
            return fail(format!("/{norm}: Access denied"));
        }
        // CC creates missing parent directories when a file is opened for writing.
        if let Some(parent) = host.parent() {
            std::fs::create_dir_all(parent).map_err(|e| err(e.to_string()))?;
        }
        let data = if base == "a" {
            std::fs::read(&host).unwrap_or_default()
        } else {
            Vec::new()
        };
        std::fs::write(&host, &data).map_err(|e| err(e.to_string()))?;
        let h = Arc::new(Mutex::new(Handle {
            pos: data.len(),
            data,
            closed: false,
        }));
        install_write(lua, &table, h, host, root.clone())?;
    }
    Ok(MultiValue::from_iter([Value::Table(table)]))
}

fn lock(h: &Arc<Mutex<Handle>>) -> LuaResult<std::sync::MutexGuard<'_, Handle>> {
    let g = h.lock().map_err(|_| err("handle poisoned"))?;
    if g.closed {
        return Err(err("attempt to use a closed file"));
    }
    Ok(g)
}

fn install_read(lua: &Lua, t: &Table, h: Arc<Mutex<Handle>>, binary: bool) -> LuaResult<()> {
    let hh = h.clone();
    t.set(
        "readAll",
        lua.create_function(move |lua, ()| {
            let mut g = lock(&hh)?;
            let rest = g.data[g.pos..].to_vec();
            g.pos = g.data.len();
            lua.create_string(rest).map(Value::String)
        })?,
    )?;
    let hh = h.clone();
    t.set(
        "readLine",
        lua.create_function(move |lua, with_trailing: Option<bool>| {
            let mut g = lock(&hh)?;
            if g.pos >= g.data.len() {
                return Ok(Value::Nil);
            }
            let rest = &g.data[g.pos..];
            let end = rest
                .iter()
                .position(|&b| b == b'\n')
                .map_or(rest.len(), |i| i + 1);
            let mut line = rest[..end].to_vec();
            g.pos += end;
            if !with_trailing.unwrap_or(false) && line.last() == Some(&b'\n') {
                line.pop();
            }
            lua.create_string(line).map(Value::String)
        })?,
    )?;
    let hh = h.clone();
    t.set(
        "read",
        lua.create_function(move |lua, count: Option<usize>| {
            let mut g = lock(&hh)?;
            if g.pos >= g.data.len() {
                return Ok(Value::Nil);
            }
            match count {
                None if binary => {
                    let b = g.data[g.pos];
                    g.pos += 1;
                    Ok(Value::Number(f64::from(b)))
                }
                n => {
                    let end = (g.pos + n.unwrap_or(1)).min(g.data.len());
                    let s = g.data[g.pos..end].to_vec();
                    g.pos = end;
                    lua.create_string(s).map(Value::String)
                }
            }
        })?,
    )?;
    let hh = h.clone();
    t.set(
        "seek",
        lua.create_function(move |_, (whence, offset): (Option<String>, Option<i64>)| {
            let mut g = lock(&hh)?;
            let base = match whence.as_deref().unwrap_or("cur") {
                "set" => 0,
                "cur" => g.pos as i64,
                "end" => g.data.len() as i64,
                other => return Err(err(format!("bad argument #1 (invalid option '{other}')"))),
            };
            g.pos = (base + offset.unwrap_or(0)).max(0) as usize;
            Ok(g.pos)
        })?,
    )?;
    t.set(
        "close",
        lua.create_function(move |_, ()| {
            lock(&h)?.closed = true;
            Ok(())
        })?,
    )?;
    Ok(())
}

fn install_write(
    lua: &Lua,
    t: &Table,
    h: Arc<Mutex<Handle>>,
    host: PathBuf,
    root: Root,
) -> LuaResult<()> {
    let hh = h.clone();
    t.set(
        "write",
        lua.create_function(move |_, v: Value| {
            let mut g = lock(&hh)?;
            match v {
                Value::String(s) => g.data.extend_from_slice(&s.as_bytes()),
                Value::Number(n) => g.data.push(n as u8),
                Value::Integer(n) => g.data.push(n as u8),
                other => g.data.extend_from_slice(format!("{other:?}").as_bytes()),
            }
            Ok(())
        })?,
    )?;
    let hh = h.clone();
    t.set(
        "writeLine",
        lua.create_function(move |_, s: mlua::LuaString| {
            let mut g = lock(&hh)?;
            g.data.extend_from_slice(&s.as_bytes());
            g.data.push(b'\n');
            Ok(())
        })?,
    )?;
    let flush = {
        let h = h.clone();
        let host = host.clone();
        let root = root.clone();
        move |close: bool| -> LuaResult<()> {
            let mut g = lock(&h)?;
            let before = std::fs::metadata(&host).map(|m| m.len()).unwrap_or(0);
            let grow = (g.data.len() as u64).saturating_sub(before);
            if root.used() + grow > root.1 {
                return Err(err("Out of space"));
            }
            std::fs::write(&host, &g.data).map_err(|e| err(e.to_string()))?;
            if close {
                g.closed = true;
            }
            Ok(())
        }
    };
    let f = flush.clone();
    t.set("flush", lua.create_function(move |_, ()| f(false))?)?;
    t.set("close", lua.create_function(move |_, ()| flush(true))?)?;
    Ok(())
}
