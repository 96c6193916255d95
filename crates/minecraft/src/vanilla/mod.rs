//! Vanilla mode: `mcp-bridges minecraft --minecraft-rcon host:port --minecraft-rcon-password … --minecraft-server-log path`. No mod and no
//! relay: the tools' commands (PROTOCOL.md §4.2 command types) are answered here over the server's RCON
//! port, and events come from its log file. The tools are the relay mode's (`crate::tools`), which call
//! [`Vanilla::call`] instead of the relay when `Ctx::vanilla` is set; what the game cannot tell over RCON
//! answers `[UNSUPPORTED_IN_VANILLA]`.

pub mod answers;
pub mod follow;
pub mod patterns;
pub mod rcon;

use crate::client::{LinkSettings, RelayLink};
use crate::models::{CommandResult, ItemStack, Location, OnlinePlayers, PlayerInfo, ServerInfo};
use crate::tools::args::MAX_COMMAND_BYTES;
use crate::wire::{self, Code, EventType};
use bridge_core::config;
use bridge_core::events::EventHub;
use bridge_core::{BridgeEnv, BridgeError, NoArgs, ToolError, ToolSpec};
use follow::{FollowStatus, Follower};
use patterns::Kind;
use rcon::{Rcon, RconError, RconSettings, RconStatus};
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The one game of vanilla mode, as `game` and in events.
pub const GAME: &str = "vanilla";
/// The error code of a tool the game cannot serve over RCON and its log.
pub const UNSUPPORTED: &str = "UNSUPPORTED_IN_VANILLA";
/// The stream vanilla mode adds: advancements are in the log, not in the relay protocol's five types.
pub const ADVANCEMENT_STREAM: &str = "player_advancement";
/// Commands `execute_command` may run unless `--minecraft-rcon-commands` says otherwise: play, not administration.
pub const DEFAULT_COMMANDS: &str =
    "say,tell,msg,tellraw,tp,teleport,give,list,time,weather,data get,tick query,seed";
/// How often the log is looked at.
const LOG_POLL: Duration = Duration::from_millis(200);
/// Player uuids remembered from `UUID of player` lines.
const UUIDS: usize = 4096;
const STREAM_BYTES: usize = 16 << 20;

const INSTRUCTIONS: &str = "Tools for a vanilla (or Paper/Spigot) Minecraft server over its RCON port and its \
log file: run commands with their output, chat, teleport, give items, and read players and the server. Game \
events (player_join, player_quit, player_chat, player_death, player_advancement) are event streams read from \
the server log: subscribe to minecraft://events/<type>, or call poll_events. get_world_info and block_break \
events need the bridge mod and answer [UNSUPPORTED_IN_VANILLA] here. Errors start with a code \
([PLAYER_NOT_FOUND], [INVALID_COMMAND], ...); `status` shows the RCON link and the log.";

/// Vanilla mode's flags (part of `mcp-bridges minecraft`).
#[derive(Clone, clap::Args)]
#[command(next_help_heading = "Minecraft vanilla mode (RCON and the server log)")]
pub struct VanillaArgs {
    /// Vanilla mode: run commands over this server's RCON port (`host:port`; server.properties
    /// enable-rcon=true, rcon.port, 25575 by default) instead of a relay and the mod.
    #[arg(
        id = "mc_rcon",
        long = "minecraft-rcon",
        alias = "rcon",
        env = "MINECRAFT_RCON",
        value_name = "HOST:PORT"
    )]
    pub rcon: Option<String>,

    /// The RCON password (rcon.password in server.properties). Prefer the variable or --minecraft-rcon-password-file:
    /// a flag shows in the process list.
    #[arg(id = "mc_rcon_password", long = "minecraft-rcon-password", alias = "rcon-password", env = "MINECRAFT_RCON_PASSWORD",
          hide_env_values = true, value_parser = config::secret())]
    pub rcon_password: Option<String>,

    /// A file holding the RCON password (one line).
    #[arg(
        id = "mc_rcon_password_file",
        long = "minecraft-rcon-password-file",
        alias = "rcon-password-file",
        env = "MINECRAFT_RCON_PASSWORD_FILE",
        value_name = "FILE"
    )]
    pub rcon_password_file: Option<PathBuf>,

    /// The server's log to read events from (logs/latest.log), followed across rotation and truncation.
    #[arg(
        id = "mc_server_log",
        long = "minecraft-server-log",
        alias = "server-log",
        env = "MINECRAFT_SERVER_LOG",
        value_name = "FILE"
    )]
    pub server_log: Option<PathBuf>,

    /// Commands execute_command may run in vanilla mode, comma-separated: each a command's first words
    /// (`data get` allows `data get ...` only), or `*` for every command. RCON runs them as the server
    /// console, with every permission.
    #[arg(id = "mc_rcon_commands", long = "minecraft-rcon-commands", alias = "rcon-commands", env = "MINECRAFT_RCON_COMMANDS",
          default_value = DEFAULT_COMMANDS)]
    pub rcon_commands: String,

    /// Largest RCON reply assembled from its packets, in bytes.
    #[arg(id = "mc_rcon_max_response", long = "minecraft-rcon-max-response", alias = "rcon-max-response", env = "MINECRAFT_RCON_MAX_RESPONSE",
          default_value = "1048576", value_parser = config::ranged(4096usize, 64 << 20))]
    pub rcon_max_response: usize,
}

impl std::fmt::Debug for VanillaArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VanillaArgs")
            .field("rcon", &self.rcon)
            .field(
                "rcon_password",
                &self.rcon_password.as_ref().map(|_| "<redacted>"),
            )
            .field("rcon_password_file", &self.rcon_password_file)
            .field("server_log", &self.server_log)
            .field("rcon_commands", &self.rcon_commands)
            .finish()
    }
}

impl VanillaArgs {
    /// Whether vanilla mode was asked for.
    pub fn enabled(&self) -> bool {
        self.rcon.is_some() || self.server_log.is_some()
    }

    /// The password from the flag, the variable or the file; errors name the flag.
    pub fn password(&self) -> Result<String, BridgeError> {
        let pw = match (&self.rcon_password, &self.rcon_password_file) {
            (Some(_), Some(_)) => {
                return Err(
                    "give the RCON password once: --minecraft-rcon-password (MINECRAFT_RCON_PASSWORD) or \
                            --minecraft-rcon-password-file (MINECRAFT_RCON_PASSWORD_FILE), not both"
                        .into(),
                );
            }
            (Some(pw), None) => pw.clone(),
            (None, Some(file)) => {
                let text = std::fs::read_to_string(file).map_err(|e| {
                    format!(
                        "--minecraft-rcon-password-file (MINECRAFT_RCON_PASSWORD_FILE) {}: {e}",
                        file.display()
                    )
                })?;
                let pw = text.trim_end_matches(['\n', '\r']).to_owned();
                if pw.trim().is_empty() {
                    return Err(format!(
                        "--minecraft-rcon-password-file (MINECRAFT_RCON_PASSWORD_FILE) {} is empty",
                        file.display()
                    )
                    .into());
                }
                pw
            }
            (None, None) => {
                return Err("--minecraft-rcon needs --minecraft-rcon-password (MINECRAFT_RCON_PASSWORD) or --minecraft-rcon-password-file \
                            (MINECRAFT_RCON_PASSWORD_FILE): rcon.password in server.properties"
                    .into());
            }
        };
        if pw.len() > rcon::MAX_REQUEST_BYTES || pw.contains('\0') {
            return Err(format!(
                "--minecraft-rcon-password (MINECRAFT_RCON_PASSWORD) must be at most {} bytes without NUL: one RCON packet",
                rcon::MAX_REQUEST_BYTES
            )
            .into());
        }
        Ok(pw)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Which commands `execute_command` may run.
#[derive(Debug, Clone)]
pub struct Allowed {
    all: bool,
    prefixes: Vec<Vec<String>>,
}

impl Allowed {
    pub fn parse(list: &str) -> Self {
        let mut all = false;
        let mut prefixes = Vec::new();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "*" {
                all = true;
            } else {
                prefixes.push(words(item));
            }
        }
        Allowed { all, prefixes }
    }

    pub fn allows(&self, command: &str) -> bool {
        if self.all {
            return true;
        }
        let w = words(command);
        self.prefixes
            .iter()
            .any(|p| w.len() >= p.len() && w[..p.len()] == p[..])
    }
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace()
        .enumerate()
        .map(|(i, w)| {
            let w = w.to_ascii_lowercase();
            if i == 0 {
                w.strip_prefix("minecraft:").map(str::to_owned).unwrap_or(w)
            } else {
                w
            }
        })
        .collect()
}

/// What `status` shows in vanilla mode.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct VanillaStatus {
    pub mode: String,
    pub game: String,
    pub rcon: RconStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<FollowStatus>,
    pub events_published: u64,
    /// The server version named in its log, if seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// What to do next.
    pub advice: String,
}

struct Shared {
    hub: EventHub,
    subscriptions: HashSet<&'static str>,
    log: Mutex<Option<FollowStatus>>,
    version: Mutex<Option<String>>,
    uuids: Mutex<HashMap<String, String>>,
    published: Mutex<u64>,
}

/// The vanilla backend: RCON for commands, the log for events. Cheap to clone.
#[derive(Clone)]
pub struct Vanilla {
    rcon: Rcon,
    allowed: Arc<Allowed>,
    shared: Arc<Shared>,
}

impl Vanilla {
    /// Starts RCON and, with a path, the log follower; both stop with `stop`.
    pub fn start(
        rcon: RconSettings,
        allowed: Allowed,
        server_log: Option<PathBuf>,
        hub: EventHub,
        subscriptions: &[EventType],
        stop: CancellationToken,
    ) -> Vanilla {
        let mut subs: HashSet<&'static str> = subscriptions.iter().map(|t| t.as_str()).collect();
        if subscriptions.len() == EventType::ALL.len() {
            subs.insert(ADVANCEMENT_STREAM);
        }
        let shared = Arc::new(Shared {
            hub,
            subscriptions: subs,
            log: Mutex::new(None),
            version: Mutex::new(None),
            uuids: Mutex::new(HashMap::new()),
            published: Mutex::new(0),
        });
        let rcon = Rcon::start(rcon, stop.clone());
        let me = Vanilla {
            rcon,
            allowed: Arc::new(allowed),
            shared,
        };
        if let Some(path) = server_log {
            if let Some(v) = follow::scan_version(&path) {
                *lock(&me.shared.version) = Some(v);
            }
            let follower = Follower::new(path, follow::DEFAULT_MAX_LINE_BYTES).start_at_end();
            tokio::spawn(me.clone().follow(follower, stop));
        }
        me
    }

    pub fn rcon(&self) -> &Rcon {
        &self.rcon
    }

    async fn follow(self, mut follower: Follower, stop: CancellationToken) {
        let mut tick = tokio::time::interval(LOG_POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            let polled = tokio::task::spawn_blocking(move || {
                let lines = follower.poll();
                (follower, lines)
            })
            .await;
            let Ok((f, lines)) = polled else {
                tracing::error!("the server log reader panicked; events stop");
                break;
            };
            follower = f;
            *lock(&self.shared.log) = Some(follower.status.clone());
            for line in lines {
                self.on_line(&line);
            }
        }
    }

    /// One log line: an event on its stream when the pattern table knows it.
    pub fn on_line(&self, line: &str) {
        let Some(m) = patterns::match_line(line) else {
            return;
        };
        let player = m.get("player").unwrap_or_default().to_owned();
        let uuid = || lock(&self.shared.uuids).get(&player).cloned();
        let (stream, data) = match m.kind {
            Kind::Uuid => {
                let mut uuids = lock(&self.shared.uuids);
                if uuids.len() >= UUIDS {
                    uuids.clear();
                }
                uuids.insert(player, m.get("uuid").unwrap_or_default().to_owned());
                return;
            }
            Kind::Version => {
                *lock(&self.shared.version) = m.get("version").map(str::to_owned);
                return;
            }
            Kind::Chat => (
                EventType::PlayerChat.as_str(),
                json!({"player": player, "message": m.get("message")}),
            ),
            Kind::Join => {
                let mut d = json!({"player": player});
                if let Some(u) = uuid() {
                    d["uuid"] = json!(u);
                }
                if let Some(old) = m.get("old") {
                    d["formerName"] = json!(old);
                }
                (EventType::PlayerJoin.as_str(), d)
            }
            Kind::Leave => {
                let mut d = json!({"player": player});
                if let Some(u) = uuid() {
                    d["uuid"] = json!(u);
                }
                (EventType::PlayerQuit.as_str(), d)
            }
            Kind::Death => {
                let message = patterns::message_of(line).unwrap_or_default();
                let mut d = json!({"player": player, "cause": m.tag, "message": message});
                if let Some(k) = m.get("killer") {
                    d["killer"] = json!(k);
                }
                if let Some(i) = m.get("item") {
                    d["item"] = json!(i);
                }
                (EventType::PlayerDeath.as_str(), d)
            }
            Kind::Advancement => (
                ADVANCEMENT_STREAM,
                json!({"player": player, "advancement": m.get("advancement"), "frame": m.tag}),
            ),
        };
        self.publish(stream, data);
    }

    fn publish(&self, stream: &'static str, data: Value) {
        if !self.shared.subscriptions.contains(stream) {
            return;
        }
        let Some(s) = self.shared.hub.get(stream) else {
            return;
        };
        let id = {
            let mut n = lock(&self.shared.published);
            *n += 1;
            *n
        };
        let mut event = Map::new();
        event.insert("eventType".into(), json!(stream));
        event.insert("timestamp".into(), json!(wire::now_ms()));
        event.insert("data".into(), data);
        event.insert("game".into(), json!(GAME));
        event.insert("id".into(), json!(format!("log-{id}")));
        event.insert("source".into(), json!("server_log"));
        crate::client::mark_untrusted(&mut event);
        s.publish(Value::Object(event));
    }

    pub fn status(&self) -> VanillaStatus {
        let rcon = self.rcon.status();
        let log = lock(&self.shared.log).clone();
        let advice = if !rcon.connected {
            format!(
                "Not connected to RCON at {} (attempts: {}, last error: {}). Check the server runs with \
                 enable-rcon=true and this rcon.port, and the password; this bridge keeps retrying.",
                rcon.addr,
                rcon.reconnect_attempts,
                rcon.last_error.as_deref().unwrap_or("none")
            )
        } else {
            match &log {
                Some(l) if !l.following => format!(
                    "RCON is connected, but the server log is not readable ({}): events wait for it.",
                    l.last_error.as_deref().unwrap_or("not found yet")
                ),
                _ => format!("Ready: game `{GAME}` answers over RCON."),
            }
        };
        VanillaStatus {
            mode: "vanilla".into(),
            game: GAME.into(),
            rcon,
            log,
            events_published: *lock(&self.shared.published),
            version: lock(&self.shared.version).clone(),
            advice,
        }
    }

    async fn exec(&self, command: &str) -> Result<String, ToolError> {
        self.rcon
            .exec(command)
            .await
            .map(|s| answers::strip_colors(&s))
            .map_err(|e| rcon_error(&e))
    }

    /// One PROTOCOL.md §4.2 command answered over RCON: the `data` a game adapter would send.
    pub async fn call(
        &self,
        command: &str,
        args: Map<String, Value>,
        game: Option<String>,
    ) -> Result<Value, ToolError> {
        if let Some(g) = game.filter(|g| g != GAME) {
            return Err(ToolError::disconnected(format!(
                "no game named `{g}`: vanilla mode has one, `{GAME}`"
            ))
            .with_hint("omit `game`, or pass `vanilla`")
            .with_details(json!({"game": g}))
            .with_code_name(Code::ConnectionError.as_str()));
        }
        check_args(&args)?;
        let s = |k: &str| {
            args.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let n = |k: &str| args.get(k).and_then(Value::as_f64).unwrap_or_default();
        let out = match command {
            "execute_command" => self.execute(&s("command")).await?,
            "send_message" => {
                let text = serde_json::to_string(&s("message")).unwrap_or_default();
                let target = args.get("target").and_then(Value::as_str);
                let who = target.unwrap_or("@a");
                let answer = self.exec(&format!("tellraw {who} {text}")).await?;
                not_found(&answer, target)?;
                to_value(result(&answer, Some("sent".into())))
            }
            "teleport_player" => {
                let player = s("player");
                let (x, y, z) = (n("x"), n("y"), n("z"));
                let tp = format!("tp {player} {x} {y} {z}");
                let cmd = match args.get("world").and_then(Value::as_str) {
                    Some(w) => format!("execute in {w} run {tp}"),
                    None => tp,
                };
                let answer = self.exec(&cmd).await?;
                not_found(&answer, Some(&player))?;
                let mut r = result(&answer, None);
                if r.success {
                    r.location = self.location(&player).await.ok();
                }
                to_value(r)
            }
            "give_item" => {
                let answer = self
                    .exec(&format!(
                        "give {} {} {}",
                        s("player"),
                        s("item"),
                        n("quantity") as u64
                    ))
                    .await?;
                not_found(&answer, Some(&s("player")))?;
                to_value(result(&answer, None))
            }
            "get_online_players" => {
                let (_, _, players) = self.list().await?;
                to_value(OnlinePlayers {
                    count: players.len(),
                    players,
                })
            }
            "get_player_info" => to_value(self.player_info(&s("player")).await?),
            "get_server_info" => to_value(self.server_info().await?),
            "get_world_info" => {
                return Err(unsupported(
                    "get_world_info needs the bridge mod: over RCON a block is one `execute if block` round trip, \
                     and a radius-16 cube is 35 937 of them",
                ));
            }
            other => return Err(unsupported(&format!("`{other}` has no RCON form"))),
        };
        Ok(out)
    }

    async fn execute(&self, command: &str) -> Result<Value, ToolError> {
        if command.len() > MAX_COMMAND_BYTES.min(rcon::MAX_REQUEST_BYTES) {
            return Err(rcon_error(&RconError::RequestTooLarge {
                bytes: command.len(),
                limit: rcon::MAX_REQUEST_BYTES,
            }));
        }
        if !self.allowed.allows(command) {
            return Err(ToolError::new(
                bridge_core::ErrorCode::InvalidArgument,
                format!("`{}` is not among the commands vanilla mode may run", words(command).first().cloned().unwrap_or_default()),
            )
            .with_hint("the operator allows commands with --minecraft-rcon-commands (MINECRAFT_RCON_COMMANDS); RCON runs them with every permission")
            .with_details(json!({"reason": "not_allowed", "flag": "--minecraft-rcon-commands"}))
            .with_code_name(Code::InvalidCommand.as_str()));
        }
        let answer = self.exec(command).await?;
        Ok(to_value(result(&answer, None)))
    }

    async fn list(&self) -> Result<(u32, u32, Vec<String>), ToolError> {
        let answer = self.exec("list").await?;
        answers::parse_list(&answer).ok_or_else(|| schema("list", &answer))
    }

    async fn data(&self, player: &str, path: &str) -> Result<String, ToolError> {
        let answer = self
            .exec(&format!("data get entity {player} {path}"))
            .await?;
        not_found(&answer, Some(player))?;
        answers::entity_data(&answer)
            .map(str::to_owned)
            .ok_or_else(|| schema(&format!("data get entity {player} {path}"), &answer))
    }

    async fn location(&self, player: &str) -> Result<Location, ToolError> {
        let pos = self.data(player, "Pos").await?;
        let (x, y, z) = answers::snbt_pos(&pos).ok_or_else(|| schema("Pos", &pos))?;
        let world = answers::snbt_string(&self.data(player, "Dimension").await?);
        Ok(Location { world, x, y, z })
    }

    async fn player_info(&self, player: &str) -> Result<PlayerInfo, ToolError> {
        let health = self.data(player, "Health").await?;
        let health = answers::snbt_number(&health).ok_or_else(|| schema("Health", &health))?;
        let food = self.data(player, "foodLevel").await?;
        let food_level = answers::snbt_number(&food).ok_or_else(|| schema("foodLevel", &food))?;
        let location = self.location(player).await?;
        let mode = self.data(player, "playerGameType").await?;
        let game_mode = answers::game_mode(answers::snbt_number(&mode).unwrap_or(-1.0)).to_owned();
        let uuid = self.data(player, "UUID").await?;
        let uuid = answers::snbt_uuid(&uuid).unwrap_or_default();
        let inv = self.data(player, "Inventory").await?;
        let inventory: Vec<ItemStack> =
            answers::snbt_inventory(&inv).ok_or_else(|| schema("Inventory", &inv))?;
        Ok(PlayerInfo {
            name: player.to_owned(),
            uuid,
            health,
            food_level,
            location,
            game_mode,
            inventory,
        })
    }

    async fn server_info(&self) -> Result<ServerInfo, ToolError> {
        let (online, max, _) = self.list().await?;
        let time = self.exec("time query daytime").await?;
        let time_of_day =
            answers::parse_time(&time).ok_or_else(|| schema("time query daytime", &time))?;
        let mut tps = answers::parse_tps(&self.exec("tick query").await?);
        if tps.is_none() {
            // Before 1.20.3 there is no `tick`; Paper and Spigot have `tps`.
            tps = answers::parse_tps(&self.exec("tps").await?);
        }
        let weather = self.weather().await;
        Ok(ServerInfo {
            version: lock(&self.shared.version)
                .clone()
                .unwrap_or_else(|| "unknown".into()),
            online_players: online,
            max_players: max,
            time_of_day,
            weather,
            // -1: the server has no command that tells (vanilla before 1.20.3).
            tps: tps.unwrap_or(-1.0),
        })
    }

    /// There is no weather query command; a `weather_check` predicate (1.20.2+) tells.
    async fn weather(&self) -> String {
        let check = |what: &'static str| async move {
            let cmd = format!(
                "execute if predicate {{condition:\"minecraft:weather_check\",{what}:true}}"
            );
            self.exec(&cmd)
                .await
                .ok()
                .map(|a| a.starts_with("Test passed"))
        };
        match (check("thundering").await, check("raining").await) {
            (Some(true), _) => "thunder".into(),
            (Some(false), Some(true)) => "rain".into(),
            (Some(false), Some(false)) => "clear".into(),
            _ => "unknown".into(),
        }
    }
}

/// The arguments spliced into console commands: a player must be a name (a selector such as `@a` would
/// reach every player with the console's rights) and a world a dimension id (more words would be more command:
/// `execute in X run kick @a …`). The tools' own checks allow more, for the relay's adapters, which look names
/// up instead of running them.
fn check_args(args: &Map<String, Value>) -> Result<(), ToolError> {
    for field in ["player", "target"] {
        let Some(name) = args.get(field).and_then(Value::as_str) else {
            continue;
        };
        let name_ok = (1..=16).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        if !name_ok {
            return Err(ToolError::invalid_argument(
                field,
                format!(
                    "in vanilla mode `{field}` must be a player name: 1 to 16 of A-Z a-z 0-9 _ . - (no selectors)"
                ),
            ));
        }
    }
    if let Some(world) = args.get("world").and_then(Value::as_str) {
        let part_ok = |part: &str, extra: &[u8]| {
            !part.is_empty()
                && part.bytes().all(|b| {
                    b.is_ascii_lowercase()
                        || b.is_ascii_digit()
                        || b"_-.".contains(&b)
                        || extra.contains(&b)
                })
        };
        let valid = match world.split_once(':') {
            Some((ns, path)) => part_ok(ns, b"") && part_ok(path, b"/"),
            None => part_ok(world, b"/"),
        };
        if !valid {
            return Err(ToolError::invalid_argument(
                "world",
                "`world` must be a dimension id such as `minecraft:the_nether` (lowercase, no spaces)",
            ));
        }
    }
    Ok(())
}

fn to_value<T: Serialize>(v: T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A command's answer as `CommandResult`: failed when it reads like one of the game's errors.
fn result(answer: &str, message: Option<String>) -> CommandResult {
    let output: Vec<String> = answer
        .lines()
        .map(str::to_owned)
        .filter(|l| !l.is_empty())
        .collect();
    let failed = answers::is_failure(answer);
    CommandResult {
        success: !failed,
        message: if failed {
            None
        } else {
            message.or_else(|| output.first().cloned())
        },
        error: failed.then(|| output.first().cloned().unwrap_or_default()),
        output: Some(output),
        location: None,
    }
}

fn not_found(answer: &str, player: Option<&str>) -> Result<(), ToolError> {
    if player.is_some() && answers::is_not_found(answer) {
        let who = player.unwrap_or_default();
        return Err(ToolError::not_found(format!(
            "player `{who}` is not online ({})",
            answer.trim()
        ))
        .with_hint("the player is not online: get_online_players lists who is")
        .with_details(json!({"player": who}))
        .with_code_name(Code::PlayerNotFound.as_str()));
    }
    Ok(())
}

fn schema(what: &str, answer: &str) -> ToolError {
    let shown: String = answer.chars().take(200).collect();
    ToolError::internal(format!("the server's answer to `{what}` is not in the form vanilla gives: {shown:?}"))
        .with_hint("a plugin may have replaced the command, or the server is older than 1.13; execute_command shows raw answers")
        .with_details(json!({"command": what}))
        .with_code_name(Code::SchemaError.as_str())
}

pub fn unsupported(why: &str) -> ToolError {
    ToolError::unsupported(format!("not available in vanilla mode: {why}"))
        .with_hint("run the server with the bridge mod or plugin and a relay for this tool")
        .with_details(json!({"mode": "vanilla"}))
        .with_code_name(UNSUPPORTED)
}

/// An RCON failure as the agent reads it.
pub fn rcon_error(e: &RconError) -> ToolError {
    let message = e.to_string();
    match e {
        RconError::Auth { .. } => ToolError::disconnected(message)
            .with_hint("fix --minecraft-rcon-password (MINECRAFT_RCON_PASSWORD) to match rcon.password in server.properties")
            .with_details(json!({"flag": "--minecraft-rcon-password"}))
            .with_code_name(Code::AuthFailed.as_str()),
        RconError::Connect { .. } | RconError::Down { .. } | RconError::Dropped { .. } | RconError::Stopped => {
            ToolError::disconnected(message)
                .with_hint("check the server runs with enable-rcon=true at --minecraft-rcon; status shows the last error; this bridge redials")
                .with_code_name(Code::ConnectionError.as_str())
        }
        RconError::RequestTooLarge { bytes, limit } => ToolError::too_large(message)
            .with_hint("send a shorter command")
            .with_details(json!({"field": "command", "bytes": bytes, "limit": limit}))
            .with_code_name(Code::InvalidCommand.as_str()),
        RconError::Nul => ToolError::invalid_argument("command", message).with_code_name(Code::InvalidCommand.as_str()),
        RconError::ResponseTooLarge { limit } => ToolError::too_large(message)
            .with_hint("ask for less (a narrower data path), or raise --minecraft-rcon-max-response")
            .with_details(json!({"limit": limit, "flag": "--minecraft-rcon-max-response"}))
            .with_code_name(Code::ServerError.as_str()),
        RconError::PacketTooLarge { limit, .. } => ToolError::too_large(message)
            .with_details(json!({"limit": limit}))
            .with_code_name(Code::ServerError.as_str()),
        RconError::Malformed(_) => ToolError::remote(message).with_code_name(Code::ServerError.as_str()),
        RconError::Timeout { .. } => ToolError::timeout(message)
            .with_hint("the server did not answer in time: it may be lagging; try again")
            .with_code_name(Code::Timeout.as_str()),
        RconError::QueueFull { limit } => ToolError::busy(message)
            .with_details(json!({"reason": "rcon_queue_full", "limit": limit}))
            .with_code_name(Code::ServerError.as_str()),
    }
}

/// `status` in vanilla mode.
pub fn status_spec(v: &Vanilla) -> ToolSpec {
    ToolSpec::new(
        "status",
        "Vanilla mode: the RCON link (connected, retries, last error), the server log being followed (lines, \
         rotations, truncations) and the events published.",
    )
    .title("RCON and server log status")
    .read_only()
    .handler_on(v.clone(), |v, _: NoArgs, _| async move { Ok(v.status()) })
}

/// Sets up vanilla mode on `b` (the relay mode's streams are already there): the backend, the tools with it,
/// `status` and `/health`.
pub async fn start(
    b: &mut bridge_core::BridgeBuilder,
    args: &crate::MinecraftArgs,
    env: &BridgeEnv,
) -> Result<(), BridgeError> {
    let v = &args.vanilla;
    if args.relay_url.is_some() {
        return Err("--minecraft-rcon/--minecraft-server-log (vanilla mode) and --minecraft-relay-url are two ways to reach the game: give one".into());
    }
    let Some(addr) = v.rcon.clone() else {
        return Err(
            "--minecraft-server-log needs --minecraft-rcon (MINECRAFT_RCON): vanilla mode runs tools over RCON".into(),
        );
    };
    if !addr.contains(':') {
        return Err(format!(
            "--minecraft-rcon (MINECRAFT_RCON) `{addr}` must be host:port, e.g. 127.0.0.1:25575"
        )
        .into());
    }
    let password = v.password()?;
    let subscriptions = args.subscriptions()?;
    if subscriptions.len() == EventType::ALL.len() {
        b.events().stream_with_bytes(
            ADVANCEMENT_STREAM,
            "A player made an advancement (from the server log): {eventType, timestamp, data: {player, advancement, \
             frame: task|challenge|goal}}, plus game and id.",
            args.event_buffer,
            STREAM_BYTES,
        );
    }
    b.instructions(INSTRUCTIONS);
    let mut settings = RconSettings::new(addr, password);
    settings.timeout = args.command_timeout;
    settings.backoff_base = args.reconnect_base;
    settings.backoff_max = args.reconnect_max;
    settings.max_response_bytes = v.rcon_max_response;
    if v.server_log.is_none() {
        tracing::warn!("vanilla mode without --minecraft-server-log: tools work, no events arrive");
    }
    let vanilla = Vanilla::start(
        settings,
        Allowed::parse(&v.rcon_commands),
        v.server_log.clone(),
        b.events(),
        &subscriptions,
        env.links().clone(),
    );
    // The tools take their budget from a relay link's settings; in vanilla mode this link is never dialled.
    let dormant = RelayLink::new(
        LinkSettings {
            url: String::new(),
            token: String::new(),
            client_id: args.client_id.clone(),
            subscriptions,
            command_timeout: args.command_timeout,
            backoff_base: args.reconnect_base,
            backoff_max: args.reconnect_max,
            mode: "vanilla",
            tls: None,
        },
        b.events(),
    );
    let ctx = crate::tools::Ctx {
        link: dormant,
        vanilla: Some(vanilla.clone()),
        world: Default::default(),
    };
    for spec in crate::tools::specs(&ctx) {
        if spec.name() != "status" {
            b.tool(spec);
        }
    }
    b.tool(status_spec(&vanilla));
    b.health(move || json!({"vanilla": vanilla.status()}));
    Ok(())
}
