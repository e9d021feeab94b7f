//! The per-turn translation state: one translator per harness turn, kept across the runs the
//! turn spans (the harness re-delivers earlier steps; the translator remembers what it sent).

use std::collections::BTreeSet;

use agui_translate::{
    StepFailure, StructuredOutput, TrajectoryChange, Translator, TranslatorOptions, UuidIds,
};
use agui_types::Event;
use harness_client::TrajectoryState;
use harness_proto::step::Step;

use crate::options::{AgentOptions, StructuredOutputMode};

/// A turn in flight.
pub(crate) struct Turn {
    translator: Translator,
}

/// A translator for a new turn; `session_tools` are emitted by the session itself.
pub(crate) fn translator(options: &AgentOptions, session_tools: BTreeSet<String>) -> Translator {
    let structured = match options.response_schema {
        Some((_, StructuredOutputMode::Custom)) => StructuredOutput::Custom,
        _ => StructuredOutput::StateSnapshot,
    };
    let options = TranslatorOptions {
        emit_builtin_tool_calls: options.emit_builtin_tool_calls,
        suppressed_tools: session_tools,
        structured_output: structured,
    };
    Translator::new(options, Box::new(UuidIds))
}

impl Turn {
    pub(crate) fn new(translator: Translator) -> Self {
        Self { translator }
    }

    /// Events for a step snapshot, and failures it reports.
    pub(crate) fn step(&mut self, step: &Step) -> (Vec<Event>, Vec<StepFailure>) {
        let translation = self.translator.step(step);
        (translation.events, translation.failures)
    }

    /// Events for a trajectory change (subagent brackets).
    pub(crate) fn trajectory(&mut self, state: &TrajectoryState) -> Vec<Event> {
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
