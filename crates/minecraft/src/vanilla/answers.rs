//! Reading vanilla's RCON answers (the en_us.json texts of `list`, `data get entity`, `tp`, `give`,
//! `time query`, `tick query`, Paper's `tps`) into the protocol's models. Each parser names the answer it
//! expects; tests feed them answers in the server's own words.

use crate::models::ItemStack;

/// Answer texts that mean the target was not there.
pub const NOT_FOUND: &[&str] = &[
    "No entity was found",
    "No player was found",
    "No targets matched selector",
];

/// Beginnings of answers that mean the command failed (commands.* errors, the parser's).
pub const FAILURES: &[&str] = &[
    "Unknown or incomplete command",
    "Incorrect argument for command",
    "Unknown item",
    "Unknown block",
    "Unknown entity",
    "Unknown function",
    "Unknown dimension",
    "Invalid ",
    "Expected ",
    "No entity was found",
    "No player was found",
    "No targets matched selector",
    "Only one entity is allowed",
    "Only one player is allowed",
    "Can't ",
    "Unable to ",
    "That position is not loaded",
    "That position is out of this world",
    "You do not have permission",
    "I'm sorry, but you do not have permission",
    "Error executing: ",
    "Unknown command",
];

/// Paper and Spigot colour their answers with `§x` codes; the text without them.
pub fn strip_colors(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '§' {
            chars.next();
        } else {
            out.push(c);
        }
    }
    out
}

pub fn is_not_found(answer: &str) -> bool {
    let a = answer.trim_start();
    NOT_FOUND.iter().any(|p| a.starts_with(p))
}

pub fn is_failure(answer: &str) -> bool {
    let a = answer.trim_start();
    FAILURES.iter().any(|p| a.starts_with(p))
}

/// `list`: `There are 2 of a max of 20 players online: Steve, Alex` (vanilla), or Bukkit's `There are 2/20
/// players online:` with the names after. (online, max, names).
pub fn parse_list(answer: &str) -> Option<(u32, u32, Vec<String>)> {
    let a = strip_colors(answer);
    let rest = a.trim_start().strip_prefix("There are ")?;
    let (counts, names) = rest.split_once(':').unwrap_or((rest, ""));
    let nums: Vec<u32> = counts
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    let (&online, &max) = (nums.first()?, nums.get(1)?);
    let names = names
        .split([',', '\n'])
        .map(str::trim)
        // Bukkit groups names by rank: `default: Steve, Alex`.
        .map(|n| n.rsplit_once(": ").map_or(n, |(_, n)| n))
        .filter(|n| super::patterns::is_player_name(n))
        .map(str::to_owned)
        .collect();
    Some((online, max, names))
}

/// `data get entity <name> <path>`: `Steve has the following entity data: <SNBT>`; the SNBT.
pub fn entity_data(answer: &str) -> Option<&str> {
    answer
        .split_once("has the following entity data: ")
        .map(|(_, v)| v.trim())
}

/// An SNBT number (`20.0f`, `3b`, `-12.5d`, `7`) as f64.
pub fn snbt_number(v: &str) -> Option<f64> {
    let v = v.trim();
    let v = v
        .strip_suffix(['b', 'B', 's', 'S', 'l', 'L', 'f', 'F', 'd', 'D'])
        .unwrap_or(v);
    v.parse::<f64>().ok().filter(|n| n.is_finite())
}

/// An SNBT string (`"minecraft:overworld"`, `'x'`, or bare) without its quotes.
pub fn snbt_string(v: &str) -> String {
    let v = v.trim();
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|x| x.strip_suffix(q)) {
            return inner
                .replace(&format!("\\{q}"), &q.to_string())
                .replace("\\\\", "\\");
        }
    }
    v.to_owned()
}

/// `[-3.5d, 64.0d, 12.25d]` → (x, y, z).
pub fn snbt_pos(v: &str) -> Option<(f64, f64, f64)> {
    let inner = v.trim().strip_prefix('[')?.strip_suffix(']')?;
    let mut it = inner.split(',').map(snbt_number);
    let (x, y, z) = (it.next()??, it.next()??, it.next()??);
    Some((x, y, z))
}

/// `[I; 1115170546, 1151141409, -1610006422, -1056908357]` (the player's UUID as four ints) → the dashed
/// UUID text.
pub fn snbt_uuid(v: &str) -> Option<String> {
    let inner = v.trim().strip_prefix("[I;")?.strip_suffix(']')?;
    let ints: Vec<i32> = inner
        .split(',')
        .map(|s| s.trim().parse().ok())
        .collect::<Option<_>>()?;
    if ints.len() != 4 {
        return None;
    }
    let hex: String = ints.iter().map(|i| format!("{:08x}", *i as u32)).collect();
    Some(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}

/// `playerGameType` → its name.
pub fn game_mode(n: f64) -> &'static str {
    match n as i64 {
        0 => "survival",
        1 => "creative",
        2 => "adventure",
        3 => "spectator",
        _ => "unknown",
    }
}

/// The top-level `key: value` pairs of one SNBT compound `{...}` (values raw, nested ones whole).
fn compound_entries(text: &str) -> Vec<(String, String)> {
    let inner = text
        .trim()
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .unwrap_or("");
    split_top(inner)
        .into_iter()
        .filter_map(|pair| {
            let (k, v) = pair.split_once(':')?;
            Some((snbt_string(k), v.trim().to_owned()))
        })
        .collect()
}

/// Splits at commas outside brackets and quotes.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut quote, mut escaped, mut start) = (0i32, None::<char>, false, 0);
    for (i, c) in s.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = s[start..].trim();
    if !last.is_empty() {
        out.push(last);
    }
    out
}

/// `Inventory`: `[{count: 64, Slot: 0b, id: "minecraft:diamond"}, ...]` (1.20.5+), or `Count: 64b` before.
pub fn snbt_inventory(v: &str) -> Option<Vec<ItemStack>> {
    let inner = v.trim().strip_prefix('[')?.strip_suffix(']')?;
    Some(
        split_top(inner)
            .into_iter()
            .filter_map(|item| {
                let entries = compound_entries(item);
                let get = |k: &str| {
                    entries
                        .iter()
                        .find(|(key, _)| key == k)
                        .map(|(_, v)| v.as_str())
                };
                let id = snbt_string(get("id")?);
                let count = get("count")
                    .or_else(|| get("Count"))
                    .and_then(snbt_number)
                    .unwrap_or(1.0);
                Some(ItemStack {
                    item_type: id,
                    quantity: count.max(0.0) as u32,
                    display_name: None,
                })
            })
            .collect(),
    )
}

/// `tick query` (1.20.3+): `Target tick rate: 20.0 per second.` and `Average time per tick: 1.2ms`; Paper's
/// `tps`: `TPS from last 1m, 5m, 15m: 20.0, ...`. Ticks per second now.
pub fn parse_tps(answer: &str) -> Option<f64> {
    let a = strip_colors(answer);
    if let Some((_, rest)) = a.split_once("TPS from last 1m, 5m, 15m:") {
        let first = rest.split(',').next()?.trim().trim_start_matches('*');
        return first.parse().ok();
    }
    let number_after = |key: &str| -> Option<f64> {
        let (_, rest) = a.split_once(key)?;
        let n: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        n.parse().ok()
    };
    let target = number_after("Target tick rate:")?;
    let mspt = number_after("Average time per tick:")?;
    Some(if mspt > 0.0 {
        target.min(1000.0 / mspt)
    } else {
        target
    })
}

/// `time query daytime`: `The time is 6000`.
pub fn parse_time(answer: &str) -> Option<f64> {
    answer
        .trim()
        .strip_prefix("The time is ")?
        .trim()
        .parse()
        .ok()
}
