//! Value parsers for command-line flags, and the one naming rule every bridge's flags follow.
//!
//! **The rule.** A flag is `--kebab-case`; a bridge's own flag starts with the bridge's name,
//! `--<bridge>-<name>` (`--bitburner-game-port`, `--sandbox-vcpus`, the in-process relay's flags included), so
//! bridges mounted together in `serve` can never claim one flag; its environment variable is the flag's name in
//! SCREAMING_SNAKE_CASE (`BITBURNER_GAME_PORT`). The shared MCP flags ([`crate::serve::McpArgs`]) take `MCP_`
//! in front unless they start with it (`--mcp-port` is `MCP_PORT`, `--shutdown-grace` `MCP_SHUTDOWN_GRACE`).
//! Commands that are not MCP servers and are never mounted together (`minecraft-relay`, `debug host`) keep short
//! flags, their variables under the bridge's prefix. A repeatable flag's variable, a comma-separated list, may
//! take a plural `S` (`--mcp-allowed-origin`, `MCP_ALLOWED_ORIGINS`). [`env_name`] computes it; the contract
//! test (`crates/cli/tests/contract.rs`) checks every flag of every bridge against it (prefix included), so a
//! name is typed once, in the flag's `env = "..."`, and the parsers here read it from the flag rather than
//! repeating it. A flag's name from before the prefix is a hidden alias: it still works and
//! [`warn_older_flags`] says once which name to use.
//!
//! **Units.** A duration is a string with its unit, `5s`, `500ms`, `2m`, `1h30m` ([`duration`], parsed by
//! humantime); sizes say theirs in the name (`-bytes`, `-mib`). Flags that took a bare number of milliseconds or
//! seconds under an older name (`--rpc-timeout-ms`, `SANDBOX_IDLE_TIMEOUT_SECS`) keep that name as a hidden
//! alias, read a bare number in the old unit, and warn once that the name or the bare number is deprecated.
//!
//! clap reports a bad value with the flag's name only; a user who set an environment variable needs to see
//! that variable's name and the accepted range, so every parser here names both.

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use clap::{Arg, Command};
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fmt::Display;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

/// The environment variable of flag `--long` under `prefix` (`MCP`, `BITBURNER`, ...): see the module doc.
pub fn env_name(prefix: &str, long: &str) -> String {
    let flag = long.to_ascii_uppercase().replace('-', "_");
    let prefix = prefix.to_ascii_uppercase().replace('-', "_");
    if flag == prefix || flag.starts_with(&format!("{prefix}_")) {
        flag
    } else {
        format!("{prefix}_{flag}")
    }
}

/// Whether `env` is what the rule gives flag `--long` under `prefix`; `repeatable` allows the plural `S`.
pub fn follows_rule(prefix: &str, long: &str, env: &str, repeatable: bool) -> bool {
    let want = env_name(prefix, long);
    env == want || (repeatable && env.strip_suffix('S') == Some(want.as_str()))
}

/// Names already warned about, so each deprecation is said once per process (the command line is built more
/// than once when a config file is read).
static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Prints `message` on stderr (stdout may carry MCP) unless something was already said under `key`.
/// Returns whether it printed.
fn warn_once(key: &str, message: impl FnOnce() -> String) -> bool {
    let mut warned = WARNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !warned.insert(key.to_owned()) {
        return false;
    }
    eprintln!("warning: {}", message());
    true
}

/// Says once that the older variable `old` was read for `new`. The value parsers then say nothing more about
/// that variable (a bare number in it is its old unit, as expected).
pub fn deprecated_env(old: &str, new: &str) {
    let units = if old.ends_with("_MS") || old.ends_with("_SECS") {
        " (it takes a unit: 5s, 500ms; a bare number is still read in the old one)"
    } else {
        ""
    };
    warn_once(old, || {
        format!("{old} is deprecated and will be removed: set {new}{units}")
    });
}

/// How the flag is called in messages: its variable and its long name.
fn describe(arg: Option<&Arg>) -> String {
    let env = arg
        .and_then(Arg::get_env)
        .map(|e| e.to_string_lossy().into_owned());
    let long = arg.and_then(Arg::get_long).map(|l| format!("--{l}"));
    match (env, long) {
        (Some(env), Some(long)) => format!("{env} ({long})"),
        (Some(one), None) | (None, Some(one)) => one,
        (None, None) => "the value".to_owned(),
    }
}

fn invalid(cmd: &Command, arg: Option<&Arg>, what: impl Display) -> clap::Error {
    clap::Error::raw(
        ErrorKind::ValueValidation,
        format!("{} {what}\n", describe(arg)),
    )
    .with_cmd(cmd)
}

fn text<'a>(cmd: &Command, arg: Option<&Arg>, value: &'a OsStr) -> Result<&'a str, clap::Error> {
    value
        .to_str()
        .ok_or_else(|| invalid(cmd, arg, "is not valid UTF-8"))
}

/// The key deprecations of `arg` are said under: its variable (the older one when that is what it reads).
fn warn_key(arg: Option<&Arg>) -> String {
    arg.and_then(Arg::get_env)
        .map(|e| e.to_string_lossy().into_owned())
        .or_else(|| arg.map(|a| a.get_id().to_string()))
        .unwrap_or_default()
}

/// Says once when the command line names `arg` by one of its hidden (older) long names. Returns whether it did.
fn warn_older_flag(arg: Option<&Arg>) -> bool {
    let Some(arg) = arg else { return false };
    let (Some(long), Some(old)) = (arg.get_long(), arg.get_aliases()) else {
        return false;
    };
    let used = std::env::args_os()
        .filter_map(|a| a.into_string().ok())
        .find_map(|a| {
            let name = a.strip_prefix("--")?;
            let name = name.split_once('=').map_or(name, |(n, _)| n);
            old.contains(&name).then(|| name.to_owned())
        });
    let Some(used) = used else { return false };
    let env = arg
        .get_env()
        .map(|e| format!(" ({})", e.to_string_lossy()))
        .unwrap_or_default();
    warn_once(&warn_key(Some(arg)), || {
        format!("--{used} is deprecated and will be removed: use --{long}{env}")
    })
}

/// Says once for each argument of `command` (not its subcommands) that the command line names by an older
/// long name. The value parsers say it as they read a value; this covers every other flag (switches, plain
/// strings), the binary calling it for each command on the path the user ran.
pub fn warn_older_flags(command: &Command) {
    for arg in command.get_arguments() {
        warn_older_flag(Some(arg));
    }
}

/// An integer in `min..=max`; the error names the variable, the flag and the range.
pub fn ranged<T>(min: T, max: T) -> Ranged<T> {
    Ranged { min, max }
}

#[derive(Clone, Copy)]
pub struct Ranged<T> {
    min: T,
    max: T,
}

impl<T> TypedValueParser for Ranged<T>
where
    T: FromStr + PartialOrd + Display + Copy + Send + Sync + 'static,
{
    type Value = T;

    fn parse_ref(&self, cmd: &Command, arg: Option<&Arg>, value: &OsStr) -> Result<T, clap::Error> {
        warn_older_flag(arg);
        let raw = text(cmd, arg, value)?;
        let (min, max) = (self.min, self.max);
        let bad = || {
            invalid(
                cmd,
                arg,
                format!("must be a whole number from {min} to {max}, got {raw:?}"),
            )
        };
        let value: T = raw.trim().parse().map_err(|_| bad())?;
        if value < min || value > max {
            return Err(bad());
        }
        Ok(value)
    }
}

/// The unit a flag's older name took its bare numbers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Millis,
    Secs,
}

impl Unit {
    fn of(self, n: u64) -> Duration {
        match self {
            Self::Millis => Duration::from_millis(n),
            Self::Secs => Duration::from_secs(n),
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            Self::Millis => "ms",
            Self::Secs => "s",
        }
    }
}

/// A duration with its unit (`5s`, `500ms`, `1m30s`; `0` needs none) in `min..=max`. A bare number is read in
/// `legacy`, the unit of the flag's older name, with a warning.
pub fn duration(min: Duration, max: Duration, legacy: Unit) -> DurationParser {
    DurationParser { min, max, legacy }
}

#[derive(Clone, Copy)]
pub struct DurationParser {
    min: Duration,
    max: Duration,
    legacy: Unit,
}

impl DurationParser {
    /// `raw` as a duration; `Err` says what is wrong, to follow the flag's name.
    fn read(&self, raw: &str, bare_warning: impl FnOnce(&str)) -> Result<Duration, String> {
        let raw = raw.trim();
        let range = format!(
            "from {} to {}",
            humantime::format_duration(self.min),
            humantime::format_duration(self.max)
        );
        let value = match raw.parse::<u64>() {
            Ok(n) => {
                if n != 0 {
                    bare_warning(raw);
                }
                self.legacy.of(n)
            }
            Err(_) => humantime::parse_duration(raw).map_err(|e| {
                format!("must be a duration with its unit such as 5s or 500ms, {range}, got {raw:?} ({e})")
            })?,
        };
        if value < self.min || value > self.max {
            return Err(format!("must be {range}, got {raw:?}"));
        }
        Ok(value)
    }
}

impl TypedValueParser for DurationParser {
    type Value = Duration;

    fn parse_ref(
        &self,
        cmd: &Command,
        arg: Option<&Arg>,
        value: &OsStr,
    ) -> Result<Duration, clap::Error> {
        warn_older_flag(arg);
        let raw = text(cmd, arg, value)?;
        let unit = self.legacy.suffix();
        self.read(raw, |raw| {
            warn_once(&warn_key(arg), || {
                format!(
                    "{} {raw:?} has no unit; read as {raw}{unit}. Bare numbers are deprecated: write {raw}{unit}",
                    describe(arg)
                )
            });
        })
        .map_err(|what| invalid(cmd, arg, what))
    }
}

/// An IP address to bind (`localhost` is 127.0.0.1).
pub fn ip() -> IpParser {
    IpParser
}

#[derive(Clone, Copy)]
pub struct IpParser;

impl TypedValueParser for IpParser {
    type Value = std::net::IpAddr;

    fn parse_ref(
        &self,
        cmd: &Command,
        arg: Option<&Arg>,
        value: &OsStr,
    ) -> Result<std::net::IpAddr, clap::Error> {
        warn_older_flag(arg);
        let raw = text(cmd, arg, value)?;
        let trimmed = raw.trim();
        let host = if trimmed.eq_ignore_ascii_case("localhost") {
            "127.0.0.1"
        } else {
            trimmed
        };
        host.parse().map_err(|_| {
            invalid(
                cmd,
                arg,
                format!("must be an IP address such as 127.0.0.1 or 0.0.0.0, got {raw:?}"),
            )
        })
    }
}

/// A secret such as a bearer token: an empty or blank value is refused, because a token nobody can send locks
/// every client out while looking like protection.
pub fn secret() -> SecretParser {
    SecretParser
}

#[derive(Clone, Copy)]
pub struct SecretParser;

impl TypedValueParser for SecretParser {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &Command,
        arg: Option<&Arg>,
        value: &OsStr,
    ) -> Result<String, clap::Error> {
        warn_older_flag(arg);
        let raw = text(cmd, arg, value)?;
        if raw.trim().is_empty() {
            return Err(invalid(
                cmd,
                arg,
                "is set but empty: give it a token, or unset it to serve without one",
            ));
        }
        if raw.trim() != raw {
            return Err(invalid(
                cmd,
                arg,
                "starts or ends with whitespace, which no client would send: remove it",
            ));
        }
        Ok(raw.to_owned())
    }
}

/// `TOOL=DURATION` pairs for per-tool timeouts (a bare number is milliseconds, the older form).
#[derive(Clone, Copy)]
pub(crate) struct ToolTimeout;

impl TypedValueParser for ToolTimeout {
    type Value = (String, Duration);

    fn parse_ref(
        &self,
        cmd: &Command,
        arg: Option<&Arg>,
        value: &OsStr,
    ) -> Result<(String, Duration), clap::Error> {
        let raw = text(cmd, arg, value)?;
        let limits = duration(
            Duration::from_millis(1),
            Duration::from_secs(3600),
            Unit::Millis,
        );
        let parsed = raw
            .split_once('=')
            .filter(|(name, _)| !name.trim().is_empty())
            .ok_or_else(|| "entries must look like TOOL=DURATION (5s, 500ms)".to_owned())
            .and_then(|(name, d)| {
                limits
                    .read(d, |bare| {
                        warn_once(&warn_key(arg), || {
                            format!(
                                "{} {raw:?}: {bare} has no unit; read as {bare}ms. Bare numbers are deprecated: write {bare}ms",
                                describe(arg)
                            )
                        });
                    })
                    .map(|d| (name.trim().to_owned(), d))
                    .map_err(|what| format!("entry {raw:?}: the duration {what}"))
            });
        parsed.map_err(|what| invalid(cmd, arg, what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::builder::ValueParser;

    /// Parses `value` as the flag `--long` (variable `env`, older name `--old`) would.
    fn parse<P>(parser: P, value: &str) -> Result<P::Value, String>
    where
        P: TypedValueParser,
    {
        let arg = Arg::new("x")
            .long("the-flag")
            .env("THE_FLAG")
            .alias("the-flag-ms");
        let cmd = Command::new("t");
        parser
            .parse_ref(&cmd, Some(&arg), OsStr::new(value))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn ranged_names_variable_flag_and_range() {
        assert_eq!(parse(ranged(0u16, 65535), "3000"), Ok(3000));
        let e = parse(ranged(0u16, 65535), "70000").unwrap_err();
        assert!(
            e.contains("THE_FLAG (--the-flag)") && e.contains("0 to 65535"),
            "{e}"
        );
        assert!(
            parse(ranged(0u16, 65535), "abc")
                .unwrap_err()
                .contains("THE_FLAG")
        );
    }

    #[test]
    fn durations_take_units_and_bare_numbers_in_the_older_unit() {
        let ms = duration(
            Duration::from_millis(1),
            Duration::from_secs(600),
            Unit::Millis,
        );
        assert_eq!(parse(ms, "5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse(ms, "500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse(ms, "1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse(ms, "2500"), Ok(Duration::from_millis(2500)));
        let secs = duration(Duration::ZERO, Duration::from_secs(86_400), Unit::Secs);
        assert_eq!(parse(secs, "900"), Ok(Duration::from_secs(900)));
        assert_eq!(parse(secs, "0"), Ok(Duration::ZERO));
        let e = parse(ms, "11m").unwrap_err();
        assert!(
            e.contains("THE_FLAG") && e.contains("from 1ms to 10m"),
            "{e}"
        );
        let e = parse(ms, "5 parsecs").unwrap_err();
        assert!(e.contains("THE_FLAG") && e.contains("with its unit"), "{e}");
        assert!(parse(ms, "0").unwrap_err().contains("from 1ms"));
    }

    #[test]
    fn tool_timeouts_parse() {
        assert_eq!(
            parse(ToolTimeout, "read_file=2500"),
            Ok(("read_file".into(), Duration::from_millis(2500)))
        );
        assert_eq!(
            parse(ToolTimeout, "read_file=3s"),
            Ok(("read_file".into(), Duration::from_secs(3)))
        );
        for bad in ["read_file", "=5s", "x=0", "x=abc", "x=99999999", "x=2h"] {
            assert!(
                parse(ToolTimeout, bad).unwrap_err().contains("THE_FLAG"),
                "{bad}"
            );
        }
    }

    #[test]
    fn secrets_must_not_be_blank() {
        assert_eq!(parse(secret(), "s3cret"), Ok("s3cret".to_owned()));
        for bad in ["", "   ", "\t", " s3cret", "s3cret\n"] {
            assert!(
                parse(secret(), bad).unwrap_err().contains("THE_FLAG"),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn ip_accepts_localhost() {
        assert_eq!(parse(ip(), "localhost").unwrap().to_string(), "127.0.0.1");
        assert!(parse(ip(), "not-an-ip").unwrap_err().contains("THE_FLAG"));
    }

    #[test]
    fn env_names_follow_one_rule() {
        assert_eq!(env_name("MCP", "mcp-port"), "MCP_PORT");
        assert_eq!(env_name("MCP", "shutdown-grace"), "MCP_SHUTDOWN_GRACE");
        assert_eq!(
            env_name("BITBURNER", "rpc-timeout"),
            "BITBURNER_RPC_TIMEOUT"
        );
        assert_eq!(env_name("sandbox", "sandbox-vcpus"), "SANDBOX_VCPUS");
        assert_eq!(
            env_name("MINECRAFT", "minecraft-timeout"),
            "MINECRAFT_TIMEOUT"
        );
        // A flag that merely starts with the prefix's letters is not the prefix.
        assert_eq!(env_name("MCP", "mcpx"), "MCP_MCPX");
        assert!(follows_rule(
            "MCP",
            "mcp-allowed-origin",
            "MCP_ALLOWED_ORIGINS",
            true
        ));
        assert!(!follows_rule(
            "MCP",
            "mcp-allowed-origin",
            "MCP_ALLOWED_ORIGINS",
            false
        ));
        assert!(!follows_rule(
            "COMPUTERCRAFT",
            "link-host",
            "CC_LINK_HOST",
            false
        ));
    }

    #[test]
    fn parsers_fit_clap() {
        // The parsers are used as `value_parser = ...` in derives: they must convert into clap's.
        let _: ValueParser = ValueParser::new(ranged(1u8, 2));
        let _: ValueParser = ValueParser::new(duration(Duration::ZERO, Duration::MAX, Unit::Secs));
    }
}
