//! The link protocol between the bridge and the Lua client: JSON text frames with a `type` tag.
//!
//! Computer → bridge: `hello`, `response`, `chunk` (a piece of a response too big for one frame), `event`.
//! Bridge → computer: `hello-ok`, `hello-rejected`, `request`, `cancel`.
//!
//! A `hello` on a new link replaces any older link with the same computer id; a `hello` again on the same link
//! updates the computer's label (CC has no event for a relabel, so the client checks and says hello again).
//!
//! CC's `textutils.serializeJSON` writes every byte >= 0x7F as `\u00XX`, so a string from a computer arrives
//! as Latin-1 mojibake of its bytes; [`decode`] maps such strings back to bytes and then to UTF-8 where the
//! bytes are valid UTF-8. Lua's empty table serialises as `{}`, so list fields accept `{}` as empty.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Version of this protocol; the client sends it in `hello`, a hello without one is version 1 (a minimal
/// client that sends only its id and label).
pub const PROTOCOL_VERSION: u32 = 1;

/// Largest frame either side sends. CC:Tweaked closes the link on frames over 128 KiB; half of that leaves
/// room for configuration differences and JSON escaping done after sizing.
pub const MAX_FRAME: usize = 64 * 1024;

/// CC:Tweaked's default `max_websocket_message`; the bridge accepts frames up to this size from computers.
pub const CC_FRAME_LIMIT: usize = 128 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Computer,
    Turtle,
    Pocket,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Computer => "computer",
            Self::Turtle => "turtle",
            Self::Pocket => "pocket",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hello {
    #[serde(default = "seed_version")]
    pub protocol: u32,
    #[serde(alias = "id")]
    pub computer_id: u32,
    #[serde(default, alias = "label", deserialize_with = "label")]
    pub computer_label: Option<String>,
    #[serde(default = "plain_computer")]
    pub kind: Kind,
    /// CC's `_HOST`, e.g. `ComputerCraft 1.113.1 (Minecraft 1.20.1)`.
    #[serde(default)]
    pub host: Option<String>,
}

fn seed_version() -> u32 {
    1
}

fn plain_computer() -> Kind {
    Kind::Computer
}

/// A missing or empty label is no label (`os.getComputerLabel()` answers nil for an unlabelled computer).
fn label<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let raw: Option<String> = Option::deserialize(d)?;
    Ok(raw.filter(|l| !l.is_empty()))
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RawResponse {
    pub id: String,
    pub ok: bool,
    #[serde(default)]
    pub result: Value,
    #[serde(default)]
    pub error: Option<String>,
    /// A machine-readable failure class set by the client: `not_found`, `conflict`, `unsupported`,
    /// `busy`, `timeout`, `invalid`, `too_large`; absent for plain Lua errors.
    #[serde(default)]
    pub code: Option<String>,
    /// Extra facts about a failure (for example the output printed before a Lua error).
    #[serde(default)]
    pub data: Value,
}

/// A reply to one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub id: String,
    pub outcome: Result<Value, RemoteError>,
}

/// The computer's own error text, verbatim, with anything it attached.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteError {
    pub message: String,
    pub code: Option<String>,
    pub data: Value,
}

/// One piece of a response whose JSON text exceeded a frame; `data` pieces concatenate to that text.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Chunk {
    pub id: String,
    pub seq: u32,
    pub last: bool,
    pub data: String,
}

/// A CC event the computer forwards (redstone, turtle_inventory, peripheral, ...).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Event {
    pub event: String,
    #[serde(default, deserialize_with = "lua_list")]
    pub args: Vec<Value>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
enum Wire {
    Hello(Hello),
    Response(RawResponse),
    Chunk(Chunk),
    Event(Event),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    Hello(Hello),
    Response(Response),
    Chunk(Chunk),
    Event(Event),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Outbound<'a> {
    #[serde(rename_all = "camelCase")]
    HelloOk {
        protocol: u32,
        /// Requests the bridge keeps in flight at once; the client may refuse more.
        max_in_flight: usize,
        max_frame: usize,
    },
    HelloRejected {
        error: &'a str,
    },
    Request {
        id: &'a str,
        method: &'a str,
        #[serde(skip_serializing_if = "Value::is_null")]
        params: &'a Value,
    },
    Cancel {
        id: &'a str,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {size} bytes exceeds the limit of {limit}")]
    TooLarge { size: usize, limit: usize },
    #[error("not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("not a valid frame: {0}")]
    Invalid(serde_json::Error),
}

/// Parses one frame from a computer. Never panics, whatever the input.
pub fn decode(text: &str) -> Result<Inbound, FrameError> {
    if text.len() > CC_FRAME_LIMIT {
        return Err(FrameError::TooLarge {
            size: text.len(),
            limit: CC_FRAME_LIMIT,
        });
    }
    parse(text)
}

/// Like [`decode`] without the frame size limit, for a reply reassembled from chunks.
pub fn parse(text: &str) -> Result<Inbound, FrameError> {
    let value: Value = serde_json::from_str(text).map_err(FrameError::NotJson)?;
    let wire: Wire = serde_json::from_value(fix_cc_strings(value)).map_err(FrameError::Invalid)?;
    Ok(match wire {
        Wire::Hello(h) => Inbound::Hello(h),
        Wire::Chunk(c) => Inbound::Chunk(c),
        Wire::Event(e) => Inbound::Event(e),
        Wire::Response(r) => Inbound::Response(Response {
            id: r.id,
            outcome: if r.ok {
                Ok(r.result)
            } else {
                Err(RemoteError {
                    message: r.error.unwrap_or_else(|| {
                        "the computer reported an error without a message".into()
                    }),
                    code: r.code,
                    data: r.data,
                })
            },
        }),
    })
}

/// Serialises a frame for a computer, refusing anything over [`MAX_FRAME`].
///
/// serde_json writes non-ASCII as raw UTF-8, which CC's `unserialiseJSON` passes through as bytes; `\u`
/// escapes would be decoded one at a time and split surrogate pairs.
pub fn encode(frame: &Outbound<'_>) -> Result<String, FrameError> {
    let text = serde_json::to_string(frame).map_err(FrameError::Invalid)?;
    if text.len() > MAX_FRAME {
        return Err(FrameError::TooLarge {
            size: text.len(),
            limit: MAX_FRAME,
        });
    }
    Ok(text)
}

/// Undoes CC's byte escaping: a string whose chars are all <= U+00FF is really a byte string.
pub fn fix_cc_strings(mut value: Value) -> Value {
    fix_in_place(&mut value);
    value
}

/// In place, so the common all-ASCII frame costs a walk and no allocation.
fn fix_in_place(value: &mut Value) {
    match value {
        Value::String(s) if !s.is_ascii() => *s = fix_string(std::mem::take(s)),
        Value::Array(items) => items.iter_mut().for_each(fix_in_place),
        Value::Object(map) => {
            if map.keys().any(|k| !k.is_ascii()) {
                *map = std::mem::take(map)
                    .into_iter()
                    .map(|(k, v)| (fix_string(k), v))
                    .collect();
            }
            map.values_mut().for_each(fix_in_place);
        }
        _ => {}
    }
}

fn fix_string(s: String) -> String {
    if s.is_ascii() {
        return s;
    }
    let bytes: Option<Vec<u8>> = s.chars().map(|c| u8::try_from(u32::from(c)).ok()).collect();
    match bytes.map(String::from_utf8) {
        Some(Ok(utf8)) => utf8,
        // Not UTF-8 underneath (binary data) or already real Unicode: keep one char per byte.
        _ => s,
    }
}

/// Lua's empty table serialises as `{}`; where a list is expected, treat it as `[]`.
pub fn lua_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Value>, D::Error> {
    match Value::deserialize(d)? {
        Value::Array(items) => Ok(items),
        Value::Object(map) if map.is_empty() => Ok(Vec::new()),
        Value::Null => Ok(Vec::new()),
        other => Err(serde::de::Error::custom(format!(
            "expected a list, got {other}"
        ))),
    }
}

/// [`lua_list`] with typed items.
pub fn lua_seq<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned>(
    d: D,
) -> Result<Vec<T>, D::Error> {
    lua_list(d)?
        .into_iter()
        .map(|v| serde_json::from_value(v).map_err(serde::de::Error::custom))
        .collect()
}

/// The most results one reply may say it carries (`n`). A Lua function returns at most a few thousand values
/// (the VM's stack); this bounds what a hostile computer can make the bridge allocate: `n` is trusted to size
/// the list, trailing nils included.
pub const MAX_LUA_VALUES: usize = 65_536;

/// Lua multiple results, which travel as `{n, values}` because trailing nils vanish from Lua arrays: all `n`
/// of them, the missing ones as null. A reply without `n`, with `n` over [`MAX_LUA_VALUES`], or with more
/// values than `n` fails to decode, naming what is wrong.
#[derive(Debug, Deserialize)]
#[serde(try_from = "PackedValues")]
pub struct LuaValues(pub Vec<Value>);

#[derive(Deserialize)]
struct PackedValues {
    n: u64,
    #[serde(default, deserialize_with = "lua_list")]
    values: Vec<Value>,
}

impl TryFrom<PackedValues> for LuaValues {
    type Error = String;

    fn try_from(packed: PackedValues) -> Result<Self, String> {
        let n = usize::try_from(packed.n)
            .ok()
            .filter(|n| *n <= MAX_LUA_VALUES)
            .ok_or_else(|| {
                format!(
                    "n = {} results is over the {MAX_LUA_VALUES} a reply may carry",
                    packed.n
                )
            })?;
        if packed.values.len() > n {
            return Err(format!(
                "{} values but n = {n}: values holds at most n",
                packed.values.len()
            ));
        }
        let mut values = packed.values;
        values.resize(n, Value::Null);
        Ok(LuaValues(values))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn seed_hello_is_accepted() {
        let Inbound::Hello(h) =
            decode(r#"{"type":"hello","computerId":12,"computerLabel":"base-turtle"}"#).unwrap()
        else {
            panic!("not a hello")
        };
        assert_eq!(h.computer_id, 12);
        assert_eq!(h.computer_label.as_deref(), Some("base-turtle"));
        assert_eq!(h.protocol, 1);
        assert_eq!(h.kind, Kind::Computer);
    }

    #[test]
    fn missing_or_empty_label_is_none() {
        for text in [
            r#"{"type":"hello","computerId":0}"#,
            r#"{"type":"hello","computerId":0,"computerLabel":""}"#,
            r#"{"type":"hello","computerId":0,"computerLabel":null}"#,
        ] {
            let Inbound::Hello(h) = decode(text).unwrap() else {
                panic!("not a hello")
            };
            assert_eq!(h.computer_label, None, "{text}");
        }
    }

    #[test]
    fn invalid_hellos_are_rejected() {
        for text in [
            r#"{"type":"hello","computerId":"12"}"#,
            r#"{"type":"hello","computerId":-1}"#,
            r#"{"type":"hello","computerId":1.5}"#,
            r#"{"type":"hello"}"#,
            r#"{"type":"hello","computerId":1,"kind":"toaster"}"#,
        ] {
            assert!(
                matches!(decode(text), Err(FrameError::Invalid(_))),
                "{text}"
            );
        }
    }

    #[test]
    fn malformed_frames_are_errors_not_panics() {
        for text in [
            "",
            "{",
            "null",
            "[]",
            "42",
            r#"{"type":"nope"}"#,
            r#"{"type":"response"}"#,
            "\u{0}",
        ] {
            assert!(decode(text).is_err(), "{text:?}");
        }
        let huge = "x".repeat(CC_FRAME_LIMIT + 1);
        assert!(matches!(decode(&huge), Err(FrameError::TooLarge { .. })));
    }

    #[test]
    fn cc_byte_escapes_become_utf8() {
        // What textutils.serializeJSON writes for the Lua string "é€".
        let text = r#"{"type":"response","id":"r1","ok":true,"result":{"s":"\u00C3\u00A9\u00E2\u0082\u00AC"}}"#;
        let Inbound::Response(r) = decode(text).unwrap() else {
            panic!("not a response")
        };
        assert_eq!(r.outcome.unwrap()["s"], "é€");
    }

    #[test]
    fn object_keys_are_fixed_too() {
        let text = r#"{"type":"event","event":"x","args":[{"\u00C3\u00A9":"caf\u00C3\u00A9"}]}"#;
        let Inbound::Event(e) = decode(text).unwrap() else {
            panic!("not an event")
        };
        assert_eq!(e.args[0]["é"], "café");
    }

    #[test]
    fn binary_bytes_stay_one_char_per_byte() {
        let text = r#"{"type":"response","id":"r1","ok":true,"result":"\u00FF\u00FE"}"#;
        let Inbound::Response(r) = decode(text).unwrap() else {
            panic!("not a response")
        };
        assert_eq!(r.outcome.unwrap(), "\u{FF}\u{FE}");
    }

    #[test]
    fn error_response_keeps_message_and_data() {
        let text = r#"{"type":"response","id":"r9","ok":false,"error":"mcp:1: boom","data":{"output":"hi\n"}}"#;
        let Inbound::Response(r) = decode(text).unwrap() else {
            panic!("not a response")
        };
        let err = r.outcome.unwrap_err();
        assert_eq!(err.message, "mcp:1: boom");
        assert_eq!(err.data["output"], "hi\n");
    }

    #[test]
    fn event_args_accept_empty_table() {
        let Inbound::Event(e) = decode(r#"{"type":"event","event":"redstone","args":{}}"#).unwrap()
        else {
            panic!("not an event")
        };
        assert_eq!(e.event, "redstone");
        assert!(e.args.is_empty());
    }

    fn lua_values(reply: Value) -> Result<Vec<Value>, String> {
        serde_json::from_value::<LuaValues>(reply)
            .map(|v| v.0)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn lua_values_restore_trailing_nils() {
        assert_eq!(
            lua_values(json!({"n": 3, "values": [1]})),
            Ok(vec![json!(1), Value::Null, Value::Null])
        );
        assert_eq!(lua_values(json!({"n": 0, "values": {}})), Ok(vec![]));
        assert_eq!(lua_values(json!({"n": 0})), Ok(vec![]));
    }

    #[test]
    fn lua_values_refuse_what_no_client_sends() {
        let refused = [
            (
                json!({"n": MAX_LUA_VALUES + 1, "values": []}),
                "65537 results is over the 65536",
            ),
            (json!({"values": [1]}), "missing field `n`"),
            (json!({"n": 1, "values": [1, 2]}), "2 values but n = 1"),
            (json!({"n": 1.5, "values": []}), "expected u64"),
            (json!({"n": 1, "values": 7}), "expected a list"),
        ];
        for (reply, names) in refused {
            let err = lua_values(reply.clone()).unwrap_err();
            assert!(err.contains(names), "{reply}: {err}");
        }
    }

    #[test]
    fn outbound_frames_use_raw_utf8_and_kebab_types() {
        let params = json!({"path": "é"});
        let text = encode(&Outbound::Request {
            id: "r1",
            method: "fs.read",
            params: &params,
        })
        .unwrap();
        assert_eq!(
            text,
            r#"{"type":"request","id":"r1","method":"fs.read","params":{"path":"é"}}"#
        );
        let ok = encode(&Outbound::HelloOk {
            protocol: 1,
            max_in_flight: 16,
            max_frame: MAX_FRAME,
        })
        .unwrap();
        assert!(
            ok.starts_with(r#"{"type":"hello-ok","protocol":1,"maxInFlight":16"#),
            "{ok}"
        );
        let no_params = encode(&Outbound::Request {
            id: "r2",
            method: "ping",
            params: &Value::Null,
        })
        .unwrap();
        assert_eq!(no_params, r#"{"type":"request","id":"r2","method":"ping"}"#);
    }

    #[test]
    fn oversized_outbound_is_refused() {
        let params = json!({"data": "x".repeat(MAX_FRAME)});
        let err = encode(&Outbound::Request {
            id: "r1",
            method: "fs.write",
            params: &params,
        })
        .unwrap_err();
        assert!(matches!(err, FrameError::TooLarge { .. }));
    }
}
