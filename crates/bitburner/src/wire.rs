//! The Remote API's wire format as the game really speaks it (`docs/protocols/bitburner.md` §2, §6): we send
//! requests, the game sends responses; `error` is a plain string; ids are echoed verbatim.

use serde::Serialize;
use serde_json::{Map, Value};

/// Every Remote API method the bridge uses. There is no passthrough: a method not listed here is never sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Method {
    #[serde(rename = "pushFile")]
    PushFile,
    #[serde(rename = "getFile")]
    GetFile,
    #[serde(rename = "deleteFile")]
    DeleteFile,
    #[serde(rename = "getFileNames")]
    GetFileNames,
    #[serde(rename = "getAllFiles")]
    GetAllFiles,
    #[serde(rename = "calculateRam")]
    CalculateRam,
    #[serde(rename = "getDefinitionFile")]
    GetDefinitionFile,
    #[serde(rename = "getAllServers")]
    GetAllServers,
    #[serde(rename = "getSaveFile")]
    GetSaveFile,
    #[serde(rename = "getFileMetadata")]
    GetFileMetadata,
    #[serde(rename = "getAllFileMetadata")]
    GetAllFileMetadata,
}

impl Method {
    pub const ALL: [Method; 11] = [
        Self::PushFile,
        Self::GetFile,
        Self::DeleteFile,
        Self::GetFileNames,
        Self::GetAllFiles,
        Self::CalculateRam,
        Self::GetDefinitionFile,
        Self::GetAllServers,
        Self::GetSaveFile,
        Self::GetFileMetadata,
        Self::GetAllFileMetadata,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::PushFile => "pushFile",
            Self::GetFile => "getFile",
            Self::DeleteFile => "deleteFile",
            Self::GetFileNames => "getFileNames",
            Self::GetAllFiles => "getAllFiles",
            Self::CalculateRam => "calculateRam",
            Self::GetDefinitionFile => "getDefinitionFile",
            Self::GetAllServers => "getAllServers",
            Self::GetSaveFile => "getSaveFile",
            Self::GetFileMetadata => "getFileMetadata",
            Self::GetAllFileMetadata => "getAllFileMetadata",
        }
    }

    /// Whether the method changes the game's files (so an unanswered call may have taken effect).
    pub fn changes_files(self) -> bool {
        matches!(self, Self::PushFile | Self::DeleteFile)
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The first game version that answers this method (changelogs, `docs/protocols/bitburner.md` §3).
    pub fn since(self) -> &'static str {
        match self {
            Self::GetAllServers => "2.6.0",
            Self::GetSaveFile => "2.8.1",
            Self::GetFileMetadata | Self::GetAllFileMetadata => "3.0.0",
            _ => "2.1.0",
        }
    }
}

/// The dispatcher's answer to a method it does not know (`Remote.ts` `handleMessageEvent`). It is the one
/// string that has not changed between versions, and the only way to learn what a game supports.
pub const UNKNOWN_METHOD: &str = "Unknown message received";

/// One request frame. `params` is always an object: v2.x games never answer a request without one.
pub fn request_frame(id: u64, method: Method, params: Map<String, Value>) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": method.name(),
        "params": params,
    })
    .to_string()
}

/// What the game answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Result(Value),
    /// The game's error text, verbatim.
    Error(String),
    /// A frame with the request's id and no answer that could be read: why it could not.
    Malformed(String),
}

/// One response frame from the game.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// Absent when the request had none, or for the answer to a batch.
    pub id: Option<Value>,
    pub outcome: Outcome,
}

impl Response {
    /// Our ids are sequential integers from 1; anything else cannot be ours.
    pub fn numeric_id(&self) -> Option<u64> {
        self.id.as_ref().and_then(Value::as_u64)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("frame is not JSON: {0}")]
    NotJson(String),
    #[error("frame is not a JSON object")]
    NotAnObject,
    #[error("frame has neither `result` nor `error`")]
    NoOutcome,
    #[error(
        "frame of {bytes} bytes would take about {decoded} bytes decoded (its JSON values, not only its text), \
         over the limit of {max}: not decoded"
    )]
    TooManyValues {
        bytes: usize,
        decoded: usize,
        max: usize,
    },
}

/// The most a frame from the game may take decoded. Its answers carry files as strings, which cost their
/// length; a frame of tiny values within the 32 MiB frame limit took the bridge to 873 MB before this bound
/// (bench/README.md).
pub const MAX_DECODED_FRAME_BYTES: usize = 2 * crate::MAX_GAME_FRAME_BYTES;

/// Parse a frame from the game. Success or failure is decided by which key is present, never by truthiness:
/// `""` is a valid file content (§6). Key order and `jsonrpc` are not checked (they vary by version).
pub fn parse_response(text: &str) -> Result<Response, WireError> {
    let decoded = bridge_core::link::json_cost::decoded_bytes(text.as_bytes());
    if decoded > MAX_DECODED_FRAME_BYTES {
        return Err(WireError::TooManyValues {
            bytes: text.len(),
            decoded,
            max: MAX_DECODED_FRAME_BYTES,
        });
    }
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        // The game's strings are JavaScript's: a file may hold half an emoji (a script's `ns.write` of a string
        // cut inside one), which JSON.stringify sends as a lone `\ud83d` and serde refuses, and one such file
        // made every getAllFiles of its server unreadable (an attack run's finding). Read as U+FFFD, as a
        // browser's TextEncoder writes it.
        Err(e) => match lone_surrogates_replaced(text) {
            Some(repaired) => {
                serde_json::from_str(&repaired).map_err(|e| WireError::NotJson(e.to_string()))?
            }
            None => return Err(WireError::NotJson(e.to_string())),
        },
    };
    let Value::Object(mut object) = value else {
        return Err(WireError::NotAnObject);
    };
    let id = object.remove("id");
    let outcome = match (object.remove("error"), object.remove("result")) {
        (Some(Value::String(message)), _) => Outcome::Error(message),
        // Leniency for forks that send `{code, message}`: keep all of it rather than lose it.
        (Some(other), _) if !other.is_null() => Outcome::Error(other.to_string()),
        (_, Some(result)) => Outcome::Result(result),
        (Some(_), None) | (None, None) => return Err(WireError::NoOutcome),
    };
    Ok(Response { id, outcome })
}

/// `text` with every `\uXXXX` escape of a lone UTF-16 surrogate replaced by `\uFFFD`; `None` when it holds none.
fn lone_surrogates_replaced(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let escape_at = |i: usize| -> Option<u16> {
        let hex = bytes.get(i..i + 6)?;
        if hex[0] != b'\\' || hex[1] != b'u' {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&hex[2..]).ok()?, 16).ok()
    };
    let mut out = String::with_capacity(text.len());
    let (mut copied, mut i, mut changed) = (0, 0, false);
    while let Some(at) = bytes
        .get(i..)
        .and_then(|rest| rest.iter().position(|b| *b == b'\\'))
        .map(|n| i + n)
    {
        let unit = escape_at(at);
        let lone = match unit {
            Some(0xD800..=0xDBFF) => {
                let low = escape_at(at + 6).is_some_and(|u| (0xDC00..=0xDFFF).contains(&u));
                if low {
                    i = at + 12;
                    continue;
                }
                true
            }
            Some(0xDC00..=0xDFFF) => true,
            Some(_) => false,
            // Any other escape is two characters (`\"`, `\\`, ...): step over both.
            None => {
                i = at + 2;
                continue;
            }
        };
        if lone {
            out.push_str(&text[copied..at]);
            out.push_str("\\uFFFD");
            copied = at + 6;
            changed = true;
        }
        i = at + 6;
    }
    if !changed {
        return None;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// The top-level `id` of a frame [`parse_response`] refused, when it could be read before whatever made the frame
/// unreadable: the request it answers then fails at once rather than waiting out its deadline. Other members
/// are skipped unread, so a value nested deeper than the parser allows does not hide the id.
pub fn salvage_id(text: &str) -> Option<Value> {
    use bridge_core::json_peek::Scalar;
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    use std::cell::RefCell;

    struct Ids<'a>(&'a RefCell<Option<Value>>);
    impl<'de> Visitor<'de> for Ids<'_> {
        type Value = ();

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key == "id" && self.0.borrow().is_none() {
                    // A number or a string (what ours are): an array or object there is skipped unread, since
                    // this runs on frames refused for what they would take decoded.
                    *self.0.borrow_mut() = map.next_value::<Scalar>()?.0;
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(())
        }
    }
    let id = RefCell::new(None);
    // Its error is `parse_response`'s to report; what matters here is only what was read before it.
    let _ = serde_json::Deserializer::from_str(text).deserialize_map(Ids(&id));
    id.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_always_carries_a_params_object() {
        let frame = request_frame(7, Method::GetDefinitionFile, Map::new());
        let v: Value = serde_json::from_str(&frame).unwrap_or_default();
        assert_eq!(
            v,
            json!({"jsonrpc":"2.0","id":7,"method":"getDefinitionFile","params":{}})
        );
    }

    #[test]
    fn responses_as_seen_on_the_wire() {
        // Frames copied from the v2.6.1 transcript (docs/protocols/bitburner.md §8) and the dev key order (§2.1).
        let cases: &[(&str, Option<Value>, Outcome)] = &[
            (
                r#"{"jsonrpc":"2.0","result":"OK","id":2}"#,
                Some(json!(2)),
                Outcome::Result(json!("OK")),
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"result":"OK"}"#,
                Some(json!(2)),
                Outcome::Result(json!("OK")),
            ),
            (
                r#"{"jsonrpc":"2.0","result":"","id":16}"#,
                Some(json!(16)),
                Outcome::Result(json!("")),
            ),
            (
                r#"{"jsonrpc":"2.0","error":"File doesn't exist","id":5}"#,
                Some(json!(5)),
                Outcome::Error("File doesn't exist".into()),
            ),
            (
                r#"{"jsonrpc":"2.0","error":"Unknown message received"}"#,
                None,
                Outcome::Error(UNKNOWN_METHOD.into()),
            ),
            (
                r#"{"result":1.7,"id":"str-id"}"#,
                Some(json!("str-id")),
                Outcome::Result(json!(1.7)),
            ),
            (
                r#"{"error":{"code":1,"message":"m"},"id":3}"#,
                Some(json!(3)),
                Outcome::Error(r#"{"code":1,"message":"m"}"#.into()),
            ),
        ];
        for (text, id, outcome) in cases {
            let r = parse_response(text);
            assert_eq!(
                r,
                Ok(Response {
                    id: id.clone(),
                    outcome: outcome.clone()
                }),
                "{text}"
            );
        }
    }

    #[test]
    fn a_lone_surrogate_in_a_string_is_read_as_the_replacement_character() {
        let frame =
            r#"{"id":1,"result":["half \ud83d end","\udc00","pair \ud83d\ude00 \\ud83d kept"]}"#;
        let r = parse_response(frame).unwrap();
        let Outcome::Result(Value::Array(strings)) = r.outcome else {
            panic!("{:?}", r.outcome)
        };
        assert_eq!(strings[0], "half \u{FFFD} end");
        assert_eq!(strings[1], "\u{FFFD}");
        assert_eq!(strings[2], "pair \u{1F600} \\ud83d kept");
        assert!(lone_surrogates_replaced(r#"{"a":"\ud83d\ude00 \\udc00"}"#).is_none());
    }

    #[test]
    fn malformed_frames_are_errors_not_panics() {
        assert!(matches!(
            parse_response("this is not json"),
            Err(WireError::NotJson(_))
        ));
        assert_eq!(parse_response("[1]"), Err(WireError::NotAnObject));
        assert_eq!(parse_response(r#"{"id":1}"#), Err(WireError::NoOutcome));
    }

    #[test]
    fn the_id_of_an_unreadable_answer_is_salvaged() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":4,"result":{}{}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        // An id that is no number or string is never decoded: here it is what made the frame too large.
        let huge_id = format!(r#"{{"id":[{}0],"result":1}}"#, "0,".repeat(300_000));
        let cases: [(&str, Option<Value>); 8] = [
            (r#"{"id":1}"#, Some(json!(1))),
            (r#"{"id":"7","result":tru"#, Some(json!("7"))),
            (&huge_id, None),
            (r#"{"jsonrpc":"2.0","id":2,"result":tru"#, Some(json!(2))),
            (r#"{"result":[1,2,{"x":}],"id":3}"#, None),
            (&deep, Some(json!(4))),
            ("this is not json", None),
            (r#"[{"id":5}]"#, None),
        ];
        for (text, id) in cases {
            assert!(
                parse_response(text).is_err(),
                "{}",
                &text[..40.min(text.len())]
            );
            assert_eq!(salvage_id(text), id, "{}", &text[..40.min(text.len())]);
        }
    }

    #[test]
    fn only_our_integer_ids_are_numeric() {
        let ours = parse_response(r#"{"result":1,"id":9}"#).map(|r| r.numeric_id());
        assert_eq!(ours, Ok(Some(9)));
        let theirs = parse_response(r#"{"result":1,"id":1.5}"#).map(|r| r.numeric_id());
        assert_eq!(theirs, Ok(None));
    }

    #[test]
    fn method_names_round_trip() {
        for m in Method::ALL {
            assert_eq!(Method::from_name(m.name()), Some(m));
        }
        assert_eq!(Method::from_name("runScript"), None);
    }
}
