//! What decoding a JSON text takes, known before decoding it. A text's size does not bound that: a message of
//! tiny values (`[0,0,0,…]`) decodes to some hundred times its size, and a peer that sends one within every
//! byte limit can still take a laptop's memory. Whoever decodes what a peer sent checks this first.

/// What one JSON value takes while a message is decoded, beyond its text. Measured (debug build, one request
/// at a time, peak RSS): a body of 500 000 values `0,` (1 MB) took 129 MB, 2 MB took 230 MB, some 250 bytes a
/// value: rmcp decodes a message through serde's buffered untagged enums, trying each request type, and a
/// `Value` is 32 bytes in a vector that may have grown to twice what it holds.
pub const DECODED_VALUE_BYTES: usize = 256;

/// serde_json's recursion limit, which every decoder here uses: a value decoded deeper fails there, and one
/// skipped (serde's `IgnoredAny`) is not kept.
pub const MAX_DECODED_DEPTH: usize = 128;

/// A bound on what decoding `body` as JSON takes: its bytes (strings are copied out of it) and
/// [`DECODED_VALUE_BYTES`] for each value, counted by the commas, colons and opening brackets outside strings.
/// Strings are skipped with `memchr`, so a body that is one large string (a file's contents) costs a scan.
/// What lies deeper than [`MAX_DECODED_DEPTH`] levels is not counted, since nothing there is decoded.
pub fn decoded_bytes(body: &[u8]) -> usize {
    let mut values = 1usize;
    let mut depth = 0usize;
    let mut at = 0;
    while let Some(&byte) = body.get(at) {
        match byte {
            b'"' => {
                // The closing quote: the next `"` that no backslash escapes.
                let mut from = at + 1;
                at = loop {
                    match memchr::memchr2(b'"', b'\\', body.get(from..).unwrap_or_default()) {
                        Some(i) if body.get(from + i) == Some(&b'\\') => from += i + 2,
                        Some(i) => break from + i,
                        None => break body.len(),
                    }
                };
            }
            // Past the depth limit nothing is decoded: a value decoded into fails there, and one a decoder skips
            // (serde's `IgnoredAny`, which has no depth limit) is not kept. What follows the deep part, once
            // back within the limit, is decoded and counted: stopping the count at the first deep nest let a body
            // hide two million values behind one ignored field.
            b'[' | b'{' => {
                depth += 1;
                if depth <= MAX_DECODED_DEPTH {
                    values += 1;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b',' | b':' if depth <= MAX_DECODED_DEPTH => values += 1,
            _ => {}
        }
        at += 1;
    }
    body.len()
        .saturating_add(values.saturating_mul(DECODED_VALUE_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_counted_outside_strings_only() {
        let cost = |s: &str| (decoded_bytes(s.as_bytes()) - s.len()) / DECODED_VALUE_BYTES;
        let cases = [
            ("0", 1),
            ("[0,0,0]", 4),
            // The object, its two keys and values, and the array's element (a key is a string to hold too).
            (r#"{"a":1,"b":[2]}"#, 6),
            (r#""a,b:[{""#, 1),
            (r#"["a\",b", 1]"#, 3),
            (r#"["\\", 1]"#, 3),
            (r#""unterminated, [{:"#, 1),
            // Decoding gives up past 128 levels, and so does the count.
            (&"[".repeat(1000), 129),
            (&format!("{}0{}", "[".repeat(128), "]".repeat(128)), 129),
            ("[[0],[0]]", 5),
            // After a nest past the limit (an ignored member, say), what follows is counted again.
            (
                &format!(
                    r#"{{"x":{}{},"a":[0,0]}}"#,
                    "[".repeat(200),
                    "]".repeat(200)
                ),
                134,
            ),
            ("", 1),
        ];
        for (body, values) in cases {
            assert_eq!(cost(body), values, "{body}");
        }
    }

    #[test]
    fn a_large_string_costs_about_its_bytes_and_tiny_values_many_times_theirs() {
        let string = format!("{{\"data\":\"{}\"}}", "x".repeat(1 << 20));
        assert!(decoded_bytes(string.as_bytes()) < string.len() + 4 * DECODED_VALUE_BYTES);
        let tiny = format!("[{}0]", "0,".repeat(1 << 19));
        assert!(decoded_bytes(tiny.as_bytes()) > 20 * tiny.len());
    }
}
