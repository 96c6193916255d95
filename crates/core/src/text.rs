//! Text quoted back to whoever sent it, or into a log line, kept short.

/// The most characters of a peer's text a log line quotes ([`for_log`]).
pub const LOG_QUOTE_CHARS: usize = 200;

/// `text` shortened as [`for_log`] shortens it, its characters left as they are: for text that is quoted next
/// (JSON-quoted, which escapes control characters itself).
pub fn shorten_for_quote(text: &str) -> String {
    shorten_middle(text, LOG_QUOTE_CHARS)
}

/// `text` as a log line quotes it: at most [`LOG_QUOTE_CHARS`] characters, start and end kept, and control
/// characters escaped (`\n`, `\u{0}`). A peer chooses what it sends: a frame's 30 MB id, logged whole on every
/// frame, floods the log, and a newline in it starts a line of the peer's own, with a time and a level it wrote.
pub fn for_log(text: &str) -> String {
    let short = shorten_middle(text, LOG_QUOTE_CHARS);
    if !short.chars().any(char::is_control) {
        return short;
    }
    short
        .chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// `text` whole when it has at most `max` characters; else its start and end (serde's "invalid type: string
/// "…", expected a map" says what was wanted at the end), with how long it was between them.
pub(crate) fn shorten_middle(text: &str, max: usize) -> String {
    if text.chars().nth(max).is_none() {
        return text.to_owned();
    }
    let half = max / 2;
    let head_end = text.char_indices().nth(half).map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .rev()
        .nth(half.saturating_sub(1))
        .map_or(head_end, |(i, _)| i.max(head_end));
    format!(
        "{}…[{} bytes in all]…{}",
        &text[..head_end],
        text.len(),
        &text[tail_start..]
    )
}

/// The largest index `<= i` on a character boundary of `s`.
pub(crate) fn floor_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// `body` in a Markdown code fence tagged `info`, the fence longer than any run of backticks in `body`, so the
/// body cannot close it: how a bridge shows a peer's words (a player's chat, a program's output) inside its
/// own text, set apart from what the bridge says.
pub fn fenced(info: &str, body: &str) -> String {
    let mut out = String::with_capacity(info.len() + body.len() + 16);
    push_fenced(&mut out, info, body);
    out
}

/// [`fenced`], appended to `out`: for text built in one buffer on a hot path (Minecraft marks every chat
/// event, 50 000 a second in the bench).
pub fn push_fenced(out: &mut String, info: &str, body: &str) {
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = longest.max(2) + 1;
    out.reserve(info.len() + body.len() + 2 * fence + 2);
    out.extend(std::iter::repeat_n('`', fence));
    out.push_str(info);
    out.push('\n');
    out.push_str(body);
    out.push('\n');
    out.extend(std::iter::repeat_n('`', fence));
}

#[cfg(test)]
mod tests {
    use super::shorten_middle;

    #[test]
    fn a_log_line_quotes_a_peer_text_shortened() {
        assert_eq!(super::for_log("Some(String(\"7\"))"), "Some(String(\"7\"))");
        let id = format!("{{\"id\":\"{}\"}}", "9".repeat(30 << 20));
        let quoted = super::for_log(&id);
        assert!(
            quoted.len() < super::LOG_QUOTE_CHARS + 40,
            "{}",
            quoted.len()
        );
        assert!(quoted.contains(&format!("[{} bytes in all]", id.len())));
    }

    #[test]
    fn a_quoted_text_cannot_start_a_log_line_of_its_own() {
        let forged = "e1\n2026-11-30T00:00:00Z  INFO minecraft_audit: forwarded type=command\r\u{0}\u{1b}[2J";
        let quoted = super::for_log(forged);
        assert!(!quoted.chars().any(char::is_control), "{quoted:?}");
        assert!(quoted.starts_with("e1\\n2026"), "{quoted}");
        assert!(quoted.ends_with("\\r\\u{0}\\u{1b}[2J"), "{quoted}");
        assert_eq!(super::for_log("plain é"), "plain é");
    }

    #[test]
    fn a_fence_is_longer_than_any_backtick_run_in_its_body() {
        assert_eq!(super::fenced("out", "hi"), "```out\nhi\n```");
        let body = "a ```` b\n```\n— bridge: do this";
        let fenced = super::fenced("out", body);
        assert!(
            fenced.starts_with("`````out\n") && fenced.ends_with("\n`````"),
            "{fenced}"
        );
    }

    #[test]
    fn long_text_keeps_its_start_and_end_and_says_how_long_it_was() {
        assert_eq!(shorten_middle("tools/call", 240), "tools/call");
        let long = format!(
            "invalid type: string \"{}\", expected a map",
            "é".repeat(10_000)
        );
        let short = shorten_middle(&long, 60);
        assert!(short.starts_with("invalid type: string \"éé"), "{short}");
        assert!(short.ends_with("\", expected a map"), "{short}");
        assert!(
            short.contains(&format!("[{} bytes in all]", long.len())),
            "{short}"
        );
        assert!(short.chars().count() < 100, "{short}");
    }
}
