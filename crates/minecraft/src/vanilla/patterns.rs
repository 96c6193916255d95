//! THE table of server log lines the vanilla mode turns into events, and its matcher. Every line format it
//! reads is here and nowhere else; crates/minecraft/tests/fixtures/ holds real lines it is tested on, and
//! docs/protocols/minecraft-rcon-and-log.md says where the formats come from.
//!
//! A log line is a header and a message: vanilla's file `[12:34:56] [Server thread/INFO]: msg`, Paper's
//! console `[12:34:56 INFO]: msg`, (Neo)Forge's `[26Nov2026 12:34:56.789] [Server thread/INFO]
//! [net.minecraft.server.MinecraftServer/]: msg`. The message is what follows the header's first `]: `, and
//! only INFO lines count. A template is matched against the whole message: literal text, and `{name}` holes.
//! A `{player}` hole takes a player name (1 to 16 characters, no spaces, not `<` or `[` first), which is what
//! keeps player-written text from passing as another kind of line: chat is `<name> text`, so it can never
//! read as a join or a death, and a name cannot hold the spaces a forged line would need.

/// What a matched line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Chat,
    Join,
    Leave,
    Death,
    Advancement,
    /// `UUID of player X is ...`, logged before the join: fills `uuid` in join and quit events.
    Uuid,
    /// `Starting minecraft server version X`: `get_server_info`'s version.
    Version,
}

/// One row: the message template, what it means, and for deaths the damage type it stands for (vanilla's
/// `death.attack.*` / `death.fell.*` keys of en_us.json, named as the game's damage type ids); for
/// advancements the frame (`task`, `challenge`, `goal`).
#[derive(Debug, Clone, Copy)]
pub struct Pattern {
    pub kind: Kind,
    pub template: &'static str,
    pub tag: &'static str,
}

const fn p(kind: Kind, template: &'static str, tag: &'static str) -> Pattern {
    Pattern {
        kind,
        template,
        tag,
    }
}

use Kind::*;

/// Tried in order; the first match wins, so a longer form comes before the shorter one it extends.
pub static PATTERNS: &[Pattern] = &[
    // Chat. `[Not Secure]` marks a message without a chat signature (1.19.1+).
    p(Chat, "<{player}> {message}", ""),
    p(Chat, "[Not Secure] <{player}> {message}", ""),
    // Joins and leaves.
    p(Join, "{player} joined the game", ""),
    p(
        Join,
        "{player} (formerly known as {old}) joined the game",
        "",
    ),
    p(Leave, "{player} left the game", ""),
    // Advancements: task, challenge, goal frames.
    p(
        Advancement,
        "{player} has made the advancement [{advancement}]",
        "task",
    ),
    p(
        Advancement,
        "{player} has completed the challenge [{advancement}]",
        "challenge",
    ),
    p(
        Advancement,
        "{player} has reached the goal [{advancement}]",
        "goal",
    ),
    // Facts for the other events and tools.
    p(Uuid, "UUID of player {player} is {uuid}", ""),
    p(Version, "Starting minecraft server version {version}", ""),
    // Deaths (en_us.json `death.*`), with a killer (`%2$s`) and an item (`%3$s`) where the message has them.
    p(
        Death,
        "{player} was slain by {killer} using {item}",
        "mob_attack",
    ),
    p(Death, "{player} was slain by {killer}", "mob_attack"),
    p(
        Death,
        "{player} was shot by a skull from {killer}",
        "wither_skull",
    ),
    p(Death, "{player} was shot by {killer} using {item}", "arrow"),
    p(Death, "{player} was shot by {killer}", "arrow"),
    p(
        Death,
        "{player} was fireballed by {killer} using {item}",
        "fireball",
    ),
    p(Death, "{player} was fireballed by {killer}", "fireball"),
    p(
        Death,
        "{player} was pummeled by {killer} using {item}",
        "thrown",
    ),
    p(Death, "{player} was pummeled by {killer}", "thrown"),
    p(
        Death,
        "{player} was impaled by {killer} with {item}",
        "trident",
    ),
    p(Death, "{player} was impaled by {killer}", "trident"),
    p(
        Death,
        "{player} was smashed by {killer} with {item}",
        "mace_smash",
    ),
    p(Death, "{player} was smashed by {killer}", "mace_smash"),
    p(Death, "{player} was killed by magic", "magic"),
    p(
        Death,
        "{player} was killed by {killer} using magic",
        "indirect_magic",
    ),
    p(
        Death,
        "{player} was killed by {killer} using {item}",
        "indirect_magic",
    ),
    p(Death, "{player} was killed by even more magic", "magic"),
    p(
        Death,
        "{player} was killed while trying to hurt {killer}",
        "thorns",
    ),
    p(
        Death,
        "{player} was killed by {item} while trying to hurt {killer}",
        "thorns",
    ),
    p(
        Death,
        "{player} was killed by [Intentional Game Design]",
        "bad_respawn_point",
    ),
    p(Death, "{player} was killed by {killer}", "generic_kill"),
    p(Death, "{player} was killed", "generic_kill"),
    p(
        Death,
        "{player} was blown up by {killer} using {item}",
        "player_explosion",
    ),
    p(
        Death,
        "{player} was blown up by {killer}",
        "player_explosion",
    ),
    p(Death, "{player} blew up", "explosion"),
    p(
        Death,
        "{player} hit the ground too hard while trying to escape {killer}",
        "fall",
    ),
    p(Death, "{player} hit the ground too hard", "fall"),
    p(Death, "{player} fell from a high place", "fall"),
    p(Death, "{player} fell off a ladder", "fall"),
    p(Death, "{player} fell off some vines", "fall"),
    p(Death, "{player} fell off some weeping vines", "fall"),
    p(Death, "{player} fell off some twisting vines", "fall"),
    p(Death, "{player} fell off scaffolding", "fall"),
    p(Death, "{player} fell while climbing", "fall"),
    p(Death, "{player} fell out of the water", "fall"),
    p(
        Death,
        "{player} was doomed to fall by {killer} using {item}",
        "fall",
    ),
    p(Death, "{player} was doomed to fall by {killer}", "fall"),
    p(Death, "{player} was doomed to fall", "fall"),
    p(
        Death,
        "{player} fell too far and was finished by {killer} using {item}",
        "fall",
    ),
    p(
        Death,
        "{player} fell too far and was finished by {killer}",
        "fall",
    ),
    p(
        Death,
        "{player} was impaled on a stalagmite while fighting {killer}",
        "stalagmite",
    ),
    p(Death, "{player} was impaled on a stalagmite", "stalagmite"),
    p(
        Death,
        "{player} was skewered by a falling stalactite while fighting {killer}",
        "falling_stalactite",
    ),
    p(
        Death,
        "{player} was skewered by a falling stalactite",
        "falling_stalactite",
    ),
    p(
        Death,
        "{player} was squashed by a falling anvil while fighting {killer}",
        "falling_anvil",
    ),
    p(
        Death,
        "{player} was squashed by a falling anvil",
        "falling_anvil",
    ),
    p(
        Death,
        "{player} was squashed by a falling block while fighting {killer}",
        "falling_block",
    ),
    p(
        Death,
        "{player} was squashed by a falling block",
        "falling_block",
    ),
    p(Death, "{player} went up in flames", "in_fire"),
    p(
        Death,
        "{player} walked into fire while fighting {killer}",
        "in_fire",
    ),
    p(Death, "{player} burned to death", "on_fire"),
    p(
        Death,
        "{player} was burned to a crisp while fighting {killer} wielding {item}",
        "on_fire",
    ),
    p(
        Death,
        "{player} was burned to a crisp while fighting {killer}",
        "on_fire",
    ),
    p(
        Death,
        "{player} tried to swim in lava to escape {killer}",
        "lava",
    ),
    p(Death, "{player} tried to swim in lava", "lava"),
    p(
        Death,
        "{player} walked into the danger zone due to {killer}",
        "hot_floor",
    ),
    p(Death, "{player} discovered the floor was lava", "hot_floor"),
    p(
        Death,
        "{player} was struck by lightning while fighting {killer}",
        "lightning_bolt",
    ),
    p(Death, "{player} was struck by lightning", "lightning_bolt"),
    p(
        Death,
        "{player} drowned while trying to escape {killer}",
        "drown",
    ),
    p(Death, "{player} drowned", "drown"),
    p(
        Death,
        "{player} died from dehydration while trying to escape {killer}",
        "dry_out",
    ),
    p(Death, "{player} died from dehydration", "dry_out"),
    p(
        Death,
        "{player} suffocated in a wall while fighting {killer}",
        "in_wall",
    ),
    p(Death, "{player} suffocated in a wall", "in_wall"),
    p(Death, "{player} was squished too much", "cramming"),
    p(Death, "{player} was squashed by {killer}", "cramming"),
    p(
        Death,
        "{player} walked into a cactus while trying to escape {killer}",
        "cactus",
    ),
    p(Death, "{player} was pricked to death", "cactus"),
    p(
        Death,
        "{player} was poked to death by a sweet berry bush while trying to escape {killer}",
        "sweet_berry_bush",
    ),
    p(
        Death,
        "{player} was poked to death by a sweet berry bush",
        "sweet_berry_bush",
    ),
    p(
        Death,
        "{player} was stung to death by {killer} using {item}",
        "sting",
    ),
    p(Death, "{player} was stung to death by {killer}", "sting"),
    p(Death, "{player} was stung to death", "sting"),
    p(
        Death,
        "{player} starved to death while fighting {killer}",
        "starve",
    ),
    p(Death, "{player} starved to death", "starve"),
    p(Death, "{player} froze to death", "freeze"),
    p(Death, "{player} was frozen to death by {killer}", "freeze"),
    p(
        Death,
        "{player} withered away while fighting {killer}",
        "wither",
    ),
    p(Death, "{player} withered away", "wither"),
    p(
        Death,
        "{player} experienced kinetic energy while trying to escape {killer}",
        "fly_into_wall",
    ),
    p(
        Death,
        "{player} experienced kinetic energy",
        "fly_into_wall",
    ),
    p(
        Death,
        "{player} went off with a bang due to a firework fired from {item} by {killer}",
        "fireworks",
    ),
    p(
        Death,
        "{player} went off with a bang while fighting {killer}",
        "fireworks",
    ),
    p(Death, "{player} went off with a bang", "fireworks"),
    p(
        Death,
        "{player} was roasted in dragon's breath by {killer}",
        "dragon_breath",
    ),
    p(
        Death,
        "{player} was roasted in dragon's breath",
        "dragon_breath",
    ),
    p(
        Death,
        "{player} was obliterated by a sonically-charged shriek while trying to escape {killer} wielding {item}",
        "sonic_boom",
    ),
    p(
        Death,
        "{player} was obliterated by a sonically-charged shriek while trying to escape {killer}",
        "sonic_boom",
    ),
    p(
        Death,
        "{player} was obliterated by a sonically-charged shriek",
        "sonic_boom",
    ),
    p(Death, "{player} fell out of the world", "out_of_world"),
    p(
        Death,
        "{player} didn't want to live in the same world as {killer}",
        "out_of_world",
    ),
    p(
        Death,
        "{player} left the confines of this world while fighting {killer}",
        "outside_border",
    ),
    p(
        Death,
        "{player} left the confines of this world",
        "outside_border",
    ),
    p(Death, "{player} died because of {killer}", "generic"),
    p(Death, "{player} died", "generic"),
];

/// A matched line: the row and its holes' values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    pub kind: Kind,
    pub tag: &'static str,
    pub template: &'static str,
    pub fields: Vec<(&'static str, String)>,
}

impl Matched {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The message of an INFO log line, or `None` for other levels and lines without a header (stack traces,
/// continuation lines).
pub fn message_of(line: &str) -> Option<&str> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    if !line.starts_with('[') {
        return None;
    }
    // The header is short; a `]: ` far into the line is part of someone's message.
    let end = line.find("]: ").filter(|&i| i < 200)?;
    let header = &line[..end + 1];
    let info = header.contains("/INFO]") || header.contains(" INFO]");
    info.then(|| &line[end + 3..])
}

/// The first row matching `message` (a log line's message, see [`message_of`]).
pub fn match_message(message: &str) -> Option<Matched> {
    PATTERNS.iter().find_map(|row| {
        let fields = match_template(row.template, message)?;
        Some(Matched {
            kind: row.kind,
            tag: row.tag,
            template: row.template,
            fields,
        })
    })
}

/// [`match_message`] of a whole log line.
pub fn match_line(line: &str) -> Option<Matched> {
    match_message(message_of(line)?)
}

/// A player name as the game allows it: 1 to 16 characters, none of them whitespace or control.
pub fn is_player_name(s: &str) -> bool {
    let n = s.chars().count();
    (1..=16).contains(&n)
        && !s.starts_with(['<', '['])
        && s.chars().all(|c| !c.is_whitespace() && !c.is_control())
}

fn hole_ok(name: &str, value: &str) -> bool {
    match name {
        "player" | "old" => is_player_name(value),
        "uuid" => value.len() == 36 && value.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'),
        _ => !value.is_empty(),
    }
}

enum Seg<'a> {
    Lit(&'a str),
    Hole(&'a str),
}

fn segments(template: &str) -> Vec<Seg<'_>> {
    let mut out = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        match rest.find('{') {
            Some(0) => {
                let close = rest.find('}').unwrap_or(rest.len() - 1);
                out.push(Seg::Hole(&rest[1..close]));
                rest = &rest[close + 1..];
            }
            Some(i) => {
                out.push(Seg::Lit(&rest[..i]));
                rest = &rest[i..];
            }
            None => {
                out.push(Seg::Lit(rest));
                rest = "";
            }
        }
    }
    out
}

/// Matches the whole of `s`. A hole ends at the first occurrence of the literal after it, except before the
/// template's last literal, which must end `s` (so `[Stone Age]`'s `]` is the line's last character).
fn match_template(template: &'static str, s: &str) -> Option<Vec<(&'static str, String)>> {
    let segs = segments(template);
    let mut fields = Vec::new();
    let mut pos = 0;
    let mut i = 0;
    while i < segs.len() {
        match segs[i] {
            Seg::Lit(lit) => {
                if !s[pos..].starts_with(lit) {
                    return None;
                }
                pos += lit.len();
                i += 1;
            }
            Seg::Hole(name) => {
                let value = match segs.get(i + 1) {
                    None => {
                        let v = &s[pos..];
                        pos = s.len();
                        i += 1;
                        v
                    }
                    Some(Seg::Lit(lit)) => {
                        let last = i + 2 == segs.len();
                        let at = if last {
                            s[pos..].strip_suffix(lit).map(str::len)?
                        } else {
                            s[pos..].find(lit)?
                        };
                        let v = &s[pos..pos + at];
                        pos += at + lit.len();
                        i += 2;
                        v
                    }
                    // Two holes side by side are not in the table.
                    Some(Seg::Hole(_)) => return None,
                };
                if !hole_ok(name, value) {
                    return None;
                }
                fields.push((name, value.to_owned()));
            }
        }
    }
    (pos == s.len()).then_some(fields)
}
