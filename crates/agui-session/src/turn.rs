//! The per-turn translation state: one translator per harness turn, kept across the runs the
//! turn spans (the harness re-delivers earlier steps; the translator remembers what it sent).

use std::collections::BTreeSet;

use agui_translate::{
    StepFailure, StructuredOutput, ToolCallIds, TrajectoryChange, Translator, TranslatorOptions,
    UuidIds,
};
use agui_types::Event;
use harness_client::{TrajectoryState, Usage};
use harness_proto::step::Step;

use crate::activity::TurnActivity;
use crate::options::{AgentOptions, StructuredOutputMode};

/// A turn in flight.
pub(crate) struct Turn {
    translator: Translator,
    activity: TurnActivity,
}

/// A translator for a new turn; `session_tools` are emitted by the session itself, and
/// `tool_call_ids` is the thread's record of used tool call ids, shared with the session's own
/// calls so that no id is given twice on the thread.
pub(crate) fn translator(
    options: &AgentOptions,
    session_tools: BTreeSet<String>,
    tool_call_ids: ToolCallIds,
) -> Translator {
    let structured = match options.response_schema {
        Some((_, StructuredOutputMode::Custom)) => StructuredOutput::Custom,
        _ => StructuredOutput::StateSnapshot,
    };
    let options = TranslatorOptions {
        emit_builtin_tool_calls: options.emit_builtin_tool_calls,
        suppressed_tools: session_tools,
        structured_output: structured,
    };
    Translator::new(options, Box::new(UuidIds)).sharing_tool_call_ids(tool_call_ids)
}

impl Turn {
    pub(crate) fn new(translator: Translator) -> Self {
        Self {
            translator,
            activity: TurnActivity::default(),
        }
    }

    /// What the harness is doing in this turn.
    pub(crate) fn activity(&self) -> &TurnActivity {
        &self.activity
    }

    /// Events for a step snapshot, and failures it reports.
    pub(crate) fn step(&mut self, step: &Step) -> (Vec<Event>, Vec<StepFailure>) {
        self.activity.step(step);
        let translation = self.translator.step(step);
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
        };
        self.translator.trajectory(&change).events
    }

    /// Makes room for a session-emitted tool call in `trajectory`: events to send first, and
    /// the open reply to attach the call to.
    pub(crate) fn external_tool_call(&mut self, trajectory: &str) -> (Vec<Event>, Option<String>) {
        self.translator.external_tool_call(trajectory)
    }

    /// Closes every open block before a run's terminal event.
    pub(crate) fn close_run(&mut self) -> Vec<Event> {
        self.translator.close_run()
    }
}
