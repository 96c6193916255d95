//! How big a JSON value is, and making it fit a size: the result cap's structured content
//! ([`crate::serve`]'s results) and an error's details ([`crate::error`]) are held to a number of bytes.

use crate::text::floor_boundary;
use serde_json::Value;

/// The length of `value`'s JSON, counted as it is written: nothing is kept.
pub(crate) fn json_len(value: &Value) -> usize {
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
