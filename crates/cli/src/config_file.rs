//! `serve --config FILE`: the same settings as the command line, in TOML.
//!
//! ```toml
//! bridges = ["bitburner", "computercraft"]
//! [mcp]
//! http = true
//! port = 3000
//! tool-timeout = ["bitburner/read_file=2000"]
//! [bitburner]
//! game-port = 12525
//! [computercraft]
//! link-port = 3001
//! ```
//!
//! A key is a long flag's name with the table's name left out in front: `[bitburner] game-port` is
//! `--bitburner-game-port`, `[mcp] port` is `--mcp-port`, `[mcp] http` is `--http`. The whole flag name
//! (`bitburner-game-port`) and an older name (`rpc-timeout-ms`) are read too. The file becomes command-line flags placed before the real ones, so every
//! value goes through the same parser as its flag (and its error names the environment variable and range),
//! and a flag on the command line wins over the file.

use bridge_core::bridge::DynEntry;
use bridge_core::serve::McpArgs;
use clap::error::ErrorKind;
use std::ffi::OsString;
use std::path::Path;
use toml::{Table, Value};

/// The table of the MCP flags.
const MCP_TABLE: &str = "mcp";

/// Parses the command line again with `file`'s settings in front of the user's own flags.
pub fn reparse(
    command: clap::Command,
    file: &Path,
    entries: &[&dyn DynEntry],
) -> Result<clap::ArgMatches, clap::Error> {
    let mut fail = |why: String| {
        command.clone().error(
            ErrorKind::InvalidValue,
            format!("{}: {why}", file.display()),
        )
    };
    let text = std::fs::read_to_string(file).map_err(|e| fail(format!("cannot read it: {e}")))?;
    let flags = to_flags(&text, entries).map_err(&mut fail)?;
    let mut argv: Vec<OsString> = std::env::args_os().collect();
    let serve_at = argv
        .iter()
        .position(|a| a == "serve")
        .ok_or_else(|| fail("--config belongs to `serve`".into()))?;
    argv.splice(
        serve_at + 1..serve_at + 1,
        flags.into_iter().map(OsString::from),
    );
    command.try_get_matches_from(argv)
}

/// The flags a config file stands for, after checking every table and key against the flags that exist.
pub fn to_flags(text: &str, entries: &[&dyn DynEntry]) -> Result<Vec<String>, String> {
    let table: Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
    let mut flags = Vec::new();
    let mounted: Vec<String> = match table.get("bridges") {
        None => Vec::new(),
        Some(Value::Array(names)) => names
            .iter()
            .map(|n| {
                n.as_str()
                    .map(str::to_owned)
                    .ok_or("`bridges` must be a list of bridge names")
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(
                "`bridges` must be a list of bridge names, e.g. bridges = [\"bitburner\"]".into(),
            );
        }
    };
    for name in &mounted {
        flags.extend(["--bridge".to_owned(), name.clone()]);
    }
    for (key, value) in &table {
        if key == "bridges" {
            continue;
        }
        let Value::Table(settings) = value else {
            return Err(format!(
                "`{key}` must be a table ([{key}]); top-level keys other than `bridges` are not settings"
            ));
        };
        let known = if key == MCP_TABLE {
            <McpArgs as clap::Args>::augment_args(clap::Command::new(MCP_TABLE))
        } else if let Some(entry) = entries.iter().find(|e| e.name() == key) {
            if !mounted.contains(key) {
                return Err(format!(
                    "[{key}] configures a bridge that `bridges` does not mount"
                ));
            }
            entry.augment(clap::Command::new(entry.name()))
        } else {
            let tables: Vec<&str> = std::iter::once(MCP_TABLE)
                .chain(entries.iter().map(|e| e.name()))
                .collect();
            return Err(format!(
                "unknown table [{key}]; known: {}",
                tables.join(", ")
            ));
        };
        for (name, value) in settings {
            let Some((arg, long)) = find_key(&known, key, name) else {
                let keys: Vec<&str> = known
                    .get_arguments()
                    .filter_map(|a| a.get_long())
                    .map(|long| key_of(key, long))
                    .collect();
                return Err(format!(
                    "unknown key `{name}` in [{key}]; known keys: {}",
                    keys.join(", ")
                ));
            };
            push_value(&mut flags, long, arg, value)
                .map_err(|why| format!("[{key}] {name}: {why}"))?;
        }
    }
    Ok(flags)
}

/// The key documented for flag `--long` in table `[table]`: its name without the table's prefix.
fn key_of<'a>(table: &str, long: &'a str) -> &'a str {
    long.strip_prefix(table)
        .and_then(|rest| rest.strip_prefix('-'))
        .unwrap_or(long)
}

/// The flag key `name` of table `[table]` sets, and its long name: the flag `--<table>-<name>`, the flag
/// `--<name>` itself, or one whose older name is `name` (as on the command line).
fn find_key<'a>(
    known: &'a clap::Command,
    table: &str,
    name: &str,
) -> Option<(&'a clap::Arg, &'a str)> {
    let prefixed = format!("{table}-{name}");
    let args = || {
        known
            .get_arguments()
            .filter_map(|a| Some((a, a.get_long()?)))
    };
    args()
        .find(|(_, long)| *long == prefixed || *long == name)
        .or_else(|| args().find(|(a, _)| a.get_aliases().is_some_and(|old| old.contains(&name))))
}

fn push_value(
    flags: &mut Vec<String>,
    name: &str,
    arg: &clap::Arg,
    value: &Value,
) -> Result<(), String> {
    let switch = matches!(arg.get_action(), clap::ArgAction::SetTrue);
    match value {
        Value::Boolean(on) if switch => {
            if *on {
                flags.push(format!("--{name}"));
            }
        }
        _ if switch => return Err("must be true or false".into()),
        Value::Array(items) => {
            for item in items {
                push_value(flags, name, arg, item)?;
            }
        }
        Value::String(s) => flags.push(format!("--{name}={s}")),
        Value::Integer(n) => flags.push(format!("--{name}={n}")),
        Value::Float(x) => flags.push(format!("--{name}={x}")),
        Value::Boolean(b) => flags.push(format!("--{name}={b}")),
        _ => return Err("must be a string, a number, true/false or a list of those".into()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bridge_core::bridge::Entry;

    const ENTRIES: &[&dyn DynEntry] = &[
        &Entry::<bridge_bitburner::Bitburner>::new(),
        &Entry::<bridge_computercraft::ComputerCraft>::new(),
    ];

    #[test]
    fn a_file_becomes_the_flags_it_names() {
        let flags = to_flags(
            r#"
            bridges = ["bitburner", "computercraft"]
            [mcp]
            http = true
            stdio = false
            mcp-port = 0
            tool-timeout = ["bitburner/read_file=2000", "run_lua=9000"]
            [bitburner]
            game-port = 12600
            [computercraft]
            link-host = "127.0.0.1"
            "#,
            ENTRIES,
        )
        .unwrap();
        // Tables come in the file's order or sorted, depending on the toml crate's features.
        let mut flags = flags;
        flags.sort();
        let mut expected = vec![
            "--bridge",
            "bitburner",
            "--bridge",
            "computercraft",
            "--http",
            "--mcp-port=0",
            "--tool-timeout=bitburner/read_file=2000",
            "--tool-timeout=run_lua=9000",
            "--bitburner-game-port=12600",
            "--computercraft-link-host=127.0.0.1",
        ];
        expected.sort();
        assert_eq!(flags, expected);
    }

    #[test]
    fn unknown_tables_keys_and_unmounted_bridges_are_named() {
        let err = |text: &str| to_flags(text, ENTRIES).unwrap_err();
        let e = err("bridges = [\"bitburner\"]\n[bitburner]\ngame-prot = 1");
        assert!(
            e.contains("unknown key `game-prot` in [bitburner]")
                && e.contains(" game-port,")
                && !e.contains("bitburner-game-port"),
            "{e}"
        );
        let e = err("bridges = [\"bitburner\"]\n[minecraft]\nx = 1");
        assert!(e.contains("unknown table [minecraft]"), "{e}");
        let e = err("bridges = [\"bitburner\"]\n[computercraft]\nlink-port = 1");
        assert!(e.contains("does not mount"), "{e}");
        let e = err("bridges = [\"bitburner\"]\n[mcp]\nhttp = \"yes\"");
        assert!(e.contains("[mcp] http: must be true or false"), "{e}");
        let e = err("bridges = \"bitburner\"");
        assert!(e.contains("list of bridge names"), "{e}");
    }

    /// A bridge's key is its flag without the bridge's name in front; the whole flag name and an older one
    /// are read too, and each becomes the flag's current name.
    #[test]
    fn a_key_is_the_flag_without_its_table_s_prefix_and_other_names_still_work() {
        let flags = |text: &str| {
            let mut flags = to_flags(text, ENTRIES).unwrap();
            flags.retain(|f| !f.starts_with("--bridge") && f != "bitburner");
            flags.sort();
            flags
        };
        let want = vec!["--bitburner-game-port=12600".to_owned()];
        for key in ["game-port", "bitburner-game-port"] {
            assert_eq!(
                flags(&format!(
                    "bridges = [\"bitburner\"]\n[bitburner]\n{key} = 12600"
                )),
                want,
                "{key}"
            );
        }
        assert_eq!(
            flags("bridges = [\"bitburner\"]\n[bitburner]\nrpc-timeout-ms = 2500"),
            vec!["--bitburner-rpc-timeout=2500".to_owned()]
        );
        assert_eq!(
            flags("bridges = [\"bitburner\"]\n[mcp]\nport = 0\nmcp-token = \"t\""),
            vec!["--mcp-port=0".to_owned(), "--mcp-token=t".to_owned()],
        );
    }
}
