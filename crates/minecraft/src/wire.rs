//! The wire format of `PROTOCOL.md`: the envelope, its validation (every refusal names the field), and the
//! payloads both the relay and the MCP server read. Nothing here does I/O.

pub mod fast;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The protocol version this crate speaks. 1.1 added `chunk` (PROTOCOL.md §2.1), 1.2 `batch` (§2.2); each is
/// sent only to a peer whose own messages say that version or later, so older peers never see one.
pub const VERSION: &str = "1.2";
/// Most messages one `batch` carries (PROTOCOL.md §2.2).
pub const MAX_BATCH: usize = 1024;
/// Room a `batch` envelope takes around its messages.
pub const BATCH_OVERHEAD: usize = 192;
/// Largest message reassembled from chunks (PROTOCOL.md §2.1).
pub const MAX_ASSEMBLED_BYTES: usize = 16 << 20;
/// Most chunks one message may be cut into.
pub const MAX_CHUNKS: u64 = 4096;
/// Room a chunk's envelope takes besides its data.
const CHUNK_OVERHEAD: usize = 512;
/// The major version accepted without a warning.
pub const MAJOR: u64 = 1;
/// Default largest message the relay processes (PROTOCOL.md §2); larger ones get `SCHEMA_ERROR`.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 << 10;
/// Largest WebSocket message at all: above it the link closes (1009).
pub const HARD_MAX_FRAME_BYTES: usize = 1 << 20;
/// Longest `id`.
pub const MAX_ID_CHARS: usize = 128;
/// Longest game name, client id or instance.
pub const MAX_NAME_CHARS: usize = 64;

/// `type` of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Hello,
    Welcome,
    Command,
    Query,
    Response,
    Event,
    Ack,
    Subscribe,
    Heartbeat,
    Notice,
    Error,
    Chunk,
    Batch,
}

impl Kind {
    pub const ALL: [Kind; 13] = [
        Kind::Hello,
        Kind::Welcome,
        Kind::Command,
        Kind::Query,
        Kind::Response,
        Kind::Event,
        Kind::Ack,
        Kind::Subscribe,
        Kind::Heartbeat,
        Kind::Notice,
        Kind::Error,
        Kind::Chunk,
        Kind::Batch,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Hello => "hello",
            Kind::Welcome => "welcome",
            Kind::Command => "command",
            Kind::Query => "query",
            Kind::Response => "response",
            Kind::Event => "event",
            Kind::Ack => "ack",
            Kind::Subscribe => "subscribe",
            Kind::Heartbeat => "heartbeat",
            Kind::Notice => "notice",
            Kind::Error => "error",
            Kind::Chunk => "chunk",
            Kind::Batch => "batch",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// `source` of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Minecraft,
    Mcp,
    Relay,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Minecraft => "minecraft",
            Source::Mcp => "mcp",
            Source::Relay => "relay",
        }
    }
}

/// The event types (PROTOCOL.md §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    PlayerJoin,
    PlayerQuit,
    PlayerChat,
    PlayerDeath,
    BlockBreak,
}

impl EventType {
    pub const ALL: [EventType; 5] = [
        EventType::PlayerJoin,
        EventType::PlayerQuit,
        EventType::PlayerChat,
        EventType::PlayerDeath,
        EventType::BlockBreak,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::PlayerJoin => "player_join",
            EventType::PlayerQuit => "player_quit",
            EventType::PlayerChat => "player_chat",
            EventType::PlayerDeath => "player_death",
            EventType::BlockBreak => "block_break",
        }
    }

    pub fn parse(s: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// The `data` fields this type must carry, and whether each is a string (else a Location).
    fn required(self) -> &'static [(&'static str, Field)] {
        use Field::{Loc, Str};
        match self {
            EventType::PlayerJoin | EventType::PlayerQuit => &[("player", Str), ("uuid", Str)],
            EventType::PlayerChat => &[("player", Str), ("message", Str)],
            EventType::PlayerDeath => &[("player", Str), ("cause", Str), ("location", Loc)],
            EventType::BlockBreak => &[("player", Str), ("blockType", Str), ("location", Loc)],
        }
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Copy)]
enum Field {
    Str,
    Loc,
}

/// The Minecraft protocol's error codes (PROTOCOL.md §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Code {
    AuthFailed,
    PermissionDenied,
    InvalidCommand,
    PlayerNotFound,
    ConnectionError,
    SchemaError,
    ServerError,
    Timeout,
}

impl Code {
    pub const ALL: [Code; 8] = [
        Code::AuthFailed,
        Code::PermissionDenied,
        Code::InvalidCommand,
        Code::PlayerNotFound,
        Code::ConnectionError,
        Code::SchemaError,
        Code::ServerError,
        Code::Timeout,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Code::AuthFailed => "AUTH_FAILED",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::InvalidCommand => "INVALID_COMMAND",
            Code::PlayerNotFound => "PLAYER_NOT_FOUND",
            Code::ConnectionError => "CONNECTION_ERROR",
            Code::SchemaError => "SCHEMA_ERROR",
            Code::ServerError => "SERVER_ERROR",
            Code::Timeout => "TIMEOUT",
        }
    }

    pub fn parse(s: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The command types a game adapter implements (PROTOCOL.md §4.2), which are also the tool names.
pub const COMMANDS: [&str; 8] = [
    "execute_command",
    "send_message",
    "teleport_player",
    "give_item",
    "get_online_players",
    "get_player_info",
    "get_server_info",
    "get_world_info",
];

/// One message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub version: String,
    #[serde(rename = "type")]
    pub kind: Kind,
    pub id: String,
    pub timestamp: u64,
    pub source: Source,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub game: Option<String>,
    /// Set by the relay on an event it forwards (1.1): the game's own `seq` and `instance`, so a client can
    /// count events lost between the game and itself (a gap in one instance's numbers; PROTOCOL.md §5).
    #[serde(default, rename = "gameSeq", skip_serializing_if = "Option::is_none")]
    pub game_seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    pub payload: Map<String, Value>,
}

impl Envelope {
    /// A new message of this version, stamped now.
    pub fn new(kind: Kind, id: impl Into<String>, source: Source, payload: Value) -> Self {
        let payload = match payload {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        Self {
            version: VERSION.to_owned(),
            kind,
            id: id.into(),
            timestamp: now_ms(),
            source,
            seq: None,
            game: None,
            game_seq: None,
            instance: None,
            payload,
        }
    }

    /// An `error` about the message with `id`.
    pub fn error(id: &str, code: Code, message: impl Into<String>, details: Value) -> Self {
        Self::new(
            Kind::Error,
            id,
            Source::Relay,
            json!({"code": code.as_str(), "message": message.into(), "details": details}),
        )
    }

    pub fn to_text(&self) -> String {
        // Serialising a struct of strings, numbers and JSON values cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn str_field(&self, name: &str) -> Option<&str> {
        self.payload.get(name).and_then(Value::as_str)
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Why a message was refused: the field at fault and what was wrong with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("field `{field}`: {message}")]
pub struct SchemaError {
    pub field: String,
    pub message: String,
    /// The offending message's `id`, when it had one.
    pub id: String,
}

impl SchemaError {
    fn new(field: &str, message: impl Into<String>) -> Self {
        Self {
            field: field.to_owned(),
            message: message.into(),
            id: String::new(),
        }
    }

    /// The `error` message answering it.
    pub fn reply(&self) -> Envelope {
        Envelope::error(
            &self.id,
            Code::SchemaError,
            self.to_string(),
            json!({"field": self.field}),
        )
    }
}

/// A parsed message, and the unsupported version it claimed if it had one (PROTOCOL.md §2 "Versions").
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub envelope: Envelope,
    pub unsupported_version: Option<String>,
}

/// Parses and validates one message: envelope and payload. `max_bytes` is the size limit.
pub fn parse(text: &str, max_bytes: usize) -> Result<Parsed, SchemaError> {
    if text.len() > max_bytes {
        return Err(SchemaError::new(
            "message",
            format!(
                "{} bytes is over the limit of {max_bytes} bytes",
                text.len()
            ),
        ));
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|e| SchemaError::new("message", format!("not JSON: {e}")))?;
    parse_value(value)
}

/// Validates one message already read as JSON (a whole frame's, or one of a `batch`'s messages).
pub fn parse_value(value: Value) -> Result<Parsed, SchemaError> {
    let Value::Object(mut obj) = value else {
        return Err(SchemaError::new("message", "not a JSON object"));
    };
    let id = match obj.get("id") {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    };
    let with_id = |mut e: SchemaError| {
        e.id = id.chars().take(MAX_ID_CHARS).collect();
        e
    };
    let version = take_str(&mut obj, "version").map_err(with_id)?;
    let unsupported_version = check_version(&version).map_err(with_id)?;
    let kind_text = take_str(&mut obj, "type").map_err(with_id)?;
    let kind = Kind::parse(&kind_text).ok_or_else(|| {
        with_id(SchemaError::new(
            "type",
            format!("unknown type `{kind_text}`"),
        ))
    })?;
    let id = take_str(&mut obj, "id").map_err(with_id)?;
    if id.is_empty() || id.chars().count() > MAX_ID_CHARS {
        return Err(with_id(SchemaError::new(
            "id",
            format!("must be 1 to {MAX_ID_CHARS} characters"),
        )));
    }
    let timestamp = match obj.remove("timestamp") {
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .ok_or_else(|| SchemaError::new("timestamp", "must be a non-negative number"))
            .map_err(with_id)?,
        Some(_) => return Err(with_id(SchemaError::new("timestamp", "must be a number"))),
        None => return Err(with_id(SchemaError::new("timestamp", "is required"))),
    };
    let source_text = take_str(&mut obj, "source").map_err(with_id)?;
    let source = match source_text.as_str() {
        "minecraft" => Source::Minecraft,
        "mcp" => Source::Mcp,
        "relay" => Source::Relay,
        other => {
            return Err(with_id(SchemaError::new(
                "source",
                format!("must be minecraft, mcp or relay, not `{other}`"),
            )));
        }
    };
    let seq = match obj.remove("seq") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|n| *n >= 1)
                .ok_or_else(|| SchemaError::new("seq", "must be an integer >= 1"))
                .map_err(with_id)?,
        ),
    };
    let game = match obj.remove("game") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if valid_name(&s) => Some(s),
        Some(_) => {
            return Err(with_id(SchemaError::new(
                "game",
                format!("must be 1 to {MAX_NAME_CHARS} characters of A-Z a-z 0-9 _ . -"),
            )));
        }
    };
    let payload = match obj.remove("payload") {
        Some(Value::Object(map)) => map,
        Some(_) => return Err(with_id(SchemaError::new("payload", "must be an object"))),
        None => return Err(with_id(SchemaError::new("payload", "is required"))),
    };
    // Informational fields the relay adds to events; ignored (dropped) when malformed.
    let game_seq = obj.remove("gameSeq").and_then(|v| v.as_u64());
    let instance = match obj.remove("instance") {
        Some(Value::String(s)) if valid_name(&s) => Some(s),
        _ => None,
    };
    let envelope = Envelope {
        version,
        kind,
        id,
        timestamp,
        source,
        seq,
        game,
        game_seq,
        instance,
        payload,
    };
    validate_payload(&envelope).map_err(with_id)?;
    Ok(Parsed {
        envelope,
        unsupported_version,
    })
}

/// `Ok(None)` for a supported version, `Ok(Some(v))` for a well-formed other major, `Err` for garbage.
fn check_version(version: &str) -> Result<Option<String>, SchemaError> {
    let mut parts = version.split('.');
    let (Some(major), Some(minor), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(SchemaError::new(
            "version",
            format!("must be \"MAJOR.MINOR\" such as \"{VERSION}\", not `{version}`"),
        ));
    };
    let digits = |s: &str| !s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(major) || !digits(minor) {
        return Err(SchemaError::new(
            "version",
            format!("must be \"MAJOR.MINOR\" such as \"{VERSION}\", not `{version}`"),
        ));
    }
    if major.parse::<u64>().ok() == Some(MAJOR) {
        Ok(None)
    } else {
        Ok(Some(version.to_owned()))
    }
}

fn take_str(obj: &mut Map<String, Value>, field: &str) -> Result<String, SchemaError> {
    match obj.remove(field) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(SchemaError::new(field, "must be a string")),
        None => Err(SchemaError::new(field, "is required")),
    }
}

/// A game name, client id or instance: 1–64 characters of `[A-Za-z0-9_.-]`.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME_CHARS
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

fn validate_payload(env: &Envelope) -> Result<(), SchemaError> {
    let p = &env.payload;
    match env.kind {
        Kind::Event => {
            if env.source == Source::Minecraft && env.seq.is_none() {
                return Err(SchemaError::new("seq", "is required on events"));
            }
            validate_game_event(p).map(|_| ())
        }
        Kind::Command | Kind::Query => {
            match p.get("command") {
                Some(Value::String(c)) if !c.is_empty() => {}
                _ => {
                    return Err(SchemaError::new(
                        "payload.command",
                        "must be a non-empty string",
                    ));
                }
            }
            match p.get("args") {
                None | Some(Value::Object(_)) => Ok(()),
                Some(_) => Err(SchemaError::new("payload.args", "must be an object")),
            }
        }
        Kind::Response => match p.get("success") {
            Some(Value::Bool(true)) => Ok(()),
            Some(Value::Bool(false)) => validate_error_object(p.get("error"), "payload.error"),
            _ => Err(SchemaError::new("payload.success", "must be a boolean")),
        },
        Kind::Ack => match p.get("seq").and_then(Value::as_u64) {
            Some(_) => Ok(()),
            None => Err(SchemaError::new("payload.seq", "must be an integer >= 0")),
        },
        Kind::Subscribe => subscription(p.get("events"), "payload.events").map(|_| ()),
        Kind::Error => validate_error_object(Some(&Value::Object(p.clone())), "payload"),
        Kind::Chunk => {
            let count = p.get("count").and_then(Value::as_u64);
            let index = p.get("index").and_then(Value::as_u64);
            match (index, count, p.get("data")) {
                (_, Some(c), _) if c == 0 || c > MAX_CHUNKS => Err(SchemaError::new(
                    "payload.count",
                    format!("must be 1 to {MAX_CHUNKS}"),
                )),
                (Some(i), Some(c), Some(Value::String(_))) if i < c => Ok(()),
                (_, None, _) => Err(SchemaError::new("payload.count", "must be an integer")),
                (_, _, Some(Value::String(_))) => Err(SchemaError::new(
                    "payload.index",
                    "must be an integer below payload.count",
                )),
                _ => Err(SchemaError::new("payload.data", "must be a string")),
            }
        }
        Kind::Batch => match p.get("messages") {
            Some(Value::Array(items)) if (1..=MAX_BATCH).contains(&items.len()) => {
                match items.iter().position(|m| !m.is_object()) {
                    Some(i) => Err(SchemaError::new(
                        &format!("payload.messages[{i}]"),
                        "must be a message object",
                    )),
                    None => Ok(()),
                }
            }
            Some(Value::Array(items)) => Err(SchemaError::new(
                "payload.messages",
                format!("must hold 1 to {MAX_BATCH} messages, not {}", items.len()),
            )),
            _ => Err(SchemaError::new(
                "payload.messages",
                "must be an array of messages",
            )),
        },
        Kind::Notice => match p.get("kind") {
            Some(Value::String(_)) => Ok(()),
            _ => Err(SchemaError::new("payload.kind", "must be a string")),
        },
        Kind::Welcome => match (p.get("role"), p.get("epoch")) {
            (Some(Value::String(_)), Some(Value::String(_))) => Ok(()),
            _ => Err(SchemaError::new(
                "payload.role",
                "role and epoch must be strings",
            )),
        },
        // Hello's fields depend on the role, which only the relay knows: checked there.
        Kind::Hello | Kind::Heartbeat => Ok(()),
    }
}

fn validate_error_object(v: Option<&Value>, field: &str) -> Result<(), SchemaError> {
    let Some(Value::Object(e)) = v else {
        return Err(SchemaError::new(field, "must be an object {code, message}"));
    };
    match e.get("code").and_then(Value::as_str).and_then(Code::parse) {
        Some(_) => {}
        None => {
            return Err(SchemaError::new(
                &format!("{field}.code"),
                "must be one of AUTH_FAILED, PERMISSION_DENIED, INVALID_COMMAND, PLAYER_NOT_FOUND, \
                 CONNECTION_ERROR, SCHEMA_ERROR, SERVER_ERROR, TIMEOUT",
            ));
        }
    }
    match e.get("message") {
        Some(Value::String(_)) => Ok(()),
        _ => Err(SchemaError::new(
            &format!("{field}.message"),
            "must be a string",
        )),
    }
}

/// Checks a `GameEvent` (`eventType`, `timestamp`, `data` with its type's fields).
pub fn validate_game_event(p: &Map<String, Value>) -> Result<EventType, SchemaError> {
    let ty = p
        .get("eventType")
        .and_then(Value::as_str)
        .and_then(EventType::parse)
        .ok_or_else(|| {
            SchemaError::new(
                "payload.eventType",
                "must be one of player_join, player_quit, player_chat, player_death, block_break",
            )
        })?;
    if !p.get("timestamp").is_some_and(Value::is_number) {
        return Err(SchemaError::new("payload.timestamp", "must be a number"));
    }
    let Some(Value::Object(data)) = p.get("data") else {
        return Err(SchemaError::new("payload.data", "must be an object"));
    };
    for (name, kind) in ty.required() {
        let field = format!("payload.data.{name}");
        match (kind, data.get(*name)) {
            (Field::Str, Some(Value::String(_))) => {}
            (Field::Str, _) => return Err(SchemaError::new(&field, "must be a string")),
            (Field::Loc, Some(loc)) => validate_location(loc, &field)?,
            (Field::Loc, None) => return Err(SchemaError::new(&field, "is required")),
        }
    }
    if ty == EventType::PlayerDeath
        && data
            .get("killer")
            .is_some_and(|k| !k.is_string() && !k.is_null())
    {
        return Err(SchemaError::new("payload.data.killer", "must be a string"));
    }
    Ok(ty)
}

fn validate_location(v: &Value, field: &str) -> Result<(), SchemaError> {
    let Value::Object(loc) = v else {
        return Err(SchemaError::new(
            field,
            "must be a Location {world, x, y, z}",
        ));
    };
    if !loc.get("world").is_some_and(Value::is_string) {
        return Err(SchemaError::new(
            &format!("{field}.world"),
            "must be a string",
        ));
    }
    for axis in ["x", "y", "z"] {
        if !loc.get(axis).is_some_and(Value::is_number) {
            return Err(SchemaError::new(
                &format!("{field}.{axis}"),
                "must be a number",
            ));
        }
    }
    Ok(())
}

/// A subscription list: event types, or `*` / absent for all.
pub fn subscription(v: Option<&Value>, field: &str) -> Result<Vec<EventType>, SchemaError> {
    let Some(v) = v else {
        return Ok(EventType::ALL.to_vec());
    };
    let Value::Array(items) = v else {
        return Err(SchemaError::new(field, "must be an array of event types"));
    };
    let mut out = Vec::new();
    for item in items {
        match item.as_str() {
            Some("*") => return Ok(EventType::ALL.to_vec()),
            Some(s) => match EventType::parse(s) {
                Some(t) if !out.contains(&t) => out.push(t),
                Some(_) => {}
                None => {
                    return Err(SchemaError::new(field, format!("unknown event type `{s}`")));
                }
            },
            None => return Err(SchemaError::new(field, "must be an array of strings")),
        }
    }
    Ok(out)
}

/// Whether a peer whose message carried `version` reads `chunk` (protocol 1.1 or later).
pub fn speaks_chunks(version: &str) -> bool {
    at_least(version, 1)
}

/// Whether a peer whose message carried `version` reads `batch` (protocol 1.2 or later).
pub fn speaks_batches(version: &str) -> bool {
    at_least(version, 2)
}

/// Whether `version` is 1.`minor` or later.
fn at_least(version: &str, minor_wanted: u64) -> bool {
    let mut parts = version.split('.');
    match (
        parts.next().and_then(|m| m.parse::<u64>().ok()),
        parts.next().and_then(|m| m.parse::<u64>().ok()),
    ) {
        (Some(major), Some(minor)) => major > 1 || (major == 1 && minor >= minor_wanted),
        _ => false,
    }
}

/// The messages of a `batch` (PROTOCOL.md §2.2), each validated as if it had come in a frame of its own; a
/// refusal names the message's place (`payload.messages[3].seq`). The rest of the batch stands.
pub fn unbatch(batch: &mut Envelope) -> Vec<Result<Parsed, SchemaError>> {
    let Some(Value::Array(items)) = batch.payload.remove("messages") else {
        return Vec::new();
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let place = |mut e: SchemaError| {
                e.field = format!("payload.messages[{i}].{}", e.field);
                e
            };
            let parsed = parse_value(item).map_err(place)?;
            if matches!(
                parsed.envelope.kind,
                Kind::Hello | Kind::Welcome | Kind::Chunk | Kind::Batch
            ) {
                let mut e = SchemaError::new(
                    "type",
                    format!(
                        "{} may not travel in a batch",
                        parsed.envelope.kind.as_str()
                    ),
                );
                e.id = parsed.envelope.id;
                return Err(place(e));
            }
            Ok(parsed)
        })
        .collect()
}

/// Packs whole messages (JSON object texts) into as few frames as fit `max_bytes` each (PROTOCOL.md §2.2): a
/// `batch` from `source` for two or more, a message alone as itself. A message too big to share a frame goes
/// alone (the caller chunks it if need be).
pub fn pack(texts: Vec<String>, source: Source, max_bytes: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut group: Vec<String> = Vec::new();
    let mut bytes = BATCH_OVERHEAD;
    let flush = |group: &mut Vec<String>, out: &mut Vec<String>| match group.len() {
        0 => {}
        1 => out.append(group),
        _ => {
            out.push(batch_text(source, group));
            group.clear();
        }
    };
    for text in texts {
        if text.len() + BATCH_OVERHEAD + 1 > max_bytes {
            flush(&mut group, &mut out);
            bytes = BATCH_OVERHEAD;
            out.push(text);
            continue;
        }
        if group.len() >= MAX_BATCH || bytes + text.len() + 1 > max_bytes {
            flush(&mut group, &mut out);
            bytes = BATCH_OVERHEAD;
        }
        bytes += text.len() + 1;
        group.push(text);
    }
    flush(&mut group, &mut out);
    out
}

/// A `batch` message holding `texts` (each a whole message's JSON object), written without re-encoding them.
pub fn batch_text(source: Source, texts: &[String]) -> String {
    let body: usize = texts.iter().map(|t| t.len() + 1).sum();
    batch_with(source, body + BATCH_OVERHEAD, |out| {
        for (i, t) in texts.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(t);
        }
    })
}

/// A `batch` message whose messages `write` appends (whole JSON objects, comma-separated), in a buffer of
/// `capacity` bytes: a writer with its messages in other shapes than strings writes them in place.
pub fn batch_with(source: Source, capacity: usize, write: impl FnOnce(&mut String)) -> String {
    let mut out = String::with_capacity(capacity);
    out.push_str("{\"version\":\"");
    out.push_str(VERSION);
    out.push_str("\",\"type\":\"batch\",\"id\":\"b-");
    out.push_str(&format!("{:x}", rand::random::<u64>()));
    out.push_str("\",\"timestamp\":");
    out.push_str(&now_ms().to_string());
    out.push_str(",\"source\":\"");
    out.push_str(source.as_str());
    out.push_str("\",\"payload\":{\"messages\":[");
    write(&mut out);
    out.push_str("]}}");
    out
}

/// How many bytes `c` takes inside a JSON string.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// Cuts the message `text` (whose `id` is `id`) into `chunk` messages of at most `max_bytes` each
/// (PROTOCOL.md §2.1). A text that already fits comes back as it is, alone.
pub fn split(
    text: &str,
    id: &str,
    source: Source,
    max_bytes: usize,
) -> Result<Vec<String>, String> {
    if text.len() <= max_bytes {
        return Ok(vec![text.to_owned()]);
    }
    if text.len() > MAX_ASSEMBLED_BYTES {
        return Err(format!(
            "message of {} bytes is over the protocol's limit of {MAX_ASSEMBLED_BYTES} bytes even in chunks",
            text.len()
        ));
    }
    let budget = max_bytes
        .saturating_sub(CHUNK_OVERHEAD + id.len() * 2)
        .max(64);
    let mut parts: Vec<&str> = Vec::new();
    let (mut start, mut size) = (0, 0);
    for (i, c) in text.char_indices() {
        let n = escaped_len(c);
        if size + n > budget && i > start {
            parts.push(&text[start..i]);
            start = i;
            size = 0;
        }
        size += n;
    }
    parts.push(&text[start..]);
    let count = parts.len() as u64;
    if count > MAX_CHUNKS {
        return Err(format!(
            "message of {} bytes needs {count} chunks of {max_bytes} bytes, over {MAX_CHUNKS}",
            text.len()
        ));
    }
    Ok(parts
        .into_iter()
        .enumerate()
        .map(|(i, data)| {
            Envelope::new(
                Kind::Chunk,
                id,
                source,
                json!({"index": i, "count": count, "data": data}),
            )
            .to_text()
        })
        .collect())
}

/// Bytes of chunked messages being put together on every link of a relay at once, beside the bound on each
/// ([`MAX_ASSEMBLED_BYTES`]): without it, each game link could hold an unfinished 16 MiB message, and 256
/// links gigabytes.
#[derive(Debug)]
pub struct AssemblyBudget {
    held: AtomicUsize,
    max: usize,
}

impl AssemblyBudget {
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            held: AtomicUsize::new(0),
            max,
        })
    }

    /// Bytes held now by unfinished messages.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    pub fn max(&self) -> usize {
        self.max
    }

    fn take(&self, bytes: usize) -> bool {
        self.held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                held.checked_add(bytes).filter(|total| *total <= self.max)
            })
            .is_ok()
    }

    fn give(&self, bytes: usize) {
        let _ = self
            .held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                Some(held.saturating_sub(bytes))
            });
    }
}

/// Puts chunked messages back together (PROTOCOL.md §2.1): chunks of one message arrive in order, one
/// message at a time per sender; the whole is bounded by [`MAX_ASSEMBLED_BYTES`], and with a budget
/// ([`Assembler::with_budget`]) by what every assembler sharing it holds.
#[derive(Debug, Default)]
pub struct Assembler {
    current: Option<(String, u64, u64, String)>,
    budget: Option<Arc<AssemblyBudget>>,
}

impl Assembler {
    /// An assembler whose unfinished message counts against `budget`, given back when the message is done,
    /// refused or dropped.
    pub fn with_budget(budget: Arc<AssemblyBudget>) -> Self {
        Self {
            current: None,
            budget: Some(budget),
        }
    }

    /// Drops the unfinished message, giving its bytes back; its text.
    fn finish(&mut self) -> Option<String> {
        let (_, _, _, text) = self.current.take()?;
        if let Some(budget) = &self.budget {
            budget.give(text.len());
        }
        Some(text)
    }

    /// Takes one `chunk`; returns the whole message's text once its last chunk is in.
    pub fn push(&mut self, chunk: &Envelope) -> Result<Option<String>, SchemaError> {
        let p = &chunk.payload;
        let index = p.get("index").and_then(Value::as_u64).unwrap_or(0);
        let count = p.get("count").and_then(Value::as_u64).unwrap_or(1);
        let data = p.get("data").and_then(Value::as_str).unwrap_or_default();
        let fail = |field: &str, message: String| {
            let mut e = SchemaError::new(field, message);
            e.id = chunk.id.clone();
            e
        };
        if index == 0 {
            self.finish();
            self.current = Some((chunk.id.clone(), count, 0, String::new()));
        }
        let Some((id, want, next, text)) = self.current.as_mut() else {
            return Err(fail(
                "payload.index",
                format!("chunk {index} of `{}` without its chunk 0", chunk.id),
            ));
        };
        if *id != chunk.id || *want != count || *next != index {
            let e = fail(
                "payload.index",
                format!(
                    "chunk {index}/{count} of `{}` out of order (expected {next}/{want} of `{id}`)",
                    chunk.id
                ),
            );
            self.finish();
            return Err(e);
        }
        if text.len() + data.len() > MAX_ASSEMBLED_BYTES {
            self.finish();
            return Err(fail(
                "payload.data",
                format!("chunked message over the limit of {MAX_ASSEMBLED_BYTES} bytes"),
            ));
        }
        if let Some(budget) = &self.budget
            && !budget.take(data.len())
        {
            let (held, max) = (budget.held(), budget.max());
            self.finish();
            return Err(fail(
                "payload.data",
                format!(
                    "chunked messages being put together on this relay hold {held} bytes, at most {max} \
                     at once (--max-assembling-bytes / MINECRAFT_MAX_ASSEMBLING_BYTES): this message is \
                     dropped; send it again later"
                ),
            ));
        }
        text.push_str(data);
        *next += 1;
        if *next < *want {
            return Ok(None);
        }
        Ok(self.finish())
    }
}

impl Drop for Assembler {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod assembler_budget {
    use super::*;

    fn chunk(id: &str, index: u64, count: u64, data: &str) -> Envelope {
        let text = json!({"version": "1.1", "type": "chunk", "id": id, "timestamp": 1, "source": "minecraft",
            "payload": {"index": index, "count": count, "data": data}})
        .to_string();
        parse(&text, MAX_ASSEMBLED_BYTES).unwrap().envelope
    }

    /// What a message held comes back when it is whole, when it is refused, when a new one starts in its
    /// place, and when its assembler goes.
    #[test]
    fn every_way_a_message_ends_gives_its_bytes_back() {
        let budget = AssemblyBudget::new(10);
        let mut a = Assembler::with_budget(Arc::clone(&budget));
        let mut b = Assembler::with_budget(Arc::clone(&budget));
        assert_eq!(a.push(&chunk("m", 0, 2, "aaaa")).unwrap(), None);
        assert_eq!(budget.held(), 4);
        assert_eq!(
            a.push(&chunk("m", 1, 2, "bb")).unwrap().as_deref(),
            Some("aaaabb")
        );
        assert_eq!(budget.held(), 0, "whole");

        assert_eq!(a.push(&chunk("n", 0, 3, "aaaaaa")).unwrap(), None);
        let refused = b.push(&chunk("o", 0, 2, "bbbbb")).unwrap_err();
        assert!(
            refused.message.contains("at most 10"),
            "{}",
            refused.message
        );
        assert_eq!(budget.held(), 6, "the refused chunk took nothing");
        assert!(a.push(&chunk("n", 2, 3, "x")).is_err(), "out of order");
        assert_eq!(budget.held(), 0, "refused");

        assert_eq!(a.push(&chunk("p", 0, 2, "aaa")).unwrap(), None);
        assert_eq!(a.push(&chunk("q", 0, 2, "aa")).unwrap(), None);
        assert_eq!(budget.held(), 2, "replaced by a new message");
        drop(a);
        assert_eq!(budget.held(), 0, "dropped with its link");
    }
}
