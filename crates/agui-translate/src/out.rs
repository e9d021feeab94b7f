//! The event buffer every part of the translator writes to, with the id source and the
//! attribution of events to subagent invocations.

use std::collections::HashMap;

use agui_types::Event;
use harness_proto::step::StepKey;

use crate::ids::{IdKind, IdSource};

/// Events produced by the call in progress, and the ids to name them.
///
/// Every message, reasoning span, tool call and activity belongs to the trajectory whose step
/// produced it. An entity takes the attribution its trajectory has when its first event is
/// pushed ([`attribute`](Self::attribute): the trajectory's subagent invocation, if any), and
/// every later event of it carries the same — also when another lane's output is what closes
/// it, or the trajectory was only recognised as a subagent later — so continuations always
/// agree with their start, as the spec requires.
pub(crate) struct Out {
    pub(crate) events: Vec<Event>,
    ids: Box<dyn IdSource>,
    /// Entity id (message, tool call, activity) → the trajectory that produced it.
    owners: HashMap<String, String>,
    /// Trajectory → the `subagentRunId` its new entities carry.
    attribution: HashMap<String, String>,
    /// Entity id → the attribution fixed at its first event.
    tags: HashMap<String, Option<String>>,
}

impl Out {
    pub(crate) fn new(ids: Box<dyn IdSource>) -> Self {
        Self {
            events: Vec::new(),
            ids,
            owners: HashMap::new(),
            attribution: HashMap::new(),
            tags: HashMap::new(),
        }
    }

    /// Pushes `event`, attributed to the invocation of the trajectory owning its entity.
    pub(crate) fn push(&mut self, mut event: Event) {
        if let Some(entity) = entity_of(&event) {
            let tag = match self.tags.get(entity) {
                Some(tag) => tag.clone(),
                None => {
                    let tag = self
                        .owners
                        .get(entity)
                        .and_then(|trajectory| self.attribution.get(trajectory))
                        .cloned();
                    self.tags.insert(entity.to_owned(), tag.clone());
                    tag
                }
            };
            if tag.is_some() {
                event.set_subagent_run_id(tag);
            }
        }
        self.events.push(event);
    }

    /// A fresh id for an entity of `kind` produced by the step `step`, owned by its trajectory.
    pub(crate) fn id(&mut self, kind: IdKind, step: &StepKey) -> String {
        let id = self.ids.next_id(kind, step);
        self.own(&id, &step.trajectory_id);
        id
    }

    /// Records that the entity `id` (e.g. a tool call with a harness id) belongs to
    /// `trajectory`.
    pub(crate) fn own(&mut self, id: &str, trajectory: &str) {
        self.owners.insert(id.to_owned(), trajectory.to_owned());
    }

    /// The events of `trajectory`'s entities carry `run` from now on (`None`: no attribution).
    pub(crate) fn attribute(&mut self, trajectory: &str, run: Option<String>) {
        match run {
            Some(run) => self.attribution.insert(trajectory.to_owned(), run),
            None => self.attribution.remove(trajectory),
        };
    }

    /// The `subagentRunId` of `trajectory`'s events, if it is attributed.
    pub(crate) fn attribution(&self, trajectory: &str) -> Option<&str> {
        self.attribution.get(trajectory).map(String::as_str)
    }

    /// Hands over what was produced so far.
    pub(crate) fn take(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }
}

/// The message, reasoning span, tool call or activity an event belongs to.
fn entity_of(event: &Event) -> Option<&str> {
    Some(match event {
        Event::TextMessageStart(e) => &e.message_id,
        Event::TextMessageContent(e) => &e.message_id,
        Event::TextMessageEnd(e) => &e.message_id,
        Event::ReasoningStart(e) => &e.message_id,
        Event::ReasoningMessageStart(e) => &e.message_id,
        Event::ReasoningMessageContent(e) => &e.message_id,
        Event::ReasoningMessageEnd(e) => &e.message_id,
        Event::ReasoningEnd(e) => &e.message_id,
        Event::ToolCallStart(e) => &e.tool_call_id,
        Event::ToolCallArgs(e) => &e.tool_call_id,
        Event::ToolCallEnd(e) => &e.tool_call_id,
        Event::ToolCallResult(e) => &e.tool_call_id,
        Event::ActivitySnapshot(e) => &e.message_id,
        Event::ActivityDelta(e) => &e.message_id,
        _ => return None,
    })
}

/// What is new in a cumulative `full` text given what was already `emitted` from it.
///
/// The harness sends full snapshots with a delta since the previous snapshot of the step.
/// Preferring the cumulative text makes re-deliveries and stale snapshots (`full` a prefix of
/// what was sent) produce nothing, and a missed snapshot lose nothing. The delta is used only
/// when there is no cumulative text, or when the text was rewritten rather than extended.
pub(crate) fn fresh_part<'a>(emitted: &mut String, full: &'a str, delta: &'a str) -> &'a str {
    if full.is_empty() {
        emitted.push_str(delta);
        return delta;
    }
    if let Some(rest) = full.strip_prefix(emitted.as_str()) {
        emitted.push_str(rest);
        return rest;
    }
    if emitted.starts_with(full) {
        return "";
    }
    emitted.clear();
    emitted.push_str(full);
    delta
}

#[cfg(test)]
mod tests {
    use super::fresh_part;

    #[test]
    fn cumulative_text_wins_over_deltas() {
        let mut sent = String::new();
        assert_eq!(fresh_part(&mut sent, "Hello ", "Hello "), "Hello ");
        assert_eq!(fresh_part(&mut sent, "Hello world", "world"), "world");
        // A re-delivered or stale snapshot adds nothing, whatever its delta says.
        assert_eq!(fresh_part(&mut sent, "Hello world", "world"), "");
        assert_eq!(fresh_part(&mut sent, "Hello ", "Hello "), "");
        // A missed snapshot loses nothing.
        assert_eq!(
            fresh_part(&mut sent, "Hello world, again!", "!"),
            ", again!"
        );
        assert_eq!(sent, "Hello world, again!");
    }

    #[test]
    fn deltas_serve_when_there_is_no_usable_text() {
        let mut sent = String::new();
        assert_eq!(fresh_part(&mut sent, "", "a"), "a");
        assert_eq!(fresh_part(&mut sent, "", "b"), "b");
        assert_eq!(sent, "ab");
        // A rewritten text: only the delta is new, and the rewrite becomes the reference.
        assert_eq!(fresh_part(&mut sent, "xyz", "z"), "z");
        assert_eq!(fresh_part(&mut sent, "xyz!", "!"), "!");
    }
}
