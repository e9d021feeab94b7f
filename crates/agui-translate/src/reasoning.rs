//! Reasoning spans: at most one open at a time, owned by one step.

use agui_types::Event;
use harness_proto::step::StepKey;

use crate::ids::IdKind;
use crate::out::Out;

/// The open reasoning span, if any.
///
/// A span is `REASONING_START` + `REASONING_MESSAGE_START` sharing one fresh id, its content
/// deltas, then `REASONING_MESSAGE_END` + `REASONING_END`. Spans never nest or overlap: thinking
/// from another step closes the open span before opening its own. The official client aborts
/// the run on reasoning content outside a span, which is why every path that ends a step, a
/// lane or a run closes it.
#[derive(Debug, Default)]
pub(crate) struct Reasoning {
    open: Option<(StepKey, String)>,
}

impl Reasoning {
    /// Streams `delta` into the span of `key`'s step, opening one if needed.
    pub(crate) fn append(&mut self, key: &StepKey, delta: &str, out: &mut Out) {
        if delta.is_empty() {
            return;
        }
        if self.open.as_ref().is_some_and(|(k, _)| k != key) {
            self.close(out);
        }
        let id = match &self.open {
            Some((_, id)) => id.clone(),
            None => {
                let id = out.id(IdKind::Reasoning, key);
                out.push(Event::reasoning_start(id.clone()));
                out.push(Event::reasoning_message_start(id.clone()));
                self.open = Some((key.clone(), id.clone()));
                id
            }
        };
        out.push(Event::reasoning_message_content(id, delta));
    }

    /// Closes the open span.
    pub(crate) fn close(&mut self, out: &mut Out) {
        if let Some((_, id)) = self.open.take() {
            out.push(Event::reasoning_message_end(id.clone()));
            out.push(Event::reasoning_end(id));
        }
    }

    /// Closes the open span if it belongs to `key`'s step.
    pub(crate) fn close_step(&mut self, key: &StepKey, out: &mut Out) {
        if self.open.as_ref().is_some_and(|(k, _)| k == key) {
            self.close(out);
        }
    }

    /// Closes the open span if it belongs to a step of the trajectory.
    pub(crate) fn close_lane(&mut self, trajectory_id: &str, out: &mut Out) {
        if self
            .open
            .as_ref()
            .is_some_and(|(k, _)| k.trajectory_id == trajectory_id)
        {
            self.close(out);
        }
    }
}
