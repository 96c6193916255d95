//! How big a JSON value is, and making it fit a size: the result cap's structured content
//! ([`crate::serve`]'s results), an error's details ([`crate::error`]) and a log message's data
//! ([`crate::tool::ToolCtx::log`]) are held to a number of bytes.

use crate::text::floor_boundary;
use serde_json::{Map, Value};

/// The key shortened data gains ([`shortened`]): how many bytes of JSON it had.
pub(crate) const SHORTENED_KEY: &str = "shortened_from_bytes";

/// The most characters kept of each text by [`shortened`], its start and end.
const TEXT_CHARS: usize = 1_000;

/// The most items kept of each array, and entries of each object, by [`shortened`].
const ITEMS: usize = 64;

/// The length of `value`'s JSON, counted as it is written: nothing is kept.
pub fn json_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value).map_or(0, |()| count.0)
}

/// Shortens the longest strings, then the longest arrays, halving the allowed length until `value` fits in
/// `cap` bytes of JSON or nothing is left to shorten.
pub(crate) fn shrink(value: &mut Value, cap: usize) {
    let mut longest = longest_string(value);
    while json_len(value) > cap && longest > 16 {
        longest /= 2;
        cut_strings(value, longest);
    }
    let mut items = longest_array(value);
    while json_len(value) > cap && items > 0 {
        items /= 2;
        cut_arrays(value, items);
    }
}

fn longest_string(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(longest_string).max().unwrap_or(0),
        Value::Object(map) => map.values().map(longest_string).max().unwrap_or(0),
        _ => 0,
    }
}

fn longest_array(value: &Value) -> usize {
    match value {
        Value::Array(items) => items
            .iter()
            .map(longest_array)
            .max()
            .unwrap_or(0)
            .max(items.len()),
        Value::Object(map) => map.values().map(longest_array).max().unwrap_or(0),
        _ => 0,
    }
}

fn cut_strings(value: &mut Value, max: usize) {
    match value {
        Value::String(s) if s.len() > max => {
            let end = floor_boundary(s, max);
            s.truncate(end);
            s.push('…');
        }
        Value::Array(items) => items.iter_mut().for_each(|v| cut_strings(v, max)),
        Value::Object(map) => map.values_mut().for_each(|v| cut_strings(v, max)),
        _ => {}
    }
}

fn cut_arrays(value: &mut Value, max: usize) {
    match value {
        Value::Array(items) => {
            items.truncate(max);
            items.iter_mut().for_each(|v| cut_arrays(v, max));
        }
        Value::Object(map) => map.values_mut().for_each(|v| cut_arrays(v, max)),
        _ => {}
    }
}

/// `value` within `max` bytes of JSON, or `None` when it already is. Each text keeps its start and end, each
/// array its first [`ITEMS`] items and each object its [`ITEMS`] smallest entries; then the longest texts and
/// arrays are halved until it fits; last, an object keeps the smallest entries that fit. The small facts a
/// bridge adds beside a peer's data (a computer's id, an error's kind) come through as they were, however the
/// peer shaped its part; an object says how large it was at [`SHORTENED_KEY`]. For data that quotes a peer
/// (error details, log data), whose size the peer chooses.
pub(crate) fn shortened(value: &Value, max: usize) -> Option<Value> {
    let bytes = json_len(value);
    if bytes <= max {
        return None;
    }
    // Room for the marker, its number included.
    let budget = max.saturating_sub(SHORTENED_KEY.len() + 32);
    let mut short = trimmed(value);
    shrink(&mut short, budget);
    if json_len(&short) > budget {
        short = match short {
            Value::Object(map) => Value::Object(smallest_that_fit(map, budget)),
            _ => Value::Object(Map::new()),
        };
    }
    if let Value::Object(map) = &mut short {
        map.insert(SHORTENED_KEY.to_owned(), Value::from(bytes));
    }
    Some(short)
}

/// `value` with each text at most [`TEXT_CHARS`] characters and each array and object at most [`ITEMS`]
/// entries, an object's smallest.
fn trimmed(value: &Value) -> Value {
    match value {
        Value::String(text) => Value::String(crate::text::shorten_middle(text, TEXT_CHARS)),
        Value::Array(items) => items.iter().take(ITEMS).map(trimmed).collect(),
        Value::Object(map) if map.len() > ITEMS => {
            let mut sized: Vec<(usize, &String, &Value)> =
                map.iter().map(|(k, v)| (json_len(v), k, v)).collect();
            sized.sort_by_key(|(size, ..)| *size);
            sized.truncate(ITEMS);
            Value::Object(
                sized
                    .into_iter()
                    .map(|(_, k, v)| (k.clone(), trimmed(v)))
                    .collect(),
            )
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| (key.clone(), trimmed(value)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The smallest entries of `map` whose JSON, braces and commas included, fits in `budget` bytes.
fn smallest_that_fit(map: Map<String, Value>, budget: usize) -> Map<String, Value> {
    let mut sized: Vec<(usize, String, Value)> = map
        .into_iter()
        .map(|(k, v)| {
            // `"key":value,`
            let size = json_len(&Value::String(k.clone())) + json_len(&v) + 2;
            (size, k, v)
        })
        .collect();
    sized.sort_by_key(|(size, ..)| *size);
    let mut used = 2;
    let mut kept = Map::new();
    for (size, k, v) in sized {
        if used + size > budget {
            break;
        }
        used += size;
        kept.insert(k, v);
    }
    kept
}
