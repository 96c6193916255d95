//! What the game answered, as the agent should see it: replies parsed into the tool's type without copying
//! them, and the game's terse errors given a hint that says what to do.

use crate::wire::Method;
use bridge_core::{ErrorCode, ToolError};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::io::Write;

/// How much of an unexpected reply an error shows.
const SHOWN_BYTES: usize = 200;

/// Moves the game's answer into `T` (strings are moved, not copied: a reply can be several MB). An answer of
/// another shape is `E_REMOTE` showing its first bytes.
pub fn parse<T: DeserializeOwned>(method: Method, value: Value) -> Result<T, ToolError> {
    let shown = preview(&value, SHOWN_BYTES);
    serde_json::from_value(value).map_err(|e| {
        ToolError::remote(format!(
            "the game answered {} with an unexpected value ({e}): {shown}",
            method.name()
        ))
    })
}

/// The answer was not a string where one was expected.
pub fn expect_string(method: Method, value: Value) -> Result<String, ToolError> {
    parse(method, value)
}

/// The first `max` bytes of `value` as JSON, cut at a character boundary. Serialises no more than that, so
/// showing a slice of an 8 MB reply costs 200 bytes.
pub fn preview(value: &Value, max: usize) -> String {
    let mut out = Bounded {
        buf: Vec::with_capacity(max.min(4096)),
        max,
    };
    // Stopping early is the point: the error only says the buffer is full.
    let _ = serde_json::to_writer(&mut out, value);
    let valid = match std::str::from_utf8(&out.buf) {
        Ok(text) => text.len(),
        Err(e) => e.valid_up_to(),
    };
    out.buf.truncate(valid);
    String::from_utf8(out.buf).unwrap_or_default()
}

struct Bounded {
    buf: Vec<u8>,
    max: usize,
}

impl Write for Bounded {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let room = self.max - self.buf.len();
        if room == 0 {
            return Err(std::io::Error::other("preview full"));
        }
        let take = room.min(data.len());
        self.buf.extend_from_slice(&data[..take]);
        Ok(take)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A specific hint for the game's error texts that say too little (`docs/protocols/bitburner.md` §3.1); other
/// errors keep theirs. The message stays the game's, verbatim.
pub fn explain(method: Method, e: ToolError) -> ToolError {
    if e.code() != ErrorCode::Remote {
        return e;
    }
    let message = e.message();
    let hint = if message == "Ram cost could not be calculated"
        || message.starts_with("Cannot calculate RAM usage of an invalid script")
    {
        "the script has a syntax error, or imports a file that is not on that server: fix the syntax, write \
         every file it imports to the same server (list_files shows what is there), then call calculate_ram again"
    } else if message == "Server hostname invalid" || message.starts_with("Invalid hostname") {
        "no server has that hostname or IP: call get_all_servers for the list (names are case-sensitive), \
         or leave `server` out for home"
    } else if message == "File doesn't exist" || message.starts_with("File does not exist") {
        "no such file on that server: call list_files to see its files (paths have no leading `/`)"
    } else if message.starts_with("Invalid file extension") {
        "this game version does not store that extension: .ts/.tsx/.jsx need Bitburner 2.7.0, .css 3.0.0; \
         call status to see which version is connected"
    } else if message.starts_with("Cannot delete a script that is currently running") {
        "ask the player to kill the script first (or `kill` it in the game's terminal), then delete it"
    } else if method == Method::CalculateRam
        && (message.contains("not a script") || message.starts_with("Filename isn't a script"))
    {
        "calculate_ram needs a script (.js .jsx .ts .tsx .script), not a text file"
    } else if (message.starts_with("Script ") || message.starts_with("Text file "))
        && message.ends_with(" not found.")
    {
        "no such file on that server, so nothing was deleted: call list_files to see its files (paths have no \
         leading `/`)"
    } else if message == "Misses parameters" || message == "Message misses parameters" {
        "the game did not find the arguments it expects: this bridge always sends them, so the game is a \
         version the bridge does not know; call status, and update the game (or the bridge)"
    } else if message.starts_with("Invalid file path") || message == "Invalid filename" {
        "the game refused the file name: use a path like `dir/name.js` (no spaces, none of * ? [ ] ! \\ ~ | # \" ', \
         no `..` above the root); call list_files to see the names on that server"
    } else {
        return e;
    };
    e.with_hint(hint)
}

/// A write or delete the game did not confirm in time may still happen: the game applies requests in order
/// once it resumes. Says so, and how to check, instead of inviting a blind retry.
pub fn unconfirmed(method: Method, server: &str, path: &str, e: ToolError) -> ToolError {
    if e.code() != ErrorCode::Timeout {
        return e;
    }
    let (what, check) = match method {
        Method::DeleteFile => (
            "the delete",
            format!("call list_files (server `{server}`) to see whether `{path}` is still there"),
        ),
        _ => (
            "the write",
            format!(
                "call read_file for `{path}` on `{server}` and compare it with what you wrote before writing again"
            ),
        ),
    };
    let message = format!(
        "{}; {what} may still have been applied (the game applies it when it resumes)",
        e.message()
    );
    let details = e.details().clone();
    ToolError::timeout(message)
        .with_hint(format!(
            "{check}; if the game is paused or frozen, call `status` and check the game window first"
        ))
        .with_details(details)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_preview_never_splits_a_character() {
        // `"` then 198 ASCII bytes puts the two bytes of `é` at 199..201: a byte cut at 200 would split it.
        let text = format!("{}é tail", "a".repeat(198));
        let shown = preview(&json!(text), 200);
        assert_eq!(shown.len(), 199);
        assert!(shown.ends_with('a'));
        let all_multibyte = preview(&json!("ééééé".repeat(100)), 200);
        assert!(all_multibyte.len() <= 200 && all_multibyte.ends_with('é'));
    }

    #[test]
    fn an_unexpected_reply_with_multibyte_text_is_an_error_not_a_panic() {
        let reply = json!({"weird": format!("{}é", "a".repeat(188))});
        let e = parse::<Vec<String>>(Method::GetFileNames, reply).err();
        assert_eq!(e.as_ref().map(ToolError::code), Some(ErrorCode::Remote));
        assert!(e.is_some_and(|e| e.message().contains("getFileNames")));
    }

    #[test]
    fn terse_game_errors_get_a_specific_hint() {
        let cases = [
            ("Ram cost could not be calculated", "syntax error"),
            (
                "Cannot calculate RAM usage of an invalid script. Filename: a.js",
                "imports",
            ),
            ("Server hostname invalid", "get_all_servers"),
            ("Invalid hostname: nowhere", "get_all_servers"),
            ("Invalid file extension", "2.7.0"),
        ];
        for (message, needle) in cases {
            let e = explain(Method::CalculateRam, ToolError::remote(message));
            assert_eq!(e.message(), message, "the game's words stay verbatim");
            assert!(e.hint().contains(needle), "{message}: {}", e.hint());
        }
        let other = explain(Method::GetFile, ToolError::remote("Failed"));
        assert_eq!(other.hint(), ToolError::remote("Failed").hint());
    }

    #[test]
    fn an_unconfirmed_write_says_it_may_have_happened() {
        let e = unconfirmed(
            Method::PushFile,
            "home",
            "a.js",
            ToolError::timeout("the game did not answer within 5 ms"),
        );
        assert!(e.message().contains("may still have been applied"));
        assert!(e.hint().contains("read_file") && !e.hint().contains("retry"));
        let d = unconfirmed(Method::DeleteFile, "home", "a.js", ToolError::timeout("x"));
        assert!(d.hint().contains("list_files"));
    }
}
