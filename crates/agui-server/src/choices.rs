//! The enum-like configuration values: each is one type for clap and serde alike, so a value
//! `check-config` accepts is one `serve` accepts.

use std::collections::BTreeSet;

use harness_client::BuiltinTool;
use serde::Deserialize;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// What `system_instructions` does to Antigravity's own system prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum SystemInstructionsMode {
    /// Added after it (keeps its tool and workspace guidance).
    Append,
    /// Used instead of it.
    Replace,
}

/// How an agent's harness processes are confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// An owner's threads share confined processes, confined to the owner's directories (its
    /// workspaces and harness state); different owners never share a process. Where the machine
    /// cannot confine, the tools that need it are withheld.
    Owner,
    /// Every thread has confined processes of its own (`strict` is accepted as a name for it).
    #[serde(alias = "strict")]
    #[value(alias = "strict")]
    Thread,
    /// Shared, unconfined processes: commands run with the server's user and see what it sees.
    Off,
}

/// Gemini's thinking levels (how much the model reasons before answering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum ThinkingLevel {
    /// As little as the model allows.
    Minimal,
    /// Little.
    Low,
    /// Some.
    Medium,
    /// Much.
    High,
}

/// One entry of `builtin_tools`: a harness tool by its model-facing name (its internal name is
/// accepted too), `all` or `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinToolChoice {
    /// Every built-in tool.
    All,
    /// No tool (a list of only `none` disables them all).
    Nothing,
    /// This tool.
    Tool(BuiltinTool),
}

const TOOL_CHOICES: usize = BuiltinTool::ALL.len() + 2;

/// Every [`BuiltinToolChoice`], for clap's list of possible values.
static BUILTIN_TOOL_CHOICES: [BuiltinToolChoice; TOOL_CHOICES] = {
    let mut choices = [BuiltinToolChoice::All; TOOL_CHOICES];
    choices[1] = BuiltinToolChoice::Nothing;
    let mut i = 0;
    while i < BuiltinTool::ALL.len() {
        choices[i + 2] = BuiltinToolChoice::Tool(BuiltinTool::ALL[i]);
        i += 1;
    }
    choices
};

impl clap::ValueEnum for BuiltinToolChoice {
    fn value_variants<'a>() -> &'a [Self] {
        &BUILTIN_TOOL_CHOICES
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use clap::builder::PossibleValue;
        Some(match self {
            Self::All => PossibleValue::new("all"),
            Self::Nothing => PossibleValue::new("none"),
            Self::Tool(tool) => {
                let value = PossibleValue::new(tool.model_name());
                let value = if tool.name() == tool.model_name() {
                    value
                } else {
                    value.alias(tool.name())
                };
                // The harness's deprecated name of the subagent tool.
                if *tool == BuiltinTool::Subagents {
                    value.alias("start_subagent")
                } else {
                    value
                }
            }
        })
    }
}

impl BuiltinToolChoice {
    /// Parses a name; blanks around it are ignored, and a blank entry (`a,,b`, a trailing
    /// comma) names nothing.
    fn parse(name: &str) -> Option<Self> {
        match name.trim() {
            "" => Some(Self::Nothing),
            name => <Self as clap::ValueEnum>::from_str(name, false).ok(),
        }
    }
}

impl<'de> Deserialize<'de> for BuiltinToolChoice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Self::parse(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown variant `{name}`, expected one of {}",
                choice_names::<Self>()
            ))
        })
    }
}

/// Clap's parser of [`BuiltinToolChoice`]: [`BuiltinToolChoice::parse`], with clap's error and
/// list of possible values.
#[derive(Clone, Copy)]
pub(crate) struct BuiltinToolParser;

impl clap::builder::TypedValueParser for BuiltinToolParser {
    type Value = BuiltinToolChoice;

    fn parse_ref(
        &self,
        command: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        match value.to_str().and_then(BuiltinToolChoice::parse) {
            Some(choice) => Ok(choice),
            // Clap's own enum parser words the error (value, key, possible values).
            None => clap::builder::EnumValueParser::<BuiltinToolChoice>::new()
                .parse_ref(command, arg, value),
        }
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            BUILTIN_TOOL_CHOICES
                .iter()
                .filter_map(clap::ValueEnum::to_possible_value),
        ))
    }
}

/// The configuration spelling of `value`.
pub(crate) fn choice_name<T: clap::ValueEnum>(value: &T) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

/// The names of every value of `T`, backquoted and comma-separated, for error messages.
fn choice_names<T: clap::ValueEnum>() -> String {
    T::value_variants()
        .iter()
        .filter_map(|v| v.to_possible_value())
        .map(|v| format!("`{}`", v.get_name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The set of tools `choices` names: `all` adds every tool, `none` none.
pub(crate) fn builtin_tools(choices: &[BuiltinToolChoice]) -> BTreeSet<BuiltinTool> {
    let mut tools = BTreeSet::new();
    for choice in choices {
        match choice {
            BuiltinToolChoice::All => tools.extend(BuiltinTool::ALL),
            BuiltinToolChoice::Nothing => {}
            BuiltinToolChoice::Tool(tool) => {
                tools.insert(*tool);
            }
        }
    }
    tools
}
