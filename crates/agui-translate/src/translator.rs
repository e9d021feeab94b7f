//! The per-turn translator: dispatches each step snapshot and trajectory change to the parts
//! that own text, reasoning, tool calls and subagent brackets.

use std::collections::HashMap;

use agui_types::Event;
use harness_proto::step::{
    Step, StepAction, StepKey, StepSource, StepStatus, StepTarget, ToolAction, ToolKind,
};
use serde_json::{Map, Value};

use crate::activities::Activities;
use crate::ids::{IdSource, ToolCallIds, UuidIds};
use crate::invocations::{Ending, Invocations, Origin};
use crate::out::{Out, fresh_part};
use crate::reasoning::Reasoning;
use crate::subagents::Subagents;
use crate::text::TextLanes;
use crate::tools::{ToolCalls, result_content};
use crate::{
    STRUCTURED_OUTPUT_EVENT, StepFailure, StructuredOutput, SubagentEvents, TrajectoryChange,
    TrajectoryStatus, Translation, TranslatorOptions,
};

/// The tool name an invocation is shown under ([`SubagentEvents::Subagent`]).
const INVOKE_SUBAGENT: &str = "invoke_subagent";

/// Translates the steps of one harness turn into AG-UI events.
///
/// Create one per turn and keep it across the runs of that turn (a turn that parks spans
/// several runs, and the harness re-delivers earlier steps on later runs). Feed it every step
/// snapshot ([`step`](Self::step)) and trajectory change ([`trajectory`](Self::trajectory)) in
/// harness order, and call [`close_run`](Self::close_run) before each run's terminal event.
/// It never fails and never panics: odd input is translated as far as it makes sense, and
/// failures of the turn are reported as data ([`StepFailure`]).
pub struct Translator {
    options: TranslatorOptions,
    out: Out,
    steps: HashMap<StepKey, StepState>,
    text: TextLanes,
    reasoning: Reasoning,
    tools: ToolCalls,
    subagents: Subagents,
    invocations: Invocations,
    activities: Activities,
    /// Subagents whose `RUNNING` came while several invocations of their parent could have
    /// started them, in arrival order: each is placed when one of those invocations turns final
    /// (the harness marks an invocation final right after starting its subagent), or by the
    /// usual rule once it shows output, goes idle or the run closes.
    unplaced: Vec<TrajectoryChange>,
}

impl std::fmt::Debug for Translator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Translator")
            .field("options", &self.options)
            .field("steps", &self.steps.len())
            .finish_non_exhaustive()
    }
}

impl Default for Translator {
    /// Default options and random (UUIDv4) ids.
    fn default() -> Self {
        Self::new(TranslatorOptions::default(), Box::new(UuidIds))
    }
}

/// What the translator remembers about one step for the rest of the turn.
#[derive(Debug, Default)]
struct StepState {
    /// DONE or ERROR was seen: every later snapshot is a re-delivery.
    finished: bool,
    /// Assistant text already emitted for the step.
    text: String,
    /// Reasoning already emitted for the step.
    thinking: String,
    /// The invocation bracket was opened.
    invoked: bool,
    /// The structured output was emitted.
    structured: bool,
}

impl Translator {
    /// A translator for a new turn.
    pub fn new(options: TranslatorOptions, ids: Box<dyn IdSource>) -> Self {
        Self {
            options,
            out: Out::new(ids),
            steps: HashMap::new(),
            text: TextLanes::default(),
            reasoning: Reasoning::default(),
            tools: ToolCalls::default(),
            subagents: Subagents::default(),
            invocations: Invocations::default(),
            activities: Activities::default(),
            unplaced: Vec::new(),
        }
    }

    /// This translator with `ids` as its record of used tool call ids, so that it never gives
    /// a call an id already used in `ids`' scope, and records the ids it gives there (see
    /// [`ToolCallIds`]). By default a translator keeps its own record for its turn.
    #[must_use]
    pub fn sharing_tool_call_ids(mut self, ids: ToolCallIds) -> Self {
        self.tools.share_ids(ids);
        self
    }

    /// The options this translator was created with.
    pub fn options(&self) -> &TranslatorOptions {
        &self.options
    }

    /// Translates one step snapshot (root or subagent).
    pub fn step(&mut self, step: &Step) -> Translation {
        // USER steps echo the prompt; an unknown state may be a cancellation we cannot read.
        if step.source == StepSource::User || step.status == StepStatus::Unknown {
            return Translation::default();
        }
        // The step's memory is taken out for the call and put back at the end: one lookup, and
        // no copy of the key, for every snapshot after the first.
        let (key, mut state) = self
            .steps
            .remove_entry(&step.key)
            .unwrap_or_else(|| (step.key.clone(), StepState::default()));
        let translation = if state.finished {
            Translation::default()
        } else {
            self.snapshot(step, &mut state)
        };
        self.steps.insert(key, state);
        translation
    }

    /// Translates a snapshot of a step not finished yet; `state` is the step's memory.
    fn snapshot(&mut self, step: &Step, state: &mut StepState) -> Translation {
        let mut failures = Vec::new();
        let key = &step.key;
        let trajectory = key.trajectory_id.as_str();
        if let Some(parent) = step.parent_trajectory_id.as_deref() {
            self.subagent_output(trajectory, parent);
        }
        let closed_chain = match self.options.subagent_events {
            SubagentEvents::Steps => self.subagents.closed_chain(trajectory),
            SubagentEvents::Subagent => Vec::new(),
        };

        self.content(step, state);
        match &step.action {
            Some(StepAction::Tool(tool)) => self.tool(step, tool),
            Some(StepAction::InvokeSubagent) => self.invoke(step, state),
            Some(StepAction::Finish { output }) => self.structured_output(step, state, output),
            Some(StepAction::Compaction) | None => {}
        }
        if step.status == StepStatus::Error
            && !matches!(
                step.action,
                Some(StepAction::Tool(_) | StepAction::InvokeSubagent)
            )
        {
            failures.push(StepFailure {
                step: key.clone(),
                message: step.error.as_ref().map_or_else(
                    || "the harness reported a failure".to_owned(),
                    |e| e.message.clone(),
                ),
                http_code: step.error.as_ref().map_or(0, |e| e.http_code),
                source: step.source,
            });
        }
        if step.is_final() {
            self.reasoning.close_step(key, &mut self.out);
            self.text.close_step(key, &mut self.out);
            // A subagent's reply is what its parent receives when it goes idle.
            self.invocations.reply(trajectory, &state.text);
            state.finished = true;
            // Only the flag is needed from now on; the text can be long.
            state.text = String::new();
            state.thinking = String::new();
        }

        let mut events = self.out.take();
        if !events.is_empty() {
            // The step's output belongs inside its subagent's bracket (and its ancestors'), or
            // after the announcement of its invocation (and its ancestors').
            let mut opening = Vec::new();
            for index in closed_chain {
                self.subagents.show(index, &mut opening);
            }
            self.announce(trajectory, &mut opening);
            if !opening.is_empty() {
                opening.append(&mut events);
                events = opening;
            }
        }
        Translation { events, failures }
    }

    /// A step of a subagent trajectory: makes sure it is known and, with subagent events, that
    /// it has an invocation in progress (a subagent producing output after it went idle was
    /// woken again without a `RUNNING` we saw).
    fn subagent_output(&mut self, trajectory: &str, parent: &str) {
        let in_progress = self.subagents.is_subagent(trajectory)
            && (self.options.subagent_events == SubagentEvents::Steps
                || self.invocations.active(trajectory));
        if !in_progress {
            if self.unplaced.iter().any(|c| c.trajectory_id == trajectory) {
                self.place_unplaced(|c| c.trajectory_id == trajectory);
            } else {
                self.subagent_running(trajectory, parent);
            }
        }
    }

    /// A subagent trajectory reported running (placed): joins its bracket, announced at once
    /// when the invocation's tool call is known (else with its first output, once the
    /// invocation step has been seen).
    fn child_running(&mut self, trajectory: &str, parent: &str) {
        self.subagent_running(trajectory, parent);
        if self
            .subagents
            .bracket_of(trajectory)
            .is_some_and(|index| self.subagents.invoke_key(index).is_some())
        {
            let mut announced = Vec::new();
            self.announce(trajectory, &mut announced);
            self.out.events.extend(announced);
        }
    }

    /// Places the unplaced subagents `which` selects by the usual rule, in arrival order.
    fn place_unplaced(&mut self, which: impl Fn(&TrajectoryChange) -> bool) {
        let (chosen, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.unplaced)
            .into_iter()
            .partition(|c| which(c));
        self.unplaced = rest;
        for change in chosen {
            if let Some(parent) = change.parent_trajectory_id.as_deref() {
                self.child_running(&change.trajectory_id, parent);
            }
        }
    }

    /// The invocation `key` turned final: the oldest unplaced subagent of its invoker is the
    /// one it started (when it has none yet); the others are placed as soon as that leaves
    /// them a single candidate.
    fn invocation_final(&mut self, key: &StepKey) {
        let invoker = key.trajectory_id.as_str();
        let of_invoker = |c: &TrajectoryChange| c.parent_trajectory_id.as_deref() == Some(invoker);
        let Some(position) = self.unplaced.iter().position(of_invoker) else {
            return;
        };
        if !self
            .subagents
            .place(&self.unplaced[position].trajectory_id, key)
        {
            return;
        }
        let change = self.unplaced.remove(position);
        self.child_running(&change.trajectory_id, invoker);
        let subagents = &self.subagents;
        let settled: Vec<String> = self
            .unplaced
            .iter()
            .filter(|c| of_invoker(c) && !subagents.placement_ambiguous(&c.trajectory_id, invoker))
            .map(|c| c.trajectory_id.clone())
            .collect();
        self.place_unplaced(|c| settled.contains(&c.trajectory_id));
    }

    /// A subagent trajectory runs: joins an invocation bracket and, with subagent events,
    /// starts its invocation (its events carry the invocation's id from now on).
    fn subagent_running(&mut self, trajectory: &str, parent: &str) {
        self.subagents.running(trajectory, parent);
        if self.options.subagent_events == SubagentEvents::Subagent
            && self.subagents.is_subagent(trajectory)
            && let Some(run) = self.invocations.begin(trajectory)
        {
            // What the lane opened before (when its steps did not say it was a subagent)
            // keeps its attribution and must not contain the invocation's output.
            self.close_lane(trajectory);
            self.out.attribute(trajectory, Some(run));
        }
    }

    /// `SUBAGENT_STARTED` for the invocation of `trajectory` and of the subagents it runs in,
    /// outermost first, for those not announced in this run yet (subagent events only).
    fn announce(&mut self, trajectory: &str, out: &mut Vec<Event>) {
        if self.options.subagent_events != SubagentEvents::Subagent {
            return;
        }
        let mut chain = Vec::new();
        let mut current = Some(trajectory.to_owned());
        while let Some(t) = current {
            if !self.invocations.needs_announcing(&t) || chain.contains(&t) {
                break;
            }
            current = self
                .subagents
                .bracket_of(&t)
                .map(|index| self.subagents.invoker(index).to_owned());
            chain.push(t);
        }
        for t in chain.into_iter().rev() {
            let origin = match self.subagents.bracket_of(&t) {
                Some(index) => {
                    let (tool_call, message) = self.subagents.call(index).unzip();
                    let invoker = self.subagents.invoker(index);
                    // Only a running parent is surely announced in this run (the chain above
                    // announces it); one that already finished is not named.
                    let parent_run = self
                        .invocations
                        .active(invoker)
                        .then(|| self.invocations.run_id(invoker).map(str::to_owned))
                        .flatten();
                    Origin {
                        parent_run,
                        tool_call,
                        message: message.flatten(),
                        label: self.subagents.label(index).to_owned(),
                    }
                }
                None => Origin::default(),
            };
            self.invocations.announce(&t, origin, out);
        }
    }

    /// Translates a trajectory state change: subagents starting and going idle.
    ///
    /// The root trajectory's changes produce nothing: the end of the turn (and of the run) is
    /// the caller's decision, followed by [`close_run`](Self::close_run).
    pub fn trajectory(&mut self, change: &TrajectoryChange) -> Translation {
        let trajectory = change.trajectory_id.as_str();
        match change.status {
            TrajectoryStatus::Running
            | TrajectoryStatus::WaitingForTasks
            | TrajectoryStatus::WaitingForSubagents => {
                if let Some(parent) = change.parent_trajectory_id.as_deref() {
                    if self.subagents.placement_ambiguous(trajectory, parent) {
                        if !self.unplaced.iter().any(|c| c.trajectory_id == trajectory) {
                            self.unplaced.push(change.clone());
                        }
                    } else {
                        self.unplaced.retain(|c| c.trajectory_id != trajectory);
                        self.child_running(trajectory, parent);
                    }
                }
            }
            TrajectoryStatus::Idle | TrajectoryStatus::Cancelled => {
                self.place_unplaced(|c| c.trajectory_id == trajectory);
                if self.subagents.is_subagent(trajectory) {
                    self.close_lane(trajectory);
                    if self.options.subagent_events == SubagentEvents::Subagent {
                        let mut ending = Vec::new();
                        self.announce(trajectory, &mut ending);
                        let end = match (change.status, change.error.as_deref()) {
                            (TrajectoryStatus::Cancelled, _) => Ending::Cancelled,
                            (_, Some(error)) => Ending::Failed(error),
                            _ => Ending::Idle,
                        };
                        self.invocations.end(trajectory, end, &mut ending);
                        self.out.events.extend(ending);
                    }
                    if let Some(index) = self.subagents.ended(trajectory) {
                        self.complete(index);
                    }
                }
            }
            TrajectoryStatus::Unknown => {}
        }
        Translation {
            events: self.out.take(),
            failures: Vec::new(),
        }
    }

    /// Makes room for a tool call the caller emits itself (a suppressed frontend or server
    /// tool) in `trajectory_id`: returns the events to send first (the lane's reasoning closed,
    /// its subagent bracket re-opened if a run boundary closed it) and the lane's open text
    /// message, to use as the call's `parentMessageId` so the call sits in the reply like the
    /// calls the translator emits.
    pub fn external_tool_call(&mut self, trajectory_id: &str) -> (Vec<Event>, Option<String>) {
        let mut events = Vec::new();
        if self.options.subagent_events == SubagentEvents::Steps {
            for index in self.subagents.closed_chain(trajectory_id) {
                self.subagents.show(index, &mut events);
            }
        }
        self.announce(trajectory_id, &mut events);
        self.reasoning.close_lane(trajectory_id, &mut self.out);
        events.append(&mut self.out.take());
        let parent = self.text.open_id(trajectory_id).map(str::to_owned);
        (events, parent)
    }

    /// Closes everything open before the run's terminal event: the reasoning span, text
    /// messages, tool calls (`TOOL_CALL_END`; their results follow in a later run of the turn)
    /// and subagent brackets (re-opened if their subagents produce more output later).
    pub fn close_run(&mut self) -> Vec<Event> {
        self.close_run_with_interrupts(&[])
    }

    /// [`close_run`](Self::close_run) for a run that ends on interrupts: `interrupts` are
    /// their ids with the trajectory that raised each, so that a subagent invocation closed as
    /// suspended names the interrupts raised inside it.
    pub fn close_run_with_interrupts(&mut self, interrupts: &[(String, String)]) -> Vec<Event> {
        self.place_unplaced(|_| true);
        self.reasoning.close(&mut self.out);
        self.text.close_all(&mut self.out);
        self.tools.flush_all(&mut self.out);
        match self.options.subagent_events {
            SubagentEvents::Steps => self.subagents.close_all(&mut self.out.events),
            SubagentEvents::Subagent => self
                .invocations
                .suspend_all(interrupts, &mut self.out.events),
        }
        self.out.take()
    }

    /// Closes everything at the end of the turn: commands the harness left running are
    /// reported stopped, invocations get their results, then as [`close_run`](Self::close_run).
    pub fn close_turn(&mut self) -> Vec<Event> {
        self.place_unplaced(|_| true);
        self.activities.stop_all(&mut self.out);
        if self.options.subagent_events == SubagentEvents::Subagent {
            let invocations: Vec<usize> = self.subagents.invocations().collect();
            for index in invocations {
                self.invocation_result(index);
            }
        }
        let mut events = self.out.take();
        events.extend(self.close_run());
        events
    }

    /// The `subagentRunId` the events of `trajectory` carry (subagent events only), for
    /// events about it the caller emits itself (its frontend and server tool calls, its
    /// interrupts).
    pub fn attribution(&self, trajectory_id: &str) -> Option<&str> {
        self.out.attribution(trajectory_id)
    }

    /// Reasoning and assistant text of a step.
    fn content(&mut self, step: &Step, state: &mut StepState) {
        // Only the model speaks; a step blocked on the user or failed carries no answer.
        if step.source != StepSource::Model
            || !matches!(step.status, StepStatus::Active | StepStatus::Done)
        {
            return;
        }
        let key = &step.key;
        let thinking = fresh_part(&mut state.thinking, &step.thinking, &step.thinking_delta);
        // A tool step's text is the model's summary label, addressed to the environment.
        let is_answer = step.action.is_none()
            && step.request.is_none()
            && matches!(step.target, StepTarget::User | StepTarget::Unknown);
        let text = if is_answer {
            fresh_part(&mut state.text, &step.text, &step.text_delta)
        } else {
            ""
        };
        if !thinking.is_empty() {
            // Text after this reasoning must not land in a message that precedes it.
            self.text.close_lane(&key.trajectory_id, &mut self.out);
            self.reasoning.append(key, thinking, &mut self.out);
        }
        if !text.is_empty() {
            self.reasoning.close_lane(&key.trajectory_id, &mut self.out);
            self.text.append(key, text, &mut self.out);
        }
    }

    /// A built-in, custom or MCP tool call, and its activity.
    fn tool(&mut self, step: &Step, tool: &ToolAction) {
        let suppressed = self.options.suppressed_tools.contains(&tool.name);
        let hidden =
            suppressed || (tool.kind == ToolKind::Builtin && !self.options.emit_builtin_tool_calls);
        let key = &step.key;
        if !hidden && !self.tools.contains(key) {
            self.reasoning.close_lane(&key.trajectory_id, &mut self.out);
            // The call stays inside the assistant message being streamed: closing it first
            // would split the reply around the call.
            let parent = self.text.open_id(&key.trajectory_id).map(str::to_owned);
            let harness_id = match &tool.kind {
                ToolKind::Custom { call_id } => Some(call_id.as_str()),
                _ => None,
            };
            self.tools.start(
                key,
                &tool.name,
                harness_id,
                parent,
                &tool.arguments,
                &mut self.out,
            );
        }
        if self.options.activities && !suppressed {
            let call = self.tools.id_of(key).map(str::to_owned);
            self.activities
                .tool(step, tool, call.as_deref(), &mut self.out);
        }
        if !hidden && step.is_final() {
            let content = result_content(tool, step.status, step.error.as_ref());
            self.tools.finish(key, content, &mut self.out);
        }
    }

    /// An `invoke_subagent` step: opens the bracket (or, with subagent events, starts the
    /// invocation's tool call), and lets it complete once final.
    fn invoke(&mut self, step: &Step, state: &mut StepState) {
        let key = &step.key;
        if !state.invoked {
            state.invoked = true;
            match self.options.subagent_events {
                SubagentEvents::Steps => {
                    self.close_blocks(&key.trajectory_id);
                    self.subagents.invoke(key, &step.text, &mut self.out.events);
                }
                SubagentEvents::Subagent => self.invocation_call(key, &step.text),
            }
        }
        if step.is_final() {
            self.invocation_final(key);
            self.tools.end(key, &mut self.out);
            if let Some(index) = self.subagents.invoke_finished(key) {
                self.complete(index);
            }
        }
    }

    /// The tool call of an invocation seen for the first time (its arguments are unknown: the
    /// harness reports none), then the announcement of subagents that ran before it was seen.
    fn invocation_call(&mut self, key: &StepKey, label: &str) {
        let Some(index) = self.subagents.register(key, label) else {
            return;
        };
        let hidden = self.options.suppressed_tools.contains(INVOKE_SUBAGENT)
            || !self.options.emit_builtin_tool_calls;
        if !hidden {
            self.reasoning.close_lane(&key.trajectory_id, &mut self.out);
            let parent = self.text.open_id(&key.trajectory_id).map(str::to_owned);
            self.tools.start(
                key,
                INVOKE_SUBAGENT,
                None,
                parent.clone(),
                &Map::new(),
                &mut self.out,
            );
            if let Some(id) = self.tools.id_of(key) {
                self.subagents.set_call(index, id.to_owned(), parent);
            }
        }
        let members = self.subagents.members(index).to_vec();
        let mut announced = Vec::new();
        for member in &members {
            self.announce(member, &mut announced);
        }
        self.out.events.extend(announced);
    }

    /// A bracket is complete (its invocation final, its subagents idle): closes it, or with
    /// subagent events delivers the invocation's result — the replies its subagents gave.
    fn complete(&mut self, index: usize) {
        match self.options.subagent_events {
            SubagentEvents::Steps => {
                if self.subagents.is_shown(index) {
                    self.close_bracket(index);
                }
            }
            SubagentEvents::Subagent => {
                // Without subagents yet, a late `RUNNING` may still join it: the result waits
                // for it, or for the end of the turn.
                if !self.subagents.members(index).is_empty() {
                    self.invocation_result(index);
                }
            }
        }
    }

    /// The `TOOL_CALL_RESULT` of an invocation (once): its subagents' replies.
    fn invocation_result(&mut self, index: usize) {
        let Some(key) = self.subagents.invoke_key(index).cloned() else {
            return;
        };
        let members = self.subagents.members(index);
        let replies = self.invocations.replies(members);
        let content = if members.is_empty() {
            // A resumed conversation's history has no subagent steps.
            "The subagent was started; its work is not in this record.".to_owned()
        } else if replies.is_empty() {
            "The subagent finished without a reply.".to_owned()
        } else {
            replies.join("\n\n")
        };
        self.tools.finish(&key, content, &mut self.out);
    }

    /// The root agent's `finish` output, once, as state or a custom event.
    fn structured_output(&mut self, step: &Step, state: &mut StepState, output: &str) {
        // A subagent's output is its reply to the parent, not the turn's result.
        if step.parent_trajectory_id.is_some()
            || !matches!(step.status, StepStatus::Active | StepStatus::Done)
        {
            return;
        }
        if state.structured {
            return;
        }
        let Ok(value) = serde_json::from_str::<Value>(output.trim()) else {
            return;
        };
        // Before DONE only a self-delimiting document is surely complete ("12" may become "123").
        if step.status != StepStatus::Done && !(value.is_object() || value.is_array()) {
            return;
        }
        state.structured = true;
        self.close_blocks(&step.key.trajectory_id);
        let event = match self.options.structured_output {
            StructuredOutput::StateSnapshot => Event::state_snapshot(match value {
                Value::Object(_) => value,
                other => Value::Object(Map::from_iter([("structured_output".to_owned(), other)])),
            }),
            StructuredOutput::Custom => Event::custom(STRUCTURED_OUTPUT_EVENT, value),
        };
        self.out.push(event);
    }

    /// Closes a lane's reasoning and text (not its tool calls).
    fn close_blocks(&mut self, trajectory_id: &str) {
        self.reasoning.close_lane(trajectory_id, &mut self.out);
        self.text.close_lane(trajectory_id, &mut self.out);
    }

    /// Closes everything a trajectory has open, tool calls included.
    fn close_lane(&mut self, trajectory_id: &str) {
        self.close_blocks(trajectory_id);
        self.tools.flush_lane(trajectory_id, &mut self.out);
    }

    /// Closes a bracket after everything its subagents have open.
    fn close_bracket(&mut self, index: usize) {
        let members = self.subagents.members(index).to_vec();
        for member in &members {
            self.close_lane(member);
        }
        self.subagents.finish(index, &mut self.out.events);
    }
}

#[cfg(test)]
mod tests {
    use super::Translator;

    #[test]
    fn a_translator_can_move_between_threads() {
        // The session keeps a parked turn's translator across runs served by other tasks.
        fn assert_send<T: Send>() {}
        assert_send::<Translator>();
    }
}
