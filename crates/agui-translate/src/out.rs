//! The event buffer every part of the translator writes to, with the id source.

use agui_types::Event;
use harness_proto::step::StepKey;

use crate::ids::{IdKind, IdSource};

/// Events produced by the call in progress, and the ids to name them.
pub(crate) struct Out {
    pub(crate) events: Vec<Event>,
    ids: Box<dyn IdSource>,
}

impl Out {
    pub(crate) fn new(ids: Box<dyn IdSource>) -> Self {
        Self {
            events: Vec::new(),
            ids,
        }
    }

    pub(crate) fn push(&mut self, event: Event) {
        self.events.push(event);
    }

    /// A fresh id for an entity of `kind` produced by the step `step`.
    pub(crate) fn id(&mut self, kind: IdKind, step: &StepKey) -> String {
        self.ids.next_id(kind, step)
    }

    /// Hands over what was produced so far.
    pub(crate) fn take(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }
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
