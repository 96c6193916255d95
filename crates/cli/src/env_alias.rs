//! Older environment variable names, still read: clap reads one variable per flag, so a flag whose new name
//! is unset and whose older name is set is pointed at the older name before parsing.

use clap::{Arg, Command};

/// Applies `(variable, older name)` pairs to every flag of `command` and its subcommands, and says so in
/// their help.
pub fn apply(command: Command, aliases: &[(&'static str, &'static str)]) -> Command {
    let set = |name: &str| std::env::var_os(name).is_some();
    apply_with(command, aliases, &set)
}

fn apply_with(
    command: Command,
    aliases: &[(&'static str, &'static str)],
    set: &dyn Fn(&str) -> bool,
) -> Command {
    command
        .mut_args(|arg| alias(arg, aliases, set))
        .mut_subcommands(|sub| apply_with(sub, aliases, set))
}

fn alias(arg: Arg, aliases: &[(&'static str, &'static str)], set: &dyn Fn(&str) -> bool) -> Arg {
    let Some(env) = arg.get_env().and_then(|e| e.to_str()) else {
        return arg;
    };
    // A variable may have several older names: the first one set is read.
    let mine = || aliases.iter().copied().filter(|(new, _)| *new == env);
    let Some((new, old)) = mine().find(|(_, old)| set(old)).or_else(|| mine().next()) else {
        return arg;
    };
    let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
    // clap drops a one-sentence doc comment's final period; the appended sentence needs it back.
    let stop = if help.is_empty() || help.ends_with('.') {
        ""
    } else {
        "."
    };
    let arg = arg.help(format!(
        "{help}{stop} The older variable {old} is read when {new} is unset."
    ));
    if !set(new) && set(old) {
        bridge_core::config::deprecated_env(old, new);
        arg.env(old)
    } else {
        arg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command() -> Command {
        Command::new("x").subcommand(
            Command::new("sub").arg(Arg::new("t").long("t").env("NEW_T").help("Timeout.")),
        )
    }

    fn env_of(command: &Command) -> Option<String> {
        let sub = command.find_subcommand("sub")?;
        let arg = sub.get_arguments().find(|a| a.get_id() == "t")?;
        arg.get_env().map(|e| e.to_string_lossy().into_owned())
    }

    #[test]
    fn the_older_name_is_read_only_when_the_new_one_is_unset() {
        let aliases = [("NEW_T", "OLD_T")];
        let only_old = apply_with(command(), &aliases, &|n| n == "OLD_T");
        assert_eq!(env_of(&only_old).as_deref(), Some("OLD_T"));
        let both = apply_with(command(), &aliases, &|_| true);
        assert_eq!(env_of(&both).as_deref(), Some("NEW_T"));
        let help = both
            .find_subcommand("sub")
            .unwrap()
            .get_arguments()
            .next()
            .unwrap()
            .get_help();
        assert!(help.unwrap().to_string().contains("OLD_T"));
    }
}
