//! One relay link, from `hello` to close: a game adapter's or an MCP server's (PROTOCOL.md §3–§5).

use super::decoding::{Reserved, TooCostly};
use super::queue::{Item, Queue};
use super::rate::{Bucket, Scope};
use super::state::{Client, ClientKey, GameConn, Relay};
use crate::acks::Acks;
use crate::wire::{self, Code, Envelope, Kind, Parsed, SchemaError, Source};
use bridge_core::json_peek::Scalar;
use bridge_core::link::{Incoming, LinkError, LinkSender, WsConnection};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Set by the relay's auth layer on an accepted upgrade (any value a client sends is removed first).
pub const ROLE_HEADER: &str = "x-minecraft-relay-role";
/// How long a client has to say `hello`.
const HELLO_DEADLINE: Duration = Duration::from_secs(10);
/// Queued messages written to a client per batch.
const WRITE_BATCH: usize = 1024;
/// How long a command waits for room on its game's link; a game's writer drains a full queue of a game that
/// reads in far less.
const FORWARD_PATIENCE: Duration = Duration::from_millis(500);

/// Who a link is, decided by its token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Game,
    Mcp(usize),
}

impl Role {
    pub fn header_value(self) -> String {
        match self {
            Role::Game => "minecraft".to_owned(),
            Role::Mcp(i) => format!("mcp:{i}"),
        }
    }

    fn parse(s: &str) -> Option<Role> {
        if s == "minecraft" {
            return Some(Role::Game);
        }
        s.strip_prefix("mcp:")?.parse().ok().map(Role::Mcp)
    }
}

/// Serves one accepted link until it closes.
pub async fn serve_link(relay: Relay, conn: WsConnection) {
    let role = conn
        .headers
        .get(ROLE_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(Role::parse);
    let WsConnection {
        id,
        peer,
        sender,
        mut incoming,
        closed,
        ..
    } = conn;
    let Some(role) = role else {
        sender.close("no role: the relay's auth layer did not run");
        return;
    };
    let Some(hello) = wait_hello(&relay, &sender, &mut incoming).await else {
        sender.close("no hello within 10 s");
        return;
    };
    tracing::info!(?peer, link = id, role = %role.header_value(), "relay link up");
    match role {
        Role::Game => serve_game(relay, id, sender, incoming, hello).await,
        Role::Mcp(token) => serve_mcp(relay, id, token, sender, incoming, closed, hello).await,
    }
}

/// Reads messages until a valid `hello`, answering anything else with SCHEMA_ERROR.
async fn wait_hello(
    relay: &Relay,
    sender: &LinkSender,
    incoming: &mut Incoming,
) -> Option<Envelope> {
    let deadline = tokio::time::Instant::now() + HELLO_DEADLINE;
    loop {
        let text = tokio::time::timeout_at(deadline, incoming.recv())
            .await
            .ok()??;
        // A hello is small and handled at once: what it took decoded is given back with this round.
        let Some(env) = check(relay, sender, &text, &mut Vec::new()).await else {
            continue;
        };
        if env.kind == Kind::Hello {
            return Some(env);
        }
        let mut e = SchemaError {
            field: "type".to_owned(),
            message: format!("expected hello first, got {}", env.kind.as_str()),
            id: env.id.clone(),
        };
        e.id = env.id;
        reply_schema(relay, sender, &e).await;
    }
}

/// Parses one message; refusals are counted, logged and answered here. A message of an unsupported
/// version is answered with a warning and still returned when it validates (graceful degradation). What
/// decoding it takes is reserved in `decoding` first (a frame over the size limit is refused unread and takes
/// nothing).
async fn check(
    relay: &Relay,
    sender: &LinkSender,
    text: &str,
    decoding: &mut Vec<Reserved>,
) -> Option<Envelope> {
    // Never refused (a frame always fits the budget, `DecodeBudget::new`), only made to wait, or the link went.
    if text.len() <= relay.settings().max_message_bytes
        && reserve_decoding(relay, sender, text, decoding)
            .await
            .is_err()
    {
        return None;
    }
    match wire::parse(text, relay.settings().max_message_bytes) {
        Ok(Parsed {
            envelope,
            unsupported_version: None,
        }) => Some(envelope),
        Ok(Parsed {
            envelope,
            unsupported_version: Some(version),
        }) => {
            relay
                .stats()
                .version_warnings
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(link = sender.id(), %version, "message of an unsupported protocol version, processed as 1.0");
            let reply = Envelope::error(
                &envelope.id,
                Code::SchemaError,
                format!(
                    "unsupported version {version}; processed as {}",
                    wire::VERSION
                ),
                json!({"unsupportedVersion": version, "supported": wire::VERSION, "degraded": true}),
            );
            let _ = sender.send_text(reply.to_text()).await;
            Some(envelope)
        }
        Err(e) => {
            reply_schema(relay, sender, &e).await;
            None
        }
    }
}

/// Why a message was not given room to be decoded.
enum NoRoom {
    /// It could never fit: answered SCHEMA_ERROR naming the bound.
    TooCostly(TooCostly),
    /// The link closed while it waited; its place in the queue is given up with it.
    Closed,
}

/// Reserves what decoding `text` takes ([`super::decoding`]), waiting for room while the link is open; a
/// message that could never fit is answered SCHEMA_ERROR naming the bound.
async fn reserve_decoding(
    relay: &Relay,
    sender: &LinkSender,
    text: &str,
    decoding: &mut Vec<Reserved>,
) -> Result<(), NoRoom> {
    let reserved = tokio::select! {
        reserved = relay.decoding().reserve(text) => reserved,
        () = sender.closed() => return Err(NoRoom::Closed),
    };
    match reserved {
        Ok(reserved) => {
            decoding.push(reserved);
            Ok(())
        }
        Err(e) => {
            let refusal = SchemaError {
                field: "message".to_owned(),
                message: e.to_string(),
                id: head_of(text)
                    .and_then(|h| h.id.into_string())
                    .unwrap_or_default(),
            };
            reply_schema(relay, sender, &refusal).await;
            Err(NoRoom::TooCostly(e))
        }
    }
}

async fn reply_schema(relay: &Relay, sender: &LinkSender, e: &SchemaError) {
    relay.stats().schema_errors.fetch_add(1, Ordering::Relaxed);
    let error = bridge_core::text::for_log(&e.to_string());
    tracing::warn!(link = sender.id(), %error, "message refused");
    let _ = sender.send_text(e.reply().to_text()).await;
}

fn name_field(hello: &Envelope, field: &str, default: Option<&str>) -> Result<String, SchemaError> {
    match (hello.payload.get(field), default) {
        (Some(Value::String(s)), _) if wire::valid_name(s) => Ok(s.clone()),
        (None, Some(d)) => Ok(d.to_owned()),
        _ => Err(SchemaError {
            field: format!("payload.{field}"),
            message: "must be 1 to 64 characters of A-Z a-z 0-9 _ . -".to_owned(),
            id: hello.id.clone(),
        }),
    }
}

/// An optional `hello` field under the same rule as names: absent is `None`, anything else must be a name.
fn optional_name_field(hello: &Envelope, field: &str) -> Result<Option<String>, SchemaError> {
    match hello.payload.get(field) {
        None => Ok(None),
        Some(_) => name_field(hello, field, None).map(Some),
    }
}

fn welcome(
    relay: &Relay,
    role: &str,
    last_seq: u64,
    (games, version): (Vec<String>, u64),
) -> Envelope {
    Envelope::new(
        Kind::Welcome,
        format!("w-{}", wire::now_ms()),
        Source::Relay,
        json!({
            "role": role,
            "epoch": relay.epoch(),
            "relayVersion": env!("CARGO_PKG_VERSION"),
            "lastSeq": last_seq,
            "heartbeatInterval": relay.settings().heartbeat.as_millis() as u64,
            "maxMessageBytes": relay.settings().max_message_bytes,
            "games": games,
            "gamesVersion": version,
        }),
    )
}

/// Tells every connected MCP server that a game came or went: not queued, so not replayed. The notice
/// carries the whole list and its version: notices are sent from tasks of their own and may arrive out of
/// order, and a client keeps the list of the highest version.
fn notice_clients(relay: &Relay, kind: &str, game: &str) {
    // The list and the senders are read together: a client registered later had this list in its welcome.
    let ((games, version), senders) = {
        let state = relay.lock();
        (state.games_now(), state.live_clients())
    };
    let mut notice = Envelope::new(
        Kind::Notice,
        format!("n-{}", wire::now_ms()),
        Source::Relay,
        json!({"kind": kind, "game": game, "games": games, "gamesVersion": version}),
    );
    notice.game = Some(game.to_owned());
    let text = notice.to_text();
    // A task per client: one that reads nothing holds its own notice (until its link is dropped as a slow
    // reader), not everyone else's.
    for s in senders {
        let text = text.clone();
        tokio::spawn(async move {
            let _ = s.send_text(text).await;
        });
    }
}

async fn serve_game(
    relay: Relay,
    link: u64,
    sender: LinkSender,
    mut incoming: Incoming,
    hello: Envelope,
) {
    let names = name_field(&hello, "name", Some("default"))
        .and_then(|n| name_field(&hello, "instance", None).map(|i| (n, i)));
    let (name, instance) = match names {
        Ok(v) => v,
        Err(e) => {
            reply_schema(&relay, &sender, &e).await;
            sender.close("hello refused");
            return;
        }
    };
    let text = |f: &str| {
        hello
            .str_field(f)
            .unwrap_or_default()
            .chars()
            .take(200)
            .collect::<String>()
    };
    // Through the bus the name is the cluster's: claimed in JetStream first (bus/nats.rs).
    let claimed = match relay.bus() {
        Some(bus) => bus.claim_name(&relay, &name, &instance, &sender).await,
        None => Ok(()),
    };
    if let Err(super::bus::ClaimError::Unavailable(why)) = &claimed {
        let what = format!("the game name `{name}`");
        let details = json!({"reason": "name_claim_failed", "name": name});
        return refuse_unclaimed(&sender, &hello, &what, why, details).await;
    }
    // The welcome is queued under the same lock that makes the game routable, so it is the first frame
    // the adapter gets, and the game is reachable as soon as the adapter hears it.
    let admitted = {
        let mut state = relay.lock();
        // The name stays with the live adapter holding it: another instance under it is refused, not swapped
        // in (two servers named alike used to kick each other off forever). The same instance takes its own
        // place back (a reconnect whose old link is not yet known dead).
        if let Err(super::bus::ClaimError::InUse(holder)) = claimed {
            Err(holder)
        } else if let Some(holder) = state.name_held_by(&name, &instance) {
            Err(holder)
        } else {
            // Through JetStream, what it holds: an event accepted but not yet stored stays in the outbox.
            let last = match relay.bus() {
                Some(bus) => bus.persisted(&name, &instance),
                None => state.instances.last(&name, &instance),
            };
            let (mut games, version) = state.games_now();
            if !games.contains(&name) {
                games.push(name.clone());
                games.sort();
            }
            let hello_back = welcome(&relay, "minecraft", last, (games, version + 1));
            sender
                .try_send_text(hello_back.to_text())
                .ok()
                .map(|()| {
                    state.games_version += 1;
                    let replaced = state.games.insert(
                        name.clone(),
                        GameConn {
                            link_id: link,
                            sender: sender.clone(),
                            instance: instance.clone(),
                            adapter: text("adapter"),
                            game_version: text("gameVersion"),
                            since_ms: wire::now_ms(),
                        },
                    );
                    relay.instance_seen(&mut state, &name, &instance, 0);
                    (last, replaced)
                })
                .ok_or_else(String::new)
        }
    };
    // A fresh link's queue is empty: only a link already closed refuses the welcome.
    let (last_seq, replaced) = match admitted {
        Ok(v) => v,
        Err(holder) if holder.is_empty() => return,
        Err(holder) => {
            tracing::warn!(game = %name, %instance, holder = %holder, "game refused: its name is held by another live adapter");
            let reply = Envelope::error(
                &hello.id,
                Code::PermissionDenied,
                format!(
                    "the game name `{name}` is in use by another connected server (instance {holder}); give this server its own name with [bridge] server_name"
                ),
                json!({"reason": "name_in_use", "name": name, "holder": holder}),
            );
            let _ = sender.send_text(reply.to_text()).await;
            sender.close("game name in use");
            return;
        }
    };
    if let Some(old) = replaced {
        old.sender
            .close("replaced by a newer connection under the same game name");
    }
    tracing::info!(game = %name, %instance, last_seq, "game adapter connected");
    notice_clients(&relay, "game_connected", &name);
    if let Some(bus) = relay.bus() {
        bus.forward_acks(&name, &instance, sender.clone(), last_seq);
        bus.serve_commands(&relay, &name, sender.clone());
    }
    let mut bucket = Bucket::new(relay.settings().game_rate);
    let mut acks = Acks::new(last_seq);
    let mut to_ack = last_seq;
    let mut chunks = wire::Assembler::with_budget(Arc::clone(&relay.inner.assembly));
    loop {
        let text = tokio::select! {
            biased;
            text = incoming.recv() => text,
            () = acks.due() => {
                if !send_ack(&sender, to_ack).await {
                    break;
                }
                acks.sent(to_ack);
                continue;
            }
        };
        let Some(text) = text else { break };
        let read_us = crate::latency::start();
        // What this frame's message takes decoded, held until it has been handled.
        let mut decoding = Vec::new();
        // Events, alone or batched, the way nearly every frame of a game comes: read without a JSON tree. Anything
        // else, or anything the full path would refuse or warn about, takes the full path below.
        let fast = wire::fast::events(&text, relay.settings().max_message_bytes);
        let env = if let Some(events) = fast {
            for ev in events {
                let limited = bucket
                    .take()
                    .map_err(|retry| (Scope::Connection, retry))
                    .and_then(|()| relay.rates().take_games().map_err(|r| (Scope::Games, r)));
                if let Err((scope, retry)) = limited {
                    relay.count_rate_limited(scope);
                    relay.event_rate_limited(&name, Some(ev.ty));
                    let (message, details) = rate_refusal(&relay, scope, retry, true);
                    let reply = Envelope::error(&ev.id, Code::ServerError, message, details);
                    let _ = sender.send_text(reply.to_text()).await;
                    continue;
                }
                if let Some(bus) = relay.bus() {
                    bus.publish_room(&name, &instance).await;
                }
                relay.accept_fast_event(&name, &instance, &ev);
                to_ack = to_ack.max(ev.seq.unwrap_or(0));
            }
            None
        } else {
            match check(&relay, &sender, &text, &mut decoding).await {
                Some(env) if env.kind == Kind::Chunk => {
                    // The chunk's own room goes back before the whole asks for its own: held, a whole that needs
                    // nearly all of the budget would wait for it for good, and every link behind it too.
                    decoding.clear();
                    match assemble(&relay, &sender, &name, &mut chunks, &env, &mut decoding).await {
                        Some(whole) => Some(whole),
                        None => continue,
                    }
                }
                Some(env) => Some(env),
                None => {
                    if text.len() > relay.settings().max_message_bytes {
                        let limit = relay.settings().max_message_bytes;
                        fail_answer(
                            &relay,
                            &name,
                            &text,
                            &format!(
                                "the game's answer is {} bytes, over the relay's message limit of {limit} bytes \
                                 (--max-message-bytes); an adapter speaking protocol 1.1 sends it in chunks",
                                text.len()
                            ),
                        );
                    }
                    None
                }
            }
        };
        // A batch (PROTOCOL.md §2.2) is its messages one by one, each as if it had come alone: counted against
        // the limits, accepted, numbered and acknowledged by its own `seq`.
        for env in expand(&relay, &sender, env).await {
            // Control traffic (acks, heartbeats) is never counted: refusing it would only cause resends. Nor
            // are answers: each is to a command that passed the limits already, and refusing it would leave
            // that tool call to time out behind the game's own events. Events pass this link's limit and then
            // the one of every game together.
            let limited = if is_control(env.kind) || env.kind == Kind::Response {
                Ok(())
            } else {
                bucket
                    .take()
                    .map_err(|retry| (Scope::Connection, retry))
                    .and_then(|()| {
                        if env.kind == Kind::Event {
                            relay.rates().take_games().map_err(|r| (Scope::Games, r))
                        } else {
                            Ok(())
                        }
                    })
            };
            if let Err((scope, retry)) = limited {
                relay.count_rate_limited(scope);
                if env.kind == Kind::Event {
                    // A later event's cumulative ack covers this one: it is lost, so every MCP client that
                    // would have had it is told (a `lost` notice, reason `rate_limited`).
                    relay.event_rate_limited(&name, wire::validate_game_event(&env.payload).ok());
                }
                let (message, details) = rate_refusal(&relay, scope, retry, true);
                let reply = Envelope::error(&env.id, Code::ServerError, message, details);
                let _ = sender.send_text(reply.to_text()).await;
                continue;
            }
            match env.kind {
                Kind::Event => {
                    let ty = wire::validate_game_event(&env.payload);
                    if let Ok(ty) = ty {
                        if let Some(bus) = relay.bus() {
                            // JetStream slower than the game: stop reading it (bounded, bus/bounded.rs).
                            bus.publish_room(&name, &instance).await;
                        }
                        relay.accept_event(&name, &instance, ty, &env);
                        to_ack = to_ack.max(env.seq.unwrap_or(0));
                    }
                }
                Kind::Response => {
                    if !relay.accept_response(&name, link, &env) {
                        tracing::debug!(game = %name, id = %env.id, "response to no pending command (late or unknown), dropped");
                    }
                }
                Kind::Heartbeat | Kind::Ack | Kind::Notice => {}
                Kind::Error => {
                    let payload = bridge_core::text::for_log(
                        &serde_json::Value::Object(env.payload.clone()).to_string(),
                    );
                    tracing::warn!(game = %name, %payload, "the game reported an error");
                }
                Kind::Command | Kind::Query => {
                    let reply = Envelope::error(
                        &env.id,
                        Code::PermissionDenied,
                        "game adapters may not send commands",
                        json!({}),
                    );
                    let _ = sender.send_text(reply.to_text()).await;
                }
                other => {
                    let e = SchemaError {
                        field: "type".to_owned(),
                        message: format!("{} is not accepted from a game adapter", other.as_str()),
                        id: env.id.clone(),
                    };
                    reply_schema(&relay, &sender, &e).await;
                }
            }
        }
        if let Some(read_us) = read_us {
            tracing::trace!(target: crate::latency::TARGET, hop = "relay_in", read_us, done_us = crate::latency::now_us(), game_seq = to_ack);
        }
        // Acknowledged every ACK_EVERY events, else ACK_DELAY after the first not yet acknowledged (acks.rs);
        // through the bus, JetStream's acknowledgements are forwarded instead.
        if relay.bus().is_none()
            && let Some(seq) = acks.read(to_ack)
        {
            if !send_ack(&sender, seq).await {
                break;
            }
            acks.sent(seq);
        }
    }
    tracing::info!(game = %name, reason = ?sender.close_reason(), "game adapter disconnected");
    game_left(&relay, &name, link);
}

/// Acknowledges a game's events up to `seq`; false when its link is gone.
async fn send_ack(sender: &LinkSender, seq: u64) -> bool {
    let ack = Envelope::new(
        Kind::Ack,
        format!("a-{seq}"),
        Source::Relay,
        json!({"seq": seq}),
    );
    sender.send_text(ack.to_text()).await.is_ok()
}

/// A game's link ended; its MCP servers hear of it unless a newer link took the name over.
fn game_left(relay: &Relay, name: &str, link: u64) {
    relay.game_gone(name, link);
    let still_here = relay.lock().games.contains_key(name);
    if !still_here {
        notice_clients(relay, "game_disconnected", name);
    }
}

/// A `hello` refused because the NATS cluster did not take its claim (of `what`) in time: the peer may retry.
async fn refuse_unclaimed(
    sender: &LinkSender,
    hello: &Envelope,
    what: &str,
    why: &str,
    details: Value,
) {
    let message = format!("{what} could not be claimed: {why}; retry");
    let reply = Envelope::error(&hello.id, Code::ServerError, message, details);
    let _ = sender.send_text(reply.to_text()).await;
    sender.close(&format!("{what} not claimed"));
}

/// Why an MCP server's `hello` was not admitted.
enum Refused {
    /// Its link closed before the welcome could be queued: nothing to answer.
    Closed,
    /// Another live link holds its (token, clientId).
    InUse,
    /// Every client id its token may hold is connected.
    TooMany,
}

async fn serve_mcp(
    relay: Relay,
    link: u64,
    token: usize,
    sender: LinkSender,
    mut incoming: Incoming,
    closed: CancellationToken,
    hello: Envelope,
) {
    let client_id = name_field(&hello, "clientId", Some("default"));
    let instance = optional_name_field(&hello, "instance");
    let subs = wire::subscription(hello.payload.get("subscriptions"), "payload.subscriptions");
    let (client_id, instance, subs) = match (client_id, instance, subs) {
        (Ok(c), Ok(i), Ok(s)) => (c, i, s),
        (Err(mut e), _, _) | (_, Err(mut e), _) | (_, _, Err(mut e)) => {
            e.id = hello.id.clone();
            reply_schema(&relay, &sender, &e).await;
            sender.close("hello refused");
            return;
        }
    };
    let key: ClientKey = (token, client_id.clone());
    let same_epoch = hello.str_field("epoch") == Some(relay.epoch());
    // A client that knew an earlier relay and is new to this one resumes from this epoch's backlog.
    let resuming = hello.str_field("epoch").is_some() && !same_epoch;
    let last_seq = hello.payload.get("lastSeq").and_then(Value::as_u64);
    let settings = relay.settings().clone();
    // Through the bus, a first connection's events start where the stream stands before its welcome.
    let live_from = match relay.bus() {
        Some(bus) if hello.str_field("epoch").is_none() => bus.live_start().await,
        _ => None,
    };
    // Through the bus the client id is the cluster's: claimed in JetStream first (bus/nats.rs).
    let claimed = match relay.bus() {
        Some(bus) => {
            bus.claim_client(&relay, &key, instance.as_deref(), &sender)
                .await
        }
        None => Ok(()),
    };
    if let Err(super::bus::ClaimError::Unavailable(why)) = &claimed {
        let what = format!("the client id {client_id}");
        let details = json!({"reason": "client_id_claim_failed", "clientId": client_id});
        return refuse_unclaimed(&sender, &hello, &what, why, details).await;
    }
    // The welcome is queued under the lock that registers the link, so it precedes every notice,
    // heartbeat and queued message, and its game list is exact at that instant.
    let admitted = {
        let mut state = relay.lock();
        let games = state.games_now();
        let fresh = !state.clients.contains_key(&key);
        // The client id stays with the live link holding it: a second MCP server under it is refused, not
        // swapped in (two servers left at the default id used to replace each other for ever and get each
        // other's answers, which the relay routes by (token, clientId)). A link that closed, or went silent
        // and was dropped by its watchdog (a ping unanswered within the heartbeat), is taken over at once: a
        // refused server redials, so one restarted after a network loss gets in once its old link is gone.
        // The same server (its secret `instance` matches the live link's) gets in at once: its link went
        // half-open, and waiting for the watchdog would leave its calls failing for the heartbeat and more.
        if claimed.is_err() || state.client_held_by(&key, instance.as_deref()).is_some() {
            Err(Refused::InUse)
        } else if fresh
            // A token holds at most clients_per_token queues: a new client id replaces the least recently used
            // disconnected one, and is refused when they are all connected.
            && state.token_usage(token).0 >= settings.clients_per_token
            && !state.evict_lru(token, relay.stats())
        {
            Err(Refused::TooMany)
        } else {
            let evicted = if fresh {
                state.evicted.remove(&key)
            } else {
                None
            };
            let client = state.clients.entry(key.clone()).or_insert_with(|| Client {
                queue: Queue::new(settings.queue_size, settings.queue_bytes),
                subscriptions: Vec::new(),
                live: None,
                instance: None,
                wake: Arc::new(Notify::new()),
                sent: 0,
                gone_since: Some(Instant::now()),
            });
            if let Some(lost) = evicted.filter(|n| *n > 0) {
                client.queue.note_lost("evicted", lost);
            }
            if let (true, Some(seq)) = (same_epoch, last_seq) {
                client.queue.ack(seq);
            }
            let acked = client.queue.acked();
            let hello_back = welcome(&relay, "mcp", acked, games);
            sender
                .try_send_text(hello_back.to_text())
                .ok()
                .map(|()| {
                    client.subscriptions = subs;
                    let replaced = client.live.replace((link, sender.clone()));
                    client.instance = instance;
                    client.sent = acked;
                    client.gone_since = None;
                    (acked, Arc::clone(&client.wake), replaced, fresh)
                })
                .ok_or(Refused::Closed)
        }
    };
    // A fresh link's queue is empty: only a link already closed refuses the welcome. A queue created for
    // it is left to the retention sweep like any other client gone.
    let (acked, wake, replaced, fresh) = match admitted {
        Ok(v) => v,
        Err(Refused::Closed) => return,
        Err(Refused::InUse) => {
            relay
                .stats()
                .client_ids_in_use
                .fetch_add(1, Ordering::Relaxed);
            tracing::warn!(client = %client_id, token, "hello refused: another live MCP server holds this client id");
            let reply = Envelope::error(
                &hello.id,
                Code::PermissionDenied,
                format!(
                    "another MCP server is connected with client id {client_id}; give each server its own \
                     --minecraft-client-id / MINECRAFT_CLIENT_ID"
                ),
                json!({"reason": "client_id_in_use", "clientId": client_id}),
            );
            let _ = sender.send_text(reply.to_text()).await;
            sender.close("client id in use");
            return;
        }
        Err(Refused::TooMany) => {
            relay
                .stats()
                .clients_refused
                .fetch_add(1, Ordering::Relaxed);
            let limit = settings.clients_per_token;
            tracing::warn!(client = %client_id, token, limit, "hello refused: every client id of this token is connected");
            let reply = Envelope::error(
                &hello.id,
                Code::ServerError,
                format!(
                    "this token already has {limit} client ids connected (--clients-per-token {limit}); reuse a clientId"
                ),
                json!({"reason": "too_many_clients", "limit": limit}),
            );
            let _ = sender.send_text(reply.to_text()).await;
            sender.close("too many client ids for this token");
            return;
        }
    };
    if let Some(bus) = relay.bus() {
        // JetStream holds what this client missed: its consumer, taken over from any relay.
        bus.attach(&relay, &key, hello.str_field("epoch").is_some(), live_from);
    } else if resuming && fresh {
        let n = relay.replay_backlog(&key);
        tracing::info!(client = %client_id, events = n, "client resumes from an earlier relay: backlog replayed");
    }
    if let Some((_, old)) = replaced {
        old.close("replaced by a newer connection with the same clientId");
    }
    tracing::info!(client = %client_id, token, acked, "MCP server connected");
    tokio::spawn(write_queue(
        relay.clone(),
        key.clone(),
        link,
        sender.clone(),
        wake,
        closed.clone(),
        hello.version.clone(),
    ));
    let mut bucket = Bucket::new(settings.mcp_rate);
    while let Some(text) = incoming.recv().await {
        // What this frame's message takes decoded, held until it has been handled.
        let mut decoding = Vec::new();
        let env = check(&relay, &sender, &text, &mut decoding).await;
        for env in expand(&relay, &sender, env).await {
            // Control traffic (acks, heartbeats) is never counted: an MCP server acknowledging a flood of events
            // would otherwise have its own tool calls refused. The rest passes this link's limit, then its
            // token's (every link of the token together: more client ids do not buy more rate).
            let limited = if is_control(env.kind) {
                Ok(())
            } else {
                bucket
                    .take()
                    .map_err(|retry| (Scope::Connection, retry))
                    .and_then(|()| {
                        relay
                            .rates()
                            .take_token(token)
                            .map_err(|r| (Scope::Token, r))
                    })
            };
            if let Err((scope, retry)) = limited {
                relay.count_rate_limited(scope);
                let (message, details) = rate_refusal(&relay, scope, retry, false);
                if matches!(env.kind, Kind::Command | Kind::Query) {
                    let mut state = relay.lock();
                    if let Some(c) = state.clients.get_mut(&key) {
                        c.queue.push_response(|seq| {
                            super::state::respond_error(
                                &env.id,
                                None,
                                seq,
                                Code::ServerError,
                                &message,
                                details,
                            )
                            .to_text()
                        });
                        c.wake.notify_one();
                    }
                } else {
                    let reply = Envelope::error(&env.id, Code::ServerError, message, details);
                    let _ = sender.send_text(reply.to_text()).await;
                }
                continue;
            }
            match env.kind {
                Kind::Ack => {
                    let seq = env.payload.get("seq").and_then(Value::as_u64).unwrap_or(0);
                    if let Some(c) = relay.lock().clients.get_mut(&key) {
                        c.queue.ack(seq);
                    }
                    if let Some(bus) = relay.bus() {
                        bus.client_acked(&key, seq);
                    }
                }
                Kind::Subscribe => {
                    if let Ok(events) =
                        wire::subscription(env.payload.get("events"), "payload.events")
                    {
                        let names: Vec<&str> = events.iter().map(|t| t.as_str()).collect();
                        let notice = Envelope::new(
                            Kind::Notice,
                            env.id.clone(),
                            Source::Relay,
                            json!({"kind": "subscribed", "events": names}),
                        );
                        if let Some(c) = relay.lock().clients.get_mut(&key) {
                            c.subscriptions = events;
                        }
                        let _ = sender.send_text(notice.to_text()).await;
                    }
                }
                Kind::Command | Kind::Query => forward_command(&relay, &key, &env).await,
                Kind::Heartbeat | Kind::Notice => {}
                Kind::Error => {
                    let payload = bridge_core::text::for_log(
                        &serde_json::Value::Object(env.payload.clone()).to_string(),
                    );
                    tracing::warn!(client = %client_id, %payload, "an MCP server reported an error");
                }
                other => {
                    let e = SchemaError {
                        field: "type".to_owned(),
                        message: format!("{} is not accepted from an MCP server", other.as_str()),
                        id: env.id.clone(),
                    };
                    reply_schema(&relay, &sender, &e).await;
                }
            }
        }
    }
    tracing::info!(client = %client_id, reason = ?sender.close_reason(), "MCP server disconnected");
    forget_link(&relay, &key, link);
}

/// The messages one received message stands for: a `batch`'s own, in order (a refused one answered with
/// SCHEMA_ERROR naming its place), or the message itself.
async fn expand(relay: &Relay, sender: &LinkSender, env: Option<Envelope>) -> Vec<Envelope> {
    match env {
        None => Vec::new(),
        Some(mut batch) if batch.kind == Kind::Batch => {
            let mut out = Vec::new();
            for parsed in wire::unbatch(&mut batch) {
                match parsed {
                    Ok(p) => out.push(p.envelope),
                    Err(e) => reply_schema(relay, sender, &e).await,
                }
            }
            out
        }
        Some(env) => vec![env],
    }
}

/// Takes one `chunk` (PROTOCOL.md §2.1); the whole message once its last chunk is in, validated as if it
/// had come in one frame (up to [`wire::MAX_ASSEMBLED_BYTES`]).
async fn assemble(
    relay: &Relay,
    sender: &LinkSender,
    game: &str,
    chunks: &mut wire::Assembler,
    env: &Envelope,
    decoding: &mut Vec<Reserved>,
) -> Option<Envelope> {
    match chunks.push(env) {
        Ok(None) => None,
        Ok(Some(text)) => {
            match reserve_decoding(relay, sender, &text, decoding).await {
                Ok(()) => {}
                Err(NoRoom::TooCostly(e)) => {
                    let why = format!("the game's answer was refused: {e}");
                    fail_answer(relay, game, &text, &why);
                    return None;
                }
                Err(NoRoom::Closed) => return None,
            }
            parse_assembled(relay, sender, &text).await
        }
        Err(e) => {
            // A chunked answer dropped (no room beside the other links' unfinished messages, out of order, over
            // 16 MiB) fails its command now: its caller waited for the command's whole timeout to hear TIMEOUT.
            let why = format!("the game's answer was refused: {}", e.message);
            fail_command(relay, game, &env.id, &why);
            reply_schema(relay, sender, &e).await;
            None
        }
    }
}

/// A whole chunked message, validated as if it had come in one frame.
async fn parse_assembled(relay: &Relay, sender: &LinkSender, text: &str) -> Option<Envelope> {
    match wire::parse(text, wire::MAX_ASSEMBLED_BYTES) {
        Ok(p) if p.envelope.kind != Kind::Chunk => Some(p.envelope),
        Ok(p) => {
            let e = SchemaError {
                field: "type".to_owned(),
                message: "a chunked message may not itself be a chunk".to_owned(),
                id: p.envelope.id,
            };
            reply_schema(relay, sender, &e).await;
            None
        }
        Err(e) => {
            reply_schema(relay, sender, &e).await;
            None
        }
    }
}

/// A game's message refused unread (over the size limit, or what it would take decoded) may be the answer to a
/// command (a 1.0 adapter cannot chunk): the command fails at once with `why`, instead of timing out.
fn fail_answer(relay: &Relay, game: &str, text: &str, why: &str) {
    let Some(Head { kind, id, .. }) = head_of(text) else {
        return;
    };
    let (Some("response"), Some(id)) = (kind.into_string().as_deref(), id.into_string()) else {
        return;
    };
    fail_command(relay, game, &id, why);
}

/// Fails the command `id` with `why` when it is one sent to `game` and waiting: only the game the command went
/// to may fail it.
fn fail_command(relay: &Relay, game: &str, id: &str, why: &str) {
    if relay.lock().pending.get(id).is_none_or(|p| p.game != game) {
        return;
    }
    tracing::warn!(game, id = %bridge_core::text::for_log(id), "answer refused");
    relay.fail_pending(id, Code::ServerError, why);
}

/// The `type`, `id` and `game` of a message, read without decoding the rest: it is read only because the rest
/// was refused (too large, or too costly to decode), so the rest is skipped unread, and a field that is no
/// string reads as none ([`Scalar`]).
#[derive(serde::Deserialize)]
struct Head {
    #[serde(rename = "type", default)]
    kind: Scalar,
    #[serde(default)]
    id: Scalar,
    #[serde(default)]
    game: Scalar,
}

fn head_of(text: &str) -> Option<Head> {
    serde_json::from_str(text).ok()
}

/// The refusal of a message over a rate limit: which limit, its value and flag, and when to retry.
fn rate_refusal(relay: &Relay, scope: Scope, retry: u64, game_side: bool) -> (String, Value) {
    let settings = relay.settings();
    let (limit, what) = match (scope, game_side) {
        (Scope::Connection, true) => (settings.game_rate, "this game adapter's link"),
        (Scope::Connection, false) => (settings.mcp_rate, "this MCP server's link"),
        (Scope::Token, _) => (
            settings.mcp_token_rate,
            "every link of this MCP token together",
        ),
        (Scope::Game, _) => (settings.game_command_rate, "the commands to one game"),
        (Scope::Games, _) => (
            settings.games_event_rate,
            "the events of every game together",
        ),
    };
    (
        format!(
            "rate limited: {what} may send {limit} messages a second ({}); retry in {retry} ms",
            scope.flag(game_side)
        ),
        json!({"reason": "rate_limited", "scope": scope.as_str(), "limit": limit, "retryAfterMs": retry}),
    )
}

/// Messages that keep a link going rather than asking for work; no rate limit applies to them.
fn is_control(kind: Kind) -> bool {
    matches!(kind, Kind::Ack | Kind::Heartbeat)
}

async fn forward_command(relay: &Relay, key: &ClientKey, env: &Envelope) {
    let Some((game, out)) = relay.route_command(key, env) else {
        return;
    };
    send_to_game(relay, &game, out).await;
}

/// Sends a routed command to its game, and fails it as the game's answer would if the link drops or the game
/// does not answer within `--command-timeout`. Commands from a client here and from another relay over the bus
/// go the same way.
///
/// The caller is the asking link's read loop: the wait for room on the game's link is bounded
/// ([`FORWARD_PATIENCE`]), so a game that reads nothing costs its asker that, not the rest of its calls, and
/// the command fails at once naming the game. The timeout is armed before the send, so no wait escapes it.
pub(crate) async fn send_to_game(relay: &Relay, game: &LinkSender, out: Envelope) {
    let relay_id = out.id.clone();
    let timeout = relay.settings().command_timeout;
    {
        let relay = relay.clone();
        let relay_id = relay_id.clone();
        tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            relay.fail_pending(
                &relay_id,
                Code::Timeout,
                &format!("the game did not answer within {} ms", timeout.as_millis()),
            );
        });
    }
    let sent = tokio::time::timeout(FORWARD_PATIENCE, game.send_text(out.to_text())).await;
    let why = match sent {
        Ok(Ok(())) => return,
        Ok(Err(LinkError::FrameTooLarge { size, limit })) => format!(
            "the command is {size} bytes, over the game link's frame limit of {limit} bytes; it was not sent"
        ),
        Ok(Err(e)) => format!("the game's link dropped ({e})"),
        Err(_) => format!(
            "the game is not reading what the relay sends it ({} bytes waiting on its link for {} ms); \
             the command was not sent",
            game.queued_bytes(),
            FORWARD_PATIENCE.as_millis()
        ),
    };
    let name = relay.lock().pending.get(&relay_id).map(|p| p.game.clone());
    let Some(name) = name else { return };
    tracing::warn!(game = %name, id = %relay_id, %why, "command not forwarded");
    relay.fail_pending(
        &relay_id,
        Code::ConnectionError,
        &format!("game `{name}`: {why}"),
    );
}

fn forget_link(relay: &Relay, key: &ClientKey, link: u64) {
    let mut state = relay.lock();
    if let Some(c) = state.clients.get_mut(key)
        && c.live.as_ref().is_some_and(|l| l.0 == link)
    {
        c.live = None;
        c.gone_since = Some(Instant::now());
    }
}

/// Writes a client's queue to its live link: the replay first, then whatever arrives; a `lost` notice
/// before anything when the queue overflowed. Many messages a frame to a client that speaks 1.2.
async fn write_queue(
    relay: Relay,
    key: ClientKey,
    link: u64,
    sender: LinkSender,
    wake: Arc<Notify>,
    closed: CancellationToken,
    peer_version: String,
) {
    let limit = relay.settings().max_message_bytes;
    // What the client said it reads: chunks (1.1), batches (1.2).
    let chunks = wire::speaks_chunks(&peer_version);
    let batches = wire::speaks_batches(&peer_version);
    loop {
        loop {
            let (batch, lost, other_lost) = {
                let mut state = relay.lock();
                let Some(c) = state.clients.get_mut(&key) else {
                    return;
                };
                if c.live.as_ref().is_none_or(|l| l.0 != link) {
                    // A newer link's writer waits on the same `wake`; the wakeup this one may have taken
                    // is passed on, or that writer would sleep through what was queued.
                    wake.notify_one();
                    return;
                }
                (
                    c.queue.write_after(c.sent, WRITE_BATCH),
                    c.queue.take_lost(),
                    c.queue.take_other_lost(),
                )
            };
            for (reason, n) in other_lost {
                tracing::warn!(client = %key.1, lost = n, reason, "messages for this client were lost");
                let notice = Envelope::new(
                    Kind::Notice,
                    format!("l-{}", wire::now_ms()),
                    Source::Relay,
                    json!({"kind": "lost", "lost": n, "reason": reason}),
                );
                if sender.send_text(notice.to_text()).await.is_err() {
                    return;
                }
            }
            if lost > 0 {
                tracing::warn!(client = %key.1, lost, "queue overflowed: oldest messages dropped");
                let notice = Envelope::new(
                    Kind::Notice,
                    format!("l-{}", wire::now_ms()),
                    Source::Relay,
                    json!({"kind": "lost", "lost": lost, "reason": "queue_full"}),
                );
                if sender.send_text(notice.to_text()).await.is_err() {
                    return;
                }
            }
            let Some(last) = batch.last().map(|i| i.seq) else {
                break;
            };
            let out = if batches {
                // Many messages a frame (PROTOCOL.md §2.2): one frame per event through every hop was where
                // 50 000 events/s backed up.
                batch_frames(&batch, limit, chunks)
            } else {
                batch
                    .iter()
                    .flat_map(|item| frames(&item.text(), item.seq, limit, chunks))
                    .collect()
            };
            let read_us = crate::latency::start();
            for frame in out {
                if sender.send_text(frame).await.is_err() {
                    return;
                }
            }
            if let Some(read_us) = read_us {
                tracing::trace!(target: crate::latency::TARGET, hop = "relay_out", read_us, done_us = crate::latency::now_us(), seq = last, items = batch.len());
            }
            // Only while this is still the live link: a newer one starts again from what was acknowledged.
            if let Some(c) = relay.lock().clients.get_mut(&key)
                && c.live.as_ref().is_some_and(|l| l.0 == link)
            {
                c.sent = c.sent.max(last);
            }
        }
        tokio::select! {
            () = wake.notified() => {}
            () = closed.cancelled() => return,
        }
    }
}

/// The frames queued messages go out as to a client that reads batches: grouped as [`wire::pack`] groups them,
/// each message written straight into its frame; one too big to share a frame goes alone, chunked if need be.
fn batch_frames(batch: &[Item], limit: usize, chunks: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut group: Vec<&Item> = Vec::new();
    let mut bytes = wire::BATCH_OVERHEAD;
    for item in batch {
        let len = item.wire_len();
        if len + wire::BATCH_OVERHEAD + 1 > limit {
            pack_items(&mut group, bytes, &mut out);
            bytes = wire::BATCH_OVERHEAD;
            out.extend(frames(&item.text(), item.seq, limit, chunks));
            continue;
        }
        if group.len() >= wire::MAX_BATCH || bytes + len + 1 > limit {
            pack_items(&mut group, bytes, &mut out);
            bytes = wire::BATCH_OVERHEAD;
        }
        bytes += len + 1;
        group.push(item);
    }
    pack_items(&mut group, bytes, &mut out);
    out
}

/// One frame of the queued messages in `group` (which it empties): a `batch` of `bytes` for two or more, the
/// message itself for one.
fn pack_items(group: &mut Vec<&Item>, bytes: usize, out: &mut Vec<String>) {
    match group.as_slice() {
        [] => {}
        [one] => out.push(one.text()),
        items => out.push(wire::batch_with(Source::Relay, bytes, |s| {
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                item.write_to(s);
            }
        })),
    }
    group.clear();
}

/// The frames one queued message goes out as: itself when it fits, else its chunks to a 1.1 client; a 1.0
/// client gets a message over the 1 MiB frame limit replaced by an error naming the limit.
fn frames(text: &str, seq: u64, limit: usize, chunks: bool) -> Vec<String> {
    if text.len() <= limit || (!chunks && text.len() <= wire::HARD_MAX_FRAME_BYTES) {
        return vec![text.to_owned()];
    }
    // Only its id and game are needed, read without decoding the rest (it can be 16 MiB of tiny values).
    let (id, game) = head_of(text).map_or((String::new(), None), |h| {
        (h.id.into_string().unwrap_or_default(), h.game.into_string())
    });
    let refuse = |why: String| {
        vec![
            super::state::respond_error(
                &id,
                game.as_deref(),
                seq,
                Code::ServerError,
                &why,
                json!({"bytes": text.len(), "limit": wire::HARD_MAX_FRAME_BYTES}),
            )
            .to_text(),
        ]
    };
    if !chunks {
        return refuse(format!(
            "the answer is {} bytes, over protocol 1.0's frame limit of {} bytes; an MCP server speaking 1.1 gets it in chunks",
            text.len(),
            wire::HARD_MAX_FRAME_BYTES
        ));
    }
    wire::split(text, &id, Source::Relay, limit).unwrap_or_else(refuse)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// A frame with the clock (of a batch or chunk) and a batch's random id taken out.
    fn comparable(frame: &str) -> Value {
        let mut v: Value = serde_json::from_str(frame).unwrap();
        if v["type"] == "batch" {
            v["id"] = Value::Null;
        }
        if v["type"] == "batch" || v["type"] == "chunk" {
            v["timestamp"] = Value::Null;
        }
        v
    }

    /// The frames as they were written before: each message's text made, then packed by `wire::pack`.
    fn old_frames(batch: &[Item], limit: usize, chunks: bool) -> Vec<String> {
        let mut out = Vec::new();
        let mut group = Vec::new();
        for item in batch {
            let text = item.text();
            if text.len() + wire::BATCH_OVERHEAD + 1 > limit {
                out.extend(wire::pack(std::mem::take(&mut group), Source::Relay, limit));
                out.extend(frames(&text, item.seq, limit, chunks));
            } else {
                group.push(text);
            }
        }
        out.extend(wire::pack(group, Source::Relay, limit));
        out
    }

    #[test]
    fn queued_messages_are_framed_as_wire_pack_frames_them() {
        let mut queue = Queue::new(100_000, usize::MAX);
        let mut n = 0;
        for i in 0..3000usize {
            let pad = "x".repeat((i * 37) % 900);
            let body: Arc<str> = Arc::from(format!(
                r#"{{"version":"1.2","type":"event","id":"e{i}","timestamp":1,"source":"minecraft","payload":{{"p":"{pad}"}}}}"#
            ));
            queue.push_shared(Arc::clone(&body));
            if i % 500 == 7 {
                // An answer queued with its own seq, and one too big to share a frame.
                queue.push(|seq| {
                    format!(
                        r#"{{"seq":{seq},"type":"response","id":"r{i}","big":"{}"}}"#,
                        "y".repeat(70_000)
                    )
                });
                queue.push(|seq| format!(r#"{{"seq":{seq},"type":"response","id":"s{i}"}}"#));
            }
            n += 1;
        }
        let items = queue.after(0, usize::MAX);
        assert!(items.len() > n);
        for item in &items {
            assert_eq!(item.wire_len(), item.text().len());
        }
        for limit in [wire::DEFAULT_MAX_MESSAGE_BYTES, 4096, 2048] {
            for chunks in [true, false] {
                for slice in [&items[..], &items[..1], &items[5..1029], &items[..0]] {
                    let new: Vec<Value> = batch_frames(slice, limit, chunks)
                        .iter()
                        .map(|f| comparable(f))
                        .collect();
                    let old: Vec<Value> = old_frames(slice, limit, chunks)
                        .iter()
                        .map(|f| comparable(f))
                        .collect();
                    assert_eq!(new.len(), old.len(), "limit {limit}");
                    assert!(new == old, "limit {limit}, chunks {chunks}: frames differ");
                }
            }
        }
    }
}
