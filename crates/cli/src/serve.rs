//! `mcp-bridges serve`: several bridges mounted side by side in one MCP server.

use bridge_core::bridge::DynEntry;
use bridge_core::mount::NAMING_RULE;
use bridge_core::serve::{McpArgs, Transport, run_until_signal};
use bridge_core::{BridgeError, Mount};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// A bridge to mount (repeat for each). Its own flags (shown below, per bridge) apply.
    #[arg(long = "bridge", value_name = "NAME")]
    pub bridges: Vec<String>,

    /// Read the bridges and their settings from this TOML file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub mcp: McpArgs,
}

/// Adds every bridge's own flags to the `serve` command and limits `--bridge` to their names; `commands`
/// (the names of commands that are not MCP servers) are refused with a word on what they are.
pub fn augment(
    serve: clap::Command,
    entries: &[&dyn DynEntry],
    commands: &'static [&'static str],
) -> clap::Command {
    let names: Vec<&'static str> = entries.iter().map(|e| e.name()).collect();
    let serve = serve
        .after_long_help(format!(
            "Tool names: {NAMING_RULE}\n\n/health shows each bridge's part under `bridges.<name>`; every /metrics \
             series has a `bridge` label.\n\nConfig file (TOML): `bridges = [\"bitburner\", \"computercraft\"]`, a \
             `[mcp]` table and one table per bridge, whose keys are the long flag names without `--` and without \
             the table's name in front (`[mcp]` `port = 3000` is --mcp-port, `[bitburner]` `game-port = 12525` is \
             --bitburner-game-port). Flags on the command line win over the file; \
             environment variables fill in what neither sets."
        ))
        .mut_arg("bridges", |arg| {
            arg.value_parser(BridgeName {
                bridges: names,
                commands,
            })
        })
        // A value given twice (in the config file, then on the command line) takes the last one.
        .args_override_self(true);
    // Each bridge's flags come with its struct's doc comment as `about`: keep `serve`'s own.
    let about = serve.get_about().cloned();
    let long_about = serve.get_long_about().cloned();
    let serve = entries.iter().fold(serve, |cmd, entry| entry.augment(cmd));
    let serve = match about {
        Some(about) => serve.about(about),
        None => serve.about(None::<&str>),
    };
    match long_about {
        Some(long_about) => serve.long_about(long_about),
        None => serve.long_about(None::<&str>),
    }
}

/// `--bridge`'s parser: a bridge's name. The name of a command that is not an MCP server (`minecraft-relay`)
/// gets its own refusal, since "invalid value" alone suggests a typo.
#[derive(Clone)]
struct BridgeName {
    bridges: Vec<&'static str>,
    commands: &'static [&'static str],
}

impl clap::builder::TypedValueParser for BridgeName {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        let known = clap::builder::PossibleValuesParser::new(self.bridges.clone());
        match known.parse_ref(cmd, arg, value) {
            Ok(name) => Ok(name),
            Err(_) if self.commands.iter().any(|c| value == *c) => {
                let name = value.to_string_lossy();
                Err(clap::Error::raw(
                    clap::error::ErrorKind::InvalidValue,
                    format!(
                        "--bridge {name}: `{name}` is a command of its own, not a bridge: it serves no MCP \
                         tools, so `serve` cannot mount it. Run `mcp-bridges {name}` beside the server. \
                         Bridges: {}\n",
                        self.bridges.join(", ")
                    ),
                )
                .with_cmd(cmd))
            }
            Err(e) => Err(e),
        }
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            self.bridges
                .iter()
                .map(|b| clap::builder::PossibleValue::new(*b)),
        ))
    }
}

pub async fn run(
    args: ServeArgs,
    entries: &[&dyn DynEntry],
    matches: Option<&clap::ArgMatches>,
) -> Result<(), BridgeError> {
    let Some(matches) = matches else {
        return Err("serve: no parsed flags".into());
    };
    if args.bridges.is_empty() {
        return Err(
            "name the bridges to mount: --bridge NAME (repeatable), or `bridges = [...]` in --config FILE".into(),
        );
    }
    let mut chosen: Vec<&dyn DynEntry> = Vec::new();
    for name in &args.bridges {
        let Some(entry) = entries.iter().find(|e| e.name() == name) else {
            return Err(format!("no bridge named `{name}`").into());
        };
        if chosen.iter().any(|c| c.name() == name) {
            return Err(format!("bridge `{name}` is named twice; mount each bridge once").into());
        }
        chosen.push(*entry);
    }
    run_until_signal(&args.mcp, Transport::Stdio, |env| async move {
        let mut bridges = Vec::with_capacity(chosen.len());
        for entry in chosen {
            let bridge = entry
                .start(matches, &env)
                .await
                .map_err(|e| format!("bridge {}: {e}", entry.name()))?;
            bridges.push(bridge);
        }
        Ok(Mount::new(bridges)?)
    })
    .await
}
