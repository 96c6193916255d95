//! The `tools/call` line every client writes, read by hand.
//!
//! serde_json spends about 30 instructions a byte on a short request, most of them in its per-string and
//! per-key machinery: 4.1 k of a no-op call's 14.9 k (bench/README.md). This reader walks the line once,
//! borrowing, and takes only the plainest form of each part: keys and strings with no escape, integer ids,
//! `jsonrpc`, `id`, `method` and `params` each once with nothing beside them, params of `name`, `arguments`
//! and `_meta` alone, `_meta` of the keys [`super::Lean`] reads. Whatever else it meets (an escape, a float,
//! a duplicate or unknown key, `null`, another method, a syntax error) it declines, and the line is read by
//! serde as before, so every error and every unusual form stays what it was. Values it does not read itself
//! (`arguments` other than `{}`, client capabilities and info, the log level) are checked and decoded by
//! serde_json from their own text.
//!
//! What it accepts, it reads as [`super::pre_dispatch`] with `lean` does: the same id, params and `_meta`
//! view (the test below holds the two to it).

use super::Call;
use crate::serve::handler::CallMeta;
#[allow(deprecated)]
use rmcp::model::LoggingLevel;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, JsonObject, NumberOrString, ProgressToken,
};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// `line` (UTF-8, without its BOM) as a `tools/call` read lean, or `None`: serde's turn.
pub(super) fn tools_call(line: &str) -> Option<Call> {
    // A control character is white space between tokens or an error inside a string; clients write none
    // but a CRLF's `\r`, so one pass over the line, without early exit (it vectorises), spares the check
    // in every string.
    let line = line.strip_suffix('\r').unwrap_or(line);
    if line.bytes().fold(false, |control, b| control | (b < 0x20)) {
        return None;
    }
    let mut scan = Scan { text: line, at: 0 };
    let mut jsonrpc = false;
    let mut id = None;
    let mut method = false;
    let mut params = None;
    // Another version or method is serde's: it says what is wrong, or reads the request as rmcp does.
    scan.object(|scan, key| {
        match key {
            "jsonrpc" if !jsonrpc => {
                jsonrpc = true;
                (scan.plain_str()? == "2.0").then_some(())?;
            }
            "id" if id.is_none() => id = Some(scan.id()?),
            "method" if !method => {
                method = true;
                (scan.plain_str()? == "tools/call").then_some(())?;
            }
            "params" if params.is_none() => params = Some(scan.params()?),
            _ => return None,
        }
        Some(())
    })?;
    scan.end()?;
    if !(jsonrpc && method) {
        return None;
    }
    let (params, meta) = params?;
    Some(Call {
        id: id?,
        params,
        meta,
        map: None,
    })
}

/// The deepest value [`Scan::decoded`] reads itself, well inside serde_json's 127 levels less the three
/// (the line, `params`, `_meta`) a value can sit in.
const MAX_DEPTH: usize = 100;

/// How deeply `json` (valid JSON) nests arrays and objects.
fn depth(json: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0, false, false);
    for &b in json.as_bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

struct Scan<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scan<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// White space: only spaces are left in the line ([`tools_call`]).
    fn skip_space(&mut self) {
        while let Some(b' ') = self.bytes().get(self.at) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.bytes().get(self.at).copied()
    }

    fn byte(&mut self, expected: u8) -> Option<()> {
        (self.peek()? == expected).then(|| self.at += 1)
    }

    /// An object, whole: `member` is given each key with the scan at its value, and reads the value; `None`
    /// from it (or a syntax error) declines the line.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.byte(b'{')?;
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            let key = self.plain_str()?;
            self.byte(b':')?;
            member(self, key)?;
            if !self.next_member()? {
                return Some(());
            }
        }
    }

    /// After a member: `true` for a `,` (another follows), `false` for the object's `}`.
    fn next_member(&mut self) -> Option<bool> {
        let more = match self.peek()? {
            b',' => true,
            b'}' => false,
            _ => return None,
        };
        self.at += 1;
        Some(more)
    }

    /// Nothing but white space left.
    fn end(&mut self) -> Option<()> {
        self.skip_space();
        (self.at == self.text.len()).then_some(())
    }

    /// A string with no escape, borrowed (the line holds no control character).
    fn plain_str(&mut self) -> Option<&'a str> {
        self.byte(b'"')?;
        let start = self.at;
        let rest = self.bytes().get(start..)?;
        let len = memchr::memchr2(b'"', b'\\', rest)?;
        if rest[len] != b'"' {
            return None;
        }
        self.at = start + len + 1;
        // Both ends are ASCII bytes, so character boundaries.
        self.text.get(start..start + len)
    }

    /// An integer in its plain form, or a plain string: what rmcp's `NumberOrString` reads it as. A float
    /// form (`1.0`, `1e2`), which rmcp also takes when exact, is declined.
    fn id(&mut self) -> Option<NumberOrString> {
        if self.peek()? == b'"' {
            return Some(NumberOrString::String(self.plain_str()?.into()));
        }
        let start = self.at;
        let digits_from = start + usize::from(self.bytes()[start] == b'-');
        let digits = self.bytes()[digits_from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let after = self.bytes().get(digits_from + digits).copied();
        let leading_zero = digits > 1 && self.bytes()[digits_from] == b'0';
        if digits == 0 || leading_zero || matches!(after, Some(b'.' | b'e' | b'E')) {
            return None;
        }
        self.at = digits_from + digits;
        // Out of i64's range: declined, as rmcp refuses it (or reads it through a float).
        self.text[start..self.at]
            .parse::<i64>()
            .ok()
            .map(NumberOrString::Number)
    }

    /// Any JSON value, checked by serde_json and skipped: its text.
    fn raw(&mut self) -> Option<&'a str> {
        self.skip_space();
        let rest = self.text.get(self.at..)?;
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<&RawValue>();
        let value = values.next()?.ok()?;
        self.at += values.byte_offset();
        Some(value.get())
    }

    /// `{}`, consumed; else nothing is.
    fn empty_object(&mut self) -> bool {
        let start = self.at;
        if self.byte(b'{').is_some() && self.byte(b'}').is_some() {
            return true;
        }
        self.at = start;
        false
    }

    /// An object of plain strings (what a client's info usually is), checked and skipped; else any value, as
    /// serde_json checks it.
    fn skip_info(&mut self) -> Option<()> {
        let start = self.at;
        if self.object(|scan, _| scan.plain_str().map(drop)).is_none() {
            self.at = start;
            self.raw()?;
        }
        Some(())
    }

    /// A value decoded by serde_json from its own text, as the field's type reads it. Declined when nested
    /// deeper than [`MAX_DEPTH`]: read from the whole line, serde_json counts the levels around the value too
    /// and refuses past 127, so near that edge the two readings could differ.
    fn decoded<T: DeserializeOwned>(&mut self) -> Option<T> {
        let raw = self.raw()?;
        if depth(raw) > MAX_DEPTH {
            return None;
        }
        serde_json::from_str(raw).ok()
    }

    /// `params`: the name, the arguments and `_meta`, nothing else.
    fn params(&mut self) -> Option<(CallToolRequestParams, Option<Box<CallMeta>>)> {
        let mut name = None;
        let mut arguments = None;
        let mut meta = None;
        self.object(|scan, key| {
            match key {
                "name" if name.is_none() => name = Some(scan.plain_str()?),
                "arguments" if arguments.is_none() => arguments = Some(scan.arguments()?),
                "_meta" if meta.is_none() => meta = Some(scan.meta()?),
                _ => return None,
            }
            Some(())
        })?;
        let mut params = CallToolRequestParams::new(Cow::Owned(name?.to_owned()));
        params.arguments = arguments;
        Some((params, meta))
    }

    /// `arguments`: an object (`null` and the rest are serde's, which says what is wrong).
    fn arguments(&mut self) -> Option<JsonObject> {
        if self.peek()? != b'{' {
            return None;
        }
        if self.empty_object() {
            return Some(JsonObject::new());
        }
        self.decoded()
    }

    /// `_meta` as [`super::Lean`] reads it: the keys a client usually sends, each once.
    // Logging is deprecated by SEP-2577 but part of both eras we serve (client_link.rs).
    #[allow(deprecated)]
    fn meta(&mut self) -> Option<Box<CallMeta>> {
        let mut meta = Box::<CallMeta>::default();
        let mut info = false;
        self.object(|scan, key| {
            match key {
                "progressToken" if meta.progress.is_none() => {
                    meta.progress = Some(ProgressToken(scan.id()?));
                }
                "io.modelcontextprotocol/protocolVersion" if meta.version.is_none() => {
                    let version = scan.plain_str()?;
                    meta.version = Some(super::protocol_version(Cow::Borrowed(version)).ok()?);
                }
                "io.modelcontextprotocol/clientCapabilities" if meta.capabilities.is_none() => {
                    // `{}` reads as the default: every field is an `Option` serde leaves out.
                    meta.capabilities = Some(if scan.empty_object() {
                        ClientCapabilities::default()
                    } else {
                        scan.decoded()?
                    });
                }
                "io.modelcontextprotocol/logLevel" if meta.log_level.is_none() => {
                    meta.log_level = Some(scan.decoded::<LoggingLevel>()?);
                }
                // Read by nothing on a call's path, as in `Lean`: checked, not kept.
                "io.modelcontextprotocol/clientInfo" if !info => {
                    scan.skip_info()?;
                    info = true;
                }
                _ => return None,
            }
            Some(())
        })?;
        Some(meta)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Decoded, pre_dispatch};
    use super::*;
    use proptest::prelude::*;

    fn shown(call: &Call) -> String {
        format!(
            "{:?} {:?} {:?} {:?}",
            call.id, call.params, call.meta, call.map
        )
    }

    /// What serde's lean pass reads from the line.
    fn by_serde(line: &str) -> Option<String> {
        match pre_dispatch(line, true)? {
            Decoded::Call(call) => Some(shown(&call)),
            Decoded::Message(_) => None,
        }
    }

    fn by_hand(line: &str) -> Option<String> {
        tools_call(line).map(|call| shown(&call))
    }

    #[test]
    fn the_lines_clients_write_are_read_by_hand_as_serde_reads_them() {
        let modern = r#""_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":3}"#;
        let lines = [
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"rmcp","version":"3.9.0"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#.to_owned(),
            // rmcp's client, the Python SDK's and the TypeScript SDK's orders.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":1},"name":"noop","arguments":{}}}"#.to_owned(),
            r#"{"method":"tools/call","params":{"name":"noop","arguments":{"path":"a.js","n":[1,2.5,null]},"_meta":{"progressToken":"t"}},"jsonrpc":"2.0","id":"c-7"}"#.to_owned(),
            r#"{"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": {"name": "é名", "arguments": {}}}"#.to_owned(),
            format!(r#"{{"jsonrpc":"2.0","id":-12,"method":"tools/call","params":{{"name":"x",{modern}}}}}"#),
            r#"{"params":{"name":"x","_meta":{}},"id":9223372036854775807,"method":"tools/call","jsonrpc":"2.0"}"#.to_owned(),
            " { \"jsonrpc\" : \"2.0\" ,\"id\":-9223372036854775808,\"method\":\"tools/call\",\"params\":{\"name\":\"x\",\"_meta\":{\"io.modelcontextprotocol/logLevel\":\"debug\"}} }\r".to_owned(),
        ];
        for line in &lines {
            let hand = by_hand(line);
            assert!(hand.is_some(), "declined: {line}");
            assert_eq!(hand, by_serde(line), "{line}");
        }
    }

    #[test]
    fn depth_counts_levels_outside_strings() {
        for (json, expected) in [
            ("1", 0),
            ("{}", 1),
            (r#"{"a":[[1],[2,{"b":"[{\\"}"}]]}"#, 4),
            (r#"["\\\\",["]"]]"#, 2),
        ] {
            assert_eq!(depth(json), expected, "{json}");
        }
    }

    #[test]
    fn arguments_nested_near_serdes_limit_are_left_to_serde() {
        let nested = |levels: usize| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"x","arguments":{{"a":{}1{}}}}}}}"#,
                "[".repeat(levels),
                "]".repeat(levels)
            )
        };
        let shallow = nested(MAX_DEPTH - 1);
        assert_eq!(by_hand(&shallow), by_serde(&shallow));
        assert!(by_hand(&shallow).is_some());
        for levels in [MAX_DEPTH, 124, 125, 126, 127] {
            assert_eq!(by_hand(&nested(levels)), None, "{levels}");
        }
        // serde reads the line at 124 levels inside `arguments` and refuses it at 125: the scan declines both.
        assert!(by_serde(&nested(124)).is_some());
        assert!(by_serde(&nested(125)).is_none());
    }

    #[test]
    fn anything_unusual_is_left_to_serde() {
        let lines = [
            // Escapes, float ids, other methods and keys, `null`s, answers, repeats, trailing text.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a\"b"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":"\u0041","method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1e2,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":01,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"extra":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","extra":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":null}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":null}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":1,"progressToken":2}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.github.mcp-bridges/maxResultBytes":2048}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/clientCapabilities":null}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}} x"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"a\tb\"}}",
        ];
        for line in lines {
            assert_eq!(by_hand(line), None, "{line}");
        }
    }

    /// One of a part's forms: mostly one the scan reads, else one it must decline (or serde refuses), so the
    /// generated lines mix the two.
    fn part(
        plain: &'static [&'static str],
        unusual: &'static [&'static str],
    ) -> impl Strategy<Value = &'static str> {
        prop_oneof![
            6 => prop::sample::select(plain),
            1 => prop::sample::select(unusual),
        ]
    }

    fn line() -> impl Strategy<Value = String> {
        let id = part(
            &["1", "0", "-0", "-7", "\"a\"", "\"\"", "9223372036854775807"],
            &[
                "007",
                "1.0",
                "2e3",
                "\"\\u00e9\"",
                "null",
                "9223372036854775808",
                "-9223372036854775809",
                "true",
                "1x",
            ],
        );
        let method = part(&["\"tools/call\""], &["\"tools\\/call\"", "\"ping\"", "5"]);
        let jsonrpc = part(&["\"2.0\""], &["\"2.00\"", "2", "\"2\\u002e0\""]);
        let name = part(&["\"noop\"", "\"é\"", "\"\""], &["\"a\\\"b\"", "null", "1"]);
        let arguments = part(
            &[
                "{}",
                "{ }",
                "{\"a\":1}",
                "{\"a\":{\"b\":[true,null,\"\\n\"]}}",
            ],
            &["null", "[]", "{\"a\":1,}", "{\"a\"}"],
        );
        let meta = part(
            &[
                "{}",
                "{\"progressToken\":4}",
                "{\"progressToken\":\"p\"}",
                "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}",
                "{\"io.modelcontextprotocol/protocolVersion\":\"2099-01-01\"}",
                "{\"io.modelcontextprotocol/clientCapabilities\":{\"tasks\":{}}}",
                "{\"io.modelcontextprotocol/clientCapabilities\":{ },\"io.modelcontextprotocol/clientInfo\":{ }}",
                "{\"io.modelcontextprotocol/clientInfo\":{\"name\":\"c\",\"icons\":[{\"src\":\"x\"}]}}",
                "{\"io.modelcontextprotocol/clientInfo\":{\"name\":1,\"version\":\"é\"}}",
                "{\"io.modelcontextprotocol/clientInfo\":{\"name\":\"c\",\"version\":\"1\"},\"progressToken\":2}",
                "{\"io.modelcontextprotocol/logLevel\":\"warning\"}",
            ],
            &[
                "{\"progressToken\":1.5}",
                "{\"progressToken\":null}",
                "{\"io.modelcontextprotocol/protocolVersion\":5}",
                "{\"io.modelcontextprotocol/clientCapabilities\":[]}",
                "{\"io.modelcontextprotocol/clientInfo\":{\"name\":\"c\"},\"io.modelcontextprotocol/clientInfo\":1}",
                "{\"io.modelcontextprotocol/logLevel\":\"loud\"}",
                "{\"progressToken\":1,\"other\":2}",
                "{\"io.modelcontextprotocol/clientInfo\":{\"name\":}}",
                "{\"io.modelcontextprotocol/clientInfo\":{\"name\":\"c\",}}",
                "{\"io.modelcontextprotocol/clientInfo\":{\"name\" \"c\"}}",
                "{\"io.modelcontextprotocol/clientCapabilities\":{\"roots\":5}}",
                "null",
            ],
        );
        // A control character anywhere but a last `\r` leaves the line to serde.
        let space = prop_oneof![20 => Just(""), 3 => Just(" "), 1 => Just("  "), 1 => Just("\t"), 1 => Just("\r")];
        (
            (id, method, jsonrpc, name, arguments, meta),
            (any::<bool>(), any::<bool>(), prop::bool::weighted(0.1)),
            Just(()).prop_perturb(|(), mut rng| rng.random::<u64>()),
            prop::collection::vec(space, 24),
        )
            .prop_map(
                |((id, method, jsonrpc, name, arguments, meta), present, order, spaces)| {
                    let mut params = vec![format!("\"name\":{name}")];
                    if present.0 {
                        params.push(format!("\"arguments\":{arguments}"));
                    }
                    if present.1 {
                        params.push(format!("\"_meta\":{meta}"));
                    }
                    let mut members = vec![
                        format!("\"jsonrpc\":{jsonrpc}"),
                        format!("\"id\":{id}"),
                        format!("\"method\":{method}"),
                        format!("\"params\":{{{}}}", params.join(",")),
                    ];
                    if present.2 {
                        members.push("\"jsonrpc\":\"2.0\"".to_owned());
                    }
                    // A permutation drawn from `order`, and white space between the members.
                    let mut order = order;
                    let mut line = String::from(spaces[0]);
                    line.push('{');
                    let mut at = 1;
                    while !members.is_empty() {
                        let next = members.remove((order % members.len() as u64) as usize);
                        order /= 7;
                        line.push_str(spaces[at % spaces.len()]);
                        line.push_str(&next);
                        line.push_str(spaces[(at + 1) % spaces.len()]);
                        line.push(',');
                        at += 2;
                    }
                    line.pop();
                    line.push('}');
                    line.push_str(spaces[at % spaces.len()]);
                    line
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Whatever the scan reads, serde reads the same; what it declines changes nothing.
        #[test]
        fn what_the_scan_reads_serde_reads_the_same(line in line()) {
            if let Some(hand) = by_hand(&line) {
                prop_assert_eq!(Some(hand), by_serde(&line), "{}", line);
            }
        }
    }
}
