//! Assistant text messages: one open message per trajectory ("lane"), owned by one step.

use std::collections::BTreeMap;

use agui_types::Event;
use harness_proto::step::StepKey;

use crate::ids::IdKind;
use crate::out::Out;

/// The open text message of each lane.
///
/// Lanes are trajectories: the root agent and each subagent stream independently, so their
/// messages may be open at the same time (AG-UI allows interleaving by id). Within a lane a
/// new step's text closes the previous step's message, and a closed message never reopens:
/// more text for its step starts a message with a fresh id.
#[derive(Debug, Default)]
pub(crate) struct TextLanes {
    open: BTreeMap<String, OpenText>,
}

#[derive(Debug)]
struct OpenText {
    step: u32,
    id: String,
}

impl TextLanes {
    /// Streams `delta` into the message of `key`'s step, opening one if needed.
    pub(crate) fn append(&mut self, key: &StepKey, delta: &str, out: &mut Out) {
        if delta.is_empty() {
            return;
        }
        let id = match self.open.get(&key.trajectory_id) {
            Some(open) if open.step == key.index => open.id.clone(),
            _ => {
                self.close_lane(&key.trajectory_id, out);
                let id = out.id(IdKind::TextMessage, key);
                out.push(Event::text_message_start(id.clone()));
                self.open.insert(
                    key.trajectory_id.clone(),
                    OpenText {
                        step: key.index,
                        id: id.clone(),
                    },
                );
                id
            }
        };
        out.push(Event::text_message_content(id, delta));
    }

    /// The id of the lane's open message: the parent of a tool call made in that lane.
    pub(crate) fn open_id(&self, trajectory_id: &str) -> Option<&str> {
        self.open.get(trajectory_id).map(|o| o.id.as_str())
    }

    /// Closes the message of `key`'s step, if it is the open one.
    pub(crate) fn close_step(&mut self, key: &StepKey, out: &mut Out) {
        if self
            .open
            .get(&key.trajectory_id)
            .is_some_and(|o| o.step == key.index)
        {
            self.close_lane(&key.trajectory_id, out);
        }
    }

    /// Closes the lane's open message.
    pub(crate) fn close_lane(&mut self, trajectory_id: &str, out: &mut Out) {
        if let Some(open) = self.open.remove(trajectory_id) {
            out.push(Event::text_message_end(open.id));
        }
    }

    /// Closes every open message (lanes in id order, so output is deterministic).
    pub(crate) fn close_all(&mut self, out: &mut Out) {
        for (_, open) in std::mem::take(&mut self.open) {
            out.push(Event::text_message_end(open.id));
        }
    }
}
