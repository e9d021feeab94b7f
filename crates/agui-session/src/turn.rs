//! The per-turn translation state: one translator per harness turn, kept across the runs the
//! turn spans (the harness re-delivers earlier steps; the translator remembers what it sent).

use std::collections::BTreeSet;

use agui_translate::{
    StepFailure, StepIds, StructuredOutput, ToolCallIds, TrajectoryChange, Translator,
    TranslatorOptions,
};
use agui_types::Event;
use harness_client::{TrajectoryState, Usage};
use harness_proto::step::Step;
use tokio::time::Instant;

use crate::activity::TurnActivity;
use crate::choices::{StructuredOutputMode, SubagentEvents};
use crate::options::AgentOptions;

/// A turn in flight.
pub(crate) struct Turn {
    translator: Translator,
    activity: TurnActivity,
    /// When the thread asked the harness to halt it (a stop, a stall, a full disk), if it did.
    halted_at: Option<Instant>,
    /// The last failure a step of the turn reported (gives the turn's error its HTTP code).
    last_failure: Option<StepFailure>,
    /// When the harness last sent anything for it.
    last_progress: Instant,
}

/// A translator for a turn of conversation `conversation_id`; `session_tools` are emitted by
/// the session itself, and `tool_call_ids` is the thread's record of used tool call ids, shared
/// with the session's own calls so that no id is given twice on the thread. Ids are derived
/// from steps, so a history rebuilt from the harness gets the ids the client already has.
pub(crate) fn translator(
    options: &AgentOptions,
    session_tools: BTreeSet<String>,
    tool_call_ids: ToolCallIds,
    conversation_id: &str,
) -> Translator {
    let structured = match options.response_schema {
        Some((_, StructuredOutputMode::Custom)) => StructuredOutput::Custom,
        _ => StructuredOutput::StateSnapshot,
    };
    let options = translator_options(options, session_tools).with_structured_output(structured);
    Translator::new(options, Box::new(StepIds::new(conversation_id)))
        .sharing_tool_call_ids(tool_call_ids)
}

/// What the agent's options ask of a translator, with `hidden` tools left to the session.
pub(crate) fn translator_options(
    options: &AgentOptions,
    hidden: BTreeSet<String>,
) -> TranslatorOptions {
    let subagents = match options.subagent_events {
        SubagentEvents::Subagent => agui_translate::SubagentEvents::Subagent,
        SubagentEvents::Steps => agui_translate::SubagentEvents::Steps,
    };
    TranslatorOptions {
        suppressed_tools: hidden,
        ..TranslatorOptions::default()
    }
    .with_builtin_tool_calls(options.emit_builtin_tool_calls)
    .with_subagent_events(subagents)
    .with_activities(options.activities)
}

impl Turn {
    pub(crate) fn new(translator: Translator) -> Self {
        Self {
            translator,
            activity: TurnActivity::default(),
            halted_at: None,
            last_failure: None,
            last_progress: Instant::now(),
        }
    }

    /// When the thread asked the harness to halt the turn, if it did.
    pub(crate) fn halted_at(&self) -> Option<Instant> {
        self.halted_at
    }

    /// Notes that the harness was asked (again) to halt the turn now.
    pub(crate) fn halting(&mut self) {
        self.halted_at = Some(Instant::now());
    }

    /// The last failure a step of the turn reported.
    pub(crate) fn last_failure(&self) -> Option<&StepFailure> {
        self.last_failure.as_ref()
    }

    /// When the harness last sent anything for the turn.
    pub(crate) fn last_progress(&self) -> Instant {
        self.last_progress
    }

    /// Notes that the harness sent something for the turn now.
    pub(crate) fn progressed(&mut self) {
        self.last_progress = Instant::now();
    }

    /// What the harness is doing in this turn.
    pub(crate) fn activity(&self) -> &TurnActivity {
        &self.activity
    }

    /// The harness called back now for the host call `harness_id` of `trajectory`.
    pub(crate) fn called_back(&mut self, harness_id: &str, trajectory: &str) {
        self.activity
            .called_back(harness_id, trajectory, tokio::time::Instant::now());
    }

    /// Events for a step snapshot, and failures it reports (the last is kept).
    pub(crate) fn step(&mut self, step: &Step) -> (Vec<Event>, Vec<StepFailure>) {
        self.activity.step(step);
        let translation = self.translator.step(step);
        if let Some(last) = translation.failures.last() {
            self.last_failure = Some(last.clone());
        }
        (translation.events, translation.failures)
    }

    /// Notes a usage update (it completes model replies).
    pub(crate) fn usage(&mut self, usage: &Usage) {
        self.activity.usage(usage);
    }

    /// Events for a trajectory change (subagent brackets).
    pub(crate) fn trajectory(&mut self, state: &TrajectoryState) -> Vec<Event> {
        self.activity.trajectory(state);
        let change = TrajectoryChange {
            trajectory_id: state.trajectory_id.clone(),
            parent_trajectory_id: state.parent_trajectory_id.clone(),
            status: state.status,
            error: state.error.clone(),
        };
        self.translator.trajectory(&change).events
    }

    /// Makes room for a session-emitted tool call in `trajectory`: events to send first, and
    /// the open reply to attach the call to.
    pub(crate) fn external_tool_call(&mut self, trajectory: &str) -> (Vec<Event>, Option<String>) {
        self.translator.external_tool_call(trajectory)
    }

    /// Closes every open block before a run's terminal event; `interrupts` are the run's
    /// interrupts with the trajectory that raised each (a subagent closed as suspended names
    /// its own).
    pub(crate) fn close_run(&mut self, interrupts: &[(String, String)]) -> Vec<Event> {
        self.translator.close_run_with_interrupts(interrupts)
    }

    /// Closes everything at the end of the turn.
    pub(crate) fn close_turn(&mut self) -> Vec<Event> {
        self.translator.close_turn()
    }

    /// The `subagentRunId` of the events and interrupts of `trajectory`, if it is a subagent.
    pub(crate) fn attribution(&self, trajectory: &str) -> Option<String> {
        self.translator.attribution(trajectory).map(str::to_owned)
    }
}
