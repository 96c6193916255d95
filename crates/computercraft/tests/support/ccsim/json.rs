//! `textutils.serializeJSON` / `unserialiseJSON`, reproducing CC:Tweaked 1.113's quirks (docs/protocols/computercraft.md §6),
//! written from that description (CC's ROM is not copied):
//! * an empty table serialises as `{}`; a table with any string key becomes an object and loses its numeric
//!   keys; array holes become `null` up to the largest index;
//! * every byte 0x7F-0xFF is written as `\u00XX`, so the output is pure ASCII;
//! * integral numbers print exactly (Cobalt's `Long.toString`), others with `%.14g`; NaN and infinities print
//!   as `nan` / `inf` / `-inf`, which is not JSON;
//! * functions, threads and userdata raise `Cannot serialize type X`;
//! * parsing: `null` → nil, `[]` → the read-only `textutils.empty_json_array` unless
//!   `parse_empty_array = false`, every `\uXXXX` decoded on its own (surrogate pairs are not combined), raw
//!   bytes passed through, failures returned as `nil, "Malformed JSON at position N: ..."`.

use mlua::{Lua, Result as LuaResult, Table, Value};

pub fn install(lua: &Lua, textutils: &Table) -> LuaResult<()> {
    let serialize = lua.create_function(|lua, (value, _opts): (Value, Option<Table>)| {
        let sentinels = Sentinels::get(lua)?;
        if value.is_nil() {
            return Err(mlua::Error::runtime(
                "bad argument #1 (table, string, number or boolean expected, got nil)",
            ));
        }
        let mut out = Vec::new();
        let mut seen = Vec::new();
        write_value(&value, &sentinels, &mut out, &mut seen)?;
        lua.create_string(&out)
    })?;
    textutils.set("serializeJSON", serialize.clone())?;
    textutils.set("serialiseJSON", serialize)?;

    let parse = lua.create_function(|lua, (text, opts): (mlua::LuaString, Option<Table>)| {
        let options = ParseOptions {
            null_sentinel: opts
                .as_ref()
                .and_then(|o| o.get::<bool>("parse_null").ok())
                .unwrap_or(false),
            empty_array_sentinel: opts
                .as_ref()
                .and_then(|o| o.get::<Option<bool>>("parse_empty_array").ok().flatten())
                .unwrap_or(true),
        };
        let bytes = text.as_bytes().to_vec();
        let mut parser = Parser {
            lua,
            bytes: &bytes,
            pos: 0,
            options,
            sentinels: Sentinels::get(lua)?,
        };
        match parser.document() {
            Ok(v) => Ok((v, Value::Nil)),
            Err(msg) => Ok((
                Value::Nil,
                Value::String(lua.create_string(format!(
                    "Malformed JSON at position {}: {msg}",
                    parser.pos + 1
                ))?),
            )),
        }
    })?;
    textutils.set("unserializeJSON", parse.clone())?;
    textutils.set("unserialiseJSON", parse)?;
    Ok(())
}

struct Sentinels {
    null: Table,
    empty_array: Table,
}

impl Sentinels {
    fn get(lua: &Lua) -> LuaResult<Self> {
        let textutils: Table = lua.globals().get("textutils")?;
        Ok(Self {
            null: textutils.get("json_null")?,
            empty_array: textutils.get("empty_json_array")?,
        })
    }
}

fn write_value(
    v: &Value,
    s: &Sentinels,
    out: &mut Vec<u8>,
    seen: &mut Vec<Table>,
) -> LuaResult<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(i.to_string().as_bytes()),
        Value::Number(n) => out.extend_from_slice(format_number(*n).as_bytes()),
        Value::String(st) => write_string(&st.as_bytes(), out),
        Value::Table(t) => write_table(t, s, out, seen)?,
        other => {
            return Err(mlua::Error::runtime(format!(
                "Cannot serialize type {}",
                other.type_name()
            )));
        }
    }
    Ok(())
}

fn write_table(
    t: &Table,
    s: &Sentinels,
    out: &mut Vec<u8>,
    seen: &mut Vec<Table>,
) -> LuaResult<()> {
    if t == &s.null {
        out.extend_from_slice(b"null");
        return Ok(());
    }
    if t == &s.empty_array {
        out.extend_from_slice(b"[]");
        return Ok(());
    }
    if seen.contains(t) {
        return Err(mlua::Error::runtime(
            "Cannot serialize table with recursive entries",
        ));
    }
    seen.push(t.clone());
    let mut object: Vec<(Vec<u8>, Value)> = Vec::new();
    let mut max_index = 0i64;
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, v) = pair?;
        match k {
            Value::String(key) => object.push((key.as_bytes().to_vec(), v)),
            Value::Integer(i) if i >= 1 => max_index = max_index.max(i),
            Value::Number(n) if n >= 1.0 && n.fract() == 0.0 => max_index = max_index.max(n as i64),
            _ => {}
        }
    }
    if !object.is_empty() {
        out.push(b'{');
        for (i, (key, v)) in object.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_string(key, out);
            out.push(b':');
            write_value(v, s, out, seen)?;
        }
        out.push(b'}');
    } else if max_index > 0 {
        out.push(b'[');
        for i in 1..=max_index {
            if i > 1 {
                out.push(b',');
            }
            let v: Value = t.raw_get(i)?;
            write_value(&v, s, out, seen)?;
        }
        out.push(b']');
    } else {
        out.extend_from_slice(b"{}");
    }
    seen.pop();
    Ok(())
}

fn write_string(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in bytes {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1f | 0x7f..=0xff => out.extend_from_slice(format!("\\u{b:04X}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// Cobalt 0.9.4's `tostring` for numbers.
pub fn format_number(n: f64) -> String {
    if n.is_nan() {
        return "nan".into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if n.fract() == 0.0 && n.abs() < 9.2e18 {
        return format!("{}", n as i64);
    }
    format_g14(n)
}

/// C's `%.14g`.
fn format_g14(n: f64) -> String {
    let sci = format!("{n:.13e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..14).contains(&exp) {
        let m = trim_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (13 - exp).max(0) as usize;
        trim_zeros(&format!("{n:.decimals$}")).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

struct ParseOptions {
    null_sentinel: bool,
    empty_array_sentinel: bool,
}

struct Parser<'a> {
    lua: &'a Lua,
    bytes: &'a [u8],
    pos: usize,
    options: ParseOptions,
    sentinels: Sentinels,
}

type ParseResult<T> = std::result::Result<T, String>;

impl Parser<'_> {
    fn document(&mut self) -> ParseResult<Value> {
        let v = self.value(0)?;
        self.skip_ws();
        if self.pos < self.bytes.len() {
            return Err("unexpected trailing input".into());
        }
        Ok(v)
    }

    fn skip_ws(&mut self) {
        while self.pos < self.bytes.len()
            && matches!(self.bytes[self.pos], b' ' | b'\t' | b'\n' | b'\r')
        {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn lua_err(e: mlua::Error) -> String {
        e.to_string()
    }

    fn value(&mut self, depth: usize) -> ParseResult<Value> {
        if depth > 200 {
            return Err("too deeply nested".into());
        }
        self.skip_ws();
        match self.peek() {
            None => Err("unexpected end of input".into()),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => {
                let bytes = self.string()?;
                Ok(Value::String(
                    self.lua.create_string(&bytes).map_err(Self::lua_err)?,
                ))
            }
            Some(b't') => self.literal(b"true", Value::Boolean(true)),
            Some(b'f') => self.literal(b"false", Value::Boolean(false)),
            Some(b'n') => {
                let null = if self.options.null_sentinel {
                    Value::Table(self.sentinels.null.clone())
                } else {
                    Value::Nil
                };
                self.literal(b"null", null)
            }
            Some(c) if c == b'-' || c.is_ascii_digit() => self.number(),
            Some(c) => Err(format!("unexpected character '{}'", char::from(c))),
        }
    }

    fn literal(&mut self, word: &[u8], v: Value) -> ParseResult<Value> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(v)
        } else {
            Err("unexpected literal".into())
        }
    }

    fn number(&mut self) -> ParseResult<Value> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E') {
                self.pos += 1;
            } else {
                break;
            }
        }
        let text = std::str::from_utf8(&self.bytes[start..self.pos]).map_err(|e| e.to_string())?;
        text.parse::<f64>()
            .map(Value::Number)
            .map_err(|_| format!("invalid number {text}"))
    }

    fn string(&mut self) -> ParseResult<Vec<u8>> {
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return Err("unterminated string".into());
            };
            self.pos += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return Err("unterminated escape".into());
                    };
                    self.pos += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let hex = self
                                .bytes
                                .get(self.pos..self.pos + 4)
                                .ok_or("short \\u escape")?;
                            let hex = std::str::from_utf8(hex).map_err(|e| e.to_string())?;
                            let code =
                                u32::from_str_radix(hex, 16).map_err(|_| "invalid \\u escape")?;
                            self.pos += 4;
                            push_code_unit(code, &mut out);
                        }
                        other => return Err(format!("invalid escape \\{}", char::from(other))),
                    }
                }
                other => out.push(other),
            }
        }
    }

    fn array(&mut self, depth: usize) -> ParseResult<Value> {
        self.pos += 1;
        let t = self.lua.create_table().map_err(Self::lua_err)?;
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            if self.options.empty_array_sentinel {
                return Ok(Value::Table(self.sentinels.empty_array.clone()));
            }
            return Ok(Value::Table(t));
        }
        let mut i = 1i64;
        loop {
            let v = self.value(depth + 1)?;
            t.raw_set(i, v).map_err(Self::lua_err)?;
            i += 1;
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Table(t));
                }
                _ => return Err("expected ',' or ']'".into()),
            }
        }
    }

    fn object(&mut self, depth: usize) -> ParseResult<Value> {
        self.pos += 1;
        let t = self.lua.create_table().map_err(Self::lua_err)?;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Table(t));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err("expected a string key".into());
            }
            let key = self.string()?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err("expected ':'".into());
            }
            self.pos += 1;
            let v = self.value(depth + 1)?;
            t.raw_set(self.lua.create_string(&key).map_err(Self::lua_err)?, v)
                .map_err(Self::lua_err)?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Table(t));
                }
                _ => return Err("expected ',' or '}'".into()),
            }
        }
    }
}

/// `utf8.char` of one code unit; a lone surrogate becomes its three-byte (CESU-style) form, as CC produces.
fn push_code_unit(code: u32, out: &mut Vec<u8>) {
    match code {
        0..=0x7f => out.push(code as u8),
        0x80..=0x7ff => {
            out.extend_from_slice(&[0xc0 | (code >> 6) as u8, 0x80 | (code & 0x3f) as u8])
        }
        _ => out.extend_from_slice(&[
            0xe0 | (code >> 12) as u8,
            0x80 | ((code >> 6) & 0x3f) as u8,
            0x80 | (code & 0x3f) as u8,
        ]),
    }
}
