//! Ordering rules of an AG-UI event stream.
//!
//! [`StreamVerifier`] implements the checks of `@ag-ui/client`'s `verifyEvents` (run framing,
//! start/end pairing of text messages, tool calls, reasoning messages and spans, steps and
//! subagents, `subagentRunId` ownership) on the raw stream, expanding `*_CHUNK` events the way
//! the client's `transformChunks` does. It is stricter than the client in three places, each
//! a protocol rule the client merely does not notice: nothing but a new `RUN_STARTED` may
//! follow a terminal event (the client lets `RUN_ERROR` follow `RUN_FINISHED`),
//! `RUN_FINISHED` must name the run `RUN_STARTED` opened, and [`StreamVerifier::finish`]
//! reports a stream that ends inside a run.
//!
//! It does no I/O and allocates only per id (open entities and their owners), so it can check
//! every event a server sends.

mod blocks;
mod chunks;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::events::Event;
use crate::input::Message;
pub use crate::violation::{Rule, Violation};
use chunks::Lanes;

/// A failed check before it is tied to an event index.
type Check = Result<(), (Rule, String)>;

/// Who owns an entity: `None` is the parent agent, `Some(id)` a subagent invocation.
type Owner = Option<String>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    NotStarted,
    Active,
    Finished,
    Errored,
}

/// Owners per entity kind (ids are unique only within a kind); kept for the whole run so that
/// continuations after a close are still checked.
#[derive(Debug, Default)]
struct Owners {
    message: HashMap<String, Owner>,
    tool_call: HashMap<String, Owner>,
    activity: HashMap<String, Owner>,
    reasoning: HashMap<String, Owner>,
}

/// Everything tracked for the current run; reset by each `RUN_STARTED`.
#[derive(Debug, Default)]
struct RunState {
    ids: Option<(String, String)>,
    text: BTreeSet<String>,
    tools: BTreeSet<String>,
    spans: BTreeSet<String>,
    reasoning: BTreeSet<String>,
    steps: BTreeMap<Owner, BTreeSet<String>>,
    subagents: BTreeSet<String>,
    closed_subagents: HashSet<String>,
    owners: Owners,
    lanes: Lanes,
}

/// Checks an event stream against the AG-UI ordering rules, one event at a time.
///
/// ```
/// use agui_types::{Event, StreamVerifier};
///
/// let mut verifier = StreamVerifier::new();
/// verifier.check(&Event::run_started("t1", "r1")).unwrap();
/// verifier.check(&Event::text_message_start("m1")).unwrap();
/// let err = verifier.check(&Event::run_finished("t1", "r1")).unwrap_err();
/// assert!(err.message.contains("m1"));
/// ```
///
/// After a violation the verifier keeps going on a best-effort basis (the offending event is
/// mostly not applied), so later findings may be consequences of the first.
#[derive(Debug)]
pub struct StreamVerifier {
    next_index: usize,
    phase: Phase,
    run: RunState,
}

impl Default for StreamVerifier {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamVerifier {
    /// A verifier expecting the first event of a stream.
    pub fn new() -> Self {
        Self {
            next_index: 0,
            phase: Phase::NotStarted,
            run: RunState::default(),
        }
    }

    /// Checks every event and then [`finish`](Self::finish); returns the first violation.
    pub fn verify_all<'a>(events: impl IntoIterator<Item = &'a Event>) -> Result<(), Violation> {
        let mut verifier = Self::new();
        for event in events {
            verifier.check(event)?;
        }
        verifier.finish()
    }

    /// True between a `RUN_STARTED` and its terminal event.
    pub fn run_active(&self) -> bool {
        self.phase == Phase::Active
    }

    /// Number of events checked so far.
    pub fn events_seen(&self) -> usize {
        self.next_index
    }

    /// Checks the next event of the stream.
    pub fn check(&mut self, event: &Event) -> Result<(), Violation> {
        let index = self.next_index;
        self.next_index += 1;
        self.check_event(event)
            .map_err(|(rule, message)| Violation {
                index: Some(index),
                event_type: Some(event.event_type()),
                rule,
                message,
            })
    }

    /// Ends the stream: reports an empty stream, or one that stopped inside a run (naming
    /// whatever is still open).
    pub fn finish(&self) -> Result<(), Violation> {
        let violation = |rule, message| {
            Err(Violation {
                index: None,
                event_type: None,
                rule,
                message,
            })
        };
        if self.next_index == 0 {
            return violation(Rule::EmptyStream, "the stream carried no events".to_owned());
        }
        if self.phase == Phase::Active {
            let mut message = "the stream ended without RUN_FINISHED or RUN_ERROR".to_owned();
            let open = self.open_blocks();
            if !open.is_empty() {
                message.push_str(&format!("; still open: {}", open.join("; ")));
            }
            return violation(Rule::MissingTerminal, message);
        }
        Ok(())
    }

    fn check_event(&mut self, event: &Event) -> Check {
        let is_run_started = matches!(event, Event::RunStarted(_));
        match self.phase {
            Phase::Finished | Phase::Errored if !is_run_started => {
                let last = if self.phase == Phase::Finished {
                    "RUN_FINISHED"
                } else {
                    "RUN_ERROR"
                };
                return Err((
                    Rule::AfterTerminal,
                    format!("the run already ended with {last}; only a new RUN_STARTED may follow"),
                ));
            }
            Phase::NotStarted if !is_run_started && !matches!(event, Event::RunError(_)) => {
                return Err((
                    Rule::FirstEvent,
                    "the first event must be RUN_STARTED".to_owned(),
                ));
            }
            Phase::Active if is_run_started => {
                return Err((
                    Rule::RunAlreadyActive,
                    "a run is still active; end it with RUN_FINISHED or RUN_ERROR first".to_owned(),
                ));
            }
            _ => {}
        }
        self.close_lanes_before(event)?;
        self.apply(event)
    }

    fn apply(&mut self, event: &Event) -> Check {
        let tag = event.subagent_run_id();
        match event {
            Event::RunStarted(e) => {
                self.run = RunState::default();
                self.run.ids = Some((e.thread_id.clone(), e.run_id.clone()));
                self.phase = Phase::Active;
                if let Some(input) = &e.input {
                    self.seed_owners(&input.messages, false);
                }
                Ok(())
            }
            Event::RunFinished(e) => {
                if let Some((thread_id, run_id)) = &self.run.ids
                    && (thread_id, run_id) != (&e.thread_id, &e.run_id)
                {
                    return Err((
                        Rule::RunIdMismatch,
                        format!(
                            "finishes thread '{}' run '{}' but RUN_STARTED opened thread '{thread_id}' run '{run_id}'",
                            e.thread_id, e.run_id
                        ),
                    ));
                }
                let open = self.open_blocks();
                if !open.is_empty() {
                    return Err((
                        Rule::OpenAtRunFinished,
                        format!(
                            "cannot finish the run while these are open: {}",
                            open.join("; ")
                        ),
                    ));
                }
                self.phase = Phase::Finished;
                Ok(())
            }
            Event::RunError(_) => {
                self.phase = Phase::Errored;
                Ok(())
            }
            Event::MessagesSnapshot(e) => {
                self.seed_owners(&e.messages, true);
                Ok(())
            }
            Event::TextMessageStart(e) => self.text_start(&e.message_id, tag),
            Event::TextMessageContent(e) => self.text_continue(&e.message_id, tag, false),
            Event::TextMessageEnd(e) => self.text_continue(&e.message_id, tag, true),
            Event::ToolCallStart(e) => {
                self.tool_start(&e.tool_call_id, tag, e.parent_message_id.as_deref())
            }
            Event::ToolCallArgs(e) => self.tool_continue(&e.tool_call_id, tag, false),
            Event::ToolCallEnd(e) => self.tool_continue(&e.tool_call_id, tag, true),
            Event::ToolCallResult(e) => {
                // Minting the tool message records its owner; the newest mint wins.
                self.run
                    .owners
                    .message
                    .insert(e.message_id.clone(), tag.map(str::to_owned));
                Ok(())
            }
            Event::ReasoningStart(e) => self.reasoning_open(true, &e.message_id, tag),
            Event::ReasoningMessageStart(e) => self.reasoning_open(false, &e.message_id, tag),
            Event::ReasoningMessageContent(e) => {
                self.reasoning_continue(false, &e.message_id, tag, false)
            }
            Event::ReasoningMessageEnd(e) => {
                self.reasoning_continue(false, &e.message_id, tag, true)
            }
            Event::ReasoningEnd(e) => self.reasoning_continue(true, &e.message_id, tag, true),
            Event::ReasoningEncryptedValue(e) => self.encrypted_value(e),
            Event::StepStarted(e) => self.step_started(&e.step_name, tag),
            Event::StepFinished(e) => self.step_finished(&e.step_name, tag),
            Event::SubagentStarted(e) => self.subagent_started(e),
            Event::SubagentFinished(e) => self.subagent_ended(&e.subagent_run_id),
            Event::SubagentError(e) => self.subagent_ended(&e.subagent_run_id),
            Event::ActivitySnapshot(e) => {
                let known = self.run.owners.activity.contains_key(&e.message_id);
                // Only a replacing snapshot re-mints (and so re-owns) an existing activity.
                if !known || e.replace != Some(false) {
                    self.run
                        .owners
                        .activity
                        .insert(e.message_id.clone(), tag.map(str::to_owned));
                }
                Ok(())
            }
            Event::ActivityDelta(e) => {
                let owner = self.run.owners.activity.get(&e.message_id);
                owner_check(tag, owner, "activity", &e.message_id)
            }
            Event::TextMessageChunk(e) => self.text_chunk(e),
            Event::ToolCallChunk(e) => self.tool_chunk(e),
            Event::ReasoningMessageChunk(e) => self.reasoning_chunk(e),
            Event::StateSnapshot(_) | Event::StateDelta(_) | Event::Raw(_) | Event::Custom(_) => {
                Ok(())
            }
        }
    }

    /// Records the owners of replayed history. A snapshot restates the conversation and
    /// overrides; the `RUN_STARTED` input only fills ids nothing claimed yet.
    fn seed_owners(&mut self, messages: &[Message], authoritative: bool) {
        let owners = &mut self.run.owners;
        for message in messages {
            let owner: Owner = message.subagent_run_id().map(str::to_owned);
            let bucket = match message {
                Message::Reasoning(_) => &mut owners.reasoning,
                Message::Activity(_) => &mut owners.activity,
                _ => &mut owners.message,
            };
            if authoritative || !bucket.contains_key(message.id()) {
                bucket.insert(message.id().to_owned(), owner.clone());
            }
            if let Message::Assistant(assistant) = message {
                for call in &assistant.tool_calls {
                    if authoritative || !owners.tool_call.contains_key(&call.id) {
                        owners.tool_call.insert(call.id.clone(), owner.clone());
                    }
                }
            }
        }
    }

    /// Human-readable list of everything open in the current run.
    fn open_blocks(&self) -> Vec<String> {
        let run = &self.run;
        let mut open = Vec::new();
        let steps: Vec<String> = run
            .steps
            .iter()
            .flat_map(|(owner, names)| {
                names.iter().map(move |name| match owner {
                    Some(subagent) => format!("{name} (subagent '{subagent}')"),
                    None => name.clone(),
                })
            })
            .collect();
        let mut push = |what: &str, ids: Vec<String>| {
            if !ids.is_empty() {
                open.push(format!("{what} {}", quoted(&ids)));
            }
        };
        push("steps", steps);
        push("text messages", run.text.iter().cloned().collect());
        push(
            "reasoning messages",
            run.reasoning.iter().cloned().collect(),
        );
        push("reasoning spans", run.spans.iter().cloned().collect());
        push("tool calls", run.tools.iter().cloned().collect());
        push("subagents", run.subagents.iter().cloned().collect());
        open
    }
}

/// `'a', 'b'`.
fn quoted(ids: &[String]) -> String {
    ids.iter()
        .map(|id| format!("'{id}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The owner an event's `subagentRunId` tag names.
fn owned(tag: Option<&str>) -> Owner {
    tag.map(str::to_owned)
}

/// Names an owner in a message.
fn owner_name(owner: &Owner) -> String {
    match owner {
        Some(id) => format!("subagent '{id}'"),
        None => "the parent agent".to_owned(),
    }
}

/// A tagged continuation must agree with the entity's recorded owner; an absent tag always
/// agrees.
fn owner_check(tag: Option<&str>, owner: Option<&Owner>, kind: &str, id: &str) -> Check {
    match (tag, owner) {
        (Some(tag), Some(owner)) if owner.as_deref() != Some(tag) => Err((
            Rule::Attribution,
            format!(
                "subagentRunId '{tag}' does not match the {kind} '{id}' owned by {}",
                owner_name(owner)
            ),
        )),
        _ => Ok(()),
    }
}
