//! The command line: `agui-antigravity serve [options]`.

use std::path::PathBuf;

use clap::{FromArgMatches as _, Parser, Subcommand};

use crate::config::{AgentSettings, ServerKeys};
use crate::defaults;

/// Serve Google Antigravity agents over the AG-UI protocol.
#[derive(Debug, Parser)]
#[command(name = "agui-antigravity", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the configured agents (the default).
    Serve(Box<ServeArgs>),
    /// Print the merged configuration and exit.
    CheckConfig(Box<ServeArgs>),
}

/// Options of `serve`. Every agent key is also settable in the TOML file and by environment
/// variable; flags and variables apply to every agent (see the README).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// A TOML configuration file.
    #[arg(long, short, env = "AGUI_CONFIG")]
    pub config: Option<PathBuf>,
    /// Bearer tokens naming their callers, instead of `--auth-token` (`name=token`,
    /// comma-separated): a thread belongs to the name that created it.
    #[arg(long, env = "AGUI_AUTH_TOKENS", value_delimiter = ',', value_parser = crate::config::parse_name_value, hide_env_values = true)]
    pub auth_tokens: Option<Vec<(String, String)>>,
    /// The server-wide keys, as the file has them.
    #[command(flatten)]
    pub server: ServerKeys,
    /// Agent settings (defaults for every agent).
    #[command(flatten)]
    pub agent: AgentSettings,
}

impl Cli {
    /// The command line, with each option's help ending in its default (the README's
    /// configuration table lists the same; the options themselves have none, so that an unset flag lets
    /// the file's value through).
    pub fn command() -> clap::Command {
        let table = defaults::documented();
        let annotate = |command: clap::Command| {
            command.mut_args(|arg| {
                let Some((_, default)) = table
                    .iter()
                    .find(|(key, _)| *key == arg.get_id().as_str())
                    .filter(|(_, default)| default != "none")
                else {
                    return arg;
                };
                let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
                let long = arg.get_long_help().map(ToString::to_string);
                let arg = arg.help(format!("{help} [default: {default}]"));
                match long {
                    Some(long) => arg.long_help(format!("{long}\n\n[default: {default}]")),
                    None => arg,
                }
            })
        };
        <Self as clap::CommandFactory>::command()
            .mut_subcommand("serve", annotate)
            .mut_subcommand("check-config", annotate)
    }

    /// Parses `args` (program name first) with the annotated [`command`](Self::command).
    pub fn try_parse_args(args: Vec<String>) -> Result<Self, clap::Error> {
        let mut matches = Self::command().try_get_matches_from(args)?;
        Self::from_arg_matches_mut(&mut matches)
    }

    /// Parses `args`, treating a command line without a subcommand as `serve`. `--help`,
    /// `--version` and bad input are errors whose `exit()` prints them and ends the process with
    /// clap's status — for a binary's `main` to call; library code never exits.
    pub fn parse_args(args: Vec<String>) -> Result<Self, clap::Error> {
        let mut args = args;
        let first = args.get(1).map(String::as_str);
        let needs_serve = match first {
            None => true,
            Some("-h" | "--help" | "-V" | "--version" | "help") => false,
            Some(flag) => flag.starts_with('-'),
        };
        if needs_serve {
            args.insert(1.min(args.len()), "serve".into());
        }
        Self::try_parse_args(args)
    }
}

/// Variables read for a secret by [`ServeArgs`] (those whose values `--help` hides: the API key,
/// the bearer token, model headers), plus `GOOGLE_API_KEY`, where Google's SDKs look for a key.
/// The binary removes them from its environment once the configuration is read.
pub fn secret_variables() -> Vec<String> {
    let mut names: Vec<String> = secret_args()
        .iter()
        .filter_map(|arg| arg.get_env())
        .map(|name| name.to_string_lossy().into_owned())
        .collect();
    names.push("GOOGLE_API_KEY".into());
    names
}

/// A warning for each secret given as a flag in `args` (a command line, program name first):
/// every local process can read it in `/proc/<pid>/cmdline`.
pub fn secrets_on_command_line(args: &[String]) -> Vec<String> {
    let mut warnings = Vec::new();
    for arg in secret_args() {
        let Some(long) = arg.get_long() else { continue };
        let flag = format!("--{long}");
        let given = args
            .iter()
            .skip(1)
            .any(|a| *a == flag || a.starts_with(&format!("{flag}=")));
        if !given {
            continue;
        }
        let instead = match (arg.get_id().as_str(), arg.get_env()) {
            ("api_key", Some(env)) => format!(
                "use `api_key_file` (`--api-key-file`) or the `{}` variable",
                env.to_string_lossy()
            ),
            (_, Some(env)) => format!(
                "set it in the configuration file or by the `{}` variable",
                env.to_string_lossy()
            ),
            (_, None) => "set it in the configuration file".into(),
        };
        warnings.push(format!(
            "`{flag}` on the command line is readable by every local process (/proc/<pid>/cmdline); {instead}"
        ));
    }
    warnings
}

/// The `serve` options whose values are secrets.
fn secret_args() -> Vec<clap::Arg> {
    let command = Cli::command();
    command
        .find_subcommand("serve")
        .map(|serve| {
            serve
                .get_arguments()
                .filter(|arg| arg.is_hide_env_values_set())
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_secret_variable_is_known() {
        let names = secret_variables();
        for name in [
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "AGUI_AUTH_TOKEN",
            "AGUI_AUTH_TOKENS",
            "AGUI_PROXY_TOKEN",
            "AGUI_METRICS_TOKEN",
            "AGUI_MODEL_HEADERS",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
        }
        assert!(
            !names.iter().any(|n| n == "AGUI_API_KEY_FILE"),
            "a path is no secret"
        );
    }

    #[test]
    fn secrets_given_as_flags_are_warned_about() {
        let args = |a: &[&str]| a.iter().map(ToString::to_string).collect::<Vec<_>>();
        let warnings = secrets_on_command_line(&args(&[
            "agui-antigravity",
            "serve",
            "--api-key",
            "k",
            "--auth-token=token-0123456789ab",
            "--model",
            "m",
        ]));
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        let about = |flag: &str| {
            warnings
                .iter()
                .find(|w| w.contains(&format!("`{flag}`")))
                .unwrap_or_else(|| panic!("a warning about {flag}: {warnings:?}"))
        };
        assert!(about("--api-key").contains("`api_key_file`"));
        assert!(about("--api-key").contains("`GEMINI_API_KEY`"));
        assert!(about("--auth-token").contains("`AGUI_AUTH_TOKEN`"));
        assert!(
            secrets_on_command_line(&args(&["agui-antigravity", "--api-key-file", "/k"]))
                .is_empty()
        );
    }
}
