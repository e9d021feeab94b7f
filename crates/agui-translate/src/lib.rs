//! Translation of harness steps into AG-UI events, as a pure state machine scoped to a turn.
//!
//! The harness reports a turn as a stream of step snapshots (each step re-sent as it grows:
//! ACTIVE, ACTIVE, …, DONE) and trajectory state changes. A [`Translator`] turns them into
//! AG-UI events that always form a valid stream for the official client, whatever order,
//! repetition or oddity the harness produces. It does no I/O and never fails.
//!
//! ```
//! use agui_translate::{SequentialIds, Translator, TranslatorOptions};
//! use harness_proto::{lh::StepUpdate, step::Step};
//!
//! let mut translator = Translator::new(TranslatorOptions::default(), Box::new(SequentialIds::new()));
//! let update: StepUpdate = harness_proto::from_json(
//!     r#"{"trajectoryId":"t","stepIndex":1,"state":"STATE_ACTIVE","source":"SOURCE_MODEL",
//!         "target":"TARGET_USER","text":"Hi","textDelta":"Hi"}"#,
//! ).unwrap();
//! let events = translator.step(&Step::from(&update)).events;
//! assert_eq!(events.len(), 2); // TEXT_MESSAGE_START, TEXT_MESSAGE_CONTENT
//! assert_eq!(translator.close_run().len(), 1); // TEXT_MESSAGE_END
//! ```
//!
//! # Use
//!
//! One [`Translator`] per harness turn, kept across the runs the turn spans and dropped when
//! the turn ends. Feed it every step snapshot (USER echoes included; they are ignored) and
//! every trajectory change (the root's are ignored: the end of the turn is the caller's call)
//! in harness order, send the events it returns as they come, and call
//! [`Translator::close_run`] right before each run's terminal event (finished, parked or
//! failed). Tools the caller reports itself (frontend and server tools) go in
//! [`TranslatorOptions::suppressed_tools`].
//!
//! # Rules
//!
//! * **Scope.** State lives for the turn, not the run: a turn that parks spans several runs and
//!   the harness re-delivers earlier steps. A step that reached DONE or ERROR produces nothing
//!   ever again; text already sent is never re-sent (the cumulative `text` is compared with what
//!   was emitted, so repeated or stale snapshots add nothing and a missed one loses nothing).
//! * **Who speaks.** USER steps (the prompt echo) are never translated. Assistant text comes
//!   only from MODEL steps addressed to the user (or to an unknown target) that carry no action
//!   and no pending request: a tool step's text is the model's summary label, and SYSTEM
//!   messages (subagent notices, `[Message] …`), compactions and errors are not answers.
//! * **Text.** One message per step and lane (trajectory), streamed as deltas and closed at the
//!   step's DONE. A closed message never reopens; more text for the step gets a fresh id.
//!   Different trajectories may have messages open at the same time.
//! * **Reasoning.** `REASONING_START` + `REASONING_MESSAGE_START` share one fresh id per span;
//!   spans never nest. A span closes before text or a tool call of its lane, at its step's DONE,
//!   when another step starts thinking, and at run close. Thinking closes its lane's text, so
//!   the answer that follows it is a new message after it.
//! * **Tool calls.** A call keeps the lane's open text message as `parentMessageId` (it is not
//!   closed) and closes reasoning first. Arguments are sent once, whole, as one JSON document;
//!   at DONE come `TOOL_CALL_END` and `TOOL_CALL_RESULT` (fresh `messageId`). Built-in results
//!   are the fields the harness filled at DONE (one field: its value; several: an object), and
//!   failures and "no output" are stated in words. Built-in and MCP calls get fresh ids; custom
//!   tools keep the harness call id unless it was already used ([`ToolCallIds`]: per turn,
//!   or per thread when the caller shares its record). A tool step in ERROR is its call's
//!   result, not a failure.
//! * **Subagents** ([`SubagentEvents::Subagent`], the default). An `invoke_subagent` step is a
//!   tool call named `invoke_subagent` (arguments `{}`: the harness reports none), ended when
//!   the step is final; each subagent trajectory it starts is an invocation:
//!   `SUBAGENT_STARTED` (`subagentRunId` = the trajectory id, `name` [`SUBAGENT_NAME`], the
//!   step's label as `description`, the call as `parentToolCallId`, the invoking subagent's
//!   invocation as `parentSubagentRunId`) before any of its events, every event of its
//!   messages, reasoning, tool calls and activities tagged with its `subagentRunId`, and
//!   `SUBAGENT_FINISHED` (its last reply as `result`) or `SUBAGENT_ERROR` when it goes idle.
//!   When all of an invocation's subagents are idle, the call's `TOOL_CALL_RESULT` carries
//!   their replies. A run that ends while a subagent works closes its invocation as
//!   `suspended` (naming the interrupts raised inside it, see
//!   [`Translator::close_run_with_interrupts`]) and announces it again, same id, when it
//!   produces more output; a subagent woken after it finished is a new invocation
//!   (`<trajectory>-2`). Which call started which trajectory is not in the frames: the k-th
//!   new trajectory of a parent belongs to its k-th running invocation.
//! * **Subagents as steps** ([`SubagentEvents::Steps`], the old shape). An `invoke_subagent`
//!   step and the subagent trajectories it starts are bracketed by
//!   `STEP_STARTED`/`STEP_FINISHED` named `subagent:<label>` (`#2`, `#3` for a repeated label),
//!   held open until the invocation is final and its subagents are idle, so their own events
//!   fall inside. A subagent going idle closes whatever it left open. The invocation is not
//!   also shown as a tool call.
//! * **Activities** (unless [`TranslatorOptions::activities`] is off). A file written or edited
//!   (`edit_file`, once done) is an `ACTIVITY_SNAPSHOT` of type [`FILE_CHANGE_ACTIVITY`]:
//!   `{toolCallId?, path, operation: "create"|"edit", diff}` with a unified diff rendered from
//!   the harness's whole-file diff block. A command (`run_command`) is an activity of type
//!   [`COMMAND_ACTIVITY`]: `{toolCallId?, command, cwd?, state: "running", output: ""}` when it
//!   starts, then one `ACTIVITY_DELTA` to `completed` or `failed` with `exitCode` and `output`
//!   (the harness reports output only when the command ends); [`Translator::close_turn`]
//!   marks a command the turn left running `stopped`. `toolCallId` names the call when it is
//!   shown.
//! * **Structured output.** The root agent's `finish` output (JSON) becomes one
//!   `STATE_SNAPSHOT` (non-objects wrapped as `{"structured_output": v}`) or one `CUSTOM`
//!   event named [`STRUCTURED_OUTPUT_EVENT`], as configured.
//! * **Failures.** Other ERROR steps (model API errors, invalid model output) are returned as
//!   [`StepFailure`]s. The harness retries 429s and re-prompts after invalid output, so a failure
//!   is not the end of the turn; the caller decides (usually when the turn ends with an error).
//! * **Run close.** [`Translator::close_run`] ends every open block before the terminal event.
//!   A call ended there delivers only its result in a later run; a bracket or invocation closed
//!   there is re-opened when its subagents produce more output. At the end of the turn,
//!   [`Translator::close_turn`] does the same after finishing what the turn left (running
//!   commands, invocation results).
//!
//! # Differences from the Python reference
//!
//! The reference translator (`ag-ui-antigravity` 0.2.1) has gaps this crate does not copy: a
//! built-in first seen at DONE leaked its result into its arguments and reported "no output"
//! (the typed step keeps request and result apart); a subagent first seen at DONE got no
//! bracket, and two subagents with the same label shared one; SYSTEM, compaction and
//! cancelled steps with text were shown as assistant text; text was taken from deltas alone,
//! so a re-delivered unfinished snapshot could repeat its text. One deliberate difference
//! besides: a step's DONE closes only its own blocks (the reference closed whatever was open),
//! so a reply keeps streaming into its message after a tool call inside it completes.

mod activities;
mod ids;
mod invocations;
mod out;
mod reasoning;
mod subagents;
mod text;
mod tools;
mod translator;

use std::collections::BTreeSet;

use agui_types::Event;
use harness_proto::lh::TrajectoryStateUpdate;
use harness_proto::step::{StepKey, StepSource};

pub use activities::{COMMAND_ACTIVITY, FILE_CHANGE_ACTIVITY};
pub use ids::{IdKind, IdSource, SequentialIds, StepIds, ToolCallIds, UuidIds};
pub use invocations::SUBAGENT_NAME;
pub use translator::Translator;

/// Name of the `CUSTOM` event carrying structured output ([`StructuredOutput::Custom`]).
pub const STRUCTURED_OUTPUT_EVENT: &str = "antigravity.structured_output";

/// How the root agent's structured output (`finish` with JSON) is delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StructuredOutput {
    /// `STATE_SNAPSHOT` with the object (other values wrapped as `{"structured_output": v}`).
    #[default]
    StateSnapshot,
    /// `CUSTOM` named [`STRUCTURED_OUTPUT_EVENT`] with the value as is.
    Custom,
}

/// How subagents are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SubagentEvents {
    /// AG-UI subagent events: `SUBAGENT_STARTED` … `SUBAGENT_FINISHED`/`SUBAGENT_ERROR` per
    /// subagent trajectory, its content events carrying its `subagentRunId`, and the
    /// `invoke_subagent` step as a tool call they name as `parentToolCallId`.
    #[default]
    Subagent,
    /// The shape before AG-UI 1.0's subagents: `STEP_STARTED`/`STEP_FINISHED` named
    /// `subagent:<label>` around an invocation, content events unattributed.
    Steps,
}

/// What a [`Translator`] emits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranslatorOptions {
    /// Show built-in tool calls (files, shell, web…) as tool calls. Subagents are shown
    /// either way.
    pub emit_builtin_tool_calls: bool,
    /// Tool names whose calls produce no events because the caller emits them itself
    /// (frontend and server tools).
    pub suppressed_tools: BTreeSet<String>,
    /// How structured output is delivered.
    pub structured_output: StructuredOutput,
    /// How subagents are shown.
    pub subagent_events: SubagentEvents,
    /// Report file changes and commands as activities (`ACTIVITY_SNAPSHOT`/`ACTIVITY_DELTA`)
    /// next to their tool calls.
    pub activities: bool,
}

impl Default for TranslatorOptions {
    fn default() -> Self {
        Self {
            emit_builtin_tool_calls: true,
            suppressed_tools: BTreeSet::new(),
            structured_output: StructuredOutput::default(),
            subagent_events: SubagentEvents::default(),
            activities: true,
        }
    }
}

impl TranslatorOptions {
    /// These options with `name`'s calls suppressed.
    pub fn suppress(mut self, name: impl Into<String>) -> Self {
        self.suppressed_tools.insert(name.into());
        self
    }

    /// These options with built-in tool calls shown or hidden.
    pub fn with_builtin_tool_calls(mut self, emit: bool) -> Self {
        self.emit_builtin_tool_calls = emit;
        self
    }

    /// These options with structured output delivered as `mode`.
    pub fn with_structured_output(mut self, mode: StructuredOutput) -> Self {
        self.structured_output = mode;
        self
    }

    /// These options with subagents shown as `mode`.
    pub fn with_subagent_events(mut self, mode: SubagentEvents) -> Self {
        self.subagent_events = mode;
        self
    }

    /// These options with activities on or off.
    pub fn with_activities(mut self, on: bool) -> Self {
        self.activities = on;
        self
    }
}

/// The result of feeding one input to a [`Translator`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Translation {
    /// Events to send, in order.
    pub events: Vec<Event>,
    /// Failed steps the caller should know about (at most one per step and turn).
    pub failures: Vec<StepFailure>,
}

/// A step that ended in ERROR and is not a tool call: a model API error (SYSTEM source, with
/// its HTTP status), invalid model output, or another failure the harness reported.
///
/// Not necessarily fatal: the harness retries 429/503 and re-prompts after invalid output.
/// The turn has failed when the root trajectory ends with an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFailure {
    /// The failed step.
    pub step: StepKey,
    /// The failure text.
    pub message: String,
    /// HTTP status of a model API error; 0 otherwise (or a small non-HTTP code).
    pub http_code: u32,
    /// Who produced the step (SYSTEM for model and harness errors).
    pub source: StepSource,
}

/// A trajectory state change, as much of it as the translator needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrajectoryChange {
    /// The trajectory.
    pub trajectory_id: String,
    /// Its parent: set for subagents, `None` for the root agent.
    pub parent_trajectory_id: Option<String>,
    /// The new state.
    pub status: TrajectoryStatus,
    /// Why it stopped, when it failed (a subagent's model error).
    pub error: Option<String>,
}

pub use harness_proto::trajectory::TrajectoryStatus;

impl From<&TrajectoryStateUpdate> for TrajectoryChange {
    fn from(update: &TrajectoryStateUpdate) -> Self {
        Self {
            trajectory_id: update.trajectory_id().to_owned(),
            parent_trajectory_id: update
                .parent_trajectory_id
                .clone()
                .filter(|p| !p.is_empty()),
            status: update.state().into(),
            error: update.error.clone().filter(|e| !e.is_empty()),
        }
    }
}
