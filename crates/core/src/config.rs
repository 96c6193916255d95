//! Value parsers for command-line flags that also come from environment variables.
//!
//! clap reports a bad value with the flag's name only; a user who set an environment variable needs to see
//! that variable's name and the accepted range, so every parser here names both.

use std::fmt::Display;
use std::str::FromStr;
use std::time::Duration;

/// A parser for an integer in `min..=max`, whose error names `var` and the range.
pub fn ranged<T>(
    var: &'static str,
    min: T,
    max: T,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: FromStr + PartialOrd + Display + Copy + Send + Sync + 'static,
{
    move |raw: &str| {
        let bad = || format!("{var} must be a whole number from {min} to {max}, got {raw:?}");
        let value: T = raw.trim().parse().map_err(|_| bad())?;
        if value < min || value > max {
            return Err(bad());
        }
        Ok(value)
    }
}

/// A parser for a duration in milliseconds in `min_ms..=max_ms`.
pub fn millis(
    var: &'static str,
    min_ms: u64,
    max_ms: u64,
) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync + 'static {
    let parse = ranged(var, min_ms, max_ms);
    move |raw: &str| parse(raw).map(Duration::from_millis)
}

/// A parser for an IP address to bind.
pub fn ip(
    var: &'static str,
) -> impl Fn(&str) -> Result<std::net::IpAddr, String> + Clone + Send + Sync + 'static {
    move |raw: &str| {
        let trimmed = raw.trim();
        let host = if trimmed.eq_ignore_ascii_case("localhost") {
            "127.0.0.1"
        } else {
            trimmed
        };
        host.parse().map_err(|_| {
            format!("{var} must be an IP address such as 127.0.0.1 or 0.0.0.0, got {raw:?}")
        })
    }
}

/// A parser for a secret such as a bearer token: an empty or blank value is refused, because a token nobody
/// can send locks every client out while looking like protection.
pub fn secret(
    var: &'static str,
) -> impl Fn(&str) -> Result<String, String> + Clone + Send + Sync + 'static {
    move |raw: &str| {
        if raw.trim().is_empty() {
            return Err(format!(
                "{var} is set but empty: give it a token, or unset it to serve without one"
            ));
        }
        if raw.trim() != raw {
            return Err(format!(
                "{var} starts or ends with whitespace, which no client would send: remove it"
            ));
        }
        Ok(raw.to_owned())
    }
}

/// `NAME=MS` pairs for per-tool timeouts.
pub(crate) fn tool_timeout(raw: &str) -> Result<(String, Duration), String> {
    const VAR: &str = "MCP_TOOL_TIMEOUTS";
    let bad = || {
        format!("{VAR} entries must look like TOOL=MILLISECONDS with 1 to 3600000 ms, got {raw:?}")
    };
    let (name, ms) = raw.split_once('=').ok_or_else(bad)?;
    let ms: u64 = ms.trim().parse().map_err(|_| bad())?;
    if name.trim().is_empty() || !(1..=3_600_000).contains(&ms) {
        return Err(bad());
    }
    Ok((name.trim().to_owned(), Duration::from_millis(ms)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranged_names_variable_and_range() {
        let p = ranged("MCP_PORT", 0u16, 65535);
        assert_eq!(p("3000"), Ok(3000));
        let e = p("70000").unwrap_err();
        assert!(e.contains("MCP_PORT") && e.contains("0 to 65535"), "{e}");
        assert!(p("abc").unwrap_err().contains("MCP_PORT"));
    }

    #[test]
    fn tool_timeouts_parse() {
        assert_eq!(
            tool_timeout("read_file=2500"),
            Ok(("read_file".into(), Duration::from_millis(2500)))
        );
        for bad in ["read_file", "=5", "x=0", "x=abc", "x=99999999"] {
            assert!(
                tool_timeout(bad).unwrap_err().contains("MCP_TOOL_TIMEOUTS"),
                "{bad}"
            );
        }
    }

    #[test]
    fn secrets_must_not_be_blank() {
        let p = secret("MCP_TOKEN");
        assert_eq!(p("s3cret"), Ok("s3cret".to_owned()));
        for bad in ["", "   ", "\t", " s3cret", "s3cret\n"] {
            assert!(p(bad).unwrap_err().contains("MCP_TOKEN"), "{bad:?}");
        }
    }

    #[test]
    fn ip_accepts_localhost() {
        let p = ip("MCP_HOST");
        assert_eq!(p("localhost").unwrap().to_string(), "127.0.0.1");
        assert!(p("not-an-ip").unwrap_err().contains("MCP_HOST"));
    }
}
