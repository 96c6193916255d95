//! The fast path for the message that comes by the tens of thousands a second: an `event`, alone or in a
//! `batch` of events. It reads the envelope's fields and checks the payload as [`super::parse`] does, but
//! builds no JSON tree: the payload stays the text it came in, to be written out again as it is (issue 22 item
//! 9: at 50 000 events/s the relay and the MCP server spent about half their CPU building, cloning and freeing
//! the trees of events they only passed on).
//!
//! It never refuses: anything it does not take as a plainly valid event of a supported version (a refusal, a
//! warning, a duplicate key, a number where it wants a string, ...) gives `None`, and the caller takes the full
//! path, which answers as it always did. What it does take, the full path would have taken with the same
//! fields (tests: `wire::fast::tests`).

use super::{EventType, Kind, MAX_BATCH, MAX_ID_CHARS, Source, check_version, valid_name};
use serde::de::{self, Deserializer, IgnoredAny, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

/// An event read by the fast path. Strings are borrowed from the message unless they had escapes.
#[derive(Debug, Clone)]
pub struct FastEvent<'a> {
    pub version: Cow<'a, str>,
    pub id: Cow<'a, str>,
    pub timestamp: u64,
    pub source: Source,
    pub seq: Option<u64>,
    pub game: Option<Cow<'a, str>>,
    /// As the full path reads them: dropped when malformed.
    pub game_seq: Option<u64>,
    pub instance: Option<Cow<'a, str>>,
    pub ty: EventType,
    /// `payload.typeSeq` when it is an unsigned integer.
    pub type_seq: Option<u64>,
    /// The payload's JSON text, as it came.
    pub payload: &'a RawValue,
    /// What players wrote (`data.player`, `data.message`, `data.killer`, `data.item`), when they are strings.
    pub player: Option<Cow<'a, str>>,
    pub message: Option<Cow<'a, str>>,
    pub killer: Option<Cow<'a, str>>,
    pub item: Option<Cow<'a, str>>,
    /// Whether the payload has a key the MCP server sets on what it publishes (`game`, `id`, `untrusted`,
    /// `untrusted_text`): its text cannot then simply be extended with them.
    pub reserved_keys: bool,
}

impl FastEvent<'_> {
    /// The payload's members as JSON text without its braces (`"a":1,"b":2`); empty for `{}`.
    pub fn payload_members(&self) -> &str {
        let text = self.payload.get().trim();
        text.strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .unwrap_or_default()
            .trim()
    }

    /// The envelope the full path builds (its payload parsed): for the rare caller that needs one.
    pub fn envelope(&self) -> Option<super::Envelope> {
        Some(super::Envelope {
            version: self.version.to_string(),
            kind: Kind::Event,
            id: self.id.to_string(),
            timestamp: self.timestamp,
            source: self.source,
            seq: self.seq,
            game: self.game.as_deref().map(str::to_owned),
            game_seq: self.game_seq,
            instance: self.instance.as_deref().map(str::to_owned),
            payload: serde_json::from_str(self.payload.get()).ok()?,
        })
    }

    /// The event as the relay forwards it (PROTOCOL.md §5): without `seq`, with the game's name, its `seq` as
    /// `gameSeq` and its `instance`; the payload as it came. Field for field what serialising the full path's
    /// envelope so changed writes.
    pub fn forward_text(&self, game: &str, instance: &str) -> String {
        forward_text(
            &self.version,
            &self.id,
            self.timestamp,
            self.source,
            game,
            self.seq,
            instance,
            self.payload,
        )
    }
}

/// An event as the relay forwards it: the envelope's fields in its order, `seq` left out (each client's queue
/// splices its own in).
#[allow(clippy::too_many_arguments)]
pub fn forward_text<P: Serialize + ?Sized>(
    version: &str,
    id: &str,
    timestamp: u64,
    source: Source,
    game: &str,
    game_seq: Option<u64>,
    instance: &str,
    payload: &P,
) -> String {
    #[derive(Serialize)]
    struct Forward<'a, P: ?Sized> {
        version: &'a str,
        #[serde(rename = "type")]
        kind: Kind,
        id: &'a str,
        timestamp: u64,
        source: Source,
        game: &'a str,
        #[serde(rename = "gameSeq", skip_serializing_if = "Option::is_none")]
        game_seq: Option<u64>,
        instance: &'a str,
        payload: &'a P,
    }
    // Strings, numbers and JSON serialise without fail.
    serde_json::to_string(&Forward {
        version,
        kind: Kind::Event,
        id,
        timestamp,
        source,
        game,
        game_seq,
        instance,
        payload,
    })
    .unwrap_or_default()
}

/// The events of one frame: the event it is, or every message of the `batch` it is when each is an event. `None`
/// for anything else, or anything the full path would refuse or warn about.
pub fn events(text: &str, max_bytes: usize) -> Option<Vec<FastEvent<'_>>> {
    if text.len() > max_bytes {
        return None;
    }
    // A batch read in one pass, its messages' envelopes with it, when it says so near its start (as every writer
    // of this crate's and the adapters' puts it); else, or if that fails, the envelope first.
    if looks_like_batch(text)
        && let Ok(mut batch) = serde_json::from_str::<Head<'_, BatchPayload<'_>>>(text)
    {
        let messages = std::mem::take(&mut batch.payload.messages);
        return (batch.kind == Kind::Batch)
            .then_some(())
            .and_then(|()| batch_events(&batch, messages));
    }
    let head: Head<'_, &RawValue> = serde_json::from_str(text).ok()?;
    match head.kind {
        Kind::Event => Some(vec![event(head)?]),
        Kind::Batch => {
            let Batch { messages } = serde_json::from_str(head.payload.get()).ok()?;
            let messages = messages
                .into_iter()
                .map(|m| serde_json::from_str(m.get()).ok())
                .collect::<Option<Vec<_>>>()?;
            batch_events(&head, messages)
        }
        _ => None,
    }
}

fn looks_like_batch(text: &str) -> bool {
    let start = &text.as_bytes()[..text.len().min(96)];
    start.windows(15).any(|w| w == b"\"type\":\"batch\"")
}

/// The events of a batch whose envelope is `head`, when its every message is one.
fn batch_events<'a, P>(
    head: &Head<'_, P>,
    messages: Vec<Head<'a, &'a RawValue>>,
) -> Option<Vec<FastEvent<'a>>> {
    check_head(head)?;
    if !(1..=MAX_BATCH).contains(&messages.len()) {
        return None;
    }
    messages
        .into_iter()
        .map(|m| {
            (m.kind == Kind::Event).then_some(())?;
            event(m)
        })
        .collect()
}

/// The envelope's checks of the full path, for a message of a supported version.
fn check_head<P>(head: &Head<'_, P>) -> Option<()> {
    check_version(&head.version).ok()?.is_none().then_some(())?;
    let id_ok = !head.id.is_empty() && head.id.chars().count() <= MAX_ID_CHARS;
    let seq_ok = head.seq.is_none_or(|s| s >= 1);
    let game_ok = head.game.as_deref().is_none_or(valid_name);
    (id_ok && seq_ok && game_ok).then_some(())
}

fn event<'a>(head: Head<'a, &'a RawValue>) -> Option<FastEvent<'a>> {
    check_head(&head)?;
    if head.source == Source::Minecraft && head.seq.is_none() {
        return None;
    }
    if needs_the_full_path(head.payload.get()) {
        return None;
    }
    let p: Payload<'_> = serde_json::from_str(head.payload.get()).ok()?;
    let d = &p.data;
    let required = match p.event_type {
        EventType::PlayerJoin | EventType::PlayerQuit => d.uuid.is_some(),
        EventType::PlayerChat => d.message.is_some(),
        EventType::PlayerDeath => d.cause.is_some() && d.location.is_some(),
        EventType::BlockBreak => d.block_type.is_some() && d.location.is_some(),
    };
    if !required || d.player.is_none() || d.former_name.0 {
        return None;
    }
    let Data {
        player,
        message,
        killer,
        item,
        ..
    } = p.data;
    Some(FastEvent {
        version: head.version,
        id: head.id,
        timestamp: head.timestamp,
        source: head.source,
        seq: head.seq,
        game: head.game,
        game_seq: head.game_seq.and_then(lenient_u64),
        instance: head.instance.filter(|i| valid_name(i)),
        ty: p.event_type,
        type_seq: p.type_seq.and_then(lenient_u64),
        payload: head.payload,
        player,
        message,
        killer,
        item,
        reserved_keys: p.game.0 || p.id.0 || p.untrusted.0 || p.untrusted_text.0,
    })
}

/// Whether a payload's text must go the full way, though valid JSON:
/// - a raw CR or LF (a pretty-printing game): the text is written out as it came, into one line of stdio's
///   JSON-RPC or one SSE `data:` line, which it would end early; the full path writes it compact;
/// - a number f64 cannot hold (`1e400`, 310 digits): serde's tree refuses it ("number out of range"), so the
///   full path refuses the message, and a page holding it could not be parsed where a result is (rmcp's paths).
///
/// Only numbers with a 3-digit exponent or over 300 digits are read; the same shapes inside strings are read
/// too, and at worst send the message the full way.
fn needs_the_full_path(payload: &str) -> bool {
    let bytes = payload.as_bytes();
    let mut digits = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        if b.is_ascii_digit() {
            digits += 1;
            if digits == 301 && beyond_f64(bytes, i) {
                return true;
            }
            continue;
        }
        if b == b'\n' || b == b'\r' {
            return true;
        }
        if (b == b'e' || b == b'E') && digits > 0 {
            let rest = &bytes[i + 1..];
            let rest = rest
                .strip_prefix(b"+")
                .or_else(|| rest.strip_prefix(b"-"))
                .unwrap_or(rest);
            if rest.iter().take_while(|d| d.is_ascii_digit()).count() >= 3 && beyond_f64(bytes, i) {
                return true;
            }
        }
        digits = 0;
    }
    false
}

/// Whether the number-like run of characters around `bytes[at]` is beyond f64 (or not a number at all).
fn beyond_f64(bytes: &[u8], at: usize) -> bool {
    let numeric = |b: &u8| b.is_ascii_digit() || matches!(b, b'.' | b'+' | b'-' | b'e' | b'E');
    let start = bytes[..at]
        .iter()
        .rposition(|b| !numeric(b))
        .map_or(0, |p| p + 1);
    let end = bytes[at..]
        .iter()
        .position(|b| !numeric(b))
        .map_or(bytes.len(), |p| at + p);
    std::str::from_utf8(&bytes[start..end])
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
        .is_none_or(|v| !v.is_finite())
}

/// `Value::as_u64` of a value without building it.
fn lenient_u64(raw: &RawValue) -> Option<u64> {
    serde_json::from_str(raw.get()).ok()
}

/// The envelope. Unknown fields are ignored, as the full path ignores them; a duplicate field is an error here
/// (the full path keeps the last), which only sends the message down the full path.
#[derive(Deserialize)]
struct Head<'a, P> {
    #[serde(borrow)]
    version: Cow<'a, str>,
    #[serde(rename = "type")]
    kind: Kind,
    #[serde(borrow)]
    id: Cow<'a, str>,
    timestamp: u64,
    source: Source,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default, borrow)]
    game: Option<Cow<'a, str>>,
    #[serde(default, borrow, rename = "gameSeq")]
    game_seq: Option<&'a RawValue>,
    // Dropped when malformed, as the full path does; a non-string one is an error here (full path).
    #[serde(default, borrow)]
    instance: Option<Cow<'a, str>>,
    payload: P,
}

#[derive(Deserialize)]
struct Batch<'a> {
    #[serde(borrow)]
    messages: Vec<&'a RawValue>,
}

/// A batch's payload read with its messages' envelopes.
#[derive(Deserialize)]
struct BatchPayload<'a> {
    #[serde(borrow)]
    messages: Vec<Head<'a, &'a RawValue>>,
}

/// A `GameEvent` payload: what [`super::validate_game_event`] checks, and what the MCP server reads.
#[derive(Deserialize)]
struct Payload<'a> {
    #[serde(rename = "eventType")]
    event_type: EventType,
    #[allow(dead_code)]
    timestamp: IsNumber,
    #[serde(borrow)]
    data: Data<'a>,
    #[serde(default, borrow, rename = "typeSeq")]
    type_seq: Option<&'a RawValue>,
    #[serde(default)]
    game: Present,
    #[serde(default)]
    id: Present,
    #[serde(default)]
    untrusted: Present,
    #[serde(default)]
    untrusted_text: Present,
}

/// A `GameEvent`'s `data`. A field of the wrong kind is an error here even where this event type does not need
/// it (the full path would take it): such a message goes down the full path.
#[derive(Deserialize)]
struct Data<'a> {
    #[serde(default, borrow)]
    player: Option<Cow<'a, str>>,
    #[serde(default)]
    uuid: Option<IsString>,
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
    #[serde(default)]
    cause: Option<IsString>,
    #[serde(default, rename = "blockType")]
    block_type: Option<IsString>,
    #[serde(default)]
    location: Option<Location>,
    #[serde(default, borrow)]
    killer: Option<Cow<'a, str>>,
    /// Not in PROTOCOL.md's death event, but marked wherever it is (vanilla mode's deaths carry it).
    #[serde(default, borrow)]
    item: Option<Cow<'a, str>>,
    /// Vanilla mode's joins only: a payload that has it goes the full way, which marks it.
    #[serde(default, rename = "formerName")]
    former_name: Present,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct Location {
    world: IsString,
    x: IsNumber,
    y: IsNumber,
    z: IsNumber,
}

/// Any JSON string, read without keeping it.
struct IsString;

impl<'de> Deserialize<'de> for IsString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = IsString;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<IsString, E> {
                Ok(IsString)
            }
        }
        d.deserialize_str(V)
    }
}

/// Any JSON number.
struct IsNumber;

impl<'de> Deserialize<'de> for IsNumber {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = IsNumber;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<IsNumber, E> {
                Ok(IsNumber)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<IsNumber, E> {
                Ok(IsNumber)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<IsNumber, E> {
                Ok(IsNumber)
            }
        }
        d.deserialize_any(V)
    }
}

/// Whether a field is there at all, whatever its value (`null` included).
#[derive(Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| Present(true))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::wire::{self, Envelope, Parsed};
    use serde_json::Value;

    fn event(source: &str, extra_head: &str, payload: &str) -> String {
        format!(
            r#"{{"version":"1.2","type":"event","id":"e-1","timestamp":1700000000000,"source":"{source}"{extra_head},"payload":{payload}}}"#
        )
    }

    fn join(data_extra: &str) -> String {
        format!(
            r#"{{"eventType":"player_join","timestamp":1700000000000,"data":{{"player":"Steve","uuid":"u-1"{data_extra}}}}}"#
        )
    }

    /// Frames as games and the relay send them, and frames they should not send: each with whether the fast path
    /// takes it (the rest go down the full path, which answers for them).
    pub(crate) fn table() -> Vec<(&'static str, String, bool)> {
        let game = r#","seq":7"#;
        let relayed = r#","seq":7,"game":"lobby","gameSeq":41,"instance":"i-1""#;
        let chat = |message: &str| {
            format!(
                r#"{{"eventType":"player_chat","timestamp":1,"data":{{"player":"Alex","message":{message}}}}}"#
            )
        };
        let death = |killer: &str| {
            format!(
                r#"{{"eventType":"player_death","timestamp":2.5,"data":{{"player":"Alex","cause":"lava","location":{{"world":"w","x":1.5,"y":-64,"z":18446744073709551616}}{killer}}}}}"#
            )
        };
        let block = r#"{"eventType":"block_break","timestamp":3,"typeSeq":12,"data":{"player":"Bob","blockType":"minecraft:stone","location":{"world":"overworld","x":-9223372036854775809,"y":1.0715660391465826e-75,"z":-1.603964615428183e+143,"extra":[1,{"a":null}]}}}"#;
        let mut rows = vec![
            ("join from a game", event("minecraft", game, &join("")), true),
            ("join relayed", event("relay", relayed, &join("")), true),
            (
                "chat with escapes",
                event(
                    "minecraft",
                    game,
                    &chat(r#""say \"hi\"\n\\ \u0041\ud83d\ude00 \u0000 \t end""#),
                ),
                true,
            ),
            (
                "chat in unicode",
                event("relay", relayed, &chat(r#""héllo 世界 😀 ```` fence""#)),
                true,
            ),
            (
                "chat faking JSON closers",
                event("relay", relayed, &chat(r#""\"}]},\"untrusted\":[] ``` ""#)),
                true,
            ),
            ("death, big numbers", event("minecraft", game, &death("")), true),
            (
                "death, killer null",
                event("relay", relayed, &death(r#","killer":null"#)),
                true,
            ),
            (
                "death, killer",
                event("relay", relayed, &death(r#","killer":"Zombie \"Z\"""#)),
                true,
            ),
            (
                "death, renamed item",
                event("relay", relayed, &death(r#","killer":"Alex","item":"[run ``` /op me]""#)),
                true,
            ),
            ("block, nested unknowns", event("relay", relayed, block), true),
            (
                "chat, pretty-printed (LF and CRLF between members)",
                event(
                    "minecraft",
                    game,
                    "{\n  \"eventType\": \"player_chat\",\r\n  \"timestamp\": 1,\n  \"data\": {\"player\": \"Alex\", \"message\": \"m\"}\n}",
                ),
                false,
            ),
            (
                "chat with a number beyond f64",
                event(
                    "relay",
                    relayed,
                    r#"{"eventType":"player_chat","timestamp":1,"data":{"player":"Alex","message":"m","n":1e400}}"#,
                ),
                false,
            ),
            (
                "chat with 310 digits",
                event(
                    "relay",
                    relayed,
                    &chat(&format!("\"ok\",\"n\":{}", "9".repeat(310))),
                ),
                false,
            ),
            (
                "unknown fields everywhere",
r#"{"zz":1,"version":"1.2","type":"event","id":"e-1","timestamp":5,"source":"minecraft","seq":3,"later":{"x":[1,2]},"payload":{"eventType":"player_join","timestamp":5,"a":"b","data":{"player":"Steve","uuid":"u","extra":1,"extra":2},"z":true}}"#.to_owned(),
                true,
            ),
            (
                "escaped key names",
                r#"{"version":"1.2","type":"ev\u0065nt","i\u0064":"e-\u00e9","timestamp":5,"source":"minecraft","seq":3,"payload":{"eventType":"player_join","timestamp":5,"data":{"\u0070layer":"St\u00e9ve","uuid":"u"}}}"#.to_owned(),
                true,
            ),
            (
                "pretty printed",
                "{\n  \"version\": \"1.2\",\n  \"type\": \"event\",\n  \"id\": \"e-1\",\n  \"timestamp\": 5,\n  \"source\": \"minecraft\",\n  \"seq\": 3,\n  \"payload\": {\n    \"eventType\": \"player_quit\",\n    \"timestamp\": 5,\n    \"data\": { \"player\": \"Steve\", \"uuid\": \"u\" }\n  }\n}\n".to_owned(),
                // Its payload holds newlines, which its text would carry into a line-framed answer.
                false,
            ),
            (
                "pretty printed, the payload compact",
                "{\n  \"version\": \"1.2\",\n  \"type\": \"event\",\n  \"id\": \"e-1\",\n  \"timestamp\": 5,\n  \"source\": \"minecraft\",\n  \"seq\": 3,\n  \"payload\": {\"eventType\": \"player_quit\", \"timestamp\": 5, \"data\": { \"player\": \"Steve\", \"uuid\": \"u\" }}\n}\n".to_owned(),
                true,
            ),
            (
                "version 1.0",
                event("minecraft", game, &join("")).replace("\"1.2\"", "\"1.0\""),
                true,
            ),
            (
                "instance malformed: dropped",
                event("relay", r#","seq":7,"game":"lobby","gameSeq":"x","instance":"bad name""#, &join("")),
                true,
            ),
            (
                "typeSeq not an integer: dropped",
                event("relay", relayed, &join(r#","typeSeq":-1"#).replace(r#""timestamp":1700000000000,"#, r#""timestamp":1,"typeSeq":"7","#)),
                true,
            ),
            (
                "payload has a key the server sets",
                event("relay", relayed, &join("").replace(r#""timestamp""#, r#""game":"x","untrusted":null,"timestamp""#)),
                true,
            ),
            (
                "batch of events",
                format!(
                    r#"{{"version":"1.2","type":"batch","id":"b-1","timestamp":9,"source":"relay","payload":{{"messages":[{},{},{}]}}}}"#,
                    event("relay", relayed, &join("")),
                    event("relay", &relayed.replace("7", "8"), &chat(r#""x""#)),
                    event("relay", &relayed.replace("7", "9"), block),
                ),
                true,
            ),
            (
                "batch with its type last",
                format!(
                    r#"{{"version":"1.2","id":"b-1","timestamp":9,"source":"relay","payload":{{"messages":[{},{}]}},"type":"batch"}}"#,
                    event("relay", relayed, &join("")),
                    event("relay", &relayed.replace("7", "8"), &chat(r#""x""#)),
                ),
                true,
            ),
            (
                "an event that mentions a batch first",
                event("minecraft", game, &join("")).replacen('{', r#"{"x":{"type":"batch"},"#, 1),
                true,
            ),
            // The full path's: refusals, warnings, other types, and what the fast path is too strict for.
            (
                "batch with a message that is not an object",
                format!(
                    r#"{{"version":"1.2","type":"batch","id":"b-1","timestamp":9,"source":"relay","payload":{{"messages":[{},5]}}}}"#,
                    event("relay", relayed, &join("")),
                ),
                false,
            ),
            (
                "batch with a bad envelope",
                format!(
                    r#"{{"version":"1.2","type":"batch","id":"","timestamp":9,"source":"relay","payload":{{"messages":[{}]}}}}"#,
                    event("relay", relayed, &join("")),
                ),
                false,
            ),
            (
                "batch of 1025",
                format!(
                    r#"{{"version":"1.2","type":"batch","id":"b","timestamp":9,"source":"relay","payload":{{"messages":[{}]}}}}"#,
                    vec![event("relay", relayed, &join("")); MAX_BATCH + 1].join(",")
                ),
                false,
            ),
            (
                "batch with a heartbeat",
                format!(
                    r#"{{"version":"1.2","type":"batch","id":"b-1","timestamp":9,"source":"minecraft","payload":{{"messages":[{},{{"version":"1.2","type":"heartbeat","id":"h","timestamp":1,"source":"minecraft","payload":{{}}}}]}}}}"#,
                    event("minecraft", game, &join(""))
                ),
                false,
            ),
            (
                "batch of none",
                r#"{"version":"1.2","type":"batch","id":"b-1","timestamp":9,"source":"minecraft","payload":{"messages":[]}}"#.to_owned(),
                false,
            ),
            (
                "batch with a bad event",
                format!(
                    r#"{{"version":"1.2","type":"batch","id":"b-1","timestamp":9,"source":"minecraft","payload":{{"messages":[{},{}]}}}}"#,
                    event("minecraft", game, &join("")),
                    event("minecraft", "", &join(""))
                ),
                false,
            ),
            ("no seq from a game", event("minecraft", "", &join("")), false),
            ("seq 0", event("minecraft", r#","seq":0"#, &join("")), false),
            ("seq a float", event("minecraft", r#","seq":2.0"#, &join("")), false),
            ("seq a string", event("minecraft", r#","seq":"2""#, &join("")), false),
            ("seq null from the relay", event("relay", r#","seq":null"#, &join("")), true),
            (
                "version 2.0 (a warning)",
                event("minecraft", game, &join("")).replace("\"1.2\"", "\"2.0\""),
                false,
            ),
            ("version garbage", event("minecraft", game, &join("")).replace("\"1.2\"", "\"one\""), false),
            ("empty id", event("minecraft", game, &join("")).replace("\"e-1\"", "\"\""), false),
            (
                "id too long",
                event("minecraft", game, &join("")).replace("e-1", &"é".repeat(129)),
                false,
            ),
            ("game name bad", event("relay", r#","seq":1,"game":"a b""#, &join("")), false),
            ("duplicate id", event("minecraft", r#","seq":1,"id":"e-2""#, &join("")), false),
            (
                "player missing",
                event("minecraft", game, &join("").replace(r#""player":"Steve","#, "")),
                false,
            ),
            (
                "player a number",
                event("minecraft", game, &join("").replace(r#""Steve""#, "5")),
                false,
            ),
            (
                "unknown event type",
                event("minecraft", game, &join("").replace("player_join", "player_jump")),
                false,
            ),
            (
                "payload timestamp a string",
                event("minecraft", game, &join("").replace("1700000000000,", "\"now\",")),
                false,
            ),
            (
                "location axis a string",
                event("minecraft", game, &death("").replace("1.5", "\"1.5\"")),
                false,
            ),
            ("location missing", event("minecraft", game, &death("").replace(r#","location":{"world":"w","x":1.5,"y":-64,"z":18446744073709551616}"#, "")), false),
            (
                "killer a number",
                event("minecraft", game, &death(r#","killer":5"#)),
                false,
            ),
            (
                "join with a former name (vanilla's; the full path marks it)",
                event("minecraft", game, &join(r#","formerName":"Old``` name""#)),
                false,
            ),
            (
                "item not a string",
                event("minecraft", game, &death(r#","item":{"id":"minecraft:bow"}"#)),
                false,
            ),
            (
                "a field this type does not need, of the wrong kind (full path takes it)",
                event("minecraft", game, &chat(r#""x""#).replace(r#""player""#, r#""uuid":5,"player""#)),
                false,
            ),
            ("payload not an object", event("minecraft", game, "[1]"), false),
            ("top-level timestamp a float", event("minecraft", game, &join("")).replace("1700000000000,\"source\"", "1.5,\"source\""), false),
            ("not JSON", "{\"version\":".to_owned(), false),
            ("not an object", "[1,2]".to_owned(), false),
            (
                "a command",
                r#"{"version":"1.2","type":"command","id":"c","timestamp":1,"source":"mcp","payload":{"command":"x"}}"#.to_owned(),
                false,
            ),
            ("huge number", event("minecraft", game, &death("").replace("1.5", "1e400")), false),
        ];
        rows.push((
            "over the size limit",
            event(
                "minecraft",
                game,
                &chat(&format!("\"{}\"", "x".repeat(70_000))),
            ),
            false,
        ));
        rows
    }

    /// What the full path makes of a frame: its events (every message of a batch), when it takes it whole.
    pub(crate) fn full_path(text: &str, max_bytes: usize) -> Option<Vec<Envelope>> {
        let Parsed {
            mut envelope,
            unsupported_version,
        } = wire::parse(text, max_bytes).ok()?;
        if unsupported_version.is_some() {
            return None;
        }
        if envelope.kind != Kind::Batch {
            return Some(vec![envelope]);
        }
        wire::unbatch(&mut envelope)
            .into_iter()
            .map(|p| p.ok().map(|p| p.envelope))
            .collect()
    }

    /// The rows the fast path leaves for these reasons are answered by the full path as before this path
    /// existed: a pretty-printed payload taken (and written compact from its tree), a number beyond f64 refused.
    #[test]
    fn what_the_fast_path_leaves_for_newlines_or_huge_numbers_the_full_path_answers() {
        let rows = table();
        let row = |prefix: &str| {
            rows.iter()
                .find(|(name, _, _)| name.starts_with(prefix))
                .map(|(_, text, _)| text.clone())
                .unwrap()
        };
        let max = wire::DEFAULT_MAX_MESSAGE_BYTES;
        let pretty = full_path(&row("chat, pretty-printed"), max).unwrap();
        assert!(
            !serde_json::to_string(&pretty[0].payload)
                .unwrap()
                .contains('\n')
        );
        assert!(full_path(&row("chat with a number beyond f64"), max).is_none());
        assert!(full_path(&row("chat with 310 digits"), max).is_none());
        assert!(needs_the_full_path("{\"a\":1.5E+309}"));
        assert!(needs_the_full_path("{\"a\":[1,-2e400]}"));
        assert!(!needs_the_full_path(
            "{\"a\":1.5E+308,\"b\":-1.6e+143,\"c\":\"e123\",\"d\":1e-400}"
        ));
        assert!(!needs_the_full_path(&format!(
            "{{\"a\":0.{}1}}",
            "0".repeat(400)
        )));
    }

    #[test]
    fn a_batch_holds_1_to_1024_messages() {
        let one = event("relay", r#","seq":7"#, &join(""));
        let batch = |n: usize| {
            format!(
                r#"{{"version":"1.2","type":"batch","id":"b","timestamp":9,"source":"relay","payload":{{"messages":[{}]}}}}"#,
                vec![one.as_str(); n].join(",")
            )
        };
        let max = wire::HARD_MAX_FRAME_BYTES;
        assert_eq!(
            events(&batch(MAX_BATCH), max).map(|e| e.len()),
            Some(MAX_BATCH)
        );
        assert!(full_path(&batch(MAX_BATCH), max).is_some());
        assert!(events(&batch(MAX_BATCH + 1), max).is_none());
        assert!(full_path(&batch(MAX_BATCH + 1), max).is_none());
        assert!(events(&batch(0), max).is_none());
    }

    #[test]
    fn what_the_fast_path_takes_the_full_path_takes_with_the_same_fields() {
        for (name, text, fast_expected) in table() {
            let fast = events(&text, wire::DEFAULT_MAX_MESSAGE_BYTES);
            assert_eq!(fast.is_some(), fast_expected, "{name}: fast path taken");
            let Some(fast) = fast else {
                continue;
            };
            let full = full_path(&text, wire::DEFAULT_MAX_MESSAGE_BYTES)
                .unwrap_or_else(|| panic!("{name}: full path refused"));
            assert_eq!(fast.len(), full.len(), "{name}");
            for (f, env) in fast.iter().zip(&full) {
                assert_eq!(env.kind, Kind::Event, "{name}");
                assert_eq!(f.envelope().as_ref(), Some(env), "{name}");
                assert_eq!(
                    wire::validate_game_event(&env.payload).ok(),
                    Some(f.ty),
                    "{name}"
                );
                assert_eq!(
                    f.type_seq,
                    env.payload.get("typeSeq").and_then(Value::as_u64),
                    "{name}"
                );
                let data = &env.payload["data"];
                for (got, field) in [
                    (&f.player, "player"),
                    (&f.message, "message"),
                    (&f.killer, "killer"),
                    (&f.item, "item"),
                ] {
                    assert_eq!(got.as_deref(), data[field].as_str(), "{name}: {field}");
                }
                let reserved = ["game", "id", "untrusted", "untrusted_text"]
                    .iter()
                    .any(|k| env.payload.contains_key(*k));
                assert_eq!(f.reserved_keys, reserved, "{name}");
                // The relay's forwarded text: the same value as the full path's envelope so changed.
                let mut out = env.clone();
                out.seq = None;
                out.game = Some("g".to_owned());
                out.game_seq = env.seq;
                out.instance = Some("i".to_owned());
                let old: Value = serde_json::from_str(&out.to_text()).unwrap();
                let new: Value = serde_json::from_str(&f.forward_text("g", "i")).unwrap();
                assert_eq!(new, old, "{name}: forwarded");
                // The full path's own envelope written by the relay is byte for byte what it wrote before.
                let body = forward_text(
                    &env.version,
                    &env.id,
                    env.timestamp,
                    env.source,
                    "g",
                    env.seq,
                    "i",
                    &env.payload,
                );
                assert_eq!(body, out.to_text(), "{name}: forwarded from the full path");
            }
        }
    }
}
