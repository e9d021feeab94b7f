//! The closed choices among agent settings, apart from the settings themselves so that their
//! defaults (`defaults`) and the settings (`options`) each depend on them alone.

use std::time::Duration;

use harness_proto::lh::AgentBehavior;
use serde::Deserialize;

/// How structured output (the `finish` tool's JSON, when a response schema is set) reaches the
/// client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum StructuredOutputMode {
    /// As a `STATE_SNAPSHOT`.
    State,
    /// As a `CUSTOM` event named `antigravity.structured_output`.
    Custom,
}

/// How subagents are shown to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum SubagentEvents {
    /// AG-UI subagent events: `SUBAGENT_STARTED` … `SUBAGENT_FINISHED`/`SUBAGENT_ERROR` per
    /// subagent, its events carrying its `subagentRunId`.
    Subagent,
    /// `STEP_STARTED`/`STEP_FINISHED` brackets named `subagent:<label>`, the shape before
    /// AG-UI 1.0's subagent events (for frontends written against it).
    Steps,
}

/// The `reason` of the interrupts the agent itself raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum InterruptReasons {
    /// `antigravity:ask_question` and `antigravity:tool_approval`: custom reasons namespaced
    /// `framework:name`, as the AG-UI interrupts guide asks.
    Namespaced,
    /// `ask_question` and `tool_approval`, as the Python reference integration sends them (for
    /// frontends written against it).
    Reference,
}

impl InterruptReasons {
    /// The reason of a question interrupt.
    pub fn question(self) -> &'static str {
        match self {
            Self::Namespaced => crate::interrupts::REASON_QUESTION,
            Self::Reference => "ask_question",
        }
    }

    /// The reason of a tool-approval interrupt.
    pub fn approval(self) -> &'static str {
        match self {
            Self::Namespaced => crate::interrupts::REASON_APPROVAL,
            Self::Reference => "tool_approval",
        }
    }
}

/// How the agent works with the user: the harness's agent behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum Behavior {
    /// Works on its own; the model is told the user will not answer questions.
    Autonomous,
    /// May stop to ask the user (`ask_question`).
    Interactive,
    /// The harness's minimal behaviour (`AGENT_BEHAVIOR_MINIMAL`).
    Minimal,
}

impl Behavior {
    /// The harness's name for it; kept out of the public API so regenerated protocol types
    /// break nothing above this crate.
    pub(crate) fn to_harness(self) -> AgentBehavior {
        match self {
            Self::Autonomous => AgentBehavior::Autonomous,
            Self::Interactive => AgentBehavior::Interactive,
            Self::Minimal => AgentBehavior::Minimal,
        }
    }
}

/// What a run's client leaving (closing the connection) does to the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum OnDisconnect {
    /// Nothing: the turn goes on; a later run or connect picks it up.
    Detach,
    /// The last client leaving stops the turn (behind a proxy whose "stop" only aborts its
    /// request, such as CopilotKit's runtime).
    Cancel,
}

/// What a second run on a thread does while another run on it is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConcurrentRuns {
    /// Wait for the running one to end (it ends at the turn's end or when it parks), at most
    /// this long, then fail with `THREAD_BUSY`.
    Wait(Duration),
    /// Fail at once with `THREAD_BUSY`.
    Refuse,
}
